/* Kinesis operations for the library's own hot paths (consumer polling,
 * producer sending): asynchronous calls on a service's I/O thread that
 * hand back decoded batches and results.  The blocking kn_client_t API
 * (include/kn/client.h) is built on the same encoders and decoders.
 *
 * Rules of kn_svc_call apply: these run on the I/O thread only; the
 * callback runs once, on the I/O thread, never before the call returns;
 * when the call returns NULL (*errp set) the callback never runs. */
#ifndef KN_KINESIS_KINESIS_H
#define KN_KINESIS_KINESIS_H

#include <stddef.h>

#include "aws/service.h"
#include "kinesis/batch.h"
#include "kn/client.h"
#include "util/buf.h"

typedef struct kn_kreq kn_kreq_t;

/* err NULL: *batch holds the records (owned by the callback: destroy it
 * with kn_batch_destroy); otherwise batch is NULL and the callback owns
 * err. */
typedef void(kn_get_records_cb)(void *opaque, kn_error_t *err,
                                kn_batch_t *batch);

/* One GetRecords call; the response is decoded in place into a batch
 * labelled with stream and shard_id (copied; either may be NULL).  limit
 * 0: the service default.  opts may be NULL. */
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
                                        const kn_put_entry_t *entries,
                                        size_t n, const kn_call_opts_t *opts,
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

/* Servers answer an operation they do not implement in their own ways
 * (kinesalite: UnknownOperationException; kinesis-local:
 * AccessDeniedException "Unable to determine service/operation name";
 * AWS: UnknownOperationException / InvalidAction).  Turns such an error
 * into KN_ERR__UNSUPPORTED naming the action, in place; other errors are
 * returned unchanged. */
kn_error_t *kn_kinesis_map_unsupported(kn_error_t *err, const char *action);

#endif
