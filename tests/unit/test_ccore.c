/* The coordination core: its planners and its raw interface, then one or
 * two workers -- the lease-mode driver with the core inside
 * (consumer/drive.h) -- driven step by step against the memory lease store
 * (tests/support/drive_rig.h). */
#include <stdlib.h>
#include <string.h>

#include "consumer/ccore.h"
#include "core/error.h"
#include "drive_rig.h"
#include "kt.h"

/* ---- planners ---- */

/* Equal strings, or both NULL (a case read after a failed allocation). */
static int same(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static kn_cc_shard_t sh(const char *id, const char *parent,
                        const char *adjacent, int closed) {
  kn_cc_shard_t s = {id, parent, adjacent, "0", "1", closed};
  return s;
}

static kn_lease_t ls(const char *key, const char *ckpt) {
  kn_lease_t l;
  memset(&l, 0, sizeof(l));
  l.key = (char *)key;
  l.checkpoint = (char *)ckpt;
  return l;
}

static const char *planned(const kn_cc_shard_t *s, const kn_cc_create_t *v,
                           size_t n, const char *id, int *wave) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(s[v[i].shard].id, id) == 0) {
      if (wave) *wave = v[i].wave;
      return v[i].checkpoint;
    }
  return NULL;
}

static void test_plan_empty_table(void) {
  /* 0 split into 3 and 4; 1 and 2 open. */
  kn_cc_shard_t s[] = {sh("0", NULL, NULL, 1), sh("1", NULL, NULL, 0),
                       sh("2", NULL, NULL, 0), sh("3", "0", NULL, 0),
                       sh("4", "0", NULL, 0)};
  kn_cc_create_t *v;
  size_t n;
  int w = -1;
  KT_CHECK(kn_cc_plan_sync(s, 5, NULL, 0, KN_CKPT_TRIM_HORIZON, &v, &n) == 0);
  KT_CHECK(n == 5);
  KT_CHECK(planned(s, v, n, "0", &w) && w == 0);
  KT_CHECK(planned(s, v, n, "3", &w) && w == 1);
  KT_CHECK(same(planned(s, v, n, "3", NULL), KN_CKPT_TRIM_HORIZON));
  KT_CHECK(v[n - 1].wave == 1 && v[0].wave == 0); /* parents first */
  free(v);
  /* LATEST: the open shards only, at LATEST. */
  KT_CHECK(kn_cc_plan_sync(s, 5, NULL, 0, KN_CKPT_LATEST, &v, &n) == 0);
  KT_CHECK(n == 4 && !planned(s, v, n, "0", NULL));
  KT_CHECK(same(planned(s, v, n, "3", NULL), KN_CKPT_LATEST));
  free(v);
  /* AT_TIMESTAMP: the root at the timestamp, its children after it. */
  KT_CHECK(kn_cc_plan_sync(s, 5, NULL, 0, KN_CKPT_AT_TIMESTAMP, &v, &n) == 0);
  KT_CHECK(n == 5);
  KT_CHECK(same(planned(s, v, n, "0", NULL), KN_CKPT_AT_TIMESTAMP));
  KT_CHECK(same(planned(s, v, n, "4", NULL), KN_CKPT_TRIM_HORIZON));
  free(v);
}

/* A partly filled table (a first worker died creating the leases): the
 * rest is created as if the table were empty. */
static void test_plan_partial_table(void) {
  kn_cc_shard_t s[] = {sh("0", NULL, NULL, 1), sh("1", NULL, NULL, 0),
                       sh("2", NULL, NULL, 0), sh("3", "0", NULL, 0),
                       sh("4", "0", NULL, 0)};
  kn_lease_t l[] = {
      ls("1", "49590338271490256608559692538361571095921575989136588898")};
  kn_cc_create_t *v;
  size_t n;
  KT_CHECK(kn_cc_plan_sync(s, 5, l, 1, KN_CKPT_TRIM_HORIZON, &v, &n) == 0);
  KT_CHECK(n == 4);
  KT_CHECK(planned(s, v, n, "0", NULL) && planned(s, v, n, "2", NULL) &&
           planned(s, v, n, "3", NULL) && planned(s, v, n, "4", NULL));
  KT_CHECK(!planned(s, v, n, "1", NULL));
  free(v);
}

/* G split into P and P2 (idle); P split into C1 and C2, which have
 * started; P's lease was cleaned up.  P is finished: never created again,
 * whatever G's lease says. */
static void test_plan_finished_not_recreated(void) {
  kn_cc_shard_t s[] = {sh("G", NULL, NULL, 1), sh("P", "G", NULL, 1),
                       sh("P2", "G", NULL, 0), sh("C1", "P", NULL, 0),
                       sh("C2", "P", NULL, 0)};
  kn_lease_t l[] = {ls("G", KN_CKPT_SHARD_END), ls("P2", KN_CKPT_TRIM_HORIZON),
                    ls("C1", "5"), ls("C2", "6")};
  kn_cc_create_t *v;
  size_t n;
  KT_CHECK(kn_cc_plan_sync(s, 5, l, 4, KN_CKPT_TRIM_HORIZON, &v, &n) == 0);
  KT_CHECK(n == 0);
  free(v);
  /* And cleanup keeps P's lease while G's remains. */
  kn_lease_t l2[] = {ls("G", KN_CKPT_SHARD_END), ls("P", KN_CKPT_SHARD_END),
                     ls("P2", KN_CKPT_TRIM_HORIZON), ls("C1", "5"),
                     ls("C2", "6")};
  char *pg[] = {"G"};
  l2[1].parents = pg;
  l2[1].n_parents = 1;
  KT_CHECK(!kn_cc_can_remove(l2, 5, 1, s, 5)); /* G still there */
  KT_CHECK(!kn_cc_can_remove(l2, 5, 0, s, 5)); /* P2 not started */
  l2[2].checkpoint = "7";
  KT_CHECK(kn_cc_can_remove(l2, 5, 0, s, 5));
  KT_CHECK(!kn_cc_can_remove(l2, 5, 3, s, 5)); /* not finished */
}

/* The listing is older than the lease table: C1 and C2 are not listed
 * yet, but their leases name P, which is finished. */
static void test_plan_listing_behind_table(void) {
  kn_cc_shard_t s[] = {sh("P", NULL, NULL, 0)};
  kn_lease_t l[] = {ls("C1", "5"), ls("C2", KN_CKPT_TRIM_HORIZON)};
  char *pp[] = {"P"};
  l[0].parents = l[1].parents = pp;
  l[0].n_parents = l[1].n_parents = 1;
  kn_cc_create_t *v;
  size_t n;
  KT_CHECK(kn_cc_plan_sync(s, 1, l, 2, KN_CKPT_TRIM_HORIZON, &v, &n) == 0);
  KT_CHECK(n == 0);
  free(v);
}

/* A parent past retention (no longer listed) whose lease remains was
 * read: its child starts from its beginning, not at LATEST. */
static void test_plan_parent_past_retention(void) {
  kn_cc_shard_t s[] = {sh("C", "P", NULL, 0), sh("D", "Q", NULL, 0)};
  kn_lease_t l[] = {ls("P", KN_CKPT_SHARD_END)};
  kn_cc_create_t *v;
  size_t n;
  KT_CHECK(kn_cc_plan_sync(s, 2, l, 1, KN_CKPT_LATEST, &v, &n) == 0);
  KT_CHECK(n == 2);
  KT_CHECK(same(planned(s, v, n, "C", NULL), KN_CKPT_TRIM_HORIZON));
  KT_CHECK(same(planned(s, v, n, "D", NULL), KN_CKPT_LATEST));
  free(v);
  /* Two generations past the listing: Q's lease names it as a child
   * (R), or only the hash keys tell (S under T's range). */
  kn_cc_shard_t s2[] = {sh("E", "R", NULL, 0), sh("F", "S", NULL, 0)};
  s2[1].hash_start = "10";
  s2[1].hash_end = "20";
  kn_lease_t l2[] = {ls("Q", KN_CKPT_SHARD_END), ls("T", "9")};
  char *kids[] = {"R"};
  l2[0].children = kids;
  l2[0].n_children = 1;
  l2[1].hash_start = "0";
  l2[1].hash_end = "15";
  KT_CHECK(kn_cc_plan_sync(s2, 2, l2, 2, KN_CKPT_LATEST, &v, &n) == 0);
  KT_CHECK(n == 2);
  KT_CHECK(same(planned(s2, v, n, "E", NULL), KN_CKPT_TRIM_HORIZON));
  KT_CHECK(same(planned(s2, v, n, "F", NULL), KN_CKPT_TRIM_HORIZON));
  free(v);
  l2[1].hash_start = "21"; /* no overlap: unknown ancestry */
  l2[1].hash_end = "30";
  KT_CHECK(kn_cc_plan_sync(s2, 2, l2, 2, KN_CKPT_LATEST, &v, &n) == 0);
  KT_CHECK(same(planned(s2, v, n, "F", NULL), KN_CKPT_LATEST));
  free(v);
}

/* A merge child of a leased shard: the other parent gets a lease first
 * (from its start even at LATEST), and the child comes in a later wave. */
static void test_plan_merge_other_parent(void) {
  kn_cc_shard_t s[] = {sh("A", NULL, NULL, 1), sh("B", NULL, NULL, 1),
                       sh("M", "A", "B", 0)};
  kn_lease_t l[] = {ls("A", "12")};
  kn_cc_create_t *v;
  size_t n;
  int wb = -1, wm = -1;
  KT_CHECK(kn_cc_plan_sync(s, 3, l, 1, KN_CKPT_LATEST, &v, &n) == 0);
  KT_CHECK(n == 2);
  KT_CHECK(same(planned(s, v, n, "B", &wb), KN_CKPT_TRIM_HORIZON));
  KT_CHECK(same(planned(s, v, n, "M", &wm), KN_CKPT_TRIM_HORIZON));
  KT_CHECK(wb < wm);
  free(v);
}

/* A lease created at LATEST by a sync whose shard listing was newer than
 * another's: its family is read here, so it is read from its start. */
static void test_family_read(void) {
  kn_lease_t l[] = {ls("P1", KN_CKPT_LATEST), ls("P2", KN_CKPT_SHARD_END),
                    ls("C", KN_CKPT_LATEST), ls("X", KN_CKPT_LATEST)};
  char *pp[] = {"P1", "P2"};
  l[2].parents = pp;
  l[2].n_parents = 2;
  l[0].hash_start = "0", l[0].hash_end = "9";
  l[1].hash_start = "10", l[1].hash_end = "19";
  l[2].hash_start = "0", l[2].hash_end = "19";
  l[3].hash_start = "20", l[3].hash_end = "29";
  kn_cc_range_t *r = kn_cc_ranges(l, 4);
  KT_REQUIRE(r);
  KT_CHECK(kn_cc_family_read(l, 4, r, &l[2]));     /* its parents */
  KT_CHECK(kn_cc_family_read(l, 4, r, &l[0]));     /* its child (keys) */
  KT_CHECK(!kn_cc_family_read(l, 4, r, &l[3]));    /* a stranger */
  KT_CHECK(!kn_cc_family_read(l, 4, NULL, &l[0])); /* keys not looked at */
  /* Only parents named: the child alone tells. */
  KT_CHECK(kn_cc_family_read(l, 4, NULL, &l[2]));
  char *kids[] = {"X"};
  l[1].children = kids;
  l[1].n_children = 1;
  KT_CHECK(kn_cc_family_read(l, 4, NULL, &l[3])); /* named as a child */
  free(r);
}

/* The shards a listing's lineage shows finished: the ancestors of every
 * lease past its start, through parentShardId, childShardIds and the
 * shard listing (a lease created again by a create that landed late). */
static void test_done_by_lineage(void) {
  /* G -> P -> C (C read up to a sequence number), P's lease removed;
   * M named as a child by Q (SHARD_END) only; Z a stranger; S at its
   * start with a child K also at its start. */
  kn_lease_t l[] = {
      ls("G", KN_CKPT_TRIM_HORIZON), ls("C", "49600"),
      ls("Z", KN_CKPT_TRIM_HORIZON), ls("Q", KN_CKPT_SHARD_END),
      ls("M", KN_CKPT_TRIM_HORIZON), ls("R", KN_CKPT_LATEST),
      ls("S", KN_CKPT_TRIM_HORIZON), ls("K", KN_CKPT_TRIM_HORIZON)};
  size_t n = sizeof(l) / sizeof(l[0]);
  char *cp[] = {"P"}, *qk[] = {"Q2"}, *kp[] = {"S"};
  l[1].parents = cp;
  l[1].n_parents = 1;
  l[4].children = qk; /* M's child Q2 has no lease: tells nothing */
  l[4].n_children = 1;
  l[7].parents = kp;
  l[7].n_parents = 1;
  char *rk[] = {"Q"};
  l[5].children = rk; /* R (at LATEST) names Q as its child */
  l[5].n_children = 1;
  kn_cc_shard_t sh[] = {{"G", NULL, NULL, NULL, NULL, 1},
                        {"P", "G", NULL, NULL, NULL, 1},
                        {"C", "P", NULL, NULL, NULL, 0}};
  kn_cc_done_t *d = kn_cc_done_new(l, n, sh, 3);
  KT_REQUIRE(d);
  KT_CHECK(kn_cc_done_has(d, &l[0]));  /* G: through the listing */
  KT_CHECK(!kn_cc_done_has(d, &l[1])); /* C: started, not at its start */
  KT_CHECK(!kn_cc_done_has(d, &l[2])); /* Z: no family */
  KT_CHECK(!kn_cc_done_has(d, &l[4])); /* M: its child never started */
  KT_CHECK(kn_cc_done_has(d, &l[5]));  /* R: Q, named its child, ended */
  KT_CHECK(!kn_cc_done_has(d, &l[6])); /* S: its child K at its start */
  KT_CHECK(!kn_cc_done_has(NULL, &l[0]));
  kn_cc_done_free(d);
  /* Without the listing, G is not known to be P's parent. */
  d = kn_cc_done_new(l, n, NULL, 0);
  KT_REQUIRE(d);
  KT_CHECK(!kn_cc_done_has(d, &l[0]));
  kn_cc_done_free(d);
}

/* ---- the raw core ---- */

static kn_cc_cfg_t cfg_for(const char *worker) {
  kn_cc_cfg_t cfg = {
      worker, 10000, 3000, 2000, 60000, 1000, 0, 1, KN_CKPT_TRIM_HORIZON,
      1,      30000, 0,    0,    0,     0,    0};
  return cfg;
}

/* A renew interval of 2/3 of the lease duration or more is refused: the
 * lease would expire between two renewals. */
static void test_refused_config(void) {
  kn_cc_cfg_t bad = {"w", 9000, 6000, 0, 0, 0, 0, 0, NULL, 1, 0, 0, 0, 0, 0, 0};
  KT_CHECK(kn_cc_new(&bad, 0) == NULL);
  kn_rig_t r;
  kn_rig_worker_t w;
  KT_REQUIRE(kn_rig_open(&r) == 0);
  KT_ALWAYS(kn_rig_start(&r, &w, &bad) != 0); /* nor by the drive */
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

/* A first sync that fails retriably is retried; a verdict is fatal. */
static void test_first_sync_errors(void) {
  kn_cc_cfg_t cfg = cfg_for("w1");
  kn_cc_t *c = kn_cc_new(&cfg, 0);
  kn_cc_tick(c, 0);
  kn_cc_action_t a;
  KT_CHECK(kn_cc_next(c, &a) && a.op == KN_CC_LIST_LEASES);
  kn_error_t *e = kn_error_new(KN_ERR__TRANSPORT, "connection refused");
  kn_cc_leases_done(c, a.id, e, NULL, 0, 5);
  kn_error_destroy(e);
  int fatal = 0;
  while (kn_cc_next(c, &a)) fatal += a.op == KN_CC_FATAL;
  KT_CHECK(!fatal && kn_cc_wake_ms(c) > 5 && kn_cc_wake_ms(c) <= 1005);
  kn_cc_tick(c, 1005);
  KT_CHECK(kn_cc_next(c, &a) && a.op == KN_CC_LIST_LEASES);
  kn_cc_leases_done(c, a.id, NULL, NULL, 0, 1006);
  KT_CHECK(kn_cc_next(c, &a) && a.op == KN_CC_LIST_SHARDS);
  e = kn_error_new(KN_ERR_RESOURCE_NOT_FOUND, "stream not found");
  kn_cc_shards_done(c, a.id, e, NULL, 0, 1010);
  kn_error_destroy(e);
  int closed = 0;
  while (kn_cc_next(c, &a)) {
    fatal += a.op == KN_CC_FATAL && a.reason == KN_ERR_RESOURCE_NOT_FOUND;
    closed += a.op == KN_CC_CLOSED;
  }
  KT_CHECK(fatal == 1 && closed == 1);
  kn_cc_destroy(c);
}

/* ---- workers: the drive against the memory lease store ---- */

/* Answers w's calls; the drive never loops, whatever allocation fails. */
static void run(kn_rig_worker_t *w) {
  if (kn_rig_run(w)) KT_ALWAYS(!"the drive went on calling");
}

static void tick(kn_rig_worker_t *w, int64_t now) {
  if (kn_rig_tick(w, now)) KT_ALWAYS(!"the drive went on calling");
}

/* Sets the clock for the events that follow (never back). */
static void at(kn_rig_t *r, int64_t now) {
  if (now > r->now) r->now = now;
}

/* The store's lease of key (a zeroed one when it has none). */
static const kn_lease_t *L(kn_rig_t *r, const char *key) {
  return kn_rig_lease(r, key);
}

static size_t n_leases(kn_rig_t *r) {
  const kn_lease_t *v;
  return kn_rig_list(r, &v);
}

static size_t held(const kn_rig_worker_t *w) {
  return w->d ? kn_cc_held(kn_drive_core(w->d)) : 0;
}

static const kn_cc_t *core(const kn_rig_worker_t *w) {
  return kn_drive_core(w->d);
}

/* A rig on the listing shards (borrowed) and worker w on it with cfg (its
 * id as cfg->worker), at time 0.  Returns 0, or -1 with nothing left to
 * free (out of memory). */
static int rig_with(kn_rig_t *r, kn_rig_worker_t *w,
                    const kn_cc_shard_t *shards, size_t n,
                    const kn_cc_cfg_t *cfg) {
  if (kn_rig_open(r)) return -1;
  r->shards = shards;
  r->n_shards = n;
  if (kn_rig_start(r, w, cfg)) {
    kn_rig_close(r);
    return -1;
  }
  return 0;
}

static kn_cc_shard_t g_one[1];

/* Worker w1 alone on shard s0 (closed: it has ended), with cfg_for's
 * configuration but auto_checkpoint; it has synced and taken the lease.
 * Returns 0, or -1 with nothing left to free. */
static int one_shard_worker(kn_rig_t *r, kn_rig_worker_t *w, int closed,
                            int auto_checkpoint) {
  kn_cc_cfg_t cfg = cfg_for("w1");
  cfg.auto_checkpoint = auto_checkpoint;
  g_one[0] = sh("s0", NULL, NULL, closed);
  if (rig_with(r, w, g_one, 1, &cfg)) return -1;
  tick(w, 0);
  tick(w, 1);
  if (w->s.start == 1) return 0;
  kn_rig_kill(w);
  kn_rig_close(r);
  return -1;
}

/* A worker's life: sync, take, renew, checkpoint, lose the store, take
 * back, close. */
static void test_worker_life(void) {
  kn_cc_shard_t shards[] = {sh("s0", NULL, NULL, 0)};
  kn_cc_cfg_t cfg = cfg_for("w1");
  kn_rig_t r;
  kn_rig_worker_t w;
  KT_REQUIRE(rig_with(&r, &w, shards, 1, &cfg) == 0);
  tick(&w, 0);
  KT_CHECK(n_leases(&r) == 1 && kn_cc_synced(core(&w)));
  tick(&w, 1);
  KT_CHECK(w.s.start == 1 && same(w.s.started, "s0") && w.s.tenure == 1);
  KT_CHECK(held(&w) == 1);
  KT_CHECK(w.s.until > 1 && w.s.until <= 1 + 10000);
  /* Renewed on time: the deadline moves. */
  int64_t until = w.s.until;
  tick(&w, 3001);
  KT_CHECK(L(&r, "s0")->counter == 2 && w.s.deadline == 1);
  KT_CHECK(w.s.until > until);
  KT_CHECK(kn_drive_deadline(w.d, "s0", 1) == w.s.until);
  /* Records handed out and processed: the flush checkpoints them, in
   * place of the next renewal (one write per renewal interval). */
  kn_cc_pos_t p = {"100", 0};
  at(&r, 3100);
  kn_drive_delivered(w.d, "s0", 1, &p, 0);
  kn_drive_processed(w.d, "s0", 1, &p);
  run(&w);
  tick(&w, 4001);
  KT_CHECK(L(&r, "s0")->counter == 2 && !same(L(&r, "s0")->checkpoint, "100"));
  tick(&w, 6001);
  KT_CHECK(L(&r, "s0")->checkpoint && same(L(&r, "s0")->checkpoint, "100"));
  KT_CHECK(L(&r, "s0")->counter == 3);
  /* A report of another tenure changes nothing. */
  at(&r, 6100);
  kn_drive_shard_ended(w.d, "s0", 7, NULL, 0);
  kn_drive_expired(w.d, "s0", 7);
  run(&w);
  KT_CHECK(w.s.stop == 0 && held(&w) == 1);
  /* The store unreachable: reading stops at the deadline, which the
   * reader was told. */
  kn_error_t *down = kn_error_new(KN_ERR__TRANSPORT, "unreachable");
  r.fail_renew = down;
  int64_t now = 6100;
  while (w.s.stop == 0 && now < 30000) {
    now = kn_drive_wake_ms(w.d);
    if (now == INT64_MAX) break; /* stopped: out of memory under torture */
    tick(&w, now);
  }
  r.fail_renew = NULL;
  kn_error_destroy(down);
  KT_REQUIRE(now != INT64_MAX, kn_rig_kill(&w), kn_rig_close(&r));
  KT_CHECK(w.s.stop == 1 && w.s.stop_reason == KN_ERR__TIMED_OUT);
  KT_CHECK(now >= 6001 + 10000 - 1500 && now < 6001 + 10000);
  KT_CHECK(w.s.until <= now); /* the reader had stopped on its own */
  /* The next take round takes it back under a new tenure. */
  tick(&w, now + 2000);
  KT_CHECK(w.s.start == 2 && w.s.tenure > 1);
  int64_t t2 = w.s.tenure;
  /* A late "ended" of the first tenure does not stop the second. */
  at(&r, now + 2100);
  kn_drive_shard_ended(w.d, "s0", 1, NULL, 0);
  run(&w);
  KT_CHECK(w.s.stop == 1);
  /* Close: final checkpoint, release, closed. */
  kn_cc_pos_t q = {"200", 3};
  at(&r, now + 2200);
  kn_drive_delivered(w.d, "s0", t2, &q, 0);
  kn_drive_processed(w.d, "s0", t2, &q);
  run(&w);
  at(&r, now + 2300);
  kn_drive_close(w.d);
  run(&w);
  KT_CHECK(kn_drive_closed(w.d) && w.s.stop == 2 &&
           w.s.stop_reason == KN_ERR__DESTROY);
  KT_CHECK(L(&r, "s0")->owner == NULL && same(L(&r, "s0")->checkpoint, "200") &&
           L(&r, "s0")->checkpoint_subseq == 3);
  KT_CHECK(w.s.fatal == 0);
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

/* A renewal answered after the reader's deadline passed does not give it
 * a later one (poll may have dropped records meanwhile): the tenure ends,
 * and the lease is taken back under a new one. */
static void test_late_renewal(void) {
  kn_rig_t r;
  kn_rig_worker_t w;
  KT_REQUIRE(one_shard_worker(&r, &w, 0, 1) == 0);
  int64_t until = w.s.until, counter = L(&r, "s0")->counter;
  /* The renewal is sent on time; its answer comes once the deadline has
   * passed. */
  at(&r, 3001);
  kn_drive_tick(w.d);
  int renewing = 0;
  for (kn_store_job_t *j = w.head; j; j = j->next)
    renewing += j->op == KN_CC_RENEW;
  KT_CHECK(renewing == 1);
  at(&r, until);
  run(&w);
  KT_CHECK(L(&r, "s0")->counter > counter); /* written all the same */
  KT_CHECK(w.s.deadline == 0 && w.s.until == until);
  KT_CHECK(w.s.stop == 1 && w.s.stop_reason == KN_ERR__TIMED_OUT);
  KT_CHECK(kn_drive_deadline(w.d, "s0", 1) == -1 && held(&w) == 0);
  /* The next take round takes it back. */
  tick(&w, until + 2000);
  KT_CHECK(w.s.start == 2 && w.s.tenure > 1);
  KT_CHECK(kn_drive_deadline(w.d, "s0", w.s.tenure) == w.s.until);
  KT_CHECK(w.s.until > until + 2000);
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

/* Checkpoint requests are answered whatever happens: at once when the
 * worker is closing, with LEASE_LOST when the drive is destroyed before
 * the store answered. */
static void test_requests_answered(void) {
  kn_cc_cfg_t cfg = cfg_for("w1");
  cfg.auto_checkpoint = 0;
  kn_rig_t r;
  kn_rig_worker_t w;
  KT_REQUIRE(one_shard_worker(&r, &w, 0, 0) == 0);
  kn_cc_pos_t p = {"70", 1};
  int token = 0;
  at(&r, 10);
  kn_drive_delivered(w.d, "s0", w.s.tenure, &p, 0);
  kn_drive_checkpoint(w.d, "s0", &p, 0, NULL, 0, &token);
  KT_CHECK(w.s.replies == 0 && w.head); /* the write is on its way */
  kn_rig_kill(&w);                      /* ... and never answered */
  KT_CHECK(w.s.replies == 1 && w.s.reply_code == KN_ERR__LEASE_LOST);
  KT_CHECK(!same(L(&r, "s0")->checkpoint, "70"));
  /* A second run of the worker: asked while it closes, answered at once. */
  KT_REQUIRE(kn_rig_start(&r, &w, &cfg) == 0, kn_rig_close(&r));
  tick(&w, 20);
  tick(&w, 10021); /* the first run's lease expired */
  KT_REQUIRE(w.s.start == 1, kn_rig_kill(&w), kn_rig_close(&r));
  at(&r, 10030);
  kn_drive_close(w.d);
  KT_CHECK(kn_drive_stopping(w.d));
  kn_drive_checkpoint(w.d, "s0", &p, 0, NULL, 0, &token);
  KT_CHECK(w.s.replies == 1 && w.s.reply_code == KN_ERR__LEASE_LOST);
  run(&w);
  KT_CHECK(kn_drive_closed(w.d) && w.s.replies == 1);
  KT_CHECK(L(&r, "s0")->owner == NULL);
  kn_rig_kill(&w);
  KT_CHECK(w.s.replies == 1);
  kn_rig_close(&r);
}

/* Another worker takes the lease: the next renewal is refused and the
 * shard stops; manual checkpoints are answered. */
static void test_lost_and_manual(void) {
  kn_rig_t r;
  kn_rig_worker_t w;
  KT_REQUIRE(one_shard_worker(&r, &w, 1, 0) == 0); /* w.s.start == 1 */
  /* The end is handed out, but the last record is not checkpointed yet:
   * no SHARD_END. */
  kn_cc_pos_t p = {"50", 0};
  at(&r, 10);
  kn_drive_shard_ended(w.d, "s0", w.s.tenure, NULL, 0);
  kn_drive_delivered(w.d, "s0", w.s.tenure, &p, 1);
  run(&w);
  KT_CHECK(same(L(&r, "s0")->checkpoint, KN_CKPT_TRIM_HORIZON));
  int token = 0;
  at(&r, 20);
  kn_drive_checkpoint(w.d, "s0", &p, 0, NULL, 0, &token);
  run(&w);
  KT_CHECK(w.s.replies == 1 && w.s.reply_code == KN_ERR_NO_ERROR);
  KT_CHECK(same(L(&r, "s0")->checkpoint, KN_CKPT_SHARD_END));
  KT_CHECK(w.s.done == 1 && L(&r, "s0")->owner == NULL);
  at(&r, 30);
  kn_drive_checkpoint(w.d, "s0", &p, 0, NULL, 0, &token);
  run(&w);
  KT_CHECK(w.s.replies == 2 && w.s.reply_code == KN_ERR__LEASE_LOST);
  kn_rig_kill(&w);
  kn_rig_close(&r);

  /* Stolen: w2 takes the lease; w1's renewal is refused. */
  KT_REQUIRE(one_shard_worker(&r, &w, 0, 0) == 0);
  KT_REQUIRE(n_leases(&r) == 1, kn_rig_kill(&w), kn_rig_close(&r));
  int64_t counter;
  KT_CHECK_OK(
      r.ls->ops->take(r.ls, "s0", L(&r, "s0")->counter, "w1", "w2", &counter));
  tick(&w, 3001);
  KT_CHECK(w.s.stop == 1 && w.s.stop_reason == KN_ERR__LEASE_LOST);
  KT_CHECK(held(&w) == 0);
  KT_CHECK_STR(L(&r, "s0")->owner, "w2");
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

/* The first sync through the drive: a listing that fails retriably is
 * retried; a stream that is not there is fatal, and the worker closes. */
static void test_first_sync_errors_drive(void) {
  kn_cc_cfg_t cfg = cfg_for("w1");
  kn_rig_t r;
  kn_rig_worker_t w;
  KT_REQUIRE(rig_with(&r, &w, NULL, 0, &cfg) == 0);
  kn_error_t *refused = kn_error_new(KN_ERR__TRANSPORT, "connection refused");
  kn_error_t *gone = kn_error_new(KN_ERR_RESOURCE_NOT_FOUND, "not found");
  r.fail_list = refused;
  tick(&w, 0);
  r.fail_list = NULL;
  int64_t wake = kn_drive_wake_ms(w.d);
  KT_CHECK(w.s.lists == 1 && w.s.fatal == 0 && !kn_drive_closed(w.d));
  KT_CHECK(wake > 0 && wake <= 1000);
  r.fail_shards = gone;
  tick(&w, wake);
  r.fail_shards = NULL;
  KT_CHECK(w.s.lists == 2);
  KT_CHECK(w.s.fatal == 1 && w.s.fatal_code == KN_ERR_RESOURCE_NOT_FOUND);
  KT_CHECK(kn_drive_closed(w.d) && !kn_drive_live(w.d));
  KT_CHECK(kn_drive_verdict(w.d) == KN_ERR_RESOURCE_NOT_FOUND);
  KT_CHECK(n_leases(&r) == 0 && w.s.start == 0);
  kn_error_destroy(refused);
  kn_error_destroy(gone);
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

/* ---- hand-offs ---- */

static kn_cc_shard_t g_two[2];

/* Worker w1 alone on two shards, holding both.  Returns 0 or -1 (out of
 * memory). */
static int two_shard_worker(kn_rig_t *r, kn_rig_worker_t *w) {
  g_two[0] = sh("s0", NULL, NULL, 0);
  g_two[1] = sh("s1", NULL, NULL, 0);
  kn_cc_cfg_t cfg = cfg_for("w1");
  if (rig_with(r, w, g_two, 2, &cfg)) return -1;
  tick(w, 0);
  tick(w, 1);
  return 0;
}

/* At 100, worker w2 joins w1 (of two_shard_worker) and asks for one of
 * its leases.  Returns the lease's key, or NULL when w2 cannot start (w1
 * and the rig are then freed). */
static const char *w2_joins(kn_rig_t *r, kn_rig_worker_t *w1,
                            kn_rig_worker_t *w2) {
  kn_cc_cfg_t cfg = cfg_for("w2");
  at(r, 100);
  if (kn_rig_start(r, w2, &cfg)) {
    kn_rig_kill(w1);
    kn_rig_close(r);
    return NULL;
  }
  tick(w2, 100);
  tick(w2, 101);
  return L(r, "s0")->checkpoint_owner ? "s0" : "s1";
}

/* A worker joins: the lease it balances to is asked for, handed over at
 * the last record the first worker's application was handed, and read on
 * from there -- nothing twice.  The first worker's application answers
 * late: the lease waits for it. */
static void test_handoff(void) {
  kn_rig_t r;
  kn_rig_worker_t w1, w2;
  KT_REQUIRE(two_shard_worker(&r, &w1) == 0);
  KT_CHECK(held(&w1) == 2 && w1.s.start == 2);
  kn_cc_pos_t p = {"500", 2};
  at(&r, 10);
  kn_drive_delivered(w1.d, "s0", L(&r, "s0")->counter, &p, 0);
  kn_drive_delivered(w1.d, "s1", L(&r, "s1")->counter, &p, 0);
  run(&w1);
  /* w2 joins and asks for one lease (the counter does not move). */
  const char *asked = w2_joins(&r, &w1, &w2);
  KT_REQUIRE(asked);
  const kn_lease_t *la = L(&r, asked);
  KT_CHECK_STR(la->owner, "w2");
  KT_CHECK_STR(la->checkpoint_owner, "w1");
  KT_CHECK(la->counter == 1);
  KT_CHECK(w2.s.start == 0 && held(&w2) == 0 && !kn_cc_idle(core(&w2)));
  /* w2 watches; nothing is handed over yet. */
  tick(&w2, 700);
  KT_CHECK(w2.s.start == 0);
  /* w1's next renewal learns it: it stops reading the shard. */
  tick(&w1, 3001);
  KT_CHECK(w1.s.yield == 1 && w1.s.stop == 0);
  KT_CHECK_STR(w1.s.next_owner, "w2");
  KT_CHECK_STR(L(&r, asked)->checkpoint_owner, "w1");
  /* Meanwhile it renews the lease and waits for its application. */
  tick(&w1, 6002);
  KT_CHECK_STR(L(&r, asked)->checkpoint_owner, "w1");
  tick(&w2, 6003);
  KT_CHECK(w2.s.start == 0);
  /* The application is done with what it was handed: exactly that is
   * checkpointed and the lease passed on. */
  at(&r, 6100);
  kn_drive_yielded(w1.d, asked, 1 /* the tenure: the take's counter */, &p);
  run(&w1);
  la = L(&r, asked);
  KT_CHECK(la->checkpoint_owner == NULL);
  KT_CHECK_STR(la->owner, "w2");
  KT_CHECK_STR(la->checkpoint, "500");
  KT_CHECK_INT(la->checkpoint_subseq, 2);
  KT_CHECK(held(&w1) == 1);
  /* w2 sees it passed on and starts after that record. */
  tick(&w2, 6600);
  KT_CHECK(w2.s.start == 1 && same(w2.s.started, asked));
  KT_CHECK_STR(w2.s.start_ckpt, "500");
  KT_CHECK(held(&w2) == 1);
  /* A later renewal of w1 for that lease is refused, never reaches it. */
  KT_CHECK_STR(L(&r, asked)->owner, "w2");
  KT_CHECK(w1.s.fatal == 0 && w2.s.fatal == 0);
  kn_rig_kill(&w1);
  kn_rig_kill(&w2);
  kn_rig_close(&r);
}

/* A lease at LATEST whose family was read here, known only from the
 * table: its parent's lease (finished, past retention, out of the
 * listing) names it among its children.  Whoever holds it reads it from
 * its start -- also a worker it is handed over to. */
static void test_handoff_family_read(void) {
  static kn_cc_shard_t two[2];
  two[0] = sh("s0", NULL, NULL, 0);
  two[1] = sh("s1", NULL, NULL, 0);
  kn_rig_t r;
  kn_rig_worker_t w1, w2;
  KT_REQUIRE(kn_rig_open(&r) == 0);
  r.shards = two;
  r.n_shards = 2;
  char *kids[] = {"s0", "s1"};
  kn_lease_t p = ls("P", KN_CKPT_SHARD_END);
  p.children = kids;
  p.n_children = 2;
  kn_lease_t c0 = ls("s0", KN_CKPT_LATEST), c1 = ls("s1", KN_CKPT_LATEST);
  KT_REQUIRE(!r.ls->ops->create(r.ls, &p) && !r.ls->ops->create(r.ls, &c0) &&
                 !r.ls->ops->create(r.ls, &c1),
             kn_rig_close(&r));
  kn_cc_cfg_t cfg1 = cfg_for("w1"), cfg2 = cfg_for("w2");
  cfg1.initial = cfg2.initial = KN_CKPT_LATEST;
  KT_REQUIRE(kn_rig_start(&r, &w1, &cfg1) == 0, kn_rig_close(&r));
  w1.answer_yields = 1;
  tick(&w1, 0);
  tick(&w1, 1);
  KT_CHECK(w1.s.start == 2);
  KT_CHECK_STR(w1.s.start_ckpt, KN_CKPT_TRIM_HORIZON);
  at(&r, 100);
  KT_REQUIRE(kn_rig_start(&r, &w2, &cfg2) == 0, kn_rig_kill(&w1),
             kn_rig_close(&r));
  tick(&w2, 100);
  tick(&w2, 101);
  const char *asked = L(&r, "s0")->checkpoint_owner ? "s0" : "s1";
  KT_CHECK_STR(L(&r, asked)->owner, "w2");
  /* w1 learns it at its next renewal; its application has nothing to
   * finish, so the lease is passed on still at LATEST. */
  tick(&w1, 3001);
  KT_CHECK(w1.s.yield == 1);
  KT_CHECK(L(&r, asked)->checkpoint_owner == NULL);
  KT_CHECK_STR(L(&r, asked)->checkpoint, KN_CKPT_LATEST);
  tick(&w2, 3600);
  KT_CHECK(w2.s.start == 1 && same(w2.s.started, asked));
  KT_CHECK_STR(w2.s.start_ckpt, KN_CKPT_TRIM_HORIZON);
  kn_rig_kill(&w1);
  kn_rig_kill(&w2);
  kn_rig_close(&r);
}

/* A KCL 2.x worker stole a lease that a libkinesis asker had asked of
 * this worker id: the steal left checkpointOwner (the KCL 2.x knows
 * nothing of it).  A new run of the id finds the lease "asked for" in the
 * listing, but the owner is no member of the group: nobody asked, and a
 * pass-on would bump the counter under the KCL holder, which loses the
 * lease while it reads. */
static void test_no_passon_to_a_stealer(void) {
  static kn_cc_shard_t two[2];
  two[0] = sh("s0", NULL, NULL, 0);
  two[1] = sh("s1", NULL, NULL, 0);
  kn_rig_t r;
  kn_rig_worker_t w1;
  KT_REQUIRE(kn_rig_open(&r) == 0);
  r.shards = two;
  r.n_shards = 2;
  kn_lease_t s0 = ls("s0", "100"), s1 = ls("s1", KN_CKPT_TRIM_HORIZON);
  s0.owner = "kcl2-worker";
  s0.checkpoint_owner = "w1";
  s0.counter = 5;
  KT_REQUIRE(!r.ls->ops->create(r.ls, &s0) && !r.ls->ops->create(r.ls, &s1),
             kn_rig_close(&r));
  KT_REQUIRE(L(&r, "s0")->counter == 5, kn_rig_close(&r));
  kn_cc_cfg_t cfg = cfg_for("w1");
  cfg.members = 1;
  KT_REQUIRE(kn_rig_start(&r, &w1, &cfg) == 0, kn_rig_close(&r));
  for (int64_t t = 0; t < 9000; t += 500) {
    at(&r, t);
    kn_rig_tick(&w1, t);
    kn_rig_tick(&w1, t + 1);
  }
  const kn_lease_t *l = L(&r, "s0");
  KT_CHECK_STR(l->owner, "kcl2-worker");
  KT_CHECK(l->counter == 5);
  KT_CHECK(w1.s.start == 1 && same(w1.s.started, "s1"));
  kn_rig_kill(&w1);
  kn_rig_close(&r);
}

/* A renewal that landed but answered an error (a time-out after the
 * write went out) moved the counter one past what the core knows: the
 * next write is refused.  The core looks at the lease before giving it
 * up, finds its own write there, and goes on holding it. */
static void test_landed_write_kept(void) {
  kn_rig_t r;
  kn_rig_worker_t w;
  KT_REQUIRE(two_shard_worker(&r, &w) == 0);
  KT_CHECK(held(&w) == 2);
  int64_t c0 = L(&r, "s0")->counter;
  kn_error_t *late = kn_error_new(KN_ERR__TIMED_OUT, "timed out");
  r.landed_renew = late;
  tick(&w, 3001);
  r.landed_renew = NULL;
  KT_CHECK(L(&r, "s0")->counter == c0 + 1);
  KT_CHECK(w.s.failed >= 2);
  /* The renewals go again soon: refused, looked at, written. */
  tick(&w, 4100);
  KT_CHECK(w.s.refused >= 2);
  KT_CHECK(w.s.stop == 0 && held(&w) == 2);
  KT_CHECK(L(&r, "s0")->counter == c0 + 2);
  KT_CHECK_STR(L(&r, "s0")->owner, "w1");
  tick(&w, 7200);
  KT_CHECK(w.s.stop == 0 && held(&w) == 2);
  kn_error_destroy(late);
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

/* The owner learns of the ask at its next renewal, up to a renewal
 * interval after it, and gives its application handoff_ms from then: an
 * application that finishes within that time has its final checkpoint
 * taken, and the asker does not take the lease before -- nothing is read
 * twice in a planned move. */
static void test_handoff_one_clock(void) {
  kn_rig_t r;
  kn_rig_worker_t w1, w2;
  KT_REQUIRE(two_shard_worker(&r, &w1) == 0);
  kn_cc_pos_t p = {"500", 2};
  at(&r, 10);
  kn_drive_delivered(w1.d, "s0", L(&r, "s0")->counter, &p, 0);
  kn_drive_delivered(w1.d, "s1", L(&r, "s1")->counter, &p, 0);
  run(&w1);
  const char *asked = w2_joins(&r, &w1, &w2); /* asked at 101 */
  KT_REQUIRE(asked);
  /* w1 renews on, learning of the ask at 3001; its application takes
   * until just before 3001 + handoff_ms to finish.  w2 watches. */
  for (int64_t t = 3001; t < 33000; t += 500) {
    tick(&w1, t);
    tick(&w2, t + 1);
  }
  KT_CHECK(w1.s.yield == 1);
  KT_CHECK(w2.s.start == 0);
  KT_CHECK_STR(L(&r, asked)->checkpoint_owner, "w1");
  at(&r, 33000);
  kn_drive_yielded(w1.d, asked, 1, &p);
  run(&w1);
  const kn_lease_t *la = L(&r, asked);
  KT_CHECK(la->checkpoint_owner == NULL);
  KT_CHECK_STR(la->owner, "w2");
  KT_CHECK_STR(la->checkpoint, "500");
  KT_CHECK(w1.s.refused == 0);
  tick(&w2, 33600);
  KT_CHECK(w2.s.start == 1 && same(w2.s.started, asked));
  KT_CHECK_STR(w2.s.start_ckpt, "500");
  kn_rig_kill(&w1);
  kn_rig_kill(&w2);
  kn_rig_close(&r);
}

/* A group stopped as a whole: the asker closes, then the owner.  The
 * owner releases the lease it was asked for instead of passing it on to a
 * worker that is gone, where it would stay until it expired. */
static void test_handoff_closing(void) {
  kn_rig_t r;
  kn_rig_worker_t w1, w2;
  KT_REQUIRE(two_shard_worker(&r, &w1) == 0);
  KT_REQUIRE(held(&w1) == 2, kn_rig_kill(&w1), kn_rig_close(&r));
  const char *asked = w2_joins(&r, &w1, &w2);
  KT_REQUIRE(asked);
  KT_CHECK_STR(L(&r, asked)->owner, "w2");
  tick(&w1, 3001);
  KT_CHECK(w1.s.yield == 1);
  at(&r, 3100);
  kn_drive_close(w2.d);
  run(&w2);
  at(&r, 3200);
  kn_drive_close(w1.d);
  run(&w1);
  const kn_lease_t *v;
  size_t n = kn_rig_list(&r, &v);
  KT_CHECK(n == 2);
  for (size_t i = 0; i < n; i++) {
    KT_CHECK(v[i].owner == NULL);
    KT_CHECK(v[i].checkpoint_owner == NULL);
  }
  KT_CHECK(kn_drive_closed(w1.d) && kn_drive_closed(w2.d));
  kn_rig_kill(&w1);
  kn_rig_kill(&w2);
  kn_rig_close(&r);
}

/* The owner asked never answers (a KCL 2.x worker, or one that froze):
 * after a lease duration without a renewal the lease is taken anyway. */
static void test_handoff_silent_owner(void) {
  kn_rig_t r;
  kn_rig_worker_t w1, w2;
  kn_cc_cfg_t c2cfg = cfg_for("w2");
  KT_REQUIRE(two_shard_worker(&r, &w1) == 0);
  kn_rig_kill(&w1); /* gone without a word; its renewals stop */
  at(&r, 100);
  KT_REQUIRE(kn_rig_start(&r, &w2, &c2cfg) == 0, kn_rig_close(&r));
  tick(&w2, 100);
  tick(&w2, 101);
  KT_CHECK(w2.s.start == 0);
  for (int64_t now = 500; now < 12000; now += 500) tick(&w2, now);
  KT_CHECK(w2.s.start >= 1);
  KT_CHECK(held(&w2) >= 1);
  const kn_lease_t *v;
  size_t n = kn_rig_list(&r, &v);
  for (size_t i = 0; i < n; i++)
    KT_CHECK(!v[i].checkpoint_owner || !same(v[i].owner, "w2"));
  kn_rig_kill(&w2);
  kn_rig_close(&r);
}

/* ---- membership ---- */

static kn_cc_cfg_t members_cfg(const char *worker) {
  kn_cc_cfg_t cfg = cfg_for(worker);
  cfg.members = 1;
  cfg.renew_ms = 4000;
  cfg.sync_ms = 30000;
  cfg.scan_ms = 600000;
  cfg.beat_base = worker[1] * 1000;
  return cfg;
}

/* Steps the live workers every 250 ms from *now to until. */
static void steps(kn_rig_worker_t *w, int n, int64_t *now, int64_t until) {
  for (; *now < until; *now += 250)
    for (int i = 0; i < n; i++)
      if (w[i].d) tick(&w[i], *now);
}

static kn_cc_shard_t g_four[4];

/* Two workers on four shards (answers: their applications answer
 * hand-overs at once), at time 0.  Returns 0 or -1 (out of memory: nothing
 * is left to free). */
static int members_start(kn_rig_t *r, kn_rig_worker_t *w, int64_t *now,
                         int answers) {
  static const char *ids[4] = {"s0", "s1", "s2", "s3"};
  for (int i = 0; i < 4; i++) g_four[i] = sh(ids[i], NULL, NULL, 0);
  kn_cc_cfg_t c1 = members_cfg("w1"), c2 = members_cfg("w2");
  if (rig_with(r, &w[0], g_four, 4, &c1)) return -1;
  if (kn_rig_start(r, &w[1], &c2)) {
    kn_rig_kill(&w[0]);
    kn_rig_close(r);
    return -1;
  }
  w[0].answer_yields = w[1].answer_yields = answers;
  *now = 0;
  return 0;
}

/* The same two, balanced, then settled: they write heartbeats and
 * renewals and list the lease table no more.  Their applications never
 * answer a hand-over: the leases change hands when it times out. */
static int members_pair(kn_rig_t *r, kn_rig_worker_t *w, int64_t *now) {
  if (members_start(r, w, now, 0)) return -1;
  steps(w, 2, now, 60000);
  return 0;
}

static void members_end(kn_rig_t *r, kn_rig_worker_t *w) {
  kn_rig_kill(&w[0]);
  kn_rig_kill(&w[1]);
  kn_rig_close(r);
}

static void test_members_settled(void) {
  kn_rig_t r;
  kn_rig_worker_t w[2];
  int64_t now;
  KT_REQUIRE(members_pair(&r, w, &now) == 0);
  KT_CHECK(held(&w[0]) == 2 && held(&w[1]) == 2);
  KT_REQUIRE(w[0].d && w[1].d, members_end(&r, w));
  KT_CHECK(kn_cc_members(core(&w[0])) == 2 && kn_cc_members(core(&w[1])) == 2);
  KT_CHECK(kn_cc_is_leader(core(&w[0])) && !kn_cc_is_leader(core(&w[1])));
  int lists[2] = {w[0].s.lists, w[1].s.lists}, beats = w[0].s.beats;
  steps(w, 2, &now, 360000);
  /* Five minutes: not one listing of the lease table, a heartbeat every
   * renewal interval. */
  KT_CHECK_INT(w[0].s.lists, lists[0]);
  KT_CHECK_INT(w[1].s.lists, lists[1]);
  KT_CHECK(w[0].s.beats - beats >= 70 && w[0].s.beats - beats <= 80);
  KT_CHECK(held(&w[0]) == 2 && held(&w[1]) == 2);
  members_end(&r, w);
}

/* The same, their applications answering hand-overs at once: the
 * second worker is handed its share within a few renewal intervals, not
 * when a hand-over times out, and no write is refused. */
static void test_members_handoff_answered(void) {
  kn_rig_t r;
  kn_rig_worker_t w[2];
  int64_t now, balanced = -1;
  KT_REQUIRE(members_start(&r, w, &now, 1) == 0);
  for (; now < 60000; now += 250) {
    for (int i = 0; i < 2; i++)
      if (w[i].d) tick(&w[i], now);
    if (balanced < 0 && held(&w[0]) == 2 && held(&w[1]) == 2) balanced = now;
  }
  /* Asked at the first take round, learnt at the owner's next renewal,
   * passed on: two renewal intervals and a take round at most, where a
   * hand-over times out after 30 s. */
  KT_CHECK(balanced >= 0 && balanced <= 2 * 4000 + 2000);
  KT_CHECK(held(&w[0]) == 2 && held(&w[1]) == 2);
  KT_CHECK(w[0].s.yield == 2 && w[1].s.start == 2);
  KT_CHECK(w[0].s.refused == 0 && w[1].s.refused == 0);
  KT_CHECK(w[0].s.stop == 0 && w[1].s.stop == 0);
  members_end(&r, w);
}

/* A worker dies: its leases are taken a lease duration after its last
 * heartbeat, not before, and soon after. */
static void test_members_death(void) {
  kn_rig_t r;
  kn_rig_worker_t w[2];
  int64_t now;
  KT_REQUIRE(members_pair(&r, w, &now) == 0);
  kn_rig_kill(&w[1]);
  int64_t last = w[1].s.beat_ms, took = -1;
  for (; now < 100000 && took < 0; now += 100) {
    tick(&w[0], now);
    if (held(&w[0]) == 4) took = now;
  }
  KT_CHECK(took >= last + 10000);
  KT_CHECK(took <= last + 10000 + 1500);
  /* Long dead, it is forgotten: the leader's heartbeat removes it from
   * the membership six lease durations after its beat last moved. */
  kn_members_t m = {0};
  steps(w, 1, &now, last + 6 * 10000 - 4000);
  KT_CHECK_OK(r.ls->ops->members(r.ls, &m));
  KT_CHECK(m.n == 2);
  kn_members_clear(&m);
  steps(w, 1, &now, last + 6 * 10000 + 4000 + 250);
  KT_CHECK_OK(r.ls->ops->members(r.ls, &m));
  KT_CHECK(m.n == 1 && m.v && same(m.v[0].worker, "w1"));
  kn_members_clear(&m);
  KT_CHECK(held(&w[0]) == 4 && kn_cc_members(core(&w[0])) == 1);
  members_end(&r, w);
}

/* A lease passed on to an asker that dies meanwhile, still alive in the
 * owner's view when the pass-on lands: the others' look at its death may
 * come before the lease is its, so the owner tells them (an epoch bump)
 * once it counts the asker dead. */
static int64_t epoch_of(kn_rig_t *r) {
  kn_members_t m = {0};
  if (r->ls->ops->members(r->ls, &m)) return -1;
  int64_t e = m.epoch;
  kn_members_clear(&m);
  return e;
}

static void test_members_dead_asker(void) {
  kn_rig_t r;
  kn_rig_worker_t w[2];
  int64_t now;
  KT_REQUIRE(members_start(&r, w, &now, 1) == 0);
  static const char *ids[4] = {"s0", "s1", "s2", "s3"};
  int asker = -1;
  const char *key = NULL;
  for (; now < 30000 && asker < 0; now += 50) {
    for (int i = 0; i < 2; i++)
      if (w[i].d) tick(&w[i], now);
    for (int k = 0; k < 4 && asker < 0; k++) {
      const kn_lease_t *l = L(&r, ids[k]);
      if (l && l->checkpoint_owner && l->owner) {
        asker = same(l->owner, "w1") ? 0 : 1;
        key = ids[k];
      }
    }
  }
  KT_REQUIRE(asker >= 0, members_end(&r, w));
  int owner = 1 - asker;
  int64_t last = w[asker].s.beat_ms;
  kn_rig_kill(&w[asker]);
  /* The owner learns of the ask and its application answers at once:
   * the lease is passed on while the asker is alive in the view. */
  int64_t passed = -1;
  for (; now < last + 9000 && passed < 0; now += 50) {
    tick(&w[owner], now);
    if (!L(&r, key)->checkpoint_owner) passed = now;
  }
  KT_REQUIRE(passed >= 0, members_end(&r, w));
  KT_CHECK_STR(L(&r, key)->owner, asker ? "w2" : "w1");
  int64_t e0 = epoch_of(&r);
  steps(&w[owner], 1, &now, last + 10000 + 3000);
  KT_CHECK(epoch_of(&r) > e0);
  members_end(&r, w);
}

/* After a redeploy, hundreds of worker ids are dead at once: the leader
 * forgets them a few per heartbeat (each is a REMOVE in an expression
 * DynamoDB caps at 4 KB), until none is left. */
static void test_members_forget_capped(void) {
  kn_rig_t r;
  KT_REQUIRE(kn_rig_open(&r) == 0);
  for (int i = 0; i < 100; i++) {
    char id[32];
    snprintf(id, sizeof(id), "old-%03d", i);
    kn_members_t m = {0};
    KT_REQUIRE(!r.ls->ops->heartbeat(r.ls, id, 0, 1, 0, 0, NULL, 0, &m),
               kn_rig_close(&r));
    kn_members_clear(&m);
  }
  static kn_cc_shard_t one[1];
  one[0] = sh("s0", NULL, NULL, 0);
  r.shards = one;
  r.n_shards = 1;
  kn_rig_worker_t w;
  kn_cc_cfg_t cfg = members_cfg("a-new"); /* sorts first: the leader */
  KT_REQUIRE(kn_rig_start(&r, &w, &cfg) == 0, kn_rig_close(&r));
  size_t prev = 101, most = 0;
  int64_t now = 0;
  for (; now < 6 * 10000 + 60000; now += 250) {
    tick(&w, now);
    kn_members_t m = {0};
    if (r.ls->ops->members(r.ls, &m)) continue;
    if (m.n < prev && prev - m.n > most) most = prev - m.n;
    prev = m.n;
    kn_members_clear(&m);
  }
  KT_CHECK(prev == 1);
  KT_CHECK(most > 0 && most <= 32);
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

/* Heartbeats fail while renewals go on, and its leases cannot be marked:
 * the worker stops reading before the other counts it dead and takes its
 * leases. */
static void test_members_fence(void) {
  kn_rig_t r;
  kn_rig_worker_t w[2];
  int64_t now;
  KT_REQUIRE(members_pair(&r, w, &now) == 0);
  kn_error_t *down = kn_error_new(KN_ERR__TRANSPORT, "unreachable");
  r.fail_beat = down;
  r.fail_mark = down; /* and the leases cannot say so */
  r.fail_beat_of = "w1";
  int64_t last = w[0].s.beat_ms, stopped = -1, taken = -1;
  int deadlines = w[0].s.deadline;
  for (; now < 100000 && taken < 0; now += 100) {
    for (int i = 0; i < 2; i++) tick(&w[i], now);
    if (stopped < 0 && w[0].s.stop == 2) stopped = now;
    if (held(&w[1]) > 2) taken = now;
  }
  r.fail_mark = NULL;
  r.fail_beat = NULL;
  kn_error_destroy(down);
  KT_CHECK(w[0].s.stop == 2 && w[0].s.stop_reason == KN_ERR__TIMED_OUT);
  KT_CHECK(stopped >= 0 && stopped <= last + 8000 + 100);
  KT_CHECK(taken > stopped);
  KT_CHECK(held(&w[0]) == 0 || taken < 0);
  /* Its readers had been told to stop by then (the heartbeat's deadline
   * came before the lease's), and no later deadline since. */
  KT_CHECK(w[0].s.deadline == deadlines);
  KT_CHECK(w[0].s.until <= last + 8000 && w[0].s.until <= stopped);
  members_end(&r, w);
}

/* Membership lost mid-run (access to its table denied): the others still
 * judge the worker by its last beat and take its leases at once a lease
 * duration later.  It stops reading at its heartbeat's deadline, as
 * before, and takes nothing until they have forgotten it; then it works
 * on by the lease table alone.  No lease goes back and forth. */
static void test_members_lost_mid_run(void) {
  kn_rig_t r;
  kn_rig_worker_t w[2];
  int64_t now;
  KT_REQUIRE(members_pair(&r, w, &now) == 0);
  KT_REQUIRE(held(&w[0]) == 2 && held(&w[1]) == 2, members_end(&r, w));
  kn_error_t *denied =
      kn_error_new(KN_ERR__UNSUPPORTED, "membership table: access denied");
  r.fail_beat = denied;
  r.fail_beat_of = "w1";
  int64_t last = w[0].s.beat_ms, stopped = -1, taken = -1, back = -1;
  int starts = w[0].s.start;
  for (; now < last + 120000; now += 100) {
    for (int i = 0; i < 2; i++) tick(&w[i], now);
    if (stopped < 0 && w[0].s.stop == 2) stopped = now;
    if (taken < 0 && held(&w[1]) == 4) taken = now;
    if (back < 0 && w[0].s.start > starts) back = now;
  }
  r.fail_beat = NULL;
  kn_error_destroy(denied);
  KT_CHECK(stopped >= 0 && stopped <= last + 8000 + 100);
  KT_CHECK(taken > stopped);
  /* Nothing taken back while the others still knew it as a member. */
  KT_CHECK(back < 0 || back >= last + 70000);
  KT_CHECK(w[1].s.stop == 0 && w[1].s.refused == 0);
  members_end(&r, w);
}

/* A heartbeat refused for good (the item past DynamoDB's 400 KB, a
 * malformed epoch: ValidationException, not retriable) is not retried for
 * ever: the worker leaves the membership and the lease table decides. */
static void test_members_refused_for_good(void) {
  kn_rig_t r;
  kn_rig_worker_t w[2];
  int64_t now;
  KT_REQUIRE(members_pair(&r, w, &now) == 0);
  kn_error_t *bad = kn_error_new(KN_ERR_VALIDATION,
                                 "Item size has exceeded the maximum allowed");
  KT_REQUIRE(!kn_error_is_retriable(bad), kn_error_destroy(bad),
             members_end(&r, w));
  r.fail_beat = bad;
  r.fail_beat_of = "w1";
  steps(w, 2, &now, now + 20000);
  int beats = w[0].s.beats;
  steps(w, 2, &now, now + 60000);
  KT_CHECK_INT(w[0].s.beats, beats); /* no more heartbeats */
  KT_CHECK(kn_cc_members(core(&w[0])) == 0);
  r.fail_beat = NULL;
  kn_error_destroy(bad);
  members_end(&r, w);
}

/* Heartbeats fail (the membership item throttled) while the lease table
 * answers: the worker marks every lease it holds before its heartbeat's
 * deadline and reads on by the leases' deadlines; the other counts it
 * dead but judges its marked leases by their renewals, so nothing moves.
 * When heartbeats come back, the marks are removed. */
/* n_shards open shards s00.., and n workers named w<first>.. with items
 * of two members (up to 16 items). */
static void items_setup(kn_cc_shard_t *shards, char (*ids)[8], int n_shards,
                        char (*names)[4], kn_cc_cfg_t *cfg, int n, char first) {
  for (int i = 0; i < n_shards; i++) {
    snprintf(ids[i], sizeof(ids[i]), "s%02d", i);
    shards[i] = sh(ids[i], NULL, NULL, 0);
  }
  for (int i = 0; i < n; i++) {
    snprintf(names[i], sizeof(names[i]), "w%c", first + i);
    cfg[i] = members_cfg(names[i]);
    cfg[i].member_items = 16;
    cfg[i].member_item_size = 2;
  }
}

/* Eight workers on sixteen shards with items of two members: they spread
 * over items, each item written by few; the leader (w0) reads them all.
 * A worker killed has its leases held again by the others; without the
 * roster the leader gathers everyone back into one item. */
static void test_members_spread(void) {
  static kn_cc_shard_t shards[16];
  static char ids[16][8];
  kn_rig_t r;
  kn_rig_worker_t w[8];
  char names[8][4];
  kn_cc_cfg_t cfg[8];
  items_setup(shards, ids, 16, names, cfg, 8, '0');
  KT_REQUIRE(rig_with(&r, &w[0], shards, 16, &cfg[0]) == 0);
  int started = 1;
  for (; started < 8; started++)
    if (kn_rig_start(&r, &w[started], &cfg[started])) break;
  int64_t now = 0;
  steps(w, started, &now, 120000);
  size_t lo = 16, hi = 0, total = 0;
  for (int i = 0; i < started; i++) {
    size_t h = held(&w[i]);
    total += h;
    if (h < lo) lo = h;
    if (h > hi) hi = h;
  }
  KT_CHECK_INT((int)total, 16);
  KT_CHECK(hi - lo <= 1);
  KT_CHECK(kn_cc_is_leader(core(&w[0])));
  /* Spread: more than one item, none with more than four members. */
  kn_members_t m;
  KT_CHECK_OK(r.ls->ops->members(r.ls, &m));
  int per[KN_MEMBERS_BUCKETS_MAX] = {0}, items = 0, most = 0;
  for (size_t i = 0; i < m.n; i++)
    if (m.v[i].bucket >= 0 && m.v[i].bucket < KN_MEMBERS_BUCKETS_MAX)
      per[m.v[i].bucket]++;
  for (int b = 0; b < KN_MEMBERS_BUCKETS_MAX; b++) {
    items += per[b] > 0;
    if (per[b] > most) most = per[b];
  }
  KT_CHECK_INT((int)m.n, 8);
  KT_CHECK(items >= 2 && most <= 4);
  KT_CHECK(m.digest && strncmp(m.digest, "nb=", 3) == 0);
  kn_members_clear(&m);
  /* w5 dies: within 20 s its leases are held by the others. */
  size_t had = held(&w[5]);
  kn_rig_kill(&w[5]);
  int64_t killed = now;
  size_t back = 0;
  while (now < killed + 20000 && back < 16) {
    steps(w, started, &now, now + 250);
    back = 0;
    for (int i = 0; i < started; i++) back += w[i].d ? held(&w[i]) : 0;
  }
  KT_CHECK(had > 0);
  KT_CHECK_INT((int)back, 16);
  /* No roster to be had: back to one item, and every lease still held. */
  r.fail_roster = 1;
  steps(w, started, &now, now + 60000);
  KT_CHECK_OK(r.ls->ops->members(r.ls, &m));
  int outside = 0;
  /* (w5's entry stays where it died: only a roster shows it) */
  for (size_t i = 0; i < m.n; i++)
    outside += m.v[i].bucket != 0 && strcmp(m.v[i].worker, "w5") != 0;
  KT_CHECK_INT(outside, 0);
  kn_members_clear(&m);
  back = 0;
  for (int i = 0; i < started; i++) back += w[i].d ? held(&w[i]) : 0;
  KT_CHECK_INT((int)back, 16);
  for (int i = 0; i < started; i++) kn_rig_kill(&w[i]);
  kn_rig_close(&r);
}

/* A fleet started at once: a worker that finds item 0 over its size, and
 * no digest, beats in an item of its own guess and takes nothing until
 * the leader has spread the group; then every lease is held. */
static void test_members_cold_start(void) {
  static kn_cc_shard_t shards[24];
  static char ids[24][8];
  kn_rig_t r;
  kn_rig_worker_t w[12];
  char names[12][4];
  kn_cc_cfg_t cfg[12];
  items_setup(shards, ids, 24, names, cfg, 12, 'a');
  KT_REQUIRE(rig_with(&r, &w[0], shards, 24, &cfg[0]) == 0);
  int started = 1;
  for (; started < 3; started++)
    KT_REQUIRE(kn_rig_start(&r, &w[started], &cfg[started]) == 0);
  int64_t now = 0;
  steps(w, started, &now, 500); /* three beat in item 0: over its size */
  for (; started < 12; started++)
    KT_REQUIRE(kn_rig_start(&r, &w[started], &cfg[started]) == 0);
  steps(w, started, &now, 1000);
  kn_members_t m;
  KT_CHECK_OK(r.ls->ops->members(r.ls, &m));
  KT_CHECK(m.digest == NULL); /* no leader has spread them yet */
  int outside = 0, in0 = 0;
  for (size_t i = 0; i < m.n; i++) {
    int k = m.v[i].worker[1] - 'a';
    outside += m.v[i].bucket != 0;
    in0 += m.v[i].bucket == 0;
    /* beating outside item 0, unknown there: it holds nothing yet */
    if (m.v[i].bucket != 0 && k >= 0 && k < 12)
      KT_CHECK_INT((int)held(&w[k]), 0);
  }
  kn_members_clear(&m);
  KT_CHECK(outside >= 4); /* the late ones did not crowd item 0 */
  KT_CHECK(in0 < 12);
  steps(w, started, &now, 120000);
  KT_CHECK_OK(r.ls->ops->members(r.ls, &m));
  KT_CHECK(m.digest && strncmp(m.digest, "nb=", 3) == 0);
  int per[KN_MEMBERS_BUCKETS_MAX] = {0}, most = 0;
  for (size_t i = 0; i < m.n; i++)
    if (m.v[i].bucket >= 0 && m.v[i].bucket < KN_MEMBERS_BUCKETS_MAX)
      per[m.v[i].bucket]++;
  for (int b = 0; b < KN_MEMBERS_BUCKETS_MAX; b++)
    if (per[b] > most) most = per[b];
  KT_CHECK_INT((int)m.n, 12);
  KT_CHECK(most <= 2);
  kn_members_clear(&m);
  size_t total = 0;
  for (int i = 0; i < started; i++) total += held(&w[i]);
  KT_CHECK_INT((int)total, 24);
  for (int i = 0; i < started; i++) kn_rig_kill(&w[i]);
  kn_rig_close(&r);
}

static void test_members_fallback(void) {
  kn_rig_t r;
  kn_rig_worker_t w[2];
  int64_t now;
  KT_REQUIRE(members_pair(&r, w, &now) == 0);
  KT_REQUIRE(held(&w[0]) == 2 && held(&w[1]) == 2, members_end(&r, w));
  kn_error_t *thr = kn_error_new(KN_ERR_PROVISIONED_THROUGHPUT_EXCEEDED,
                                 "membership item throttled");
  r.fail_beat = thr;
  r.fail_beat_of = "w1";
  int64_t last = w[0].s.beat_ms;
  int marked_by = -1;
  for (; now < last + 60000; now += 100) {
    for (int i = 0; i < 2; i++) tick(&w[i], now);
    if (marked_by < 0 && held(&w[0]) == 2) {
      int n = 0;
      for (int k = 0; k < 4; k++) {
        const kn_lease_t *l = L(&r, g_four[k].id);
        n += l && same(l->owner, "w1") && l->beat_failing;
      }
      if (n == 2) marked_by = (int)(now - last);
    }
  }
  KT_CHECK(marked_by > 0 && marked_by < 8000);
  KT_CHECK(w[0].s.stop == 0 && held(&w[0]) == 2);
  KT_CHECK(held(&w[1]) == 2 && w[1].s.refused == 0);
  KT_CHECK(kn_cc_members(core(&w[1])) == 1); /* it counts w1 dead */
  /* Heartbeats back: the marks go with the next renewals. */
  r.fail_beat = NULL;
  kn_error_destroy(thr);
  steps(w, 2, &now, now + 10000);
  int still = 0;
  for (int k = 0; k < 4; k++) still += L(&r, g_four[k].id)->beat_failing;
  KT_CHECK(still == 0);
  KT_CHECK(w[0].s.stop == 0 && held(&w[0]) == 2 && held(&w[1]) == 2);
  KT_CHECK(kn_cc_members(core(&w[1])) == 2);
  members_end(&r, w);
}

/* A worker without heartbeats ("kcl") holds the four leases and renews
 * them every 2 s; w1 (membership on) joins at 0 and is stepped every 250
 * ms to `until`.  With answers, "kcl" is a KCL 3.x worker: its leases are
 * listed owner_hands_over and it passes on a lease asked for at its next
 * renewal; else it is a KCL 2.x worker, which never does.  *asked: a
 * hand-off was seen under way.  Returns 0, or -1 (out of memory: nothing
 * left to free). */
static int beside_kcl(kn_rig_t *r, kn_rig_worker_t *w, int answers,
                      int64_t until, int *asked) {
  static const char *ids[4] = {"s0", "s1", "s2", "s3"};
  int64_t counter[4];
  for (int i = 0; i < 4; i++) g_four[i] = sh(ids[i], NULL, NULL, 0);
  if (kn_rig_open(r)) return -1;
  r->shards = g_four;
  r->n_shards = 4;
  r->hands_over = answers ? "kcl" : NULL;
  for (int i = 0; i < 4; i++) {
    kn_lease_t l = ls(ids[i], KN_CKPT_TRIM_HORIZON);
    KT_CHECK_OK(r->ls->ops->create(r->ls, &l));
    KT_CHECK_OK(r->ls->ops->take(r->ls, ids[i], 0, NULL, "kcl", &counter[i]));
  }
  kn_cc_cfg_t cfg = members_cfg("w1");
  if (kn_rig_start(r, w, &cfg)) {
    kn_rig_close(r);
    return -1;
  }
  w->answer_yields = 1;
  *asked = 0;
  for (int64_t now = 0; now < until; now += 250) {
    at(r, now);
    for (int i = 0; now % 2000 == 0 && i < 4; i++) {
      char *to = NULL;
      int64_t c = counter[i];
      kn_error_t *e =
          counter[i] < 0
              ? NULL
              : r->ls->ops->renew(r->ls, ids[i], c, "kcl", &counter[i], &to);
      if (e) counter[i] = -1; /* lost: taken from it */
      if (!e && to && answers &&
          r->ls->ops->handoff_done(r->ls, ids[i], counter[i], "kcl",
                                   &counter[i]) == NULL)
        counter[i] = -1; /* passed on */
      kn_error_destroy(e);
      free(to);
    }
    tick(w, now);
    const kn_lease_t *v;
    size_t n = kn_rig_list(r, &v);
    for (size_t i = 0; i < n; i++) *asked |= v[i].checkpoint_owner != NULL;
  }
  return 0;
}

/* A worker that writes no heartbeat and is no KCL 3.x -- a KCL 2.x worker
 * -- never answers a hand-off: once it has been in no view for a lease
 * duration (10 s), its leases are stolen, as the KCL 2.x steals; none is
 * asked for and waited on for handoff_ms (30 s) and more. */
static void test_steal_from_kcl2(void) {
  kn_rig_t r;
  kn_rig_worker_t w;
  int asked;
  KT_REQUIRE(beside_kcl(&r, &w, 0, 20000, &asked) == 0);
  KT_CHECK(!asked);
  KT_CHECK_INT(held(&w), 2);
  KT_CHECK_INT(w.s.start, 2);
  const kn_lease_t *v;
  size_t n = kn_rig_list(&r, &v), mine = 0;
  for (size_t i = 0; i < n; i++) mine += same(v[i].owner, "w1");
  KT_CHECK_INT(mine, 2);
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

/* A KCL 3.x worker is asked (it answers: checkpointOwner), and hands
 * over. */
static void test_ask_kcl3(void) {
  kn_rig_t r;
  kn_rig_worker_t w;
  int asked;
  KT_REQUIRE(beside_kcl(&r, &w, 1, 20000, &asked) == 0);
  KT_CHECK(asked);
  KT_CHECK_INT(held(&w), 2);
  KT_CHECK_INT(w.s.start, 2);
  kn_rig_kill(&w);
  kn_rig_close(&r);
}

int main(void) {
  KT_RUN(test_plan_empty_table);
  KT_RUN(test_plan_partial_table);
  KT_RUN(test_plan_finished_not_recreated);
  KT_RUN(test_plan_merge_other_parent);
  KT_RUN(test_plan_listing_behind_table);
  KT_RUN(test_plan_parent_past_retention);
  KT_RUN(test_family_read);
  KT_RUN(test_done_by_lineage);
  KT_RUN(test_refused_config);
  KT_RUN(test_first_sync_errors);
  KT_RUN(test_worker_life);
  KT_RUN(test_late_renewal);
  KT_RUN(test_lost_and_manual);
  KT_RUN(test_requests_answered);
  KT_RUN(test_first_sync_errors_drive);
  KT_RUN(test_handoff);
  KT_RUN(test_handoff_silent_owner);
  KT_RUN(test_handoff_closing);
  KT_RUN(test_handoff_family_read);
  KT_RUN(test_no_passon_to_a_stealer);
  KT_RUN(test_landed_write_kept);
  KT_RUN(test_handoff_one_clock);
  KT_RUN(test_members_settled);
  KT_RUN(test_members_handoff_answered);
  KT_RUN(test_steal_from_kcl2);
  KT_RUN(test_ask_kcl3);
  KT_RUN(test_members_death);
  KT_RUN(test_members_dead_asker);
  KT_RUN(test_members_forget_capped);
  KT_RUN(test_members_fence);
  KT_RUN(test_members_lost_mid_run);
  KT_RUN(test_members_refused_for_good);
  KT_RUN(test_members_spread);
  KT_RUN(test_members_cold_start);
  KT_RUN(test_members_fallback);
  return KT_DONE();
}
