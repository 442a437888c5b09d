#include "producer/shardmap.h"

#include <stdlib.h>
#include <string.h>

static int by_start(const void *a, const void *b) {
  const kn_shard_t *x = *(const kn_shard_t *const *)a;
  const kn_shard_t *y = *(const kn_shard_t *const *)b;
  return kn_u128_cmp(x->start, y->start);
}

int kn_shardmap_init(kn_shardmap_t *m, kn_shard_list_t *l) {
  memset(m, 0, sizeof(*m));
  m->all = l;
  if (!l) return -1;
  size_t n = 0;
  for (size_t i = 0; i < l->n; i++) n += l->v[i].seq_end == NULL;
  m->open = calloc(n ? n : 1, sizeof(*m->open));
  if (!m->open) {
    kn_shardmap_clear(m);
    return -1;
  }
  for (size_t i = 0; i < l->n; i++)
    if (!l->v[i].seq_end) m->open[m->n_open++] = &l->v[i];
  qsort(m->open, m->n_open, sizeof(*m->open), by_start);
  return 0;
}

void kn_shardmap_clear(kn_shardmap_t *m) {
  kn_shard_list_destroy(m->all);
  free(m->open);
  memset(m, 0, sizeof(*m));
}

long kn_shardmap_find(const kn_shardmap_t *m, kn_u128_t hk) {
  /* The last open shard starting at or below hk, if it also ends at or
   * above it. */
  size_t lo = 0, hi = m->n_open;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (kn_u128_cmp(m->open[mid]->start, hk) <= 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return -1;
  const kn_shard_t *s = m->open[lo - 1];
  return kn_u128_cmp(hk, s->end) <= 0 ? (long)(lo - 1) : -1;
}

const kn_shard_t *kn_shardmap_by_id(const kn_shardmap_t *m, const char *id) {
  if (!m->all || !id) return NULL;
  for (size_t i = 0; i < m->all->n; i++)
    if (strcmp(m->all->v[i].id, id) == 0) return &m->all->v[i];
  return NULL;
}
