/* The enumerator of the stream-processor model: parents before children
 * over splits, merges and expired parents; the assigners; readers
 * joining and leaving (rescaling); and snapshots taken at every step that
 * restore to an enumerator doing exactly what the original does. */
#include <stdlib.h>

#include "kinesis/hashkey.h"
#include "kinesis/shard.h"
#include "kn/enumerator.h"
#include "kt.h"
#include "kt_stream.h"

#define MAXS "340282366920938463463374607431768211455"
#define HALF "170141183460469231731687303715884105728"
#define HALF1 "170141183460469231731687303715884105727"
#define Q1 "85070591730234615865843651857942052864"
#define Q1_1 "85070591730234615865843651857942052863"
#define Q3 "255211775190703847597530955573826158592"
#define Q3_1 "255211775190703847597530955573826158591"

static const char *sid(int n) {
  static char b[8][32];
  static int k;
  char *s = b[k++ % 8];
  snprintf(s, 32, "shardId-%012d", n);
  return s;
}

static void add(kn_shard_list_t *l, int id, int parent, int adj,
                const char *start, const char *end, int closed) {
  char p[32], a[32], i[32];
  snprintf(i, sizeof(i), "%s", sid(id));
  snprintf(p, sizeof(p), "%s", parent >= 0 ? sid(parent) : "");
  snprintf(a, sizeof(a), "%s", adj >= 0 ? sid(adj) : "");
  kn_shard_desc_t d = {i,
                       parent >= 0 ? p : NULL,
                       adj >= 0 ? a : NULL,
                       start,
                       end,
                       "100",
                       closed ? "9223372036854775807" : NULL};
  if (l && kn_shard_list_add(l, &d)) fprintf(stderr, "add %s failed\n", i);
}

/* The stream after each reshard of the scenario:
 *   v0: 0 [0, HALF1], 1 [HALF, MAX]
 *   v1: 0 split into 2 [0, Q1_1] and 3 [Q1, HALF1]
 *   v2: 2 and 3 merged into 4 [0, HALF1]
 *   v3: 1 split into 5 [HALF, Q3_1] and 6 [Q3, MAX]; 0 aged out */
static kn_shard_list_t *stream(int v) {
  kn_shard_list_t *l = kn_shard_list_new();
  if (!l) return NULL;
  if (v < 3) add(l, 0, -1, -1, "0", HALF1, v >= 1);
  add(l, 1, -1, -1, HALF, MAXS, v >= 3);
  if (v >= 1) {
    add(l, 2, 0, -1, "0", Q1_1, v >= 2);
    add(l, 3, 0, -1, Q1, HALF1, v >= 2);
  }
  if (v >= 2) add(l, 4, 2, 3, "0", HALF1, 0);
  if (v >= 3) {
    add(l, 5, 1, -1, HALF, Q3_1, 0);
    add(l, 6, 1, -1, Q3, MAXS, 0);
  }
  return l;
}

static int listing(kn_enumerator_t *en, int v, int64_t now) {
  kn_shard_list_t *l = stream(v);
  if (!l) return -1;
  kn_err_t e = kn_enumerator_shards(en, l, now);
  kn_shard_list_destroy(l);
  return e ? -1 : 0;
}

/* Actions as text: "A shard reader start;" or "R shard reader;". */
static void drain(kn_enumerator_t *en, char *buf, size_t size) {
  kn_enum_action_t a;
  buf[0] = '\0';
  while (kn_enumerator_next_action(en, &a)) {
    char pos[160], line[2048];
    kn_position_format(&a.start, pos, sizeof(pos));
    if (a.kind == KN_ENUM_ASSIGN)
      snprintf(line, sizeof(line), "A %s %s %s;", a.shard_id + 18, a.reader_id,
               pos);
    else
      snprintf(line, sizeof(line), "R %s %s;", a.shard_id + 18, a.reader_id);
    strncat(buf, line, size - strlen(buf) - 1);
  }
}

static kn_enum_shard_state_t st(kn_enumerator_t *en, int id) {
  return kn_enumerator_shard_state(en, sid(id), NULL, 0);
}

static void test_split_merge_expired(void) {
  kn_position_t th;
  kn_position_trim_horizon(&th);
  kn_enumerator_t *en = kn_enumerator_new(&th, KN_ASSIGN_HASH_RANGE);
  char acts[2048];
  if (!en) return;
  KT_CHECK_INT(kn_enumerator_due_ms(en, 5), 5); /* list at once */
  KT_CHECK(!kn_enumerator_reader_joined(en, "r1"));
  KT_CHECK(!kn_enumerator_reader_joined(en, "r2"));
  KT_CHECK(!listing(en, 0, 1000));
  KT_CHECK_INT(kn_enumerator_due_ms(en, 1000), 11000);
  drain(en, acts, sizeof(acts));
  /* The lower half of the key space goes to the first reader. */
  KT_CHECK_STR(acts, "A 00 r1 trim_horizon;A 01 r2 trim_horizon;");
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "");

  /* Split: the children wait for their parent. */
  KT_CHECK(!listing(en, 1, 2000));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "");
  KT_CHECK_INT(st(en, 2), KN_ENUM_WAITING);
  KT_CHECK(!kn_enumerator_finished(en, "r1", sid(0), NULL));
  KT_CHECK_INT(st(en, 0), KN_ENUM_FINISHED);
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 02 r1 trim_horizon;A 03 r1 trim_horizon;");

  /* Merge: the child waits for both parents. */
  KT_CHECK(!listing(en, 2, 3000));
  KT_CHECK(!kn_enumerator_finished(en, "r1", sid(2), NULL));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "");
  KT_CHECK_INT(st(en, 4), KN_ENUM_WAITING);
  KT_CHECK(!kn_enumerator_finished(en, "r1", sid(3), NULL));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 04 r1 trim_horizon;");
  /* A finished report again (after a restore) changes nothing. */
  KT_CHECK(!kn_enumerator_finished(en, "r1", sid(3), NULL));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "");

  /* 0 ages out of the listing: pruned; its children stay finished. */
  KT_CHECK(!listing(en, 3, 4000));
  KT_CHECK_INT(st(en, 0), KN_ENUM_UNKNOWN);
  KT_CHECK_INT(st(en, 3), KN_ENUM_FINISHED);
  KT_CHECK_INT(st(en, 5), KN_ENUM_WAITING);
  KT_CHECK_INT(kn_enumerator_finished(en, "r1", sid(99), NULL),
               KN_ERR__NOT_FOUND);
  /* Children reported with the end (ChildShards) join the graph. */
  kn_shard_list_t *kids = kn_shard_list_new();
  add(kids, 7, 4, -1, "0", Q1_1, 0);
  KT_CHECK(!kn_enumerator_finished(en, "r1", sid(4), kids));
  kn_shard_list_destroy(kids);
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 07 r1 trim_horizon;");
  KT_CHECK(!kn_enumerator_finished(en, "r2", sid(1), NULL));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 05 r2 trim_horizon;A 06 r2 trim_horizon;");
  KT_CHECK_INT(kn_enumerator_reader_shards(en, "r2"), 2);
  kn_enumerator_destroy(en);
}

/* A parent never seen (expired before the first listing) counts as
 * finished; a parent seen and unassigned that ages out too. */
static void test_expired_parents(void) {
  kn_position_t th;
  kn_position_trim_horizon(&th);
  kn_enumerator_t *en = kn_enumerator_new(&th, KN_ASSIGN_SHARD_COUNT);
  char acts[1024];
  if (!en) return;
  kn_shard_list_t *l = kn_shard_list_new();
  add(l, 4, 2, 3, "0", HALF1, 0); /* parents 2 and 3 long gone */
  add(l, 1, -1, -1, HALF, MAXS, 1);
  add(l, 5, 1, -1, HALF, Q3_1, 0);
  KT_CHECK(!kn_enumerator_shards(en, l, 0));
  kn_shard_list_destroy(l);
  KT_CHECK_INT(st(en, 4), KN_ENUM_READY);
  KT_CHECK_INT(st(en, 5), KN_ENUM_WAITING);
  /* No reader yet: nothing offered. */
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "");
  /* 1 ages out before anyone read it. */
  l = kn_shard_list_new();
  add(l, 4, 2, 3, "0", HALF1, 0);
  add(l, 5, 1, -1, HALF, Q3_1, 0);
  KT_CHECK(!kn_enumerator_shards(en, l, 1));
  kn_shard_list_destroy(l);
  KT_CHECK_INT(st(en, 1), KN_ENUM_UNKNOWN);
  KT_CHECK(!kn_enumerator_reader_joined(en, "a"));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 04 a trim_horizon;A 05 a trim_horizon;");
  kn_enumerator_destroy(en);
}

/* LATEST: closed shards of the first listing are finished at once, open
 * ones start at LATEST, shards born later at TRIM_HORIZON. */
static void test_latest(void) {
  kn_position_t lt;
  kn_position_latest(&lt);
  kn_enumerator_t *en = kn_enumerator_new(&lt, KN_ASSIGN_HASH_RANGE);
  char acts[1024];
  if (!en) return;
  KT_CHECK(!kn_enumerator_reader_joined(en, "x"));
  KT_CHECK(!listing(en, 1, 0));
  KT_CHECK_INT(st(en, 0), KN_ENUM_FINISHED);
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 01 x latest;A 02 x latest;A 03 x latest;");
  KT_CHECK(!listing(en, 2, 1));
  KT_CHECK(!kn_enumerator_finished(en, "x", sid(2), NULL));
  KT_CHECK(!kn_enumerator_finished(en, "x", sid(3), NULL));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 04 x trim_horizon;");
  kn_enumerator_destroy(en);
}

/* A reader leaves: its shards go to the others from the positions its
 * last checkpoint holds. */
static void test_reader_left(void) {
  kn_position_t th, p;
  kn_position_trim_horizon(&th);
  kn_enumerator_t *en = kn_enumerator_new(&th, KN_ASSIGN_SHARD_COUNT);
  char acts[1024], who[KN_ENUM_ID_MAX];
  if (!en) return;
  KT_CHECK(!kn_enumerator_reader_joined(en, "a"));
  KT_CHECK(!kn_enumerator_reader_joined(en, "b"));
  KT_CHECK(!listing(en, 1, 0));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 00 a trim_horizon;A 01 b trim_horizon;");
  KT_CHECK(!kn_enumerator_reader_left(en, "a"));
  KT_CHECK(!kn_enumerator_reader_left(en, "nobody"));
  KT_CHECK(!kn_position_after(
      &p, "49590338271490256608559692538361571095921575989136588898", 3));
  KT_CHECK(!kn_enumerator_shard_returned(en, sid(0), &p));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts,
               "A 00 b "
               "after:49590338271490256608559692538361571095921575989136588898/"
               "3;");
  KT_CHECK_INT(kn_enumerator_shard_state(en, sid(0), who, sizeof(who)),
               KN_ENUM_ASSIGNED);
  KT_CHECK_STR(who, "b");
  /* The last reader leaves: shards wait for one to come. */
  KT_CHECK(!kn_enumerator_reader_left(en, "b"));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "");
  KT_CHECK_INT(st(en, 0), KN_ENUM_READY);
  KT_CHECK(!kn_enumerator_reader_joined(en, "c"));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts,
               "A 00 c "
               "after:49590338271490256608559692538361571095921575989136588898/"
               "3;A 01 c trim_horizon;");
  KT_CHECK_INT(kn_enumerator_reader_joined(en, ""), KN_ERR__INVALID_ARG);
  kn_enumerator_destroy(en);
}

/* A reader that leaves takes no action queued for it: a REVOKE or ASSIGN
 * not yet taken with next_action() would reach a reader the application
 * was told is gone (and, were it to come back under its id, give it a
 * shard that another reader then reads too). */
static void test_reader_left_queued(void) {
  kn_position_t th;
  kn_position_trim_horizon(&th);
  kn_enumerator_t *en = kn_enumerator_new(&th, KN_ASSIGN_SHARD_COUNT);
  char acts[1024];
  if (!en) return;
  KT_CHECK(!kn_enumerator_reader_joined(en, "a"));
  KT_CHECK(!listing(en, 1, 0));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 00 a trim_horizon;A 01 a trim_horizon;");
  /* b joins: a rebalance queues a REVOKE for a, which then leaves. */
  KT_CHECK(!kn_enumerator_reader_joined(en, "b"));
  KT_CHECK(!kn_enumerator_rebalance(en));
  KT_CHECK(!kn_enumerator_reader_left(en, "a"));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 00 b trim_horizon;A 01 b trim_horizon;");
  kn_enumerator_destroy(en);
}

/* Four open shards in quarters of the key space. */
static kn_shard_list_t *quarters(void) {
  kn_shard_list_t *l = kn_shard_list_new();
  add(l, 0, -1, -1, "0", Q1_1, 0);
  add(l, 1, -1, -1, Q1, HALF1, 0);
  add(l, 2, -1, -1, HALF, Q3_1, 0);
  add(l, 3, -1, -1, Q3, MAXS, 0);
  return l;
}

/* Rescaling from 1 to 2 readers, then 2 to 3 readers, by shard count. */
static void test_rescale_count(void) {
  kn_position_t th;
  kn_position_trim_horizon(&th);
  kn_enumerator_t *en = kn_enumerator_new(&th, KN_ASSIGN_SHARD_COUNT);
  char acts[2048];
  if (!en) return;
  kn_shard_list_t *l = quarters();
  KT_CHECK(!kn_enumerator_reader_joined(en, "a"));
  KT_CHECK(!kn_enumerator_shards(en, l, 0));
  kn_shard_list_destroy(l);
  drain(en, acts, sizeof(acts));
  KT_CHECK_INT(kn_enumerator_reader_shards(en, "a"), 4);
  KT_CHECK(!kn_enumerator_reader_joined(en, "b"));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, ""); /* joining moves nothing by itself */
  KT_CHECK(!kn_enumerator_rebalance(en));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "R 03 a;R 02 a;");
  KT_CHECK_INT(st(en, 3), KN_ENUM_REVOKING);
  /* Not offered before it is handed back. */
  KT_CHECK(!kn_enumerator_shard_returned(en, sid(3), NULL));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 03 b trim_horizon;");
  kn_position_t p;
  KT_CHECK(!kn_position_after(&p, "77", 0));
  KT_CHECK(!kn_enumerator_shard_returned(en, sid(2), &p));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 02 b after:77/0;");
  KT_CHECK_INT(kn_enumerator_reader_shards(en, "a"), 2);
  KT_CHECK_INT(kn_enumerator_reader_shards(en, "b"), 2);
  /* Balanced: rebalancing again moves nothing. */
  KT_CHECK(!kn_enumerator_rebalance(en));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "");
  KT_CHECK(!kn_enumerator_reader_joined(en, "c"));
  KT_CHECK(!kn_enumerator_rebalance(en));
  drain(en, acts, sizeof(acts));
  /* 2, 2, 0: one shard moves (a second would not narrow any gap). */
  KT_CHECK_STR(acts, "R 01 a;");
  KT_CHECK(!kn_enumerator_shard_returned(en, sid(1), NULL));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "A 01 c trim_horizon;");
  KT_CHECK_INT(kn_enumerator_reader_shards(en, "a"), 1);
  KT_CHECK_INT(kn_enumerator_reader_shards(en, "b"), 2);
  KT_CHECK_INT(kn_enumerator_reader_shards(en, "c"), 1);
  kn_enumerator_destroy(en);
}

/* Hash-range assignment follows the key space across a rescale. */
static void test_rescale_hash(void) {
  kn_position_t th;
  kn_position_trim_horizon(&th);
  kn_enumerator_t *en = kn_enumerator_new(&th, KN_ASSIGN_HASH_RANGE);
  char acts[2048];
  if (!en) return;
  kn_shard_list_t *l = quarters();
  KT_CHECK(!kn_enumerator_reader_joined(en, "a"));
  KT_CHECK(!kn_enumerator_reader_joined(en, "b"));
  KT_CHECK(!kn_enumerator_shards(en, l, 0));
  kn_shard_list_destroy(l);
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts,
               "A 00 a trim_horizon;A 01 a trim_horizon;A 02 b "
               "trim_horizon;A 03 b trim_horizon;");
  /* Four readers: one quarter each; midpoints of 1 and 2 move. */
  KT_CHECK(!kn_enumerator_reader_joined(en, "c"));
  KT_CHECK(!kn_enumerator_reader_joined(en, "d"));
  KT_CHECK(!kn_enumerator_rebalance(en));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "R 01 a;R 02 b;R 03 b;");
  for (int i = 1; i <= 3; i++)
    KT_CHECK(!kn_enumerator_shard_returned(en, sid(i), NULL));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts,
               "A 01 b trim_horizon;A 02 c trim_horizon;A 03 d "
               "trim_horizon;");
  kn_enumerator_destroy(en);
}

static void test_throughput(void) {
  kn_position_t th;
  kn_position_trim_horizon(&th);
  kn_enumerator_t *en = kn_enumerator_new(&th, KN_ASSIGN_THROUGHPUT);
  char acts[2048];
  if (!en) return;
  kn_shard_list_t *l = quarters();
  KT_CHECK(!kn_enumerator_shards(en, l, 0));
  kn_shard_list_destroy(l);
  KT_CHECK(!kn_enumerator_shard_load(en, sid(0), 900));
  KT_CHECK(!kn_enumerator_shard_load(en, sid(1), 100));
  KT_CHECK(!kn_enumerator_shard_load(en, sid(2), 100));
  KT_CHECK(!kn_enumerator_shard_load(en, sid(3), 100));
  KT_CHECK_INT(kn_enumerator_shard_load(en, sid(9), 1), KN_ERR__NOT_FOUND);
  KT_CHECK(!kn_enumerator_reader_joined(en, "a"));
  KT_CHECK(!kn_enumerator_reader_joined(en, "b"));
  drain(en, acts, sizeof(acts));
  /* The hot shard alone on one reader, the three cool ones on the other. */
  KT_CHECK_STR(acts,
               "A 00 a trim_horizon;A 01 b trim_horizon;A 02 b "
               "trim_horizon;A 03 b trim_horizon;");
  KT_CHECK(!kn_enumerator_rebalance(en));
  drain(en, acts, sizeof(acts));
  KT_CHECK_STR(acts, "");
  kn_enumerator_destroy(en);
}

static size_t always_last(void *opaque, const kn_enum_shard_info_t *shard,
                          const kn_enum_reader_info_t *readers, size_t n) {
  int *calls = opaque;
  (*calls)++;
  (void)readers;
  return strcmp(shard->hash_key_start, "0") == 0 ? 99 : n - 1;
}

static void test_custom_assigner(void) {
  kn_enumerator_t *en = kn_enumerator_new(NULL, KN_ASSIGN_HASH_RANGE);
  char acts[2048];
  int calls = 0;
  if (!en) return;
  kn_enumerator_set_assign_fn(en, always_last, &calls);
  kn_shard_list_t *l = quarters();
  KT_CHECK(!kn_enumerator_shards(en, l, 0));
  kn_shard_list_destroy(l);
  KT_CHECK(!kn_enumerator_reader_joined(en, "b"));
  KT_CHECK(!kn_enumerator_reader_joined(en, "a"));
  drain(en, acts, sizeof(acts));
  /* Out of range counts as the first reader (in id order: a). */
  KT_CHECK_STR(acts,
               "A 00 a trim_horizon;A 01 b trim_horizon;A 02 b "
               "trim_horizon;A 03 b trim_horizon;");
  KT_CHECK_INT(calls, 4);
  kn_enumerator_destroy(en);
}

/* ---- snapshots ---- */

/* The scenario as numbered steps; each returns the actions' text. */
static void step(kn_enumerator_t *en, int k, char *acts, size_t size) {
  kn_position_t p;
  switch (k) {
    case 0:
      kn_enumerator_reader_joined(en, "r1");
      kn_enumerator_reader_joined(en, "r2");
      break;
    case 1:
      listing(en, 0, 100);
      break;
    case 2:
      listing(en, 1, 200);
      break;
    case 3:
      kn_enumerator_finished(en, "r1", sid(0), NULL);
      break;
    case 4:
      kn_enumerator_shard_load(en, sid(2), 500);
      kn_enumerator_reader_joined(en, "r3");
      kn_enumerator_rebalance(en);
      break;
    case 5:
      kn_position_after(&p, "1234", 2);
      kn_enumerator_shard_returned(en, sid(3), &p);
      kn_enumerator_shard_returned(en, sid(1), NULL);
      break;
    case 6:
      listing(en, 2, 300);
      kn_enumerator_finished(en, "r1", sid(2), NULL);
      break;
    case 7:
      kn_enumerator_reader_left(en, "r2");
      break;
    case 8:
      kn_enumerator_finished(en, "r3", sid(3), NULL);
      break;
    case 9:
      listing(en, 3, 400);
      break;
    case 10:
      kn_enumerator_finished(en, "r3", sid(1), NULL);
      break;
  }
  drain(en, acts, size);
}
#define STEPS 11

static kn_enumerator_t *roundtrip(const kn_enumerator_t *en) {
  void *b = NULL, *b2 = NULL;
  size_t n = 0, n2 = 0;
  kn_enumerator_t *r = NULL;
  kn_error_t *e = kn_enumerator_snapshot(en, &b, &n);
  KT_CHECK(!e);
  kn_error_destroy(e);
  if (!b) return NULL;
  e = kn_enumerator_restore(b, n, KN_ASSIGN_HASH_RANGE, &r);
  KT_CHECK(!e);
  kn_error_destroy(e);
  if (r) {
    /* The same state gives the same bytes. */
    e = kn_enumerator_snapshot(r, &b2, &n2);
    kn_error_destroy(e);
    KT_CHECK(b2 && n2 == n && memcmp(b, b2, n) == 0);
  }
  free(b);
  free(b2);
  return r;
}

/* After every step: restore a snapshot and run the rest of the scenario
 * on both; they must act alike at every later step. */
static void test_restore_any_step(void) {
  char a1[2048], a2[2048];
  for (int cut = 0; cut < STEPS; cut++) {
    kn_enumerator_t *en = kn_enumerator_new(NULL, KN_ASSIGN_HASH_RANGE);
    if (!en) return;
    for (int k = 0; k <= cut; k++) step(en, k, a1, sizeof(a1));
    kn_enumerator_t *r = roundtrip(en);
    for (int k = cut + 1; r && k < STEPS; k++) {
      step(en, k, a1, sizeof(a1));
      step(r, k, a2, sizeof(a2));
      KT_CHECK_MSG(strcmp(a1, a2) == 0, "cut %d step %d: \"%s\" != \"%s\"", cut,
                   k, a1, a2);
    }
    if (r) {
      /* Both end in the same state. */
      for (int i = 0; i <= 7; i++) KT_CHECK_INT(st(en, i), st(r, i));
    }
    kn_enumerator_destroy(r);
    kn_enumerator_destroy(en);
  }
}

/* An ASSIGN not yet popped when the snapshot is taken is offered again by
 * the restored enumerator. */
static void test_snapshot_pending_actions(void) {
  kn_enumerator_t *en = kn_enumerator_new(NULL, KN_ASSIGN_SHARD_COUNT);
  kn_enum_action_t a;
  char acts[1024];
  if (!en) return;
  KT_CHECK(!kn_enumerator_reader_joined(en, "a"));
  KT_CHECK(!listing(en, 0, 0));
  KT_CHECK(kn_enumerator_next_action(en, &a)); /* 0 popped, 1 queued */
  KT_CHECK_STR(a.shard_id, sid(0));
  kn_enumerator_t *r = roundtrip(en);
  if (r) {
    KT_CHECK_INT(st(r, 0), KN_ENUM_ASSIGNED);
    drain(r, acts, sizeof(acts));
    KT_CHECK_STR(acts, "A 01 a trim_horizon;");
  }
  kn_enumerator_destroy(r);
  kn_enumerator_destroy(en);
}

static void test_snapshot_corrupt(void) {
  kn_enumerator_t *en = kn_enumerator_new(NULL, KN_ASSIGN_HASH_RANGE), *r;
  void *b = NULL;
  size_t n = 0;
  if (!en) return;
  kn_enumerator_reader_joined(en, "a");
  listing(en, 2, 0);
  kn_error_t *e = kn_enumerator_snapshot(en, &b, &n);
  kn_error_destroy(e);
  if (!b) {
    kn_enumerator_destroy(en);
    return;
  }
  unsigned char *p = b;
  /* Every truncation and every flipped byte is refused cleanly. */
  for (size_t i = 0; i < n; i++) {
    e = kn_enumerator_restore(b, i, KN_ASSIGN_HASH_RANGE, &r);
    KT_CHECK(e &&
             (kn_error_code(e) == KN_ERR__CORRUPT ||
              kn_error_code(e) == KN_ERR__NOMEM) &&
             !r);
    kn_error_destroy(e);
    p[i] ^= 0x5a;
    e = kn_enumerator_restore(b, n, KN_ASSIGN_HASH_RANGE, &r);
    KT_CHECK(e && !r);
    kn_error_destroy(e);
    p[i] ^= 0x5a;
  }
  /* A newer format is refused with its number. */
  e = kn_enumerator_restore("KNRS\0\1\0\0\0\0\0\0", 12, KN_ASSIGN_HASH_RANGE,
                            &r);
  KT_CHECK(e && strstr(kn_error_string(e), "KNES"));
  kn_error_destroy(e);
  kn_enumerator_destroy(en);
  free(b);
}

/* ---- random runs against a model ---- */

#define RM_SHARDS 64
#define RM_READERS 4

typedef struct rm_shard {
  int exists, open, aged; /* in the stream; open; aged out of listings */
  int parent, adj;        /* or -1 */
  kn_u128_t start, end;
  int finished; /* reported finished, or aged out unheld */
  int holder;   /* reader reading it, or -1 */
  int revoked;  /* a REVOKE came: waits to be handed back */
  int assigns;  /* ASSIGN actions seen */
} rm_shard_t;

typedef struct rm {
  rm_shard_t s[RM_SHARDS];
  int n;
  int joined[RM_READERS];
  uint64_t rnd;
  int violations;
} rm_t;

static const char *rm_reader(int r) {
  static const char *names[RM_READERS] = {"ra", "rb", "rc", "rd"};
  return names[r];
}

static int rm_reader_ix(const char *id) {
  for (int r = 0; r < RM_READERS; r++)
    if (strcmp(rm_reader(r), id) == 0) return r;
  return -1;
}

static int rm_new_shard(rm_t *m, int parent, int adj, kn_u128_t a,
                        kn_u128_t b) {
  if (m->n >= RM_SHARDS) return -1;
  rm_shard_t *x = &m->s[m->n];
  memset(x, 0, sizeof(*x));
  x->exists = x->open = 1;
  x->parent = parent;
  x->adj = adj;
  x->start = a;
  x->end = b;
  x->holder = -1;
  return m->n++;
}

static kn_shard_list_t *rm_list(rm_t *m, int only) {
  kn_shard_list_t *l = kn_shard_list_new();
  for (int i = 0; l && i < m->n; i++) {
    rm_shard_t *x = &m->s[i];
    if (!x->exists || x->aged || (only >= 0 && i != only)) continue;
    kt_shard_add(l, i, x->parent, x->adj, x->start, x->end, x->open);
  }
  return l;
}

/* A parent in the model that is neither finished nor aged out. */
static int rm_parent_open(const rm_t *m, int p) {
  return p >= 0 && !m->s[p].finished && !m->s[p].aged;
}

static void rm_take(rm_t *m, kn_enumerator_t *en) {
  kn_enum_action_t a;
  while (kn_enumerator_next_action(en, &a)) {
    int i = atoi(a.shard_id + 8), r = rm_reader_ix(a.reader_id);
    rm_shard_t *x = &m->s[i];
    if (r < 0 || !m->joined[r]) m->violations++;
    if (a.kind == KN_ENUM_ASSIGN) {
      /* Never twice at once, never a finished shard, parents first. */
      if (x->holder >= 0 || x->finished || rm_parent_open(m, x->parent) ||
          rm_parent_open(m, x->adj)) {
        m->violations++;
        fprintf(stderr,
                "bad assign of %d to %s (holder %d fin %d; parents %d %d, "
                "enumerator says %d %d)\n",
                i, a.reader_id, x->holder, x->finished, x->parent, x->adj,
                x->parent >= 0 ? (int)st(en, x->parent) : -1,
                x->adj >= 0 ? (int)st(en, x->adj) : -1);
      }
      x->holder = r;
      x->revoked = 0;
      x->assigns++;
    } else {
      if (x->holder != r) m->violations++;
      x->revoked = 1;
    }
  }
}

/* The enumerator agrees with the model about every shard. */
static void rm_agree(rm_t *m, kn_enumerator_t *en) {
  for (int i = 0; i < m->n; i++) {
    rm_shard_t *x = &m->s[i];
    char who[KN_ENUM_ID_MAX];
    kn_enum_shard_state_t st =
        kn_enumerator_shard_state(en, sid(i), who, sizeof(who));
    int ok;
    if (x->finished)
      ok = st == KN_ENUM_FINISHED || st == KN_ENUM_UNKNOWN;
    else if (x->holder >= 0)
      ok = (st == KN_ENUM_ASSIGNED || st == KN_ENUM_REVOKING) &&
           strcmp(who, rm_reader(x->holder)) == 0;
    else
      ok = st != KN_ENUM_ASSIGNED && st != KN_ENUM_FINISHED;
    if (!ok) {
      m->violations++;
      fprintf(stderr, "shard %d: model fin %d holder %d, enumerator %d %s\n", i,
              x->finished, x->holder, (int)st, who);
    }
  }
}

static int rm_pick(rm_t *m, int n) {
  return (int)(kt_rand(&m->rnd) % (uint64_t)n);
}

static void rm_step(rm_t *m, kn_enumerator_t **enp, int64_t now) {
  kn_enumerator_t *en = *enp;
  int op = rm_pick(m, 11), i = rm_pick(m, m->n), r = rm_pick(m, RM_READERS);
  rm_shard_t *x = &m->s[i];
  switch (op) {
    case 0: { /* split */
      kn_u128_t mid;
      if (!x->open || kn_u128_midpoint(x->start, x->end, &mid) ||
          m->n + 2 > RM_SHARDS)
        break;
      x->open = 0;
      rm_new_shard(m, i, -1, x->start, kn_u128_sub(mid, kn_u128_make(0, 1)));
      rm_new_shard(m, i, -1, mid, x->end);
      break;
    }
    case 1: { /* merge with the open shard right above */
      if (!x->open || m->n + 1 > RM_SHARDS) break;
      for (int j = 0; j < m->n; j++) {
        rm_shard_t *y = &m->s[j];
        if (j != i && y->open &&
            kn_u128_eq(y->start, kn_u128_add(x->end, kn_u128_make(0, 1)))) {
          x->open = y->open = 0;
          rm_new_shard(m, i, j, x->start, y->end);
          break;
        }
      }
      break;
    }
    case 2: { /* a listing */
      kn_shard_list_t *l = rm_list(m, -1);
      if (l) kn_enumerator_shards(en, l, now);
      kn_shard_list_destroy(l);
      /* Shards aged out unheld count as finished once a listing shows
       * it (held ones: when their reader reports them). */
      for (int j = 0; j < m->n; j++)
        if (m->s[j].aged && m->s[j].holder < 0) m->s[j].finished = 1;
      break;
    }
    case 3: /* a closed shard ages out, after its parents */
      if (!x->open && !x->aged && (x->parent < 0 || m->s[x->parent].aged) &&
          (x->adj < 0 || m->s[x->adj].aged))
        x->aged = 1;
      break;
    case 4:
    case 5: /* the holder reads a closed (or aged) shard to its end */
      if (x->holder >= 0 && !x->revoked && (!x->open || x->aged)) {
        kn_shard_list_t *kids = NULL;
        if (rm_pick(m, 2)) { /* with ChildShards */
          kids = kn_shard_list_new();
          for (int j = 0; kids && j < m->n; j++)
            if (m->s[j].parent == i || m->s[j].adj == i) {
              kn_shard_list_t *one = rm_list(m, j);
              if (one && kn_shard_list_count(one))
                kn_shard_list_add(
                    kids,
                    &(kn_shard_desc_t){
                        kn_shard_id(kn_shard_list_get(one, 0)),
                        kn_shard_parent_id(kn_shard_list_get(one, 0)),
                        kn_shard_adjacent_parent_id(kn_shard_list_get(one, 0)),
                        kn_shard_hash_key_start(kn_shard_list_get(one, 0)),
                        kn_shard_hash_key_end(kn_shard_list_get(one, 0)), "1",
                        NULL});
              kn_shard_list_destroy(one);
            }
        }
        if (kn_enumerator_finished(en, rm_reader(x->holder), sid(i), kids) ==
            KN_ERR_NO_ERROR) {
          x->finished = 1;
          x->holder = -1;
        }
        kn_shard_list_destroy(kids);
      }
      break;
    case 6: /* a reader joins */
      if (!m->joined[r] && !kn_enumerator_reader_joined(en, rm_reader(r)))
        m->joined[r] = 1;
      break;
    case 7: /* a reader leaves; the application hands its shards back */
      if (!m->joined[r]) break;
      kn_enumerator_reader_left(en, rm_reader(r));
      m->joined[r] = 0;
      for (int j = 0; j < m->n; j++)
        if (m->s[j].holder == r) {
          m->s[j].holder = -1;
          m->s[j].revoked = 0;
          if (rm_pick(m, 2)) {
            kn_position_t p;
            kn_position_after(&p, "12345", (uint64_t)j);
            kn_enumerator_shard_returned(en, sid(j), &p);
          }
        }
      break;
    case 8: /* rebalance */
      kn_enumerator_rebalance(en);
      break;
    case 9: /* a revoked shard comes back */
      for (int j = 0; j < m->n; j++)
        if (m->s[j].revoked && m->s[j].holder >= 0) {
          kn_enumerator_shard_returned(en, sid(j), NULL);
          m->s[j].holder = -1;
          m->s[j].revoked = 0;
          break;
        }
      break;
    case 10: { /* a restart from a snapshot */
      void *b = NULL;
      size_t n = 0;
      kn_enumerator_t *r2 = NULL;
      kn_error_t *e = kn_enumerator_snapshot(en, &b, &n);
      if (!e)
        e = kn_enumerator_restore(b, n, (kn_assigner_t)rm_pick(m, 3), &r2);
      if (!e && r2) {
        kn_enumerator_destroy(en);
        *enp = en = r2;
      }
      kn_error_destroy(e);
      free(b);
      break;
    }
  }
  rm_take(m, *enp);
}

/* Random splits, merges, expiries, readers coming and going, rebalances
 * and restarts from snapshots: no shard is ever given to two readers,
 * none before its parents are done, none after it is finished; in the
 * end every shard gets read. */
static void test_random_runs(void) {
  long shards = 0, assigns = 0, moved = 0;
  for (uint64_t seed = 1; seed <= 200; seed++) {
    rm_t m;
    memset(&m, 0, sizeof(m));
    m.rnd = seed * 0x9e3779b97f4a7c15ull;
    kn_enumerator_t *en = kn_enumerator_new(NULL, (kn_assigner_t)(seed % 3));
    if (!en) return;
    int first = rm_new_shard(&m, -1, -1, kn_u128_make(0, 0),
                             kn_u128_make(UINT64_MAX, UINT64_MAX >> 1));
    rm_new_shard(&m, -1, -1, kn_u128_make(UINT64_MAX, (UINT64_MAX >> 1) + 1),
                 kn_u128_make(UINT64_MAX, UINT64_MAX));
    (void)first;
    int64_t now = 0;
    for (int k = 0; k < 300; k++) {
      rm_step(&m, &en, now += 1000);
      rm_agree(&m, en);
    }
    /* The end: one reader, everything closed, read to the end. */
    if (!m.joined[0] && !kn_enumerator_reader_joined(en, rm_reader(0)))
      m.joined[0] = 1;
    for (int r = 1; r < RM_READERS; r++)
      if (m.joined[r]) {
        kn_enumerator_reader_left(en, rm_reader(r));
        m.joined[r] = 0;
        for (int j = 0; j < m.n; j++)
          if (m.s[j].holder == r) {
            m.s[j].holder = -1;
            m.s[j].revoked = 0;
          }
      }
    for (int j = 0; j < m.n; j++) {
      m.s[j].open = 0;
      if (m.s[j].revoked) {
        kn_enumerator_shard_returned(en, sid(j), NULL);
        m.s[j].holder = -1;
        m.s[j].revoked = 0;
      }
    }
    kn_shard_list_t *l = rm_list(&m, -1);
    if (l) kn_enumerator_shards(en, l, now += 1000);
    kn_shard_list_destroy(l);
    for (int j = 0; j < m.n; j++)
      if (m.s[j].aged && m.s[j].holder < 0) m.s[j].finished = 1;
    rm_take(&m, en);
    for (int round = 0; round < RM_SHARDS + 2; round++) {
      for (int j = 0; j < m.n; j++)
        if (m.s[j].holder == 0 &&
            !kn_enumerator_finished(en, rm_reader(0), sid(j), NULL)) {
          m.s[j].finished = 1;
          m.s[j].holder = -1;
        }
      rm_take(&m, en);
    }
    rm_agree(&m, en);
    int unread = 0;
    for (int j = 0; j < m.n; j++) unread += !m.s[j].finished;
    KT_CHECK_MSG(unread == 0, "seed %" PRIu64 ": %d shards never read", seed,
                 unread);
    KT_CHECK_MSG(m.violations == 0, "seed %" PRIu64 ": %d violations", seed,
                 m.violations);
    shards += m.n;
    for (int j = 0; j < m.n; j++) {
      assigns += m.s[j].assigns;
      moved += m.s[j].assigns > 1;
    }
    kn_enumerator_destroy(en);
  }
  /* The runs did reshard, assign and move shards between readers. */
  if (getenv("KT_VERBOSE"))
    fprintf(stderr, "%ld shards, %ld assignments, %ld moved\n", shards, assigns,
            moved);
  KT_CHECK(shards > 200 * 8);
  KT_CHECK(assigns > shards);
  KT_CHECK(moved > 200);
}

int main(void) {
  KT_RUN(test_split_merge_expired);
  KT_RUN(test_expired_parents);
  KT_RUN(test_latest);
  KT_RUN(test_reader_left);
  KT_RUN(test_reader_left_queued);
  KT_RUN(test_rescale_count);
  KT_RUN(test_rescale_hash);
  KT_RUN(test_throughput);
  KT_RUN(test_custom_assigner);
  KT_RUN(test_restore_any_step);
  KT_RUN(test_snapshot_pending_actions);
  KT_RUN(test_snapshot_corrupt);
  KT_RUN(test_random_runs);
  return KT_DONE();
}
