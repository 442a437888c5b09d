/* The KPL aggregated record format: many user records in one Kinesis record.
 *
 *   F3 89 9A C2 | AggregatedRecord (protobuf, kpl_messages.proto) | MD5
 *
 * The MD5 covers the protobuf bytes only.  Both directions are pure: bytes
 * in, bytes out, no I/O.  The protobuf is read and written by protobuf-c,
 * with the code protoc-c generates from kpl_messages.proto at build time. */
#ifndef KN_AGG_AGG_H
#define KN_AGG_AGG_H

#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"
#include "kinesis/batch.h"
#include "kinesis/hashkey.h"

#define KN_AGG_MAGIC "\xF3\x89\x9A\xC2"
#define KN_AGG_MAGIC_LEN 4
#define KN_AGG_MD5_LEN 16
#define KN_AGG_OVERHEAD (KN_AGG_MAGIC_LEN + KN_AGG_MD5_LEN)
/* The KPL's AggregationMaxSize default, magic and MD5 included. */
#define KN_AGG_DEFAULT_MAX_BYTES 51200
/* Kinesis accepts at most 10 MiB of data plus partition key per record
 * (on a stream of large records; 1 MiB by default).  A user record that
 * big goes out alone: aggregates stay under aggregation.max.bytes. */
#define KN_AGG_RECORD_LIMIT (10 * 1024 * 1024)

/* A partition key is 1 to 256 Unicode characters: an aggregate whose key
 * table holds a longer one (characters counted as the bytes that do not
 * continue a UTF-8 sequence, at most 4 bytes each) is corrupt. */
#define KN_AGG_KEY_MAX_CHARS 256
#define KN_AGG_KEY_MAX_BYTES (4 * KN_AGG_KEY_MAX_CHARS)

/* Non-zero if data starts with the magic number (cheap; proves nothing). */
int kn_agg_has_magic(const void *data, size_t len);

/* ---- Decoding ---------------------------------------------------------- */

typedef struct kn_agg_filter {
  /* User records with subseq <= subseq_floor are dropped: the checkpoint is
   * (this record's seq, subseq_floor).  -1 keeps them all. */
  int64_t subseq_floor;
  /* When set, the whole aggregate is dropped if any user record's hash key
   * (its explicit hash key, else the MD5 of its partition key) is outside
   * [range_start, range_end]: after a reshard the producer sends those
   * records again to the right shard (the KCL does the same). */
  int check_range;
  kn_u128_t range_start;
  kn_u128_t range_end;
} kn_agg_filter_t;

typedef struct kn_agg_result {
  int aggregated;       /* 0: no magic, a plain record (nothing appended) */
  int out_of_range;     /* the aggregate was dropped by the range check */
  size_t n_user;        /* user records in the aggregate */
  size_t n_below_floor; /* dropped by subseq_floor */
  size_t n_added;       /* appended to the batch */
} kn_agg_result_t;

/* Expands one Kinesis record's data into its user records, appended to b.
 *
 * data is overwritten: once the MD5 is checked, the message unpacked and
 * every check passed, the aggregate's bytes are no longer needed, and the
 * payloads of the user records appended, then every partition and explicit
 * hash key with its NUL, are copied over them sequentially from data's
 * start (they always fit: they were inside the protobuf).  The appended
 * records' data, pkey and ehk point into data, which must therefore be
 * owned by b or outlive it; nothing else is kept (the unpacked message is
 * freed before returning).  When the call returns an error, when data has
 * no magic number, or when no user record is appended (out of range, all
 * below the floor), data is left unchanged.  seq is stored as-is in every
 * user record, so it must be owned by b or outlive it.  filter may be
 * NULL.
 *
 * Returns KN_ERR_NO_ERROR and fills res (res->aggregated == 0 when data
 * does not start with the magic number: the caller delivers it as a plain
 * record).  Returns KN_ERR__CORRUPT when data starts with the magic number
 * but is not a valid aggregate (MD5 mismatch, malformed protobuf, missing
 * required field, index outside its table, a partition key over
 * KN_AGG_KEY_MAX_CHARS, unreadable explicit hash key under the range
 * check); the KCL delivers such a record as a plain one,
 * which is the caller's choice.  Returns KN_ERR__NOMEM on out-of-memory.
 * On any error b is left as it was and, when errp is not NULL, *errp gets
 * an error value saying what is wrong (the caller destroys it).
 *
 * Each user record gets seq, subseq (its 0-based position in the
 * aggregate), aggregated = 1, pkey and ehk from the tables (a key holding
 * a NUL byte reads as cut short there) and arrival_ms; b->bytes grows by
 * the payloads added. */
kn_err_t kn_agg_expand(kn_batch_t *b, void *data, size_t len, const char *seq,
                       int64_t arrival_ms, const kn_agg_filter_t *filter,
                       kn_agg_result_t *res, kn_error_t **errp);

/* ---- Encoding ---------------------------------------------------------- */

typedef struct kn_aggregator kn_aggregator_t;

/* max_bytes caps an aggregate's size, magic and MD5 included (0: the KPL
 * default 51,200; at most 1 MiB); max_count caps its user records (0: no
 * cap).  NULL on out-of-memory or a cap out of range. */
kn_aggregator_t *kn_aggregator_new(size_t max_bytes, size_t max_count);
/* Accepts NULL. */
void kn_aggregator_destroy(kn_aggregator_t *a);

/* Appends a user record; pkey (pkey_len bytes, not empty), ehk (decimal,
 * or NULL) and data are copied.  The key tables hold strings: a partition
 * key holding a NUL byte goes into the aggregate cut short there.  Returns
 * KN_ERR__QUEUE_FULL, changing nothing, when the record would take the
 * aggregate past a cap: flush, then add it again.  An empty aggregator takes
 * any record that Kinesis itself would take, even one over max_bytes (it is
 * then sent alone, plain). KN_ERR__INVALID_ARG for an empty partition key, an
 * explicit hash key that is not a decimal in [0, 2^128 - 1], or a record over
 * the 1 MiB limit; KN_ERR__NOMEM on out-of-memory (the record is then not
 * added). */
kn_err_t kn_aggregator_add(kn_aggregator_t *a, const char *pkey,
                           size_t pkey_len, const char *ehk, size_t ehk_len,
                           const void *data, size_t data_len);

/* The same, but data is borrowed: it must stay valid and unchanged until
 * the next flush or destroy (a lone record's out->data points at it). */
kn_err_t kn_aggregator_add_borrowed(kn_aggregator_t *a, const char *pkey,
                                    size_t pkey_len, const char *ehk,
                                    size_t ehk_len, const void *data,
                                    size_t data_len);

/* Forgets the records added since the last flush (after a failed flush,
 * whose records the caller sends another way). */
void kn_aggregator_clear(kn_aggregator_t *a);

/* User records added since the last flush. */
size_t kn_aggregator_count(const kn_aggregator_t *a);
/* Size of what was added as an aggregated record (magic and MD5 included),
 * the figure the caps apply to; 0 when empty.  Tracked as records are
 * added, not computed.  (A lone record is flushed as itself, smaller.) */
size_t kn_aggregator_size(const kn_aggregator_t *a);

/* What to send as one Kinesis record.  Every pointer is owned by the
 * aggregator and valid until its next add, flush or destroy, except a lone
 * borrowed record's data, which is the caller's. */
typedef struct kn_agg_out {
  const void *data;
  size_t len;
  const char *pkey; /* PartitionKey */
  const char *ehk;  /* ExplicitHashKey, or NULL to send none */
  size_t n_records; /* user records inside, in the order they were added */
  int aggregated;   /* 0: a lone user record sent as itself */
} kn_agg_out_t;

/* Emits what was added since the last flush and empties the aggregator.
 * Returns KN_ERR_NO_ERROR; KN_ERR__STATE when it was empty, or
 * KN_ERR__NOMEM (both leave the aggregator and out untouched).
 *
 * As the KPL does: two or more user records become magic + protobuf + MD5,
 * sent with partition key "a" and, as explicit hash key, the decimal hash
 * key of the first user record, so the aggregate lands on that record's
 * shard; a lone user record is sent as itself, with its own partition key
 * and explicit hash key (the KPL also sends the MD5-derived hash key of a
 * lone record without one; we send none, which Kinesis reads the same). */
kn_err_t kn_aggregator_flush(kn_aggregator_t *a, kn_agg_out_t *out);

#endif
