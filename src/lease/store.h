/* Lease stores: the lease table behind one interface, with the same
 * conditional semantics everywhere (DynamoDB, SQLite, memory).
 *
 * Every change is conditional on the lease's counter (and owner where
 * said): this fencing is what makes a worker that lost a lease unable to
 * touch it.  A failed condition returns an error with code
 * KN_ERR_CONDITIONAL_CHECK_FAILED and changes nothing; a conditional call
 * on a key that does not exist fails the same way (as DynamoDB does).
 * Which calls add one to leaseCounter follows the KCL: take, renew,
 * release and checkpoint do; create, set_children and remove do not.
 *
 * A store that retries calls (DynamoDB) may find that a retried change
 * fails its condition because the first attempt had succeeded; it then
 * reads the lease and reports success if the lease holds exactly what the
 * call meant to write.  Owner names must be unique among workers.
 *
 * Keys and owners are never NULL, except where NULL is said to mean
 * "free" (old_owner).
 *
 * Calls block (DynamoDB: never call them from an I/O thread).  A store
 * handle may be used by several threads at once.  Errors returned are
 * owned by the caller (kn_error_destroy).  Retriable failures (throttling,
 * 5xx, a busy SQLite file) say so through kn_error_is_retriable(). */
#ifndef KN_LEASE_STORE_H
#define KN_LEASE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"
#include "lease/lease.h"

typedef struct kn_lease_store kn_lease_store_t;

/* Membership items a store keeps at most (heartbeat's bucket). */
#define KN_MEMBERS_BUCKETS_MAX 1024

typedef struct kn_lease_store_ops {
  /* Creates the table if missing (DynamoDB: on-demand billing) and waits
   * until it is usable.  Idempotent; safe when several workers race. */
  kn_error_t *(*ensure_table)(kn_lease_store_t *ls);
  /* Every lease, read consistently, in no particular order.  *out is an
   * array the caller frees with kn_lease_array_free() (NULL when *n is
   * 0). */
  kn_error_t *(*list)(kn_lease_store_t *ls, kn_lease_t **out, size_t *n);
  /* One lease; KN_ERR__NOT_FOUND if absent.  out is filled (the caller
   * clears it with kn_lease_clear); left zeroed on error. */
  kn_error_t *(*get)(kn_lease_store_t *ls, const char *key, kn_lease_t *out);
  /* Inserts l (copied) if no lease has its key.  l->extra, when set, is
   * written as further attributes. */
  kn_error_t *(*create)(kn_lease_store_t *ls, const kn_lease_t *l);
  /* Takes the lease for owner if its counter is still `counter` and its
   * owner still `old_owner` (NULL meaning free): owner set, counter + 1,
   * any hand-off under way ended (checkpointOwner removed),
   * ownerSwitchesSinceCheckpoint + 1 when old_owner is not NULL and not
   * owner (as the KCL counts). */
  kn_error_t *(*take)(kn_lease_store_t *ls, const char *key, int64_t counter,
                      const char *old_owner, const char *owner,
                      int64_t *new_counter);
  /* Renews owner's lease: counter + 1 if the counter matches and owner is
   * its actual owner (kn_lease_actual_owner: during a hand-off, the
   * checkpoint owner).  *handoff_to: when another worker has asked for
   * the lease (owner is its checkpointOwner, leaseOwner someone else),
   * that worker's id, malloc'ed for the caller; else NULL. */
  kn_error_t *(*renew)(kn_lease_store_t *ls, const char *key, int64_t counter,
                       const char *owner, int64_t *new_counter,
                       char **handoff_to);
  /* A renewal (as renew, without the hand-off news) that also sets
   * (failing 1) or removes (0) ownerBeatFailing: while its heartbeats fail,
   * the owner tells the others to judge this lease by its renewals, not by
   * the membership.  NULL: not kept by this store. */
  kn_error_t *(*mark)(kn_lease_store_t *ls, const char *key, int64_t counter,
                      const char *owner, int failing, int64_t *new_counter);
  /* Releases owner's lease (actual owner, as for renew): leaseOwner and
   * checkpointOwner removed, counter + 1. */
  kn_error_t *(*release)(kn_lease_store_t *ls, const char *key, int64_t counter,
                         const char *owner, int64_t *new_counter);
  /* Writes owner's checkpoint, counter + 1, if the counter matches and
   * owner is the actual owner.
   * checkpoint not NULL: checkpoint and checkpointSubSequenceNumber set,
   * ownerSwitchesSinceCheckpoint reset to 0.  checkpoint NULL: they are
   * left as they are (a prepared checkpoint only).  pending not NULL sets
   * pendingCheckpoint and its subsequence number, and the state bytes
   * (state may be NULL: no state); pending NULL removes all three.
   * *handoff_to as for renew: when another worker has asked for the lease
   * (owner is its checkpointOwner, leaseOwner someone else), that
   * worker's id, malloc'ed for the caller; else NULL (NULL on error).  A
   * lease's checkpoint takes the place of its renewal (a busy lease writes
   * a checkpoint instead), so its answer tells of a hand-off as well. */
  kn_error_t *(*checkpoint)(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *owner,
                            const char *checkpoint, int64_t subseq,
                            const char *pending, int64_t pending_subseq,
                            const void *state, size_t state_len,
                            int64_t *new_counter, char **handoff_to);
  /* Records the children of a shard (childShardIds; n 0 removes them),
   * unconditionally except that the lease must exist.  The counter is not
   * changed. */
  kn_error_t *(*set_children)(kn_lease_store_t *ls, const char *key,
                              char *const *children, size_t n);
  /* Graceful hand-off, as the KCL 3.x writes it.  handoff asks for the
   * lease of old_owner for new_owner: if the counter is still `counter`,
   * leaseOwner is old_owner and no hand-off is under way, leaseOwner
   * becomes new_owner and checkpointOwner old_owner.  The counter is left
   * as it is, so the current owner goes on renewing while it finishes.
   * handoff_done is the current owner's answer once it has checkpointed:
   * if the counter matches and owner is the checkpointOwner,
   * checkpointOwner is removed, counter + 1 and
   * ownerSwitchesSinceCheckpoint + 1: the lease is leaseOwner's. */
  kn_error_t *(*handoff)(kn_lease_store_t *ls, const char *key, int64_t counter,
                         const char *old_owner, const char *new_owner);
  kn_error_t *(*handoff_done)(kn_lease_store_t *ls, const char *key,
                              int64_t counter, const char *owner,
                              int64_t *new_counter);
  /* Deletes a lease if its counter is still `counter`. */
  kn_error_t *(*remove)(kn_lease_store_t *ls, const char *key, int64_t counter);
  void (*destroy)(kn_lease_store_t *ls);
  /* Membership: one atomic write of membership item `bucket` (0 to
   * KN_MEMBERS_BUCKETS_MAX - 1) that sets worker's heartbeat (beat,
   * leases), adds `bump` (0 or more) to the item's epoch, forgets the
   * members named in forget (n_forget entries, not worker itself), and
   * fills *out with that item's members, epoch and digest as they are
   * after the write (the caller clears it with kn_members_clear; left
   * zeroed on error).  It is the only call a settled worker makes besides
   * renewing its own leases: a write that returns what it wrote reads
   * nothing.  Members are spread over items so that no item is written by
   * every worker (DynamoDB serves one item 1,000 write units a second);
   * a store without publish keeps them all in one place and may ignore
   * bucket (its answer then holds every member).
   * DynamoDB: one UpdateItem of the item {"key": "members"} (bucket 0) or
   * {"key": "members#B"} in the table TABLE-members (ReturnValues
   * ALL_NEW), one attribute per worker; SQLite: the tables members and
   * meta of the same file.  NULL, or an error with code
   * KN_ERR__UNSUPPORTED: this store keeps no membership (the consumer
   * then looks at the lease table on every take round). */
  kn_error_t *(*heartbeat)(kn_lease_store_t *ls, const char *worker, int bucket,
                           int64_t beat, int64_t leases, int64_t bump,
                           char *const *forget, size_t n_forget,
                           kn_members_t *out);
  /* Removes worker's entry from item `bucket` (it beats in another one
   * now); no error if absent.  NULL: the store keeps one item. */
  kn_error_t *(*leave)(kn_lease_store_t *ls, const char *worker, int bucket);
  /* Writes digest (the leader's summary, parsed by the consumer) into
   * item `bucket`, creating it if missing, and forgets the members named
   * in forget there.  NULL: the store keeps one item (bucket is ignored
   * by its heartbeat). */
  kn_error_t *(*publish)(kn_lease_store_t *ls, int bucket, const char *digest,
                         char *const *forget, size_t n_forget);
  /* Every member of every item, read consistently and without writing
   * anything (for the group's leader and take rounds, and for tools:
   * `kncat leases`), each with the item it is in (kn_member_t.bucket;
   * a worker that moved may show in two); epoch is the sum of the items'
   * epochs, digest item 0's.  *out as for heartbeat; before any
   * heartbeat, no members and epoch 0.  NULL, or an error with code
   * KN_ERR__UNSUPPORTED: this store keeps no membership (DynamoDB: the
   * side table is missing or out of reach). */
  kn_error_t *(*members)(kn_lease_store_t *ls, kn_members_t *out);
} kn_lease_store_ops_t;

/* The head of every store; each backend embeds it first. */
struct kn_lease_store {
  const kn_lease_store_ops_t *ops;
  char *name; /* "sqlite:PATH", "dynamodb:TABLE", "memory" for messages;
                 owned by the store */
};

/* Opens the store named by spec:
 *   "sqlite:PATH"     a SQLite file, created if missing (several processes
 *                     of one host may share it);
 *   "dynamodb:TABLE"  a DynamoDB table, item-compatible with the KCL;
 *   "memory"          process-local, private to this handle (tests);
 *   "memory:NAME"     process-local, shared by every handle of that name.
 * spec is copied.  client supplies the DynamoDB endpoint, region,
 * credentials and I/O loop (borrowed: it must outlive the store); with a
 * NULL client a DynamoDB store resolves them from the environment on its
 * own.  client is ignored by the other stores.  NULL with *errp set on
 * failure (KN_ERR__CONF for a bad spec). */
struct kn_client_s;
kn_lease_store_t *kn_lease_store_open(const char *spec,
                                      struct kn_client_s *client,
                                      kn_error_t **errp);
/* Accepts NULL. */
void kn_lease_store_destroy(kn_lease_store_t *ls);

#endif
