/* bench_roles_read consumer|reader STREAM RECORDS: reads RECORDS records
 * of STREAM and exits, printing "records payload_bytes".  consumer: a
 * kn_consumer_t without a lease store (what `kncat consume` runs);
 * reader: an enumerator and one kn_stream_reader_t (the stream-processor
 * roles).  Driven by bench_roles.py, which measures the CPU of each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn/consumer.h"
#include "kn/enumerator.h"
#include "kn/stream_reader.h"
#include "util/clock.h"

static void count(kn_batch_t *b, long *n, long long *bytes) {
  for (size_t i = 0; b && i < kn_batch_count(b); i++) {
    size_t len;
    kn_record_data(kn_batch_record(b, i), &len);
    *bytes += (long long)len;
    (*n)++;
  }
  kn_batch_destroy(b);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: bench_roles_read consumer|reader STREAM N\n");
    return 2;
  }
  long want = atol(argv[3]), n = 0;
  long long bytes = 0;
  char errstr[512];
  kn_conf_t *conf = kn_conf_new();
  if (kn_conf_set(conf, "stream", argv[2], errstr, sizeof(errstr))) {
    fprintf(stderr, "%s\n", errstr);
    return 1;
  }
  if (strcmp(argv[1], "consumer") == 0) {
    kn_consumer_t *kc = kn_consumer_new(conf, errstr, sizeof(errstr));
    if (!kc) {
      fprintf(stderr, "%s\n", errstr);
      return 1;
    }
    while (n < want && !kn_consumer_fatal_error(kc))
      count(kn_consumer_poll(kc, 100), &n, &bytes);
    kn_consumer_destroy(kc);
  } else {
    kn_client_t *client = kn_client_new(conf, errstr, sizeof(errstr));
    kn_stream_reader_t *r =
        client ? kn_stream_reader_new(conf, errstr, sizeof(errstr)) : NULL;
    kn_enumerator_t *en = kn_enumerator_new(NULL, KN_ASSIGN_HASH_RANGE);
    if (!r || !en || kn_enumerator_reader_joined(en, "r")) {
      fprintf(stderr, "%s\n", errstr);
      return 1;
    }
    while (n < want && !kn_stream_reader_fatal_error(r)) {
      int64_t now = kn_mono_ms();
      if (kn_enumerator_due_ms(en, now) <= now) {
        kn_error_t *e = kn_enumerator_sync(en, client, argv[2], now);
        if (e) {
          fprintf(stderr, "%s\n", kn_error_string(e));
          return 1;
        }
      }
      kn_enum_action_t a;
      while (kn_enumerator_next_action(en, &a))
        if (a.kind == KN_ENUM_ASSIGN)
          kn_stream_reader_add_shard(r, a.shard_id, &a.start);
      count(kn_stream_reader_poll(r, 100), &n, &bytes);
      char sid[256];
      while (kn_stream_reader_take_finished(r, sid, sizeof(sid)))
        kn_enumerator_finished(en, "r", sid, NULL);
    }
    kn_stream_reader_destroy(r);
    kn_enumerator_destroy(en);
    kn_client_destroy(client);
  }
  kn_conf_destroy(conf);
  printf("%ld %lld\n", n, bytes);
  return n >= want ? 0 : 1;
}
