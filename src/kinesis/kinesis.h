/* Kinesis operations for the library's own hot paths (consumer polling
 * and fan-out, producer sending): asynchronous calls on a service's I/O
 * thread that hand back decoded batches and results.  The blocking
 * kn_client_t API (include/kn/client.h) is built on the same encoders and
 * decoders.
 *
 * Rules of kn_svc_call apply: these run on the I/O thread only; the
 * callback runs once, on the I/O thread, never before the call returns;
 * when the call returns NULL (*errp set) the callback never runs. */
#ifndef KN_KINESIS_KINESIS_H
#define KN_KINESIS_KINESIS_H

#include <stddef.h>

#include "aws/service.h"
#include "kinesis/batch.h"
#include "kinesis/subscribe_event.h"
#include "kn/client.h"
#include "util/buf.h"

typedef struct kn_kreq kn_kreq_t;

/* The outcome of a GetShardIterator or GetRecords call.  The callback
 * may take err, iterator and batch (leaving NULL); what is left is freed
 * when it returns. */
typedef struct kn_get_records_result {
  kn_error_t *err;   /* NULL on success */
  kn_batch_t *batch; /* success: the records and the next iterator */
  char *iterator;    /* GetShardIterator success: malloc'ed */
  /* The service answered 2xx (err, if set, is then about that answer:
   * malformed, or out of memory decoding it), and how long the answer
   * was (the records' wire size, for throughput accounting). */
  int answered;
  size_t body_len;
} kn_get_records_result_t;

typedef void(kn_get_records_cb)(void *opaque, kn_get_records_result_t *res);

/* One GetShardIterator call: res->iterator on success.  stream as in
 * encode.h (a name, or an ARN); sequence_number for AT/AFTER_SEQUENCE_NUMBER
 * and timestamp_ms for AT_TIMESTAMP.  opts may be NULL. */
kn_kreq_t *kn_kinesis_get_shard_iterator_async(
    kn_svc_t *svc, const char *stream, const char *shard_id,
    kn_iterator_type_t type, const char *sequence_number, int64_t timestamp_ms,
    const kn_call_opts_t *opts, kn_get_records_cb *cb, void *opaque,
    kn_error_t **errp);

/* One GetRecords call: res->batch on success, the response decoded in
 * place (the batch adopts the body: no copy), labelled with stream and
 * shard_id (copied; either may be NULL).  limit 0: the service default.
 * opts may be NULL. */
kn_kreq_t *kn_kinesis_get_records_async(kn_svc_t *svc, const char *iterator,
                                        int limit, const char *stream,
                                        const char *shard_id,
                                        const kn_call_opts_t *opts,
                                        kn_get_records_cb *cb, void *opaque,
                                        kn_error_t **errp);

/* err NULL: *results (owned by the callback, kn_put_results_destroy) has
 * one entry per record sent, some of which may have failed.  *sent is the
 * request body, which the callback may steal to reuse its memory. */
typedef void(kn_put_records_cb)(void *opaque, kn_error_t *err,
                                kn_put_results_t *results, kn_buf_t *sent);

/* One PutRecords call of n entries (at most 500, 5 MiB); the entries are
 * only read during the call. */
kn_kreq_t *kn_kinesis_put_records_async(kn_svc_t *svc, const char *stream,
                                        const kn_put_entry_t *entries, size_t n,
                                        const kn_call_opts_t *opts,
                                        kn_put_records_cb *cb, void *opaque,
                                        kn_error_t **errp);

/* The same with a body already encoded (kn_enc_put_records) holding n
 * entries; *body is moved (left empty) whatever the outcome. */
kn_kreq_t *kn_kinesis_put_records_body_async(kn_svc_t *svc, kn_buf_t *body,
                                             size_t n,
                                             const kn_call_opts_t *opts,
                                             kn_put_records_cb *cb,
                                             void *opaque, kn_error_t **errp);

/* I/O thread only, before the callback has run: cancels the call; the
 * callback will not run.  Accepts NULL. */
void kn_kreq_cancel(kn_kreq_t *req);
/* Any thread, once the loop has stopped (which frees its calls without
 * callbacks): frees what the request holds besides its call.  Accepts
 * NULL. */
void kn_kreq_forget(kn_kreq_t *req);

/* ---- SubscribeToShard (enhanced fan-out) ---- */

typedef struct kn_ksub kn_ksub_t;

/* What the event callback wants done with the stream. */
typedef enum kn_ksub_action {
  KN_KSUB_CONTINUE = 0,
  KN_KSUB_DRAIN, /* deliver nothing more and let the server end it (after
                    the end of the shard: resetting a stream instead
                    upsets some servers) */
  KN_KSUB_RESET  /* end it now */
} kn_ksub_action_t;

/* One message of the stream, as it is decoded. */
typedef struct kn_ksub_event {
  /* An exception or error message (borrowed): the stream drains and the
   * subscription ends with it; the callback's answer is ignored. */
  const kn_error_t *exception;
  kn_sub_kind_t kind; /* otherwise */
  /* KN_SUB_EVENT: the records, decoded in place in the frame, which the
   * batch owns (the callback owns the batch); ContinuationSequenceNumber
   * inside it, or NULL; shard end and children as kn_decode_records
   * sets them.  NULL for the other kinds. */
  kn_batch_t *batch;
  const char *continuation;
  size_t frame_len; /* the message's wire size */
} kn_ksub_event_t;

typedef struct kn_ksub_cbs {
  kn_ksub_action_t (*on_event)(void *opaque, kn_ksub_event_t *ev);
  /* After each piece of the stream is decoded (may be NULL): non-zero
   * pauses the transfer until kn_ksub_resume(). */
  int (*on_data)(void *opaque);
  /* Once, at the end (the handle is gone from then on); the callback owns
   * err: NULL for a clean end of the stream, else what ended it, an
   * error inside the stream (exception, malformed event or framing)
   * before the transfer's own.  A stream the event callback reset ends
   * with the transfer's error. */
  void (*on_end)(void *opaque, kn_error_t *err);
} kn_ksub_cbs_t;

/* Opens a subscription of consumer_arn to shard_id from the starting
 * position (type, sequence_number, timestamp_ms as for GetShardIterator);
 * batches are labelled with stream and shard_id (copied; stream may be
 * NULL).  cbs is copied.  The callbacks run on the I/O thread, never
 * before this returns; if this returns NULL (*errp set) none runs. */
kn_ksub_t *kn_kinesis_subscribe_async(
    kn_svc_t *svc, const char *stream, const char *consumer_arn,
    const char *shard_id, kn_iterator_type_t type, const char *sequence_number,
    int64_t timestamp_ms, const kn_ksub_cbs_t *cbs, void *opaque,
    kn_error_t **errp);
/* I/O thread only, while the subscription lasts. */
void kn_ksub_resume(kn_ksub_t *s);
/* The stream is being drained (an exception, or KN_KSUB_DRAIN). */
int kn_ksub_draining(const kn_ksub_t *s);
/* I/O thread only, before on_end: ends the subscription without on_end;
 * returns the error found inside the stream, if any (the caller owns
 * it).  Accepts NULL. */
kn_error_t *kn_ksub_cancel(kn_ksub_t *s);
/* As kn_kreq_forget. */
void kn_ksub_forget(kn_ksub_t *s);

/* Servers answer an operation they do not implement in their own ways
 * (kinesalite: UnknownOperationException; kinesis-local:
 * AccessDeniedException "Unable to determine service/operation name";
 * AWS: UnknownOperationException / InvalidAction).  Turns such an error
 * into KN_ERR__UNSUPPORTED naming the action, in place; other errors are
 * returned unchanged. */
kn_error_t *kn_kinesis_map_unsupported(kn_error_t *err, const char *action);

#endif
