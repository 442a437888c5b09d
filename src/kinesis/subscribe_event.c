/* SubscribeToShard stream messages: events, exceptions, errors. */
#include "kinesis/subscribe_event.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/str.h"

/* Exception payloads are a short JSON object; anything longer is shown
 * cut, never parsed. */
#define EXC_PARSE_MAX (64 * 1024)
#define EXC_SHOW_MAX 1024

static int key_is(const char *k, size_t n, const char *want) {
  return n == strlen(want) && memcmp(k, want, n) == 0;
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
  if (errp && e)
    *errp = e;
  else
    kn_error_destroy(e);
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
    char *text =
        m ? kn_strndup(m, ml > EXC_SHOW_MAX ? EXC_SHOW_MAX : ml) : NULL;
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
    *errp =
        mt ? kn_error_new(KN_ERR__BAD_MSG,
                          "SubscribeToShard: unknown :message-type \"%.*s\"",
                          ml > 64 ? 64 : (int)ml, mt)
           : kn_error_new(KN_ERR__BAD_MSG,
                          "SubscribeToShard: message without a string "
                          ":message-type");
  return KN_ERR__BAD_MSG;
}
