/* The control thread's mailbox and the application's events: the two
 * queues through which the other threads talk to the control thread and
 * to the application's poll (consumer_int.h: kc->ctl_*, kc->ev_*).  Any
 * thread posts; nothing here waits. */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/store_job.h"
#include "core/error.h"

static void enqueue_ctl_locked(kn_consumer_t *kc, kn_ctl_msg_t *m) {
  m->next = NULL;
  if (kc->ctl_tail)
    kc->ctl_tail->next = m;
  else
    kc->ctl_head = m;
  kc->ctl_tail = m;
  kc->ctl_pending++;
  if (m->kind == KN_CTL_CLOSE) kc->ctl_closing = 1;
  /* Every waiter: the control thread, and a registration sleeping on the
   * fan-out check thread until the close. */
  pthread_cond_broadcast(&kc->ctl_cv);
}

void kn_control_post_msg_locked(kn_consumer_t *kc, kn_ctl_msg_t *m) {
  pthread_mutex_lock(&kc->ctl_mu);
  enqueue_ctl_locked(kc, m);
  pthread_mutex_unlock(&kc->ctl_mu);
}

int kn_control_post_request(kn_consumer_t *kc, kn_ctl_msg_t *m) {
  pthread_mutex_lock(&kc->ctl_mu);
  int open = kc->ctl_open;
  if (open) enqueue_ctl_locked(kc, m);
  pthread_mutex_unlock(&kc->ctl_mu);
  return open ? 0 : -1;
}

void kn_control_handled(kn_consumer_t *kc, int n) {
  pthread_mutex_lock(&kc->ctl_mu);
  kc->ctl_pending -= n;
  pthread_mutex_unlock(&kc->ctl_mu);
}

int kn_control_pending(kn_consumer_t *kc) {
  pthread_mutex_lock(&kc->ctl_mu);
  int n = kc->ctl_pending;
  pthread_mutex_unlock(&kc->ctl_mu);
  return n;
}

/* The message, or NULL: then the consumer must fail (lost, a message
 * would leave a shard unfinished) with *err, or out of memory. */
static kn_ctl_msg_t *make(kn_ctl_kind_t kind, kn_cshard_t *cs, int64_t tenure,
                          kn_error_t **err, kn_shard_list_t *children) {
  kn_ctl_msg_t *m = calloc(1, sizeof(*m));
  if (!m) {
    if (!*err) *err = kn_error_new(KN_ERR__NOMEM, "out of memory");
    kn_shard_list_destroy(children);
    return NULL;
  }
  m->kind = kind;
  m->cs = cs;
  m->tenure = tenure;
  m->err = *err;
  m->children = children;
  return m;
}

static void post_locked(kn_consumer_t *kc, kn_ctl_kind_t kind, kn_cshard_t *cs,
                        int64_t tenure, kn_error_t *err,
                        kn_shard_list_t *children) {
  kn_ctl_msg_t *m = make(kind, cs, tenure, &err, children);
  if (m) {
    kn_control_post_msg_locked(kc, m);
    return;
  }
  if (!kc->fatal) /* mu held */
    kc->fatal = err;
  else
    kn_error_destroy(err);
  pthread_cond_broadcast(&kc->poll_cv);
}

/* The same without mu. */
static void post(kn_consumer_t *kc, kn_ctl_kind_t kind, kn_cshard_t *cs,
                 int64_t tenure, kn_error_t *err, kn_shard_list_t *children) {
  kn_ctl_msg_t *m = make(kind, cs, tenure, &err, children);
  if (m)
    kn_control_post_msg_locked(kc, m);
  else
    kn_consumer_set_fatal(kc, err);
}

void kn_control_post_locked(kn_consumer_t *kc, kn_ctl_kind_t kind,
                            kn_cshard_t *cs, kn_error_t *err,
                            kn_shard_list_t *children) {
  post_locked(kc, kind, cs, 0, err, children);
}

void kn_control_post(kn_consumer_t *kc, kn_ctl_kind_t kind, kn_cshard_t *cs,
                     kn_error_t *err, kn_shard_list_t *children) {
  post(kc, kind, cs, 0, err, children);
}

void kn_control_post_tenure(kn_consumer_t *kc, kn_ctl_kind_t kind,
                            kn_cshard_t *cs, int64_t tenure, kn_error_t *err,
                            kn_shard_list_t *children) {
  post(kc, kind, cs, tenure, err, children);
}

void kn_control_msg_free(kn_ctl_msg_t *m) {
  kn_error_destroy(m->err);
  kn_shard_list_destroy(m->children);
  kn_store_job_free(m->job);
  free(m);
}

/* ---- the consumer's failure ---- */

void kn_consumer_set_fatal(kn_consumer_t *kc, kn_error_t *err) {
  pthread_mutex_lock(&kc->mu);
  if (!kc->fatal) {
    kc->fatal = err;
    err = NULL;
  }
  pthread_cond_broadcast(&kc->poll_cv);
  pthread_mutex_unlock(&kc->mu);
  kn_error_destroy(err);
}

int kn_consumer_is_fatal(kn_consumer_t *kc) {
  pthread_mutex_lock(&kc->mu);
  int f = kc->fatal != NULL;
  pthread_mutex_unlock(&kc->mu);
  return f;
}

/* ---- the application's events ---- */

void kn_app_event_locked(kn_consumer_t *kc, kn_app_ev_kind_t kind,
                         const char *shard_id, int64_t token, kn_err_t reason,
                         void *state, size_t state_len) {
  kn_app_ev_t *e = calloc(1, sizeof(*e));
  if (e) e->shard_id = strdup(shard_id);
  if (!e || !e->shard_id) {
    free(e);
    free(state);
    return; /* the callback is informational; reading goes on */
  }
  e->kind = kind;
  e->token = token;
  e->reason = reason;
  e->state = state;
  e->state_len = state_len;
  if (kc->ev_tail)
    kc->ev_tail->next = e;
  else
    kc->ev_head = e;
  kc->ev_tail = e;
  pthread_cond_signal(&kc->poll_cv);
}
