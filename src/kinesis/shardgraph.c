#include "kinesis/shardgraph.h"

#include <stdlib.h>
#include <string.h>

struct kn_shardgraph {
  const kn_shard_list_t *l;
  size_t n;
  size_t *by_id;     /* list indexes sorted by id (stable) */
  size_t *rank;      /* rank[i]: position of i in by_id */
  long (*par)[2];    /* known parents of i, -1 when none or unknown */
  size_t *child_off; /* children of i: child_idx[child_off[i] .. off[i+1]) */
  size_t *child_idx;
  size_t *order;
  int cycle;
  size_t *open; /* open shards sorted by (start, end, id) */
  size_t n_open;
};

/* Sort entries carry their shard, since qsort passes no context. */
typedef struct {
  const kn_shard_t *s;
  size_t i;
} ent_t;

static int cmp_by_id(const void *pa, const void *pb) {
  const ent_t *a = pa, *b = pb;
  int c = strcmp(a->s->id, b->s->id);
  if (c) return c;
  return (a->i > b->i) - (a->i < b->i);
}

static int cmp_by_range(const void *pa, const void *pb) {
  const ent_t *a = pa, *b = pb;
  int c = kn_u128_cmp(a->s->start, b->s->start);
  if (c) return c;
  c = kn_u128_cmp(a->s->end, b->s->end);
  if (c) return c;
  return cmp_by_id(pa, pb);
}

long kn_shardgraph_find(const kn_shardgraph_t *g, const char *id) {
  if (!id) return -1;
  size_t lo = 0, hi = g->n;
  /* Lower bound, so duplicates resolve to their first occurrence. */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(g->l->v[g->by_id[mid]].id, id) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < g->n && strcmp(g->l->v[g->by_id[lo]].id, id) == 0)
    return (long)g->by_id[lo];
  return -1;
}

/* Min-heap of list indexes ordered by rank. */
static void heap_push(size_t *h, size_t *n, const size_t *rank, size_t v) {
  size_t i = (*n)++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (rank[h[p]] <= rank[v]) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = v;
}

static size_t heap_pop(size_t *h, size_t *n, const size_t *rank) {
  size_t top = h[0], v = h[--*n], i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && rank[h[c + 1]] < rank[h[c]]) c++;
    if (rank[v] <= rank[h[c]]) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = v;
  return top;
}

static int build_order(kn_shardgraph_t *g) {
  size_t n = g->n, *indeg = calloc(n ? n : 1, sizeof(size_t)),
         *heap = malloc((n ? n : 1) * sizeof(size_t));
  char *placed = calloc(n ? n : 1, 1);
  if (!indeg || !heap || !placed) {
    free(indeg);
    free(heap);
    free(placed);
    return -1;
  }
  size_t hn = 0, on = 0;
  for (size_t i = 0; i < n; i++) {
    indeg[i] = (g->par[i][0] >= 0) + (g->par[i][1] >= 0);
    if (!indeg[i]) heap_push(heap, &hn, g->rank, i);
  }
  for (;;) {
    while (hn) {
      size_t i = heap_pop(heap, &hn, g->rank);
      placed[i] = 1;
      g->order[on++] = i;
      for (size_t k = g->child_off[i]; k < g->child_off[i + 1]; k++) {
        size_t c = g->child_idx[k];
        if (--indeg[c] == 0) heap_push(heap, &hn, g->rank, c);
      }
    }
    if (on == n) break;
    /* What is left hangs on a cycle: release its smallest id and go on,
     * so every shard still gets a place. */
    g->cycle = 1;
    for (size_t r = 0; r < n; r++) {
      size_t i = g->by_id[r];
      if (!placed[i] && indeg[i]) {
        indeg[i] = 0;
        heap_push(heap, &hn, g->rank, i);
        break;
      }
    }
  }
  free(indeg);
  free(heap);
  free(placed);
  return 0;
}

kn_shardgraph_t *kn_shardgraph_new(const kn_shard_list_t *l) {
  kn_shardgraph_t *g = calloc(1, sizeof(*g));
  if (!g) return NULL;
  g->l = l;
  size_t n = g->n = l ? l->n : 0, n1 = n ? n : 1;
  ent_t *ents = malloc(n1 * sizeof(*ents));
  g->by_id = malloc(n1 * sizeof(size_t));
  g->rank = malloc(n1 * sizeof(size_t));
  g->par = malloc(n1 * sizeof(*g->par));
  g->child_off = calloc(n + 1, sizeof(size_t));
  g->child_idx = malloc(n1 * 2 * sizeof(size_t));
  g->order = malloc(n1 * sizeof(size_t));
  g->open = malloc(n1 * sizeof(size_t));
  if (!ents || !g->by_id || !g->rank || !g->par || !g->child_off ||
      !g->child_idx || !g->order || !g->open)
    goto fail;

  for (size_t i = 0; i < n; i++) ents[i] = (ent_t){&l->v[i], i};
  if (n) qsort(ents, n, sizeof(*ents), cmp_by_id);
  for (size_t r = 0; r < n; r++) {
    g->by_id[r] = ents[r].i;
    g->rank[ents[r].i] = r;
  }

  /* Parent links to shards we know; a shard naming itself or the same
   * parent twice counts it once. */
  for (size_t i = 0; i < n; i++) {
    long p = kn_shardgraph_find(g, l->v[i].parent);
    long q = kn_shardgraph_find(g, l->v[i].adjacent_parent);
    if (q == p) q = -1;
    if (p < 0) p = q, q = -1;
    g->par[i][0] = p;
    g->par[i][1] = q;
    if (p >= 0) g->child_off[p + 1]++;
    if (q >= 0) g->child_off[q + 1]++;
  }
  for (size_t i = 0; i < n; i++) g->child_off[i + 1] += g->child_off[i];
  {
    size_t *fill = calloc(n1, sizeof(size_t));
    if (!fill) goto fail;
    /* Walking children in id order fills each slice in id order. */
    for (size_t r = 0; r < n; r++) {
      size_t c = g->by_id[r];
      for (int k = 0; k < 2; k++) {
        long p = g->par[c][k];
        if (p >= 0) g->child_idx[g->child_off[p] + fill[p]++] = c;
      }
    }
    free(fill);
  }
  if (build_order(g)) goto fail;

  size_t no = 0;
  for (size_t i = 0; i < n; i++)
    if (kn_shard_is_open(&l->v[i])) ents[no++] = (ent_t){&l->v[i], i};
  if (no) qsort(ents, no, sizeof(*ents), cmp_by_range);
  for (size_t k = 0; k < no; k++) g->open[k] = ents[k].i;
  g->n_open = no;
  free(ents);
  return g;

fail:
  free(ents);
  kn_shardgraph_destroy(g);
  return NULL;
}

void kn_shardgraph_destroy(kn_shardgraph_t *g) {
  if (!g) return;
  free(g->by_id);
  free(g->rank);
  free(g->par);
  free(g->child_off);
  free(g->child_idx);
  free(g->order);
  free(g->open);
  free(g);
}

const size_t *kn_shardgraph_children(const kn_shardgraph_t *g, size_t i,
                                     size_t *n) {
  if (i >= g->n) {
    *n = 0;
    return NULL;
  }
  *n = g->child_off[i + 1] - g->child_off[i];
  return g->child_idx + g->child_off[i];
}

int kn_shardgraph_ready(const kn_shardgraph_t *g, size_t i,
                        kn_shard_done_fn *done, void *opaque) {
  if (i >= g->n) return 0;
  for (int k = 0; k < 2; k++) {
    long p = g->par[i][k];
    if (p >= 0 && !done(opaque, g->l->v[p].id)) return 0;
  }
  return 1;
}

const size_t *kn_shardgraph_order(const kn_shardgraph_t *g) { return g->order; }
size_t kn_shardgraph_count(const kn_shardgraph_t *g) { return g->n; }
int kn_shardgraph_has_cycle(const kn_shardgraph_t *g) { return g->cycle; }

long kn_shardgraph_cover(const kn_shardgraph_t *g, kn_u128_t key) {
  /* Last open shard starting at or below key. */
  size_t lo = 0, hi = g->n_open;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (kn_u128_cmp(g->l->v[g->open[mid]].start, key) <= 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* Among shards starting at or below key, the later ones win; step back
   * past those that end too early (possible only with overlaps). */
  while (lo > 0) {
    const kn_shard_t *s = &g->l->v[g->open[lo - 1]];
    if (kn_u128_cmp(key, s->end) <= 0) return (long)g->open[lo - 1];
    lo--;
  }
  return -1;
}

static void add_issue(kn_hash_issue_t *out, size_t max, size_t *k,
                      kn_hash_issue_kind_t kind, kn_u128_t start, kn_u128_t end,
                      long a, long b) {
  if (*k < max) out[*k] = (kn_hash_issue_t){kind, start, end, a, b};
  (*k)++;
}

size_t kn_shardgraph_check(const kn_shardgraph_t *g, kn_hash_issue_t *out,
                           size_t max) {
  const kn_u128_t one = {0, 1}, top = {UINT64_MAX, UINT64_MAX};
  size_t k = 0;
  kn_u128_t next = {0, 0}; /* first key not yet covered */
  int full = 0;            /* covered up to 2^128-1 */
  long reach = -1;         /* the shard that reaches furthest so far */
  for (size_t j = 0; j < g->n_open; j++) {
    long i = (long)g->open[j];
    const kn_shard_t *s = &g->l->v[i];
    if (kn_u128_cmp(s->start, s->end) > 0) continue; /* empty range */
    if (!full && kn_u128_cmp(s->start, next) > 0)
      add_issue(out, max, &k, KN_HASH_GAP, next, kn_u128_sub(s->start, one),
                reach, i);
    else if (reach >= 0 && (full || kn_u128_cmp(s->start, next) < 0)) {
      kn_u128_t covered_end = full ? top : kn_u128_sub(next, one);
      kn_u128_t oend =
          kn_u128_cmp(s->end, covered_end) < 0 ? s->end : covered_end;
      add_issue(out, max, &k, KN_HASH_OVERLAP, s->start, oend, reach, i);
    }
    if (!full && kn_u128_cmp(s->end, next) >= 0) {
      reach = i;
      if (kn_u128_eq(s->end, top))
        full = 1;
      else
        next = kn_u128_add(s->end, one);
    }
  }
  if (!full) add_issue(out, max, &k, KN_HASH_GAP, next, top, reach, -1);
  return k;
}
