/* A lease: one row of the lease table, as the KCL 2.x writes it.
 *
 * The DynamoDB attribute of each field is given; the SQLite store keeps
 * the same fields in columns of the same names. */
#ifndef KN_LEASE_LEASE_H
#define KN_LEASE_LEASE_H

#include <stddef.h>
#include <stdint.h>

/* Checkpoint sentinels (the `checkpoint` attribute holds either one of
 * these or a decimal sequence number). */
#define KN_CKPT_TRIM_HORIZON "TRIM_HORIZON"
#define KN_CKPT_LATEST "LATEST"
#define KN_CKPT_AT_TIMESTAMP "AT_TIMESTAMP"
#define KN_CKPT_SHARD_END "SHARD_END"

typedef struct kn_lease {
  char *key;                 /* leaseKey (S): the shard id */
  char *owner;               /* leaseOwner (S), NULL when free */
  int64_t counter;           /* leaseCounter (N) */
  int64_t owner_switches;    /* ownerSwitchesSinceCheckpoint (N) */
  char *checkpoint;          /* checkpoint (S), NULL if absent */
  int64_t checkpoint_subseq; /* checkpointSubSequenceNumber (N) */
  char *pending;             /* pendingCheckpoint (S), NULL if none */
  int64_t pending_subseq;    /* pendingCheckpointSubSequenceNumber (N) */
  void *pending_state;       /* pendingCheckpointState (B), NULL if none */
  size_t pending_state_len;
  char **parents; /* parentShardId (SS), n_parents entries */
  size_t n_parents;
  char **children; /* childShardIds (SS), n_children entries */
  size_t n_children;
  char *hash_start; /* startingHashKey (S, decimal), or NULL */
  char *hash_end;   /* endingHashKey (S, decimal), or NULL */
  /* checkpointOwner (S), as the KCL 3.x writes it: during a graceful
   * hand-off, the worker that still reads and checkpoints the shard
   * while `owner` names the worker it is handed to; NULL otherwise. */
  char *checkpoint_owner;
  /* ownerBeatFailing (N 1): the owner's heartbeats fail, so it judges its
   * reading by this lease's renewals alone, and so must the others (store.h,
   * mark); 0 when absent.  A take or a release removes it. */
  int beat_failing;
  /* Attributes this library does not interpret (written by other KCL
   * versions: throughputKBps, entityType, ...): a JSON
   * object of DynamoDB attribute values, e.g.
   * {"throughputKBps":{"N":"12.5"}}, or NULL when there are none.  Every
   * store keeps it verbatim; updates never touch it. */
  char *extra;
  /* Not an attribute: filled by a store's list() (0 elsewhere, and
   * never written).  Non-zero when the owner answers a graceful hand-off
   * (checkpointOwner) although it writes no heartbeat: a KCL 3.x worker,
   * known by the worker-metrics item (entityType WORKER_METRIC_STATS,
   * leaseKey = its id) it keeps in the lease table.  A KCL 2.x worker
   * never answers one. */
  int owner_hands_over;
} kn_lease_t;

/* Every pointer in a kn_lease_t is malloc'ed and owned by the struct:
 * kn_lease_clear() frees them.  A zeroed struct is an empty lease. */

/* One worker of an application, as its last heartbeat wrote it (the
 * membership: see the heartbeat call of store.h). */
typedef struct kn_member {
  char *worker;   /* its id (the leaseOwner it writes) */
  int64_t beat;   /* changes with every heartbeat of that worker */
  int64_t leases; /* leases it held at that heartbeat */
  int bucket;     /* the membership item it was found in (store.h) */
} kn_member_t;

/* Every member and the table's epoch: a number any worker adds to when it
 * changes what the others may take (leases created, released or
 * finished), so that they look at the lease table again. */
typedef struct kn_members {
  kn_member_t *v; /* n entries, sorted by worker id */
  size_t n;
  int64_t epoch;
  /* Entries the store could not read as a member (written by something
   * else): worker is the name, beat a digest of the value (it changes when
   * the value does), leases 0.  Not members; forgotten when they stay
   * unchanged (the item would only grow).  n_bad entries. */
  kn_member_t *bad;
  size_t n_bad;
  /* The digest the group's leader last wrote into this item (store.h,
   * publish), or NULL; owned. */
  char *digest;
} kn_members_t;

/* Frees what m holds (its array and strings) and zeroes it.  Accepts
 * NULL. */
void kn_members_clear(kn_members_t *m);
/* Deep copy; 0 or -1 on out-of-memory (dst is then cleared). */
int kn_members_copy(kn_members_t *dst, const kn_members_t *src);
/* The n membership items (store.h) as one: members sorted by worker id
 * (then item), epochs summed, items[0]'s digest; 0 or -1 on
 * out-of-memory (out is then cleared). */
int kn_members_merge(kn_members_t *out, const kn_members_t *items, size_t n);
/* The membership item of worker with nb items (a hash of its id; 0 with
 * one item). */
int kn_members_home(const char *worker, int nb);
/* Keeps one entry per worker (m sorted by worker id, as merged): a worker
 * moving between items, or a former run under the same id, leaves a copy
 * behind until the leader forgets it.  The copy kept is the one in the
 * worker's item for the item count of m's digest ("nb=N ..."), else the
 * one with the highest beat.  For display: the coordination core follows
 * whichever copy beats. */
void kn_members_one_each(kn_members_t *m);

/* Frees what l holds (not l itself) and zeroes it.  Accepts NULL. */
void kn_lease_clear(kn_lease_t *l);
/* Deep copy; 0 or -1 on out-of-memory (dst is then cleared). */
int kn_lease_copy(kn_lease_t *dst, const kn_lease_t *src);
/* Frees n leases and the array itself (from a store's list()).  Accepts
 * NULL. */
void kn_lease_array_free(kn_lease_t *v, size_t n);
/* Non-zero if the checkpoint is SHARD_END. */
int kn_lease_is_shard_end(const kn_lease_t *l);
/* The worker with the right to write the lease: its checkpoint owner
 * during a hand-off, else its owner (NULL when free). */
const char *kn_lease_actual_owner(const kn_lease_t *l);

#endif
