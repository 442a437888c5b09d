/* The control thread's mailbox and the application's events: the two
 * queues through which the other threads talk to the control thread and
 * to the application's poll (consumer_int.h: kc->ctl_*, kc->ev_*).  Any
 * thread posts; nothing here waits. */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/store_job.h"
#include "core/error.h"

void kn_control_post_msg_locked(kn_consumer_t *kc, kn_ctl_msg_t *m) {
  m->next = NULL;
  if (kc->ctl_tail)
    kc->ctl_tail->next = m;
  else
    kc->ctl_head = m;
  kc->ctl_tail = m;
  kc->ctl_pending++;
  pthread_cond_signal(&kc->ctl_cv);
}

static void post_locked(kn_consumer_t *kc, kn_ctl_kind_t kind, kn_cshard_t *cs,
                        int64_t tenure, kn_error_t *err,
                        kn_shard_list_t *children) {
  kn_ctl_msg_t *m = calloc(1, sizeof(*m));
  if (!m) {
    /* Losing a message would leave a shard unfinished; failing the
     * consumer is the honest outcome. */
    if (!kc->fatal)
      kc->fatal = err ? err : kn_error_new(KN_ERR__NOMEM, "out of memory");
    else
      kn_error_destroy(err);
    kn_shard_list_destroy(children);
    pthread_cond_broadcast(&kc->poll_cv);
    return;
  }
  m->kind = kind;
  m->cs = cs;
  m->tenure = tenure;
  m->err = err;
  m->children = children;
  kn_control_post_msg_locked(kc, m);
}

void kn_control_post_locked(kn_consumer_t *kc, kn_ctl_kind_t kind,
                            kn_cshard_t *cs, kn_error_t *err,
                            kn_shard_list_t *children) {
  post_locked(kc, kind, cs, 0, err, children);
}

void kn_control_post(kn_consumer_t *kc, kn_ctl_kind_t kind, kn_cshard_t *cs,
                     kn_error_t *err, kn_shard_list_t *children) {
  pthread_mutex_lock(&kc->mu);
  post_locked(kc, kind, cs, 0, err, children);
  pthread_mutex_unlock(&kc->mu);
}

void kn_control_post_tenure(kn_consumer_t *kc, kn_ctl_kind_t kind,
                            kn_cshard_t *cs, int64_t tenure, kn_error_t *err,
                            kn_shard_list_t *children) {
  pthread_mutex_lock(&kc->mu);
  post_locked(kc, kind, cs, tenure, err, children);
  pthread_mutex_unlock(&kc->mu);
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
