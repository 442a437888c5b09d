/* Settings resolution: precedence of properties, environment and the
 * shared files; profiles; endpoints; errors. */
#include <stdlib.h>
#include <string.h>

#include "aws/profile.h"
#include "aws/settings.h"
#include "aws/url.h"
#include "core/conf.h"
#include "core/error.h"
#include "kt.h"
#include "kt_aws.h"
#include "kn/version.h"

static kn_conf_t *conf_of(const char *const *kv) {
  kn_conf_t *c = kn_conf_new();
  char err[256];
  for (; kv && kv[0]; kv += 2)
    if (kn_conf_set(c, kv[0], kv[1], err, sizeof(err)) != KN_CONF_OK) {
      fprintf(stderr, "conf %s: %s\n", kv[0], err);
      exit(2);
    }
  return c;
}

/* Loads settings; on failure returns the message (static) and *ok = 0. */
static const char *load(kn_aws_settings_t *s, const char *const *kv, int *ok) {
  static char msg[1024];
  kn_conf_t *c = conf_of(kv);
  kn_error_t *e = kn_aws_settings_load(s, c, NULL);
  kn_conf_destroy(c);
  *ok = e == NULL;
  snprintf(msg, sizeof(msg), "%s", e ? kn_error_string(e) : "");
  if (e) KT_CHECK_INT(kn_error_code(e), KN_ERR__CONF);
  kn_error_destroy(e);
  return msg;
}

#define LOAD_OK(s, kv)                            \
  do {                                            \
    int ok_;                                      \
    const char *m_ = load(s, kv, &ok_);           \
    KT_CHECK_MSG(ok_, "settings failed: %s", m_); \
  } while (0)

#define LOAD_ERR(s, kv, want)                                             \
  do {                                                                    \
    int ok_;                                                              \
    const char *m_ = load(s, kv, &ok_);                                   \
    KT_CHECK_MSG(!ok_ && strstr(m_, want), "got \"%s\", want \"%s\"", m_, \
                 want);                                                   \
    if (ok_) kn_aws_settings_clear(s);                                    \
  } while (0)

static void test_region_precedence(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  /* Nothing at all: a clear error. */
  LOAD_ERR(
      &s, NULL,
      "no AWS region: set the region property, AWS_REGION or "
      "AWS_DEFAULT_REGION, or region in profile \"default\" of ~/.aws/config");
  kt_write(
      ".aws/config",
      "[default]\nregion = eu-central-1\n[profile dev]\nregion = ap-south-1\n");
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.region, "eu-central-1");
  KT_CHECK_STR(s.profile, "default");
  KT_CHECK_STR(s.kinesis_endpoint,
               "https://kinesis.eu-central-1.amazonaws.com");
  KT_CHECK_STR(s.dynamodb_endpoint,
               "https://dynamodb.eu-central-1.amazonaws.com");
  KT_CHECK_STR(s.sts_endpoint, "https://sts.eu-central-1.amazonaws.com");
  kn_aws_settings_clear(&s);
  setenv("AWS_DEFAULT_REGION", "us-west-1", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.region, "us-west-1");
  kn_aws_settings_clear(&s);
  setenv("AWS_REGION", "us-west-2", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.region, "us-west-2");
  kn_aws_settings_clear(&s);
  const char *kv[] = {"region", "sa-east-1", NULL};
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.region, "sa-east-1");
  kn_aws_settings_clear(&s);
  /* Empty variables count as unset. */
  setenv("AWS_REGION", "", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.region, "us-west-1");
  kn_aws_settings_clear(&s);
  /* China regions use their own domain. */
  setenv("AWS_REGION", "cn-north-1", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.kinesis_endpoint,
               "https://kinesis.cn-north-1.amazonaws.com.cn");
  KT_CHECK_STR(s.sts_endpoint, "https://sts.cn-north-1.amazonaws.com.cn");
  kn_aws_settings_clear(&s);
  /* A region that would break a host name. */
  setenv("AWS_REGION", "us-east-1/../x", 1);
  LOAD_ERR(&s, NULL,
           "region \"us-east-1/../x\" (from AWS_REGION) is not a region name");
  const char *kv2[] = {"region", "-bad", NULL};
  LOAD_ERR(&s, kv2, "(from property region)");
}

/* A stream given by ARN names its region: it wins over the environment
 * and the profile; a region property that says otherwise is an error. */
static void test_region_from_stream_arn(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  kt_write(".aws/config", "[default]\nregion = eu-central-1\n");
  setenv("AWS_REGION", "us-west-2", 1);
  const char *kv[] = {
      "stream", "arn:aws:kinesis:eu-west-2:123456789012:stream/orders", NULL};
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.region, "eu-west-2");
  KT_CHECK_STR(s.kinesis_endpoint, "https://kinesis.eu-west-2.amazonaws.com");
  kn_aws_settings_clear(&s);
  const char *same[] = {"stream",
                        "arn:aws:kinesis:eu-west-2:123456789012:stream/orders",
                        "region", "eu-west-2", NULL};
  LOAD_OK(&s, same);
  KT_CHECK_STR(s.region, "eu-west-2");
  kn_aws_settings_clear(&s);
  const char *other[] = {"stream",
                         "arn:aws:kinesis:eu-west-2:123456789012:stream/orders",
                         "region", "us-east-1", NULL};
  LOAD_ERR(&s, other,
           "stream arn:aws:kinesis:eu-west-2:123456789012:stream/orders is in "
           "region eu-west-2, but the region property is us-east-1");
  const char *cn[] = {
      "stream", "arn:aws-cn:kinesis:cn-north-1:123456789012:stream/s", NULL};
  LOAD_OK(&s, cn);
  KT_CHECK_STR(s.kinesis_endpoint,
               "https://kinesis.cn-north-1.amazonaws.com.cn");
  kn_aws_settings_clear(&s);
  const char *bad[] = {"stream", "arn:aws:kinesis::123456789012:stream/s",
                       NULL};
  LOAD_ERR(&s, bad,
           "stream \"arn:aws:kinesis::123456789012:stream/s\" is not a "
           "Kinesis stream ARN (arn:PARTITION:kinesis:REGION:ACCOUNT:stream/"
           "NAME)");
  /* A stream name says nothing of the region. */
  const char *name[] = {"stream", "orders", NULL};
  LOAD_OK(&s, name);
  KT_CHECK_STR(s.region, "us-west-2");
  kn_aws_settings_clear(&s);
  unsetenv("AWS_REGION");
}

static void test_region_default_with_endpoint(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4567", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.region, "us-east-1");
  KT_CHECK_STR(s.kinesis_endpoint, "http://127.0.0.1:4567");
  KT_CHECK_STR(s.dynamodb_endpoint, "http://127.0.0.1:4567");
  KT_CHECK_STR(s.sts_endpoint, "http://127.0.0.1:4567");
  kn_aws_settings_clear(&s);
  unsetenv("AWS_ENDPOINT_URL");
  const char *kv[] = {"kinesis.endpoint", "https://localhost:4568", NULL};
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.region, "us-east-1");
  KT_CHECK_STR(s.kinesis_endpoint, "https://localhost:4568");
  KT_CHECK_STR(s.dynamodb_endpoint, "https://dynamodb.us-east-1.amazonaws.com");
  kn_aws_settings_clear(&s);
}

static void test_profiles(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  kt_write(".aws/config",
           "[default]\nregion = eu-west-1\n"
           "[profile dev]\nregion = eu-west-2\n"
           "[profile \"quoted name\"]\nregion = eu-west-3\n"
           "[prod]\nregion = not-a-profile-in-config\n");
  kt_write(".aws/credentials",
           "[prod]\naws_access_key_id = A\naws_secret_access_key = B\n"
           "region = us-east-2\n");
  setenv("AWS_PROFILE", "dev", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.profile, "dev");
  KT_CHECK_STR(s.region, "eu-west-2");
  kn_aws_settings_clear(&s);
  const char *kv[] = {"profile", "quoted name", NULL};
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.region, "eu-west-3");
  kn_aws_settings_clear(&s);
  /* In the credentials file the section name is the profile name; its keys
   * count for the profile as in botocore. */
  setenv("AWS_PROFILE", "prod", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.region, "us-east-2");
  kn_aws_settings_clear(&s);
  /* A profile asked for by name must exist. */
  setenv("AWS_PROFILE", "nope", 1);
  LOAD_ERR(&s, NULL,
           "profile \"nope\" (from AWS_PROFILE) is in neither ~/.aws/config "
           "nor ~/.aws/credentials");
  const char *kv2[] = {"profile", "nope2", NULL};
  LOAD_ERR(&s, kv2, "profile \"nope2\" (from property profile)");
  unsetenv("AWS_PROFILE");
  setenv("AWS_DEFAULT_PROFILE", "dev", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.region, "eu-west-2");
  kn_aws_settings_clear(&s);
  unsetenv("AWS_DEFAULT_PROFILE");
  /* [profile default] wins over [default]. */
  kt_write(".aws/config",
           "[profile default]\nregion = ca-central-1\n[default]\nregion = "
           "eu-north-1\n");
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.region, "ca-central-1");
  kn_aws_settings_clear(&s);
  /* The default profile may be missing altogether. */
  kt_write(".aws/config", "[profile other]\nregion = eu-north-1\n");
  setenv("AWS_REGION", "us-east-1", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.profile, "default");
  kn_aws_settings_clear(&s);
}

static void test_files(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  setenv("AWS_REGION", "us-east-1", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.config_file, kt_path(".aws/config"));
  KT_CHECK_STR(s.credentials_file, kt_path(".aws/credentials"));
  kn_aws_settings_clear(&s);
  unsetenv("AWS_REGION");
  kt_write("files/cfg", "[profile x]\nregion = me-south-1\n");
  setenv("AWS_CONFIG_FILE", "~/files/cfg", 1);
  setenv("AWS_SHARED_CREDENTIALS_FILE", kt_path("files/none"), 1);
  setenv("AWS_PROFILE", "x", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.config_file, kt_path("files/cfg"));
  KT_CHECK_STR(s.credentials_file, kt_path("files/none"));
  KT_CHECK_STR(s.region, "me-south-1");
  kn_aws_settings_clear(&s);
  /* A corrupt file is an error naming it and the line. */
  kt_write("files/cfg", "[profile x]\nregion = me-south-1\n\nnonsense\n");
  LOAD_ERR(&s, NULL, "~/files/cfg:4: expected \"key = value\"");
  kt_write("files/cfg", "[profile x]\nregion = me-south-1\n");
  kt_write("files/creds", "# creds\n[x]\naws_access_key_id = A\n[x]\n");
  setenv("AWS_SHARED_CREDENTIALS_FILE", kt_path("files/creds"), 1);
  LOAD_ERR(&s, NULL,
           "~/files/creds:4: duplicate section [x] (first at line 2)");
  /* A directory is no file. */
  setenv("AWS_SHARED_CREDENTIALS_FILE", kt_path("files"), 1);
  LOAD_ERR(&s, NULL, "cannot read ~/files:");
}

static void test_endpoints(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  setenv("AWS_REGION", "eu-west-1", 1);
  kt_write(
      ".aws/config",
      "[default]\nservices = local\nendpoint_url = http://profile-global:1\n"
      "[services local]\nkinesis =\n  endpoint_url = http://profile-kinesis:2\n"
      "sts =\n  endpoint_url = http://profile-sts:3\n");
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.kinesis_endpoint, "http://profile-kinesis:2");
  KT_CHECK_STR(s.dynamodb_endpoint, "http://profile-global:1");
  KT_CHECK_STR(s.sts_endpoint, "http://profile-sts:3");
  kn_aws_settings_clear(&s);
  setenv("AWS_ENDPOINT_URL", "http://env-global:4", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.kinesis_endpoint, "http://env-global:4");
  KT_CHECK_STR(s.dynamodb_endpoint, "http://env-global:4");
  kn_aws_settings_clear(&s);
  const char *kv[] = {"endpoint", "http://prop-global:5", NULL};
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.kinesis_endpoint, "http://prop-global:5");
  kn_aws_settings_clear(&s);
  /* The endpoint property (kncat --endpoint) beats the environment for
   * Kinesis only; DynamoDB and STS keep theirs. */
  setenv("AWS_ENDPOINT_URL_KINESIS", "http://env-kinesis:6", 1);
  setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://env-dynamodb:9", 1);
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.kinesis_endpoint, "http://prop-global:5");
  KT_CHECK_STR(s.dynamodb_endpoint, "http://env-dynamodb:9");
  KT_CHECK_STR(s.sts_endpoint, "http://env-global:4");
  kn_aws_settings_clear(&s);
  unsetenv("AWS_ENDPOINT_URL_DYNAMODB");
  unsetenv("AWS_ENDPOINT_URL");
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.dynamodb_endpoint, "http://profile-global:1");
  KT_CHECK_STR(s.sts_endpoint, "http://profile-sts:3");
  kn_aws_settings_clear(&s);
  kt_write(".aws/config", "");
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.dynamodb_endpoint, "https://dynamodb.eu-west-1.amazonaws.com");
  KT_CHECK_STR(s.sts_endpoint, "https://sts.eu-west-1.amazonaws.com");
  kn_aws_settings_clear(&s);
  kt_write(
      ".aws/config",
      "[default]\nservices = local\nendpoint_url = http://profile-global:1\n"
      "[services local]\nkinesis =\n  endpoint_url = http://profile-kinesis:2\n"
      "sts =\n  endpoint_url = http://profile-sts:3\n");
  setenv("AWS_ENDPOINT_URL", "http://env-global:4", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.kinesis_endpoint, "http://env-kinesis:6");
  KT_CHECK_STR(s.dynamodb_endpoint, "http://env-global:4");
  kn_aws_settings_clear(&s);
  const char *kv2[] = {"endpoint",
                       "http://prop-global:5",
                       "kinesis.endpoint",
                       "http://prop-kinesis:7",
                       "dynamodb.endpoint",
                       "http://prop-dynamodb:8",
                       NULL};
  LOAD_OK(&s, kv2);
  KT_CHECK_STR(s.kinesis_endpoint, "http://prop-kinesis:7");
  KT_CHECK_STR(s.dynamodb_endpoint, "http://prop-dynamodb:8");
  KT_CHECK_STR(s.sts_endpoint, "http://env-global:4");
  kn_aws_settings_clear(&s);
  /* Ignoring configured endpoints keeps properties only. */
  setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.kinesis_endpoint, "https://kinesis.eu-west-1.amazonaws.com");
  kn_aws_settings_clear(&s);
  LOAD_OK(&s, kv2);
  KT_CHECK_STR(s.kinesis_endpoint, "http://prop-kinesis:7");
  kn_aws_settings_clear(&s);
  unsetenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
  unsetenv("AWS_ENDPOINT_URL");
  unsetenv("AWS_ENDPOINT_URL_KINESIS");
  kt_write(".aws/config",
           "[default]\nendpoint_url = "
           "http://x\nignore_configured_endpoint_urls = TRUE\n");
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.kinesis_endpoint, "https://kinesis.eu-west-1.amazonaws.com");
  kn_aws_settings_clear(&s);
  kt_write(".aws/config", "");
  /* IAM Identity Center endpoints: configured or NULL (the profile's
   * sso_region decides); --endpoint never reaches them. */
  const char *kvk[] = {"endpoint", "http://prop-global:5", NULL};
  LOAD_OK(&s, kvk);
  KT_CHECK(s.sso_endpoint == NULL && s.sso_oidc_endpoint == NULL);
  kn_aws_settings_clear(&s);
  kt_write(
      ".aws/config",
      "[default]\nservices = local\n"
      "[services local]\nsso_oidc =\n  endpoint_url = http://profile-oidc:3\n");
  setenv("AWS_ENDPOINT_URL_SSO", "http://env-sso:2", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.sso_endpoint, "http://env-sso:2");
  KT_CHECK_STR(s.sso_oidc_endpoint, "http://profile-oidc:3");
  KT_CHECK_STR(s.kinesis_endpoint, "https://kinesis.eu-west-1.amazonaws.com");
  kn_aws_settings_clear(&s);
  unsetenv("AWS_ENDPOINT_URL_SSO");
  kt_write(".aws/config", "");
  /* Invalid URLs name their source. */
  setenv("AWS_ENDPOINT_URL_KINESIS", "localhost:4567", 1);
  LOAD_ERR(
      &s, NULL,
      "kinesis endpoint \"localhost:4567\" (from AWS_ENDPOINT_URL_KINESIS) "
      "is not a valid URL");
  unsetenv("AWS_ENDPOINT_URL_KINESIS");
  const char *kv3[] = {"dynamodb.endpoint", "ftp://x", NULL};
  LOAD_ERR(&s, kv3, "(from property dynamodb.endpoint)");
  const char *kv4[] = {"endpoint", "http://", NULL};
  LOAD_ERR(&s, kv4, "no host");
  kt_write(".aws/config", "[default]\nendpoint_url = http://a b\n");
  LOAD_ERR(&s, NULL, "(from ~/.aws/config:2)");
}

static char warnings[4096];

static void capture(void *opaque, int level, const char *facility,
                    const char *message) {
  (void)opaque, (void)facility;
  if (level <= KN_LOG_WARN)
    snprintf(warnings + strlen(warnings), sizeof(warnings) - strlen(warnings),
             "%s\n", message);
}

/* ssl.verify=false is announced at warning level, once for a set of
 * endpoints, naming the https ones. */
static void test_no_verify_warning(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  setenv("AWS_REGION", "us-east-1", 1);
  setenv("AWS_ENDPOINT_URL_DYNAMODB", "https://ddb.example:8443", 1);
  kn_logger_t log = {KN_LOG_DEBUG, capture, NULL, "t"};
  const char *kv[] = {"ssl.verify",
                      "false",
                      "kinesis.endpoint",
                      "https://kinesis.example:4567",
                      "sts.endpoint",
                      "http://sts.example",
                      NULL};
  warnings[0] = '\0';
  kn_conf_t *c = conf_of(kv);
  kn_error_t *e = kn_aws_settings_load(&s, c, &log);
  KT_CHECK_OK(e);
  kn_aws_settings_clear(&s);
  KT_CHECK_MSG(
      strstr(warnings, "TLS certificate verification is off") &&
          strstr(warnings,
                 "https://kinesis.example:4567, https://ddb.example:8443 "
                 "are not authenticated") &&
          !strstr(warnings, "http://sts.example"),
      "%s", warnings);
  /* The same endpoints again (the lease table's client): no repeat. */
  warnings[0] = '\0';
  e = kn_aws_settings_load(&s, c, &log);
  KT_CHECK_OK(e);
  kn_aws_settings_clear(&s);
  KT_CHECK_STR(warnings, "");
  kn_conf_destroy(c);
  /* Verification on: nothing. */
  const char *kv2[] = {"kinesis.endpoint", "https://other.example", NULL};
  c = conf_of(kv2);
  e = kn_aws_settings_load(&s, c, &log);
  KT_CHECK_OK(e);
  kn_aws_settings_clear(&s);
  kn_conf_destroy(c);
  KT_CHECK_STR(warnings, "");
  unsetenv("AWS_ENDPOINT_URL_DYNAMODB");
}

static void test_tls_and_numbers(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  setenv("AWS_REGION", "us-east-1", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_INT(s.http.verify_tls, 1);
  KT_CHECK(s.ca_file == NULL && s.http.ca_file == NULL);
  KT_CHECK_INT(s.http.connect_timeout_ms, 10000);
  KT_CHECK_INT(s.request_timeout_ms, 30000);
  KT_CHECK_INT(s.retry_max_attempts, 8);
  KT_CHECK_INT(s.metadata_timeout_ms, 1000);
  KT_CHECK_INT(s.metadata_max_attempts, 2);
  KT_CHECK_INT(s.credential_process_timeout_ms, 60000);
  KT_CHECK_INT(s.http.version, KN_HTTP_AUTO);
  KT_CHECK_STR(s.user_agent, "libkinesis/" KN_VERSION_STR);
  kn_aws_settings_clear(&s);
  const char *ca = kt_write("files/ca.pem", "not really a bundle\n");
  setenv("AWS_CA_BUNDLE", ca, 1);
  const char *kv[] = {"ssl.verify",
                      "false",
                      "http.version",
                      "1.1",
                      "http.connect.timeout.ms",
                      "1500",
                      "user.agent",
                      "myapp/2",
                      NULL};
  setenv("AWS_SDK_UA_APP_ID", "appid", 1);
  LOAD_OK(&s, kv);
  KT_CHECK_INT(s.http.verify_tls, 0);
  KT_CHECK_STR(s.ca_file, ca);
  KT_CHECK(s.http.ca_file == s.ca_file);
  KT_CHECK_INT(s.http.version, KN_HTTP_1_1);
  KT_CHECK_INT(s.http.connect_timeout_ms, 1500);
  KT_CHECK_STR(s.user_agent, "libkinesis/" KN_VERSION_STR " app/appid myapp/2");
  kn_aws_settings_clear(&s);
  setenv("AWS_CA_BUNDLE", kt_path("files/missing.pem"), 1);
  LOAD_ERR(&s, NULL, "(from AWS_CA_BUNDLE): No such file");
  const char *kv2[] = {"ssl.ca.location", ca, NULL};
  LOAD_OK(&s, kv2); /* the property wins */
  kn_aws_settings_clear(&s);
  unsetenv("AWS_CA_BUNDLE");
  unsetenv("AWS_SDK_UA_APP_ID");
  kt_write(".aws/config",
           "[default]\nca_bundle = ~/files/ca.pem\nmax_attempts = 3\n"
           "metadata_service_timeout = 2\nmetadata_service_num_attempts = 4\n"
           "sdk_ua_app_id = fromprofile\n");
  LOAD_OK(&s, NULL);
  KT_CHECK_STR(s.ca_file, ca);
  KT_CHECK_INT(s.retry_max_attempts, 3);
  KT_CHECK_INT(s.metadata_timeout_ms, 2000);
  KT_CHECK_INT(s.metadata_max_attempts, 4);
  KT_CHECK_STR(s.user_agent, "libkinesis/" KN_VERSION_STR " app/fromprofile");
  kn_aws_settings_clear(&s);
  setenv("AWS_MAX_ATTEMPTS", "5", 1);
  setenv("AWS_METADATA_SERVICE_TIMEOUT", "3", 1);
  LOAD_OK(&s, NULL);
  KT_CHECK_INT(s.retry_max_attempts, 5);
  KT_CHECK_INT(s.metadata_timeout_ms, 3000);
  kn_aws_settings_clear(&s);
  const char *kv3[] = {"retry.max.attempts", "2", "metadata.timeout.ms", "250",
                       NULL};
  LOAD_OK(&s, kv3);
  KT_CHECK_INT(s.retry_max_attempts, 2);
  KT_CHECK_INT(s.metadata_timeout_ms, 250);
  kn_aws_settings_clear(&s);
  setenv("AWS_MAX_ATTEMPTS", "many", 1);
  LOAD_ERR(
      &s, NULL,
      "max_attempts = \"many\" (from AWS_MAX_ATTEMPTS): expected an integer");
  unsetenv("AWS_MAX_ATTEMPTS");
  const char *kv4[] = {"user.agent", "bad\r\nX-Injected: 1", NULL};
  LOAD_ERR(&s, kv4, "user.agent must not contain control characters");
}

static void test_explicit_keys(void) {
  kn_aws_settings_t s;
  kt_aws_reset();
  setenv("AWS_REGION", "us-east-1", 1);
  const char *kv[] = {"aws.access.key.id",
                      "AKIDPROP",
                      "aws.secret.access.key",
                      "SECRET",
                      "aws.session.token",
                      "TOKEN",
                      NULL};
  LOAD_OK(&s, kv);
  KT_CHECK_STR(s.access_key_id, "AKIDPROP");
  KT_CHECK_STR(s.secret_access_key, "SECRET");
  KT_CHECK_STR(s.session_token, "TOKEN");
  kn_aws_settings_clear(&s);
  KT_CHECK(s.access_key_id == NULL && s.region == NULL);
  const char *kv2[] = {"aws.access.key.id", "AKIDPROP", NULL};
  LOAD_ERR(&s, kv2, "aws.secret.access.key is missing");
  kn_aws_settings_clear(&s); /* a cleared struct may be cleared again */
}

static void test_urls(void) {
  kn_url_t u;
  const char *why;
  KT_CHECK(kn_url_parse("http://127.0.0.1:4567", &u, &why) == 0);
  KT_CHECK_STR(u.host, "127.0.0.1");
  KT_CHECK_INT(u.port, 4567);
  KT_CHECK_INT(u.https, 0);
  KT_CHECK(kn_url_parse("HTTPS://Kinesis.us-east-1.amazonaws.com/", &u, &why) ==
           0);
  KT_CHECK_INT(u.https, 1);
  KT_CHECK_INT(u.port, 0);
  KT_CHECK_INT(u.path_off, 39);
  KT_CHECK(kn_url_parse("http://[::1]:80/x?y", &u, &why) == 0);
  KT_CHECK_STR(u.host, "::1");
  KT_CHECK_INT(u.ipv6, 1);
  KT_CHECK_INT(u.port, 80);
  KT_CHECK(kn_url_parse("http://[fd00:ec2::254]", &u, &why) == 0);
  static const char *bad[] = {
      "",           "localhost:80", "ftp://x",        "http://",
      "http:///x",  "http://x:0",   "http://x:65536", "http://x:1a",
      "http://x:",  "http://u@x",   "http://[::1",    "http://[::1]x",
      "http://a b", "http://x\n",   "https://a/b c",  "http://a!b"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    KT_CHECK_MSG(kn_url_parse(bad[i], &u, &why) != 0, "accepted \"%s\"",
                 bad[i]);
  KT_CHECK(kn_host_is_loopback_literal("127.0.0.1"));
  KT_CHECK(kn_host_is_loopback_literal("127.1.2.3"));
  KT_CHECK(kn_host_is_loopback_literal("::1"));
  KT_CHECK(kn_host_is_loopback_literal("LocalHost"));
  KT_CHECK(!kn_host_is_loopback_literal("128.0.0.1"));
  KT_CHECK(!kn_host_is_loopback_literal("169.254.170.2"));
  KT_CHECK(!kn_host_is_loopback_literal("localhost.evil.com"));
  KT_CHECK(!kn_host_is_loopback_literal("::2"));
}

static void test_profile_api(void) {
  kt_aws_reset();
  kt_write(".aws/config",
           "[profile a]\nk = from-config\nonly = c\nservices = s\n"
           "[services s]\nkinesis =\n  endpoint_url = http://k\n");
  kt_write(".aws/credentials", "[a]\nk = from-credentials\n");
  kn_aws_profile_t *p = NULL;
  kn_error_t *e = kn_aws_profile_load(kt_path(".aws/config"),
                                      kt_path(".aws/credentials"), "a", &p);
  KT_REQUIRE(e == NULL && p != NULL, kn_error_destroy(e));
  char where[128];
  KT_CHECK_STR(kn_aws_profile_get(p, "k", where, sizeof(where)),
               "from-credentials");
  KT_CHECK_STR(where, "~/.aws/credentials:2");
  KT_CHECK_STR(kn_aws_profile_get(p, "only", where, sizeof(where)), "c");
  KT_CHECK_STR(where, "~/.aws/config:3");
  KT_CHECK(kn_aws_profile_get(p, "none", NULL, 0) == NULL);
  KT_CHECK_STR(kn_aws_profile_service_get(p, "kinesis", "endpoint_url", where,
                                          sizeof(where)),
               "http://k");
  KT_CHECK_STR(where, "~/.aws/config:7");
  KT_CHECK(kn_aws_profile_service_get(p, "dynamodb", "endpoint_url", NULL, 0) ==
           NULL);
  KT_CHECK(kn_aws_profile_exists(p));
  kn_aws_profile_destroy(p);
  e = kn_aws_profile_load(NULL, NULL, "a", &p);
  KT_CHECK(e == NULL && p != NULL && !kn_aws_profile_exists(p));
  kn_aws_profile_destroy(p);
  size_t len;
  KT_CHECK(kn_aws_config_profile_name("profile", &len) == NULL);
  KT_CHECK(kn_aws_config_profile_name("profilex", &len) == NULL);
  KT_CHECK(kn_aws_config_profile_name("profile ", &len) == NULL);
  KT_CHECK(kn_aws_config_profile_name("services x", &len) == NULL);
  const char *n = kn_aws_config_profile_name("profile\tx y", &len);
  KT_CHECK(n && len == 3 && strncmp(n, "x y", 3) == 0);
}

int main(void) {
  KT_RUN(test_region_precedence);
  KT_RUN(test_region_from_stream_arn);
  KT_RUN(test_region_default_with_endpoint);
  KT_RUN(test_profiles);
  KT_RUN(test_files);
  KT_RUN(test_endpoints);
  KT_RUN(test_tls_and_numbers);
  KT_RUN(test_no_verify_warning);
  KT_RUN(test_explicit_keys);
  KT_RUN(test_urls);
  KT_RUN(test_profile_api);
  kt_aws_cleanup();
  return KT_DONE();
}
