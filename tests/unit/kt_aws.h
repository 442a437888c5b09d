/* Helpers for tests of settings and credentials: a private HOME in a
 * temporary directory, a clean AWS environment, small files. */
#ifndef KT_AWS_H
#define KT_AWS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kn/client.h"
#include "kn/conf.h"

#define KT_UNUSED __attribute__((unused))

static char kt_tmp[256];

/* Every variable the settings and the chain read. */
static const char *const kt_aws_vars[] = {
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_KINESIS",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_STS",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_CA_BUNDLE",
    "AWS_MAX_ATTEMPTS",
    "AWS_METADATA_SERVICE_TIMEOUT",
    "AWS_METADATA_SERVICE_NUM_ATTEMPTS",
    "AWS_SDK_UA_APP_ID",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
    "AWS_EC2_METADATA_V1_DISABLED",
    NULL};

/* A fresh HOME with an empty ~/.aws, no AWS variables, and IMDS off so a
 * test never waits for 169.254.169.254. */
static KT_UNUSED void kt_aws_reset(void) {
  for (const char *const *v = kt_aws_vars; *v; v++) unsetenv(*v);
  if (!kt_tmp[0]) {
    snprintf(kt_tmp, sizeof(kt_tmp), "%s/kn-test-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(kt_tmp)) {
      perror("mkdtemp");
      exit(2);
    }
  }
  char cmd[1200];
  snprintf(cmd, sizeof(cmd),
           "rm -rf '%s/.aws' '%s/files' && mkdir -p '%s/.aws' '%s/files'",
           kt_tmp, kt_tmp, kt_tmp, kt_tmp);
  if (system(cmd) != 0) exit(2);
  setenv("HOME", kt_tmp, 1);
  setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
}

static KT_UNUSED void kt_aws_cleanup(void) {
  if (!kt_tmp[0]) return;
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", kt_tmp);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", kt_tmp);
}

/* Path of name under the temporary HOME, in a static buffer per slot. */
static KT_UNUSED const char *kt_path(const char *name) {
  static char bufs[8][512];
  static int slot;
  char *b = bufs[slot++ % 8];
  snprintf(b, 512, "%s/%s", kt_tmp, name);
  return b;
}

/* Writes text to HOME/name (mode 0755 so scripts can run). */
static KT_UNUSED const char *kt_write(const char *name, const char *text) {
  const char *p = kt_path(name);
  FILE *f = fopen(p, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
    perror(p);
    exit(2);
  }
  chmod(p, 0755);
  return p;
}

/* A client of the Kinesis server on 127.0.0.1:port with example keys and
 * no retries, after kt_aws_reset(); NULL (and a message) on failure. */
static KT_UNUSED kn_client_t *kt_aws_client(int port) {
  kt_aws_reset();
  setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  kn_conf_t *conf = kn_conf_new();
  char ep[64], err[256];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", port);
  kn_conf_set(conf, "kinesis.endpoint", ep, err, sizeof err);
  kn_conf_set(conf, "region", "us-east-1", err, sizeof err);
  kn_conf_set(conf, "retry.max.attempts", "1", err, sizeof err);
  kn_client_t *kc = kn_client_new(conf, err, sizeof err);
  if (!kc) fprintf(stderr, "client: %s\n", err);
  kn_conf_destroy(conf);
  return kc;
}

#endif
