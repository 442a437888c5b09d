/* eo_enumerator: the enumerator of the exactly-once example (README.md).
 *
 *   eo_enumerator CONNINFO STREAM
 *
 * Every 100 ms, in one transaction: takes in readers that registered
 * (eo_readers) and rebalances when one joined, takes the readers'
 * reports (eo_events: finished shards, shards handed back), lists the
 * stream's shards when due, writes its actions as rows of
 * eo_assignments, and stores its snapshot (eo_enumerator).  A restart
 * restores the snapshot committed last; the reports and registrations
 * after it are still unconsumed, and are taken in again.  Shards start at
 * TRIM_HORIZON.  SIGTERM or SIGINT: exits 0 after the current round. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, fileno, fsync */

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eo_db.h"
#include "kn/client.h"
#include "kn/conf.h"
#include "kn/enumerator.h"

#define WHO "eo_enumerator"

static volatile sig_atomic_t stopping;

static void on_signal(int sig) {
  (void)sig;
  stopping = 1;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static kn_enumerator_t *load(PGconn *db) {
  PGresult *res =
      eo_db_exec(db, WHO, "SELECT snapshot FROM eo_enumerator WHERE id = 1", 0,
                 NULL, NULL, NULL);
  kn_enumerator_t *en = NULL;
  if (PQntuples(res) == 1) {
    unsigned char *b;
    size_t n;
    eo_db_bytes(res, 0, 0, WHO, &b, &n);
    kn_error_t *e = kn_enumerator_restore(b, n, KN_ASSIGN_SHARD_COUNT, &en);
    if (e) eo_die(WHO, "restore", kn_error_string(e));
    free(b);
    fprintf(stderr, "%s: restored, %zu shard(s) known\n", WHO,
            kn_enumerator_shard_count(en));
  } else {
    kn_position_t th;
    kn_position_trim_horizon(&th);
    if (!(en = kn_enumerator_new(&th, KN_ASSIGN_SHARD_COUNT)))
      eo_die(WHO, "enumerator", "out of memory");
  }
  PQclear(res);
  return en;
}

static void save(PGconn *db, const kn_enumerator_t *en) {
  void *b;
  size_t n;
  kn_error_t *e = kn_enumerator_snapshot(en, &b, &n);
  if (e) eo_die(WHO, "snapshot", kn_error_string(e));
  const char *p[1] = {b};
  const int lens[1] = {(int)n}, bin[1] = {1};
  PQclear(eo_db_exec(db, WHO,
                     "INSERT INTO eo_enumerator (id, snapshot) VALUES (1, $1)"
                     " ON CONFLICT (id) DO UPDATE SET snapshot = $1",
                     1, p, lens, bin));
  free(b);
}

/* New readers; returns how many joined. */
static int joins(PGconn *db, kn_enumerator_t *en) {
  PGresult *res = eo_db_exec(db, WHO,
                             "UPDATE eo_readers SET joined = true"
                             " WHERE NOT joined RETURNING reader",
                             0, NULL, NULL, NULL);
  int n = PQntuples(res);
  for (int i = 0; i < n; i++) {
    if (kn_enumerator_reader_joined(en, PQgetvalue(res, i, 0)))
      eo_die(WHO, "join", PQgetvalue(res, i, 0));
    fprintf(stderr, "%s: reader %s joined\n", WHO, PQgetvalue(res, i, 0));
  }
  PQclear(res);
  return n;
}

/* The readers' reports, in the order they were written. */
static int reports(PGconn *db, kn_enumerator_t *en) {
  PGresult *res = eo_db_exec(
      db, WHO,
      "WITH t AS (UPDATE eo_events SET consumed = true WHERE NOT consumed"
      " RETURNING id, kind, reader, shard, pos)"
      " SELECT kind, reader, shard, pos FROM t ORDER BY id",
      0, NULL, NULL, NULL);
  int n = PQntuples(res);
  for (int i = 0; i < n; i++) {
    const char *kind = PQgetvalue(res, i, 0), *reader = PQgetvalue(res, i, 1),
               *shard = PQgetvalue(res, i, 2);
    kn_err_t err;
    if (!strcmp(kind, "finished")) {
      err = kn_enumerator_finished(en, reader, shard, NULL);
    } else {
      kn_position_t at;
      if (kn_position_parse(PQgetvalue(res, i, 3), &at))
        eo_die(WHO, "returned", PQgetvalue(res, i, 3));
      err = kn_enumerator_shard_returned(en, shard, &at);
    }
    /* A finished shard reported again after the graph dropped it (it
     * aged out of the stream) is harmless; anything else is a bug worth
     * stopping for. */
    if (err && !(err == KN_ERR__NOT_FOUND && !strcmp(kind, "finished")))
      eo_die(WHO, shard, kn_err2str(err));
  }
  PQclear(res);
  return n;
}

static int actions(PGconn *db, kn_enumerator_t *en) {
  kn_enum_action_t a;
  int n = 0;
  while (kn_enumerator_next_action(en, &a)) {
    char start[KN_POSITION_SEQ_MAX + 64] = "";
    int assign = a.kind == KN_ENUM_ASSIGN;
    if (assign) kn_position_format(&a.start, start, sizeof(start));
    const char *p[4] = {a.reader_id, assign ? "assign" : "revoke", a.shard_id,
                        assign ? start : NULL};
    eo_db_run(db, WHO,
              "INSERT INTO eo_assignments (reader, kind, shard, start)"
              " VALUES ($1, $2, $3, $4)",
              4, p);
    fprintf(stderr, "%s: %s %s %s %s\n", WHO, p[1], a.shard_id,
            assign ? "to" : "from", a.reader_id);
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc != 3) eo_die(WHO, "usage", "CONNINFO STREAM");
  const char *stream = argv[2];
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  kn_conf_t *conf = kn_conf_new();
  char errstr[512];
  if (!conf || kn_conf_set(conf, "stream", stream, errstr, sizeof(errstr)))
    eo_die(WHO, "conf", conf ? errstr : "out of memory");
  kn_client_t *client = kn_client_new(conf, errstr, sizeof(errstr));
  if (!client) eo_die(WHO, "client", errstr);
  kn_conf_destroy(conf);

  PGconn *db = eo_db_open(WHO, argv[1], "eo_enumerator");
  kn_enumerator_t *en = load(db);
  kn_enumerator_set_sync_interval(en, 1000);

  while (!stopping) {
    eo_db_run(db, WHO, "BEGIN", 0, NULL);
    int changed = joins(db, en);
    if (changed && kn_enumerator_rebalance(en))
      eo_die(WHO, "rebalance", "out of memory");
    changed += reports(db, en);
    int64_t now = mono_ms();
    if (kn_enumerator_due_ms(en, now) <= now) {
      kn_error_t *e = kn_enumerator_sync(en, client, stream, now);
      /* A failed listing is tried again at the next round. */
      if (e) {
        fprintf(stderr, "%s: listing: %s\n", WHO, kn_error_string(e));
        kn_error_destroy(e);
      }
      changed++;
    }
    changed += actions(db, en);
    if (changed) save(db, en);
    eo_db_run(db, WHO, "COMMIT", 0, NULL);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  kn_enumerator_destroy(en);
  kn_client_destroy(client);
  PQfinish(db);
  return 0;
}
