/* Credentials: the standard chain of the AWS SDKs, cached and refreshed
 * before expiry.
 *
 * Order (the first provider that is configured wins; one that is
 * configured but fails stops the chain with its error), botocore's:
 * 1. explicit properties (aws.access.key.id, ...);
 * 2. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
 *    unless the `profile` property names the profile (as the AWS CLI's
 *    --profile: then the profile's credentials are used);
 * 3. the profile's role_arn with source_profile (a chain of profiles,
 *    loops reported) or credential_source (Environment,
 *    Ec2InstanceMetadata, EcsContainer), through STS AssumeRole with
 *    role_session_name, external_id and duration_seconds (creds_role.c);
 * 4. web identity: AWS_WEB_IDENTITY_TOKEN_FILE or the profile's
 *    web_identity_token_file, with AWS_ROLE_ARN or role_arn (and
 *    AWS_ROLE_SESSION_NAME or role_session_name), via STS
 *    AssumeRoleWithWebIdentity;
 * 5. IAM Identity Center: the profile's sso_account_id and sso_role_name
 *    with an sso_session section or the legacy sso_start_url/sso_region,
 *    the token cached by `aws sso login` (refreshed through SSO-OIDC when
 *    it can be), SSO GetRoleCredentials (creds_sso.c);
 * 6. the profile in the shared files: keys of the credentials file,
 *    credential_process (run with /bin/sh -c), keys of the config file;
 * 7. the container endpoint: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
 *    (on 169.254.170.2) or _FULL_URI (https, or http to a loopback or the
 *    ECS/EKS addresses), with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or
 *    _TOKEN as the Authorization header;
 * 8. EC2 instance metadata, IMDSv2 (unless AWS_EC2_METADATA_DISABLED=true;
 *    AWS_EC2_METADATA_SERVICE_ENDPOINT overrides the address).
 * The environment and the shared files are read once, when the provider
 * is made.  Secrets are never logged. */
#ifndef KN_AWS_CREDS_H
#define KN_AWS_CREDS_H

#include <stdint.h>

#include "aws/http.h"
#include "kn/error.h"

/* Strings are malloc'ed and owned by the struct (kn_creds_clear). */
typedef struct kn_creds {
  char *access_key_id;
  char *secret_access_key;
  char *session_token; /* NULL when none */
  int64_t expires_ms;  /* wall clock, epoch ms; 0: does not expire */
  const char *source;  /* provider name, static string ("environment") */
} kn_creds_t;

/* Wipes the secrets, frees the strings and zeroes *c.  Accepts a zeroed
 * struct. */
void kn_creds_clear(kn_creds_t *c);
/* dst must be zeroed or cleared; it is left cleared on failure.  0 or -1. */
int kn_creds_copy(kn_creds_t *dst, const kn_creds_t *src);

/* Provider names, the values of kn_creds_t.source. */
#define KN_CREDS_SRC_PROPERTIES "properties"
#define KN_CREDS_SRC_ENV "environment"
#define KN_CREDS_SRC_WEB_IDENTITY "web-identity"
#define KN_CREDS_SRC_PROFILE "profile"
#define KN_CREDS_SRC_ASSUME_ROLE "assume-role"
#define KN_CREDS_SRC_SSO "sso"
#define KN_CREDS_SRC_PROCESS "process"
#define KN_CREDS_SRC_CONTAINER "container"
#define KN_CREDS_SRC_IMDS "imds"

struct kn_aws_settings;
typedef struct kn_creds_provider kn_creds_provider_t;

/* Builds the chain from the resolved settings (explicit keys, profile,
 * files, STS endpoint, timeouts: all copied) and the environment as it is
 * now.  Reads the shared files (errors name file and line) but fetches
 * nothing yet.  s->http.log is borrowed and must outlive the provider.
 * NULL on failure with *errp set. */
kn_creds_provider_t *kn_creds_provider_new(const struct kn_aws_settings *s,
                                           kn_error_t **errp);

/* The chain runs on a thread of the provider's own (started on first
 * use), never on the caller's: a credential_process, STS or instance
 * metadata that answers slowly holds up nobody who still has usable
 * credentials.  The first fetch walks the chain; later ones go through
 * the provider that gave the cached value.  The cache is refreshed ahead
 * of expiry: on the refresher's own when the credentials leave the
 * KN_CREDS_REFRESH_MS window (plus a little jitter), or when a caller
 * finds them inside it, at most once per KN_CREDS_REFRESH_INTERVAL_MS.  A
 * refresh failure while the cached credentials are still usable keeps
 * them and logs a warning; then the next attempt waits
 * KN_CREDS_RETRY_AFTER_MS.  Credentials with less than
 * KN_CREDS_MIN_VALID_MS left are never returned.  Errors
 * (KN_ERR__CREDENTIALS and others) name the provider, file and line at
 * fault. */

/* Thread-safe; blocks until the credentials are there when none are
 * usable (never call it on an I/O thread).  Copies valid credentials into
 * *out (zeroed or cleared by the caller; clear it after use). */
kn_error_t *kn_creds_get(kn_creds_provider_t *p, kn_creds_t *out);

/* Thread-safe and never blocks on a fetch.  *ticket is 0 on a caller's
 * first try.  Returns NULL with *out filled when usable credentials are
 * cached; NULL with *out left empty (access_key_id NULL) while a fetch is
 * under way: try again later with the same *ticket; an error when the
 * fetch that followed the first try failed.  *ticket is reset to 0 when
 * the answer is final. */
kn_error_t *kn_creds_get_nowait(kn_creds_provider_t *p, kn_creds_t *out,
                                uint64_t *ticket);

#define KN_CREDS_REFRESH_MS (5 * 60 * 1000)
#define KN_CREDS_MIN_VALID_MS (10 * 1000)
#define KN_CREDS_REFRESH_INTERVAL_MS 1000
#define KN_CREDS_RETRY_AFTER_MS 5000

/* Accepts NULL.  A fetch under way is waited for (it ends within its own
 * time-outs: credential.process.timeout.ms, the HTTP request time-out). */
void kn_creds_provider_destroy(kn_creds_provider_t *p);

#endif
