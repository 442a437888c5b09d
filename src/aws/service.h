/* Calls to AWS JSON-protocol services (Kinesis: JSON 1.1; DynamoDB: JSON
 * 1.0): signing, sending on the handle's loop, decoding errors, and
 * retrying retriable failures with capped exponential back-off, full
 * jitter and a shared retry budget. */
#ifndef KN_AWS_SERVICE_H
#define KN_AWS_SERVICE_H

#include <stddef.h>

#include "aws/creds.h"
#include "aws/http.h"
#include "aws/settings.h"
#include "kn/error.h"
#include "util/buf.h"

typedef struct kn_svc_def {
  const char *signing_name;  /* "kinesis", "dynamodb" */
  const char *target_prefix; /* "Kinesis_20131202", "DynamoDB_20120810" */
  const char *content_type;  /* "application/x-amz-json-1.1" */
} kn_svc_def_t;

extern const kn_svc_def_t kn_svc_kinesis;
extern const kn_svc_def_t kn_svc_dynamodb;

typedef struct kn_svc kn_svc_t;
typedef struct kn_call kn_call_t;

/* loop, creds and settings are borrowed and must outlive the service;
 * endpoint is copied.  NULL on failure with *errp set. */
kn_svc_t *kn_svc_new(kn_loop_t *loop, kn_creds_provider_t *creds,
                     const kn_aws_settings_t *settings, const kn_svc_def_t *def,
                     const char *endpoint, kn_error_t **errp);
/* Call with no calls in flight (cancel them first).  Accepts NULL. */
void kn_svc_destroy(kn_svc_t *svc);
kn_loop_t *kn_svc_loop(const kn_svc_t *svc);

typedef struct kn_call_opts {
  int max_attempts;  /* 0: the configured retry.max.attempts; 1: no retry */
  long timeout_ms;   /* per attempt; 0: http.request.timeout.ms */
} kn_call_opts_t;

/* The outcome of a call.  err is NULL on success (HTTP 2xx), and then body
 * holds the response.  The callback owns err (kn_error_destroy) and may
 * steal body; the rest is freed when it returns. */
typedef struct kn_call_result {
  kn_error_t *err;
  kn_buf_t body;
  int attempts;     /* how many were made */
  int http_status;
} kn_call_result_t;

typedef void(kn_call_cb)(void *opaque, kn_call_result_t *res);

/* I/O thread only.  Sends action with the JSON body (moved from *body,
 * left empty).  cb runs once, on the I/O thread, never before this returns;
 * if this returns NULL (*errp set) cb is never called. */
kn_call_t *kn_svc_call(kn_svc_t *svc, const char *action, kn_buf_t *body,
                       const kn_call_opts_t *opts, kn_call_cb *cb,
                       void *opaque, kn_error_t **errp);
/* I/O thread only: cb will not be called.  Accepts NULL. */
void kn_call_cancel(kn_call_t *call);

/* Any thread except the I/O thread: a blocking call.  On success returns
 * NULL and fills *out with the body (caller frees with kn_buf_free).
 * opts may be NULL. */
kn_error_t *kn_svc_call_sync(kn_svc_t *svc, const char *action,
                             const char *body, size_t body_len,
                             const kn_call_opts_t *opts, kn_buf_t *out);

/* Streaming call for event-stream responses (SubscribeToShard).  The
 * request is signed and sent like kn_svc_call but never retried; for a 2xx
 * response the body goes to on_data as it arrives (return as in
 * kn_http_req_t.on_data); done runs once at the end with err NULL for a
 * clean end of stream.  I/O thread only. */
kn_call_t *kn_svc_stream(kn_svc_t *svc, const char *action, kn_buf_t *body,
                         int (*on_data)(void *opaque, const char *p, size_t n),
                         kn_call_cb *done, void *opaque, kn_error_t **errp);
void kn_call_pause(kn_call_t *call);
void kn_call_resume(kn_call_t *call);

/* Decodes an AWS JSON error response (`__type` or `code`, `message` or
 * `Message`, x-amzn-ErrorType header already folded into type_hint) into
 * an error.  Pure; exposed for tests. */
kn_error_t *kn_svc_decode_error(int http_status, const char *body,
                                size_t body_len, const char *type_hint,
                                const char *request_id);

#endif
