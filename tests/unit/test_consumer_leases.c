/* The consumer in lease mode against a scripted Kinesis on loopback and a
 * process-local lease table ("memory:NAME", also read and changed here):
 * the application's checkpoints (written, prepared, refused), its fencing
 * token, a lease taken by another worker, the release at close, and a
 * shard gone past retention. */
#include <pthread.h>
#include <string.h>

#include "kn/consumer.h"
#include "kt.h"
#include "kt_aws.h"
#include "kt_httpd.h"
#include "kt_kinesis.h"
#include "lease/store.h"
#include "util/clock.h"

/* ---- the scripted server: one open shard, three records ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int n_get_records, n_describe;
static int shard_gone; /* GetShardIterator: ResourceNotFound (past retention) */

static int handle(void *ud, const kt_httpd_req_t *req, char *out, size_t size,
                  size_t *out_len) {
  (void)ud;
  const char *action = kt_kinesis_action(req);
  pthread_mutex_lock(&mu);
  if (strcmp(action, "ListShards") == 0) {
    *out_len = kt_kinesis_json(out, size, 200, KT_ONE_SHARD);
  } else if (strcmp(action, "GetShardIterator") == 0 && shard_gone) {
    *out_len = kt_kinesis_json(out, size, 400,
                               "{\"__type\":\"ResourceNotFoundException\","
                               "\"message\":\"scripted\"}");
  } else if (strcmp(action, "GetShardIterator") == 0) {
    *out_len = kt_kinesis_json(out, size, 200, "{\"ShardIterator\":\"it\"}");
  } else if (strcmp(action, "GetRecords") == 0) {
    *out_len = kt_kinesis_json(out, size, 200,
                         ++n_get_records == 1
                             ? "{\"Records\":[" KT_REC("11") "," KT_REC("12") "," KT_REC(
                                   "13") "],\"NextShardIterator\":\"it\","
                                         "\"MillisBehindLatest\":0}"
                             : "{\"Records\":[],\"NextShardIterator\":\"it\","
                               "\"MillisBehindLatest\":0}");
  } else if (strcmp(action, "DescribeStreamSummary") == 0) {
    n_describe++;
    *out_len =
        kt_kinesis_json(out, size, 200,
                        "{\"StreamDescriptionSummary\":{\"StreamName\":\"s\","
                        "\"StreamStatus\":\"ACTIVE\",\"OpenShardCount\":1}}");
  } else {
    *out_len = kt_kinesis_json(out, size, 400,
                               "{\"__type\":\"UnknownOperationException\"}");
  }
  pthread_mutex_unlock(&mu);
  return KT_REPLY;
}

/* ---- the consumer ---- */

static kt_httpd_t srv;
static int acquired, lost;
static int64_t acquired_token;
static kn_err_t lost_reason;

static void on_acquired(kn_consumer_t *kc, const char *shard, int64_t token,
                        const void *state, size_t len, void *opaque) {
  (void)kc, (void)shard, (void)state, (void)len, (void)opaque;
  acquired++;
  acquired_token = token;
}

static void on_lost(kn_consumer_t *kc, const char *shard, kn_err_t reason,
                    void *opaque) {
  (void)kc, (void)shard, (void)opaque;
  lost++;
  lost_reason = reason;
}

static kn_consumer_t *consumer(const char *table) {
  char store[64], err[256];
  snprintf(store, sizeof store, "memory:%s", table);
  const char *const props[][2] = {
      {"lease.store", store}, {"worker.id", "w1"}, {"retry.max.attempts", "2"}};
  kn_conf_t *conf =
      kt_kinesis_consumer_conf(srv.port, props, sizeof props / sizeof props[0]);
  pthread_mutex_lock(&mu);
  n_get_records = n_describe = 0;
  pthread_mutex_unlock(&mu);
  acquired = lost = 0;
  acquired_token = -1;
  lost_reason = KN_ERR_NO_ERROR;
  kn_conf_set_lease_acquired_cb(conf, on_acquired, NULL);
  kn_conf_set_lease_lost_cb(conf, on_lost, NULL);
  kn_consumer_t *kc = kn_consumer_new(conf, err, sizeof err);
  if (!kc) fprintf(stderr, "kn_consumer_new: %s\n", err);
  kn_conf_destroy(conf);
  return kc;
}

/* Polls until a batch with records comes (returned) or 10 s pass, or
 * the consumer fails (as it may, at any allocation, under torture). */
static kn_batch_t *first_batch(kn_consumer_t *kc) {
  int64_t end = kn_mono_ms() + 10000;
  while (kn_mono_ms() < end && !kn_consumer_fatal_error(kc)) {
    kn_batch_t *b = kn_consumer_poll(kc, 100);
    if (b && kn_batch_count(b)) return b;
    kn_batch_destroy(b);
  }
  return NULL;
}

/* The lease of shardId-0 as the table has it (cleared by the caller). */
static int table_lease(kn_lease_store_t *ls, kn_lease_t *out) {
  memset(out, 0, sizeof(*out));
  kn_error_t *err = ls->ops->get(ls, "shardId-0", out);
  if (err) {
    fprintf(stderr, "get: %s\n", kn_error_string(err));
    kn_error_destroy(err);
    return -1;
  }
  return 0;
}

static int str_is(const char *a, const char *b) {
  return a && b && strcmp(a, b) == 0;
}

/* Polls (callbacks run there) until cond holds, ms pass or the consumer
 * fails. */
#define POLL_UNTIL(kc, cond, ms)                                           \
  do {                                                                     \
    int64_t end_ = kn_mono_ms() + (ms);                                    \
    while (!(cond) && kn_mono_ms() < end_ && !kn_consumer_fatal_error(kc)) \
      kn_batch_destroy(kn_consumer_poll((kc), 50));                        \
  } while (0)

/* ---- cases ---- */

static void test_checkpoints(void) {
  kn_error_t *err = NULL;
  kn_lease_store_t *ls = kn_lease_store_open("memory:ckpt", NULL, &err);
  KT_CHECK(ls != NULL);
  kn_consumer_t *kc = consumer("ckpt");
  KT_CHECK(kc != NULL);
  if (!kc || !ls) {
    kn_consumer_destroy(kc);
    kn_lease_store_destroy(ls);
    kn_error_destroy(err);
    return;
  }
  kn_batch_t *b = first_batch(kc);
  KT_CHECK(b != NULL && kn_batch_count(b) == 3);
  if (!b) goto out;
  KT_CHECK(acquired == 1);
  int64_t token = kn_consumer_fencing_token(kc, "shardId-0");
  KT_CHECK(token > 0);
  KT_CHECK_INT(token, acquired_token);

  /* A checkpoint is in the table when the call returns. */
  err = kn_consumer_checkpoint(kc, kn_batch_record(b, 1));
  KT_CHECK_MSG(err == NULL, "%s", err ? kn_error_string(err) : "");
  kn_error_destroy(err);
  kn_lease_t l;
  if (table_lease(ls, &l) == 0) {
    KT_CHECK(str_is(l.checkpoint, "12"));
    KT_CHECK(str_is(l.owner, "w1"));
    kn_lease_clear(&l);
  }
  /* Behind the table's checkpoint: nothing to write, no error. */
  err = kn_consumer_checkpoint(kc, kn_batch_record(b, 0));
  KT_CHECK(err == NULL);
  kn_error_destroy(err);
  /* Prepared: the pending checkpoint and its state, the checkpoint kept. */
  err = kn_consumer_prepare_checkpoint(kc, kn_batch_record(b, 2), "st", 2);
  KT_CHECK_MSG(err == NULL, "%s", err ? kn_error_string(err) : "");
  kn_error_destroy(err);
  if (table_lease(ls, &l) == 0) {
    KT_CHECK(str_is(l.checkpoint, "12"));
    KT_CHECK(str_is(l.pending, "13"));
    KT_CHECK(l.pending_state_len == 2 && memcmp(l.pending_state, "st", 2) == 0);
    kn_lease_clear(&l);
  }
  err = kn_consumer_checkpoint_batch(kc, b);
  KT_CHECK(err == NULL);
  kn_error_destroy(err);
  if (table_lease(ls, &l) == 0) {
    KT_CHECK(str_is(l.checkpoint, "13"));
    KT_CHECK(l.pending == NULL);
    kn_lease_clear(&l);
  }
  char *json = kn_consumer_stats_json(kc);
  KT_CHECK_MSG(json && strstr(json, "\"held\":1") &&
                   strstr(json, "\"checkpoint\":{\"seq\":\"13\""),
               "%s", json ? json : "(null)");
  free(json);

  /* Close: released, so other workers take it at once. */
  err = kn_consumer_close(kc);
  kn_error_destroy(err);
  if (table_lease(ls, &l) == 0) {
    KT_CHECK(l.owner == NULL);
    KT_CHECK(str_is(l.checkpoint, "13"));
    kn_lease_clear(&l);
  }
  /* After close a checkpoint is refused, not waited for. */
  err = kn_consumer_checkpoint(kc, kn_batch_record(b, 2));
  KT_CHECK(err != NULL && kn_error_code(err) == KN_ERR__LEASE_LOST);
  kn_error_destroy(err);
  KT_CHECK(kn_consumer_fencing_token(kc, "shardId-0") < 0);
out:
  kn_batch_destroy(b);
  kn_consumer_destroy(kc);
  kn_lease_store_destroy(ls);
}

/* Checkpoints by value and the lease's checkpoint (kncat multilang). */
static void test_checkpoint_by_value(void) {
  kn_error_t *err = NULL;
  kn_lease_store_t *ls = kn_lease_store_open("memory:byval", NULL, &err);
  KT_CHECK(ls != NULL);
  kn_consumer_t *kc = consumer("byval");
  KT_CHECK(kc != NULL);
  if (!kc || !ls) {
    kn_consumer_destroy(kc);
    kn_lease_store_destroy(ls);
    kn_error_destroy(err);
    return;
  }
  kn_batch_t *b = first_batch(kc);
  KT_CHECK(b != NULL);
  char seq[128];
  uint64_t sub = 99;
  KT_CHECK(kn_consumer_lease_checkpoint(kc, "shardId-0", seq, sizeof seq,
                                        &sub) == 0);
  KT_CHECK_STR(seq, "TRIM_HORIZON");
  KT_CHECK_INT(sub, 0);
  KT_CHECK(kn_consumer_lease_checkpoint(kc, "shardId-0", seq, 4, &sub) == -1);
  KT_CHECK(kn_consumer_lease_checkpoint(kc, "shardId-9", seq, sizeof seq,
                                        &sub) == -1);
  err = kn_consumer_checkpoint_seq(kc, "shardId-0", "12", 3);
  KT_CHECK_MSG(err == NULL, "%s", err ? kn_error_string(err) : "");
  kn_error_destroy(err);
  kn_lease_t l;
  if (table_lease(ls, &l) == 0) {
    KT_CHECK(str_is(l.checkpoint, "12"));
    KT_CHECK_INT(l.checkpoint_subseq, 3);
    kn_lease_clear(&l);
  }
  KT_CHECK(kn_consumer_lease_checkpoint(kc, "shardId-0", seq, sizeof seq,
                                        &sub) == 0);
  KT_CHECK_STR(seq, "12");
  KT_CHECK_INT(sub, 3);
  err = kn_consumer_checkpoint_seq(kc, "shardId-0", "", 0);
  KT_CHECK(err && kn_error_code(err) == KN_ERR__INVALID_ARG);
  kn_error_destroy(err);
  err = kn_consumer_checkpoint_seq(kc, "shardId-9", "12", 0);
  KT_CHECK(err && kn_error_code(err) == KN_ERR__LEASE_LOST);
  kn_error_destroy(err);
  err = kn_consumer_close(kc);
  kn_error_destroy(err);
  KT_CHECK(kn_consumer_lease_checkpoint(kc, "shardId-0", seq, sizeof seq,
                                        &sub) == -1);
  err = kn_consumer_checkpoint_seq(kc, "shardId-0", "13", 0);
  KT_CHECK(err && kn_error_code(err) == KN_ERR__LEASE_LOST);
  kn_error_destroy(err);
  kn_batch_destroy(b);
  kn_consumer_destroy(kc);
  kn_lease_store_destroy(ls);
}

static void test_lease_taken(void) {
  kn_error_t *err = NULL;
  kn_lease_store_t *ls = kn_lease_store_open("memory:taken", NULL, &err);
  KT_CHECK(ls != NULL);
  kn_consumer_t *kc = consumer("taken");
  KT_CHECK(kc != NULL);
  if (!kc || !ls) {
    kn_consumer_destroy(kc);
    kn_lease_store_destroy(ls);
    kn_error_destroy(err);
    return;
  }
  kn_batch_t *b = first_batch(kc);
  KT_CHECK(b != NULL);
  if (!b) goto out;
  /* Another worker takes the lease: the next renewal is refused. */
  kn_lease_t l;
  if (table_lease(ls, &l) == 0) {
    int64_t counter = 0;
    err = ls->ops->take(ls, "shardId-0", l.counter, "w1", "w2", &counter);
    KT_CHECK(err == NULL);
    kn_error_destroy(err);
    kn_lease_clear(&l);
  }
  POLL_UNTIL(kc, lost > 0, 5000);
  KT_CHECK(lost == 1);
  KT_CHECK(lost_reason == KN_ERR__LEASE_LOST);
  KT_CHECK(kn_consumer_fencing_token(kc, "shardId-0") < 0);
  err = kn_consumer_checkpoint(kc, kn_batch_record(b, 0));
  KT_CHECK(err != NULL && kn_error_code(err) == KN_ERR__LEASE_LOST);
  kn_error_destroy(err);
  KT_CHECK(kn_consumer_checkpoint_async(kc, kn_batch_record(b, 0)) ==
           KN_ERR__LEASE_LOST);
  if (table_lease(ls, &l) == 0) {
    KT_CHECK(str_is(l.owner, "w2"));
    kn_lease_clear(&l);
  }
out:
  kn_batch_destroy(b);
  kn_consumer_destroy(kc);
  kn_lease_store_destroy(ls);
}

/* A shard past retention (the stream is there): finished as read, its
 * lease at SHARD_END and released. */
static void test_shard_gone(void) {
  kn_error_t *err = NULL;
  kn_lease_store_t *ls = kn_lease_store_open("memory:gone", NULL, &err);
  KT_CHECK(ls != NULL);
  pthread_mutex_lock(&mu);
  shard_gone = 1;
  pthread_mutex_unlock(&mu);
  kn_consumer_t *kc = consumer("gone");
  KT_CHECK(kc != NULL);
  if (!kc || !ls) {
    pthread_mutex_lock(&mu);
    shard_gone = 0;
    pthread_mutex_unlock(&mu);
    kn_consumer_destroy(kc);
    kn_lease_store_destroy(ls);
    kn_error_destroy(err);
    return;
  }
  kn_lease_t l;
  memset(&l, 0, sizeof(l));
  int64_t end = kn_mono_ms() + 10000;
  int finished = 0;
  while (!finished && kn_mono_ms() < end && !kn_consumer_fatal_error(kc)) {
    kn_batch_destroy(kn_consumer_poll(kc, 50));
    if (table_lease(ls, &l) == 0) {
      finished = kn_lease_is_shard_end(&l) && l.owner == NULL;
      kn_lease_clear(&l);
    }
  }
  KT_CHECK(finished);
  KT_CHECK(kn_consumer_fatal_error(kc) == NULL);
  pthread_mutex_lock(&mu);
  KT_CHECK(n_describe >= 1);
  shard_gone = 0;
  pthread_mutex_unlock(&mu);
  kn_consumer_destroy(kc);
  kn_lease_store_destroy(ls);
}

int main(void) {
  (void)kt_closed_port;
  if (kt_httpd_start(&srv, handle, NULL)) {
    fprintf(stderr, "cannot start the test server\n");
    return 1;
  }
  KT_RUN(test_checkpoints);
  KT_RUN(test_checkpoint_by_value);
  KT_RUN(test_lease_taken);
  KT_RUN(test_shard_gone);
  kt_httpd_stop(&srv);
  kt_aws_cleanup();
  return KT_DONE();
}
