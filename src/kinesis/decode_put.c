/* PutRecords answers, decoded in place like GetRecords: the producer
 * reads one per 500 records, so it avoids a DOM and copies. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/decode.h"
#include "kinesis/jscan.h"

#define WHAT "PutRecords response"

/* A string member, or null (left NULL). */
static int str_or_null(kn_jscan_t *js, const char **out) {
  int isnull;
  char *s;
  size_t n;
  if (kn_js_null(js, &isnull)) return isnull;
  if (kn_js_cstr(js, &s, &n)) return -1;
  *out = s;
  return 0;
}

static int parse_entry(kn_jscan_t *js, kn_put_result_t *e) {
  const char *start = js->p;
  int first = 1, rc;
  char *k;
  size_t kn;
  memset(e, 0, sizeof(*e));
  if (kn_js_obj_open(js)) return -1;
  while ((rc = kn_js_obj_next(js, &first, &k, &kn)) > 0) {
    const char **dst = KN_JS_KEY_IS(k, kn, "SequenceNumber") ? &e->seq
                       : KN_JS_KEY_IS(k, kn, "ShardId")      ? &e->shard_id
                       : KN_JS_KEY_IS(k, kn, "ErrorCode")    ? &e->error_code
                       : KN_JS_KEY_IS(k, kn, "ErrorMessage") ? &e->error_message
                                                             : NULL;
    if (dst ? str_or_null(js, dst) : kn_js_skip(js)) return -1;
  }
  js->depth--;
  if (rc < 0) return -1;
  if (e->error_code && !*e->error_code) e->error_code = NULL;
  if (e->error_code) {
    /* A failed entry reports no position even if a server sends one. */
    e->seq = e->shard_id = NULL;
    if (!e->error_message) e->error_message = "";
  } else if (!e->seq || !e->shard_id) {
    return kn_js_fail(js, start, "entry without SequenceNumber or ErrorCode");
  }
  return 0;
}

static int parse_top(kn_jscan_t *js, kn_put_results_t *r, size_t n_sent) {
  int first = 1, afirst, rc, isnull;
  char *k;
  size_t kn;
  kn_js_ws(js);
  if (kn_js_obj_open(js)) return -1;
  while ((rc = kn_js_obj_next(js, &first, &k, &kn)) > 0) {
    if (!KN_JS_KEY_IS(k, kn, "Records")) {
      if (kn_js_skip(js)) return -1;
      continue;
    }
    if (kn_js_null(js, &isnull)) {
      if (isnull) return -1;
      continue;
    }
    if (kn_js_arr_open(js)) return -1;
    /* A second Records array replaces the first: its counts too. */
    r->n = 0;
    r->failed = 0;
    afirst = 1;
    while ((rc = kn_js_arr_next(js, &afirst)) > 0) {
      if (r->n == n_sent) KN_JS_FAIL(js, "more entries than records sent");
      if (parse_entry(js, &r->v[r->n])) return -1;
      if (r->v[r->n].error_code) r->failed++;
      r->n++;
    }
    js->depth--;
    if (rc < 0) return -1;
  }
  js->depth--;
  if (rc < 0) return -1;
  if (r->n != n_sent) KN_JS_FAIL(js, "fewer entries than records sent");
  return kn_js_finish(js);
}

kn_error_t *kn_decode_put_records(char *body, size_t len, size_t n_sent,
                                  kn_put_results_t **out) {
  kn_jscan_t js;
  *out = NULL;
  kn_put_results_t *r = calloc(1, sizeof(*r));
  if (r) r->v = calloc(n_sent ? n_sent : 1, sizeof(*r->v));
  if (!r || !r->v) {
    free(r);
    free(body);
    return kn_error_new(KN_ERR__NOMEM, WHAT ": out of memory");
  }
  r->body = body;
  if (kn_js_init(&js, body, len) || parse_top(&js, r, n_sent)) {
    kn_error_t *err = kn_js_error(&js, WHAT);
    kn_put_results_destroy(r);
    return err;
  }
  *out = r;
  return NULL;
}
