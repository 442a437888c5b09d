/* kn_producer_t without a server (its endpoint refuses connections):
 * argument checks, queue-full backpressure, time-to-live reports, flush
 * time-outs, reports at destroy, and the ownership flags. */
#include <stdlib.h>
#include <string.h>

#include "kn/producer.h"
#include "kt.h"

typedef struct {
  int n, failed, timed_out, destroyed;
  int opaque_ok;
} seen_t;

static void on_dr(kn_producer_t *kp, const kn_msg_t *m, void *opaque) {
  (void)kp;
  seen_t *s = opaque;
  s->n++;
  const kn_error_t *e = kn_msg_error(m);
  if (e) {
    s->failed++;
    s->timed_out += kn_error_code(e) == KN_ERR__MSG_TIMED_OUT;
    s->destroyed += kn_error_code(e) == KN_ERR__DESTROY;
  }
  s->opaque_ok += kn_msg_opaque(m) == (void *)s;
}

static kn_conf_t *conf_for(seen_t *seen, const char *ttl) {
  kn_conf_t *c = kn_conf_new();
  char err[256];
  const char *props[][2] = {
      {"stream", "s"},
      {"endpoint", "http://127.0.0.1:1"},
      {"region", "us-east-1"},
      {"aws.access.key.id", "test"},
      {"aws.secret.access.key", "test"},
      {"retry.max.attempts", "1"},
      {"http.connect.timeout.ms", "200"},
      {"message.timeout.ms", ttl},
      {"queue.max.records", "5"},
      {"log.level", "2"},
  };
  for (size_t i = 0; i < sizeof(props) / sizeof(props[0]); i++)
    if (kn_conf_set(c, props[i][0], props[i][1], err, sizeof(err)))
      fprintf(stderr, "%s\n", err);
  kn_conf_set_delivery_cb(c, on_dr, seen);
  return c;
}

/* A producer on conf_for's configuration (copied: the conf goes at
 * once); NULL (checked) if refused. */
static kn_producer_t *producer_for(seen_t *seen, const char *timeout_ms) {
  kn_conf_t *c = conf_for(seen, timeout_ms);
  char err[256];
  kn_producer_t *kp = kn_producer_new(c, err, sizeof(err));
  KT_CHECK_MSG(kp != NULL, "%s", err);
  kn_conf_destroy(c);
  return kp;
}

static void test_args_and_queue_full(void) {
  seen_t seen = {0};
  kn_producer_t *kp = producer_for(&seen, "60000");
  if (!kp) return;
  static char big[1024 * 1024];
  KT_CHECK_INT(kn_producer_send(kp, "", NULL, "x", 1, 0, NULL),
               KN_ERR__INVALID_ARG);
  KT_CHECK_INT(kn_producer_send(kp, "\xff", NULL, "x", 1, 0, NULL),
               KN_ERR__INVALID_ARG);
  char longkey[300];
  memset(longkey, 'k', sizeof(longkey) - 1);
  longkey[sizeof(longkey) - 1] = '\0';
  KT_CHECK_INT(kn_producer_send(kp, longkey, NULL, "x", 1, 0, NULL),
               KN_ERR__INVALID_ARG);
  longkey[256] = '\0';
  KT_CHECK_INT(kn_producer_send(kp, longkey, NULL, "x", 1, 0, NULL),
               KN_ERR_NO_ERROR);
  KT_CHECK_INT(kn_producer_send(kp, "k", "12x", "x", 1, 0, NULL),
               KN_ERR__INVALID_ARG);
  KT_CHECK_INT(
      kn_producer_send(kp, "k", "340282366920938463463374607431768211456", "x",
                       1, 0, NULL),
      KN_ERR__INVALID_ARG);
  /* 10 MiB, the most any stream takes, counts the key. */
  char *huge = malloc(10 * 1024 * 1024);
  KT_CHECK_INT(kn_producer_send(kp, "k", NULL, huge, 10 * 1024 * 1024, 0, NULL),
               KN_ERR__INVALID_ARG);
  free(huge);
  KT_CHECK_INT(
      kn_producer_send(kp, "k", "340282366920938463463374607431768211455", big,
                       sizeof(big) - 1, KN_MSG_F_NOCOPY, NULL),
      KN_ERR_NO_ERROR);
  char *owned = strdup("owned");
  kn_err_t taken =
      kn_producer_send(kp, "k", NULL, owned, 5, KN_MSG_F_FREE, NULL);
  KT_CHECK_INT(taken, KN_ERR_NO_ERROR);
  if (taken != KN_ERR_NO_ERROR) free(owned); /* a failed send leaves it ours */
  KT_CHECK_INT(kn_producer_send(kp, "k", NULL, "x", 1, 0, NULL),
               KN_ERR_NO_ERROR);
  KT_CHECK_INT(kn_producer_send(kp, "k", NULL, "x", 1, 0, NULL),
               KN_ERR_NO_ERROR);
  /* Five outstanding: the sixth is refused, and the caller keeps data. */
  char *mine = strdup("mine");
  kn_err_t sent = kn_producer_send(kp, "k", NULL, mine, 4, KN_MSG_F_FREE, NULL);
  KT_CHECK_INT(sent, KN_ERR__QUEUE_FULL);
  if (sent != KN_ERR_NO_ERROR) free(mine); /* else the producer's (torture) */
  KT_CHECK_INT(kn_producer_outq_len(kp), 5);
  KT_CHECK_INT(kn_producer_counter(kp, KN_PC_SENT), 5);
  /* Nothing can be stored: flush times out. */
  KT_CHECK_INT(kn_producer_flush(kp, 300), KN_ERR__TIMED_OUT);
  KT_CHECK_INT(seen.n, 0);
  /* Destroy without close reports everything. */
  kn_producer_destroy(kp);
  KT_CHECK_INT(seen.n, 5);
  KT_CHECK_INT(seen.destroyed, 5);
}

/* Over the stream's limit (here 1 MiB: DescribeStreamSummary cannot be
 * asked, so the default): refused at send once the stream is described,
 * else in the record's report, with the limit named. */
static void test_record_over_the_stream_limit(void) {
  seen_t seen = {0};
  kn_producer_t *kp = producer_for(&seen, "60000");
  if (!kp) return;
  static char big[1024 * 1024];
  seen_t *s = &seen;
  kn_err_t rc = kn_producer_send(kp, "k", NULL, big, sizeof(big), 0, s);
  if (rc == KN_ERR_NO_ERROR) {
    for (int i = 0; i < 100 && !seen.n; i++) kn_producer_poll(kp, 100);
    KT_CHECK_INT(seen.n, 1);
    KT_CHECK_INT(seen.failed, 1);
    KT_CHECK_INT(seen.timed_out + seen.destroyed, 0);
  } else {
    KT_CHECK_INT(rc, KN_ERR__INVALID_ARG);
  }
  /* A record without a key needs an AUTO stream. */
  rc = kn_producer_send(kp, NULL, NULL, "x", 1, 0, s);
  if (rc == KN_ERR_NO_ERROR) {
    int before = seen.n;
    for (int i = 0; i < 100 && seen.n == before; i++) kn_producer_poll(kp, 100);
    KT_CHECK_INT(seen.failed, before + 1);
  } else {
    KT_CHECK_INT(rc, KN_ERR__INVALID_ARG);
  }
  kn_producer_destroy(kp);
}

static void test_ttl_reports(void) {
  seen_t seen = {0};
  kn_producer_t *kp = producer_for(&seen, "300");
  if (!kp) return;
  for (int i = 0; i < 3; i++)
    KT_CHECK_INT(kn_producer_send(kp, "k", NULL, "x", 1, 0, NULL),
                 KN_ERR_NO_ERROR);
  int served = 0;
  for (int i = 0; i < 50 && served < 3; i++)
    served += kn_producer_poll(kp, 100);
  KT_CHECK_INT(served, 3);
  KT_CHECK_INT(seen.timed_out, 3);
  KT_CHECK_INT(kn_producer_counter(kp, KN_PC_FAILED), 3);
  KT_CHECK_INT(kn_producer_outq_len(kp), 0);
  /* Room again. */
  KT_CHECK_INT(kn_producer_send(kp, "k", NULL, "x", 1, 0, &seen),
               KN_ERR_NO_ERROR);
  kn_error_t *e = kn_producer_close(kp);
  KT_CHECK(e != NULL); /* the shard map never loaded */
  kn_error_destroy(e);
  KT_CHECK_INT(seen.n, 4);
  KT_CHECK_INT(seen.opaque_ok, 1);
  KT_CHECK_INT(kn_producer_send(kp, "k", NULL, "x", 1, 0, NULL), KN_ERR__STATE);
  kn_producer_destroy(kp);
}

static void test_new_needs_stream(void) {
  kn_conf_t *c = kn_conf_new();
  char err[256];
  KT_CHECK(kn_producer_new(c, err, sizeof(err)) == NULL);
  KT_CHECK(strstr(err, "stream") != NULL);
  kn_conf_destroy(c);
  /* NULL handles are accepted everywhere. */
  kn_producer_destroy(NULL);
  KT_CHECK_INT(kn_producer_outq_len(NULL), 0);
  KT_CHECK_INT(kn_producer_poll(NULL, 0), 0);
  KT_CHECK_INT(kn_producer_flush(NULL, 0), KN_ERR__INVALID_ARG);
  KT_CHECK(kn_producer_close(NULL) == NULL);
  KT_CHECK_INT(kn_producer_counter(NULL, KN_PC_SENT), 0);
}

int main(void) {
  KT_RUN(test_new_needs_stream);
  KT_RUN(test_args_and_queue_full);
  KT_RUN(test_record_over_the_stream_limit);
  KT_RUN(test_ttl_reports);
  return KT_DONE();
}
