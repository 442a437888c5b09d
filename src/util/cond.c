#include "util/cond.h"

#include <errno.h>
#include <time.h>

#include "util/clock.h"

int kn_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc) return rc;
  rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (!rc) rc = pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
  return rc;
}

int kn_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
                       int64_t deadline_ms) {
  if (kn_mono_ms() >= deadline_ms) return ETIMEDOUT;
  struct timespec ts = {(time_t)(deadline_ms / 1000),
                        (long)(deadline_ms % 1000) * 1000000};
  int rc = pthread_cond_timedwait(cv, mu, &ts);
  return rc == ETIMEDOUT ? ETIMEDOUT : 0;
}
