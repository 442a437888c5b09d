/* Lease stores: the lease table behind one interface, with the same
 * conditional semantics everywhere (DynamoDB, SQLite, memory).
 *
 * Every change is conditional on the lease's counter (and owner where
 * said): this fencing is what makes a worker that lost a lease unable to
 * touch it.  A failed condition returns an error with code
 * KN_ERR_CONDITIONAL_CHECK_FAILED and changes nothing.  Calls block and
 * may be made from any one thread at a time per store. */
#ifndef KN_LEASE_STORE_H
#define KN_LEASE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"
#include "lease/lease.h"

typedef struct kn_lease_store kn_lease_store_t;

typedef struct kn_lease_store_ops {
  /* Creates the table if missing (DynamoDB: on-demand billing) and waits
   * until it is usable. */
  kn_error_t *(*ensure_table)(kn_lease_store_t *ls);
  /* Every lease, read consistently.  *out is an array the caller frees
   * with kn_lease_array_free(). */
  kn_error_t *(*list)(kn_lease_store_t *ls, kn_lease_t **out, size_t *n);
  /* One lease; KN_ERR__NOT_FOUND if absent.  out is filled (caller
   * clears). */
  kn_error_t *(*get)(kn_lease_store_t *ls, const char *key, kn_lease_t *out);
  /* Inserts l if no lease has its key. */
  kn_error_t *(*create)(kn_lease_store_t *ls, const kn_lease_t *l);
  /* Takes the lease for owner if its counter is still `counter` (and its
   * owner still `old_owner`, NULL meaning free): owner set, counter + 1,
   * ownerSwitchesSinceCheckpoint + 1 when the owner changes. */
  kn_error_t *(*take)(kn_lease_store_t *ls, const char *key,
                      int64_t counter, const char *old_owner,
                      const char *owner, int64_t *new_counter);
  /* Renews owner's lease: counter + 1 if counter and owner match. */
  kn_error_t *(*renew)(kn_lease_store_t *ls, const char *key,
                       int64_t counter, const char *owner,
                       int64_t *new_counter);
  /* Releases owner's lease: owner removed, counter + 1. */
  kn_error_t *(*release)(kn_lease_store_t *ls, const char *key,
                         int64_t counter, const char *owner,
                         int64_t *new_counter);
  /* Moves the checkpoint (and subsequence number) of owner's lease;
   * clears or sets the pending checkpoint (pending NULL clears it;
   * state may be NULL), resets ownerSwitchesSinceCheckpoint; counter + 1.
   * checkpoint NULL leaves the checkpoint as it is (prepare only). */
  kn_error_t *(*checkpoint)(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *owner,
                            const char *checkpoint, int64_t subseq,
                            const char *pending, int64_t pending_subseq,
                            const void *state, size_t state_len,
                            int64_t *new_counter);
  /* Records the children of a shard (childShardIds), unconditionally
   * except that the lease must exist. */
  kn_error_t *(*set_children)(kn_lease_store_t *ls, const char *key,
                              char *const *children, size_t n);
  /* Deletes a lease if its counter is still `counter`. */
  kn_error_t *(*remove)(kn_lease_store_t *ls, const char *key,
                        int64_t counter);
  void (*destroy)(kn_lease_store_t *ls);
} kn_lease_store_ops_t;

struct kn_lease_store {
  const kn_lease_store_ops_t *ops;
  char *name;  /* "sqlite:PATH", "dynamodb:TABLE", "memory" for messages */
};

/* Opens the store named by spec: "sqlite:PATH", "dynamodb:TABLE",
 * "memory" (process-local, for tests; a name after "memory:" selects a
 * shared instance).  client supplies AWS settings for DynamoDB (may be
 * NULL for the others).  NULL with *errp set on failure. */
struct kn_client_s;
kn_lease_store_t *kn_lease_store_open(const char *spec,
                                      struct kn_client_s *client,
                                      kn_error_t **errp);
void kn_lease_store_destroy(kn_lease_store_t *ls);

#endif
