/* STS: AssumeRoleWithWebIdentity, an unsigned Query-protocol call that
 * trades an OIDC token (EKS, GitHub Actions, ...) for role credentials,
 * and AssumeRole, signed with the source credentials of a profile. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/creds_int.h"
#include "aws/sigv4.h"
#include "aws/xml_min.h"
#include "core/error.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/iso8601.h"
#include "util/rand.h"
#include "util/secure.h"
#include "util/str.h"

#define FAC "creds"
#define MAX_TOKEN_FILE (64 * 1024)
#define STS_ATTEMPTS 3

/* application/x-www-form-urlencoded with RFC 3986 unreserved characters
 * left as they are. */
static int form_append(kn_buf_t *b, const char *name, const char *value) {
  static const char hex[] = "0123456789ABCDEF";
  if (b->len && kn_buf_append_char(b, '&')) return -1;
  if (kn_buf_append_str(b, name) || kn_buf_append_char(b, '=')) return -1;
  for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
    if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~') {
      if (kn_buf_append_char(b, (char)*p)) return -1;
    } else {
      char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
      if (kn_buf_append(b, e, 3)) return -1;
    }
  }
  return 0;
}

/* STS: 2 to 64 of [\w+=,.@-]. */
static int session_name_valid(const char *s) {
  size_t n = strlen(s);
  if (n < 2 || n > 64) return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && !strchr("_+=,.@-", *s)) return 0;
  return 1;
}

static char *xml_get(kn_xml_span_t doc, const char *const *path) {
  kn_xml_span_t s;
  return kn_xml_path(doc, path, &s) ? NULL : kn_xml_text(s);
}

/* The credentials of a successful response to action. */
static int parse_ok(const kn_buf_t *body, const char *action,
                    const char *source, const char *what, kn_creds_t *out,
                    kn_error_t **errp) {
  kn_xml_span_t doc = {body->p ? body->p : "", body->len};
  kn_xml_span_t creds;
  char result[64];
  snprintf(result, sizeof(result), "%sResult", action);
  const char *const cpath[] = {result, "Credentials", NULL};
  if (kn_xml_path(doc, cpath, &creds)) {
    *errp = kn_error_new(KN_ERR__BAD_MSG,
                         "%s: STS response without Credentials", what);
    return -1;
  }
  static const char *const pid[] = {"AccessKeyId", NULL};
  static const char *const psk[] = {"SecretAccessKey", NULL};
  static const char *const pst[] = {"SessionToken", NULL};
  static const char *const pex[] = {"Expiration", NULL};
  char *id = xml_get(creds, pid), *sk = xml_get(creds, psk);
  char *st = xml_get(creds, pst), *ex = xml_get(creds, pex);
  int rc = -1;
  int64_t expires = 0;
  if (!id || !sk || !st || !ex) {
    *errp =
        kn_error_new(KN_ERR__BAD_MSG, "%s: STS Credentials without %s", what,
                     !id   ? "AccessKeyId"
                     : !sk ? "SecretAccessKey"
                     : !st ? "SessionToken"
                           : "Expiration");
  } else if (kn_iso8601_parse(ex, &expires)) {
    *errp = kn_error_new(KN_ERR__BAD_MSG,
                         "%s: STS Expiration is not a date-time: \"%.40s\"",
                         what, ex);
  } else if (kn_creds_set_static(out, id, sk, st, source, what, errp) == 0) {
    out->expires_ms = expires;
    rc = 0;
  }
  free(id);
  kn_secure_free_str(sk);
  kn_secure_free_str(st);
  free(ex);
  return rc;
}

/* The error of a failed response: <ErrorResponse><Error><Code>. */
static kn_error_t *parse_error(const kn_http_resp_t *resp, const char *action,
                               const char *what) {
  kn_xml_span_t doc = {resp->body.p ? resp->body.p : "", resp->body.len};
  static const char *const pcode[] = {"Error", "Code", NULL};
  static const char *const pmsg[] = {"Error", "Message", NULL};
  static const char *const preq[] = {"RequestId", NULL};
  char *code = xml_get(doc, pcode), *msg = xml_get(doc, pmsg);
  char *req = resp->request_id ? NULL : xml_get(doc, preq);
  kn_error_t *e;
  if (code) {
    e = kn_error_remote(resp->status, code, msg,
                        resp->request_id ? resp->request_id : req);
  } else {
    char *snip = kn_creds_snippet(doc.p, doc.len, 200);
    e = kn_error_remote(resp->status, NULL, snip, resp->request_id);
    free(snip);
  }
  free(code);
  free(msg);
  free(req);
  return kn_error_prefix(e, "%s: STS %s", what, action);
}

/* Worth another attempt: STS or the identity provider had a moment. */
static int sts_retriable(const kn_error_t *e) {
  const char *type = kn_error_type(e);
  return kn_error_is_retriable(e) || kn_error_is_throttling(e) ||
         (type && (strcmp(type, "IDPCommunicationError") == 0 ||
                   strcmp(type, "InvalidIdentityToken") == 0));
}

/* Host (with port) and path of the STS endpoint, for signing. */
static int split_url(const char *url, char *host, size_t host_size,
                     const char **path) {
  const char *a = strstr(url, "://");
  if (!a) return -1;
  a += 3;
  size_t n = strcspn(a, "/?#");
  if (!n || n >= host_size) return -1;
  memcpy(host, a, n);
  host[n] = '\0';
  *path = a[n] == '/' ? a + n : "/";
  return 0;
}

/* One STS Query-protocol call (form body), signed with signer when given
 * (AssumeRole), unsigned otherwise (AssumeRoleWithWebIdentity), retried
 * on failures worth it.  The credentials of the answer go to *out with
 * source. */
static kn_creds_res_t sts_call(kn_creds_ctx_t *ctx, const char *action,
                               const kn_buf_t *body, const kn_creds_t *signer,
                               const char *source, const char *what,
                               kn_creds_t *out, kn_error_t **errp) {
  if (!ctx->sts_endpoint) {
    *errp = kn_error_new(KN_ERR__CONF, "%s: no STS endpoint", what);
    return KN_CREDS_FAILED;
  }
  static const char ctype[] =
      "application/x-www-form-urlencoded; charset=utf-8";
  char host[300];
  const char *path = "/";
  if (signer && split_url(ctx->sts_endpoint, host, sizeof(host), &path)) {
    *errp = kn_error_new(KN_ERR__CONF, "%s: bad STS endpoint", what);
    return KN_CREDS_FAILED;
  }
  for (int attempt = 1;; attempt++) {
    /* Signed again for each attempt: the date is part of the signature. */
    kn_sigv4_result_t sig;
    memset(&sig, 0, sizeof(sig));
    char *lines[3] = {NULL, NULL, NULL}; /* Authorization, token, date */
    if (signer) {
      kn_sigv4_header_t sh[] = {{"Host", host}, {"Content-Type", ctype}};
      kn_sigv4_request_t sreq = {.method = "POST",
                                 .path = path,
                                 .headers = sh,
                                 .n_headers = 2,
                                 .payload = body->p,
                                 .payload_len = body->len};
      kn_sigv4_creds_t sc = {signer->access_key_id, signer->secret_access_key,
                             signer->session_token};
      if (kn_sigv4_sign(&sreq, &sc, ctx->region ? ctx->region : "us-east-1",
                        "sts", (long long)(kn_wall_ms() / 1000), &sig)) {
        *errp =
            kn_error_new(KN_ERR__CREDENTIALS,
                         "%s: cannot sign STS %s with the credentials from %s",
                         what, action, signer->source ? signer->source : "?");
        kn_sigv4_result_clear(&sig);
        return KN_CREDS_FAILED;
      }
      lines[0] = kn_asprintf("Authorization: %s", sig.authorization);
      lines[1] =
          signer->session_token && *signer->session_token
              ? kn_asprintf("X-Amz-Security-Token: %s", signer->session_token)
              : NULL;
      lines[2] = kn_asprintf("X-Amz-Date: %s", sig.amz_date);
      kn_secure_wipe(sig.authorization, sizeof(sig.authorization));
      kn_sigv4_result_clear(&sig);
      if (!lines[0] || !lines[2] ||
          (signer->session_token && *signer->session_token && !lines[1])) {
        for (int i = 0; i < 3; i++) kn_secure_free_str(lines[i]);
        *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
        return KN_CREDS_FAILED;
      }
    }
    const char *headers[] = {
        "Content-Type: application/x-www-form-urlencoded; charset=utf-8",
        "Accept: text/xml",
        ctx->user_agent_header,
        lines[0],
        lines[2],
        lines[1],
        NULL};
    if (!lines[0]) headers[3] = NULL;
    kn_http_req_t req = {0};
    req.method = "POST";
    req.url = ctx->sts_endpoint;
    req.headers = headers;
    req.body = body->p;
    req.body_len = body->len;
    req.timeout_ms = ctx->request_timeout_ms;
    kn_http_resp_t resp;
    kn_err_t hrc = kn_http_perform_blocking(&ctx->http, &req, &resp);
    for (int i = 0; i < 3; i++) kn_secure_free_str(lines[i]);
    kn_error_t *e = NULL;
    if (hrc != KN_ERR_NO_ERROR) {
      e = kn_error_prefix(resp.error, "%s: STS %s", what, action);
      resp.error = NULL;
    } else if (resp.status == 200) {
      kn_creds_res_t res =
          parse_ok(&resp.body, action, source, what, out, errp) == 0
              ? KN_CREDS_FOUND
              : KN_CREDS_FAILED;
      if (resp.body.p) kn_secure_wipe(resp.body.p, resp.body.len);
      kn_http_resp_clear(&resp);
      return res;
    } else {
      e = parse_error(&resp, action, what);
    }
    kn_http_resp_clear(&resp);
    if (!e || attempt >= STS_ATTEMPTS || !sts_retriable(e)) {
      *errp = e;
      return KN_CREDS_FAILED;
    }
    kn_dbg(ctx->log, FAC, "attempt %d: %s", attempt, kn_error_string(e));
    kn_error_destroy(e);
    kn_sleep_ms((int64_t)(100 << attempt) + (int64_t)kn_rand_below(100));
  }
}

/* A generated session name, as botocore makes them. */
static const char *session_or_default(const char *name, char *gen,
                                      size_t size) {
  if (name && *name) return name;
  snprintf(gen, size, "libkinesis-%lld", (long long)kn_wall_ms());
  return gen;
}

static int check_session_name(const char *name, const char *what,
                              kn_error_t **errp) {
  if (session_name_valid(name)) return 0;
  *errp = kn_error_new(KN_ERR__CONF,
                       "%s: role session name \"%.80s\" must be 2 to 64 of "
                       "letters, digits and _+=,.@-",
                       what, name);
  return -1;
}

kn_creds_res_t kn_creds_web_identity(kn_creds_ctx_t *ctx, const char *role_arn,
                                     const char *token_file,
                                     const char *session_name, const char *what,
                                     kn_creds_t *out, kn_error_t **errp) {
  char gen[64];
  session_name = session_or_default(session_name, gen, sizeof(gen));
  if (check_session_name(session_name, what, errp)) return KN_CREDS_FAILED;
  if (!ctx->sts_endpoint) {
    *errp = kn_error_new(KN_ERR__CONF, "%s: no STS endpoint", what);
    return KN_CREDS_FAILED;
  }
  kn_buf_t token = KN_BUF_INIT, body = KN_BUF_INIT;
  kn_creds_res_t res = KN_CREDS_FAILED;
  /* Read on every fetch: the token file is rotated (EKS: hourly). */
  int rc = kn_file_read(token_file, MAX_TOKEN_FILE, &token);
  if (rc || !token.len) {
    *errp =
        kn_error_new(KN_ERR__CREDENTIALS, "%s: web identity token file %s: %s",
                     what, token_file, rc ? kn_file_strerror(rc) : "empty");
    goto out;
  }
  kn_str_trim(token.p);
  if (form_append(&body, "Action", "AssumeRoleWithWebIdentity") ||
      form_append(&body, "Version", "2011-06-15") ||
      form_append(&body, "RoleArn", role_arn) ||
      form_append(&body, "RoleSessionName", session_name) ||
      form_append(&body, "WebIdentityToken", token.p)) {
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    goto out;
  }
  res = sts_call(ctx, "AssumeRoleWithWebIdentity", &body, NULL,
                 KN_CREDS_SRC_WEB_IDENTITY, what, out, errp);
out:
  if (token.p) kn_secure_wipe(token.p, token.len);
  if (body.p) kn_secure_wipe(body.p, body.len);
  kn_buf_free(&token);
  kn_buf_free(&body);
  return res;
}

kn_creds_res_t kn_creds_assume_role(kn_creds_ctx_t *ctx,
                                    const kn_creds_role_t *role,
                                    const kn_creds_t *source, const char *what,
                                    kn_creds_t *out, kn_error_t **errp) {
  char gen[64], dur[24];
  const char *session =
      session_or_default(role->session_name, gen, sizeof(gen));
  if (check_session_name(session, what, errp)) return KN_CREDS_FAILED;
  kn_buf_t body = KN_BUF_INIT;
  int fail = form_append(&body, "Action", "AssumeRole") ||
             form_append(&body, "Version", "2011-06-15") ||
             form_append(&body, "RoleArn", role->role_arn) ||
             form_append(&body, "RoleSessionName", session);
  if (!fail && role->external_id)
    fail = form_append(&body, "ExternalId", role->external_id);
  if (!fail && role->duration_s > 0) {
    snprintf(dur, sizeof(dur), "%d", role->duration_s);
    fail = form_append(&body, "DurationSeconds", dur);
  }
  kn_creds_res_t res = KN_CREDS_FAILED;
  if (fail)
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
  else
    res = sts_call(ctx, "AssumeRole", &body, source, KN_CREDS_SRC_ASSUME_ROLE,
                   what, out, errp);
  kn_buf_free(&body);
  return res;
}
