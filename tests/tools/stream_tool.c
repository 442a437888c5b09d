/* stream_tool: an enumerator and N stream readers in one process, the way
 * a stream processor uses them, for tests/integration/test_stream_roles.py.
 *
 *   stream_tool STREAM READERS STATE_FILE OUT_FILE [MAX_RECORDS]
 *
 * Appends every record as a line "shard seq subseq data" to OUT_FILE and
 * keeps the enumerator's and the readers' snapshots in STATE_FILE.  A
 * checkpoint writes the output (fsync), then the state with the output's
 * length (temporary file, fsync, rename): a restart truncates OUT_FILE to
 * that length, so what is in OUT_FILE after a checkpoint is exactly once.
 * The run ends with a checkpoint after MAX_RECORDS records (0: no limit)
 * or once nothing arrived for 4 s with every shard assigned.  A start
 * with another READERS than the state's rescales: readers that are gone
 * hand their shards back from their snapshots, new ones join.
 *
 * STATE_FILE: u32 output length (high 32 bits), u32 (low), u32 count, then
 * count times (u32 length, bytes): the enumerator snapshot, then one reader
 * snapshot per reader ("r0", "r1", ...). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kn/client.h"
#include "kn/enumerator.h"
#include "kn/stream_reader.h"
#include "util/clock.h"

#define MAXR 16

static kn_stream_reader_t *readers[MAXR];
static int n_readers;
static kn_enumerator_t *en;
static FILE *out;
static int64_t checkpoint_id;

__attribute__((noreturn)) static void die(const char *what, const char *why) {
  fprintf(stderr, "stream_tool: %s: %s\n", what, why);
  exit(1);
}

__attribute__((noreturn)) static void die_err(const char *what, kn_error_t *e) {
  die(what, e ? kn_error_string(e) : "?");
}

static void put_u32(FILE *f, uint32_t v) {
  unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 8), (unsigned char)v};
  fwrite(b, 1, 4, f);
}

static int get_u32(FILE *f, uint32_t *v) {
  unsigned char b[4];
  if (fread(b, 1, 4, f) != 4) return -1;
  *v = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) |
       b[3];
  return 0;
}

static int reader_ix(const char *id) {
  return id[0] == 'r' ? atoi(id + 1) : -1;
}

/* Flushes the output, then replaces the state with everything's
 * snapshot; confirms the checkpoint to the readers. */
static void checkpoint(const char *state_path) {
  if (fflush(out) || fsync(fileno(out))) die("output", strerror(errno));
  long len = ftell(out);
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s.tmp", state_path);
  FILE *f = fopen(tmp, "wb");
  if (!f) die(tmp, strerror(errno));
  put_u32(f, (uint32_t)((uint64_t)len >> 32));
  put_u32(f, (uint32_t)len);
  put_u32(f, (uint32_t)(1 + n_readers));
  void *b;
  size_t n;
  kn_error_t *e = kn_enumerator_snapshot(en, &b, &n);
  if (e) die_err("enumerator snapshot", e);
  put_u32(f, (uint32_t)n);
  fwrite(b, 1, n, f);
  free(b);
  checkpoint_id++;
  for (int i = 0; i < n_readers; i++) {
    kn_snapshot_t *s;
    if ((e = kn_stream_reader_snapshot(readers[i], checkpoint_id, &s)))
      die_err("reader snapshot", e);
    if ((e = kn_snapshot_encode(s, &b, &n))) die_err("encode", e);
    kn_snapshot_destroy(s);
    put_u32(f, (uint32_t)n);
    fwrite(b, 1, n, f);
    free(b);
  }
  if (fflush(f) || fsync(fileno(f)) || fclose(f)) die(tmp, strerror(errno));
  if (rename(tmp, state_path)) die(state_path, strerror(errno));
  for (int i = 0; i < n_readers; i++)
    kn_stream_reader_confirm(readers[i], checkpoint_id);
}

/* Restores from the state: returns the output length it covers, or -1
 * when there is none. */
static long restore(const char *state_path, kn_position_t *initial) {
  FILE *f = fopen(state_path, "rb");
  if (!f) {
    en = kn_enumerator_new(initial, KN_ASSIGN_SHARD_COUNT);
    return -1;
  }
  uint32_t hi = 0, lo = 0, count = 0, n = 0;
  if (get_u32(f, &hi) || get_u32(f, &lo) || get_u32(f, &count) || count < 1)
    die(state_path, "bad state");
  unsigned char *b = NULL;
  kn_error_t *e;
  for (uint32_t k = 0; k < count; k++) {
    if (get_u32(f, &n) || !(b = malloc(n ? n : 1)) || fread(b, 1, n, f) != n)
      die(state_path, "bad state");
    if (k == 0) {
      if ((e = kn_enumerator_restore(b, n, KN_ASSIGN_SHARD_COUNT, &en)))
        die_err("enumerator restore", e);
    } else {
      char rid[16];
      snprintf(rid, sizeof(rid), "r%u", k - 1);
      kn_snapshot_t *s;
      if ((e = kn_snapshot_decode(b, n, &s))) die_err("reader restore", e);
      int i = (int)k - 1;
      if (i < n_readers) {
        if (kn_stream_reader_restore(readers[i], s)) die("restore", rid);
      } else {
        /* Rescaled away: its shards go back from its snapshot. */
        kn_enumerator_reader_left(en, rid);
        for (size_t j = 0; j < kn_snapshot_count(s); j++) {
          const kn_position_t *p = kn_snapshot_position(s, j);
          if (p)
            kn_enumerator_shard_returned(en, kn_snapshot_shard(s, j), p);
          else
            kn_enumerator_finished(en, NULL, kn_snapshot_shard(s, j), NULL);
        }
      }
      kn_snapshot_destroy(s);
    }
    free(b);
  }
  fclose(f);
  return (long)(((uint64_t)hi << 32) | lo);
}

int main(int argc, char **argv) {
  if (argc < 5) die("usage", "STREAM READERS STATE_FILE OUT_FILE [MAX]");
  const char *stream = argv[1], *state_path = argv[3];
  n_readers = atoi(argv[2]);
  long max = argc > 5 ? atol(argv[5]) : 0;
  if (n_readers < 1 || n_readers > MAXR) die("usage", "1 to 16 readers");
  kn_conf_t *conf = kn_conf_new();
  char errstr[512];
  if (kn_conf_set(conf, "stream", stream, errstr, sizeof(errstr)))
    die("conf", errstr);
  kn_client_t *client = kn_client_new(conf, errstr, sizeof(errstr));
  if (!client) die("client", errstr);
  for (int i = 0; i < n_readers; i++)
    if (!(readers[i] = kn_stream_reader_new(conf, errstr, sizeof(errstr))))
      die("reader", errstr);
  kn_position_t th;
  kn_position_trim_horizon(&th);
  long covered = restore(state_path, &th);
  if (!en) die("enumerator", "out of memory");
  kn_enumerator_set_sync_interval(en, 1000);
  /* The output as of the last checkpoint: what came after is read again. */
  int fd = open(argv[4], O_RDWR | O_CREAT, 0644);
  if (fd < 0 || ftruncate(fd, covered < 0 ? 0 : covered) ||
      lseek(fd, 0, SEEK_END) < 0 || !(out = fdopen(fd, "a")))
    die(argv[4], strerror(errno));
  for (int i = 0; i < n_readers; i++) {
    char rid[16];
    snprintf(rid, sizeof(rid), "r%d", i);
    kn_enumerator_reader_joined(en, rid);
  }

  long total = 0, since_ckpt = 0;
  int64_t last_record = kn_mono_ms();
  for (;;) {
    int64_t now = kn_mono_ms();
    if (kn_enumerator_due_ms(en, now) <= now) {
      kn_error_t *e = kn_enumerator_sync(en, client, stream, now);
      if (e) die_err("listing", e);
    }
    kn_enum_action_t a;
    while (kn_enumerator_next_action(en, &a)) {
      int i = reader_ix(a.reader_id);
      if (i < 0 || i >= n_readers) die("action", a.reader_id);
      if (a.kind == KN_ENUM_ASSIGN) {
        kn_err_t err =
            kn_stream_reader_add_shard(readers[i], a.shard_id, &a.start);
        if (err && err != KN_ERR__STATE) die("assign", a.shard_id);
      } else {
        /* A finished shard is not handed back: its report answers. */
        kn_position_t p;
        if (!kn_stream_reader_remove_shard(readers[i], a.shard_id, &p))
          kn_enumerator_shard_returned(en, a.shard_id, &p);
      }
    }
    int got = 0;
    for (int i = 0; i < n_readers; i++) {
      kn_batch_t *b = kn_stream_reader_poll(readers[i], 20);
      const kn_error_t *fe = kn_stream_reader_fatal_error(readers[i]);
      if (fe) die("reader", kn_error_string(fe));
      for (size_t k = 0; b && k < kn_batch_count(b); k++) {
        const kn_record_t *r = kn_batch_record(b, k);
        size_t len;
        const char *d = kn_record_data(r, &len);
        fprintf(out, "%s %s %llu %.*s\n", kn_batch_shard_id(b),
                kn_record_sequence_number(r),
                (unsigned long long)kn_record_subsequence_number(r), (int)len,
                d);
        got = 1;
        total++;
        since_ckpt++;
      }
      kn_batch_destroy(b);
      char sid[256], rid[16];
      snprintf(rid, sizeof(rid), "r%d", i);
      while (kn_stream_reader_take_finished(readers[i], sid, sizeof(sid)))
        kn_enumerator_finished(en, rid, sid, NULL);
      if (max && total >= max) break;
    }
    if (got) last_record = kn_mono_ms();
    if (since_ckpt >= 50) {
      checkpoint(state_path);
      since_ckpt = 0;
    }
    if ((max && total >= max) || kn_mono_ms() - last_record > 4000) break;
  }
  checkpoint(state_path);
  fprintf(stderr, "stream_tool: %ld records\n", total);
  fclose(out);
  for (int i = 0; i < n_readers; i++) kn_stream_reader_destroy(readers[i]);
  kn_enumerator_destroy(en);
  kn_client_destroy(client);
  kn_conf_destroy(conf);
  return 0;
}
