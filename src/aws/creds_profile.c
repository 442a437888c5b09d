/* Credentials from one profile of the shared files, in botocore's order:
 * web identity, IAM Identity Center (creds_sso.c), keys of the
 * credentials file, credential_process, keys of the config file. */
#include <stdio.h>
#include <string.h>

#include "aws/creds_int.h"
#include "core/error.h"

static const char *get(const kn_aws_profile_t *pf, const char *key, char *where,
                       size_t size) {
  const char *v = kn_aws_profile_get(pf, key, where, size);
  return v && *v ? v : NULL;
}

kn_creds_res_t kn_creds_web_identity_of(kn_creds_ctx_t *ctx,
                                        const kn_aws_profile_t *pf,
                                        int with_env, kn_creds_t *out,
                                        kn_error_t **errp) {
  /* Each setting from the environment first, then the profile, as
   * botocore reads them. */
  char where[256] = "";
  const char *file =
      with_env ? ctx->env[KN_CENV_WEB_IDENTITY_TOKEN_FILE] : NULL;
  int file_from_env = file != NULL;
  if (!file) file = get(pf, "web_identity_token_file", where, sizeof(where));
  if (!file) return KN_CREDS_ABSENT;
  char role_where[256] = "";
  const char *role = with_env ? ctx->env[KN_CENV_ROLE_ARN] : NULL;
  int role_from_env = role != NULL;
  if (!role) role = get(pf, "role_arn", role_where, sizeof(role_where));
  if (!role) {
    if (file_from_env)
      *errp = kn_error_new(
          KN_ERR__CREDENTIALS,
          "AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ROLE_ARN "
          "or role_arn in profile \"%.100s\"",
          pf->name);
    else
      *errp =
          kn_error_new(KN_ERR__CREDENTIALS,
                       "web_identity_token_file of profile \"%.100s\" (%.200s) "
                       "is set without role_arn",
                       pf->name, where);
    return KN_CREDS_FAILED;
  }
  const char *session = with_env ? ctx->env[KN_CENV_ROLE_SESSION_NAME] : NULL;
  if (!session) session = get(pf, "role_session_name", NULL, 0);
  char what[400];
  if (role_from_env)
    snprintf(what, sizeof(what),
             "web identity (role %.300s, from the environment)", role);
  else
    snprintf(what, sizeof(what), "role_arn of profile \"%.100s\" (%.200s)",
             pf->name, role_where);
  return kn_creds_web_identity(ctx, role, file, session, what, out, errp);
}

/* Keys of one file of the profile. */
static kn_creds_res_t keys_of(const kn_aws_profile_t *pf, int credentials,
                              kn_creds_t *out, kn_error_t **errp) {
  char where[256], what[400];
  const char *id = kn_aws_profile_get_file(pf, credentials, "aws_access_key_id",
                                           where, sizeof(where));
  if (!id || !*id) id = NULL;
  char swhere[256];
  const char *secret = kn_aws_profile_get_file(
      pf, credentials, "aws_secret_access_key", swhere, sizeof(swhere));
  if (secret && !*secret) secret = NULL;
  if (!id && !secret) return KN_CREDS_ABSENT;
  snprintf(what, sizeof(what), "static keys of profile \"%.100s\" (%.200s)",
           pf->name, id ? where : swhere);
  const char *token =
      kn_aws_profile_get_file(pf, credentials, "aws_session_token", NULL, 0);
  return kn_creds_set_static(out, id, secret, token, KN_CREDS_SRC_PROFILE, what,
                             errp)
             ? KN_CREDS_FAILED
             : KN_CREDS_FOUND;
}

kn_creds_res_t kn_creds_profile_files(kn_creds_ctx_t *ctx,
                                      const kn_aws_profile_t *pf,
                                      kn_creds_t *out, kn_error_t **errp) {
  kn_creds_res_t r = keys_of(pf, 1, out, errp);
  if (r != KN_CREDS_ABSENT) return r;
  char where[256], what[400];
  const char *cmd = get(pf, "credential_process", where, sizeof(where));
  if (cmd) {
    snprintf(what, sizeof(what),
             "credential_process of profile \"%.100s\" (%.200s)", pf->name,
             where);
    return kn_creds_process(cmd, ctx->process_timeout_ms, what, ctx->log, out,
                            errp);
  }
  r = keys_of(pf, 0, out, errp);
  if (r != KN_CREDS_ABSENT) return r;
  snprintf(ctx->note, sizeof(ctx->note),
           "profile \"%.100s\" has no credentials", pf->name);
  return KN_CREDS_ABSENT;
}

kn_creds_res_t kn_creds_profile_chain(kn_creds_ctx_t *ctx,
                                      const kn_aws_profile_t *pf, int with_env,
                                      kn_creds_t *out, kn_error_t **errp) {
  kn_creds_res_t r = kn_creds_web_identity_of(ctx, pf, with_env, out, errp);
  if (r == KN_CREDS_ABSENT) r = kn_creds_sso(ctx, pf, out, errp);
  if (r == KN_CREDS_ABSENT) r = kn_creds_profile_files(ctx, pf, out, errp);
  return r;
}

kn_creds_res_t kn_creds_from_web_identity(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                          kn_error_t **errp) {
  return kn_creds_web_identity_of(ctx, ctx->profile, 1, out, errp);
}

kn_creds_res_t kn_creds_from_profile(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                     kn_error_t **errp) {
  const kn_aws_profile_t *pf = ctx->profile;
  if (!kn_aws_profile_exists(pf)) {
    snprintf(ctx->note, sizeof(ctx->note), "no profile \"%.100s\"", pf->name);
    return KN_CREDS_ABSENT;
  }
  return kn_creds_profile_files(ctx, pf, out, errp);
}
