/* kn_snapshot_t: the positions of a reader's shards, as the application
 * keeps them in its own checkpoint (the stream-processor model,
 * docs/STREAM_PROCESSING.md).
 *
 * Each entry is a shard id and either the position where reading resumes
 * or "finished" (read to its end) with the shard's children.  Entries are
 * kept in shard id order.  kn_snapshot_encode() writes the documented,
 * versioned byte format; kn_snapshot_decode() reads every earlier format.
 *
 * A snapshot is not thread-safe: one thread at a time. */
#ifndef KN_SNAPSHOT_H
#define KN_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "kn/conf.h"
#include "kn/consumer.h"
#include "kn/error.h"
#include "kn/export.h"
#include "kn/position.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_snapshot_s kn_snapshot_t;

/* The newest format kn_snapshot_encode() writes. */
#define KN_SNAPSHOT_FORMAT 1

/* An empty snapshot, or NULL on out-of-memory. */
KN_API kn_snapshot_t *kn_snapshot_new(void);
/* Accepts NULL. */
KN_API void kn_snapshot_destroy(kn_snapshot_t *s);
/* A deep copy, or NULL on out-of-memory. */
KN_API kn_snapshot_t *kn_snapshot_dup(const kn_snapshot_t *s);

/* Sets shard_id (copied; 1 to 255 bytes) to resume at *pos (copied),
 * replacing what the snapshot held for it.  KN_ERR__INVALID_ARG for a bad
 * id or position, KN_ERR__NOMEM; the snapshot is unchanged on error. */
KN_API kn_err_t kn_snapshot_set_position(kn_snapshot_t *s, const char *shard_id,
                                         const kn_position_t *pos);
/* Marks shard_id finished, with its children (copied; n may be 0 when
 * they are not known), replacing what the snapshot held for it. */
KN_API kn_err_t kn_snapshot_set_finished(kn_snapshot_t *s, const char *shard_id,
                                         const char *const *children, size_t n);
/* Removes shard_id; returns 0, or -1 if it was not there. */
KN_API int kn_snapshot_remove(kn_snapshot_t *s, const char *shard_id);

KN_API size_t kn_snapshot_count(const kn_snapshot_t *s);
/* Index of shard_id, or -1. */
KN_API long kn_snapshot_find(const kn_snapshot_t *s, const char *shard_id);
/* Accessors of entry i (i < kn_snapshot_count()).  Strings and positions
 * are owned by the snapshot and valid until it changes. */
KN_API const char *kn_snapshot_shard(const kn_snapshot_t *s, size_t i);
KN_API int kn_snapshot_is_finished(const kn_snapshot_t *s, size_t i);
/* NULL for a finished shard. */
KN_API const kn_position_t *kn_snapshot_position(const kn_snapshot_t *s,
                                                 size_t i);
KN_API size_t kn_snapshot_child_count(const kn_snapshot_t *s, size_t i);
KN_API const char *kn_snapshot_child(const kn_snapshot_t *s, size_t i,
                                     size_t j);

/* The bytes of s in format KN_SNAPSHOT_FORMAT; *out is malloc'ed, free()
 * it.  NULL on success; KN_ERR__NOMEM. */
KN_API kn_error_t *kn_snapshot_encode(const kn_snapshot_t *s, void **out,
                                      size_t *len);
/* Reads bytes written by kn_snapshot_encode() of this or an earlier
 * version.  On success *out is a new snapshot (the caller owns it);
 * otherwise *out is NULL and the error (KN_ERR__CORRUPT for bytes that
 * are no snapshot, damaged or from a newer format; KN_ERR__NOMEM) says
 * what is wrong. */
KN_API kn_error_t *kn_snapshot_decode(const void *p, size_t len,
                                      kn_snapshot_t **out);

/* ---- The consumer without a lease store ---- */

/* Where each shard starts, for a consumer without a lease store: a shard
 * finished in s is not read (its children are ready), a shard with a
 * position resumes there, and a shard absent from s was born after it
 * and starts at TRIM_HORIZON.  An empty snapshot leaves
 * initial.position in force.  s is copied (into the `start.positions`
 * property); the caller keeps ownership. */
KN_API kn_err_t kn_conf_set_start_snapshot(kn_conf_t *conf,
                                           const kn_snapshot_t *s, char *errstr,
                                           size_t errstr_size);

/* The positions of a consumer without a lease store, consistent with
 * every batch kn_consumer_poll() has returned: each shard resumes right
 * after the last record returned (or where it started, when none was),
 * and shards whose every record has been returned are finished, with the
 * children the consumer knows.  Shards not read (`shards`) are left out.
 * A shard started at LATEST that has returned nothing is at LATEST: to
 * resume without skipping what arrives meanwhile, replace it with
 * AT_TIMESTAMP of the time the consumer started (as kncat does).
 * *out is a new snapshot the caller owns.  Any thread. */
KN_API kn_error_t *kn_consumer_snapshot(kn_consumer_t *kc, kn_snapshot_t **out);

#ifdef __cplusplus
}
#endif
#endif
