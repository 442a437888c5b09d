#include "kinesis/decode_records.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/seqnum.h"
#include "kinesis/shard.h"
#include "kinesis/jscan.h"
#include "util/base64.h"

/* ---- Records ---- */

enum { HAVE_DATA = 1, HAVE_SEQ = 4 };

static int parse_record(kn_jscan_t *js, kn_batch_t *b) {
  const char *start = js->p;
  if (kn_js_obj_open(js)) return -1;
  kn_record_t *r = kn_batch_push(b);
  if (!r) {
    js->nomem = 1;
    return -1;
  }
  unsigned have = 0;
  int first = 1, rc, isnull;
  char *k, *s;
  size_t kn, n;
  while ((rc = kn_js_obj_next(js, &first, &k, &kn)) > 0) {
    if (KN_JS_KEY_IS(k, kn, "Data")) {
      if (*js->p != '"') KN_JS_FAIL(js, "Data is not a string");
      /* One pass over most of the string: its bulk is decoded while its
       * end is still unknown, then the rest is found and decoded after. */
      char *d = js->p + 1;
      size_t done = kn_base64_decode_prefix(d, (size_t)(js->end - d));
      if (kn_js_str_rest(js, d + done, &s, &n)) return -1;
      long m = kn_base64_decode(d + done / 4 * 3, s, n);
      if (m < 0) return kn_js_fail(js, d, "Data is not valid base64");
      r->data = d;
      r->len = done / 4 * 3 + (size_t)m;
      have |= HAVE_DATA;
    } else if (KN_JS_KEY_IS(k, kn, "PartitionKey")) {
      /* null or absent: a record written without a key to a stream whose
       * service picks the shard. */
      if (kn_js_null(js, &isnull)) {
        if (isnull) return -1;
      } else if (kn_js_cstr(js, &s, &n)) {
        return -1;
      } else {
        r->pkey = s;
      }
    } else if (KN_JS_KEY_IS(k, kn, "SequenceNumber")) {
      const char *at = js->p;
      if (kn_js_cstr(js, &s, &n)) return -1;
      if (!kn_seqnum_valid(s, n))
        return kn_js_fail(js, at, "SequenceNumber is not a decimal number");
      r->seq = s;
      have |= HAVE_SEQ;
    } else if (KN_JS_KEY_IS(k, kn, "ApproximateArrivalTimestamp")) {
      if (kn_js_null(js, &isnull)) {
        if (isnull) return -1;
      } else if (kn_js_i64(js, 3, &r->arrival_ms)) {
        return -1;
      }
    } else if (kn_js_skip(js)) {
      return -1;
    }
  }
  js->depth--;
  if (rc < 0) return -1;
  if (have != (HAVE_DATA | HAVE_SEQ))
    return kn_js_fail(js, start,
                      !(have & HAVE_DATA) ? "record without Data"
                                          : "record without SequenceNumber");
  if (!r->pkey) r->pkey = "";
  b->bytes += r->len;
  return 0;
}

static int parse_records(kn_jscan_t *js, kn_batch_t *b) {
  int first = 1, rc;
  if (kn_js_arr_open(js)) return -1;
  while ((rc = kn_js_arr_next(js, &first)) > 0)
    if (parse_record(js, b)) return -1;
  js->depth--;
  return rc;
}

/* ---- ChildShards ---- */

static int parse_hash_range(kn_jscan_t *js, kn_shard_desc_t *sd) {
  int first = 1, rc;
  char *k, *s;
  size_t kn, n;
  if (kn_js_obj_open(js)) return -1;
  while ((rc = kn_js_obj_next(js, &first, &k, &kn)) > 0) {
    if (KN_JS_KEY_IS(k, kn, "StartingHashKey")) {
      if (kn_js_cstr(js, &s, &n)) return -1;
      sd->hk_start = s;
    } else if (KN_JS_KEY_IS(k, kn, "EndingHashKey")) {
      if (kn_js_cstr(js, &s, &n)) return -1;
      sd->hk_end = s;
    } else if (kn_js_skip(js)) {
      return -1;
    }
  }
  js->depth--;
  return rc;
}

static int parse_parents(kn_jscan_t *js, kn_shard_desc_t *sd) {
  int first = 1, rc, isnull;
  char *s;
  size_t n;
  if (kn_js_null(js, &isnull)) return isnull;
  if (kn_js_arr_open(js)) return -1;
  while ((rc = kn_js_arr_next(js, &first)) > 0) {
    if (kn_js_cstr(js, &s, &n)) return -1;
    /* A merge names two parents; the first is ParentShardId. */
    if (!sd->parent)
      sd->parent = s;
    else if (!sd->adjacent_parent)
      sd->adjacent_parent = s;
  }
  js->depth--;
  return rc;
}

static int parse_child(kn_jscan_t *js, kn_shard_list_t *l) {
  const char *start = js->p;
  kn_shard_desc_t sd;
  memset(&sd, 0, sizeof(sd));
  int first = 1, rc, isnull;
  char *k, *s;
  size_t kn, n;
  if (kn_js_obj_open(js)) return -1;
  while ((rc = kn_js_obj_next(js, &first, &k, &kn)) > 0) {
    if (KN_JS_KEY_IS(k, kn, "ShardId")) {
      if (kn_js_cstr(js, &s, &n)) return -1;
      sd.id = s;
    } else if (KN_JS_KEY_IS(k, kn, "ParentShards")) {
      if (parse_parents(js, &sd)) return -1;
    } else if (KN_JS_KEY_IS(k, kn, "HashKeyRange")) {
      if (kn_js_null(js, &isnull)) {
        if (isnull) return -1;
      } else if (parse_hash_range(js, &sd)) {
        return -1;
      }
    } else if (kn_js_skip(js)) {
      return -1;
    }
  }
  js->depth--;
  if (rc < 0) return -1;
  rc = kn_shard_list_add(l, &sd);
  if (rc == -2) js->nomem = 1;
  if (rc)
    return kn_js_fail(js, start, "child shard without ShardId or hash keys");
  return 0;
}

static int parse_children(kn_jscan_t *js, kn_batch_t *b) {
  int first = 1, rc;
  if (kn_js_arr_open(js)) return -1;
  kn_shard_list_t *l = kn_shard_list_new();
  if (!l) {
    js->nomem = 1;
    return -1;
  }
  while ((rc = kn_js_arr_next(js, &first)) > 0)
    if (parse_child(js, l)) break;
  js->depth--;
  if (rc != 0 || l->n == 0) {
    kn_shard_list_destroy(l);
    return rc ? -1 : 0;
  }
  kn_shard_list_destroy(b->children);
  b->children = l;
  return 0;
}

/* ---- The response ---- */

/* MillisBehindLatest: a whole, non-negative number of milliseconds, in
 * any JSON form (1.5e3 is 1500).  A fraction or a negative value is not
 * something the service sends; -1 would also read as "unknown". */
static int parse_millis(kn_jscan_t *js, int64_t *out) {
  const char *at = js->p;
  kn_jsnum_t n;
  if (!(*js->p == '-' || kn_js_digit(*js->p)))
    KN_JS_FAIL(js, "MillisBehindLatest is not a number");
  if (kn_js_num(js, &n)) return -1;
  uint64_t m = n.mant;
  for (long e = n.exp; e < 0 && m; e++, m /= 10)
    if (m % 10)
      return kn_js_fail(js, at, "MillisBehindLatest is not a whole number");
  if (n.neg && n.mant)
    return kn_js_fail(js, at, "MillisBehindLatest is negative");
  if (kn_js_num_to_i64(&n, 0, out))
    return kn_js_fail(js, at, "MillisBehindLatest out of range");
  return 0;
}

static int parse_top(kn_jscan_t *js, kn_batch_t *b, const char **cont) {
  int first = 1, rc, isnull;
  char *k, *s;
  size_t kn, n;
  kn_js_ws(js);
  if (kn_js_obj_open(js)) return -1;
  while ((rc = kn_js_obj_next(js, &first, &k, &kn)) > 0) {
    if (kn_js_null(js, &isnull)) {
      if (isnull) return -1;
      continue; /* null members count as absent */
    }
    if (KN_JS_KEY_IS(k, kn, "Records")) {
      if (parse_records(js, b)) return -1;
    } else if (KN_JS_KEY_IS(k, kn, "NextShardIterator")) {
      if (kn_js_cstr(js, &s, &n)) return -1;
      free(b->next_iterator);
      if (!(b->next_iterator = strdup(s))) {
        js->nomem = 1;
        return -1;
      }
    } else if (KN_JS_KEY_IS(k, kn, "ContinuationSequenceNumber")) {
      const char *at = js->p;
      if (kn_js_cstr(js, &s, &n)) return -1;
      if (!kn_seqnum_valid(s, n))
        return kn_js_fail(js, at, "ContinuationSequenceNumber is not a number");
      *cont = s;
    } else if (KN_JS_KEY_IS(k, kn, "MillisBehindLatest")) {
      if (parse_millis(js, &b->millis_behind)) return -1;
    } else if (KN_JS_KEY_IS(k, kn, "ChildShards")) {
      if (parse_children(js, b)) return -1;
    } else if (kn_js_skip(js)) {
      return -1;
    }
  }
  js->depth--;
  if (rc < 0) return -1;
  return kn_js_finish(js);
}

kn_error_t *kn_decode_records(kn_batch_t *b, char *body, size_t len,
                              kn_records_kind_t kind,
                              const char **continuation) {
  const char *what = kind == KN_RECORDS_SUBSCRIBE_EVENT
                         ? "SubscribeToShardEvent"
                         : "GetRecords response";
  const char *cont = NULL;
  kn_jscan_t js;
  if (continuation) *continuation = NULL;
  if (kn_js_init(&js, body, len) || parse_top(&js, b, &cont))
    return kn_js_error(&js, what);
  if (kind == KN_RECORDS_SUBSCRIBE_EVENT) {
    b->shard_end = cont == NULL;
    if (continuation) *continuation = cont;
  } else {
    b->shard_end = b->next_iterator == NULL;
  }
  return NULL;
}
