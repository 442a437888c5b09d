#include "aws/settings.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "aws/profile.h"
#include "aws/url.h"
#include "core/conf.h"
#include "core/error.h"
#include "kn/version.h"
#include "util/file.h"
#include "util/str.h"

#define FAC "settings"

/* An unset or empty variable counts as absent, as in the SDKs. */
static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

static const char *prop(const kn_conf_t *conf, const char *name) {
  if (!conf || !kn_conf_is_set(conf, name)) return NULL;
  const char *v = kn_conf_str(conf, name);
  return v && *v ? v : NULL;
}

static kn_error_t *nomem(void) {
  return kn_error_new(KN_ERR__NOMEM, "out of memory");
}

/* A value and where it came from, for messages. */
typedef struct source {
  const char *value;
  char from[300];
} source_t;

static int take(source_t *src, const char *value, const char *from) {
  if (!value) return 0;
  src->value = value;
  snprintf(src->from, sizeof(src->from), "%s", from);
  return 1;
}

static int take_prop(source_t *src, const kn_conf_t *conf, const char *name) {
  const char *v = prop(conf, name);
  if (!v) return 0;
  src->value = v;
  snprintf(src->from, sizeof(src->from), "property %s", name);
  return 1;
}

static int take_profile(source_t *src, const kn_aws_profile_t *pf,
                        const char *key) {
  char where[256];
  const char *v = kn_aws_profile_get(pf, key, where, sizeof(where));
  if (!v || !*v) return 0;
  src->value = v;
  snprintf(src->from, sizeof(src->from), "%s", where);
  return 1;
}

/* The home directory into *out, NULL when there is none; -1 when out of
 * memory, which must not read as "no home" (then no shared files). */
static int home_dir(char **out) {
  const char *h = env("HOME");
  /* No HOME (daemons): the password database, as the SDKs do. */
  struct passwd pw, *res = NULL;
  char buf[4096];
  if (!h && getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res &&
      res->pw_dir && *res->pw_dir)
    h = res->pw_dir;
  *out = h ? strdup(h) : NULL;
  return h && !*out ? -1 : 0;
}

static kn_error_t *resolve_files(kn_aws_settings_t *s) {
  char *home;
  if (home_dir(&home)) return nomem();
  const char *cfg = env("AWS_CONFIG_FILE");
  const char *crd = env("AWS_SHARED_CREDENTIALS_FILE");
  int fail = 0;
  if (cfg)
    fail |= !(s->config_file = kn_path_expand_home(cfg));
  else if (home)
    fail |= !(s->config_file = kn_asprintf("%s/.aws/config", home));
  if (crd)
    fail |= !(s->credentials_file = kn_path_expand_home(crd));
  else if (home)
    fail |= !(s->credentials_file = kn_asprintf("%s/.aws/credentials", home));
  if (home)
    fail |= !(s->sso_cache_dir = kn_asprintf("%s/.aws/sso/cache", home));
  free(home);
  return fail ? nomem() : NULL;
}

static kn_error_t *resolve_profile(kn_aws_settings_t *s, const kn_conf_t *conf,
                                   kn_aws_profile_t **pf) {
  source_t src = {0};
  int explicit = take(&src, prop(conf, "profile"), "property profile") ||
                 take(&src, env("AWS_PROFILE"), "AWS_PROFILE") ||
                 take(&src, env("AWS_DEFAULT_PROFILE"), "AWS_DEFAULT_PROFILE");
  if (!explicit) src.value = "default";
  s->profile_explicit = prop(conf, "profile") != NULL;
  if (!(s->profile = strdup(src.value))) return nomem();
  kn_error_t *e =
      kn_aws_profile_load(s->config_file, s->credentials_file, s->profile, pf);
  if (e || !*pf) return e ? e : nomem();
  if (explicit && !kn_aws_profile_exists(*pf)) {
    char *c = s->config_file ? kn_path_display(s->config_file) : NULL;
    char *k = s->credentials_file ? kn_path_display(s->credentials_file) : NULL;
    e = kn_error_new(KN_ERR__CONF,
                     "profile \"%s\" (from %s) is in neither %s nor %s",
                     s->profile, src.from, c ? c : "(no config file)",
                     k ? k : "(no credentials file)");
    free(c);
    free(k);
  }
  return e;
}

/* Region names go into host names: letters, digits, inner dashes. */
static int region_valid(const char *r) {
  size_t n = strlen(r);
  if (!n || n > 64 || r[0] == '-' || r[n - 1] == '-') return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)r[i]) && r[i] != '-') return 0;
  return 1;
}

typedef struct svc {
  const char *name; /* "kinesis": host prefix and services key */
  const char *prop; /* "kinesis.endpoint" */
  const char *env;  /* "AWS_ENDPOINT_URL_KINESIS" */
  char **field;
  source_t src; /* configured endpoint, if any */
} svc_t;

static int true_flag(const char *v) { return v && kn_str_ieq(v, "true"); }

static void configured_endpoint(svc_t *sv, const kn_conf_t *conf,
                                const kn_aws_profile_t *pf, int ignore) {
  source_t *src = &sv->src;
  /* Properties set by the application beat the environment, as the AWS
   * CLI's --endpoint-url does.  The generic `endpoint` (kncat --endpoint)
   * is the Kinesis endpoint only: the lease table and STS, which receives
   * web identity tokens, are never sent to it by accident. */
  if (sv->prop && take_prop(src, conf, sv->prop)) return;
  if (strcmp(sv->name, "kinesis") == 0 &&
      take(src, prop(conf, "endpoint"), "property endpoint"))
    return;
  if (ignore) return;
  if (take(src, env(sv->env), sv->env)) return;
  if (take(src, env("AWS_ENDPOINT_URL"), "AWS_ENDPOINT_URL")) return;
  char where[256];
  const char *v = kn_aws_profile_service_get(pf, sv->name, "endpoint_url",
                                             where, sizeof(where));
  if (v && *v) {
    take(src, v, where);
    return;
  }
  take_profile(src, pf, "endpoint_url");
}

static kn_error_t *check_endpoint(const char *svc, const source_t *src) {
  kn_url_t u;
  const char *why = NULL;
  if (kn_url_parse(src->value, &u, &why) == 0) return NULL;
  return kn_error_new(KN_ERR__CONF,
                      "%s endpoint \"%s\" (from %s) is not a valid URL: %s; "
                      "expected http:// or https:// and a host",
                      svc, src->value, src->from, why);
}

/* The region of a stream ARN, arn:PARTITION:kinesis:REGION:ACCOUNT:
 * stream/NAME, into region; -1 if arn is not one. */
static int stream_arn_region(const char *arn, char *region, size_t size) {
  const char *f[6], *p = arn;
  for (int i = 0; i < 6; i++) {
    f[i] = p;
    if (i < 5 && !(p = strchr(p, ':'))) return -1;
    if (i < 5) p++;
  }
  size_t n = (size_t)(f[4] - f[3] - 1);
  if (!kn_str_has_prefix(f[2], "kinesis:") || n == 0 || n >= size ||
      f[2] - f[1] < 2 || !kn_str_has_prefix(f[5], "stream/") || !f[5][7] ||
      strchr(f[5] + 7, '/'))
    return -1;
  memcpy(region, f[3], n);
  region[n] = '\0';
  return 0;
}

static kn_error_t *resolve_region_endpoints(kn_aws_settings_t *s,
                                            const kn_conf_t *conf,
                                            const kn_aws_profile_t *pf) {
  int ignore = true_flag(env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) ||
               true_flag(kn_aws_profile_get(
                   pf, "ignore_configured_endpoint_urls", NULL, 0));
  svc_t svcs[] = {
      {"kinesis",
       "kinesis.endpoint",
       "AWS_ENDPOINT_URL_KINESIS",
       &s->kinesis_endpoint,
       {0}},
      {"dynamodb",
       "dynamodb.endpoint",
       "AWS_ENDPOINT_URL_DYNAMODB",
       &s->dynamodb_endpoint,
       {0}},
      {"sts", "sts.endpoint", "AWS_ENDPOINT_URL_STS", &s->sts_endpoint, {0}},
      /* IAM Identity Center: the default depends on the profile's
       * sso_region, so it is left to the credentials chain. */
      {"sso", NULL, "AWS_ENDPOINT_URL_SSO", &s->sso_endpoint, {0}},
      {"sso_oidc",
       NULL,
       "AWS_ENDPOINT_URL_SSO_OIDC",
       &s->sso_oidc_endpoint,
       {0}},
  };
  const size_t n_svcs = sizeof(svcs) / sizeof(svcs[0]);
  int any_endpoint = 0;
  for (size_t i = 0; i < n_svcs; i++) {
    configured_endpoint(&svcs[i], conf, pf, ignore);
    if (svcs[i].src.value) {
      kn_error_t *e = check_endpoint(svcs[i].name, &svcs[i].src);
      if (e) return e;
      any_endpoint |= i < 3;
    }
  }

  /* A stream given by ARN names its region: calls must go there. */
  const char *stream = prop(conf, "stream");
  char arn_region[64] = "";
  if (stream && kn_str_has_prefix(stream, "arn:") &&
      stream_arn_region(stream, arn_region, sizeof(arn_region)))
    return kn_error_new(KN_ERR__CONF,
                        "stream \"%s\" is not a Kinesis stream ARN "
                        "(arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME)",
                        stream);
  const char *region_prop = prop(conf, "region");
  if (arn_region[0] && region_prop && strcmp(region_prop, arn_region) != 0)
    return kn_error_new(KN_ERR__CONF,
                        "stream %s is in region %s, but the region property "
                        "is %s",
                        stream, arn_region, region_prop);

  source_t reg = {0};
  if (!take(&reg, region_prop, "property region") &&
      !take(&reg, arn_region[0] ? arn_region : NULL, "the stream's ARN") &&
      !take(&reg, env("AWS_REGION"), "AWS_REGION") &&
      !take(&reg, env("AWS_DEFAULT_REGION"), "AWS_DEFAULT_REGION") &&
      !take_profile(&reg, pf, "region")) {
    if (!any_endpoint) {
      char *shown = s->config_file ? kn_path_display(s->config_file) : NULL;
      kn_error_t *e =
          kn_error_new(KN_ERR__CONF,
                       "no AWS region: set the region property, AWS_REGION or "
                       "AWS_DEFAULT_REGION, or region in profile \"%s\" of %s",
                       s->profile, shown ? shown : "the config file");
      free(shown);
      return e;
    }
    /* Local servers ignore the region, but signing needs one. */
    take(&reg, "us-east-1", "the default for a custom endpoint");
  }
  if (!region_valid(reg.value))
    return kn_error_new(KN_ERR__CONF,
                        "region \"%s\" (from %s) is not a region name",
                        reg.value, reg.from);
  if (!(s->region = strdup(reg.value))) return nomem();

  const char *dns = kn_str_has_prefix(s->region, "cn-") ? "amazonaws.com.cn"
                                                        : "amazonaws.com";
  for (size_t i = 3; i < n_svcs; i++)
    if (svcs[i].src.value && !(*svcs[i].field = strdup(svcs[i].src.value)))
      return nomem();
  for (size_t i = 0; i < 3; i++) {
    *svcs[i].field =
        svcs[i].src.value
            ? strdup(svcs[i].src.value)
            : kn_asprintf("https://%s.%s.%s", svcs[i].name, s->region, dns);
    if (!*svcs[i].field) return nomem();
  }
  return NULL;
}

static kn_error_t *resolve_tls(kn_aws_settings_t *s, const kn_conf_t *conf,
                               const kn_aws_profile_t *pf) {
  s->http.verify_tls = conf ? kn_conf_bool(conf, "ssl.verify") : 1;
  source_t ca = {0};
  if (!take(&ca, prop(conf, "ssl.ca.location"), "property ssl.ca.location") &&
      !take(&ca, env("AWS_CA_BUNDLE"), "AWS_CA_BUNDLE") &&
      !take_profile(&ca, pf, "ca_bundle"))
    return NULL;
  if (!(s->ca_file = kn_path_expand_home(ca.value))) return nomem();
  /* Fail here with the source named, not later inside a TLS handshake. */
  int rc = access(s->ca_file, R_OK) == 0 ? 0 : errno;
  if (rc)
    return kn_error_new(KN_ERR__CONF, "CA bundle \"%s\" (from %s): %s",
                        ca.value, ca.from, strerror(rc));
  s->http.ca_file = s->ca_file;
  return NULL;
}

/* An integer setting: the property when set, else a variable (times
 * scale), else a profile key, else the property's default. */
static kn_error_t *int_setting(const kn_conf_t *conf,
                               const kn_aws_profile_t *pf, const char *name,
                               const char *var, const char *key,
                               long long scale, long long *out) {
  *out = kn_conf_int(conf, name);
  if (conf && kn_conf_is_set(conf, name)) return NULL;
  source_t src = {0};
  if (!take(&src, env(var), var) && !take_profile(&src, pf, key)) return NULL;
  const kn_prop_t *p = kn_prop_find(name);
  long long v;
  if (kn_str_to_i64(src.value, 1, p->max / scale, &v) || v * scale < p->min)
    return kn_error_new(KN_ERR__CONF,
                        "%s = \"%s\" (from %s): expected an integer from %lld "
                        "to %lld",
                        key, src.value, src.from, (p->min + scale - 1) / scale,
                        p->max / scale);
  *out = v * scale;
  return NULL;
}

static kn_error_t *resolve_numbers(kn_aws_settings_t *s, const kn_conf_t *conf,
                                   const kn_aws_profile_t *pf) {
  static const struct {
    const char *name;
    kn_http_version_t v;
  } versions[] = {{"auto", KN_HTTP_AUTO},
                  {"1.1", KN_HTTP_1_1},
                  {"2", KN_HTTP_2},
                  {"2-prior-knowledge", KN_HTTP_2_PRIOR}};
  const char *ver = kn_conf_str(conf, "http.version");
  for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
    if (ver && strcmp(ver, versions[i].name) == 0)
      s->http.version = versions[i].v;
  s->http.connect_timeout_ms =
      (long)kn_conf_int(conf, "http.connect.timeout.ms");
  s->http.max_connections = (long)kn_conf_int(conf, "http.max.connections");
  s->request_timeout_ms = (long)kn_conf_int(conf, "http.request.timeout.ms");
  s->retry_backoff_ms = (long)kn_conf_int(conf, "retry.backoff.ms");
  s->retry_backoff_max_ms = (long)kn_conf_int(conf, "retry.backoff.max.ms");
  s->retry_budget = (int)kn_conf_int(conf, "retry.budget");
  s->credential_process_timeout_ms =
      (long)kn_conf_int(conf, "credential.process.timeout.ms");
  s->http.max_response_bytes =
      (size_t)kn_conf_int(conf, "http.response.max.bytes");
  s->credential_response_max_bytes =
      (size_t)kn_conf_int(conf, "credential.response.max.bytes");
  long long v;
  kn_error_t *e = int_setting(conf, pf, "retry.max.attempts",
                              "AWS_MAX_ATTEMPTS", "max_attempts", 1, &v);
  if (e) return e;
  s->retry_max_attempts = (int)v;
  if ((e = int_setting(conf, pf, "metadata.timeout.ms",
                       "AWS_METADATA_SERVICE_TIMEOUT",
                       "metadata_service_timeout", 1000, &v)))
    return e;
  s->metadata_timeout_ms = (long)v;
  if ((e = int_setting(conf, pf, "metadata.max.attempts",
                       "AWS_METADATA_SERVICE_NUM_ATTEMPTS",
                       "metadata_service_num_attempts", 1, &v)))
    return e;
  s->metadata_max_attempts = (int)v;
  return NULL;
}

static int has_ctl(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < ' ' || *s == 0x7f) return 1;
  return 0;
}

static kn_error_t *resolve_user_agent(kn_aws_settings_t *s,
                                      const kn_conf_t *conf,
                                      const kn_aws_profile_t *pf) {
  source_t app = {0};
  if (!take(&app, env("AWS_SDK_UA_APP_ID"), "AWS_SDK_UA_APP_ID"))
    take_profile(&app, pf, "sdk_ua_app_id");
  const char *extra = prop(conf, "user.agent");
  /* These go into a header line as they are. */
  if (app.value && (has_ctl(app.value) || strchr(app.value, ' ')))
    return kn_error_new(KN_ERR__CONF,
                        "application id \"%s\" (from %s) must not contain "
                        "spaces or control characters",
                        app.value, app.from);
  if (extra && has_ctl(extra))
    return kn_error_new(KN_ERR__CONF,
                        "user.agent must not contain control characters");
  s->user_agent = kn_asprintf(
      "libkinesis/%s%s%s%s%s", KN_VERSION_STR, app.value ? " app/" : "",
      app.value ? app.value : "", extra ? " " : "", extra ? extra : "");
  return s->user_agent ? NULL : nomem();
}

static kn_error_t *resolve_keys(kn_aws_settings_t *s, const kn_conf_t *conf) {
  const char *id = prop(conf, "aws.access.key.id");
  const char *secret = prop(conf, "aws.secret.access.key");
  const char *token = prop(conf, "aws.session.token");
  if (!id && !secret && !token) return NULL;
  if (!id || !secret)
    return kn_error_new(KN_ERR__CONF,
                        "aws.access.key.id and aws.secret.access.key must be "
                        "set together (%s is missing)",
                        id ? "aws.secret.access.key" : "aws.access.key.id");
  if (!(s->access_key_id = strdup(id)) ||
      !(s->secret_access_key = strdup(secret)) ||
      (token && !(s->session_token = strdup(token))))
    return nomem();
  return NULL;
}

/* ssl.verify=false (kncat --no-verify-ssl) is worth a warning that names
 * what it exposes: every https endpoint, credentials included.  Once per
 * process for each set of endpoints (a consumer loads its settings for
 * Kinesis and again for its lease table). */
static void warn_no_verify(const kn_aws_settings_t *s, const kn_logger_t *log) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static uint64_t warned[16];
  static size_t n_warned;
  const char *eps[] = {s->kinesis_endpoint, s->dynamodb_endpoint,
                       s->sts_endpoint, s->sso_endpoint, s->sso_oidc_endpoint};
  char list[1200] = "";
  size_t len = 0;
  for (size_t i = 0; i < sizeof(eps) / sizeof(eps[0]); i++) {
    if (!eps[i] || strncasecmp(eps[i], "https://", 8) != 0) continue;
    if (len && strstr(list, eps[i])) continue; /* the same URL twice */
    int w = snprintf(list + len, sizeof(list) - len, "%s%s", len ? ", " : "",
                     eps[i]);
    if (w < 0 || (size_t)w >= sizeof(list) - len) break;
    len += (size_t)w;
  }
  uint64_t h = 1469598103934665603ULL; /* FNV-1a of the list */
  for (const char *p = list; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  pthread_mutex_lock(&mu);
  int seen = 0;
  for (size_t i = 0; i < n_warned; i++) seen |= warned[i] == h;
  if (!seen && n_warned < sizeof(warned) / sizeof(warned[0]))
    warned[n_warned++] = h;
  pthread_mutex_unlock(&mu);
  if (seen) return;
  kn_warn(
      log, FAC,
      "TLS certificate verification is off (ssl.verify=false, "
      "--no-verify-ssl): "
      "%s%s%s",
      len ? "the servers at " : "no https endpoint is configured", list,
      len ? " are not authenticated: signed requests and credentials sent to "
            "them could reach anyone on the path (credential endpoints over "
            "https "
            "too: STS, IAM Identity Center, container)"
          : "; credential endpoints over https are not authenticated");
}

kn_error_t *kn_aws_settings_load(kn_aws_settings_t *s, const kn_conf_t *conf,
                                 const kn_logger_t *log) {
  memset(s, 0, sizeof(*s));
  s->http.log = log;
  kn_aws_profile_t *pf = NULL;
  kn_error_t *e = resolve_files(s);
  if (!e) e = resolve_profile(s, conf, &pf);
  if (!e) e = resolve_region_endpoints(s, conf, pf);
  if (!e) e = resolve_tls(s, conf, pf);
  if (!e) e = resolve_numbers(s, conf, pf);
  if (!e) e = resolve_user_agent(s, conf, pf);
  if (!e) e = resolve_keys(s, conf);
  kn_aws_profile_destroy(pf);
  if (e) {
    kn_aws_settings_clear(s);
    return e;
  }
  if (!s->http.verify_tls) warn_no_verify(s, log);
  kn_dbg(log, FAC,
         "profile %s, region %s, kinesis %s, dynamodb %s, sts %s, CA %s, "
         "verify %s",
         s->profile, s->region, s->kinesis_endpoint, s->dynamodb_endpoint,
         s->sts_endpoint, s->ca_file ? s->ca_file : "(system)",
         s->http.verify_tls ? "on" : "off");
  return NULL;
}

void kn_aws_settings_clear(kn_aws_settings_t *s) {
  free(s->region);
  free(s->profile);
  free(s->config_file);
  free(s->credentials_file);
  free(s->kinesis_endpoint);
  free(s->dynamodb_endpoint);
  free(s->sts_endpoint);
  free(s->sso_endpoint);
  free(s->sso_oidc_endpoint);
  free(s->sso_cache_dir);
  free(s->access_key_id);
  free(s->secret_access_key);
  free(s->session_token);
  free(s->ca_file);
  free(s->user_agent);
  memset(s, 0, sizeof(*s));
}
