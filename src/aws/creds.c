/* The chain, its cache and refresh. */
#include "aws/creds.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/creds_int.h"
#include "aws/creds_provider.h"
#include "aws/settings.h"
#include "core/error.h"
#include "util/clock.h"
#include "util/iso8601.h"
#include "util/rand.h"
#include "util/secure.h"
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
    {"environment (AWS_ACCESS_KEY_ID)", kn_creds_from_env_chain},
    {"role (role_arn with source_profile or credential_source)",
     kn_creds_from_role},
    {"web identity (AWS_WEB_IDENTITY_TOKEN_FILE, web_identity_token_file)",
     kn_creds_from_web_identity},
    {"IAM Identity Center (sso_account_id, sso_role_name)", kn_creds_from_sso},
    {"shared files", kn_creds_from_profile},
    {"container (AWS_CONTAINER_CREDENTIALS_*_URI)", kn_creds_from_container},
    {"EC2 instance metadata", kn_creds_from_imds},
};
#define CHAIN_LEN (sizeof(chain) / sizeof(chain[0]))

/* Lock held: the provider's monotonic clock. */
static int64_t mono_ms(const kn_creds_provider_t *p) {
  return (p->mono_frozen ? p->mono_frozen_ms : kn_mono_ms()) + p->mono_ahead_ms;
}

static void wipe_free(char *s) { kn_secure_free_str(s); }

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
  free(ctx->sso_endpoint);
  free(ctx->sso_oidc_endpoint);
  free(ctx->sso_cache_dir);
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
  fail |= s->sso_endpoint && !(ctx->sso_endpoint = strdup(s->sso_endpoint));
  fail |= s->sso_oidc_endpoint &&
          !(ctx->sso_oidc_endpoint = strdup(s->sso_oidc_endpoint));
  fail |= s->sso_cache_dir && !(ctx->sso_cache_dir = strdup(s->sso_cache_dir));
  fail |=
      !(ctx->user_agent_header = kn_asprintf(
            "User-Agent: %s", s->user_agent ? s->user_agent : "libkinesis"));
  fail |= s->ca_file && !(ctx->ca_file = strdup(s->ca_file));
  for (int i = 0; i < KN_CENV__COUNT; i++) {
    const char *v = getenv(kn_cenv_names[i]);
    fail |= v && *v && !(ctx->env[i] = strdup(v));
  }
  if (fail) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  ctx->env_keys_off = s->profile_explicit;
  ctx->http = s->http;
  ctx->http.ca_file = ctx->ca_file;
  ctx->http.max_response_bytes = s->credential_response_max_bytes
                                     ? s->credential_response_max_bytes
                                     : KN_CREDS_RESPONSE_MAX_DEFAULT;
  ctx->log = s->http.log;
  ctx->request_timeout_ms =
      s->request_timeout_ms > 0 ? s->request_timeout_ms : 30000;
  ctx->metadata_timeout_ms =
      s->metadata_timeout_ms > 0 ? s->metadata_timeout_ms : 1000;
  ctx->metadata_max_attempts =
      s->metadata_max_attempts > 0 ? s->metadata_max_attempts : 2;
  ctx->process_timeout_ms = s->credential_process_timeout_ms > 0
                                ? s->credential_process_timeout_ms
                                : 60000;
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
  pthread_condattr_t ca;
  int ok = pthread_condattr_init(&ca) == 0;
  ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0;
  ok = ok && pthread_cond_init(&p->cond, &ca) == 0;
  pthread_condattr_destroy(&ca);
  if (!ok || pthread_mutex_init(&p->lock, NULL) != 0) {
    if (ok) pthread_cond_destroy(&p->cond);
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
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_broadcast(&p->cond);
  int started = p->started;
  pthread_mutex_unlock(&p->lock);
  /* A fetch under way is waited for: it ends within its own time-outs. */
  if (started) pthread_join(p->thread, NULL);
  ctx_clear(&p->ctx);
  kn_creds_clear(&p->cached);
  kn_error_destroy(p->last_err);
  pthread_cond_destroy(&p->cond);
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
    int n = snprintf(tried + tl, sizeof(tried) - tl, "%s%s%s%s%s",
                     tl ? "; " : "", chain[i].name, p->ctx.note[0] ? " (" : "",
                     p->ctx.note, p->ctx.note[0] ? ")" : "");
    if (n > 0)
      tl = (size_t)n < sizeof(tried) - tl ? tl + (size_t)n : sizeof(tried) - 1;
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

/* Lock held: the outcome of a fetch.  New credentials replace the cache;
 * a failure keeps usable ones (and waits before the next attempt), or
 * else is what waiters get. */
static void install(kn_creds_provider_t *p, kn_creds_t *fresh, kn_error_t *e) {
  int64_t now = kn_wall_ms();
  if (!e && fresh->expires_ms &&
      fresh->expires_ms - now <= KN_CREDS_MIN_VALID_MS) {
    char when[21];
    e = kn_error_new(KN_ERR__CREDENTIALS,
                     "credentials from %s expire at %s, too soon to use "
                     "(is the clock right?)",
                     fresh->source, kn_iso8601_format(fresh->expires_ms, when));
    kn_creds_clear(fresh);
    if (!e) e = kn_error_new(KN_ERR__NOMEM, "out of memory");
  }
  if (!e) {
    kn_creds_clear(&p->cached);
    p->cached = *fresh;
    memset(fresh, 0, sizeof(*fresh));
    kn_error_destroy(p->last_err);
    p->last_err = NULL;
    p->next_attempt_mono_ms = mono_ms(p) + KN_CREDS_REFRESH_INTERVAL_MS;
    log_new(p, &p->cached);
    return;
  }
  int64_t left = !p->cached.access_key_id ? 0
                 : p->cached.expires_ms   ? p->cached.expires_ms - now
                                          : INT64_MAX;
  if (left > KN_CREDS_MIN_VALID_MS) {
    char when[21];
    kn_warn(p->ctx.log, FAC,
            "refreshing credentials failed: %s; keeping those from %s until "
            "%s",
            kn_error_string(e) ? kn_error_string(e) : "out of memory",
            p->cached.source, kn_iso8601_format(p->cached.expires_ms, when));
    kn_error_destroy(e);
    p->next_attempt_mono_ms = mono_ms(p) + KN_CREDS_RETRY_AFTER_MS;
    return;
  }
  kn_creds_clear(&p->cached);
  kn_error_destroy(p->last_err);
  p->last_err = e ? e : kn_error_new(KN_ERR__NOMEM, "out of memory");
}

/* Lock held: how long the refresher may sleep before refreshing ahead of
 * expiry on its own; -1: until asked.  Credentials already inside the
 * refresh window are refreshed when used (at most once per
 * KN_CREDS_REFRESH_INTERVAL_MS), not in a loop of their own. */
static int64_t sleep_ms(int64_t refresh_at_wall) {
  if (!refresh_at_wall) return -1;
  int64_t ms = refresh_at_wall - kn_wall_ms();
  return ms > 0 ? ms : 0;
}

static void *refresher(void *arg) {
  kn_creds_provider_t *p = arg;
  int64_t refresh_at_wall = 0; /* 0: none planned */
  pthread_mutex_lock(&p->lock);
  while (!p->stop) {
    int64_t ms = sleep_ms(refresh_at_wall);
    if (!p->want && ms != 0) {
      if (ms < 0) {
        pthread_cond_wait(&p->cond, &p->lock);
      } else {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
          ts.tv_sec++;
          ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
      }
      continue;
    }
    p->want = 0;
    p->busy = 1;
    int have = p->cached.access_key_id != NULL;
    pthread_mutex_unlock(&p->lock);

    kn_creds_t fresh = {0};
    kn_error_t *e = have ? refetch(p, &fresh) : walk_chain(p, &fresh);

    pthread_mutex_lock(&p->lock);
    install(p, &fresh, e);
    kn_creds_clear(&fresh);
    int64_t exp = p->cached.expires_ms, now = kn_wall_ms();
    refresh_at_wall =
        p->cached.access_key_id && exp && exp - now > KN_CREDS_REFRESH_MS
            ? exp - KN_CREDS_REFRESH_MS + (int64_t)kn_rand_below(5000)
            : 0;
    p->busy = 0;
    p->done++;
    pthread_cond_broadcast(&p->cond);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* Lock held: asks the refresher for a fetch, starting it on first use
 * with every signal blocked (they belong to the application's threads). */
static kn_error_t *ask(kn_creds_provider_t *p) {
  if (!p->started) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&p->thread, NULL, refresher, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
      return kn_error_new(
          KN_ERR__FAIL, "credentials: cannot start a thread: %s", strerror(rc));
    p->started = 1;
  }
  p->want = 1;
  pthread_cond_broadcast(&p->cond);
  return NULL;
}

/* Lock held: copies the cached credentials if they are usable (1), asking
 * for a refresh in the background when they are due for one. */
static int from_cache(kn_creds_provider_t *p, kn_creds_t *out,
                      kn_error_t **errp) {
  *errp = NULL;
  if (!p->cached.access_key_id) return 0;
  int64_t left =
      p->cached.expires_ms ? p->cached.expires_ms - kn_wall_ms() : INT64_MAX;
  if (left <= KN_CREDS_MIN_VALID_MS) return 0;
  if (left <= KN_CREDS_REFRESH_MS && !p->busy && !p->want &&
      mono_ms(p) >= p->next_attempt_mono_ms) {
    kn_error_t *e = ask(p);
    if (e) {
      kn_warn(p->ctx.log, FAC, "%s", kn_error_string(e));
      kn_error_destroy(e);
    }
  }
  if (kn_creds_copy(out, &p->cached))
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
  return 1;
}

/* Lock held: the failure of the fetch a waiter waited for. */
static kn_error_t *failure(const kn_creds_provider_t *p) {
  if (p->last_err) return kn_error_copy(p->last_err);
  return kn_error_new(KN_ERR__CREDENTIALS, "credentials: none usable");
}

kn_error_t *kn_creds_get(kn_creds_provider_t *p, kn_creds_t *out) {
  kn_error_t *e = NULL;
  pthread_mutex_lock(&p->lock);
  if (from_cache(p, out, &e)) goto out;
  uint64_t ticket = p->done + 1;
  if (!p->busy && (e = ask(p)) != NULL) goto out;
  while (p->done < ticket && !p->stop) pthread_cond_wait(&p->cond, &p->lock);
  if (!from_cache(p, out, &e)) e = failure(p);
out:
  pthread_mutex_unlock(&p->lock);
  return e;
}

kn_error_t *kn_creds_get_nowait(kn_creds_provider_t *p, kn_creds_t *out,
                                uint64_t *ticket) {
  kn_error_t *e = NULL;
  pthread_mutex_lock(&p->lock);
  if (from_cache(p, out, &e)) {
    *ticket = 0;
  } else if (*ticket && p->done >= *ticket) {
    *ticket = 0;
    e = failure(p);
  } else {
    if (!*ticket) *ticket = p->done + 1;
    if (!p->busy && !p->want) e = ask(p);
  }
  pthread_mutex_unlock(&p->lock);
  return e;
}
