/* IAM Identity Center (SSO) profiles, as botocore's SSOProvider and
 * SSOTokenProvider read them: the profile's sso_account_id and
 * sso_role_name, sso_start_url and sso_region from the profile (legacy) or
 * from its "[sso-session NAME]" section; the access token that `aws sso
 * login` cached in ~/.aws/sso/cache/SHA1(session name or start URL).json;
 * SSO GetRoleCredentials with it.  A session's token that expires within
 * 15 minutes is refreshed through SSO-OIDC CreateToken when a refresh
 * token and a client registration are cached, and the cache file is
 * rewritten (flushed, under a lock beside it so that two processes do not
 * both spend the refresh token); a legacy token is never refreshed.  Tokens,
 * client secrets and credentials never appear in messages. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aws/creds_int.h"
#include "core/error.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/hex.h"
#include "util/iso8601.h"
#include "util/secure.h"
#include "util/str.h"

#define FAC "creds"
#define MAX_CACHE_FILE (64 * 1024)
#define TOKEN_REFRESH_MS (15 * 60 * 1000)
#define SSO_ATTEMPTS 3
#define LOCK_WAIT_MS 30000

typedef struct sso_conf {
  const char *profile;
  const char *session; /* sso_session, or NULL: the legacy form */
  const char *start_url;
  const char *region;
  const char *account;
  const char *role;
  char login[200]; /* the command that gets a new token */
  char what[300];  /* for messages */
} sso_conf_t;

static const char *get(const kn_aws_profile_t *pf, const char *key) {
  const char *v = kn_aws_profile_get(pf, key, NULL, 0);
  return v && *v ? v : NULL;
}

/* The settings of the profile; ABSENT when it is no SSO profile. */
static kn_creds_res_t load_conf(const kn_aws_profile_t *pf, sso_conf_t *c,
                                kn_error_t **errp) {
  memset(c, 0, sizeof(*c));
  c->profile = pf->name;
  c->account = get(pf, "sso_account_id");
  c->role = get(pf, "sso_role_name");
  if (!c->account && !c->role) return KN_CREDS_ABSENT;
  c->session = get(pf, "sso_session");
  c->start_url = get(pf, "sso_start_url");
  c->region = get(pf, "sso_region");
  snprintf(c->what, sizeof(c->what),
           "IAM Identity Center (SSO) profile \"%.100s\"", pf->name);
  if (c->session) {
    const kn_ini_section_t *sec = kn_aws_sso_session(pf, c->session);
    if (!sec) {
      *errp =
          kn_error_new(KN_ERR__CREDENTIALS,
                       "%s: sso_session \"%.100s\" has no [sso-session %.100s] "
                       "section in the config file",
                       c->what, c->session, c->session);
      return KN_CREDS_FAILED;
    }
    static const char *const keys[] = {"sso_start_url", "sso_region"};
    const char **mine[] = {&c->start_url, &c->region};
    for (int i = 0; i < 2; i++) {
      const char *v = kn_ini_get(sec, keys[i]);
      if (!v || !*v) continue;
      if (*mine[i] && strcmp(*mine[i], v) != 0) {
        *errp = kn_error_new(
            KN_ERR__CREDENTIALS,
            "%s: %s is \"%.100s\" in the profile but \"%.100s\" in "
            "[sso-session %.100s]",
            c->what, keys[i], *mine[i], v, c->session);
        return KN_CREDS_FAILED;
      }
      *mine[i] = v;
    }
    snprintf(c->login, sizeof(c->login), "aws sso login --sso-session %.100s",
             c->session);
  } else {
    snprintf(c->login, sizeof(c->login), "aws sso login --profile %.100s",
             pf->name);
  }
  char missing[200] = "";
  const char *names[] = {"sso_start_url", "sso_region", "sso_account_id",
                         "sso_role_name"};
  const char *vals[] = {c->start_url, c->region, c->account, c->role};
  for (int i = 0; i < 4; i++)
    if (!vals[i])
      snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
               "%s%s", missing[0] ? ", " : "", names[i]);
  if (missing[0]) {
    *errp =
        kn_error_new(KN_ERR__CREDENTIALS, "%s: missing %s", c->what, missing);
    return KN_CREDS_FAILED;
  }
  /* The region goes into a host name, the others into a query. */
  for (const char *p = c->region; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) {
      *errp = kn_error_new(KN_ERR__CREDENTIALS,
                           "%s: sso_region \"%.60s\" is not a region", c->what,
                           c->region);
      return KN_CREDS_FAILED;
    }
  return KN_CREDS_FOUND;
}

static int ends_slash(const char *s) {
  size_t n = strlen(s);
  return n && s[n - 1] == '/';
}

static int url_escape(kn_buf_t *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                (*p >= '0' && *p <= '9') || strchr("-_.~", *p);
    char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
    if (plain ? kn_buf_append_char(b, (char)*p) : kn_buf_append(b, e, 3))
      return -1;
  }
  return 0;
}

/* ~/.aws/sso/cache/<sha1 hex>.json */
static char *cache_path(kn_creds_ctx_t *ctx, const sso_conf_t *c) {
  if (!ctx->sso_cache_dir) return NULL;
  const char *key = c->session ? c->session : c->start_url;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!EVP_Digest(key, strlen(key), md, &n, EVP_sha1(), NULL) || n != 20)
    return NULL;
  char hex[41];
  kn_hex_encode(hex, md, 20);
  return kn_asprintf("%s/%s.json", ctx->sso_cache_dir, hex);
}

static const char *jstr(json_t *o, const char *name) {
  json_t *v = json_object_get(o, name);
  return json_is_string(v) && *json_string_value(v) ? json_string_value(v)
                                                    : NULL;
}

/* Wipes every string inside v (tokens, client secrets) before jansson
 * frees them. */
static void wipe_json(json_t *v) {
  if (json_is_string(v)) {
    kn_secure_wipe((char *)(uintptr_t)json_string_value(v),
                   json_string_length(v));
  } else if (json_is_object(v)) {
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) wipe_json(x);
  } else if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) wipe_json(x);
  }
}

static void free_json(json_t *v) {
  if (v && v->refcount == 1) wipe_json(v);
  json_decref(v);
}

/* Sets doc[name] to a new string, the old one wiped first. */
static void set_secret(json_t *doc, const char *name, const char *value) {
  wipe_json(json_object_get(doc, name));
  json_object_set_new(doc, name, json_string(value));
}

/* Writes doc to path through a temporary file, flushed to the disk, and a
 * rename, readable by the owner only, as the AWS CLI keeps it. */
static int write_cache(const char *path, json_t *doc) {
  char *text = json_dumps(doc, JSON_COMPACT);
  char *tmp = kn_asprintf("%s.tmp-XXXXXX", path);
  int rc = -1;
  if (text && tmp) {
    int fd = mkstemp(tmp);
    if (fd >= 0) {
      size_t len = strlen(text), off = 0;
      ssize_t w = 0;
      while (off < len && (w = write(fd, text + off, len - off)) > 0)
        off += (size_t)w;
      int ok = off == len && fchmod(fd, 0600) == 0 && fsync(fd) == 0;
      ok = close(fd) == 0 && ok;
      if (ok && rename(tmp, path) == 0) {
        rc = 0;
        /* The rename itself, on the disk too. */
        char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
        if (slash) {
          *slash = '\0';
          int dfd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
          if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
          }
        }
        free(dir);
      } else {
        unlink(tmp);
      }
    }
  }
  kn_secure_free_str(text);
  free(tmp);
  return rc;
}

/* Takes the lock beside the cache file (PATH.lock, flock) that keeps two
 * processes from refreshing one token at once: a refresh token may be
 * good for one use only.  Waits up to LOCK_WAIT_MS; the descriptor to
 * unlock_cache(), or -1 when there is no lock (then the refresh goes on
 * without it). */
static int lock_cache(kn_creds_ctx_t *ctx, const sso_conf_t *c,
                      const char *path) {
  char *name = kn_asprintf("%s.lock", path);
  int fd =
      name ? open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
  free(name);
  if (fd < 0) return -1;
  for (int waited = 0;; waited += 50) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    if (errno != EWOULDBLOCK && errno != EINTR) break;
    if (waited >= LOCK_WAIT_MS) {
      kn_warn(ctx->log, FAC,
              "%s: another process has held the token cache's lock for %d "
              "s: refreshing without it",
              c->what, LOCK_WAIT_MS / 1000);
      break;
    }
    kn_sleep_ms(50);
  }
  close(fd);
  return -1;
}

static void unlock_cache(int fd) {
  if (fd >= 0) close(fd); /* releases the flock */
}

/* SSO-OIDC CreateToken with the cached refresh token; on success updates
 * doc (access token, expiry, a new refresh token) and returns 0. */
static int refresh_token(kn_creds_ctx_t *ctx, const sso_conf_t *c,
                         json_t *doc) {
  const char *rt = jstr(doc, "refreshToken"), *cid = jstr(doc, "clientId");
  const char *cs = jstr(doc, "clientSecret"),
             *reg = jstr(doc, "registrationExpiresAt");
  int64_t reg_exp = 0;
  if (!rt || !cid || !cs || !reg || kn_iso8601_parse(reg, &reg_exp) ||
      reg_exp <= kn_wall_ms()) {
    kn_info(
        ctx->log, FAC, "%s: the cached token cannot be refreshed (%s)", c->what,
        !rt || !cid || !cs || !reg ? "no refresh token or client registration"
                                   : "the client registration has expired");
    return -1;
  }
  char *url =
      ctx->sso_oidc_endpoint
          ? kn_asprintf("%s%stoken", ctx->sso_oidc_endpoint,
                        ends_slash(ctx->sso_oidc_endpoint) ? "" : "/")
          : kn_asprintf("https://oidc.%s.amazonaws.com/token", c->region);
  json_t *req_doc =
      json_pack("{s:s, s:s, s:s, s:s}", "clientId", cid, "clientSecret", cs,
                "grantType", "refresh_token", "refreshToken", rt);
  char *body = req_doc ? json_dumps(req_doc, JSON_COMPACT) : NULL;
  free_json(req_doc);
  int rc = -1;
  if (url && body) {
    const char *headers[] = {"Content-Type: application/json",
                             "Accept: application/json", ctx->user_agent_header,
                             NULL};
    kn_http_req_t req = {0};
    req.method = "POST";
    req.url = url;
    req.headers = headers;
    req.body = body;
    req.body_len = strlen(body);
    req.timeout_ms = ctx->request_timeout_ms;
    kn_http_resp_t resp;
    if (kn_creds_http(ctx, &req, SSO_ATTEMPTS, &resp) != KN_ERR_NO_ERROR) {
      kn_warn(ctx->log, FAC, "%s: refreshing the token: %s", c->what,
              kn_error_string(resp.error));
    } else if (resp.status != 200) {
      /* The error body is {"error": "invalid_grant", ...}: no secrets. */
      char *snip =
          kn_creds_snippet(resp.body.p ? resp.body.p : "", resp.body.len, 200);
      kn_warn(ctx->log, FAC,
              "%s: refreshing the token: SSO-OIDC CreateToken: HTTP %d %s",
              c->what, resp.status, snip ? snip : "");
      free(snip);
    } else {
      json_t *r =
          json_loadb(resp.body.p ? resp.body.p : "", resp.body.len, 0, NULL);
      const char *at = jstr(r, "accessToken");
      json_t *ein = json_object_get(r, "expiresIn");
      if (at && json_is_integer(ein) && json_integer_value(ein) > 0) {
        char exp[21];
        kn_iso8601_format(
            kn_wall_ms() + (int64_t)json_integer_value(ein) * 1000, exp);
        set_secret(doc, "accessToken", at);
        json_object_set_new(doc, "expiresAt", json_string(exp));
        const char *nrt = jstr(r, "refreshToken");
        if (nrt) set_secret(doc, "refreshToken", nrt);
        rc = 0;
      } else {
        kn_warn(ctx->log, FAC,
                "%s: refreshing the token: SSO-OIDC CreateToken answered "
                "without accessToken or expiresIn",
                c->what);
      }
      free_json(r);
    }
    if (resp.body.p) kn_secure_wipe(resp.body.p, resp.body.len);
    kn_http_resp_clear(&resp);
  }
  kn_secure_free_str(body);
  free(url);
  return rc;
}

/* Reads and checks the token cache at path into *doc; 0, or -1 with
 * *errp. */
static int read_cache(const sso_conf_t *c, const char *path, const char *shown,
                      json_t **doc, int64_t *expires, kn_error_t **errp) {
  kn_buf_t text = KN_BUF_INIT;
  *doc = NULL;
  int rc = kn_file_read(path, MAX_CACHE_FILE, &text);
  if (rc == ENOENT) {
    *errp =
        kn_error_new(KN_ERR__CREDENTIALS, "%s: no cached token (%s): run `%s`",
                     c->what, shown, c->login);
  } else if (rc) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS, "%s: cannot read %s: %s", c->what,
                         shown, kn_file_strerror(rc));
  } else {
    json_error_t jerr;
    *doc = json_loadb(text.p ? text.p : "", text.len, 0, &jerr);
    const char *at = jstr(*doc, "accessToken"), *ea = jstr(*doc, "expiresAt");
    if (!json_is_object(*doc) || !at || !ea || kn_iso8601_parse(ea, expires)) {
      *errp = kn_error_new(
          KN_ERR__CREDENTIALS,
          "%s: %s is not a token cache (accessToken and expiresAt): run `%s`",
          c->what, shown, c->login);
      rc = -1;
    }
  }
  if (text.p) kn_secure_wipe(text.p, text.len);
  kn_buf_free(&text);
  if (rc) {
    free_json(*doc);
    *doc = NULL;
    return -1;
  }
  return 0;
}

/* The access token to use (a copy, caller wipes and frees), refreshed
 * when it is about to expire and can be. */
static char *load_token(kn_creds_ctx_t *ctx, const sso_conf_t *c,
                        kn_error_t **errp) {
  char *path = cache_path(ctx, c);
  if (!path) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS,
                         "%s: no home directory for ~/.aws/sso/cache", c->what);
    return NULL;
  }
  char *disp = kn_path_display(path);
  const char *shown = disp ? disp : path;
  json_t *doc = NULL;
  char *token = NULL;
  int64_t expires = 0;
  if (read_cache(c, path, shown, &doc, &expires, errp)) goto out;
  if (c->session && expires - kn_wall_ms() < TOKEN_REFRESH_MS) {
    /* Under the lock, and from the file as it is then: another process
     * may have refreshed it meanwhile. */
    int lock = lock_cache(ctx, c, path);
    json_t *now = NULL;
    kn_error_t *e = NULL;
    if (read_cache(c, path, shown, &now, &expires, &e) == 0) {
      free_json(doc);
      doc = now;
    }
    kn_error_destroy(e);
    if (expires - kn_wall_ms() < TOKEN_REFRESH_MS &&
        refresh_token(ctx, c, doc) == 0) {
      if (write_cache(path, doc))
        kn_warn(ctx->log, FAC,
                "%s: could not rewrite %s with the refreshed token", c->what,
                shown);
      else
        kn_info(ctx->log, FAC, "%s: token refreshed", c->what);
      kn_iso8601_parse(jstr(doc, "expiresAt"), &expires);
    }
    unlock_cache(lock);
  }
  const char *at = jstr(doc, "accessToken");
  if (expires <= kn_wall_ms()) {
    char when[21];
    *errp = kn_error_new(
        KN_ERR__CREDENTIALS, "%s: the cached token expired at %s%s: run `%s`",
        c->what, kn_iso8601_format(expires, when),
        c->session ? " and could not be refreshed" : "", c->login);
    goto out;
  }
  for (const char *p = at; *p; p++)
    if ((unsigned char)*p < ' ' || *p == 0x7f) {
      *errp = kn_error_new(
          KN_ERR__CREDENTIALS,
          "%s: the cached token holds control characters: run `%s`", c->what,
          c->login);
      goto out;
    }
  if (!(token = strdup(at)))
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
out:
  free_json(doc);
  free(disp);
  free(path);
  return token;
}

static kn_creds_res_t parse_role_creds(const kn_http_resp_t *resp,
                                       const sso_conf_t *c, kn_creds_t *out,
                                       kn_error_t **errp) {
  json_t *doc =
      json_loadb(resp->body.p ? resp->body.p : "", resp->body.len, 0, NULL);
  json_t *rc = json_object_get(doc, "roleCredentials");
  const char *id = jstr(rc, "accessKeyId"), *sk = jstr(rc, "secretAccessKey");
  const char *st = jstr(rc, "sessionToken");
  json_t *exp = json_object_get(rc, "expiration");
  kn_creds_res_t r = KN_CREDS_FAILED;
  char what[400];
  snprintf(what, sizeof(what), "%s: SSO GetRoleCredentials", c->what);
  if (!id || !sk || !st || !json_is_integer(exp)) {
    *errp =
        kn_error_new(KN_ERR__BAD_MSG,
                     "%s: the answer has no roleCredentials with accessKeyId, "
                     "secretAccessKey, sessionToken and expiration",
                     what);
  } else if (kn_creds_set_static(out, id, sk, st, KN_CREDS_SRC_SSO, what,
                                 errp) == 0) {
    out->expires_ms = (int64_t)json_integer_value(exp);
    r = KN_CREDS_FOUND;
  }
  free_json(doc);
  return r;
}

kn_creds_res_t kn_creds_sso(kn_creds_ctx_t *ctx, const kn_aws_profile_t *pf,
                            kn_creds_t *out, kn_error_t **errp) {
  sso_conf_t c;
  kn_creds_res_t r = load_conf(pf, &c, errp);
  if (r != KN_CREDS_FOUND) return r;
  char *token = load_token(ctx, &c, errp);
  if (!token) return KN_CREDS_FAILED;
  kn_buf_t url = KN_BUF_INIT;
  char *auth = kn_asprintf("x-amz-sso_bearer_token: %s", token);
  kn_secure_free_str(token);
  int fail = !auth;
  if (ctx->sso_endpoint)
    fail |= kn_buf_printf(&url, "%s%sfederation/credentials?account_id=",
                          ctx->sso_endpoint,
                          ends_slash(ctx->sso_endpoint) ? "" : "/") != 0;
  else
    fail |= kn_buf_printf(&url,
                          "https://portal.sso.%s.amazonaws.com/federation/"
                          "credentials?account_id=",
                          c.region) != 0;
  fail = fail || url_escape(&url, c.account) ||
         kn_buf_append_str(&url, "&role_name=") || url_escape(&url, c.role) ||
         kn_buf_append_char(&url, '\0');
  r = KN_CREDS_FAILED;
  if (fail) {
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    goto out;
  }
  const char *headers[] = {auth, "Accept: application/json",
                           ctx->user_agent_header, NULL};
  kn_http_req_t req = {0};
  req.method = "GET";
  req.url = url.p;
  req.headers = headers;
  req.timeout_ms = ctx->request_timeout_ms;
  kn_http_resp_t resp;
  if (kn_creds_http(ctx, &req, SSO_ATTEMPTS, &resp) != KN_ERR_NO_ERROR) {
    *errp = kn_error_prefix(resp.error, "%s: SSO GetRoleCredentials", c.what);
    resp.error = NULL;
  } else if (resp.status == 401 || resp.status == 403) {
    *errp = kn_error_new(
        KN_ERR__CREDENTIALS,
        "%s: SSO GetRoleCredentials: the token was refused (HTTP %d%s%s): "
        "run `%s`",
        c.what, resp.status, resp.error_type ? " " : "",
        resp.error_type ? resp.error_type : "", c.login);
  } else if (resp.status != 200) {
    char *snip =
        kn_creds_snippet(resp.body.p ? resp.body.p : "", resp.body.len, 200);
    *errp = kn_error_new(
        KN_ERR__CREDENTIALS, "%s: SSO GetRoleCredentials: HTTP %d%s%s", c.what,
        resp.status, snip && *snip ? ": " : "", snip ? snip : "");
    free(snip);
  } else {
    r = parse_role_creds(&resp, &c, out, errp);
  }
  if (resp.body.p) kn_secure_wipe(resp.body.p, resp.body.len);
  kn_http_resp_clear(&resp);
out:
  kn_secure_free_str(auth);
  kn_buf_free(&url);
  return r;
}

kn_creds_res_t kn_creds_from_sso(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                 kn_error_t **errp) {
  return kn_creds_sso(ctx, ctx->profile, out, errp);
}
