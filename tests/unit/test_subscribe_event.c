/* SubscribeToShard stream messages, read as the fan-out reader reads
 * them: kn_sub_event_classify() for every message, then the records
 * decoder for the payload of a SubscribeToShardEvent.  Streams captured
 * from kinesis-local (tests/unit/data/capture_subscribe.js) and frames
 * built here for what AWS sends and kinesis-local does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/eventstream.h"
#include "core/error.h"
#include "kinesis/decode_records.h"
#include "kinesis/shard.h"
#include "kinesis/subscribe_event.h"
#include "kt.h"
#include "util/buf.h"

#define SEQ_A "49680681331541705456685214483196675864240437511550140418"
#define SEQ_B "49680681331541705456685214483197884790060052140724846594"
#define SEQ_C "49680681331541705456685214483199093715879666769899552770"

static int read_file(const char *name, kn_buf_t *out) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/tests/unit/data/%s", KN_SOURCE_DIR, name);
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char tmp[4096];
  size_t n;
  while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0) kn_buf_append(out, tmp, n);
  fclose(f);
  return 0;
}

/* What classification and decoding said about each message, kept past
 * the callback. */
typedef struct result {
  kn_err_t err; /* of kn_sub_event_classify, else of kn_decode_records */
  kn_sub_kind_t kind;
  char *error; /* kn_error_string */
  char *type;  /* kn_error_type */
  int retriable;
  kn_batch_t *batch; /* KN_SUB_EVENT: the decoded payload (owns a copy) */
  const char *cont;  /* ContinuationSequenceNumber, inside the batch */
} result_t;

typedef struct results {
  result_t r[16];
  int n;
} results_t;

static void keep_error(result_t *r, kn_error_t *e) {
  r->error = strdup(kn_error_string(e));
  r->type = kn_error_type(e) ? strdup(kn_error_type(e)) : NULL;
  r->retriable = kn_error_is_retriable(e);
  KT_CHECK(kn_error_code(e) == r->err);
  kn_error_destroy(e);
}

static int on_msg(void *opaque, kn_evs_decoder_t *d, const kn_evs_msg_t *m) {
  (void)d;
  results_t *rs = opaque;
  if (rs->n == 16) return 1;
  result_t *r = &rs->r[rs->n++];
  memset(r, 0, sizeof(*r));
  kn_error_t *e = NULL;
  r->err = kn_sub_event_classify(m, 200, &r->kind, &e);
  KT_CHECK((r->err != KN_ERR_NO_ERROR) == (e != NULL));
  if (e) {
    keep_error(r, e);
    return 0;
  }
  if (r->kind != KN_SUB_EVENT) return 0;
  /* The decoder rewrites the payload in place and the records point into
   * it: a writable, terminated copy that the batch keeps. */
  kn_buf_t copy = KN_BUF_INIT;
  KT_CHECK(kn_buf_reserve(&copy, m->payload_len) == 0 &&
           kn_buf_append(&copy, m->payload, m->payload_len) == 0);
  size_t len;
  char *body = kn_buf_steal(&copy, &len);
  r->batch = kn_batch_new("s", "shardId-000000000000");
  KT_CHECK(r->batch && kn_batch_adopt(r->batch, body) == 0);
  r->cont = "unset";
  e = kn_decode_records(r->batch, body, len, KN_RECORDS_SUBSCRIBE_EVENT,
                        &r->cont);
  if (e) {
    r->err = kn_error_code(e);
    keep_error(r, e);
  }
  return 0;
}

static void results_free(results_t *rs) {
  for (int i = 0; i < rs->n; i++) {
    free(rs->r[i].error);
    free(rs->r[i].type);
    kn_batch_destroy(rs->r[i].batch);
  }
  memset(rs, 0, sizeof(*rs)); /* nothing stale for a case that reads on */
}

static void decode(const void *p, size_t n, size_t step, results_t *rs) {
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, on_msg, rs);
  const char *c = p;
  if (!step) step = n ? n : 1;
  kn_err_t err = KN_ERR_NO_ERROR;
  for (size_t off = 0; off < n && !err; off += step)
    err = kn_evs_feed(d, c + off, n - off < step ? n - off : step, NULL);
  KT_CHECK_INT(err, KN_ERR_NO_ERROR);
  KT_CHECK_INT(kn_evs_finish(d, NULL), KN_ERR_NO_ERROR);
  kn_evs_decoder_destroy(d);
}

static int data_is(const kn_record_t *rec, const void *want, size_t n) {
  size_t len;
  const void *d = kn_record_data(rec, &len);
  return len == n && (n == 0 || memcmp(d, want, n) == 0);
}

static void test_kinesis_local_events(void) {
  kn_buf_t b = KN_BUF_INIT;
  KT_CHECK(read_file("subscribe_events.bin", &b) == 0);
  for (size_t step = 0; step <= 3; step += 3) {
    results_t rs = {.n = 0};
    decode(b.p, b.len, step, &rs);
    KT_CHECK_INT(rs.n, 2);
    result_t *r = &rs.r[0];
    KT_CHECK_INT(r->err, KN_ERR_NO_ERROR);
    KT_CHECK_INT(r->kind, KN_SUB_EVENT);
    kn_batch_t *bt = r->batch;
    KT_REQUIRE(rs.n == 2 && kn_batch_count(bt) == 3, results_free(&rs),
               kn_buf_free(&b));
    const kn_record_t *rec = kn_batch_record(bt, 0);
    KT_CHECK(data_is(rec, "hello", 5));
    KT_CHECK_STR(kn_record_partition_key(rec), "pk0");
    KT_CHECK_STR(kn_record_sequence_number(rec), SEQ_A);
    KT_CHECK_INT(kn_record_arrival_ms(rec), 1795971442402);
    rec = kn_batch_record(bt, 1);
    KT_CHECK(data_is(rec, "\x00\x01\x02\xfe\xff", 5));
    KT_CHECK_STR(kn_record_partition_key(rec), "pk1");
    KT_CHECK_STR(kn_record_sequence_number(rec), SEQ_B);
    rec = kn_batch_record(bt, 2);
    KT_CHECK(data_is(rec, "{\"k\":\"v\"}", 9));
    KT_CHECK_STR(kn_record_partition_key(rec), "pk2");
    KT_CHECK_STR(kn_record_sequence_number(rec), SEQ_C);
    KT_CHECK_INT(kn_record_arrival_ms(rec), 1795971442464);
    KT_CHECK_STR(r->cont, SEQ_C);
    KT_CHECK_INT(kn_batch_millis_behind(bt), 0);
    KT_CHECK(kn_batch_child_shards(bt) == NULL); /* "ChildShards":null */
    KT_CHECK_INT(kn_batch_shard_end(bt), 0);
    r = &rs.r[1];
    KT_CHECK_INT(r->err, KN_ERR_NO_ERROR);
    KT_CHECK_INT(r->kind, KN_SUB_EVENT);
    KT_CHECK_INT(kn_batch_count(r->batch), 0);
    KT_CHECK_STR(r->cont, SEQ_C);
    KT_CHECK_INT(kn_batch_shard_end(r->batch), 0);
    results_free(&rs);
  }
  kn_buf_free(&b);
}

static void test_kinesis_local_exceptions(void) {
  static const struct {
    const char *file;
    kn_err_t code;
    const char *type, *text;
  } cases[] = {
      {"subscribe_in_use.bin", KN_ERR_RESOURCE_IN_USE, "ResourceInUseException",
       "Another active subscription exists for consumer"},
      {"subscribe_not_found.bin", KN_ERR_RESOURCE_NOT_FOUND,
       "ResourceNotFoundException", "consumer/nope:"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kn_buf_t b = KN_BUF_INIT;
    KT_CHECK(read_file(cases[i].file, &b) == 0);
    results_t rs = {.n = 0};
    decode(b.p, b.len, 1, &rs);
    KT_CHECK_INT(rs.n, 1);
    KT_CHECK_INT(rs.r[0].err, cases[i].code);
    KT_CHECK_STR(rs.r[0].type, cases[i].type);
    KT_CHECK_MSG(rs.r[0].error && strstr(rs.r[0].error, cases[i].text) &&
                     strstr(rs.r[0].error, "HTTP 200"),
                 "%s", rs.r[0].error ? rs.r[0].error : "(null)");
    results_free(&rs);
    kn_buf_free(&b);
  }
}

/* One message with the usual headers of the given kind. */
static void msg(kn_buf_t *out, const char *mtype, const char *tname,
                const char *tvalue, const char *payload) {
  kn_evs_header_t hs[3] = {
      kn_evs_h_str(":message-type", mtype),
      kn_evs_h_str(":content-type", "application/json"),
  };
  size_t n = 2;
  if (tname) hs[n++] = kn_evs_h_str(tname, tvalue);
  KT_CHECK_INT(kn_evs_encode(out, hs, n, payload, strlen(payload), NULL),
               KN_ERR_NO_ERROR);
}

static result_t *one(results_t *rs, const char *mtype, const char *tname,
                     const char *tvalue, const char *payload) {
  kn_buf_t b = KN_BUF_INIT;
  msg(&b, mtype, tname, tvalue, payload);
  results_free(rs);
  decode(b.p, b.len, 0, rs);
  kn_buf_free(&b);
  KT_CHECK_INT(rs->n, 1);
  return &rs->r[0];
}

static void test_exceptions(void) {
  static const struct {
    const char *type;
    kn_err_t code;
    int retriable;
  } cases[] = {
      {"ResourceNotFoundException", KN_ERR_RESOURCE_NOT_FOUND, 0},
      {"ResourceInUseException", KN_ERR_RESOURCE_IN_USE, 0},
      {"KMSDisabledException", KN_ERR_KMS, 0},
      {"KMSInvalidStateException", KN_ERR_KMS, 0},
      {"KMSAccessDeniedException", KN_ERR_KMS, 0},
      {"KMSNotFoundException", KN_ERR_KMS, 0},
      {"KMSOptInRequired", KN_ERR_KMS, 0},
      {"KMSThrottlingException", KN_ERR_KMS_THROTTLING, 1},
      {"InternalFailureException", KN_ERR_INTERNAL_FAILURE, 1},
      {"LimitExceededException", KN_ERR_LIMIT_EXCEEDED, 1},
      {"AccessDeniedException", KN_ERR_ACCESS_DENIED, 0},
      {"SomethingNewException", KN_ERR_REMOTE_OTHER, 0},
  };
  results_t rs = {.n = 0};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    result_t *r = one(&rs, "exception", ":exception-type", cases[i].type,
                      "{\"message\":\"it went \\\"wrong\\\"\"}");
    KT_CHECK_INT(r->err, cases[i].code);
    KT_CHECK_STR(r->type, cases[i].type);
    KT_CHECK_INT(r->retriable, cases[i].retriable);
    KT_CHECK_MSG(r->error && strstr(r->error, "it went \"wrong\""), "%s",
                 r->error ? r->error : "(null)");
  }
  /* "Message", no JSON, no payload, no type. */
  result_t *r = one(&rs, "exception", ":exception-type",
                    "ResourceInUseException", "{\"Message\":\"capital\"}");
  KT_CHECK(r->error && strstr(r->error, "capital"));
  r = one(&rs, "exception", ":exception-type", "InternalFailureException",
          "<html>oops</html>");
  KT_CHECK_INT(r->err, KN_ERR_INTERNAL_FAILURE);
  KT_CHECK(r->error && strstr(r->error, "<html>oops</html>"));
  r = one(&rs, "exception", ":exception-type", "ResourceInUseException", "");
  KT_CHECK_INT(r->err, KN_ERR_RESOURCE_IN_USE);
  r = one(&rs, "exception", NULL, NULL, "{\"message\":\"untyped\"}");
  KT_CHECK_INT(r->err, KN_ERR_HTTP);
  KT_CHECK(r->error && strstr(r->error, "untyped"));
  results_free(&rs);
}

static void test_errors(void) {
  kn_buf_t b = KN_BUF_INIT;
  kn_evs_header_t hs[] = {
      kn_evs_h_str(":message-type", "error"),
      kn_evs_h_str(":error-code", "InternalFailure"),
      kn_evs_h_str(":error-message", "the service broke"),
  };
  kn_evs_encode(&b, hs, 3, NULL, 0, NULL);
  kn_evs_encode(&b, hs, 1, NULL, 0, NULL);
  hs[1] = kn_evs_h_str(":error-code", "ThrottlingException");
  kn_evs_encode(&b, hs, 2, NULL, 0, NULL);
  results_t rs = {.n = 0};
  decode(b.p, b.len, 0, &rs);
  KT_CHECK_INT(rs.n, 3);
  KT_CHECK_INT(rs.r[0].err, KN_ERR_INTERNAL_FAILURE);
  KT_CHECK_STR(rs.r[0].type, "InternalFailure");
  KT_CHECK(rs.r[0].error && strstr(rs.r[0].error, "the service broke"));
  KT_CHECK(rs.r[0].retriable);
  KT_CHECK_INT(rs.r[1].err, KN_ERR_HTTP);
  KT_CHECK_INT(rs.r[2].err, KN_ERR_THROTTLING);
  results_free(&rs);
  kn_buf_free(&b);
}

static void test_event_kinds(void) {
  results_t rs = {.n = 0};
  result_t *r = one(&rs, "event", ":event-type", "initial-response", "{}");
  KT_CHECK_INT(r->err, KN_ERR_NO_ERROR);
  KT_CHECK_INT(r->kind, KN_SUB_INITIAL_RESPONSE);
  r = one(&rs, "event", ":event-type", "FutureEvent", "whatever");
  KT_CHECK_INT(r->err, KN_ERR_NO_ERROR);
  KT_CHECK_INT(r->kind, KN_SUB_OTHER_EVENT);
  r = one(&rs, "event", NULL, NULL, "{}");
  KT_CHECK_INT(r->err, KN_ERR__BAD_MSG);
  r = one(&rs, "gossip", NULL, NULL, "{}");
  KT_CHECK_INT(r->err, KN_ERR__BAD_MSG);
  KT_CHECK(r->error && strstr(r->error, "gossip"));

  kn_buf_t b = KN_BUF_INIT;
  kn_evs_header_t h = kn_evs_h_num(":message-type", KN_EVS_INT, 1);
  kn_evs_encode(&b, &h, 1, NULL, 0, NULL);
  results_free(&rs);
  decode(b.p, b.len, 0, &rs);
  KT_CHECK_INT(rs.r[0].err, KN_ERR__BAD_MSG);
  kn_buf_free(&b);
  results_free(&rs);
}

static int classify_cb(void *opaque, kn_evs_decoder_t *d,
                       const kn_evs_msg_t *m) {
  (void)d;
  int *i = opaque;
  kn_sub_kind_t kind = 0;
  kn_error_t *e = NULL;
  kn_err_t err = kn_sub_event_classify(m, 503, &kind, &e);
  if ((*i)++ == 0) {
    /* The payload is not looked at. */
    KT_CHECK_INT(err, KN_ERR_NO_ERROR);
    KT_CHECK_INT(kind, KN_SUB_EVENT);
    KT_CHECK(e == NULL);
  } else {
    KT_CHECK_INT(err, KN_ERR_RESOURCE_IN_USE);
    KT_CHECK_INT(kn_error_http_status(e), 503);
  }
  kn_error_destroy(e);
  return 0;
}

static void test_classify(void) {
  kn_buf_t b = KN_BUF_INIT;
  msg(&b, "event", ":event-type", "SubscribeToShardEvent", "not json");
  msg(&b, "exception", ":exception-type", "ResourceInUseException", "{}");
  int i = 0;
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, classify_cb, &i);
  KT_CHECK_INT(kn_evs_feed(d, b.p, b.len, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(i, 2);
  kn_evs_decoder_destroy(d);
  kn_buf_free(&b);
}

static result_t *event(results_t *rs, const char *payload) {
  return one(rs, "event", ":event-type", "SubscribeToShardEvent", payload);
}

static void check_child(const kn_shard_t *c, const char *id, const char *parent,
                        const char *hk_start, const char *hk_end) {
  KT_CHECK(c != NULL);
  if (!c) return;
  KT_CHECK_STR(kn_shard_id(c), id);
  KT_CHECK_STR(kn_shard_parent_id(c), parent);
  KT_CHECK(kn_shard_adjacent_parent_id(c) == NULL);
  KT_CHECK_STR(kn_shard_hash_key_start(c), hk_start);
  KT_CHECK_STR(kn_shard_hash_key_end(c), hk_end);
}

/* What AWS sends at the end of a shard, and other shapes of the JSON. */
static void test_event_fields(void) {
  results_t rs = {.n = 0};
  const char *children =
      "[{\"ShardId\":\"shardId-000000000001\",\"ParentShards\":"
      "[\"shardId-000000000000\"],\"HashKeyRange\":{\"StartingHashKey\":\"0\","
      "\"EndingHashKey\":\"1\"}},{\"ShardId\":\"shardId-000000000002\","
      "\"ParentShards\":[\"shardId-000000000000\"],\"HashKeyRange\":{"
      "\"StartingHashKey\":\"2\",\"EndingHashKey\":\"3\"}}]";
  char payload[1024];
  snprintf(payload, sizeof(payload),
           " {\n \"Records\" : [ ] , \"ContinuationSequenceNumber\":null,"
           "\"MillisBehindLatest\": 1234 ,\"ChildShards\":%s}\n ",
           children);
  result_t *r = event(&rs, payload);
  KT_REQUIRE(r->err == KN_ERR_NO_ERROR && r->batch, results_free(&rs));
  KT_CHECK_INT(kn_batch_shard_end(r->batch), 1);
  KT_CHECK(r->cont == NULL);
  KT_CHECK_INT(kn_batch_millis_behind(r->batch), 1234);
  KT_CHECK_INT(kn_batch_count(r->batch), 0);
  const kn_shard_list_t *cl = kn_batch_child_shards(r->batch);
  KT_CHECK(cl && kn_shard_list_count(cl) == 2);
  if (cl && kn_shard_list_count(cl) == 2) {
    check_child(kn_shard_list_get(cl, 0), "shardId-000000000001",
                "shardId-000000000000", "0", "1");
    check_child(kn_shard_list_get(cl, 1), "shardId-000000000002",
                "shardId-000000000000", "2", "3");
  }

  /* Unknown members are skipped, whatever they hold, in the event and in
   * its records; order is free. */
  r = event(&rs,
            "{\"Future\":{\"a\":[1,2.5e-3,true,false,null,\"\\u00e9\"]},"
            "\"MillisBehindLatest\":0,\"Records\":[{\"Data\":\"AA==\","
            "\"Nested\":{\"x\":[[]]},\"SequenceNumber\":\"3\","
            "\"PartitionKey\":\"k\\u00e9\"}],"
            "\"ContinuationSequenceNumber\":\"1\"}");
  KT_REQUIRE(r->err == KN_ERR_NO_ERROR && r->batch, results_free(&rs));
  KT_CHECK_INT(kn_batch_count(r->batch), 1);
  if (kn_batch_count(r->batch) == 1) {
    const kn_record_t *rec = kn_batch_record(r->batch, 0);
    KT_CHECK(data_is(rec, "\0", 1));
    KT_CHECK_STR(kn_record_sequence_number(rec), "3");
    KT_CHECK_STR(kn_record_partition_key(rec), "k\xc3\xa9");
  }
  KT_CHECK_STR(r->cont, "1");
  KT_CHECK_INT(kn_batch_shard_end(r->batch), 0);
  KT_CHECK_INT(kn_batch_millis_behind(r->batch), 0);

  /* Absent members: no records, no millis; and an empty object. */
  r = event(&rs, "{\"ContinuationSequenceNumber\":\"5\"}");
  KT_REQUIRE(r->err == KN_ERR_NO_ERROR && r->batch, results_free(&rs));
  KT_CHECK_INT(kn_batch_count(r->batch), 0);
  KT_CHECK_INT(kn_batch_millis_behind(r->batch), -1);
  KT_CHECK_STR(r->cont, "5");
  r = event(&rs, "{}");
  KT_REQUIRE(r->err == KN_ERR_NO_ERROR && r->batch, results_free(&rs));
  KT_CHECK(r->cont == NULL);
  KT_CHECK_INT(kn_batch_shard_end(r->batch), 1);
  KT_CHECK(kn_batch_child_shards(r->batch) == NULL);
  r = event(&rs,
            "{\"MillisBehindLatest\":null,\"Records\":null,"
            "\"ChildShards\":null,\"ContinuationSequenceNumber\":\"7\"}");
  KT_REQUIRE(r->err == KN_ERR_NO_ERROR && r->batch, results_free(&rs));
  KT_CHECK_INT(kn_batch_millis_behind(r->batch), -1);
  KT_CHECK_INT(kn_batch_count(r->batch), 0);
  KT_CHECK(kn_batch_child_shards(r->batch) == NULL);
  KT_CHECK_STR(r->cont, "7");
  KT_CHECK_INT(kn_batch_shard_end(r->batch), 0);

  /* Escapes in the continuation are resolved: it is still all digits. */
  r = event(&rs, "{\"ContinuationSequenceNumber\":\"1\\u0032\"}");
  KT_REQUIRE(r->err == KN_ERR_NO_ERROR && r->batch, results_free(&rs));
  KT_CHECK_STR(r->cont, "12");

  /* Malformed payloads. */
  static const char *bad[] = {
      "",
      " ",
      "[]",
      "null",
      "{",
      "{\"Records\":[}",
      "{\"Records\":{}}",
      "{\"Records\":[],}",
      "{\"Records\":[] \"MillisBehindLatest\":1}",
      "{\"Records\":[]} x",
      "{\"Records\":[]}{}",
      "{\"Records\":[1]}",
      "{\"Records\":[{}]}",
      "{\"Records\":[{\"Data\":\"AA==\",\"PartitionKey\":\"k\"}]}",
      "{\"Records\":[{\"Data\":\"AA==\",\"PartitionKey\":\"k\","
      "\"SequenceNumber\":\"x\"}]}",
      "{\"Records\":[{\"Data\":\"A\",\"PartitionKey\":\"k\","
      "\"SequenceNumber\":\"1\"}]}",
      "{\"ContinuationSequenceNumber\":12}",
      "{\"ContinuationSequenceNumber\":\"\"}",
      "{\"ContinuationSequenceNumber\":\"12a\"}",
      "{\"ContinuationSequenceNumber\":\"-12\"}",
      "{\"ContinuationSequenceNumber\":\" 12\"}",
      "{\"MillisBehindLatest\":-1}",
      "{\"MillisBehindLatest\":1.5}",
      "{\"MillisBehindLatest\":\"1\"}",
      "{\"MillisBehindLatest\":99999999999999999999}",
      "{\"ChildShards\":{}}",
      "{\"ChildShards\":[{\"ShardId\":\"c\"}]}",
      "{\"Future\":[\"unterminated]}",
      "{\"Future\":[\"bad \\x escape\"]}",
      "{\"Future\":[\"ctl \x01\"]}",
      "{\"Future\":[01]}",
      "{\"Future\":[tru]}",
      "{Records:[]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    r = event(&rs, bad[i]);
    KT_CHECK_MSG(r->err == KN_ERR__BAD_MSG, "payload %s gave %d", bad[i],
                 (int)r->err);
    KT_CHECK_MSG(r->error && strstr(r->error, "SubscribeToShardEvent"),
                 "payload %s: %s", bad[i], r->error ? r->error : "(null)");
  }
  results_free(&rs);
}

int main(void) {
  KT_RUN(test_kinesis_local_events);
  KT_RUN(test_kinesis_local_exceptions);
  KT_RUN(test_exceptions);
  KT_RUN(test_errors);
  KT_RUN(test_event_kinds);
  KT_RUN(test_event_fields);
  KT_RUN(test_classify);
  return KT_DONE();
}
