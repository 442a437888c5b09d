/* The event loop: one thread driving one CURLM with curl_multi_poll, a
 * task queue that other threads feed (waking the poll with
 * curl_multi_wakeup), and the timers of timer.c. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "aws/http_int.h"
#include "core/error.h"
#include "util/str.h"

/* The loop whose thread this is, so kn_loop_on_thread() needs no lock. */
static _Thread_local const kn_loop_t *current_loop;

/* Longest sleep when nothing is due: only bounds the damage of a missed
 * wakeup, which should not happen. */
#define KN_POLL_MAX_MS 1000

/* Takes the whole queue; returns the stopping flag seen with it. */
static struct kn_task *take_tasks(kn_loop_t *loop, int *stopping) {
  pthread_mutex_lock(&loop->lock);
  struct kn_task *t = loop->q_head;
  loop->q_head = loop->q_tail = NULL;
  loop->wake_pending = 0;
  *stopping = loop->stopping;
  pthread_mutex_unlock(&loop->lock);
  return t;
}

static void run_tasks(struct kn_task *t) {
  while (t) {
    /* Read before fn runs: a kn_loop_call() node is gone after it. */
    struct kn_task *next = t->next;
    int allocated = t->allocated;
    t->fn(t->arg);
    if (allocated) free(t);
    t = next;
  }
}

static int tasks_pending(kn_loop_t *loop) {
  pthread_mutex_lock(&loop->lock);
  int pending = loop->q_head != NULL;
  pthread_mutex_unlock(&loop->lock);
  return pending;
}

static int poll_timeout(kn_loop_t *loop) {
  long t = kn_timers_next_ms(loop);
  long c = -1;
  curl_multi_timeout(loop->multi, &c);
  if (t < 0 || (c >= 0 && c < t)) t = c;
  if (t < 0 || t > KN_POLL_MAX_MS) t = KN_POLL_MAX_MS;
  return (int)t;
}

static void *loop_main(void *arg) {
  kn_loop_t *loop = arg;
  current_loop = loop;
  /* Signals belong to the application's threads; a SIGPIPE from a reset
   * connection stays pending here instead of killing the process.  Not
   * this thread's own faults: blocked, they kill the process at once,
   * without the handler the application set (kncat's for SIGBUS, when a
   * file it sends from memory is truncated under a record in flight). */
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  pthread_sigmask(SIG_BLOCK, &all, NULL);

  int stopping = 0;
  for (;;) {
    run_tasks(take_tasks(loop, &stopping));
    if (stopping) break;
    kn_timers_run(loop);
    kn_http_loop_apply(loop);

    int timeout = poll_timeout(loop);
    if (timeout > 0 && !tasks_pending(loop))
      curl_multi_poll(loop->multi, NULL, 0, timeout, NULL);

    int running = 0;
    loop->in_curl = 1;
    curl_multi_perform(loop->multi, &running);
    loop->in_curl = 0;
    kn_http_loop_apply(loop);
    kn_http_loop_done(loop);
  }
  /* Stopping: posted work may own memory, so it runs; it cannot post
   * more (kn_loop_post fails now). */
  struct kn_task *t;
  while ((t = take_tasks(loop, &stopping)) != NULL) run_tasks(t);
  kn_http_loop_drop_all(loop);
  kn_timers_free_all(loop);
  current_loop = NULL;
  return NULL;
}

kn_loop_t *kn_loop_new(const kn_http_opts_t *opts, kn_error_t **errp) {
  *errp = NULL;
  if (kn_curl_init_once()) {
    *errp = kn_error_new(KN_ERR__FAIL, "libcurl failed to initialise");
    return NULL;
  }
  const curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
  if (opts->version == KN_HTTP_2_PRIOR && vi->version_num < 0x080000) {
    /* curl before 8.0.0 breaks HTTP/2 prior-knowledge connections when it
     * reuses them (curl issue 10634): every later request on them fails. */
    *errp =
        kn_error_new(KN_ERR__CONF,
                     "http.version=2-prior-knowledge needs libcurl 8.0.0 or "
                     "later (this is %s, which fails on reused connections)",
                     vi->version);
    return NULL;
  }
  kn_loop_t *loop = calloc(1, sizeof(*loop));
  if (!loop) goto nomem;
  loop->opts = *opts;
  if (opts->ca_file) {
    loop->ca_file = strdup(opts->ca_file);
    if (!loop->ca_file) goto nomem;
  }
  loop->opts.ca_file = loop->ca_file;
  loop->multi = curl_multi_init();
  if (!loop->multi) goto nomem;
  curl_multi_setopt(loop->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
  if (opts->max_connections > 0) {
    curl_multi_setopt(loop->multi, CURLMOPT_MAXCONNECTS, opts->max_connections);
    /* Without a cap, a burst of HTTP/1.1 requests opens one connection
     * each; with it they queue for a free one. */
    curl_multi_setopt(loop->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                      opts->max_connections);
  }
  if (pthread_mutex_init(&loop->lock, NULL)) goto nomem;
  int rc = pthread_create(&loop->thread, NULL, loop_main, loop);
  if (rc) {
    pthread_mutex_destroy(&loop->lock);
    curl_multi_cleanup(loop->multi);
    free(loop->ca_file);
    free(loop);
    *errp = kn_error_new(KN_ERR__FAIL, "cannot start the I/O thread: %s",
                         strerror(rc));
    return NULL;
  }
  return loop;

nomem:
  if (loop) {
    if (loop->multi) curl_multi_cleanup(loop->multi);
    free(loop->ca_file);
    free(loop);
  }
  *errp = kn_error_new(KN_ERR__NOMEM, "out of memory creating the I/O loop");
  return NULL;
}

void kn_loop_destroy(kn_loop_t *loop) {
  if (!loop) return;
  if (current_loop == loop) {
    /* Joining ourselves would hang; leaking is the lesser harm. */
    kn_err_log(loop->opts.log, "loop",
               "kn_loop_destroy called on the I/O thread");
    return;
  }
  pthread_mutex_lock(&loop->lock);
  loop->stopping = 1;
  pthread_mutex_unlock(&loop->lock);
  curl_multi_wakeup(loop->multi);
  pthread_join(loop->thread, NULL);
  curl_multi_cleanup(loop->multi);
  pthread_mutex_destroy(&loop->lock);
  free(loop->ca_file);
  free(loop);
}

/* Queues t (filled in, next NULL); -1 when the loop is stopping. */
static int enqueue(kn_loop_t *loop, struct kn_task *t) {
  pthread_mutex_lock(&loop->lock);
  if (loop->stopping) {
    pthread_mutex_unlock(&loop->lock);
    return -1;
  }
  if (loop->q_tail)
    loop->q_tail->next = t;
  else
    loop->q_head = t;
  loop->q_tail = t;
  /* One wakeup per batch of posts is enough: the loop takes them all.
   * Woken under the lock, so that destroy cannot free the multi handle
   * between our check of `stopping` and the wakeup. */
  if (!loop->wake_pending && current_loop != loop)
    curl_multi_wakeup(loop->multi);
  loop->wake_pending = 1;
  pthread_mutex_unlock(&loop->lock);
  return 0;
}

int kn_loop_post(kn_loop_t *loop, void (*fn)(void *arg), void *arg) {
  struct kn_task *t = malloc(sizeof(*t));
  if (!t) return -1;
  *t = (struct kn_task){.fn = fn, .arg = arg, .allocated = 1};
  int rc = enqueue(loop, t);
  if (rc) free(t);
  return rc;
}

struct call_wait {
  struct kn_task task; /* on the caller's stack: a call needs no memory */
  void (*fn)(void *arg);
  void *arg;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
};

static void call_task(void *arg) {
  struct call_wait *w = arg;
  w->fn(w->arg);
  pthread_mutex_lock(&w->lock);
  w->done = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

int kn_loop_call(kn_loop_t *loop, void (*fn)(void *arg), void *arg) {
  if (current_loop == loop) {
    fn(arg);
    return 0;
  }
  struct call_wait w = {.fn = fn, .arg = arg};
  if (pthread_mutex_init(&w.lock, NULL)) return -1;
  if (pthread_cond_init(&w.cond, NULL)) {
    pthread_mutex_destroy(&w.lock);
    return -1;
  }
  w.task = (struct kn_task){.fn = call_task, .arg = &w};
  int rc = enqueue(loop, &w.task);
  if (rc == 0) {
    pthread_mutex_lock(&w.lock);
    while (!w.done) pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
  }
  pthread_cond_destroy(&w.cond);
  pthread_mutex_destroy(&w.lock);
  return rc;
}

int kn_loop_on_thread(const kn_loop_t *loop) { return current_loop == loop; }

const kn_logger_t *kn_loop_logger(const kn_loop_t *loop) {
  return loop->opts.log;
}
