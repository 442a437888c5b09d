/* The chain, its cache and refresh. */
#include "aws/creds.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/creds_int.h"
#include "aws/settings.h"
#include "core/error.h"
#include "util/clock.h"
#include "util/iso8601.h"
#include "util/rand.h"
#include "util/str.h"

#define FAC "creds"

const char *const kn_cenv_names[KN_CENV__COUNT] = {
    [KN_CENV_ACCESS_KEY_ID] = "AWS_ACCESS_KEY_ID",
    [KN_CENV_SECRET_ACCESS_KEY] = "AWS_SECRET_ACCESS_KEY",
    [KN_CENV_SESSION_TOKEN] = "AWS_SESSION_TOKEN",
    [KN_CENV_WEB_IDENTITY_TOKEN_FILE] = "AWS_WEB_IDENTITY_TOKEN_FILE",
    [KN_CENV_ROLE_ARN] = "AWS_ROLE_ARN",
    [KN_CENV_ROLE_SESSION_NAME] = "AWS_ROLE_SESSION_NAME",
    [KN_CENV_CONTAINER_RELATIVE_URI] = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    [KN_CENV_CONTAINER_FULL_URI] = "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    [KN_CENV_CONTAINER_TOKEN] = "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    [KN_CENV_CONTAINER_TOKEN_FILE] = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    [KN_CENV_IMDS_DISABLED] = "AWS_EC2_METADATA_DISABLED",
    [KN_CENV_IMDS_ENDPOINT] = "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    [KN_CENV_IMDS_ENDPOINT_MODE] = "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
    [KN_CENV_IMDS_V1_DISABLED] = "AWS_EC2_METADATA_V1_DISABLED",
};

static const struct step {
  const char *name; /* for "tried ..." in the final message */
  kn_creds_fetch_fn *fetch;
} chain[] = {
    {"properties (aws.access.key.id)", kn_creds_from_properties},
    {"environment (AWS_ACCESS_KEY_ID)", kn_creds_from_env},
    {"web identity (AWS_WEB_IDENTITY_TOKEN_FILE)", kn_creds_from_web_identity},
    {"shared files", kn_creds_from_profile},
    {"container (AWS_CONTAINER_CREDENTIALS_*_URI)", kn_creds_from_container},
    {"EC2 instance metadata", kn_creds_from_imds},
};
#define CHAIN_LEN (sizeof(chain) / sizeof(chain[0]))

struct kn_creds_provider {
  pthread_mutex_t lock;
  kn_creds_ctx_t ctx;
  kn_creds_t cached;       /* valid when cached.access_key_id is set */
  const struct step *winner;
  int64_t next_attempt_mono_ms;
};

static void wipe_free(char *s) {
  if (!s) return;
  explicit_bzero(s, strlen(s));
  free(s);
}

void kn_creds_clear(kn_creds_t *c) {
  if (!c) return;
  free(c->access_key_id);
  wipe_free(c->secret_access_key);
  wipe_free(c->session_token);
  memset(c, 0, sizeof(*c));
}

int kn_creds_copy(kn_creds_t *dst, const kn_creds_t *src) {
  dst->access_key_id = kn_strdup0(src->access_key_id);
  dst->secret_access_key = kn_strdup0(src->secret_access_key);
  dst->session_token = kn_strdup0(src->session_token);
  dst->expires_ms = src->expires_ms;
  dst->source = src->source;
  if ((src->access_key_id && !dst->access_key_id) ||
      (src->secret_access_key && !dst->secret_access_key) ||
      (src->session_token && !dst->session_token)) {
    kn_creds_clear(dst);
    return -1;
  }
  return 0;
}

char *kn_creds_snippet(const char *p, size_t len, size_t max) {
  size_t n = len < max ? len : max;
  char *s = malloc(n + 4);
  if (!s) return NULL;
  for (size_t i = 0; i < n; i++)
    s[i] = (p[i] >= ' ' && p[i] < 0x7f) ? p[i] : p[i] == '\n' ? ' ' : '?';
  strcpy(s + n, len > max ? "..." : "");
  return s;
}

kn_err_t kn_creds_http(kn_creds_ctx_t *ctx, const kn_http_req_t *req,
                       int attempts, kn_http_resp_t *resp) {
  if (attempts < 1) attempts = 1;
  kn_err_t rc = KN_ERR_NO_ERROR;
  for (int i = 0; i < attempts; i++) {
    if (i) {
      kn_http_resp_clear(resp);
      /* Short and jittered: metadata services answer quickly or never. */
      kn_sleep_ms(100 * (int64_t)i + (int64_t)kn_rand_below(100));
    }
    rc = kn_http_perform_blocking(&ctx->http, req, resp);
    if (rc == KN_ERR__NOMEM) break;
    if (rc == KN_ERR_NO_ERROR && resp->status < 500) break;
    kn_dbg(ctx->log, FAC, "%s: attempt %d of %d failed: %s", req->url, i + 1,
           attempts, resp->error ? kn_error_string(resp->error) : "HTTP 5xx");
  }
  return rc;
}

static void ctx_clear(kn_creds_ctx_t *ctx) {
  free(ctx->access_key_id);
  wipe_free(ctx->secret_access_key);
  wipe_free(ctx->session_token);
  kn_aws_profile_destroy(ctx->profile);
  free(ctx->region);
  free(ctx->sts_endpoint);
  free(ctx->user_agent_header);
  free(ctx->ca_file);
  for (int i = 0; i < KN_CENV__COUNT; i++) free(ctx->env[i]);
  wipe_free(ctx->imds_token);
  memset(ctx, 0, sizeof(*ctx));
}

static kn_error_t *ctx_init(kn_creds_ctx_t *ctx, const kn_aws_settings_t *s) {
  memset(ctx, 0, sizeof(*ctx));
  int fail = 0;
  fail |= s->access_key_id && !(ctx->access_key_id = strdup(s->access_key_id));
  fail |= s->secret_access_key &&
          !(ctx->secret_access_key = strdup(s->secret_access_key));
  fail |= s->session_token && !(ctx->session_token = strdup(s->session_token));
  fail |= s->region && !(ctx->region = strdup(s->region));
  fail |= s->sts_endpoint && !(ctx->sts_endpoint = strdup(s->sts_endpoint));
  fail |= !(ctx->user_agent_header =
                kn_asprintf("User-Agent: %s", s->user_agent ? s->user_agent
                                                            : "libkinesis"));
  fail |= s->ca_file && !(ctx->ca_file = strdup(s->ca_file));
  for (int i = 0; i < KN_CENV__COUNT; i++) {
    const char *v = getenv(kn_cenv_names[i]);
    fail |= v && *v && !(ctx->env[i] = strdup(v));
  }
  if (fail) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  ctx->http = s->http;
  ctx->http.ca_file = ctx->ca_file;
  ctx->http.max_response_bytes = s->credential_response_max_bytes
                                     ? s->credential_response_max_bytes
                                     : KN_CREDS_RESPONSE_MAX_DEFAULT;
  ctx->log = s->http.log;
  ctx->request_timeout_ms = s->request_timeout_ms > 0 ? s->request_timeout_ms : 30000;
  ctx->metadata_timeout_ms = s->metadata_timeout_ms > 0 ? s->metadata_timeout_ms : 1000;
  ctx->metadata_max_attempts = s->metadata_max_attempts > 0 ? s->metadata_max_attempts : 2;
  ctx->process_timeout_ms =
      s->credential_process_timeout_ms > 0 ? s->credential_process_timeout_ms : 60000;
  const char *profile = s->profile ? s->profile : "default";
  kn_error_t *e = kn_aws_profile_load(s->config_file, s->credentials_file,
                                      profile, &ctx->profile);
  if (!ctx->profile && !e) e = kn_error_new(KN_ERR__NOMEM, "out of memory");
  return e;
}

kn_creds_provider_t *kn_creds_provider_new(const kn_aws_settings_t *s,
                                           kn_error_t **errp) {
  *errp = NULL;
  kn_creds_provider_t *p = calloc(1, sizeof(*p));
  if (!p) {
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    return NULL;
  }
  if (pthread_mutex_init(&p->lock, NULL) != 0) {
    free(p);
    *errp = kn_error_new(KN_ERR__FAIL, "cannot create a mutex");
    return NULL;
  }
  kn_error_t *e = ctx_init(&p->ctx, s);
  if (e) {
    *errp = kn_error_prefix(e, "credentials");
    kn_creds_provider_destroy(p);
    return NULL;
  }
  return p;
}

void kn_creds_provider_destroy(kn_creds_provider_t *p) {
  if (!p) return;
  ctx_clear(&p->ctx);
  kn_creds_clear(&p->cached);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

/* Runs one provider; NULL error and *found tell how it went. */
static kn_error_t *run_step(kn_creds_provider_t *p, const struct step *st,
                            kn_creds_t *out, int *found) {
  *found = 0;
  kn_error_t *e = NULL;
  p->ctx.note[0] = '\0';
  kn_creds_res_t r = st->fetch(&p->ctx, out, &e);
  if (r == KN_CREDS_FOUND) {
    *found = 1;
    return NULL;
  }
  kn_creds_clear(out);
  if (r == KN_CREDS_ABSENT) return NULL;
  return e ? e : kn_error_new(KN_ERR__NOMEM, "out of memory");
}

static kn_error_t *walk_chain(kn_creds_provider_t *p, kn_creds_t *out) {
  char tried[1024] = "";
  size_t tl = 0;
  for (size_t i = 0; i < CHAIN_LEN; i++) {
    int found;
    kn_error_t *e = run_step(p, &chain[i], out, &found);
    if (e) return e;
    if (found) {
      p->winner = &chain[i];
      return NULL;
    }
    int n = snprintf(tried + tl, sizeof(tried) - tl, "%s%s%s%s%s", tl ? "; " : "",
                     chain[i].name, p->ctx.note[0] ? " (" : "", p->ctx.note,
                     p->ctx.note[0] ? ")" : "");
    if (n > 0) tl = (size_t)n < sizeof(tried) - tl ? tl + (size_t)n : sizeof(tried) - 1;
  }
  return kn_error_new(KN_ERR__CREDENTIALS,
                      "no AWS credentials found for profile \"%s\"; tried %s",
                      p->ctx.profile->name, tried);
}

/* Fetches again through the provider that gave the cached value; the
 * whole chain if that one has nothing now. */
static kn_error_t *refetch(kn_creds_provider_t *p, kn_creds_t *out) {
  if (p->winner) {
    int found;
    kn_error_t *e = run_step(p, p->winner, out, &found);
    if (e || found) return e;
  }
  return walk_chain(p, out);
}

static void log_new(kn_creds_provider_t *p, const kn_creds_t *c) {
  char when[21];
  kn_info(p->ctx.log, FAC, "credentials from %s: key %s, %s%s", c->source,
          c->access_key_id, c->expires_ms ? "expiring at " : "not expiring",
          c->expires_ms ? kn_iso8601_format(c->expires_ms, when) : "");
}

kn_error_t *kn_creds_get(kn_creds_provider_t *p, kn_creds_t *out) {
  pthread_mutex_lock(&p->lock);
  int64_t now = kn_wall_ms();
  int have = p->cached.access_key_id != NULL;
  int64_t left = !have ? 0 : p->cached.expires_ms ? p->cached.expires_ms - now
                                                  : INT64_MAX;
  int usable = have && left > KN_CREDS_MIN_VALID_MS;
  kn_error_t *e = NULL;
  if (usable && (left > KN_CREDS_REFRESH_MS || kn_mono_ms() < p->next_attempt_mono_ms))
    goto copy;

  kn_creds_t fresh = {0};
  e = have ? refetch(p, &fresh) : walk_chain(p, &fresh);
  if (!e && fresh.expires_ms && fresh.expires_ms - now <= KN_CREDS_MIN_VALID_MS) {
    char when[21];
    e = kn_error_new(KN_ERR__CREDENTIALS,
                     "credentials from %s expire at %s, too soon to use "
                     "(is the clock right?)",
                     fresh.source, kn_iso8601_format(fresh.expires_ms, when));
    kn_creds_clear(&fresh);
  }
  if (!e) {
    kn_creds_clear(&p->cached);
    p->cached = fresh;
    p->next_attempt_mono_ms = kn_mono_ms() + KN_CREDS_REFRESH_INTERVAL_MS;
    log_new(p, &p->cached);
    goto copy;
  }
  if (usable) {
    char when[21];
    kn_warn(p->ctx.log, FAC,
            "refreshing credentials failed: %s; keeping those from %s until "
            "%s",
            kn_error_string(e) ? kn_error_string(e) : "out of memory",
            p->cached.source, kn_iso8601_format(p->cached.expires_ms, when));
    kn_error_destroy(e);
    e = NULL;
    p->next_attempt_mono_ms = kn_mono_ms() + KN_CREDS_RETRY_AFTER_MS;
    goto copy;
  }
  pthread_mutex_unlock(&p->lock);
  return e ? e : kn_error_new(KN_ERR__NOMEM, "out of memory");

copy:
  if (kn_creds_copy(out, &p->cached)) e = kn_error_new(KN_ERR__NOMEM, "out of memory");
  pthread_mutex_unlock(&p->lock);
  return e;
}
