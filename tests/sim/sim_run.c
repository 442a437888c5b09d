/* One run: the world derived from the seed, then the event loop until the
 * end of the quiet period, then the final checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "util/str.h"

#define SIM_MAX_EVENTS 3000000

static void init_cfg(sim_t *s) {
  s->cfg.duration_ms = 10000;
  s->cfg.renew_ms =
      sim_chance(&s->rng, 500) ? 3000 : sim_range(&s->rng, 1000, 6000);
  s->cfg.take_ms = 2000;
  s->cfg.sync_ms = 5000;
  s->cfg.checkpoint_ms = 1000;
  s->cfg.max_leases = 0;
  s->cfg.max_steal = 1;
  s->cfg.handoff_ms = 30000;
  int64_t p = sim_range(&s->rng, 0, 99);
  s->initial = p < 80   ? KN_CKPT_TRIM_HORIZON
               : p < 90 ? KN_CKPT_LATEST
                        : KN_CKPT_AT_TIMESTAMP;
  s->cfg.initial = s->initial;
  s->at_ts = sim_range(&s->rng, 0, 20000);
  s->child_shards = sim_chance(&s->rng, 500);
  s->retention_ms =
      sim_chance(&s->rng, 150) ? sim_range(&s->rng, 20000, 60000) : 0;
  s->cfg.members = !sim_chance(&s->rng, 250);
  s->cfg.scan_ms = sim_range(&s->rng, 20000, 120000);
  /* KN_SIM_MEMBERS=0 or 1 forces the choice (to compare a run both ways). */
  const char *m = getenv("KN_SIM_MEMBERS");
  if (m && (*m == '0' || *m == '1')) s->cfg.members = *m == '1';
  /* One run in three spreads its members over items of two or three
   * (drawn from the seed, not the stream of draws: the other runs stay
   * as they were); KN_SIM_ITEMS=0 or 1 forces the choice. */
  uint64_t h = s->o.seed * 0x9e3779b97f4a7c15ULL;
  int spread = (h >> 33) % 3 == 0;
  const char *it = getenv("KN_SIM_ITEMS");
  if (it && (*it == '0' || *it == '1')) spread = *it == '1';
  s->cfg.member_items = spread ? SIM_ITEMS : 1;
  s->cfg.member_item_size = spread ? 2 + (int)((h >> 40) % 2) : 0;
  /* More than an item holds (16): spread as the consumer spreads them. */
  if (!spread && s->o.workers > 16) s->cfg.member_items = SIM_ITEMS;
}

void sim_init(sim_t *s, const sim_opts_t *o) {
  memset(s, 0, sizeof(*s));
  s->o = *o;
  s->rng.s = o->seed * 0x2545f4914f6cdd1dULL + 0x9e3779b97f4a7c15ULL;
  init_cfg(s);
  s->faults_end = o->seconds * 1000;
  /* recoveries (restart, wake, partitions) end 25 s after the last fault;
   * then 4 lease durations and a sync interval, and some slack */
  s->end =
      s->faults_end + 25000 + 4 * s->cfg.duration_ms + s->cfg.sync_ms + 10000;
  s->faults_on = 1;
  if (s->o.topology == SIM_TOPO_RANDOM)
    s->o.topology = (int)sim_range(&s->rng, SIM_TOPO_STATIC, SIM_TOPO_IDLE);
  s->n_wk = o->workers;
  /* Every slot has its id: a scenario may run more workers than drawn. */
  for (int w = 0; w < SIM_MAX_WORKERS; w++)
    snprintf(s->wk[w].id, sizeof(s->wk[w].id), "w%d", w);
  for (int w = 0; w < s->n_wk; w++) {
    s->wk[w].auto_ckpt = !sim_chance(&s->rng, 150);
    s->wk[w].tick_at = -1;
  }
  if (o->scenario) return;
  uint64_t step = UINT64_MAX / (uint64_t)o->shards;
  for (int i = 0; i < o->shards; i++)
    sim_shard_add(
        s, -1, -1, step * (uint64_t)i,
        i == o->shards - 1 ? UINT64_MAX : step * (uint64_t)(i + 1) - 1);
  for (int w = 0; w < s->n_wk; w++)
    sim_push(s, sim_range(&s->rng, 0, 3000), EV_RESTART, w, 0, 0, 0, NULL);
  sim_push(s, sim_range(&s->rng, 0, 1000), EV_APPEND, -1, 0, 0, 0, NULL);
  if (s->o.topology != SIM_TOPO_STATIC)
    sim_push(s, sim_range(&s->rng, 3000, 15000), EV_FAULT, -1, 0, 1, 0, NULL);
  if (o->faults)
    sim_push(s, sim_range(&s->rng, 2000, 10000), EV_FAULT, -1, 0, 0, 0, NULL);
  /* Planned churn in every run: workers leave gracefully and come back,
   * which moves leases for balance each time. */
  sim_push(s, sim_range(&s->rng, 5000, 20000), EV_FAULT, -1, 0, 2, 0, NULL);
}

/* Generations of shards: each may take a sync and a take round to start
 * after its parents finish, so the quiet period grows with them. */
static int depth(const sim_t *s, int i) {
  const sim_shard_t *h = &s->sh[i];
  int d = 0;
  if (h->parent >= 0) d = depth(s, h->parent);
  if (h->adjacent >= 0 && depth(s, h->adjacent) > d) d = depth(s, h->adjacent);
  return d + 1;
}

static void faults_end(sim_t *s) {
  int g = 0;
  s->faults_on = 0;
  for (int i = 0; i < s->n_sh; i++)
    if (depth(s, i) > g) g = depth(s, i);
  s->end += (int64_t)g * (s->cfg.sync_ms + s->cfg.take_ms);
  sim_trace(s, -1, "faults_end", NULL, g, s->end);
}

static void apply(sim_t *s, sim_call_t *c) {
  char *old = NULL;
  int i = c->key ? sim_store_find(s, c->key) : -1;
  if (i >= 0) old = kn_strdup0(s->table[i].checkpoint);
  int own = 0;
  if (i >= 0 && c->tenure >= 0 && s->table[i].owner && c->owner &&
      strcmp(s->table[i].owner, c->owner) == 0) {
    int sh = sim_shard_find(s, c->key);
    own = sh >= 0 && s->sh[sh].cur_tenure == c->tenure;
  }
  c->rc = sim_store_apply(s, c);
  if (c->rc == KN_ERR_CONDITIONAL_CHECK_FAILED && own &&
      (c->op == KN_CC_RENEW || c->op == KN_CC_CHECKPOINT ||
       c->op == KN_CC_RELEASE)) {
    s->stale_counter++;
    sim_trace(s, c->w, "stale_counter", c->key, c->counter,
              s->table[i].counter);
  }
  sim_trace(s, c->w, "landed", c->key, c->op, c->rc);
  if (!c->rc) sim_check_landed(s, c, old);
  free(old);
  int64_t d = sim_latency(s);
  if (d > 1000) sim_flag_call_fault(s, c); /* a slow answer */
  sim_push(s, s->now + d, EV_STORE_REPLY, c->w, c->inc, 0, 0, c);
}

int sim_run(sim_t *s) {
  sim_ev_t ev;
  while (!s->violated && sim_pop(s, &ev)) {
    int64_t settle = s->cfg.duration_ms > s->cfg.sync_ms ? s->cfg.duration_ms
                                                         : s->cfg.sync_ms;
    if (ev.t > s->end && !s->faults_on && s->extensions < 12 &&
        (s->last_delivery_t > s->end - 5000 ||
         s->last_end_t > s->end - settle - s->cfg.sync_ms - 5000)) {
      /* Readers still catching up (a shard read again from its start
       * after a run of failed checkpoints), or a lease finished too
       * lately for its cleanup (it stands still for the settle period,
       * then a sync removes it): the end waits, 2 min at most, so that
       * the end's checks judge a settled group. */
      s->end += 10000;
      s->extensions++;
    }
    if (ev.t > s->end && !s->faults_on) {
      sim_ev_free(&ev);
      continue;
    }
    s->now = ev.t;
    if (s->faults_on && s->now >= s->faults_end) faults_end(s);
    if (++s->n_events > SIM_MAX_EVENTS) {
      sim_violate(s, "more than %d events: a busy loop?", SIM_MAX_EVENTS);
      break;
    }
    switch (ev.kind) {
      case EV_STORE_APPLY:
        apply(s, ev.p);
        break;
      case EV_APPEND:
      case EV_FAULT:
        sim_fault_event(s, &ev);
        break;
      case EV_RESTART:
        if (!s->wk[ev.w].alive) sim_worker_start(s, ev.w);
        break;
      case EV_SCRIPT:
        if (s->sc && s->sc->step) s->sc->step(s, ev.a);
        break;
      default:
        sim_worker_event(s, &ev);
        break;
    }
  }
  s->now = s->end;
  if (!s->violated) sim_check_end(s);
  return s->violated ? -1 : 0;
}
