/* Lease expiry by observation and the take plan, with an injected clock. */
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "lease/taker.h"

static kn_lease_t mk(const char *key, const char *owner, int64_t counter) {
  kn_lease_t l;
  memset(&l, 0, sizeof(l));
  l.key = (char *)key;
  l.owner = (char *)owner;
  l.counter = counter;
  return l;
}

static size_t count_owned(const kn_lease_t *v, size_t n, const char *w) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i].owner && strcmp(v[i].owner, w) == 0) c++;
  return c;
}

static void test_expiry_by_observation(void) {
  kn_lease_observer_t o;
  kn_lease_observer_init(&o);
  kn_lease_t v[2] = {mk("s0", "a", 5), mk("s1", NULL, 3)};
  KT_CHECK_INT(kn_lease_observer_update(&o, v, 2, 1000), 0);
  /* Free leases are always available. */
  KT_CHECK(kn_lease_is_expired(&o, &v[1], 1000, 10000));
  /* First sighting counts as a renewal now. */
  KT_CHECK(!kn_lease_is_expired(&o, &v[0], 10999, 10000));
  KT_CHECK(kn_lease_is_expired(&o, &v[0], 11000, 10000));
  /* The owner renews: the counter moves, the clock restarts. */
  v[0].counter = 6;
  KT_CHECK_INT(kn_lease_observer_update(&o, v, 2, 9000), 0);
  KT_CHECK(!kn_lease_is_expired(&o, &v[0], 18999, 10000));
  KT_CHECK(kn_lease_is_expired(&o, &v[0], 19000, 10000));
  /* Same counter, new owner (a take we did not see happen): restart. */
  v[0].owner = "b";
  KT_CHECK_INT(kn_lease_observer_update(&o, v, 2, 30000), 0);
  KT_CHECK(!kn_lease_is_expired(&o, &v[0], 39999, 10000));
  /* A snapshot newer than the observation is never judged expired. */
  kn_lease_t newer = mk("s0", "b", 7);
  KT_CHECK(!kn_lease_is_expired(&o, &newer, 99999, 10000));
  /* Leases gone from the table are forgotten. */
  KT_CHECK_INT(kn_lease_observer_update(&o, v, 1, 40000), 0);
  KT_CHECK(kn_lease_observer_get(&o, "s1") == NULL);
  kn_lease_observer_free(&o);
}

static void test_target_and_take(void) {
  /* 10 free leases, 3 workers seen (2 others with one lease each). */
  kn_lease_t v[12];
  char keys[12][8];
  for (int i = 0; i < 12; i++) {
    snprintf(keys[i], sizeof(keys[i]), "s%d", i);
    v[i] = mk(keys[i], NULL, 1);
  }
  v[10].owner = "w2";
  v[11].owner = "w3";
  kn_lease_observer_t o;
  kn_lease_observer_init(&o);
  kn_lease_observer_update(&o, v, 12, 0);
  kn_take_params_t p = {"w1", 100, 10000, 0, 1, 0};
  kn_take_plan_t plan;
  KT_REQUIRE(kn_take_plan(v, 12, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.workers, 3);
  KT_CHECK_INT(plan.target, 4); /* ceil(12 / 3) */
  KT_CHECK_INT(plan.n_take, 4);
  KT_CHECK_INT(plan.n_steal, 0);
  for (size_t i = 0; i < plan.n_take; i++)
    KT_CHECK(v[plan.take[i]].owner == NULL);
  kn_take_plan_free(&plan);

  /* max_leases caps the target. */
  p.max_leases = 2;
  KT_REQUIRE(kn_take_plan(v, 12, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.target, 2);
  KT_CHECK_INT(plan.n_take, 2);
  kn_take_plan_free(&plan);
  kn_lease_observer_free(&o);
}

static void test_steal_bounded(void) {
  /* w2 holds all 6 leases, live; w1 arrives: target 3, steal at most 1. */
  kn_lease_t v[6];
  char keys[6][8];
  for (int i = 0; i < 6; i++) {
    snprintf(keys[i], sizeof(keys[i]), "s%d", i);
    v[i] = mk(keys[i], "w2", 10);
  }
  kn_lease_observer_t o;
  kn_lease_observer_init(&o);
  kn_lease_observer_update(&o, v, 6, 0);
  kn_take_params_t p = {"w1", 1000, 10000, 0, 1, 0};
  kn_take_plan_t plan;
  KT_REQUIRE(kn_take_plan(v, 6, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.target, 3);
  KT_CHECK_INT(plan.n_take, 0);
  KT_CHECK_INT(plan.n_steal, 1);
  kn_take_plan_free(&plan);
  p.max_steal = 5;
  KT_REQUIRE(kn_take_plan(v, 6, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.n_steal, 3); /* never below target for w2 */
  kn_take_plan_free(&plan);
  /* Balanced already: nothing to do. */
  for (int i = 0; i < 3; i++) v[i].owner = "w1";
  kn_lease_observer_update(&o, v, 6, 2000);
  KT_REQUIRE(kn_take_plan(v, 6, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.n_take + plan.n_steal, 0);
  KT_CHECK_INT(plan.held, 3);
  kn_take_plan_free(&plan);
  kn_lease_observer_free(&o);
}

static void test_steal_when_idle(void) {
  /* 4 leases, w2 and w3 hold 2 each, w1 none: target 2, nobody above it,
   * but w1 is short of two: it steals one, and only one. */
  kn_lease_t v[4] = {mk("s0", "w2", 1), mk("s1", "w2", 1), mk("s2", "w3", 1),
                     mk("s3", "w3", 1)};
  kn_lease_observer_t o;
  kn_lease_observer_init(&o);
  kn_lease_observer_update(&o, v, 4, 0);
  kn_take_params_t p = {"w1", 1000, 10000, 0, 5, 0};
  kn_take_plan_t plan;
  KT_REQUIRE(kn_take_plan(v, 4, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.target, 2);
  KT_CHECK_INT(plan.n_take, 0);
  KT_CHECK_INT(plan.n_steal, 1);
  kn_take_plan_free(&plan);
  /* Then 2, 1, 1: short of one only, no more stealing (no ping-pong). */
  v[0].owner = "w1";
  kn_lease_observer_update(&o, v, 4, 2000);
  for (int w = 0; w < 3; w++) {
    const char *ids[] = {"w1", "w2", "w3"};
    p.worker = ids[w];
    p.now_ms = 3000;
    KT_REQUIRE(kn_take_plan(v, 4, &o, &p, &plan) == 0,
               kn_lease_observer_free(&o));
    KT_CHECK_INT(plan.n_take + plan.n_steal, 0);
    kn_take_plan_free(&plan);
  }
  /* 1 lease, 2 workers: the idle one is short of one only; no steal. */
  kn_lease_t one[1] = {mk("s0", "w2", 1)};
  kn_lease_observer_update(&o, one, 1, 4000);
  p.worker = "w1";
  KT_REQUIRE(kn_take_plan(one, 1, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.n_steal, 0);
  kn_take_plan_free(&plan);
  kn_lease_observer_free(&o);
}

static void test_no_steal_while_a_worker_is_quiet(void) {
  /* w2 holds 3 and renews; w3 renewed nothing for 7 s (dead, its lease
   * not yet expired): target 2 counts w3, but w1 waits for w3's lease to
   * expire instead of taking one of w2's. */
  kn_lease_t v[4] = {mk("s0", "w2", 1), mk("s1", "w2", 1), mk("s2", "w2", 1),
                     mk("s3", "w3", 1)};
  kn_lease_observer_t o;
  kn_lease_observer_init(&o);
  kn_lease_observer_update(&o, v, 4, 0);
  v[0].counter = v[1].counter = v[2].counter = 3;
  kn_lease_observer_update(&o, v, 4, 6000);
  kn_take_params_t p = {"w1", 7000, 10000, 0, 1, 6600};
  kn_take_plan_t plan;
  KT_REQUIRE(kn_take_plan(v, 4, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.target, 2);
  KT_CHECK_INT(plan.n_steal, 0);
  kn_take_plan_free(&plan);
  p.quiet_ms = 0; /* without the rule: one of w2's */
  KT_REQUIRE(kn_take_plan(v, 4, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.n_steal, 1);
  KT_CHECK(plan.n_steal == 1 && plan.steal[0] < 3);
  kn_take_plan_free(&plan);
  /* w3 renews again: stealing from w2 resumes. */
  v[3].counter = 2;
  kn_lease_observer_update(&o, v, 4, 7000);
  p.quiet_ms = 6600;
  KT_REQUIRE(kn_take_plan(v, 4, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.n_steal, 1);
  kn_take_plan_free(&plan);
  kn_lease_observer_free(&o);
}

static void test_expired_owner_not_counted(void) {
  /* w2 died 11 s ago holding 4 leases: they are free to take, and w2 is
   * not counted as a live worker. */
  kn_lease_t v[4];
  char keys[4][8];
  for (int i = 0; i < 4; i++) {
    snprintf(keys[i], sizeof(keys[i]), "s%d", i);
    v[i] = mk(keys[i], "w2", 3);
  }
  kn_lease_observer_t o;
  kn_lease_observer_init(&o);
  kn_lease_observer_update(&o, v, 4, 0);
  kn_take_params_t p = {"w1", 11000, 10000, 0, 1, 0};
  kn_take_plan_t plan;
  KT_REQUIRE(kn_take_plan(v, 4, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.workers, 1);
  KT_CHECK_INT(plan.target, 4);
  KT_CHECK_INT(plan.n_take, 4);
  kn_take_plan_free(&plan);
  kn_lease_observer_free(&o);
  (void)count_owned;
}

static void test_parents_before_children(void) {
  char *p0[] = {"s0"};
  char *p12[] = {"s1", "s2"};
  kn_lease_t v[5] = {mk("s0", NULL, 1), mk("s3", NULL, 1), mk("s1", NULL, 1),
                     mk("s2", NULL, 1), mk("s4", NULL, 1)};
  v[1].parents = p0; /* split child of s0 */
  v[1].n_parents = 1;
  v[4].parents = p12; /* merge of s1 and s2 */
  v[4].n_parents = 2;
  KT_CHECK(kn_lease_is_ready(&v[0], v, 5));
  KT_CHECK(!kn_lease_is_ready(&v[1], v, 5));
  KT_CHECK(!kn_lease_is_ready(&v[4], v, 5));
  v[0].checkpoint = KN_CKPT_SHARD_END;
  KT_CHECK(!kn_lease_is_ready(&v[0], v, 5)); /* finished */
  KT_CHECK(kn_lease_is_ready(&v[1], v, 5));
  v[2].checkpoint = KN_CKPT_SHARD_END;
  KT_CHECK(!kn_lease_is_ready(&v[4], v, 5)); /* one parent left */
  v[3].checkpoint = KN_CKPT_SHARD_END;
  KT_CHECK(kn_lease_is_ready(&v[4], v, 5));
  /* A parent missing from the table (cleaned up) counts as finished. */
  KT_CHECK(kn_lease_is_ready(&v[4], v + 4, 1));

  /* The take plan never counts or takes unready leases. */
  kn_lease_t w[2] = {mk("s0", NULL, 1), mk("s3", NULL, 1)};
  w[1].parents = p0;
  w[1].n_parents = 1;
  kn_lease_observer_t o;
  kn_lease_observer_init(&o);
  kn_lease_observer_update(&o, w, 2, 0);
  kn_take_params_t p = {"w1", 0, 10000, 0, 1, 0};
  kn_take_plan_t plan;
  KT_REQUIRE(kn_take_plan(w, 2, &o, &p, &plan) == 0,
             kn_lease_observer_free(&o));
  KT_CHECK_INT(plan.n_take, 1);
  KT_CHECK_STR(w[plan.take[0]].key, "s0");
  kn_take_plan_free(&plan);
  kn_lease_observer_free(&o);
}

static void test_spread_of_takers(void) {
  /* Workers with different ids start taking at different offsets. */
  kn_lease_t v[64];
  char keys[64][8];
  for (int i = 0; i < 64; i++) {
    snprintf(keys[i], sizeof(keys[i]), "s%02d", i);
    v[i] = mk(keys[i], NULL, 1);
  }
  kn_lease_observer_t o;
  kn_lease_observer_init(&o);
  kn_lease_observer_update(&o, v, 64, 0);
  int distinct = 0;
  size_t firsts[8];
  for (int w = 0; w < 8; w++) {
    char id[16];
    snprintf(id, sizeof(id), "worker-%d", w);
    kn_take_params_t p = {id, 0, 10000, 1, 1, 0};
    kn_take_plan_t plan;
    KT_REQUIRE(kn_take_plan(v, 64, &o, &p, &plan) == 0 && plan.n_take > 0,
               kn_take_plan_free(&plan), kn_lease_observer_free(&o));
    firsts[w] = plan.take[0];
    int seen = 0;
    for (int k = 0; k < w; k++) seen |= firsts[k] == firsts[w];
    distinct += !seen;
    kn_take_plan_free(&plan);
  }
  KT_CHECK(distinct >= 6);
  kn_lease_observer_free(&o);
}

int main(void) {
  KT_RUN(test_expiry_by_observation);
  KT_RUN(test_target_and_take);
  KT_RUN(test_steal_bounded);
  KT_RUN(test_steal_when_idle);
  KT_RUN(test_no_steal_while_a_worker_is_quiet);
  KT_RUN(test_expired_owner_not_counted);
  KT_RUN(test_parents_before_children);
  KT_RUN(test_spread_of_takers);
  return KT_DONE();
}
