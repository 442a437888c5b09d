/* Service calls against a scripted local server: the request's shape,
 * retries and their limits, the shared budget, cancellation while waiting
 * or in flight, blocking calls and streamed responses. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "aws/creds.h"
#include "aws/service.h"
#include "aws/settings.h"
#include "core/error.h"
#include "kt.h"
#include "kt_httpd.h"
#include "util/clock.h"

/* What the server answers, one entry per request, the last repeated. */
static const char *const *script;
static atomic_int script_pos;
static atomic_int bad_requests;
static char last_head[8192];
static pthread_mutex_t head_lock = PTHREAD_MUTEX_INITIALIZER;

static int has_header(const char *head, const char *line) {
  return strcasestr(head, line) != NULL;
}

static int handler(void *ud, const kt_httpd_req_t *req, char *out, size_t size,
                   size_t *out_len) {
  (void)ud;
  pthread_mutex_lock(&head_lock);
  snprintf(last_head, sizeof(last_head), "%s", req->head);
  pthread_mutex_unlock(&head_lock);
  /* The request every attempt must send. */
  int ok =
      strcmp(req->method, "POST") == 0 && strcmp(req->path, "/") == 0 &&
      has_header(req->head,
                 "\r\nContent-Type: application/x-amz-json-1.1\r\n") &&
      has_header(req->head, "\r\nX-Amz-Target: Kinesis_20131202.") &&
      has_header(req->head, "\r\nX-Amz-Date: 2") &&
      has_header(req->head,
                 "\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKIDTEST/") &&
      has_header(req->head,
                 "SignedHeaders=content-type;host;x-amz-date;x-amz-") &&
      has_header(req->head, "\r\nUser-Agent: test-agent/1\r\n") &&
      has_header(req->head, "\r\nHost: 127.0.0.1:") &&
      !has_header(req->head, "\r\nExpect:");
  if (!ok) {
    atomic_fetch_add(&bad_requests, 1);
    fprintf(stderr, "unexpected request:\n%s\n", req->head);
  }
  pthread_mutex_lock(&head_lock);
  const char *const *sc = script;
  pthread_mutex_unlock(&head_lock);
  int pos = atomic_fetch_add(&script_pos, 1);
  int last = 0;
  while (sc[last + 1]) last++;
  const char *s = sc[pos < last ? pos : last];
  if (strcmp(s, "hang") == 0) return KT_HANG;
  if (strcmp(s, "close") == 0) return KT_CLOSE;
  if (strcmp(s, "echo") == 0) {
    *out_len = kt_httpd_resp(out, size, 200, "x-amzn-RequestId: r-echo\r\n",
                             req->body);
    return KT_REPLY;
  }
  if (strncmp(s, "raw:", 4) == 0) {
    *out_len = (size_t)snprintf(out, size, "%s", s + 4);
    return KT_REPLY;
  }
  /* "STATUS BODY" */
  int status = atoi(s);
  const char *body = strchr(s, ' ');
  *out_len = kt_httpd_resp(out, size, status, "x-amzn-RequestId: r-1\r\n",
                           body ? body + 1 : "");
  return KT_REPLY;
}

static kt_httpd_t srv;
static char endpoint[64];

struct env {
  kn_aws_settings_t s;
  kn_loop_t *loop;
  kn_creds_provider_t *creds;
  kn_svc_t *svc;
};

static void env_fini(struct env *e);

/* 0, or -1 with nothing held when a part could not be made. */
static int env_init(struct env *e, const char *ep, int budget, long backoff_ms,
                    const char *token) {
  memset(e, 0, sizeof(*e));
  e->s.region = "us-east-1";
  e->s.access_key_id = "AKIDTEST";
  e->s.secret_access_key = "SECRET";
  e->s.session_token = (char *)token;
  e->s.user_agent = "test-agent/1";
  e->s.http = (kn_http_opts_t){
      .verify_tls = 1, .connect_timeout_ms = 1000, .max_connections = 8};
  e->s.request_timeout_ms = 2000;
  e->s.retry_max_attempts = 5;
  e->s.retry_backoff_ms = backoff_ms;
  e->s.retry_backoff_max_ms = backoff_ms * 10;
  e->s.retry_budget = budget;
  kn_error_t *err = NULL;
  e->loop = kn_loop_new(&e->s.http, &err);
  KT_CHECK(e->loop != NULL);
  kn_error_destroy(err);
  e->creds = kn_creds_provider_new(&e->s, &err);
  KT_CHECK(e->creds != NULL);
  kn_error_destroy(err);
  e->svc = kn_svc_new(e->loop, e->creds, &e->s, &kn_svc_kinesis,
                      ep ? ep : endpoint, &err);
  KT_CHECK(e->svc != NULL);
  kn_error_destroy(err);
  if (e->loop && e->creds && e->svc) return 0;
  env_fini(e);
  return -1;
}

static void env_fini(struct env *e) {
  kn_svc_destroy(e->svc);
  kn_loop_destroy(e->loop);
  kn_creds_provider_destroy(e->creds);
}

static void set_script(const char *const *s) {
  pthread_mutex_lock(&head_lock);
  script = s;
  pthread_mutex_unlock(&head_lock);
  atomic_store(&script_pos, 0);
}

/* One asynchronous call, waited for from the test thread. */
struct one {
  struct env *e;
  const char *action;
  const char *body;
  kn_call_opts_t opts;
  kn_call_t *call;
  kn_error_t *start_err;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
  kn_error_t *err;
  kn_buf_t out;
  int attempts, status;
  /* streaming */
  int stream;
  size_t streamed;
};

static void one_cb(void *opaque, kn_call_result_t *res) {
  struct one *o = opaque;
  o->err = res->err;
  o->out = res->body;
  res->body = (kn_buf_t)KN_BUF_INIT;
  o->attempts = res->attempts;
  o->status = res->http_status;
  pthread_mutex_lock(&o->lock);
  o->done = 1;
  pthread_cond_signal(&o->cond);
  pthread_mutex_unlock(&o->lock);
}

static int one_data(void *opaque, const char *p, size_t n) {
  struct one *o = opaque;
  (void)p;
  o->streamed += n;
  return 0;
}

static void one_start(void *arg) {
  struct one *o = arg;
  kn_buf_t body = KN_BUF_INIT;
  kn_buf_append_str(&body, o->body ? o->body : "{}");
  if (o->stream)
    o->call = kn_svc_stream(o->e->svc, o->action, &body, one_data, one_cb, o,
                            &o->start_err);
  else
    o->call = kn_svc_call(o->e->svc, o->action, &body, &o->opts, one_cb, o,
                          &o->start_err);
  KT_CHECK(body.p == NULL);
  if (!o->call) o->done = 1;
}

static void one_init(struct one *o, struct env *e, const char *action) {
  memset(o, 0, sizeof(*o));
  o->e = e;
  o->action = action;
  pthread_mutex_init(&o->lock, NULL);
  pthread_cond_init(&o->cond, NULL);
}

static void one_run(struct one *o) {
  kn_loop_call(o->e->loop, one_start, o);
  pthread_mutex_lock(&o->lock);
  while (!o->done) pthread_cond_wait(&o->cond, &o->lock);
  pthread_mutex_unlock(&o->lock);
}

static void one_fini(struct one *o) {
  kn_error_destroy(o->err);
  kn_error_destroy(o->start_err);
  kn_buf_free(&o->out);
  pthread_mutex_destroy(&o->lock);
  pthread_cond_destroy(&o->cond);
}

static void test_success(void) {
  static const char *const s[] = {"echo", NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  struct one o;
  one_init(&o, &e, "ListStreams");
  o.body = "{\"Limit\":5}";
  one_run(&o);
  KT_CHECK(o.err == NULL);
  KT_CHECK_INT(o.attempts, 1);
  KT_CHECK_INT(o.status, 200);
  KT_CHECK_STR(o.out.p, "{\"Limit\":5}");
  KT_CHECK_INT(atomic_load(&bad_requests), 0);
  pthread_mutex_lock(&head_lock);
  KT_CHECK(strstr(last_head,
                  "X-Amz-Target: Kinesis_20131202.ListStreams\r\n") != NULL);
  KT_CHECK(strstr(last_head, "X-Amz-Security-Token") == NULL);
  pthread_mutex_unlock(&head_lock);
  one_fini(&o);
  env_fini(&e);

  /* A session token is sent and signed. */
  KT_REQUIRE(env_init(&e, NULL, 500, 1, "TOKEN123") == 0);
  one_init(&o, &e, "ListStreams");
  one_run(&o);
  KT_CHECK(o.err == NULL);
  pthread_mutex_lock(&head_lock);
  KT_CHECK(strstr(last_head, "\r\nX-Amz-Security-Token: TOKEN123\r\n") != NULL);
  KT_CHECK(strstr(last_head, "x-amz-security-token;x-amz-target") != NULL);
  pthread_mutex_unlock(&head_lock);
  one_fini(&o);
  env_fini(&e);
}

static void test_retried_then_success(void) {
  /* A connection dropped first: curl itself re-sends a request once when a
   * reused connection turns out dead, which would hide an attempt. */
  static const char *const s[] = {
      "close",
      "500 ",
      "503 ",
      "400 "
      "{\"__type\":\"ProvisionedThroughputExceededException\",\"message\":"
      "\"slow down\"}",
      "raw:HTTP/1.1 502 Bad Gateway\r\nContent-Length: 13\r\n\r\n<html></html>",
      "200 {\"StreamNames\":[]}",
      NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  struct one o;
  one_init(&o, &e, "ListStreams");
  o.opts.max_attempts = 6;
  one_run(&o);
  KT_CHECK_MSG(o.err == NULL, "%s", kn_error_string(o.err));
  KT_CHECK_INT(o.attempts, 6);
  KT_CHECK_STR(o.out.p, "{\"StreamNames\":[]}");
  KT_CHECK_INT(atomic_load(&script_pos), 6);
  KT_CHECK_INT(atomic_load(&bad_requests), 0); /* every attempt re-signed */
  one_fini(&o);
  env_fini(&e);
}

static void test_not_retried(void) {
  static const char *const s[] = {
      "400 {\"__type\":\"ResourceNotFoundException\",\"message\":\"Stream x "
      "not found\"}",
      NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  struct one o;
  one_init(&o, &e, "DescribeStream");
  one_run(&o);
  KT_CHECK_INT(kn_error_code(o.err), KN_ERR_RESOURCE_NOT_FOUND);
  KT_CHECK_INT(o.attempts, 1);
  KT_CHECK_INT(o.status, 400);
  KT_CHECK_STR(kn_error_request_id(o.err), "r-1");
  KT_CHECK(strstr(kn_error_string(o.err),
                  "kinesis DescribeStream: ResourceNotFoundException: Stream x "
                  "not found") != NULL);
  KT_CHECK_INT(atomic_load(&script_pos), 1);
  one_fini(&o);

  /* A malformed 2xx body is the caller's to judge. */
  static const char *const g[] = {"200 <html>not json</html>", NULL};
  set_script(g);
  one_init(&o, &e, "ListStreams");
  one_run(&o);
  KT_CHECK(o.err == NULL);
  KT_CHECK_INT(o.attempts, 1);
  KT_CHECK_STR(o.out.p, "<html>not json</html>");
  one_fini(&o);
  env_fini(&e);
}

static void test_attempts_exhausted(void) {
  static const char *const s[] = {"500 ", NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  struct one o;
  one_init(&o, &e, "ListShards");
  o.opts.max_attempts = 3;
  one_run(&o);
  KT_CHECK_INT(kn_error_code(o.err), KN_ERR_INTERNAL_FAILURE);
  KT_CHECK_INT(o.attempts, 3);
  KT_CHECK_INT(atomic_load(&script_pos), 3);
  KT_CHECK(strstr(kn_error_string(o.err),
                  "ListShards failed after 3 attempts") != NULL);
  one_fini(&o);

  /* The configured default applies without opts (5). */
  set_script(s);
  one_init(&o, &e, "ListShards");
  one_run(&o);
  KT_CHECK_INT(o.attempts, 5);
  one_fini(&o);
  env_fini(&e);
}

static void test_budget_exhausted(void) {
  static const char *const s[] = {"500 ", NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 12, 1, NULL) == 0); /* two retries' worth */
  struct one o;
  one_init(&o, &e, "ListStreams");
  o.opts.max_attempts = 8;
  one_run(&o);
  KT_CHECK_INT(o.attempts, 3);
  KT_CHECK(strstr(kn_error_string(o.err), "retry budget exhausted") != NULL);
  one_fini(&o);
  /* Two tokens left: the next failure is reported at once. */
  one_init(&o, &e, "ListStreams");
  o.opts.max_attempts = 8;
  one_run(&o);
  KT_CHECK_INT(o.attempts, 1);
  KT_CHECK(strstr(kn_error_string(o.err), "not retried") != NULL);
  one_fini(&o);
  /* Successes refill it. */
  static const char *const ok[] = {"200 {}", NULL};
  set_script(ok);
  for (int i = 0; i < 3; i++) {
    one_init(&o, &e, "ListStreams");
    one_run(&o);
    KT_CHECK(o.err == NULL);
    one_fini(&o);
  }
  set_script(s);
  one_init(&o, &e, "ListStreams");
  o.opts.max_attempts = 8;
  one_run(&o);
  KT_CHECK_INT(o.attempts, 2);
  one_fini(&o);
  env_fini(&e);
}

static void test_timeout_and_transport(void) {
  static const char *const s[] = {"hang", NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  e.s.request_timeout_ms = 600000; /* the call's own time-out must win */
  struct one o;
  one_init(&o, &e, "GetRecords");
  o.opts.max_attempts = 2;
  o.opts.timeout_ms = 200;
  int64_t t0 = kn_mono_ms();
  one_run(&o);
  int64_t took = kn_mono_ms() - t0;
  KT_CHECK_INT(kn_error_code(o.err), KN_ERR__TIMED_OUT);
  KT_CHECK_INT(o.attempts, 2);
  KT_CHECK_MSG(took >= 400 && took < KT_PROMPT_MS, "took %lld ms",
               (long long)took);
  one_fini(&o);
  env_fini(&e);

  char ep[64];
  snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", kt_closed_port());
  KT_REQUIRE(env_init(&e, ep, 500, 1, NULL) == 0);
  one_init(&o, &e, "ListStreams");
  o.opts.max_attempts = 3;
  t0 = kn_mono_ms();
  one_run(&o);
  KT_CHECK_INT(kn_error_code(o.err), KN_ERR__TRANSPORT);
  KT_CHECK_INT(o.attempts, 3);
  KT_CHECK(strstr(kn_error_string(o.err), ep) != NULL);
  KT_CHECK(kn_mono_ms() - t0 < KT_PROMPT_MS);
  one_fini(&o);
  env_fini(&e);
}

/* Cancel while waiting for the retry timer, and while in flight. */
static atomic_int cb_after_cancel;

/* A call started on the loop to be cancelled there; ended is set when the
 * call could not be made or its callback ran (it is then gone). */
struct cancel_st {
  struct env *e;
  kn_call_t *call;
  atomic_int ended;
  int cancelled_waiting; /* I/O thread, read after a kn_loop_call */
  int answers_then;      /* the server's answers at that moment */
};

static void no_cb(void *opaque, kn_call_result_t *res) {
  struct cancel_st *c = opaque;
  kn_error_destroy(res->err);
  atomic_fetch_add(&cb_after_cancel, 1);
  if (c) {
    c->call = NULL;
    atomic_store(&c->ended, 1);
  }
}

static void cancel_start(void *arg) {
  struct cancel_st *c = arg;
  kn_buf_t body = KN_BUF_INIT;
  kn_buf_append_str(&body, "{}");
  kn_error_t *err = NULL;
  c->call = kn_svc_call(c->e->svc, "ListStreams", &body, NULL, no_cb, c, &err);
  KT_CHECK(c->call != NULL);
  kn_error_destroy(err);
  if (!c->call) atomic_store(&c->ended, 1);
}

static void cancel_it(void *arg) {
  struct cancel_st *c = arg;
  kn_call_cancel(c->call);
  c->call = NULL;
  kn_call_cancel(NULL);
}

/* Waits (for at most KT_PROMPT_MS) until the server has seen the call,
 * or the call has ended. */
static void wait_answered(struct cancel_st *c) {
  int64_t end = kn_mono_ms() + KT_PROMPT_MS;
  while (atomic_load(&script_pos) < 1 && !atomic_load(&c->ended) &&
         kn_mono_ms() < end)
    kn_sleep_ms(1);
}

/* Cancels the call if it was answered and now waits on its retry timer. */
static void cancel_if_waiting(void *arg) {
  struct cancel_st *c = arg;
  if (!c->call || !kn_call_waiting(c->call) || atomic_load(&script_pos) < 1)
    return;
  c->answers_then = atomic_load(&script_pos);
  kn_call_cancel(c->call);
  c->call = NULL;
  c->cancelled_waiting = 1;
}

static void test_cancel(void) {
  static const char *const s[] = {"500 ", NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 60000, NULL) ==
             0); /* back-off of up to a minute */
  struct cancel_st c = {&e, NULL, 0, 0, 0};
  kn_loop_call(e.loop, cancel_start, &c);
  /* Cancelled on the loop at the moment it is seen waiting, so the timer
   * cannot fire in between (its delay may be anything from 0 up). */
  int64_t end = kn_mono_ms() + KT_PROMPT_MS;
  while (!c.cancelled_waiting && !atomic_load(&c.ended) && kn_mono_ms() < end) {
    kn_loop_call(e.loop, cancel_if_waiting, &c);
    if (!c.cancelled_waiting) kn_sleep_ms(1);
  }
  KT_CHECK(c.cancelled_waiting);
  KT_CHECK(c.answers_then >= 1);
  env_fini(&e);
  /* No attempt after the cancel (almost always exactly one before it). */
  KT_CHECK_INT(atomic_load(&script_pos), c.answers_then);

  static const char *const h[] = {"hang", NULL};
  set_script(h);
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  atomic_store(&c.ended, 0);
  kn_loop_call(e.loop, cancel_start, &c);
  wait_answered(&c);
  kn_loop_call(e.loop, cancel_it, &c);
  env_fini(&e);
  KT_CHECK_INT(atomic_load(&cb_after_cancel), 0);
}

static void sync_on_loop(void *arg) {
  struct env *e = arg;
  kn_buf_t out;
  kn_error_t *err =
      kn_svc_call_sync(e->svc, "ListStreams", "{}", 2, NULL, &out);
  KT_CHECK_INT(kn_error_code(err), KN_ERR__STATE);
  kn_error_destroy(err);
}

struct sync_thread {
  struct env *e;
  int ok;
};

static void *sync_main(void *arg) {
  struct sync_thread *t = arg;
  for (int i = 0; i < 20; i++) {
    kn_buf_t out;
    kn_error_t *err =
        kn_svc_call_sync(t->e->svc, "ListStreams", "{\"n\":1}", 7, NULL, &out);
    if (!err && out.p && strcmp(out.p, "{\"n\":1}") == 0) t->ok++;
    kn_error_destroy(err);
    kn_buf_free(&out);
  }
  return NULL;
}

static void test_sync(void) {
  static const char *const s[] = {"echo", NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  struct sync_thread t[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    t[i] = (struct sync_thread){&e, 0};
    pthread_create(&th[i], NULL, sync_main, &t[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    KT_CHECK_INT(t[i].ok, 20);
  }
  kn_loop_call(e.loop, sync_on_loop, &e);
  static const char *const nf[] = {
      "400 {\"__type\":\"ResourceNotFoundException\"}", NULL};
  set_script(nf);
  kn_buf_t out;
  kn_error_t *err =
      kn_svc_call_sync(e.svc, "DescribeStream", "{}", 2, NULL, &out);
  KT_CHECK_INT(kn_error_code(err), KN_ERR_RESOURCE_NOT_FOUND);
  KT_CHECK(out.p == NULL);
  kn_error_destroy(err);
  env_fini(&e);
}

static void test_stream(void) {
  static const char *const s[] = {"200 0123456789abcdef", NULL};
  set_script(s);
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  struct one o;
  one_init(&o, &e, "SubscribeToShard");
  o.stream = 1;
  one_run(&o);
  KT_CHECK(o.err == NULL);
  KT_CHECK_INT(o.streamed, 16);
  KT_CHECK_INT(o.out.len, 0);
  KT_CHECK_INT(o.attempts, 1);
  one_fini(&o);
  /* Errors are collected and decoded, and never retried. */
  static const char *const f[] = {
      "500 {\"__type\":\"InternalFailure\",\"message\":\"boom\"}", NULL};
  set_script(f);
  one_init(&o, &e, "SubscribeToShard");
  o.stream = 1;
  one_run(&o);
  KT_CHECK_INT(kn_error_code(o.err), KN_ERR_INTERNAL_FAILURE);
  KT_CHECK(strstr(kn_error_string(o.err), "boom") != NULL);
  KT_CHECK_INT(o.attempts, 1);
  KT_CHECK_INT(o.streamed, 0);
  KT_CHECK_INT(atomic_load(&script_pos), 1);
  one_fini(&o);
  env_fini(&e);
}

static void test_bad_endpoints(void) {
  static const char *const bad[] = {"ftp://x",
                                    "http://",
                                    "http://a@b/",
                                    "http://h/?q=1",
                                    "kinesis.us-east-1.amazonaws.com",
                                    ""};
  struct env e;
  KT_REQUIRE(env_init(&e, NULL, 500, 1, NULL) == 0);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    kn_error_t *err = NULL;
    kn_svc_t *svc =
        kn_svc_new(e.loop, e.creds, &e.s, &kn_svc_kinesis, bad[i], &err);
    KT_CHECK_MSG(svc == NULL && err != NULL, "%s", bad[i]);
    kn_error_destroy(err);
    kn_svc_destroy(svc);
  }
  /* Asynchronous calls from another thread are refused, body freed. */
  kn_buf_t body = KN_BUF_INIT;
  kn_buf_append_str(&body, "{}");
  kn_error_t *serr = NULL;
  KT_CHECK(kn_svc_call(e.svc, "ListStreams", &body, NULL, no_cb, NULL, &serr) ==
           NULL);
  KT_CHECK_INT(kn_error_code(serr), KN_ERR__STATE);
  KT_CHECK(body.p == NULL);
  kn_error_destroy(serr);
  e.s.region = NULL;
  kn_error_t *err = NULL;
  KT_CHECK(kn_svc_new(e.loop, e.creds, &e.s, &kn_svc_kinesis, endpoint, &err) ==
           NULL);
  KT_CHECK_INT(kn_error_code(err), KN_ERR__CONF);
  kn_error_destroy(err);
  e.s.region = "us-east-1";
  env_fini(&e);
}

int main(void) {
  static const char *const none[] = {"500 ", NULL};
  script = none;
  if (kt_httpd_start(&srv, handler, NULL)) return 1;
  snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", srv.port);
  KT_RUN(test_success);
  KT_RUN(test_retried_then_success);
  KT_RUN(test_not_retried);
  KT_RUN(test_attempts_exhausted);
  KT_RUN(test_budget_exhausted);
  KT_RUN(test_timeout_and_transport);
  KT_RUN(test_cancel);
  KT_RUN(test_sync);
  KT_RUN(test_stream);
  KT_RUN(test_bad_endpoints);
  kt_httpd_stop(&srv);
  return KT_DONE();
}
