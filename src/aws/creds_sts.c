/* Web identity: STS AssumeRoleWithWebIdentity, an unsigned Query-protocol
 * call that trades an OIDC token (EKS, GitHub Actions, ...) for role
 * credentials. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/creds_int.h"
#include "aws/xml_min.h"
#include "core/error.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/iso8601.h"
#include "util/rand.h"
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

/* The credentials of a successful response. */
static int parse_ok(const kn_buf_t *body, const char *what, kn_creds_t *out,
                    kn_error_t **errp) {
  kn_xml_span_t doc = {body->p ? body->p : "", body->len};
  kn_xml_span_t creds;
  static const char *const cpath[] = {"AssumeRoleWithWebIdentityResult",
                                      "Credentials", NULL};
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
    *errp = kn_error_new(KN_ERR__BAD_MSG,
                         "%s: STS Credentials without %s", what,
                         !id ? "AccessKeyId" : !sk ? "SecretAccessKey"
                                 : !st ? "SessionToken" : "Expiration");
  } else if (kn_iso8601_parse(ex, &expires)) {
    *errp = kn_error_new(KN_ERR__BAD_MSG,
                         "%s: STS Expiration is not a date-time: \"%.40s\"", what, ex);
  } else if (kn_creds_set_static(out, id, sk, st, KN_CREDS_SRC_WEB_IDENTITY,
                                 what, errp) == 0) {
    out->expires_ms = expires;
    rc = 0;
  }
  free(id);
  if (sk) explicit_bzero(sk, strlen(sk));
  if (st) explicit_bzero(st, strlen(st));
  free(sk);
  free(st);
  free(ex);
  return rc;
}

/* The error of a failed response: <ErrorResponse><Error><Code>. */
static kn_error_t *parse_error(const kn_http_resp_t *resp, const char *what) {
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
  return kn_error_prefix(e, "%s: STS AssumeRoleWithWebIdentity", what);
}

/* Worth another attempt: STS or the identity provider had a moment. */
static int sts_retriable(const kn_error_t *e) {
  const char *type = kn_error_type(e);
  return kn_error_is_retriable(e) || kn_error_is_throttling(e) ||
         (type && (strcmp(type, "IDPCommunicationError") == 0 ||
                   strcmp(type, "InvalidIdentityToken") == 0));
}

kn_creds_res_t kn_creds_web_identity(kn_creds_ctx_t *ctx, const char *role_arn,
                                     const char *token_file,
                                     const char *session_name,
                                     const char *what, kn_creds_t *out,
                                     kn_error_t **errp) {
  char gen[64];
  if (!session_name) {
    snprintf(gen, sizeof(gen), "libkinesis-%lld", (long long)kn_wall_ms());
    session_name = gen;
  }
  if (!session_name_valid(session_name)) {
    *errp = kn_error_new(KN_ERR__CONF,
                         "%s: role session name \"%.80s\" must be 2 to 64 of "
                         "letters, digits and _+=,.@-",
                         what, session_name);
    return KN_CREDS_FAILED;
  }
  if (!ctx->sts_endpoint) {
    *errp = kn_error_new(KN_ERR__CONF, "%s: no STS endpoint", what);
    return KN_CREDS_FAILED;
  }
  kn_buf_t token = KN_BUF_INIT, body = KN_BUF_INIT;
  kn_creds_res_t res = KN_CREDS_FAILED;
  /* Read on every fetch: the token file is rotated (EKS: hourly). */
  int rc = kn_file_read(token_file, MAX_TOKEN_FILE, &token);
  if (rc || !token.len) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS, "%s: web identity token file %s: %s",
                         what, token_file, rc ? strerror(rc) : "empty");
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
  const char *headers[] = {
      "Content-Type: application/x-www-form-urlencoded; charset=utf-8",
      "Accept: text/xml", ctx->user_agent_header, NULL};
  kn_http_req_t req = {0};
  req.method = "POST";
  req.url = ctx->sts_endpoint;
  req.headers = headers;
  req.body = body.p;
  req.body_len = body.len;
  req.timeout_ms = ctx->request_timeout_ms;
  for (int attempt = 1;; attempt++) {
    kn_http_resp_t resp;
    kn_err_t hrc = kn_http_perform_blocking(&ctx->http, &req, &resp);
    kn_error_t *e = NULL;
    if (hrc != KN_ERR_NO_ERROR) {
      e = kn_error_prefix(resp.error, "%s: STS AssumeRoleWithWebIdentity", what);
      resp.error = NULL;
    } else if (resp.status == 200) {
      if (parse_ok(&resp.body, what, out, errp) == 0) res = KN_CREDS_FOUND;
      kn_http_resp_clear(&resp);
      goto out;
    } else {
      e = parse_error(&resp, what);
    }
    kn_http_resp_clear(&resp);
    if (!e || attempt >= STS_ATTEMPTS || !sts_retriable(e)) {
      *errp = e;
      goto out;
    }
    kn_dbg(ctx->log, FAC, "attempt %d: %s", attempt, kn_error_string(e));
    kn_error_destroy(e);
    kn_sleep_ms((int64_t)(100 << attempt) + (int64_t)kn_rand_below(100));
  }
out:
  if (token.p) explicit_bzero(token.p, token.len);
  if (body.p) explicit_bzero(body.p, body.len);
  kn_buf_free(&token);
  kn_buf_free(&body);
  return res;
}

kn_creds_res_t kn_creds_from_web_identity(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                          kn_error_t **errp) {
  const char *file = ctx->env[KN_CENV_WEB_IDENTITY_TOKEN_FILE];
  const char *role = ctx->env[KN_CENV_ROLE_ARN];
  if (!file) return KN_CREDS_ABSENT;
  if (!role) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS,
                         "AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ROLE_ARN");
    return KN_CREDS_FAILED;
  }
  char what[400];
  snprintf(what, sizeof(what), "web identity (role %.300s, from the environment)", role);
  return kn_creds_web_identity(ctx, role, file, ctx->env[KN_CENV_ROLE_SESSION_NAME],
                               what, out, errp);
}
