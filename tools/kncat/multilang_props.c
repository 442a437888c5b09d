#include "multilang_props.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- Java properties syntax ---- */

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\f'; }

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Appends the UTF-8 form of code point c. */
static char *put_utf8(char *d, unsigned c) {
  if (c < 0x80) {
    *d++ = (char)c;
  } else if (c < 0x800) {
    *d++ = (char)(0xC0 | c >> 6);
    *d++ = (char)(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    *d++ = (char)(0xE0 | c >> 12);
    *d++ = (char)(0x80 | (c >> 6 & 0x3F));
    *d++ = (char)(0x80 | (c & 0x3F));
  } else {
    *d++ = (char)(0xF0 | c >> 18);
    *d++ = (char)(0x80 | (c >> 12 & 0x3F));
    *d++ = (char)(0x80 | (c >> 6 & 0x3F));
    *d++ = (char)(0x80 | (c & 0x3F));
  }
  return d;
}

/* Unescapes s[0..n) into a new string; NULL with *bad set for a malformed
 * \u escape (or NULL on out of memory). */
static char *unescape(const char *s, size_t n, int *bad) {
  char *out = malloc(n + 1), *d = out;
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\' || i + 1 == n) {
      *d++ = s[i];
      continue;
    }
    char c = s[++i];
    if (c == 'u') {
      unsigned cp = 0;
      for (int k = 0; k < 4; k++) {
        int h = i + 1 + (size_t)k < n ? hexval(s[i + 1 + (size_t)k]) : -1;
        if (h < 0) {
          free(out);
          *bad = 1;
          return NULL;
        }
        cp = cp << 4 | (unsigned)h;
      }
      i += 4;
      /* A surrogate pair written as two escapes. */
      if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < n && s[i + 1] == '\\' &&
          s[i + 2] == 'u') {
        unsigned lo = 0;
        int ok = 1;
        for (int k = 0; k < 4; k++) {
          int h = i + 3 + (size_t)k < n ? hexval(s[i + 3 + (size_t)k]) : -1;
          if (h < 0) ok = 0;
          lo = lo << 4 | (unsigned)(h < 0 ? 0 : h);
        }
        if (ok && lo >= 0xDC00 && lo < 0xE000) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        }
      }
      if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
      d = put_utf8(d, cp);
      continue;
    }
    *d++ = c == 't'   ? '\t'
           : c == 'n' ? '\n'
           : c == 'r' ? '\r'
           : c == 'f' ? '\f'
                      : c;
  }
  *d = '\0';
  return out;
}

static void errf(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errsz, const char *fmt, ...) {
  if (!errsz) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errsz, fmt, ap);
  va_end(ap);
}

static int add(kc_ml_props_t *p, char *key, char *value, int line) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 16;
    kc_ml_prop_t *v = realloc(p->v, cap * sizeof(*v));
    if (!v) return -1;
    p->v = v;
    p->cap = cap;
  }
  p->v[p->n].key = key;
  p->v[p->n].value = value;
  p->v[p->n].line = line;
  p->n++;
  return 0;
}

/* Splits one logical line (continuations already joined) into key and
 * value and stores them. */
static int store_logical(kc_ml_props_t *p, const char *s, size_t n, int line,
                         char *err, size_t errsz) {
  size_t k = 0;
  while (k < n && !is_ws(s[k]) && s[k] != '=' && s[k] != ':') {
    if (s[k] == '\\' && k + 1 < n) k++;
    k++;
  }
  size_t v = k;
  while (v < n && is_ws(s[v])) v++;
  if (v < n && (s[v] == '=' || s[v] == ':')) v++;
  while (v < n && is_ws(s[v])) v++;
  int bad = 0;
  char *key = unescape(s, k, &bad);
  char *value = key ? unescape(s + v, n - v, &bad) : NULL;
  if (!key || !value || add(p, key, value, line)) {
    free(key);
    free(value);
    errf(err, errsz, "line %d: %s", line,
         bad ? "malformed \\uXXXX escape" : "out of memory");
    return -1;
  }
  return 0;
}

int kc_ml_props_parse(kc_ml_props_t *p, const char *text, size_t len, char *err,
                      size_t errsz) {
  size_t i = 0;
  int line = 1;
  char *buf = malloc(len + 1);
  if (!buf) {
    errf(err, errsz, "out of memory");
    return -1;
  }
  while (i < len) {
    while (i < len && is_ws(text[i])) i++;
    if (i >= len) break;
    if (text[i] == '\n' || text[i] == '\r') {
      if (text[i] == '\r' && i + 1 < len && text[i + 1] == '\n') i++;
      i++;
      line++;
      continue;
    }
    int start = line;
    if (text[i] == '#' || text[i] == '!') {
      while (i < len && text[i] != '\n' && text[i] != '\r') i++;
      continue;
    }
    /* Gather the logical line: a newline after an odd run of backslashes
     * continues it on the next line, whose leading blanks are dropped. */
    size_t n = 0;
    while (i < len && text[i] != '\n' && text[i] != '\r') {
      if (text[i] == '\\' && i + 1 < len &&
          (text[i + 1] == '\n' || text[i + 1] == '\r')) {
        i++;
        if (text[i] == '\r' && i + 1 < len && text[i + 1] == '\n') i++;
        i++;
        line++;
        while (i < len && is_ws(text[i])) i++;
        continue;
      }
      if (text[i] == '\\' && i + 1 < len) buf[n++] = text[i++];
      buf[n++] = text[i++];
    }
    if (store_logical(p, buf, n, start, err, errsz)) {
      free(buf);
      return -1;
    }
  }
  free(buf);
  return 0;
}

const kc_ml_prop_t *kc_ml_props_get(const kc_ml_props_t *p, const char *key) {
  for (size_t i = p->n; i-- > 0;)
    if (strcasecmp(p->v[i].key, key) == 0) return &p->v[i];
  return NULL;
}

void kc_ml_props_free(kc_ml_props_t *p) {
  for (size_t i = 0; i < p->n; i++) {
    free(p->v[i].key);
    free(p->v[i].value);
  }
  free(p->v);
  memset(p, 0, sizeof(*p));
}

/* ---- the daemon's keys ---- */

/* Keys of the Java daemon with no counterpart here: accepted, one notice
 * each.  Prefixes end with '*'. */
static const char *const no_effect[] = {
    "metrics*",
    "workerMetrics*",
    "workerUtilization*",
    "coordinatorState*",
    "leaseTable*",
    "gracefulLeaseHandoff*",
    "leaseAssignment*",
    "kinesisClient*",
    "dynamoDbClient*",
    "dynamoDBClient*",
    "cloudWatchClient*",
    "AwsCredentialsProviderDynamoDB",
    "AwsCredentialsProviderCloudWatch",
    "AWSCredentialsProviderDynamoDB",
    "AWSCredentialsProviderCloudWatch",
    "parentShardPollIntervalMillis",
    "taskBackoffTimeMillis",
    "listShardsBackoffTimeInMillis",
    "maxListShardsRetryAttempts",
    "validateSequenceNumberBeforeCheckpointing",
    "skipShardSyncAtStartupIfLeasesExist",
    "logWarningForTaskAfterMillis",
    "billingMode",
    "initialLeaseTableReadCapacity",
    "initialLeaseTableWriteCapacity",
    "maxLeaseRenewalThreads",
    "maxCacheMissesBeforeReload",
    "listShardsCacheAllowedAgeInSeconds",
    "cacheMissWarningModulus",
    "maxGetRecordsThreadPool",
    "retryGetRecordsInSeconds",
    "ignoreUnexpectedChildShards",
    "enablePriorityLeaseAssignment",
    "leasesRecoveryAuditor*",
    "clientVersionConfig",
    "userAgent",
    "processingThreads",
    "useDefaultGlobalSecondaryIndex",
    "isMultiStreamMode"};

/* Keys handled below (so not "unknown"). */
static const char *const known[] = {"executableName",
                                    "streamName",
                                    "streamArn",
                                    "applicationName",
                                    "tableName",
                                    "workerId",
                                    "AwsCredentialsProvider",
                                    "AWSCredentialsProvider",
                                    "regionName",
                                    "kinesisEndpoint",
                                    "dynamoDBEndpoint",
                                    "initialPositionInStream",
                                    "initialPositionInStreamExtended",
                                    "failoverTimeMillis",
                                    "shardSyncIntervalMillis",
                                    "maxLeasesForWorker",
                                    "maxLeasesToStealAtOneTime",
                                    "cleanupLeasesUponShardCompletion",
                                    "callProcessRecordsEvenForEmptyRecordList",
                                    "maxRecords",
                                    "idleTimeBetweenReadsInMillis",
                                    "retrievalMode",
                                    "shutdownGraceMillis",
                                    "timeoutInSeconds",
                                    "maxActiveThreads"};

static int matches(const char *pat, const char *key) {
  size_t n = strlen(pat);
  if (n && pat[n - 1] == '*') return strncasecmp(pat, key, n - 1) == 0;
  return strcasecmp(pat, key) == 0;
}

static int in(const char *const *list, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (matches(list[i], key)) return 1;
  return 0;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

typedef struct build {
  const kc_ml_props_t *p;
  kn_conf_t *conf;
  char *err;
  size_t errsz;
} build_t;

static const char *val(build_t *b, const char *key, int *line) {
  const kc_ml_prop_t *e = kc_ml_props_get(b->p, key);
  if (line) *line = e ? e->line : 0;
  return e ? e->value : NULL;
}

static int reject(build_t *b, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int reject(build_t *b, const char *key, const char *fmt, ...) {
  int line;
  val(b, key, &line);
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  if (line)
    errf(b->err, b->errsz, "line %d: %s: %s", line, key, why);
  else
    errf(b->err, b->errsz, "%s: %s", key, why);
  return -1;
}

static int set(build_t *b, const char *key, const char *name,
               const char *value) {
  char why[256] = "";
  if (kn_conf_set(b->conf, name, value, why, sizeof(why)) == KN_CONF_OK)
    return 0;
  return reject(b, key, "\"%s\" rejected (%s=%s: %s)", value, name, value,
                *why ? why : "invalid");
}

/* A whole decimal number in [lo, hi]; -1 when absent (*present 0). */
static int get_int(build_t *b, const char *key, int64_t lo, int64_t hi,
                   int64_t *out, int *present) {
  const char *v = val(b, key, NULL);
  *present = v != NULL;
  if (!v) return 0;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (!*v || *end || errno || x < lo || x > hi)
    return reject(b, key, "\"%s\" is not a whole number in [%lld, %lld]", v,
                  (long long)lo, (long long)hi);
  *out = x;
  return 0;
}

static int get_bool(build_t *b, const char *key, int *out, int *present) {
  const char *v = val(b, key, NULL);
  *present = v != NULL;
  if (!v) return 0;
  if (strcasecmp(v, "true") == 0)
    *out = 1;
  else if (strcasecmp(v, "false") == 0)
    *out = 0;
  else
    return reject(b, key, "\"%s\" is neither true nor false", v);
  return 0;
}

/* Sets a library integer property from a key, if present. */
static int map_int(build_t *b, const char *key, const char *name, int64_t lo,
                   int64_t hi) {
  int64_t x;
  int present;
  if (get_int(b, key, lo, hi, &x, &present)) return -1;
  if (!present) return 0;
  char s[32];
  snprintf(s, sizeof(s), "%lld", (long long)x);
  return set(b, key, name, s);
}

static int set_str(build_t *b, const char *key, char **dst, const char *v) {
  free(*dst);
  *dst = strdup(v);
  if (!*dst) return reject(b, key, "out of memory");
  return 0;
}

/* executableName: split on runs of spaces, no shell. */
static int split_argv(build_t *b, const char *v, kc_ml_conf_t *out) {
  size_t n = 0, len = strlen(v);
  char **argv = calloc(len / 2 + 2, sizeof(*argv));
  if (!argv) return reject(b, "executableName", "out of memory");
  out->argv = argv;
  const char *s = v;
  for (;;) {
    while (*s == ' ' || *s == '\t') s++;
    if (!*s) break;
    const char *e = s;
    while (*e && *e != ' ' && *e != '\t') e++;
    if (!(argv[n++] = strndup(s, (size_t)(e - s))))
      return reject(b, "executableName", "out of memory");
    s = e;
  }
  if (n == 0) return reject(b, "executableName", "empty");
  return 0;
}

/* streamArn: arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME. */
static int from_arn(build_t *b, const char *arn, kc_ml_conf_t *out,
                    int region_set) {
  const char *f[6];
  const char *s = arn;
  for (int i = 0; i < 5; i++) {
    f[i] = s;
    s = strchr(s, ':');
    if (!s) return reject(b, "streamArn", "\"%s\" is not a stream ARN", arn);
    s++;
  }
  f[5] = s;
  if (strncmp(arn, "arn:", 4) != 0 || strncmp(f[2], "kinesis:", 8) != 0 ||
      strncmp(f[5], "stream/", 7) != 0 || !f[5][7] || strchr(f[5] + 7, '/'))
    return reject(b, "streamArn", "\"%s\" is not a stream ARN", arn);
  if (set_str(b, "streamArn", &out->stream, f[5] + 7)) return -1;
  if (!region_set && f[4] - f[3] > 1) {
    char region[64];
    size_t n = (size_t)(f[4] - f[3] - 1);
    if (n >= sizeof(region)) return reject(b, "streamArn", "region too long");
    memcpy(region, f[3], n);
    region[n] = '\0';
    if (set(b, "streamArn", "region", region)) return -1;
  }
  return 0;
}

/* AwsCredentialsProvider: the Java daemon names provider classes, maybe
 * several separated by commas, arguments after '|'.  Those the library's
 * chain covers are mapped; the others cannot be honoured. */
static int credentials(build_t *b, const char *key, const char *v,
                       void (*note)(void *, const char *), void *opaque) {
  char *copy = strdup(v);
  if (!copy) return reject(b, key, "out of memory");
  int rc = 0;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok && !rc;
       tok = strtok_r(NULL, ",", &save)) {
    while (isspace((unsigned char)*tok)) tok++;
    char *arg = strchr(tok, '|');
    if (arg) *arg++ = '\0';
    char *cls = strrchr(tok, '.');
    cls = cls ? cls + 1 : tok;
    size_t n = strlen(cls);
    while (n && isspace((unsigned char)cls[n - 1])) cls[--n] = '\0';
    if (!strcmp(cls, "DefaultCredentialsProvider") ||
        !strcmp(cls, "DefaultAWSCredentialsProviderChain") ||
        !strcmp(cls, "EnvironmentVariableCredentialsProvider") ||
        !strcmp(cls, "SystemPropertyCredentialsProvider") ||
        !strcmp(cls, "InstanceProfileCredentialsProvider") ||
        !strcmp(cls, "ContainerCredentialsProvider") ||
        !strcmp(cls, "WebIdentityTokenFileCredentialsProvider") ||
        !strcmp(cls, "EnvironmentVariableCredentialsProviderV2")) {
      if (strcmp(cls, "DefaultCredentialsProvider") &&
          strcmp(cls, "DefaultAWSCredentialsProviderChain")) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "%s: %s: the library's standard "
                 "credentials chain is used (it includes this source)",
                 key, cls);
        note(opaque, msg);
      }
    } else if (!strcmp(cls, "ProfileCredentialsProvider") ||
               !strcmp(cls, "ProfileCredentialsProviderV2")) {
      if (arg && *arg) rc = set(b, key, "profile", arg);
    } else if (!strcmp(cls, "StsAssumeRoleCredentialsProvider") ||
               !strcmp(cls, "STSAssumeRoleSessionCredentialsProvider")) {
      rc = reject(b, key,
                  "%s cannot be honoured: assuming a role from other "
                  "credentials is not supported; use a profile with "
                  "credential_process or web identity "
                  "(ProfileCredentialsProvider|NAME)",
                  cls);
    } else {
      rc = reject(b, key, "unknown credentials provider \"%s\"", cls);
    }
  }
  free(copy);
  return rc;
}

int kc_ml_conf_build(const kc_ml_props_t *p, kn_conf_t *conf, kc_ml_conf_t *out,
                     void (*note)(void *opaque, const char *line), void *opaque,
                     char *err, size_t errsz) {
  build_t b = {p, conf, err, errsz};
  char msg[512];
  /* Notices first, once per key. */
  for (size_t i = 0; i < p->n; i++) {
    const char *k = p->v[i].key;
    if (kc_ml_props_get(p, k) != &p->v[i]) continue; /* a later one wins */
    if (in(known, COUNT(known), k)) continue;
    if (in(no_effect, COUNT(no_effect), k))
      snprintf(msg, sizeof(msg),
               "line %d: %s: no counterpart here, "
               "ignored",
               p->v[i].line, k);
    else
      snprintf(msg, sizeof(msg),
               "line %d: unknown key \"%s\" ignored "
               "(misspelt?)",
               p->v[i].line, k);
    note(opaque, msg);
  }
  int line;
  const char *v;
  if (!(v = val(&b, "executableName", NULL)) || !*v)
    return reject(&b, "executableName", "is required");
  if (split_argv(&b, v, out)) return -1;
  if (!(v = val(&b, "applicationName", NULL)) || !*v)
    return reject(&b, "applicationName", "is required");
  if (set_str(&b, "applicationName", &out->app, v) ||
      set(&b, "applicationName", "app.name", v))
    return -1;
  const char *table = val(&b, "tableName", NULL);
  if (table && !*table) table = NULL;
  /* -X lease.store=... (e.g. a SQLite file) wins over the file. */
  char cur[512];
  size_t cur_len = sizeof(cur);
  if (kn_conf_get(conf, "lease.store", cur, &cur_len) != KN_CONF_OK ||
      strcmp(cur, "none") == 0) {
    snprintf(msg, sizeof(msg), "dynamodb:%s", table ? table : out->app);
    if (set(&b, table ? "tableName" : "applicationName", "lease.store", msg))
      return -1;
  }
  const char *region = val(&b, "regionName", NULL);
  if (region && *region && set(&b, "regionName", "region", region)) return -1;
  const char *arn = val(&b, "streamArn", NULL);
  if (arn && *arn) {
    if (from_arn(&b, arn, out, region && *region)) return -1;
  } else if ((v = val(&b, "streamName", NULL)) && *v) {
    if (set_str(&b, "streamName", &out->stream, v)) return -1;
  } else {
    return reject(&b, "streamName", "is required (or streamArn)");
  }
  if (set(&b, arn && *arn ? "streamArn" : "streamName", "stream", out->stream))
    return -1;
  if ((v = val(&b, "workerId", NULL)) && *v &&
      set(&b, "workerId", "worker.id", v))
    return -1;
  if ((v = val(&b, "AwsCredentialsProvider", NULL)) &&
      credentials(&b, "AwsCredentialsProvider", v, note, opaque))
    return -1;
  if ((v = val(&b, "AWSCredentialsProvider", NULL)) &&
      !kc_ml_props_get(p, "AwsCredentialsProvider") &&
      credentials(&b, "AWSCredentialsProvider", v, note, opaque))
    return -1;
  if ((v = val(&b, "kinesisEndpoint", NULL)) && *v &&
      set(&b, "kinesisEndpoint", "kinesis.endpoint", v))
    return -1;
  if ((v = val(&b, "dynamoDBEndpoint", NULL)) && *v &&
      set(&b, "dynamoDBEndpoint", "dynamodb.endpoint", v))
    return -1;

  /* Where shards without a checkpoint start: LATEST unless told. */
  const char *pos = val(&b, "initialPositionInStream", &line);
  int64_t ts = 0;
  int has_ts;
  if (get_int(&b, "initialPositionInStreamExtended", 0, INT64_MAX / 1000, &ts,
              &has_ts))
    return -1;
  if (has_ts) {
    if (pos && strcasecmp(pos, "AT_TIMESTAMP") != 0 && note) {
      snprintf(msg, sizeof(msg),
               "initialPositionInStreamExtended wins over "
               "initialPositionInStream=%s",
               pos);
      note(opaque, msg);
    }
    snprintf(msg, sizeof(msg), "%lld", (long long)ts * 1000);
    if (set(&b, "initialPositionInStreamExtended", "initial.position",
            "at_timestamp") ||
        set(&b, "initialPositionInStreamExtended", "initial.timestamp.ms", msg))
      return -1;
  } else if (!pos || !strcasecmp(pos, "LATEST")) {
    if (set(&b, "initialPositionInStream", "initial.position", "latest"))
      return -1;
  } else if (!strcasecmp(pos, "TRIM_HORIZON")) {
    if (set(&b, "initialPositionInStream", "initial.position", "trim_horizon"))
      return -1;
  } else if (!strcasecmp(pos, "AT_TIMESTAMP")) {
    return reject(&b, "initialPositionInStream",
                  "AT_TIMESTAMP needs "
                  "initialPositionInStreamExtended (epoch seconds)");
  } else {
    return reject(&b, "initialPositionInStream",
                  "\"%s\" is none of LATEST, "
                  "TRIM_HORIZON, AT_TIMESTAMP",
                  pos);
  }

  /* The Java daemon's defaults where they differ from the library's. */
  if (!kc_ml_props_get(p, "shardSyncIntervalMillis") &&
      set(&b, "shardSyncIntervalMillis", "shard.sync.interval.ms", "60000"))
    return -1;
  if (map_int(&b, "failoverTimeMillis", "lease.duration.ms", 1000, 86400000) ||
      map_int(&b, "shardSyncIntervalMillis", "shard.sync.interval.ms", 100,
              86400000) ||
      map_int(&b, "maxLeasesToStealAtOneTime", "lease.max.steal", 0, 100000) ||
      map_int(&b, "maxRecords", "poll.max.records", 1, 10000) ||
      map_int(&b, "idleTimeBetweenReadsInMillis", "poll.idle.ms", 0, 86400000))
    return -1;
  int64_t x;
  int present, flag;
  /* The Java default is Integer.MAX_VALUE: no limit. */
  if (get_int(&b, "maxLeasesForWorker", 1, INT32_MAX, &x, &present)) return -1;
  if (present && x <= 100000 &&
      map_int(&b, "maxLeasesForWorker", "lease.max.per.worker", 1, 100000))
    return -1;
  if (get_bool(&b, "cleanupLeasesUponShardCompletion", &flag, &present))
    return -1;
  if (get_bool(&b, "callProcessRecordsEvenForEmptyRecordList", &flag, &present))
    return -1;
  out->call_empty = present && flag;
  if (get_int(&b, "maxActiveThreads", INT32_MIN, INT32_MAX, &x, &present))
    return -1;
  out->grace_ms = KC_ML_DEFAULT_GRACE_MS;
  if (get_int(&b, "shutdownGraceMillis", 0, 86400000, &x, &present)) return -1;
  if (present) out->grace_ms = x;
  if (get_int(&b, "timeoutInSeconds", 0, 86400, &x, &present)) return -1;
  out->timeout_ms = present ? x * 1000 : 0;

  /* DEFAULT: polling if a polling key is set, else fan-out. */
  const char *mode = val(&b, "retrievalMode", NULL);
  if (!mode || !*mode || !strcasecmp(mode, "DEFAULT")) {
    out->retrieval = kc_ml_props_get(p, "maxRecords") ||
                             kc_ml_props_get(p, "idleTimeBetweenReadsInMillis")
                         ? KC_ML_RETRIEVAL_POLLING
                         : KC_ML_RETRIEVAL_FANOUT;
  } else if (!strcasecmp(mode, "FANOUT")) {
    out->retrieval = KC_ML_RETRIEVAL_FANOUT;
  } else if (!strcasecmp(mode, "POLLING")) {
    out->retrieval = KC_ML_RETRIEVAL_POLLING;
  } else {
    return reject(&b, "retrievalMode",
                  "\"%s\" is none of FANOUT, POLLING, "
                  "DEFAULT",
                  mode);
  }
  /* The KCL registers the stream consumer under the application name. */
  if (out->retrieval == KC_ML_RETRIEVAL_FANOUT &&
      set(&b, "retrievalMode", "efo.consumer.name", out->app))
    return -1;
  return 0;
}

void kc_ml_conf_free(kc_ml_conf_t *c) {
  if (c->argv)
    for (size_t i = 0; c->argv[i]; i++) free(c->argv[i]);
  free(c->argv);
  free(c->stream);
  free(c->app);
  memset(c, 0, sizeof(*c));
}
