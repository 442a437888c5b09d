/* Records and batches of records read from one shard.
 *
 * A batch owns its records and all their bytes: pointers returned by the
 * accessors stay valid until kn_batch_destroy(). */
#ifndef KN_RECORD_H
#define KN_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "kn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_record_s kn_record_t;
typedef struct kn_batch_s kn_batch_t;
typedef struct kn_shard_list_s kn_shard_list_t;

/* The payload (for an aggregated record: one user record's payload). */
KN_API const void *kn_record_data(const kn_record_t *r, size_t *len);
/* NUL-terminated; partition keys are Unicode strings.  "" for a record
 * written without a key to a stream whose service picks the shard
 * (RecordDistributionStrategy AUTO); a key is never empty otherwise. */
KN_API const char *kn_record_partition_key(const kn_record_t *r);
/* Explicit hash key of a user record of an aggregate, or NULL. */
KN_API const char *kn_record_explicit_hash_key(const kn_record_t *r);
/* Decimal sequence number of the Kinesis record. */
KN_API const char *kn_record_sequence_number(const kn_record_t *r);
/* 0-based position inside an aggregated record; 0 for plain records. */
KN_API uint64_t kn_record_subsequence_number(const kn_record_t *r);
/* Non-zero if the record came out of a KPL aggregate. */
KN_API int kn_record_is_aggregated(const kn_record_t *r);
/* ApproximateArrivalTimestamp, epoch milliseconds. */
KN_API int64_t kn_record_arrival_ms(const kn_record_t *r);
KN_API const char *kn_record_shard_id(const kn_record_t *r);

KN_API size_t kn_batch_count(const kn_batch_t *b);
KN_API const kn_record_t *kn_batch_record(const kn_batch_t *b, size_t i);
KN_API const char *kn_batch_shard_id(const kn_batch_t *b);
KN_API const char *kn_batch_stream(const kn_batch_t *b);
/* MillisBehindLatest of the response the records came in, or -1. */
KN_API int64_t kn_batch_millis_behind(const kn_batch_t *b);
/* Non-zero if the shard is closed and this batch holds its last records. */
KN_API int kn_batch_shard_end(const kn_batch_t *b);
/* Accepts NULL. */
KN_API void kn_batch_destroy(kn_batch_t *b);

#ifdef __cplusplus
}
#endif
#endif
