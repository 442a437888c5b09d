/* The typed asynchronous operations the shard readers use (kinesis.h)
 * against a scripted Kinesis on loopback: GetShardIterator and GetRecords
 * (what the service answered, malformed answers told from failed calls,
 * the answer's length), and SubscribeToShard (initial-response, events
 * decoded into batches, exceptions, corrupt and malformed frames, the
 * callback ending or draining the stream, pause and resume, cancel). */
#include <pthread.h>
#include <string.h>

#include "aws/eventstream.h"
#include "core/error.h"
#include "kinesis/client_int.h"
#include "kinesis/kinesis.h"
#include "kt.h"
#include "kt_aws.h"
#include "kt_httpd.h"
#include "util/clock.h"

/* ---- The scripted server ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last_body[2048];
static int scenario;

enum {
  SUB_NORMAL = 0, /* initial-response, two events, end of stream */
  SUB_EXCEPTION,  /* one event, then ResourceInUseException */
  SUB_CORRUPT,    /* one event, then a frame with a bad CRC */
  SUB_MALFORMED,  /* an event whose JSON is broken */
  SUB_REFUSED,    /* a 400 answer: ResourceNotFoundException */
  SUB_SHARD_END   /* an event that ends the shard, then another */
};

#define GET_RECORDS_ANSWER                                                  \
  "{\"Records\":[{\"Data\":\"aGk=\",\"PartitionKey\":\"k\","                \
  "\"SequenceNumber\":\"5\","                                               \
  "\"ApproximateArrivalTimestamp\":1.5E9}],\"NextShardIterator\":\"next\"," \
  "\"MillisBehindLatest\":7}"

static const char *target(const kt_httpd_req_t *req) {
  const char *t = strstr(req->head, "X-Amz-Target: Kinesis_20131202.");
  static __thread char action[64];
  action[0] = '\0';
  if (t) sscanf(t + 31, "%63[A-Za-z]", action);
  return action;
}

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

#define EVENT(seq, cont)                                            \
  "{\"Records\":[{\"SequenceNumber\":\"" seq                        \
  "\",\"Data\":\"aGk=\","                                           \
  "\"PartitionKey\":\"k\",\"ApproximateArrivalTimestamp\":1.5E9}]," \
  "\"ContinuationSequenceNumber\":\"" cont "\",\"MillisBehindLatest\":3}"
#define EVENT_END                                                           \
  "{\"Records\":[],\"ContinuationSequenceNumber\":null,"                    \
  "\"MillisBehindLatest\":0,\"ChildShards\":[{\"ShardId\":\"shardId-1\","   \
  "\"ParentShards\":[\"shardId-0\"],\"HashKeyRange\":{\"StartingHashKey\":" \
  "\"0\",\"EndingHashKey\":\"9\"}}]}"

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

static size_t json_resp(char *out, size_t size, int status, const char *body) {
  return kt_httpd_resp(out, size, status,
                       "Content-Type: application/x-amz-json-1.1\r\n", body);
}

static int handle(void *ud, const kt_httpd_req_t *req, char *out, size_t size,
                  size_t *out_len) {
  (void)ud;
  const char *action = target(req);
  pthread_mutex_lock(&mu);
  snprintf(last_body, sizeof last_body, "%s", req->body);
  pthread_mutex_unlock(&mu);
  if (strcmp(action, "GetShardIterator") == 0) {
    if (strstr(req->body, "shardId-gone"))
      *out_len = json_resp(
          out, size, 400,
          "{\"__type\":\"ResourceNotFoundException\",\"message\":\"no\"}");
    else if (strstr(req->body, "shardId-odd"))
      *out_len = json_resp(out, size, 200, "{\"Unexpected\":1}");
    else
      *out_len = json_resp(out, size, 200, "{\"ShardIterator\":\"it-0\"}");
  } else if (strcmp(action, "GetRecords") == 0) {
    if (strstr(req->body, "expired"))
      *out_len = json_resp(
          out, size, 400,
          "{\"__type\":\"ExpiredIteratorException\",\"message\":\"old\"}");
    else if (strstr(req->body, "broken"))
      *out_len =
          json_resp(out, size, 200, "{\"Records\":[{\"Data\":\"abc\"}]}");
    else
      *out_len = json_resp(out, size, 200, GET_RECORDS_ANSWER);
  } else if (strcmp(action, "SubscribeToShard") == 0) {
    kn_buf_t b = KN_BUF_INIT;
    switch (scenario) {
      case SUB_NORMAL:
        frame_initial(&b);
        frame_event(&b, EVENT("1", "1"));
        frame_event(&b, EVENT("2", "2"));
        break;
      case SUB_EXCEPTION:
        frame_event(&b, EVENT("1", "1"));
        frame_exception(&b, "ResourceInUseException");
        break;
      case SUB_CORRUPT:
        frame_event(&b, EVENT("1", "1"));
        frame_event(&b, EVENT("2", "2"));
        b.p[b.len - 1] ^= 1; /* the second frame's CRC */
        break;
      case SUB_MALFORMED:
        frame_event(&b, "{\"Records\":[{\"Data\":1}]");
        break;
      case SUB_SHARD_END:
        frame_event(&b, EVENT("1", "1"));
        frame_event(&b, EVENT_END);
        frame_event(&b, EVENT("3", "3"));
        break;
      default:
        break;
    }
    if (scenario == SUB_REFUSED) {
      kn_buf_free(&b);
      *out_len = json_resp(
          out, size, 400,
          "{\"__type\":\"ResourceNotFoundException\",\"message\":\"no\"}");
    } else {
      *out_len = stream_resp(out, size, &b);
    }
  } else {
    *out_len =
        json_resp(out, size, 400, "{\"__type\":\"UnknownOperationException\"}");
  }
  return KT_REPLY;
}

static kt_httpd_t srv;

static kn_client_t *client(void) { return kt_aws_client(srv.port); }

/* ---- Running a call on the loop and waiting for its end ---- */

typedef struct waiter {
  kn_client_t *kc;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
  /* GetShardIterator / GetRecords */
  const char *shard, *iterator;
  kn_get_records_result_t res;
  /* SubscribeToShard */
  kn_ksub_t *sub;
  kn_ksub_action_t answer_at[8]; /* per message, by index */
  int n_msgs, n_exceptions, n_initial, n_records, n_data;
  kn_err_t exception;
  char seqs[64], cont[32];
  int shard_end, children;
  int64_t behind;
  size_t frame_bytes;
  int pause_first; /* on_data pauses once */
  int paused;
  int ended;
  kn_error_t *end_err;
  int cancel;
} waiter_t;

static void wake(waiter_t *w) {
  pthread_mutex_lock(&w->lock);
  w->done = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
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

static void on_result(void *opaque, kn_get_records_result_t *res) {
  waiter_t *w = opaque;
  w->res = *res; /* taken, all of it */
  memset(res, 0, sizeof(*res));
  wake(w);
}

static void start_iterator(void *arg) {
  waiter_t *w = arg;
  kn_error_t *err = NULL;
  kn_kreq_t *r = kn_kinesis_get_shard_iterator_async(
      w->kc->svc, "s", w->shard, KN_ITER_AFTER_SEQUENCE_NUMBER, "42", 0, NULL,
      on_result, w, &err);
  if (!r) {
    w->res.err = err;
    wake(w);
  } else if (w->cancel) {
    kn_kreq_cancel(r);
    wake(w);
  }
}

static void start_records(void *arg) {
  waiter_t *w = arg;
  kn_error_t *err = NULL;
  kn_kreq_t *r = kn_kinesis_get_records_async(
      w->kc->svc, w->iterator, 5, "s", "shardId-7", NULL, on_result, w, &err);
  if (!r) {
    w->res.err = err;
    wake(w);
  }
}

static void clear_result(waiter_t *w) {
  kn_error_destroy(w->res.err);
  kn_batch_destroy(w->res.batch);
  free(w->res.iterator);
}

static void test_get_shard_iterator(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  waiter_t w;
  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.shard = "shardId-0";
  run_on_loop(&w, start_iterator);
  KT_CHECK(w.res.err == NULL && w.res.answered);
  KT_CHECK_STR(w.res.iterator, "it-0");
  KT_CHECK(w.res.body_len == strlen("{\"ShardIterator\":\"it-0\"}"));
  pthread_mutex_lock(&mu);
  KT_CHECK(strstr(last_body, "\"StreamName\":\"s\"") != NULL);
  KT_CHECK(strstr(last_body, "\"ShardId\":\"shardId-0\"") != NULL);
  KT_CHECK(strstr(last_body,
                  "\"ShardIteratorType\":\"AFTER_SEQUENCE_NUMBER\"") != NULL);
  KT_CHECK(strstr(last_body, "\"StartingSequenceNumber\":\"42\"") != NULL);
  pthread_mutex_unlock(&mu);
  clear_result(&w);

  /* A failed call: the service's error, not an answer. */
  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.shard = "shardId-gone";
  run_on_loop(&w, start_iterator);
  KT_CHECK(w.res.err && kn_error_code(w.res.err) == KN_ERR_RESOURCE_NOT_FOUND);
  KT_CHECK(!w.res.answered && !w.res.iterator);
  clear_result(&w);

  /* An answer without an iterator: malformed, and said to be an answer. */
  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.shard = "shardId-odd";
  run_on_loop(&w, start_iterator);
  KT_CHECK(w.res.err && kn_error_code(w.res.err) == KN_ERR__BAD_MSG);
  KT_CHECK(w.res.answered && !w.res.iterator);
  clear_result(&w);

  /* Arguments, and a cancelled call that never calls back. */
  memset(&w, 0, sizeof w);
  w.kc = kc;
  run_on_loop(&w, start_iterator);
  KT_CHECK(w.res.err && kn_error_code(w.res.err) == KN_ERR__INVALID_ARG);
  clear_result(&w);
  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.shard = "shardId-0";
  w.cancel = 1;
  run_on_loop(&w, start_iterator);
  KT_CHECK(w.res.err == NULL && w.res.iterator == NULL);
  clear_result(&w); /* the call could not be made */
  kn_client_destroy(kc);
}

static void test_get_records(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  waiter_t w;
  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.iterator = "it-1";
  run_on_loop(&w, start_records);
  KT_CHECK(w.res.err == NULL && w.res.answered && w.res.batch);
  KT_CHECK(w.res.body_len == strlen(GET_RECORDS_ANSWER));
  if (w.res.batch) {
    KT_CHECK_INT(kn_batch_count(w.res.batch), 1);
    KT_CHECK_STR(kn_batch_next_iterator(w.res.batch), "next");
    KT_CHECK_INT(kn_batch_millis_behind(w.res.batch), 7);
    KT_CHECK_STR(kn_record_shard_id(kn_batch_record(w.res.batch, 0)),
                 "shardId-7");
  }
  clear_result(&w);

  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.iterator = "expired";
  run_on_loop(&w, start_records);
  KT_CHECK(w.res.err && kn_error_code(w.res.err) == KN_ERR_EXPIRED_ITERATOR);
  KT_CHECK(!w.res.answered && !w.res.batch && w.res.body_len == 0);
  clear_result(&w);

  memset(&w, 0, sizeof w);
  w.kc = kc;
  w.iterator = "broken";
  run_on_loop(&w, start_records);
  KT_CHECK(w.res.err && kn_error_code(w.res.err) == KN_ERR__BAD_MSG);
  KT_CHECK(w.res.answered && !w.res.batch);
  KT_CHECK(w.res.body_len == strlen("{\"Records\":[{\"Data\":\"abc\"}]}"));
  clear_result(&w);
  kn_client_destroy(kc);
}

/* ---- SubscribeToShard ---- */

static kn_ksub_action_t sub_event(void *opaque, kn_ksub_event_t *ev) {
  waiter_t *w = opaque;
  int i = w->n_msgs++;
  w->frame_bytes += ev->frame_len;
  if (ev->exception) {
    w->n_exceptions++;
    w->exception = kn_error_code(ev->exception);
    KT_CHECK(ev->batch == NULL);
    return KN_KSUB_CONTINUE;
  }
  if (ev->kind == KN_SUB_INITIAL_RESPONSE) w->n_initial++;
  if (ev->batch) {
    KT_CHECK_INT(ev->kind, KN_SUB_EVENT);
    kn_batch_t *b = ev->batch;
    ev->batch = NULL;
    for (size_t k = 0; k < kn_batch_count(b); k++) {
      size_t n = strlen(w->seqs);
      snprintf(w->seqs + n, sizeof w->seqs - n, "%s%s", n ? "," : "",
               kn_record_sequence_number(kn_batch_record(b, k)));
      KT_CHECK_STR(kn_record_shard_id(kn_batch_record(b, k)), "shardId-0");
      w->n_records++;
    }
    snprintf(w->cont, sizeof w->cont, "%s",
             ev->continuation ? ev->continuation : "-");
    w->behind = kn_batch_millis_behind(b);
    if (b->shard_end) {
      w->shard_end = 1;
      w->children = (int)kn_shard_list_count(b->children);
    }
    kn_batch_destroy(b);
  }
  return i < 8 ? w->answer_at[i] : KN_KSUB_CONTINUE;
}

static void resume_sub(void *arg) {
  waiter_t *w = arg;
  if (w->sub) kn_ksub_resume(w->sub);
}

static int sub_data(void *opaque) {
  waiter_t *w = opaque;
  w->n_data++;
  if (w->pause_first && !w->paused) {
    w->paused = 1;
    kn_loop_post(w->kc->loop, resume_sub, w); /* a later turn resumes it */
    return 1;
  }
  return 0;
}

static void sub_end(void *opaque, kn_error_t *err) {
  waiter_t *w = opaque;
  w->sub = NULL;
  w->ended++;
  w->end_err = err;
  wake(w);
}

static void start_sub(void *arg) {
  waiter_t *w = arg;
  kn_error_t *err = NULL;
  kn_ksub_cbs_t cbs = {sub_event, sub_data, sub_end};
  w->sub = kn_kinesis_subscribe_async(w->kc->svc, "s", "arn:c", "shardId-0",
                                      KN_ITER_AT_TIMESTAMP, NULL, 1700000000123,
                                      &cbs, w, &err);
  if (!w->sub) {
    w->end_err = err;
    wake(w);
  } else if (w->cancel) {
    KT_CHECK_OK(kn_ksub_cancel(w->sub));
    w->sub = NULL;
    wake(w);
  }
}

static void subscribe_case(kn_client_t *kc, waiter_t *w, int sc) {
  scenario = sc;
  w->kc = kc;
  run_on_loop(w, start_sub);
}

static void test_subscribe(void) {
  kn_client_t *kc = client();
  KT_REQUIRE(kc != NULL);
  waiter_t w;

  memset(&w, 0, sizeof w);
  w.pause_first = 1;
  subscribe_case(kc, &w, SUB_NORMAL);
  KT_CHECK(w.end_err == NULL && w.ended == 1);
  KT_CHECK_INT(w.n_initial, 1);
  KT_CHECK_STR(w.seqs, "1,2");
  KT_CHECK_STR(w.cont, "2");
  KT_CHECK_INT(w.behind, 3);
  KT_CHECK(w.paused && w.n_data >= 1);
  KT_CHECK(w.frame_bytes > 0);
  kn_error_destroy(w.end_err);
  pthread_mutex_lock(&mu);
  KT_CHECK(strstr(last_body, "\"ConsumerARN\":\"arn:c\"") != NULL);
  KT_CHECK(strstr(last_body, "\"ShardId\":\"shardId-0\"") != NULL);
  KT_CHECK(strstr(last_body, "\"Type\":\"AT_TIMESTAMP\"") != NULL);
  pthread_mutex_unlock(&mu);

  /* An exception: seen by the callback, and the end reports it. */
  memset(&w, 0, sizeof w);
  subscribe_case(kc, &w, SUB_EXCEPTION);
  KT_CHECK_STR(w.seqs, "1");
  KT_CHECK_INT(w.n_exceptions, 1);
  KT_CHECK_INT(w.exception, KN_ERR_RESOURCE_IN_USE);
  KT_CHECK(w.end_err && kn_error_code(w.end_err) == KN_ERR_RESOURCE_IN_USE);
  kn_error_destroy(w.end_err);

  /* A corrupt frame after a good one. */
  memset(&w, 0, sizeof w);
  subscribe_case(kc, &w, SUB_CORRUPT);
  KT_CHECK_STR(w.seqs, "1");
  KT_CHECK(w.end_err && kn_error_code(w.end_err) == KN_ERR__CORRUPT);
  kn_error_destroy(w.end_err);

  /* An event the records decoder refuses. */
  memset(&w, 0, sizeof w);
  subscribe_case(kc, &w, SUB_MALFORMED);
  KT_CHECK_INT(w.n_msgs, 0);
  KT_CHECK(w.end_err && kn_error_code(w.end_err) == KN_ERR__BAD_MSG);
  kn_error_destroy(w.end_err);

  /* The service refuses the subscription. */
  memset(&w, 0, sizeof w);
  subscribe_case(kc, &w, SUB_REFUSED);
  KT_CHECK_INT(w.n_msgs, 0);
  KT_CHECK(w.end_err && kn_error_code(w.end_err) == KN_ERR_RESOURCE_NOT_FOUND);
  kn_error_destroy(w.end_err);

  /* The end of the shard, then draining: nothing more is delivered and
   * the server's clean end is the end. */
  memset(&w, 0, sizeof w);
  w.answer_at[1] = KN_KSUB_DRAIN;
  subscribe_case(kc, &w, SUB_SHARD_END);
  KT_CHECK_STR(w.seqs, "1");
  KT_CHECK_STR(w.cont, "-");
  KT_CHECK(w.shard_end && w.children == 1);
  KT_CHECK_INT(w.n_msgs, 2);
  KT_CHECK(w.end_err == NULL && w.ended == 1);
  kn_error_destroy(w.end_err);

  /* Reset by the callback after the first event. */
  memset(&w, 0, sizeof w);
  w.answer_at[0] = KN_KSUB_RESET;
  subscribe_case(kc, &w, SUB_NORMAL);
  KT_CHECK_INT(w.n_msgs, 1); /* the initial-response */
  KT_CHECK_STR(w.seqs, "");
  KT_CHECK_INT(w.ended, 1);
  kn_error_destroy(w.end_err);

  /* Cancelled at once: no callback, nothing leaks. */
  memset(&w, 0, sizeof w);
  w.cancel = 1;
  subscribe_case(kc, &w, SUB_NORMAL);
  KT_CHECK(w.ended == 0 && w.n_msgs == 0);
  kn_error_destroy(w.end_err); /* the subscription could not be made */
  kn_client_destroy(kc);
}

int main(void) {
  (void)kt_closed_port;
  if (kt_httpd_start(&srv, handle, NULL)) {
    fprintf(stderr, "cannot start the test server\n");
    return 1;
  }
  KT_RUN(test_get_shard_iterator);
  KT_RUN(test_get_records);
  KT_RUN(test_subscribe);
  kt_httpd_stop(&srv);
  return KT_DONE();
}
