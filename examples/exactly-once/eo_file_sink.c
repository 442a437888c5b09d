/* eo_file_sink: exactly-once into files, without a database (README.md).
 *
 *   eo_file_sink STREAM DIR
 *
 * One enumerator and one reader in one process read every shard of
 * STREAM, parents before children.  Every second (a checkpoint N), the
 * records read since the last one go to DIR/part-N, then the state (N,
 * the enumerator's snapshot and the reader's) to DIR/state; each file is
 * written to a temporary name, synced and renamed over, so either is
 * whole or absent.  The state names the last part it covers: a restart
 * deletes the parts written after it (their records are read again) and
 * resumes from its snapshots.  The parts in DIR then hold every record
 * exactly once.  Exits 0 after 5 s without a record, or on SIGTERM.
 *
 * DIR/state: "eo-state 1\n", "N\n", then the enumerator's snapshot and
 * the reader's, each as "LENGTH\n" and that many bytes. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, fileno, fsync */

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kn/client.h"
#include "kn/conf.h"
#include "kn/enumerator.h"
#include "kn/stream_reader.h"

#define READER "r0"

static volatile sig_atomic_t stopping;

static void on_signal(int sig) {
  (void)sig;
  stopping = 1;
}

__attribute__((noreturn)) static void die(const char *what, const char *why) {
  fprintf(stderr, "eo_file_sink: %s: %s\n", what, why);
  exit(1);
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes n bytes to path through path.tmp, fsync and rename. */
static void write_atomic(const char *path, const void *p, size_t n) {
  char tmp[4200];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fflush(f) || fsync(fileno(f)) ||
      fclose(f) || rename(tmp, path))
    die(path, strerror(errno));
}

static void append(char **buf, size_t *len, const void *p, size_t n) {
  if (!(*buf = realloc(*buf, *len + n + 1))) die("buffer", "out of memory");
  memcpy(*buf + *len, p, n);
  *len += n;
}

static void append_blob(char **buf, size_t *len, const void *p, size_t n) {
  char head[32];
  int k = snprintf(head, sizeof(head), "%zu\n", n);
  append(buf, len, head, (size_t)k);
  append(buf, len, p, n);
}

/* Reads DIR/state, if there is one: restores both roles and returns the
 * last checkpoint, or 0. */
static long restore(const char *path, kn_enumerator_t **en,
                    kn_stream_reader_t *rd) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno != ENOENT) die(path, strerror(errno));
    return 0;
  }
  long n = 0;
  size_t lens[2];
  unsigned char *blobs[2] = {NULL, NULL};
  if (fscanf(f, "eo-state 1\n%ld\n", &n) != 1) die(path, "not a state file");
  for (int i = 0; i < 2; i++) {
    if (fscanf(f, "%zu", &lens[i]) != 1 || fgetc(f) != '\n' ||
        !(blobs[i] = malloc(lens[i] + 1)) ||
        fread(blobs[i], 1, lens[i], f) != lens[i])
      die(path, "not a state file");
  }
  fclose(f);
  kn_error_t *e =
      kn_enumerator_restore(blobs[0], lens[0], KN_ASSIGN_SHARD_COUNT, en);
  kn_snapshot_t *s = NULL;
  if (e || (e = kn_snapshot_decode(blobs[1], lens[1], &s)))
    die(path, kn_error_string(e));
  if (kn_stream_reader_restore(rd, s)) die(path, "restore");
  kn_snapshot_destroy(s);
  free(blobs[0]);
  free(blobs[1]);
  return n;
}

/* Deletes the parts after checkpoint n: the state does not cover them. */
static void drop_parts_after(const char *dir, long n) {
  DIR *d = opendir(dir);
  if (!d) die(dir, strerror(errno));
  struct dirent *ent;
  while ((ent = readdir(d))) {
    long k;
    char path[4200];
    if (sscanf(ent->d_name, "part-%ld", &k) == 1 && k > n) {
      snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
      if (unlink(path)) die(path, strerror(errno));
    }
  }
  closedir(d);
}

/* The part, then the state; then the reader may forget the shards it
 * finished before this checkpoint. */
static void checkpoint(const char *dir, long n, const char *rows, size_t len,
                       kn_enumerator_t *en, kn_stream_reader_t *rd) {
  char path[4200];
  snprintf(path, sizeof(path), "%s/part-%08ld", dir, n);
  write_atomic(path, rows ? rows : "", len);
  char *state = NULL;
  size_t slen = 0, bn;
  char head[64];
  int k = snprintf(head, sizeof(head), "eo-state 1\n%ld\n", n);
  append(&state, &slen, head, (size_t)k);
  void *b;
  kn_error_t *e = kn_enumerator_snapshot(en, &b, &bn);
  if (e) die("enumerator snapshot", kn_error_string(e));
  append_blob(&state, &slen, b, bn);
  free(b);
  kn_snapshot_t *s;
  if ((e = kn_stream_reader_snapshot(rd, n, &s)) ||
      (e = kn_snapshot_encode(s, &b, &bn)))
    die("reader snapshot", kn_error_string(e));
  kn_snapshot_destroy(s);
  append_blob(&state, &slen, b, bn);
  free(b);
  snprintf(path, sizeof(path), "%s/state", dir);
  write_atomic(path, state, slen);
  free(state);
  kn_stream_reader_confirm(rd, n);
}

int main(int argc, char **argv) {
  if (argc != 3) die("usage", "STREAM DIR");
  const char *stream = argv[1], *dir = argv[2];
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  kn_conf_t *conf = kn_conf_new();
  char errstr[512], path[4200];
  if (!conf || kn_conf_set(conf, "stream", stream, errstr, sizeof(errstr)))
    die("conf", conf ? errstr : "out of memory");
  kn_client_t *client = kn_client_new(conf, errstr, sizeof(errstr));
  kn_stream_reader_t *rd = kn_stream_reader_new(conf, errstr, sizeof(errstr));
  if (!client || !rd) die("setup", errstr);
  kn_conf_destroy(conf);

  kn_enumerator_t *en = NULL;
  snprintf(path, sizeof(path), "%s/state", dir);
  long n = restore(path, &en, rd);
  drop_parts_after(dir, n);
  if (!en) {
    kn_position_t th;
    kn_position_trim_horizon(&th);
    if (!(en = kn_enumerator_new(&th, KN_ASSIGN_SHARD_COUNT)))
      die("enumerator", "out of memory");
  }
  kn_enumerator_set_sync_interval(en, 1000);
  kn_enumerator_reader_joined(en, READER);

  char *rows = NULL;
  size_t len = 0;
  int64_t last_ckpt = mono_ms(), last_record = last_ckpt;
  while (!stopping && mono_ms() - last_record < 5000) {
    int64_t now = mono_ms();
    if (kn_enumerator_due_ms(en, now) <= now) {
      kn_error_t *e = kn_enumerator_sync(en, client, stream, now);
      if (e) die("listing", kn_error_string(e));
    }
    kn_enum_action_t a;
    while (kn_enumerator_next_action(en, &a))
      if (a.kind == KN_ENUM_ASSIGN &&
          kn_stream_reader_add_shard(rd, a.shard_id, &a.start) == KN_ERR__NOMEM)
        die("assign", "out of memory");
    kn_batch_t *b = kn_stream_reader_poll(rd, 100);
    const kn_error_t *fe = kn_stream_reader_fatal_error(rd);
    if (fe) die("reading", kn_error_string(fe));
    for (size_t k = 0; b && k < kn_batch_count(b); k++) {
      const kn_record_t *r = kn_batch_record(b, k);
      size_t dlen;
      const char *d = kn_record_data(r, &dlen);
      append(&rows, &len, d, dlen);
      append(&rows, &len, "\n", 1);
      last_record = mono_ms();
    }
    kn_batch_destroy(b);
    char sid[256];
    while (kn_stream_reader_take_finished(rd, sid, sizeof(sid)))
      kn_enumerator_finished(en, READER, sid, NULL);
    if (mono_ms() - last_ckpt >= 1000) {
      checkpoint(dir, ++n, rows, len, en, rd);
      len = 0;
      last_ckpt = mono_ms();
    }
  }
  checkpoint(dir, ++n, rows, len, en, rd);
  free(rows);
  kn_stream_reader_destroy(rd);
  kn_enumerator_destroy(en);
  kn_client_destroy(client);
  return 0;
}
