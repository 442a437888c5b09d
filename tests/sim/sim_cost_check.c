/* kn_sim --cost's fleet checks (sim_cost_check.h). */
#include "sim_cost_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void violate(sim_cost_check_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void violate(sim_cost_check_t *c, const char *fmt, ...) {
  if (!c->violations++) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->first, sizeof(c->first), fmt, ap);
    va_end(ap);
  }
}

int sim_cost_check_init(sim_cost_check_t *c, int shards, int64_t duration_ms) {
  memset(c, 0, sizeof(*c));
  c->sh = calloc((size_t)shards + 1, sizeof(*c->sh));
  if (!c->sh) return -1;
  c->shards = shards;
  c->duration_ms = duration_ms;
  for (int i = 0; i < shards; i++) c->sh[i].cur_tenure = -1;
  return 0;
}

void sim_cost_check_free(sim_cost_check_t *c) {
  for (int i = 0; c->sh && i < c->shards; i++) free(c->sh[i].r);
  free(c->sh);
  c->sh = NULL;
}

static int active(const sim_cc_reader_t *r, int64_t now) {
  return !r->stopped && r->until > now;
}

static sim_cc_reader_t *find(sim_cc_shard_t *h, int w, int64_t tenure) {
  for (size_t i = h->n; i-- > 0;)
    if (h->r[i].w == w && h->r[i].tenure == tenure) return &h->r[i];
  return NULL;
}

void sim_cost_check_start(sim_cost_check_t *c, int w, int shard, int64_t tenure,
                          int64_t until, int64_t now) {
  if (shard < 0 || shard >= c->shards) return;
  sim_cc_shard_t *h = &c->sh[shard];
  c->starts++;
  if (tenure > h->cur_tenure)
    violate(c, "w%d starts shard %d with tenure %lld, never written (%lld)", w,
            shard, (long long)tenure, (long long)h->cur_tenure);
  /* Superseded before it starts (its take answered after a later one
   * landed): bounded by its own deadline, a lease duration at most. */
  if (tenure < h->cur_tenure && until > h->take_t + c->duration_ms)
    violate(c,
            "fencing: w%d starts shard %d for tenure %lld until %lld ms, "
            "but w%d took it (tenure %lld) at %lld ms",
            w, shard, (long long)tenure, (long long)until, h->cur_w,
            (long long)h->cur_tenure, (long long)h->take_t);
  /* Readers that can no longer read are forgotten. */
  size_t k = 0;
  for (size_t i = 0; i < h->n; i++)
    if (active(&h->r[i], now)) h->r[k++] = h->r[i];
  h->n = k;
  if (h->n == h->cap) {
    h->cap = h->cap ? 2 * h->cap : 2;
    h->r = realloc(h->r, h->cap * sizeof(*h->r));
    if (!h->r) abort();
  }
  h->r[h->n++] = (sim_cc_reader_t){w, tenure, until, 0};
}

void sim_cost_check_deadline(sim_cost_check_t *c, int w, int shard,
                             int64_t tenure, int64_t until) {
  if (shard < 0 || shard >= c->shards) return;
  sim_cc_reader_t *r = find(&c->sh[shard], w, tenure);
  if (r) r->until = until;
}

void sim_cost_check_stop(sim_cost_check_t *c, int w, int shard,
                         int64_t tenure) {
  if (shard < 0 || shard >= c->shards) return;
  sim_cc_reader_t *r = find(&c->sh[shard], w, tenure);
  if (r) r->stopped = 1;
}

void sim_cost_check_killed(sim_cost_check_t *c, int w) {
  for (int s = 0; s < c->shards; s++)
    for (size_t i = 0; i < c->sh[s].n; i++)
      if (c->sh[s].r[i].w == w) c->sh[s].r[i].stopped = 1;
}

void sim_cost_check_landed(sim_cost_check_t *c, int w, int shard,
                           const kn_store_job_t *j, int64_t now) {
  if (shard < 0 || shard >= c->shards || j->err) return;
  sim_cc_shard_t *h = &c->sh[shard];
  switch (j->op) {
    case KN_CC_TAKE:
      c->takes++;
      for (size_t i = 0; i < h->n; i++) {
        const sim_cc_reader_t *r = &h->r[i];
        if (active(r, now) && r->tenure < j->new_counter &&
            r->tenure >= h->cur_tenure)
          violate(c,
                  "two readers: w%d takes shard %d (tenure %lld) at %lld ms "
                  "while w%d may read it for tenure %lld until %lld ms",
                  w, shard, (long long)j->new_counter, (long long)now, r->w,
                  (long long)r->tenure, (long long)r->until);
      }
      h->cur_tenure = j->new_counter;
      h->take_t = now;
      h->cur_w = w;
      break;
    case KN_CC_RENEW:
    case KN_CC_CHECKPOINT:
    case KN_CC_RELEASE:
    case KN_CC_HANDOFF_DONE:
      if (j->tenure >= 0 && h->cur_tenure >= 0 && j->tenure != h->cur_tenure)
        violate(c,
                "fencing: w%d's %s of shard %d for tenure %lld landed while "
                "tenure %lld (w%d) holds the lease",
                w, kn_cc_op_name(j->op), shard, (long long)j->tenure,
                (long long)h->cur_tenure, h->cur_w);
      break;
    default:
      break;
  }
}
