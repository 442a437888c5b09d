/* SubscribeToShard stream messages: events, exceptions, errors. */
#include "kinesis/subscribe_event.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/json_scan.h"
#include "util/str.h"

/* Exception payloads are a short JSON object; anything longer is shown
 * cut, never parsed. */
#define EXC_PARSE_MAX (64 * 1024)
#define EXC_SHOW_MAX 1024

static int key_is(const char *k, size_t n, const char *want) {
  return n == strlen(want) && memcmp(k, want, n) == 0;
}

static kn_err_t bad_msg(kn_error_t **errp, const char *what, const char *base,
                        const char *at) {
  if (errp)
    *errp = kn_error_new(KN_ERR__BAD_MSG,
                         "SubscribeToShardEvent: %s at byte %ld of the payload",
                         what, at && base ? (long)(at - base) : -1L);
  return KN_ERR__BAD_MSG;
}

/* A non-negative integer without fraction or exponent. */
static int parse_millis(const char *p, const char *end, int64_t *out) {
  int64_t v = 0;
  if (p == end) return -1;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9') return -1;
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return 0;
}

static kn_err_t parse_event(const char *base, size_t n, kn_sub_event_t *ev,
                            kn_error_t **errp) {
  const char *end = base + n, *p = kn_json_ws(base, end);
  if (p >= end || *p != '{') return bad_msg(errp, "not a JSON object", base, p);
  p = kn_json_ws(p + 1, end);
  if (p < end && *p == '}') goto done;
  for (;;) {
    const char *k = p;
    int esc;
    p = kn_json_skip_string(p, end, &esc);
    if (!p) return bad_msg(errp, "bad member name", base, k);
    size_t kl = (size_t)(p - k) - 2;
    k++;
    p = kn_json_ws(p, end);
    if (p >= end || *p != ':') return bad_msg(errp, "':' expected", base, p);
    const char *v = p = kn_json_ws(p + 1, end);
    int is_null = end - v >= 4 && memcmp(v, "null", 4) == 0;
    if (key_is(k, kl, "Records") && !is_null) {
      if (!(p = kn_json_skip_array(v, end, &ev->n_records)))
        return bad_msg(errp, "Records is not a valid array", base, v);
      ev->records = v;
      ev->records_len = (size_t)(p - v);
    } else if (key_is(k, kl, "ChildShards") && !is_null) {
      if (!(p = kn_json_skip_array(v, end, &ev->n_child_shards)))
        return bad_msg(errp, "ChildShards is not a valid array", base, v);
      ev->child_shards = v;
      ev->child_shards_len = (size_t)(p - v);
    } else if (key_is(k, kl, "ContinuationSequenceNumber") && !is_null) {
      if (!(p = kn_json_skip_string(v, end, &esc)) || esc || p - v < 3)
        return bad_msg(errp, "ContinuationSequenceNumber is not a sequence "
                       "number", base, v);
      for (const char *d = v + 1; d < p - 1; d++)
        if (*d < '0' || *d > '9')
          return bad_msg(errp, "ContinuationSequenceNumber is not a "
                         "sequence number", base, v);
      ev->cont_seq = v + 1;
      ev->cont_seq_len = (size_t)(p - v) - 2;
    } else if (key_is(k, kl, "MillisBehindLatest") && !is_null) {
      if (!(p = kn_json_skip_value(v, end)) ||
          parse_millis(v, p, &ev->millis_behind))
        return bad_msg(errp, "MillisBehindLatest is not a non-negative "
                       "integer", base, v);
    } else {
      if (!(p = kn_json_skip_value(v, end)))
        return bad_msg(errp, "invalid JSON value", base, v);
    }
    p = kn_json_ws(p, end);
    if (p < end && *p == '}') break;
    if (p >= end || *p != ',') return bad_msg(errp, "',' or '}' expected", base, p);
    p = kn_json_ws(p + 1, end);
  }
done:
  p = kn_json_ws(p + 1, end);
  if (p != end) return bad_msg(errp, "trailing bytes after the object", base, p);
  ev->shard_end = ev->cont_seq == NULL;
  return KN_ERR_NO_ERROR;
}

/* The "message" (or "Message") of an exception payload, or the payload
 * itself cut to EXC_SHOW_MAX bytes.  NULL on out-of-memory. */
static char *exception_text(const kn_evs_msg_t *msg) {
  const char *raw = (const char *)msg->payload;
  size_t n = msg->payload_len;
  if (n && n <= EXC_PARSE_MAX) {
    json_t *j = json_loadb(raw, n, 0, NULL);
    const char *s = NULL;
    if (json_is_object(j)) {
      s = json_string_value(json_object_get(j, "message"));
      if (!s) s = json_string_value(json_object_get(j, "Message"));
    }
    char *out = s ? strdup(s) : NULL;
    json_decref(j);
    if (s) return out;
  }
  return kn_strndup(raw, n > EXC_SHOW_MAX ? EXC_SHOW_MAX : n);
}

static kn_err_t remote(kn_error_t **errp, int status, const char *type,
                       size_t type_len, const char *text) {
  char *t = type ? kn_strndup(type, type_len) : NULL;
  kn_error_t *e = NULL;
  kn_err_t code = KN_ERR__NOMEM;
  if (!type || t) {
    e = kn_error_remote(status, t, text, NULL);
    code = e ? kn_error_code(e) : KN_ERR__NOMEM;
    if (!e && errp)
      *errp = kn_error_new(KN_ERR__NOMEM, "out of memory for a stream error");
  }
  free(t);
  if (errp && e) *errp = e;
  else kn_error_destroy(e);
  return code;
}

kn_err_t kn_sub_event_classify(const kn_evs_msg_t *msg, int http_status,
                               kn_sub_kind_t *kind, kn_error_t **errp) {
  if (errp) *errp = NULL;
  size_t tl = 0;
  const char *type;
  if (kn_evs_msg_str_eq(msg, ":message-type", "event")) {
    type = kn_evs_msg_str(msg, ":event-type", &tl);
    if (!type) {
      if (errp)
        *errp = kn_error_new(KN_ERR__BAD_MSG,
                             "SubscribeToShard: event without :event-type");
      return KN_ERR__BAD_MSG;
    }
    *kind = key_is(type, tl, "SubscribeToShardEvent") ? KN_SUB_EVENT
            : key_is(type, tl, "initial-response")    ? KN_SUB_INITIAL_RESPONSE
                                                      : KN_SUB_OTHER_EVENT;
    return KN_ERR_NO_ERROR;
  }
  if (kn_evs_msg_str_eq(msg, ":message-type", "exception")) {
    type = kn_evs_msg_str(msg, ":exception-type", &tl);
    char *text = exception_text(msg);
    if (!text) {
      if (errp)
        *errp = kn_error_new(KN_ERR__NOMEM, "out of memory for a stream error");
      return KN_ERR__NOMEM;
    }
    kn_err_t code = remote(errp, http_status, type, tl, text);
    free(text);
    return code;
  }
  if (kn_evs_msg_str_eq(msg, ":message-type", "error")) {
    size_t ml = 0;
    const char *m = kn_evs_msg_str(msg, ":error-message", &ml);
    char *text = m ? kn_strndup(m, ml > EXC_SHOW_MAX ? EXC_SHOW_MAX : ml) : NULL;
    if (m && !text) {
      if (errp)
        *errp = kn_error_new(KN_ERR__NOMEM, "out of memory for a stream error");
      return KN_ERR__NOMEM;
    }
    type = kn_evs_msg_str(msg, ":error-code", &tl);
    kn_err_t code = remote(errp, http_status, type, tl, text);
    free(text);
    return code;
  }
  size_t ml = 0;
  const char *mt = kn_evs_msg_str(msg, ":message-type", &ml);
  if (errp)
    *errp = mt ? kn_error_new(KN_ERR__BAD_MSG,
                              "SubscribeToShard: unknown :message-type \"%.*s\"",
                              ml > 64 ? 64 : (int)ml, mt)
               : kn_error_new(KN_ERR__BAD_MSG,
                              "SubscribeToShard: message without a string "
                              ":message-type");
  return KN_ERR__BAD_MSG;
}

kn_err_t kn_sub_event_parse(const kn_evs_msg_t *msg, int http_status,
                            kn_sub_event_t *ev, kn_error_t **errp) {
  memset(ev, 0, sizeof(*ev));
  ev->millis_behind = -1;
  ev->payload = (const char *)msg->payload;
  ev->payload_len = msg->payload_len;
  kn_err_t err = kn_sub_event_classify(msg, http_status, &ev->kind, errp);
  if (err || ev->kind != KN_SUB_EVENT) return err;
  return parse_event(ev->payload, ev->payload_len, ev, errp);
}
