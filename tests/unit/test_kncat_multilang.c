/* kncat multilang: golden lines of every protocol message, decoding of the
 * child's messages, the properties parser and the key mapping, and a child
 * process round trip. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kn/conf.h"
#include "kt.h"
#include "multilang_child.h"
#include "multilang_msg.h"
#include "multilang_props.h"
#include "signals.h"

static char *take(kc_ml_buf_t *b) {
  static char s[8192];
  if (b->len) memcpy(s, b->p, b->len);
  s[b->len] = '\0';
  b->len = 0;
  return s;
}

static void test_golden_out(void) {
  kc_ml_buf_t b = {0};
  KT_CHECK(kc_ml_enc_initialize(
               &b, "shardId-000000000001",
               "49590338271490256608559692538361571095921575989136588898",
               0) == 0);
  KT_CHECK_STR(
      take(&b),
      "{\"action\":\"initialize\",\"shardId\":\"shardId-000000000001\","
      "\"sequenceNumber\":"
      "\"49590338271490256608559692538361571095921575989136588898\","
      "\"subSequenceNumber\":0}\n");
  kc_ml_enc_initialize(&b, "shardId-000000000002", "TRIM_HORIZON", 0);
  KT_CHECK_STR(
      take(&b),
      "{\"action\":\"initialize\",\"shardId\":\"shardId-000000000002\","
      "\"sequenceNumber\":\"TRIM_HORIZON\",\"subSequenceNumber\":0}\n");
  kc_ml_enc_initialize(&b, "shardId-000000000003", NULL, -1);
  KT_CHECK_STR(
      take(&b),
      "{\"action\":\"initialize\",\"shardId\":\"shardId-000000000003\","
      "\"sequenceNumber\":null,\"subSequenceNumber\":null}\n");

  /* processRecords: text, binary, empty and UTF-8 payloads; aggregated
   * sub-sequence numbers; null millisBehindLatest. */
  kc_ml_rec_t r1 = {"hello", 5, "key-1", "1001", 0, 1700000000123};
  const unsigned char bin[] = {0x00, 0xff, 0x10, 0x80};
  kc_ml_rec_t r2 = {bin, sizeof(bin), "k\"2\\", "1002", 3, 1700000000124};
  kc_ml_rec_t r3 = {"", 0, "\xc3\xa9t\xc3\xa9", "1003", 0, 0};
  kc_ml_rec_t r4 = {"\xe2\x82\xac", 3, "\x01", "1004", 0, -1};
  KT_CHECK(kc_ml_enc_records_begin(&b) == 0);
  KT_CHECK(kc_ml_enc_record(&b, 1, &r1) == 0);
  KT_CHECK(kc_ml_enc_record(&b, 0, &r2) == 0);
  KT_CHECK(kc_ml_enc_record(&b, 0, &r3) == 0);
  KT_CHECK(kc_ml_enc_record(&b, 0, &r4) == 0);
  KT_CHECK(kc_ml_enc_records_end(&b, 1500) == 0);
  KT_CHECK_STR(
      take(&b),
      "{\"action\":\"processRecords\",\"records\":["
      "{\"action\":\"record\",\"data\":\"aGVsbG8=\",\"partitionKey\":\"key-1\","
      "\"sequenceNumber\":\"1001\",\"subSequenceNumber\":0,"
      "\"approximateArrivalTimestamp\":1700000000123},"
      "{\"action\":\"record\",\"data\":\"AP8QgA==\",\"partitionKey\":"
      "\"k\\\"2\\\\\","
      "\"sequenceNumber\":\"1002\",\"subSequenceNumber\":3,"
      "\"approximateArrivalTimestamp\":1700000000124},"
      "{\"action\":\"record\",\"data\":\"\",\"partitionKey\":"
      "\"\xc3\xa9t\xc3\xa9\","
      "\"sequenceNumber\":\"1003\",\"subSequenceNumber\":0,"
      "\"approximateArrivalTimestamp\":0},"
      "{\"action\":\"record\",\"data\":\"4oKs\",\"partitionKey\":\"\\u0001\","
      "\"sequenceNumber\":\"1004\",\"subSequenceNumber\":0,"
      "\"approximateArrivalTimestamp\":null}],"
      "\"millisBehindLatest\":1500}\n");
  kc_ml_enc_records_begin(&b);
  kc_ml_enc_records_end(&b, -1);
  KT_CHECK_STR(take(&b),
               "{\"action\":\"processRecords\",\"records\":[],"
               "\"millisBehindLatest\":null}\n");
  /* A partition key that is not UTF-8 (cannot come from Kinesis). */
  kc_ml_rec_t r5 = {"x",
                    1,
                    "a\xff"
                    "b",
                    "1",
                    0,
                    5};
  kc_ml_enc_records_begin(&b);
  kc_ml_enc_record(&b, 1, &r5);
  kc_ml_enc_records_end(&b, 0);
  KT_CHECK(strstr(take(&b), "\"partitionKey\":\"a\\ufffdb\"") != NULL);
  /* No key (a stream that places records itself): null, as the KCL's. */
  kc_ml_rec_t r6 = {"x", 1, NULL, "1", 0, 5};
  kc_ml_enc_records_begin(&b);
  kc_ml_enc_record(&b, 1, &r6);
  kc_ml_enc_records_end(&b, 0);
  KT_CHECK(strstr(take(&b), "\"partitionKey\":null,") != NULL);

  kc_ml_enc_action(&b, "leaseLost");
  KT_CHECK_STR(take(&b), "{\"action\":\"leaseLost\"}\n");
  kc_ml_enc_action(&b, "shardEnded");
  KT_CHECK_STR(take(&b), "{\"action\":\"shardEnded\"}\n");
  kc_ml_enc_action(&b, "shutdownRequested");
  KT_CHECK_STR(take(&b), "{\"action\":\"shutdownRequested\"}\n");

  kc_ml_enc_checkpoint(&b, "1002", 3, NULL);
  KT_CHECK_STR(take(&b),
               "{\"action\":\"checkpoint\",\"sequenceNumber\":\"1002\","
               "\"subSequenceNumber\":3,\"error\":null}\n");
  kc_ml_enc_checkpoint(&b, NULL, -1, NULL);
  KT_CHECK_STR(take(&b),
               "{\"action\":\"checkpoint\",\"sequenceNumber\":null,"
               "\"subSequenceNumber\":null,\"error\":null}\n");
  kc_ml_enc_checkpoint(&b, "99", -1, "IllegalArgumentException");
  KT_CHECK_STR(take(&b),
               "{\"action\":\"checkpoint\",\"sequenceNumber\":\"99\","
               "\"subSequenceNumber\":null,"
               "\"error\":\"IllegalArgumentException\"}\n");
  kc_ml_buf_free(&b);
}

/* A long key of invalid bytes is repaired in one pass: each byte becomes
 * U+FFFD and the valid text between them is kept (a repair that retried
 * every prefix took hours for this key and ran into the test's time-out). */
static void test_long_invalid_key(void) {
  size_t n = 1000000;
  char *key = malloc(n + 1);
  KT_CHECK(key != NULL);
  if (!key) return;
  for (size_t i = 0; i < n; i++) key[i] = i % 1000 == 999 ? 'x' : '\xff';
  key[n] = '\0';
  kc_ml_rec_t r = {"x", 1, key, "1", 0, 5};
  kc_ml_buf_t b = {0};
  KT_CHECK(kc_ml_enc_records_begin(&b) == 0);
  KT_CHECK(kc_ml_enc_record(&b, 1, &r) == 0);
  char *line = malloc(b.len + 1);
  KT_CHECK(line != NULL);
  if (line) {
    memcpy(line, b.p, b.len);
    line[b.len] = '\0';
  }
  const char *k = line ? strstr(line, "\"partitionKey\":\"") : NULL;
  KT_CHECK(k != NULL);
  if (k) {
    k += 16;
    size_t bad = 0, xs = 0, other = 0;
    const char *end = line + b.len;
    while (k < end && *k != '"') {
      if (end - k >= 6 && !memcmp(k, "\\ufffd", 6)) {
        bad++;
        k += 6;
      } else {
        if (*k == 'x')
          xs++;
        else
          other++;
        k++;
      }
    }
    KT_CHECK_INT(bad, n - n / 1000);
    KT_CHECK_INT(xs, n / 1000);
    KT_CHECK_INT(other, 0);
  }
  free(line);
  kc_ml_buf_free(&b);
  free(key);
}

static int dec(const char *s, kc_ml_in_t *in) {
  char why[128];
  return kc_ml_decode(s, strlen(s), in, why, sizeof(why));
}

static void test_decode(void) {
  kc_ml_in_t in;
  KT_CHECK_INT(
      dec("{\"action\":\"status\",\"responseFor\":\"processRecords\"}", &in),
      KC_ML_DEC_OK);
  KT_CHECK_INT(in.kind, KC_ML_IN_STATUS);
  KT_CHECK_STR(in.response_for, "processRecords");
  /* Key order, spaces and unknown keys do not matter. */
  KT_CHECK_INT(
      dec(" { \"x\" : [1, {\"a\": null}], \"responseFor\" : \"initialize\" ,"
          " \"action\" : \"status\" } ",
          &in),
      KC_ML_DEC_OK);
  KT_CHECK_STR(in.response_for, "initialize");
  /* checkpoint: absent and null sequence numbers mean "all delivered". */
  KT_CHECK_INT(dec("{\"action\":\"checkpoint\"}", &in), KC_ML_DEC_OK);
  KT_CHECK(in.kind == KC_ML_IN_CHECKPOINT && !in.has_seq && !in.has_subseq);
  KT_CHECK_INT(dec("{\"action\":\"checkpoint\",\"sequenceNumber\":null,"
                   "\"subSequenceNumber\":null}",
                   &in),
               KC_ML_DEC_OK);
  KT_CHECK(!in.has_seq && !in.has_subseq);
  KT_CHECK_INT(dec("{\"action\":\"checkpoint\",\"sequenceNumber\":\"4959\","
                   "\"subSequenceNumber\":7}",
                   &in),
               KC_ML_DEC_OK);
  KT_CHECK(in.has_seq && !in.seq_bad && in.has_subseq && in.subseq == 7);
  KT_CHECK_STR(in.seq, "4959");
  /* Malformed positions are flagged, not fatal. */
  dec("{\"action\":\"checkpoint\",\"sequenceNumber\":\"12ab\"}", &in);
  KT_CHECK(in.has_seq && in.seq_bad);
  dec("{\"action\":\"checkpoint\",\"sequenceNumber\":123}", &in);
  KT_CHECK(in.has_seq && !in.seq_bad);
  KT_CHECK_STR(in.seq, "123");
  dec("{\"action\":\"checkpoint\",\"sequenceNumber\":true}", &in);
  KT_CHECK(in.has_seq && in.seq_bad);
  dec("{\"action\":\"checkpoint\",\"sequenceNumber\":\"1\","
      "\"subSequenceNumber\":-1}",
      &in);
  KT_CHECK(in.subseq_bad);
  dec("{\"action\":\"checkpoint\",\"sequenceNumber\":\"\\u0031\\u0032\"}", &in);
  KT_CHECK_STR(in.seq, "12");
  /* Lines to skip. */
  KT_CHECK_INT(dec("", &in), KC_ML_DEC_SKIP);
  KT_CHECK_INT(dec("   ", &in), KC_ML_DEC_SKIP);
  KT_CHECK_INT(dec("hello world", &in), KC_ML_DEC_SKIP);
  KT_CHECK_INT(dec("{\"action\":\"status\"", &in), KC_ML_DEC_SKIP);
  KT_CHECK_INT(dec("{\"action\":\"status\"} x", &in), KC_ML_DEC_SKIP);
  KT_CHECK_INT(dec("{\"responseFor\":\"x\"}", &in), KC_ML_DEC_SKIP);
  KT_CHECK_INT(dec("[1,2]", &in), KC_ML_DEC_SKIP);
  /* An action the protocol does not have is a protocol error. */
  KT_CHECK_INT(dec("{\"action\":\"dance\"}", &in), KC_ML_DEC_PROTOCOL);
  /* A NUL does not end a value: "status\0x" is not status. */
  KT_CHECK_INT(dec("{\"action\":\"status\\u0000x\"}", &in), KC_ML_DEC_PROTOCOL);
  KT_CHECK_INT(dec("{\"action\":\"status\",\"responseFor\":"
                   "\"initialize\\u0000x\"}",
                   &in),
               KC_ML_DEC_OK);
  KT_CHECK(strcmp(in.response_for, "initialize") != 0);
  dec("{\"action\":\"checkpoint\",\"sequenceNumber\":\"12\\u00003\"}", &in);
  KT_CHECK(in.has_seq && in.seq_bad);
  /* Elsewhere it is a character as any other. */
  KT_CHECK_INT(dec("{\"action\":\"status\",\"x\":\"a\\u0000b\"}", &in),
               KC_ML_DEC_OK);
}

static void test_props_parse(void) {
  const char *text =
      "# comment\n"
      "! also a comment\n"
      "executableName = node  app.js\n"
      "  streamName:my-stream\n"
      "applicationName app\\\n"
      "    lication\n"
      "key\\=with\\:seps = v\\tx\\u00e9\r\n"
      "empty=\n"
      "applicationName = last-wins\n";
  kc_ml_props_t p = {0};
  char err[256];
  KT_CHECK(kc_ml_props_parse(&p, text, strlen(text), err, sizeof(err)) == 0);
  const kc_ml_prop_t *e = kc_ml_props_get(&p, "executableName");
  KT_CHECK(e && !strcmp(e->value, "node  app.js") && e->line == 3);
  e = kc_ml_props_get(&p, "STREAMNAME");
  KT_CHECK(e && !strcmp(e->value, "my-stream") && e->line == 4);
  e = kc_ml_props_get(&p, "key=with:seps");
  KT_CHECK(e && !strcmp(e->value, "v\tx\xc3\xa9") && e->line == 7);
  e = kc_ml_props_get(&p, "empty");
  KT_CHECK(e && !strcmp(e->value, ""));
  e = kc_ml_props_get(&p, "applicationName");
  KT_CHECK(e && !strcmp(e->value, "last-wins") && e->line == 9);
  KT_CHECK(p.n == 6 && !strcmp(p.v[2].value, "application") &&
           p.v[2].line == 5);
  kc_ml_props_free(&p);
  const char *bad = "a=1\nb=\\u12x4\n";
  KT_CHECK(kc_ml_props_parse(&p, bad, strlen(bad), err, sizeof(err)) == -1);
  KT_CHECK_STR(err, "line 2: malformed \\uXXXX escape");
  kc_ml_props_free(&p);
}

static char notes[2048];
static void note(void *opaque, const char *line) {
  (void)opaque;
  strncat(notes, line, sizeof(notes) - strlen(notes) - 2);
  strcat(notes, "\n");
}

static int build(const char *text, kc_ml_conf_t *c, kn_conf_t **confp,
                 char *err, size_t errsz) {
  kc_ml_props_t p = {0};
  notes[0] = '\0';
  memset(c, 0, sizeof(*c));
  *confp = kn_conf_new();
  int rc = kc_ml_props_parse(&p, text, strlen(text), err, errsz);
  if (!rc) rc = kc_ml_conf_build(&p, *confp, c, note, NULL, err, errsz);
  kc_ml_props_free(&p);
  return rc;
}

static const char *get(kn_conf_t *conf, const char *name) {
  static char v[512];
  size_t n = sizeof(v);
  if (kn_conf_get(conf, name, v, &n) != KN_CONF_OK) return "(unset)";
  return v;
}

static void test_props_build(void) {
  kc_ml_conf_t c;
  kn_conf_t *conf;
  char err[512];
  KT_CHECK(build("executableName = python3  -u  proc.py\n"
                 "streamName = s\n"
                 "applicationName = app\n"
                 "regionName = eu-west-1\n"
                 "initialPositionInStream = TRIM_HORIZON\n"
                 "failoverTimeMillis = 5000\n"
                 "maxRecords = 500\n"
                 "shutdownGraceMillis = 0\n"
                 "timeoutInSeconds = 7\n"
                 "callProcessRecordsEvenForEmptyRecordList = false\n"
                 "metricsLevel = NONE\n"
                 "workerMetricsTableConfig.tableName = x\n"
                 "maxActiveThreads = 4\n"
                 "streamNmae = typo\n",
                 &c, &conf, err, sizeof(err)) == 0);
  KT_CHECK(c.argv && !strcmp(c.argv[0], "python3") &&
           !strcmp(c.argv[1], "-u") && !strcmp(c.argv[2], "proc.py") &&
           !c.argv[3]);
  KT_CHECK_STR(get(conf, "stream"), "s");
  KT_CHECK_STR(get(conf, "app.name"), "app");
  KT_CHECK_STR(get(conf, "lease.store"), "dynamodb:app");
  KT_CHECK_STR(get(conf, "region"), "eu-west-1");
  KT_CHECK_STR(get(conf, "initial.position"), "trim_horizon");
  KT_CHECK_STR(get(conf, "lease.duration.ms"), "5000");
  KT_CHECK_STR(get(conf, "poll.max.records"), "500");
  KT_CHECK_STR(get(conf, "shard.sync.interval.ms"), "60000");
  KT_CHECK_STR(get(conf, "efo.consumer.name"), ""); /* maxRecords: polling */
  KT_CHECK_INT(c.retrieval, KC_ML_RETRIEVAL_POLLING);
  KT_CHECK_INT(c.grace_ms, 0); /* 0 is honoured */
  KT_CHECK_INT(c.timeout_ms, 7000);
  KT_CHECK(strstr(notes, "line 11: metricsLevel: no counterpart") != NULL);
  KT_CHECK(
      strstr(notes,
             "line 12: workerMetricsTableConfig.tableName: no counterpart") !=
      NULL);
  KT_CHECK(strstr(notes, "line 14: unknown key \"streamNmae\"") != NULL);
  KT_CHECK(strstr(notes, "maxActiveThreads") == NULL);
  kc_ml_conf_free(&c);
  kn_conf_destroy(conf);

  /* Defaults: LATEST, fan-out under the application name, the grace
   * period; the ARN wins over the name and gives the region. */
  KT_CHECK(
      build("executableName=a\napplicationName=app2\ntableName=t\n"
            "streamName=ignored\n"
            "streamArn=arn:aws:kinesis:us-west-2:123456789012:stream/real\n",
            &c, &conf, err, sizeof(err)) == 0);
  KT_CHECK_STR(get(conf, "stream"), "real");
  KT_CHECK_STR(get(conf, "region"), "us-west-2");
  KT_CHECK_STR(get(conf, "lease.store"), "dynamodb:t");
  KT_CHECK_STR(get(conf, "initial.position"), "latest");
  KT_CHECK_STR(get(conf, "efo.consumer.name"), "app2");
  KT_CHECK_INT(c.retrieval, KC_ML_RETRIEVAL_FANOUT);
  KT_CHECK_INT(c.grace_ms, KC_ML_DEFAULT_GRACE_MS);
  KT_CHECK_INT(c.timeout_ms, 0);
  kc_ml_conf_free(&c);
  kn_conf_destroy(conf);

  KT_CHECK(build("executableName=a\napplicationName=a\nstreamName=s\n"
                 "initialPositionInStreamExtended=1700000000\n"
                 "AWSCredentialsProvider = ProfileCredentialsProvider|prod\n"
                 "retrievalMode=POLLING\n",
                 &c, &conf, err, sizeof(err)) == 0);
  KT_CHECK_STR(get(conf, "initial.position"), "at_timestamp");
  KT_CHECK_STR(get(conf, "initial.timestamp.ms"), "1700000000000");
  KT_CHECK_STR(get(conf, "profile"), "prod");
  kc_ml_conf_free(&c);
  kn_conf_destroy(conf);

  /* Errors name the key and line. */
  struct {
    const char *text, *err;
  } bad[] = {
      {"applicationName=a\nstreamName=s\n", "executableName: is required"},
      {"executableName=x\nstreamName=s\n", "applicationName: is required"},
      {"executableName=x\napplicationName=a\n",
       "streamName: is required (or streamArn)"},
      {"executableName=x\napplicationName=a\nstreamName=s\n"
       "failoverTimeMillis = soon\n",
       "line 4: failoverTimeMillis: \"soon\" is not a whole number"},
      {"executableName=x\napplicationName=a\nstreamName=s\n"
       "retrievalMode=PUSH\n",
       "line 4: retrievalMode: \"PUSH\" is none of"},
      {"executableName=x\napplicationName=a\nstreamName=s\n"
       "initialPositionInStream=AT_TIMESTAMP\n",
       "line 4: initialPositionInStream: AT_TIMESTAMP needs"},
      {"executableName=x\napplicationName=a\nstreamArn=arn:aws:s3:::b\n",
       "line 3: streamArn: \"arn:aws:s3:::b\" is not a stream ARN"},
      {"executableName=x\napplicationName=a\nstreamName=s\n"
       "cleanupLeasesUponShardCompletion=maybe\n",
       "line 4: cleanupLeasesUponShardCompletion: \"maybe\" is neither"},
      {"executableName=x\napplicationName=a\nstreamName=s\n"
       "AwsCredentialsProvider=StsAssumeRoleCredentialsProvider|arn:r|s\n",
       "line 4: AwsCredentialsProvider: StsAssumeRoleCredentialsProvider "
       "cannot be honoured"},
      {"executableName=x\napplicationName=a\nstreamName=s\n"
       "AwsCredentialsProvider=MyOwnProvider\n",
       "line 4: AwsCredentialsProvider: unknown credentials provider"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int rc = build(bad[i].text, &c, &conf, err, sizeof(err));
    KT_CHECK_MSG(rc == -1 && strncmp(err, bad[i].err, strlen(bad[i].err)) == 0,
                 "case %zu: got \"%s\"", i, err);
    kc_ml_conf_free(&c);
    kn_conf_destroy(conf);
  }
}

static char got_lines[4096];
static void on_line(void *opaque, const char *line, size_t len) {
  (void)opaque;
  size_t have = strlen(got_lines);
  if (have + len + 2 > sizeof(got_lines)) { /* too much: told as such */
    snprintf(got_lines + have, sizeof(got_lines) - have, "+");
    return;
  }
  strncat(got_lines, line, len);
  strcat(got_lines, "|");
}

/* Reads c's stdout into got_lines (emptied first), in turns of at least
 * 10 ms, KT_PROMPT_MS in all: until its end, or with first_only until a
 * first line.  Non-zero if that came. */
static int read_out(kc_ml_child_t *c, int first_only) {
  got_lines[0] = '\0';
  for (int i = 0; i < KT_PROMPT_MS / 10; i++) {
    if (kc_ml_child_read(&c->out_fd, &c->obuf, 1024, on_line, NULL) == 1 ||
        (first_only && got_lines[0]))
      return 1;
    usleep(10000);
  }
  return 0;
}

/* Dead or a zombie, within KT_PROMPT_MS. */
static int gone(int pid) {
  for (int i = 0; i < KT_PROMPT_MS / 10; i++) {
    char path[64], st[512] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f) {
      size_t n = fread(st, 1, sizeof(st) - 1, f);
      st[n] = '\0';
      fclose(f);
    }
    const char *rp = strrchr(st, ')');
    if (!f || (rp && rp[1] == ' ' && rp[2] == 'Z')) return 1;
    usleep(10000);
  }
  return 0;
}

/* A child (sh) echoes what it gets, in its own process group. */
static void test_child(void) {
  kc_ml_child_t c;
  kc_ml_child_init(&c);
  char err[256];
  char *argv[] = {"sh", "-c",
                  "echo pgid=$(($(ps -o pgid= $$)==$$)); cat; "
                  "echo bye >&2",
                  NULL};
  KT_CHECK(kc_ml_child_spawn(&c, argv, err, sizeof(err)) == 0);
  kc_ml_enc_action(&c.wbuf, "leaseLost");
  KT_CHECK(kc_ml_child_flush(&c) == 0);
  kc_ml_child_close_stdin(&c);
  KT_CHECK(read_out(&c, 0));
  KT_CHECK_STR(got_lines, "pgid=1|{\"action\":\"leaseLost\"}|");
  got_lines[0] = '\0';
  for (int i = 0; i < KT_PROMPT_MS / 10 && c.err_fd >= 0; i++) {
    if (kc_ml_child_read(&c.err_fd, &c.ebuf, 1024, on_line, NULL) == 0)
      usleep(10000);
  }
  KT_CHECK_STR(got_lines, "bye|");
  KT_CHECK(kc_ml_child_reap(&c, 1) && WIFEXITED(c.status) &&
           WEXITSTATUS(c.status) == 0);
  kc_ml_child_free(&c);

  /* A line longer than the cap is passed on cut, and the rest of it up to
   * its newline is dropped, not taken as lines of their own (it comes in
   * more than one read: a pipe holds 64 KB). */
  kc_ml_child_init(&c);
  char *longline[] = {"sh", "-c",
                      "head -c 200000 /dev/zero | tr '\\0' a; echo; echo next",
                      NULL};
  KT_CHECK(kc_ml_child_spawn(&c, longline, err, sizeof(err)) == 0);
  KT_CHECK(read_out(&c, 0));
  {
    char want[1100];
    memset(want, 'a', 1024);
    snprintf(want + 1024, sizeof(want) - 1024, "|next|");
    KT_CHECK_STR(got_lines, want);
  }
  KT_CHECK(kc_ml_child_reap(&c, 1));
  kc_ml_child_free(&c);

  /* Only stdin, stdout and stderr reach the child, though kncat (here the
   * test) holds a descriptor without close-on-exec. */
  int leak = open("/dev/null", O_RDONLY);
  KT_CHECK(leak > 2);
  kc_ml_child_init(&c);
  char *fds[] = {"sh", "-c", "ls /proc/$$/fd; echo end", NULL};
  KT_CHECK(kc_ml_child_spawn(&c, fds, err, sizeof(err)) == 0);
  KT_CHECK(read_out(&c, 0));
  KT_CHECK_STR(got_lines, "0|1|2|end|");
  KT_CHECK(kc_ml_child_reap(&c, 1));
  kc_ml_child_free(&c);
  close(leak);

  /* Not found: reported at once. */
  kc_ml_child_init(&c);
  char *nope[] = {"/nonexistent/processor", NULL};
  KT_CHECK(kc_ml_child_spawn(&c, nope, err, sizeof(err)) == -1);
  KT_CHECK(strstr(err, "cannot run /nonexistent/processor") != NULL);
  kc_ml_child_free(&c);

  /* Killed with its whole group: the background sleep goes too (dead or
   * a zombie waiting for its new parent to reap it). */
  kc_ml_child_init(&c);
  char *sleeper[] = {"sh", "-c", "sleep 30 & echo $!; sleep 30", NULL};
  KT_CHECK(kc_ml_child_spawn(&c, sleeper, err, sizeof(err)) == 0);
  KT_CHECK(read_out(&c, 1));
  int bg = atoi(got_lines);
  KT_CHECK(bg > 0);
  kc_ml_child_kill(&c);
  KT_CHECK(kc_ml_child_reap(&c, 1));
  KT_CHECK(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL);
  KT_CHECK(gone(bg));
  kc_ml_child_free(&c);

  /* A child that exits by itself takes its process group along too. */
  kc_ml_child_init(&c);
  char *leaver[] = {"sh", "-c", "sleep 30 & echo $!; exit 0", NULL};
  KT_CHECK(kc_ml_child_spawn(&c, leaver, err, sizeof(err)) == 0);
  KT_CHECK(read_out(&c, 1));
  bg = atoi(got_lines);
  KT_CHECK(bg > 0);
  KT_CHECK(kc_ml_child_reap(&c, 1));
  KT_CHECK(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
  KT_CHECK(gone(bg));
  kc_ml_child_free(&c);
}

/* A second SIGTERM ends kncat at once, and its children's process groups
 * with it (run in a process of its own, which the signal kills). */
static void test_second_signal(void) {
  int up[2];
  KT_REQUIRE(pipe(up) == 0);
  fflush(NULL);
  pid_t p = fork();
  KT_REQUIRE(p >= 0);
  if (p == 0) {
    close(up[0]);
    kc_signals_install();
    kc_ml_child_t c;
    kc_ml_child_init(&c);
    char err[256];
    char *argv[] = {"sh", "-c", "sleep 30 & echo $!; wait", NULL};
    if (kc_ml_child_spawn(&c, argv, err, sizeof(err))) _exit(3);
    char line[64] = "";
    size_t n = 0;
    while (n < sizeof(line) - 1 && (n == 0 || line[n - 1] != '\n')) {
      ssize_t r = read(c.out_fd, line + n, sizeof(line) - 1 - n);
      if (r > 0) n += (size_t)r;
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) _exit(4);
      if (r < 0) usleep(10000);
    }
    if (write(up[1], line, n) != (ssize_t)n) _exit(5);
    while (!kc_signal_received()) pause();
    if (write(up[1], "stopping\n", 9) != 9) _exit(6);
    for (;;) pause(); /* the second signal ends it */
  }
  close(up[1]);
  char got[128] = "";
  size_t n = 0;
  ssize_t r;
  while (!strchr(got, '\n') &&
         (r = read(up[0], got + n, sizeof(got) - 1 - n)) > 0)
    got[n += (size_t)r] = '\0';
  int bg = atoi(got);
  KT_CHECK(bg > 0);
  kill(p, SIGTERM);
  while (!strstr(got, "stopping") &&
         (r = read(up[0], got + n, sizeof(got) - 1 - n)) > 0)
    got[n += (size_t)r] = '\0';
  KT_CHECK(strstr(got, "stopping") != NULL);
  kill(p, SIGTERM);
  int st = 0;
  KT_CHECK(waitpid(p, &st, 0) == p);
  KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  close(up[0]);
  KT_CHECK(bg > 0 && gone(bg));
  if (bg > 0 && !gone(bg)) kill(bg, SIGKILL);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  KT_RUN(test_golden_out);
  KT_RUN(test_long_invalid_key);
  KT_RUN(test_decode);
  KT_RUN(test_props_parse);
  KT_RUN(test_props_build);
  KT_RUN(test_child);
  KT_RUN(test_second_signal);
  return KT_DONE();
}
