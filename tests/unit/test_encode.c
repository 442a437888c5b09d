/* Request bodies: each parses as JSON with the members the API names. */
#include <stdlib.h>

#include "kinesis/encode.h"
#include "util/base64.h"
#include "util/json.h"
#include "kt.h"

static json_t *parse(kn_buf_t *b) {
  json_t *doc = NULL;
  kn_error_t *e = kn_json_parse_object(b->p, b->len, "request", &doc);
  if (e) fprintf(stderr, "%s\n%.200s\n", kn_error_string(e), b->p);
  kn_error_destroy(e);
  kn_buf_reset(b);
  return doc;
}

static const char *sub(json_t *doc, const char *obj, const char *key) {
  return kn_json_str(kn_json_obj(doc, obj), key);
}

static void test_stream_naming(void) {
  kn_buf_t b = KN_BUF_INIT;
  KT_CHECK(kn_enc_stream(&b, "my\"stream") == 0);
  KT_CHECK_STR(b.p, "{\"StreamName\":\"my\\\"stream\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_stream(&b, "arn:aws:kinesis:us-east-1:1:stream/s") == 0);
  KT_CHECK_STR(b.p, "{\"StreamARN\":\"arn:aws:kinesis:us-east-1:1:stream/s\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_create_stream(&b, "s", 3, 0) == 0);
  KT_CHECK_STR(b.p, "{\"StreamName\":\"s\",\"ShardCount\":3}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_create_stream(&b, "s", 3, 10240) == 0);
  KT_CHECK_STR(b.p,
               "{\"StreamName\":\"s\",\"ShardCount\":3,"
               "\"MaxRecordSizeInKiB\":10240}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_create_stream(&b, "s", 0, 0) == 0);
  json_t *d = parse(&b);
  KT_CHECK_STR(sub(d, "StreamModeDetails", "StreamMode"), "ON_DEMAND");
  json_decref(d);
  KT_CHECK(kn_enc_delete_stream(&b, "s", 1) == 0);
  KT_CHECK_STR(b.p, "{\"StreamName\":\"s\",\"EnforceConsumerDeletion\":true}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_delete_stream(&b, "s", 0) == 0);
  KT_CHECK_STR(b.p, "{\"StreamName\":\"s\"}");
  kn_buf_free(&b);
}

static void test_lists(void) {
  kn_buf_t b = KN_BUF_INIT;
  KT_CHECK(kn_enc_list_streams(&b, NULL, NULL) == 0);
  KT_CHECK_STR(b.p, "{}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_list_streams(&b, "last", NULL) == 0);
  KT_CHECK_STR(b.p, "{\"ExclusiveStartStreamName\":\"last\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_list_streams(&b, "last", "tok") == 0);
  KT_CHECK_STR(b.p, "{\"NextToken\":\"tok\"}");
  kn_buf_reset(&b);

  KT_CHECK(kn_enc_list_shards(&b, "s", KN_SHARD_FILTER_NONE, NULL, 0, NULL) ==
           0);
  KT_CHECK_STR(b.p, "{\"StreamName\":\"s\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_list_shards(&b, "s", KN_SHARD_FILTER_AFTER_SHARD_ID,
                              "shardId-1", 0, NULL) == 0);
  KT_CHECK_STR(
      b.p,
      "{\"StreamName\":\"s\",\"ShardFilter\":{\"Type\":\"AFTER_SHARD_ID\","
      "\"ShardId\":\"shardId-1\"}}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_list_shards(&b, "s", KN_SHARD_FILTER_FROM_TIMESTAMP, NULL,
                              1700000000123, NULL) == 0);
  KT_CHECK_STR(
      b.p,
      "{\"StreamName\":\"s\",\"ShardFilter\":{\"Type\":\"FROM_TIMESTAMP\","
      "\"Timestamp\":1700000000.123}}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_list_shards(&b, "s", KN_SHARD_FILTER_AT_LATEST, NULL, 0,
                              "tok") == 0);
  KT_CHECK_STR(b.p, "{\"NextToken\":\"tok\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_list_stream_consumers(&b, "arn:s", NULL) == 0);
  KT_CHECK_STR(b.p, "{\"StreamARN\":\"arn:s\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_list_stream_consumers(&b, "arn:s", "c2") == 0);
  KT_CHECK_STR(b.p, "{\"StreamARN\":\"arn:s\",\"NextToken\":\"c2\"}");
  kn_buf_free(&b);
}

static void test_reading(void) {
  kn_buf_t b = KN_BUF_INIT;
  KT_CHECK(kn_enc_get_shard_iterator(&b, "s", "shardId-0", KN_ITER_TRIM_HORIZON,
                                     "123", 5) == 0);
  KT_CHECK_STR(
      b.p,
      "{\"StreamName\":\"s\",\"ShardId\":\"shardId-0\",\"ShardIteratorType\":"
      "\"TRIM_HORIZON\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_get_shard_iterator(&b, "s", "shardId-0",
                                     KN_ITER_AFTER_SEQUENCE_NUMBER, "123",
                                     0) == 0);
  KT_CHECK(strstr(b.p,
                  "\"ShardIteratorType\":\"AFTER_SEQUENCE_NUMBER\","
                  "\"StartingSequenceNumber\":\"123\"") != NULL);
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_get_shard_iterator(&b, "s", "shardId-0", KN_ITER_AT_TIMESTAMP,
                                     NULL, 1500) == 0);
  KT_CHECK(strstr(b.p, "\"Timestamp\":1.500}") != NULL);
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_get_shard_iterator(&b, "s", "shardId-0", KN_ITER_AT_TIMESTAMP,
                                     NULL, 7) == 0);
  KT_CHECK(strstr(b.p, "\"Timestamp\":0.007}") != NULL);
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_get_records(&b, "it/+=", 0) == 0);
  KT_CHECK_STR(b.p, "{\"ShardIterator\":\"it/+=\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_get_records(&b, "it", 100) == 0);
  KT_CHECK_STR(b.p, "{\"ShardIterator\":\"it\",\"Limit\":100}");
  KT_CHECK_STR(kn_iterator_type_name(KN_ITER_LATEST), "LATEST");
  KT_CHECK(kn_iterator_type_name((kn_iterator_type_t)99) == NULL);
  KT_CHECK(kn_shard_filter_name(KN_SHARD_FILTER_NONE) == NULL);
  KT_CHECK_STR(kn_shard_filter_name(KN_SHARD_FILTER_AT_TRIM_HORIZON),
               "AT_TRIM_HORIZON");
  kn_buf_free(&b);
}

static void test_subscribe(void) {
  kn_buf_t b = KN_BUF_INIT;
  KT_CHECK(kn_enc_subscribe_to_shard(&b, "arn:c", "shardId-1",
                                     KN_ITER_TRIM_HORIZON, "9", 5) == 0);
  KT_CHECK_STR(b.p,
               "{\"ConsumerARN\":\"arn:c\",\"ShardId\":\"shardId-1\","
               "\"StartingPosition\":{\"Type\":\"TRIM_HORIZON\"}}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_subscribe_to_shard(
               &b, "arn:c", "s", KN_ITER_AFTER_SEQUENCE_NUMBER, "42", 0) == 0);
  KT_CHECK_STR(
      b.p,
      "{\"ConsumerARN\":\"arn:c\",\"ShardId\":\"s\",\"StartingPosition\":"
      "{\"Type\":\"AFTER_SEQUENCE_NUMBER\",\"SequenceNumber\":\"42\"}}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_subscribe_to_shard(&b, "arn:c", "s", KN_ITER_AT_TIMESTAMP,
                                     NULL, 1500) == 0);
  KT_CHECK(strstr(b.p, "{\"Type\":\"AT_TIMESTAMP\",\"Timestamp\":1.500}}") !=
           NULL);
  kn_buf_free(&b);
}

static void test_put(void) {
  kn_buf_t b = KN_BUF_INIT;
  unsigned char all[256];
  for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
  KT_CHECK(kn_enc_put_record(&b, "s", "k\xc3\xa9y\n", all, 256, "42") == 0);
  json_t *d = parse(&b);
  KT_CHECK_STR(kn_json_str(d, "PartitionKey"), "k\xc3\xa9y\n");
  KT_CHECK_STR(kn_json_str(d, "ExplicitHashKey"), "42");
  const char *data = kn_json_str(d, "Data");
  unsigned char out[300];
  KT_CHECK(data && kn_base64_decode(out, data, strlen(data)) == 256 &&
           memcmp(out, all, 256) == 0);
  json_decref(d);
  KT_CHECK(kn_enc_put_record(&b, "s", "k", "", 0, NULL) == 0);
  KT_CHECK_STR(b.p,
               "{\"StreamName\":\"s\",\"PartitionKey\":\"k\",\"Data\":\"\"}");
  kn_buf_reset(&b);

  /* 500 entries of every size up to 1 KiB, keys needing escapes. */
  kn_put_entry_t e[500];
  char keys[500][16];
  unsigned char *payload = malloc(1024);
  for (int i = 0; i < 1024; i++) payload[i] = (unsigned char)(i * 7);
  for (int i = 0; i < 500; i++) {
    snprintf(keys[i], sizeof keys[i], "k\"%d\\", i);
    e[i].partition_key = keys[i];
    e[i].data = payload;
    e[i].len = (size_t)(i * 2);
    e[i].explicit_hash_key =
        i % 3 ? NULL : "340282366920938463463374607431768211455";
  }
  KT_CHECK(kn_enc_put_records(&b, "arn:aws:kinesis:x:1:stream/s", e, 500) == 0);
  KT_CHECK(b.p[b.len] == '\0');
  d = parse(&b);
  KT_CHECK_STR(kn_json_str(d, "StreamARN"), "arn:aws:kinesis:x:1:stream/s");
  json_t *recs = kn_json_arr(d, "Records");
  KT_CHECK_INT(json_array_size(recs), 500);
  int bad = 0;
  unsigned char big[2048];
  for (size_t i = 0; i < json_array_size(recs); i++) {
    json_t *r = json_array_get(recs, i);
    const char *pk = kn_json_str(r, "PartitionKey"),
               *dt = kn_json_str(r, "Data");
    if (!pk || strcmp(pk, keys[i])) bad++;
    if (!dt || strlen(dt) > sizeof(big) ||
        kn_base64_decode(big, dt, strlen(dt)) != (long)(i * 2) ||
        memcmp(big, payload, i * 2) != 0)
      bad++;
    if ((i % 3 == 0) != (kn_json_str(r, "ExplicitHashKey") != NULL)) bad++;
  }
  KT_CHECK_INT(bad, 0);
  json_decref(d);
  KT_CHECK(kn_enc_put_records(&b, "s", NULL, 0) == 0);
  KT_CHECK_STR(b.p, "{\"StreamName\":\"s\",\"Records\":[]}");
  free(payload);
  kn_buf_free(&b);
}

static void test_resharding_and_consumers(void) {
  kn_buf_t b = KN_BUF_INIT;
  KT_CHECK(kn_enc_split_shard(&b, "s", "shardId-0",
                              "170141183460469231731687303715884105728") == 0);
  KT_CHECK_STR(b.p,
               "{\"StreamName\":\"s\",\"ShardToSplit\":\"shardId-0\","
               "\"NewStartingHashKey\":"
               "\"170141183460469231731687303715884105728\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_merge_shards(&b, "s", "a", "b") == 0);
  KT_CHECK_STR(b.p,
               "{\"StreamName\":\"s\",\"ShardToMerge\":\"a\","
               "\"AdjacentShardToMerge\":\"b\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_update_shard_count(&b, "s", 4) == 0);
  KT_CHECK_STR(b.p,
               "{\"StreamName\":\"s\",\"TargetShardCount\":4,\"ScalingType\":"
               "\"UNIFORM_SCALING\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_stream_consumer(&b, "arn:s", "c1", NULL) == 0);
  KT_CHECK_STR(b.p, "{\"StreamARN\":\"arn:s\",\"ConsumerName\":\"c1\"}");
  kn_buf_reset(&b);
  KT_CHECK(kn_enc_stream_consumer(&b, NULL, NULL, "arn:c") == 0);
  KT_CHECK_STR(b.p, "{\"ConsumerARN\":\"arn:c\"}");
  kn_buf_free(&b);
}

int main(void) {
  KT_RUN(test_stream_naming);
  KT_RUN(test_lists);
  KT_RUN(test_reading);
  KT_RUN(test_subscribe);
  KT_RUN(test_put);
  KT_RUN(test_resharding_and_consumers);
  return KT_DONE();
}
