/* Stream operations of kn_client_t: create, delete, wait, describe, list. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/client_int.h"
#include "kinesis/decode.h"
#include "kinesis/encode.h"
#include "util/clock.h"
#include "util/pager.h"

#define NEED(cond, fn, what) \
  if (!(cond)) return kn_client_arg_error(fn, what)

kn_error_t *kn_create_stream(kn_client_t *kc, const char *stream,
                             int shard_count) {
  return kn_create_stream_sized(kc, stream, shard_count, 0);
}

kn_error_t *kn_create_stream_sized(kn_client_t *kc, const char *stream,
                                   int shard_count, int max_record_kib) {
  NEED(kc && stream && *stream, "kn_create_stream", "no stream name");
  NEED(shard_count >= 0, "kn_create_stream", "negative shard count");
  NEED(max_record_kib == 0 || (max_record_kib >= KN_RECORD_KIB_MIN &&
                               max_record_kib <= KN_RECORD_KIB_MAX),
       "kn_create_stream_sized", "MaxRecordSizeInKiB out of 1024..10240");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_create_stream(&req, stream, shard_count, max_record_kib);
  kn_error_t *err = kn_client_call(kc, "CreateStream", rc, &req, &resp);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}

kn_error_t *kn_delete_stream(kn_client_t *kc, const char *stream,
                             int enforce_consumer_deletion) {
  NEED(kc && stream && *stream, "kn_delete_stream", "no stream name");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_delete_stream(&req, stream, enforce_consumer_deletion);
  kn_error_t *err = kn_client_call(kc, "DeleteStream", rc, &req, &resp);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}

kn_error_t *kn_describe_stream_summary(kn_client_t *kc, const char *stream,
                                       kn_stream_summary_t **out) {
  NEED(out, "kn_describe_stream_summary", "no output");
  *out = NULL;
  NEED(kc && stream && *stream, "kn_describe_stream_summary", "no stream name");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_stream(&req, stream);
  kn_error_t *err =
      kn_client_call(kc, "DescribeStreamSummary", rc, &req, &resp);
  if (!err) err = kn_decode_stream_summary(resp.p, resp.len, out);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}

kn_error_t *kn_wait_stream(kn_client_t *kc, const char *stream,
                           int want_deleted, int timeout_ms) {
  NEED(kc && stream && *stream, "kn_wait_stream", "no stream name");
  int64_t start = kn_mono_ms(), delay = 50;
  for (;;) {
    kn_stream_summary_t *s = NULL;
    kn_error_t *err = kn_describe_stream_summary(kc, stream, &s);
    if (err) {
      if (want_deleted && kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND) {
        kn_error_destroy(err);
        return NULL;
      }
      return err;
    }
    const char *st = kn_stream_summary_status(s);
    int done = !want_deleted && strcmp(st, "ACTIVE") == 0;
    int gone = !want_deleted && strcmp(st, "DELETING") == 0;
    kn_stream_summary_destroy(s);
    if (done) return NULL;
    if (gone)
      return kn_error_new(KN_ERR__STATE, "stream %s is being deleted", stream);
    int64_t waited = kn_mono_ms() - start;
    if (timeout_ms >= 0 && waited >= timeout_ms)
      return kn_error_new(KN_ERR__TIMED_OUT,
                          "stream %s did not become %s within %d ms", stream,
                          want_deleted ? "deleted" : "ACTIVE", timeout_ms);
    int64_t sleep = delay;
    if (timeout_ms >= 0 && sleep > timeout_ms - waited)
      sleep = timeout_ms - waited;
    kn_sleep_ms(sleep);
    /* Servers take from a fraction of a second to minutes: start fast,
     * then settle at one poll per second. */
    if (delay < 1000) delay *= 2;
  }
}

kn_error_t *kn_list_streams(kn_client_t *kc, kn_strlist_t **out) {
  NEED(out, "kn_list_streams", "no output");
  *out = NULL;
  NEED(kc, "kn_list_streams", "no client");
  kn_strlist_t *l = kn_strlist_new();
  if (!l) return kn_error_new(KN_ERR__NOMEM, "ListStreams: out of memory");
  kn_buf_t req = KN_BUF_INIT, resp = KN_BUF_INIT;
  char *token = NULL;
  kn_error_t *err = NULL;
  kn_pager_t pager = {0};
  for (;;) {
    /* Servers without NextToken (kinesalite) page by the last name. */
    const char *last = l->n ? l->v[l->n - 1] : NULL;
    int rc = kn_enc_list_streams(&req, last, token);
    err = kn_client_call(kc, "ListStreams", rc, &req, &resp);
    if (err) break;
    size_t before = l->n;
    int more = 0;
    char *next = NULL;
    err = kn_decode_list_streams(resp.p, resp.len, l, &next, &more);
    kn_buf_free(&resp);
    if (err) break;
    free(token);
    token = next;
    int pr = kn_pager_next_str(&pager, token);
    if ((err = kn_pager_error(&pager, pr, "ListStreams"))) break;
    if (pr == KN_PAGER_REPEAT || (!token && (!more || l->n == before))) break;
  }
  kn_pager_free(&pager);
  free(token);
  kn_buf_free(&req);
  if (err) {
    kn_strlist_destroy(l);
    return err;
  }
  *out = l;
  return NULL;
}
