/* The lease-mode driver: the coordination core (ccore.h) and everything
 * that turns its actions into effects and the world's answers into its
 * events, on one thread and without threads, locks, clocks or I/O of its
 * own.  What it needs of the world it asks through kn_drive_ops_t: submit
 * a store call, start, stop or re-time a reader, tell the application,
 * the time.  The consumer runs it on its control thread with the store
 * threads, the readers and the monotonic clock behind those operations
 * (driver.c); the simulator (tests/sim) and the core's unit tests run the
 * same code with simulated ones.
 *
 * What it owns: the core, the checkpoint requests handed to the core and
 * not yet answered, and one entry per tenure being read: the deadline the
 * reader was given, the earlier of the lease's (EXTEND) and the
 * heartbeat's (FENCE), and the lease as this worker last wrote it (the
 * view published to the statistics: the rest of the consumer reads it,
 * never rebuilds it).  It alone decides deadlines: a reader is never
 * given a later one once its own has passed (poll may have dropped
 * records); the tenure ends instead.
 *
 * Ownership: the drive copies what it keeps from events; pointers it hands
 * to operations are valid only during the call. */
#ifndef KN_CONSUMER_DRIVE_H
#define KN_CONSUMER_DRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/ccore.h"
#include "kn/error.h"
#include "lease/lease.h"

typedef struct kn_drive kn_drive_t;

/* Why a reader stops. */
typedef enum kn_drive_stop {
  KN_DRIVE_LOST,  /* the tenure ended (reason): tell the application */
  KN_DRIVE_YIELD, /* handed over: tell the application to finish what it
                     was handed; kn_drive_yielded() when it has */
  KN_DRIVE_DONE   /* the shard is finished (SHARD_END written) */
} kn_drive_stop_t;

/* A lease as this worker last wrote it, for statistics and metrics. */
typedef struct kn_drive_view {
  int held;
  int64_t counter;
  const char *checkpoint; /* NULL: not known */
  int64_t subseq;
} kn_drive_view_t;

typedef struct kn_drive_ops {
  /* The monotonic clock, in ms. */
  int64_t (*now)(void *env);
  /* A store call or a listing (kn_cc_op_is_call(a->op)); its outcome comes
   * back through kn_drive_result() with a->id.  Returns 0, or -1 when it
   * cannot be sent (out of memory): the drive then stops the core. */
  int (*submit)(void *env, const kn_cc_action_t *a);
  /* Read a->key for tenure a->tenure from the lease a->lease, until
   * a->until_ms (already the earlier of lease and heartbeat); tell the
   * application it holds the lease.  A reader of an earlier tenure was
   * stopped before.  Returns 0, or -1 (out of memory: the consumer fails). */
  int (*start)(void *env, const kn_cc_action_t *a);
  /* Stop reading (key, tenure) and drop what was read but not handed out.
   * reason: LOST's code; next_owner: YIELD's, or NULL. */
  void (*stop)(void *env, const char *key, int64_t tenure, kn_drive_stop_t why,
               kn_err_t reason, const char *next_owner);
  /* (key, tenure) may be read until until_ms: later or earlier than
   * before, never once the earlier deadline has passed. */
  void (*deadline)(void *env, const char *key, int64_t tenure,
                   int64_t until_ms);
  /* The answer to a checkpoint request handed to kn_drive_checkpoint:
   * code KN_ERR_NO_ERROR, or an error with msg; msg NULL with
   * KN_ERR__LEASE_LOST: the consumer stopped before writing it. */
  void (*reply)(void *env, void *req, kn_err_t code, const char *msg);
  /* The worker cannot go on: code and msg (never NULL). */
  void (*fatal)(void *env, kn_err_t code, const char *msg);
  /* A line for the log (KN_CC_LOG_*). */
  void (*log)(void *env, int level, const char *msg);
  /* The lease of (key, tenure) as published by the drive, its one owner
   * (may be NULL):
   * at the start, after each of its writes that landed, and when the
   * tenure ends (held 0).  checkpoint_changed: v->checkpoint was just
   * written. */
  void (*view)(void *env, const char *key, int64_t tenure,
               const kn_drive_view_t *v, int checkpoint_changed);
} kn_drive_ops_t;

/* The outcome of a submitted call; every pointer borrowed for the call. */
typedef struct kn_drive_result {
  uint64_t id;
  kn_cc_op_t op;
  const kn_error_t *err;    /* NULL: success */
  const kn_lease_t *leases; /* LIST_LEASES */
  size_t n_leases;
  const kn_cc_shard_t *shards; /* LIST_SHARDS */
  size_t n_shards;
  const kn_lease_t *got;       /* GET */
  const kn_members_t *members; /* HEARTBEAT */
  const kn_members_t *roster;  /* HEARTBEAT, LIST_LEASES: asked and read */
  int roster_refused;          /* ... or refused for good */
  int64_t new_counter;         /* TAKE, RENEW, CHECKPOINT, RELEASE,
                                  HANDOFF_DONE */
  const char *handoff_to;      /* RENEW, CHECKPOINT */
  int64_t sent_ms;             /* when the call was sent */
} kn_drive_result_t;

/* A new drive and its core (cfg copied, ops and env borrowed for its
 * life); NULL on out-of-memory or a configuration the core refuses.
 * Nothing is asked of the world before the first kn_drive_tick(). */
kn_drive_t *kn_drive_new(const kn_cc_cfg_t *cfg, const kn_drive_ops_t *ops,
                         void *env);
/* Answers the requests still waiting (reply with KN_ERR__LEASE_LOST, msg
 * NULL) and frees the drive.  Accepts NULL. */
void kn_drive_destroy(kn_drive_t *d);

/* ---- events (each carries out what the core decides at once) ---- */

/* Whatever is due: renewals, take rounds, syncs, deadlines. */
void kn_drive_tick(kn_drive_t *d);
void kn_drive_result(kn_drive_t *d, const kn_drive_result_t *r);
/* The reader of (key, tenure) reached the end; children (borrowed) from
 * ChildShards, n 0 when the server did not say. */
void kn_drive_shard_ended(kn_drive_t *d, const char *key, int64_t tenure,
                          const kn_cc_shard_t *children, size_t n);
/* The shard is past retention (the stream still exists). */
void kn_drive_shard_gone(kn_drive_t *d, const char *key, int64_t tenure);
/* The reader stopped itself: its deadline passed. */
void kn_drive_expired(kn_drive_t *d, const char *key, int64_t tenure);
/* The application was handed (key, tenure)'s records up to pos (NULL:
 * none); end: and the end of the shard. */
void kn_drive_delivered(kn_drive_t *d, const char *key, int64_t tenure,
                        const kn_cc_pos_t *pos, int end);
void kn_drive_processed(kn_drive_t *d, const char *key, int64_t tenure,
                        const kn_cc_pos_t *pos);
void kn_drive_yielded(kn_drive_t *d, const char *key, int64_t tenure,
                      const kn_cc_pos_t *pos);
/* A checkpoint request (state borrowed for the call); answered by
 * ops->reply, at once when the drive is stopping or stopped. */
void kn_drive_checkpoint(kn_drive_t *d, const char *key, const kn_cc_pos_t *pos,
                         int prepare, const void *state, size_t state_len,
                         void *req);
/* Graceful stop: final checkpoints, releases, then closed. */
void kn_drive_close(kn_drive_t *d);

/* ---- observation ---- */

/* When kn_drive_tick wants to run next (INT64_MAX: only on an event). */
int64_t kn_drive_wake_ms(const kn_drive_t *d);
/* The core still runs (neither closed nor failed to the end). */
int kn_drive_live(const kn_drive_t *d);
/* kn_drive_close() called, or the core failed: it is letting go. */
int kn_drive_stopping(const kn_drive_t *d);
/* The core said CLOSED: nothing more will happen. */
int kn_drive_closed(const kn_drive_t *d);
/* The code of the last non-retriable store failure (for a FATAL without
 * one), KN_ERR_NO_ERROR when none. */
kn_err_t kn_drive_verdict(const kn_drive_t *d);
/* The core, for its observation functions (kn_cc_idle, kn_cc_held ...). */
const kn_cc_t *kn_drive_core(const kn_drive_t *d);
/* The deadline (key, tenure) was last given, or -1 when not read. */
int64_t kn_drive_deadline(const kn_drive_t *d, const char *key, int64_t tenure);

#endif
