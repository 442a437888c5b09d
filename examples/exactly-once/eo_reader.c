/* eo_reader: one reader of the exactly-once example (README.md).
 *
 *   eo_reader CONNINFO STREAM READER_ID
 *
 * Reads the shards the enumerator assigns to READER_ID (rows of
 * eo_assignments) and commits, every 300 ms, one transaction that holds
 * the records read since the last one (eo_records), the reader's
 * snapshot (eo_reader_state), its reports to the enumerator (eo_events:
 * shards finished, shards handed back) and the assignments it has taken
 * in (eo_assignments.done).  Only then is the checkpoint confirmed to the
 * reader.  A restart, after a crash or kill -9, restores the snapshot and
 * takes in the assignments not yet done: everything it reads again was
 * rolled back with the transaction that held it.  SIGTERM or SIGINT:
 * commits and exits 0. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, fileno, fsync */

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eo_db.h"
#include "kn/conf.h"
#include "kn/stream_reader.h"

#define WHO "eo_reader"
#define COMMIT_MS 300

static volatile sig_atomic_t stopping;

static void on_signal(int sig) {
  (void)sig;
  stopping = 1;
}

/* A growing text buffer: the COPY rows, then the handed-back shards. */
typedef struct {
  char *p;
  size_t len, cap;
} buf_t;

static void buf_add(buf_t *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (b->len + n + 1 > cap) cap *= 2;
    if (!(b->p = realloc(b->p, cap))) eo_die(WHO, "buffer", "out of memory");
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void buf_str(buf_t *b, const char *s) { buf_add(b, s, strlen(s)); }

/* A field of COPY's text format: backslash, tab, newline and carriage
 * return escaped. */
static void buf_field(buf_t *b, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *esc = s[i] == '\\'   ? "\\\\"
                      : s[i] == '\t' ? "\\t"
                      : s[i] == '\n' ? "\\n"
                      : s[i] == '\r' ? "\\r"
                                     : NULL;
    if (esc)
      buf_str(b, esc);
    else
      buf_add(b, s + i, 1);
  }
}

typedef struct {
  PGconn *db;
  kn_stream_reader_t *rd;
  const char *me;
  int64_t checkpoint; /* of the last commit */
  long long applied;  /* highest assignment id taken in */
  buf_t rows;         /* COPY data of the records not committed */
  size_t pending;     /* records in rows */
  buf_t returned;     /* "shard\tposition\n" handed back */
  long long total;    /* records committed by this process */
} reader_t;

/* Restores the snapshot committed last, if any. */
static void restore(reader_t *r) {
  const char *p[1] = {r->me};
  PGresult *res = eo_db_exec(
      r->db, WHO,
      "SELECT checkpoint, snapshot FROM eo_reader_state WHERE reader = $1", 1,
      p, NULL, NULL);
  if (PQntuples(res) == 1) {
    r->checkpoint = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    unsigned char *b;
    size_t n;
    eo_db_bytes(res, 0, 1, WHO, &b, &n);
    kn_snapshot_t *s;
    kn_error_t *e = kn_snapshot_decode(b, n, &s);
    if (e) eo_die(WHO, "snapshot", kn_error_string(e));
    kn_err_t err = kn_stream_reader_restore(r->rd, s);
    if (err) eo_die(WHO, "restore", kn_err2str(err));
    fprintf(stderr, "%s %s: restored checkpoint %lld, %zu shard(s)\n", WHO,
            r->me, (long long)r->checkpoint, kn_snapshot_count(s));
    kn_snapshot_destroy(s);
    free(b);
  }
  PQclear(res);
}

/* Takes in the enumerator's new assignments, in order. */
static void take_assignments(reader_t *r) {
  char after[32];
  snprintf(after, sizeof(after), "%lld", r->applied);
  const char *p[2] = {r->me, after};
  PGresult *res =
      eo_db_exec(r->db, WHO,
                 "SELECT id, kind, shard, start FROM eo_assignments"
                 " WHERE reader = $1 AND NOT done AND id > $2 ORDER BY id",
                 2, p, NULL, NULL);
  for (int i = 0; i < PQntuples(res); i++) {
    const char *kind = PQgetvalue(res, i, 1), *shard = PQgetvalue(res, i, 2);
    if (!strcmp(kind, "assign")) {
      kn_position_t start;
      if (kn_position_parse(PQgetvalue(res, i, 3), &start))
        eo_die(WHO, "assignment", PQgetvalue(res, i, 3));
      kn_err_t err = kn_stream_reader_add_shard(r->rd, shard, &start);
      if (err && err != KN_ERR__STATE) eo_die(WHO, shard, kn_err2str(err));
      fprintf(stderr, "%s %s: reads %s from %s\n", WHO, r->me, shard,
              PQgetvalue(res, i, 3));
    } else {
      /* A shard finished meanwhile is not handed back: its report
       * answers the revocation. */
      kn_position_t at;
      if (!kn_stream_reader_remove_shard(r->rd, shard, &at)) {
        char text[KN_POSITION_SEQ_MAX + 64];
        kn_position_format(&at, text, sizeof(text));
        buf_str(&r->returned, shard);
        buf_str(&r->returned, "\t");
        buf_str(&r->returned, text);
        buf_str(&r->returned, "\n");
        fprintf(stderr, "%s %s: hands %s back at %s\n", WHO, r->me, shard,
                text);
      }
    }
    r->applied = strtoll(PQgetvalue(res, i, 0), NULL, 10);
  }
  PQclear(res);
}

static void event(reader_t *r, const char *kind, const char *shard,
                  const char *pos) {
  const char *p[4] = {kind, r->me, shard, pos};
  eo_db_run(r->db, WHO,
            "INSERT INTO eo_events (kind, reader, shard, pos)"
            " VALUES ($1, $2, $3, $4)",
            4, p);
}

/* One transaction: the records, the reports, the assignments taken in
 * and the snapshot; then the reader hears that the checkpoint is
 * durable. */
static void commit(reader_t *r) {
  eo_db_run(r->db, WHO, "BEGIN", 0, NULL);
  if (r->rows.len) {
    PGresult *res = PQexec(
        r->db, "COPY eo_records (shard, seq, subseq, data, reader) FROM STDIN");
    if (PQresultStatus(res) != PGRES_COPY_IN)
      eo_die(WHO, "copy", PQerrorMessage(r->db));
    PQclear(res);
    if (PQputCopyData(r->db, r->rows.p, (int)r->rows.len) != 1 ||
        PQputCopyEnd(r->db, NULL) != 1)
      eo_die(WHO, "copy", PQerrorMessage(r->db));
    res = PQgetResult(r->db);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
      eo_die(WHO, "copy", PQerrorMessage(r->db));
    PQclear(res);
    while ((res = PQgetResult(r->db))) PQclear(res);
  }
  char sid[256];
  while (kn_stream_reader_take_finished(r->rd, sid, sizeof(sid))) {
    event(r, "finished", sid, NULL);
    fprintf(stderr, "%s %s: finished %s\n", WHO, r->me, sid);
  }
  for (char *line = r->returned.p, *nl; line && (nl = strchr(line, '\n'));
       line = nl + 1) {
    *nl = '\0';
    char *tab = strchr(line, '\t');
    *tab = '\0';
    event(r, "returned", line, tab + 1);
  }
  char upto[32];
  snprintf(upto, sizeof(upto), "%lld", r->applied);
  const char *pa[2] = {r->me, upto};
  eo_db_run(r->db, WHO,
            "UPDATE eo_assignments SET done = true"
            " WHERE reader = $1 AND id <= $2 AND NOT done",
            2, pa);

  kn_snapshot_t *s;
  kn_error_t *e = kn_stream_reader_snapshot(r->rd, r->checkpoint + 1, &s);
  if (e) eo_die(WHO, "snapshot", kn_error_string(e));
  void *b;
  size_t n;
  if ((e = kn_snapshot_encode(s, &b, &n)))
    eo_die(WHO, "encode", kn_error_string(e));
  kn_snapshot_destroy(s);
  char ck[32];
  snprintf(ck, sizeof(ck), "%lld", (long long)(r->checkpoint + 1));
  const char *ps[3] = {r->me, ck, b};
  const int lens[3] = {0, 0, (int)n}, bin[3] = {0, 0, 1};
  PQclear(
      eo_db_exec(r->db, WHO,
                 "INSERT INTO eo_reader_state (reader, checkpoint, snapshot)"
                 " VALUES ($1, $2, $3) ON CONFLICT (reader) DO UPDATE"
                 " SET checkpoint = $2, snapshot = $3",
                 3, ps, lens, bin));
  free(b);
  eo_db_run(r->db, WHO, "COMMIT", 0, NULL);

  r->checkpoint++;
  kn_stream_reader_confirm(r->rd, r->checkpoint);
  r->total += (long long)r->pending;
  r->rows.len = r->returned.len = 0;
  r->pending = 0;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void add_batch(reader_t *r, kn_batch_t *b) {
  for (size_t k = 0; k < kn_batch_count(b); k++) {
    const kn_record_t *rec = kn_batch_record(b, k);
    size_t len;
    const char *d = kn_record_data(rec, &len);
    char sub[32];
    snprintf(sub, sizeof(sub), "%llu",
             (unsigned long long)kn_record_subsequence_number(rec));
    buf_field(&r->rows, kn_batch_shard_id(b), strlen(kn_batch_shard_id(b)));
    buf_str(&r->rows, "\t");
    buf_str(&r->rows, kn_record_sequence_number(rec));
    buf_str(&r->rows, "\t");
    buf_str(&r->rows, sub);
    buf_str(&r->rows, "\t");
    buf_field(&r->rows, d, len);
    buf_str(&r->rows, "\t");
    buf_field(&r->rows, r->me, strlen(r->me));
    buf_str(&r->rows, "\n");
    r->pending++;
  }
}

int main(int argc, char **argv) {
  if (argc != 4) eo_die(WHO, "usage", "CONNINFO STREAM READER_ID");
  reader_t r = {0};
  r.me = argv[3];
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  kn_conf_t *conf = kn_conf_new();
  char errstr[512], lock[300];
  if (!conf || kn_conf_set(conf, "stream", argv[2], errstr, sizeof(errstr)))
    eo_die(WHO, "conf", conf ? errstr : "out of memory");
  if (!(r.rd = kn_stream_reader_new(conf, errstr, sizeof(errstr))))
    eo_die(WHO, "reader", errstr);
  kn_conf_destroy(conf);

  snprintf(lock, sizeof(lock), "eo_reader %s", r.me);
  r.db = eo_db_open(WHO, argv[1], lock);
  const char *p[1] = {r.me};
  eo_db_run(r.db, WHO,
            "INSERT INTO eo_readers (reader) VALUES ($1)"
            " ON CONFLICT DO NOTHING",
            1, p);
  restore(&r);

  int64_t last = mono_ms();
  while (!stopping) {
    take_assignments(&r);
    kn_batch_t *b = kn_stream_reader_poll(r.rd, 100);
    const kn_error_t *fe = kn_stream_reader_fatal_error(r.rd);
    if (fe) eo_die(WHO, "reading", kn_error_string(fe));
    if (b) add_batch(&r, b);
    kn_batch_destroy(b);
    if (mono_ms() - last >= COMMIT_MS || r.pending >= 5000) {
      commit(&r);
      last = mono_ms();
    }
  }
  commit(&r);
  fprintf(stderr, "%s %s: %lld records committed\n", WHO, r.me, r.total);
  kn_stream_reader_destroy(r.rd);
  PQfinish(r.db);
  free(r.rows.p);
  free(r.returned.p);
  return 0;
}
