/* Credentials: the standard chain of the AWS SDKs, cached and refreshed
 * before expiry.
 *
 * Order: explicit properties; AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
 * AWS_SESSION_TOKEN; web identity (AWS_WEB_IDENTITY_TOKEN_FILE +
 * AWS_ROLE_ARN, via STS AssumeRoleWithWebIdentity); the shared credentials
 * and config files for the profile (static keys, credential_process,
 * web_identity_token_file + role_arn); the container endpoint
 * (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI with
 * AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]); EC2 IMDSv2 (unless
 * AWS_EC2_METADATA_DISABLED=true). */
#ifndef KN_AWS_CREDS_H
#define KN_AWS_CREDS_H

#include <stdint.h>

#include "aws/http.h"
#include "kn/error.h"

typedef struct kn_creds {
  char *access_key_id;
  char *secret_access_key;
  char *session_token;   /* NULL when none */
  int64_t expires_ms;    /* wall clock, epoch ms; 0: does not expire */
  const char *source;    /* provider name, static string ("environment") */
} kn_creds_t;

void kn_creds_clear(kn_creds_t *c);
int kn_creds_copy(kn_creds_t *dst, const kn_creds_t *src); /* 0 or -1 */

struct kn_aws_settings;
typedef struct kn_creds_provider kn_creds_provider_t;

/* Builds the chain from the resolved settings (explicit keys, profile,
 * files, STS endpoint) and the environment as it is now.  Does not fetch
 * anything yet.  NULL on failure with *errp set. */
kn_creds_provider_t *kn_creds_provider_new(const struct kn_aws_settings *s,
                                           kn_error_t **errp);

/* Thread-safe.  Copies valid credentials into *out.  The first call walks
 * the chain; later calls return the cached value, refreshing it (blocking)
 * when it expires within 5 minutes.  A refresh failure while the cached
 * credentials are still valid keeps them and logs a warning.  Errors name
 * the provider, file and line at fault. */
kn_error_t *kn_creds_get(kn_creds_provider_t *p, kn_creds_t *out);

void kn_creds_provider_destroy(kn_creds_provider_t *p);

#endif
