#include "lease/taker.h"

#include <stdlib.h>
#include <string.h>

#include "util/str.h"

void kn_lease_observer_init(kn_lease_observer_t *o) {
  memset(o, 0, sizeof(*o));
}

static void obs_clear(kn_lease_obs_t *e) {
  free(e->key);
  free(e->owner);
}

void kn_lease_observer_free(kn_lease_observer_t *o) {
  for (size_t i = 0; i < o->n; i++) obs_clear(&o->v[i]);
  free(o->v);
  kn_strmap_free(&o->idx);
  memset(o, 0, sizeof(*o));
}

const kn_lease_obs_t *kn_lease_observer_get(const kn_lease_observer_t *o,
                                            const char *key) {
  return kn_strmap_get(&o->idx, key);
}

static int same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int kn_lease_observer_update(kn_lease_observer_t *o, const kn_lease_t *v,
                             size_t n, int64_t now_ms) {
  kn_lease_obs_t *nv = calloc(n ? n : 1, sizeof(*nv));
  if (!nv) return -1;
  for (size_t i = 0; i < n; i++) {
    const kn_lease_obs_t *old = kn_lease_observer_get(o, v[i].key);
    nv[i].key = strdup(v[i].key);
    nv[i].owner = kn_strdup0(v[i].owner);
    if (!nv[i].key || (v[i].owner && !nv[i].owner)) {
      for (size_t j = 0; j <= i; j++) obs_clear(&nv[j]);
      free(nv);
      return -1;
    }
    nv[i].counter = v[i].counter;
    /* A new counter or owner means someone renewed or took it now. */
    nv[i].changed_ms =
        old && old->counter == v[i].counter && same_str(old->owner, v[i].owner)
            ? old->changed_ms
            : now_ms;
  }
  /* Thousands of leases: lookups by key go through an index. */
  kn_strmap_t idx = KN_STRMAP_INIT;
  for (size_t i = 0; i < n; i++)
    if (kn_strmap_put(&idx, nv[i].key, &nv[i])) {
      kn_strmap_free(&idx);
      for (size_t j = 0; j < n; j++) obs_clear(&nv[j]);
      free(nv);
      return -1;
    }
  kn_lease_observer_free(o);
  o->v = nv;
  o->n = o->cap = n;
  o->idx = idx;
  return 0;
}

int kn_lease_is_expired(const kn_lease_observer_t *o, const kn_lease_t *l,
                        int64_t now_ms, int64_t duration_ms) {
  if (!l->owner) return 1;
  const kn_lease_obs_t *e = kn_lease_observer_get(o, l->key);
  if (!e || e->counter != l->counter || !same_str(e->owner, l->owner))
    return 0; /* news to us: renewed just now as far as we know */
  return now_ms - e->changed_ms >= duration_ms;
}

static const kn_lease_t *find(const kn_lease_t *all, size_t n,
                              const char *key) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(all[i].key, key) == 0) return &all[i];
  return NULL;
}

int kn_lease_is_ready(const kn_lease_t *l, const kn_lease_t *all, size_t n) {
  if (kn_lease_is_shard_end(l)) return 0;
  for (size_t i = 0; i < l->n_parents; i++) {
    const kn_lease_t *p = find(all, n, l->parents[i]);
    if (p && !kn_lease_is_shard_end(p)) return 0;
  }
  return 1;
}

/* The same through an index of the snapshot by key. */
static int ready_in(const kn_lease_t *l, const kn_strmap_t *idx) {
  if (kn_lease_is_shard_end(l)) return 0;
  for (size_t i = 0; i < l->n_parents; i++) {
    const kn_lease_t *p = kn_strmap_get(idx, l->parents[i]);
    if (p && !kn_lease_is_shard_end(p)) return 0;
  }
  return 1;
}

/* Owner names with their counts of unexpired ready leases. */
typedef struct owner_count {
  const char *owner;
  size_t count;
  int64_t fresh_ms; /* the latest change seen of one of its leases */
} owner_count_t;

static uint32_t fnv1a(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

int kn_take_plan(const kn_lease_t *v, size_t n, const kn_lease_observer_t *o,
                 const kn_take_params_t *p, kn_take_plan_t *plan) {
  memset(plan, 0, sizeof(*plan));
  owner_count_t *owners = calloc(n + 1, sizeof(*owners));
  size_t *avail = calloc(n + 1, sizeof(*avail));
  unsigned char *ok = calloc(n + 1, 1); /* ready and unexpired */
  plan->take = calloc(n + 1, sizeof(size_t));
  plan->steal = calloc(n + 1, sizeof(size_t));
  kn_strmap_t idx = KN_STRMAP_INIT, who = KN_STRMAP_INIT;
  int oom = !owners || !avail || !ok || !plan->take || !plan->steal;
  for (size_t i = 0; i < n && !oom; i++)
    oom = kn_strmap_put(&idx, v[i].key, (void *)&v[i]) != 0;
  size_t n_owners = 0, n_avail = 0, ready = 0;
  if (!oom) {
    owners[n_owners++] = (owner_count_t){p->worker, 0, p->now_ms};
    oom = kn_strmap_put(&who, p->worker, &owners[0]) != 0;
  }
  for (size_t i = 0; i < n && !oom; i++) {
    if (!ready_in(&v[i], &idx)) continue;
    ready++;
    if (kn_lease_is_expired(o, &v[i], p->now_ms, p->duration_ms)) {
      avail[n_avail++] = i;
      continue;
    }
    ok[i] = 1;
    owner_count_t *oc = kn_strmap_get(&who, v[i].owner);
    if (!oc) {
      oc = &owners[n_owners++];
      *oc = (owner_count_t){v[i].owner, 0, INT64_MIN};
      if (kn_strmap_put(&who, v[i].owner, oc)) oom = 1;
    }
    size_t k = (size_t)(oc - owners);
    owners[k].count++;
    const kn_lease_obs_t *e = kn_lease_observer_get(o, v[i].key);
    int64_t seen = e && e->counter == v[i].counter ? e->changed_ms : p->now_ms;
    if (seen > owners[k].fresh_ms) owners[k].fresh_ms = seen;
  }
  kn_strmap_free(&idx);
  kn_strmap_free(&who);
  if (oom) {
    free(owners);
    free(avail);
    free(ok);
    kn_take_plan_free(plan);
    return -1;
  }
  plan->workers = n_owners;
  plan->held = owners[0].count;
  size_t target = (ready + n_owners - 1) / n_owners;
  if (p->max_leases > 0 && target > (size_t)p->max_leases)
    target = (size_t)p->max_leases;
  plan->target = target;

  size_t want = plan->held < target ? target - plan->held : 0;
  /* Start at a worker-specific offset so that workers starting at the same
   * moment do not all race for the same first leases. */
  size_t start = n_avail ? fnv1a(p->worker) % n_avail : 0;
  for (size_t k = 0; k < n_avail && plan->n_take < want; k++)
    plan->take[plan->n_take++] = avail[(start + k) % n_avail];
  want -= plan->n_take;

  int quiet = 0;
  for (size_t k = 1; k < n_owners && p->quiet_ms > 0; k++)
    if (p->now_ms - owners[k].fresh_ms >= p->quiet_ms) quiet = 1;
  if (want > 0 && p->max_steal > 0 && !quiet) {
    size_t most = 0;
    for (size_t k = 1; k < n_owners; k++)
      if (!most || owners[k].count > owners[most].count) most = k;
    size_t steal = 0;
    if (most && owners[most].count > target) {
      size_t surplus = owners[most].count - target;
      steal = want < surplus ? want : surplus;
    } else if (most && want > 1 && owners[most].count >= target) {
      /* As the KCL: short of more than one lease, take one even from a
       * worker at target.  Otherwise a worker left with none (4 leases, 3
       * workers holding 2, 2 and 0) would wait forever: nobody is above
       * target, and a worker without leases is invisible to the others. */
      steal = 1;
    }
    if (steal > (size_t)p->max_steal) steal = (size_t)p->max_steal;
    if (steal) {
      for (size_t i = 0; i < n && plan->n_steal < steal; i++) {
        if (!ok[i]) continue;
        if (strcmp(v[i].owner, owners[most].owner) == 0)
          plan->steal[plan->n_steal++] = i;
      }
    }
  }
  free(owners);
  free(avail);
  free(ok);
  return 0;
}

void kn_take_plan_free(kn_take_plan_t *plan) {
  free(plan->take);
  free(plan->steal);
  plan->take = plan->steal = NULL;
  plan->n_take = plan->n_steal = 0;
}
