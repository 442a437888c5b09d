/* The simulated stream: shards with hash ranges and parents, records
 * appended over time, splits and merges, and ListShards answers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinesis/seqnum.h"
#include "sim.h"

int sim_shard_add(sim_t *s, int parent, int adjacent, uint64_t hs,
                  uint64_t he) {
  if (s->n_sh >= SIM_MAX_SHARDS) return -1;
  int i = s->n_sh++;
  sim_shard_t *h = &s->sh[i];
  memset(h, 0, sizeof(*h));
  snprintf(h->id, sizeof(h->id), "shardId-%012d", i);
  h->parent = parent;
  h->adjacent = adjacent;
  h->hs = hs;
  h->he = he;
  snprintf(h->hs_s, sizeof(h->hs_s), "%llu", (unsigned long long)hs);
  snprintf(h->he_s, sizeof(h->he_s), "%llu", (unsigned long long)he);
  h->first_deliv_t = -1;
  h->cur_tenure = -1;
  h->cur_ten_w = -1;
  h->listed = 1;
  if (parent >= 0) s->sh[parent].children[s->sh[parent].n_children++] = i;
  if (adjacent >= 0) s->sh[adjacent].children[s->sh[adjacent].n_children++] = i;
  return i;
}

int sim_shard_find(const sim_t *s, const char *id) {
  if (!id) return -1;
  for (int i = 0; i < s->n_sh; i++)
    if (strcmp(s->sh[i].id, id) == 0) return i;
  return -1;
}

void sim_append(sim_t *s, int i, int n) {
  sim_shard_t *h = &s->sh[i];
  if (h->closed) return;
  for (int k = 0; k < n; k++) {
    if (h->n == h->cap) {
      h->cap = h->cap ? h->cap * 2 : 32;
      h->rec = realloc(h->rec, h->cap * sizeof(*h->rec));
      if (!h->rec) abort();
    }
    sim_rec_t *r = &h->rec[h->n++];
    r->rid = s->next_rid++;
    r->t = s->now;
    /* wider than 64 bits, increasing with the record id */
    snprintf(r->seq, sizeof(r->seq), "4959%020lld%04d", (long long)r->rid, i);
    /* AT_TIMESTAMP: the application wants nothing older from the shards
     * it starts with */
    r->required =
        !(s->initial && strcmp(s->initial, KN_CKPT_AT_TIMESTAMP) == 0 &&
          h->parent < 0 && s->now < s->at_ts);
    r->deliveries = 0;
    r->users = 1;
    r->last_ten = -1;
    s->records++;
  }
}

int sim_split(sim_t *s, int i, int idle_child) {
  sim_shard_t *h = &s->sh[i];
  if (h->closed || h->he - h->hs < 4 || s->n_sh + 2 > SIM_MAX_SHARDS) return -1;
  uint64_t mid = h->hs + (h->he - h->hs) / 2;
  uint64_t hs = h->hs, he = h->he;
  h->closed = 1;
  h->closed_t = s->now;
  int a = sim_shard_add(s, i, -1, hs, mid);
  int b = sim_shard_add(s, i, -1, mid + 1, he);
  if (idle_child == 1) s->sh[a].idle = 1;
  if (idle_child == 2) s->sh[b].idle = 1;
  sim_trace(s, -1, "split", s->sh[i].id, a, b);
  return a;
}

int sim_merge(sim_t *s, int a, int b) {
  /* b must follow a in the key space (no wrap-around past the top key). */
  if (s->sh[a].closed || s->sh[b].closed || s->sh[a].he == UINT64_MAX ||
      s->sh[a].he + 1 != s->sh[b].hs || s->n_sh + 1 > SIM_MAX_SHARDS)
    return -1;
  s->sh[a].closed = s->sh[b].closed = 1;
  s->sh[a].closed_t = s->sh[b].closed_t = s->now;
  int c = sim_shard_add(s, a, b, s->sh[a].hs, s->sh[b].he);
  sim_trace(s, -1, "merge", s->sh[a].id, b, c);
  return c;
}

void sim_retention(sim_t *s) {
  if (!s->retention_ms) return;
  for (int i = 0; i < s->n_sh; i++) {
    sim_shard_t *h = &s->sh[i];
    if (!h->closed || h->gone || s->now - h->closed_t < s->retention_ms)
      continue;
    h->gone = 1;
    h->listed = 0;
    /* what was not read in time is not wanted any more */
    for (size_t k = 0; k < h->n; k++)
      if (!h->rec[k].deliveries) h->rec[k].required = 0;
    sim_trace(s, -1, "retention", h->id, (int64_t)h->n, 0);
  }
}

void sim_shard_desc(const sim_t *s, int i, kn_cc_shard_t *d) {
  const sim_shard_t *h = &s->sh[i];
  d->id = h->id;
  d->parent = h->parent >= 0 ? s->sh[h->parent].id : NULL;
  d->adjacent = h->adjacent >= 0 ? s->sh[h->adjacent].id : NULL;
  d->hash_start = h->hs_s;
  d->hash_end = h->he_s;
  d->closed = h->closed;
}

void sim_list_shards(const sim_t *s, kn_cc_shard_t **v, size_t *n) {
  *v = calloc((size_t)s->n_sh + 1, sizeof(**v));
  if (!*v) abort();
  *n = 0;
  for (int i = 0; i < s->n_sh; i++)
    if (s->sh[i].listed) sim_shard_desc(s, i, &(*v)[(*n)++]);
}

size_t sim_start_index(const sim_t *s, int i, const char *ckpt) {
  const sim_shard_t *h = &s->sh[i];
  if (!ckpt || strcmp(ckpt, KN_CKPT_TRIM_HORIZON) == 0) return 0;
  if (strcmp(ckpt, KN_CKPT_LATEST) == 0 || strcmp(ckpt, KN_CKPT_SHARD_END) == 0)
    return h->n;
  size_t k = 0;
  if (strcmp(ckpt, KN_CKPT_AT_TIMESTAMP) == 0) {
    while (k < h->n && h->rec[k].t < s->at_ts) k++;
    return k;
  }
  while (k < h->n && kn_seqnum_cmp(h->rec[k].seq, ckpt) <= 0) k++;
  return k;
}
