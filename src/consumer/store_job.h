/* A lease-store call or shard listing of the coordination core, copied
 * from its action so that it outlives the core's next call, with its
 * outcome.  Jobs are carried out by the store threads (store_pool.h), and
 * by the simulator and the unit tests on their own stores.
 *
 * Ownership: a job owns every pointer in it; kn_store_job_free() frees
 * them all. */
#ifndef KN_CONSUMER_STORE_JOB_H
#define KN_CONSUMER_STORE_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/ccore.h"
#include "consumer/drive.h"
#include "kinesis/model.h"
#include "lease/lease.h"
#include "lease/store.h"

struct kn_cshard;

typedef struct kn_store_job {
  struct kn_store_job *next; /* the pool's queue */
  /* Not for the core: does the stream still exist (DescribeStreamSummary)
   * now that the reader of (cs, tenure) found its shard missing?  op is
   * then KN_CC_LOG, which is no store call. */
  int stream_check;
  /* Not for the core either: a fan-out check (efo_check.c) for cs's reader
   * of `tenure` (cs NULL: a listing for idle readers), why: the error the
   * reader met (owned; NULL for a listing).  op is KN_CC_LOG. */
  int efo_check;
  kn_error_t *why;
  struct kn_cshard *cs;
  /* The call (copied from the action). */
  kn_cc_op_t op;
  uint64_t id;
  char *key;
  int64_t tenure;
  int64_t counter;
  char *old_owner;  /* TAKE; NULL: a free lease */
  int steal;        /* TAKE: a steal (for the metrics) */
  int mark;         /* RENEW: kn_cc_action_t.mark */
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
  int bucket, leave;          /* HEARTBEAT (kn_cc_action_t) */
  char *digest;               /* HEARTBEAT: to publish (owned) ... */
  int publish_n;              /* ... into this many items */
  int *forget_bucket;         /* HEARTBEAT: item of each name (owned) */
  int roster;                 /* HEARTBEAT, LIST_LEASES: read every member */
  int probe;                  /* HEARTBEAT: the roster only (kn_cc_action_t) */
  /* The outcome. */
  int64_t sent_ms; /* monotonic ms when the call began */
  int64_t took_us;
  kn_error_t *err; /* owned */
  int64_t new_counter;
  char *handoff_to;      /* RENEW, CHECKPOINT: a hand-off asked for; owned */
  kn_lease_t got;        /* GET: the lease (owned) */
  kn_members_t members;  /* HEARTBEAT: owned */
  kn_members_t roster_m; /* every member, when roster (owned) ... */
  int has_roster;        /* ... and read, or ... */
  int roster_refused;    /* ... refused for good */
  kn_lease_t *leases;    /* LIST_LEASES: owned */
  size_t n_leases;
  kn_shard_list_t *list; /* LIST_SHARDS: owned ... */
  kn_cc_shard_t *shards; /* ... and a view pointing into it */
  size_t n_shards;
} kn_store_job_t;

/* A job for a store action (LIST_LEASES .. HEARTBEAT, LIST_SHARDS),
 * copied; NULL on out-of-memory. */
kn_store_job_t *kn_store_job_new(const kn_cc_action_t *a);
/* A stream check for cs's reader of `tenure`; NULL on out-of-memory. */
kn_store_job_t *kn_store_job_stream_check(struct kn_cshard *cs, int64_t tenure);
/* A fan-out check (why taken); NULL on out-of-memory (why is freed). */
kn_store_job_t *kn_store_job_efo_check(struct kn_cshard *cs, int64_t tenure,
                                       kn_error_t *why);
/* Accepts NULL. */
void kn_store_job_free(kn_store_job_t *j);

/* Carries out j's lease-store call (LIST_LEASES .. HEARTBEAT but
 * LIST_SHARDS) against ls in worker's name, setting j's outcome; the
 * caller times it (sent_ms, took_us).  The same code serves the store
 * threads, the simulator's cost mode and the core's unit tests. */
void kn_store_job_apply(kn_lease_store_t *ls, const char *worker,
                        kn_store_job_t *j);
/* j's outcome as the drive takes it (kn_drive_result); pointers into j. */
kn_drive_result_t kn_store_job_result(const kn_store_job_t *j);
/* Points j->shards into j->list (ListShards, as the core sees shards).
 * Returns 0 or -1 (out of memory). */
int kn_store_job_view_shards(kn_store_job_t *j);

#endif
