/* kn_client_t: typed Kinesis Data Streams operations.
 *
 * Calls are blocking and thread-safe; retriable failures (throttling,
 * 5xx, connection errors) are retried inside according to the retry.*
 * properties before an error is returned.  Every call returns NULL on
 * success or a kn_error_t the caller destroys.  Output objects (*out) are
 * owned by the caller and destroyed with their _destroy function. */
#ifndef KN_CLIENT_H
#define KN_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "kn/conf.h"
#include "kn/error.h"
#include "kn/export.h"
#include "kn/record.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_client_s kn_client_t;

/* conf is copied; the caller keeps ownership.  Resolves region, endpoint
 * and credentials (without network calls unless the chain needs them).
 * NULL on failure with a reason in errstr. */
KN_API kn_client_t *kn_client_new(const kn_conf_t *conf, char *errstr,
                                  size_t errstr_size);
/* Accepts NULL. */
KN_API void kn_client_destroy(kn_client_t *kc);

/* ---- Streams ---- */

/* A stream's MaxRecordSizeInKiB lies between these (1 MiB, the default,
 * and 10 MiB). */
#define KN_RECORD_KIB_MIN 1024
#define KN_RECORD_KIB_MAX 10240

/* shard_count 0 creates an on-demand stream. */
KN_API kn_error_t *kn_create_stream(kn_client_t *kc, const char *stream,
                                    int shard_count);
/* The same, with the stream's MaxRecordSizeInKiB (1,024 to 10,240; 0: the
 * service's default, 1,024). */
KN_API kn_error_t *kn_create_stream_sized(kn_client_t *kc, const char *stream,
                                          int shard_count, int max_record_kib);
KN_API kn_error_t *kn_delete_stream(kn_client_t *kc, const char *stream,
                                    int enforce_consumer_deletion);
/* Polls DescribeStreamSummary until ACTIVE (or gone, when waiting for a
 * deletion with want_deleted).  timeout_ms -1: forever. */
KN_API kn_error_t *kn_wait_stream(kn_client_t *kc, const char *stream,
                                  int want_deleted, int timeout_ms);

typedef struct kn_stream_summary_s kn_stream_summary_t;
KN_API kn_error_t *kn_describe_stream_summary(kn_client_t *kc,
                                              const char *stream,
                                              kn_stream_summary_t **out);
KN_API const char *kn_stream_summary_name(const kn_stream_summary_t *s);
KN_API const char *kn_stream_summary_arn(const kn_stream_summary_t *s);
KN_API const char *kn_stream_summary_status(const kn_stream_summary_t *s);
KN_API const char *kn_stream_summary_mode(
    const kn_stream_summary_t *s); /* or NULL */
KN_API int kn_stream_summary_open_shards(const kn_stream_summary_t *s);
KN_API int kn_stream_summary_retention_hours(const kn_stream_summary_t *s);
KN_API int kn_stream_summary_consumers(
    const kn_stream_summary_t *s); /* -1 unknown */
/* MaxRecordSizeInKiB: the largest record (data and partition key) the
 * stream takes, 1,024 when the server does not say. */
KN_API int kn_stream_summary_max_record_kib(const kn_stream_summary_t *s);
/* RecordDistributionStrategy: "AUTO" (the service picks the shard and
 * ignores partition and explicit hash keys), "USER_PARTITION_KEY", or NULL
 * when the server does not say (as USER_PARTITION_KEY). */
KN_API const char *kn_stream_summary_distribution(const kn_stream_summary_t *s);
KN_API void kn_stream_summary_destroy(kn_stream_summary_t *s);

typedef struct kn_strlist_s kn_strlist_t;
KN_API size_t kn_strlist_count(const kn_strlist_t *l);
KN_API const char *kn_strlist_get(const kn_strlist_t *l, size_t i);
KN_API void kn_strlist_destroy(kn_strlist_t *l);

/* All stream names (every page). */
KN_API kn_error_t *kn_list_streams(kn_client_t *kc, kn_strlist_t **out);

/* ---- Shards ---- */

typedef struct kn_shard_s kn_shard_t;

typedef enum kn_shard_filter_type {
  KN_SHARD_FILTER_NONE = 0,
  KN_SHARD_FILTER_AFTER_SHARD_ID,
  KN_SHARD_FILTER_AT_TRIM_HORIZON,
  KN_SHARD_FILTER_FROM_TRIM_HORIZON,
  KN_SHARD_FILTER_AT_LATEST,
  KN_SHARD_FILTER_AT_TIMESTAMP,
  KN_SHARD_FILTER_FROM_TIMESTAMP
} kn_shard_filter_type_t;

/* Every shard of the stream (every page of ListShards), optionally with a
 * ShardFilter (servers that ignore it return every shard).  filter_arg is
 * the shard id for AFTER_SHARD_ID; timestamp_ms for the TIMESTAMP types. */
KN_API kn_error_t *kn_list_shards(kn_client_t *kc, const char *stream,
                                  kn_shard_filter_type_t filter,
                                  const char *filter_shard_id,
                                  int64_t filter_timestamp_ms,
                                  kn_shard_list_t **out);

KN_API size_t kn_shard_list_count(const kn_shard_list_t *l);
KN_API const kn_shard_t *kn_shard_list_get(const kn_shard_list_t *l, size_t i);
KN_API const kn_shard_t *kn_shard_list_find(const kn_shard_list_t *l,
                                            const char *shard_id);
KN_API void kn_shard_list_destroy(kn_shard_list_t *l);

KN_API const char *kn_shard_id(const kn_shard_t *s);
KN_API const char *kn_shard_parent_id(const kn_shard_t *s); /* or NULL */
KN_API const char *kn_shard_adjacent_parent_id(
    const kn_shard_t *s);                                        /* or NULL */
KN_API const char *kn_shard_hash_key_start(const kn_shard_t *s); /* decimal */
KN_API const char *kn_shard_hash_key_end(const kn_shard_t *s);   /* decimal */
KN_API const char *kn_shard_sequence_start(const kn_shard_t *s); /* or NULL */
/* Present only for a closed shard; do not compare it with record sequence
 * numbers (some servers report a placeholder). */
KN_API const char *kn_shard_sequence_end(const kn_shard_t *s);
KN_API int kn_shard_is_open(const kn_shard_t *s);

/* new_starting_hash_key NULL: the middle of the shard's range. */
KN_API kn_error_t *kn_split_shard(kn_client_t *kc, const char *stream,
                                  const char *shard_id,
                                  const char *new_starting_hash_key);
KN_API kn_error_t *kn_merge_shards(kn_client_t *kc, const char *stream,
                                   const char *shard_id,
                                   const char *adjacent_shard_id);
KN_API kn_error_t *kn_update_shard_count(kn_client_t *kc, const char *stream,
                                         int target_shard_count);

/* ---- Reading ---- */

typedef enum kn_iterator_type {
  KN_ITER_TRIM_HORIZON = 0,
  KN_ITER_LATEST,
  KN_ITER_AT_SEQUENCE_NUMBER,
  KN_ITER_AFTER_SEQUENCE_NUMBER,
  KN_ITER_AT_TIMESTAMP
} kn_iterator_type_t;

/* sequence_number for AT/AFTER_SEQUENCE_NUMBER, timestamp_ms for
 * AT_TIMESTAMP.  *iterator is malloc'ed; free() it. */
KN_API kn_error_t *kn_get_shard_iterator(kn_client_t *kc, const char *stream,
                                         const char *shard_id,
                                         kn_iterator_type_t type,
                                         const char *sequence_number,
                                         int64_t timestamp_ms, char **iterator);

/* One GetRecords call.  limit 0: the service default.  The batch carries
 * the records (not deaggregated: see kn_consumer_t for that),
 * kn_batch_next_iterator() and kn_batch_child_shards(). */
KN_API kn_error_t *kn_get_records(kn_client_t *kc, const char *iterator,
                                  int limit, kn_batch_t **out);
/* NextShardIterator, or NULL at the end of a closed shard.  Owned by the
 * batch. */
KN_API const char *kn_batch_next_iterator(const kn_batch_t *b);
/* ChildShards reported at the end of a closed shard, or NULL.  Owned by
 * the batch. */
KN_API const kn_shard_list_t *kn_batch_child_shards(const kn_batch_t *b);

/* ---- Writing ---- */

/* *sequence_number and *shard_id (either may be NULL) are malloc'ed. */
KN_API kn_error_t *kn_put_record(kn_client_t *kc, const char *stream,
                                 const char *partition_key, const void *data,
                                 size_t len, const char *explicit_hash_key,
                                 char **sequence_number, char **shard_id);

/* One entry of PutRecords; the strings and data are only read during the
 * call. */
typedef struct kn_put_entry {
  const char *partition_key;
  const void *data;
  size_t len;
  const char *explicit_hash_key; /* or NULL */
} kn_put_entry_t;

typedef struct kn_put_results_s kn_put_results_t;
/* One PutRecords call (at most 500 entries, 5 MiB): the call succeeds as a
 * whole when the service answered; entries may still have failed
 * individually (see kn_put_results_error_code). */
KN_API kn_error_t *kn_put_records(kn_client_t *kc, const char *stream,
                                  const kn_put_entry_t *entries, size_t n,
                                  kn_put_results_t **out);
KN_API size_t kn_put_results_count(const kn_put_results_t *r);
KN_API size_t kn_put_results_failed(const kn_put_results_t *r);
KN_API const char *kn_put_results_shard_id(const kn_put_results_t *r, size_t i);
KN_API const char *kn_put_results_sequence_number(const kn_put_results_t *r,
                                                  size_t i);
/* ErrorCode of a failed entry ("ProvisionedThroughputExceededException"),
 * or NULL if it succeeded. */
KN_API const char *kn_put_results_error_code(const kn_put_results_t *r,
                                             size_t i);
KN_API const char *kn_put_results_error_message(const kn_put_results_t *r,
                                                size_t i);
KN_API void kn_put_results_destroy(kn_put_results_t *r);

/* ---- Enhanced fan-out consumers ---- */

typedef struct kn_stream_consumer_s kn_stream_consumer_t;
KN_API const char *kn_stream_consumer_name(const kn_stream_consumer_t *c);
KN_API const char *kn_stream_consumer_arn(const kn_stream_consumer_t *c);
KN_API const char *kn_stream_consumer_status(const kn_stream_consumer_t *c);
KN_API int64_t kn_stream_consumer_created_ms(const kn_stream_consumer_t *c);
KN_API void kn_stream_consumer_destroy(kn_stream_consumer_t *c);

KN_API kn_error_t *kn_register_stream_consumer(kn_client_t *kc,
                                               const char *stream_arn,
                                               const char *name,
                                               kn_stream_consumer_t **out);
/* By stream ARN and name, or by consumer ARN (then the others may be
 * NULL). */
KN_API kn_error_t *kn_describe_stream_consumer(kn_client_t *kc,
                                               const char *stream_arn,
                                               const char *name,
                                               const char *consumer_arn,
                                               kn_stream_consumer_t **out);
KN_API kn_error_t *kn_deregister_stream_consumer(kn_client_t *kc,
                                                 const char *stream_arn,
                                                 const char *name,
                                                 const char *consumer_arn);
typedef struct kn_stream_consumer_list_s kn_stream_consumer_list_t;
KN_API kn_error_t *kn_list_stream_consumers(kn_client_t *kc,
                                            const char *stream_arn,
                                            kn_stream_consumer_list_t **out);
KN_API size_t kn_stream_consumer_list_count(const kn_stream_consumer_list_t *l);
KN_API const kn_stream_consumer_t *kn_stream_consumer_list_get(
    const kn_stream_consumer_list_t *l, size_t i);
KN_API void kn_stream_consumer_list_destroy(kn_stream_consumer_list_t *l);

/* ---- Helpers ---- */

/* Hash key of a partition key: MD5 as a big-endian 128-bit integer, in
 * decimal (at most 39 digits); buf needs 40 bytes.  Returns buf. */
KN_API char *kn_partition_key_hash(const char *partition_key, char *buf);
/* Compares decimal sequence numbers as numbers: <0, 0, >0. */
KN_API int kn_sequence_number_cmp(const char *a, const char *b);

#ifdef __cplusplus
}
#endif
#endif
