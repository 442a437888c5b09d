/* Resolved client settings: region, endpoints, TLS and HTTP, retries,
 * from properties, the environment and the shared config files, in the
 * order of the AWS SDKs. */
#ifndef KN_AWS_SETTINGS_H
#define KN_AWS_SETTINGS_H

#include "aws/http.h"
#include "kn/conf.h"
#include "kn/error.h"

typedef struct kn_aws_settings {
  char *region;
  char *profile;            /* effective profile name */
  char *config_file;        /* effective paths of the shared files */
  char *credentials_file;
  char *kinesis_endpoint;   /* full URL, e.g. https://kinesis.us-east-1.amazonaws.com */
  char *dynamodb_endpoint;
  char *sts_endpoint;
  char *access_key_id;      /* explicit properties, or NULL */
  char *secret_access_key;
  char *session_token;
  char *ca_file;            /* NULL: system store */
  char *user_agent;         /* full User-Agent value */
  kn_http_opts_t http;      /* http.ca_file points at ca_file */
  long request_timeout_ms;
  int retry_max_attempts;
  long retry_backoff_ms;
  long retry_backoff_max_ms;
  int retry_budget;
} kn_aws_settings_t;

/* Fills *s from conf and the environment.  Errors (a malformed config
 * file, no region) name the source.  log is stored in s->http.log. */
kn_error_t *kn_aws_settings_load(kn_aws_settings_t *s, const kn_conf_t *conf,
                                 const kn_logger_t *log);
void kn_aws_settings_clear(kn_aws_settings_t *s);

#endif
