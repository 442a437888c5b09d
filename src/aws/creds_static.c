/* Static keys: explicit properties and the environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/creds_int.h"
#include "core/error.h"

static int has_ctl(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < ' ' || *s == 0x7f) return 1;
  return 0;
}

int kn_creds_set_static(kn_creds_t *out, const char *id, const char *secret,
                        const char *token, const char *source, const char *what,
                        kn_error_t **errp) {
  if (!id || !*id || !secret || !*secret) {
    *errp =
        kn_error_new(KN_ERR__CREDENTIALS, "%s: %s is set without %s", what,
                     id && *id ? "an access key id" : "a secret access key",
                     id && *id ? "a secret access key" : "an access key id");
    return -1;
  }
  /* These end up in HTTP headers. */
  if (has_ctl(id) || has_ctl(secret) || (token && has_ctl(token))) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS,
                         "%s: the keys contain control characters", what);
    return -1;
  }
  memset(out, 0, sizeof(*out));
  out->access_key_id = strdup(id);
  out->secret_access_key = strdup(secret);
  out->session_token = token && *token ? strdup(token) : NULL;
  out->source = source;
  if (!out->access_key_id || !out->secret_access_key ||
      (token && *token && !out->session_token)) {
    kn_creds_clear(out);
    *errp = kn_error_new(KN_ERR__NOMEM, "out of memory");
    return -1;
  }
  return 0;
}

kn_creds_res_t kn_creds_from_properties(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                        kn_error_t **errp) {
  if (!ctx->access_key_id && !ctx->secret_access_key) return KN_CREDS_ABSENT;
  return kn_creds_set_static(
             out, ctx->access_key_id, ctx->secret_access_key,
             ctx->session_token, KN_CREDS_SRC_PROPERTIES,
             "properties aws.access.key.id/aws.secret.access.key", errp)
             ? KN_CREDS_FAILED
             : KN_CREDS_FOUND;
}

kn_creds_res_t kn_creds_from_env(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                 kn_error_t **errp) {
  const char *id = ctx->env[KN_CENV_ACCESS_KEY_ID];
  const char *secret = ctx->env[KN_CENV_SECRET_ACCESS_KEY];
  if (!id && !secret) return KN_CREDS_ABSENT;
  return kn_creds_set_static(
             out, id, secret, ctx->env[KN_CENV_SESSION_TOKEN], KN_CREDS_SRC_ENV,
             "environment AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", errp)
             ? KN_CREDS_FAILED
             : KN_CREDS_FOUND;
}

kn_creds_res_t kn_creds_from_env_chain(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                       kn_error_t **errp) {
  if (ctx->env_keys_off && (ctx->env[KN_CENV_ACCESS_KEY_ID] ||
                            ctx->env[KN_CENV_SECRET_ACCESS_KEY])) {
    /* The AWS CLI's --profile: the profile's credentials, not these
     * (credential_source = Environment still reads them). */
    snprintf(ctx->note, sizeof(ctx->note),
             "not used: the profile property is set");
    return KN_CREDS_ABSENT;
  }
  return kn_creds_from_env(ctx, out, errp);
}
