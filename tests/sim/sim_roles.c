/* kn_sim --roles: one run of the stream-processor model (sim_roles.h),
 * the world drawn from the seed, the event loop with kills, resharding
 * and rescaling, the quiet period and the final checks; and the runs of
 * the command line with their summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lease/lease.h"
#include "sim_roles.h"

#define RS_MAX_EVENTS 2000000

static void add_reader(rsim_t *r) {
  int i = r->n_rd++;
  rs_reader_t *d = &r->rd[i];
  memset(d, 0, sizeof(*d));
  snprintf(d->id, sizeof(d->id), "r%d", i % RS_MAX_READERS);
  d->exists = 1;
  rs_reader_start(r, i);
}

static int live_readers(const rsim_t *r) {
  int n = 0;
  for (int i = 0; i < r->n_rd; i++) n += r->rd[i].exists && !r->rd[i].retired;
  return n;
}

static void init(rsim_t *r, const sim_opts_t *o, int readers, int rpc) {
  memset(r, 0, sizeof(*r));
  sim_t *s = &r->s;
  s->o = *o;
  s->rng.s = o->seed * 0x2545f4914f6cdd1dULL + 0x9e3779b97f4a7c15ULL;
  int drawn = sim_chance(&s->rng, 500);
  r->rpc = rpc >= 0 ? rpc : drawn;
  /* The aggregates draw from a PRNG of their own: the rest of a run does
   * not change with them (seeds kept as tests replay as they failed). */
  r->agg_rng.s = o->seed ^ 0x6a09e667f3bcc908ULL;
  r->aggregated = sim_chance(&r->agg_rng, 500);
  r->read_ms = sim_range(&s->rng, 20, 200);
  r->commit_ms = sim_range(&s->rng, 100, 2000);
  r->round_ms = sim_range(&s->rng, 50, 500);
  r->sync_ms = sim_range(&s->rng, 500, 10000);
  r->assigner = (kn_assigner_t)sim_range(&s->rng, 0, 2);
  s->child_shards = sim_chance(&s->rng, 500);
  s->retention_ms =
      sim_chance(&s->rng, 150) ? sim_range(&s->rng, 20000, 60000) : 0;
  if (sim_chance(&s->rng, 150)) {
    /* Every reshard comes after the first listing (a shard born later
     * starts at TRIM_HORIZON). */
    s->initial = KN_CKPT_AT_TIMESTAMP;
    s->at_ts = sim_range(&s->rng, 0, 2000);
    kn_position_at_timestamp(&r->initial, s->at_ts);
  } else {
    s->initial = KN_CKPT_TRIM_HORIZON;
    kn_position_trim_horizon(&r->initial);
  }
  for (int k = 0; k < SIM_MAX_SHARDS; k++) r->last_idx[k] = -1;
  uint64_t step = UINT64_MAX / (uint64_t)o->shards;
  for (int k = 0; k < o->shards; k++)
    sim_shard_add(
        s, -1, -1, step * (uint64_t)k,
        k == o->shards - 1 ? UINT64_MAX : step * (uint64_t)(k + 1) - 1);
  s->faults_end = o->seconds * 1000;
  s->faults_on = 1;
  /* The quiet period: restarts (8 s at most), a listing, and a listing,
   * a round and a commit for each generation of shards. */
  s->end = s->faults_end + 30000 + 4 * r->sync_ms;
  rs_enum_start(r);
  for (int i = 0; i < readers; i++) add_reader(r);
  sim_push(s, sim_range(&s->rng, 0, 300), RV_APPEND, -1, 0, 0, 0, NULL);
  if (o->topology != SIM_TOPO_STATIC)
    sim_push(s, sim_range(&s->rng, 3000, 10000), RV_RESHARD, -1, 0, 0, 0, NULL);
  if (o->faults)
    sim_push(s, sim_range(&s->rng, 2000, 6000), RV_KILL, -1, 0, 0, 0, NULL);
  sim_push(s, sim_range(&s->rng, 5000, 20000), RV_SCALE, -1, 0, 0, 0, NULL);
}

static int depth(const sim_t *s, int k) {
  const sim_shard_t *h = &s->sh[k];
  int d = 0;
  if (h->parent >= 0) d = depth(s, h->parent);
  if (h->adjacent >= 0 && depth(s, h->adjacent) > d) d = depth(s, h->adjacent);
  return d + 1;
}

static void reshard(rsim_t *r) {
  sim_t *s = &r->s;
  int open[SIM_MAX_SHARDS], n = 0;
  for (int k = 0; k < s->n_sh; k++)
    if (!s->sh[k].closed) open[n++] = k;
  int a = open[sim_range(&s->rng, 0, n - 1)];
  int done = -1;
  if (s->o.topology == SIM_TOPO_SPLIT ||
      (s->o.topology != SIM_TOPO_MERGE && sim_chance(&s->rng, 500)) || n < 2) {
    done = sim_split(s, a, (int)sim_range(&s->rng, 0, 4) - 2);
  } else {
    for (int k = 0; k < n && done < 0; k++)
      if (s->sh[open[k]].hs == s->sh[a].he + 1) done = sim_merge(s, a, open[k]);
  }
  if (done >= 0) {
    r->reshards++;
    /* The quiet period grows with the generations of shards. */
    int64_t need = s->faults_end + 30000 +
                   (int64_t)depth(s, s->n_sh - 1) * (4 * r->sync_ms + 3000);
    if (need > s->end) s->end = need;
  }
}

/* A reader joins (up to 4 at a time) or one leaves (1 stays at least). */
static void rescale(rsim_t *r) {
  sim_t *s = &r->s;
  int live = live_readers(r);
  if ((live < 4 && r->n_rd < RS_MAX_READERS && sim_chance(&s->rng, 500)) ||
      live < 2) {
    if (live < 4 && r->n_rd < RS_MAX_READERS) add_reader(r);
    return;
  }
  int pick[RS_MAX_READERS], n = 0;
  for (int i = 0; i < r->n_rd; i++)
    if (r->rd[i].alive && !r->rd[i].retired && !r->rd[i].retiring)
      pick[n++] = i;
  if (n && live > 1) {
    int i = pick[sim_range(&s->rng, 0, n - 1)];
    r->rd[i].retiring = 1; /* its next commit says it left */
    sim_trace(s, i, "retiring", NULL, 0, 0);
  }
}

static void kill_one(rsim_t *r) {
  sim_t *s = &r->s;
  if (sim_chance(&s->rng, 250)) {
    if (r->en_alive) {
      rs_enum_kill(r);
      r->kills_e++;
      sim_push(s, s->now + sim_range(&s->rng, 100, 8000), RV_ENUM_RESTART, -1,
               0, 0, 0, NULL);
    }
    return;
  }
  int i = (int)sim_range(&s->rng, 0, r->n_rd - 1);
  rs_reader_t *d = &r->rd[i];
  if (!d->alive) return;
  rs_reader_kill(r, i);
  r->kills_r++;
  sim_push(s, s->now + sim_range(&s->rng, 100, 8000), RV_RESTART, i, 0, 0, 0,
           NULL);
}

static void event(rsim_t *r, const sim_ev_t *ev) {
  sim_t *s = &r->s;
  int active = s->now < s->faults_end;
  rs_reader_t *d = ev->w >= 0 && ev->w < r->n_rd ? &r->rd[ev->w] : NULL;
  switch (ev->kind) {
    case RV_READ:
    case RV_COMMIT:
      if (!d->alive || d->inc != ev->inc) return;
      if (ev->kind == RV_READ)
        rs_reader_read(r, ev->w);
      else
        rs_reader_commit(r, ev->w);
      return;
    case RV_RESTART:
      if (!d->alive && !d->retired) rs_reader_start(r, ev->w);
      return;
    case RV_ENUM:
      if (r->en_alive && r->en_inc == ev->inc) rs_enum_round(r);
      return;
    case RV_ENUM_RESTART:
      if (!r->en_alive) rs_enum_start(r);
      return;
    case RV_REPORT:
      if (r->en_alive && r->en_inc == ev->b)
        rs_enum_report(r, ev->w, (int)ev->a);
      return;
    case RV_ACK:
      if (d->alive && d->inc == ev->inc) rs_reader_ack(r, ev->w, (int)ev->a);
      return;
    case RV_APPEND:
      if (!active) return;
      {
        int open[SIM_MAX_SHARDS], n = 0;
        for (int k = 0; k < s->n_sh; k++)
          if (!s->sh[k].closed) open[n++] = k;
        int k = open[sim_range(&s->rng, 0, n - 1)];
        size_t from = s->sh[k].n;
        sim_append(s, k, (int)sim_range(&s->rng, 1, 5));
        for (size_t j = from; r->aggregated && j < s->sh[k].n; j++)
          s->sh[k].rec[j].users = (int)sim_range(&r->agg_rng, 1, 4);
        sim_retention(s);
      }
      sim_push(s, s->now + sim_range(&s->rng, 20, 300), RV_APPEND, -1, 0, 0, 0,
               NULL);
      return;
    case RV_RESHARD:
      if (!active) return;
      reshard(r);
      sim_push(s, s->now + sim_range(&s->rng, 4000, 15000), RV_RESHARD, -1, 0,
               0, 0, NULL);
      return;
    case RV_KILL:
      if (!active) return;
      kill_one(r);
      sim_push(s, s->now + sim_range(&s->rng, 500, 6000), RV_KILL, -1, 0, 0, 0,
               NULL);
      return;
    case RV_SCALE:
      if (!active) return;
      rescale(r);
      sim_push(s, s->now + sim_range(&s->rng, 8000, 30000), RV_SCALE, -1, 0, 0,
               0, NULL);
      return;
  }
}

static void run(rsim_t *r) {
  sim_t *s = &r->s;
  sim_ev_t ev;
  int64_t n = 0;
  while (!s->violated && sim_pop(s, &ev)) {
    if (ev.t > s->end) break;
    s->now = ev.t;
    if (s->now >= s->faults_end) s->faults_on = 0;
    event(r, &ev);
    rs_check_step(r);
    if (++n > RS_MAX_EVENTS) {
      sim_violate(s, "no end after %d events", RS_MAX_EVENTS);
      break;
    }
  }
  if (!s->violated) {
    s->now = s->end;
    rs_check_end(r);
  }
}

static const char *topo_names[] = {"static", "split", "merge", "mixed"};
static const char *assigner_names[] = {"hash_range", "shard_count",
                                       "throughput"};

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int sim_roles_main(const sim_opts_t *o, int readers, int rpc, long long runs,
                   int first) {
  static const char *fault_names[] = {"none", "kills", "all"};
  double t0 = wall_now();
  long long violations = 0, records = 0, committed = 0, commits = 0;
  long long kills_r = 0, kills_e = 0, rest_r = 0, rest_e = 0, joins = 0,
            leaves = 0, reshards = 0, lost = 0;
  double vhours = 0;
  for (long long k = 0; k < runs; k++) {
    sim_opts_t ro = *o;
    ro.seed = o->seed + (uint64_t)k;
    sim_rng_t pick = {ro.seed ^ 0x5bd1e995ULL};
    /* Drawn whatever the command line gives, so that a seed printed
     * with its parameters replays the same run. */
    int rn = (int)sim_range(&pick, 2, 4), sh = (int)sim_range(&pick, 1, 6);
    int fa = sim_chance(&pick, 800) ? 1 : 0;
    int to = (int)sim_range(&pick, SIM_TOPO_STATIC, SIM_TOPO_MIXED);
    if (readers) rn = readers;
    if (!ro.shards) ro.shards = sh;
    if (ro.faults < 0) ro.faults = fa;
    if (ro.topology == SIM_TOPO_RANDOM) ro.topology = to;
    static rsim_t r;
    init(&r, &ro, rn, rpc);
    run(&r);
    if (r.s.violated) {
      violations++;
      printf(
          "VIOLATION seed %llu (roles: readers %d shards %d faults %s "
          "protocol %s topology %s assigner %s initial %s child_shards %d "
          "retention "
          "%lld): %s\n",
          (unsigned long long)ro.seed, rn, ro.shards, fault_names[ro.faults],
          r.rpc ? "rpc" : "tx", topo_names[ro.topology],
          assigner_names[r.assigner], r.s.initial, r.s.child_shards,
          (long long)r.s.retention_ms, r.s.violation);
      if (violations <= 1) sim_trace_print(&r.s, 200);
      printf(
          "reproduce: kn_sim --roles --seed %llu --readers %d --shards %d "
          "--faults %s --protocol %s --topology %s --seconds %lld\n",
          (unsigned long long)ro.seed, rn, ro.shards, fault_names[ro.faults],
          r.rpc ? "rpc" : "tx", topo_names[ro.topology], (long long)ro.seconds);
    }
    records += r.s.records;
    committed += r.committed;
    commits += r.commits;
    kills_r += r.kills_r;
    kills_e += r.kills_e;
    rest_r += r.restores_r;
    rest_e += r.restores_e;
    joins += r.joins;
    leaves += r.leaves;
    reshards += r.reshards;
    lost += r.lost_msgs;
    vhours += (double)r.s.end / 3.6e6;
    rs_free(&r);
    if (first && violations) {
      runs = k + 1;
      break;
    }
  }
  printf(
      "kn_sim --roles: runs %lld violations %lld records %lld committed "
      "%lld commits %lld kills reader %lld enumerator %lld restores reader "
      "%lld enumerator %lld joins %lld leaves %lld reshards %lld "
      "messages_lost %lld virtual_hours %.1f wall_s %.1f\n",
      runs, violations, records, committed, commits, kills_r, kills_e, rest_r,
      rest_e, joins, leaves, reshards, lost, vhours, wall_now() - t0);
  return violations ? 1 : 0;
}
