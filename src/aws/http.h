/* HTTP over libcurl: one event loop per handle.
 *
 * A kn_loop_t owns one CURLM and one I/O thread.  Every transfer and timer
 * of the handle runs on that thread; other threads hand work to it with
 * kn_loop_post() / kn_loop_call().  Callbacks documented as "I/O thread"
 * run there and must not block.  This is the only file set that includes
 * curl. */
#ifndef KN_AWS_HTTP_H
#define KN_AWS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"
#include "util/buf.h"
#include "util/log.h"

typedef enum kn_http_version {
  KN_HTTP_AUTO = 0, /* HTTP/2 over TLS when ALPN agrees, else 1.1 */
  KN_HTTP_1_1,
  KN_HTTP_2,      /* HTTP/2 over TLS required; 1.1 in cleartext */
  KN_HTTP_2_PRIOR /* HTTP/2 in cleartext with prior knowledge (needs
                     libcurl >= 8.0.0: kn_loop_new refuses it before) */
} kn_http_version_t;

typedef struct kn_http_opts {
  int verify_tls;      /* 1: verify peer and host */
  const char *ca_file; /* NULL: system store; copied */
  kn_http_version_t version;
  long connect_timeout_ms;
  long max_connections;   /* connection cache size, and the most
                             connections open to one host (more
                             HTTP/1.1 transfers queue) */
  const kn_logger_t *log; /* not owned; must outlive the loop */
  /* Largest response body kept (every body but a streamed 2xx one, whose
   * format bounds it); a larger one fails the transfer with
   * KN_ERR__BAD_MSG, before it is all read when Content-Length says so.
   * 0: KN_HTTP_MAX_RESPONSE_DEFAULT. */
  size_t max_response_bytes;
} kn_http_opts_t;

#define KN_HTTP_MAX_RESPONSE_DEFAULT ((size_t)64 << 20)

typedef struct kn_loop kn_loop_t;
typedef struct kn_timer kn_timer_t;
typedef struct kn_http_xfer kn_http_xfer_t;

/* Starts the I/O thread.  opts is copied.  NULL on failure with *errp
 * set (the caller destroys it). */
kn_loop_t *kn_loop_new(const kn_http_opts_t *opts, kn_error_t **errp);

/* Stops and joins the I/O thread.  Must not be called from it.  Posted
 * functions not yet run are run first (they may own memory); then
 * transfers still running are cancelled without their callbacks and timers
 * not yet freed are freed without running, so their owners must not touch
 * them afterwards.  Owners should cancel their own work first.  Accepts
 * NULL. */
void kn_loop_destroy(kn_loop_t *loop);

/* Any thread: queue fn(arg) to run on the I/O thread.  Returns 0, or -1
 * when the loop is stopping or memory ran out, in which case fn is never
 * called. */
int kn_loop_post(kn_loop_t *loop, void (*fn)(void *arg), void *arg);

/* Any thread: run fn(arg) on the I/O thread and wait for it to return
 * (directly when called on the I/O thread).  Allocates nothing: -1 only
 * when the loop is stopping (fn then does not run). */
int kn_loop_call(kn_loop_t *loop, void (*fn)(void *arg), void *arg);

int kn_loop_on_thread(const kn_loop_t *loop);

/* Counters of the loop's transfers since it started. */
typedef struct kn_http_stats {
  uint64_t requests;  /* transfers that ended with a callback */
  uint64_t failures;  /* of which without a whole response */
  uint64_t connects;  /* new connections they opened */
  uint64_t http2;     /* responses over HTTP/2 */
  uint64_t bytes_out; /* request bodies */
  uint64_t bytes_in;  /* response bodies */
} kn_http_stats_t;

/* I/O thread only (other threads go through kn_loop_call). */
void kn_loop_stats(const kn_loop_t *loop, kn_http_stats_t *out);
const kn_logger_t *kn_loop_logger(const kn_loop_t *loop);

/* Timers, I/O thread only.  A timer is created stopped; start re-arms an
 * armed timer.  fn runs on the I/O thread, once per start; it may start,
 * stop or free any timer, itself included.  Timers due at the same time
 * run in the order they were started.  kn_timer_new returns NULL on
 * out-of-memory. */
kn_timer_t *kn_timer_new(kn_loop_t *loop, void (*fn)(void *arg), void *arg);
void kn_timer_start(kn_timer_t *t, int64_t delay_ms);
void kn_timer_stop(kn_timer_t *t);
int kn_timer_armed(const kn_timer_t *t);
void kn_timer_free(kn_timer_t *t); /* stops it; accepts NULL */

/* One HTTP request.  Everything is copied by kn_http_start(), except that
 * body_take, when given, is moved (left empty), and that body is borrowed
 * when body_borrow is set, to avoid copying large bodies. */
typedef struct kn_http_req {
  const char *method; /* "POST", "GET", "PUT" */
  const char *url;
  const char *const *headers; /* NULL-terminated "Name: value" lines */
  const void *body;           /* ignored when body_take is set */
  size_t body_len;
  kn_buf_t *body_take;
  /* 1: body is not copied; it must stay valid and unchanged until the
   * callback has run or the transfer is cancelled (retries re-send one
   * buffer this way). */
  int body_borrow;
  long timeout_ms; /* whole exchange; 0: none (event streams) */
  /* Streaming: for a 2xx response, body bytes go to on_data as they
   * arrive instead of into resp->body.  Return 0 to go on, 1 to pause the
   * transfer (resume with kn_http_resume()), -1 to abort it (the callback
   * then reports KN_ERR__FAIL).  I/O thread.  Other responses are collected
   * into resp->body as usual.  kn_http_perform_blocking() cannot pause:
   * there 1 means go on. */
  int (*on_data)(void *opaque, const char *p, size_t n);
  /* Called once when the status line and headers are in (I/O thread);
   * may be NULL. */
  void (*on_headers)(void *opaque, int status);
} kn_http_req_t;

typedef struct kn_http_resp {
  int status;         /* 0 when no response arrived */
  kn_buf_t body;      /* the body (non-streamed); callbacks may steal it */
  char *request_id;   /* x-amzn-RequestId or x-amz-request-id, or NULL */
  char *content_type; /* or NULL */
  char *error_type;   /* x-amzn-ErrorType, or NULL */
  int http_version;   /* 1 or 2 */
  /* Transport failure (connect, TLS, reset, timeout, truncated body), or
   * NULL when a whole response arrived; then status says how it went.
   * (status 0 with a NULL error: out of memory reporting a failure.) */
  kn_error_t *error;
} kn_http_resp_t;

/* Called once per started transfer on the I/O thread.  resp and what it
 * holds are freed after the callback returns, except what it steals (set
 * the field to NULL / use kn_buf_steal()).  The transfer handle is invalid
 * from the moment its callback starts. */
typedef void(kn_http_cb)(void *opaque, kn_http_resp_t *resp);

/* I/O thread only.  Never calls cb before returning.  On failure returns
 * NULL with *errp set, and cb is never called. */
kn_http_xfer_t *kn_http_start(kn_loop_t *loop, const kn_http_req_t *req,
                              kn_http_cb *cb, void *opaque, kn_error_t **errp);
/* I/O thread only: stop or restart reading a streamed body (HTTP/2 flow
 * control holds the server back).  Both take effect on the next turn of
 * the loop, so on_data is never called from inside them. */
void kn_http_pause(kn_http_xfer_t *x);
void kn_http_resume(kn_http_xfer_t *x);
/* I/O thread only: abort and free the transfer; its callback is never
 * called.  Allowed from inside any callback of the loop, except for a
 * transfer whose own completion callback is running. */
void kn_http_cancel(kn_http_xfer_t *x);

/* Blocking request on a private connection, for any thread including the
 * I/O thread (credential providers use it; it blocks the loop meanwhile).
 * opts->max_connections is ignored.  req is only read during the call.
 * Fills *resp (caller frees with kn_http_resp_clear); returns resp->error's
 * code or KN_ERR_NO_ERROR. */
kn_err_t kn_http_perform_blocking(const kn_http_opts_t *opts,
                                  const kn_http_req_t *req,
                                  kn_http_resp_t *resp);

/* Frees what resp holds and zeroes it.  Accepts NULL. */
void kn_http_resp_clear(kn_http_resp_t *resp);

/* For logs: a copy of a header line with secrets (Authorization,
 * X-Amz-Security-Token, ...: see aws/redact.h) replaced by "<redacted>".
 * Caller frees; NULL for NULL or on out-of-memory.  The loop's debug log
 * prints method, URL (without its query), status, time and sizes, never
 * headers. */
char *kn_http_redact_header(const char *line);

#endif
