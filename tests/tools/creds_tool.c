/* creds_tool: resolves settings and credentials the way a client would and
 * prints what it got, for tests/integration/test_credentials.py.
 *
 *   creds_tool [-X name=value]... [--gets N] [--interval-ms MS]
 *
 * Prints one "settings ..." line, then one line per get:
 *   get=1 source=imds akid=ASIA... expires=1700000000000 secret_sha256=HEX
 * token_sha256=HEX|none or "error=NAME message=..." (exit 1; 2 for a settings
 * error).  Secrets are printed only as SHA-256 hashes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws/creds.h"
#include "aws/settings.h"
#include "core/conf.h"
#include "core/error.h"
#include "util/clock.h"
#include "util/crypto.h"
#include "util/hex.h"

static void sha_hex(const char *s, char out[2 * KN_SHA256_LEN + 1]) {
  uint8_t d[KN_SHA256_LEN];
  kn_sha256(s, strlen(s), d);
  kn_hex_encode(out, d, sizeof(d));
}

static int usage(void) {
  fprintf(
      stderr,
      "usage: creds_tool [-X name=value]... [--gets N] [--interval-ms MS]\n");
  return 2;
}

int main(int argc, char **argv) {
  kn_conf_t *conf = kn_conf_new();
  int gets = 1;
  long interval = 0;
  char err[512];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-X") == 0 && i + 1 < argc) {
      char *kv = argv[++i], *eq = strchr(kv, '=');
      if (!eq) return usage();
      *eq = '\0';
      if (kn_conf_set(conf, kv, eq + 1, err, sizeof(err)) != KN_CONF_OK) {
        fprintf(stderr, "%s\n", err);
        return 2;
      }
    } else if (strcmp(argv[i], "--gets") == 0 && i + 1 < argc) {
      gets = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--interval-ms") == 0 && i + 1 < argc) {
      interval = atol(argv[++i]);
    } else {
      return usage();
    }
  }
  kn_logger_t log;
  kn_conf_logger(conf, &log, "creds_tool");
  kn_aws_settings_t s;
  kn_error_t *e = kn_aws_settings_load(&s, conf, &log);
  kn_conf_destroy(conf);
  if (e) {
    printf("error=%s message=%s\n", kn_err2name(kn_error_code(e)),
           kn_error_string(e));
    kn_error_destroy(e);
    return 2;
  }
  printf("settings region=%s profile=%s kinesis=%s sts=%s user_agent=%s\n",
         s.region, s.profile, s.kinesis_endpoint, s.sts_endpoint, s.user_agent);
  kn_creds_provider_t *p = kn_creds_provider_new(&s, &e);
  kn_aws_settings_clear(&s);
  int rc = 0;
  for (int i = 1; p && i <= gets; i++) {
    if (i > 1 && interval > 0) kn_sleep_ms(interval);
    kn_creds_t c = {0};
    e = kn_creds_get(p, &c);
    if (e) break;
    char sh[2 * KN_SHA256_LEN + 1], th[2 * KN_SHA256_LEN + 1] = "none";
    sha_hex(c.secret_access_key, sh);
    if (c.session_token) sha_hex(c.session_token, th);
    printf(
        "get=%d source=%s akid=%s expires=%lld secret_sha256=%s "
        "token_sha256=%s\n",
        i, c.source, c.access_key_id, (long long)c.expires_ms, sh, th);
    fflush(stdout);
    kn_creds_clear(&c);
  }
  if (e) {
    printf("error=%s message=%s\n", kn_err2name(kn_error_code(e)),
           kn_error_string(e));
    kn_error_destroy(e);
    rc = 1;
  }
  kn_creds_provider_destroy(p);
  return rc;
}
