/* The consumer's fan-out retrieval against a scripted Kinesis on loopback,
 * for what the local servers never do: AWS's initial-response event, the
 * end of a shard inside a subscription (no continuation, ChildShards),
 * ResourceInUse and ResourceNotFound as exception messages, a corrupt
 * frame, a subscription that never answers (watchdog), a deleted consumer
 * registered again, a deleted shard, the registration strategies, a
 * closed shard whose subscription never ends (finished by polling), and a
 * subscription held for ever by nobody (read by polling). */
#include <pthread.h>
#include <time.h>

#include "aws/eventstream.h"
#include "kn/consumer.h"
#include "kt.h"
#include "kt_aws.h"
#include "kt_httpd.h"
#include "util/buf.h"
#include "util/clock.h"

#define MAX_KEY "340282366920938463463374607431768211455"
#define STREAM_ARN "arn:aws:kinesis:us-east-1:1:stream/s"
#define CONSUMER_ARN(gen) STREAM_ARN "/consumer/c:" #gen

/* ---- the scripted server ---- */

enum {
  SC_SHARD_END = 1, /* AWS: the last event has no continuation */
  SC_IN_USE,        /* first subscription: ResourceInUseException */
  SC_CORRUPT,       /* a frame with a bad CRC after the first event */
  SC_SILENT,        /* first subscription never answers */
  SC_SHARD_GONE,    /* ResourceNotFound, consumer fine, shard unlisted */
  SC_CONSUMER_GONE, /* ResourceNotFound, the consumer was deleted */
  SC_LAZY_REGISTER, /* nothing registered at start */
  SC_EAGER_DENIED,  /* RegisterStreamConsumer: AccessDenied */
  SC_CLOSED_IDLE,   /* kinesis-local: a closed shard's events stay empty */
  SC_IN_USE_STUCK   /* kinesis-local: ResourceInUse for ever (its holder
                       died); GetRecords reads the open shard */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int scenario;
static int n_subscribe[2];    /* per shard index */
static int64_t sub_ms[2][16]; /* when each subscription came */
static char sub_body[2][16][512];
static int n_list_shards, n_register, n_describe_name, n_describe_arn;
static int n_iterator, n_get_records;
static char iterator_body[512];
static int consumer_gen;  /* 0: not registered */
static int creating_left; /* describes answering CREATING */

static void reset(int sc) {
  pthread_mutex_lock(&mu);
  scenario = sc;
  memset(n_subscribe, 0, sizeof n_subscribe);
  memset(sub_body, 0, sizeof sub_body);
  n_list_shards = n_register = n_describe_name = n_describe_arn = 0;
  n_iterator = n_get_records = 0;
  iterator_body[0] = '\0';
  consumer_gen = sc == SC_LAZY_REGISTER ? 0 : 1;
  creating_left = sc == SC_LAZY_REGISTER ? 1 : 0;
  pthread_mutex_unlock(&mu);
}

static const char *target(const kt_httpd_req_t *req) {
  const char *t = strstr(req->head, "X-Amz-Target: Kinesis_20131202.");
  static __thread char action[64];
  action[0] = '\0';
  if (t) sscanf(t + 31, "%63[A-Za-z]", action);
  return action;
}

static size_t json_resp(char *out, size_t size, int status, const char *body) {
  return kt_httpd_resp(out, size, status,
                       "Content-Type: application/x-amz-json-1.1\r\n", body);
}

static size_t error_resp(char *out, size_t size, const char *type) {
  char body[256];
  snprintf(body, sizeof body, "{\"__type\":\"%s\",\"message\":\"scripted\"}",
           type);
  return json_resp(out, size, 400, body);
}

/* Event stream frames. */
static void frame_event(kn_buf_t *b, const char *json) {
  kn_evs_header_t h[3] = {kn_evs_h_str(":message-type", "event"),
                          kn_evs_h_str(":event-type", "SubscribeToShardEvent"),
                          kn_evs_h_str(":content-type", "application/json")};
  kn_evs_encode(b, h, 3, json, strlen(json), NULL);
}

static void frame_initial(kn_buf_t *b) {
  kn_evs_header_t h[2] = {kn_evs_h_str(":message-type", "event"),
                          kn_evs_h_str(":event-type", "initial-response")};
  kn_evs_encode(b, h, 2, "{}", 2, NULL);
}

static void frame_exception(kn_buf_t *b, const char *type) {
  kn_evs_header_t h[3] = {kn_evs_h_str(":message-type", "exception"),
                          kn_evs_h_str(":exception-type", type),
                          kn_evs_h_str(":content-type", "application/json")};
  const char *msg = "{\"message\":\"scripted\"}";
  kn_evs_encode(b, h, 3, msg, strlen(msg), NULL);
}

/* {"Records":[...seqs...],"ContinuationSequenceNumber":cont,...}; cont NULL
 * ends the shard with child shardId-1. */
static void event(kn_buf_t *b, const char *seqs, const char *cont) {
  char json[2048], recs[1024] = "";
  size_t n = 0;
  for (const char *p = seqs; p && *p;) {
    size_t len = strcspn(p, ",");
    n += (size_t)snprintf(
        recs + n, sizeof recs - n,
        "%s{\"SequenceNumber\":\"%.*s\",\"Data\":\"aGk=\","
        "\"PartitionKey\":\"k\",\"ApproximateArrivalTimestamp\":1.5E9}",
        n ? "," : "", (int)len, p);
    p += len;
    if (*p == ',') p++;
  }
  if (cont)
    snprintf(json, sizeof json,
             "{\"Records\":[%s],\"ContinuationSequenceNumber\":\"%s\","
             "\"MillisBehindLatest\":0}",
             recs, cont);
  else
    snprintf(
        json, sizeof json,
        "{\"Records\":[%s],\"ContinuationSequenceNumber\":null,"
        "\"MillisBehindLatest\":0,\"ChildShards\":[{\"ShardId\":\"shardId-1\","
        "\"ParentShards\":[\"shardId-0\"],\"HashKeyRange\":{"
        "\"StartingHashKey\":\"0\","
        "\"EndingHashKey\":\"" MAX_KEY "\"}}]}",
        recs);
  frame_event(b, json);
}

static size_t stream_resp(char *out, size_t size, kn_buf_t *b) {
  int n = snprintf(
      out, size,
      "HTTP/1.1 200 OK\r\nContent-Type: "
      "application/vnd.amazon.eventstream\r\nContent-Length: %zu\r\n\r\n",
      b->len);
  size_t len = (size_t)n;
  if (b->len && len + b->len <= size) {
    memcpy(out + len, b->p, b->len);
    len += b->len;
  }
  kn_buf_free(b);
  return len;
}

#define SHARD0_OPEN                                                         \
  "{\"ShardId\":\"shardId-0\",\"HashKeyRange\":{\"StartingHashKey\":\"0\"," \
  "\"EndingHashKey\":\"" MAX_KEY                                            \
  "\"},\"SequenceNumberRange\":{\"StartingSequenceNumber\":\"1\"}}"
#define SHARD0_CLOSED                                                       \
  "{\"ShardId\":\"shardId-0\",\"HashKeyRange\":{\"StartingHashKey\":\"0\"," \
  "\"EndingHashKey\":\"" MAX_KEY                                            \
  "\"},\"SequenceNumberRange\":{\"StartingSequenceNumber\":\"1\","          \
  "\"EndingSequenceNumber\":\"9223372036854775807\"}}"
#define SHARD1                                                  \
  "{\"ShardId\":\"shardId-1\",\"ParentShardId\":\"shardId-0\"," \
  "\"HashKeyRange\":{"                                          \
  "\"StartingHashKey\":\"0\",\"EndingHashKey\":\"" MAX_KEY      \
  "\"},"                                                        \
  "\"SequenceNumberRange\":{\"StartingSequenceNumber\":\"100\"}}"

static size_t list_shards(char *out, size_t size, int n) {
  if (scenario == SC_SHARD_END)
    return json_resp(out, size, 200,
                     "{\"Shards\":[" SHARD0_CLOSED "," SHARD1 "]}");
  if (scenario == SC_SHARD_GONE && n > 1)
    return json_resp(out, size, 200, "{\"Shards\":[]}");
  if (scenario == SC_CLOSED_IDLE && n > 1)
    return json_resp(out, size, 200, "{\"Shards\":[" SHARD0_CLOSED "]}");
  return json_resp(out, size, 200, "{\"Shards\":[" SHARD0_OPEN "]}");
}

static size_t consumer_resp(char *out, size_t size, const char *member, int gen,
                            const char *status) {
  char body[512];
  snprintf(body, sizeof body,
           "{\"%s\":{\"ConsumerName\":\"c\",\"ConsumerARN\":\"" STREAM_ARN
           "/consumer/c:%d\",\"ConsumerStatus\":\"%s\","
           "\"ConsumerCreationTimestamp\":1.7E9,\"StreamARN\":\"" STREAM_ARN
           "\"}}",
           member, gen, status);
  return json_resp(out, size, 200, body);
}

static int subscription(int shard, int n, const char *body, char *out,
                        size_t size, size_t *out_len) {
  kn_buf_t b = KN_BUF_INIT;
  char arn[128];
  snprintf(arn, sizeof arn, "\"ConsumerARN\":\"" STREAM_ARN "/consumer/c:%d\"",
           consumer_gen);
  if (!consumer_gen || !strstr(body, arn)) {
    frame_exception(&b, "ResourceNotFoundException");
  } else if (shard == 1) { /* SC_SHARD_END's child */
    if (n == 1)
      event(&b, "100", "100");
    else if (n == 2)
      event(&b, "101", "101");
    else
      event(&b, "", "101");
  } else {
    switch (scenario) {
      case SC_SHARD_END:
        frame_initial(&b);
        event(&b, "1,2", "2");
        event(&b, "3", NULL);
        break;
      case SC_IN_USE:
        if (n == 1)
          frame_exception(&b, "ResourceInUseException");
        else
          event(&b, n == 2 ? "1" : "", "1");
        break;
      case SC_CORRUPT:
        if (n == 1) {
          event(&b, "1", "1");
          event(&b, "2", "2");
          b.p[b.len - 1] ^= 1; /* the second frame's CRC */
        } else {
          event(&b, n == 2 ? "2" : "", "2");
        }
        break;
      case SC_SILENT:
        if (n == 1) return KT_HANG;
        event(&b, n == 2 ? "1" : "", "1");
        break;
      case SC_SHARD_GONE:
        frame_exception(&b, "ResourceNotFoundException");
        break;
      case SC_CONSUMER_GONE:
        if (n == 1) {
          consumer_gen = 0; /* deleted before this subscription */
          frame_exception(&b, "ResourceNotFoundException");
        } else {
          event(&b, "1", "1"); /* again and again: dropped as seen */
        }
        break;
      case SC_IN_USE_STUCK:
        frame_exception(&b, "ResourceInUseException");
        break;
      case SC_CLOSED_IDLE:
        if (n == 1) event(&b, "1", "1");
        event(&b, "", "1");
        event(&b, "", "1");
        break;
      default:
        event(&b, n == 1 ? "1" : "", "1");
        break;
    }
  }
  *out_len = stream_resp(out, size, &b);
  return KT_REPLY;
}

static int handle(void *ud, const kt_httpd_req_t *req, char *out, size_t size,
                  size_t *out_len) {
  (void)ud;
  const char *action = target(req);
  int act = KT_REPLY;
  pthread_mutex_lock(&mu);
  if (strcmp(action, "DescribeStreamSummary") == 0) {
    *out_len =
        json_resp(out, size, 200,
                  "{\"StreamDescriptionSummary\":{\"StreamName\":\"s\","
                  "\"StreamARN\":\"" STREAM_ARN
                  "\",\"StreamStatus\":\"ACTIVE\",\"OpenShardCount\":1}}");
  } else if (strcmp(action, "ListShards") == 0) {
    *out_len = list_shards(out, size, ++n_list_shards);
  } else if (strcmp(action, "DescribeStreamConsumer") == 0) {
    int by_arn = strstr(req->body, "\"ConsumerARN\"") != NULL;
    if (by_arn)
      n_describe_arn++;
    else
      n_describe_name++;
    char arn[128];
    snprintf(arn, sizeof arn, "consumer/c:%d\"", consumer_gen);
    if (!consumer_gen || (by_arn && !strstr(req->body, arn)))
      *out_len = error_resp(out, size, "ResourceNotFoundException");
    else if (creating_left > 0 && creating_left--)
      *out_len = consumer_resp(out, size, "ConsumerDescription", consumer_gen,
                               "CREATING");
    else
      *out_len = consumer_resp(out, size, "ConsumerDescription", consumer_gen,
                               "ACTIVE");
  } else if (strcmp(action, "RegisterStreamConsumer") == 0) {
    n_register++;
    if (scenario == SC_EAGER_DENIED) {
      *out_len = error_resp(out, size, "AccessDeniedException");
    } else if (consumer_gen) {
      *out_len = error_resp(out, size, "ResourceInUseException");
    } else {
      consumer_gen = 2;
      *out_len = consumer_resp(out, size, "Consumer", consumer_gen, "CREATING");
    }
  } else if (strcmp(action, "SubscribeToShard") == 0) {
    int shard = strstr(req->body, "shardId-1") ? 1 : 0;
    int n = ++n_subscribe[shard];
    if (n <= 16) {
      sub_ms[shard][n - 1] = kn_mono_ms();
      snprintf(sub_body[shard][n - 1], sizeof sub_body[0][0], "%s", req->body);
    }
    act = subscription(shard, n, req->body, out, size, out_len);
  } else if (strcmp(action, "GetShardIterator") == 0) {
    n_iterator++;
    snprintf(iterator_body, sizeof iterator_body, "%s", req->body);
    *out_len = json_resp(out, size, 200, "{\"ShardIterator\":\"it\"}");
  } else if (strcmp(action, "GetRecords") == 0 && scenario == SC_IN_USE_STUCK) {
    *out_len = json_resp(out, size, 200,
                         ++n_get_records == 1
                             ? "{\"Records\":[{\"SequenceNumber\":\"1\","
                               "\"Data\":\"aGk=\",\"PartitionKey\":\"k\","
                               "\"ApproximateArrivalTimestamp\":1.5E9}],"
                               "\"NextShardIterator\":\"it\","
                               "\"MillisBehindLatest\":0}"
                             : "{\"Records\":[],\"NextShardIterator\":\"it\","
                               "\"MillisBehindLatest\":0}");
  } else if (strcmp(action, "GetRecords") == 0) {
    *out_len = json_resp(
        out, size, 200,
        "{\"Records\":[],\"NextShardIterator\":null,\"MillisBehindLatest\":0,"
        "\"ChildShards\":[]}");
  } else {
    *out_len = error_resp(out, size, "UnknownOperationException");
  }
  pthread_mutex_unlock(&mu);
  return act;
}

/* ---- the consumer ---- */

static kt_httpd_t srv;
static int ended;

static void on_ended(kn_consumer_t *kc, const char *shard, void *opaque) {
  (void)kc;
  (void)opaque;
  if (strcmp(shard, "shardId-0") == 0) ended++;
}

static kn_consumer_t *consumer2(const char *registration,
                                const char *extra_name, const char *extra_value,
                                const char *extra2_name,
                                const char *extra2_value) {
  kt_aws_reset();
  kn_conf_t *conf = kn_conf_new();
  char ep[64], err[256];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", srv.port);
  const char *props[][2] = {{"endpoint", ep},
                            {"region", "us-east-1"},
                            {"aws.access.key.id", "AKID"},
                            {"aws.secret.access.key", "secret"},
                            {"stream", "s"},
                            {"efo.consumer.name", "c"},
                            {"efo.registration", registration},
                            {"efo.watchdog.ms", "1000"},
                            {"shard.sync.interval.ms", "600000"},
                            {"retry.max.attempts", "2"},
                            {"retry.backoff.ms", "10"},
                            {"log.level", "3"},
                            {extra_name, extra_value},
                            {extra2_name, extra2_value}};
  for (size_t i = 0; i < sizeof props / sizeof props[0]; i++)
    if (props[i][0] &&
        kn_conf_set(conf, props[i][0], props[i][1], err, sizeof err))
      fprintf(stderr, "%s: %s\n", props[i][0], err);
  ended = 0;
  kn_conf_set_shard_ended_cb(conf, on_ended, NULL);
  kn_consumer_t *kc = kn_consumer_new(conf, err, sizeof err);
  if (!kc) fprintf(stderr, "kn_consumer_new: %s\n", err);
  kn_conf_destroy(conf);
  return kc;
}

static kn_consumer_t *consumer(const char *registration, const char *extra_name,
                               const char *extra_value) {
  return consumer2(registration, extra_name, extra_value, NULL, NULL);
}

/* Polls until n records came (their sequence numbers joined by commas
 * into seqs) or timeout_ms passed.  Returns the count. */
static int collect(kn_consumer_t *kc, int n, int timeout_ms, char *seqs,
                   size_t size) {
  int got = 0;
  seqs[0] = '\0';
  int64_t end = kn_mono_ms() + timeout_ms;
  while (got < n && kn_mono_ms() < end && !kn_consumer_fatal_error(kc)) {
    kn_batch_t *b = kn_consumer_poll(kc, 100);
    for (size_t i = 0; b && i < kn_batch_count(b); i++) {
      size_t len = strlen(seqs);
      snprintf(seqs + len, size - len, "%s%s", len ? "," : "",
               kn_record_sequence_number(kn_batch_record(b, i)));
      got++;
    }
    kn_batch_destroy(b);
  }
  return got;
}

/* The consumer's statistics contain s. */
static int stats_have(kn_consumer_t *kc, const char *s) {
  char *json = kn_consumer_stats_json(kc);
  int r = json && strstr(json, s) != NULL;
  if (!r) fprintf(stderr, "stats: %s\n", json ? json : "(null)");
  free(json);
  return r;
}

static void wait_ms(kn_consumer_t *kc, int ms) {
  int64_t end = kn_mono_ms() + ms;
  while (kn_mono_ms() < end) kn_batch_destroy(kn_consumer_poll(kc, 50));
}

/* Polls until *counter (guarded by mu) reaches n, KT_PROMPT_MS pass or
 * the consumer fails. */
static int wait_count(kn_consumer_t *kc, const int *counter, int n) {
  int64_t end = kn_mono_ms() + KT_PROMPT_MS;
  for (;;) {
    pthread_mutex_lock(&mu);
    int v = *counter;
    pthread_mutex_unlock(&mu);
    if (v >= n || kn_mono_ms() >= end || kn_consumer_fatal_error(kc)) return v;
    kn_batch_destroy(kn_consumer_poll(kc, 50));
  }
}

/* ---- cases ---- */

static void test_shard_end_in_subscription(void) {
  reset(SC_SHARD_END);
  kn_consumer_t *kc = consumer("lazy", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  char seqs[256];
  KT_CHECK_INT(collect(kc, 5, 10000, seqs, sizeof seqs), 5);
  KT_CHECK_STR(seqs, "1,2,3,100,101"); /* the parent first */
  KT_CHECK_INT(ended, 1);
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_subscribe[0], 1); /* ended for good: never again */
  KT_CHECK(n_subscribe[1] >= 2);   /* the child, renewed */
  KT_CHECK(strstr(sub_body[0][0],
                  "\"StartingPosition\":{\"Type\":\"TRIM_HORIZON\"}") != NULL);
  KT_CHECK(strstr(sub_body[1][1],
                  "{\"Type\":\"AFTER_SEQUENCE_NUMBER\","
                  "\"SequenceNumber\":\"100\"}") != NULL);
  KT_CHECK(sub_ms[1][1] - sub_ms[1][0] >= 990); /* one call a second */
  KT_CHECK_INT(n_iterator, 0);                  /* no polling needed */
  KT_CHECK_INT(n_register, 0);                  /* it existed */
  pthread_mutex_unlock(&mu);
  kn_consumer_destroy(kc);
}

static void test_resource_in_use(void) {
  reset(SC_IN_USE);
  kn_consumer_t *kc = consumer("lazy", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  char seqs[64];
  KT_CHECK_INT(collect(kc, 1, 15000, seqs, sizeof seqs), 1);
  KT_CHECK_STR(seqs, "1");
  pthread_mutex_lock(&mu);
  KT_CHECK(n_subscribe[0] >= 2);
  KT_CHECK(sub_ms[0][1] - sub_ms[0][0] >= 990);
  pthread_mutex_unlock(&mu);
  KT_CHECK(stats_have(kc, "\"in_use\":1"));
  kn_consumer_destroy(kc);
}

static void test_corrupt_frame(void) {
  reset(SC_CORRUPT);
  kn_consumer_t *kc = consumer("lazy", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  char seqs[64];
  KT_CHECK_INT(collect(kc, 2, 15000, seqs, sizeof seqs), 2);
  KT_CHECK_STR(seqs, "1,2");
  wait_ms(kc, 1500);
  KT_CHECK_INT(collect(kc, 1, 200, seqs, sizeof seqs), 0); /* no duplicate */
  pthread_mutex_lock(&mu);
  KT_CHECK(strstr(sub_body[0][1], "\"SequenceNumber\":\"1\"") != NULL);
  pthread_mutex_unlock(&mu);
  KT_CHECK(stats_have(kc, "\"errors\":1"));
  kn_consumer_destroy(kc);
}

static void test_watchdog(void) {
  reset(SC_SILENT);
  kn_consumer_t *kc = consumer("lazy", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  char seqs[64];
  KT_CHECK_INT(collect(kc, 1, 15000, seqs, sizeof seqs), 1);
  KT_CHECK(stats_have(kc, "\"watchdog_renewals\":1"));
  kn_consumer_destroy(kc);
}

static void test_shard_gone(void) {
  reset(SC_SHARD_GONE);
  kn_consumer_t *kc = consumer("lazy", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  int64_t end = kn_mono_ms() + 10000;
  while (kn_mono_ms() < end && !kn_consumer_fatal_error(kc) &&
         !stats_have(kc, "\"state\":\"done\""))
    wait_ms(kc, 200);
  KT_CHECK(stats_have(kc, "\"state\":\"done\""));
  pthread_mutex_lock(&mu);
  int subs = n_subscribe[0];
  KT_CHECK(n_list_shards >= 2); /* the check listed the shards */
  pthread_mutex_unlock(&mu);
  wait_ms(kc, 1500);
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_subscribe[0], subs); /* and nothing more */
  pthread_mutex_unlock(&mu);
  KT_CHECK(kn_consumer_fatal_error(kc) == NULL);
  kn_consumer_destroy(kc);
}

static void test_consumer_gone_lazy(void) {
  reset(SC_CONSUMER_GONE);
  kn_consumer_t *kc = consumer("lazy", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  char seqs[64];
  KT_CHECK_INT(collect(kc, 1, 20000, seqs, sizeof seqs), 1);
  KT_CHECK(wait_count(kc, &n_subscribe[0], 3) >= 3);
  KT_CHECK_INT(collect(kc, 1, 200, seqs, sizeof seqs), 0); /* no duplicate */
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_register, 1);
  KT_CHECK(strstr(sub_body[0][1], CONSUMER_ARN(2)) != NULL); /* the new one */
  KT_CHECK(strstr(sub_body[0][2],
                  "{\"Type\":\"AFTER_SEQUENCE_NUMBER\","
                  "\"SequenceNumber\":\"1\"}") != NULL);
  pthread_mutex_unlock(&mu);
  KT_CHECK(kn_consumer_fatal_error(kc) == NULL);
  kn_consumer_destroy(kc);
}

static void test_consumer_gone_eager(void) {
  reset(SC_CONSUMER_GONE);
  kn_consumer_t *kc = consumer("eager", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  int64_t end = kn_mono_ms() + 10000;
  while (kn_mono_ms() < end && !kn_consumer_fatal_error(kc)) wait_ms(kc, 100);
  const kn_error_t *e = kn_consumer_fatal_error(kc);
  KT_CHECK(e && strstr(kn_error_string(e), "no longer exists"));
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_register, 1); /* at start (ResourceInUse: it existed) */
  pthread_mutex_unlock(&mu);
  kn_consumer_destroy(kc);
}

static void test_lazy_registers(void) {
  reset(SC_LAZY_REGISTER);
  kn_consumer_t *kc = consumer("lazy", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  char seqs[64];
  KT_CHECK_INT(collect(kc, 1, 20000, seqs, sizeof seqs), 1);
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_register, 1);
  KT_CHECK(n_describe_name >= 3); /* missing, missing again, CREATING, ACTIVE */
  KT_CHECK(strstr(sub_body[0][0], CONSUMER_ARN(2)) != NULL);
  pthread_mutex_unlock(&mu);
  kn_consumer_destroy(kc);
}

static void test_eager_fails_fast(void) {
  reset(SC_EAGER_DENIED);
  kn_consumer_t *kc = consumer("eager", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  int64_t t0 = kn_mono_ms();
  while (kn_mono_ms() - t0 < KT_PROMPT_MS && !kn_consumer_fatal_error(kc))
    wait_ms(kc, 50);
  /* Fatal after one refused registration: no retry (n_register below). */
  const kn_error_t *e = kn_consumer_fatal_error(kc);
  KT_CHECK(e && kn_error_code(e) == KN_ERR_ACCESS_DENIED);
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_register, 1);
  KT_CHECK_INT(n_subscribe[0], 0);
  pthread_mutex_unlock(&mu);
  kn_consumer_destroy(kc);
}

static void test_none_makes_no_calls(void) {
  reset(0);
  /* Refused: an ARN with lazy (which registers a name); none without an
   * ARN. */
  kn_consumer_t *kc = consumer("lazy", "efo.consumer.arn", CONSUMER_ARN(1));
  KT_CHECK(kc == NULL);
  kn_consumer_destroy(kc);
  kc = consumer("none", "efo.consumer.name", "");
  KT_CHECK(kc == NULL);
  kn_consumer_destroy(kc);
  kc = consumer("eager", "efo.consumer.name", "");
  KT_CHECK(kc == NULL);
  kn_consumer_destroy(kc);
  kt_aws_reset();
  kn_conf_t *conf = kn_conf_new();
  char ep[64], err[256];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", srv.port);
  kn_conf_set(conf, "endpoint", ep, err, sizeof err);
  kn_conf_set(conf, "region", "us-east-1", err, sizeof err);
  kn_conf_set(conf, "aws.access.key.id", "AKID", err, sizeof err);
  kn_conf_set(conf, "aws.secret.access.key", "secret", err, sizeof err);
  kn_conf_set(conf, "stream", "s", err, sizeof err);
  kn_conf_set(conf, "efo.consumer.arn", CONSUMER_ARN(1), err, sizeof err);
  kc = kn_consumer_new(conf, err, sizeof err); /* a bare ARN: none */
  kn_conf_destroy(conf);
  KT_REQUIRE(kc != NULL);
  char seqs[64];
  KT_CHECK_INT(collect(kc, 1, 10000, seqs, sizeof seqs), 1);
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_register + n_describe_name + n_describe_arn, 0);
  pthread_mutex_unlock(&mu);
  kn_consumer_destroy(kc);
}

static void test_closed_shard_finished_by_polling(void) {
  reset(SC_CLOSED_IDLE);
  kn_consumer_t *kc = consumer("lazy", NULL, NULL);
  KT_REQUIRE(kc != NULL);
  char seqs[64];
  KT_CHECK_INT(collect(kc, 1, 10000, seqs, sizeof seqs), 1);
  int64_t end = kn_mono_ms() + 15000;
  while (kn_mono_ms() < end && !ended && !kn_consumer_fatal_error(kc))
    wait_ms(kc, 100);
  KT_CHECK_INT(ended, 1);
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_iterator, 1);
  KT_CHECK(strstr(iterator_body,
                  "\"ShardIteratorType\":\"AFTER_SEQUENCE_NUMBER\","
                  "\"StartingSequenceNumber\":\"1\"") != NULL);
  pthread_mutex_unlock(&mu);
  kn_consumer_destroy(kc);
}

static void test_in_use_for_ever_read_by_polling(void) {
  /* Without a lease the holder may be another consumer reading: wait. */
  reset(SC_IN_USE_STUCK);
  kn_consumer_t *kc = consumer("lazy", "efo.in.use.poll.ms", "1000");
  KT_REQUIRE(kc != NULL);
  KT_CHECK(wait_count(kc, &n_subscribe[0], 2) >= 2);
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_iterator, 0);
  pthread_mutex_unlock(&mu);
  kn_consumer_destroy(kc);

  /* With one, nobody else may read the shard: the holder is a dead one. */
  reset(SC_IN_USE_STUCK);
  kc = consumer2("lazy", "efo.in.use.poll.ms", "1000", "lease.store",
                 "memory:in-use");
  char seqs[64];
  KT_CHECK_INT(collect(kc, 1, 15000, seqs, sizeof seqs), 1);
  KT_CHECK_STR(seqs, "1");
  pthread_mutex_lock(&mu);
  KT_CHECK(n_subscribe[0] >= 2); /* tried again before giving up */
  KT_CHECK_INT(n_iterator, 1);
  KT_CHECK(strstr(iterator_body, "\"ShardIteratorType\":\"TRIM_HORIZON\"") !=
           NULL);
  int subscribed = n_subscribe[0];
  pthread_mutex_unlock(&mu);
  KT_CHECK(stats_have(kc, "\"state\":\"polling\""));
  KT_CHECK(wait_count(kc, &n_get_records, 2) >= 2); /* the open shard goes on */
  pthread_mutex_lock(&mu);
  KT_CHECK_INT(n_subscribe[0], subscribed); /* no more subscriptions */
  pthread_mutex_unlock(&mu);
  KT_CHECK_INT(ended, 0);
  kn_consumer_destroy(kc);
}

int main(void) {
  (void)kt_closed_port;
  if (kt_httpd_start(&srv, handle, NULL)) {
    fprintf(stderr, "cannot start the test server\n");
    return 2;
  }
  KT_RUN(test_shard_end_in_subscription);
  KT_RUN(test_resource_in_use);
  KT_RUN(test_corrupt_frame);
  KT_RUN(test_watchdog);
  KT_RUN(test_shard_gone);
  KT_RUN(test_consumer_gone_lazy);
  KT_RUN(test_consumer_gone_eager);
  KT_RUN(test_lazy_registers);
  KT_RUN(test_eager_fails_fast);
  KT_RUN(test_none_makes_no_calls);
  KT_RUN(test_closed_shard_finished_by_polling);
  KT_RUN(test_in_use_for_ever_read_by_polling);
  kt_httpd_stop(&srv);
  kt_aws_cleanup();
  return KT_DONE();
}
