/* The store threads of lease mode (store_pool.h). */
#include "consumer/store_pool.h"

#include <stdlib.h>
#include <string.h>

#include "consumer/efo.h"
#include "core/error.h"
#include "lease/store.h"
#include "util/clock.h"

/* ListShards, unfiltered, as the core's shard view. */
static kn_error_t *list_shards(kn_consumer_t *kc, kn_store_job_t *j) {
  kn_error_t *err = kn_list_shards(kc->client, kc->stream, KN_SHARD_FILTER_NONE,
                                   NULL, 0, &j->list);
  if (err) return kn_error_prefix(err, "stream \"%s\"", kc->stream);
  if (kn_store_job_view_shards(j))
    return kn_error_new(KN_ERR__NOMEM, "out of memory");
  return NULL;
}

static void check_stream(kn_consumer_t *kc, kn_store_job_t *j) {
  kn_stream_summary_t *sum = NULL;
  int64_t t0 = kn_mono_us();
  j->sent_ms = kn_mono_ms();
  j->err = kn_describe_stream_summary(kc->client, kc->stream, &sum);
  kn_stream_summary_destroy(sum);
  j->took_us = kn_mono_us() - t0;
}

static void run(kn_consumer_t *kc, kn_store_job_t *j) {
  if (j->stream_check) {
    check_stream(kc, j);
    return;
  }
  if (j->efo_check) {
    kn_efo_check(kc, j->cs, j->tenure, j->why);
    return;
  }
  int64_t t0 = kn_mono_us();
  j->sent_ms = kn_mono_ms();
  if (j->op == KN_CC_LIST_SHARDS)
    j->err = list_shards(kc, j);
  else
    kn_store_job_apply(kc->ls, kc->worker_id, j);
  j->took_us = kn_mono_us() - t0;
}

/* ---- the pool ---- */

struct kn_store_pool {
  kn_consumer_t *kc;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  kn_store_job_t *urgent, *urgent_tail; /* renewals */
  kn_store_job_t *head, *tail;          /* everything else */
  int stop;
  pthread_t *threads;
  int n_threads;
};

static kn_store_job_t *pop_locked(kn_store_pool_t *p) {
  kn_store_job_t **h = p->urgent ? &p->urgent : &p->head;
  kn_store_job_t **t = p->urgent ? &p->urgent_tail : &p->tail;
  kn_store_job_t *j = *h;
  if (!j) return NULL;
  *h = j->next;
  if (!*h) *t = NULL;
  j->next = NULL;
  return j;
}

static void post_result(kn_consumer_t *kc, kn_store_job_t *j) {
  kn_ctl_msg_t *m = calloc(1, sizeof(*m));
  pthread_mutex_lock(&kc->mu);
  if (m) {
    m->kind = KN_CTL_STORE_DONE;
    m->job = j;
    kn_control_post_msg_locked(kc, m);
  } else if (!kc->fatal) {
    /* The core would wait for this answer for ever. */
    kc->fatal = kn_error_new(KN_ERR__NOMEM, "out of memory");
    pthread_cond_broadcast(&kc->poll_cv);
  }
  pthread_mutex_unlock(&kc->mu);
  if (!m) kn_store_job_free(j);
}

static void *pool_main(void *arg) {
  kn_store_pool_t *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    kn_store_job_t *j = NULL;
    while (!p->stop && !(j = pop_locked(p))) pthread_cond_wait(&p->cv, &p->mu);
    if (!j) break;
    pthread_mutex_unlock(&p->mu);
    run(p->kc, j);
    post_result(p->kc, j);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

kn_store_pool_t *kn_store_pool_new(kn_consumer_t *kc, int n) {
  kn_store_pool_t *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->kc = kc;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL); /* untimed waits only */
  p->threads = calloc((size_t)n, sizeof(pthread_t));
  for (int i = 0; p->threads && i < n; i++) {
    if (pthread_create(&p->threads[i], NULL, pool_main, p)) break;
    p->n_threads++;
  }
  if (p->n_threads == 0) {
    kn_store_pool_destroy(p);
    return NULL;
  }
  return p;
}

void kn_store_pool_submit(kn_store_pool_t *p, kn_store_job_t *j) {
  j->next = NULL;
  pthread_mutex_lock(&p->mu);
  /* Renewals first; a hand-off's look is as urgent (its end waits on
   * it). */
  int urgent =
      j->op == KN_CC_RENEW || j->op == KN_CC_GET || j->op == KN_CC_HEARTBEAT;
  kn_store_job_t **h = urgent ? &p->urgent : &p->head;
  kn_store_job_t **t = urgent ? &p->urgent_tail : &p->tail;
  if (*t)
    (*t)->next = j;
  else
    *h = j;
  *t = j;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

void kn_store_pool_destroy(kn_store_pool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  kn_store_job_t *j;
  while ((j = pop_locked(p))) kn_store_job_free(j);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
