/* kn_consumer_t: reads a stream, alone or together with other workers.
 *
 * Without a lease store (`lease.store=none`, the default) one consumer
 * reads every shard of the stream (or those listed in `shards`), follows
 * resharding in memory (parents before children) and keeps positions in
 * memory only.  With a lease store (`sqlite:PATH`, `dynamodb:TABLE`) many
 * workers on many hosts share the shards through a lease table compatible
 * with the KCL 2.x, checkpoint there, and take over each other's shards
 * when a worker stops or dies.
 *
 * With `efo.consumer.name` (or `efo.consumer.arn`) set, shards are read
 * with enhanced fan-out: SubscribeToShard pushes records over HTTP/2 (one
 * connection for every shard; TLS with ALPN, or cleartext with
 * http.version=2-prior-knowledge) with the consumer's own 2 MB/s per
 * shard.  The stream consumer is registered as `efo.registration` says;
 * checkpoints, leases and resharding work as with polling.
 *
 * Threads: the consumer's I/O runs on an internal thread; every callback
 * runs inside kn_consumer_poll() on the application's thread.
 *
 * Delivery is at-least-once: after a failover (a worker killed, frozen or
 * cut off from the lease store) a shard is read again from its last
 * checkpoint.  Planned moves deliver nothing twice: a worker that joins,
 * or balances the load, asks for a lease (lease.handoff.timeout.ms); its
 * owner stops reading, lets the application finish what it was handed and
 * checkpoints exactly that before passing the lease on; a worker that
 * closes checkpoints what it handed out before releasing its leases. */
#ifndef KN_CONSUMER_H
#define KN_CONSUMER_H

#include <stddef.h>
#include <stdint.h>

#include "kn/conf.h"
#include "kn/error.h"
#include "kn/export.h"
#include "kn/record.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_consumer_s kn_consumer_t;

/* conf is copied; the caller keeps ownership.  The `stream` property is
 * required.  Starts reading at once.  NULL on failure (bad configuration,
 * no credentials, lease store unusable) with a reason in errstr. */
KN_API kn_consumer_t *kn_consumer_new(const kn_conf_t *conf, char *errstr,
                                      size_t errstr_size);

/* Waits up to timeout_ms (0: no wait, -1: forever) for the next batch of
 * records of one shard, in order within the shard.  Returns the batch,
 * owned by the caller until kn_batch_destroy(), or NULL when nothing came
 * in time or the consumer has failed (see kn_consumer_fatal_error()).
 * Lease and shard callbacks run inside this call.  With auto-checkpoint
 * on, calling poll again marks the records of earlier batches processed. */
KN_API kn_batch_t *kn_consumer_poll(kn_consumer_t *kc, int timeout_ms);

/* Waits up to timeout_ms (0: no wait, -1: forever) until a
 * kn_consumer_poll() would not wait: a batch or a callback is queued, or
 * the consumer failed or is closing.  Returns non-zero then, 0 when the
 * time ran out.  Nothing is taken from the queue and no callback runs, so
 * the next poll may still find nothing (a batch dropped because its lease
 * expired).  Any thread, for event loops that wait on a thread of their own
 * and poll with timeout 0 on theirs; not while another thread waits in
 * kn_consumer_poll() (a wake-up reaches one of them only). */
KN_API int kn_consumer_wait(kn_consumer_t *kc, int timeout_ms);

/* The error that stopped the consumer (stream deleted, credentials
 * rejected, lease store lost for good), or NULL while it runs.  Owned by
 * the consumer. */
KN_API const kn_error_t *kn_consumer_fatal_error(kn_consumer_t *kc);

/* Non-zero when nothing is waiting to be polled and every shard this
 * worker reads has been read to its current end (closed shards and their
 * children included).  `kncat consume -e` exits on it. */
KN_API int kn_consumer_caught_up(kn_consumer_t *kc);

/* Checkpoints the shard of r at r's position (sequence and sub-sequence
 * numbers), waiting until the lease store has it.  KN_ERR__LEASE_LOST in
 * the error when this worker no longer holds the shard: the checkpoint is
 * not moved.  Without a lease store it only updates the position kept in
 * memory.  NULL on success. */
KN_API kn_error_t *kn_consumer_checkpoint(kn_consumer_t *kc,
                                          const kn_record_t *r);
/* The same for the last record of the batch. */
KN_API kn_error_t *kn_consumer_checkpoint_batch(kn_consumer_t *kc,
                                                const kn_batch_t *b);
/* The same at a position given by value: sequence number seq (decimal)
 * and sub-sequence number subseq of shard_id, for applications that keep
 * positions rather than records (`kncat multilang`).  The position is not
 * checked against what was delivered: the caller does that. */
KN_API kn_error_t *kn_consumer_checkpoint_seq(kn_consumer_t *kc,
                                              const char *shard_id,
                                              const char *seq, uint64_t subseq);
/* The checkpoint of shard_id's lease as this worker last knew it (when it
 * took the lease, or its own last write): a decimal sequence number or
 * TRIM_HORIZON, LATEST, AT_TIMESTAMP, SHARD_END, copied into seq (size
 * bytes, 128 are enough), its sub-sequence number into *subseq.  Returns
 * 0, or -1 if this worker does not hold the shard, there is no lease
 * store, or seq is too small. */
KN_API int kn_consumer_lease_checkpoint(kn_consumer_t *kc, const char *shard_id,
                                        char *seq, size_t size,
                                        uint64_t *subseq);
/* Queues the checkpoint and returns at once; the outcome reaches the
 * checkpoint callback (if set) inside a later poll. */
KN_API kn_err_t kn_consumer_checkpoint_async(kn_consumer_t *kc,
                                             const kn_record_t *r);
/* Records a pending checkpoint at r with optional application state
 * (copied; at most 64 KiB) without moving the checkpoint.  The next worker
 * to acquire the shard gets it in its lease-acquired callback.  A later
 * checkpoint at or past r clears it. */
KN_API kn_error_t *kn_consumer_prepare_checkpoint(kn_consumer_t *kc,
                                                  const kn_record_t *r,
                                                  const void *state,
                                                  size_t state_len);

/* The fencing token (lease counter at acquisition) under which this worker
 * reads shard_id, or -1 if it does not hold the shard.  Without a lease
 * store: 0 for every shard being read. */
KN_API int64_t kn_consumer_fencing_token(kn_consumer_t *kc,
                                         const char *shard_id);

/* The statistics document (docs/STATISTICS.md) as of now; free() it.
 * With fan-out each shard read by subscription has an "efo" object: state,
 * subscriptions, resubscribes, events, last_event_age_ms,
 * millis_behind_latest, watchdog_renewals, in_use (ResourceInUse answers)
 * and errors. */
KN_API char *kn_consumer_stats_json(kn_consumer_t *kc);

/* The consumer's metrics (docs/METRICS.md) in the Prometheus text
 * exposition format, version 0.0.4, rendered into buf as snprintf does:
 * returns the length of the whole document; when it is size or more, buf
 * holds a truncated copy (NUL-terminated when size > 0) and the call may
 * be repeated with a larger buffer.  0 on out-of-memory.  Any thread; the
 * consumer's lock is held only to copy the counters. */
KN_API size_t kn_consumer_metrics(kn_consumer_t *kc, char *buf, size_t size);

/* Liveness and readiness, for health endpoints. */
typedef struct kn_consumer_health {
  int alive;        /* running: not failed, not closing */
  int ready;        /* alive and synced (lease mode: with the lease table),
                       holding leases or finding none to take, and the
                       lease store answered within the grace period
                       (lease.duration.ms less half the renewal interval) */
  char reason[256]; /* why not, in words ("ok" when ready) */
} kn_consumer_health_t;
/* Fills *h.  Any thread. */
KN_API void kn_consumer_health(kn_consumer_t *kc, kn_consumer_health_t *h);

/* Stops reading, writes the final checkpoint of every shard (the records
 * returned by earlier polls, when auto-checkpoint is on) and releases
 * every lease so that other workers take them at once.  Batches not yet
 * polled are dropped (they will be read again by the next owner).  Safe
 * to call once; kn_consumer_destroy() calls it if needed. */
KN_API kn_error_t *kn_consumer_close(kn_consumer_t *kc);

/* Accepts NULL. */
KN_API void kn_consumer_destroy(kn_consumer_t *kc);

/* ---- Callbacks (set on the conf before kn_consumer_new) ----
 * Strings and buffers passed to callbacks are valid only during the call.
 * opaque is the pointer given with the callback. */

/* This worker acquired shard_id under fencing_token.  pending_state is the
 * application state of a prepared checkpoint left by the previous owner
 * (NULL, 0 when none). */
KN_API void kn_conf_set_lease_acquired_cb(
    kn_conf_t *conf,
    void (*cb)(kn_consumer_t *kc, const char *shard_id, int64_t fencing_token,
               const void *pending_state, size_t pending_len, void *opaque),
    void *opaque);

/* This worker stopped reading shard_id: KN_ERR__LEASE_LOST when another
 * worker took it or it expired, KN_ERR__DESTROY when released at close,
 * KN_ERR__HANDOFF when another worker asked for it.  With a hand-off the
 * lease is still held while the callback runs: checkpoints made in it
 * (or before it) are what the next owner continues from.  With
 * auto-checkpoint every record returned by earlier polls counts as
 * processed and is checkpointed; nothing more of the shard is returned. */
KN_API void kn_conf_set_lease_lost_cb(kn_conf_t *conf,
                                      void (*cb)(kn_consumer_t *kc,
                                                 const char *shard_id,
                                                 kn_err_t reason, void *opaque),
                                      void *opaque);

/* shard_id is closed and every record of it has been delivered. */
KN_API void kn_conf_set_shard_ended_cb(kn_conf_t *conf,
                                       void (*cb)(kn_consumer_t *kc,
                                                  const char *shard_id,
                                                  void *opaque),
                                       void *opaque);

#ifdef __cplusplus
}
#endif
#endif
