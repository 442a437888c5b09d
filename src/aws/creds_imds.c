/* EC2 instance metadata (IMDSv2): a session token from PUT
 * /latest/api/token, then the role name and its credentials.  Short
 * timeouts and a token request that gives up on the first transport
 * failure keep machines without IMDS (laptops, CI) from waiting long. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/creds_int.h"
#include "aws/url.h"
#include "core/error.h"
#include "util/secure.h"
#include "util/clock.h"
#include "util/str.h"

#define FAC "creds"
#define DEFAULT_V4 "http://169.254.169.254"
#define DEFAULT_V6 "http://[fd00:ec2::254]"
#define TOKEN_TTL_S 21600
#define CREDS_PATH "/latest/meta-data/iam/security-credentials/"

static int true_flag(const char *v) { return v && kn_str_ieq(v, "true"); }

/* Endpoint without a trailing slash; NULL with *errp on a bad override. */
static char *endpoint(kn_creds_ctx_t *ctx, kn_error_t **errp) {
  char where[256] = "AWS_EC2_METADATA_SERVICE_ENDPOINT";
  const char *ep = ctx->env[KN_CENV_IMDS_ENDPOINT];
  if (!ep)
    ep = kn_aws_profile_get(ctx->profile, "ec2_metadata_service_endpoint",
                            where, sizeof(where));
  if (ep && *ep) {
    kn_url_t u;
    const char *why = NULL;
    if (kn_url_parse(ep, &u, &why)) {
      *errp = kn_error_new(KN_ERR__CONF,
                           "instance metadata endpoint \"%s\" (from %s): %s",
                           ep, where, why);
      return NULL;
    }
  } else {
    const char *mode = ctx->env[KN_CENV_IMDS_ENDPOINT_MODE];
    if (!mode)
      mode = kn_aws_profile_get(ctx->profile,
                                "ec2_metadata_service_endpoint_mode", NULL, 0);
    ep = mode && kn_str_ieq(mode, "IPv6") ? DEFAULT_V6 : DEFAULT_V4;
  }
  size_t n = strlen(ep);
  while (n && ep[n - 1] == '/') n--;
  char *r = kn_strndup(ep, n);
  if (!r) *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
  return r;
}

typedef enum {
  TOKEN_OK,
  TOKEN_NONE,
  TOKEN_UNREACHABLE,
  TOKEN_FAILED
} token_res_t;

/* Control characters (NUL included) in len bytes, outer white space
 * aside. */
static int has_ctl(const char *p, size_t len) {
  while (len && (p[len - 1] == '\n' || p[len - 1] == '\r' ||
                 p[len - 1] == ' ' || p[len - 1] == '\t'))
    len--;
  while (len && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
    p++, len--;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)p[i] < ' ' || p[i] == 0x7f) return 1;
  return 0;
}

static token_res_t fetch_token(kn_creds_ctx_t *ctx, const char *base,
                               kn_error_t **errp) {
  if (ctx->imds_token && kn_mono_ms() < ctx->imds_token_expires_mono_ms)
    return TOKEN_OK;
  kn_secure_free_str(ctx->imds_token);
  ctx->imds_token = NULL;
  char *url = kn_asprintf("%s/latest/api/token", base);
  char ttl[64];
  snprintf(ttl, sizeof(ttl), "X-aws-ec2-metadata-token-ttl-seconds: %d",
           TOKEN_TTL_S);
  const char *headers[] = {ttl, ctx->user_agent_header, NULL};
  if (!url) {
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    return TOKEN_FAILED;
  }
  kn_http_req_t req = {0};
  req.method = "PUT";
  req.url = url;
  req.headers = headers;
  req.timeout_ms = ctx->metadata_timeout_ms;
  kn_http_resp_t resp;
  token_res_t res = TOKEN_FAILED;
  int64_t started = kn_mono_ms();
  kn_err_t rc = kn_creds_http(ctx, &req, ctx->metadata_max_attempts, &resp);
  if (rc != KN_ERR_NO_ERROR) {
    snprintf(ctx->note, sizeof(ctx->note), "not reachable at %.80s: %.120s",
             base, resp.error ? kn_error_string(resp.error) : "out of memory");
    res = TOKEN_UNREACHABLE;
  } else if (resp.status == 200 && resp.body.len) {
    if (has_ctl(resp.body.p, resp.body.len)) {
      /* It goes into a header line: CR/LF would add headers of the
       * server's choosing (NUL would cut it short). */
      *errp =
          kn_error_new(KN_ERR__CREDENTIALS,
                       "EC2 instance metadata: the session token holds control "
                       "characters; not used");
    } else if (!(ctx->imds_token = kn_strndup(resp.body.p, resp.body.len))) {
      *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    } else {
      kn_str_trim(ctx->imds_token);
      /* Renew a minute early; the TTL runs from when it was asked for. */
      ctx->imds_token_expires_mono_ms = started + (TOKEN_TTL_S - 60) * 1000LL;
      res = TOKEN_OK;
    }
  } else if (resp.status == 403 || resp.status == 404 || resp.status == 405) {
    /* An IMDS without tokens (or a proxy that forbids PUT): IMDSv1. */
    res = TOKEN_NONE;
  } else {
    *errp = kn_error_new(KN_ERR__CREDENTIALS,
                         "EC2 instance metadata: the token request got HTTP %d",
                         resp.status);
  }
  if (resp.body.p) kn_secure_wipe(resp.body.p, resp.body.len);
  kn_http_resp_clear(&resp);
  free(url);
  return res;
}

/* GET base+path with the session token; 0 with *resp filled (any status),
 * or -1 with *errp. */
static int get(kn_creds_ctx_t *ctx, const char *base, const char *path,
               kn_http_resp_t *resp, kn_error_t **errp) {
  char *url = kn_asprintf("%s%s", base, path);
  char *tok = ctx->imds_token
                  ? kn_asprintf("X-aws-ec2-metadata-token: %s", ctx->imds_token)
                  : NULL;
  if (!url || (ctx->imds_token && !tok)) {
    free(url);
    kn_secure_free_str(tok);
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    return -1;
  }
  const char *headers[] = {ctx->user_agent_header, tok, NULL};
  kn_http_req_t req = {0};
  req.method = "GET";
  req.url = url;
  req.headers = headers;
  req.timeout_ms = ctx->metadata_timeout_ms;
  int rc = 0;
  if (kn_creds_http(ctx, &req, ctx->metadata_max_attempts, resp) !=
      KN_ERR_NO_ERROR) {
    *errp = kn_error_prefix(resp->error, "EC2 instance metadata");
    resp->error = NULL;
    kn_http_resp_clear(resp);
    rc = -1;
  }
  free(url);
  kn_secure_free_str(tok);
  return rc;
}

/* One pass: role name then credentials.  *retry is set on a 401 with a
 * token, which means the token went stale. */
static kn_creds_res_t fetch(kn_creds_ctx_t *ctx, const char *base,
                            kn_creds_t *out, int *retry, kn_error_t **errp) {
  *retry = 0;
  kn_http_resp_t resp;
  if (get(ctx, base, CREDS_PATH, &resp, errp)) return KN_CREDS_FAILED;
  kn_creds_res_t res = KN_CREDS_FAILED;
  char *role = NULL, *path = NULL;
  if (resp.status == 401 && ctx->imds_token) {
    *retry = 1;
  } else if (resp.status == 401) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS,
                         "EC2 instance metadata requires a session token "
                         "(HTTP 401) but would not give one");
  } else if (resp.status == 404) {
    snprintf(ctx->note, sizeof(ctx->note),
             "no IAM role attached to the instance");
    res = KN_CREDS_ABSENT;
  } else if (resp.status != 200 || !resp.body.len) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS,
                         "EC2 instance metadata: role name request got HTTP %d",
                         resp.status);
  } else {
    /* The first line names the role. */
    size_t n = strcspn(resp.body.p, "\r\n");
    role = kn_strndup(resp.body.p, n);
    if (role) kn_str_trim(role);
    if (role && *role && !strpbrk(role, "/?#% ")) {
      path = kn_asprintf(CREDS_PATH "%s", role);
    } else if (role) {
      *errp = kn_error_new(KN_ERR__BAD_MSG,
                           "EC2 instance metadata: unexpected role name");
    }
    if (role && !*errp && !path)
      *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
  }
  kn_http_resp_clear(&resp);
  if (!path) goto out;
  if (get(ctx, base, path, &resp, errp)) goto out;
  char what[300];
  snprintf(what, sizeof(what), "EC2 instance metadata (role %.100s)", role);
  if (resp.status == 401 && ctx->imds_token) {
    *retry = 1;
  } else if (resp.status != 200) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS, "%s: HTTP %d", what, resp.status);
  } else if (kn_creds_parse_json(resp.body.p ? resp.body.p : "", resp.body.len,
                                 KN_CREDS_DOC_IMDS, what, out, errp) == 0) {
    out->source = KN_CREDS_SRC_IMDS;
    res = KN_CREDS_FOUND;
  }
  if (resp.body.p) kn_secure_wipe(resp.body.p, resp.body.len);
  kn_http_resp_clear(&resp);
out:
  free(role);
  free(path);
  return res;
}

kn_creds_res_t kn_creds_from_imds(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                  kn_error_t **errp) {
  if (true_flag(ctx->env[KN_CENV_IMDS_DISABLED])) {
    snprintf(ctx->note, sizeof(ctx->note),
             "disabled by AWS_EC2_METADATA_DISABLED");
    return KN_CREDS_ABSENT;
  }
  char *base = endpoint(ctx, errp);
  if (!base) return KN_CREDS_FAILED;
  kn_creds_res_t res = KN_CREDS_FAILED;
  for (int pass = 0; pass < 2; pass++) {
    token_res_t t = fetch_token(ctx, base, errp);
    if (t == TOKEN_UNREACHABLE) {
      res = KN_CREDS_ABSENT;
      break;
    }
    if (t == TOKEN_FAILED) break;
    if (t == TOKEN_NONE &&
        (true_flag(ctx->env[KN_CENV_IMDS_V1_DISABLED]) ||
         true_flag(kn_aws_profile_get(ctx->profile, "ec2_metadata_v1_disabled",
                                      NULL, 0)))) {
      *errp = kn_error_new(KN_ERR__CREDENTIALS,
                           "EC2 instance metadata refused a session token and "
                           "IMDSv1 is disabled (AWS_EC2_METADATA_V1_DISABLED)");
      break;
    }
    int retry = 0;
    res = fetch(ctx, base, out, &retry, errp);
    if (!retry) break;
    /* The token was refused: forget it and get a new one, once. */
    kn_dbg(ctx->log, FAC,
           "instance metadata refused the session token; renewing it");
    kn_secure_free_str(ctx->imds_token);
    ctx->imds_token = NULL;
    res = KN_CREDS_FAILED;
    if (pass == 1)
      *errp =
          kn_error_new(KN_ERR__CREDENTIALS,
                       "EC2 instance metadata refused a fresh session token "
                       "(HTTP 401)");
  }
  free(base);
  return res;
}
