/* The coordination core: one worker's shard and lease decisions, without
 * I/O, threads, locks or clocks (in the style of producer/core.h).
 *
 * It takes events -- results of lease-store calls and shard listings,
 * reader reports, the application's progress, the time as now_ms -- and
 * returns actions to carry out: lease-store calls, ListShards, start or
 * stop reading a shard, extend a shard's reading deadline, report to the
 * application.  The consumer's driver thread (control.c) runs it against
 * the real store and readers; the simulator (tests/sim) runs many of them
 * against a simulated store and stream on virtual time.
 *
 * Tenure.  Every lease this worker takes starts a tenure, named by the
 * lease counter the take wrote (the application's fencing token).
 * Reader reports and store results carry the tenure they belong to; the
 * core ignores those of a tenure that has ended, so a late "shard ended"
 * or a late renewal can never touch a later tenure of the same shard.
 *
 * Decisions, in short:
 * - sync (kn_cc_plan_sync): ListShards and the lease table give the leases
 *   to create.  Every open shard gets one; a closed shard gets one when a
 *   descendant is created and its records are wanted (it descends from a
 *   shard the application has read, or the initial position is not
 *   LATEST).  A shard with a leased descendant is finished and never
 *   created again.  Parents are created before their children.
 * - cleanup (kn_cc_plan_cleanup): a lease at SHARD_END is removed once every
 *   child has a lease that has started and none of its own parents has a
 *   lease left.
 * - taking: expiry by observation and the take plan of lease/taker.h.
 * - renewal: every renew interval per held lease, one store write at a time
 *   per lease, all leases concurrently; a shard is read until
 *   `grace_ms` after the last good write was sent, and dropped then.
 * - checkpoints: conditional on the counter; SHARD_END once the application
 *   has been handed (and, with manual checkpoints, has checkpointed) the
 *   last record of a closed shard; then the lease is released.
 * - hand-off (handoff_ms > 0): a lease taken from a live worker that can
 *   answer -- a member, a KCL 3.x worker (kn_lease_t.owner_hands_over), or
 *   anyone without membership -- is asked for, not stolen (HANDOFF: the
 *   KCL 3.x's checkpointOwner); from others (a KCL 2.x worker) it is
 *   stolen, as the KCL 2.x steals, once the owner has been in no view for
 *   a lease duration (a member missing from one, forgotten by a leader
 *   with a stale view, beats itself back sooner).  Its owner
 *   learns it from its next renewal, stops reading (YIELD), lets the
 *   application finish what it was handed (kn_cc_yielded), checkpoints
 *   exactly that and passes the lease on (HANDOFF_DONE).  The asking
 *   worker watches the lease (GET) and takes it once passed on, or
 *   without waiting any longer when its owner wrote nothing for a lease
 *   duration or the hand-off lasted handoff_ms plus a lease duration (the
 *   owner counts handoff_ms from the renewal that told it, answered
 *   within a lease duration of the ask: one clock, the owner's).
 * - membership (cfg.members, a store that keeps it): every renew interval
 *   a HEARTBEAT writes this worker's beat and lease count and returns
 *   everyone's (lease/members.h).  A member whose beat stood still for a
 *   lease duration is dead and its leases are taken at once; this worker
 *   stops reading when its own heartbeat has not been written for
 *   grace_ms.  The lease table is then listed only when something calls
 *   for it: the start, a death, the epoch moved (leases created, released
 *   or finished elsewhere), a worker holding two more than this one, a
 *   lease of a worker that is no member, a take round that took
 *   something, a lease lost here; and by the leader (the live member of
 *   lowest id) every scan_ms.  Only the leader syncs on its own; it lists
 *   the shards every sync_ms and the leases only when the listing, the
 *   epoch or a pending cleanup say so.  Any worker that the leader's
 *   death leaves lowest takes over within a lease duration.
 * - membership items (cfg.member_items > 1, a store with publish): past
 *   member_item_size members the leader spreads them over items (a
 *   power of two, three quarters full at most) and writes into each a
 *   digest: the item count, the summed epoch, and the most and fewest
 *   leases held.  A worker beats in its own item (by a hash of its id;
 *   the leader in item 0, of which it is the lowest live id), sees that
 *   item's members and the digest, and takes nothing before its first
 *   beat there (a copy of a former run may sit there, dead).  A dead
 *   member's leases go to the live members of its item, each its share by
 *   key even past its target (to the leader where none is left), and
 *   balance follows through hand-offs.  The leader reads every item on
 *   each beat (a roster); the others read it with each listing, so that
 *   owners in other items count as members; a listing without it makes
 *   no take round, and a leader without it gathers everyone back into
 *   one item.  Free leases that stay free a lease duration go to the
 *   leader; of the workers holding the fewest leases, as many look for
 *   balance as the digest says there are leases to move.
 *
 * Ownership: strings in actions point into the core (or into the event
 * that caused them) and are valid until the next call into the core;
 * the driver copies what it keeps.  Strings passed in events are copied.
 *
 * The implementation is one file per concern; cc_int.h lists them. */
#ifndef KN_CONSUMER_CCORE_H
#define KN_CONSUMER_CCORE_H

#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"
#include "lease/lease.h"

typedef struct kn_cc kn_cc_t;

typedef struct kn_cc_cfg {
  const char *worker;    /* this worker's id (unique), copied */
  int64_t duration_ms;   /* lease.duration.ms */
  int64_t renew_ms;      /* lease.renew.interval.ms (< 2/3 duration) */
  int64_t take_ms;       /* lease.take.interval.ms */
  int64_t sync_ms;       /* shard.sync.interval.ms */
  int64_t checkpoint_ms; /* checkpoint.interval.ms */
  int max_leases, max_steal;
  /* Checkpoint of leases created with no ancestry to follow:
   * KN_CKPT_TRIM_HORIZON, KN_CKPT_LATEST or KN_CKPT_AT_TIMESTAMP. */
  const char *initial;
  int auto_checkpoint; /* checkpoint.auto */
  int64_t handoff_ms;  /* lease.handoff.timeout.ms; 0: always steal */
  int members;         /* lease.members: heartbeats (see above) */
  int64_t scan_ms;     /* lease.scan.interval.ms: the leader's look */
  /* First beat of this run: random, so that a restarted worker of the
   * same id never repeats the beat its last run ended on. */
  int64_t beat_base;
  /* Membership items the store keeps at most (store.h publish; 0 or 1:
   * one item), and members per item before the leader spreads them over
   * more (0: 16).  Spread, each worker writes one item and sees its own
   * item's members; the leader (the lowest id of item 0) reads them all,
   * and tells the item count and the summed epoch through a digest in
   * every item. */
  int member_items, member_item_size;
} kn_cc_cfg_t;

/* One shard of a listing (ListShards or ChildShards). */
typedef struct kn_cc_shard {
  const char *id;
  const char *parent;                /* or NULL */
  const char *adjacent;              /* or NULL */
  const char *hash_start, *hash_end; /* decimal, or NULL */
  int closed;                        /* has an ending sequence number */
} kn_cc_shard_t;

/* A position: a decimal sequence number and sub-sequence number. */
typedef struct kn_cc_pos {
  const char *seq;
  int64_t subseq;
} kn_cc_pos_t;

typedef enum kn_cc_op {
  KN_CC_LIST_LEASES,  /* store list(); answer kn_cc_leases_done */
  KN_CC_LIST_SHARDS,  /* ListShards, unfiltered; kn_cc_shards_done */
  KN_CC_CREATE,       /* store create(lease) */
  KN_CC_TAKE,         /* store take(key, counter, old_owner, worker) */
  KN_CC_RENEW,        /* store renew(key, counter, worker) */
  KN_CC_CHECKPOINT,   /* store checkpoint(key, counter, worker, ckpt...) */
  KN_CC_RELEASE,      /* store release(key, counter, worker) */
  KN_CC_REMOVE,       /* store remove(key, counter) */
  KN_CC_SET_CHILDREN, /* store set_children(key, children) */
  KN_CC_GET,          /* store get(key); answer kn_cc_lease_got */
  KN_CC_HANDOFF,      /* store handoff(key, counter, old_owner, worker) */
  KN_CC_HANDOFF_DONE, /* store handoff_done(key, counter, worker) */
  KN_CC_HEARTBEAT,    /* store heartbeat(worker, beat, leases, bump,
                         forget); answer kn_cc_members_done */
  /* Not store calls: */
  KN_CC_START,  /* start reading shard `key` for tenure at `start` */
  KN_CC_STOP,   /* stop reading `key` (tenure ended); reason */
  KN_CC_EXTEND, /* `key` may be read until until_ms (tenure) */
  KN_CC_FENCE,  /* no tenure may be read past until_ms (the heartbeat
                   deadline: others may count this worker dead then);
                   INT64_MAX: no such limit.  Readers honour the earlier
                   of it and their tenure's until_ms. */
  KN_CC_DONE,   /* `key` is finished: SHARD_END written, released */
  KN_CC_YIELD,  /* stop reading `key` (tenure): it is handed to
                   old_owner (the next owner).  Queued records are
                   dropped; the application finishes what it was
                   handed, then kn_cc_yielded */
  KN_CC_REPLY,  /* answer to kn_cc_checkpoint's request `req` */
  KN_CC_FATAL,  /* the worker cannot go on: err_msg; it has stopped
                   reading and releases its leases */
  KN_CC_CLOSED, /* close (or fatal) finished: nothing more to do */
  KN_CC_LOG     /* a line for the log: err_msg at `level` */
} kn_cc_op_t;

const char *kn_cc_op_name(kn_cc_op_t op);
/* Non-zero for the calls the driver carries out and answers (LIST_LEASES
 * to HEARTBEAT: the store's calls and ListShards). */
static inline int kn_cc_op_is_call(kn_cc_op_t op) {
  return op <= KN_CC_HEARTBEAT;
}

typedef struct kn_cc_action {
  kn_cc_op_t op;
  uint64_t id;           /* store calls and listings: echo it back */
  const char *key;       /* shard id */
  int64_t tenure;        /* START, STOP, EXTEND, DONE, YIELD; store
                            calls made for a held lease; else -1 */
  int64_t counter;       /* condition of TAKE..REMOVE */
  const char *old_owner; /* TAKE: NULL for a free lease; HANDOFF: the
                            owner asked; YIELD: the next owner */
  int steal;             /* TAKE: from a live worker, to balance */
  int mark; /* RENEW: 1 also sets ownerBeatFailing, 2 removes it (store
               mark), 0 a plain renewal */
  const kn_lease_t *lease; /* CREATE: the new lease; START: the lease as
                              taken (checkpoint, pending state, parents,
                              hash range) */
  /* CHECKPOINT: what to write (checkpoint NULL: leave it; pending NULL:
   * remove the pending checkpoint). */
  const char *checkpoint;
  int64_t subseq;
  const char *pending;
  int64_t pending_subseq;
  const void *state;
  size_t state_len;
  char *const *children; /* SET_CHILDREN */
  size_t n_children;
  int64_t until_ms;           /* START, EXTEND, FENCE */
  int64_t beat, leases, bump; /* HEARTBEAT */
  char *const *forget;        /* HEARTBEAT: members to forget */
  size_t n_forget;
  /* HEARTBEAT: the membership item written (store.h heartbeat), and the
   * one to leave (-1: none; a worker that moved between items). */
  int bucket, leave;
  /* HEARTBEAT (the leader): digest written into items 0 .. publish_n - 1
   * (store publish), with forget[i] forgotten in item forget_bucket[i]
   * (forget_bucket NULL: all in `bucket`). */
  const char *digest;
  int publish_n;
  const int *forget_bucket;
  /* HEARTBEAT, LIST_LEASES: also read every member (store members); its
   * answer goes to kn_cc_roster before the call's own. */
  int roster;
  /* HEARTBEAT: only the roster is read, nothing written (a worker's first
   * call, to learn the item count before it writes anywhere). */
  int probe;
  kn_err_t reason;     /* STOP: KN_ERR__LEASE_LOST, KN_ERR__DESTROY,
                          KN_ERR__TIMED_OUT (not renewed in time);
                          REPLY: the checkpoint's outcome; FATAL: the
                          code of the error that stopped it */
  void *req;           /* REPLY */
  const char *err_msg; /* REPLY, FATAL, LOG: a message, or NULL */
  int level;           /* LOG: KN_CC_LOG_DEBUG, _INFO or _WARN */
} kn_cc_action_t;

#define KN_CC_LOG_DEBUG 0
#define KN_CC_LOG_INFO 1
#define KN_CC_LOG_WARN 2

/* NULL on out-of-memory or a configuration the core refuses (a renew
 * interval of 2/3 of the lease duration or more: the lease would expire
 * between two renewals). */
kn_cc_t *kn_cc_new(const kn_cc_cfg_t *cfg, int64_t now_ms);
void kn_cc_destroy(kn_cc_t *c); /* accepts NULL */

/* The next action, in the order they were decided; 0 when none is left.
 * Call after every event. */
int kn_cc_next(kn_cc_t *c, kn_cc_action_t *a);
/* The driver could not carry out an action (out of memory): the core
 * stops, as when it cannot queue one itself -- the next kn_cc_next drops
 * what is queued and returns FATAL (KN_ERR__NOMEM), then CLOSED. */
void kn_cc_fail(kn_cc_t *c);
/* When kn_cc_tick wants to run next (INT64_MAX: only on an event). */
int64_t kn_cc_wake_ms(const kn_cc_t *c);

/* ---- events ---- */

/* Time passes: renewals, take rounds, syncs, checkpoints and deadlines
 * that are due. */
void kn_cc_tick(kn_cc_t *c, int64_t now_ms);

/* Answer to LIST_LEASES: err NULL and the table (v, n borrowed), or err
 * (borrowed; retriable or not). */
void kn_cc_leases_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                       const kn_lease_t *v, size_t n, int64_t now_ms);
/* Answer to LIST_SHARDS (v, n borrowed). */
void kn_cc_shards_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                       const kn_cc_shard_t *v, size_t n, int64_t now_ms);
/* Answer to any other store call.  new_counter for TAKE, RENEW,
 * CHECKPOINT, RELEASE and HANDOFF_DONE.  handoff_to: RENEW or CHECKPOINT
 * found another worker asking for the lease (store.h), or NULL.  sent_ms: when
 * the call was sent (the reading deadline counts from it). */
void kn_cc_store_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                      int64_t new_counter, const char *handoff_to,
                      int64_t sent_ms, int64_t now_ms);
/* Answer to GET: the lease (borrowed), or err (KN_ERR__NOT_FOUND when it
 * is gone). */
void kn_cc_lease_got(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                     const kn_lease_t *l, int64_t now_ms);

/* The roster a HEARTBEAT or LIST_LEASES asked for (action.roster): every
 * member of every item (borrowed), given before the call's own answer;
 * not given when it could not be read. */
void kn_cc_roster(kn_cc_t *c, uint64_t id, const kn_members_t *roster,
                  int64_t now_ms);
/* The roster call id asked for was refused for good (a non-retriable
 * error: no right to Scan the membership items), given before the call's
 * own answer. */
void kn_cc_roster_refused(kn_cc_t *c, uint64_t id);
/* Answer to HEARTBEAT: the members (borrowed), or err (KN_ERR__UNSUPPORTED:
 * the store keeps no membership; the core does without). */
void kn_cc_members_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                        const kn_members_t *m, int64_t sent_ms, int64_t now_ms);

/* The reader of (key, tenure) reached the end of the shard; children from
 * ChildShards (n 0: the server did not say, a sync will find them). */
void kn_cc_shard_ended(kn_cc_t *c, const char *key, int64_t tenure,
                       const kn_cc_shard_t *children, size_t n, int64_t now_ms);
/* The shard is past retention (nothing left to read). */
void kn_cc_shard_gone(kn_cc_t *c, const char *key, int64_t tenure,
                      int64_t now_ms);
/* The reader stopped on its own because the reading deadline passed. */
void kn_cc_shard_expired(kn_cc_t *c, const char *key, int64_t tenure,
                         int64_t now_ms);

/* The application was handed records of (key, tenure) up to pos
 * (poll).  end: it also polled past the end of the shard. */
void kn_cc_delivered(kn_cc_t *c, const char *key, int64_t tenure,
                     const kn_cc_pos_t *pos, int end, int64_t now_ms);
/* After YIELD: the application is done with what it was handed of (key,
 * tenure).  pos: with auto-checkpoint, the last record handed out (all of
 * it is processed), else NULL (its own checkpoints, requested before
 * this, say what is done). */
void kn_cc_yielded(kn_cc_t *c, const char *key, int64_t tenure,
                   const kn_cc_pos_t *pos, int64_t now_ms);
/* Records up to pos are processed and may be checkpointed with the next
 * flush (auto-checkpoint at the next poll, checkpoint_async). */
void kn_cc_processed(kn_cc_t *c, const char *key, int64_t tenure,
                     const kn_cc_pos_t *pos, int64_t now_ms);
/* A checkpoint written now (kn_consumer_checkpoint, prepared checkpoints
 * with prepare set, state copied); answered by a REPLY action with req.
 * Answered at once with KN_ERR__LEASE_LOST when the lease is not held. */
void kn_cc_checkpoint(kn_cc_t *c, const char *key, const kn_cc_pos_t *pos,
                      int prepare, const void *state, size_t state_len,
                      void *req, int64_t now_ms);

/* Graceful shutdown: stop reading, final checkpoints, release every
 * lease, then CLOSED. */
void kn_cc_close(kn_cc_t *c, int64_t now_ms);

/* ---- observation (statistics, tests) ---- */

/* Leases held now. */
size_t kn_cc_held(const kn_cc_t *c);
/* The last take round found nothing to take or steal, no hand-off to
 * this worker is under way, and the first sync is done. */
int kn_cc_idle(const kn_cc_t *c);
/* Non-zero once the first sync has succeeded. */
int kn_cc_synced(const kn_cc_t *c);
/* Live members as last heard (0 without membership), and whether this
 * worker is their leader. */
size_t kn_cc_members(const kn_cc_t *c);
int kn_cc_is_leader(const kn_cc_t *c);
/* Calls to kn_cc_tick at or past kn_cc_wake_ms that queued no action and
 * left the wake-up where it was (a driver waiting for the wake-up would
 * spin): 0 unless the core's timers disagree, or memory ran out. */
uint64_t kn_cc_idle_ticks(const kn_cc_t *c);

/* ---- the pure planners, exposed for tests ---- */

typedef struct kn_cc_create {
  size_t shard;           /* index into the listing */
  const char *checkpoint; /* KN_CKPT_* */
  int wave;               /* 0 first: a lease is created after its parents'
                             (lower waves) exist */
} kn_cc_create_t;

/* The leases a sync creates: fills *out (malloc'ed, caller frees) with
 * *n entries, ordered by wave.  Returns 0 or -1 (out of memory). */
int kn_cc_plan_sync(const kn_cc_shard_t *shards, size_t n_shards,
                    const kn_lease_t *leases, size_t n_leases,
                    const char *initial, kn_cc_create_t **out, size_t *n);
/* Non-zero when the lease at index i may be removed (see above). */
int kn_cc_can_remove(const kn_lease_t *leases, size_t n_leases, size_t i,
                     const kn_cc_shard_t *shards, size_t n_shards);

/* Non-zero when the lease has moved past its start (a sequence number or
 * SHARD_END). */
int kn_cc_lease_started(const kn_lease_t *l);

/* The shards that a lease listing's lineage shows finished: the ancestors
 * of every lease that has moved past its start, through parentShardId,
 * childShardIds and the shard listing's parents.  A child is read only
 * once its parents are finished, so a lease at its start among them was
 * finished and removed, then created again by a create that landed late
 * (the store layer retries one for minutes): it is closed, not read.
 * kn_cc_done_new returns NULL on out-of-memory (the caller owns the result
 * and frees it with kn_cc_done_free); it borrows the keys of leases and
 * shards, which must outlive it.  kn_cc_done_has(d, l): l is at its start
 * and finished by lineage (0 for d NULL). */
typedef struct kn_cc_done kn_cc_done_t;
kn_cc_done_t *kn_cc_done_new(const kn_lease_t *leases, size_t n_leases,
                             const kn_cc_shard_t *shards, size_t n_shards);
int kn_cc_done_has(const kn_cc_done_t *d, const kn_lease_t *l);
void kn_cc_done_free(kn_cc_done_t *d);

/* A lease at the initial position (LATEST, AT_TIMESTAMP) is read from its
 * start when the listing shows its family read here: another lease names
 * it as a child or is named as its parent, or covers some of its hash keys
 * (shards whose keys overlap are ancestor and descendant).  Two syncs
 * straddling a reshard create such leases, one from a listing before it.
 * ranges: kn_cc_ranges() of the listing, parsed once for many calls (the
 * caller frees it), or NULL to skip the hash key test. */
typedef struct kn_cc_range kn_cc_range_t;
kn_cc_range_t *kn_cc_ranges(const kn_lease_t *leases, size_t n_leases);
int kn_cc_family_read(const kn_lease_t *leases, size_t n_leases,
                      const kn_cc_range_t *ranges, const kn_lease_t *l);

#endif
