/* Drives kn_producer_t for the integration tests, and reads a stream back.
 *
 *   producer_tool produce STREAM N [--keys K] [--rate R] [--size B]
 *                 [--pause-at P] [-X prop=value]...
 *     sends N records (key "key-<i mod K>", data "<i>" padded to B bytes
 *     with '.'), at most R per second when given, then closes the producer;
 *     with --pause-at, once the first P are delivered prints {"paused":P}
 *     (flushed) and reads a line from stdin before it sends the rest, so
 *     that a test can change the stream at a known point;
 *     prints one JSON line per delivery report:
 *       {"i":I,"key":..,"shard":..,"seq":..,"subseq":..,"agg":bool,
 *        "attempts":A}  or  {"i":I,"key":..,"error":NAME,"message":..}
 *     and a last line {"summary":{"delivered":..,"failed":..,"retries":..,
 *     "calls":..}}.  Exit 0 when every record was stored, 5 otherwise.
 *   producer_tool read STREAM
 *     reads every shard (deaggregating) until caught up; one JSON line per
 *     user record: {"shard":..,"seq":..,"subseq":..,"key":..,"data":..}.
 *
 * Endpoint, region and credentials come from the environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kn/consumer.h"
#include "kn/producer.h"
#include "util/buf.h"
#include "util/clock.h"

static void put_json_str(FILE *f, const char *s, size_t n) {
  kn_buf_t b = KN_BUF_INIT;
  kn_buf_append_json_str(&b, s, n);
  fwrite(b.p, 1, b.len, f);
  kn_buf_free(&b);
}

static void on_dr(kn_producer_t *kp, const kn_msg_t *m, void *opaque) {
  (void)kp;
  (void)opaque;
  size_t i = (size_t)(uintptr_t)kn_msg_opaque(m);
  const char *key = kn_msg_partition_key(m);
  printf("{\"i\":%zu,\"key\":", i);
  put_json_str(stdout, key, strlen(key));
  const kn_error_t *e = kn_msg_error(m);
  if (e) {
    printf(",\"error\":\"%s\",\"message\":", kn_err2name(kn_error_code(e)));
    put_json_str(stdout, kn_error_string(e), strlen(kn_error_string(e)));
  } else {
    printf(",\"shard\":\"%s\",\"seq\":\"%s\",\"subseq\":%llu,\"agg\":%s",
           kn_msg_shard_id(m), kn_msg_sequence_number(m),
           (unsigned long long)kn_msg_subsequence_number(m),
           kn_msg_aggregated(m) ? "true" : "false");
  }
  printf(",\"attempts\":%d}\n", kn_msg_attempts(m));
}

static int set_prop(kn_conf_t *c, const char *kv) {
  char name[256], err[256];
  const char *eq = strchr(kv, '=');
  if (!eq || (size_t)(eq - kv) >= sizeof(name)) {
    fprintf(stderr, "-X wants prop=value\n");
    return -1;
  }
  memcpy(name, kv, (size_t)(eq - kv));
  name[eq - kv] = '\0';
  if (kn_conf_set(c, name, eq + 1, err, sizeof(err))) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  return 0;
}

static int produce(int argc, char **argv) {
  if (argc < 4) return 2;
  kn_conf_t *c = kn_conf_new();
  kn_conf_set(c, "stream", argv[2], NULL, 0);
  long n = atol(argv[3]), keys = 0, rate = 0, size = 0, pause_at = -1;
  for (int i = 4; i < argc; i++) {
    if (!strcmp(argv[i], "--keys") && i + 1 < argc)
      keys = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
      rate = atol(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc)
      size = atol(argv[++i]);
    else if (!strcmp(argv[i], "--pause-at") && i + 1 < argc)
      pause_at = atol(argv[++i]);
    else if (!strcmp(argv[i], "-X") && i + 1 < argc) {
      if (set_prop(c, argv[++i])) return 2;
    } else {
      fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  kn_conf_set_delivery_cb(c, on_dr, NULL);
  char err[512];
  kn_producer_t *kp = kn_producer_new(c, err, sizeof(err));
  kn_conf_destroy(c);
  if (!kp) {
    fprintf(stderr, "producer: %s\n", err);
    return 1;
  }
  char *data = malloc((size_t)size + 32);
  int64_t start = kn_mono_ms();
  for (long i = 0; i < n; i++) {
    if (i == pause_at) {
      while (kn_producer_counter(kp, KN_PC_DELIVERED) +
                 kn_producer_counter(kp, KN_PC_FAILED) <
             (unsigned long long)pause_at)
        kn_producer_poll(kp, 100);
      printf("{\"paused\":%ld}\n", pause_at);
      fflush(stdout);
      char line[16];
      if (!fgets(line, sizeof(line), stdin)) break;
      start = kn_mono_ms() - (rate > 0 ? i * 1000 / rate : 0); /* no burst */
    }
    if (rate > 0) {
      int64_t due = start + i * 1000 / rate;
      while (kn_mono_ms() < due)
        kn_producer_poll(kp, (int)(due - kn_mono_ms()));
    }
    char key[64];
    snprintf(key, sizeof(key), "key-%ld", keys > 0 ? i % keys : i);
    int len = snprintf(data, 32, "%ld", i);
    if (len < size) {
      memset(data + len, '.', (size_t)(size - len));
      len = (int)size;
    }
    kn_err_t rc;
    while ((rc = kn_producer_send(kp, key, NULL, data, (size_t)len, 0,
                                  (void *)(uintptr_t)i)) == KN_ERR__QUEUE_FULL)
      kn_producer_poll(kp, 10);
    if (rc) {
      fprintf(stderr, "send: %s\n", kn_err2str(rc));
      return 1;
    }
    kn_producer_poll(kp, 0);
  }
  free(data);
  kn_error_t *e = kn_producer_close(kp);
  if (e) fprintf(stderr, "close: %s\n", kn_error_string(e));
  kn_error_destroy(e);
  unsigned long long ok = kn_producer_counter(kp, KN_PC_DELIVERED),
                     failed = kn_producer_counter(kp, KN_PC_FAILED);
  printf(
      "{\"summary\":{\"delivered\":%llu,\"failed\":%llu,\"retries\":%llu,"
      "\"calls\":%llu,\"refreshes\":%llu}}\n",
      ok, failed, (unsigned long long)kn_producer_counter(kp, KN_PC_RETRIES),
      (unsigned long long)kn_producer_counter(kp, KN_PC_CALLS),
      (unsigned long long)kn_producer_counter(kp, KN_PC_MAP_REFRESHES));
  kn_producer_destroy(kp);
  return failed || ok != (unsigned long long)n ? 5 : 0;
}

static int read_stream(int argc, char **argv) {
  if (argc < 3) return 2;
  kn_conf_t *c = kn_conf_new();
  kn_conf_set(c, "stream", argv[2], NULL, 0);
  kn_conf_set(c, "poll.idle.ms", "50", NULL, 0);
  for (int i = 3; i + 1 < argc; i += 2)
    if (!strcmp(argv[i], "-X") && set_prop(c, argv[i + 1])) return 2;
  char err[512];
  kn_consumer_t *kc = kn_consumer_new(c, err, sizeof(err));
  kn_conf_destroy(c);
  if (!kc) {
    fprintf(stderr, "consumer: %s\n", err);
    return 1;
  }
  int idle = 0;
  int64_t end = kn_mono_ms() + 120000;
  while (kn_mono_ms() < end) {
    kn_batch_t *b = kn_consumer_poll(kc, 200);
    if (kn_consumer_fatal_error(kc)) {
      fprintf(stderr, "consumer: %s\n",
              kn_error_string(kn_consumer_fatal_error(kc)));
      break;
    }
    if (!b) {
      if (kn_consumer_caught_up(kc) && ++idle >= 3) break;
      continue;
    }
    idle = 0;
    for (size_t i = 0; i < kn_batch_count(b); i++) {
      const kn_record_t *r = kn_batch_record(b, i);
      size_t len;
      const char *d = kn_record_data(r, &len);
      printf("{\"shard\":\"%s\",\"seq\":\"%s\",\"subseq\":%llu,\"key\":",
             kn_batch_shard_id(b), kn_record_sequence_number(r),
             (unsigned long long)kn_record_subsequence_number(r));
      put_json_str(stdout, kn_record_partition_key(r),
                   strlen(kn_record_partition_key(r)));
      printf(",\"data\":");
      put_json_str(stdout, d, len);
      printf("}\n");
    }
    kn_batch_destroy(b);
  }
  kn_error_destroy(kn_consumer_close(kc));
  kn_consumer_destroy(kc);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  if (argc >= 2 && !strcmp(argv[1], "produce")) return produce(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "read")) return read_stream(argc, argv);
  fprintf(stderr,
          "usage: producer_tool produce STREAM N [options] | read STREAM\n");
  return 2;
}
