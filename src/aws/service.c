/* AWS JSON-protocol calls: build, sign, send on the loop, retry. */
#include "aws/service.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "aws/retry.h"
#include "aws/sigv4.h"
#include "core/error.h"
#include "kn/version.h"
#include "util/clock.h"
#include "util/crypto.h"
#include "util/hex.h"
#include "util/secure.h"
#include "util/str.h"

const kn_svc_def_t kn_svc_kinesis = {"kinesis", "Kinesis_20131202",
                                     "application/x-amz-json-1.1"};
const kn_svc_def_t kn_svc_dynamodb = {"dynamodb", "DynamoDB_20120810",
                                      "application/x-amz-json-1.0"};

/* Throttling asks for more patience than other failures. */
#define KN_THROTTLE_BASE_FACTOR 5

struct kn_svc {
  kn_loop_t *loop;
  kn_creds_provider_t *creds;
  const kn_aws_settings_t *settings;
  const kn_svc_def_t *def;
  const kn_logger_t *log;
  char *url;     /* scheme://authority/path */
  char *host;    /* authority, for Host */
  char *path;    /* for signing */
  char *ua_line; /* "User-Agent: ..." */
  char *ct_line; /* "Content-Type: ..." */
  kn_retry_policy_t policy;
  kn_retry_budget_t budget; /* I/O thread only */
};

struct kn_call {
  kn_svc_t *svc;
  char *action;
  kn_buf_t body;
  char payload_hash[2 * KN_SHA256_LEN + 1];
  int max_attempts;
  long timeout_ms;
  int attempts;
  int last_status;
  kn_call_cb *cb;
  void *opaque;
  int (*on_data)(void *opaque, const char *p, size_t n);
  kn_http_xfer_t *xfer;  /* the attempt in flight */
  kn_timer_t *timer;     /* the wait before the next attempt */
  kn_error_t *last_err;  /* while waiting: why the last attempt failed */
  uint64_t creds_ticket; /* while waiting for credentials being fetched */
  int paused;
};

/* How often a call with no usable credentials looks again while the
 * provider's thread fetches them: only the first calls of a client (or
 * calls after the credentials ran out) ever wait. */
#define KN_CREDS_POLL_MS 20

/* Splits an endpoint URL into what is sent and signed.  Only what the
 * AWS SDKs accept: http or https, a host with an optional port, an
 * optional path, nothing else. */
static kn_error_t *parse_endpoint(kn_svc_t *svc, const char *endpoint) {
  const char *p = endpoint;
  size_t scheme_len;
  if (strncasecmp(p, "https://", 8) == 0)
    scheme_len = 8;
  else if (strncasecmp(p, "http://", 7) == 0)
    scheme_len = 7;
  else
    return kn_error_new(KN_ERR__CONF,
                        "endpoint \"%s\": not an http:// or https:// URL",
                        endpoint);
  const char *auth = p + scheme_len;
  size_t auth_len = strcspn(auth, "/?#");
  const char *rest = auth + auth_len;
  if (auth_len == 0 || memchr(auth, '@', auth_len) ||
      strcspn(auth, " \t\r\n") < auth_len)
    return kn_error_new(KN_ERR__CONF, "endpoint \"%s\": bad host", endpoint);
  if (strpbrk(rest, "?# \t\r\n"))
    return kn_error_new(
        KN_ERR__CONF,
        "endpoint \"%s\": a query, fragment or space is not allowed", endpoint);
  svc->host = kn_strndup(auth, auth_len);
  svc->path = strdup(*rest ? rest : "/");
  svc->url =
      kn_asprintf("%.*s%s", (int)(rest - endpoint), endpoint, *rest ? "" : "/");
  if (!svc->host || !svc->path || !svc->url)
    return kn_error_new(KN_ERR__NOMEM, "out of memory");
  return NULL;
}

kn_svc_t *kn_svc_new(kn_loop_t *loop, kn_creds_provider_t *creds,
                     const kn_aws_settings_t *settings, const kn_svc_def_t *def,
                     const char *endpoint, kn_error_t **errp) {
  *errp = NULL;
  if (!loop || !settings || !def || !endpoint || !*endpoint) {
    *errp = kn_error_new(KN_ERR__INVALID_ARG, "%s: no endpoint",
                         def ? def->signing_name : "service");
    return NULL;
  }
  if (!settings->region || !*settings->region) {
    *errp = kn_error_new(KN_ERR__CONF, "%s: no region to sign requests for",
                         def->signing_name);
    return NULL;
  }
  kn_svc_t *svc = calloc(1, sizeof(*svc));
  if (!svc) {
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    return NULL;
  }
  svc->loop = loop;
  svc->creds = creds;
  svc->settings = settings;
  svc->def = def;
  svc->log = kn_loop_logger(loop);
  kn_error_t *err = parse_endpoint(svc, endpoint);
  if (!err) {
    const char *ua = settings->user_agent && *settings->user_agent
                         ? settings->user_agent
                         : "libkinesis/" KN_VERSION_STR;
    svc->ua_line = kn_asprintf("User-Agent: %s", ua);
    svc->ct_line = kn_asprintf("Content-Type: %s", def->content_type);
    if (!svc->ua_line || !svc->ct_line)
      err = kn_error_new(KN_ERR__NOMEM, "out of memory");
  }
  if (err) {
    *errp = err;
    kn_svc_destroy(svc);
    return NULL;
  }
  kn_retry_policy_t *pol = &svc->policy;
  pol->max_attempts =
      settings->retry_max_attempts > 0 ? settings->retry_max_attempts : 1;
  pol->base_ms =
      settings->retry_backoff_ms > 0 ? settings->retry_backoff_ms : 100;
  pol->max_ms = settings->retry_backoff_max_ms > 0
                    ? settings->retry_backoff_max_ms
                    : 20000;
  pol->throttle_base_ms = pol->base_ms * KN_THROTTLE_BASE_FACTOR;
  if (pol->throttle_base_ms > pol->max_ms) pol->throttle_base_ms = pol->max_ms;
  kn_retry_budget_init(&svc->budget, settings->retry_budget);
  return svc;
}

void kn_svc_destroy(kn_svc_t *svc) {
  if (!svc) return;
  free(svc->url);
  free(svc->host);
  free(svc->path);
  free(svc->ua_line);
  free(svc->ct_line);
  free(svc);
}

kn_loop_t *kn_svc_loop(const kn_svc_t *svc) { return svc->loop; }

static void call_free(kn_call_t *c) {
  kn_timer_free(c->timer);
  kn_buf_free(&c->body);
  kn_error_destroy(c->last_err);
  free(c->action);
  free(c);
}

/* Reports the outcome and frees the call. */
static void finish(kn_call_t *c, kn_error_t *err, kn_buf_t *body) {
  kn_call_result_t res;
  memset(&res, 0, sizeof(res));
  res.err = err;
  if (body) {
    res.body = *body;
    *body = (kn_buf_t)KN_BUF_INIT;
  }
  res.request = c->body;
  c->body = (kn_buf_t)KN_BUF_INIT;
  res.attempts = c->attempts;
  res.http_status = c->last_status;
  kn_call_cb *cb = c->cb;
  void *opaque = c->opaque;
  call_free(c);
  cb(opaque, &res);
  kn_buf_free(&res.body);
  kn_buf_free(&res.request);
}

static void on_response(void *opaque, kn_http_resp_t *resp);
static int on_stream_data(void *opaque, const char *p, size_t n);
static void retry_now(void *arg);

/* Signs and starts one attempt. */
static kn_error_t *send_attempt(kn_call_t *c) {
  kn_svc_t *svc = c->svc;
  kn_creds_t cr;
  memset(&cr, 0, sizeof(cr));
  /* Never a fetch on this thread: every transfer of the loop would wait. */
  kn_error_t *err = kn_creds_get_nowait(svc->creds, &cr, &c->creds_ticket);
  if (err)
    return kn_error_prefix(err, "%s %s", svc->def->signing_name, c->action);
  if (!cr.access_key_id) {
    if (!c->timer) c->timer = kn_timer_new(svc->loop, retry_now, c);
    if (!c->timer) return kn_error_new(KN_ERR__NOMEM, "out of memory");
    kn_timer_start(c->timer, KN_CREDS_POLL_MS);
    return NULL;
  }

  char target[192];
  snprintf(target, sizeof(target), "%s.%s", svc->def->target_prefix, c->action);
  kn_sigv4_header_t sh[] = {{"Host", svc->host},
                            {"Content-Type", svc->def->content_type},
                            {"X-Amz-Target", target}};
  kn_sigv4_request_t sreq = {.method = "POST",
                             .path = svc->path,
                             .headers = sh,
                             .n_headers = 3,
                             .payload = c->body.p,
                             .payload_len = c->body.len,
                             .payload_hash = c->payload_hash};
  kn_sigv4_creds_t sc = {cr.access_key_id, cr.secret_access_key,
                         cr.session_token};
  kn_sigv4_result_t sig;
  memset(&sig, 0, sizeof(sig));
  char *lines[4] = {NULL, NULL, NULL, NULL};
  if (kn_sigv4_sign(&sreq, &sc, svc->settings->region, svc->def->signing_name,
                    (long long)(kn_wall_ms() / 1000), &sig)) {
    err = kn_error_new(KN_ERR__CREDENTIALS,
                       "%s %s: cannot sign the request (credentials from %s)",
                       svc->def->signing_name, c->action,
                       cr.source ? cr.source : "?");
    goto out;
  }
  lines[0] = kn_asprintf("Host: %s", svc->host);
  lines[1] = kn_asprintf("X-Amz-Target: %s", target);
  lines[2] = kn_asprintf("Authorization: %s", sig.authorization);
  if (cr.session_token && *cr.session_token)
    lines[3] = kn_asprintf("X-Amz-Security-Token: %s", cr.session_token);
  if (!lines[0] || !lines[1] || !lines[2] ||
      (cr.session_token && *cr.session_token && !lines[3])) {
    err = kn_error_new(KN_ERR__NOMEM, "out of memory");
    goto out;
  }
  char date_line[40];
  snprintf(date_line, sizeof(date_line), "X-Amz-Date: %s", sig.amz_date);
  const char *headers[] = {lines[0],     svc->ct_line, lines[1], date_line,
                           svc->ua_line, lines[2],     lines[3], NULL};
  kn_http_req_t req = {.method = "POST",
                       .url = svc->url,
                       .headers = headers,
                       .body = c->body.p,
                       .body_len = c->body.len,
                       .body_borrow = 1,
                       .timeout_ms = c->timeout_ms};
  if (c->on_data) req.on_data = on_stream_data;
  c->attempts++;
  c->xfer = kn_http_start(svc->loop, &req, on_response, c, &err);
  if (!c->xfer)
    c->attempts--;
  else if (c->paused)
    kn_http_pause(c->xfer);

out:
  for (int i = 0; i < 4; i++)
    kn_secure_free_str(lines[i]); /* signature, token */
  kn_sigv4_result_clear(&sig);
  kn_creds_clear(&cr);
  return err;
}

static void retry_now(void *arg) {
  kn_call_t *c = arg;
  kn_error_t *err = send_attempt(c);
  if (err) {
    kn_error_destroy(c->last_err);
    c->last_err = NULL;
    finish(c, err, NULL);
    return;
  }
  kn_error_destroy(c->last_err);
  c->last_err = NULL;
}

/* After a failed attempt: wait and try again, or give up. */
static void failed(kn_call_t *c, kn_error_t *err) {
  kn_svc_t *svc = c->svc;
  int64_t delay = 0;
  kn_retry_verdict_t v = KN_RETRY_FATAL;
  if (err && !c->on_data) {
    kn_retry_policy_t pol = svc->policy;
    pol.max_attempts = c->max_attempts;
    v = kn_retry_decide(&pol, &svc->budget, err, c->attempts, &delay);
  }
  if (v == KN_RETRY) {
    if (!c->timer) c->timer = kn_timer_new(svc->loop, retry_now, c);
    if (c->timer) {
      kn_dbg(svc->log, "retry",
             "%s %s: attempt %d failed, retrying in %lld ms: %s",
             svc->def->signing_name, c->action, c->attempts, (long long)delay,
             kn_error_string(err));
      c->last_err = err;
      kn_timer_start(c->timer, delay);
      return;
    }
  }
  if (err && c->attempts > 1)
    err = kn_error_prefix(
        err, "%s %s failed after %d attempts%s", svc->def->signing_name,
        c->action, c->attempts,
        v == KN_RETRY_NO_BUDGET ? " (retry budget exhausted)" : "");
  else if (err)
    err = kn_error_prefix(err, "%s %s%s", svc->def->signing_name, c->action,
                          v == KN_RETRY_NO_BUDGET
                              ? " (retry budget exhausted, not retried)"
                              : "");
  finish(c, err, NULL);
}

static void on_response(void *opaque, kn_http_resp_t *resp) {
  kn_call_t *c = opaque;
  c->xfer = NULL;
  c->last_status = resp->status;
  kn_error_t *err = resp->error;
  resp->error = NULL;
  if (!err && resp->status / 100 == 2) {
    kn_retry_budget_success(&c->svc->budget);
    finish(c, NULL, &resp->body);
    return;
  }
  if (!err && resp->status == 0) {
    finish(c, NULL, NULL); /* the out-of-memory case of kn_http_resp_t */
    return;
  }
  if (!err) {
    err = kn_svc_decode_error(resp->status, resp->body.p, resp->body.len,
                              resp->error_type, resp->request_id);
    if (!err) {
      finish(c, NULL, NULL);
      return;
    }
  }
  failed(c, err);
}

static int on_stream_data(void *opaque, const char *p, size_t n) {
  kn_call_t *c = opaque;
  return c->on_data(c->opaque, p, n);
}

static kn_call_t *call_new(kn_svc_t *svc, const char *action, kn_buf_t *body,
                           kn_call_cb *cb, void *opaque, kn_error_t **errp) {
  kn_call_t *c = calloc(1, sizeof(*c));
  if (!c || !(c->action = strdup(action))) {
    free(c);
    if (body) kn_buf_free(body);
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    return NULL;
  }
  c->svc = svc;
  c->cb = cb;
  c->opaque = opaque;
  if (body) {
    c->body = *body;
    *body = (kn_buf_t)KN_BUF_INIT;
  }
  uint8_t h[KN_SHA256_LEN];
  kn_sha256(c->body.p ? c->body.p : "", c->body.len, h);
  kn_hex_encode(c->payload_hash, h, sizeof(h));
  return c;
}

static kn_error_t *off_thread(const kn_svc_t *svc, const char *action,
                              kn_buf_t *body) {
  if (kn_loop_on_thread(svc->loop)) return NULL;
  if (body) kn_buf_free(body);
  return kn_error_new(KN_ERR__STATE,
                      "%s %s: asynchronous calls start on the I/O thread",
                      svc->def->signing_name, action);
}

kn_call_t *kn_svc_call(kn_svc_t *svc, const char *action, kn_buf_t *body,
                       const kn_call_opts_t *opts, kn_call_cb *cb, void *opaque,
                       kn_error_t **errp) {
  if ((*errp = off_thread(svc, action, body)) != NULL) return NULL;
  kn_call_t *c = call_new(svc, action, body, cb, opaque, errp);
  if (!c) return NULL;
  c->max_attempts = opts && opts->max_attempts > 0 ? opts->max_attempts
                                                   : svc->policy.max_attempts;
  c->timeout_ms = opts && opts->timeout_ms > 0
                      ? opts->timeout_ms
                      : svc->settings->request_timeout_ms;
  if ((*errp = send_attempt(c)) != NULL) {
    call_free(c);
    return NULL;
  }
  return c;
}

kn_call_t *kn_svc_stream(kn_svc_t *svc, const char *action, kn_buf_t *body,
                         int (*on_data)(void *opaque, const char *p, size_t n),
                         kn_call_cb *done, void *opaque, kn_error_t **errp) {
  if ((*errp = off_thread(svc, action, body)) != NULL) return NULL;
  kn_call_t *c = call_new(svc, action, body, done, opaque, errp);
  if (!c) return NULL;
  c->max_attempts = 1;
  c->timeout_ms = 0; /* event streams last minutes */
  c->on_data = on_data;
  if ((*errp = send_attempt(c)) != NULL) {
    call_free(c);
    return NULL;
  }
  return c;
}

void kn_call_cancel(kn_call_t *c) {
  if (!c) return;
  kn_http_cancel(c->xfer);
  call_free(c);
}

int kn_call_waiting(const kn_call_t *c) {
  return c->timer && kn_timer_armed(c->timer);
}

void kn_call_pause(kn_call_t *c) {
  if (!c) return;
  c->paused = 1;
  kn_http_pause(c->xfer);
}

void kn_call_resume(kn_call_t *c) {
  if (!c) return;
  c->paused = 0;
  kn_http_resume(c->xfer);
}

/* kn_svc_call_sync: the call runs on the loop, the caller waits. */
struct sync_call {
  kn_svc_t *svc;
  const char *action;
  kn_buf_t body;
  const kn_call_opts_t *opts;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
  kn_error_t *err;
  kn_buf_t out;
};

static void sync_signal(struct sync_call *s) {
  pthread_mutex_lock(&s->lock);
  s->done = 1;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock); /* s may be gone after this */
}

static void sync_done(void *opaque, kn_call_result_t *res) {
  struct sync_call *s = opaque;
  s->err = res->err;
  s->out = res->body;
  res->body = (kn_buf_t)KN_BUF_INIT;
  sync_signal(s);
}

static void sync_start(void *arg) {
  struct sync_call *s = arg;
  kn_error_t *err = NULL;
  if (!kn_svc_call(s->svc, s->action, &s->body, s->opts, sync_done, s, &err)) {
    s->err = err ? err : kn_error_new(KN_ERR__NOMEM, "out of memory");
    sync_signal(s);
  }
}

kn_error_t *kn_svc_call_sync(kn_svc_t *svc, const char *action,
                             const char *body, size_t body_len,
                             const kn_call_opts_t *opts, kn_buf_t *out) {
  *out = (kn_buf_t)KN_BUF_INIT;
  if (kn_loop_on_thread(svc->loop))
    return kn_error_new(
        KN_ERR__STATE,
        "%s %s: a blocking call on the I/O thread would never end",
        svc->def->signing_name, action);
  struct sync_call s;
  memset(&s, 0, sizeof(s));
  s.svc = svc;
  s.action = action;
  s.opts = opts;
  if (body_len && kn_buf_append(&s.body, body, body_len))
    return kn_error_new(KN_ERR__NOMEM, "out of memory");
  pthread_mutex_init(&s.lock, NULL);
  pthread_cond_init(&s.cond, NULL);
  kn_error_t *err = NULL;
  if (kn_loop_post(svc->loop, sync_start, &s) == 0) {
    pthread_mutex_lock(&s.lock);
    while (!s.done) pthread_cond_wait(&s.cond, &s.lock);
    pthread_mutex_unlock(&s.lock);
    err = s.err;
    *out = s.out;
  } else {
    err = kn_error_new(KN_ERR__DESTROY, "%s %s: the client is closing",
                       svc->def->signing_name, action);
  }
  kn_buf_free(&s.body);
  pthread_cond_destroy(&s.cond);
  pthread_mutex_destroy(&s.lock);
  return err;
}
