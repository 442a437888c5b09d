/* The store threads of lease mode: the coordination core's lease-store
 * calls and shard listings run here, a few at a time, so one slow call
 * (a DynamoDB retry, a busy SQLite file, a long ListShards) never holds up
 * the others, renewals above all.  Each finished job goes back to the
 * control thread as a KN_CTL_STORE_DONE message.
 *
 * A job copies everything it needs from the core's action: the core's
 * strings are only valid until its next call. */
#ifndef KN_CONSUMER_STORE_POOL_H
#define KN_CONSUMER_STORE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/ccore.h"
#include "consumer/consumer_int.h"
#include "lease/lease.h"

typedef struct kn_store_job {
  struct kn_store_job *next; /* the pool's queue */
  /* Not for the core: does the stream still exist (DescribeStreamSummary)
   * now that the reader of (cs, tenure) found its shard missing?  op is
   * then KN_CC_LOG, which is no store call. */
  int stream_check;
  kn_cshard_t *cs;
  /* The call (copied from the action). */
  kn_cc_op_t op;
  uint64_t id;
  char *key;
  int64_t tenure;
  int64_t counter;
  char *old_owner;  /* TAKE; NULL: a free lease */
  int steal;        /* TAKE: a steal (for the metrics) */
  kn_lease_t lease; /* CREATE */
  char *checkpoint; /* CHECKPOINT */
  int64_t subseq;
  char *pending;
  int64_t pending_subseq;
  void *state;
  size_t state_len;
  char **children; /* SET_CHILDREN; HEARTBEAT: the members to forget */
  size_t n_children;
  int64_t beat, n_held, bump; /* HEARTBEAT */
  /* The outcome. */
  int64_t sent_ms; /* monotonic ms when the call began */
  int64_t took_us;
  kn_error_t *err; /* owned */
  int64_t new_counter;
  char *handoff_to;     /* RENEW, CHECKPOINT: a hand-off asked for; owned */
  kn_lease_t got;       /* GET: the lease (owned) */
  kn_members_t members; /* HEARTBEAT: owned */
  kn_lease_t *leases;   /* LIST_LEASES: owned */
  size_t n_leases;
  kn_shard_list_t *list; /* LIST_SHARDS: owned ... */
  kn_cc_shard_t *shards; /* ... and a view pointing into it */
  size_t n_shards;
} kn_store_job_t;

/* A job for a store action (LIST_LEASES .. HEARTBEAT, LIST_SHARDS),
 * copied; NULL on out-of-memory. */
kn_store_job_t *kn_store_job_new(const kn_cc_action_t *a);
/* A stream check for cs's reader of `tenure`; NULL on out-of-memory. */
kn_store_job_t *kn_store_job_stream_check(kn_cshard_t *cs, int64_t tenure);
/* Accepts NULL. */
void kn_store_job_free(kn_store_job_t *j);

typedef struct kn_store_pool kn_store_pool_t;

/* Starts n threads running jobs against kc->ls and kc->client (both must
 * outlive the pool).  NULL when no thread could be started. */
kn_store_pool_t *kn_store_pool_new(kn_consumer_t *kc, int n);
/* Queues j (taken).  Renewals go before the other queued calls. */
void kn_store_pool_submit(kn_store_pool_t *p, kn_store_job_t *j);
/* Drops the queued jobs, waits for the running ones (their results are
 * posted as usual) and frees the pool.  Accepts NULL. */
void kn_store_pool_destroy(kn_store_pool_t *p);

#endif
