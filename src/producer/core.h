/* The producer's engine, without I/O: records queued per predicted shard,
 * built into PutRecords bodies under the call, aggregation, linger and
 * per-shard rate limits, and the outcome of each call turned into
 * delivery reports or retries.  Times are injected (monotonic
 * microseconds), so tests drive it with a fake clock and fake answers;
 * producer.c runs it on the I/O thread, which is its only user.
 *
 * Messages given to the core belong to it until it hands them back in a
 * `done` list: each with its report filled in (shard id, sequence number
 * and sub-sequence number, or err).  Batches returned by kn_pcore_take()
 * belong to the caller, who gives each back exactly once, to
 * kn_pcore_done() or kn_pcore_abandon(). */
#ifndef KN_PRODUCER_CORE_H
#define KN_PRODUCER_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "agg/agg.h"
#include "kinesis/shard.h"
#include "producer/msg.h"
#include "producer/shardmap.h"
#include "util/backoff.h"
#include "util/buf.h"
#include "util/tbucket.h"

/* The service's limits. */
#define KN_PUT_MAX_RECORDS 500
#define KN_PUT_MAX_BYTES (5 * 1024 * 1024) /* data and keys of one call */
#define KN_PUT_RECORD_MAX (1024 * 1024)    /* data and key of one record */
/* On a stream of large records (MaxRecordSizeInKiB over 1,024): records up
 * to 10 MiB, and calls too. */
#define KN_PUT_RECORD_MAX_LARGE (10 * 1024 * 1024)
#define KN_PUT_MAX_BYTES_LARGE (10 * 1024 * 1024)
#define KN_PKEY_MAX_CHARS 256

typedef struct kn_pcore_cfg {
  const char *stream; /* copied */
  int aggregate;
  size_t agg_max_bytes;     /* 0: the KPL default */
  size_t agg_max_count;     /* 0: no cap */
  size_t batch_max_records; /* at most KN_PUT_MAX_RECORDS */
  size_t batch_max_bytes;   /* at most KN_PUT_MAX_BYTES */
  int64_t linger_us;
  double shard_records_per_s; /* <= 0: unlimited */
  double shard_bytes_per_s;   /* <= 0: unlimited */
  int strict;                 /* ordering.strict */
  int shard_max_calls;        /* calls in flight with records of a shard;
                                 0: 1 (strict forces 1) */
  int64_t backoff_ms, backoff_max_ms;
} kn_pcore_cfg_t;

typedef struct kn_pshard {
  char *id; /* owned */
  kn_u128_t start, end;
  kn_msg_list_t q; /* waiting to be sent, oldest first */
  size_t q_bytes;
  kn_tbucket_t tb_records, tb_bytes;
  kn_backoff_t backoff;
  int64_t retry_at_us;    /* nothing is sent before (back-off) */
  uint64_t backoff_batch; /* the answer that last backed it off */
  int inflight;           /* entries in calls not yet answered */
  int calls;              /* calls not yet answered holding entries */
  uint64_t batch_id;      /* the last call given entries */
  int held;               /* a record went elsewhere: wait for the map */
  int fresh;              /* appeared in a map change */
  struct kn_pshard *next_retired;
} kn_pshard_t;

/* One Kinesis record of a call: a user record, or an aggregate of some. */
typedef struct kn_pentry {
  kn_pshard_t *shard;
  kn_msg_list_t msgs;
  uint8_t aggregated;
} kn_pentry_t;

typedef struct kn_pbatch {
  struct kn_pbatch *next; /* for the caller's list of calls */
  void *req;              /* the caller's handle of the call */
  void *owner;            /* the caller's, for its callback */
  uint64_t id;
  kn_buf_t body; /* the PutRecords request */
  kn_pentry_t *e;
  size_t n, cap;
  size_t bytes;    /* data and partition keys, as the limit counts */
  size_t n_msgs;   /* user records */
  int64_t sent_us; /* the caller's: when the call was sent */
} kn_pbatch_t;

typedef struct kn_pcore kn_pcore_t;

/* NULL on out-of-memory or a cap out of range. */
kn_pcore_t *kn_pcore_new(const kn_pcore_cfg_t *cfg, int64_t now_us);
/* Moves every message the core holds into out (no report filled in) and
 * frees the core.  Batches not given back must be abandoned first.
 * Accepts NULL. */
void kn_pcore_destroy(kn_pcore_t *c, kn_msg_list_t *out);

/* Takes m.  m->hk, enq_us and deadline_us must be set. */
void kn_pcore_add(kn_pcore_t *c, kn_msg_t *m);

/* A new shard map from a listing (l taken, even on failure).  Queued
 * records of shards that left the map go to their new shards.  With
 * resolve_verify, aggregates that landed on an unexpected shard are
 * checked against it: stored (reported in done) when the shard's range
 * holds every record in them, queued again otherwise.  Returns 0, or -1
 * on out-of-memory (the old map stays). */
int kn_pcore_set_map(kn_pcore_t *c, kn_shard_list_t *l, int resolve_verify,
                     int64_t now_us, kn_msg_list_t *done);
int kn_pcore_has_map(const kn_pcore_t *c);

/* What DescribeStreamSummary says of the stream: its largest record (data
 * and key, bytes: MaxRecordSizeInKiB * 1024) and whether the service picks
 * the shard (RecordDistributionStrategy AUTO).  Calls are sized by the
 * first (up to 10 MiB on a stream of large records, and never smaller
 * than one record); the second stops aggregation (the service would place
 * an aggregate anywhere, and a reader drops the records outside its
 * shard's range) and takes a record stored on any shard as stored where it
 * belongs.  Records bigger than the limit are the caller's to refuse.
 * Returns 0, or -1 for a record_max out of range. */
int kn_pcore_set_stream(kn_pcore_t *c, size_t record_max, int auto_dist);

/* The next call to send now, or NULL.  flush: ignore linger.  *wake_us
 * gets when to ask again if nothing changes before (INT64_MAX: never;
 * answers and new records are reasons to ask sooner).  Records whose
 * time-to-live ran out before being sent are reported in done. */
kn_pbatch_t *kn_pcore_take(kn_pcore_t *c, int64_t now_us, int flush,
                           int64_t *wake_us, kn_msg_list_t *done);

/* Outcomes of kn_pcore_done. */
#define KN_PCORE_REFRESH 0x1 /* a record went to an unexpected shard */

/* The answer to b (freed here): err when the call failed as a whole, else
 * resp (a reference is taken per record it stores; the caller keeps its
 * own).  Stored and finally failed records go to done; the others are
 * queued again ahead of newer records of their shard.  Returns
 * KN_PCORE_* flags. */
int kn_pcore_done(kn_pcore_t *c, kn_pbatch_t *b, const kn_error_t *err,
                  kn_presp_t *resp, int64_t now_us, kn_msg_list_t *done);

/* Gives b back unanswered (freed here); its records go to out. */
void kn_pcore_abandon(kn_pcore_t *c, kn_pbatch_t *b, kn_msg_list_t *out);

/* Reports in done, with KN_ERR__MSG_TIMED_OUT, the queued records whose
 * time-to-live has run out.  Returns the earliest deadline still queued
 * (INT64_MAX: none). */
int64_t kn_pcore_expire(kn_pcore_t *c, int64_t now_us, kn_msg_list_t *done);

/* Remembers err (copied) as the last failure, quoted by time-out reports. */
void kn_pcore_note_error(kn_pcore_t *c, const kn_error_t *err);

/* Fails every queued record at once with a copy of err (the stream is
 * gone, credentials rejected: retrying until the time-to-live is
 * pointless). */
void kn_pcore_fail_all(kn_pcore_t *c, const kn_error_t *err,
                       kn_msg_list_t *done);

typedef struct kn_pcore_stats {
  size_t queued;    /* records waiting in the core */
  size_t inflight;  /* records in calls not yet answered */
  uint64_t retries; /* records queued again after a failure */
  size_t shards;    /* open shards in the map */
} kn_pcore_stats_t;
void kn_pcore_stats(const kn_pcore_t *c, kn_pcore_stats_t *out);

/* The shard a hash key goes to now, or NULL (no map, or a gap). */
const kn_pshard_t *kn_pcore_predict(const kn_pcore_t *c, kn_u128_t hk);

#endif
