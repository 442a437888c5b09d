/* The metrics: the table's naming rules, the text-format writer
 * (escaping, grouping, histograms, the snprintf-like copy), and the
 * consumer's and producer's documents and health against a scripted
 * Kinesis on loopback with a process-local lease table. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"
#include "kn/consumer.h"
#include "kn/producer.h"
#include "kt.h"
#include "util/str.h"
#include "kt_aws.h"
#include "kt_httpd.h"
#include "kt_kinesis.h"
#include "util/clock.h"

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ---- the table ---- */

static void test_table(void) {
  for (int i = 0; i < KN_M__COUNT; i++) {
    const kn_metric_def_t *d = kn_metric_def((kn_metric_id_t)i);
    KT_CHECK_MSG(d && d->name && d->help && d->labels, "entry %d", i);
    if (!d || !d->name) continue;
    KT_CHECK_MSG(strncmp(d->name, "kn_", 3) == 0, "%s", d->name);
    for (const char *p = d->name; *p; p++)
      KT_CHECK_MSG(
          (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_',
          "%s", d->name);
    if (d->kind == KN_MK_COUNTER)
      KT_CHECK_MSG(ends_with(d->name, "_total"), "%s", d->name);
    else
      KT_CHECK_MSG(!ends_with(d->name, "_total"), "%s", d->name);
    if (d->kind == KN_MK_HISTOGRAM)
      KT_CHECK_MSG(ends_with(d->name, "_seconds"), "%s", d->name);
    KT_CHECK_MSG(!strchr(d->help, '\n') && d->help[strlen(d->help) - 1] != '.',
                 "%s", d->name);
    for (int j = 0; j < i; j++)
      KT_CHECK_MSG(strcmp(kn_metric_def((kn_metric_id_t)j)->name, d->name),
                   "%s twice", d->name);
  }
  KT_CHECK(kn_metric_def(KN_M__COUNT) == NULL);
}

/* ---- the writer ---- */

static void test_writer(void) {
  kn_buf_t b = KN_BUF_INIT;
  const char *base[] = {"stream", "a\"b\\c\nd", "app", NULL, NULL};
  kn_mw_t w;
  kn_mw_init(&w, &b, base);
  kn_mw_family(&w, KN_M_C_LEASES_HELD); /* no sample: nothing written */
  kn_mw_family(&w, KN_M_S_RECORDS);
  kn_mw_u64(&w, "shard", "s-1", 18446744073709551615ull);
  kn_mw_u64(&w, "shard", "s-2", 0);
  kn_mw_family(&w, KN_M_S_LAG);
  kn_mw_f64(&w, "shard", "s-1", 1.5);
  kn_mw_family(&w, KN_M_S_FO_STATE);
  kn_mw_u64_2(&w, "shard", "s-1", "state", "streaming", 1);
  KT_CHECK(w.rc == 0);
  KT_CHECK_STR(
      b.p,
      "# HELP kn_consumer_shard_records_total Records of the shard handed to "
      "the application\n"
      "# TYPE kn_consumer_shard_records_total counter\n"
      "kn_consumer_shard_records_total{stream=\"a\\\"b\\\\c\\nd\",app=\"\","
      "shard=\"s-1\"} 18446744073709551615\n"
      "kn_consumer_shard_records_total{stream=\"a\\\"b\\\\c\\nd\",app=\"\","
      "shard=\"s-2\"} 0\n"
      "# HELP kn_consumer_shard_lag_seconds MillisBehindLatest of the shard's "
      "last read, in seconds\n"
      "# TYPE kn_consumer_shard_lag_seconds gauge\n"
      "kn_consumer_shard_lag_seconds{stream=\"a\\\"b\\\\c\\nd\",app=\"\","
      "shard=\"s-1\"} 1.5\n"
      "# HELP kn_consumer_shard_fanout_state Enhanced fan-out: 1 for the "
      "subscription's current state, 0 for the others\n"
      "# TYPE kn_consumer_shard_fanout_state gauge\n"
      "kn_consumer_shard_fanout_state{stream=\"a\\\"b\\\\c\\nd\",app=\"\","
      "shard=\"s-1\",state=\"streaming\"} 1\n");
  kn_mw_free(&w);

  /* Label values that are not UTF-8 (an app.name or worker.id from a byte
   * string) get U+FFFD for each bad byte: Prometheus refuses the whole
   * scrape otherwise. */
  kn_buf_reset(&b);
  const char *bad[] = {"app",
                       "a\xff"
                       "b\xc3",
                       "worker", "\xe2\x82\xac\xed\xa0\x80", NULL};
  kn_mw_init(&w, &b, bad);
  kn_mw_family(&w, KN_M_S_RECORDS);
  kn_mw_u64(&w, "shard", "s\x80", 1);
  KT_CHECK(w.rc == 0);
  KT_CHECK(kn_utf8_count(b.p, b.len) >= 0);
  KT_CHECK(strstr(b.p,
                  "{app=\"a\xef\xbf\xbd"
                  "b\xef\xbf\xbd\","
                  "worker=\"\xe2\x82\xac\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\","
                  "shard=\"s\xef\xbf\xbd\"} 1\n") != NULL);
  kn_mw_free(&w);

  /* No labels at all; a histogram with cumulative buckets. */
  kn_buf_reset(&b);
  kn_mw_init(&w, &b, NULL);
  kn_hist_t h;
  memset(&h, 0, sizeof(h));
  kn_hist_observe(&h, 0.0005); /* le 0.001 */
  kn_hist_observe(&h, 0.001);  /* le 0.001: bounds are inclusive */
  kn_hist_observe(&h, 0.3);    /* le 0.5 */
  kn_hist_observe(&h, 99);     /* +Inf only */
  kn_hist_observe(&h, NAN);    /* counted as 0 */
  KT_CHECK(h.count == 5);
  kn_mw_family(&w, KN_M_P_PUT_DURATION);
  kn_mw_hist(&w, NULL, NULL, &h);
  kn_mw_family(&w, KN_M_P_SENT);
  kn_mw_u64(&w, NULL, NULL, 7);
  KT_CHECK(w.rc == 0);
  KT_CHECK(strstr(
      b.p,
      "kn_producer_put_records_duration_seconds_bucket{le=\"0.001\"} 3\n"));
  KT_CHECK(strstr(
      b.p, "kn_producer_put_records_duration_seconds_bucket{le=\"0.25\"} 3\n"));
  KT_CHECK(strstr(
      b.p, "kn_producer_put_records_duration_seconds_bucket{le=\"0.5\"} 4\n"));
  KT_CHECK(strstr(
      b.p, "kn_producer_put_records_duration_seconds_bucket{le=\"30\"} 4\n"));
  KT_CHECK(strstr(
      b.p, "kn_producer_put_records_duration_seconds_bucket{le=\"+Inf\"} 5\n"));
  KT_CHECK(
      strstr(b.p, "kn_producer_put_records_duration_seconds_sum 99.3015\n"));
  KT_CHECK(strstr(b.p, "kn_producer_put_records_duration_seconds_count 5\n"));
  KT_CHECK(strstr(
      b.p, "# TYPE kn_producer_put_records_duration_seconds histogram\n"));
  KT_CHECK(strstr(b.p, "\nkn_producer_records_sent_total 7\n"));
  kn_mw_free(&w);

  /* snprintf semantics */
  char small[8];
  size_t n = kn_metrics_copy_out(&b, small, sizeof(small));
  KT_CHECK(n == b.len);
  KT_CHECK(strlen(small) == 7 && memcmp(small, b.p, 7) == 0);
  KT_CHECK(kn_metrics_copy_out(&b, NULL, 0) == b.len);
  kn_buf_free(&b);
}

/* ---- the consumer against a scripted server ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int n_get_records;

static int handle(void *ud, const kt_httpd_req_t *req, char *out, size_t size,
                  size_t *out_len) {
  (void)ud;
  const char *action = kt_kinesis_action(req);
  pthread_mutex_lock(&mu);
  if (strcmp(action, "ListShards") == 0) {
    *out_len = kt_kinesis_json(out, size, 200, KT_ONE_SHARD);
  } else if (strcmp(action, "GetShardIterator") == 0) {
    *out_len = kt_kinesis_json(out, size, 200, "{\"ShardIterator\":\"it\"}");
  } else if (strcmp(action, "GetRecords") == 0) {
    n_get_records++;
    if (n_get_records == 2) /* one throttled call */
      *out_len = kt_kinesis_json(
          out, size, 400,
          "{\"__type\":\"ProvisionedThroughputExceededException\","
          "\"message\":\"scripted\"}");
    else
      *out_len = kt_kinesis_json(
          out, size, 200,
          n_get_records == 1
              ? "{\"Records\":[" KT_REC("11") "," KT_REC("12") "," KT_REC(
                    "13") "],\"NextShardIterator\":\"it\","
                          "\"MillisBehindLatest\":2500}"
              : "{\"Records\":[],\"NextShardIterator\":\"it\","
                "\"MillisBehindLatest\":0}");
  } else {
    *out_len = kt_kinesis_json(out, size, 400,
                               "{\"__type\":\"UnknownOperationException\"}");
  }
  pthread_mutex_unlock(&mu);
  return KT_REPLY;
}

static kt_httpd_t srv;

static kn_consumer_t *consumer(void) {
  static const char *const props[][2] = {{"app.name", "app"},
                                         {"lease.store", "memory:metrics"},
                                         {"worker.id", "w\"1"},
                                         {"retry.max.attempts", "1"}};
  kn_conf_t *conf =
      kt_kinesis_consumer_conf(srv.port, props, sizeof props / sizeof props[0]);
  char err[256];
  kn_consumer_t *kc = kn_consumer_new(conf, err, sizeof err);
  if (!kc) fprintf(stderr, "kn_consumer_new: %s\n", err);
  kn_conf_destroy(conf);
  return kc;
}

/* The consumer's document (malloc'ed). */
static char *render(kn_consumer_t *kc) {
  size_t n = kn_consumer_metrics(kc, NULL, 0);
  char *buf = malloc(n + 1024);
  if (!buf) return NULL;
  size_t m = kn_consumer_metrics(kc, buf, n + 1024);
  KT_CHECK(m > 0 && m < n + 1024);
  return buf;
}

#define W "stream=\"s\",app=\"app\",worker=\"w\\\"1\""
#define S W ",shard=\"shardId-0\""

static int has(const char *doc, const char *line) {
  char want[512];
  snprintf(want, sizeof want, "\n%s\n", line);
  return doc && strstr(doc, want) != NULL;
}

static void test_consumer(void) {
  kn_consumer_t *kc = consumer();
  KT_CHECK(kc != NULL);
  if (!kc) return;
  kn_batch_t *b = NULL;
  int64_t end = kn_mono_ms() + 10000;
  while (!b && kn_mono_ms() < end && !kn_consumer_fatal_error(kc)) {
    b = kn_consumer_poll(kc, 100);
    if (b && !kn_batch_count(b)) {
      kn_batch_destroy(b);
      b = NULL;
    }
  }
  KT_CHECK(b != NULL);
  if (!b) {
    kn_consumer_destroy(kc);
    return;
  }
  kn_consumer_health_t h;
  kn_consumer_health(kc, &h);
  KT_CHECK(h.alive);
  KT_CHECK_MSG(h.ready, "%s", h.reason);
  char *doc = render(kc);
  KT_CHECK(has(doc, "kn_consumer_leases_held{" W "} 1"));
  KT_CHECK(has(doc, "kn_consumer_leases_taken_total{" W "} 1"));
  KT_CHECK(has(doc, "kn_consumer_ready{" W "} 1"));
  KT_CHECK(has(doc, "kn_consumer_failed{" W "} 0"));
  KT_CHECK(
      has(doc, "kn_consumer_lease_store_calls_total{" W ",op=\"take\"} 1"));
  KT_CHECK(has(doc, "kn_consumer_lease_table_leases{" W "} 1"));
  KT_CHECK(has(doc, "kn_consumer_shards_waiting_on_parents{" W "} 0"));
  KT_CHECK(has(doc, "kn_consumer_shard_lease_held{" S "} 1"));
  KT_CHECK(has(doc, "kn_consumer_shard_records_total{" S "} 3"));
  KT_CHECK(has(doc, "kn_consumer_shard_bytes_total{" S "} 6"));
  KT_CHECK(has(doc, "kn_consumer_shard_checkpoint_lag_records{" S "} 3"));
  KT_CHECK(
      doc &&
      strstr(
          doc,
          "# TYPE kn_consumer_lease_store_call_duration_seconds histogram\n"));
  KT_CHECK(doc &&
           strstr(doc, "kn_consumer_lease_store_call_duration_seconds_bucket{" W
                       ",op=\"take\",le=\"+Inf\"} 1\n"));
  /* every family once (its samples together) */
  for (int i = KN_M_C_READY; i < KN_M_P_SENT; i++) {
    char t[160];
    snprintf(t, sizeof t, "# TYPE %s ", kn_metric_def((kn_metric_id_t)i)->name);
    int seen = 0;
    for (const char *p = doc; p && (p = strstr(p, t)); p++) seen++;
    KT_CHECK_MSG(seen <= 1, "%s", t);
  }
  free(doc);

  /* The checkpoint of the last record: no lag left.  The throttled and
   * the empty reads are counted. */
  kn_error_t *err = kn_consumer_checkpoint(kc, kn_batch_record(b, 2));
  KT_CHECK(err == NULL);
  kn_error_destroy(err);
  kn_batch_destroy(b);
  end = kn_mono_ms() + 10000;
  for (;;) {
    kn_batch_destroy(kn_consumer_poll(kc, 50));
    pthread_mutex_lock(&mu);
    int n = n_get_records;
    pthread_mutex_unlock(&mu);
    if (n >= 4 || kn_mono_ms() > end || kn_consumer_fatal_error(kc)) break;
  }
  doc = render(kc);
  KT_CHECK(has(doc, "kn_consumer_shard_checkpoint_lag_records{" S "} 0"));
  KT_CHECK(has(doc, "kn_consumer_shard_get_records_throttles_total{" S "} 1"));
  KT_CHECK(has(doc, "kn_consumer_shard_get_records_errors_total{" S "} 0"));
  KT_CHECK(has(doc, "kn_consumer_shard_lag_seconds{" S "} 0"));
  KT_CHECK(has(
      doc, "kn_consumer_lease_store_calls_total{" W ",op=\"checkpoint\"} 1"));
  free(doc);

  kn_error_destroy(kn_consumer_close(kc));
  kn_consumer_health(kc, &h);
  KT_CHECK(!h.alive && !h.ready);
  doc = render(kc);
  KT_CHECK(has(doc, "kn_consumer_leases_released_total{" W "} 1"));
  KT_CHECK(has(doc, "kn_consumer_shard_lease_held{" S "} 0"));
  /* no lag for a shard no longer held */
  KT_CHECK(doc && !strstr(doc, "kn_consumer_shard_lag_seconds{"));
  free(doc);
  kn_consumer_destroy(kc);
}

/* ---- the producer, before its shard map loads ---- */

static void test_producer(void) {
  kt_aws_reset();
  kn_conf_t *conf = kn_conf_new();
  char ep[64], err[256];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", kt_closed_port());
  const char *props[][2] = {{"endpoint", ep},
                            {"region", "us-east-1"},
                            {"aws.access.key.id", "AKID"},
                            {"aws.secret.access.key", "secret"},
                            {"stream", "p"},
                            {"log.level", "0"}};
  for (size_t i = 0; i < sizeof props / sizeof props[0]; i++)
    kn_conf_set(conf, props[i][0], props[i][1], err, sizeof err);
  kn_producer_t *kp = kn_producer_new(conf, err, sizeof err);
  kn_conf_destroy(conf);
  KT_CHECK(kp != NULL);
  if (!kp) return;
  KT_CHECK(kn_producer_send(kp, "k", NULL, "abc", 3, 0, NULL) ==
           KN_ERR_NO_ERROR);
  int ready = 1;
  KT_CHECK(kn_producer_alive(kp, &ready) == 1);
  KT_CHECK(ready == 0);
  char buf[16384];
  size_t n = kn_producer_metrics(kp, buf, sizeof buf);
  KT_CHECK(n > 0 && n < sizeof buf);
  KT_CHECK(has(buf, "kn_producer_records_sent_total{stream=\"p\"} 1"));
  KT_CHECK(has(buf, "kn_producer_queue_records{stream=\"p\"} 1"));
  KT_CHECK(has(buf, "kn_producer_queue_bytes{stream=\"p\"} 4"));
  KT_CHECK(has(
      buf, "kn_producer_put_records_duration_seconds_count{stream=\"p\"} 0"));
  for (int i = KN_M_P_SENT; i < KN_M__COUNT; i++) {
    char t[160];
    snprintf(t, sizeof t, "# TYPE %s ", kn_metric_def((kn_metric_id_t)i)->name);
    KT_CHECK_MSG(strstr(buf, t), "%s", t);
  }
  kn_producer_destroy(kp);
}

int main(void) {
  if (kt_httpd_start(&srv, handle, NULL)) {
    fprintf(stderr, "cannot start the test server\n");
    return 1;
  }
  KT_RUN(test_table);
  KT_RUN(test_writer);
  KT_RUN(test_consumer);
  KT_RUN(test_producer);
  kt_httpd_stop(&srv);
  kt_aws_cleanup();
  return KT_DONE();
}
