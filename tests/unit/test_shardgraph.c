/* Shard graph: children, readiness, order, covering shard and gaps or
 * overlaps, over splits, merges, chains of both and expired parents. */
#include <stdlib.h>

#include "kinesis/shardgraph.h"
#include "kt.h"

#define MAXS "340282366920938463463374607431768211455"
#define HALF "170141183460469231731687303715884105728"
#define HALF1 "170141183460469231731687303715884105727"
#define Q1 "85070591730234615865843651857942052864"
#define Q1_1 "85070591730234615865843651857942052863"

static void add(kn_shard_list_t *l, const char *id, const char *parent,
                const char *adj, const char *start, const char *end,
                int closed) {
  kn_shard_desc_t d = {id,
                       parent,
                       adj,
                       start,
                       end,
                       "100",
                       closed ? "9223372036854775807" : NULL};
  if (kn_shard_list_add(l, &d)) fprintf(stderr, "add %s failed\n", id);
}

static long idx(const kn_shardgraph_t *g, const char *id) {
  return kn_shardgraph_find(g, id);
}

/* Ids of the order, joined by spaces, for easy comparison. */
static const char *order_str(const kn_shard_list_t *l, const kn_shardgraph_t *g,
                             char *buf, size_t size) {
  const size_t *o = kn_shardgraph_order(g);
  buf[0] = '\0';
  for (size_t i = 0; i < kn_shardgraph_count(g); i++) {
    if (i) strncat(buf, " ", size - strlen(buf) - 1);
    strncat(buf, kn_shard_id(kn_shard_list_get(l, o[i])),
            size - strlen(buf) - 1);
  }
  return buf;
}

static const char *children_str(const kn_shard_list_t *l,
                                const kn_shardgraph_t *g, const char *id,
                                char *buf, size_t size) {
  size_t n;
  const size_t *c = kn_shardgraph_children(g, (size_t)idx(g, id), &n);
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (i) strncat(buf, " ", size - strlen(buf) - 1);
    strncat(buf, kn_shard_id(kn_shard_list_get(l, c[i])),
            size - strlen(buf) - 1);
  }
  return buf;
}

/* Done set for readiness: a space-separated list of ids. */
static int done_in(void *opaque, const char *id) {
  const char *set = opaque;
  size_t n = strlen(id);
  for (const char *p = set; (p = strstr(p, id)) != NULL; p += n)
    if ((p == set || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
  return 0;
}

static int ready(const kn_shardgraph_t *g, const char *id, const char *done) {
  return kn_shardgraph_ready(g, (size_t)idx(g, id), done_in, (void *)done);
}

static void test_flat(void) {
  kn_shard_list_t *l = kn_shard_list_new();
  add(l, "shardId-000000000003", NULL, NULL,
      "255211775190703847597530955573826158592", MAXS, 0);
  add(l, "shardId-000000000001", NULL, NULL, Q1, HALF1, 0);
  add(l, "shardId-000000000000", NULL, NULL, "0", Q1_1, 0);
  add(l, "shardId-000000000002", NULL, NULL, HALF,
      "255211775190703847597530955573826158591", 0);
  kn_shardgraph_t *g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  char buf[256];
  KT_CHECK_STR(order_str(l, g, buf, sizeof buf),
               "shardId-000000000000 shardId-000000000001 shardId-000000000002 "
               "shardId-000000000003");
  KT_CHECK(!kn_shardgraph_has_cycle(g));
  KT_CHECK(ready(g, "shardId-000000000002", ""));
  KT_CHECK_INT(idx(g, "shardId-000000000003"), 0);
  KT_CHECK_INT(idx(g, "shardId-000000000009"), -1);
  KT_CHECK_INT(kn_shardgraph_check(g, NULL, 0), 0);
  kn_u128_t k;
  kn_u128_parse("0", 1, &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "shardId-000000000000"));
  kn_u128_parse(Q1, strlen(Q1), &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "shardId-000000000001"));
  kn_u128_parse(MAXS, strlen(MAXS), &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "shardId-000000000003"));
  size_t n = 9;
  kn_shardgraph_children(g, 0, &n);
  KT_CHECK_INT(n, 0);
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);
}

static void test_split(void) {
  kn_shard_list_t *l = kn_shard_list_new();
  add(l, "shardId-000000000002", "shardId-000000000000", NULL, HALF, MAXS, 0);
  add(l, "shardId-000000000001", "shardId-000000000000", NULL, "0", HALF1, 0);
  add(l, "shardId-000000000000", NULL, NULL, "0", MAXS, 1);
  kn_shardgraph_t *g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  char buf[256];
  KT_CHECK_STR(children_str(l, g, "shardId-000000000000", buf, sizeof buf),
               "shardId-000000000001 shardId-000000000002");
  KT_CHECK_STR(
      order_str(l, g, buf, sizeof buf),
      "shardId-000000000000 shardId-000000000001 shardId-000000000002");
  KT_CHECK(ready(g, "shardId-000000000000", ""));
  KT_CHECK(!ready(g, "shardId-000000000001", ""));
  KT_CHECK(!ready(g, "shardId-000000000002", "shardId-000000000001"));
  KT_CHECK(ready(g, "shardId-000000000001", "shardId-000000000000"));
  KT_CHECK(ready(g, "shardId-000000000002", "shardId-000000000000"));
  /* The closed parent does not count for coverage. */
  KT_CHECK_INT(kn_shardgraph_check(g, NULL, 0), 0);
  kn_u128_t k;
  kn_u128_parse(HALF1, strlen(HALF1), &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "shardId-000000000001"));
  kn_u128_parse(HALF, strlen(HALF), &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "shardId-000000000002"));
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);
}

static void test_merge(void) {
  kn_shard_list_t *l = kn_shard_list_new();
  add(l, "shardId-000000000000", NULL, NULL, "0", HALF1, 1);
  add(l, "shardId-000000000001", NULL, NULL, HALF, MAXS, 1);
  add(l, "shardId-000000000002", "shardId-000000000000", "shardId-000000000001",
      "0", MAXS, 0);
  kn_shardgraph_t *g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  char buf[256];
  KT_CHECK_STR(children_str(l, g, "shardId-000000000000", buf, sizeof buf),
               "shardId-000000000002");
  KT_CHECK_STR(children_str(l, g, "shardId-000000000001", buf, sizeof buf),
               "shardId-000000000002");
  KT_CHECK(!ready(g, "shardId-000000000002", ""));
  KT_CHECK(!ready(g, "shardId-000000000002", "shardId-000000000000"));
  KT_CHECK(!ready(g, "shardId-000000000002", "shardId-000000000001"));
  KT_CHECK(ready(g, "shardId-000000000002",
                 "shardId-000000000000 shardId-000000000001"));
  KT_CHECK_STR(
      order_str(l, g, buf, sizeof buf),
      "shardId-000000000000 shardId-000000000001 shardId-000000000002");
  KT_CHECK_INT(kn_shardgraph_check(g, NULL, 0), 0);
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);
}

/* 0 splits into 1 and 2; 1 splits into 3 and 4; 4 and 2 merge into 5; 5
 * splits into 6 and 7.  Given in a scrambled order. */
static kn_shard_list_t *chain(int drop_expired) {
  kn_shard_list_t *l = kn_shard_list_new();
  add(l, "s7", "s5", NULL, HALF, MAXS, 0);
  if (!drop_expired) add(l, "s1", "s0", NULL, "0", HALF1, 1);
  add(l, "s5", "s4", "s2", Q1, MAXS, 1);
  add(l, "s3", "s1", NULL, "0", Q1_1, 0);
  if (!drop_expired) add(l, "s0", NULL, NULL, "0", MAXS, 1);
  add(l, "s6", "s5", NULL, Q1, HALF1, 0);
  add(l, "s4", "s1", NULL, Q1, HALF1, 1);
  add(l, "s2", "s0", NULL, HALF, MAXS, 1);
  return l;
}

static void test_chain(void) {
  kn_shard_list_t *l = chain(0);
  kn_shardgraph_t *g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  char buf[256];
  KT_CHECK_STR(order_str(l, g, buf, sizeof buf), "s0 s1 s2 s3 s4 s5 s6 s7");
  KT_CHECK_STR(children_str(l, g, "s0", buf, sizeof buf), "s1 s2");
  KT_CHECK_STR(children_str(l, g, "s1", buf, sizeof buf), "s3 s4");
  KT_CHECK_STR(children_str(l, g, "s2", buf, sizeof buf), "s5");
  KT_CHECK_STR(children_str(l, g, "s4", buf, sizeof buf), "s5");
  KT_CHECK_STR(children_str(l, g, "s5", buf, sizeof buf), "s6 s7");
  KT_CHECK_STR(children_str(l, g, "s7", buf, sizeof buf), "");
  KT_CHECK(!ready(g, "s5", "s4"));
  KT_CHECK(ready(g, "s5", "s4 s2"));
  KT_CHECK(ready(g, "s3", "s1"));
  /* Open: s3 [0, Q1-1], s6 [Q1, 2^127-1], s7 [2^127, MAX]. */
  KT_CHECK_INT(kn_shardgraph_check(g, NULL, 0), 0);
  kn_u128_t k;
  kn_u128_parse(Q1_1, strlen(Q1_1), &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "s3"));
  kn_u128_parse(Q1, strlen(Q1), &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "s6"));
  kn_u128_parse(HALF, strlen(HALF), &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "s7"));
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);
}

static void test_expired_parents(void) {
  /* s0 and s1 left the retention window: s3 and s4 name s1 but are ready
   * at once; s2 names s0. */
  kn_shard_list_t *l = chain(1);
  kn_shardgraph_t *g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  char buf[256];
  KT_CHECK(ready(g, "s3", ""));
  KT_CHECK(ready(g, "s4", ""));
  KT_CHECK(ready(g, "s2", ""));
  KT_CHECK(!ready(g, "s5", "s4"));
  KT_CHECK_STR(order_str(l, g, buf, sizeof buf), "s2 s3 s4 s5 s6 s7");
  KT_CHECK(!kn_shardgraph_has_cycle(g));
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);
}

static void test_deterministic(void) {
  /* The same shards in many orders give the same order of ids. */
  const char *ids[] = {"a0", "a1", "a2", "a3", "a4",
                       "a5", "a6", "a7", "a8", "a9"};
  const char *par[] = {NULL, "a0", "a0", "a1", "a1",
                       "a3", "a2", "a6", NULL, "a8"};
  const char *adj[] = {NULL, NULL, NULL, NULL, NULL,
                       "a4", NULL, "a9", NULL, NULL};
  char first[256] = "", buf[256];
  unsigned seed = 3;
  for (int round = 0; round < 50; round++) {
    int perm[10];
    for (int i = 0; i < 10; i++) perm[i] = i;
    for (int i = 9; i > 0; i--) {
      int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    kn_shard_list_t *l = kn_shard_list_new();
    for (int i = 0; i < 10; i++)
      add(l, ids[perm[i]], par[perm[i]], adj[perm[i]], "0", "1", 1);
    kn_shardgraph_t *g = kn_shardgraph_new(l);
    KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
    order_str(l, g, buf, sizeof buf);
    if (round == 0) strcpy(first, buf);
    KT_CHECK_STR(buf, first);
    /* Parents before children, always. */
    const size_t *o = kn_shardgraph_order(g);
    KT_REQUIRE(kn_shardgraph_count(g) == 10, kn_shardgraph_destroy(g),
               kn_shard_list_destroy(l));
    size_t pos[10];
    for (size_t i = 0; i < 10; i++) pos[o[i]] = i;
    for (size_t i = 0; i < 10; i++) {
      const kn_shard_t *s = kn_shard_list_get(l, i);
      long p = kn_shardgraph_find(g, kn_shard_parent_id(s));
      long q = kn_shardgraph_find(g, kn_shard_adjacent_parent_id(s));
      if (p >= 0) KT_CHECK(pos[p] < pos[i]);
      if (q >= 0) KT_CHECK(pos[q] < pos[i]);
    }
    kn_shardgraph_destroy(g);
    kn_shard_list_destroy(l);
  }
  KT_CHECK_STR(first, "a0 a1 a2 a3 a4 a5 a6 a8 a9 a7");
}

static void test_gaps_overlaps(void) {
  char a[KN_U128_DEC_BUFSZ], b[KN_U128_DEC_BUFSZ];
  kn_hash_issue_t iss[8];
  kn_shard_list_t *l = kn_shard_list_new();
  kn_shardgraph_t *g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  /* No open shard: one gap over everything. */
  KT_CHECK_INT(kn_shardgraph_check(g, iss, 8), 1);
  KT_CHECK_INT(iss[0].kind, KN_HASH_GAP);
  kn_u128_format(iss[0].start, a);
  kn_u128_format(iss[0].end, b);
  KT_CHECK_STR(a, "0");
  KT_CHECK_STR(b, MAXS);
  KT_CHECK(iss[0].a == -1 && iss[0].b == -1);
  kn_u128_t k = {1, 2};
  KT_CHECK_INT(kn_shardgraph_cover(g, k), -1);
  KT_CHECK_INT(kn_shardgraph_count(g), 0);
  kn_shardgraph_destroy(g);

  /* [10, 99] [150, 300] [200, 250] [290, MAX-1]: gaps [0, 9] [100, 149]
   * and [MAX, MAX]; overlaps [200, 250] and [290, 300]. */
  add(l, "x3", NULL, NULL, "290", "340282366920938463463374607431768211454", 0);
  add(l, "x0", NULL, NULL, "10", "99", 0);
  add(l, "x2", NULL, NULL, "200", "250", 0);
  add(l, "x1", NULL, NULL, "150", "300", 0);
  add(l, "old", NULL, NULL, "0", MAXS, 1);
  g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  size_t n = kn_shardgraph_check(g, iss, 8);
  KT_CHECK_INT(n, 5);
  static const struct {
    int kind;
    const char *s, *e, *a, *b;
  } want[] = {
      {KN_HASH_GAP, "0", "9", NULL, "x0"},
      {KN_HASH_GAP, "100", "149", "x0", "x1"},
      {KN_HASH_OVERLAP, "200", "250", "x1", "x2"},
      {KN_HASH_OVERLAP, "290", "300", "x1", "x3"},
      {KN_HASH_GAP, MAXS, MAXS, "x3", NULL},
  };
  for (size_t i = 0; i < 5 && i < n; i++) {
    KT_CHECK_INT(iss[i].kind, want[i].kind);
    kn_u128_format(iss[i].start, a);
    kn_u128_format(iss[i].end, b);
    KT_CHECK_STR(a, want[i].s);
    KT_CHECK_STR(b, want[i].e);
    KT_CHECK_INT(iss[i].a, want[i].a ? idx(g, want[i].a) : -1);
    KT_CHECK_INT(iss[i].b, want[i].b ? idx(g, want[i].b) : -1);
  }
  /* max limits what is written, not the count. */
  KT_CHECK_INT(kn_shardgraph_check(g, iss, 2), 5);
  kn_u128_parse("220", 3, &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "x2"));
  kn_u128_parse("260", 3, &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), idx(g, "x1"));
  kn_u128_parse("120", 3, &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), -1);
  kn_u128_parse("5", 1, &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), -1);
  kn_u128_parse(MAXS, strlen(MAXS), &k);
  KT_CHECK_INT(kn_shardgraph_cover(g, k), -1);
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);

  /* Two identical open shards over everything: one overlap. */
  l = kn_shard_list_new();
  add(l, "p", NULL, NULL, "0", MAXS, 0);
  add(l, "q", NULL, NULL, "0", MAXS, 0);
  g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  KT_CHECK_INT(kn_shardgraph_check(g, iss, 8), 1);
  KT_CHECK_INT(iss[0].kind, KN_HASH_OVERLAP);
  kn_u128_format(iss[0].end, b);
  KT_CHECK_STR(b, MAXS);
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);
}

static void test_cover_random(void) {
  /* 64 open shards cut at random points: every key has exactly the
   * shard a linear scan finds. */
  unsigned seed = 11;
  kn_u128_t cuts[64];
  cuts[0] = kn_u128_make(0, 0);
  for (int i = 1; i < 64; i++)
    cuts[i] = kn_u128_add(cuts[i - 1],
                          kn_u128_make((uint64_t)rand_r(&seed) << 20, 1));
  kn_shard_list_t *l = kn_shard_list_new();
  for (int i = 0; i < 64; i++) {
    char id[16], s[KN_U128_DEC_BUFSZ], e[KN_U128_DEC_BUFSZ];
    snprintf(id, sizeof id, "r%02d", 63 - i);
    kn_u128_format(cuts[i], s);
    kn_u128_format(i == 63 ? kn_u128_make(UINT64_MAX, UINT64_MAX)
                           : kn_u128_sub(cuts[i + 1], kn_u128_make(0, 1)),
                   e);
    add(l, id, NULL, NULL, s, e, 0);
  }
  kn_shardgraph_t *g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  KT_CHECK_INT(kn_shardgraph_check(g, NULL, 0), 0);
  int bad = 0;
  for (int t = 0; t < 5000; t++) {
    kn_u128_t k = {(uint64_t)rand_r(&seed) % (cuts[63].hi + 2),
                   (uint64_t)rand_r(&seed) << 32 | (uint64_t)rand_r(&seed)};
    if (t % 7 == 0) k = cuts[t % 64];
    long want = -1;
    for (size_t i = 0; i < kn_shard_list_count(l); i++) {
      const kn_shard_t *s = kn_shard_list_get(l, i);
      if (kn_u128_in_range(k, s->start, s->end)) want = (long)i;
    }
    if (kn_shardgraph_cover(g, k) != want) bad++;
  }
  KT_CHECK_INT(bad, 0);
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);
}

static void test_cycle_and_duplicates(void) {
  kn_shard_list_t *l = kn_shard_list_new();
  add(l, "c", "b", NULL, "0", "1", 1);
  add(l, "b", "c", NULL, "0", "1", 1);
  add(l, "a", NULL, NULL, "0", "1", 1);
  add(l, "d", "d", NULL, "0", "1", 1);  /* its own parent */
  add(l, "a", NULL, NULL, "5", "6", 1); /* duplicate id */
  kn_shardgraph_t *g = kn_shardgraph_new(l);
  KT_REQUIRE(g != NULL, kn_shard_list_destroy(l));
  char buf[256];
  KT_CHECK(kn_shardgraph_has_cycle(g));
  KT_CHECK_STR(order_str(l, g, buf, sizeof buf), "a a b c d");
  KT_CHECK_INT(idx(g, "a"), 2);
  kn_shardgraph_destroy(g);
  kn_shard_list_destroy(l);
}

static void test_list_basics(void) {
  kn_shard_list_t *l = kn_shard_list_new();
  kn_shard_desc_t d = {"s", NULL, NULL, "1", "x", NULL, NULL};
  KT_CHECK_INT(kn_shard_list_add(l, &d), -1);
  d.hk_end = "340282366920938463463374607431768211456";
  KT_CHECK_INT(kn_shard_list_add(l, &d), -1);
  d.hk_end = "2";
  d.id = "";
  KT_CHECK_INT(kn_shard_list_add(l, &d), -1);
  d.id = "s";
  KT_CHECK_INT(kn_shard_list_add(l, &d), 0);
  KT_CHECK_INT(kn_shard_list_count(l), 1);
  const kn_shard_t *s = kn_shard_list_find(l, "s");
  KT_REQUIRE(s != NULL, kn_shard_list_destroy(l));
  KT_CHECK(kn_shard_is_open(s));
  KT_CHECK(kn_shard_parent_id(s) == NULL);
  KT_CHECK_STR(kn_shard_hash_key_end(s), "2");
  KT_CHECK(kn_shard_list_find(l, "t") == NULL);
  KT_CHECK(kn_shard_list_get(l, 1) == NULL);
  kn_shard_list_t *c = kn_shard_list_dup(l);
  KT_REQUIRE(c && kn_shard_list_count(c) == 1, kn_shard_list_destroy(c),
             kn_shard_list_destroy(l));
  KT_CHECK_STR(kn_shard_id(kn_shard_list_get(c, 0)), "s");
  kn_shard_list_destroy(c);
  kn_shard_list_destroy(l);
  kn_shard_list_destroy(NULL);
  KT_CHECK_INT(kn_shard_list_count(NULL), 0);
}

int main(void) {
  KT_RUN(test_flat);
  KT_RUN(test_split);
  KT_RUN(test_merge);
  KT_RUN(test_chain);
  KT_RUN(test_expired_parents);
  KT_RUN(test_deterministic);
  KT_RUN(test_gaps_overlaps);
  KT_RUN(test_cover_random);
  KT_RUN(test_cycle_and_duplicates);
  KT_RUN(test_list_basics);
  return KT_DONE();
}
