/* Record operations of kn_client_t: iterators, GetRecords, PutRecord(s). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/client_int.h"
#include "kinesis/decode.h"
#include "kinesis/decode_records.h"
#include "kinesis/encode.h"
#include "kinesis/seqnum.h"

#define NEED(cond, fn, what) \
  if (!(cond)) return kn_client_arg_error(fn, what)

/* The response body as a malloc'ed, terminated string the decoders can
 * rewrite (an empty one when the server sent nothing). */
static char *take_body(kn_buf_t *b, size_t *len) {
  if (!b->p) {
    *len = 0;
    return calloc(1, 1);
  }
  return kn_buf_steal(b, len);
}

kn_error_t *kn_get_shard_iterator(kn_client_t *kc, const char *stream,
                                  const char *shard_id, kn_iterator_type_t type,
                                  const char *sequence_number,
                                  int64_t timestamp_ms, char **iterator) {
  NEED(iterator, "kn_get_shard_iterator", "no output");
  *iterator = NULL;
  NEED(kc && stream && *stream, "kn_get_shard_iterator", "no stream name");
  NEED(shard_id && *shard_id, "kn_get_shard_iterator", "no shard id");
  NEED(kn_iterator_type_name(type), "kn_get_shard_iterator",
       "unknown iterator type");
  if (type == KN_ITER_AT_SEQUENCE_NUMBER ||
      type == KN_ITER_AFTER_SEQUENCE_NUMBER)
    NEED(sequence_number &&
             kn_seqnum_valid(sequence_number, strlen(sequence_number)),
         "kn_get_shard_iterator", "the sequence number is not a number");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_get_shard_iterator(&req, stream, shard_id, type,
                                     sequence_number, timestamp_ms);
  kn_error_t *err = kn_client_call(kc, "GetShardIterator", rc, &req, &resp);
  if (!err) err = kn_decode_shard_iterator(resp.p, resp.len, iterator);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}

kn_error_t *kn_get_records(kn_client_t *kc, const char *iterator, int limit,
                           kn_batch_t **out) {
  NEED(out, "kn_get_records", "no output");
  *out = NULL;
  NEED(kc && iterator && *iterator, "kn_get_records", "no shard iterator");
  NEED(limit >= 0, "kn_get_records", "negative limit");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_get_records(&req, iterator, limit);
  kn_error_t *err = kn_client_call(kc, "GetRecords", rc, &req, &resp);
  kn_buf_free(&req);
  if (err) return err;
  size_t len;
  char *body = take_body(&resp, &len);
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  if (!body || !b || kn_batch_adopt(b, body)) {
    free(body);
    kn_batch_destroy(b);
    return kn_error_new(KN_ERR__NOMEM, "GetRecords: out of memory");
  }
  err = kn_decode_records(b, body, len, KN_RECORDS_GET_RECORDS, NULL);
  if (err) {
    kn_batch_destroy(b);
    return err;
  }
  *out = b;
  return NULL;
}

kn_error_t *kn_put_record(kn_client_t *kc, const char *stream,
                          const char *partition_key, const void *data,
                          size_t len, const char *explicit_hash_key,
                          char **sequence_number, char **shard_id) {
  if (sequence_number) *sequence_number = NULL;
  if (shard_id) *shard_id = NULL;
  NEED(kc && stream && *stream, "kn_put_record", "no stream name");
  NEED(partition_key && *partition_key, "kn_put_record", "no partition key");
  NEED(data || !len, "kn_put_record", "no data");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_put_record(&req, stream, partition_key, data, len,
                             explicit_hash_key);
  kn_error_t *err = kn_client_call(kc, "PutRecord", rc, &req, &resp);
  if (!err)
    err = kn_decode_put_record(resp.p, resp.len, sequence_number, shard_id);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}

kn_error_t *kn_put_records(kn_client_t *kc, const char *stream,
                           const kn_put_entry_t *entries, size_t n,
                           kn_put_results_t **out) {
  NEED(out, "kn_put_records", "no output");
  *out = NULL;
  NEED(kc && stream && *stream, "kn_put_records", "no stream name");
  NEED(entries || !n, "kn_put_records", "no entries");
  for (size_t i = 0; i < n; i++)
    NEED(entries[i].partition_key && (entries[i].data || !entries[i].len),
         "kn_put_records", "an entry without partition key or data");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_put_records(&req, stream, entries, n);
  kn_error_t *err = kn_client_call(kc, "PutRecords", rc, &req, &resp);
  kn_buf_free(&req);
  if (err) return err;
  size_t len;
  char *body = take_body(&resp, &len);
  if (!body) return kn_error_new(KN_ERR__NOMEM, "PutRecords: out of memory");
  return kn_decode_put_records(body, len, n, out);
}
