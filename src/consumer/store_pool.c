/* The store threads of lease mode (store_pool.h). */
#include "consumer/store_pool.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lease/store.h"
#include "util/clock.h"
#include "util/str.h"

/* ---- jobs ---- */

static int dup_opt(char **dst, const char *src) {
  *dst = NULL;
  if (!src) return 0;
  *dst = strdup(src);
  return *dst ? 0 : -1;
}

kn_store_job_t *kn_store_job_new(const kn_cc_action_t *a) {
  kn_store_job_t *j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->op = a->op;
  j->id = a->id;
  j->tenure = a->tenure;
  j->counter = a->counter;
  j->steal = a->steal;
  j->subseq = a->subseq;
  j->pending_subseq = a->pending_subseq;
  j->beat = a->beat;
  j->n_held = a->leases;
  j->bump = a->bump;
  int rc = dup_opt(&j->key, a->key);
  rc |= dup_opt(&j->old_owner, a->old_owner);
  if (a->op == KN_CC_CREATE && a->lease)
    rc |= kn_lease_copy(&j->lease, a->lease);
  if (a->op == KN_CC_CHECKPOINT) {
    rc |= dup_opt(&j->checkpoint, a->checkpoint);
    rc |= dup_opt(&j->pending, a->pending);
    if (a->state && a->state_len) {
      j->state = malloc(a->state_len);
      if (j->state) {
        memcpy(j->state, a->state, a->state_len);
        j->state_len = a->state_len;
      } else {
        rc = -1;
      }
    }
  }
  char *const *names = a->op == KN_CC_HEARTBEAT ? a->forget : a->children;
  size_t n_names = a->op == KN_CC_HEARTBEAT ? a->n_forget : a->n_children;
  if ((a->op == KN_CC_SET_CHILDREN || a->op == KN_CC_HEARTBEAT) && n_names) {
    j->children = calloc(n_names, sizeof(char *));
    if (!j->children) rc = -1;
    for (size_t i = 0; j->children && i < n_names; i++) {
      rc |= dup_opt(&j->children[i], names[i]);
      j->n_children++;
    }
  }
  if (rc) {
    kn_store_job_free(j);
    return NULL;
  }
  return j;
}

kn_store_job_t *kn_store_job_stream_check(kn_cshard_t *cs, int64_t tenure) {
  kn_store_job_t *j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->stream_check = 1;
  j->op = KN_CC_LOG;
  j->cs = cs;
  j->tenure = tenure;
  return j;
}

void kn_store_job_free(kn_store_job_t *j) {
  if (!j) return;
  free(j->key);
  free(j->old_owner);
  kn_lease_clear(&j->lease);
  free(j->checkpoint);
  free(j->pending);
  free(j->state);
  for (size_t i = 0; i < j->n_children; i++) free(j->children[i]);
  free(j->children);
  kn_error_destroy(j->err);
  free(j->handoff_to);
  kn_members_clear(&j->members);
  kn_lease_clear(&j->got);
  kn_lease_array_free(j->leases, j->n_leases);
  kn_shard_list_destroy(j->list);
  free(j->shards);
  free(j);
}

/* ListShards, unfiltered, as the core's shard view. */
static kn_error_t *list_shards(kn_consumer_t *kc, kn_store_job_t *j) {
  kn_error_t *err = kn_list_shards(kc->client, kc->stream, KN_SHARD_FILTER_NONE,
                                   NULL, 0, &j->list);
  if (err) return kn_error_prefix(err, "stream \"%s\"", kc->stream);
  size_t n = kn_shard_list_count(j->list);
  j->shards = calloc(n ? n : 1, sizeof(*j->shards));
  if (!j->shards) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    const kn_shard_t *s = kn_shard_list_get(j->list, i);
    kn_cc_shard_t *c = &j->shards[i];
    c->id = kn_shard_id(s);
    c->parent = kn_shard_parent_id(s);
    c->adjacent = kn_shard_adjacent_parent_id(s);
    c->hash_start = kn_shard_hash_key_start(s);
    c->hash_end = kn_shard_hash_key_end(s);
    c->closed = !kn_shard_is_open(s);
  }
  j->n_shards = n;
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
  kn_lease_store_t *ls = kc->ls;
  const kn_lease_store_ops_t *o = ls->ops;
  const char *w = kc->worker_id;
  kn_error_t *err = NULL;
  int64_t t0 = kn_mono_us();
  j->sent_ms = kn_mono_ms();
  switch (j->op) {
    case KN_CC_LIST_LEASES:
      err = o->list(ls, &j->leases, &j->n_leases);
      break;
    case KN_CC_LIST_SHARDS:
      err = list_shards(kc, j);
      break;
    case KN_CC_CREATE:
      err = o->create(ls, &j->lease);
      break;
    case KN_CC_TAKE:
      err = o->take(ls, j->key, j->counter, j->old_owner, w, &j->new_counter);
      break;
    case KN_CC_RENEW:
      err =
          o->renew(ls, j->key, j->counter, w, &j->new_counter, &j->handoff_to);
      break;
    case KN_CC_GET:
      err = o->get(ls, j->key, &j->got);
      break;
    case KN_CC_HANDOFF:
      err = o->handoff(ls, j->key, j->counter, j->old_owner, w);
      break;
    case KN_CC_HANDOFF_DONE:
      err = o->handoff_done(ls, j->key, j->counter, w, &j->new_counter);
      break;
    case KN_CC_CHECKPOINT:
      err = o->checkpoint(ls, j->key, j->counter, w, j->checkpoint, j->subseq,
                          j->pending, j->pending_subseq, j->state, j->state_len,
                          &j->new_counter, &j->handoff_to);
      break;
    case KN_CC_RELEASE:
      err = o->release(ls, j->key, j->counter, w, &j->new_counter);
      break;
    case KN_CC_REMOVE:
      err = o->remove(ls, j->key, j->counter);
      break;
    case KN_CC_SET_CHILDREN:
      err = o->set_children(ls, j->key, j->children, j->n_children);
      break;
    case KN_CC_HEARTBEAT:
      err = o->heartbeat ? o->heartbeat(ls, w, j->beat, j->n_held, j->bump,
                                        j->children, j->n_children, &j->members)
                         : kn_error_new(KN_ERR__UNSUPPORTED,
                                        "this lease store keeps no membership");
      break;
    default:
      err = kn_error_new(KN_ERR__FAIL, "not a store call: %s",
                         kn_cc_op_name(j->op));
      break;
  }
  /* The core says which call on which shard. */
  if (err && j->op != KN_CC_LIST_SHARDS)
    err = kn_error_prefix(err, "lease store %s", ls->name);
  j->err = err;
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
