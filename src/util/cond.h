/* Condition variables that wait on the monotonic clock, so a wall clock
 * stepped back or forward neither stalls nor hurries a timed wait. */
#ifndef KN_UTIL_COND_H
#define KN_UTIL_COND_H

#include <pthread.h>
#include <stdint.h>

/* pthread_cond_init with CLOCK_MONOTONIC; 0 or an errno value. */
int kn_cond_init(pthread_cond_t *cv);
/* Waits on cv (mu held) until signalled or until the monotonic time
 * deadline_ms (kn_mono_ms() scale).  Returns 0 when woken (possibly
 * spuriously), ETIMEDOUT once the deadline has passed. */
int kn_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
                       int64_t deadline_ms);

#endif
