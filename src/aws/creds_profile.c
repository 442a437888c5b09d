/* Credentials from the profile in the shared files. */
#include <stdio.h>
#include <string.h>

#include "aws/creds_int.h"
#include "core/error.h"

kn_creds_res_t kn_creds_from_profile(kn_creds_ctx_t *ctx, kn_creds_t *out,
                                     kn_error_t **errp) {
  const kn_aws_profile_t *pf = ctx->profile;
  if (!kn_aws_profile_exists(pf)) {
    snprintf(ctx->note, sizeof(ctx->note), "no profile \"%.100s\"", pf->name);
    return KN_CREDS_ABSENT;
  }
  char where[256], what[400];
#define GET(key) kn_aws_profile_get(pf, key, where, sizeof(where))
#define WHAT(fmt) snprintf(what, sizeof(what), fmt " of profile \"%.100s\" (%.200s)", pf->name, where)

  /* A role to assume comes first: keys next to it are there for other
   * tools (or as the source of the role), not for this profile. */
  const char *role = GET("role_arn");
  if (role && *role) {
    WHAT("role_arn");
    char wif_where[256];
    const char *wif = kn_aws_profile_get(pf, "web_identity_token_file", wif_where,
                                         sizeof(wif_where));
    if (wif && *wif) {
      const char *session = kn_aws_profile_get(pf, "role_session_name", NULL, 0);
      return kn_creds_web_identity(ctx, role, wif, session && *session ? session : NULL,
                                   what, out, errp);
    }
    const char *src = kn_aws_profile_get(pf, "source_profile", NULL, 0);
    const char *csrc = kn_aws_profile_get(pf, "credential_source", NULL, 0);
    if ((src && *src) || (csrc && *csrc))
      *errp = kn_error_new(KN_ERR__CREDENTIALS,
                           "%s: assuming a role with %s is not supported yet; "
                           "use web_identity_token_file, credential_process or "
                           "temporary keys",
                           what, src && *src ? "source_profile" : "credential_source");
    else
      *errp = kn_error_new(KN_ERR__CREDENTIALS,
                           "%s: role_arn needs web_identity_token_file, "
                           "source_profile or credential_source",
                           what);
    return KN_CREDS_FAILED;
  }

  char id_where[256];
  const char *id = kn_aws_profile_get(pf, "aws_access_key_id", id_where, sizeof(id_where));
  const char *secret = GET("aws_secret_access_key");
  if ((id && *id) || (secret && *secret)) {
    if (id && *id) snprintf(where, sizeof(where), "%s", id_where);
    WHAT("static keys");
    const char *token = kn_aws_profile_get(pf, "aws_session_token", NULL, 0);
    return kn_creds_set_static(out, id, secret, token, KN_CREDS_SRC_PROFILE, what, errp)
               ? KN_CREDS_FAILED
               : KN_CREDS_FOUND;
  }

  const char *cmd = GET("credential_process");
  if (cmd && *cmd) {
    WHAT("credential_process");
    return kn_creds_process(cmd, ctx->process_timeout_ms, what, ctx->log, out, errp);
  }
  snprintf(ctx->note, sizeof(ctx->note), "profile \"%.100s\" has no credentials",
           pf->name);
  return KN_CREDS_ABSENT;
#undef GET
#undef WHAT
}
