/* One HTTP exchange on a curl easy handle: options, response parsing and
 * error mapping, shared by the loop's transfers and the blocking call. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "aws/http_int.h"
#include "aws/redact.h"
#include "core/error.h"
#include "util/clock.h"
#include "util/secure.h"
#include "util/str.h"

/* The most a response body may hold (opts->max_response_bytes). */
static size_t body_cap(const struct kn_http_xfer *x) {
  return x->opts && x->opts->max_response_bytes ? x->opts->max_response_bytes
                                                : KN_HTTP_MAX_RESPONSE_DEFAULT;
}

/* curl's receive buffer (CURLOPT_BUFFERSIZE). */
#define KN_RECV_BUFFER (64L * 1024)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void) {
  curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int kn_curl_init_once(void) {
  pthread_once(&curl_once, curl_init);
  return curl_init_rc == CURLE_OK ? 0 : -1;
}

static void free_str(char **s) {
  free(*s);
  *s = NULL;
}

/* Keeps a header value in *dst (replacing an earlier one). */
static void keep_value(char **dst, const char *v, size_t n, kn_err_t *err) {
  char *c = kn_strndup(v, n);
  if (!c) {
    *err = KN_ERR__NOMEM;
    return;
  }
  free(*dst);
  *dst = c;
}

static int name_is(const char *p, size_t n, const char *name) {
  return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

static void on_status_line(struct kn_http_xfer *x, const char *p, size_t n) {
  /* "HTTP/1.1 200 OK" or "HTTP/2 200": a new header block starts (after
   * an interim 1xx one), so forget what the previous block said. */
  free_str(&x->resp.request_id);
  free_str(&x->resp.content_type);
  free_str(&x->resp.error_type);
  x->resp.http_version = n > 6 && p[5] == '2' ? 2 : 1;
  const char *sp = memchr(p, ' ', n);
  int status = 0;
  if (sp)
    for (const char *q = sp + 1; q < p + n && *q >= '0' && *q <= '9'; q++)
      status = status * 10 + (*q - '0');
  x->resp.status = status;
}

static void on_field(struct kn_http_xfer *x, const char *p, size_t n) {
  const char *colon = memchr(p, ':', n);
  if (!colon) return;
  size_t name_len = (size_t)(colon - p);
  const char *v = colon + 1, *end = p + n;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
  size_t vn = (size_t)(end - v);
  if (name_is(p, name_len, "x-amzn-RequestId") ||
      (name_is(p, name_len, "x-amz-request-id") && !x->resp.request_id))
    keep_value(&x->resp.request_id, v, vn, &x->local_err);
  else if (name_is(p, name_len, "Content-Type"))
    keep_value(&x->resp.content_type, v, vn, &x->local_err);
  else if (name_is(p, name_len, "x-amzn-ErrorType"))
    keep_value(&x->resp.error_type, v, vn, &x->local_err);
  else if (name_is(p, name_len, "Content-Length") &&
           (!x->on_data || x->resp.status / 100 != 2)) {
    /* The body is kept: refuse what would pass the cap at once, else
     * allocate it in one piece (the cap bounds what a lying header can
     * make us reserve). */
    size_t cap = body_cap(x);
    unsigned long long len = 0;
    for (const char *q = v; q < end && *q >= '0' && *q <= '9'; q++)
      len = len <= cap ? len * 10 + (unsigned)(*q - '0') : len;
    if (len > cap) {
      x->local_err = KN_ERR__BAD_MSG;
      return;
    }
    /* A failed reservation is not an error: the body may still fit. */
    if (len > x->resp.body.cap)
      (void)kn_buf_reserve(&x->resp.body, (size_t)len);
  }
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud) {
  struct kn_http_xfer *x = ud;
  size_t len = size * nmemb, n = len;
  if (x->cancelled || x->headers_done) return len; /* trailers are ignored */
  while (n && (p[n - 1] == '\r' || p[n - 1] == '\n')) n--;
  if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
    on_status_line(x, p, n);
  } else if (n > 0) {
    on_field(x, p, n);
  } else if (x->resp.status >= 200) {
    x->headers_done = 1;
    if (x->require_h2 && x->resp.http_version != 2) {
      x->local_err = KN_ERR__TRANSPORT;
      return 0;
    }
    x->streaming = x->on_data && x->resp.status / 100 == 2;
    if (x->on_headers) x->on_headers(x->opaque, x->resp.status);
  }
  return x->local_err ? 0 : len;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud) {
  struct kn_http_xfer *x = ud;
  size_t len = size * nmemb;
  if (x->cancelled) return len;
  if (x->streaming) {
    int r = x->on_data(x->opaque, p, len);
    if (x->cancelled) return len;
    if (r < 0) {
      x->local_err = KN_ERR__FAIL;
      return 0;
    }
    if (r == 1 && x->loop) {
      /* The bytes were consumed; pausing here (allowed from the handle's
       * own callback) makes curl hold whatever else it already read. */
      x->want_paused = x->paused = 1;
      curl_easy_pause(x->easy, CURLPAUSE_RECV);
    }
    return len;
  }
  if (len > body_cap(x) - x->resp.body.len) {
    x->local_err = KN_ERR__BAD_MSG;
    return 0;
  }
  if (kn_buf_append(&x->resp.body, p, len)) {
    x->local_err = KN_ERR__NOMEM;
    return 0;
  }
  return len;
}

static long http_version_opt(kn_http_version_t v, int tls) {
  switch (v) {
    case KN_HTTP_1_1:
      return CURL_HTTP_VERSION_1_1;
    case KN_HTTP_2_PRIOR:
      return CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    case KN_HTTP_2:
      /* Never the cleartext Upgrade dance: servers handle it poorly. */
      return tls ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1;
    case KN_HTTP_AUTO:
    default:
      return CURL_HTTP_VERSION_2TLS;
  }
}

#define SETOPT(opt, val)                    \
  do {                                      \
    bad_rc = curl_easy_setopt(h, opt, val); \
    if (bad_rc != CURLE_OK) {               \
      bad_name = #opt;                      \
      goto bad_opt;                         \
    }                                       \
  } while (0)

kn_error_t *kn_xfer_setup(struct kn_http_xfer *x, const kn_http_opts_t *opts,
                          const kn_http_req_t *req, int in_loop) {
  CURL *h = x->easy;
  const char *body = NULL;
  size_t body_len = 0;
  const char *bad_name = "";
  CURLcode bad_rc = CURLE_OK;

  x->opts = opts;
  if (req->body_take) {
    x->body = *req->body_take;
    *req->body_take = (kn_buf_t)KN_BUF_INIT;
    body = x->body.p;
    body_len = x->body.len;
  } else if (req->body_borrow || !in_loop) {
    body = req->body;
    body_len = req->body_len;
  } else if (req->body_len) {
    if (kn_buf_append(&x->body, req->body, req->body_len))
      return kn_error_new(KN_ERR__NOMEM,
                          "out of memory copying a request body");
    body = x->body.p;
    body_len = x->body.len;
  }
  if (!req->url || !*req->url)
    return kn_error_new(KN_ERR__INVALID_ARG, "HTTP request without a URL");
  x->method = strdup(req->method ? req->method : "GET");
  x->url = strdup(req->url);
  if (!x->method || !x->url)
    return kn_error_new(KN_ERR__NOMEM, "out of memory");
  for (const char *const *hd = req->headers; hd && *hd; hd++) {
    struct curl_slist *l = curl_slist_append(x->headers, *hd);
    if (!l) return kn_error_new(KN_ERR__NOMEM, "out of memory");
    x->headers = l;
  }
  int is_get = strcmp(x->method, "GET") == 0;
  int is_head = strcmp(x->method, "HEAD") == 0;
  int has_body = body_len || strcmp(x->method, "POST") == 0 ||
                 strcmp(x->method, "PUT") == 0;
  if (has_body) {
    /* curl would otherwise wait for "100 Continue" on bodies over 1 MB. */
    struct curl_slist *l = curl_slist_append(x->headers, "Expect:");
    if (!l) return kn_error_new(KN_ERR__NOMEM, "out of memory");
    x->headers = l;
  }
  x->on_data = req->on_data;
  x->on_headers = req->on_headers;
  int tls = strncasecmp(x->url, "https:", 6) == 0;
  x->require_h2 = opts->version == KN_HTTP_2 && tls;

  SETOPT(CURLOPT_URL, x->url);
  SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
  SETOPT(CURLOPT_NOSIGNAL, 1L);
  SETOPT(CURLOPT_ERRORBUFFER, x->errbuf);
  SETOPT(CURLOPT_PRIVATE, (void *)x);
  SETOPT(CURLOPT_HTTPHEADER, x->headers);
  SETOPT(CURLOPT_HEADERFUNCTION, on_header);
  SETOPT(CURLOPT_HEADERDATA, (void *)x);
  SETOPT(CURLOPT_WRITEFUNCTION, on_body);
  SETOPT(CURLOPT_WRITEDATA, (void *)x);
  SETOPT(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  /* Four times curl's default: a large response (GetRecords answers take
   * megabytes) then costs a quarter of the recv(2) calls, polls and write
   * callbacks.  curl 7.88 refuses the option on a handle that already has
   * its buffer (a reused handle), which keeps the size first set: not an
   * error. */
  (void)curl_easy_setopt(h, CURLOPT_BUFFERSIZE, KN_RECV_BUFFER);
  SETOPT(CURLOPT_HTTP_VERSION, http_version_opt(opts->version, tls));
  if (in_loop && opts->version != KN_HTTP_1_1)
    SETOPT(CURLOPT_PIPEWAIT, 1L); /* wait to multiplex, not a new connection */
  if (opts->connect_timeout_ms > 0)
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS, opts->connect_timeout_ms);
  if (req->timeout_ms > 0) SETOPT(CURLOPT_TIMEOUT_MS, req->timeout_ms);
  SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
  SETOPT(CURLOPT_TCP_KEEPIDLE, 30L);
  SETOPT(CURLOPT_TCP_KEEPINTVL, 15L);
  SETOPT(CURLOPT_SSL_VERIFYPEER, opts->verify_tls ? 1L : 0L);
  SETOPT(CURLOPT_SSL_VERIFYHOST, opts->verify_tls ? 2L : 0L);
  if (opts->ca_file && *opts->ca_file) SETOPT(CURLOPT_CAINFO, opts->ca_file);
  if (is_head) {
    SETOPT(CURLOPT_NOBODY, 1L);
  } else if (is_get && !has_body) {
    SETOPT(CURLOPT_HTTPGET, 1L);
  } else if (has_body) {
    SETOPT(CURLOPT_POST, 1L);
    SETOPT(CURLOPT_POSTFIELDS, body ? body : "");
    SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    if (strcmp(x->method, "POST") != 0)
      SETOPT(CURLOPT_CUSTOMREQUEST, x->method);
  } else {
    SETOPT(CURLOPT_CUSTOMREQUEST, x->method);
  }
  return NULL;

bad_opt:
  return kn_error_new(KN_ERR__FAIL, "libcurl rejected %s: %s", bad_name,
                      x->errbuf[0] ? x->errbuf : curl_easy_strerror(bad_rc));
}

/* The URL without its query string, which may carry a presigned
 * signature; the result points into buf or into url. */
static const char *url_for_log(const char *url, char *buf, size_t size) {
  size_t n = strcspn(url, "?#");
  if (url[n] == '\0') return url;
  snprintf(buf, size, "%.*s?...", (int)(n < size - 5 ? n : size - 5), url);
  return buf;
}

static kn_err_t code_of(CURLcode rc) {
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      return KN_ERR__TIMED_OUT;
    case CURLE_OUT_OF_MEMORY:
      return KN_ERR__NOMEM;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CRL_BADFILE:
      return KN_ERR__CONF;
    default:
      return KN_ERR__TRANSPORT;
  }
}

/* Failures that the same request would meet again. */
static int is_permanent(CURLcode rc) {
  return rc == CURLE_PEER_FAILED_VERIFICATION ||
         rc == CURLE_SSL_PINNEDPUBKEYNOTMATCH;
}

void kn_xfer_finish(struct kn_http_xfer *x, CURLcode rc) {
  long v = 0;
  if (curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &v) == CURLE_OK && v)
    x->resp.http_version = v >= CURL_HTTP_VERSION_2_0 ? 2 : 1;
  char ubuf[512];
  const char *url = url_for_log(x->url, ubuf, sizeof(ubuf));
  kn_error_t *err = NULL;
  if (rc == CURLE_OK && x->local_err == KN_ERR_NO_ERROR) {
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    x->resp.status = (int)status;
  } else if (x->local_err == KN_ERR__NOMEM) {
    err = kn_error_new(KN_ERR__NOMEM,
                       "%s %s: out of memory receiving the response", x->method,
                       url);
  } else if (x->local_err == KN_ERR__BAD_MSG) {
    err = kn_error_new(KN_ERR__BAD_MSG,
                       "%s %s: response body larger than %zu bytes", x->method,
                       url, body_cap(x));
  } else if (x->local_err == KN_ERR__FAIL) {
    err = kn_error_new(KN_ERR__FAIL, "%s %s: transfer aborted by its receiver",
                       x->method, url);
  } else if (x->local_err == KN_ERR__TRANSPORT) {
    err = kn_error_new(
        KN_ERR__TRANSPORT,
        "%s %s: the server did not agree to HTTP/2 (http.version=2)", x->method,
        url);
    kn_error_set_retriable(err, 0);
  } else {
    const char *why = x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc);
    err = kn_error_new(code_of(rc), "%s %s: %s", x->method, url, why);
    if (is_permanent(rc)) kn_error_set_retriable(err, 0);
  }
  x->resp.error = err;
  /* Status 0 without an error means out of memory building the error. */
  if (rc != CURLE_OK || x->local_err) x->resp.status = 0;

  const kn_logger_t *lg = x->opts ? x->opts->log : NULL;
  if (KN_LOG_ENABLED(lg, KN_LOG_DEBUG)) {
    double ms = (double)(kn_mono_us() - x->start_us) / 1000.0;
    curl_off_t up = 0, down = 0;
    curl_easy_getinfo(x->easy, CURLINFO_SIZE_UPLOAD_T, &up);
    curl_easy_getinfo(x->easy, CURLINFO_SIZE_DOWNLOAD_T, &down);
    kn_log(lg, KN_LOG_DEBUG, "http",
           "%s %s -> %d HTTP/%s %.1f ms, %lld B out, %lld B in%s%s%s%s",
           x->method, url, x->resp.status,
           x->resp.http_version == 2 ? "2" : "1.1", ms, (long long)up,
           (long long)down, x->resp.request_id ? ", request id " : "",
           x->resp.request_id ? x->resp.request_id : "", err ? ": " : "",
           err ? kn_error_string(err) : "");
  }
}

void kn_xfer_cleanup(struct kn_http_xfer *x) {
  if (x->easy) curl_easy_cleanup(x->easy);
  x->easy = NULL;
  /* The copies of Authorization, X-Amz-Security-Token and credential
   * endpoint tokens; and a copied body (credential requests: a web
   * identity token, an SSO client secret). */
  for (struct curl_slist *l = x->headers; l; l = l->next)
    if (l->data) kn_secure_wipe(l->data, strlen(l->data));
  if (x->body.p) kn_secure_wipe(x->body.p, x->body.len);
  curl_slist_free_all(x->headers);
  x->headers = NULL;
  free_str(&x->method);
  free_str(&x->url);
  kn_buf_free(&x->body);
  kn_http_resp_clear(&x->resp);
}

void kn_http_resp_clear(kn_http_resp_t *resp) {
  if (!resp) return;
  kn_buf_free(&resp->body);
  free(resp->request_id);
  free(resp->content_type);
  free(resp->error_type);
  kn_error_destroy(resp->error);
  memset(resp, 0, sizeof(*resp));
}

char *kn_http_redact_header(const char *line) {
  return kn_redact_header_line(line);
}
