/* Membership by observation: what one worker knows of the others from
 * the heartbeats its own heartbeat calls return (store.h), as a pure
 * function of those answers and a monotonic clock.
 *
 * A member whose beat has not changed for a lease duration on the
 * observer's clock is dead, as a lease whose counter stood still is
 * expired (taker.h); a worker stops reading when its own heartbeat has
 * not been written for less than that (ccore.h), so the leases of a dead
 * member may be taken at once. */
#ifndef KN_LEASE_MEMBERS_H
#define KN_LEASE_MEMBERS_H

#include <stddef.h>
#include <stdint.h>

#include "lease/lease.h"

typedef struct kn_mview_ent {
  char *worker;
  int64_t beat, leases;
  int64_t changed_ms; /* observer's clock when the beat last changed */
  int dead;           /* counted dead (it never comes back to life: a
                         later beat makes it a new member) */
  int bucket;         /* the membership item it beats in */
  int remote;         /* not observed: known from a roster read only
                         (kn_mview_set_remote), never counted dead */
} kn_mview_ent_t;

typedef struct kn_mview {
  kn_mview_ent_t *v; /* sorted by worker id; owned */
  size_t n;
  int64_t epoch;
  uint64_t deaths; /* members counted dead so far */
  uint64_t joins;  /* members seen for the first time (after the first
                      answer) */
  /* Entries that are no members (kn_members_t.bad), watched the same way
   * so that those that stay unchanged can be forgotten; never counted in
   * deaths, never looked up by kn_mview_get. */
  kn_mview_ent_t *bad;
  size_t n_bad;
} kn_mview_t;

void kn_mview_init(kn_mview_t *m);
void kn_mview_free(kn_mview_t *m);
/* Records an answer received at now_ms; members unchanged for
 * duration_ms are counted dead.  The answer's members are observed; remote
 * entries of workers it does not hold stay.  in must hold each worker
 * once.  Returns 0, or -1 on out-of-memory (the view is then
 * unchanged). */
int kn_mview_update(kn_mview_t *m, const kn_members_t *in, int64_t now_ms,
                    int64_t duration_ms);
/* Replaces the remote entries by roster's members that the view does not
 * observe (each worker once); 0, or -1 on out-of-memory (unchanged). */
int kn_mview_set_remote(kn_mview_t *m, const kn_members_t *roster,
                        int64_t now_ms);
/* The entry of worker, or NULL. */
const kn_mview_ent_t *kn_mview_get(const kn_mview_t *m, const char *worker);
/* Non-zero when worker is a member counted dead. */
int kn_mview_is_dead(const kn_mview_t *m, const char *worker);
/* Live members. */
size_t kn_mview_live(const kn_mview_t *m);
/* The live observed member with the lowest id in item `bucket`, or
 * NULL. */
const char *kn_mview_leader(const kn_mview_t *m, int bucket);

#endif
