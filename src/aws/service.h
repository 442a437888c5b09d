/* Calls to AWS JSON-protocol services (Kinesis: JSON 1.1; DynamoDB: JSON
 * 1.0): signing, sending on the handle's loop, decoding errors, and
 * retrying retriable failures with capped exponential back-off, full
 * jitter and a shared retry budget.
 *
 * Each attempt is `POST <endpoint path>` with Host, Content-Type,
 * X-Amz-Target (<prefix>.<Action>), X-Amz-Date, X-Amz-Security-Token (with
 * temporary credentials), User-Agent and a fresh SigV4 Authorization.
 * Retried: errors kn_error_is_retriable() accepts (throttling, 5xx,
 * transport failures, timeouts), after a delay uniform in
 * [0, min(retry.backoff.max.ms, base * 2^(attempt-1))] where base is
 * retry.backoff.ms, five times that after throttling.  Each retry costs
 * the service's budget 5 tokens (10 after a timeout), each success gives 1
 * back, up to retry.budget; an empty budget reports the error at once.
 * A 2xx answer is a success whatever its body: callers decode it.
 * Credentials come from the provider's cache and are never fetched on the
 * I/O thread: a call made while the provider has none usable waits (off
 * the loop's critical path) until its thread has them, and fails with its
 * error if the fetch fails. */
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
 * endpoint (http:// or https://, optional port and path, nothing else) is
 * copied.  settings->region must be set.  NULL on failure with *errp set.
 * Any thread. */
kn_svc_t *kn_svc_new(kn_loop_t *loop, kn_creds_provider_t *creds,
                     const kn_aws_settings_t *settings, const kn_svc_def_t *def,
                     const char *endpoint, kn_error_t **errp);
/* Call with no calls in flight (cancel them first), from any thread once
 * the loop is idle for it.  Accepts NULL. */
void kn_svc_destroy(kn_svc_t *svc);
kn_loop_t *kn_svc_loop(const kn_svc_t *svc);

typedef struct kn_call_opts {
  int max_attempts; /* 0: the configured retry.max.attempts; 1: no retry */
  long timeout_ms;  /* per attempt; 0: http.request.timeout.ms */
} kn_call_opts_t;

/* The outcome of a call.  err is NULL on success (HTTP 2xx), and then body
 * holds the response.  request is the request body given back, so that a
 * caller sending many large bodies can fill the next one in memory already
 * touched.  The callback owns err (kn_error_destroy) and may steal body and
 * request; the rest is freed when it returns.  (err NULL with an
 * http_status outside 2xx means memory ran out reporting a failure.)
 * Error messages start with "<service> <Action>" and say how many
 * attempts were made when there were several. */
typedef struct kn_call_result {
  kn_error_t *err;
  kn_buf_t body;
  kn_buf_t request;
  int attempts; /* how many were made */
  int http_status;
} kn_call_result_t;

typedef void(kn_call_cb)(void *opaque, kn_call_result_t *res);

/* I/O thread only (KN_ERR__STATE elsewhere).  Sends action with the JSON
 * body (moved from *body, left empty, even on failure; body may be NULL
 * for an empty one).  cb runs once, on the I/O thread, never before this
 * returns; if this returns NULL (*errp set) cb is never called.  The call
 * handle is invalid from the moment cb starts. */
kn_call_t *kn_svc_call(kn_svc_t *svc, const char *action, kn_buf_t *body,
                       const kn_call_opts_t *opts, kn_call_cb *cb, void *opaque,
                       kn_error_t **errp);
/* I/O thread only: stops the call wherever it is (in flight or waiting
 * to retry); cb will not be called.  Accepts NULL. */
void kn_call_cancel(kn_call_t *call);
/* I/O thread only: 1 while the call waits before its next attempt (after
 * a failed one, or for credentials), 0 while an attempt is in flight.  Lets
 * a caller (a test) act at a known point instead of after a guessed time. */
int kn_call_waiting(const kn_call_t *call);

/* Any thread except the I/O thread (KN_ERR__STATE there): a blocking
 * call.  body is copied.  On success returns NULL and fills *out with the
 * body (caller frees with kn_buf_free); on failure *out is empty.  opts
 * may be NULL.  The loop must not be destroyed while this waits. */
kn_error_t *kn_svc_call_sync(kn_svc_t *svc, const char *action,
                             const char *body, size_t body_len,
                             const kn_call_opts_t *opts, kn_buf_t *out);

/* Streaming call for event-stream responses (SubscribeToShard).  The
 * request is signed and sent like kn_svc_call but never retried and
 * without a request timeout (the connect timeout applies); for a 2xx
 * response the body goes to on_data as it arrives (return as in
 * kn_http_req_t.on_data; on_data gets done's opaque); a non-2xx body is
 * collected and decoded into done's err.  done runs once at the end with
 * err NULL for a clean end of stream.  I/O thread only.  Pause and resume
 * take effect on the next turn of the loop; a call paused between
 * attempts stays paused. */
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
