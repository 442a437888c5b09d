/* The in-place decoder of GetRecords responses and SubscribeToShardEvent
 * payloads: bodies as kinesalite, kinesis-local and the AWS documentation
 * show them, every JSON liberty, and malformed input. */
#include <stdlib.h>

#include "core/error.h"
#include "kinesis/decode_records.h"
#include "kinesis/shard.h"
#include "util/base64.h"
#include "kt.h"

#define SEQ1 "49680681385063493933158710022882399718596515571263602690"
#define SEQ2 "49680681385063493933158710022883608644416130200438308866"

/* Decodes a copy of json; the batch adopts the copy.  NULL error on
 * success; *out gets the batch either way (destroy it). */
static kn_error_t *decode_kind(const char *json, size_t len,
                               kn_records_kind_t kind, const char **cont,
                               kn_batch_t **out) {
  char *body = malloc(len + 1);
  memcpy(body, json, len);
  body[len] = '\0';
  kn_batch_t *b = kn_batch_new("s", "shardId-000000000000");
  kn_batch_adopt(b, body);
  *out = b;
  return kn_decode_records(b, body, len, kind, cont);
}

static kn_error_t *decode(const char *json, kn_batch_t **out) {
  return decode_kind(json, strlen(json), KN_RECORDS_GET_RECORDS, NULL, out);
}

/* 1 if json decodes; prints the error otherwise. */
static int decodes(const char *json) {
  kn_batch_t *b;
  kn_error_t *e = decode(json, &b);
  if (e) fprintf(stderr, "  %s\n", kn_error_string(e));
  int ok = e == NULL;
  kn_error_destroy(e);
  kn_batch_destroy(b);
  return ok;
}

/* 1 if json is rejected as a bad message. */
static int rejected(const char *json) {
  kn_batch_t *b;
  kn_error_t *e = decode(json, &b);
  int ok = e && kn_error_code(e) == KN_ERR__BAD_MSG;
  if (!e) fprintf(stderr, "  accepted: %s\n", json);
  kn_error_destroy(e);
  kn_batch_destroy(b);
  return ok;
}

static int data_is(const kn_record_t *r, const void *want, size_t n) {
  size_t len;
  const void *d = kn_record_data(r, &len);
  return len == n && (n == 0 || memcmp(d, want, n) == 0);
}

static void test_kinesalite(void) {
  const char *body =
      "{\"MillisBehindLatest\":0,\"NextShardIterator\":\"AAAAAAAAAAHG+"
      "XR78eekOxcx"
      "nBswoZwvdOrmouqe0eIFcf5W9K98h5q9Cy50PG2SK6VDvhVxfdG/"
      "TIQjxpTPyEGdDfwP8HUA\","
      "\"Records\":[{\"PartitionKey\":\"a\",\"Data\":\"aGVsbG8=\","
      "\"ApproximateArrivalTimestamp\":1795971594.216,\"SequenceNumber\":"
      "\"" SEQ1
      "\"},"
      "{\"PartitionKey\":\"b\",\"Data\":\"\",\"ApproximateArrivalTimestamp\":"
      "1795971594.216,\"SequenceNumber\":\"" SEQ2 "\"}]}";
  kn_batch_t *b;
  kn_error_t *e = decode(body, &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  KT_REQUIRE(kn_batch_count(b) == 2, kn_batch_destroy(b));
  const kn_record_t *r = kn_batch_record(b, 0);
  KT_CHECK(data_is(r, "hello", 5));
  KT_CHECK_STR(kn_record_partition_key(r), "a");
  KT_CHECK_STR(kn_record_sequence_number(r), SEQ1);
  KT_CHECK_INT(kn_record_arrival_ms(r), 1795971594216);
  KT_CHECK_INT(kn_record_subsequence_number(r), 0);
  KT_CHECK_STR(kn_record_shard_id(r), "shardId-000000000000");
  r = kn_batch_record(b, 1);
  KT_CHECK(data_is(r, "", 0));
  KT_CHECK_STR(kn_record_partition_key(r), "b");
  KT_CHECK_STR(kn_record_sequence_number(r), SEQ2);
  KT_CHECK_STR(
      kn_batch_next_iterator(b),
      "AAAAAAAAAAHG+XR78eekOxcxnBswoZwvdOrmouqe0eIFcf5W9K98h5q9Cy50PG2SK6VDv"
      "hVxfdG/TIQjxpTPyEGdDfwP8HUA");
  KT_CHECK_INT(kn_batch_millis_behind(b), 0);
  KT_CHECK(!kn_batch_shard_end(b));
  KT_CHECK(kn_batch_child_shards(b) == NULL);
  KT_CHECK_INT(b->bytes, 5);
  kn_batch_destroy(b);

  /* The end of a closed shard: no iterator, no ChildShards. */
  e = decode("{\"MillisBehindLatest\":765,\"Records\":[]}", &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  KT_CHECK(kn_batch_shard_end(b));
  KT_CHECK(kn_batch_next_iterator(b) == NULL);
  KT_CHECK(kn_batch_child_shards(b) == NULL);
  KT_CHECK_INT(kn_batch_millis_behind(b), 765);
  KT_REQUIRE(kn_batch_count(b) == 0, kn_batch_destroy(b));
  kn_batch_destroy(b);
}

static void test_binary_and_escaped_key(void) {
  unsigned char all[256];
  for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
  char b64[400];
  size_t n = kn_base64_encode(b64, all, 256);
  b64[n] = '\0';
  char body[1024];
  snprintf(body, sizeof body,
           "{\"Records\":[{\"PartitionKey\":\"k\xc3\xa9y/"
           "\\\"1\\\"\",\"Data\":\"%s\","
           "\"ApproximateArrivalTimestamp\":1795971594.205,\"SequenceNumber\":"
           "\"" SEQ1
           "\"}],\"NextShardIterator\":\"it\",\"MillisBehindLatest\":0}",
           b64);
  kn_batch_t *b;
  kn_error_t *e = decode(body, &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  KT_REQUIRE(kn_batch_count(b) == 1, kn_batch_destroy(b));
  const kn_record_t *r = kn_batch_record(b, 0);
  KT_CHECK(data_is(r, all, 256));
  KT_CHECK_STR(kn_record_partition_key(r), "k\xc3\xa9y/\"1\"");
  KT_CHECK_INT(kn_record_arrival_ms(r), 1795971594205);
  kn_batch_destroy(b);
}

static void test_kinesis_local(void) {
  const char *body =
      "{\"ChildShards\":null,\"MillisBehindLatest\":0,\"NextShardIterator\":"
      "\"AAAA\","
      "\"Records\":[{\"ApproximateArrivalTimestamp\":1795971597.211,\"Data\":"
      "\"aGVsbG8=\","
      "\"EncryptionType\":\"NONE\",\"PartitionKey\":\"a\",\"SequenceNumber\":"
      "\"" SEQ1
      "\"},"
      "{\"ApproximateArrivalTimestamp\":1795971597.211,\"Data\":\"\","
      "\"EncryptionType\":null,"
      "\"PartitionKey\":\"b\",\"SequenceNumber\":\"" SEQ2 "\"}]}";
  kn_batch_t *b;
  kn_error_t *e = decode(body, &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  KT_REQUIRE(kn_batch_count(b) == 2, kn_batch_destroy(b));
  KT_CHECK_INT(kn_record_arrival_ms(kn_batch_record(b, 1)), 1795971597211);
  KT_CHECK(!kn_batch_shard_end(b));
  KT_CHECK(kn_batch_child_shards(b) == NULL);
  kn_batch_destroy(b);

  /* The end of a split shard: records, no iterator, two children. */
  body =
      "{\"ChildShards\":[{\"HashKeyRange\":{\"EndingHashKey\":"
      "\"85070591730234615865843651857942052863\","
      "\"StartingHashKey\":\"0\"},\"ParentShards\":[\"shardId-000000000000\"],"
      "\"ShardId\":"
      "\"shardId-000000000002\"},{\"HashKeyRange\":{\"EndingHashKey\":"
      "\"170141183460469231731687303715884105726\",\"StartingHashKey\":"
      "\"85070591730234615865843651857942052864\"},\"ParentShards\":[\"shardId-"
      "000000000000\"],"
      "\"ShardId\":\"shardId-000000000003\"}],\"MillisBehindLatest\":0,"
      "\"NextShardIterator\":null,"
      "\"Records\":[{\"ApproximateArrivalTimestamp\":1795971597.211,\"Data\":"
      "\"aGVsbG8=\","
      "\"EncryptionType\":\"NONE\",\"PartitionKey\":\"a\",\"SequenceNumber\":"
      "\"" SEQ1 "\"}]}";
  e = decode(body, &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  KT_CHECK(kn_batch_shard_end(b));
  KT_CHECK(kn_batch_next_iterator(b) == NULL);
  KT_REQUIRE(kn_batch_count(b) == 1, kn_batch_destroy(b));
  const kn_shard_list_t *c = kn_batch_child_shards(b);
  KT_CHECK(c && kn_shard_list_count(c) == 2);
  if (c && kn_shard_list_count(c) == 2) {
    const kn_shard_t *s = kn_shard_list_get(c, 0);
    KT_CHECK_STR(kn_shard_id(s), "shardId-000000000002");
    KT_CHECK_STR(kn_shard_parent_id(s), "shardId-000000000000");
    KT_CHECK(kn_shard_adjacent_parent_id(s) == NULL);
    KT_CHECK_STR(kn_shard_hash_key_start(s), "0");
    KT_CHECK_STR(kn_shard_hash_key_end(s),
                 "85070591730234615865843651857942052863");
    s = kn_shard_list_get(c, 1);
    KT_CHECK_STR(kn_shard_id(s), "shardId-000000000003");
    KT_CHECK_STR(kn_shard_hash_key_start(s),
                 "85070591730234615865843651857942052864");
    KT_CHECK(kn_shard_is_open(s));
  }
  kn_batch_destroy(b);

  /* The end of a merged shard: one child with two parents. */
  body =
      "{\"ChildShards\":[{\"ShardId\":\"shardId-000000000004\","
      "\"ParentShards\":"
      "[\"shardId-000000000002\",\"shardId-000000000003\"],\"HashKeyRange\":{"
      "\"StartingHashKey\":\"0\",\"EndingHashKey\":"
      "\"170141183460469231731687303715884105726\"}}],"
      "\"MillisBehindLatest\":0,\"NextShardIterator\":null,\"Records\":[]}";
  e = decode(body, &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  c = kn_batch_child_shards(b);
  KT_CHECK(c && kn_shard_list_count(c) == 1);
  if (c && kn_shard_list_count(c) == 1) {
    const kn_shard_t *s = kn_shard_list_get(c, 0);
    KT_CHECK_STR(kn_shard_parent_id(s), "shardId-000000000002");
    KT_CHECK_STR(kn_shard_adjacent_parent_id(s), "shardId-000000000003");
  }
  kn_batch_destroy(b);
}

static void test_aws_doc_example(void) {
  /* The shape of the GetRecords example in the API reference. */
  const char *body =
      "{\n  \"MillisBehindLatest\": 2100,\n  \"NextShardIterator\": "
      "\"AAAAAAAAAAHsW8zCWf9164uy8Epue6WS3w6wmj4a4USt+CNvMd6uXQ+"
      "HL5vAJMznqqC0DLKsIjuoiTi1BpT6nW0LN2M2D56zM5H8anHm30Gbri9ua+qaGgj+"
      "3XTyvbhpERfrezgLHbPB/"
      "rIcVpykJbaSj5tmcXYRmFnqZBEyHwtZYFmh6hvWVFkIwLuMZLMrpWhG5r5hzkE=\",\n"
      "  \"Records\": [\n    {\n      \"Data\": \"XzxkYXRhPl8w\",\n      "
      "\"PartitionKey\": \"partitionKey\",\n"
      "      \"ApproximateArrivalTimestamp\": 1.441215410867E9,\n"
      "      \"SequenceNumber\": \"21269319989652663814458848515492872193\"\n  "
      "  }\n  ] \n}\n";
  kn_batch_t *b;
  kn_error_t *e = decode(body, &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  KT_REQUIRE(kn_batch_count(b) == 1, kn_batch_destroy(b));
  const kn_record_t *r = kn_batch_record(b, 0);
  KT_CHECK(data_is(r, "_<data>_0", 9));
  KT_CHECK_STR(kn_record_partition_key(r), "partitionKey");
  KT_CHECK_INT(kn_record_arrival_ms(r), 1441215410867);
  KT_CHECK_INT(kn_batch_millis_behind(b), 2100);
  kn_batch_destroy(b);
}

static void test_liberties(void) {
  /* Any order, white space everywhere, unknown members of every kind,
   * nulls, escaped member names. */
  const char *body =
      " \r\n\t{ \"Unknown\" : { \"a\" : [ 1 , -2.5e-3 , true , false , null , "
      "\"x\\u0041\" ,"
      " { } , [ ] , [[[{\"deep\":[]}]]] ] } , \"Records\" : [ { "
      "\"SequenceNumber\" : \"7\" ,"
      " \"Extra\" : {\"Data\": 5} , \"ApproximateArrivalTimestamp\" : null ,"
      " \"Data\" : \"QUJD\" , \"EncryptionType\" : \"KMS\" , \"PartitionKey\" "
      ": \"\" } ,"
      " {\"\\u0044ata\":\"\",\"Partition\\u004bey\":\"k\","
      "\"Sequence\\u004Eumber\":\"0\"} ] ,"
      " \"NextShardIterator\" : \"i\\/t\" , \"MillisBehindLatest\" : null , "
      "\"ChildShards\""
      " : [ ] , \"More\" : \"\\\"\\\\\\/\\b\\f\\n\\r\\t\" } \n ";
  kn_batch_t *b;
  kn_error_t *e = decode(body, &b);
  KT_CHECK_MSG(e == NULL, "%s", e ? kn_error_string(e) : "");
  kn_error_destroy(e);
  KT_REQUIRE(kn_batch_count(b) == 2, kn_batch_destroy(b));
  const kn_record_t *r = kn_batch_record(b, 0);
  KT_CHECK(data_is(r, "ABC", 3));
  KT_CHECK_STR(kn_record_partition_key(r), "");
  KT_CHECK_STR(kn_record_sequence_number(r), "7");
  KT_CHECK_INT(kn_record_arrival_ms(r), 0);
  r = kn_batch_record(b, 1);
  KT_CHECK_STR(kn_record_partition_key(r), "k");
  KT_CHECK_STR(kn_record_sequence_number(r), "0");
  KT_CHECK_STR(kn_batch_next_iterator(b), "i/t");
  KT_CHECK_INT(kn_batch_millis_behind(b), -1);
  KT_CHECK(kn_batch_child_shards(b) == NULL); /* empty means none */
  kn_batch_destroy(b);

  /* Records: null and an absent iterator mean the end. */
  e = decode("{\"Records\":null,\"NextShardIterator\":null}", &b);
  KT_CHECK(e == NULL && kn_batch_shard_end(b) && kn_batch_count(b) == 0);
  kn_batch_destroy(b);
  KT_CHECK(decodes("{}"));
  KT_CHECK(decodes("{\"Records\":[]}"));
}

static void test_string_escapes(void) {
  kn_batch_t *b;
  kn_error_t *e = decode(
      "{\"Records\":[{\"Data\":\"AAEC\\/w==\",\"PartitionKey\":\"\\u00e9\\u65e5"
      "\\ud83d\\ude00\\uD83D\\uDE00-\\n\\t\\\"\",\"SequenceNumber\":\"1\"},"
      "{\"Data\":\"\",\"PartitionKey\":\"lone\\ud800x\\udc00y\\ud800\","
      "\"SequenceNumber\":\"2\"},"
      "{\"Data\":\"\",\"PartitionKey\":\"\\u0000z\",\"SequenceNumber\":\"3\"},"
      "{\"Data\":\"\",\"PartitionKey\":\"\\ud800\\u0041\",\"SequenceNumber\":"
      "\"4\"}],"
      "\"NextShardIterator\":\"x\"}",
      &b);
  KT_CHECK_MSG(e == NULL, "%s", e ? kn_error_string(e) : "");
  kn_error_destroy(e);
  KT_REQUIRE(kn_batch_count(b) == 4, kn_batch_destroy(b));
  if (kn_batch_count(b) == 4) {
    const unsigned char want[] = {0, 1, 2, 0xff};
    KT_CHECK(data_is(kn_batch_record(b, 0), want, 4));
    KT_CHECK_STR(kn_record_partition_key(kn_batch_record(b, 0)),
                 "\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\xf0\x9f\x98\x80-\n\t\"");
    KT_CHECK_STR(kn_record_partition_key(kn_batch_record(b, 1)),
                 "lone\xef\xbf\xbdx\xef\xbf\xbdy\xef\xbf\xbd");
    /* An escaped NUL ends the C string early; the bytes are still there. */
    KT_CHECK_STR(kn_record_partition_key(kn_batch_record(b, 2)), "");
    KT_CHECK_STR(kn_record_partition_key(kn_batch_record(b, 3)),
                 "\xef\xbf\xbd"
                 "A");
  }
  kn_batch_destroy(b);
  /* Raw multi-byte UTF-8 passes. */
  KT_CHECK(
      decodes("{\"Records\":[{\"Data\":\"\",\"PartitionKey\":"
              "\"\xe6\x97\xa5\xf0\x9f\x98\x80\","
              "\"SequenceNumber\":\"1\"}]}"));
}

static int64_t ts(const char *num, int *ok) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\","
           "\"SequenceNumber\":\"1\","
           "\"ApproximateArrivalTimestamp\":%s}],\"MillisBehindLatest\":0}",
           num);
  kn_batch_t *b;
  kn_error_t *e = decode(body, &b);
  int64_t v = INT64_MIN;
  *ok = e == NULL;
  if (!e) {
    v = kn_record_arrival_ms(kn_batch_record(b, 0));
  }
  kn_error_destroy(e);
  kn_batch_destroy(b);
  return v;
}

static void test_numbers(void) {
  static const struct {
    const char *num;
    int64_t ms;
  } cases[] = {
      {"1700000000", 1700000000000},
      {"1700000000.123", 1700000000123},
      {"1.700000000123E9", 1700000000123},
      {"1.700000000123e+9", 1700000000123},
      {"1700000000123e-3", 1700000000123},
      {"17000000001.23E-1", 1700000000123},
      {"1700000000.1234", 1700000000123},
      {"1700000000.1235", 1700000000124}, /* rounds half away from zero */
      {"1700000000.12349999999999999999", 1700000000123},
      {"0", 0},
      {"-0", 0},
      {"0.0", 0},
      {"0.0004", 0},
      {"0.0005", 1},
      {"-1.5", -1500},
      {"-0.0015", -2},
      {"1e-400", 0},
      {"0e400", 0},
      {"9223372036854775.807", INT64_MAX},
      {"-9223372036854775.808", INT64_MIN},
      {"12345678901234567890123e-13", 1234567890123},
      {"0.000000000000000000000001234567890123e33", 1234567890123},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int ok;
    int64_t v = ts(cases[i].num, &ok);
    KT_CHECK_MSG(ok && v == cases[i].ms, "%s -> %lld (ok %d)", cases[i].num,
                 (long long)v, ok);
  }
  const char *bad[] = {
      "01",  "1.",       ".5",   "+1",    "1e",    "1e+",
      "-",   "--1",      "1.e3", "0x10",  "1e400", "9223372036854775.808",
      "NaN", "Infinity", "1 2",  "\"1\"", "true",  "[1]"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int ok;
    ts(bad[i], &ok);
    KT_CHECK_MSG(!ok, "%s accepted", bad[i]);
  }
}

/* MillisBehindLatest of either kind of response: -2 when rejected. */
static int64_t millis(const char *num, kn_records_kind_t kind) {
  char body[256];
  snprintf(body, sizeof body, "{\"Records\":[],\"MillisBehindLatest\":%s}",
           num);
  kn_batch_t *b;
  kn_error_t *e = decode_kind(body, strlen(body), kind, NULL, &b);
  int64_t v = e ? -2 : kn_batch_millis_behind(b);
  if (e)
    KT_CHECK_MSG(kn_error_code(e) == KN_ERR__BAD_MSG &&
                     strstr(kn_error_string(e), "byte 35 "),
                 "%s: %s", num, kn_error_string(e));
  kn_error_destroy(e);
  kn_batch_destroy(b);
  return v;
}

/* A whole number of milliseconds, not negative, in any JSON form. */
static void test_millis_behind(void) {
  static const struct {
    const char *num;
    int64_t ms;
  } cases[] = {
      {"0", 0},
      {"-0", 0},
      {"0.0", 0},
      {"1234", 1234},
      {"1.5e3", 1500},
      {"1500.000", 1500},
      {"15000e-1", 1500},
      {"86400000", 86400000},
      {"9223372036854775807", INT64_MAX},
      {"-1", -2},
      {"-5e2", -2},
      {"1.5", -2},
      {"0.001", -2},
      {"15001e-1", -2},
      {"1e-400", -2},
      {"9223372036854775808", -2},
      {"99999999999999999999", -2},
      {"1e400", -2},
      {"\"1\"", -2},
      {"true", -2},
      {"[1]", -2},
  };
  for (int kind = KN_RECORDS_GET_RECORDS; kind <= KN_RECORDS_SUBSCRIBE_EVENT;
       kind++)
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      int64_t v = millis(cases[i].num, (kn_records_kind_t)kind);
      KT_CHECK_MSG(v == cases[i].ms, "%s -> %lld", cases[i].num, (long long)v);
    }
  /* null or absent: unknown. */
  KT_CHECK_INT(millis("null", KN_RECORDS_SUBSCRIBE_EVENT), -1);
}

static void test_subscribe_event(void) {
  const char *ev = "{\"ChildShards\":[],\"ContinuationSequenceNumber\":\"" SEQ2
                   "\",\"MillisBehindLatest\":0,"
                   "\"Records\":[{\"ApproximateArrivalTimestamp\":1.6E9,"
                   "\"Data\":\"eA==\",\"PartitionKey\":\"p\","
                   "\"SequenceNumber\":\"" SEQ1 "\"}]}";
  kn_batch_t *b;
  const char *cont = "unset";
  kn_error_t *e =
      decode_kind(ev, strlen(ev), KN_RECORDS_SUBSCRIBE_EVENT, &cont, &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  KT_CHECK_STR(cont, SEQ2);
  KT_CHECK(!kn_batch_shard_end(b));
  KT_CHECK_INT(kn_record_arrival_ms(kn_batch_record(b, 0)), 1600000000000);
  kn_batch_destroy(b);
  ev = "{\"ChildShards\":[{\"ShardId\":\"c\",\"ParentShards\":[\"p\"],"
       "\"HashKeyRange\":{"
       "\"StartingHashKey\":\"0\",\"EndingHashKey\":\"9\"}}],"
       "\"ContinuationSequenceNumber\":null,"
       "\"MillisBehindLatest\":0,\"Records\":[]}";
  e = decode_kind(ev, strlen(ev), KN_RECORDS_SUBSCRIBE_EVENT, &cont, &b);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_batch_destroy(b));
  KT_CHECK(cont == NULL);
  KT_CHECK(kn_batch_shard_end(b));
  KT_CHECK(kn_batch_child_shards(b) &&
           kn_shard_list_count(kn_batch_child_shards(b)) == 1);
  kn_batch_destroy(b);
  e = decode_kind("{\"ContinuationSequenceNumber\":\"x1\"}", 36,
                  KN_RECORDS_SUBSCRIBE_EVENT, &cont, &b);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__BAD_MSG);
  kn_error_destroy(e);
  kn_batch_destroy(b);
}

static void test_malformed(void) {
  const char *bad[] = {
      "",
      " ",
      "null",
      "[]",
      "\"Records\"",
      "{",
      "}",
      "{\"Records\"}",
      "{\"Records\":}",
      "{\"Records\":[}",
      "{\"Records\":[],}",
      "{,\"Records\":[]}",
      "{\"Records\":[]]",
      "{\"Records\":[] \"A\":1}",
      "{\"Records\":[]}x",
      "{\"Records\":[]}{}",
      "{\"Records\":[]}\x01",
      "{Records:[]}",
      "{'Records':[]}",
      "{\"Records\":{}}",
      "{\"Records\":\"x\"}",
      "{\"Records\":[1]}",
      "{\"Records\":[null]}",
      "{\"Records\":[[]]}",
      "{\"Records\":[{}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\"}]}",
      "{\"Records\":[{\"PartitionKey\":\"k\",\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":null,\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "null}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "1}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "\"\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "\"12a\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "\"-1\"}]}",
      "{\"Records\":[{\"Data\":\"abc\",\"PartitionKey\":\"k\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"ab=c\",\"PartitionKey\":\"k\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"ab "
      "c\",\"PartitionKey\":\"k\",\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"ab\\nc\",\"PartitionKey\":\"k\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"aGVsbG8=\",\"PartitionKey\":\"k\","
      "\"SequenceNumber\":\"1\"}",
      "{\"Records\":[{\"Data\":\"aGVsbG8=,\"PartitionKey\":\"k\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":5,\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"a\x01\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"a\tb\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\xff\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\xc3\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\xc0\x80\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\xed\xa0\x80\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\xf4\x90\x80\x80\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\\x\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\\u12\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\\u12g4\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\\",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\\u",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"\\ud800\\u",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"abc",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "\"1\","
      "\"ApproximateArrivalTimestamp\":\"1\"}]}",
      "{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"k\",\"SequenceNumber\":"
      "\"1\","
      "\"ApproximateArrivalTimestamp\":1e30}]}",
      "{\"NextShardIterator\":5}",
      "{\"NextShardIterator\":\"a\x02\"}",
      "{\"MillisBehindLatest\":\"0\"}",
      "{\"MillisBehindLatest\":nul}",
      "{\"MillisBehindLatest\":nulll}",
      "{\"X\":tru}",
      "{\"X\":True}",
      "{\"X\":falsey}",
      "{\"X\":[1,]}",
      "{\"X\":[,1]}",
      "{\"X\":{\"a\"}}",
      "{\"X\":{\"a\":1,}}",
      "{\"X\":{1:1}}",
      "{\"X\":\"\x1f\"}",
      "{\"X\":[\"a\" \"b\"]}",
      "{\"ChildShards\":{}}",
      "{\"ChildShards\":[{\"ShardId\":\"c\"}]}",
      "{\"ChildShards\":[{\"HashKeyRange\":{\"StartingHashKey\":\"0\","
      "\"EndingHashKey\":\"1\"}}]}",
      "{\"ChildShards\":[{\"ShardId\":\"c\",\"HashKeyRange\":{"
      "\"StartingHashKey\":\"0\","
      "\"EndingHashKey\":\"340282366920938463463374607431768211456\"}}]}",
      "{\"ChildShards\":[{\"ShardId\":\"c\",\"HashKeyRange\":{"
      "\"StartingHashKey\":\"-1\","
      "\"EndingHashKey\":\"1\"}}]}",
      "{\"ChildShards\":[{\"ShardId\":\"c\",\"ParentShards\":[1],"
      "\"HashKeyRange\":"
      "{\"StartingHashKey\":\"0\",\"EndingHashKey\":\"1\"}}]}",
      "{\"ChildShards\":[{\"ShardId\":\"c\",\"ParentShards\":\"p\","
      "\"HashKeyRange\":"
      "{\"StartingHashKey\":\"0\",\"EndingHashKey\":\"1\"}}]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    KT_CHECK_MSG(rejected(bad[i]), "case %zu: %s", i, bad[i]);

  /* An embedded NUL before the end. */
  kn_batch_t *b;
  const char nul[] = "{\"Records\":[]}\0 ";
  kn_error_t *e =
      decode_kind(nul, sizeof(nul) - 1, KN_RECORDS_GET_RECORDS, NULL, &b);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__BAD_MSG);
  kn_error_destroy(e);
  kn_batch_destroy(b);
  const char nul2[] = "{\"X\":\"a\0b\"}";
  e = decode_kind(nul2, sizeof(nul2) - 1, KN_RECORDS_GET_RECORDS, NULL, &b);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__BAD_MSG);
  kn_error_destroy(e);
  kn_batch_destroy(b);

  /* The message says what and where. */
  e = decode(
      "{\"Records\":[{\"Data\":\"abc\",\"PartitionKey\":\"k\","
      "\"SequenceNumber\":\"1\"}]}",
      &b);
  KT_CHECK(e && strstr(kn_error_string(e), "base64") &&
           strstr(kn_error_string(e), "byte 21"));
  kn_error_destroy(e);
  kn_batch_destroy(b);

  /* A body without its terminator is a caller bug, not a bad message. */
  char raw[] = "{}x";
  b = kn_batch_new(NULL, NULL);
  e = kn_decode_records(b, raw, 2, KN_RECORDS_GET_RECORDS, NULL);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
  kn_batch_destroy(b);
}

static void test_depth(void) {
  char body[1024];
  /* Skipped values may nest up to the limit, counting the response
   * object itself. */
  for (int depth = 60; depth <= 70; depth++) {
    size_t k = 0;
    k += (size_t)sprintf(body + k, "{\"X\":");
    for (int i = 0; i < depth - 1; i++) body[k++] = '[';
    for (int i = 0; i < depth - 1; i++) body[k++] = ']';
    body[k++] = '}';
    body[k] = '\0';
    kn_batch_t *b;
    kn_error_t *e = decode(body, &b);
    KT_CHECK_MSG((e == NULL) == (depth <= KN_JS_MAX_DEPTH), "depth %d", depth);
    kn_error_destroy(e);
    kn_batch_destroy(b);
  }
  /* Very deep input fails cleanly instead of exhausting the stack. */
  size_t n = 1 << 20;
  char *deep = malloc(n + 8);
  memcpy(deep, "{\"X\":", 5);
  memset(deep + 5, '[', n);
  deep[n + 5] = '\0';
  KT_CHECK(rejected(deep));
  free(deep);
}

/* Every proper prefix of a valid body is rejected, every byte changed to
 * a few others never crashes (the sanitizer build checks reads). */
static void test_prefixes_and_mutations(void) {
  const char *body =
      "{\"ChildShards\":[{\"ShardId\":\"c\",\"ParentShards\":[\"p\",\"q\"],"
      "\"HashKeyRange\":{"
      "\"StartingHashKey\":\"0\",\"EndingHashKey\":\"9\"}}],"
      "\"MillisBehindLatest\":1.5e3,"
      "\"NextShardIterator\":\"it\\u00e9\",\"Records\":[{\"Data\":\"aGk=\","
      "\"PartitionKey\":"
      "\"p\\ud83d\\ude00\",\"SequenceNumber\":\"123\","
      "\"ApproximateArrivalTimestamp\":-1.5E-3,"
      "\"X\":[true,false,null,{\"y\":\"z\"}]}]}";
  size_t len = strlen(body);
  KT_CHECK(decodes(body));
  int bad = 0;
  for (size_t cut = 0; cut < len; cut++) {
    kn_batch_t *b;
    kn_error_t *e = decode_kind(body, cut, KN_RECORDS_GET_RECORDS, NULL, &b);
    if (!e || kn_error_code(e) != KN_ERR__BAD_MSG) bad++;
    kn_error_destroy(e);
    kn_batch_destroy(b);
  }
  KT_CHECK_INT(bad, 0);
  const char subst[] = {'\0', '"', '\\',       '{',        '}', '[',
                        ']',  ',', ':',        '0',        'e', '-',
                        'u',  'x', (char)0x80, (char)0xff, ' '};
  char *copy = malloc(len + 1);
  int accepted = 0;
  for (size_t i = 0; i < len; i++)
    for (size_t s = 0; s < sizeof(subst); s++) {
      memcpy(copy, body, len + 1);
      copy[i] = subst[s];
      kn_batch_t *b;
      kn_error_t *e = decode_kind(copy, len, KN_RECORDS_GET_RECORDS, NULL, &b);
      if (!e) {
        accepted++;
        for (size_t r = 0; r < kn_batch_count(b); r++) {
          size_t dl;
          const char *d = kn_record_data(kn_batch_record(b, r), &dl);
          volatile char sink = 0;
          for (size_t k = 0; k < dl; k++) sink ^= d[k];
          sink ^= (char)strlen(kn_record_partition_key(kn_batch_record(b, r)));
          (void)sink;
        }
      }
      kn_error_destroy(e);
      kn_batch_destroy(b);
    }
  free(copy);
  KT_CHECK(accepted > 0); /* some substitutions stay valid (digits, spaces) */
}

static void test_many_records(void) {
  /* 1000 random payloads of all sizes up to 2 KiB survive the trip. */
  unsigned seed = 5;
  size_t cap = 8 << 20, k = 0;
  char *body = malloc(cap);
  unsigned char **want = malloc(1000 * sizeof(*want));
  size_t *wlen = malloc(1000 * sizeof(*wlen));
  k += (size_t)sprintf(body + k, "{\"Records\":[");
  for (int i = 0; i < 1000; i++) {
    wlen[i] = (size_t)(rand_r(&seed) % 2049);
    want[i] = malloc(wlen[i] + 1);
    for (size_t j = 0; j < wlen[i]; j++)
      want[i][j] = (unsigned char)rand_r(&seed);
    k += (size_t)sprintf(body + k, "%s{\"Data\":\"", i ? "," : "");
    k += kn_base64_encode(body + k, want[i], wlen[i]);
    k += (size_t)sprintf(
        body + k,
        "\",\"PartitionKey\":\"pk-%d\",\"SequenceNumber\":\"%d%s\","
        "\"ApproximateArrivalTimestamp\":%d.%03d}",
        i, i + 1, "000000000000000000000000000000000000000000000000000",
        1700000000 + i, i % 1000);
  }
  k += (size_t)sprintf(
      body + k, "],\"NextShardIterator\":\"n\",\"MillisBehindLatest\":12}");
  kn_batch_t *b;
  kn_error_t *e = decode_kind(body, k, KN_RECORDS_GET_RECORDS, NULL, &b);
  KT_CHECK(e == NULL);
  KT_CHECK_INT(kn_batch_count(b), 1000);
  int bad = 0;
  for (int i = 0; i < 1000 && kn_batch_count(b) == 1000; i++) {
    const kn_record_t *r = kn_batch_record(b, (size_t)i);
    char pk[32];
    snprintf(pk, sizeof pk, "pk-%d", i);
    if (!data_is(r, want[i], wlen[i])) bad++;
    if (strcmp(kn_record_partition_key(r), pk)) bad++;
    if (kn_record_arrival_ms(r) != (int64_t)(1700000000 + i) * 1000 + i % 1000)
      bad++;
  }
  KT_CHECK_INT(bad, 0);
  KT_CHECK_INT(kn_batch_millis_behind(b), 12);
  kn_error_destroy(e);
  kn_batch_destroy(b);
  for (int i = 0; i < 1000; i++) free(want[i]);
  free(want);
  free(wlen);
  free(body);
}

/* Long Data strings, whose bulk the vector decoder takes before the end
 * of the string is known: escapes, defects and truncation anywhere in
 * them are handled as in short strings. */
static void test_long_data(void) {
  unsigned char raw[1000];
  for (size_t i = 0; i < sizeof(raw); i++)
    raw[i] = (unsigned char)(i * 131 + 7);
  char b64[1400];
  size_t n = kn_base64_encode(b64, raw, sizeof(raw));
  b64[n] = '\0';
  char *text = malloc(8 * n + 256), *data = malloc(8 * n + 1);
  for (int variant = 0; variant < 4; variant++) {
    /* 0 plain, 1 every '/' as "\/", 2 one 'A'..'Z' letter in every 97 as
     * \u00XX, 3 with white space before the closing quote (invalid). */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      if (variant == 1 && b64[i] == '/') {
        data[k++] = '\\';
        data[k++] = '/';
      } else if (variant == 2 && i % 97 == 5 && b64[i] >= 'A' &&
                 b64[i] <= 'Z') {
        k += (size_t)sprintf(data + k, "\\u%04x", b64[i]);
      } else {
        data[k++] = b64[i];
      }
    }
    if (variant == 3) data[k++] = ' ';
    data[k] = '\0';
    snprintf(text, 8 * n + 256,
             "{\"Records\":[{\"Data\":\"%s\",\"PartitionKey\":\"k\","
             "\"SequenceNumber\":\"" SEQ1 "\"}],\"NextShardIterator\":\"it\"}",
             data);
    kn_batch_t *b;
    kn_error_t *e = decode(text, &b);
    if (variant == 3) {
      KT_CHECK(e && strstr(kn_error_string(e), "base64"));
    } else {
      KT_CHECK_MSG(e == NULL, "variant %d: %s", variant,
                   e ? kn_error_string(e) : "");
      KT_CHECK(kn_batch_count(b) == 1 &&
               data_is(kn_batch_record(b, 0), raw, sizeof(raw)));
    }
    kn_error_destroy(e);
    kn_batch_destroy(b);
  }
  /* A stray byte, padding or the end of the body at any position (the
   * content starts at byte 21). */
  for (size_t p = 0; p < n; p += 13) {
    static const char bad[] = {'=', '*', '\x01', '\xc3', '\n'};
    for (size_t v = 0; v < sizeof(bad); v++) {
      snprintf(text, 8 * n + 256,
               "{\"Records\":[{\"Data\":\"%s\",\"PartitionKey\":\"k\","
               "\"SequenceNumber\":\"" SEQ1 "\"}]}",
               b64);
      text[21 + p] = bad[v];
      KT_CHECK_MSG(rejected(text), "byte %d at %zu", bad[v], p);
    }
    text[21 + p] = '\0'; /* the body ends inside the string */
    KT_CHECK_MSG(rejected(text), "end at %zu", p);
  }
  free(text);
  free(data);
}

/* A stream whose service picks the shard (RecordDistributionStrategy
 * AUTO) answers records written without a key with no PartitionKey, or
 * null: the record reads with the empty key. */
static void test_no_partition_key(void) {
  const char *body =
      "{\"Records\":[{\"Data\":\"aGk=\",\"SequenceNumber\":\"" SEQ1
      "\"},{\"Data\":\"\",\"PartitionKey\":null,\"SequenceNumber\":\"" SEQ2
      "\"}]}";
  kn_batch_t *b;
  kn_error_t *e = decode(body, &b);
  KT_REQUIRE(e == NULL, fprintf(stderr, "  %s\n", kn_error_string(e)),
             kn_error_destroy(e), kn_batch_destroy(b));
  KT_REQUIRE(kn_batch_count(b) == 2, kn_batch_destroy(b));
  KT_CHECK(data_is(kn_batch_record(b, 0), "hi", 2));
  KT_CHECK_STR(kn_record_partition_key(kn_batch_record(b, 0)), "");
  KT_CHECK_STR(kn_record_partition_key(kn_batch_record(b, 1)), "");
  kn_batch_destroy(b);
}

int main(void) {
  KT_RUN(test_kinesalite);
  KT_RUN(test_no_partition_key);
  KT_RUN(test_binary_and_escaped_key);
  KT_RUN(test_kinesis_local);
  KT_RUN(test_aws_doc_example);
  KT_RUN(test_liberties);
  KT_RUN(test_string_escapes);
  KT_RUN(test_numbers);
  KT_RUN(test_millis_behind);
  KT_RUN(test_subscribe_event);
  KT_RUN(test_malformed);
  KT_RUN(test_depth);
  KT_RUN(test_prefixes_and_mutations);
  KT_RUN(test_many_records);
  KT_RUN(test_long_data);
  return KT_DONE();
}
