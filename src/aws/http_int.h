/* Internals shared by the HTTP files (http_xfer.c, http_sync.c, http.c,
 * loop.c, timer.c).  Includes curl, so only those files include it. */
#ifndef KN_AWS_HTTP_INT_H
#define KN_AWS_HTTP_INT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

#include "aws/http.h"

/* One transfer, on the loop or blocking.  Owned by the loop (or by
 * kn_http_perform_blocking's stack frame); freed by kn_xfer_free(). */
struct kn_http_xfer {
  kn_loop_t *loop; /* NULL when blocking */
  CURL *easy;
  struct curl_slist *headers;
  char *method;
  char *url;
  kn_buf_t body; /* the request body when copied or moved */
  const kn_http_opts_t *opts;

  int (*on_data)(void *opaque, const char *p, size_t n);
  void (*on_headers)(void *opaque, int status);
  kn_http_cb *cb;
  void *opaque;

  kn_http_resp_t resp;
  char errbuf[CURL_ERROR_SIZE];
  int64_t start_us;
  int headers_done;   /* the final status line and headers are in */
  int streaming;      /* 2xx with on_data: body bytes go to on_data */
  int require_h2;     /* KN_HTTP_2 over TLS: refuse an HTTP/1 answer */
  kn_err_t local_err; /* why a callback stopped the transfer */

  /* Loop bookkeeping (http.c). */
  int added;     /* in the multi handle */
  int cancelled; /* callback will never run; free when possible */
  int want_paused, paused;
  int on_dirty;
  struct kn_http_xfer *dirty_next;
  struct kn_http_xfer *prev, *next; /* the loop's live transfers */
};

/* curl_global_init, once per process (pthread_once); 0 or -1. */
int kn_curl_init_once(void);

/* Prepares x->easy (already created) for req: copies everything req
 * holds, or moves/borrows the body as req says.  Returns NULL or an
 * error. */
kn_error_t *kn_xfer_setup(struct kn_http_xfer *x, const kn_http_opts_t *opts,
                          const kn_http_req_t *req, int in_loop);

/* Fills x->resp after curl finished with rc: status, version and, on
 * failure, resp.error.  Logs the exchange at debug level. */
void kn_xfer_finish(struct kn_http_xfer *x, CURLcode rc);

/* Frees what x holds (easy handle included) but not x itself. */
void kn_xfer_cleanup(struct kn_http_xfer *x);

/* The event loop: loop.c owns the thread and queue, timer.c the heap,
 * http.c the transfers. */
struct kn_task {
  void (*fn)(void *arg);
  void *arg;
  struct kn_task *next;
  int allocated; /* freed after it ran; else the poster's (kn_loop_call) */
};

struct kn_timer {
  kn_loop_t *loop;
  void (*fn)(void *arg);
  void *arg;
  int64_t due_us;
  uint64_t seq; /* start order, breaks ties between equal dues */
  size_t idx;   /* heap slot, or KN_TIMER_IDLE */
  struct kn_timer *prev, *next; /* every timer of the loop */
};
#define KN_TIMER_IDLE ((size_t)-1)
#define KN_IDLE_EASY_MAX 16

struct kn_loop {
  kn_http_opts_t opts;
  char *ca_file; /* opts.ca_file points here */
  CURLM *multi;
  pthread_t thread;

  pthread_mutex_t lock; /* guards the fields up to the next comment */
  struct kn_task *q_head, *q_tail;
  int stopping;
  int wake_pending; /* a wakeup is on its way to curl_multi_poll */

  /* I/O thread only. */
  struct kn_timer **heap;
  size_t heap_len, heap_cap, n_timers;
  uint64_t timer_seq;
  struct kn_timer *timers;
  struct kn_http_xfer *xfers;
  struct kn_http_xfer *dirty;
  int in_curl; /* inside curl_multi_perform: no multi calls */
  kn_http_stats_t stats;
  /* Idle easy handles, reset and reused: making one per transfer costs
   * more than the small requests they carry. */
  CURL *idle[KN_IDLE_EASY_MAX];
  int n_idle;
};

/* timer.c */
void kn_timers_run(kn_loop_t *loop);
/* Milliseconds until the next timer is due (0: now), or -1 if none. */
long kn_timers_next_ms(const kn_loop_t *loop);
void kn_timers_free_all(kn_loop_t *loop);

/* http.c */
void kn_http_loop_apply(kn_loop_t *loop);    /* deferred adds, pauses, frees */
void kn_http_loop_done(kn_loop_t *loop);     /* completions and callbacks */
void kn_http_loop_drop_all(kn_loop_t *loop); /* and the idle handles */

#endif
