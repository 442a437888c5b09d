/* The coordination core: its planners, and one or two workers driven step
 * by step against a table kept here with the stores' conditional rules. */
#include <stdlib.h>
#include <string.h>

#include "consumer/ccore.h"
#include "core/error.h"
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

/* ---- a table with the stores' rules ---- */

#define MAXL 16
typedef struct table {
  kn_lease_t v[MAXL];
  size_t n;
  kn_member_t mb[4]; /* the membership */
  size_t n_mb;
  int64_t epoch;
} table_t;

/* The heartbeat of store.h: sets worker's row, adds bump, answers all
 * (the rows' names are borrowed by the answer). */
static void beat(table_t *t, const kn_cc_action_t *a, const char *worker,
                 kn_members_t *out) {
  size_t i = 0;
  while (i < t->n_mb && strcmp(t->mb[i].worker, worker) != 0) i++;
  if (i == t->n_mb) {
    t->mb[t->n_mb++].worker = (char *)worker;
    for (size_t k = i; k > 0 && strcmp(t->mb[k - 1].worker, worker) > 0; k--) {
      kn_member_t x = t->mb[k];
      t->mb[k] = t->mb[k - 1];
      t->mb[k - 1] = x;
      i = k - 1;
    }
  }
  t->mb[i].beat = a->beat;
  t->mb[i].leases = a->leases;
  t->epoch += a->bump;
  out->v = t->mb;
  out->n = t->n_mb;
  out->epoch = t->epoch;
}

static kn_lease_t *tfind(table_t *t, const char *key) {
  /* An action without its key is the core's fault: no lease matches. */
  if (!key) return NULL;
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->v[i].key, key) == 0) return &t->v[i];
  return NULL;
}

/* The lease of key; an empty one when the table has none (a case read
 * after a failed allocation), so that checks fail instead of crashing. */
static kn_lease_t *tget(table_t *t, const char *key) {
  static kn_lease_t none;
  kn_lease_t *l = tfind(t, key);
  memset(&none, 0, sizeof(none));
  return l ? l : &none;
}

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

/* Applies a store action; returns the error (NULL: done).  *to: a
 * renewal's hand-off (borrowed from the table). */
static kn_error_t *apply(table_t *t, const kn_cc_action_t *a,
                         const char *worker, int64_t *counter,
                         const char **to) {
  kn_lease_t *l = a->key ? tfind(t, a->key) : NULL;
  kn_error_t *cond = kn_error_new(KN_ERR_CONDITIONAL_CHECK_FAILED, "cond");
  switch (a->op) {
    case KN_CC_CREATE:
      /* Never without its lease (the core drops the action instead). */
      KT_CHECK(a->lease != NULL);
      if (!a->lease) {
        kn_error_destroy(cond);
        return kn_error_new(KN_ERR__NOMEM, "create without a lease");
      }
      if (tfind(t, a->lease->key)) return cond;
      kn_lease_copy(&t->v[t->n++], a->lease);
      break;
    case KN_CC_TAKE:
      if (!l || l->counter != a->counter || !same(l->owner, a->old_owner))
        return cond;
      free(l->owner);
      l->owner = strdup(worker);
      free(l->checkpoint_owner);
      l->checkpoint_owner = NULL;
      *counter = ++l->counter;
      break;
    case KN_CC_HANDOFF:
      if (!l || l->counter != a->counter || !same(l->owner, a->old_owner) ||
          l->checkpoint_owner)
        return cond;
      l->checkpoint_owner = l->owner;
      l->owner = strdup(worker);
      break;
    case KN_CC_HANDOFF_DONE:
      if (!l || l->counter != a->counter || !same(l->checkpoint_owner, worker))
        return cond;
      free(l->checkpoint_owner);
      l->checkpoint_owner = NULL;
      *counter = ++l->counter;
      break;
    case KN_CC_RENEW:
    case KN_CC_RELEASE:
    case KN_CC_CHECKPOINT:
      if (!l || l->counter != a->counter ||
          !same(kn_lease_actual_owner(l), worker))
        return cond;
      if (a->op != KN_CC_RELEASE && l->checkpoint_owner) *to = l->owner;
      if (a->op == KN_CC_RELEASE) {
        free(l->owner);
        l->owner = NULL;
        free(l->checkpoint_owner);
        l->checkpoint_owner = NULL;
      }
      if (a->op == KN_CC_CHECKPOINT && a->checkpoint) {
        free(l->checkpoint);
        l->checkpoint = dup0(a->checkpoint);
        l->checkpoint_subseq = a->subseq;
      }
      *counter = ++l->counter;
      break;
    case KN_CC_REMOVE:
      if (!l || l->counter != a->counter) return cond;
      kn_lease_clear(l);
      *l = t->v[--t->n];
      break;
    default:
      break;
  }
  kn_error_destroy(cond);
  return NULL;
}

/* What a worker's driver saw. */
typedef struct seen {
  int start, stop, extend, done, closed, fatal, replies, yield;
  int lists, beats; /* LIST_LEASES and HEARTBEAT calls */
  int64_t beat_ms;  /* the last heartbeat written */
  int64_t tenure;
  kn_err_t stop_reason, reply_code;
  char started[64];
  char start_ckpt[64];
} seen_t;

static kn_cc_shard_t g_shards[8];
static size_t g_n_shards;
/* Heartbeats of g_fail_beat_of fail with g_fail_beat when set. */
static kn_error_t *g_fail_beat;
static const char *g_fail_beat_of;

/* Carries out every queued action at once, answering store calls from t,
 * until the core has nothing more to say. */
static void run(kn_cc_t *c, table_t *t, const char *worker, int64_t now,
                seen_t *s, const kn_error_t *fail_renew) {
  kn_cc_action_t a;
  for (int guard = 0; guard < 1000 && kn_cc_next(c, &a); guard++) {
    int64_t counter = 0;
    kn_error_t *err = NULL;
    switch (a.op) {
      case KN_CC_LIST_SHARDS:
        kn_cc_shards_done(c, a.id, NULL, g_shards, g_n_shards, now);
        break;
      case KN_CC_LIST_LEASES:
        s->lists++;
        kn_cc_leases_done(c, a.id, NULL, t->v, t->n, now);
        break;
      case KN_CC_HEARTBEAT: {
        kn_members_t m;
        s->beats++;
        if (g_fail_beat && strcmp(worker, g_fail_beat_of) == 0) {
          kn_cc_members_done(c, a.id, g_fail_beat, NULL, now, now);
          break;
        }
        s->beat_ms = now;
        beat(t, &a, worker, &m);
        kn_cc_members_done(c, a.id, NULL, &m, now, now);
        break;
      }
      case KN_CC_GET: {
        kn_lease_t *l = tfind(t, a.key);
        kn_error_t *nf = l ? NULL : kn_error_new(KN_ERR__NOT_FOUND, "gone");
        kn_cc_lease_got(c, a.id, nf, l, now);
        kn_error_destroy(nf);
        break;
      }
      case KN_CC_CREATE:
      case KN_CC_TAKE:
      case KN_CC_RENEW:
      case KN_CC_CHECKPOINT:
      case KN_CC_RELEASE:
      case KN_CC_REMOVE:
      case KN_CC_SET_CHILDREN:
      case KN_CC_HANDOFF:
      case KN_CC_HANDOFF_DONE: {
        const char *to = NULL;
        if (a.op == KN_CC_RENEW && fail_renew)
          err = kn_error_copy(fail_renew);
        else
          err = apply(t, &a, worker, &counter, &to);
        char *to_copy = dup0(to);
        kn_cc_store_done(c, a.id, err, counter, to_copy, now, now);
        free(to_copy);
        kn_error_destroy(err);
        break;
      }
      case KN_CC_START:
        s->start++;
        s->tenure = a.tenure;
        snprintf(s->started, sizeof(s->started), "%s", a.key);
        snprintf(s->start_ckpt, sizeof(s->start_ckpt), "%s",
                 a.lease && a.lease->checkpoint ? a.lease->checkpoint : "");
        break;
      case KN_CC_YIELD:
        s->yield++;
        break;
      case KN_CC_STOP:
        s->stop++;
        s->stop_reason = a.reason;
        break;
      case KN_CC_EXTEND:
        s->extend++;
        break;
      case KN_CC_DONE:
        s->done++;
        break;
      case KN_CC_REPLY:
        s->replies++;
        s->reply_code = a.reason;
        break;
      case KN_CC_FATAL:
        s->fatal++;
        break;
      case KN_CC_CLOSED:
        s->closed++;
        break;
      default:
        break;
    }
  }
}

static kn_cc_cfg_t cfg_for(const char *worker) {
  kn_cc_cfg_t cfg = {
      worker, 10000, 3000, 2000, 60000, 1000, 0, 1, KN_CKPT_TRIM_HORIZON,
      1,      30000, 0,    0,    0};
  return cfg;
}

static void table_free(table_t *t) {
  for (size_t i = 0; i < t->n; i++) kn_lease_clear(&t->v[i]);
  t->n = 0;
}

static void test_worker_life(void) {
  g_shards[0] = sh("s0", NULL, NULL, 0);
  g_n_shards = 1;
  table_t t = {0};
  seen_t s = {0};
  kn_cc_cfg_t cfg = cfg_for("w1");
  KT_CHECK(kn_cc_new(&(kn_cc_cfg_t){"w", 9000, 6000, 0, 0, 0, 0, 0, NULL, 1, 0,
                                    0, 0, 0},
                     0) == NULL); /* the lease would expire between renewals */
  kn_cc_t *c = kn_cc_new(&cfg, 0);
  KT_CHECK(c != NULL);
  kn_cc_tick(c, 0);
  run(c, &t, "w1", 0, &s, NULL);
  KT_CHECK(t.n == 1 && kn_cc_synced(c));
  kn_cc_tick(c, 1);
  run(c, &t, "w1", 1, &s, NULL);
  KT_CHECK(s.start == 1 && same(s.started, "s0") && s.tenure == 1);
  KT_CHECK(kn_cc_held(c) == 1);
  /* Renewed on time: the deadline moves. */
  kn_cc_tick(c, 3001);
  run(c, &t, "w1", 3001, &s, NULL);
  KT_CHECK(t.v[0].counter == 2 && s.extend == 1);
  /* Records handed out and processed: the flush checkpoints them, in
   * place of the next renewal (one write per renewal interval). */
  kn_cc_pos_t p = {"100", 0};
  kn_cc_delivered(c, "s0", 1, &p, 0, 3100);
  kn_cc_processed(c, "s0", 1, &p, 3100);
  kn_cc_tick(c, 4001);
  run(c, &t, "w1", 4001, &s, NULL);
  KT_CHECK(t.v[0].counter == 2 && !same(t.v[0].checkpoint, "100"));
  kn_cc_tick(c, 6001);
  run(c, &t, "w1", 6001, &s, NULL);
  KT_CHECK(t.v[0].checkpoint && same(t.v[0].checkpoint, "100"));
  KT_CHECK(t.v[0].counter == 3);
  /* A report of another tenure changes nothing. */
  kn_cc_shard_ended(c, "s0", 7, NULL, 0, 6100);
  kn_cc_shard_expired(c, "s0", 7, 6100);
  run(c, &t, "w1", 6100, &s, NULL);
  KT_CHECK(s.stop == 0 && kn_cc_held(c) == 1);
  /* The store unreachable: reading stops at the deadline. */
  kn_error_t *down = kn_error_new(KN_ERR__TRANSPORT, "unreachable");
  int64_t now = 6100;
  while (s.stop == 0 && now < 30000) {
    now = kn_cc_wake_ms(c);
    if (now == INT64_MAX) break; /* stopped: out of memory under torture */
    kn_cc_tick(c, now);
    run(c, &t, "w1", now, &s, down);
  }
  kn_error_destroy(down);
  KT_REQUIRE(now != INT64_MAX, kn_cc_destroy(c), table_free(&t));
  KT_CHECK(s.stop == 1 && s.stop_reason == KN_ERR__TIMED_OUT);
  KT_CHECK(now >= 6001 + 10000 - 1500 && now < 6001 + 10000);
  /* The next take round takes it back under a new tenure. */
  kn_cc_tick(c, now + 2000);
  run(c, &t, "w1", now + 2000, &s, NULL);
  KT_CHECK(s.start == 2 && s.tenure > 1);
  int64_t t2 = s.tenure;
  /* A late "ended" of the first tenure does not stop the second. */
  kn_cc_shard_ended(c, "s0", 1, NULL, 0, now + 2100);
  run(c, &t, "w1", now + 2100, &s, NULL);
  KT_CHECK(s.stop == 1);
  /* Close: final checkpoint, release, CLOSED. */
  kn_cc_pos_t q = {"200", 3};
  kn_cc_delivered(c, "s0", t2, &q, 0, now + 2200);
  kn_cc_processed(c, "s0", t2, &q, now + 2200);
  kn_cc_close(c, now + 2300);
  run(c, &t, "w1", now + 2300, &s, NULL);
  KT_CHECK(s.closed == 1 && s.stop == 2 && s.stop_reason == KN_ERR__DESTROY);
  KT_CHECK(t.v[0].owner == NULL && same(t.v[0].checkpoint, "200") &&
           t.v[0].checkpoint_subseq == 3);
  kn_cc_destroy(c);
  table_free(&t);
}

/* Another worker takes the lease: the next renewal is refused and the
 * shard stops; manual checkpoints are answered. */
static void test_lost_and_manual(void) {
  g_shards[0] = sh("s0", NULL, NULL, 1);
  g_n_shards = 1;
  table_t t = {0};
  seen_t s = {0};
  kn_cc_cfg_t cfg = cfg_for("w1");
  cfg.auto_checkpoint = 0;
  kn_cc_t *c = kn_cc_new(&cfg, 0);
  kn_cc_tick(c, 0);
  run(c, &t, "w1", 0, &s, NULL);
  kn_cc_tick(c, 1);
  run(c, &t, "w1", 1, &s, NULL);
  KT_CHECK(s.start == 1);
  /* The end is handed out, but the last record is not checkpointed yet:
   * no SHARD_END. */
  kn_cc_pos_t p = {"50", 0};
  kn_cc_shard_ended(c, "s0", s.tenure, NULL, 0, 10);
  kn_cc_delivered(c, "s0", s.tenure, &p, 1, 10);
  run(c, &t, "w1", 10, &s, NULL);
  KT_CHECK(same(t.v[0].checkpoint, KN_CKPT_TRIM_HORIZON));
  int token = 0;
  kn_cc_checkpoint(c, "s0", &p, 0, NULL, 0, &token, 20);
  run(c, &t, "w1", 20, &s, NULL);
  KT_CHECK(s.replies == 1 && s.reply_code == KN_ERR_NO_ERROR);
  KT_CHECK(same(t.v[0].checkpoint, KN_CKPT_SHARD_END));
  KT_CHECK(s.done == 1 && t.v[0].owner == NULL);
  kn_cc_checkpoint(c, "s0", &p, 0, NULL, 0, &token, 30);
  run(c, &t, "w1", 30, &s, NULL);
  KT_CHECK(s.replies == 2 && s.reply_code == KN_ERR__LEASE_LOST);
  kn_cc_destroy(c);
  table_free(&t);

  /* Stolen: w2 wrote the lease; w1's renewal is refused. */
  g_shards[0] = sh("s0", NULL, NULL, 0);
  memset(&s, 0, sizeof(s));
  c = kn_cc_new(&cfg, 0);
  kn_cc_tick(c, 0);
  run(c, &t, "w1", 0, &s, NULL);
  kn_cc_tick(c, 1);
  run(c, &t, "w1", 1, &s, NULL);
  KT_REQUIRE(t.n == 1, kn_cc_destroy(c), table_free(&t));
  free(t.v[0].owner);
  t.v[0].owner = strdup("w2");
  t.v[0].counter++;
  kn_cc_tick(c, 3001);
  run(c, &t, "w1", 3001, &s, NULL);
  KT_CHECK(s.stop == 1 && s.stop_reason == KN_ERR__LEASE_LOST);
  KT_CHECK(kn_cc_held(c) == 0);
  kn_cc_destroy(c);
  table_free(&t);
}

/* Worker w1 alone on two shards, holding both. */
static kn_cc_t *two_shard_worker(table_t *t, seen_t *s) {
  g_shards[0] = sh("s0", NULL, NULL, 0);
  g_shards[1] = sh("s1", NULL, NULL, 0);
  g_n_shards = 2;
  kn_cc_cfg_t cfg = cfg_for("w1");
  kn_cc_t *c1 = kn_cc_new(&cfg, 0);
  kn_cc_tick(c1, 0);
  run(c1, t, "w1", 0, s, NULL);
  kn_cc_tick(c1, 1);
  run(c1, t, "w1", 1, s, NULL);
  return c1;
}

/* A worker joins: the lease it balances to is asked for, handed over at
 * the last record the first worker's application was handed, and read on
 * from there -- nothing twice.  The first worker's application answers
 * late: the lease waits for it. */
static void test_handoff(void) {
  table_t t = {0};
  seen_t s1 = {0}, s2 = {0};
  kn_cc_cfg_t c2cfg = cfg_for("w2");
  kn_cc_t *c1 = two_shard_worker(&t, &s1);
  KT_CHECK(kn_cc_held(c1) == 2 && s1.start == 2);
  kn_lease_t *l0 = tget(&t, "s0"), *l1 = tget(&t, "s1");
  kn_cc_pos_t p = {"500", 2};
  kn_cc_delivered(c1, "s0", l0->counter, &p, 0, 10);
  kn_cc_delivered(c1, "s1", l1->counter, &p, 0, 10);
  /* w2 joins and asks for one lease (the counter does not move). */
  kn_cc_t *c2 = kn_cc_new(&c2cfg, 100);
  kn_cc_tick(c2, 100);
  run(c2, &t, "w2", 100, &s2, NULL);
  kn_cc_tick(c2, 101);
  run(c2, &t, "w2", 101, &s2, NULL);
  const char *asked = tget(&t, "s0")->checkpoint_owner ? "s0" : "s1";
  kn_lease_t *la = tget(&t, asked);
  KT_CHECK_STR(la->owner, "w2");
  KT_CHECK_STR(la->checkpoint_owner, "w1");
  KT_CHECK(s2.start == 0 && kn_cc_held(c2) == 0 && !kn_cc_idle(c2));
  /* w2 watches; nothing is handed over yet. */
  kn_cc_tick(c2, 700);
  run(c2, &t, "w2", 700, &s2, NULL);
  KT_CHECK(s2.start == 0);
  /* w1's next renewal learns it: it stops reading the shard. */
  kn_cc_tick(c1, 3001);
  run(c1, &t, "w1", 3001, &s1, NULL);
  KT_CHECK(s1.yield == 1 && s1.stop == 0);
  KT_CHECK_STR(tget(&t, asked)->checkpoint_owner, "w1");
  /* Meanwhile it renews the lease and waits for its application. */
  kn_cc_tick(c1, 6002);
  run(c1, &t, "w1", 6002, &s1, NULL);
  KT_CHECK_STR(tget(&t, asked)->checkpoint_owner, "w1");
  kn_cc_tick(c2, 6003);
  run(c2, &t, "w2", 6003, &s2, NULL);
  KT_CHECK(s2.start == 0);
  /* The application is done with what it was handed: exactly that is
   * checkpointed and the lease passed on. */
  kn_cc_yielded(c1, asked, 1 /* the tenure: the take's counter */, &p, 6100);
  run(c1, &t, "w1", 6100, &s1, NULL);
  la = tget(&t, asked);
  KT_CHECK(la->checkpoint_owner == NULL);
  KT_CHECK_STR(la->owner, "w2");
  KT_CHECK_STR(la->checkpoint, "500");
  KT_CHECK_INT(la->checkpoint_subseq, 2);
  KT_CHECK(kn_cc_held(c1) == 1);
  /* w2 sees it passed on and starts after that record. */
  kn_cc_tick(c2, 6600);
  run(c2, &t, "w2", 6600, &s2, NULL);
  KT_CHECK(s2.start == 1 && same(s2.started, asked));
  KT_CHECK_STR(s2.start_ckpt, "500");
  KT_CHECK(kn_cc_held(c2) == 1);
  /* A later renewal of w1 for that lease is refused, never reaches it. */
  KT_CHECK_STR(tget(&t, asked)->owner, "w2");
  kn_cc_destroy(c1);
  kn_cc_destroy(c2);
  table_free(&t);
}

/* A group stopped as a whole: the asker closes, then the owner.  The
 * owner releases the lease it was asked for instead of passing it on to a
 * worker that is gone, where it would stay until it expired. */
static void test_handoff_closing(void) {
  table_t t = {0};
  seen_t s1 = {0}, s2 = {0};
  kn_cc_cfg_t c2cfg = cfg_for("w2");
  kn_cc_t *c1 = two_shard_worker(&t, &s1);
  KT_REQUIRE(c1 && kn_cc_held(c1) == 2, kn_cc_destroy(c1), table_free(&t));
  kn_cc_t *c2 = kn_cc_new(&c2cfg, 100);
  KT_REQUIRE(c2, kn_cc_destroy(c1), table_free(&t));
  kn_cc_tick(c2, 100);
  run(c2, &t, "w2", 100, &s2, NULL);
  kn_cc_tick(c2, 101);
  run(c2, &t, "w2", 101, &s2, NULL);
  const char *asked = tget(&t, "s0")->checkpoint_owner ? "s0" : "s1";
  KT_CHECK_STR(tget(&t, asked)->owner, "w2");
  kn_cc_tick(c1, 3001);
  run(c1, &t, "w1", 3001, &s1, NULL);
  KT_CHECK(s1.yield == 1);
  kn_cc_close(c2, 3100);
  run(c2, &t, "w2", 3100, &s2, NULL);
  kn_cc_close(c1, 3200);
  run(c1, &t, "w1", 3200, &s1, NULL);
  for (size_t i = 0; i < t.n; i++) {
    KT_CHECK(t.v[i].owner == NULL);
    KT_CHECK(t.v[i].checkpoint_owner == NULL);
  }
  kn_cc_destroy(c1);
  kn_cc_destroy(c2);
  table_free(&t);
}

/* The owner asked never answers (a KCL 2.x worker, or one that froze):
 * after a lease duration without a renewal the lease is taken anyway. */
static void test_handoff_silent_owner(void) {
  table_t t = {0};
  seen_t s1 = {0}, s2 = {0};
  kn_cc_cfg_t c2cfg = cfg_for("w2");
  kn_cc_t *c1 = two_shard_worker(&t, &s1);
  kn_cc_destroy(c1); /* gone without a word; its renewals stop */
  kn_cc_t *c2 = kn_cc_new(&c2cfg, 100);
  kn_cc_tick(c2, 100);
  run(c2, &t, "w2", 100, &s2, NULL);
  kn_cc_tick(c2, 101);
  run(c2, &t, "w2", 101, &s2, NULL);
  KT_CHECK(s2.start == 0);
  for (int64_t now = 500; now < 12000; now += 500) {
    kn_cc_tick(c2, now);
    run(c2, &t, "w2", now, &s2, NULL);
  }
  KT_CHECK(s2.start >= 1);
  KT_CHECK(kn_cc_held(c2) >= 1);
  for (size_t i = 0; i < t.n; i++)
    KT_CHECK(!t.v[i].checkpoint_owner || !same(t.v[i].owner, "w2"));
  kn_cc_destroy(c2);
  table_free(&t);
  (void)s1;
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
static void steps(table_t *t, kn_cc_t **c, const char **w, seen_t *s, int n,
                  int64_t *now, int64_t until) {
  for (; *now < until; *now += 250)
    for (int i = 0; i < n; i++) {
      if (!c[i]) continue;
      kn_cc_tick(c[i], *now);
      run(c[i], t, w[i], *now, &s[i], NULL);
    }
}

/* Two workers on four shards: balanced, then settled, they write
 * heartbeats and renewals and list the lease table no more. */
static void members_pair(table_t *t, kn_cc_t **c, seen_t *s, int64_t *now) {
  const char *w[2] = {"w1", "w2"};
  for (int i = 0; i < 4; i++) {
    static const char *ids[4] = {"s0", "s1", "s2", "s3"};
    g_shards[i] = sh(ids[i], NULL, NULL, 0);
  }
  g_n_shards = 4;
  kn_cc_cfg_t c1 = members_cfg("w1"), c2 = members_cfg("w2");
  c[0] = kn_cc_new(&c1, 0);
  c[1] = kn_cc_new(&c2, 0);
  *now = 0;
  steps(t, c, w, s, 2, now, 60000);
}

static void test_members_settled(void) {
  table_t t = {0};
  seen_t s[2] = {{0}, {0}};
  kn_cc_t *c[2];
  int64_t now;
  const char *w[2] = {"w1", "w2"};
  members_pair(&t, c, s, &now);
  KT_CHECK(kn_cc_held(c[0]) == 2 && kn_cc_held(c[1]) == 2);
  KT_CHECK(kn_cc_members(c[0]) == 2 && kn_cc_members(c[1]) == 2);
  KT_CHECK(kn_cc_is_leader(c[0]) && !kn_cc_is_leader(c[1]));
  int lists[2] = {s[0].lists, s[1].lists}, beats = s[0].beats;
  steps(&t, c, w, s, 2, &now, 360000);
  /* Five minutes: not one listing of the lease table, a heartbeat every
   * renewal interval. */
  KT_CHECK_INT(s[0].lists, lists[0]);
  KT_CHECK_INT(s[1].lists, lists[1]);
  KT_CHECK(s[0].beats - beats >= 70 && s[0].beats - beats <= 80);
  KT_CHECK(kn_cc_held(c[0]) == 2 && kn_cc_held(c[1]) == 2);
  kn_cc_destroy(c[0]);
  kn_cc_destroy(c[1]);
  table_free(&t);
}

/* A worker dies: its leases are taken a lease duration after its last
 * heartbeat, not before, and soon after. */
static void test_members_death(void) {
  table_t t = {0};
  seen_t s[2] = {{0}, {0}};
  kn_cc_t *c[2];
  int64_t now;
  const char *w[2] = {"w1", "w2"};
  members_pair(&t, c, s, &now);
  kn_cc_destroy(c[1]);
  c[1] = NULL;
  int64_t last = s[1].beat_ms, took = -1;
  for (; now < 100000 && took < 0; now += 100) {
    kn_cc_tick(c[0], now);
    run(c[0], &t, "w1", now, &s[0], NULL);
    if (kn_cc_held(c[0]) == 4) took = now;
  }
  KT_CHECK(took >= last + 10000);
  KT_CHECK(took <= last + 10000 + 1500);
  (void)w;
  kn_cc_destroy(c[0]);
  table_free(&t);
}

/* Heartbeats fail while renewals go on: the worker stops reading before
 * the other counts it dead and takes its leases. */
static void test_members_fence(void) {
  table_t t = {0};
  seen_t s[2] = {{0}, {0}};
  kn_cc_t *c[2];
  int64_t now;
  members_pair(&t, c, s, &now);
  g_fail_beat = kn_error_new(KN_ERR__TRANSPORT, "unreachable");
  g_fail_beat_of = "w1";
  int64_t last = s[0].beat_ms, stopped = -1, taken = -1;
  for (; now < 100000 && taken < 0; now += 100) {
    for (int i = 0; i < 2; i++) {
      kn_cc_tick(c[i], now);
      run(c[i], &t, i ? "w2" : "w1", now, &s[i], NULL);
    }
    if (stopped < 0 && s[0].stop == 2) stopped = now;
    if (kn_cc_held(c[1]) > 2) taken = now;
  }
  kn_error_destroy(g_fail_beat);
  g_fail_beat = NULL;
  KT_CHECK(s[0].stop == 2 && s[0].stop_reason == KN_ERR__TIMED_OUT);
  KT_CHECK(stopped >= 0 && stopped <= last + 8000 + 100);
  KT_CHECK(taken > stopped);
  KT_CHECK(kn_cc_held(c[0]) == 0 || taken < 0);
  kn_cc_destroy(c[0]);
  kn_cc_destroy(c[1]);
  table_free(&t);
}

int main(void) {
  KT_RUN(test_plan_empty_table);
  KT_RUN(test_plan_partial_table);
  KT_RUN(test_plan_finished_not_recreated);
  KT_RUN(test_plan_merge_other_parent);
  KT_RUN(test_plan_listing_behind_table);
  KT_RUN(test_plan_parent_past_retention);
  KT_RUN(test_family_read);
  KT_RUN(test_worker_life);
  KT_RUN(test_lost_and_manual);
  KT_RUN(test_first_sync_errors);
  KT_RUN(test_handoff);
  KT_RUN(test_handoff_silent_owner);
  KT_RUN(test_handoff_closing);
  KT_RUN(test_members_settled);
  KT_RUN(test_members_death);
  KT_RUN(test_members_fence);
  return KT_DONE();
}
