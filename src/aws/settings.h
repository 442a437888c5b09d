/* Resolved client settings: region, endpoints, TLS and HTTP, retries,
 * from properties, the environment and the shared config files, in the
 * order of the AWS SDKs.
 *
 * Each value comes from the first source that has it:
 * - profile: property `profile`, AWS_PROFILE, AWS_DEFAULT_PROFILE,
 *   "default".  A profile named explicitly must exist in one of the files.
 *   The property, like the AWS CLI's --profile, also turns the
 *   AWS_ACCESS_KEY_ID keys of the environment off (creds.h).
 * - files: AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, else
 *   $HOME/.aws/config and $HOME/.aws/credentials ("~/" expanded).
 * - region: property `region`, AWS_REGION, AWS_DEFAULT_REGION, the
 *   profile's `region`; us-east-1 when an endpoint URL is configured;
 *   else a KN_ERR__CONF error.
 * - endpoint of service S (kinesis, dynamodb, sts; sso and sso_oidc,
 *   which have no property and no default here): property
 *   `S.endpoint`, property `endpoint` (kinesis only), AWS_ENDPOINT_URL_S,
 *   AWS_ENDPOINT_URL, the profile's services section (`S =` /
 *   `endpoint_url = ...`), the profile's `endpoint_url`, else
 *   https://S.REGION.amazonaws.com (.amazonaws.com.cn in cn- regions).
 *   AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true (or the profile's
 *   ignore_configured_endpoint_urls) skips the environment and profile
 *   sources, not the properties.
 * - CA bundle: `ssl.ca.location`, AWS_CA_BUNDLE, the profile's ca_bundle.
 * - retry.max.attempts when not set: AWS_MAX_ATTEMPTS, the profile's
 *   max_attempts.
 * - metadata.timeout.ms / metadata.max.attempts when not set:
 *   AWS_METADATA_SERVICE_TIMEOUT (seconds) / _NUM_ATTEMPTS, the profile's
 *   metadata_service_timeout / metadata_service_num_attempts.
 * - User-Agent: "libkinesis/VERSION", " app/ID" from AWS_SDK_UA_APP_ID or
 *   the profile's sdk_ua_app_id, then the `user.agent` property.
 * Errors name the source at fault ("AWS_ENDPOINT_URL", "~/.aws/config:7"). */
#ifndef KN_AWS_SETTINGS_H
#define KN_AWS_SETTINGS_H

#include "aws/http.h"
#include "kn/conf.h"
#include "kn/error.h"

/* Every string is malloc'ed and owned by the struct; freed by
 * kn_aws_settings_clear(). */
typedef struct kn_aws_settings {
  char *region;
  char *profile;          /* effective profile name */
  int profile_explicit;   /* from the profile property (kncat --profile) */
  char *config_file;      /* effective paths of the shared files, or NULL */
  char *credentials_file; /* (no HOME and no variable) */
  char *kinesis_endpoint; /* full URL, e.g.
                             https://kinesis.us-east-1.amazonaws.com */
  char *dynamodb_endpoint;
  char *sts_endpoint;
  char *sso_endpoint;      /* configured IAM Identity Center endpoints, */
  char *sso_oidc_endpoint; /* or NULL: the profile's sso_region decides */
  char *sso_cache_dir;     /* $HOME/.aws/sso/cache, or NULL */
  char *access_key_id;     /* explicit properties, or NULL */
  char *secret_access_key;
  char *session_token;
  char *ca_file;       /* NULL: system store */
  char *user_agent;    /* full User-Agent value */
  kn_http_opts_t http; /* http.ca_file points at ca_file */
  long request_timeout_ms;
  int retry_max_attempts;
  long retry_backoff_ms;
  long retry_backoff_max_ms;
  int retry_budget;
  long metadata_timeout_ms; /* per request to IMDS / container endpoint */
  int metadata_max_attempts;
  long credential_process_timeout_ms;
  size_t credential_response_max_bytes; /* IMDS, container endpoint, STS */
} kn_aws_settings_t;

/* Credential documents are small: a hostile or broken endpoint cannot
 * make the chain hold more than this by default. */
#define KN_CREDS_RESPONSE_MAX_DEFAULT ((size_t)64 << 10)

/* Fills *s from conf (NULL: every property at its default) and the
 * environment.  Errors (a malformed config file, no region, a bad
 * endpoint URL) name the source.  log is borrowed: it is stored in
 * s->http.log and must outlive s and what is built from it.  On failure
 * *s is left cleared. */
kn_error_t *kn_aws_settings_load(kn_aws_settings_t *s, const kn_conf_t *conf,
                                 const kn_logger_t *log);
/* Frees the strings and zeroes *s.  Accepts a zeroed struct. */
void kn_aws_settings_clear(kn_aws_settings_t *s);

#endif
