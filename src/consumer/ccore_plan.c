/* The coordination core's pure planners: which leases a shard sync
 * creates, and which finished leases cleanup may remove (ccore.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/ccore.h"
#include "kinesis/hashkey.h"
#include "util/strmap.h"

/* Test builds of the simulator set KN_CC_MUTANT to break one rule on
 * purpose and show that the simulator notices; 0 in the library. */
#ifndef KN_CC_MUTANT
#define KN_CC_MUTANT 0
#endif

/* Marks per shard of a listing. */
enum { M_UNKNOWN = 0, M_BUSY, M_NO, M_YES };

typedef struct plan_ctx {
  const kn_cc_shard_t *s;
  size_t n;
  const kn_lease_t *leases;
  size_t n_leases;
  int latest;     /* initial position LATEST */
  size_t *kids;   /* children of shard i: kids[kid_at[i] ..] */
  size_t *kid_at; /* n + 1 offsets */
  long *par[2];   /* parent indexes in the listing, or -1 */
  unsigned char *leased, *covered, *lineage, *want;
  unsigned char *named;     /* a lease names the shard as its parent */
  unsigned char *gone_read; /* descends from a shard read here that the
                               listing no longer shows */
  /* Lookups by id, so that a sync stays linear in tens of thousands of
   * shards (the maps borrow the ids of s and leases). */
  kn_strmap_t shard_at; /* shard id -> index + 1 */
  kn_strmap_t lease_of; /* lease key -> its first lease */
  kn_strmap_t children; /* ids some lease names as a child -> that lease */
} plan_ctx_t;

static long shard_index(const plan_ctx_t *x, const char *id) {
  if (!id) return -1;
  uintptr_t v = (uintptr_t)kn_strmap_get(&x->shard_at, id);
  return v ? (long)(v - 1) : -1;
}

static const kn_lease_t *lease_named(const plan_ctx_t *x, const char *key) {
  return key ? kn_strmap_get(&x->lease_of, key) : NULL;
}

static int named_as_child(const plan_ctx_t *x, const char *id) {
  return id && kn_strmap_get(&x->children, id) != NULL;
}

/* Fills the lookups; -1 on out-of-memory. */
static int index_ids(plan_ctx_t *x) {
  for (size_t i = 0; i < x->n; i++)
    if (x->s[i].id && !kn_strmap_get(&x->shard_at, x->s[i].id) &&
        kn_strmap_put(&x->shard_at, x->s[i].id, (void *)(uintptr_t)(i + 1)))
      return -1;
  for (size_t i = 0; i < x->n_leases; i++) {
    const kn_lease_t *l = &x->leases[i];
    if (l->key && !kn_strmap_get(&x->lease_of, l->key) &&
        kn_strmap_put(&x->lease_of, l->key, (void *)l))
      return -1;
    for (size_t k = 0; k < l->n_children; k++)
      if (l->children[k] &&
          kn_strmap_put(&x->children, l->children[k], (void *)l))
        return -1;
  }
  return 0;
}

static const kn_lease_t *find_lease(const kn_lease_t *v, size_t n,
                                    const char *key) {
  for (size_t i = 0; i < n; i++)
    if (v[i].key && strcmp(v[i].key, key) == 0) return &v[i];
  return NULL;
}

static int range_of(const char *hs, const char *he, kn_u128_t *a,
                    kn_u128_t *b) {
  return hs && he && kn_u128_parse(hs, strlen(hs), a) == 0 &&
         kn_u128_parse(he, strlen(he), b) == 0;
}

/* A lease of another shard overlaps the hash keys of s.  Shards whose
 * key ranges overlap are ancestor and descendant (the open shards split
 * the key space at every moment): a shard whose parents are past the
 * listing and the table descends from what was read here if one does.
 * A new application (no lease) has none. */
static int range_read(const kn_lease_t *v, size_t n, const kn_cc_shard_t *s) {
  kn_u128_t a, b, c, d;
  if (!range_of(s->hash_start, s->hash_end, &a, &b)) return 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(v[i].key, s->id) == 0 ||
        !range_of(v[i].hash_start, v[i].hash_end, &c, &d))
      continue;
    if (kn_u128_cmp(a, d) <= 0 && kn_u128_cmp(c, b) <= 0) return 1;
  }
  return 0;
}

/* A descendant has a lease: the shard was read (its lease cleaned up once
 * its children started) or deliberately skipped.  Never created again. */
static int covered(plan_ctx_t *x, size_t i) {
  if (x->covered[i] == M_BUSY) return 0; /* a cycle: malformed listing */
  if (x->covered[i] != M_UNKNOWN) return x->covered[i] == M_YES;
  x->covered[i] = M_BUSY;
  /* A child's lease names it: the child exists in the table even where
   * the listing is older than the child. */
  int r = x->named[i];
  for (size_t k = x->kid_at[i]; k < x->kid_at[i + 1] && !r; k++) {
    size_t c = x->kids[k];
    r = x->leased[c] || covered(x, c);
  }
  x->covered[i] = r ? M_YES : M_NO;
  return r;
}

/* Descends from a shard the application has read or holds a lease of. */
static int lineage(plan_ctx_t *x, size_t i) {
  if (x->lineage[i] == M_BUSY) return 0;
  if (x->lineage[i] != M_UNKNOWN) return x->lineage[i] == M_YES;
  x->lineage[i] = M_BUSY;
  int r = x->gone_read[i];
  for (int k = 0; k < 2 && !r; k++) {
    long p = x->par[k][i];
    if (p < 0) continue;
    r = x->leased[p] || covered(x, (size_t)p) || lineage(x, (size_t)p);
  }
  x->lineage[i] = r ? M_YES : M_NO;
  return r;
}

/* The shard needs a lease created. */
static int want(plan_ctx_t *x, size_t i) {
  if (x->want[i] == M_BUSY) return 0;
  if (x->want[i] != M_UNKNOWN) return x->want[i] == M_YES;
  x->want[i] = M_BUSY;
  int r = 0;
#if KN_CC_MUTANT == 2 /* the simulator's check that this rule matters */
  if (!x->leased[i]) {
#else
  if (!x->leased[i] && !covered(x, i)) {
#endif
    if (!x->s[i].closed) {
      r = 1;
    } else {
      /* A closed shard is read when a child is, and its records are
       * wanted: the child descends from what the application reads (a
       * merge with a leased parent), or the start is not LATEST. */
      for (size_t k = x->kid_at[i]; k < x->kid_at[i + 1] && !r; k++) {
        size_t c = x->kids[k];
        r = want(x, c) && (!x->latest || lineage(x, c));
      }
      /* No child listed (not yet, in a listing taken mid-reshard). */
      if (x->kid_at[i] == x->kid_at[i + 1]) r = !x->latest || lineage(x, i);
    }
  }
  x->want[i] = r ? M_YES : M_NO;
  return r;
}

static int build(plan_ctx_t *x) {
  size_t n = x->n;
  x->kid_at = calloc(n + 1, sizeof(size_t));
  x->kids = calloc(2 * n + 1, sizeof(size_t));
  x->par[0] = calloc(n + 1, sizeof(long));
  x->par[1] = calloc(n + 1, sizeof(long));
  x->leased = calloc(n + 1, 1);
  x->covered = calloc(n + 1, 1);
  x->lineage = calloc(n + 1, 1);
  x->want = calloc(n + 1, 1);
  x->named = calloc(n + 1, 1);
  x->gone_read = calloc(n + 1, 1);
  if (!x->kid_at || !x->kids || !x->par[0] || !x->par[1] || !x->leased ||
      !x->covered || !x->lineage || !x->want || !x->named || !x->gone_read ||
      index_ids(x))
    return -1;
  size_t *cnt = x->kid_at; /* counts first, then offsets */
  for (size_t i = 0; i < n; i++) {
    x->par[0][i] = shard_index(x, x->s[i].parent);
    x->par[1][i] = shard_index(x, x->s[i].adjacent);
    if (x->par[1][i] == x->par[0][i]) x->par[1][i] = -1;
    for (int k = 0; k < 2; k++)
      if (x->par[k][i] >= 0) cnt[x->par[k][i] + 1]++;
    x->leased[i] = lease_named(x, x->s[i].id) != NULL;
    /* A parent past retention whose lease remains was read here, and so
     * was the parent of one a lease names as its child. */
    const char *pid[2] = {x->s[i].parent, x->s[i].adjacent};
    for (int k = 0; k < 2; k++)
      if (pid[k] && x->par[k][i] < 0 &&
          (lease_named(x, pid[k]) || named_as_child(x, pid[k]) ||
           range_read(x->leases, x->n_leases, &x->s[i])))
        x->gone_read[i] = 1;
    if (named_as_child(x, x->s[i].id)) x->gone_read[i] = 1;
  }
  for (size_t j = 0; j < x->n_leases; j++)
    for (size_t k = 0; k < x->leases[j].n_parents; k++) {
      long p = shard_index(x, x->leases[j].parents[k]);
      if (p >= 0) x->named[p] = 1;
    }
  for (size_t i = 0; i < n; i++) cnt[i + 1] += cnt[i];
  size_t *fill = calloc(n + 1, sizeof(size_t));
  if (!fill) return -1;
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) {
      long p = x->par[k][i];
      if (p >= 0) x->kids[x->kid_at[p] + fill[p]++] = i;
    }
  free(fill);
  return 0;
}

static void ctx_free(plan_ctx_t *x) {
  free(x->kid_at);
  free(x->kids);
  free(x->par[0]);
  free(x->par[1]);
  free(x->leased);
  free(x->covered);
  free(x->lineage);
  free(x->want);
  free(x->named);
  free(x->gone_read);
  kn_strmap_free(&x->shard_at);
  kn_strmap_free(&x->lease_of);
  kn_strmap_free(&x->children);
}

static int by_wave(const void *a, const void *b) {
  const kn_cc_create_t *x = a, *y = b;
  if (x->wave != y->wave) return x->wave < y->wave ? -1 : 1;
  return x->shard < y->shard ? -1 : x->shard > y->shard;
}

int kn_cc_plan_sync(const kn_cc_shard_t *shards, size_t n_shards,
                    const kn_lease_t *leases, size_t n_leases,
                    const char *initial, kn_cc_create_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  plan_ctx_t x;
  memset(&x, 0, sizeof(x));
  x.s = shards;
  x.n = n_shards;
  x.leases = leases;
  x.n_leases = n_leases;
  x.latest = initial && strcmp(initial, KN_CKPT_LATEST) == 0;
  int *wave = NULL;
  kn_cc_create_t *v = NULL;
  if (build(&x)) goto oom;
  wave = calloc(n_shards + 1, sizeof(int));
  v = calloc(n_shards + 1, sizeof(*v));
  if (!wave || !v) goto oom;
  size_t k = 0;
  for (size_t i = 0; i < n_shards; i++) {
    if (!want(&x, i)) continue;
    int known_parent = 0;
    for (int j = 0; j < 2; j++) {
      long p = x.par[j][i];
      if (p >= 0 &&
          (x.leased[p] || covered(&x, (size_t)p) || want(&x, (size_t)p)))
        known_parent = 1;
    }
    v[k].shard = i;
    /* After a parent the application reads: from the child's start.  A
     * closed shard created although the start is LATEST is the other
     * parent of a merge the application follows: from its start too. */
    v[k].checkpoint =
        known_parent || lineage(&x, i) || (x.latest && shards[i].closed)
            ? KN_CKPT_TRIM_HORIZON
            : initial;
    k++;
  }
  /* Waves: a lease is created after those of its created parents.  The
   * depth of a shard is at most the number of shards, so n passes
   * settle it. */
  for (size_t pass = 0, changed = 1; changed && pass <= n_shards; pass++) {
    changed = 0;
    for (size_t i = 0; i < n_shards; i++) {
      if (x.want[i] != M_YES) continue;
      for (int j = 0; j < 2; j++) {
        long p = x.par[j][i];
        if (p >= 0 && x.want[p] == M_YES && wave[i] <= wave[p]) {
          wave[i] = wave[p] + 1;
          changed = 1;
        }
      }
    }
  }
  for (size_t i = 0; i < k; i++) v[i].wave = wave[v[i].shard];
  qsort(v, k, sizeof(*v), by_wave);
  free(wave);
  ctx_free(&x);
  if (k == 0) {
    free(v);
    v = NULL;
  }
  *out = v;
  *n = k;
  return 0;
oom:
  free(wave);
  free(v);
  ctx_free(&x);
  return -1;
}

static int started(const kn_lease_t *l) { return l && kn_cc_lease_started(l); }

int kn_cc_can_remove(const kn_lease_t *leases, size_t n_leases, size_t i,
                     const kn_cc_shard_t *shards, size_t n_shards) {
  const kn_lease_t *l = &leases[i];
  if (!kn_lease_is_shard_end(l)) return 0;
    /* Parents go first: while a parent's lease remains, its children's
     * leases order the rest of the family and must stay. */
#if KN_CC_MUTANT != 1 /* the simulator's check that this rule matters */
  for (size_t p = 0; p < l->n_parents; p++)
    if (find_lease(leases, n_leases, l->parents[p])) return 0;
#endif
  size_t kids = 0;
  for (size_t c = 0; c < l->n_children; c++, kids++)
    if (!started(find_lease(leases, n_leases, l->children[c]))) return 0;
  for (size_t s = 0; s < n_shards; s++) {
    const kn_cc_shard_t *sh = &shards[s];
    int child = (sh->parent && strcmp(sh->parent, l->key) == 0) ||
                (sh->adjacent && strcmp(sh->adjacent, l->key) == 0);
    if (!child) continue;
    kids++;
    if (!started(find_lease(leases, n_leases, sh->id))) return 0;
  }
  /* No child known: nothing tells that the shard's family has moved on. */
  return kids > 0;
}

struct kn_cc_range {
  kn_u128_t a, b;
  int ok;
};

kn_cc_range_t *kn_cc_ranges(const kn_lease_t *v, size_t n) {
  kn_cc_range_t *r = calloc(n + 1, sizeof(*r));
  if (!r) return NULL;
  for (size_t i = 0; i < n; i++)
    r[i].ok = range_of(v[i].hash_start, v[i].hash_end, &r[i].a, &r[i].b);
  return r;
}

static int names(char *const *list, size_t n, const char *id) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i], id) == 0) return 1;
  return 0;
}

int kn_cc_family_read(const kn_lease_t *v, size_t n, const kn_cc_range_t *r,
                      const kn_lease_t *l) {
  kn_u128_t a, b;
  int ranged = r && range_of(l->hash_start, l->hash_end, &a, &b);
  for (size_t i = 0; i < n; i++) {
    if (!v[i].key || strcmp(v[i].key, l->key) == 0) continue;
    if (names(l->parents, l->n_parents, v[i].key) ||
        names(v[i].children, v[i].n_children, l->key))
      return 1;
    if (ranged && r[i].ok && kn_u128_cmp(a, r[i].b) <= 0 &&
        kn_u128_cmp(r[i].a, b) <= 0)
      return 1;
  }
  return 0;
}
