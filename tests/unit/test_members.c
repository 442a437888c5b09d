/* Membership by observation (lease/members.h), with an injected clock. */
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "lease/members.h"

static kn_members_t answer(kn_member_t *v, size_t n, int64_t epoch) {
  kn_members_t m = {v, n, epoch, NULL, 0, NULL};
  return m;
}

static void test_death_by_observation(void) {
  kn_mview_t m;
  kn_mview_init(&m);
  kn_member_t v[2] = {{"a", 7, 3, 0}, {"b", 1, 2, 0}};
  kn_members_t in = answer(v, 2, 4);
  KT_CHECK_INT(kn_mview_update(&m, &in, 1000, 10000), 0);
  KT_CHECK_INT((int)m.n, 2);
  KT_CHECK_INT((int)m.epoch, 4);
  KT_CHECK(m.joins == 0); /* the first answer is no join */
  KT_CHECK_INT((int)kn_mview_live(&m), 2);
  KT_CHECK_STR(kn_mview_leader(&m, 0), "a");
  /* a beats on, b stands still: dead once a duration has passed on this
   * observer's clock since it first saw that beat. */
  v[0].beat = 8;
  KT_CHECK_INT(kn_mview_update(&m, &in, 10999, 10000), 0);
  KT_CHECK(!kn_mview_is_dead(&m, "b"));
  v[0].beat = 9;
  KT_CHECK_INT(kn_mview_update(&m, &in, 11000, 10000), 0);
  KT_CHECK(kn_mview_is_dead(&m, "b"));
  KT_CHECK(!kn_mview_is_dead(&m, "a"));
  KT_CHECK(m.deaths == 1);
  KT_CHECK_INT((int)kn_mview_live(&m), 1);
  /* Counted once: still dead at the next answer, no new death. */
  KT_CHECK_INT(kn_mview_update(&m, &in, 12000, 10000), 0);
  KT_CHECK(m.deaths == 1);
  /* A restarted b beats again: alive, a member like a new one. */
  v[1].beat = 123456;
  KT_CHECK_INT(kn_mview_update(&m, &in, 13000, 10000), 0);
  KT_CHECK(!kn_mview_is_dead(&m, "b"));
  KT_CHECK_INT((int)kn_mview_live(&m), 2);
  kn_mview_free(&m);
}

static void test_leader_joins_and_lookup(void) {
  kn_mview_t m;
  kn_mview_init(&m);
  /* Stores answer sorted; the view sorts whatever it gets. */
  kn_member_t v[3] = {{"w2", 1, 0, 0}, {"w0", 1, 5, 0}, {"w1", 1, 4, 0}};
  kn_members_t in = answer(v, 2, 0);
  KT_CHECK_INT(kn_mview_update(&m, &in, 0, 10000), 0);
  KT_CHECK_STR(kn_mview_leader(&m, 0), "w0");
  in.n = 3;
  KT_CHECK_INT(kn_mview_update(&m, &in, 100, 10000), 0);
  KT_CHECK(m.joins == 1);
  KT_CHECK_INT((int)m.n, 3);
  if (m.n != 3) { /* out of memory (torture) */
    kn_mview_free(&m);
    return;
  }
  KT_CHECK_STR(m.v[0].worker, "w0");
  KT_CHECK_STR(m.v[2].worker, "w2");
  const kn_mview_ent_t *e = kn_mview_get(&m, "w1");
  KT_CHECK(e && e->leases == 4);
  KT_CHECK(kn_mview_get(&m, "w9") == NULL);
  KT_CHECK(!kn_mview_is_dead(&m, "w9") && !kn_mview_is_dead(&m, NULL));
  /* The leader dies: the next lowest leads. */
  v[1].beat = 1;
  v[0].beat = 2;
  v[2].beat = 2;
  KT_CHECK_INT(kn_mview_update(&m, &in, 10000, 10000), 0);
  KT_CHECK_STR(kn_mview_leader(&m, 0), "w1");
  /* A member forgotten by the store leaves the view. */
  in.v = &v[0]; /* w2 */
  in.n = 1;
  KT_CHECK_INT(kn_mview_update(&m, &in, 10001, 10000), 0);
  KT_CHECK_INT((int)m.n, 1);
  KT_CHECK_STR(kn_mview_leader(&m, 0), "w2");
  /* Nobody alive: no leader. */
  kn_members_t none = answer(NULL, 0, 0);
  KT_CHECK_INT(kn_mview_update(&m, &none, 10002, 10000), 0);
  KT_CHECK(kn_mview_leader(&m, 0) == NULL);
  kn_mview_free(&m);
}

static void test_members_copy(void) {
  kn_member_t v[2] = {{"x", 1, 2, 0}, {"y", 3, 4, 0}};
  kn_members_t in = answer(v, 2, 9), out;
  KT_CHECK_INT(kn_members_copy(&out, &in), 0);
  if (out.n != 2) return; /* out of memory (torture) */
  KT_CHECK(out.n == 2 && out.epoch == 9 && out.v[1].leases == 4);
  KT_CHECK(out.v[0].worker != v[0].worker);
  KT_CHECK_STR(out.v[0].worker, "x");
  kn_members_clear(&out);
  KT_CHECK(out.v == NULL && out.n == 0);
  kn_members_clear(NULL);
}

/* Entries that are no members are watched apart: they never count as
 * members or deaths, and once unchanged for a lease duration they are
 * dead (to be forgotten); a changed value starts them again. */
static void test_bad_entries(void) {
  kn_mview_t m;
  kn_mview_init(&m);
  kn_member_t v[1] = {{"a", 7, 3, 0}}, bad[1] = {{"junk", 42, 0, 0}};
  kn_members_t in = answer(v, 1, 1);
  in.bad = bad;
  in.n_bad = 1;
  KT_CHECK_INT(kn_mview_update(&m, &in, 1000, 10000), 0);
  KT_CHECK(m.n == 1 && m.n_bad == 1);
  KT_CHECK(kn_mview_get(&m, "junk") == NULL);
  KT_CHECK(kn_mview_live(&m) == 1);
  v[0].beat = 8;
  KT_CHECK_INT(kn_mview_update(&m, &in, 11000, 10000), 0);
  KT_CHECK(m.n_bad == 1 && m.bad[0].dead && m.bad[0].changed_ms == 1000);
  KT_CHECK(m.deaths == 0 && !m.v[0].dead);
  bad[0].beat = 43; /* rewritten: watched anew */
  KT_CHECK_INT(kn_mview_update(&m, &in, 12000, 10000), 0);
  KT_CHECK(m.n_bad == 1 && !m.bad[0].dead && m.bad[0].changed_ms == 12000);
  kn_members_t copy;
  KT_CHECK_INT(kn_members_copy(&copy, &in), 0);
  if (copy.n_bad == 1) KT_CHECK_STR(copy.bad[0].worker, "junk");
  kn_members_clear(&copy);
  kn_mview_free(&m);
}

/* Spread over items: the others of a roster join as remote entries,
 * never counted dead by this observer; the leader is item 0's lowest. */
static void test_remote_entries(void) {
  kn_mview_t m;
  kn_mview_init(&m);
  kn_member_t mine[2] = {{"b", 1, 3, 1}, {"c", 1, 2, 1}};
  kn_members_t in = answer(mine, 2, 0);
  KT_CHECK_INT(kn_mview_update(&m, &in, 0, 10000), 0);
  KT_CHECK(kn_mview_leader(&m, 0) == NULL);
  KT_CHECK_STR(kn_mview_leader(&m, 1), "b");
  /* a roster: "a" in item 0, "b" twice (it moved), "c" */
  kn_member_t all[4] = {
      {"a", 5, 4, 0}, {"b", 1, 3, 0}, {"b", 1, 3, 1}, {"c", 1, 2, 1}};
  kn_members_t roster = answer(all, 4, 0);
  KT_CHECK_INT(kn_mview_set_remote(&m, &roster, 0), 0);
  KT_CHECK_INT((int)m.n, 3);
  const kn_mview_ent_t *a = kn_mview_get(&m, "a");
  KT_REQUIRE(a != NULL, kn_mview_free(&m));
  KT_CHECK_INT(a->remote, 1);
  KT_CHECK_INT(kn_mview_get(&m, "b")->remote, 0);
  /* a lease duration on: the observed stand-still "c" dies, the remote
   * "a" does not, and stays through the update */
  mine[0].beat = 2;
  KT_CHECK_INT(kn_mview_update(&m, &in, 20000, 10000), 0);
  KT_CHECK_INT(kn_mview_is_dead(&m, "c"), 1);
  KT_CHECK_INT(kn_mview_is_dead(&m, "a"), 0);
  KT_CHECK(kn_mview_get(&m, "a") != NULL);
  KT_CHECK_INT((int)m.deaths, 1);
  KT_CHECK_INT((int)kn_mview_live(&m), 2);
  kn_mview_free(&m);
}

/* Items merged: sorted by worker then item, epochs summed. */
static void test_members_merge(void) {
  kn_member_t i0[1] = {{"z", 1, 1, 0}},
              i1[2] = {{"a", 2, 0, 1}, {"z", 3, 1, 1}};
  kn_members_t items[2] = {answer(i0, 1, 4), answer(i1, 2, 3)};
  items[0].digest = "nb=2 epoch=7 seq=1";
  kn_members_t out;
  KT_CHECK_INT(kn_members_merge(&out, items, 2), 0);
  KT_CHECK_INT((int)out.n, 3);
  KT_CHECK_INT((int)out.epoch, 7);
  KT_CHECK_STR(out.v[0].worker, "a");
  KT_CHECK_INT(out.v[1].bucket, 0);
  KT_CHECK_INT(out.v[2].bucket, 1);
  KT_CHECK_STR(out.digest, "nb=2 epoch=7 seq=1");
  kn_members_clear(&out);
}

/* A worker moving between items is shown once: its copy in its item for
 * the digest's item count, else the copy with the highest beat. */
static void test_members_one_each(void) {
  int hz = kn_members_home("z", 4), hy = kn_members_home("y", 4);
  int other_z = (hz + 1) % 4, y1 = (hy + 1) % 4, y2 = (hy + 2) % 4;
  kn_members_t m = {0};
  m.n = 5;
  m.v = calloc(m.n, sizeof(*m.v));
  m.v[0] = (kn_member_t){strdup("a"), 5, 1, 0};
  m.v[1] = (kn_member_t){strdup("y"), 9, 2, y1};
  m.v[2] = (kn_member_t){strdup("y"), 12, 3, y2};
  m.v[3] = (kn_member_t){strdup("z"), 40, 4, other_z}; /* left behind */
  m.v[4] = (kn_member_t){strdup("z"), 7, 5, hz};       /* where it beats */
  m.digest = strdup("nb=4 epoch=1 seq=2");
  kn_members_one_each(&m);
  KT_CHECK_INT((int)m.n, 3);
  KT_CHECK_STR(m.v[0].worker, "a");
  KT_CHECK_STR(m.v[1].worker, "y");
  KT_CHECK_INT((int)m.v[1].beat, 12); /* neither at home: the latest */
  KT_CHECK_STR(m.v[2].worker, "z");
  KT_CHECK_INT(m.v[2].bucket, hz);
  KT_CHECK_INT((int)m.v[2].leases, 5);
  kn_members_clear(&m);
  /* Without a digest: one item, and the highest beat otherwise. */
  kn_members_t one = {0};
  one.n = 2;
  one.v = calloc(one.n, sizeof(*one.v));
  one.v[0] = (kn_member_t){strdup("w"), 3, 1, 0};
  one.v[1] = (kn_member_t){strdup("w"), 8, 2, 1};
  kn_members_one_each(&one);
  KT_CHECK_INT((int)one.n, 1);
  KT_CHECK_INT(one.v[0].bucket, 0);
  kn_members_clear(&one);
}

int main(void) {
  KT_RUN(test_remote_entries);
  KT_RUN(test_members_one_each);
  KT_RUN(test_members_merge);
  KT_RUN(test_death_by_observation);
  KT_RUN(test_leader_joins_and_lookup);
  KT_RUN(test_members_copy);
  KT_RUN(test_bad_entries);
  return KT_DONE();
}
