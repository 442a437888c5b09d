/* The SQLite lease store: one table with the DynamoDB item's fields as
 * columns, shared safely by the processes of one host.
 *
 * Every change is one statement, conditional in its WHERE clause and
 * judged by sqlite3_changes(): SQLite runs it under the database's write
 * lock, so two workers can never both pass the same condition.  WAL mode
 * lets readers go on while a writer works; a busy timeout plus a retry
 * loop absorbs short lock contention, and longer waits end in a retriable
 * error.  This is the only file that includes sqlite3.h. */
#include "util/json.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lease/store_int.h"
#include "util/clock.h"
#include "util/rand.h"
#include "util/str.h"

/* Schema versions, in PRAGMA user_version.  A later version adds a
 * migration step from each older one in migrate(). */
#define SCHEMA_VERSION 3

static const char schema_v1[] =
    "CREATE TABLE IF NOT EXISTS leases ("
    " leaseKey TEXT PRIMARY KEY NOT NULL,"
    " leaseOwner TEXT,"
    " leaseCounter INTEGER NOT NULL,"
    " ownerSwitchesSinceCheckpoint INTEGER NOT NULL DEFAULT 0,"
    " checkpoint TEXT,"
    " checkpointSubSequenceNumber INTEGER NOT NULL DEFAULT 0,"
    " pendingCheckpoint TEXT,"
    " pendingCheckpointSubSequenceNumber INTEGER,"
    " pendingCheckpointState BLOB,"
    " parentShardId TEXT," /* JSON array of strings; NULL when none */
    " childShardIds TEXT," /* JSON array of strings; NULL when none */
    " startingHashKey TEXT,"
    " endingHashKey TEXT,"
    " extra TEXT" /* JSON object of DynamoDB attribute values */
    ")";

/* Version 2: the KCL 3.x hand-off attribute. */
static const char schema_v2[] =
    "ALTER TABLE leases ADD COLUMN checkpointOwner TEXT";

/* Version 3: the membership (see the heartbeat call of store.h): one row
 * per worker, and the epoch in meta under the name 'epoch'. */
static const char schema_v3_members[] =
    "CREATE TABLE IF NOT EXISTS members ("
    " worker TEXT PRIMARY KEY,"
    " beat INTEGER NOT NULL,"
    " leases INTEGER NOT NULL"
    ")";
static const char schema_v3_meta[] =
    "CREATE TABLE IF NOT EXISTS meta ("
    " name TEXT PRIMARY KEY,"
    " value INTEGER NOT NULL"
    ")";

/* The actual owner (ccore: the worker with the right to write). */
#define ACTUAL_OWNER "COALESCE(checkpointOwner, leaseOwner)"

#define COLUMNS                                                           \
  "leaseKey, leaseOwner, leaseCounter, ownerSwitchesSinceCheckpoint, "    \
  "checkpoint, checkpointSubSequenceNumber, pendingCheckpoint, "          \
  "pendingCheckpointSubSequenceNumber, pendingCheckpointState, "          \
  "parentShardId, childShardIds, startingHashKey, endingHashKey, extra, " \
  "checkpointOwner"

/* Prepared statements kept for the life of the handle, by their SQL (a
 * constant of this file): renewals of a thousand leases prepare nothing. */
#define STMT_CACHE 24

typedef struct sql_store {
  kn_lease_store_t head;
  sqlite3 *db;
  /* A connection's sqlite3_changes() and error message belong to its last
   * statement, so one call at a time per handle. */
  pthread_mutex_t lock;
  long busy_ms;
  struct {
    const char *sql;
    sqlite3_stmt *st;
  } cache[STMT_CACHE];
} sql_store_t;

/* The statement for sql (a string constant), prepared once and reset for
 * each use; with the lock held.  Returns an SQLite result code. */
static int prep(sql_store_t *s, const char *sql, sqlite3_stmt **st) {
  int free_slot = -1;
  for (int i = 0; i < STMT_CACHE; i++) {
    if (s->cache[i].sql == sql) {
      *st = s->cache[i].st;
      sqlite3_reset(*st);
      sqlite3_clear_bindings(*st);
      return SQLITE_OK;
    }
    if (!s->cache[i].sql && free_slot < 0) free_slot = i;
  }
  int rc = sqlite3_prepare_v3(
      s->db, sql, -1, free_slot >= 0 ? SQLITE_PREPARE_PERSISTENT : 0, st, NULL);
  if (rc == SQLITE_OK && free_slot >= 0) {
    s->cache[free_slot].sql = sql;
    s->cache[free_slot].st = *st;
  }
  return rc;
}

/* Done with a statement from prep: reset (its read snapshot and locks go),
 * or finalized when it was not kept. */
static void unprep(sql_store_t *s, sqlite3_stmt *st) {
  if (!st) return;
  for (int i = 0; i < STMT_CACHE; i++)
    if (s->cache[i].st == st) {
      sqlite3_reset(st);
      sqlite3_clear_bindings(st);
      return;
    }
  sqlite3_finalize(st);
}

static int is_busy(int rc) {
  rc &= 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

/* The error for a failed SQLite call; a lock held too long is retriable
 * (the holder will let go), anything else is not. */
static kn_error_t *sql_error(sql_store_t *s, const char *op, const char *key,
                             int rc) {
  kn_error_t *e;
  if (is_busy(rc)) {
    e = kn_error_new(KN_ERR__IO,
                     "lease store %s: %s%s%s: the database stayed locked by "
                     "another connection for more than %ld ms",
                     s->head.name, op, key ? " " : "", key ? key : "",
                     s->busy_ms);
    kn_error_set_retriable(e, 1);
  } else {
    e = kn_error_new(KN_ERR__IO, "lease store %s: %s%s%s: %s (%s)",
                     s->head.name, op, key ? " " : "", key ? key : "",
                     s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc),
                     sqlite3_errstr(rc));
  }
  return e;
}

static kn_error_t *nomem(sql_store_t *s) {
  return kn_error_new(KN_ERR__NOMEM, "lease store %s: out of memory",
                      s->head.name);
}

/* sqlite3_step() that retries while the database is busy, until busy_ms
 * have passed since *deadline was set (0: set it now).  The busy handler
 * already waits inside step; this loop covers the cases where SQLite
 * returns SQLITE_BUSY at once (WAL recovery, a snapshot gone stale). */
static int step_retry(sql_store_t *s, sqlite3_stmt *st, int64_t *deadline) {
  if (!*deadline) *deadline = kn_mono_ms() + s->busy_ms;
  for (;;) {
    int rc = sqlite3_step(st);
    if (!is_busy(rc) || kn_mono_ms() >= *deadline) return rc;
    sqlite3_reset(st);
    kn_sleep_ms(1 + (int64_t)kn_rand_below(10));
  }
}

/* Runs SQL with no parameters and no rows wanted. */
static int exec_retry(sql_store_t *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    int64_t deadline = 0;
    do {
      rc = step_retry(s, st, &deadline);
    } while (rc == SQLITE_ROW);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc;
}

/* ---- string sets as JSON arrays ---- */

/* A JSON array of v's strings (malloc'ed), NULL for an empty set; *rc -1
 * on out-of-memory. */
static char *strv_to_json(char *const *v, size_t n, int *rc) {
  if (!n) return NULL;
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) {
    if (json_array_append_new(a, json_string(v[i]))) {
      json_decref(a);
      a = NULL;
    }
  }
  char *text = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  if (!text) *rc = -1;
  return text;
}

/* Parses a JSON array of strings; 0, or -1 when malformed or out of
 * memory. */
static int strv_from_json(const char *text, char ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!text) return 0;
  json_t *a = json_loads(text, 0, NULL);
  if (!json_is_array(a)) {
    json_decref(a);
    return -1;
  }
  size_t count = json_array_size(a);
  char **v = count ? calloc(count, sizeof(*v)) : NULL;
  size_t i = 0;
  if (count && !v) count = SIZE_MAX; /* forces the failure below */
  for (; v && i < count; i++) {
    const char *str = json_string_value(json_array_get(a, i));
    if (!str || !(v[i] = strdup(str))) break;
  }
  json_decref(a);
  if (i != count) {
    for (size_t j = 0; j < i; j++) free(v[j]);
    free(v);
    return -1;
  }
  *out = v;
  *n = count;
  return 0;
}

/* ---- rows ---- */

static int col_str(sqlite3_stmt *st, int i, char **out) {
  const unsigned char *t = sqlite3_column_text(st, i);
  if (!t) {
    *out = NULL;
    return sqlite3_errcode(sqlite3_db_handle(st)) == SQLITE_NOMEM ? -1 : 0;
  }
  *out = strdup((const char *)t);
  return *out ? 0 : -1;
}

/* Fills l from the current row of a SELECT COLUMNS statement. */
static int row_to_lease(sqlite3_stmt *st, kn_lease_t *l) {
  memset(l, 0, sizeof(*l));
  int rc = 0;
  rc |= col_str(st, 0, &l->key);
  rc |= col_str(st, 1, &l->owner);
  l->counter = sqlite3_column_int64(st, 2);
  l->owner_switches = sqlite3_column_int64(st, 3);
  rc |= col_str(st, 4, &l->checkpoint);
  l->checkpoint_subseq = sqlite3_column_int64(st, 5);
  rc |= col_str(st, 6, &l->pending);
  l->pending_subseq = sqlite3_column_int64(st, 7);
  if (sqlite3_column_type(st, 8) != SQLITE_NULL) {
    const void *b = sqlite3_column_blob(st, 8);
    size_t n = (size_t)sqlite3_column_bytes(st, 8);
    l->pending_state = malloc(n + 1);
    if (l->pending_state) {
      if (n) memcpy(l->pending_state, b, n);
      l->pending_state_len = n;
    } else {
      rc = -1;
    }
  }
  char *parents = NULL, *children = NULL;
  rc |= col_str(st, 9, &parents);
  rc |= col_str(st, 10, &children);
  if (!rc) {
    rc |= strv_from_json(parents, &l->parents, &l->n_parents);
    rc |= strv_from_json(children, &l->children, &l->n_children);
  }
  free(parents);
  free(children);
  rc |= col_str(st, 11, &l->hash_start);
  rc |= col_str(st, 12, &l->hash_end);
  rc |= col_str(st, 13, &l->extra);
  rc |= col_str(st, 14, &l->checkpoint_owner);
  if (rc) kn_lease_clear(l);
  return rc ? -1 : 0;
}

/* ---- operations ---- */

static sql_store_t *store_of(kn_lease_store_t *ls) { return (sql_store_t *)ls; }

static kn_error_t *sql_ensure_table(kn_lease_store_t *ls) {
  /* The schema is created or checked when the store opens. */
  return NULL;
}

static kn_error_t *sql_list(kn_lease_store_t *ls, kn_lease_t **out, size_t *n) {
  sql_store_t *s = store_of(ls);
  kn_error_t *err = NULL;
  kn_lease_t *v = NULL;
  size_t count = 0, cap = 0;
  sqlite3_stmt *st = NULL;
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&s->lock);
  int rc = prep(s, "SELECT " COLUMNS " FROM leases ORDER BY leaseKey", &st);
  int64_t deadline = 0;
  /* Retry only before the first row: one statement reads one snapshot. */
  if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
  while (rc == SQLITE_ROW) {
    if (count == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      kn_lease_t *nv = realloc(v, ncap * sizeof(*nv));
      if (!nv) break;
      v = nv;
      cap = ncap;
    }
    if (row_to_lease(st, &v[count])) break;
    count++;
    rc = sqlite3_step(st);
  }
  if (rc == SQLITE_ROW)
    err = nomem(s);
  else if (rc != SQLITE_DONE)
    err = sql_error(s, "list", NULL, rc);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  if (err) {
    kn_lease_array_free(v, count);
    return err;
  }
  if (!count) free(v);
  *out = count ? v : NULL;
  *n = count;
  return NULL;
}

static kn_error_t *sql_get(kn_lease_store_t *ls, const char *key,
                           kn_lease_t *out) {
  sql_store_t *s = store_of(ls);
  kn_error_t *err = NULL;
  sqlite3_stmt *st = NULL;
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&s->lock);
  int rc = prep(s, "SELECT " COLUMNS " FROM leases WHERE leaseKey = ?1", &st);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  int64_t deadline = 0;
  if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
  if (rc == SQLITE_ROW) {
    if (row_to_lease(st, out)) err = nomem(s);
  } else if (rc == SQLITE_DONE) {
    err = kn_error_new(KN_ERR__NOT_FOUND, "lease store %s: no lease %s",
                       ls->name, key);
  } else {
    err = sql_error(s, "get", key, rc);
  }
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  return err;
}

/* Binds text or NULL. */
static int bind_str(sqlite3_stmt *st, int i, const char *v) {
  return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC)
           : sqlite3_bind_null(st, i);
}

/* Runs a prepared change and reports whether it changed one row: NULL if
 * it did, a conditional-check error if no row met its WHERE clause. */
static kn_error_t *run_change(sql_store_t *s, sqlite3_stmt *st, int rc,
                              const char *op, const char *key) {
  int64_t deadline = 0;
  if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
  if (rc != SQLITE_DONE) return sql_error(s, op, key, rc);
  if (sqlite3_changes(s->db) != 1) return kn_lease_ccf(&s->head, op, key);
  return NULL;
}

static kn_error_t *sql_create(kn_lease_store_t *ls, const kn_lease_t *l) {
  sql_store_t *s = store_of(ls);
  if (!l->key || !*l->key)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: a lease needs a key", ls->name);
  int jrc = 0;
  char *parents = strv_to_json(l->parents, l->n_parents, &jrc);
  char *children = strv_to_json(l->children, l->n_children, &jrc);
  if (jrc) {
    free(parents);
    free(children);
    return nomem(s);
  }
  sqlite3_stmt *st = NULL;
  pthread_mutex_lock(&s->lock);
  int rc =
      prep(s,
           "INSERT INTO leases (" COLUMNS
           ") VALUES "
           "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) "
           "ON CONFLICT (leaseKey) DO NOTHING",
           &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, l->key);
    rc |= bind_str(st, 2, l->owner);
    rc |= sqlite3_bind_int64(st, 3, l->counter);
    rc |= sqlite3_bind_int64(st, 4, l->owner_switches);
    rc |= bind_str(st, 5, l->checkpoint);
    rc |= sqlite3_bind_int64(st, 6, l->checkpoint_subseq);
    rc |= bind_str(st, 7, l->pending);
    rc |= l->pending ? sqlite3_bind_int64(st, 8, l->pending_subseq)
                     : sqlite3_bind_null(st, 8);
    rc |= l->pending_state
              ? sqlite3_bind_blob64(st, 9, l->pending_state,
                                    l->pending_state_len, SQLITE_STATIC)
              : sqlite3_bind_null(st, 9);
    rc |= bind_str(st, 10, parents);
    rc |= bind_str(st, 11, children);
    rc |= bind_str(st, 12, l->hash_start);
    rc |= bind_str(st, 13, l->hash_end);
    rc |= bind_str(st, 14, l->extra);
    rc |= bind_str(st, 15, l->checkpoint_owner);
  }
  kn_error_t *err = run_change(s, st, rc, "create", l->key);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  free(parents);
  free(children);
  return err;
}

static kn_error_t *sql_take(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *old_owner,
                            const char *owner, int64_t *new_counter) {
  sql_store_t *s = store_of(ls);
  sqlite3_stmt *st = NULL;
  if (!owner)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: take %s: no owner", ls->name, key);
  /* As the KCL counts: a steal is a switch, taking a free lease is not. */
  int switched = old_owner && strcmp(old_owner, owner) != 0;
  pthread_mutex_lock(&s->lock);
  int rc = prep(
      s,
      "UPDATE leases SET leaseOwner = ?1, leaseCounter = leaseCounter + 1, "
      "ownerSwitchesSinceCheckpoint = ownerSwitchesSinceCheckpoint + ?2, "
      "checkpointOwner = NULL "
      "WHERE leaseKey = ?3 AND leaseCounter = ?4 AND leaseOwner IS ?5",
      &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, owner);
    rc |= sqlite3_bind_int(st, 2, switched);
    rc |= bind_str(st, 3, key);
    rc |= sqlite3_bind_int64(st, 4, counter);
    rc |= bind_str(st, 5, old_owner);
  }
  kn_error_t *err = run_change(s, st, rc, "take", key);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  if (!err) *new_counter = counter + 1;
  return err;
}

/* renew and release: the same condition, different changes. */
static kn_error_t *owner_update(kn_lease_store_t *ls, const char *sql,
                                const char *op, const char *key,
                                int64_t counter, const char *owner,
                                int64_t *new_counter) {
  sql_store_t *s = store_of(ls);
  sqlite3_stmt *st = NULL;
  if (!owner)
    return kn_error_new(KN_ERR__INVALID_ARG, "lease store %s: %s %s: no owner",
                        ls->name, op, key);
  pthread_mutex_lock(&s->lock);
  int rc = prep(s, sql, &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, key);
    rc |= sqlite3_bind_int64(st, 2, counter);
    rc |= bind_str(st, 3, owner);
  }
  kn_error_t *err = run_change(s, st, rc, op, key);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  if (!err) *new_counter = counter + 1;
  return err;
}

/* Runs a prepared change of the actual owner's lease (renew, checkpoint)
 * whose SQL ends with "RETURNING leaseOwner, checkpointOwner": whether a
 * hand-off was asked is seen in the same change.  *handoff_to as for
 * renew (NULL on error). */
static kn_error_t *run_owned_change(sql_store_t *s, sqlite3_stmt *st, int rc,
                                    const char *op, const char *key,
                                    int64_t counter, int64_t *new_counter,
                                    char **handoff_to) {
  kn_error_t *err = NULL;
  int64_t deadline = 0;
  if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
  if (rc == SQLITE_ROW) {
    /* (Both columns, compared here: SQLite 3.40 evaluates a CASE on them
     * in RETURNING wrongly.) */
    if (sqlite3_column_type(st, 1) != SQLITE_NULL && col_str(st, 0, handoff_to))
      err = nomem(s);
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE && !err)
      *new_counter = counter + 1;
    else if (rc != SQLITE_DONE && !err)
      err = sql_error(s, op, key, rc);
  } else if (rc == SQLITE_DONE) {
    err = kn_lease_ccf(&s->head, op, key);
  } else {
    err = sql_error(s, op, key, rc);
  }
  if (err) {
    free(*handoff_to);
    *handoff_to = NULL;
  }
  return err;
}

static kn_error_t *sql_renew(kn_lease_store_t *ls, const char *key,
                             int64_t counter, const char *owner,
                             int64_t *new_counter, char **handoff_to) {
  sql_store_t *s = store_of(ls);
  sqlite3_stmt *st = NULL;
  *handoff_to = NULL;
  if (!owner)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: renew %s: no "
                        "owner",
                        ls->name, key);
  pthread_mutex_lock(&s->lock);
  int rc = prep(s,
                "UPDATE leases SET leaseCounter = leaseCounter + 1 "
                "WHERE leaseKey = ?1 AND leaseCounter = ?2 AND " ACTUAL_OWNER
                " = ?3 "
                "RETURNING leaseOwner, checkpointOwner",
                &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, key);
    rc |= sqlite3_bind_int64(st, 2, counter);
    rc |= bind_str(st, 3, owner);
  }
  kn_error_t *err = run_owned_change(s, st, rc, "renew", key, counter,
                                     new_counter, handoff_to);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  return err;
}

static kn_error_t *sql_release(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *owner,
                               int64_t *new_counter) {
  return owner_update(
      ls,
      "UPDATE leases SET leaseOwner = NULL, "
      "checkpointOwner = NULL, "
      "leaseCounter = leaseCounter + 1 "
      "WHERE leaseKey = ?1 AND leaseCounter = ?2 AND " ACTUAL_OWNER " = ?3",
      "release", key, counter, owner, new_counter);
}

static kn_error_t *sql_checkpoint(kn_lease_store_t *ls, const char *key,
                                  int64_t counter, const char *owner,
                                  const char *checkpoint, int64_t subseq,
                                  const char *pending, int64_t pending_subseq,
                                  const void *state, size_t state_len,
                                  int64_t *new_counter, char **handoff_to) {
  sql_store_t *s = store_of(ls);
  sqlite3_stmt *st = NULL;
  *handoff_to = NULL;
  if (!owner)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: checkpoint %s: no owner", ls->name,
                        key);
  pthread_mutex_lock(&s->lock);
  /* ?1 NULL keeps the checkpoint (a prepared checkpoint only). */
  int rc =
      prep(s,
           "UPDATE leases SET leaseCounter = leaseCounter + 1, "
           "checkpoint = COALESCE(?1, checkpoint), "
           "checkpointSubSequenceNumber = CASE WHEN ?1 IS NULL "
           "THEN checkpointSubSequenceNumber ELSE ?2 END, "
           "ownerSwitchesSinceCheckpoint = CASE WHEN ?1 IS NULL "
           "THEN ownerSwitchesSinceCheckpoint ELSE 0 END, "
           "pendingCheckpoint = ?3, pendingCheckpointSubSequenceNumber = ?4, "
           "pendingCheckpointState = ?5 "
           "WHERE leaseKey = ?6 AND leaseCounter = ?7 AND " ACTUAL_OWNER
           " = ?8 "
           "RETURNING leaseOwner, checkpointOwner",
           &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, checkpoint);
    rc |= sqlite3_bind_int64(st, 2, subseq);
    rc |= bind_str(st, 3, pending);
    rc |= pending ? sqlite3_bind_int64(st, 4, pending_subseq)
                  : sqlite3_bind_null(st, 4);
    /* A zero-length state is still a state: bind a non-NULL pointer. */
    rc |= pending && state ? sqlite3_bind_blob64(st, 5, state_len ? state : "",
                                                 state_len, SQLITE_STATIC)
                           : sqlite3_bind_null(st, 5);
    rc |= bind_str(st, 6, key);
    rc |= sqlite3_bind_int64(st, 7, counter);
    rc |= bind_str(st, 8, owner);
  }
  kn_error_t *err = run_owned_change(s, st, rc, "checkpoint", key, counter,
                                     new_counter, handoff_to);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  return err;
}

static kn_error_t *sql_handoff(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *old_owner,
                               const char *new_owner) {
  sql_store_t *s = store_of(ls);
  sqlite3_stmt *st = NULL;
  if (!old_owner || !new_owner)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: handoff %s: no "
                        "owner",
                        ls->name, key);
  pthread_mutex_lock(&s->lock);
  int rc =
      prep(s,
           "UPDATE leases SET leaseOwner = ?1, checkpointOwner = leaseOwner "
           "WHERE leaseKey = ?2 AND leaseCounter = ?3 AND leaseOwner = ?4 AND "
           "checkpointOwner IS NULL",
           &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, new_owner);
    rc |= bind_str(st, 2, key);
    rc |= sqlite3_bind_int64(st, 3, counter);
    rc |= bind_str(st, 4, old_owner);
  }
  kn_error_t *err = run_change(s, st, rc, "handoff", key);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  return err;
}

static kn_error_t *sql_handoff_done(kn_lease_store_t *ls, const char *key,
                                    int64_t counter, const char *owner,
                                    int64_t *new_counter) {
  return owner_update(ls,
                      "UPDATE leases SET checkpointOwner = NULL, "
                      "leaseCounter = leaseCounter + 1, "
                      "ownerSwitchesSinceCheckpoint = "
                      "ownerSwitchesSinceCheckpoint + 1 "
                      "WHERE leaseKey = ?1 AND leaseCounter = ?2 AND "
                      "checkpointOwner = ?3",
                      "handoff_done", key, counter, owner, new_counter);
}

static kn_error_t *sql_set_children(kn_lease_store_t *ls, const char *key,
                                    char *const *children, size_t n) {
  sql_store_t *s = store_of(ls);
  int jrc = 0;
  char *json = strv_to_json(children, n, &jrc);
  if (jrc) return nomem(s);
  sqlite3_stmt *st = NULL;
  pthread_mutex_lock(&s->lock);
  int rc =
      prep(s, "UPDATE leases SET childShardIds = ?1 WHERE leaseKey = ?2", &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, json);
    rc |= bind_str(st, 2, key);
  }
  kn_error_t *err = run_change(s, st, rc, "set_children", key);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  free(json);
  return err;
}

static kn_error_t *sql_remove(kn_lease_store_t *ls, const char *key,
                              int64_t counter) {
  sql_store_t *s = store_of(ls);
  sqlite3_stmt *st = NULL;
  pthread_mutex_lock(&s->lock);
  int rc = prep(
      s, "DELETE FROM leases WHERE leaseKey = ?1 AND leaseCounter = ?2", &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, key);
    rc |= sqlite3_bind_int64(st, 2, counter);
  }
  kn_error_t *err = run_change(s, st, rc, "remove", key);
  unprep(s, st);
  pthread_mutex_unlock(&s->lock);
  return err;
}

/* Runs a cached statement with no parameters and no rows wanted (the
 * transaction statements of heartbeat). */
static int run_plain(sql_store_t *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, sql, &st);
  int64_t deadline = 0;
  if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  unprep(s, st);
  return rc;
}

/* Runs a cached change statement binding worker at ?1 and, when b2 is
 * not NULL, the integers b2[0], b2[1] at ?2, ?3. */
static int run_bound(sql_store_t *s, const char *sql, const char *worker,
                     const int64_t *b2) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, sql, &st);
  if (rc == SQLITE_OK) {
    rc |= bind_str(st, 1, worker);
    if (b2) {
      rc |= sqlite3_bind_int64(st, 2, b2[0]);
      rc |= sqlite3_bind_int64(st, 3, b2[1]);
    }
  }
  int64_t deadline = 0;
  if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  unprep(s, st);
  return rc;
}

static int by_worker(const void *a, const void *b) {
  return strcmp(((const kn_member_t *)a)->worker,
                ((const kn_member_t *)b)->worker);
}

/* Reads every member and the epoch into out, inside the transaction.
 * Returns an SQLite result code; SQLITE_NOMEM when out of memory. */
static int read_members(sql_store_t *s, kn_members_t *out) {
  sqlite3_stmt *st = NULL;
  size_t cap = 0;
  int rc =
      prep(s, "SELECT worker, beat, leases FROM members ORDER BY worker", &st);
  int64_t deadline = 0;
  /* Retry only before the first row (the first statement of a read
   * transaction may find the file busy). */
  if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
  while (rc == SQLITE_ROW) {
    if (out->n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      kn_member_t *nv = realloc(out->v, ncap * sizeof(*nv));
      if (!nv) {
        rc = SQLITE_NOMEM;
        break;
      }
      out->v = nv;
      cap = ncap;
    }
    kn_member_t *m = &out->v[out->n];
    if (col_str(st, 0, &m->worker) || !m->worker) {
      free(m->worker);
      rc = SQLITE_NOMEM;
      break;
    }
    m->beat = sqlite3_column_int64(st, 1);
    m->leases = sqlite3_column_int64(st, 2);
    out->n++;
    rc = sqlite3_step(st);
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  unprep(s, st);
  if (rc == SQLITE_OK) {
    st = NULL;
    rc = prep(s, "SELECT value FROM meta WHERE name = 'epoch'", &st);
    if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
    if (rc == SQLITE_ROW) {
      out->epoch = sqlite3_column_int64(st, 0);
      rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
      rc = SQLITE_OK;
    }
    unprep(s, st);
  }
  /* ORDER BY compares bytes as strcmp does; sorted again all the same in
   * case a column holds something else than text. */
  if (rc == SQLITE_OK && out->n > 1)
    qsort(out->v, out->n, sizeof(*out->v), by_worker);
  return rc;
}

/* One write transaction: the heartbeat row, the epoch, the forgotten
 * workers, then everything read back under the same lock. */
static kn_error_t *sql_heartbeat(kn_lease_store_t *ls, const char *worker,
                                 int bucket, int64_t beat, int64_t leases,
                                 int64_t bump, char *const *forget,
                                 size_t n_forget, kn_members_t *out) {
  sql_store_t *s = store_of(ls);
  memset(out, 0, sizeof(*out));
  (void)bucket; /* one host: every member in one place */
  if (!worker || !*worker)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: heartbeat: no worker id", ls->name);
  kn_error_t *err = NULL;
  pthread_mutex_lock(&s->lock);
  /* IMMEDIATE: the write lock at once, so that the reads below see the
   * table as this transaction leaves it and no one else's half. */
  int rc = run_plain(s, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK) {
    err = sql_error(s, "heartbeat", worker, rc);
    pthread_mutex_unlock(&s->lock);
    return err;
  }
  int64_t row[2] = {beat, leases};
  rc = run_bound(s,
                 "INSERT INTO members (worker, beat, leases) VALUES (?1, ?2, "
                 "?3) ON CONFLICT (worker) DO UPDATE SET beat = excluded.beat, "
                 "leases = excluded.leases",
                 worker, row);
  if (rc == SQLITE_OK) {
    sqlite3_stmt *st = NULL;
    rc = prep(s,
              "INSERT INTO meta (name, value) VALUES ('epoch', ?1) "
              "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
              &st);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 1, bump);
    int64_t deadline = 0;
    if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    unprep(s, st);
  }
  for (size_t i = 0; rc == SQLITE_OK && i < n_forget; i++) {
    if (!forget[i] || strcmp(forget[i], worker) == 0) continue;
    rc = run_bound(s, "DELETE FROM members WHERE worker = ?1", forget[i], NULL);
  }
  if (rc == SQLITE_OK) rc = read_members(s, out);
  if (rc == SQLITE_OK) rc = run_plain(s, "COMMIT");
  if (rc != SQLITE_OK) {
    err = rc == SQLITE_NOMEM ? nomem(s) : sql_error(s, "heartbeat", worker, rc);
    run_plain(s, "ROLLBACK");
    kn_members_clear(out);
  }
  pthread_mutex_unlock(&s->lock);
  return err;
}

static kn_error_t *sql_members(kn_lease_store_t *ls, kn_members_t *out) {
  sql_store_t *s = store_of(ls);
  memset(out, 0, sizeof(*out));
  kn_error_t *err = NULL;
  pthread_mutex_lock(&s->lock);
  /* One read transaction: the members and the epoch of one moment. */
  int rc = run_plain(s, "BEGIN");
  if (rc == SQLITE_OK) {
    rc = read_members(s, out);
    run_plain(s, "COMMIT");
  }
  if (rc != SQLITE_OK) {
    err = rc == SQLITE_NOMEM ? nomem(s) : sql_error(s, "members", NULL, rc);
    kn_members_clear(out);
  }
  pthread_mutex_unlock(&s->lock);
  return err;
}

static void sql_destroy(kn_lease_store_t *ls) {
  sql_store_t *s = store_of(ls);
  for (int i = 0; i < STMT_CACHE; i++) sqlite3_finalize(s->cache[i].st);
  sqlite3_close_v2(s->db);
  pthread_mutex_destroy(&s->lock);
  free(ls->name);
  free(s);
}

static const kn_lease_store_ops_t sql_ops = {
    sql_ensure_table,
    sql_list,
    sql_get,
    sql_create,
    sql_take,
    sql_renew,
    NULL /* mark: one host */,
    sql_release,
    sql_checkpoint,
    sql_set_children,
    sql_handoff,
    sql_handoff_done,
    sql_remove,
    sql_destroy,
    sql_heartbeat,
    NULL /* leave: one place for every member */,
    NULL /* publish */,
    sql_members,
};

/* ---- opening and the schema ---- */

static int read_user_version(sql_store_t *s, int *version) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, "PRAGMA user_version", &st);
  int64_t deadline = 0;
  if (rc == SQLITE_OK) rc = step_retry(s, st, &deadline);
  if (rc == SQLITE_ROW) {
    *version = sqlite3_column_int(st, 0);
    rc = SQLITE_OK;
  }
  unprep(s, st);
  return rc;
}

/* Brings the schema from version `from` to SCHEMA_VERSION, inside the
 * caller's write transaction. */
static int migrate(sql_store_t *s, int from) {
  int rc = SQLITE_OK;
  if (from < 1) rc = exec_retry(s, schema_v1);
  if (rc == SQLITE_OK && from < 2) rc = exec_retry(s, schema_v2);
  if (rc == SQLITE_OK && from < 3) rc = exec_retry(s, schema_v3_members);
  if (rc == SQLITE_OK && from < 3) rc = exec_retry(s, schema_v3_meta);
  if (rc == SQLITE_OK) {
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", SCHEMA_VERSION);
    rc = exec_retry(s, sql);
  }
  return rc;
}

static kn_error_t *prepare_schema(sql_store_t *s) {
  int version = 0;
  int rc = read_user_version(s, &version);
  if (rc != SQLITE_OK) return sql_error(s, "open", NULL, rc);
  if (version == SCHEMA_VERSION) return NULL;
  if (version > SCHEMA_VERSION)
    return kn_error_new(KN_ERR__IO,
                        "lease store %s: schema version %d is newer than "
                        "this library's (%d): upgrade libkinesis",
                        s->head.name, version, SCHEMA_VERSION);
  /* The write lock first, then look again: another process may have
   * created or migrated the schema meanwhile. */
  rc = exec_retry(s, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK) return sql_error(s, "open", NULL, rc);
  rc = read_user_version(s, &version);
  if (rc == SQLITE_OK && version < SCHEMA_VERSION) rc = migrate(s, version);
  if (rc == SQLITE_OK) rc = exec_retry(s, "COMMIT");
  if (rc != SQLITE_OK) {
    kn_error_t *err = sql_error(s, "create the schema", NULL, rc);
    exec_retry(s, "ROLLBACK");
    return err;
  }
  return NULL;
}

/* A reading connection needs the current schema and changes nothing: no
 * journal mode, no migration. */
static kn_error_t *check_schema_ro(sql_store_t *s) {
  int version = 0;
  int rc = read_user_version(s, &version);
  if (rc != SQLITE_OK) return sql_error(s, "open", NULL, rc);
  if (version == 0)
    return kn_error_new(KN_ERR_RESOURCE_NOT_FOUND, "no lease table in %s",
                        s->head.name);
  if (version != SCHEMA_VERSION)
    return kn_error_new(KN_ERR__IO,
                        "lease store %s: schema version %d, this library "
                        "reads %d (%s)",
                        s->head.name, version, SCHEMA_VERSION,
                        version > SCHEMA_VERSION
                            ? "upgrade libkinesis"
                            : "a worker of this version brings the file up "
                              "to date when it opens it");
  return NULL;
}

static kn_lease_store_t *open_(const char *path, long busy_ms, int ro,
                               kn_error_t **errp) {
  *errp = NULL;
  sql_store_t *s = calloc(1, sizeof(*s));
  char *label = kn_asprintf("sqlite:%s", path);
  if (!s || !label || kn_lease_store_init(&s->head, &sql_ops, label)) {
    free(label);
    if (s) free(s->head.name);
    free(s);
    *errp = kn_error_new(KN_ERR__NOMEM, "lease store: out of memory");
    return NULL;
  }
  free(label);
  pthread_mutex_init(&s->lock, NULL);
  s->busy_ms = busy_ms > 0 ? busy_ms : 0;
  /* NOMUTEX: the store's own mutex serializes use of the connection. */
  int rc = sqlite3_open_v2(
      path, &s->db,
      (ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
          SQLITE_OPEN_NOMUTEX,
      NULL);
  kn_error_t *err = NULL;
  if (rc != SQLITE_OK) {
    err = sql_error(s, "open", NULL, rc);
  } else if (ro) {
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, (int)s->busy_ms);
    rc = exec_retry(s, "PRAGMA query_only = 1");
    err = rc != SQLITE_OK ? sql_error(s, "open", NULL, rc) : check_schema_ro(s);
    if (err) {
      sql_destroy(&s->head);
      *errp = err;
      return NULL;
    }
    return &s->head;
  } else if (sqlite3_db_readonly(s->db, "main") == 1) {
    err = kn_error_new(KN_ERR__IO,
                       "lease store %s: the file is read-only (a lease store "
                       "needs to write)",
                       s->head.name);
  }
  if (!err) {
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, (int)s->busy_ms);
    /* WAL where the file system allows it; other journal modes still lock
     * correctly, only with less concurrency. */
    rc = exec_retry(s, "PRAGMA journal_mode = WAL");
    /* In WAL mode NORMAL still never corrupts the file; only a power cut
     * may undo the last changes (a renewal or a checkpoint: records read
     * again, never lost), and a write no longer waits for fdatasync --
     * a worker holding 1,000 leases renews about 300 a second. */
    if (rc == SQLITE_OK) rc = exec_retry(s, "PRAGMA synchronous = NORMAL");
    if (rc != SQLITE_OK) err = sql_error(s, "open", NULL, rc);
  }
  if (!err) err = prepare_schema(s);
  if (err) {
    sql_destroy(&s->head);
    *errp = err;
    return NULL;
  }
  return &s->head;
}

kn_lease_store_t *kn_lease_store_sqlite_open(const char *path, long busy_ms,
                                             kn_error_t **errp) {
  return open_(path, busy_ms, 0, errp);
}

kn_lease_store_t *kn_lease_store_sqlite_open_ro(const char *path, long busy_ms,
                                                kn_error_t **errp) {
  return open_(path, busy_ms, 1, errp);
}
