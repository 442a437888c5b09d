/* The credentials chain: order, static keys, credential_process, JSON and
 * XML documents, caching and refresh, errors.  Network providers are
 * covered by tests/integration/test_credentials.py. */
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aws/creds.h"
#include "aws/creds_int.h"
#include "aws/settings.h"
#include "aws/xml_min.h"
#include "core/conf.h"
#include "core/error.h"
#include "creds_hooks.h"
#include "kt.h"
#include "kt_aws.h"
#include "util/clock.h"
#include "util/iso8601.h"

static kn_logger_t quiet = {2, NULL, NULL, "test"}; /* errors only... none */

/* Settings from properties kv (region always set) and the environment. */
static int settings(kn_aws_settings_t *s, const char *const *kv) {
  kn_conf_t *c = kn_conf_new();
  char err[256];
  kn_conf_set(c, "region", "us-east-1", err, sizeof(err));
  for (; kv && kv[0]; kv += 2)
    if (kn_conf_set(c, kv[0], kv[1], err, sizeof(err)) != KN_CONF_OK) {
      fprintf(stderr, "conf %s: %s\n", kv[0], err);
      exit(2);
    }
  kn_error_t *e = kn_aws_settings_load(s, c, &quiet);
  kn_conf_destroy(c);
  if (e) fprintf(stderr, "settings: %s\n", kn_error_string(e));
  kn_error_destroy(e);
  return e ? -1 : 0;
}

/* Resolves credentials once.  Returns NULL and fills *out, or the error
 * message (static) with *code set. */
static const char *resolve(const char *const *kv, kn_creds_t *out,
                           kn_err_t *code) {
  static char msg[2048];
  memset(out, 0, sizeof(*out));
  *code = KN_ERR_NO_ERROR;
  kn_aws_settings_t s;
  if (settings(&s, kv)) {
    *code = KN_ERR__CONF;
    return "settings failed";
  }
  kn_error_t *e = NULL;
  kn_creds_provider_t *p = kn_creds_provider_new(&s, &e);
  kn_aws_settings_clear(&s);
  if (p) e = kn_creds_get(p, out);
  kn_creds_provider_destroy(p);
  if (!e) return NULL;
  *code = kn_error_code(e);
  snprintf(msg, sizeof(msg), "%s", kn_error_string(e));
  kn_error_destroy(e);
  return msg;
}

#define EXPECT_KEY(kv, id, src)                \
  do {                                         \
    kn_creds_t c_;                             \
    kn_err_t code_;                            \
    const char *m_ = resolve(kv, &c_, &code_); \
    KT_CHECK_MSG(m_ == NULL, "%s", m_);        \
    KT_CHECK_STR(c_.access_key_id, id);        \
    KT_CHECK_STR(c_.source, src);              \
    kn_creds_clear(&c_);                       \
  } while (0)

#define EXPECT_ERR(kv, want_code, want)                            \
  do {                                                             \
    kn_creds_t c_;                                                 \
    kn_err_t code_;                                                \
    const char *m_ = resolve(kv, &c_, &code_);                     \
    KT_CHECK_MSG(m_ &&strstr(m_, want), "got \"%s\", want \"%s\"", \
                 m_ ? m_ : "(success)", want);                     \
    KT_CHECK_INT(code_, want_code);                                \
    kn_creds_clear(&c_);                                           \
  } while (0)

static void test_chain_order(void) {
  kt_aws_reset();
  static const char *const props[] = {"aws.access.key.id", "AKIDPROPS",
                                      "aws.secret.access.key", "SPROPS", NULL};
  kt_write(".aws/credentials",
           "[default]\naws_access_key_id = AKIDCREDFILE\n"
           "aws_secret_access_key = SCRED\n");
  kt_write(".aws/config",
           "[default]\naws_access_key_id = AKIDCONFIG\n"
           "aws_secret_access_key = SCONF\n");
  EXPECT_KEY(NULL, "AKIDCREDFILE",
             "profile"); /* credentials file beats config */
  setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "SENV", 1);
  EXPECT_KEY(NULL, "AKIDENV", "environment");   /* environment beats files */
  EXPECT_KEY(props, "AKIDPROPS", "properties"); /* explicit beats environment */
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  kt_write(".aws/credentials", "");
  EXPECT_KEY(NULL, "AKIDCONFIG", "profile");
  kt_write(".aws/config", "");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "no AWS credentials found for profile \"default\"");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "EC2 instance metadata (disabled by AWS_EC2_METADATA_DISABLED)");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "shared files (no profile \"default\")");
}

static void test_static_details(void) {
  kt_aws_reset();
  setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "SENV", 1);
  setenv("AWS_SESSION_TOKEN", "TENV", 1);
  kn_creds_t c;
  kn_err_t code;
  KT_CHECK(resolve(NULL, &c, &code) == NULL);
  KT_CHECK_STR(c.secret_access_key, "SENV");
  KT_CHECK_STR(c.session_token, "TENV");
  KT_CHECK_INT(c.expires_ms, 0);
  kn_creds_t d = {0};
  KT_CHECK(kn_creds_copy(&d, &c) == 0);
  KT_CHECK_STR(d.session_token, "TENV");
  KT_CHECK(d.secret_access_key != c.secret_access_key);
  kn_creds_clear(&d);
  kn_creds_clear(&c);
  KT_CHECK(c.access_key_id == NULL && c.secret_access_key == NULL);
  kn_creds_clear(&c); /* twice is fine */
  /* Half a key pair is an error, not a reason to go on down the chain. */
  unsetenv("AWS_SECRET_ACCESS_KEY");
  kt_write(".aws/credentials",
           "[default]\naws_access_key_id = A\naws_secret_access_key = B\n");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "environment AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY: an access "
             "key id is set "
             "without a secret access key");
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SESSION_TOKEN");
  kt_write(".aws/credentials", "[default]\n\naws_secret_access_key = B\n");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "static keys of profile \"default\" (~/.aws/credentials:3): a "
             "secret access "
             "key is set without an access key id");
  kt_write(".aws/credentials",
           "[default]\naws_access_key_id = A\naws_secret_access_key = B\n"
           "aws_session_token = TOK\n");
  KT_CHECK(resolve(NULL, &c, &code) == NULL);
  KT_CHECK_STR(c.session_token, "TOK");
  kn_creds_clear(&c);
  /* Other profiles. */
  kt_write(".aws/credentials",
           "[dev]\naws_access_key_id = ADEV\naws_secret_access_key = B\n");
  kt_write(
      ".aws/config",
      "[profile ops]\naws_access_key_id = AOPS\naws_secret_access_key = B\n");
  setenv("AWS_PROFILE", "dev", 1);
  EXPECT_KEY(NULL, "ADEV", "profile");
  static const char *const kv[] = {"profile", "ops", NULL};
  EXPECT_KEY(kv, "AOPS", "profile");
}

static void test_corrupt_files(void) {
  kt_aws_reset();
  kt_write(".aws/credentials",
           "[default]\naws_access_key_id = A\n"
           "aws_secret_access_key = B\n\n"
           "[other]\n"
           "aws_access_key_id\n");
  /* Settings already read the files, and say where it went wrong. */
  kn_aws_settings_t s;
  KT_CHECK(settings(&s, NULL) != 0);
  /* The provider reads them too (files may change in between). */
  kt_write(".aws/credentials", "");
  KT_REQUIRE(settings(&s, NULL) == 0);
  kt_write(".aws/credentials",
           "[default]\naws_access_key_id = A\n"
           "aws_secret_access_key = B\n\n"
           "[other]\n"
           "aws_access_key_id\n");
  kn_error_t *e = NULL;
  kn_creds_provider_t *p = kn_creds_provider_new(&s, &e);
  /* Whatever allocation fails, a malformed file is never taken as none. */
  KT_ALWAYS(p == NULL && e != NULL);
  kn_creds_provider_destroy(p);
  KT_CHECK(e && strstr(kn_error_string(e),
                       "~/.aws/credentials:6: expected \"key = value\""));
  KT_CHECK_INT(kn_error_code(e), KN_ERR__CONF);
  kn_error_destroy(e);
  kn_aws_settings_clear(&s);
}

/* A FIFO (or device) where a file is expected is refused at once: opening
 * a FIFO without a writer would wait for one for ever. */
static void test_not_regular(void) {
  kt_aws_reset();
  KT_REQUIRE(mkfifo(kt_path(".aws/credentials"), 0600) == 0);
  kn_conf_t *c = kn_conf_new();
  char err[256];
  kn_conf_set(c, "region", "us-east-1", err, sizeof(err));
  kn_aws_settings_t s;
  kn_error_t *e = kn_aws_settings_load(&s, c, &quiet);
  kn_conf_destroy(c);
  KT_CHECK_MSG(e && strstr(kn_error_string(e),
                           "cannot read ~/.aws/credentials: not a regular "
                           "file"),
               "got \"%s\"", e ? kn_error_string(e) : "(success)");
  if (!e) kn_aws_settings_clear(&s);
  kn_error_destroy(e);
  remove(kt_path(".aws/credentials"));
}

static void test_roles(void) {
  kt_aws_reset();
  kt_write(
      ".aws/config",
      "[default]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = base\n"
      "aws_access_key_id = A\naws_secret_access_key = B\n"
      "[profile cs]\nrole_arn = arn:aws:iam::1:role/r\n"
      "credential_source = Ec2InstanceMetadata\n"
      "[profile bare]\nrole_arn = arn:aws:iam::1:role/r\n"
      "[profile wi]\nrole_arn = arn:aws:iam::1:role/r\n"
      "web_identity_token_file = ~/files/missing-token\n");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "role_arn of profile \"default\" (~/.aws/config:2): "
             "source_profile \"base\" "
             "is in neither shared file");
  setenv("AWS_PROFILE", "cs", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "credential_source Ec2InstanceMetadata found no credentials");
  setenv("AWS_PROFILE", "bare", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "role_arn needs web_identity_token_file");
  setenv("AWS_PROFILE", "wi", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "web identity token file ~/files/missing-token: No such file");
  /* Chains of source profiles: loops and bad settings are reported before
   * anything is asked of STS. */
  kt_write(
      ".aws/config",
      "[profile a]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = b\n"
      "[profile b]\nrole_arn = arn:aws:iam::1:role/b\nsource_profile = c\n"
      "[profile c]\nrole_arn = arn:aws:iam::1:role/c\nsource_profile = a\n"
      "[profile self]\nrole_arn = arn:aws:iam::1:role/s\nsource_profile = "
      "self\n"
      "[profile both]\nrole_arn = arn:aws:iam::1:role/s\nsource_profile = a\n"
      "credential_source = Environment\n"
      "[profile env]\nrole_arn = arn:aws:iam::1:role/s\ncredential_source = "
      "Environment\n"
      "[profile odd]\nrole_arn = arn:aws:iam::1:role/s\ncredential_source = "
      "Shell\n"
      "[profile dur]\nrole_arn = arn:aws:iam::1:role/s\nsource_profile = k\n"
      "duration_seconds = 60\n"
      "[profile mfa]\nrole_arn = arn:aws:iam::1:role/s\nsource_profile = k\n"
      "mfa_serial = arn:aws:iam::1:mfa/u\n"
      "[profile empty]\nrole_arn = arn:aws:iam::1:role/s\nsource_profile = "
      "nothing\n"
      "[profile nothing]\nregion = us-east-1\n"
      "[profile k]\naws_access_key_id = AKIDK\naws_secret_access_key = SK\n");
  setenv("AWS_PROFILE", "a", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "source_profile makes a loop: a -> b -> c -> a");
  setenv("AWS_PROFILE", "self", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "source_profile makes a loop: self -> self");
  setenv("AWS_PROFILE", "both", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "has both source_profile and credential_source");
  setenv("AWS_PROFILE", "env", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "credential_source Environment found no credentials: it needs "
             "AWS_ACCESS_KEY_ID");
  setenv("AWS_PROFILE", "odd", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "credential_source \"Shell\" is not one of");
  setenv("AWS_PROFILE", "dur", 1);
  EXPECT_ERR(NULL, KN_ERR__CONF,
             "duration_seconds = \"60\" of profile \"dur\" "
             "(~/.aws/config:26): expected seconds from 900 to 43200");
  setenv("AWS_PROFILE", "mfa", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "mfa_serial is not supported");
  setenv("AWS_PROFILE", "empty", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "source_profile \"nothing\" has no credentials");
  /* SSO profiles: what is missing, and the login to run. */
  kt_write(
      ".aws/config",
      "[profile s1]\nsso_account_id = 111122223333\nsso_role_name = R\n"
      "sso_session = nosuch\n"
      "[profile s2]\nsso_account_id = 111122223333\nsso_role_name = R\n"
      "sso_start_url = https://x.awsapps.com/start\n"
      "[profile s3]\nsso_account_id = 111122223333\nsso_role_name = R\n"
      "sso_start_url = https://x.awsapps.com/start\nsso_region = eu-west-1\n"
      "[profile s4]\nsso_account_id = 111122223333\nsso_role_name = R\n"
      "sso_session = dev\nsso_region = us-east-1\n"
      "[profile s5]\nsso_account_id = 111122223333\nsso_role_name = R\n"
      "sso_session = dev\n"
      "[sso-session dev]\nsso_start_url = https://x.awsapps.com/start\n"
      "sso_region = eu-west-1\n");
  setenv("AWS_PROFILE", "s1", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "sso_session \"nosuch\" has no [sso-session nosuch]");
  setenv("AWS_PROFILE", "s2", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "profile \"s2\": missing sso_region");
  setenv("AWS_PROFILE", "s3", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "no cached token (~/.aws/sso/cache/");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "run `aws sso login --profile s3`");
  setenv("AWS_PROFILE", "s4", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "sso_region is \"us-east-1\" in the profile but "
             "\"eu-west-1\" in [sso-session dev]");
  setenv("AWS_PROFILE", "s5", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "run `aws sso login --sso-session dev`");
  /* Environment web identity: a token file needs a role. */
  unsetenv("AWS_PROFILE");
  kt_write(".aws/config", "");
  setenv("AWS_WEB_IDENTITY_TOKEN_FILE", kt_write("files/token", "tok\n"), 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ROLE_ARN");
  /* STS unreachable: a transport error naming the call. */
  setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", 1);
  static const char *const kv[] = {"sts.endpoint", "http://127.0.0.1:1", NULL};
  EXPECT_ERR(
      kv, KN_ERR__TRANSPORT,
      "web identity (role arn:aws:iam::1:role/r, from the environment): STS "
      "AssumeRoleWithWebIdentity: POST http://127.0.0.1:1:");
  setenv("AWS_ROLE_SESSION_NAME", "bad name!", 1);
  EXPECT_ERR(kv, KN_ERR__CONF,
             "role session name \"bad name!\" must be 2 to 64");
  /* The role ARN alone is not web identity. */
  unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
  unsetenv("AWS_ROLE_SESSION_NAME");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "no AWS credentials found");
}

static void test_container_config(void) {
  kt_aws_reset();
  setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://192.0.2.1/creds", 1);
  EXPECT_ERR(NULL, KN_ERR__CONF,
             "plain http is only allowed to a loopback address");
  setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "ftp://127.0.0.1/creds", 1);
  EXPECT_ERR(NULL, KN_ERR__CONF, "is not a valid URL");
  /* Allowed but nothing listens: a transport error. */
  setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/creds", 1);
  EXPECT_ERR(NULL, KN_ERR__TRANSPORT,
             "container credentials: GET http://127.0.0.1:1/creds");
  setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://localhost:1/creds", 1);
  EXPECT_ERR(NULL, KN_ERR__TRANSPORT, "container credentials");
  setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", kt_path("files/none"), 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "token file");
  unsetenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "a\nb", 1);
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "holds control characters");
  /* IMDS endpoint override is checked. */
  kt_aws_reset();
  unsetenv("AWS_EC2_METADATA_DISABLED");
  setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "nonsense", 1);
  EXPECT_ERR(NULL, KN_ERR__CONF,
             "instance metadata endpoint \"nonsense\" (from "
             "AWS_EC2_METADATA_SERVICE_ENDPOINT)");
  /* Nothing listening: IMDS is absent, quickly. */
  setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1/", 1);
  int64_t t0 = kn_mono_ms();
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "EC2 instance metadata (not reachable at http://127.0.0.1:1");
  KT_CHECK(kn_mono_ms() - t0 < KT_PROMPT_MS);
}

/* A credential_process script printing doc; `count` counts its runs. */
static const char *script(const char *name, const char *body) {
  char text[4096];
  snprintf(text, sizeof(text),
           "#!/bin/sh\n"
           "cd '%s/files' || exit 99\n"
           "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count\n"
           "%s\n",
           kt_tmp, body);
  return kt_write(name, text);
}

static int runs(void) {
  FILE *f = fopen(kt_path("files/count"), "r");
  int n = 0;
  if (f) {
    if (fscanf(f, "%d", &n) != 1) n = -1;
    fclose(f);
  }
  return n;
}

static void use_process(const char *path) {
  char cfg[1024];
  snprintf(cfg, sizeof(cfg),
           "[default]\ncredential_process = %s --flag 'a b'\n", path);
  kt_write(".aws/config", cfg);
  remove(kt_path("files/count"));
}

static void test_process(void) {
  kt_aws_reset();
  kn_creds_t c;
  kn_err_t code;
  use_process(
      script("files/good.sh",
             "printf '{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", "
             "\"SecretAccessKey\": \"SPROC\", \"SessionToken\": \"TPROC\", "
             "\"Expiration\": \"2999-01-01T00:00:00Z\"}'\n"
             "echo 'a warning' >&2"));
  KT_CHECK(resolve(NULL, &c, &code) == NULL);
  KT_CHECK_STR(c.access_key_id, "AKIDPROC");
  KT_CHECK_STR(c.secret_access_key, "SPROC");
  KT_CHECK_STR(c.session_token, "TPROC");
  KT_CHECK_STR(c.source, "process");
  int64_t want;
  kn_iso8601_parse("2999-01-01T00:00:00Z", &want);
  KT_CHECK_INT(c.expires_ms, want);
  KT_CHECK_INT(runs(), 1);
  kn_creds_clear(&c);

  /* Arguments reach the script through the shell. */
  use_process(script(
      "files/args.sh",
      "[ \"$1\" = --flag ] && [ \"$2\" = 'a b' ] || exit 7\n"
      "echo "
      "'{\"Version\":1,\"AccessKeyId\":\"AK\",\"SecretAccessKey\":\"S\"}'"));
  KT_CHECK(resolve(NULL, &c, &code) == NULL);
  KT_CHECK_INT(c.expires_ms, 0); /* no Expiration: does not expire */
  KT_CHECK(c.session_token == NULL);
  kn_creds_clear(&c);

  use_process(
      script("files/exit.sh",
             "echo 'token expired, run login' >&2; echo partial; exit 3"));
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "credential_process of profile \"default\" (~/.aws/config:2): "
             "exited with status "
             "3: token expired, run login");

  use_process(script("files/notjson.sh", "echo 'SECRETSTUFF not json'"));
  EXPECT_ERR(NULL, KN_ERR__BAD_MSG,
             "the output is not valid JSON (line 1, column");
  {
    kn_err_t code2;
    const char *m = resolve(NULL, &c, &code2);
    KT_CHECK(m && !strstr(m, "SECRETSTUFF")); /* output never quoted */
  }

  use_process(script(
      "files/v2.sh",
      "echo "
      "'{\"Version\":2,\"AccessKeyId\":\"AK\",\"SecretAccessKey\":\"S\"}'"));
  EXPECT_ERR(NULL, KN_ERR__BAD_MSG, "expected \"Version\": 1");
  use_process(script("files/nokey.sh",
                     "echo '{\"Version\":1,\"SecretAccessKey\":\"S\"}'"));
  EXPECT_ERR(NULL, KN_ERR__BAD_MSG, "missing \"AccessKeyId\"");
  use_process(script(
      "files/badexp.sh",
      "echo '{\"Version\":1,\"AccessKeyId\":\"AK\",\"SecretAccessKey\":\"S\","
      "\"Expiration\":\"tomorrow\"}'"));
  EXPECT_ERR(NULL, KN_ERR__BAD_MSG,
             "\"Expiration\" is not an ISO-8601 date-time");
  use_process(script(
      "files/past.sh",
      "echo '{\"Version\":1,\"AccessKeyId\":\"AK\",\"SecretAccessKey\":\"S\","
      "\"Expiration\":\"2001-01-01T00:00:00Z\"}'"));
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS,
             "credentials from process expire at 2001-01-01T00:00:00Z");
  kt_write(".aws/config", "[default]\ncredential_process = kill -TERM $$\n");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "killed by signal 15");
  use_process(script("files/big.sh", "head -c 100000 /dev/zero | tr '\\0' x"));
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "output larger than 65536 bytes");
  use_process(script("files/array.sh", "echo '[1]'"));
  EXPECT_ERR(NULL, KN_ERR__BAD_MSG, "expected a JSON object");

  /* Only stdin, stdout and stderr reach the helper, though the process
   * holds a descriptor without close-on-exec (libcurl's sockets are).  The
   * helper lists its shell's descriptors on stderr, which the error then
   * quotes. */
  {
    int leak = open("/dev/null", O_RDONLY);
    KT_CHECK(leak > 2);
    kt_write(".aws/config",
             "[default]\ncredential_process = exec 1>&2; ls -m /proc/$$/fd; "
             "exit 3\n");
    const char *m = resolve(NULL, &c, &code);
    const char *fds = "exited with status 3: 0, 1, 2";
    KT_CHECK_MSG(m && strlen(m) > strlen(fds) &&
                     !strcmp(m + strlen(m) - strlen(fds), fds),
                 "got \"%s\"", m ? m : "(null)");
    close(leak);
  }

  /* Timeouts kill the whole process group, including what it started. */
  static const char *const kv[] = {"credential.process.timeout.ms", "300",
                                   NULL};
  use_process(script("files/slow.sh", "sleep 30 & sleep 30"));
  int64_t t0 = kn_mono_ms();
  EXPECT_ERR(kv, KN_ERR__TIMED_OUT, "did not finish within 300 ms (killed)");
  KT_CHECK(kn_mono_ms() - t0 < KT_PROMPT_MS); /* not the script's 30 s */
  /* A child that closes its output and lingers still times out. */
  use_process(script("files/linger.sh", "exec >&- 2>&-; sleep 30"));
  t0 = kn_mono_ms();
  EXPECT_ERR(kv, KN_ERR__TIMED_OUT, "did not finish within 300 ms");
  KT_CHECK(kn_mono_ms() - t0 < KT_PROMPT_MS); /* not the script's 30 s */
  /* A missing program is the shell's exit status 127. */
  kt_write(".aws/config",
           "[default]\ncredential_process = /nonexistent/program\n");
  EXPECT_ERR(NULL, KN_ERR__CREDENTIALS, "exited with status 127");
}

/* Writes a process script whose credentials expire in_ms from now, with
 * the run number in the key id; fail_after: runs after this one fail. */
static void expiring_script(int64_t in_ms, int fail_after) {
  char exp[21], body[1024];
  kn_iso8601_format(kn_wall_ms() + in_ms, exp);
  snprintf(
      body, sizeof(body),
      "[ $n -gt %d ] && { echo 'refresh broke' >&2; exit 1; }\n"
      "printf "
      "'{\"Version\":1,\"AccessKeyId\":\"AKID%%s\",\"SecretAccessKey\":\"S\","
      "\"SessionToken\":\"T\",\"Expiration\":\"%s\"}' $n",
      fail_after, exp);
  use_process(script("files/exp.sh", body));
}

static kn_creds_provider_t *provider(void) {
  kn_aws_settings_t s;
  if (settings(&s, NULL)) return NULL;
  kn_error_t *e = NULL;
  kn_creds_provider_t *p = kn_creds_provider_new(&s, &e);
  kn_aws_settings_clear(&s);
  KT_CHECK_MSG(p != NULL, "%s", e ? kn_error_string(e) : "");
  kn_error_destroy(e);
  /* The refresh interval and the wait after a failure pass when the test
   * says so (advance), not when a slow run happens to take that long. */
  if (p) kn_creds_provider_freeze_clock(p);
  return p;
}

static const char *get_id(kn_creds_provider_t *p) {
  static char id[64];
  kn_creds_t c = {0};
  kn_error_t *e = kn_creds_get(p, &c);
  snprintf(id, sizeof(id), "%s", e ? "error" : c.access_key_id);
  if (e) fprintf(stderr, "get: %s\n", kn_error_string(e));
  kn_error_destroy(e);
  kn_creds_clear(&c);
  return id;
}

/* get_id until it returns want, for at most 20 s (a refresh runs on the
 * provider's thread). */
static const char *get_id_until(kn_creds_provider_t *p, const char *want) {
  const char *id = "";
  for (int i = 0; i < 400; i++) {
    id = get_id(p);
    if (strcmp(id, want) == 0) break;
    kn_sleep_ms(50);
  }
  return id;
}

static void wait_runs(int n) {
  for (int i = 0; i < 400 && runs() < n; i++) kn_sleep_ms(50);
  KT_CHECK_INT(runs(), n);
}

/* Waits (for at most 20 s) until the provider has finished n fetches. */
static void wait_fetches(kn_creds_provider_t *p, uint64_t n) {
  for (int i = 0; i < 400 && kn_creds_provider_fetches(p) < n; i++)
    kn_sleep_ms(50);
  KT_CHECK_INT(kn_creds_provider_fetches(p), n);
}

static void test_cache_and_refresh(void) {
  kt_aws_reset();
  /* Far from expiry: cached, the process runs once. */
  expiring_script(3600 * 1000, 99);
  kn_creds_provider_t *p = provider();
  if (!p) return;
  KT_CHECK_STR(get_id(p), "AKID1");
  KT_CHECK_STR(get_id(p), "AKID1");
  KT_CHECK_INT(runs(), 1);
  kn_creds_provider_destroy(p);

  /* Within the refresh window: refreshed in the background (the caller
   * goes on with the cached keys), but not more than once a second. */
  expiring_script(120 * 1000, 99);
  p = provider();
  KT_REQUIRE(p != NULL);
  KT_CHECK_STR(get_id(p), "AKID1");
  KT_CHECK_STR(get_id(p), "AKID1");
  KT_CHECK_INT(runs(), 1);
  kn_creds_provider_advance(p, KN_CREDS_REFRESH_INTERVAL_MS);
  KT_CHECK_STR(get_id(p), "AKID1"); /* asks for the refresh */
  KT_CHECK_STR(get_id_until(p, "AKID2"), "AKID2");
  KT_CHECK_INT(runs(), 2);
  kn_creds_provider_destroy(p);

  /* A failed refresh keeps credentials that are still usable, and waits
   * before trying again. */
  expiring_script(120 * 1000, 1);
  p = provider();
  KT_REQUIRE(p != NULL);
  KT_CHECK_STR(get_id(p), "AKID1");
  kn_creds_provider_advance(p, KN_CREDS_REFRESH_INTERVAL_MS);
  KT_CHECK_STR(get_id(p), "AKID1"); /* asks for run 2, which fails */
  wait_runs(2);
  wait_fetches(p, 2); /* the failure recorded */
  KT_CHECK_STR(get_id(p), "AKID1");
  KT_CHECK_INT(runs(), 2);
  KT_CHECK_STR(get_id(p), "AKID1"); /* no new attempt yet */
  KT_CHECK_INT(runs(), 2);
  kn_creds_provider_destroy(p);

  /* Nearly expired credentials are never handed out. */
  expiring_script(5 * 1000, 99);
  p = provider();
  KT_REQUIRE(p != NULL);
  KT_CHECK_STR(get_id(p), "error");
  kn_creds_provider_destroy(p);
  kn_creds_provider_destroy(NULL);
}

/* A refresh that hangs holds up nobody while the cached credentials are
 * usable: the caller gets them at once, again and again, and a
 * non-blocking caller with nothing cached is told to come back. */
static void test_refresh_off_caller(void) {
  kt_aws_reset();
  char exp[21], body[1024];
  kn_iso8601_format(kn_wall_ms() + 120 * 1000, exp);
  snprintf(
      body, sizeof(body),
      "if [ $n -eq 2 ]; then i=0; while [ ! -e go ] && [ $i -lt 600 ]; do "
      "sleep 0.05; i=$((i+1)); done; fi\n"
      "printf "
      "'{\"Version\":1,\"AccessKeyId\":\"AKID%%s\",\"SecretAccessKey\":\"S\","
      "\"SessionToken\":\"T\",\"Expiration\":\"%s\"}' $n",
      exp);
  use_process(script("files/hang.sh", body));
  remove(kt_path("files/go"));
  kn_creds_provider_t *p = provider();
  if (!p) return;
  /* Nothing cached: the non-blocking form asks and comes back. */
  uint64_t ticket = 0;
  kn_creds_t c = {0};
  kn_error_t *e = kn_creds_get_nowait(p, &c, &ticket);
  KT_CHECK(e == NULL);
  for (int i = 0; i < 400 && !e && !c.access_key_id; i++) {
    kn_sleep_ms(50);
    e = kn_creds_get_nowait(p, &c, &ticket);
  }
  KT_CHECK(e == NULL);
  KT_CHECK_STR(c.access_key_id ? c.access_key_id : "", "AKID1");
  KT_CHECK_INT((int)ticket, 0);
  kn_creds_clear(&c);
  kn_error_destroy(e);
  kn_creds_provider_advance(p, KN_CREDS_REFRESH_INTERVAL_MS);
  KT_CHECK_STR(get_id(p), "AKID1"); /* starts run 2, which hangs */
  wait_runs(2);
  for (int i = 0; i < 5; i++) KT_CHECK_STR(get_id(p), "AKID1");
  KT_CHECK(access(kt_path("files/go"), F_OK) != 0); /* still hanging */
  kt_write("files/go", "");
  KT_CHECK_STR(get_id_until(p, "AKID2"), "AKID2");
  kn_creds_provider_destroy(p);

  /* A fetch that fails is the error of the non-blocking form too. */
  kt_write(".aws/config",
           "[default]\ncredential_process = /nonexistent/program\n");
  p = provider();
  KT_REQUIRE(p != NULL);
  ticket = 0;
  e = kn_creds_get_nowait(p, &c, &ticket);
  for (int i = 0; i < 400 && !e && !c.access_key_id; i++) {
    kn_sleep_ms(50);
    e = kn_creds_get_nowait(p, &c, &ticket);
  }
  KT_CHECK(e != NULL && strstr(kn_error_string(e), "exited with status 127"));
  KT_CHECK(c.access_key_id == NULL);
  kn_error_destroy(e);
  kn_creds_provider_destroy(p);
}

/* Many threads asking at once get the same credentials from one run. */
static void *getter(void *arg) {
  kn_creds_provider_t *p = arg;
  for (int i = 0; i < 20; i++) {
    kn_creds_t c = {0};
    kn_error_t *e = kn_creds_get(p, &c);
    if (e || strcmp(c.access_key_id, "AKID1") != 0) {
      kn_error_destroy(e);
      kn_creds_clear(&c);
      return (void *)1;
    }
    kn_creds_clear(&c);
  }
  return NULL;
}

static void test_threads(void) {
  kt_aws_reset();
  expiring_script(3600 * 1000, 99);
  kn_creds_provider_t *p = provider();
  if (!p) return;
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, getter, p);
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    bad += r != NULL;
  }
  KT_CHECK_INT(bad, 0);
  KT_CHECK_INT(runs(), 1);
  kn_creds_provider_destroy(p);
}

static void test_json_docs(void) {
  kn_creds_t c = {0};
  kn_error_t *e = NULL;
  const char *imds =
      "{\"Code\":\"Success\",\"LastUpdated\":\"2024-01-01T00:00:00Z\","
      "\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"ASIA\",\"SecretAccessKey\":"
      "\"S\","
      "\"Token\":\"T\",\"Expiration\":\"2024-01-01T06:00:00Z\"}";
  KT_CHECK(kn_creds_parse_json(imds, strlen(imds), KN_CREDS_DOC_IMDS, "imds",
                               &c, &e) == 0);
  KT_CHECK_STR(c.session_token, "T");
  KT_CHECK_INT(c.expires_ms, 1704088800000LL);
  kn_creds_clear(&c);
  kn_error_destroy(e); /* out of memory */
  e = NULL;
  const char *failed =
      "{\"Code\":\"AssumeRoleUnauthorizedAccess\",\"AccessKeyId\":\"A\"}";
  KT_CHECK(kn_creds_parse_json(failed, strlen(failed), KN_CREDS_DOC_IMDS,
                               "imds", &c, &e) != 0);
  KT_CHECK(e && strstr(kn_error_string(e),
                       "imds: Code is \"AssumeRoleUnauthorizedAccess\""));
  kn_error_destroy(e);
  e = NULL;
  const char *noexp =
      "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\",\"Token\":\"T\"}";
  KT_CHECK(kn_creds_parse_json(noexp, strlen(noexp), KN_CREDS_DOC_CONTAINER,
                               "ctr", &c, &e) != 0);
  KT_CHECK(e && strstr(kn_error_string(e), "ctr: missing \"Expiration\""));
  kn_error_destroy(e);
  e = NULL;
  const char *wrong =
      "{\"AccessKeyId\":5,\"SecretAccessKey\":\"S\",\"Expiration\":\"x\"}";
  KT_CHECK(kn_creds_parse_json(wrong, strlen(wrong), KN_CREDS_DOC_CONTAINER,
                               "ctr", &c, &e) != 0);
  KT_CHECK(e && strstr(kn_error_string(e), "not a string"));
  kn_error_destroy(e);
  e = NULL;
  const char *dup =
      "{\"AccessKeyId\":\"A\",\"AccessKeyId\":\"B\",\"SecretAccessKey\":\"S\"}";
  KT_CHECK(kn_creds_parse_json(dup, strlen(dup), KN_CREDS_DOC_CONTAINER, "ctr",
                               &c, &e) != 0);
  kn_error_destroy(e);
  e = NULL;
  const char *ctl =
      "{\"Version\":1,\"AccessKeyId\":\"A\\r\\nX: "
      "y\",\"SecretAccessKey\":\"S\"}";
  KT_CHECK(kn_creds_parse_json(ctl, strlen(ctl), KN_CREDS_DOC_PROCESS, "p", &c,
                               &e) != 0);
  KT_CHECK(e && strstr(kn_error_string(e), "control characters"));
  kn_error_destroy(e);
}

static char *xml_text_at(const char *doc, const char *const *path) {
  kn_xml_span_t in = {doc, strlen(doc)}, out;
  if (kn_xml_path(in, path, &out)) return NULL;
  return kn_xml_text(out);
}

static void test_xml(void) {
  const char *ok =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<AssumeRoleWithWebIdentityResponse "
      "xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
      "  <AssumeRoleWithWebIdentityResult>\n"
      "    "
      "<SubjectFromWebIdentityToken>system:sa</SubjectFromWebIdentityToken>\n"
      "    <!-- <Credentials><AccessKeyId>FAKE</AccessKeyId></Credentials> "
      "-->\n"
      "    <Credentials>\n"
      "      <SessionToken>tok&amp;en&lt;&#65;&#x42;&#x20AC;</SessionToken>\n"
      "      <SecretAccessKey>\n   wJalr/K7MDENG   \n</SecretAccessKey>\n"
      "      <Expiration>2024-01-01T00:00:00Z</Expiration>\n"
      "      <AccessKeyIdExtra>no</AccessKeyIdExtra>\n"
      "      <AccessKeyId attr='a>b'>ASIAEXAMPLE</AccessKeyId>\n"
      "    </Credentials>\n"
      "    <Empty/>\n"
      "  </AssumeRoleWithWebIdentityResult>\n"
      "</AssumeRoleWithWebIdentityResponse>\n";
  static const char *const pid[] = {"AssumeRoleWithWebIdentityResult",
                                    "Credentials", "AccessKeyId", NULL};
  static const char *const ptok[] = {"Credentials", "SessionToken", NULL};
  static const char *const psk[] = {"SecretAccessKey", NULL};
  static const char *const pempty[] = {"Empty", NULL};
  static const char *const pnone[] = {"Nope", NULL};
  char *s = xml_text_at(ok, pid);
  KT_CHECK_STR(s, "ASIAEXAMPLE");
  free(s);
  s = xml_text_at(ok, ptok);
  KT_CHECK_STR(s, "tok&en<AB\xE2\x82\xAC");
  free(s);
  s = xml_text_at(ok, psk);
  KT_CHECK_STR(s, "wJalr/K7MDENG");
  free(s);
  s = xml_text_at(ok, pempty);
  KT_CHECK_STR(s, "");
  free(s);
  KT_CHECK(xml_text_at(ok, pnone) == NULL);

  const char *err =
      "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
      "<Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
      "<Message>Couldn&apos;t retrieve verification key</Message></Error>"
      "<RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></"
      "ErrorResponse>";
  static const char *const pcode[] = {"Error", "Code", NULL};
  static const char *const pmsg[] = {"Error", "Message", NULL};
  s = xml_text_at(err, pcode);
  KT_CHECK_STR(s, "InvalidIdentityToken");
  free(s);
  s = xml_text_at(err, pmsg);
  KT_CHECK_STR(s, "Couldn't retrieve verification key");
  free(s);

  /* Prefixes, nesting of the same name, CDATA skipped while searching. */
  static const char *const pa[] = {"A", NULL};
  static const char *const pab[] = {"A", "B", NULL};
  s = xml_text_at("<x:A><![CDATA[<B>no</B>]]></x:A>", pab);
  KT_CHECK(s == NULL);
  s = xml_text_at("<sts:A><B>yes</B></sts:A>", pab);
  KT_CHECK_STR(s, "yes");
  free(s);
  kn_xml_span_t in = {"<A><A>in</A></A>", 16}, out;
  KT_CHECK(kn_xml_find(in, "A", &out) == 0 && out.len == 9);
  /* Broken documents. */
  static const char *const broken[] = {"<A>open",  "<A", "<!-- <A>x</A>",
                                       "<A>x</B>", "",   "text"};
  for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++)
    KT_CHECK_MSG(xml_text_at(broken[i], pa) == NULL, "parsed \"%s\"",
                 broken[i]);
  /* Markup, unknown entities or bad references in text. */
  static const char *const badtext[] = {"<A>a<b/>c</A>", "<A>&nbsp;</A>",
                                        "<A>&#0;</A>",   "<A>&#xD800;</A>",
                                        "<A>&amp</A>",   "<A>&#x110000;</A>"};
  for (size_t i = 0; i < sizeof(badtext) / sizeof(badtext[0]); i++)
    KT_CHECK_MSG(xml_text_at(badtext[i], pa) == NULL, "decoded \"%s\"",
                 badtext[i]);
}

int main(void) {
  KT_RUN(test_chain_order);
  KT_RUN(test_static_details);
  KT_RUN(test_corrupt_files);
  KT_RUN(test_not_regular);
  KT_RUN(test_roles);
  KT_RUN(test_container_config);
  KT_RUN(test_process);
  KT_RUN(test_cache_and_refresh);
  KT_RUN(test_refresh_off_caller);
  KT_RUN(test_threads);
  KT_RUN(test_json_docs);
  KT_RUN(test_xml);
  kt_aws_cleanup();
  return KT_DONE();
}
