/* The credentials provider's state, shared by creds.c and the unit tests'
 * clock hooks (tests/support/creds_hooks.c), which are not part of the
 * library. */
#ifndef KN_AWS_CREDS_PROVIDER_H
#define KN_AWS_CREDS_PROVIDER_H

#include <pthread.h>
#include <stdint.h>

#include "aws/creds_int.h"

struct step; /* a step of the chain (creds.c) */

/* The chain runs on a thread of the provider's own, never on a caller's:
 * callers (the I/O thread above all) read the cache, and when it needs a
 * refresh they ask for one and go on with the cached keys, or wait for
 * the result only if they have nothing usable. */
struct kn_creds_provider {
  pthread_mutex_t lock;
  pthread_cond_t cond;       /* the refresher's wake-up and every waiter's */
  kn_creds_ctx_t ctx;        /* the refresher thread's only */
  const struct step *winner; /* the refresher thread's only */
  /* The rest under lock. */
  kn_creds_t cached;    /* valid when cached.access_key_id is set */
  kn_error_t *last_err; /* why the last fetch failed, until one works */
  uint64_t done;        /* fetches finished, to tell waiters apart */
  int want;             /* a fetch is asked for */
  int busy;             /* a fetch is running */
  int stop;
  int started; /* the thread runs (started on first use) */
  pthread_t thread;
  int64_t next_attempt_mono_ms; /* earliest refresh while the cache is usable */
  int64_t mono_ahead_ms; /* added to the monotonic clock (tests' advance) */
  int mono_frozen;       /* tests: the clock moves by advance only */
  int64_t mono_frozen_ms;
};

#endif
