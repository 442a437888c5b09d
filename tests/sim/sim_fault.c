/* Randomness of the world: store latencies and failures, kills, freezes,
 * partitions and outages, the producer's records and resharding. */
#include "sim.h"

int64_t sim_latency(sim_t *s) {
  if (s->faults_on && s->o.faults >= 2 && sim_chance(&s->rng, 15)) {
    s->had_fault = 1;
    return sim_range(&s->rng, 1000, 5000);
  }
  return sim_range(&s->rng, 1, 200);
}

/* Decides what becomes of a store call and schedules it. */
void sim_fault_store(sim_t *s, sim_call_t *c) {
  sim_worker_t *k = &s->wk[c->w];
  c->fate = FATE_OK;
  if (s->faults_on && s->o.faults >= 2) {
    if (s->now < k->partition_until || s->now < s->outage_until)
      c->fate = sim_chance(&s->rng, 500) ? FATE_FAIL : FATE_HANG;
    else if (sim_chance(&s->rng, 30))
      c->fate = FATE_FAIL;
    else if (sim_chance(&s->rng, 20))
      c->fate = FATE_LANDED_ERR;
  }
  if (s->sc && s->sc->fail_call && s->sc->fail_call(s, c)) c->fate = FATE_FAIL;
  /* Known as a fault from now on, whenever its answer comes. */
  if (c->fate != FATE_OK) sim_flag_call_fault(s, c);
  switch (c->fate) {
    case FATE_OK:
    case FATE_LANDED_ERR: {
      int64_t d = sim_latency(s);
      if (s->sc && s->sc->apply_delay) d += s->sc->apply_delay(s, c);
      if (d > 1000) sim_flag_call_fault(s, c);
      sim_push(s, s->now + d, EV_STORE_APPLY, c->w, c->inc, 0, 0, c);
      break;
    }
    case FATE_FAIL:
      sim_push(s, s->now + sim_latency(s), EV_STORE_REPLY, c->w, c->inc, 0, 0,
               c);
      break;
    case FATE_HANG:
      sim_push(s, s->now + sim_range(&s->rng, 2000, 20000), EV_STORE_REPLY,
               c->w, c->inc, 0, 0, c);
      break;
  }
}

static int pick_alive(sim_t *s) {
  int n = 0, v[SIM_MAX_WORKERS];
  for (int w = 0; w < s->n_wk; w++)
    if (s->wk[w].alive && s->now >= s->wk[w].frozen_until) v[n++] = w;
  return n ? v[sim_range(&s->rng, 0, n - 1)] : -1;
}

static void random_fault(sim_t *s) {
  int w = pick_alive(s);
  int kind = (int)sim_range(&s->rng, 0, s->o.faults >= 2 ? 5 : 0);
  int64_t d = s->cfg.duration_ms;
  if (w < 0) return;
  switch (kind) {
    case 0: /* kill, restart later under the same id */
      if (sim_chance(&s->rng, 300)) {
        sim_worker_close(s, w); /* or stop gracefully */
        break;
      }
      sim_worker_kill(s, w);
      s->had_fault = 1;
      sim_push(s, s->now + sim_range(&s->rng, 0, 20000), EV_RESTART, w, 0, 0, 0,
               NULL);
      break;
    case 1: /* freeze longer than a lease duration */
      sim_worker_stall(s, w, 1, sim_range(&s->rng, d + 1000, 2 * d + 5000));
      break;
    case 5: /* the control thread busy (a slow store answer, a fan-out
               check) from a renewal interval to two lease durations */
      sim_worker_stall(s, w, 0,
                       sim_range(&s->rng, s->cfg.renew_ms, 2 * d + 5000));
      break;
    case 2:
    case 3: /* partition from the store */
      s->had_fault = 1;
      for (size_t i = 0; i < s->wk[w].n_rd; i++)
        s->ten[s->wk[w].rd[i].ten].flags |= TEN_STORE_FAULT;
      s->wk[w].partition_until = s->now + sim_range(&s->rng, 1000, 25000);
      sim_trace(s, w, "partition", NULL, s->wk[w].partition_until, 0);
      break;
    case 4:
      s->had_fault = 1;
      for (int v = 0; v < s->n_wk; v++)
        for (size_t i = 0; i < s->wk[v].n_rd; i++)
          s->ten[s->wk[v].rd[i].ten].flags |= TEN_STORE_FAULT;
      s->outage_until = s->now + sim_range(&s->rng, 1000, 15000);
      sim_trace(s, -1, "outage", NULL, s->outage_until, 0);
      break;
  }
}

static int open_shards(sim_t *s, int *v) {
  int n = 0;
  for (int i = 0; i < s->n_sh; i++)
    if (!s->sh[i].closed) v[n++] = i;
  return n;
}

static void reshard(sim_t *s) {
  int v[SIM_MAX_SHARDS], n = open_shards(s, v);
  int topo = s->o.topology;
  if (topo == SIM_TOPO_MIXED)
    topo = sim_chance(&s->rng, 500) ? SIM_TOPO_SPLIT : SIM_TOPO_MERGE;
  if (topo == SIM_TOPO_MERGE && n > 1) {
    int a = v[sim_range(&s->rng, 0, n - 1)];
    for (int j = 0; j < n; j++)
      if (s->sh[v[j]].hs == s->sh[a].he + 1) {
        sim_merge(s, a, v[j]);
        return;
      }
    return;
  }
  if (topo == SIM_TOPO_MERGE && n > 1) return;
  if (n >= 12) return;
  int idle = topo == SIM_TOPO_IDLE      ? (int)sim_range(&s->rng, 1, 2)
             : sim_chance(&s->rng, 100) ? 1
                                        : 0;
  sim_split(s, v[sim_range(&s->rng, 0, n - 1)], idle);
}

void sim_fault_event(sim_t *s, const sim_ev_t *ev) {
  if (!s->faults_on) return;
  switch (ev->kind) {
    case EV_APPEND: {
      sim_retention(s);
      int v[SIM_MAX_SHARDS], n = open_shards(s, v), m = 0;
      for (int j = 0; j < n; j++)
        if (!s->sh[v[j]].idle) v[m++] = v[j];
      int recs = (int)sim_range(&s->rng, 1, 6);
      for (int r = 0; m && r < recs; r++)
        sim_append(s, v[sim_range(&s->rng, 0, m - 1)], 1);
      sim_push(s, s->now + sim_range(&s->rng, 100, 600), EV_APPEND, -1, 0, 0, 0,
               NULL);
      break;
    }
    case EV_FAULT:
      if (ev->a == 2) {
        int w = pick_alive(s);
        if (w >= 0 && sim_chance(&s->rng, 500)) sim_worker_close(s, w);
        sim_push(s, s->now + sim_range(&s->rng, 5000, 25000), EV_FAULT, -1, 0,
                 2, 0, NULL);
      } else if (ev->a == 1) {
        reshard(s);
        sim_push(s, s->now + sim_range(&s->rng, 4000, 20000), EV_FAULT, -1, 0,
                 1, 0, NULL);
      } else {
        random_fault(s);
        sim_push(s, s->now + sim_range(&s->rng, 2000, 12000), EV_FAULT, -1, 0,
                 0, 0, NULL);
      }
      break;
    default:
      break;
  }
}
