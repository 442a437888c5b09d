/* The shards a lease table's lineage shows finished (ccore.h): every
 * ancestor of a lease that has moved past its start.  A child is read
 * only after its parents are finished (or gone past retention), so a
 * lease at its start whose descendant has started was finished here and
 * its lease removed, then created again by a create that landed late. */
#include <stdlib.h>
#include <string.h>

#include "consumer/ccore.h"
#include "util/strmap.h"

/* The simulator's mutant 3 reads such leases again (ccore_plan.c). */
#ifndef KN_CC_MUTANT
#define KN_CC_MUTANT 0
#endif

struct kn_cc_done {
  kn_strmap_t marked; /* key -> (void *)1: finished by lineage */
};

/* A parent named by a lease's childShardIds: child -> parent, a chain of
 * links per child (a merge child has two parents). */
typedef struct link {
  const char *parent;
  struct link *next;
} link_t;

typedef struct walk {
  const kn_lease_t *v;
  size_t n;
  const kn_cc_shard_t *s;
  size_t ns;
  kn_strmap_t by_lease, by_shard, named;
  const char **stack;
  size_t top, cap;
  kn_cc_done_t *d;
} walk_t;

static int push(walk_t *w, const char *key) {
  if (!key || kn_strmap_get(&w->d->marked, key)) return 0;
  if (kn_strmap_put(&w->d->marked, key, (void *)1)) return -1;
  if (w->top == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 64;
    const char **st = realloc(w->stack, cap * sizeof(*st));
    if (!st) return -1;
    w->stack = st;
    w->cap = cap;
  }
  w->stack[w->top++] = key;
  return 0;
}

/* Marks every ancestor of key (not key itself). */
static int mark_up(walk_t *w, const char *key) {
  size_t base = w->top;
  const char *k = key;
  for (;;) {
    const kn_lease_t *l = kn_strmap_get(&w->by_lease, k);
    for (size_t p = 0; l && p < l->n_parents; p++)
      if (push(w, l->parents[p])) return -1;
    const kn_cc_shard_t *sh = kn_strmap_get(&w->by_shard, k);
    if (sh && (push(w, sh->parent) || push(w, sh->adjacent))) return -1;
    for (const link_t *x = kn_strmap_get(&w->named, k); x; x = x->next)
      if (push(w, x->parent)) return -1;
    if (w->top == base) return 0;
    k = w->stack[--w->top];
  }
}

static int is_seq(const char *s) { return s && *s >= '0' && *s <= '9'; }

int kn_cc_lease_started(const kn_lease_t *l) {
  return l->checkpoint && (is_seq(l->checkpoint) ||
                           strcmp(l->checkpoint, KN_CKPT_SHARD_END) == 0);
}

static int build(walk_t *w, link_t *links) {
  size_t nl = 0;
  for (size_t i = 0; i < w->n; i++) {
    const kn_lease_t *l = &w->v[i];
    if (!l->key) continue;
    if (kn_strmap_put(&w->by_lease, l->key, (void *)l)) return -1;
    for (size_t c = 0; c < l->n_children; c++) {
      link_t *x = &links[nl++];
      x->parent = l->key;
      x->next = kn_strmap_get(&w->named, l->children[c]);
      if (kn_strmap_put(&w->named, l->children[c], x)) return -1;
    }
  }
  for (size_t i = 0; i < w->ns; i++)
    if (kn_strmap_put(&w->by_shard, w->s[i].id, (void *)&w->s[i])) return -1;
  for (size_t i = 0; i < w->n; i++)
    if (w->v[i].key && kn_cc_lease_started(&w->v[i]) && mark_up(w, w->v[i].key))
      return -1;
  return 0;
}

kn_cc_done_t *kn_cc_done_new(const kn_lease_t *v, size_t n,
                             const kn_cc_shard_t *shards, size_t n_shards) {
  size_t n_links = 0;
  for (size_t i = 0; i < n; i++) n_links += v[i].n_children;
  walk_t w = {v,
              n,
              shards,
              n_shards,
              KN_STRMAP_INIT,
              KN_STRMAP_INIT,
              KN_STRMAP_INIT,
              NULL,
              0,
              0,
              calloc(1, sizeof(kn_cc_done_t))};
  link_t *links = calloc(n_links + 1, sizeof(*links));
  int rc = w.d && links ? build(&w, links) : -1;
  kn_strmap_free(&w.by_lease);
  kn_strmap_free(&w.by_shard);
  kn_strmap_free(&w.named);
  free(w.stack);
  free(links);
  if (rc) {
    kn_cc_done_free(w.d);
    return NULL;
  }
  return w.d;
}

int kn_cc_done_has(const kn_cc_done_t *d, const kn_lease_t *l) {
#if KN_CC_MUTANT == 3
  return 0;
#endif
  return d && l->key && !kn_cc_lease_started(l) &&
         kn_strmap_get(&d->marked, l->key) != NULL;
}

void kn_cc_done_free(kn_cc_done_t *d) {
  if (!d) return;
  kn_strmap_free(&d->marked);
  free(d);
}
