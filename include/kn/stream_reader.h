/* kn_stream_reader_t: a reader of the stream-processor model
 * (docs/STREAM_PROCESSING.md).  The application, told by an enumerator
 * (include/kn/enumerator.h), adds and removes the shards it reads, each
 * with its start; the reader reads them (polling or fan-out, with KPL
 * de-aggregation, as kn_consumer_t does without a lease store, whose
 * properties it takes), reports the shards it finished, keeps per-shard
 * and overall event-time watermarks, and takes snapshots of its positions
 * consistent with every batch kn_stream_reader_poll() has returned.
 * Finished shards stay in its snapshots until the application confirms
 * a checkpoint that holds them.
 *
 * Changes to the set of shards (add, remove, pause, resume) take effect
 * at the next poll, all together: the reader then restarts its consumer
 * from the positions of what poll returned (batches fetched but not yet
 * returned are fetched again).
 *
 * Threads: one application thread calls it; the reading itself runs on
 * the library's threads, and callbacks set on the conf (log, statistics)
 * run inside poll.  A shard-ended callback on the conf is replaced by the
 * reader's own: kn_stream_reader_take_finished() reports those shards. */
#ifndef KN_STREAM_READER_H
#define KN_STREAM_READER_H

#include <stddef.h>
#include <stdint.h>

#include "kn/conf.h"
#include "kn/error.h"
#include "kn/export.h"
#include "kn/position.h"
#include "kn/record.h"
#include "kn/snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_stream_reader_s kn_stream_reader_t;

/* No watermark (yet). */
#define KN_WATERMARK_NONE INT64_MIN

/* conf is copied; the caller keeps ownership.  `stream` is required; a
 * lease store, `shards` and `start.positions` are refused (the reader
 * sets the last two itself).  Starts with no shard.  NULL on failure with
 * a reason in errstr. */
KN_API kn_stream_reader_t *kn_stream_reader_new(const kn_conf_t *conf,
                                                char *errstr,
                                                size_t errstr_size);
/* Stops reading; batches not returned are dropped.  Accepts NULL. */
KN_API void kn_stream_reader_destroy(kn_stream_reader_t *r);

/* Reads shard_id (copied) from *start (copied).  KN_ERR__STATE if the
 * reader already has it (a finished one is replaced).  A start at a
 * sequence number older than the oldest record the shard keeps (it aged
 * out of the retention period) becomes TRIM_HORIZON before the first
 * read, with a warning in the log: the records in between are gone. */
KN_API kn_err_t kn_stream_reader_add_shard(kn_stream_reader_t *r,
                                           const char *shard_id,
                                           const kn_position_t *start);
/* Stops reading shard_id; *resume_at (may be NULL) gets the position
 * right after the last record poll returned of it, for the enumerator's
 * kn_enumerator_shard_returned().  KN_ERR__NOT_FOUND; KN_ERR__STATE when
 * the shard is finished: it is not handed back (that would read it
 * again), its report comes from kn_stream_reader_take_finished(). */
KN_API kn_err_t kn_stream_reader_remove_shard(kn_stream_reader_t *r,
                                              const char *shard_id,
                                              kn_position_t *resume_at);
/* Holds shard_id back (its watermark too) or lets it go on. */
KN_API kn_err_t kn_stream_reader_pause_shard(kn_stream_reader_t *r,
                                             const char *shard_id);
KN_API kn_err_t kn_stream_reader_resume_shard(kn_stream_reader_t *r,
                                              const char *shard_id);
/* Adds every shard of a snapshot taken by kn_stream_reader_snapshot() (of
 * this or an earlier run): reading shards from their positions; finished
 * ones as finished, to be reported again by
 * kn_stream_reader_take_finished() (the enumerator may not have heard). */
KN_API kn_err_t kn_stream_reader_restore(kn_stream_reader_t *r,
                                         const kn_snapshot_t *s);

/* Waits up to timeout_ms (0: no wait, -1: forever) for the next batch of
 * one of the shards, in order within the shard.  The batch is owned by
 * the caller until kn_batch_destroy().  NULL when nothing came in time, or
 * the reader failed (kn_stream_reader_fatal_error()). */
KN_API kn_batch_t *kn_stream_reader_poll(kn_stream_reader_t *r, int timeout_ms);
/* What stopped the reader, or NULL.  Owned by the reader, valid until its
 * next call. */
KN_API const kn_error_t *kn_stream_reader_fatal_error(kn_stream_reader_t *r);

/* A shard every record of which poll has returned (or that aged out of
 * the stream), for the enumerator's kn_enumerator_finished(): copies its
 * id into shard_id (size bytes, 256 are enough) and returns 1, once per
 * shard; 0 when there is none.  Hand the report to the enumerator before
 * the next checkpoint: the shard stays in this reader's snapshots until a
 * checkpoint taken after this call is confirmed. */
KN_API int kn_stream_reader_take_finished(kn_stream_reader_t *r, char *shard_id,
                                          size_t size);

/* Event time is the records' approximate arrival time.  With shard_id:
 * the latest arrival time among the records poll returned of it; with
 * NULL: the least watermark of the shards neither finished nor idle
 * (paused ones included), or when every one is idle, the greatest of
 * all.  KN_WATERMARK_NONE when there is none yet. */
KN_API int64_t kn_stream_reader_watermark(kn_stream_reader_t *r,
                                          const char *shard_id);
/* A shard that returned no record for idle_ms (default 60000) is idle:
 * it does not hold the overall watermark back. */
KN_API void kn_stream_reader_set_idle_ms(kn_stream_reader_t *r,
                                         int64_t idle_ms);
KN_API int kn_stream_reader_is_idle(kn_stream_reader_t *r,
                                    const char *shard_id);

/* The positions as of every batch poll has returned, as checkpoint
 * checkpoint_id (any increasing number of the application's): every
 * shard with where it resumes, and finished shards, which stay in every
 * later snapshot until kn_stream_reader_confirm() of a checkpoint taken
 * after their report was taken (kn_stream_reader_take_finished()).  *out
 * is new; the caller owns it. */
KN_API kn_error_t *kn_stream_reader_snapshot(kn_stream_reader_t *r,
                                             int64_t checkpoint_id,
                                             kn_snapshot_t **out);
/* The checkpoint checkpoint_id is durable (committed with the output). */
KN_API void kn_stream_reader_confirm(kn_stream_reader_t *r,
                                     int64_t checkpoint_id);

#ifdef __cplusplus
}
#endif
#endif
