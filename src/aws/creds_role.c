/* role_arn with source_profile or credential_source: STS AssumeRole signed
 * with the source's credentials, as botocore's AssumeRoleProvider does.
 * A source profile with keys (or no role of its own) gives its credentials
 * through its own providers; one with a role is assumed first, and so on
 * down the chain.  A profile may name itself as its source only when it
 * has keys; any other repeat is a loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/creds_int.h"
#include "core/error.h"
#include "util/str.h"

#define MAX_CHAIN 16

typedef struct visited {
  const char *names[MAX_CHAIN];
  int n;
} visited_t;

static const char *get(const kn_aws_profile_t *pf, const char *key, char *where,
                       size_t size) {
  const char *v = kn_aws_profile_get(pf, key, where, size);
  return v && *v ? v : NULL;
}

static int has_keys(const kn_aws_profile_t *pf) {
  return get(pf, "aws_access_key_id", NULL, 0) ||
         get(pf, "aws_secret_access_key", NULL, 0);
}

/* A role this provider assumes (web identity roles go elsewhere). */
static int has_role(const kn_aws_profile_t *pf) {
  return get(pf, "role_arn", NULL, 0) &&
         !get(pf, "web_identity_token_file", NULL, 0);
}

static kn_creds_res_t from_source(kn_creds_ctx_t *ctx, const char *csrc,
                                  const char *what, kn_creds_t *out,
                                  kn_error_t **errp) {
  kn_creds_fetch_fn *fetch = NULL;
  const char *needs = "";
  if (strcmp(csrc, "Environment") == 0) {
    fetch = kn_creds_from_env;
    needs = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY";
  } else if (strcmp(csrc, "Ec2InstanceMetadata") == 0) {
    fetch = kn_creds_from_imds;
    needs = "instance metadata (AWS_EC2_METADATA_DISABLED is set)";
  } else if (strcmp(csrc, "EcsContainer") == 0) {
    fetch = kn_creds_from_container;
    needs = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI";
  } else {
    *errp = kn_error_new(
        KN_ERR__CREDENTIALS,
        "%s: credential_source \"%.60s\" is not one of Environment, "
        "Ec2InstanceMetadata, EcsContainer",
        what, csrc);
    return KN_CREDS_FAILED;
  }
  kn_creds_res_t r = fetch(ctx, out, errp);
  if (r == KN_CREDS_ABSENT) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS,
                         "%s: credential_source %s found no "
                         "credentials: it needs %s",
                         what, csrc, needs);
    return KN_CREDS_FAILED;
  }
  if (r == KN_CREDS_FAILED && *errp)
    *errp = kn_error_prefix(*errp, "%s: credential_source %s", what, csrc);
  return r;
}

/* "a -> b -> a" for the loop message. */
static void path_of(const visited_t *v, const char *last, char *buf,
                    size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i <= v->n; i++) {
    const char *n = i < v->n ? v->names[i] : last;
    int w = snprintf(buf + len, size - len, "%s%.60s", i ? " -> " : "", n);
    if (w < 0 || (size_t)w >= size - len) break;
    len += (size_t)w;
  }
}

static kn_creds_res_t assume(kn_creds_ctx_t *ctx, const kn_aws_profile_t *pf,
                             visited_t *v, kn_creds_t *out, kn_error_t **errp) {
  char where[256], what[400];
  kn_creds_role_t role = {0};
  role.role_arn = get(pf, "role_arn", where, sizeof(where));
  snprintf(what, sizeof(what), "role_arn of profile \"%.100s\" (%.200s)",
           pf->name, where);
  const char *src = get(pf, "source_profile", NULL, 0);
  const char *csrc = get(pf, "credential_source", NULL, 0);
  if (src && csrc) {
    *errp = kn_error_new(
        KN_ERR__CREDENTIALS,
        "%s: the profile has both source_profile and credential_source", what);
    return KN_CREDS_FAILED;
  }
  if (!src && !csrc) {
    *errp = kn_error_new(
        KN_ERR__CREDENTIALS,
        "%s: role_arn needs web_identity_token_file, source_profile "
        "or credential_source",
        what);
    return KN_CREDS_FAILED;
  }
  if (get(pf, "mfa_serial", NULL, 0)) {
    *errp = kn_error_new(
        KN_ERR__CREDENTIALS,
        "%s: mfa_serial is not supported (it needs a code typed at a "
        "terminal); use a profile without it, or credential_process",
        what);
    return KN_CREDS_FAILED;
  }
  role.session_name = get(pf, "role_session_name", NULL, 0);
  role.external_id = get(pf, "external_id", NULL, 0);
  char dwhere[256];
  const char *dur = get(pf, "duration_seconds", dwhere, sizeof(dwhere));
  if (dur) {
    long long d;
    if (kn_str_to_i64(dur, 1, 43200, &d) || d < 900) {
      *errp = kn_error_new(
          KN_ERR__CONF,
          "duration_seconds = \"%.40s\" of profile \"%.100s\" (%.200s): "
          "expected seconds from 900 to 43200",
          dur, pf->name, dwhere);
      return KN_CREDS_FAILED;
    }
    role.duration_s = (int)d;
  }

  kn_creds_t source = {0};
  kn_creds_res_t r;
  if (csrc) {
    r = from_source(ctx, csrc, what, &source, errp);
  } else {
    kn_aws_profile_t sp;
    kn_aws_profile_view(ctx->profile, src, &sp);
    if (!kn_aws_profile_exists(&sp)) {
      *errp = kn_error_new(
          KN_ERR__CREDENTIALS,
          "%s: source_profile \"%.100s\" is in neither shared file", what, src);
      return KN_CREDS_FAILED;
    }
    int seen = 0;
    for (int i = 0; i < v->n; i++) seen |= strcmp(v->names[i], src) == 0;
    if ((seen && (strcmp(src, pf->name) != 0 || !has_keys(&sp))) ||
        v->n >= MAX_CHAIN) {
      char path[600];
      path_of(v, src, path, sizeof(path));
      *errp =
          kn_error_new(KN_ERR__CREDENTIALS, "%s: source_profile makes a %s: %s",
                       what, seen ? "loop" : "chain too long", path);
      return KN_CREDS_FAILED;
    }
    v->names[v->n++] = src;
    if (has_keys(&sp) || !has_role(&sp)) {
      r = kn_creds_profile_chain(ctx, &sp, 0, &source, errp);
      if (r == KN_CREDS_ABSENT) {
        *errp = kn_error_new(KN_ERR__CREDENTIALS,
                             "%s: source_profile \"%.100s\" has no credentials",
                             what, src);
        r = KN_CREDS_FAILED;
      }
    } else {
      r = assume(ctx, &sp, v, &source, errp);
    }
  }
  if (r == KN_CREDS_FOUND) {
    kn_dbg(ctx->log, "creds",
           "%s: assuming %s with credentials from %s (key %s)", what,
           role.role_arn, source.source, source.access_key_id);
    r = kn_creds_assume_role(ctx, &role, &source, what, out, errp);
  }
  kn_creds_clear(&source);
  return r;
}

kn_creds_res_t kn_creds_from_role(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                  kn_error_t **errp) {
  const kn_aws_profile_t *pf = ctx->profile;
  if (!has_role(pf)) return KN_CREDS_ABSENT;
  visited_t v = {{pf->name}, 1};
  return assume(ctx, pf, &v, out, errp);
}
