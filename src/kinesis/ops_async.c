/* Asynchronous GetShardIterator, GetRecords and PutRecords on the I/O
 * thread (kinesis.h). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/decode.h"
#include "kinesis/decode_records.h"
#include "kinesis/encode.h"
#include "kinesis/kinesis.h"

struct kn_kreq {
  kn_call_t *call;
  void *opaque;
  kn_get_records_cb *get_cb; /* one of the two is set */
  kn_put_records_cb *put_cb;
  int iterator;      /* GetShardIterator rather than GetRecords */
  kn_batch_t *batch; /* GetRecords: labelled, filled on success */
  size_t n;          /* PutRecords: entries sent */
};

void kn_kreq_forget(kn_kreq_t *req) {
  if (!req) return;
  kn_batch_destroy(req->batch);
  free(req);
}

void kn_kreq_cancel(kn_kreq_t *req) {
  if (!req) return;
  kn_call_cancel(req->call);
  kn_kreq_forget(req);
}

/* The body of a successful call, ready for in-place decoding. */
static char *take_body(kn_call_result_t *res, size_t *len) {
  if (!res->body.p) {
    *len = 0;
    return calloc(1, 1);
  }
  return kn_buf_steal(&res->body, len);
}

static void on_get_records(void *opaque, kn_call_result_t *call) {
  kn_kreq_t *req = opaque;
  kn_get_records_result_t res;
  memset(&res, 0, sizeof(res));
  res.err = call->err;
  call->err = NULL;
  if (!res.err) {
    res.answered = 1;
    res.body_len = call->body.len;
    if (req->iterator) {
      res.err = kn_decode_shard_iterator(call->body.p ? call->body.p : "",
                                         call->body.len, &res.iterator);
    } else {
      size_t len;
      char *body = take_body(call, &len);
      kn_batch_t *b = req->batch;
      if (!body || kn_batch_adopt(b, body)) {
        free(body);
        res.err = kn_error_new(KN_ERR__NOMEM, "GetRecords: out of memory");
      } else {
        res.err = kn_decode_records(b, body, len, KN_RECORDS_GET_RECORDS, NULL);
      }
      if (!res.err) {
        res.batch = b;
        req->batch = NULL;
      }
    }
  }
  kn_get_records_cb *cb = req->get_cb;
  void *cb_opaque = req->opaque;
  kn_kreq_forget(req);
  cb(cb_opaque, &res);
  kn_error_destroy(res.err);
  kn_batch_destroy(res.batch);
  free(res.iterator);
}

/* Sends the encoded body (rc: the encoder's) for req, or frees req. */
static kn_kreq_t *get_send(kn_svc_t *svc, const char *action, kn_kreq_t *req,
                           int rc, kn_buf_t *body, const kn_call_opts_t *opts,
                           kn_error_t **errp) {
  if (rc == 0)
    req->call = kn_svc_call(svc, action, body, opts, on_get_records, req, errp);
  kn_buf_free(body);
  if (!req->call) {
    kn_kreq_forget(req);
    if (!*errp)
      *errp = kn_error_new(KN_ERR__NOMEM, "%s: out of memory", action);
    return NULL;
  }
  return req;
}

kn_kreq_t *kn_kinesis_get_shard_iterator_async(
    kn_svc_t *svc, const char *stream, const char *shard_id,
    kn_iterator_type_t type, const char *sequence_number, int64_t timestamp_ms,
    const kn_call_opts_t *opts, kn_get_records_cb *cb, void *opaque,
    kn_error_t **errp) {
  *errp = NULL;
  if (!stream || !shard_id || !cb || !kn_iterator_type_name(type)) {
    *errp = kn_error_new(KN_ERR__INVALID_ARG,
                         "GetShardIterator: no stream, shard or type");
    return NULL;
  }
  kn_kreq_t *req = calloc(1, sizeof(*req));
  if (!req) {
    *errp = kn_error_new(KN_ERR__NOMEM, "GetShardIterator: out of memory");
    return NULL;
  }
  req->get_cb = cb;
  req->opaque = opaque;
  req->iterator = 1;
  kn_buf_t body = KN_BUF_INIT;
  int rc = kn_enc_get_shard_iterator(&body, stream, shard_id, type,
                                     sequence_number, timestamp_ms);
  return get_send(svc, "GetShardIterator", req, rc, &body, opts, errp);
}

kn_kreq_t *kn_kinesis_get_records_async(kn_svc_t *svc, const char *iterator,
                                        int limit, const char *stream,
                                        const char *shard_id,
                                        const kn_call_opts_t *opts,
                                        kn_get_records_cb *cb, void *opaque,
                                        kn_error_t **errp) {
  *errp = NULL;
  if (!iterator || !*iterator || !cb) {
    *errp = kn_error_new(KN_ERR__INVALID_ARG, "GetRecords: no iterator");
    return NULL;
  }
  kn_kreq_t *req = calloc(1, sizeof(*req));
  if (!req || !(req->batch = kn_batch_new(stream, shard_id))) {
    kn_kreq_forget(req);
    *errp = kn_error_new(KN_ERR__NOMEM, "GetRecords: out of memory");
    return NULL;
  }
  req->get_cb = cb;
  req->opaque = opaque;
  kn_buf_t body = KN_BUF_INIT;
  int rc = kn_enc_get_records(&body, iterator, limit);
  return get_send(svc, "GetRecords", req, rc, &body, opts, errp);
}

static void on_put_records(void *opaque, kn_call_result_t *res) {
  kn_kreq_t *req = opaque;
  kn_error_t *err = res->err;
  kn_put_results_t *r = NULL;
  res->err = NULL;
  if (!err) {
    size_t len;
    char *body = take_body(res, &len);
    err = body ? kn_decode_put_records(body, len, req->n, &r)
               : kn_error_new(KN_ERR__NOMEM, "PutRecords: out of memory");
  }
  kn_put_records_cb *cb = req->put_cb;
  void *cb_opaque = req->opaque;
  free(req);
  cb(cb_opaque, err, r, &res->request);
}

kn_kreq_t *kn_kinesis_put_records_body_async(kn_svc_t *svc, kn_buf_t *body,
                                             size_t n,
                                             const kn_call_opts_t *opts,
                                             kn_put_records_cb *cb,
                                             void *opaque, kn_error_t **errp) {
  *errp = NULL;
  kn_kreq_t *req = calloc(1, sizeof(*req));
  if (!req) {
    kn_buf_free(body);
    *errp = kn_error_new(KN_ERR__NOMEM, "PutRecords: out of memory");
    return NULL;
  }
  req->put_cb = cb;
  req->opaque = opaque;
  req->n = n;
  req->call =
      kn_svc_call(svc, "PutRecords", body, opts, on_put_records, req, errp);
  kn_buf_free(body);
  if (!req->call) {
    free(req);
    if (!*errp)
      *errp = kn_error_new(KN_ERR__NOMEM, "PutRecords: out of memory");
    return NULL;
  }
  return req;
}

kn_kreq_t *kn_kinesis_put_records_async(kn_svc_t *svc, const char *stream,
                                        const kn_put_entry_t *entries, size_t n,
                                        const kn_call_opts_t *opts,
                                        kn_put_records_cb *cb, void *opaque,
                                        kn_error_t **errp) {
  kn_buf_t body = KN_BUF_INIT;
  if (kn_enc_put_records(&body, stream, entries, n)) {
    kn_buf_free(&body);
    *errp = kn_error_new(KN_ERR__NOMEM, "PutRecords: out of memory");
    return NULL;
  }
  return kn_kinesis_put_records_body_async(svc, &body, n, opts, cb, opaque,
                                           errp);
}
