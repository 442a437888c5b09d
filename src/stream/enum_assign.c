/* The assigners of kn_enumerator_t and rebalancing. */
#include <stdlib.h>
#include <string.h>

#include "stream/enum_int.h"

uint64_t kn_enum_weight(const kn_enumerator_t *en, const eshard_t *s) {
  if (s->has_load) return s->load;
  /* Not measured yet: its parents' load, shared among their children. */
  uint64_t w = 0;
  const char *ps[2] = {s->parent, s->adj};
  for (int k = 0; k < 2; k++) {
    long p = ps[k] ? kn_enum_find(en, ps[k]) : -1;
    if (p < 0 || !en->shards[p].has_load) continue;
    size_t kids = 0;
    for (size_t i = 0; i < en->n_shards; i++) {
      const eshard_t *c = &en->shards[i];
      if ((c->parent && strcmp(c->parent, ps[k]) == 0) ||
          (c->adj && strcmp(c->adj, ps[k]) == 0))
        kids++;
    }
    w += en->shards[p].load / (kids ? kids : 1);
  }
  return w ? w : 1;
}

/* The reader the hash key midpoint of s falls on, among n:
 * floor(mid * n / 2^128), from the top 64 bits of mid. */
static size_t by_hash(const eshard_t *s, size_t n) {
  kn_u128_t span = kn_u128_sub(s->end, s->start);
  /* mid = start + span / 2 */
  kn_u128_t half = kn_u128_make(span.hi >> 1, (span.lo >> 1) | (span.hi << 63));
  kn_u128_t mid = kn_u128_add(s->start, half);
  uint64_t hi32 = mid.hi >> 32, lo32 = mid.hi & 0xffffffffu;
  uint64_t idx = (hi32 * n + ((lo32 * n) >> 32)) >> 32;
  return idx < n ? (size_t)idx : n - 1;
}

/* Unfinished shards held, and their load, for each reader. */
static kn_enum_reader_info_t *reader_infos(const kn_enumerator_t *en) {
  kn_enum_reader_info_t *ri = calloc(en->n_readers, sizeof(*ri));
  if (!ri) return NULL;
  for (size_t r = 0; r < en->n_readers; r++) ri[r].reader_id = en->readers[r];
  for (size_t i = 0; i < en->n_shards; i++) {
    const eshard_t *s = &en->shards[i];
    if (s->state != ST_ASSIGNED) continue;
    long r = kn_enum_reader(en, s->reader);
    if (r < 0) continue;
    ri[r].shards++;
    ri[r].load += kn_enum_weight(en, s);
  }
  return ri;
}

static size_t least(const kn_enum_reader_info_t *ri, size_t n, int by_load) {
  size_t best = 0;
  for (size_t r = 1; r < n; r++) {
    uint64_t a = by_load ? ri[r].load : ri[r].shards;
    uint64_t b = by_load ? ri[best].load : ri[best].shards;
    if (a < b) best = r;
  }
  return best;
}

long kn_enum_pick(kn_enumerator_t *en, const eshard_t *s) {
  size_t n = en->n_readers;
  if (!en->assign_fn && en->assigner == KN_ASSIGN_HASH_RANGE)
    return (long)by_hash(s, n);
  kn_enum_reader_info_t *ri = reader_infos(en);
  if (!ri) return -1;
  size_t pick;
  if (en->assign_fn) {
    kn_enum_shard_info_t si = {s->id, s->hk_start, s->hk_end,
                               kn_enum_weight(en, s)};
    pick = en->assign_fn(en->assign_opaque, &si, ri, n);
    if (pick >= n) pick = 0;
  } else {
    pick = least(ri, n, en->assigner == KN_ASSIGN_THROUGHPUT);
  }
  free(ri);
  return (long)pick;
}

static kn_err_t revoke(kn_enumerator_t *en, eshard_t *s) {
  if (kn_enum_push(en, KN_ENUM_REVOKE, s)) return KN_ERR__NOMEM;
  s->state = ST_REVOKING;
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_enumerator_rebalance(kn_enumerator_t *en) {
  size_t n = en->n_readers;
  if (!n) return KN_ERR_NO_ERROR;
  if (!en->assign_fn && en->assigner == KN_ASSIGN_HASH_RANGE) {
    for (size_t i = 0; i < en->n_shards; i++) {
      eshard_t *s = &en->shards[i];
      if (s->state == ST_ASSIGNED &&
          strcmp(en->readers[by_hash(s, n)], s->reader) != 0 && revoke(en, s))
        return KN_ERR__NOMEM;
    }
    return KN_ERR_NO_ERROR;
  }
  /* Count or load: while moving one shard from the most loaded reader to
   * the least loaded one narrows the gap between them, revoke it (the
   * newest of the shards that do; the least loaded reader gets it when it
   * comes back).  Each shard moves at most once. */
  int by_load = en->assigner == KN_ASSIGN_THROUGHPUT;
  kn_enum_reader_info_t *ri = reader_infos(en);
  if (!ri) return KN_ERR__NOMEM;
  kn_err_t err = KN_ERR_NO_ERROR;
  for (size_t round = 0; round < en->n_shards && !err; round++) {
    size_t hi = 0, lo = 0;
    for (size_t r = 1; r < n; r++) {
      uint64_t v = by_load ? ri[r].load : ri[r].shards;
      if (v > (by_load ? ri[hi].load : ri[hi].shards)) hi = r;
      if (v < (by_load ? ri[lo].load : ri[lo].shards)) lo = r;
    }
    uint64_t gap =
        by_load ? ri[hi].load - ri[lo].load : ri[hi].shards - ri[lo].shards;
    eshard_t *move = NULL;
    for (size_t i = en->n_shards; i-- > 0 && !move;) {
      eshard_t *s = &en->shards[i];
      uint64_t w = by_load ? kn_enum_weight(en, s) : 1;
      if (s->state == ST_ASSIGNED && strcmp(s->reader, en->readers[hi]) == 0 &&
          w < gap)
        move = s;
    }
    if (!move) break;
    uint64_t w = kn_enum_weight(en, move);
    err = revoke(en, move);
    ri[hi].shards--;
    ri[hi].load -= w;
    ri[lo].shards++;
    ri[lo].load += w;
  }
  free(ri);
  return err;
}
