/* trim_tool: a stream reader restored from a snapshot whose position may
 * be older than the trim horizon, for tests/integration/test_stream_roles.py.
 *
 *   trim_tool STREAM SHARD start|N
 *
 * "start": the snapshot holds SHARD after the shard's starting sequence
 * number (ListShards), which is older than every record the shard keeps:
 * what a position that aged out of the retention period looks like to
 * the reader (the local servers keep records for a day at least).  N: after
 * the N-th record of the shard (1-based), a position the stream keeps.
 * Reads SHARD until 3 s pass without a record, then prints
 * "records COUNT first DATA" on stdout, and the reader's warnings as
 * "log: MESSAGE" lines before it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn/client.h"
#include "kn/stream_reader.h"
#include "util/clock.h"

__attribute__((noreturn)) static void die(const char *what, const char *why) {
  fprintf(stderr, "trim_tool: %s: %s\n", what, why);
  exit(1);
}

static void on_log(void *opaque, int level, const char *facility,
                   const char *message) {
  (void)opaque;
  (void)facility;
  if (level <= 4) printf("log: %s\n", message);
  fflush(stdout);
}

/* The sequence number of the n-th record of shard (1-based). */
static char *nth_seq(kn_client_t *client, const char *stream, const char *shard,
                     int n) {
  char *it = NULL;
  kn_batch_t *b = NULL;
  kn_error_t *e = kn_get_shard_iterator(client, stream, shard,
                                        KN_ITER_TRIM_HORIZON, NULL, 0, &it);
  if (e || (e = kn_get_records(client, it, n, &b)))
    die("GetRecords", kn_error_string(e));
  free(it);
  if (kn_batch_count(b) < (size_t)n) die("GetRecords", "too few records");
  char *seq = strdup(kn_record_sequence_number(kn_batch_record(b, n - 1)));
  kn_batch_destroy(b);
  return seq;
}

int main(int argc, char **argv) {
  if (argc != 4) die("usage", "STREAM SHARD start|N");
  const char *stream = argv[1], *shard = argv[2];
  char errstr[512];
  kn_conf_t *conf = kn_conf_new();
  if (kn_conf_set(conf, "stream", stream, errstr, sizeof(errstr)))
    die("conf", errstr);
  kn_conf_set_log_cb(conf, on_log, NULL);
  kn_client_t *client = kn_client_new(conf, errstr, sizeof(errstr));
  if (!client) die("client", errstr);

  char *seq;
  if (!strcmp(argv[3], "start")) {
    kn_shard_list_t *list;
    kn_error_t *e =
        kn_list_shards(client, stream, KN_SHARD_FILTER_NONE, NULL, 0, &list);
    if (e) die("ListShards", kn_error_string(e));
    const kn_shard_t *s = kn_shard_list_find(list, shard);
    if (!s || !kn_shard_sequence_start(s)) die(shard, "not listed");
    seq = strdup(kn_shard_sequence_start(s));
    kn_shard_list_destroy(list);
  } else {
    seq = nth_seq(client, stream, shard, atoi(argv[3]));
  }
  kn_position_t pos;
  kn_snapshot_t *snap = kn_snapshot_new();
  if (kn_position_after(&pos, seq, 0) ||
      kn_snapshot_set_position(snap, shard, &pos))
    die("position", seq);
  free(seq);

  kn_stream_reader_t *r = kn_stream_reader_new(conf, errstr, sizeof(errstr));
  if (!r) die("reader", errstr);
  if (kn_stream_reader_restore(r, snap)) die("restore", shard);
  kn_snapshot_destroy(snap);
  long count = 0;
  char first[256] = "";
  int64_t last = kn_mono_ms();
  while (kn_mono_ms() - last < 3000) {
    kn_batch_t *b = kn_stream_reader_poll(r, 100);
    const kn_error_t *fe = kn_stream_reader_fatal_error(r);
    if (fe) die("reader", kn_error_string(fe));
    for (size_t i = 0; b && i < kn_batch_count(b); i++) {
      size_t len;
      const char *d = kn_record_data(kn_batch_record(b, i), &len);
      if (!count++)
        snprintf(first, sizeof(first), "%.*s", (int)(len < 255 ? len : 255), d);
      last = kn_mono_ms();
    }
    kn_batch_destroy(b);
  }
  printf("records %ld first %s\n", count, first);
  kn_stream_reader_destroy(r);
  kn_client_destroy(client);
  kn_conf_destroy(conf);
  return 0;
}
