/* See eo_db.h. */
#include "eo_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every table of the example; IF NOT EXISTS under a transaction-wide
 * advisory lock, since the enumerator and the readers start together. */
static const char *const schema =
    "CREATE TABLE IF NOT EXISTS eo_records ("
    "  id bigserial PRIMARY KEY, shard text NOT NULL, seq text NOT NULL,"
    "  subseq bigint NOT NULL, data text NOT NULL, reader text NOT NULL);"
    "CREATE TABLE IF NOT EXISTS eo_reader_state ("
    "  reader text PRIMARY KEY, checkpoint bigint NOT NULL,"
    "  snapshot bytea NOT NULL);"
    "CREATE TABLE IF NOT EXISTS eo_readers ("
    "  reader text PRIMARY KEY, joined boolean NOT NULL DEFAULT false);"
    "CREATE TABLE IF NOT EXISTS eo_assignments ("
    "  id bigserial PRIMARY KEY, reader text NOT NULL, kind text NOT NULL,"
    "  shard text NOT NULL, start text, done boolean NOT NULL DEFAULT false);"
    "CREATE TABLE IF NOT EXISTS eo_events ("
    "  id bigserial PRIMARY KEY, kind text NOT NULL, reader text NOT NULL,"
    "  shard text NOT NULL, pos text,"
    "  consumed boolean NOT NULL DEFAULT false);"
    "CREATE TABLE IF NOT EXISTS eo_enumerator ("
    "  id int PRIMARY KEY, snapshot bytea NOT NULL);";

void eo_die(const char *who, const char *what, const char *why) {
  fprintf(stderr, "%s: %s: %s\n", who, what, why);
  exit(1);
}

PGresult *eo_db_exec(PGconn *db, const char *who, const char *sql, int n,
                     const char *const *params, const int *lens,
                     const int *binary) {
  PGresult *res = PQexecParams(db, sql, n, NULL, params, lens, binary, 0);
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    eo_die(who, sql, PQerrorMessage(db));
  return res;
}

void eo_db_run(PGconn *db, const char *who, const char *sql, int n,
               const char *const *params) {
  PQclear(eo_db_exec(db, who, sql, n, params, NULL, NULL));
}

PGconn *eo_db_open(const char *who, const char *conninfo,
                   const char *lock_name) {
  PGconn *db = PQconnectdb(conninfo);
  if (PQstatus(db) != CONNECTION_OK) eo_die(who, "connect", PQerrorMessage(db));
  eo_db_run(db, who, "BEGIN", 0, NULL);
  eo_db_run(db, who, "SELECT pg_advisory_xact_lock(0)", 0, NULL);
  PGresult *res = PQexec(db, schema); /* several statements: no parameters */
  if (PQresultStatus(res) != PGRES_COMMAND_OK)
    eo_die(who, "schema", PQerrorMessage(db));
  PQclear(res);
  eo_db_run(db, who, "COMMIT", 0, NULL);
  const char *p[1] = {lock_name};
  eo_db_run(db, who, "SELECT pg_advisory_lock(hashtext($1))", 1, p);
  return db;
}

void eo_db_bytes(PGresult *res, int row, int col, const char *who,
                 unsigned char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  if (PQgetisnull(res, row, col)) return;
  size_t n;
  unsigned char *u =
      PQunescapeBytea((const unsigned char *)PQgetvalue(res, row, col), &n);
  if (!u) eo_die(who, "bytea", "out of memory");
  if (!(*out = malloc(n ? n : 1))) eo_die(who, "bytea", "out of memory");
  memcpy(*out, u, n);
  *len = n;
  PQfreemem(u);
}
