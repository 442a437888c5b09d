/* The renewer: keeps this worker's leases alive on its own thread, every
 * lease.renew.interval.ms, whatever the application or the control thread
 * are doing.  A renewal refused by the table means another worker has the
 * lease: the shard stops at once.  When the table cannot be reached, held
 * shards go on being read until the lease could have expired in the eyes
 * of other workers (lease.duration.ms less half a renewal interval after
 * the last good write was sent), then stop.  The readers and poll judge
 * that time themselves (kn_cshard_t.lease_until_ms), so a renewal hanging
 * in an unreachable store -- retries, a locked SQLite file -- cannot keep
 * a shard going past it. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "consumer/consumer_int.h"
#include "core/error.h"
#include "lease/store.h"
#include "util/clock.h"
#include "util/cond.h"

static void renew_one(kn_consumer_t *kc, kn_cshard_t *cs) {
  pthread_mutex_lock(&kc->lease_mu);
  if (!cs->held) {
    pthread_mutex_unlock(&kc->lease_mu);
    return;
  }
  int64_t t0 = kn_mono_us();
  int64_t sent_ms = kn_mono_ms();
  int64_t counter = 0;
  kn_error_t *err = kc->ls->ops->renew(kc->ls, cs->id, cs->counter,
                                       kc->worker_id, &counter);
  int64_t took = kn_mono_us() - t0;
  pthread_mutex_lock(&kc->mu);
  kc->lstats.renewals++;
  kc->lstats.renew_failures += err != NULL;
  kc->lstats.renew_last_us = took;
  if (took > kc->lstats.renew_max_us) kc->lstats.renew_max_us = took;
  pthread_mutex_unlock(&kc->mu);
  int lost = 0;
  if (!err) {
    cs->counter = counter;
    kn_coord_publish(kc, cs);
    /* Renewed too late: the shard has stopped (or is stopping) already;
     * the lease is left to expire and be taken again. */
    lost = kn_coord_extend(kc, cs, sent_ms) != 0;
    if (lost)
      err = kn_error_new(KN_ERR__TIMED_OUT, "renewed after the grace period "
                         "(%lld ms) had run out",
                         (long long)kc->lease.grace_ms);
  } else {
    lost = kn_error_code(err) == KN_ERR_CONDITIONAL_CHECK_FAILED ||
           kn_mono_ms() - cs->last_renew_ms >= kc->lease.grace_ms;
    if (!lost)
      kn_warn(&kc->log, "RENEW", "shard %s: %s (still held)", cs->id,
              kn_error_string(err));
  }
  pthread_mutex_unlock(&kc->lease_mu);
  if (lost) {
    kn_warn(&kc->log, "RENEW", "shard %s: lease lost: %s", cs->id,
            kn_error_string(err));
    kn_coord_lost(kc, cs, KN_ERR__LEASE_LOST);
  }
  kn_error_destroy(err);
}

static void *renewer_main(void *arg) {
  kn_consumer_t *kc = arg;
  pthread_mutex_lock(&kc->lease_mu);
  while (!kc->renewer_stop) {
    int64_t until = kn_mono_ms() + kc->lease.renew_ms;
    while (!kc->renewer_stop &&
           kn_cond_wait_until(&kc->renewer_cv, &kc->lease_mu, until) !=
               ETIMEDOUT) {
    }
    if (kc->renewer_stop) break;
    pthread_mutex_unlock(&kc->lease_mu);

    pthread_mutex_lock(&kc->mu);
    size_t n = kc->n_shards;
    kn_cshard_t **v = malloc((n ? n : 1) * sizeof(*v));
    if (v)
      for (size_t i = 0; i < n; i++) v[i] = kc->shards[i];
    pthread_mutex_unlock(&kc->mu);
    for (size_t i = 0; v && i < n; i++) renew_one(kc, v[i]);
    free(v);

    pthread_mutex_lock(&kc->lease_mu);
  }
  pthread_mutex_unlock(&kc->lease_mu);
  return NULL;
}

int kn_renewer_start(kn_consumer_t *kc) {
  if (pthread_create(&kc->renewer_thread, NULL, renewer_main, kc)) return -1;
  kc->renewer_started = 1;
  return 0;
}

void kn_renewer_stop(kn_consumer_t *kc) {
  if (!kc->renewer_started) return;
  pthread_mutex_lock(&kc->lease_mu);
  kc->renewer_stop = 1;
  pthread_cond_broadcast(&kc->renewer_cv);
  pthread_mutex_unlock(&kc->lease_mu);
  pthread_join(kc->renewer_thread, NULL);
  kc->renewer_started = 0;
}
