/* Decoders of ListShards, ListStreams, DescribeStreamSummary,
 * GetShardIterator, PutRecord(s) and the stream consumer operations, on
 * bodies as kinesalite, kinesis-local and the AWS documentation show
 * them. */
#include <stdlib.h>

#include "core/error.h"
#include "kinesis/decode.h"
#include "kt.h"

#define SEQA "49680681385063493933158710022881190792776900735930466306"
#define SEQB "49680681385085794678357240646022726511049549097436446738"
#define HALF "170141183460469231731687303715884105728"
#define HALF1 "170141183460469231731687303715884105727"
#define MAXS "340282366920938463463374607431768211455"

static int is_bad(kn_error_t *e) {
  int ok = e && kn_error_code(e) == KN_ERR__BAD_MSG;
  if (!e) fprintf(stderr, "  accepted\n");
  kn_error_destroy(e);
  return ok;
}

static void test_list_shards(void) {
  /* kinesalite after a split: no nulls, closed parent with a real end. */
  const char *kl =
      "{\"Shards\":[{\"HashKeyRange\":{\"StartingHashKey\":\"0\","
      "\"EndingHashKey\":\"" HALF1
      "\"},\"SequenceNumberRange\":{\"StartingSequenceNumber\":\"" SEQA
      "\",\"EndingSequenceNumber\":"
      "\"49680681385074644305757975334450749726093610493667180546\"},"
      "\"ShardId\":\"shardId-000000000000\"},"
      "{\"HashKeyRange\":{\"StartingHashKey\":\"" HALF
      "\",\"EndingHashKey\":\"" MAXS
      "\"},"
      "\"SequenceNumberRange\":{\"StartingSequenceNumber\":\"" SEQB
      "\"},\"ShardId\":\"shardId-000000000001\"},"
      "{\"ParentShardId\":\"shardId-000000000000\",\"HashKeyRange\":{"
      "\"StartingHashKey\":\"0\","
      "\"EndingHashKey\":\"85070591730234615865843651857942052863\"},"
      "\"SequenceNumberRange\":{"
      "\"StartingSequenceNumber\":\"" SEQA
      "\"},\"ShardId\":\"shardId-000000000002\"},"
      "{\"ParentShardId\":\"shardId-000000000002\",\"AdjacentParentShardId\":"
      "\"shardId-000000000003\","
      "\"HashKeyRange\":{\"StartingHashKey\":\"0\",\"EndingHashKey\":\"" HALF1
      "\"},"
      "\"SequenceNumberRange\":{\"StartingSequenceNumber\":\"" SEQA
      "\"},\"ShardId\":\"shardId-000000000004\"}]}";
  kn_shard_list_t *l = kn_shard_list_new();
  char *tok = (char *)"x";
  kn_error_t *e = kn_decode_list_shards(kl, strlen(kl), l, &tok);
  KT_CHECK(e == NULL);
  KT_CHECK(tok == NULL);
  KT_REQUIRE(kn_shard_list_count(l) == 4, kn_error_destroy(e),
             kn_shard_list_destroy(l));
  const kn_shard_t *s = kn_shard_list_get(l, 0);
  KT_CHECK_STR(kn_shard_id(s), "shardId-000000000000");
  KT_CHECK(!kn_shard_is_open(s));
  KT_CHECK(kn_shard_parent_id(s) == NULL);
  KT_CHECK_STR(kn_shard_sequence_start(s), SEQA);
  s = kn_shard_list_get(l, 1);
  KT_CHECK(kn_shard_is_open(s));
  KT_CHECK_STR(kn_shard_hash_key_start(s), HALF);
  KT_CHECK_STR(kn_shard_hash_key_end(s), MAXS);
  s = kn_shard_list_get(l, 3);
  KT_CHECK_STR(kn_shard_parent_id(s), "shardId-000000000002");
  KT_CHECK_STR(kn_shard_adjacent_parent_id(s), "shardId-000000000003");
  kn_shard_list_destroy(l);

  /* kinesis-local: explicit nulls, a placeholder end, a page token. */
  const char *km =
      "{\"NextToken\":\"s1::shardId-000000000001\",\"Shards\":[{"
      "\"AdjacentParentShardId\":null,"
      "\"HashKeyRange\":{\"EndingHashKey\":"
      "\"170141183460469231731687303715884105726\","
      "\"StartingHashKey\":\"0\"},\"ParentShardId\":null,"
      "\"SequenceNumberRange\":{"
      "\"EndingSequenceNumber\":\"9223372036854775807\","
      "\"StartingSequenceNumber\":\"" SEQA
      "\"},"
      "\"ShardId\":\"shardId-000000000000\"},{\"AdjacentParentShardId\":null,"
      "\"HashKeyRange\":{"
      "\"EndingHashKey\":\"" MAXS
      "\",\"StartingHashKey\":\"170141183460469231731687303715884105727\"},"
      "\"ParentShardId\":null,\"SequenceNumberRange\":{"
      "\"EndingSequenceNumber\":null,"
      "\"StartingSequenceNumber\":\"" SEQB
      "\"},\"ShardId\":\"shardId-000000000001\"}]}";
  l = kn_shard_list_new();
  e = kn_decode_list_shards(km, strlen(km), l, &tok);
  KT_CHECK(e == NULL);
  KT_CHECK_STR(tok, "s1::shardId-000000000001");
  free(tok);
  KT_REQUIRE(kn_shard_list_count(l) == 2, kn_error_destroy(e),
             kn_shard_list_destroy(l));
  KT_CHECK(!kn_shard_is_open(kn_shard_list_get(l, 0)));
  KT_CHECK(kn_shard_is_open(kn_shard_list_get(l, 1)));
  KT_CHECK(kn_shard_parent_id(kn_shard_list_get(l, 0)) == NULL);
  /* Pages append. */
  e = kn_decode_list_shards("{\"Shards\":[],\"NextToken\":null}", 30, l, &tok);
  KT_CHECK(e == NULL && tok == NULL && kn_shard_list_count(l) == 2);
  kn_shard_list_destroy(l);

  const char *bad[] = {"",
                       "[]",
                       "{\"Shards\":{}}",
                       "{\"Shards\":[1]}",
                       "{\"Shards\":[{\"ShardId\":\"s\"}]}",
                       ("{\"Shards\":[{\"ShardId\":\"s\",\"HashKeyRange\":{"
                        "\"StartingHashKey\":\"0\","
                        "\"EndingHashKey\":\"x\"}}]}"),
                       "{\"Shards\":[{\"HashKeyRange\":{\"StartingHashKey\":"
                       "\"0\",\"EndingHashKey\":\"1\"}}]}",
                       "{\"Shards\":[]"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    l = kn_shard_list_new();
    KT_CHECK_MSG(is_bad(kn_decode_list_shards(bad[i], strlen(bad[i]), l, &tok)),
                 "%s", bad[i]);
    KT_CHECK(tok == NULL);
    kn_shard_list_destroy(l);
  }
}

static void test_list_streams(void) {
  kn_strlist_t *l = kn_strlist_new();
  char *tok = NULL;
  int more = 7;
  const char *kl =
      "{\"StreamNames\":[\"s1\",\"s\\u00e9\"],\"HasMoreStreams\":true}";
  KT_CHECK_OK(kn_decode_list_streams(kl, strlen(kl), l, &tok, &more));
  KT_CHECK(more == 1 && tok == NULL);
  const char *aws =
      "{\"HasMoreStreams\":false,\"NextToken\":\"tok\",\"StreamNames\":[\"s3\"]"
      ","
      "\"StreamSummaries\":[{\"StreamName\":\"s3\",\"StreamStatus\":\"ACTIVE\"}"
      "]}";
  KT_CHECK_OK(kn_decode_list_streams(aws, strlen(aws), l, &tok, &more));
  KT_CHECK(more == 0);
  KT_CHECK_STR(tok, "tok");
  free(tok);
  KT_CHECK_INT(kn_strlist_count(l), 3);
  KT_CHECK_STR(kn_strlist_get(l, 1), "s\xc3\xa9");
  KT_CHECK_STR(kn_strlist_get(l, 2), "s3");
  KT_CHECK(kn_strlist_get(l, 3) == NULL);
  KT_CHECK_OK(kn_decode_list_streams("{}", 2, l, &tok, &more));
  KT_CHECK(is_bad(
      kn_decode_list_streams("{\"StreamNames\":[1]}", 19, l, &tok, &more)));
  KT_CHECK(is_bad(
      kn_decode_list_streams("{\"HasMoreStreams\":1}", 20, l, &tok, &more)));
  KT_CHECK(is_bad(
      kn_decode_list_streams("{\"StreamNames\":\"a\"}", 19, l, &tok, &more)));
  kn_strlist_destroy(l);
  kn_strlist_destroy(NULL);
}

static void test_stream_summary(void) {
  const char *kl =
      "{\"StreamDescriptionSummary\":{\"RetentionPeriodHours\":24,"
      "\"EnhancedMonitoring\":[{"
      "\"ShardLevelMetrics\":[]}],\"EncryptionType\":\"NONE\",\"StreamARN\":"
      "\"arn:aws:kinesis:us-east-1:000000000000:stream/"
      "s1\",\"StreamName\":\"s1\",\"StreamStatus\":"
      "\"ACTIVE\",\"StreamCreationTimestamp\":1795971591,\"OpenShardCount\":2,"
      "\"ConsumerCount\":0}}";
  kn_stream_summary_t *s;
  KT_CHECK_OK(kn_decode_stream_summary(kl, strlen(kl), &s));
  KT_CHECK_STR(kn_stream_summary_name(s), "s1");
  KT_CHECK_STR(kn_stream_summary_arn(s),
               "arn:aws:kinesis:us-east-1:000000000000:stream/s1");
  KT_CHECK_STR(kn_stream_summary_status(s), "ACTIVE");
  KT_CHECK(kn_stream_summary_mode(s) == NULL);
  KT_CHECK_INT(kn_stream_summary_open_shards(s), 2);
  KT_CHECK_INT(kn_stream_summary_retention_hours(s), 24);
  KT_CHECK_INT(kn_stream_summary_consumers(s), 0);
  KT_CHECK_INT(s->created_ms, 1795971591000);
  kn_stream_summary_destroy(s);

  const char *km =
      "{\"StreamDescriptionSummary\":{\"ConsumerCount\":null,"
      "\"EncryptionType\":\"NONE\","
      "\"EnhancedMonitoring\":[{\"ShardLevelMetrics\":[]}],\"KeyId\":null,"
      "\"MaxRecordSizeInKiB\":null,"
      "\"OpenShardCount\":2,\"RetentionPeriodHours\":24,\"StreamARN\":"
      "\"arn:aws:kinesis:us-east-1:000000000000:stream/"
      "s1\",\"StreamCreationTimestamp\":1795971595.885,"
      "\"StreamModeDetails\":{\"StreamMode\":\"PROVISIONED\"},\"StreamName\":"
      "\"s1\",\"StreamStatus\":"
      "\"CREATING\",\"WarmThroughput\":null}}";
  KT_CHECK_OK(kn_decode_stream_summary(km, strlen(km), &s));
  KT_CHECK_STR(kn_stream_summary_mode(s), "PROVISIONED");
  KT_CHECK_STR(kn_stream_summary_status(s), "CREATING");
  KT_CHECK_INT(kn_stream_summary_consumers(s), -1);
  KT_CHECK_INT(s->created_ms, 1795971595885);
  KT_CHECK_INT(kn_stream_summary_max_record_kib(s), 1024); /* null */
  KT_CHECK(kn_stream_summary_distribution(s) == NULL);
  kn_stream_summary_destroy(s);
  kn_stream_summary_destroy(NULL);

  /* A stream of large records whose service picks the shard. */
  const char *big =
      "{\"StreamDescriptionSummary\":{\"StreamName\":\"s\",\"StreamStatus\":"
      "\"ACTIVE\",\"StreamModeDetails\":{\"StreamMode\":\"ON_DEMAND\"},"
      "\"MaxRecordSizeInKiB\":10240,\"RecordDistributionStrategy\":\"AUTO\"}}";
  KT_CHECK_OK(kn_decode_stream_summary(big, strlen(big), &s));
  KT_CHECK_INT(kn_stream_summary_max_record_kib(s), 10240);
  KT_CHECK_STR(kn_stream_summary_distribution(s), "AUTO");
  kn_stream_summary_destroy(s);

  KT_CHECK(is_bad(kn_decode_stream_summary("{}", 2, &s)));
  KT_CHECK(s == NULL);
  const char *bad =
      "{\"StreamDescriptionSummary\":{\"StreamName\":\"s\",\"StreamStatus\":"
      "\"A\","
      "\"OpenShardCount\":\"2\"}}";
  KT_CHECK(is_bad(kn_decode_stream_summary(bad, strlen(bad), &s)));
}

static void test_iterator_and_put_record(void) {
  char *it;
  const char *b = "{\"ShardIterator\":\"AAAAAAAAAAE/+MMg\"}";
  KT_CHECK_OK(kn_decode_shard_iterator(b, strlen(b), &it));
  KT_CHECK_STR(it, "AAAAAAAAAAE/+MMg");
  free(it);
  KT_CHECK(
      is_bad(kn_decode_shard_iterator("{\"ShardIterator\":null}", 22, &it)));
  KT_CHECK(it == NULL);
  KT_CHECK(
      is_bad(kn_decode_shard_iterator("{\"ShardIterator\":\"\"}", 20, &it)));

  char *seq, *shard;
  b = "{\"EncryptionType\":\"NONE\",\"SequenceNumber\":\"" SEQB
      "\",\"ShardId\":\"shardId-000000000001\"}";
  KT_CHECK_OK(kn_decode_put_record(b, strlen(b), &seq, &shard));
  KT_CHECK_STR(seq, SEQB);
  KT_CHECK_STR(shard, "shardId-000000000001");
  free(seq);
  free(shard);
  KT_CHECK_OK(kn_decode_put_record(b, strlen(b), NULL, NULL));
  KT_CHECK(
      is_bad(kn_decode_put_record("{\"ShardId\":\"s\"}", 15, &seq, &shard)));
  KT_CHECK(seq == NULL && shard == NULL);
}

static void test_consumers(void) {
  kn_stream_consumer_t *c;
  const char *reg =
      "{\"Consumer\":{\"ConsumerARN\":\"arn:aws:kinesis:us-east-1:000000000000:"
      "stream/s1/consumer/"
      "c1:1795971598\",\"ConsumerCreationTimestamp\":1795971598.884,"
      "\"ConsumerName\":\"c1\","
      "\"ConsumerStatus\":\"CREATING\"}}";
  KT_CHECK_OK(kn_decode_stream_consumer(reg, strlen(reg), &c));
  KT_REQUIRE(c != NULL);
  KT_CHECK_STR(kn_stream_consumer_name(c), "c1");
  KT_CHECK_STR(kn_stream_consumer_status(c), "CREATING");
  KT_CHECK_STR(kn_stream_consumer_arn(c),
               "arn:aws:kinesis:us-east-1:000000000000:stream/s1/consumer/"
               "c1:1795971598");
  KT_CHECK_INT(kn_stream_consumer_created_ms(c), 1795971598884);
  KT_CHECK(c->stream_arn == NULL);
  kn_stream_consumer_destroy(c);
  const char *desc =
      "{\"ConsumerDescription\":{\"ConsumerARN\":\"arn:c\","
      "\"ConsumerCreationTimestamp\":1.5E9,"
      "\"ConsumerName\":\"c1\",\"ConsumerStatus\":\"ACTIVE\",\"StreamARN\":"
      "\"arn:s\",\"Tags\":{}}}";
  KT_CHECK_OK(kn_decode_stream_consumer(desc, strlen(desc), &c));
  KT_REQUIRE(c != NULL);
  KT_CHECK_STR(c->stream_arn, "arn:s");
  KT_CHECK_INT(kn_stream_consumer_created_ms(c), 1500000000000);
  kn_stream_consumer_destroy(c);
  kn_stream_consumer_destroy(NULL);
  KT_CHECK(is_bad(kn_decode_stream_consumer("{\"Consumer\":{}}", 15, &c)));
  KT_CHECK(c == NULL);

  kn_stream_consumer_list_t *l = kn_stream_consumer_list_new();
  char *tok = NULL;
  const char *page =
      "{\"Consumers\":[{\"ConsumerARN\":\"a1\",\"ConsumerCreationTimestamp\":"
      "1795971598.884,"
      "\"ConsumerName\":\"c1\",\"ConsumerStatus\":\"ACTIVE\"},{\"ConsumerARN\":"
      "\"a2\","
      "\"ConsumerCreationTimestamp\":1795971605.528,\"ConsumerName\":\"c2\","
      "\"ConsumerStatus\":"
      "\"CREATING\"}],\"NextToken\":\"c2\"}";
  KT_CHECK_OK(kn_decode_list_stream_consumers(page, strlen(page), l, &tok));
  KT_CHECK_STR(tok, "c2");
  free(tok);
  tok = NULL;
  KT_CHECK_OK(kn_decode_list_stream_consumers(
      "{\"Consumers\":[],\"NextToken\":null}", 33, l, &tok));
  KT_CHECK(tok == NULL);
  KT_REQUIRE(kn_stream_consumer_list_count(l) == 2,
             kn_stream_consumer_list_destroy(l));
  KT_CHECK_STR(kn_stream_consumer_name(kn_stream_consumer_list_get(l, 1)),
               "c2");
  KT_CHECK(kn_stream_consumer_list_get(l, 2) == NULL);
  KT_CHECK(is_bad(
      kn_decode_list_stream_consumers("{\"Consumers\":[{}]}", 18, l, &tok)));
  kn_stream_consumer_list_destroy(l);
}

static kn_error_t *put_records(const char *json, size_t n_sent,
                               kn_put_results_t **out) {
  return kn_decode_put_records(strdup(json), strlen(json), n_sent, out);
}

static void test_put_records(void) {
  kn_put_results_t *r;
  const char *kl =
      "{\"FailedRecordCount\":0,\"Records\":[{\"ShardId\":\"shardId-"
      "000000000000\",\"SequenceNumber\":"
      "\"" SEQA
      "\"},{\"ShardId\":\"shardId-000000000001\",\"SequenceNumber\":\"" SEQB
      "\"}]}";
  KT_CHECK(put_records(kl, 2, &r) == NULL);
  KT_CHECK_INT(kn_put_results_count(r), 2);
  KT_CHECK_INT(kn_put_results_failed(r), 0);
  KT_CHECK_STR(kn_put_results_shard_id(r, 1), "shardId-000000000001");
  KT_CHECK_STR(kn_put_results_sequence_number(r, 0), SEQA);
  KT_CHECK(kn_put_results_error_code(r, 0) == NULL);
  KT_CHECK(kn_put_results_shard_id(r, 2) == NULL);
  kn_put_results_destroy(r);

  /* kinesis-local's nulls, and a partial failure as AWS reports it. */
  const char *mixed =
      "{\"EncryptionType\":\"NONE\",\"FailedRecordCount\":1,\"Records\":[{"
      "\"ErrorCode\":null,"
      "\"ErrorMessage\":null,\"SequenceNumber\":\"" SEQA
      "\",\"ShardId\":\"shardId-000000000000\"},"
      "{\"ErrorCode\":\"ProvisionedThroughputExceededException\","
      "\"ErrorMessage\":\"Rate exceeded "
      "for shard shardId-000000000001 in stream s under account "
      "111122223333.\"},"
      "{\"ErrorCode\":\"InternalFailure\"}]}";
  KT_CHECK(put_records(mixed, 3, &r) == NULL);
  KT_CHECK_INT(kn_put_results_failed(r), 2);
  KT_CHECK(kn_put_results_error_code(r, 0) == NULL);
  KT_CHECK_STR(kn_put_results_error_code(r, 1),
               "ProvisionedThroughputExceededException");
  KT_CHECK(strstr(kn_put_results_error_message(r, 1), "Rate exceeded") != NULL);
  KT_CHECK(kn_put_results_sequence_number(r, 1) == NULL);
  KT_CHECK_STR(kn_put_results_error_message(r, 2), "");
  kn_put_results_destroy(r);
  kn_put_results_destroy(NULL);

  KT_CHECK(is_bad(put_records(kl, 3, &r)));
  KT_CHECK(r == NULL);
  KT_CHECK(is_bad(put_records(kl, 1, &r)));
  KT_CHECK(is_bad(put_records("{\"Records\":[{\"ShardId\":\"s\"}]}", 1, &r)));
  KT_CHECK(is_bad(put_records(
      "{\"Records\":[{\"ShardId\":1,\"SequenceNumber\":\"1\"}]}", 1, &r)));
  KT_CHECK(is_bad(put_records("{\"Records\":[]", 0, &r)));
  KT_CHECK(put_records("{\"Records\":[]}", 0, &r) == NULL);
  kn_put_results_destroy(r);
  KT_CHECK(put_records("{\"Records\":null}", 0, &r) == NULL);
  kn_put_results_destroy(r);
  /* A repeated member: the last array counts, failures included. */
  KT_CHECK(put_records("{\"Records\":[{\"ErrorCode\":\"InternalFailure\","
                       "\"ErrorMessage\":\"x\"}],\"Records\":[{\"ShardId\":"
                       "\"s\",\"SequenceNumber\":\"1\"}]}",
                       1, &r) == NULL);
  KT_CHECK_INT(kn_put_results_failed(r), 0);
  KT_CHECK_STR(kn_put_results_sequence_number(r, 0), "1");
  kn_put_results_destroy(r);
}

int main(void) {
  KT_RUN(test_list_shards);
  KT_RUN(test_list_streams);
  KT_RUN(test_stream_summary);
  KT_RUN(test_iterator_and_put_record);
  KT_RUN(test_consumers);
  KT_RUN(test_put_records);
  return KT_DONE();
}
