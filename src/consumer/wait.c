/* kn_consumer_wait(): waiting for the next poll to have work, without
 * polling (event loops that poll only when something is there). */
#include <errno.h>

#include "consumer/consumer_int.h"
#include "util/clock.h"
#include "util/cond.h"

static int ready_locked(const kn_consumer_t *kc) {
  return kc->q_head || kc->ev_head || kc->fatal || kc->closing;
}

int kn_consumer_wait(kn_consumer_t *kc, int timeout_ms) {
  int64_t deadline = timeout_ms > 0 ? kn_mono_ms() + timeout_ms : 0;
  pthread_mutex_lock(&kc->mu);
  int ready = ready_locked(kc);
  while (!ready && timeout_ms != 0) {
    if (timeout_ms < 0)
      pthread_cond_wait(&kc->poll_cv, &kc->mu);
    else if (kn_cond_wait_until(&kc->poll_cv, &kc->mu, deadline) == ETIMEDOUT)
      timeout_ms = 0; /* one last look below */
    ready = ready_locked(kc);
  }
  pthread_mutex_unlock(&kc->mu);
  return ready;
}
