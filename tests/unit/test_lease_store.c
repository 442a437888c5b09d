/* The lease stores that need no server: the conformance suite on the
 * memory and SQLite stores, and what is particular to each (SQLite locks,
 * unusable files, schema versions; specs). */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kn/leases.h"
#include "kt.h"
#include "lease/store.h"
#include "lease/store_int.h"
#include "lease_conformance.h"
#include "util/clock.h"

static char dir[64];
static int total_checks;

static kn_lease_store_t *open_spec(void *opaque, kn_error_t **errp) {
  return kn_lease_store_open(opaque, NULL, errp);
}

static void path_in_dir(char *out, size_t size, const char *name) {
  snprintf(out, size, "%s/%s", dir, name);
}

static void run_suite(const char *label, char *spec, int threads) {
  kn_lc_target_t t = {label, open_spec, spec, threads, 200, 300};
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "shardId-%ld", (long)getpid());
  int failures = kn_lc_run(&t, prefix, &total_checks);
  kt_checks++;
  if (failures) kt_failures++;
}

static void test_memory_conformance(void) {
  run_suite("memory", "memory:conformance", 8);
}

static void test_sqlite_conformance(void) {
  char spec[128];
  snprintf(spec, sizeof(spec), "sqlite:%s/conformance.db", dir);
  run_suite("sqlite", spec, 8);
}

/* Private memory stores share nothing; named ones share everything. */
static void test_memory_instances(void) {
  kn_error_t *e = NULL, *ea = NULL, *eb = NULL, *ec = NULL, *ed = NULL;
  kn_lease_store_t *a = kn_lease_store_open("memory", NULL, &ea);
  kn_lease_store_t *b = kn_lease_store_open("memory", NULL, &eb);
  kn_lease_store_t *c = kn_lease_store_open("memory:shared", NULL, &ec);
  kn_lease_store_t *d = kn_lease_store_open("memory:shared", NULL, &ed);
  kn_error_destroy(ea);
  kn_error_destroy(eb);
  kn_error_destroy(ec);
  kn_error_destroy(ed);
  KT_REQUIRE(a && b && c && d, kn_lease_store_destroy(a),
             kn_lease_store_destroy(b), kn_lease_store_destroy(c),
             kn_lease_store_destroy(d));
  kn_lease_t l = {.key = "k"}, got;
  KT_CHECK_OK(a->ops->create(a, &l));
  e = b->ops->get(b, "k", &got);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__NOT_FOUND);
  if (!e) kn_lease_clear(&got);
  kn_error_destroy(e);
  KT_CHECK_OK(c->ops->create(c, &l));
  e = d->ops->get(d, "k", &got);
  KT_CHECK(e == NULL);
  if (!e) kn_lease_clear(&got);
  kn_error_destroy(e);
  kn_lease_store_destroy(c);
  /* The instance lives while a handle does... */
  e = d->ops->get(d, "k", &got);
  KT_CHECK(e == NULL);
  if (!e) kn_lease_clear(&got);
  kn_error_destroy(e);
  kn_lease_store_destroy(d);
  /* ...and goes with the last one. */
  e = NULL;
  c = kn_lease_store_open("memory:shared", NULL, &e);
  KT_CHECK(c != NULL);
  kn_error_destroy(e);
  if (c) {
    e = c->ops->get(c, "k", &got);
    KT_CHECK_INT(kn_error_code(e), KN_ERR__NOT_FOUND);
    if (!e) kn_lease_clear(&got);
    kn_error_destroy(e);
    kn_lease_store_destroy(c);
  }
  kn_lease_store_destroy(a);
  kn_lease_store_destroy(b);
}

static void check_bad_spec(const char *spec) {
  kn_error_t *e = NULL;
  kn_lease_store_t *ls = kn_lease_store_open(spec, NULL, &e);
  KT_CHECK_MSG(ls == NULL, "spec %s", spec ? spec : "(null)");
  KT_CHECK_INT(kn_error_code(e), KN_ERR__CONF);
  KT_CHECK(e && strstr(kn_error_string(e), "lease store"));
  kn_error_destroy(e);
  kn_lease_store_destroy(ls);
}

static void test_bad_specs(void) {
  check_bad_spec(NULL);
  check_bad_spec("");
  check_bad_spec("postgres:db");
  check_bad_spec("sqlite:");
  check_bad_spec("memory:");
  check_bad_spec("dynamodb:");
  check_bad_spec("dynamodb:ab");
  check_bad_spec("dynamodb:bad name");
  check_bad_spec("SQLITE:/tmp/x");
}

/* Runs SQL on a separate connection (another process, in effect). */
static void sql(sqlite3 *db, const char *q) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, q, NULL, NULL, &msg);
  KT_CHECK_MSG(rc == SQLITE_OK, "%s: %s", q, msg ? msg : "");
  sqlite3_free(msg);
}

static void expect_locked(kn_error_t *e, int64_t t0, long busy_ms) {
  int64_t took = kn_mono_ms() - t0;
  KT_CHECK_INT(kn_error_code(e), KN_ERR__IO);
  KT_CHECK(e && kn_error_is_retriable(e));
  KT_CHECK_MSG(e && strstr(kn_error_string(e), "locked"), "%s",
               e ? kn_error_string(e) : "success");
  KT_CHECK_MSG(took >= busy_ms && took < busy_ms + KT_PROMPT_MS, "took %lld ms",
               (long long)took);
  kn_error_destroy(e);
}

/* Another connection holding the write lock beyond the busy timeout: a
 * retriable error, and nothing changed. */
static void test_sqlite_locked(void) {
  char path[128];
  path_in_dir(path, sizeof(path), "locked.db");
  kn_error_t *e = NULL;
  kn_lease_store_t *ls = kn_lease_store_sqlite_open(path, 300, &e);
  KT_REQUIRE(ls != NULL, kn_error_destroy(e));
  kn_lease_t l = {.key = "shard-1"}, got;
  int64_t c = -1;
  KT_CHECK_OK(ls->ops->create(ls, &l));

  sqlite3 *other = NULL;
  KT_CHECK(sqlite3_open(path, &other) == SQLITE_OK);
  sql(other, "BEGIN EXCLUSIVE");
  int64_t t0 = kn_mono_ms();
  expect_locked(ls->ops->take(ls, "shard-1", 0, NULL, "w1", &c), t0, 300);
  t0 = kn_mono_ms();
  expect_locked(ls->ops->create(ls, &(kn_lease_t){.key = "shard-2"}), t0, 300);
  /* WAL: readers are not blocked by a writer. */
  e = ls->ops->get(ls, "shard-1", &got);
  KT_CHECK(e == NULL);
  kn_error_destroy(e);
  kn_lease_clear(&got);
  sql(other, "ROLLBACK");

  sqlite3_close(other);

  /* A connection in exclusive locking mode shuts out every other one,
   * readers too (it can only get there while no one else has the file
   * open): opening the store fails, retriably. */
  kn_lease_store_destroy(ls);
  KT_CHECK(sqlite3_open(path, &other) == SQLITE_OK);
  sql(other, "PRAGMA locking_mode = EXCLUSIVE");
  sql(other, "BEGIN EXCLUSIVE");
  sql(other, "UPDATE leases SET leaseCounter = leaseCounter WHERE 0");
  t0 = kn_mono_ms();
  ls = kn_lease_store_sqlite_open(path, 300, &e);
  KT_CHECK(ls == NULL);
  expect_locked(e, t0, 300);
  sql(other, "COMMIT");
  sqlite3_close(other);
  ls = kn_lease_store_sqlite_open(path, 300, &e);
  KT_CHECK(ls != NULL);
  kn_error_destroy(e);
  KT_REQUIRE(ls != NULL);

  e = ls->ops->get(ls, "shard-1", &got);
  KT_CHECK(e == NULL);
  kn_error_destroy(e);
  KT_CHECK(got.owner == NULL);
  KT_CHECK_INT(got.counter, 0);
  kn_lease_clear(&got);
  e = ls->ops->get(ls, "shard-2", &got);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__NOT_FOUND);
  kn_error_destroy(e);
  /* And the store works again. */
  KT_CHECK_OK(ls->ops->take(ls, "shard-1", 0, NULL, "w1", &c));
  KT_CHECK_INT(c, 1);
  kn_lease_store_destroy(ls);
}

static void expect_open_fails(const char *path, const char *what) {
  kn_error_t *e = NULL;
  kn_lease_store_t *ls = kn_lease_store_sqlite_open(path, 100, &e);
  KT_CHECK_MSG(ls == NULL, "%s opened", path);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__IO);
  KT_CHECK_MSG(e && strstr(kn_error_string(e), what), "%s",
               e ? kn_error_string(e) : "success");
  KT_CHECK(e && !kn_error_is_retriable(e));
  kn_error_destroy(e);
  kn_lease_store_destroy(ls);
}

static void test_sqlite_unusable(void) {
  char path[128];
  path_in_dir(path, sizeof(path), "no/such/dir/x.db");
  expect_open_fails(path, "unable to open");

  path_in_dir(path, sizeof(path), "garbage.db");
  FILE *f = fopen(path, "w");
  KT_CHECK(f != NULL);
  if (f) {
    for (int i = 0; i < 512; i++) fputs("not a database ", f);
    fclose(f);
  }
  expect_open_fails(path, "not a database");

  /* A file written by a later schema version is left alone. */
  path_in_dir(path, sizeof(path), "future.db");
  sqlite3 *db = NULL;
  KT_CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  sql(db, "PRAGMA user_version = 99");
  sqlite3_close(db);
  expect_open_fails(path, "schema version 99");

  /* Without root, a read-only file is refused up front. */
  if (geteuid() != 0) {
    kn_error_t *e = NULL;
    path_in_dir(path, sizeof(path), "readonly.db");
    kn_lease_store_destroy(kn_lease_store_sqlite_open(path, 100, &e));
    kn_error_destroy(e);
    chmod(path, 0444);
    expect_open_fails(path, "read-only");
  }
}

/* A new file gets the current schema version; reopening keeps the data. */
static void test_sqlite_schema(void) {
  char path[128], spec[160];
  path_in_dir(path, sizeof(path), "schema.db");
  snprintf(spec, sizeof(spec), "sqlite:%s", path);
  kn_error_t *e = NULL;
  kn_lease_store_t *ls = kn_lease_store_open(spec, NULL, &e);
  KT_REQUIRE(ls != NULL, kn_error_destroy(e));
  KT_CHECK_STR(ls->name, spec);
  kn_lease_t l = {.key = "k", .counter = 3, .extra = "{\"x\":{\"S\":\"y\"}}"};
  KT_CHECK_OK(ls->ops->create(ls, &l));
  kn_lease_store_destroy(ls);

  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  KT_CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  KT_CHECK(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) ==
           SQLITE_OK);
  KT_CHECK(sqlite3_step(st) == SQLITE_ROW);
  KT_CHECK_INT(sqlite3_column_int(st, 0), 3);
  sqlite3_finalize(st);
  KT_CHECK(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) ==
           SQLITE_OK);
  KT_CHECK(sqlite3_step(st) == SQLITE_ROW);
  KT_CHECK_STR((const char *)sqlite3_column_text(st, 0), "wal");
  sqlite3_finalize(st);
  /* Columns carry the DynamoDB attribute names. */
  KT_CHECK(sqlite3_prepare_v2(db,
                              "SELECT leaseCounter, extra FROM leases WHERE "
                              "leaseKey = 'k' AND leaseOwner IS NULL",
                              -1, &st, NULL) == SQLITE_OK);
  KT_CHECK(sqlite3_step(st) == SQLITE_ROW);
  KT_CHECK_INT(sqlite3_column_int(st, 0), 3);
  KT_CHECK_STR((const char *)sqlite3_column_text(st, 1), l.extra);
  sqlite3_finalize(st);
  /* Version 3: the membership tables. */
  sql(db,
      "INSERT INTO members (worker, beat, leases) VALUES ('w-x', 4, 2); "
      "INSERT INTO meta (name, value) VALUES ('epoch', 11)");
  sqlite3_close(db);

  ls = kn_lease_store_open(spec, NULL, &e);
  KT_CHECK(ls != NULL);
  kn_error_destroy(e);
  e = NULL;
  if (ls) {
    kn_lease_t got;
    KT_CHECK_OK(ls->ops->get(ls, "k", &got));
    KT_CHECK_INT(got.counter, 3);
    kn_lease_clear(&got);
    /* Rows written by another connection are the membership. */
    kn_members_t m;
    KT_CHECK_OK(ls->ops->heartbeat(ls, "w-y", 0, 1, 0, 1, NULL, 0, &m));
    KT_CHECK_INT(m.n, 2);
    KT_CHECK_INT(m.epoch, 12);
    if (m.n == 2) {
      KT_CHECK_STR(m.v[0].worker, "w-x");
      KT_CHECK_INT(m.v[0].beat, 4);
      KT_CHECK_INT(m.v[0].leases, 2);
      KT_CHECK_STR(m.v[1].worker, "w-y");
    }
    kn_members_clear(&m);
    kn_lease_store_destroy(ls);
  }
}

/* Files of older schema versions are brought to the current one in place,
 * their leases kept. */
static void test_sqlite_migrate(void) {
  char path[128];
  path_in_dir(path, sizeof(path), "v2.db");
  sqlite3 *db = NULL;
  KT_CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  /* Version 2 as it was written. */
  sql(db,
      "CREATE TABLE leases (leaseKey TEXT PRIMARY KEY NOT NULL, leaseOwner "
      "TEXT, leaseCounter INTEGER NOT NULL, ownerSwitchesSinceCheckpoint "
      "INTEGER NOT NULL DEFAULT 0, checkpoint TEXT, "
      "checkpointSubSequenceNumber INTEGER NOT NULL DEFAULT 0, "
      "pendingCheckpoint TEXT, pendingCheckpointSubSequenceNumber INTEGER, "
      "pendingCheckpointState BLOB, parentShardId TEXT, childShardIds TEXT, "
      "startingHashKey TEXT, endingHashKey TEXT, extra TEXT); "
      "ALTER TABLE leases ADD COLUMN checkpointOwner TEXT; "
      "INSERT INTO leases (leaseKey, leaseOwner, leaseCounter) "
      "VALUES ('old', 'w1', 5); "
      "PRAGMA user_version = 2");
  sqlite3_close(db);
  kn_error_t *e = NULL;
  kn_lease_store_t *ls = kn_lease_store_sqlite_open(path, 1000, &e);
  KT_CHECK_MSG(ls != NULL, "%s", e ? kn_error_string(e) : "");
  kn_error_destroy(e);
  KT_REQUIRE(ls != NULL);
  kn_lease_t got;
  KT_CHECK_OK(ls->ops->get(ls, "old", &got));
  KT_CHECK_STR(got.owner, "w1");
  KT_CHECK_INT(got.counter, 5);
  kn_lease_clear(&got);
  kn_members_t m;
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w1", 0, 1, 1, 0, NULL, 0, &m));
  KT_CHECK_INT(m.n, 1);
  KT_CHECK_INT(m.epoch, 0);
  kn_members_clear(&m);
  kn_lease_store_destroy(ls);

  sqlite3_stmt *st = NULL;
  KT_CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  KT_CHECK(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) ==
           SQLITE_OK);
  KT_CHECK(sqlite3_step(st) == SQLITE_ROW);
  KT_CHECK_INT(sqlite3_column_int(st, 0), 3);
  sqlite3_finalize(st);
  KT_CHECK(sqlite3_prepare_v2(db,
                              "SELECT m.beat, m.leases, e.value FROM members "
                              "m, meta e WHERE m.worker = 'w1' AND e.name = "
                              "'epoch'",
                              -1, &st, NULL) == SQLITE_OK);
  KT_CHECK(sqlite3_step(st) == SQLITE_ROW);
  KT_CHECK_INT(sqlite3_column_int(st, 0), 1);
  KT_CHECK_INT(sqlite3_column_int(st, 1), 1);
  KT_CHECK_INT(sqlite3_column_int(st, 2), 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *p = malloc(1 << 20);
  *len = p ? fread(p, 1, 1 << 20, f) : 0;
  fclose(f);
  return p;
}

/* kn_leases_list (kncat leases) only reads: a file in another journal mode
 * stays in it, an older schema is not migrated, nothing else is written. */
static void test_sqlite_list_reads_only(void) {
  char path[128];
  path_in_dir(path, sizeof(path), "show.db");
  kn_error_t *e = NULL;
  kn_lease_store_destroy(kn_lease_store_sqlite_open(path, 1000, &e));
  KT_CHECK(e == NULL);
  kn_error_destroy(e);
  sqlite3 *db = NULL;
  KT_CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  sql(db,
      "PRAGMA journal_mode = DELETE; "
      "INSERT INTO leases (leaseKey, leaseOwner, leaseCounter) "
      "VALUES ('s1', 'w1', 3)");
  sqlite3_close(db);
  size_t n0 = 0, n1 = 0;
  char *before = slurp(path, &n0);
  char spec[160];
  snprintf(spec, sizeof(spec), "sqlite:%s", path);
  kn_lease_list_t *l = NULL;
  e = kn_leases_list(NULL, spec, &l);
  KT_CHECK_MSG(e == NULL, "%s", e ? kn_error_string(e) : "");
  kn_error_destroy(e);
  KT_CHECK_INT(kn_lease_list_count(l), 1);
  if (kn_lease_list_count(l) == 1) {
    KT_CHECK_STR(kn_lease_list_shard(l, 0), "s1");
    KT_CHECK_STR(kn_lease_list_owner(l, 0), "w1");
  }
  kn_lease_list_destroy(l);
  char *after = slurp(path, &n1);
  KT_CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
  free(before);
  free(after);

  /* An older schema: refused as it is, not migrated. */
  KT_CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  sql(db, "PRAGMA user_version = 2");
  sqlite3_close(db);
  before = slurp(path, &n0);
  e = kn_leases_list(NULL, spec, &l);
  KT_CHECK(e && strstr(kn_error_string(e), "schema version 2"));
  kn_error_destroy(e);
  kn_lease_list_destroy(l);
  after = slurp(path, &n1);
  KT_CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
  free(before);
  free(after);
}

/* A heartbeat while another connection holds the write lock: retriable,
 * nothing changed. */
static void test_sqlite_heartbeat_locked(void) {
  char path[128];
  path_in_dir(path, sizeof(path), "hb-locked.db");
  kn_error_t *e = NULL;
  kn_lease_store_t *ls = kn_lease_store_sqlite_open(path, 300, &e);
  KT_CHECK(ls != NULL);
  kn_error_destroy(e);
  KT_REQUIRE(ls != NULL);
  kn_members_t m;
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w1", 0, 1, 0, 0, NULL, 0, &m));
  kn_members_clear(&m);
  sqlite3 *other = NULL;
  KT_CHECK(sqlite3_open(path, &other) == SQLITE_OK);
  sql(other, "BEGIN EXCLUSIVE");
  int64_t t0 = kn_mono_ms();
  e = ls->ops->heartbeat(ls, "w2", 0, 1, 0, 5, NULL, 0, &m);
  KT_CHECK(m.n == 0 && m.v == NULL);
  expect_locked(e, t0, 300);
  sql(other, "ROLLBACK");
  sqlite3_close(other);
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w1", 0, 2, 0, 0, NULL, 0, &m));
  KT_CHECK_INT(m.n, 1);
  KT_CHECK_INT(m.epoch, 0);
  kn_members_clear(&m);
  kn_lease_store_destroy(ls);
}

static void test_lease_copy(void) {
  char *parents[] = {"a", "b"};
  unsigned char state[] = {1, 2, 3};
  kn_lease_t src = {.key = "k",
                    .owner = "o",
                    .counter = 4,
                    .checkpoint = KN_CKPT_SHARD_END,
                    .pending = "p",
                    .pending_state = state,
                    .pending_state_len = 3,
                    .parents = parents,
                    .n_parents = 2,
                    .extra = "{}"},
             dst;
  KT_REQUIRE(kn_lease_copy(&dst, &src) == 0);
  KT_CHECK_STR(dst.key, "k");
  KT_CHECK(dst.key != src.key);
  KT_CHECK_STR(dst.parents[1], "b");
  KT_CHECK(memcmp(dst.pending_state, state, 3) == 0);
  KT_CHECK(kn_lease_is_shard_end(&dst));
  kn_lease_clear(&dst);
  KT_CHECK(dst.key == NULL && dst.n_parents == 0);
  kn_lease_clear(NULL);
  kn_lease_array_free(NULL, 0);
  KT_CHECK(!kn_lease_is_shard_end(&dst));
}

static void cleanup_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The memory store's membership items: each heartbeat answers its own
 * item, leave and publish act on one item, members merges them all. */
static void test_memory_items(void) {
  kn_error_t *e = NULL;
  kn_lease_store_t *ls = kn_lease_store_open("memory", NULL, &e);
  KT_REQUIRE(ls != NULL);
  kn_members_t m;
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w1", 0, 1, 2, 1, NULL, 0, &m));
  kn_members_clear(&m);
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w2", 1, 1, 3, 2, NULL, 0, &m));
  KT_CHECK_INT((int)m.n, 1);
  KT_CHECK_STR(m.v[0].worker, "w2");
  KT_CHECK_INT((int)m.epoch, 2);
  kn_members_clear(&m);
  KT_CHECK_OK(ls->ops->publish(ls, 1, "nb=2 epoch=3 seq=9", NULL, 0));
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w2", 1, 2, 3, 0, NULL, 0, &m));
  KT_CHECK_STR(m.digest, "nb=2 epoch=3 seq=9");
  kn_members_clear(&m);
  /* w1 moves to item 1 and leaves item 0 */
  KT_CHECK_OK(ls->ops->heartbeat(ls, "w1", 1, 2, 2, 0, NULL, 0, &m));
  kn_members_clear(&m);
  KT_CHECK_OK(ls->ops->members(ls, &m));
  KT_CHECK_INT((int)m.n, 3); /* w1 in both items until it leaves */
  KT_CHECK_INT((int)m.epoch, 3);
  kn_members_clear(&m);
  KT_CHECK_OK(ls->ops->leave(ls, "w1", 0));
  char *forget[1] = {"w2"};
  KT_CHECK_OK(ls->ops->publish(ls, 1, "nb=2 epoch=3 seq=10", forget, 1));
  KT_CHECK_OK(ls->ops->members(ls, &m));
  KT_CHECK_INT((int)m.n, 1);
  KT_CHECK_STR(m.v[0].worker, "w1");
  KT_CHECK_INT(m.v[0].bucket, 1);
  kn_members_clear(&m);
  e = ls->ops->heartbeat(ls, "w1", KN_MEMBERS_BUCKETS_MAX, 3, 0, 0, NULL, 0,
                         &m);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
  kn_lease_store_destroy(ls);
}

int main(void) {
  KT_RUN(test_memory_items);
  snprintf(dir, sizeof(dir), "/tmp/kn-lease-test-XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  KT_RUN(test_lease_copy);
  KT_RUN(test_bad_specs);
  KT_RUN(test_memory_instances);
  KT_RUN(test_memory_conformance);
  KT_RUN(test_sqlite_conformance);
  KT_RUN(test_sqlite_schema);
  KT_RUN(test_sqlite_migrate);
  KT_RUN(test_sqlite_list_reads_only);
  KT_RUN(test_sqlite_heartbeat_locked);
  KT_RUN(test_sqlite_locked);
  KT_RUN(test_sqlite_unusable);
  cleanup_dir();
  fprintf(stderr, "conformance: %d checks\n", total_checks);
  return KT_DONE();
}
