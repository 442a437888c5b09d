/* Transfers on the loop against a local test server: responses and their
 * headers, large bodies, streaming with pause and resume, cancellation,
 * transport errors and timeouts, the blocking call, header redaction. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "aws/http.h"
#include "core/error.h"
#include "kt.h"
#include "kt_httpd.h"
#include "util/clock.h"
#include "util/str.h"

#define BIG (16u << 20)

static char *big_body;

static int handler(void *ud, const kt_httpd_req_t *req, char *out, size_t size,
                   size_t *out_len) {
  (void)ud;
  if (strcmp(req->path, "/hang") == 0) return KT_HANG;
  if (strcmp(req->path, "/close") == 0) return KT_CLOSE;
  if (strcmp(req->path, "/echo") == 0) {
    char extra[256];
    snprintf(extra, sizeof(extra),
             "Content-Type: application/x-amz-json-1.1\r\n"
             "x-amzn-RequestId: req-123\r\n"
             "X-Method: %s\r\n",
             req->method);
    *out_len = kt_httpd_resp(out, size, 200, extra, req->body);
    return KT_REPLY;
  }
  if (strcmp(req->path, "/error") == 0) {
    *out_len = kt_httpd_resp(
        out, size, 400,
        "x-amz-request-id: s3-style\r\n"
        "x-amzn-ErrorType: ValidationException:http://internal/\r\n",
        "{\"message\":\"bad\"}");
    return KT_REPLY;
  }
  if (strcmp(req->path, "/stream") == 0) {
    /* 64 chunks of 1 KB, as one response. */
    size_t n = 0;
    n += (size_t)snprintf(
        out, size, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", 64 * 1024);
    memset(out + n, 'x', 64 * 1024);
    *out_len = n + 64 * 1024;
    return KT_REPLY;
  }
  *out_len = kt_httpd_resp(out, size, 404, NULL, "no such path");
  return KT_REPLY;
}

static kt_httpd_t srv;

static kn_loop_t *new_loop(kn_logger_t *lg) {
  kn_http_opts_t o = {.verify_tls = 1,
                      .connect_timeout_ms = 2000,
                      .max_connections = 8,
                      .version = KN_HTTP_AUTO,
                      .log = lg};
  kn_error_t *err = NULL;
  kn_loop_t *loop = kn_loop_new(&o, &err);
  KT_CHECK(loop != NULL);
  kn_error_destroy(err);
  return loop;
}

/* One request from the test thread: started on the loop, waited for. */
struct one {
  kn_loop_t *loop;
  kn_http_req_t req;
  char url[256];
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
  int headers_status;
  kn_http_resp_t resp;
  kn_err_t start_err;
  kn_http_xfer_t *x;
  /* streaming */
  size_t streamed;
  int pause_every;
  int pauses;
  kn_timer_t *resume_timer;
};

static void one_cb(void *opaque, kn_http_resp_t *resp) {
  struct one *o = opaque;
  o->resp = *resp;
  memset(resp, 0, sizeof(*resp)); /* steal everything */
  kn_timer_free(o->resume_timer);
  o->resume_timer = NULL;
  pthread_mutex_lock(&o->lock);
  o->done = 1;
  pthread_cond_signal(&o->cond);
  pthread_mutex_unlock(&o->lock);
}

static void one_headers(void *opaque, int status) {
  struct one *o = opaque;
  o->headers_status = status;
}

static void resume_later(void *arg) {
  struct one *o = arg;
  kn_http_resume(o->x);
}

static int one_data(void *opaque, const char *p, size_t n) {
  struct one *o = opaque;
  for (size_t i = 0; i < n; i++)
    if (p[i] != 'x') return -1;
  size_t before = o->streamed;
  o->streamed += n;
  if (o->pause_every &&
      before / (size_t)o->pause_every != o->streamed / (size_t)o->pause_every) {
    o->pauses++;
    kn_timer_start(o->resume_timer, 2);
    return 1;
  }
  return 0;
}

static void one_start(void *arg) {
  struct one *o = arg;
  kn_error_t *err = NULL;
  if (o->pause_every) o->resume_timer = kn_timer_new(o->loop, resume_later, o);
  o->x = kn_http_start(o->loop, &o->req, one_cb, o, &err);
  o->start_err = kn_error_code(err);
  kn_error_destroy(err);
  if (!o->x) {
    kn_timer_free(o->resume_timer);
    o->resume_timer = NULL;
    o->done = 1;
  }
}

static void one_init(struct one *o, kn_loop_t *loop, const char *method,
                     const char *path) {
  memset(o, 0, sizeof(*o));
  o->loop = loop;
  pthread_mutex_init(&o->lock, NULL);
  pthread_cond_init(&o->cond, NULL);
  snprintf(o->url, sizeof(o->url), "http://127.0.0.1:%d%s", srv.port, path);
  o->req.method = method;
  o->req.url = o->url;
  o->req.timeout_ms = 5000;
  o->req.on_headers = one_headers;
}

static void one_wait(struct one *o) {
  pthread_mutex_lock(&o->lock);
  while (!o->done) pthread_cond_wait(&o->cond, &o->lock);
  pthread_mutex_unlock(&o->lock);
}

static void one_run(struct one *o) {
  kn_loop_call(o->loop, one_start, o);
  one_wait(o);
}

static void one_fini(struct one *o) {
  kn_http_resp_clear(&o->resp);
  pthread_mutex_destroy(&o->lock);
  pthread_cond_destroy(&o->cond);
}

/* Accepts the connection o makes to the listening fd; -1 when o ends
 * first (it could not start or failed before connecting). */
static int one_accept(struct one *o, int fd) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 20) > 0) return accept(fd, NULL, NULL);
    pthread_mutex_lock(&o->lock);
    int done = o->done;
    pthread_mutex_unlock(&o->lock);
    if (done) return -1;
  }
}

static void test_post_echo(void) {
  kn_loop_t *loop = new_loop(NULL);
  struct one o;
  one_init(&o, loop, "POST", "/echo");
  const char *hdrs[] = {"Content-Type: application/json", NULL};
  o.req.headers = hdrs;
  kn_buf_t body = KN_BUF_INIT;
  kn_buf_append_str(&body, "{\"hello\":1}");
  o.req.body_take = &body;
  one_run(&o);
  KT_CHECK(body.p == NULL); /* moved */
  KT_CHECK(o.resp.error == NULL);
  KT_CHECK_INT(o.resp.status, 200);
  KT_CHECK_INT(o.headers_status, 200);
  KT_CHECK_INT(o.resp.http_version, 1);
  KT_CHECK_STR(o.resp.body.p, "{\"hello\":1}");
  KT_CHECK_STR(o.resp.request_id, "req-123");
  KT_CHECK_STR(o.resp.content_type, "application/x-amz-json-1.1");
  KT_CHECK(o.resp.error_type == NULL);
  one_fini(&o);

  /* A copied body, a PUT, and an error response with its headers. */
  one_init(&o, loop, "PUT", "/echo");
  o.req.body = "copied";
  o.req.body_len = 6;
  one_run(&o);
  KT_CHECK_STR(o.resp.body.p, "copied");
  one_fini(&o);

  one_init(&o, loop, "POST", "/error");
  one_run(&o);
  KT_CHECK(o.resp.error == NULL);
  KT_CHECK_INT(o.resp.status, 400);
  KT_CHECK_STR(o.resp.request_id, "s3-style");
  KT_CHECK_STR(o.resp.error_type, "ValidationException:http://internal/");
  one_fini(&o);
  kn_loop_destroy(loop);
}

/* 200 requests at once from the I/O thread share a few kept-alive
 * connections. */
struct fan {
  kn_loop_t *loop;
  char url[128];
  int started, done, ok;
  pthread_mutex_t lock;
  pthread_cond_t cond;
};

static void fan_cb(void *opaque, kn_http_resp_t *resp) {
  struct fan *f = opaque;
  if (!resp->error && resp->status == 200 && resp->body.len == 3) f->ok++;
  if (++f->done == f->started) {
    pthread_mutex_lock(&f->lock);
    pthread_cond_signal(&f->cond);
    pthread_mutex_unlock(&f->lock);
  }
}

static void fan_start(void *arg) {
  struct fan *f = arg;
  for (int i = 0; i < 200; i++) {
    kn_http_req_t req = {.method = "POST",
                         .url = f->url,
                         .body = "abc",
                         .body_len = 3,
                         .timeout_ms = 10000};
    kn_error_t *err = NULL;
    if (kn_http_start(f->loop, &req, fan_cb, f, &err)) f->started++;
    kn_error_destroy(err);
  }
}

static void test_fan_out(void) {
  kn_loop_t *loop = new_loop(NULL);
  struct fan f = {.loop = loop};
  pthread_mutex_init(&f.lock, NULL);
  pthread_cond_init(&f.cond, NULL);
  snprintf(f.url, sizeof(f.url), "http://127.0.0.1:%d/echo", srv.port);
  int conns_before = atomic_load(&srv.connections);
  pthread_mutex_lock(&f.lock);
  kn_loop_call(loop, fan_start, &f);
  while (f.done < f.started) pthread_cond_wait(&f.cond, &f.lock);
  pthread_mutex_unlock(&f.lock);
  KT_CHECK_INT(f.started, 200);
  KT_CHECK_INT(f.ok, 200);
  int conns = atomic_load(&srv.connections) - conns_before;
  KT_CHECK_MSG(conns <= 8, "%d connections", conns);
  /* A second wave reuses the cached connections (cache size 8). */
  f.started = f.done = f.ok = 0;
  conns_before = atomic_load(&srv.connections);
  pthread_mutex_lock(&f.lock);
  kn_loop_call(loop, fan_start, &f);
  while (f.done < f.started) pthread_cond_wait(&f.cond, &f.lock);
  pthread_mutex_unlock(&f.lock);
  KT_CHECK_INT(f.ok, 200);
  pthread_mutex_destroy(&f.lock);
  pthread_cond_destroy(&f.cond);
  kn_loop_destroy(loop);
}

static void test_sequential_reuse(void) {
  kn_loop_t *loop = new_loop(NULL);
  int before = atomic_load(&srv.connections);
  for (int i = 0; i < 50; i++) {
    struct one o;
    one_init(&o, loop, "POST", "/echo");
    o.req.body = "x";
    o.req.body_len = 1;
    one_run(&o);
    KT_CHECK_INT(o.resp.status, 200);
    one_fini(&o);
  }
  KT_CHECK_INT(atomic_load(&srv.connections) - before, 1);
  kn_loop_destroy(loop);
}

static void test_stream_pause_resume(void) {
  kn_loop_t *loop = new_loop(NULL);
  struct one o;
  one_init(&o, loop, "GET", "/stream");
  o.req.on_data = one_data;
  o.pause_every = 8192;
  one_run(&o);
  KT_CHECK(o.resp.error == NULL);
  KT_CHECK_INT(o.resp.status, 200);
  KT_CHECK_INT(o.streamed, 64 * 1024);
  KT_CHECK_INT(o.resp.body.len, 0); /* streamed, not collected */
  KT_CHECK(o.pauses >= 4);
  one_fini(&o);

  /* A non-2xx answer is collected even with on_data. */
  one_init(&o, loop, "GET", "/missing");
  o.req.on_data = one_data;
  one_run(&o);
  KT_CHECK_INT(o.resp.status, 404);
  KT_CHECK_INT(o.streamed, 0);
  KT_CHECK_STR(o.resp.body.p, "no such path");
  one_fini(&o);
  kn_loop_destroy(loop);
}

static int abort_data(void *opaque, const char *p, size_t n) {
  (void)opaque;
  (void)p;
  (void)n;
  return -1;
}

static void test_stream_abort(void) {
  kn_loop_t *loop = new_loop(NULL);
  struct one o;
  one_init(&o, loop, "GET", "/stream");
  o.req.on_data = abort_data;
  one_run(&o);
  KT_CHECK_INT(kn_error_code(o.resp.error), KN_ERR__FAIL);
  one_fini(&o);
  kn_loop_destroy(loop);
}

static void test_big_body(void) {
  /* A raw server that answers with a 16 MB body in many writes. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (struct sockaddr *)&sa, sizeof(sa));
  listen(fd, 4);
  socklen_t sl = sizeof(sa);
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  int port = ntohs(sa.sin_port);

  kn_loop_t *loop = new_loop(NULL);
  KT_REQUIRE(loop != NULL, close(fd));
  for (int chunked = 0; chunked < 2; chunked++) {
    struct one o;
    one_init(&o, loop, "GET", "/big");
    snprintf(o.url, sizeof(o.url), "http://127.0.0.1:%d/big", port);
    kn_loop_call(loop, one_start, &o);
    int c = one_accept(&o, fd);
    KT_REQUIRE(c >= 0, one_fini(&o), kn_loop_destroy(loop), close(fd));
    char buf[4096];
    KT_CHECK(recv(c, buf, sizeof(buf), 0) > 0);
    const char *head =
        chunked ? "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
                : "HTTP/1.1 200 OK\r\nContent-Length: 16777216\r\n\r\n";
    send(c, head, strlen(head), MSG_NOSIGNAL);
    for (size_t off = 0; off < BIG; off += 1 << 20)
      send(c, big_body + off, 1 << 20, MSG_NOSIGNAL);
    close(c);
    one_wait(&o);
    KT_CHECK(o.resp.error == NULL);
    KT_CHECK_INT(o.resp.body.len, BIG);
    KT_CHECK(o.resp.body.p && o.resp.body.len == BIG &&
             memcmp(o.resp.body.p, big_body, BIG) == 0);
    one_fini(&o);
  }
  kn_loop_destroy(loop);
  close(fd);
}

/* Bodies past opts.max_response_bytes fail the transfer: at once when
 * Content-Length says so, else when the bytes pass it; a lying length
 * reserves nothing past the cap. */
static void test_body_cap(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (struct sockaddr *)&sa, sizeof(sa));
  listen(fd, 4);
  socklen_t sl = sizeof(sa);
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  int port = ntohs(sa.sin_port);
  static const struct {
    size_t cap;
    const char *head;
    size_t send; /* body bytes sent */
    int ok;
  } cases[] = {
      {1 << 20, "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n", 1 << 20,
       1},
      {1 << 20, "HTTP/1.1 200 OK\r\nContent-Length: 1048577\r\n\r\n", 1 << 20,
       0},
      {1 << 20, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", 1 << 20, 1},
      {1 << 20, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", 4 << 20, 0},
      {1 << 20, "HTTP/1.1 500 Oops\r\nConnection: close\r\n\r\n", 4 << 20, 0},
      {0, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
       0, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kn_http_opts_t opts = {.verify_tls = 1,
                           .connect_timeout_ms = 2000,
                           .max_connections = 8,
                           .max_response_bytes = cases[i].cap};
    kn_error_t *err = NULL;
    kn_loop_t *loop = kn_loop_new(&opts, &err);
    kn_error_destroy(err);
    KT_REQUIRE(loop != NULL, close(fd));
    struct one o;
    one_init(&o, loop, "GET", "/capped");
    snprintf(o.url, sizeof(o.url), "http://127.0.0.1:%d/capped", port);
    kn_loop_call(loop, one_start, &o);
    int c = one_accept(&o, fd);
    KT_REQUIRE(c >= 0, one_fini(&o), kn_loop_destroy(loop), close(fd));
    char buf[4096];
    KT_CHECK(recv(c, buf, sizeof(buf), 0) > 0);
    send(c, cases[i].head, strlen(cases[i].head), MSG_NOSIGNAL);
    for (size_t off = 0; off < cases[i].send; off += 1 << 20)
      if (send(c, big_body + off, 1 << 20, MSG_NOSIGNAL) < 0) break;
    close(c);
    one_wait(&o);
    if (cases[i].ok) {
      KT_CHECK_MSG(o.resp.error == NULL, "case %zu: %s", i,
                   kn_error_string(o.resp.error));
      KT_CHECK_INT(o.resp.body.len, cases[i].send);
    } else {
      KT_CHECK_INT(kn_error_code(o.resp.error), KN_ERR__BAD_MSG);
      KT_CHECK_MSG(
          strstr(kn_error_string(o.resp.error), "response body larger than"),
          "case %zu: %s", i, kn_error_string(o.resp.error));
      KT_CHECK(o.resp.body.cap <=
               (cases[i].cap ? cases[i].cap : KN_HTTP_MAX_RESPONSE_DEFAULT));
    }
    one_fini(&o);
    kn_loop_destroy(loop);
  }
  close(fd);
}

static void test_transport_errors(void) {
  kn_loop_t *loop = new_loop(NULL);
  struct one o;
  /* Nothing listens: a transport error naming the URL, at once. */
  int64_t t0 = kn_mono_ms();
  one_init(&o, loop, "POST", "/");
  snprintf(o.url, sizeof(o.url), "http://127.0.0.1:%d/?X-Amz-Signature=secret",
           kt_closed_port());
  one_run(&o);
  KT_CHECK_INT(kn_error_code(o.resp.error), KN_ERR__TRANSPORT);
  KT_CHECK(kn_error_is_retriable(o.resp.error));
  KT_CHECK(strstr(kn_error_string(o.resp.error), "127.0.0.1") != NULL);
  KT_CHECK(strstr(kn_error_string(o.resp.error), "secret") == NULL);
  KT_CHECK_INT(o.resp.status, 0);
  KT_CHECK(kn_mono_ms() - t0 < KT_PROMPT_MS);
  one_fini(&o);

  /* The server never answers: timed out after the request timeout. */
  t0 = kn_mono_ms();
  one_init(&o, loop, "POST", "/hang");
  o.req.timeout_ms = 300;
  one_run(&o);
  int64_t took = kn_mono_ms() - t0;
  KT_CHECK_INT(kn_error_code(o.resp.error), KN_ERR__TIMED_OUT);
  KT_CHECK_MSG(took >= 290 && took < KT_PROMPT_MS, "took %lld ms",
               (long long)took);
  one_fini(&o);

  /* The server drops the connection unanswered. */
  one_init(&o, loop, "POST", "/close");
  one_run(&o);
  KT_CHECK_INT(kn_error_code(o.resp.error), KN_ERR__TRANSPORT);
  KT_CHECK(strstr(kn_error_string(o.resp.error), "/close") != NULL);
  one_fini(&o);

  /* A malformed URL is a configuration error, not worth retrying. */
  one_init(&o, loop, "POST", "/");
  snprintf(o.url, sizeof(o.url), "ftp://127.0.0.1:1/");
  one_run(&o);
  KT_CHECK(o.resp.error != NULL || o.start_err != KN_ERR_NO_ERROR);
  if (o.resp.error) KT_CHECK(!kn_error_is_retriable(o.resp.error));
  one_fini(&o);
  kn_loop_destroy(loop);
}

/* Cancelled transfers never call back; destroy drops running ones. */
static atomic_int cancelled_called;
static void never_cb(void *opaque, kn_http_resp_t *resp) {
  (void)opaque;
  (void)resp;
  atomic_fetch_add(&cancelled_called, 1);
}

struct cancel_st {
  kn_loop_t *loop;
  char url[128];
  kn_http_xfer_t *x[10];
};

static void start_hangers(void *arg) {
  struct cancel_st *c = arg;
  for (int i = 0; i < 10; i++) {
    kn_http_req_t req = {.method = "POST",
                         .url = c->url,
                         .body = "abc",
                         .body_len = 3,
                         .timeout_ms = 60000};
    kn_error_t *err = NULL;
    c->x[i] = kn_http_start(c->loop, &req, never_cb, NULL, &err);
    kn_error_destroy(err);
  }
  kn_http_cancel(c->x[0]); /* before it even started */
}

static void cancel_some(void *arg) {
  struct cancel_st *c = arg;
  for (int i = 1; i < 5; i++) kn_http_cancel(c->x[i]);
}

static void noop(void *arg) { (void)arg; }

/* Waits (for at most KT_PROMPT_MS) until the server has had n requests. */
static void wait_requests(int n) {
  int64_t end = kn_mono_ms() + KT_PROMPT_MS;
  while (atomic_load(&srv.requests) < n && kn_mono_ms() < end) kn_sleep_ms(1);
  KT_CHECK_MSG(atomic_load(&srv.requests) >= n, "%d < %d",
               atomic_load(&srv.requests), n);
}

static void test_cancel_and_destroy(void) {
  kn_loop_t *loop = new_loop(NULL);
  struct cancel_st c = {.loop = loop};
  snprintf(c.url, sizeof(c.url), "http://127.0.0.1:%d/hang", srv.port);
  int seen = atomic_load(&srv.requests);
  kn_loop_call(loop, start_hangers, &c);
  /* A request is on the wire when four are cancelled (the rest may wait
   * for its connection, to learn whether it can carry them too). */
  wait_requests(seen + 1);
  kn_loop_call(loop, cancel_some, &c);
  kn_loop_call(loop, noop, NULL); /* a turn of the loop after the cancels */
  kn_loop_destroy(loop);          /* five still in flight */
  KT_CHECK_INT(atomic_load(&cancelled_called), 0);
}

/* kn_http_perform_blocking from a plain thread and from the I/O thread. */
struct blk {
  char url[128];
  kn_err_t rc;
  int status;
  char body[64];
};

static void do_blocking(void *arg) {
  struct blk *b = arg;
  kn_http_opts_t o = {.verify_tls = 1, .connect_timeout_ms = 1000};
  const char *hdrs[] = {"X-Test: 1", NULL};
  kn_http_req_t req = {.method = "PUT",
                       .url = b->url,
                       .headers = hdrs,
                       .body = "blocking",
                       .body_len = 8,
                       .timeout_ms = 2000};
  kn_http_resp_t resp;
  b->rc = kn_http_perform_blocking(&o, &req, &resp);
  b->status = resp.status;
  snprintf(b->body, sizeof(b->body), "%s", resp.body.p ? resp.body.p : "");
  kn_http_resp_clear(&resp);
}

static void test_blocking(void) {
  struct blk b = {0};
  snprintf(b.url, sizeof(b.url), "http://127.0.0.1:%d/echo", srv.port);
  do_blocking(&b);
  KT_CHECK_INT(b.rc, KN_ERR_NO_ERROR);
  KT_CHECK_INT(b.status, 200);
  KT_CHECK_STR(b.body, "blocking");

  kn_loop_t *loop = new_loop(NULL);
  memset(b.body, 0, sizeof(b.body));
  kn_loop_call(loop, do_blocking, &b);
  KT_CHECK_STR(b.body, "blocking");
  kn_loop_destroy(loop);

  snprintf(b.url, sizeof(b.url), "http://127.0.0.1:%d/", kt_closed_port());
  do_blocking(&b);
  KT_CHECK_INT(b.rc, KN_ERR__TRANSPORT);
  snprintf(b.url, sizeof(b.url), "http://127.0.0.1:%d/hang", srv.port);
  int64_t t0 = kn_mono_ms();
  do_blocking(&b);
  KT_CHECK_INT(b.rc, KN_ERR__TIMED_OUT);
  KT_CHECK(kn_mono_ms() - t0 < KT_PROMPT_MS);
}

static void test_redact(void) {
  char *s = kn_http_redact_header(
      "Authorization: AWS4-HMAC-SHA256 Credential=AKID/x");
  KT_CHECK_STR(s, "Authorization: <redacted>");
  free(s);
  s = kn_http_redact_header("x-amz-security-token:abc");
  KT_CHECK_STR(s, "x-amz-security-token:<redacted>");
  free(s);
  s = kn_http_redact_header("X-Aws-Ec2-Metadata-Token: t\r\n");
  KT_CHECK_STR(s, "X-Aws-Ec2-Metadata-Token: <redacted>\r\n");
  free(s);
  s = kn_http_redact_header("X-Amz-Date: 20240101T000000Z");
  KT_CHECK_STR(s, "X-Amz-Date: 20240101T000000Z");
  free(s);
  s = kn_http_redact_header("no colon");
  KT_CHECK_STR(s, "no colon");
  free(s);
  KT_CHECK(kn_http_redact_header(NULL) == NULL);
}

/* Debug logs name method, URL, status; never a secret header. */
static atomic_int log_lines, log_leaks;
static void log_cb(void *opaque, int level, const char *fac, const char *msg) {
  (void)opaque;
  (void)level;
  (void)fac;
  atomic_fetch_add(&log_lines, 1);
  if (strstr(msg, "SECRET")) atomic_fetch_add(&log_leaks, 1);
}

static void test_debug_log(void) {
  kn_logger_t lg = {.level = KN_LOG_DEBUG, .cb = log_cb};
  kn_loop_t *loop = new_loop(&lg);
  struct one o;
  one_init(&o, loop, "POST", "/echo");
  const char *hdrs[] = {"Authorization: SECRET", "X-Amz-Security-Token: SECRET",
                        NULL};
  o.req.headers = hdrs;
  one_run(&o);
  KT_CHECK_MSG(o.resp.status == 200, "%d %s", o.resp.status,
               o.resp.error ? kn_error_string(o.resp.error) : "");
  one_fini(&o);
  kn_loop_destroy(loop);
  KT_CHECK(atomic_load(&log_lines) >= 1);
  KT_CHECK_INT(atomic_load(&log_leaks), 0);
}

int main(void) {
  big_body = malloc(BIG);
  for (size_t i = 0; i < BIG; i++) big_body[i] = (char)('a' + i % 26);
  if (kt_httpd_start(&srv, handler, NULL)) {
    fprintf(stderr, "cannot start the test server\n");
    return 1;
  }
  KT_RUN(test_post_echo);
  KT_RUN(test_fan_out);
  KT_RUN(test_sequential_reuse);
  KT_RUN(test_stream_pause_resume);
  KT_RUN(test_stream_abort);
  KT_RUN(test_big_body);
  KT_RUN(test_body_cap);
  KT_RUN(test_transport_errors);
  KT_RUN(test_cancel_and_destroy);
  KT_RUN(test_blocking);
  KT_RUN(test_redact);
  KT_RUN(test_debug_log);
  kt_httpd_stop(&srv);
  free(big_body);
  return KT_DONE();
}
