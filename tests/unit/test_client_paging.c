/* The client against a scripted Kinesis on loopback: pagination in every
 * form servers use (NextToken, HasMoreStreams with the last name, tokens
 * on empty or repeated pages), the default split point, waiting for a
 * stream, unsupported actions, and the asynchronous GetRecords and
 * PutRecords on the I/O thread. */
#include <pthread.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/client_int.h"
#include "kinesis/kinesis.h"
#include "kt.h"
#include "kt_aws.h"
#include "kt_httpd.h"
#include "util/json.h"
#include "util/pager.h"

/* ---- The scripted server ---- */

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static char *last_body[32]; /* recorded request bodies, in order */
static char last_action[32][64];
static int n_rec;
static int wait_calls;
static int scenario; /* picks answers for some actions */

static void record(const char *action, const char *body) {
  pthread_mutex_lock(&rec_lock);
  if (n_rec < 32) {
    snprintf(last_action[n_rec], sizeof last_action[0], "%s", action);
    last_body[n_rec++] = strdup(body);
  }
  pthread_mutex_unlock(&rec_lock);
}

static void reset_records(void) {
  pthread_mutex_lock(&rec_lock);
  for (int i = 0; i < n_rec; i++) free(last_body[i]);
  n_rec = 0;
  pthread_mutex_unlock(&rec_lock);
}

static const char *target(const kt_httpd_req_t *req) {
  const char *t = strstr(req->head, "X-Amz-Target: Kinesis_20131202.");
  static __thread char action[64];
  action[0] = '\0';
  if (t) sscanf(t + 31, "%63[A-Za-z]", action);
  return action;
}

#define SHARD(id, parent, start, end)                          \
  "{\"ShardId\":\"" id "\",\"ParentShardId\":" parent          \
  ",\"HashKeyRange\":{"                                        \
  "\"StartingHashKey\":\"" start "\",\"EndingHashKey\":\"" end \
  "\"},"                                                       \
  "\"SequenceNumberRange\":{\"StartingSequenceNumber\":\"1\"}}"

static int endless; /* pages served with a new token each */

/* Scenario 6: tokens a, b, then a again; 7: a new token on every page. */
static const char *cycling(const char *body, const char *page) {
  static __thread char out[512];
  if (scenario == 7) {
    int n = __atomic_add_fetch(&endless, 1, __ATOMIC_SEQ_CST);
    snprintf(out, sizeof out, "{%s,\"NextToken\":\"p%d\"}", page, n);
  } else {
    const char *next = !strstr(body, "NextToken") ? "a"
                       : strstr(body, "\"a\"")    ? "b"
                                                  : "a";
    snprintf(out, sizeof out, "{%s,\"NextToken\":\"%s\"}", page, next);
  }
  return out;
}

/* Scenario 8: 50 stream consumers (On-Demand Advantage), 20 to a page. */
static const char *fifty_consumers(const char *body) {
  static __thread char out[8192];
  int first = strstr(body, "\"p2\"") ? 40 : strstr(body, "\"p1\"") ? 20 : 0;
  int n = snprintf(out, sizeof out, "{\"Consumers\":[");
  for (int i = first; i < first + 20 && i < 50; i++)
    n += snprintf(out + n, sizeof out - (size_t)n,
                  "%s{\"ConsumerName\":\"c%d\",\"ConsumerARN\":\"arn:c%d\","
                  "\"ConsumerStatus\":\"ACTIVE\","
                  "\"ConsumerCreationTimestamp\":1.7E9}",
                  i > first ? "," : "", i, i);
  snprintf(out + n, sizeof out - (size_t)n, "]%s}",
           first == 0    ? ",\"NextToken\":\"p1\""
           : first == 20 ? ",\"NextToken\":\"p2\""
                         : "");
  return out;
}

static const char *answer(const char *action, const char *body, int *status) {
  *status = 200;
  if (scenario == 8 && strcmp(action, "ListStreamConsumers") == 0)
    return fifty_consumers(body);
  if (scenario >= 6 && strcmp(action, "ListShards") == 0)
    return cycling(body, "\"Shards\":[" SHARD("s9", "null", "0", "1") "]");
  if (scenario >= 6 && strcmp(action, "ListStreams") == 0)
    return cycling(body, "\"StreamNames\":[\"x\"],\"HasMoreStreams\":true");
  if (scenario >= 6 && strcmp(action, "ListStreamConsumers") == 0)
    return cycling(body,
                   "\"Consumers\":[{\"ConsumerName\":\"c1\",\"ConsumerARN\":"
                   "\"arn:c1\",\"ConsumerStatus\":\"ACTIVE\","
                   "\"ConsumerCreationTimestamp\":1.7E9}]");
  if (strcmp(action, "ListShards") == 0) {
    if (scenario == 1) /* a token that never changes */
      return "{\"Shards\":[" SHARD("s9", "null", "0",
                                   "1") "],\"NextToken\":\"same\"}";
    if (!strstr(body, "NextToken"))
      return "{\"Shards\":[" SHARD("shardId-0", "null", "0",
                                   "99") "],\"NextToken\":\"t1\"}";
    if (strstr(body, "\"t1\""))
      return "{\"Shards\":[" SHARD("shardId-1", "null", "100",
                                   "199") "],\"NextToken\":\"t2\"}";
    return "{\"Shards\":[" SHARD(
        "shardId-2", "\"shardId-1\"", "200",
        "340282366920938463463374607431768211455") "],\"NextToken\":null}";
  }
  if (strcmp(action, "ListStreams") == 0) {
    if (scenario == 2) { /* kinesalite: no tokens, HasMoreStreams */
      if (!strstr(body, "ExclusiveStartStreamName"))
        return "{\"StreamNames\":[\"a\",\"b\"],\"HasMoreStreams\":true}";
      if (strstr(body, "\"b\""))
        return "{\"StreamNames\":[\"c\"],\"HasMoreStreams\":true}";
      return "{\"StreamNames\":[],\"HasMoreStreams\":true}"; /* stuck: stop */
    }
    if (!strstr(body, "NextToken"))
      return "{\"StreamNames\":[\"x\"],\"HasMoreStreams\":true,\"NextToken\":"
             "\"n1\"}";
    return "{\"StreamNames\":[\"y\",\"z\"],\"HasMoreStreams\":false}";
  }
  if (strcmp(action, "ListStreamConsumers") == 0) {
    if (scenario == 3) {
      *status = 400;
      return "{\"__type\":\"AccessDeniedException\",\"message\":\"Unable to "
             "determine "
             "service/operation name to be authorized\"}";
    }
    if (!strstr(body, "NextToken"))
      return "{\"Consumers\":[{\"ConsumerName\":\"c1\",\"ConsumerARN\":\"arn:"
             "c1\","
             "\"ConsumerStatus\":\"ACTIVE\",\"ConsumerCreationTimestamp\":1."
             "7E9}],"
             "\"NextToken\":\"c1\"}";
    return "{\"Consumers\":[],\"NextToken\":\"c1\"}";
  }
  if (strcmp(action, "UpdateShardCount") == 0) {
    *status = 400;
    return "{\"__type\":\"UnknownOperationException\"}";
  }
  if (strcmp(action, "SplitShard") == 0 || strcmp(action, "CreateStream") == 0)
    return "";
  if (strcmp(action, "DescribeStreamSummary") == 0) {
    if (scenario == 4) {
      *status = 400;
      return "{\"__type\":\"ResourceNotFoundException\",\"message\":\"gone\"}";
    }
    int n = __atomic_add_fetch(&wait_calls, 1, __ATOMIC_SEQ_CST);
    if (n < 3 || scenario == 5)
      return "{\"StreamDescriptionSummary\":{\"StreamName\":\"s\","
             "\"StreamStatus\":\"CREATING\"}}";
    return "{\"StreamDescriptionSummary\":{\"StreamName\":\"s\","
           "\"StreamStatus\":\"ACTIVE\"}}";
  }
  if (strcmp(action, "GetRecords") == 0) {
    if (strstr(body, "broken")) return "{\"Records\":[{\"Data\":\"abc\"}]}";
    return "{\"Records\":[{\"Data\":\"aGk=\",\"PartitionKey\":\"k\","
           "\"SequenceNumber\":\"5\","
           "\"ApproximateArrivalTimestamp\":1.5E9}],\"NextShardIterator\":"
           "\"next\","
           "\"MillisBehindLatest\":7}";
  }
  if (strcmp(action, "PutRecords") == 0)
    return "{\"FailedRecordCount\":1,\"Records\":[{\"SequenceNumber\":\"1\","
           "\"ShardId\":\"s0\"},"
           "{\"ErrorCode\":\"ProvisionedThroughputExceededException\","
           "\"ErrorMessage\":\"slow\"}]}";
  *status = 400;
  return "{\"__type\":\"UnknownOperationException\"}";
}

static int handle(void *ud, const kt_httpd_req_t *req, char *out, size_t size,
                  size_t *out_len) {
  (void)ud;
  const char *action = target(req);
  record(action, req->body);
  int status;
  const char *body = answer(action, req->body, &status);
  *out_len = kt_httpd_resp(
      out, size, status, "Content-Type: application/x-amz-json-1.1\r\n", body);
  return KT_REPLY;
}

static kt_httpd_t srv;

static kn_client_t *client(void) { return kt_aws_client(srv.port); }

/* The i-th recorded request of an action, or NULL. */
static json_t *request(const char *action, int i) {
  json_t *doc = NULL;
  pthread_mutex_lock(&rec_lock);
  for (int k = 0; k < n_rec; k++)
    if (strcmp(last_action[k], action) == 0 && i-- == 0) {
      kn_error_t *e =
          kn_json_parse_object(last_body[k], strlen(last_body[k]), "req", &doc);
      kn_error_destroy(e);
      break;
    }
  pthread_mutex_unlock(&rec_lock);
  return doc;
}

static int count_requests(const char *action) {
  int n = 0;
  pthread_mutex_lock(&rec_lock);
  for (int k = 0; k < n_rec; k++) n += strcmp(last_action[k], action) == 0;
  pthread_mutex_unlock(&rec_lock);
  return n;
}

/* ---- Cases ---- */

static void test_list_shards_pages(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  reset_records();
  scenario = 0;
  kn_shard_list_t *l;
  kn_error_t *e =
      kn_list_shards(kc, "s", KN_SHARD_FILTER_AT_LATEST, NULL, 0, &l);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_client_destroy(kc));
  KT_CHECK_INT(kn_shard_list_count(l), 3);
  KT_CHECK_STR(kn_shard_id(kn_shard_list_get(l, 2)), "shardId-2");
  KT_CHECK_STR(kn_shard_parent_id(kn_shard_list_get(l, 2)), "shardId-1");
  kn_shard_list_destroy(l);
  KT_CHECK_INT(count_requests("ListShards"), 3);
  json_t *r0 = request("ListShards", 0), *r1 = request("ListShards", 1);
  KT_CHECK_STR(kn_json_str(r0, "StreamName"), "s");
  KT_CHECK_STR(kn_json_str(kn_json_obj(r0, "ShardFilter"), "Type"),
               "AT_LATEST");
  /* Later pages carry only the token. */
  KT_CHECK_STR(kn_json_str(r1, "NextToken"), "t1");
  KT_CHECK(json_object_size(r1) == 1);
  json_decref(r0);
  json_decref(r1);

  /* A stream given by ARN: StreamARN on the first page only, the later
   * ones again nothing but the token (the API reference: NextToken
   * identifies the stream, StreamName, StreamARN and ShardFilter must not
   * come with it). */
  reset_records();
  const char *arn = "arn:aws:kinesis:us-east-1:123456789012:stream/s";
  e = kn_list_shards(kc, arn, KN_SHARD_FILTER_FROM_TIMESTAMP, NULL,
                     1700000000000, &l);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_client_destroy(kc));
  KT_CHECK_INT(kn_shard_list_count(l), 3);
  kn_shard_list_destroy(l);
  KT_CHECK_INT(count_requests("ListShards"), 3);
  for (int i = 0; i < 3; i++) {
    json_t *r = request("ListShards", i);
    if (i == 0) {
      KT_CHECK_STR(kn_json_str(r, "StreamARN"), arn);
      KT_CHECK(kn_json_str(r, "StreamName") == NULL);
      KT_CHECK_STR(kn_json_str(kn_json_obj(r, "ShardFilter"), "Type"),
                   "FROM_TIMESTAMP");
    } else {
      KT_CHECK_STR(kn_json_str(r, "NextToken"), i == 1 ? "t1" : "t2");
      KT_CHECK(json_object_size(r) == 1);
    }
    json_decref(r);
  }

  reset_records();
  scenario = 1;
  e = kn_list_shards(kc, "s", KN_SHARD_FILTER_NONE, NULL, 0, &l);
  KT_CHECK(e == NULL && kn_shard_list_count(l) == 2);
  KT_CHECK_INT(count_requests("ListShards"), 2);
  kn_shard_list_destroy(l);
  kn_error_destroy(e);
  e = kn_list_shards(kc, "s", KN_SHARD_FILTER_AFTER_SHARD_ID, NULL, 0, &l);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
  kn_client_destroy(kc);
}

static void test_list_streams_pages(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  kn_strlist_t *l;
  reset_records();
  scenario = 0;
  kn_error_t *e = kn_list_streams(kc, &l);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_client_destroy(kc));
  KT_CHECK_INT(kn_strlist_count(l), 3);
  KT_CHECK_STR(kn_strlist_get(l, 2), "z");
  kn_strlist_destroy(l);
  json_t *r1 = request("ListStreams", 1);
  KT_CHECK_STR(kn_json_str(r1, "NextToken"), "n1");
  json_decref(r1);

  reset_records();
  scenario = 2;
  e = kn_list_streams(kc, &l);
  KT_REQUIRE(e == NULL, kn_error_destroy(e), kn_client_destroy(kc));
  KT_CHECK_INT(kn_strlist_count(l), 3);
  KT_CHECK_STR(kn_strlist_get(l, 2), "c");
  kn_strlist_destroy(l);
  KT_CHECK_INT(count_requests("ListStreams"), 3);
  r1 = request("ListStreams", 1);
  json_t *r2 = request("ListStreams", 2);
  KT_CHECK_STR(kn_json_str(r1, "ExclusiveStartStreamName"), "b");
  KT_CHECK_STR(kn_json_str(r2, "ExclusiveStartStreamName"), "c");
  json_decref(r1);
  json_decref(r2);
  kn_client_destroy(kc);
}

/* A token seen before ends a listing even when others came between; a
 * server that never stops paging is cut off at the page limit. */
static void test_paging_guards(void) {
  kn_pager_t pg = {.limit = 3};
  KT_CHECK_INT(kn_pager_next_str(&pg, "a"), KN_PAGER_GO_ON);
  KT_CHECK_INT(kn_pager_next_str(&pg, "b"), KN_PAGER_GO_ON);
  KT_CHECK_INT(kn_pager_next_str(&pg, "a"), KN_PAGER_REPEAT);
  KT_CHECK_INT(kn_pager_next_str(&pg, "c"), KN_PAGER_LIMIT);
  kn_error_t *e = kn_pager_error(&pg, KN_PAGER_LIMIT, "X");
  KT_CHECK_STR(kn_error_string(e),
               "X: more than 3 pages: the server does not end the listing");
  KT_CHECK(!kn_error_is_retriable(e));
  kn_error_destroy(e);
  KT_CHECK(kn_pager_error(&pg, KN_PAGER_REPEAT, "X") == NULL);
  kn_pager_free(&pg);

  kn_client_t *kc = client();

  KT_REQUIRE(kc != NULL);
  scenario = 6;
  reset_records();
  kn_shard_list_t *sl = NULL;
  KT_CHECK_OK(kn_list_shards(kc, "s", KN_SHARD_FILTER_NONE, NULL, 0, &sl));
  kn_shard_list_destroy(sl);
  KT_CHECK_INT(count_requests("ListShards"), 3); /* -, a, b (-> a) */
  reset_records();
  kn_strlist_t *names = NULL;
  KT_CHECK_OK(kn_list_streams(kc, &names));
  kn_strlist_destroy(names);
  KT_CHECK_INT(count_requests("ListStreams"), 3);
  reset_records();
  kn_stream_consumer_list_t *cl = NULL;
  KT_CHECK_OK(kn_list_stream_consumers(kc, "arn:s", &cl));
  kn_stream_consumer_list_destroy(cl);
  KT_CHECK_INT(count_requests("ListStreamConsumers"), 3);

  scenario = 7;
  endless = 0;
  sl = NULL;
  e = kn_list_shards(kc, "s", KN_SHARD_FILTER_NONE, NULL, 0, &sl);
  KT_CHECK(sl == NULL && kn_error_code(e) == KN_ERR__BAD_MSG);
  KT_CHECK_MSG(e && strstr(kn_error_string(e), "more than 10000 pages"), "%s",
               kn_error_string(e));
  KT_CHECK_INT(endless, KN_PAGE_LIMIT + 1);
  kn_error_destroy(e);
  scenario = 0;
  kn_client_destroy(kc);
}

static void test_consumers_and_unsupported(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  reset_records();
  scenario = 0;
  kn_stream_consumer_list_t *l;
  KT_CHECK_OK(kn_list_stream_consumers(kc, "arn:s", &l));
  KT_CHECK_INT(kn_stream_consumer_list_count(l), 1);
  KT_CHECK_INT(count_requests("ListStreamConsumers"), 2);
  kn_stream_consumer_list_destroy(l);

  /* 50 consumers (On-Demand Advantage): nothing stops at 20. */
  reset_records();
  scenario = 8;
  KT_CHECK_OK(kn_list_stream_consumers(kc, "arn:s", &l));
  KT_CHECK_INT(kn_stream_consumer_list_count(l), 50);
  if (kn_stream_consumer_list_count(l) == 50)
    KT_CHECK_STR(kn_stream_consumer_name(kn_stream_consumer_list_get(l, 49)),
                 "c49");
  KT_CHECK_INT(count_requests("ListStreamConsumers"), 3);
  kn_stream_consumer_list_destroy(l);

  scenario = 3;
  kn_error_t *e = kn_list_stream_consumers(kc, "arn:s", &l);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__UNSUPPORTED && l == NULL);
  KT_CHECK(e &&
           strstr(kn_error_string(e), "ListStreamConsumers is not supported"));
  KT_CHECK(e && !kn_error_is_retriable(e));
  kn_error_destroy(e);
  e = kn_update_shard_count(kc, "s", 2);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__UNSUPPORTED);
  KT_CHECK_STR(kn_error_type(e), "UnknownOperationException");
  kn_error_destroy(e);
  kn_client_destroy(kc);
}

static void test_split_default_and_wait(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  reset_records();
  scenario = 0;
  KT_CHECK_OK(kn_split_shard(kc, "s", "shardId-1", NULL));
  json_t *r = request("SplitShard", 0);
  KT_CHECK_STR(kn_json_str(r, "NewStartingHashKey"), "150"); /* [100, 199] */
  KT_CHECK_STR(kn_json_str(r, "ShardToSplit"), "shardId-1");
  json_decref(r);
  KT_CHECK_OK(kn_split_shard(kc, "s", "shardId-2", "0007"));
  r = request("SplitShard", 1);
  KT_CHECK_STR(kn_json_str(r, "NewStartingHashKey"), "7");
  json_decref(r);
  kn_error_t *e = kn_split_shard(kc, "s", "shardId-9", NULL);
  KT_CHECK(e && kn_error_code(e) == KN_ERR_RESOURCE_NOT_FOUND);
  kn_error_destroy(e);
  e = kn_split_shard(kc, "s", "shardId-1", "-5");
  KT_CHECK(e && kn_error_code(e) == KN_ERR__INVALID_ARG);
  kn_error_destroy(e);

  wait_calls = 0;
  KT_CHECK_OK(kn_wait_stream(kc, "s", 0, 10000));
  KT_CHECK_INT(wait_calls, 3);
  scenario = 5;
  e = kn_wait_stream(kc, "s", 0, 300);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__TIMED_OUT);
  kn_error_destroy(e);
  scenario = 4;
  KT_CHECK_OK(kn_wait_stream(kc, "s", 1, 1000));
  e = kn_wait_stream(kc, "s", 0, 1000);
  KT_CHECK(e && kn_error_code(e) == KN_ERR_RESOURCE_NOT_FOUND);
  kn_error_destroy(e);
  scenario = 0;
  kn_client_destroy(kc);
}

static void test_arguments(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  kn_batch_t *b = (kn_batch_t *)1;
  kn_error_t *e = kn_get_records(kc, NULL, 0, &b);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__INVALID_ARG && b == NULL);
  kn_error_destroy(e);
  e = kn_create_stream(kc, "", 1);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
  char *it = (char *)1;
  e = kn_get_shard_iterator(kc, "s", "sh", KN_ITER_AFTER_SEQUENCE_NUMBER, NULL,
                            0, &it);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__INVALID_ARG && it == NULL);
  kn_error_destroy(e);
  e = kn_describe_stream_consumer(kc, "arn:s", NULL, NULL,
                                  (kn_stream_consumer_t **)&it);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
  kn_client_destroy(kc);
  kn_client_destroy(NULL);
  char err[256];
  kt_aws_reset(); /* no region, no endpoint */
  KT_CHECK(kn_client_new(NULL, err, sizeof err) == NULL);
  KT_CHECK(strlen(err) > 0);
}

/* ---- Async calls on the I/O thread ---- */

typedef struct waiter {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
  kn_error_t *err;
  kn_batch_t *batch;
  kn_put_results_t *res;
  kn_client_t *kc;
  const char *iterator;
  int cancel;
  int sent_back;
} waiter_t;

static void wake(waiter_t *w) {
  pthread_mutex_lock(&w->lock);
  w->done = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

static void on_batch(void *opaque, kn_get_records_result_t *res) {
  waiter_t *w = opaque;
  w->err = res->err;
  w->batch = res->batch;
  res->err = NULL;
  res->batch = NULL;
  wake(w);
}

static void on_put(void *opaque, kn_error_t *err, kn_put_results_t *r,
                   kn_buf_t *sent) {
  waiter_t *w = opaque;
  w->err = err;
  w->res = r;
  /* The request body comes back for reuse. */
  w->sent_back = sent && sent->p && strstr(sent->p, "\"PartitionKey\":\"k1\"");
  wake(w);
}

static void start_get(void *arg) {
  waiter_t *w = arg;
  kn_error_t *err = NULL;
  kn_kreq_t *r =
      kn_kinesis_get_records_async(w->kc->svc, w->iterator, 10, "stream-a",
                                   "shardId-7", NULL, on_batch, w, &err);
  if (!r) {
    w->err = err;
    wake(w);
  } else if (w->cancel) {
    kn_kreq_cancel(r);
    wake(w);
  }
}

static void start_put(void *arg) {
  waiter_t *w = arg;
  kn_put_entry_t e[2] = {{"k1", "ab", 2, NULL}, {"k2", "", 0, "5"}};
  kn_error_t *err = NULL;
  if (!kn_kinesis_put_records_async(w->kc->svc, "s", e, 2, NULL, on_put, w,
                                    &err)) {
    w->err = err;
    wake(w);
  }
}

static void run_on_loop(waiter_t *w, void (*fn)(void *)) {
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  kn_loop_post(w->kc->loop, fn, w);
  pthread_mutex_lock(&w->lock);
  while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
}

static void test_async(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  waiter_t w;
  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.iterator = "it-1";
  run_on_loop(&w, start_get);
  KT_CHECK(w.err == NULL && w.batch);
  if (w.batch) {
    KT_CHECK_INT(kn_batch_count(w.batch), 1);
    KT_CHECK_STR(kn_batch_stream(w.batch), "stream-a");
    KT_CHECK_STR(kn_record_shard_id(kn_batch_record(w.batch, 0)), "shardId-7");
    KT_CHECK_STR(kn_batch_next_iterator(w.batch), "next");
    KT_CHECK_INT(kn_batch_millis_behind(w.batch), 7);
    size_t len;
    const char *d = kn_record_data(kn_batch_record(w.batch, 0), &len);
    KT_CHECK(len == 2 && memcmp(d, "hi", 2) == 0);
  }
  kn_batch_destroy(w.batch);
  kn_error_destroy(w.err);
  json_t *r = request("GetRecords", 0);
  KT_CHECK_INT(json_integer_value(json_object_get(r, "Limit")), 10);
  json_decref(r);

  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.iterator = "broken";
  run_on_loop(&w, start_get);
  KT_CHECK(w.err && kn_error_code(w.err) == KN_ERR__BAD_MSG && !w.batch);
  kn_error_destroy(w.err);

  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.iterator = "";
  run_on_loop(&w, start_get);
  KT_CHECK(w.err && kn_error_code(w.err) == KN_ERR__INVALID_ARG);
  kn_error_destroy(w.err);

  /* Cancelled at once: no callback, nothing leaks. */
  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.iterator = "it-2";
  w.cancel = 1;
  run_on_loop(&w, start_get);
  KT_CHECK(w.err == NULL && w.batch == NULL);
  kn_error_destroy(w.err); /* the call could not be made */

  memset(&w, 0, sizeof w);
  w.kc = kc;
  run_on_loop(&w, start_put);
  KT_CHECK(w.err == NULL && w.res);
  KT_CHECK(w.sent_back);
  KT_CHECK_INT(kn_put_results_failed(w.res), 1);
  KT_CHECK_STR(kn_put_results_error_code(w.res, 1),
               "ProvisionedThroughputExceededException");
  kn_put_results_destroy(w.res);
  kn_error_destroy(w.err);

  /* The blocking GetRecords decodes the same way. */
  kn_batch_t *b;
  KT_CHECK_OK(kn_get_records(kc, "it-3", 0, &b));
  KT_CHECK(kn_batch_count(b) == 1 && kn_batch_stream(b) == NULL);
  kn_batch_destroy(b);
  kn_error_t *e = kn_get_records(kc, "broken", 0, &b);
  KT_CHECK(e && kn_error_code(e) == KN_ERR__BAD_MSG && b == NULL);
  kn_error_destroy(e);
  kn_client_destroy(kc);
}

int main(void) {
  (void)kt_closed_port;
  if (kt_httpd_start(&srv, handle, NULL)) {
    fprintf(stderr, "cannot start the test server\n");
    return 1;
  }
  KT_RUN(test_list_shards_pages);
  KT_RUN(test_list_streams_pages);
  KT_RUN(test_paging_guards);
  KT_RUN(test_consumers_and_unsupported);
  KT_RUN(test_split_default_and_wait);
  KT_RUN(test_arguments);
  KT_RUN(test_async);
  kt_httpd_stop(&srv);
  reset_records();
  return KT_DONE();
}
