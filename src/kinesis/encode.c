#include "kinesis/encode.h"

#include <inttypes.h>
#include <string.h>

#include "util/base64.h"

/* A tiny writer for flat objects: members are separated as they come and
 * the first allocation failure sticks. */
typedef struct jw {
  kn_buf_t *b;
  int n; /* members written */
  int err;
} jw_t;

static void jw_begin(jw_t *w, kn_buf_t *b) {
  w->b = b;
  w->n = 0;
  w->err = kn_buf_append_char(b, '{');
}

static void jw_name(jw_t *w, const char *name) {
  if (w->err) return;
  if (w->n++ && kn_buf_append_char(w->b, ',')) w->err = -1;
  if (!w->err && (kn_buf_append_json_str(w->b, name, strlen(name)) ||
                  kn_buf_append_char(w->b, ':')))
    w->err = -1;
}

static void jw_str(jw_t *w, const char *name, const char *v) {
  if (!v) return;
  jw_name(w, name);
  if (!w->err && kn_buf_append_json_str(w->b, v, strlen(v))) w->err = -1;
}

/* A raw JSON value: a number, true, or a nested object. */
static void jw_raw(jw_t *w, const char *name, const char *raw) {
  jw_name(w, name);
  if (!w->err && kn_buf_append_str(w->b, raw)) w->err = -1;
}

static void jw_int(jw_t *w, const char *name, long long v) {
  jw_name(w, name);
  if (!w->err && kn_buf_printf(w->b, "%lld", v)) w->err = -1;
}

/* Epoch seconds with milliseconds, as the JSON 1.1 protocol writes
 * timestamps. */
static void jw_time(jw_t *w, const char *name, int64_t ms) {
  if (ms < 0) ms = 0;
  jw_name(w, name);
  if (!w->err &&
      kn_buf_printf(w->b, "%" PRId64 ".%03d", ms / 1000, (int)(ms % 1000)))
    w->err = -1;
}

static void jw_stream(jw_t *w, const char *stream) {
  int arn = stream && strncmp(stream, "arn:", 4) == 0;
  jw_str(w, arn ? "StreamARN" : "StreamName", stream);
}

static int jw_end(jw_t *w) {
  if (!w->err && kn_buf_append_char(w->b, '}')) w->err = -1;
  return w->err;
}

const char *kn_iterator_type_name(kn_iterator_type_t type) {
  switch (type) {
    case KN_ITER_TRIM_HORIZON:
      return "TRIM_HORIZON";
    case KN_ITER_LATEST:
      return "LATEST";
    case KN_ITER_AT_SEQUENCE_NUMBER:
      return "AT_SEQUENCE_NUMBER";
    case KN_ITER_AFTER_SEQUENCE_NUMBER:
      return "AFTER_SEQUENCE_NUMBER";
    case KN_ITER_AT_TIMESTAMP:
      return "AT_TIMESTAMP";
  }
  return NULL;
}

const char *kn_shard_filter_name(kn_shard_filter_type_t type) {
  switch (type) {
    case KN_SHARD_FILTER_NONE:
      return NULL;
    case KN_SHARD_FILTER_AFTER_SHARD_ID:
      return "AFTER_SHARD_ID";
    case KN_SHARD_FILTER_AT_TRIM_HORIZON:
      return "AT_TRIM_HORIZON";
    case KN_SHARD_FILTER_FROM_TRIM_HORIZON:
      return "FROM_TRIM_HORIZON";
    case KN_SHARD_FILTER_AT_LATEST:
      return "AT_LATEST";
    case KN_SHARD_FILTER_AT_TIMESTAMP:
      return "AT_TIMESTAMP";
    case KN_SHARD_FILTER_FROM_TIMESTAMP:
      return "FROM_TIMESTAMP";
  }
  return NULL;
}

int kn_enc_stream(kn_buf_t *b, const char *stream) {
  jw_t w;
  jw_begin(&w, b);
  jw_stream(&w, stream);
  return jw_end(&w);
}

int kn_enc_create_stream(kn_buf_t *b, const char *stream, int shard_count,
                         int max_record_kib) {
  jw_t w;
  jw_begin(&w, b);
  jw_str(&w, "StreamName", stream);
  if (shard_count > 0)
    jw_int(&w, "ShardCount", shard_count);
  else
    jw_raw(&w, "StreamModeDetails", "{\"StreamMode\":\"ON_DEMAND\"}");
  if (max_record_kib) jw_int(&w, "MaxRecordSizeInKiB", max_record_kib);
  return jw_end(&w);
}

int kn_enc_delete_stream(kn_buf_t *b, const char *stream, int enforce) {
  jw_t w;
  jw_begin(&w, b);
  jw_stream(&w, stream);
  if (enforce) jw_raw(&w, "EnforceConsumerDeletion", "true");
  return jw_end(&w);
}

int kn_enc_list_streams(kn_buf_t *b, const char *exclusive_start,
                        const char *next_token) {
  jw_t w;
  jw_begin(&w, b);
  jw_str(&w, "NextToken", next_token);
  if (!next_token) jw_str(&w, "ExclusiveStartStreamName", exclusive_start);
  return jw_end(&w);
}

int kn_enc_list_shards(kn_buf_t *b, const char *stream,
                       kn_shard_filter_type_t filter,
                       const char *filter_shard_id, int64_t timestamp_ms,
                       const char *next_token) {
  jw_t w;
  jw_begin(&w, b);
  if (next_token) {
    jw_str(&w, "NextToken", next_token);
    return jw_end(&w);
  }
  jw_stream(&w, stream);
  const char *fname = kn_shard_filter_name(filter);
  if (fname) {
    jw_name(&w, "ShardFilter");
    jw_t f;
    jw_begin(&f, b);
    jw_str(&f, "Type", fname);
    if (filter == KN_SHARD_FILTER_AFTER_SHARD_ID)
      jw_str(&f, "ShardId", filter_shard_id);
    if (filter == KN_SHARD_FILTER_AT_TIMESTAMP ||
        filter == KN_SHARD_FILTER_FROM_TIMESTAMP)
      jw_time(&f, "Timestamp", timestamp_ms);
    if (w.err || jw_end(&f)) w.err = -1;
  }
  return jw_end(&w);
}

int kn_enc_get_shard_iterator(kn_buf_t *b, const char *stream,
                              const char *shard_id, kn_iterator_type_t type,
                              const char *sequence_number,
                              int64_t timestamp_ms) {
  jw_t w;
  jw_begin(&w, b);
  jw_stream(&w, stream);
  jw_str(&w, "ShardId", shard_id);
  jw_str(&w, "ShardIteratorType", kn_iterator_type_name(type));
  if (type == KN_ITER_AT_SEQUENCE_NUMBER ||
      type == KN_ITER_AFTER_SEQUENCE_NUMBER)
    jw_str(&w, "StartingSequenceNumber", sequence_number);
  if (type == KN_ITER_AT_TIMESTAMP) jw_time(&w, "Timestamp", timestamp_ms);
  return jw_end(&w);
}

int kn_enc_subscribe_to_shard(kn_buf_t *b, const char *consumer_arn,
                              const char *shard_id, kn_iterator_type_t type,
                              const char *sequence_number,
                              int64_t timestamp_ms) {
  jw_t w, pos;
  jw_begin(&w, b);
  jw_str(&w, "ConsumerARN", consumer_arn);
  jw_str(&w, "ShardId", shard_id);
  jw_name(&w, "StartingPosition");
  if (w.err) return -1;
  jw_begin(&pos, b); /* nested: the same buffer, its own member count */
  jw_str(&pos, "Type", kn_iterator_type_name(type));
  if (type == KN_ITER_AT_SEQUENCE_NUMBER ||
      type == KN_ITER_AFTER_SEQUENCE_NUMBER)
    jw_str(&pos, "SequenceNumber", sequence_number);
  if (type == KN_ITER_AT_TIMESTAMP) jw_time(&pos, "Timestamp", timestamp_ms);
  if (jw_end(&pos)) return -1;
  return jw_end(&w);
}

int kn_enc_get_records(kn_buf_t *b, const char *iterator, int limit) {
  jw_t w;
  jw_begin(&w, b);
  jw_str(&w, "ShardIterator", iterator);
  if (limit > 0) jw_int(&w, "Limit", limit);
  return jw_end(&w);
}

/* "Data":"<base64>" written straight into the buffer. */
static int put_data(kn_buf_t *b, const void *data, size_t len) {
  size_t n = kn_base64_encoded_len(len);
  if (kn_buf_reserve(b, n + 10)) return -1;
  memcpy(b->p + b->len, "\"Data\":\"", 8);
  b->len += 8;
  b->len += kn_base64_encode(b->p + b->len, data, len);
  b->p[b->len++] = '"';
  b->p[b->len] = '\0';
  return 0;
}

int kn_enc_put_record(kn_buf_t *b, const char *stream,
                      const char *partition_key, const void *data, size_t len,
                      const char *explicit_hash_key) {
  jw_t w;
  jw_begin(&w, b);
  jw_stream(&w, stream);
  jw_str(&w, "PartitionKey", partition_key ? partition_key : "");
  jw_str(&w, "ExplicitHashKey", explicit_hash_key);
  if (!w.err && (kn_buf_append_char(b, ',') || put_data(b, data, len)))
    w.err = -1;
  return jw_end(&w);
}

int kn_enc_put_records_begin(kn_buf_t *b, const char *stream) {
  jw_t w;
  jw_begin(&w, b);
  jw_stream(&w, stream);
  jw_name(&w, "Records");
  if (!w.err && kn_buf_append_char(b, '[')) w.err = -1;
  return w.err;
}

int kn_enc_put_records_entry(kn_buf_t *b, int first, const kn_put_entry_t *e) {
  const char *pk = e->partition_key ? e->partition_key : "";
  /* No key: a record of a stream whose service picks the shard. */
  if (kn_buf_append_str(b, first ? "{" : ",{") ||
      put_data(b, e->data, e->len) ||
      (*pk && (kn_buf_append_str(b, ",\"PartitionKey\":") ||
               kn_buf_append_json_str(b, pk, strlen(pk)))))
    return -1;
  if (e->explicit_hash_key &&
      (kn_buf_append_str(b, ",\"ExplicitHashKey\":") ||
       kn_buf_append_json_str(b, e->explicit_hash_key,
                              strlen(e->explicit_hash_key))))
    return -1;
  return kn_buf_append_char(b, '}');
}

int kn_enc_put_records_end(kn_buf_t *b) { return kn_buf_append_str(b, "]}"); }

int kn_enc_put_records(kn_buf_t *b, const char *stream,
                       const kn_put_entry_t *entries, size_t n) {
  /* One reservation for the whole body: payloads dominate, keys are
   * reserved at their escaped worst case. */
  size_t need = 64 + (stream ? strlen(stream) * 6 : 0);
  for (size_t i = 0; i < n; i++) {
    const kn_put_entry_t *e = &entries[i];
    need += 80 + kn_base64_encoded_len(e->len);
    need += (e->partition_key ? strlen(e->partition_key) : 0) * 6;
    if (e->explicit_hash_key) need += 24 + strlen(e->explicit_hash_key) * 6;
  }
  if (kn_buf_reserve(b, need) || kn_enc_put_records_begin(b, stream)) return -1;
  for (size_t i = 0; i < n; i++)
    if (kn_enc_put_records_entry(b, i == 0, &entries[i])) return -1;
  return kn_enc_put_records_end(b);
}

int kn_enc_split_shard(kn_buf_t *b, const char *stream, const char *shard_id,
                       const char *new_starting_hash_key) {
  jw_t w;
  jw_begin(&w, b);
  jw_stream(&w, stream);
  jw_str(&w, "ShardToSplit", shard_id);
  jw_str(&w, "NewStartingHashKey", new_starting_hash_key);
  return jw_end(&w);
}

int kn_enc_merge_shards(kn_buf_t *b, const char *stream, const char *shard_id,
                        const char *adjacent_shard_id) {
  jw_t w;
  jw_begin(&w, b);
  jw_stream(&w, stream);
  jw_str(&w, "ShardToMerge", shard_id);
  jw_str(&w, "AdjacentShardToMerge", adjacent_shard_id);
  return jw_end(&w);
}

int kn_enc_update_shard_count(kn_buf_t *b, const char *stream, int target) {
  jw_t w;
  jw_begin(&w, b);
  jw_stream(&w, stream);
  jw_int(&w, "TargetShardCount", target);
  jw_str(&w, "ScalingType", "UNIFORM_SCALING");
  return jw_end(&w);
}

int kn_enc_stream_consumer(kn_buf_t *b, const char *stream_arn,
                           const char *name, const char *consumer_arn) {
  jw_t w;
  jw_begin(&w, b);
  jw_str(&w, "StreamARN", stream_arn);
  jw_str(&w, "ConsumerName", name);
  jw_str(&w, "ConsumerARN", consumer_arn);
  return jw_end(&w);
}

int kn_enc_list_stream_consumers(kn_buf_t *b, const char *stream_arn,
                                 const char *next_token) {
  jw_t w;
  jw_begin(&w, b);
  jw_str(&w, "StreamARN", stream_arn);
  jw_str(&w, "NextToken", next_token);
  return jw_end(&w);
}
