#include "consumer/shard_table.h"

#include <stdlib.h>
#include <string.h>

#include "kinesis/hashkey.h"
#include "util/str.h"

const char *kn_cshard_state_name(kn_cshard_state_t s) {
  static const char *names[] = {"waiting", "reading", "ended", "done",
                                "stopped"};
  return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

kn_cshard_t *kn_shard_table_find(kn_consumer_t *kc, const char *id) {
  return kn_strmap_get(&kc->shard_map, id);
}

static void cshard_free(kn_cshard_t *cs) {
  if (!cs) return;
  free(cs->id);
  free(cs->parent);
  free(cs->adjacent_parent);
  free(cs);
}

kn_cshard_t *kn_shard_table_add_raw(kn_consumer_t *kc, const char *id,
                                    const char *parent,
                                    const char *adjacent_parent, const char *hs,
                                    const char *he, int closed) {
  if (kc->n_shards == kc->cap_shards) {
    size_t cap = kc->cap_shards ? kc->cap_shards * 2 : 16;
    kn_cshard_t **n = realloc(kc->shards, cap * sizeof(*n));
    if (!n) return NULL;
    kc->shards = n;
    kc->cap_shards = cap;
  }
  kn_cshard_t *cs = calloc(1, sizeof(*cs));
  if (!cs) return NULL;
  cs->id = strdup(id);
  cs->parent = kn_strdup0(parent);
  cs->adjacent_parent = kn_strdup0(adjacent_parent);
  if (!cs->id || (parent && !cs->parent) ||
      (adjacent_parent && !cs->adjacent_parent)) {
    cshard_free(cs);
    return NULL;
  }
  /* An unparsable range (never seen) falls back to the whole key space so
   * no record is dropped for being out of range. */
  if (!hs || kn_u128_parse(hs, strlen(hs), &cs->range_start))
    cs->range_start = kn_u128_make(0, 0);
  if (!he || kn_u128_parse(he, strlen(he), &cs->range_end))
    cs->range_end = kn_u128_make(UINT64_MAX, UINT64_MAX);
  cs->closed_at_sync = closed;
  cs->state = KN_CS_WAITING;
  cs->fencing_token = -1;
  cs->millis_behind = -1;
  if (kn_strmap_put(&kc->shard_map, cs->id, cs)) {
    cshard_free(cs);
    return NULL;
  }
  kc->shards[kc->n_shards++] = cs;
  return cs;
}

kn_cshard_t *kn_shard_table_add(kn_consumer_t *kc, const kn_shard_t *s) {
  return kn_shard_table_add_raw(kc, kn_shard_id(s), kn_shard_parent_id(s),
                                kn_shard_adjacent_parent_id(s),
                                kn_shard_hash_key_start(s),
                                kn_shard_hash_key_end(s), !kn_shard_is_open(s));
}

int kn_shard_table_parents_done(kn_consumer_t *kc, const kn_cshard_t *cs) {
  const char *parents[2] = {cs->parent, cs->adjacent_parent};
  for (int i = 0; i < 2; i++) {
    if (!parents[i]) continue;
    kn_cshard_t *p = kn_shard_table_find(kc, parents[i]);
    if (p && p->state != KN_CS_ENDED && p->state != KN_CS_DONE &&
        p->state != KN_CS_STOPPED)
      return 0;
  }
  return 1;
}

void kn_shard_table_clear(kn_consumer_t *kc) {
  for (size_t i = 0; i < kc->n_shards; i++) cshard_free(kc->shards[i]);
  free(kc->shards);
  kn_strmap_free(&kc->shard_map);
  kc->shards = NULL;
  kc->n_shards = kc->cap_shards = 0;
}

int kn_lease_expired_locked(const kn_cshard_t *cs, int64_t now_ms) {
  return cs->lease_until_ms && now_ms >= cs->lease_until_ms;
}

int64_t kn_cshard_tenure_locked(const kn_cshard_t *cs) {
  return cs->fencing_token > 0 ? cs->fencing_token : 0;
}
