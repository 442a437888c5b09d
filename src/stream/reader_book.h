/* The bookkeeping of a stream reader (include/kn/stream_reader.h): its
 * shards, where each resumes, which are paused or finished, event-time
 * watermarks and idleness, and which finished shards snapshots must still
 * carry.  Pure: times come in as arguments, no thread, no I/O.
 *
 * A finished shard stays in every snapshot until a checkpoint taken after
 * the application took its report (kn_rbook_take_finished) is confirmed:
 * the application hands the report to the enumerator before its next
 * checkpoint, so that checkpoint's enumerator state has the shard
 * finished, and a restore from any earlier one announces it again (the
 * lesson of FLINK-37627). */
#ifndef KN_STREAM_READER_BOOK_H
#define KN_STREAM_READER_BOOK_H

#include <stddef.h>
#include <stdint.h>

#include "kn/position.h"
#include "kn/snapshot.h"

#define KN_RB_NONE INT64_MIN /* no watermark, no checkpoint */

typedef struct kn_rb_shard {
  char *id;              /* owned */
  kn_position_t pos;     /* where reading resumes */
  int64_t added_wall_ms; /* epoch ms when added: LATEST resumes from it */
  int got_record;        /* a record was returned since it was added */
  int paused;
  int finished;
  int announced;         /* the application took the finished report */
  int64_t finished_ckpt; /* first snapshot taken after its report */
  int64_t watermark_ms;  /* arrival time of the latest record returned */
  int64_t active_ms;     /* monotonic ms of the last record, or of adding */
  int check_trim;        /* added at a sequence number: compare it with the
                            trim horizon before reading */
} kn_rb_shard_t;

typedef struct kn_rbook {
  kn_rb_shard_t *v; /* owned, in id order */
  size_t n, cap;
  int64_t idle_ms; /* a shard without records this long is idle */
} kn_rbook_t;

void kn_rbook_init(kn_rbook_t *b);
void kn_rbook_free(kn_rbook_t *b);

kn_rb_shard_t *kn_rbook_find(kn_rbook_t *b, const char *id);

/* Adds shard id to read from *pos.  KN_ERR__STATE if it is already there
 * and not finished (a finished one is replaced); KN_ERR__INVALID_ARG,
 * KN_ERR__NOMEM. */
kn_err_t kn_rbook_add(kn_rbook_t *b, const char *id, const kn_position_t *pos,
                      int64_t now_ms, int64_t wall_ms);
/* Adds every shard of snapshot s (of this or an earlier run): reading
 * shards from their positions, finished ones as finished and not yet
 * announced, so that kn_rbook_take_finished() reports them again (the
 * enumerator may not have heard).  Stops at the first error. */
kn_err_t kn_rbook_restore(kn_rbook_t *b, const kn_snapshot_t *s, int64_t now_ms,
                          int64_t wall_ms);
/* Removes shard id; *pos (may be NULL) gets where it would resume.
 * KN_ERR__NOT_FOUND; KN_ERR__STATE for a finished shard, which stays
 * (its report comes from kn_rbook_take_finished). */
kn_err_t kn_rbook_remove(kn_rbook_t *b, const char *id, kn_position_t *pos);
/* Pauses or resumes shard id; KN_ERR__NOT_FOUND. */
kn_err_t kn_rbook_pause(kn_rbook_t *b, const char *id, int paused);

/* A batch of shard id was returned: its last record (seq, subseq) and the
 * latest approximate arrival time among its records. */
void kn_rbook_returned(kn_rbook_t *b, const char *id, const char *seq,
                       uint64_t subseq, int64_t max_arrival_ms, int64_t now_ms);
/* Every record of shard id has been returned. */
void kn_rbook_finished(kn_rbook_t *b, const char *id);
/* The next finished shard the application has not been told about,
 * marked told; NULL when none. */
const char *kn_rbook_take_finished(kn_rbook_t *b);

/* Where shard s resumes if reading starts again now: LATEST becomes
 * AT_TIMESTAMP of when it was added once the reader has run, so records
 * that arrive in between are not skipped. */
void kn_rbook_resume_at(const kn_rb_shard_t *s, kn_position_t *out);
/* Non-zero if s should be read: neither paused nor finished. */
int kn_rbook_active(const kn_rb_shard_t *s);

/* The watermark of shard id (KN_RB_NONE: none yet, or unknown shard), or
 * with id NULL the overall one: the least watermark of the shards that
 * are neither finished nor idle (a paused shard is never idle: its
 * records are still to come); KN_RB_NONE if one of them has none yet; when
 * every unfinished shard is idle, the greatest watermark of all. */
int64_t kn_rbook_watermark(const kn_rbook_t *b, const char *id, int64_t now_ms);
/* Non-zero if shard id had no record for idle_ms (it is idle). */
int kn_rbook_idle(const kn_rbook_t *b, const char *id, int64_t now_ms);

/* The positions as of now into out (emptied first), as checkpoint
 * ckpt_id: every shard with where it resumes, finished shards (not yet
 * confirmed) as finished. */
kn_err_t kn_rbook_snapshot(kn_rbook_t *b, int64_t ckpt_id, kn_snapshot_t *out);
/* Checkpoint ckpt_id is durable: finished shards whose report was taken
 * before a snapshot at or before it are dropped. */
void kn_rbook_confirm(kn_rbook_t *b, int64_t ckpt_id);

#endif
