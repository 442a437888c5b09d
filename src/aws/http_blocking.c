/* kn_http_perform_blocking(): one request on a private curl easy handle,
 * for callers that may block (credential providers).  Independent of the
 * event loop.  The streaming callbacks (on_data, on_headers) are not used:
 * a blocking call has no opaque to give them, so the body always goes to
 * resp->body. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aws/http.h"
#include "core/error.h"
#include "util/str.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct xfer {
  CURL *h;
  const kn_http_req_t *req;
  kn_http_resp_t *resp;
  int nomem;
} xfer_t;

/* Header value of line if its name is name (case-insensitive), trimmed,
 * malloc'ed; NULL otherwise. */
static char *header_value(const char *line, size_t n, const char *name) {
  size_t nl = strlen(name);
  if (n <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0) return NULL;
  const char *v = line + nl + 1, *e = line + n;
  while (v < e && (*v == ' ' || *v == '\t')) v++;
  while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t')) e--;
  return kn_strndup(v, (size_t)(e - v));
}

static void set_field(xfer_t *x, char **field, char *v) {
  if (!v) return;
  free(*field);
  *field = v;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *opaque) {
  xfer_t *x = opaque;
  size_t n = size * nmemb;
  if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
    /* A new response (after 100 Continue, for one): forget earlier ones. */
    free(x->resp->request_id);
    free(x->resp->content_type);
    x->resp->request_id = x->resp->content_type = NULL;
    return n;
  }
  set_field(x, &x->resp->request_id, header_value(p, n, "x-amzn-RequestId"));
  set_field(x, &x->resp->request_id, header_value(p, n, "x-amz-request-id"));
  set_field(x, &x->resp->content_type, header_value(p, n, "Content-Type"));
  return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *opaque) {
  xfer_t *x = opaque;
  size_t n = size * nmemb;
  if (kn_buf_append(&x->resp->body, p, n)) {
    x->nomem = 1;
    return 0;
  }
  return n;
}

/* "METHOD scheme://host[:port]/path" for messages: no query string, which
 * could carry secrets. */
static char *describe(const kn_http_req_t *req) {
  size_t n = strcspn(req->url, "?#");
  return kn_asprintf("%s %.*s", req->method ? req->method : "GET", (int)n, req->url);
}

static kn_err_t fail(kn_http_resp_t *resp, kn_err_t code, const kn_http_req_t *req,
                     const char *msg) {
  char *what = describe(req);
  resp->error = kn_error_new(code, "%s: %s", what ? what : "HTTP request", msg);
  free(what);
  return code;
}

static long http_version_opt(kn_http_version_t v) {
  switch (v) {
    case KN_HTTP_1_1: return CURL_HTTP_VERSION_1_1;
    case KN_HTTP_2: return CURL_HTTP_VERSION_2TLS;
    case KN_HTTP_2_PRIOR: return CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    default: return CURL_HTTP_VERSION_2TLS;
  }
}

kn_err_t kn_http_perform_blocking(const kn_http_opts_t *opts,
                                  const kn_http_req_t *req,
                                  kn_http_resp_t *resp) {
  memset(resp, 0, sizeof(*resp));
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return fail(resp, KN_ERR__TRANSPORT, req, curl_easy_strerror(curl_init_rc));
  const char *body = req->body;
  size_t body_len = req->body_len;
  kn_buf_t taken = KN_BUF_INIT;
  if (req->body_take) {
    taken = *req->body_take;
    *req->body_take = (kn_buf_t)KN_BUF_INIT;
    body = taken.p;
    body_len = taken.len;
  }
  xfer_t x = {0};
  x.req = req;
  x.resp = resp;
  struct curl_slist *hdrs = NULL;
  char errbuf[CURL_ERROR_SIZE] = "";
  kn_err_t rc = KN_ERR_NO_ERROR;
  int has_ctype = 0;
  CURL *h = x.h = curl_easy_init();
  if (!h) {
    rc = fail(resp, KN_ERR__NOMEM, req, "cannot create a curl handle");
    goto out;
  }
  for (const char *const *hp = req->headers; hp && *hp; hp++) {
    struct curl_slist *n = curl_slist_append(hdrs, *hp);
    if (!n) {
      rc = fail(resp, KN_ERR__NOMEM, req, "out of memory");
      goto out;
    }
    hdrs = n;
    if (strncasecmp(*hp, "Content-Type:", 13) == 0) has_ctype = 1;
  }
  /* No "Expect: 100-continue" round trip; no form content type by default. */
  struct curl_slist *n = curl_slist_append(hdrs, "Expect:");
  if (n && !has_ctype) n = curl_slist_append(n, "Content-Type:");
  if (!n) {
    rc = fail(resp, KN_ERR__NOMEM, req, "out of memory");
    goto out;
  }
  hdrs = n;

  const char *method = req->method ? req->method : "GET";
  curl_easy_setopt(h, CURLOPT_URL, req->url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, http_version_opt(opts->version));
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, opts->verify_tls ? 1L : 0L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, opts->verify_tls ? 2L : 0L);
  if (opts->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, opts->ca_file);
  if (opts->connect_timeout_ms > 0)
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, opts->connect_timeout_ms);
  if (req->timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms);
  if (strcmp(method, "GET") == 0) {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (strcmp(method, "HEAD") == 0) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else {
    /* A request body (possibly empty, sent with Content-Length: 0). */
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
    if (strcmp(method, "POST") != 0) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  }

  CURLcode cc = curl_easy_perform(h);
  long code = 0, ver = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  resp->status = (int)code;
  curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &ver);
  resp->http_version = ver == CURL_HTTP_VERSION_2_0 ? 2 : 1;
  if (cc != CURLE_OK) {
    const char *msg = *errbuf ? errbuf : curl_easy_strerror(cc);
    if (x.nomem)
      rc = fail(resp, KN_ERR__NOMEM, req, "out of memory for the response body");
    else
      rc = fail(resp, cc == CURLE_OPERATION_TIMEDOUT ? KN_ERR__TIMED_OUT
                                                     : KN_ERR__TRANSPORT,
                req, msg);
  }
out:
  if (h) curl_easy_cleanup(h);
  curl_slist_free_all(hdrs);
  kn_buf_free(&taken);
  if (rc != KN_ERR_NO_ERROR && !resp->error) rc = KN_ERR__NOMEM;
  return rc;
}

void kn_http_resp_clear(kn_http_resp_t *resp) {
  if (!resp) return;
  kn_buf_free(&resp->body);
  free(resp->request_id);
  free(resp->content_type);
  kn_error_destroy(resp->error);
  memset(resp, 0, sizeof(*resp));
}
