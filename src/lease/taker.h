/* Lease taking and expiry, as pure functions of a table snapshot and a
 * monotonic clock (no I/O, no wall clocks compared across hosts).
 *
 * Expiry is judged by observation: a lease whose counter has not changed
 * for `duration_ms` on the observer's own clock has not been renewed and
 * is expired, whoever the owner claims to be. */
#ifndef KN_LEASE_TAKER_H
#define KN_LEASE_TAKER_H

#include <stddef.h>
#include <stdint.h>

#include "lease/lease.h"
#include "util/strmap.h"

/* What the observer remembers of one lease. */
typedef struct kn_lease_obs {
  char *key;
  char *owner;        /* as last seen, or NULL */
  int64_t counter;    /* as last seen */
  int64_t changed_ms; /* observer's clock when the counter last changed */
} kn_lease_obs_t;

typedef struct kn_lease_observer {
  kn_lease_obs_t *v;
  size_t n, cap;
  kn_strmap_t idx; /* key -> entry of v (keys borrowed from v) */
} kn_lease_observer_t;

void kn_lease_observer_init(kn_lease_observer_t *o);
void kn_lease_observer_free(kn_lease_observer_t *o);
/* Records a snapshot of the table taken at now_ms; forgets leases that are
 * gone.  Returns 0, or -1 on out-of-memory. */
int kn_lease_observer_update(kn_lease_observer_t *o, const kn_lease_t *v,
                             size_t n, int64_t now_ms);
/* The observation of key, or NULL. */
const kn_lease_obs_t *kn_lease_observer_get(const kn_lease_observer_t *o,
                                            const char *key);
/* Free, or not renewed for duration_ms as seen by this observer.  A lease
 * seen for the first time counts as renewed at that moment. */
int kn_lease_is_expired(const kn_lease_observer_t *o, const kn_lease_t *l,
                        int64_t now_ms, int64_t duration_ms);

typedef struct kn_take_params {
  const char *worker; /* this worker's id */
  int64_t now_ms;
  int64_t duration_ms;
  int max_leases; /* 0: no limit */
  int max_steal;  /* leases stolen per round at most */
  /* No stealing while a worker counted as live has renewed none of its
   * leases for this long (it is probably dead: its leases expire soon
   * and are taken without moving a live worker's); 0: no such pause. */
  int64_t quiet_ms;
} kn_take_params_t;

typedef struct kn_take_plan {
  size_t *take; /* indexes into the snapshot: expired or free leases */
  size_t n_take;
  size_t *steal; /* indexes: leases of the most loaded worker */
  size_t n_steal;
  size_t target;  /* leases this worker should hold */
  size_t workers; /* live workers counted, this one included */
  size_t held;    /* leases this worker holds now (unexpired) */
} kn_take_plan_t;

/* A lease may be read: not finished, and every parent finished (its lease
 * at SHARD_END) or absent from the table. */
int kn_lease_is_ready(const kn_lease_t *l, const kn_lease_t *all, size_t n);

/* Decides which leases to take this round.  Counted: ready leases only.
 * Live workers: owners of at least one unexpired lease, plus this one.
 * target = ceil(ready leases / live workers), capped by max_leases.  Takes
 * expired or free ready leases first (in table order, spreading takers by
 * worker id hash so workers starting together pick different leases);
 * if still below target, steals up to max_steal from the worker holding
 * the most, and only while that worker holds more than target -- or one
 * lease from a worker at target when this one is short of more than one
 * (as the KCL does, so a worker with no lease is not left idle).
 * Returns 0, or -1 on out-of-memory. */
int kn_take_plan(const kn_lease_t *v, size_t n, const kn_lease_observer_t *o,
                 const kn_take_params_t *p, kn_take_plan_t *plan);
void kn_take_plan_free(kn_take_plan_t *plan);

#endif
