/* Request bodies of the Kinesis operations (JSON 1.1), appended to a
 * buffer.  Pure.  A stream is named by StreamName, or by StreamARN when
 * the string given starts with "arn:".  NULL optional arguments are left
 * out.  Every function returns 0, or -1 on out-of-memory (the buffer then
 * holds a partial body: reset it). */
#ifndef KN_KINESIS_ENCODE_H
#define KN_KINESIS_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "kinesis/model.h" /* kn_iterator_type_name */
#include "kn/client.h"
#include "util/buf.h"

int kn_enc_stream(kn_buf_t *b, const char *stream);
/* shard_count 0: an on-demand stream. */
/* max_record_kib 0: not sent (the service's default). */
int kn_enc_create_stream(kn_buf_t *b, const char *stream, int shard_count,
                         int max_record_kib);
int kn_enc_delete_stream(kn_buf_t *b, const char *stream, int enforce);
int kn_enc_list_streams(kn_buf_t *b, const char *exclusive_start,
                        const char *next_token);
/* With next_token, only the token (the API refuses it next to a stream
 * name). */
int kn_enc_list_shards(kn_buf_t *b, const char *stream,
                       kn_shard_filter_type_t filter,
                       const char *filter_shard_id, int64_t timestamp_ms,
                       const char *next_token);
int kn_enc_get_shard_iterator(kn_buf_t *b, const char *stream,
                              const char *shard_id, kn_iterator_type_t type,
                              const char *sequence_number,
                              int64_t timestamp_ms);
/* limit 0: none. */
int kn_enc_get_records(kn_buf_t *b, const char *iterator, int limit);
int kn_enc_put_record(kn_buf_t *b, const char *stream,
                      const char *partition_key, const void *data, size_t len,
                      const char *explicit_hash_key);
/* Reserves the whole body once and base64-encodes each payload straight
 * into it. */
int kn_enc_put_records(kn_buf_t *b, const char *stream,
                       const kn_put_entry_t *entries, size_t n);
/* The same body written piece by piece, for a sender that builds entries
 * as it goes: begin, one entry call per record (first set for the first
 * one), end. */
int kn_enc_put_records_begin(kn_buf_t *b, const char *stream);
int kn_enc_put_records_entry(kn_buf_t *b, int first, const kn_put_entry_t *e);
int kn_enc_put_records_end(kn_buf_t *b);
int kn_enc_split_shard(kn_buf_t *b, const char *stream, const char *shard_id,
                       const char *new_starting_hash_key);
int kn_enc_merge_shards(kn_buf_t *b, const char *stream, const char *shard_id,
                        const char *adjacent_shard_id);
int kn_enc_update_shard_count(kn_buf_t *b, const char *stream, int target);
/* Register, Describe and DeregisterStreamConsumer: by stream ARN and
 * name, or by consumer ARN. */
int kn_enc_stream_consumer(kn_buf_t *b, const char *stream_arn,
                           const char *name, const char *consumer_arn);
int kn_enc_list_stream_consumers(kn_buf_t *b, const char *stream_arn,
                                 const char *next_token);
/* StartingPosition takes sequence_number for AT/AFTER_SEQUENCE_NUMBER and
 * timestamp_ms for AT_TIMESTAMP. */
int kn_enc_subscribe_to_shard(kn_buf_t *b, const char *consumer_arn,
                              const char *shard_id, kn_iterator_type_t type,
                              const char *sequence_number,
                              int64_t timestamp_ms);

#endif
