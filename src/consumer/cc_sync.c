/* The coordination core's shard sync: the shard listing, the lease
 * listings around it, the creates and cleanups they call for (cc_int.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/cc_int.h"
#include "util/strmap.h"

static void start_sync(kn_cc_t *c, int64_t now) {
  cc_op_t *o = kn_cc_op_new(c, KN_CC_LIST_LEASES, NULL, -1, now);
  if (!o || !kn_cc_call(c, o)) return;
  o->purpose = P_SYNC_LEASES1;
  o->epoch = c->mb.view.epoch;
  c->sy.epoch = c->mb.view.epoch;
  c->sy.emit_ms = now;
  c->sy.syncing = 1;
  c->sy.resync = 0;
}

/* Periodic syncs: every worker without membership; with it, the leader
 * only, and it lists the leases only when something changed. */
static void sync_due(kn_cc_t *c, int64_t now) {
  if (!c->mb.on || !c->sy.synced || c->sy.asked) {
    c->sy.asked = 0;
    start_sync(c, now);
    return;
  }
  if (!c->mb.ok || !kn_cc_mb_leader(c)) {
    c->sy.at = now + c->cfg.sync_ms;
    return;
  }
  cc_op_t *o = kn_cc_op_new(c, KN_CC_LIST_SHARDS, NULL, -1, now);
  if (!o || !kn_cc_call(c, o)) {
    if (o) kn_cc_op_free(kn_cc_op_take(c, o->id));
    c->sy.at = now + 1000;
    return;
  }
  o->purpose = P_PROBE;
  o->epoch = c->mb.view.epoch;
  c->sy.syncing = 1;
}

static int64_t backoff_ms(int failures) {
  return 1000LL << (failures < 5 ? failures : 5);
}

int kn_cc_sy_failed(kn_cc_t *c, const kn_error_t *err, const char *what,
                    char *msg, size_t cap, int64_t now) {
  c->sy.syncing = 0;
  free(c->sy.plan);
  c->sy.plan = NULL;
  c->sy.n_plan = c->sy.plan_next = 0;
  snprintf(msg, cap, "%s: %s", what, err ? kn_error_string(err) : "failed");
  if (err && !kn_error_is_retriable(err) &&
      kn_error_code(err) != KN_ERR__TIMED_OUT &&
      kn_error_code(err) != KN_ERR__TRANSPORT)
    return 1; /* a verdict (stream missing, credentials rejected) */
  kn_cc_log(c, KN_CC_LOG_WARN, "%s (retrying)", msg);
  c->sy.at = now + backoff_ms(c->sy.failures++);
  return 0;
}

static void sync_succeeded(kn_cc_t *c, int64_t now) {
  if (c->sy.n_plan) {
    c->tk.idle = 0; /* leases were created: look before saying */
    cc_bump(c, now);
  }
  c->sy.full_ms = now;
  c->sy.syncing = 0;
  c->sy.synced = 1;
  c->sy.failures = 0;
  free(c->sy.plan);
  c->sy.plan = NULL;
  c->sy.n_plan = c->sy.plan_next = 0;
  c->sy.at = c->sy.resync ? now : now + c->cfg.sync_ms;
  c->tk.at = now; /* new leases may be ready: look now */
}

static void create_wave(kn_cc_t *c, int64_t now) {
  if (c->sy.plan_next >= c->sy.n_plan) {
    sync_succeeded(c, now);
    return;
  }
  int wave = c->sy.plan[c->sy.plan_next].wave;
  c->sy.wave_left = 0;
  c->sy.create_failed = 0;
  while (c->sy.plan_next < c->sy.n_plan &&
         c->sy.plan[c->sy.plan_next].wave == wave) {
    const kn_cc_create_t *p = &c->sy.plan[c->sy.plan_next++];
    const kn_cc_shard_t *s = &c->sy.shards[p->shard];
    cc_op_t *o = kn_cc_op_new(c, KN_CC_CREATE, s->id, -1, now);
    cc_act_t *x = o ? kn_cc_call(c, o) : NULL;
    if (!x) continue;
    o->wave = wave;
    cc_set_str(o->ckpt, p->checkpoint);
    kn_lease_t l;
    memset(&l, 0, sizeof(l));
    char *parents[2];
    l.key = (char *)s->id;
    l.checkpoint = (char *)p->checkpoint;
    if (s->parent) parents[l.n_parents++] = (char *)s->parent;
    if (s->adjacent) parents[l.n_parents++] = (char *)s->adjacent;
    l.parents = l.n_parents ? parents : NULL;
    l.hash_start = (char *)s->hash_start;
    l.hash_end = (char *)s->hash_end;
    kn_cc_q_own_lease(x, &l);
    c->sy.wave_left++;
  }
  if (c->sy.wave_left == 0) create_wave(c, now);
}

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

static void shards_free(kn_cc_shard_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free((char *)v[i].id);
    free((char *)v[i].parent);
    free((char *)v[i].adjacent);
    free((char *)v[i].hash_start);
    free((char *)v[i].hash_end);
  }
  free(v);
}

static int same_listing(const kn_cc_t *c, const kn_cc_shard_t *v, size_t n) {
  if (n != c->sy.n_shards) return 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].id, c->sy.shards[i].id) != 0 ||
        !v[i].closed != !c->sy.shards[i].closed)
      return 0;
  return 1;
}

/* A shard listing: the leader's look (probe), or the sync's. */
void kn_cc_sy_shards(kn_cc_t *c, int probe, const kn_cc_shard_t *v, size_t n,
                     int64_t now) {
  if (probe) {
    /* The leader's look: the leases are listed only when the shards, the
     * epoch or a cleanup to finish call for it, or for a look now and
     * then (scan_ms) at what no event announced. */
    c->sy.syncing = 0;
    const char *why = !same_listing(c, v, n)            ? "the shards changed"
                      : c->mb.view.epoch != c->sy.epoch ? "the epoch moved"
                      : c->sy.more                      ? "a cleanup is pending"
                      : now - c->sy.full_ms >= c->cfg.scan_ms
                          ? "the periodic look"
                          : NULL;
    if (why) {
      kn_cc_log(c, KN_CC_LOG_DEBUG, "shard sync with the lease table: %s", why);
      start_sync(c, now);
    } else {
      c->sy.at = c->sy.resync ? now : now + c->cfg.sync_ms;
      c->sy.failures = 0;
    }
    return;
  }
  kn_cc_shard_t *copy = calloc(n + 1, sizeof(*copy));
  int oom = !copy;
  for (size_t i = 0; copy && i < n; i++) {
    copy[i].id = dup0(v[i].id);
    copy[i].parent = dup0(v[i].parent);
    copy[i].adjacent = dup0(v[i].adjacent);
    copy[i].hash_start = dup0(v[i].hash_start);
    copy[i].hash_end = dup0(v[i].hash_end);
    copy[i].closed = v[i].closed;
    if (!copy[i].id) oom = 1;
  }
  if (oom) {
    shards_free(copy, copy ? n : 0);
    c->sy.syncing = 0;
    c->sy.at = now + 1000;
    return;
  }
  shards_free(c->sy.shards, c->sy.n_shards);
  c->sy.shards = copy;
  c->sy.n_shards = n;
  cc_op_t *o = kn_cc_op_new(c, KN_CC_LIST_LEASES, NULL, -1, now);
  if (!o || !kn_cc_call(c, o)) {
    c->sy.syncing = 0;
    c->sy.at = now + 1000;
    return;
  }
  o->purpose = P_SYNC_LEASES2;
  o->epoch = c->sy.epoch;
  o->deaths = c->mb.view.deaths;
}

/* The first lease listing of a sync: kept, then the shards are listed. */
static void sync_snapshot(kn_cc_t *c, const kn_lease_t *v, size_t n,
                          int64_t now) {
  kn_lease_array_free(c->sy.snap, c->sy.n_snap);
  c->sy.snap = NULL;
  c->sy.n_snap = 0;
  int oom = 0;
  if (n && !(c->sy.snap = calloc(n, sizeof(*c->sy.snap)))) oom = 1;
  for (size_t i = 0; i < n && !oom; i++, c->sy.n_snap++)
    if (kn_lease_copy(&c->sy.snap[i], &v[i])) oom = 1;
  cc_op_t *o = oom ? NULL : kn_cc_op_new(c, KN_CC_LIST_SHARDS, NULL, -1, now);
  if (!o || !kn_cc_call(c, o)) {
    c->sy.syncing = 0;
    c->sy.at = now + 1000;
    return;
  }
  o->purpose = P_SYNC_SHARDS;
}

static int has_child(const kn_lease_t *l, const char *id) {
  for (size_t k = 0; k < l->n_children; k++)
    if (strcmp(l->children[k], id) == 0) return 1;
  return 0;
}

/* The listed children of each parent, so that a sync stays linear in tens
 * of thousands of shards.  Slot 2j+k is shard j through its parent (k 0)
 * or adjacent parent (k 1); links are slot + 1, 0 ending a list, each
 * list in the listing's order.  The map borrows the listing's ids. */
typedef struct kids_idx {
  kn_strmap_t first; /* parent id -> its first slot + 1 */
  size_t *next;      /* 2 per shard */
} kids_idx_t;

static void kids_free(kids_idx_t *k) {
  kn_strmap_free(&k->first);
  free(k->next);
}

static int kids_build(kids_idx_t *k, const kn_cc_shard_t *s, size_t n) {
  memset(k, 0, sizeof(*k));
  if (!(k->next = calloc(2 * n + 1, sizeof(size_t)))) return -1;
  for (size_t j = n; j-- > 0;) {
    const char *p[2] = {s[j].parent, s[j].adjacent};
    for (int b = 0; b < 2; b++) {
      if (!p[b] || (b == 1 && p[0] && strcmp(p[0], p[1]) == 0)) continue;
      size_t slot = 2 * j + (size_t)b;
      k->next[slot] = (size_t)(uintptr_t)kn_strmap_get(&k->first, p[b]);
      if (kn_strmap_put(&k->first, p[b], (void *)(uintptr_t)(slot + 1)))
        return -1;
    }
  }
  return 0;
}

/* The first listed child of key (a slot + 1), or 0; then kids_next. */
static size_t kids_first(const kids_idx_t *k, const char *key) {
  return (size_t)(uintptr_t)kn_strmap_get(&k->first, key);
}

static size_t kids_next(const kids_idx_t *k, size_t at) {
  return k->next[at - 1];
}

static const char *kid_id(const kn_cc_t *c, size_t at) {
  return c->sy.shards[(at - 1) / 2].id;
}

/* Leases of closed shards get their children from the listing (servers
 * without ChildShards): the table then keeps the family even after the
 * shards leave the listing. */
static void record_children(kn_cc_t *c, const kids_idx_t *ki,
                            const kn_lease_t *v, size_t n, int64_t now) {
  for (size_t i = 0; i < n; i++) {
    size_t kids = 0, missing = 0;
    for (size_t at = kids_first(ki, v[i].key); at; at = kids_next(ki, at)) {
      kids++;
      missing += !has_child(&v[i], kid_id(c, at));
    }
    if (!missing) continue;
    cc_op_t *o = kn_cc_op_new(c, KN_CC_SET_CHILDREN, v[i].key, -1, now);
    cc_act_t *x = o ? kn_cc_call(c, o) : NULL;
    if (!x) continue;
    /* The list replaces the lease's: one short of a child is no list. */
    if (!(x->children = calloc(kids + v[i].n_children, sizeof(char *)))) {
      c->q.lost = 1;
      continue;
    }
    for (size_t k = 0; k < v[i].n_children; k++)
      if ((x->children[x->n_children] = strdup(v[i].children[k])))
        x->n_children++;
      else
        c->q.lost = 1;
    for (size_t at = kids_first(ki, v[i].key); at; at = kids_next(ki, at)) {
      const char *id = kid_id(c, at);
      if (has_child(&v[i], id)) continue;
      if ((x->children[x->n_children] = strdup(id)))
        x->n_children++;
      else
        c->q.lost = 1;
    }
    x->a.children = x->children;
    x->a.n_children = x->n_children;
  }
}

static int has_kids(const kids_idx_t *ki, const kn_lease_t *l) {
  return l->n_children || kids_first(ki, l->key) != 0;
}

static kn_lease_t *both_of(kn_lease_t *both, const kn_lease_t *v, size_t n,
                           const kn_cc_t *c) {
  if (n) memcpy(both, v, n * sizeof(*v));
  if (c->sy.n_snap) memcpy(both + n, c->sy.snap, c->sy.n_snap * sizeof(*v));
  return both;
}

static void sync_leases(kn_cc_t *c, const kn_lease_t *v, size_t n,
                        int64_t now) {
  if (now - c->sy.emit_ms > c->cfg.duration_ms / 2) {
    /* The view spans a pause or a very slow store: a lease may have been
     * created, finished and cleaned up meanwhile.  Look again. */
    kn_cc_log(c, KN_CC_LOG_WARN,
              "shard sync took %lld ms: its view is too old "
              "to act on; syncing again",
              (long long)(now - c->sy.emit_ms));
    c->sy.syncing = 0;
    c->sy.at = now + backoff_ms(c->sy.failures++);
    return;
  }
  kids_idx_t ki;
  if (kids_build(&ki, c->sy.shards, c->sy.n_shards)) {
    kids_free(&ki);
    c->sy.syncing = 0;
    c->sy.at = now + 1000;
    return;
  }
  record_children(c, &ki, v, n, now);
  /* Cleanup first: finished parents whose children have started, once
   * their lease has stood still for a while: a create of the same lease
   * still on its way (a slow or retried call of a sync that saw no lease
   * yet) must not land after the removal and start the shard again. */
  int64_t settle =
      c->cfg.duration_ms > c->cfg.sync_ms ? c->cfg.duration_ms : c->cfg.sync_ms;
  c->sy.more = 0;
  for (size_t i = 0; i < n; i++) {
    if (!kn_lease_is_shard_end(&v[i])) continue;
    /* A finished lease with a known family goes once its children have
     * started: the leader's syncs go on until then. */
    if (has_kids(&ki, &v[i])) c->sy.more = 1;
    if (!kn_cc_can_remove(v, n, i, c->sy.shards, c->sy.n_shards)) continue;
    const kn_lease_obs_t *ob = kn_lease_observer_get(&c->obs, v[i].key);
    if (!ob || now - ob->changed_ms < settle) continue;
    cc_op_t *o = kn_cc_op_new(c, KN_CC_REMOVE, v[i].key, -1, now);
    cc_act_t *x = o ? kn_cc_call(c, o) : NULL;
    if (x) x->a.counter = v[i].counter;
  }
  kids_free(&ki);
  free(c->sy.plan);
  c->sy.plan = NULL;
  c->sy.n_plan = c->sy.plan_next = 0;
  /* Both listings: a lease in either counts (the array borrows them). */
  kn_lease_t *both = malloc((n + c->sy.n_snap + 1) * sizeof(*both));
  if (!both || kn_cc_plan_sync(c->sy.shards, c->sy.n_shards,
                               both_of(both, v, n, c), n + c->sy.n_snap,
                               c->initial, &c->sy.plan, &c->sy.n_plan)) {
    free(both);
    c->sy.syncing = 0;
    c->sy.at = now + 1000;
    return;
  }
  free(both);
  create_wave(c, now);
}

void kn_cc_sy_leases(kn_cc_t *c, int purpose, const kn_lease_t *v, size_t n,
                     int64_t now) {
  if (purpose == P_SYNC_LEASES1) sync_snapshot(c, v, n, now);
  if (purpose == P_SYNC_LEASES2) sync_leases(c, v, n, now);
}

/* The answer to CREATE o: the next wave once this one is in. */
void kn_cc_sy_created(kn_cc_t *c, const cc_op_t *o, const kn_error_t *err,
                      int64_t now) {
  if (err && !cc_is_cond(err)) {
    c->sy.create_failed = 1;
    kn_cc_log(c, KN_CC_LOG_WARN, "creating the lease of shard %s: %s", o->key,
              kn_error_string(err));
  } else if (!err) {
    kn_cc_log(c, KN_CC_LOG_INFO, "lease created for shard %s at %s", o->key,
              o->ckpt);
  }
  if (!c->sy.syncing || --c->sy.wave_left > 0) return;
  if (c->sy.create_failed) {
    /* The children of a lease that could not be created must wait: the
     * next sync tries again. */
    c->sy.syncing = 0;
    free(c->sy.plan);
    c->sy.plan = NULL;
    c->sy.n_plan = c->sy.plan_next = 0;
    c->sy.at = now + backoff_ms(c->sy.failures++);
  } else if (!c->closing && !c->fatal) {
    create_wave(c, now);
  } else {
    c->sy.syncing = 0;
  }
}

/* A sync now, or right after the one under way. */
void kn_cc_sy_soon(kn_cc_t *c, int64_t now) {
  c->sy.asked = 1;
  if (c->sy.syncing)
    c->sy.resync = 1;
  else
    c->sy.at = now;
}

int kn_cc_synced(const kn_cc_t *c) { return c->sy.synced; }

int64_t kn_cc_sy_next_ms(const kn_cc_t *c) {
  return c->closing || c->fatal || c->sy.syncing ? INT64_MAX : c->sy.at;
}

void kn_cc_sy_tick(kn_cc_t *c, int64_t now) {
  if (!c->closing && !c->fatal && !c->sy.syncing && now >= c->sy.at)
    sync_due(c, now);
}

void kn_cc_sy_free(kn_cc_t *c) {
  shards_free(c->sy.shards, c->sy.n_shards);
  kn_lease_array_free(c->sy.snap, c->sy.n_snap);
  free(c->sy.plan);
}
