/* Scripted runs: fixed topologies, tables and faults for known defects of
 * lease coordination.  Latencies and record placement still come from the
 * seed, so `--scenario NAME --runs K` tries K timings of the same script.
 * Every general invariant applies; a scenario may add its own end check. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

typedef struct sc_state {
  int ended_reports; /* end reports of the scripted shard so far */
  int creates_failed;
} sc_state_t;

static sc_state_t *st(sim_t *s) { return s->sc_state; }

/* one worker, no random faults, records flowing into the open shards */
static void base(sim_t *s, int workers) {
  s->o.faults = 0;
  s->initial = s->cfg.initial = KN_CKPT_TRIM_HORIZON;
  s->n_wk = workers;
  for (int w = 0; w < workers; w++)
    sim_push(s, sim_range(&s->rng, 500, 1500), EV_RESTART, w, 0, 0, 0, NULL);
  sim_push(s, 0, EV_APPEND, -1, 0, 0, 0, NULL);
  s->sc_state = calloc(1, sizeof(sc_state_t));
  if (!s->sc_state) abort();
}

static void no_duplicates(sim_t *s) {
  int64_t n = 0;
  for (int d = 0; d < DUP_N; d++) n += s->dups[d];
  if (n) sim_violate(s, "%lld records delivered twice", (long long)n);
}

/* (1) G splits into P and P2 (P2 idle), P splits into C1 and C2; one
 * worker never stopped: nothing of P twice, P never created again. */
static void split_chain_step(sim_t *s, int64_t step) {
  if (step == 0) sim_split(s, 0, 2);
  if (step == 1) sim_split(s, 1, 0);
}
static const sim_scenario_ops_t split_chain_ops = {.step = split_chain_step,
                                                   .check_end = no_duplicates};
static void split_chain(sim_t *s) {
  base(s, 1);
  sim_shard_add(s, -1, -1, 0, UINT64_MAX);
  sim_push(s, 8000, EV_SCRIPT, -1, 0, 0, 0, NULL);
  sim_push(s, 20000, EV_SCRIPT, -1, 0, 1, 0, NULL);
  s->sc = &split_chain_ops;
}

/* (2) A partial table: shards 0, 1, 2 with shard 0 split into 3 and 4;
 * the table holds only shard 1's lease, with a checkpoint.  One worker at
 * TRIM_HORIZON reads everything of 0, 2, 3, 4 and 1 after its checkpoint. */
static void partial_table(sim_t *s) {
  base(s, 1);
  uint64_t third = UINT64_MAX / 3;
  sim_shard_add(s, -1, -1, 0, third - 1);
  sim_shard_add(s, -1, -1, third, 2 * third - 1);
  sim_shard_add(s, -1, -1, 2 * third, UINT64_MAX);
  for (int i = 0; i < 3; i++) sim_append(s, i, 20);
  sim_split(s, 0, 0);
  sim_append(s, 3, 10);
  sim_append(s, 4, 10);
  kn_lease_t l = {0};
  l.key = s->sh[1].id;
  l.owner = "departed";
  l.counter = 7;
  l.checkpoint = s->sh[1].rec[9].seq;
  l.hash_start = s->sh[1].hs_s;
  l.hash_end = s->sh[1].he_s;
  sim_store_put(s, &l);
  s->sh[1].lease_created = 1;
  for (int k = 0; k <= 9; k++) s->sh[1].rec[k].required = 0;
}

/* (3) A tenure ends (its worker is cut off from the store) and the same
 * worker takes the shard back before the first tenure's "shard ended"
 * report is handed in: the late report must not touch the new tenure. */
static int64_t late_end_delay(sim_t *s, int w, const char *key,
                              int64_t tenure) {
  if (strcmp(key, s->sh[0].id) != 0) return 0;
  return st(s)->ended_reports++ == 0 ? 25000 : 8000;
}
static int late_end_fail(sim_t *s, const sim_call_t *c) {
  if (s->now < 11000 || s->now >= 28000) return 0;
  s->had_fault = 1;
  return 1;
}
static void late_end_step(sim_t *s, int64_t step) { sim_split(s, 0, 0); }
static void late_end_check(sim_t *s) {
  int done = 0;
  for (size_t i = 0; i < s->n_ten; i++)
    if (s->ten[i].shard == 0 && (s->ten[i].flags & TEN_DONE)) {
      done = 1;
      if (!(s->ten[i].flags & TEN_ENDED))
        sim_violate(s, "tenure %lld finished shard 0 without its end report",
                    (long long)s->ten[i].tenure);
    }
  if (!done) sim_violate(s, "no tenure finished shard 0");
  for (size_t i = 0; i < s->n_ten; i++)
    if (s->ten[i].shard == 0 && s->ten[i].start_t >= 28000 &&
        (s->ten[i].flags & TEN_STOPPED))
      sim_violate(s, "tenure %lld of shard 0 was stopped after the cut",
                  (long long)s->ten[i].tenure);
}
static const sim_scenario_ops_t late_end_ops = {.step = late_end_step,
                                                .ended_delay = late_end_delay,
                                                .fail_call = late_end_fail,
                                                .check_end = late_end_check};
static void late_end(sim_t *s) {
  base(s, 1);
  sim_shard_add(s, -1, -1, 0, UINT64_MAX);
  sim_push(s, 10000, EV_SCRIPT, -1, 0, 0, 0, NULL);
  s->sc = &late_end_ops;
}

/* (4) A merge child whose other parent's lease creation failed: the child
 * is not read before both parents are finished. */
static int merge_fail(sim_t *s, const sim_call_t *c) {
  if (c->op != KN_CC_CREATE || strcmp(c->key, s->sh[1].id) != 0 ||
      st(s)->creates_failed++)
    return 0;
  s->had_fault = 1;
  return 1;
}
static const sim_scenario_ops_t merge_parent_ops = {.fail_call = merge_fail};
static void merge_parent(sim_t *s) {
  base(s, 1);
  uint64_t half = UINT64_MAX / 2;
  sim_shard_add(s, -1, -1, 0, half);
  sim_shard_add(s, -1, -1, half + 1, UINT64_MAX);
  sim_append(s, 0, 30);
  sim_append(s, 1, 30);
  sim_merge(s, 0, 1);
  sim_append(s, 2, 10);
  s->sc = &merge_parent_ops;
}

/* (5) A sync whose lease listing lands late (a slow scan): meanwhile the
 * other worker finishes the parent, starts the children and removes the
 * parent's lease.  The late sync must not create the parent again. */
static void slow_scan_step(sim_t *s, int64_t step) { sim_split(s, 0, 0); }
static int64_t slow_scan_delay(sim_t *s, const sim_call_t *c) {
  if (c->w != 1 || c->op != KN_CC_LIST_LEASES || s->now < 5000 ||
      s->now >= 10000)
    return 0;
  return 30000;
}
static const sim_scenario_ops_t slow_scan_ops = {
    .step = slow_scan_step, .apply_delay = slow_scan_delay};
static void slow_scan(sim_t *s) {
  base(s, 2);
  sim_shard_add(s, -1, -1, 0, UINT64_MAX);
  sim_push(s, 10000, EV_SCRIPT, -1, 0, 0, 0, NULL);
  s->sc = &slow_scan_ops;
}

/* (6) A parent read at LATEST goes past retention while its worker is
 * down: its lease is still in the table, so its children are wanted from
 * TRIM_HORIZON although the listing no longer names the parent. */
static void parent_gone_step(sim_t *s, int64_t step) {
  if (step == 0) {
    sim_worker_kill(s, 0);
    s->had_fault = 1;
  }
  if (step == 1) sim_split(s, 0, 0);
}
static const sim_scenario_ops_t parent_gone_ops = {.step = parent_gone_step};
static void parent_gone(sim_t *s) {
  base(s, 1);
  s->initial = s->cfg.initial = KN_CKPT_LATEST;
  s->retention_ms = 20000;
  sim_shard_add(s, -1, -1, 0, UINT64_MAX);
  sim_push(s, 9000, EV_SCRIPT, -1, 0, 0, 0, NULL);
  sim_push(s, 10000, EV_SCRIPT, -1, 0, 1, 0, NULL);
  sim_push(s, 40000, EV_RESTART, 0, 0, 0, 0, NULL);
  s->sc = &parent_gone_ops;
}

/* (7) A table holding only a grandchild's lease: G split into P and P2,
 * P into C1 and C2, and only C1 has a lease (read up to a checkpoint).
 * C1's lease says P and G were finished and cleaned up: they are not
 * created again; P2 and C2 are read from TRIM_HORIZON. */
static void partial_descendant(sim_t *s) {
  base(s, 1);
  sim_shard_add(s, -1, -1, 0, UINT64_MAX);
  sim_append(s, 0, 20);
  sim_split(s, 0, 0);
  sim_append(s, 1, 20);
  sim_append(s, 2, 5);
  sim_split(s, 1, 0);
  sim_append(s, 3, 20);
  sim_append(s, 4, 20);
  for (int i = 0; i < 2; i++) {
    s->sh[i].lease_created = s->sh[i].lease_removed = 1;
    for (size_t k = 0; k < s->sh[i].n; k++) s->sh[i].rec[k].required = 0;
  }
  kn_lease_t l = {0};
  char *parents[1] = {s->sh[1].id};
  l.key = s->sh[3].id;
  l.counter = 4;
  l.checkpoint = s->sh[3].rec[9].seq;
  l.parents = parents;
  l.n_parents = 1;
  l.hash_start = s->sh[3].hs_s;
  l.hash_end = s->sh[3].he_s;
  sim_store_put(s, &l);
  s->sh[3].lease_created = 1;
  for (int k = 0; k <= 9; k++) s->sh[3].rec[k].required = 0;
}

/* (8) A worker's heartbeats fail (its membership writes throttled) while
 * its lease renewals succeed, and before its heartbeat deadline its
 * control thread is busy for two lease durations (a store answer or a
 * fan-out check that takes that long); its readers and its application go
 * on.  Its leases cannot say so (the renewals that would mark them
 * fail too).  The other worker counts it dead and takes its leases: its
 * readers must have stopped by then, at the heartbeat deadline they judge
 * themselves, not at the lease's. */
static int64_t slow_control_from(sim_t *s) { return st(s)->creates_failed; }
static int beats_fail(sim_t *s, const sim_call_t *c, int marks_too) {
  /* for 40 s: long enough to outlast the stall, then they succeed again */
  if (c->w != 0 || !(c->op == KN_CC_HEARTBEAT || (marks_too && c->mark)) ||
      !slow_control_from(s) || s->now < slow_control_from(s) ||
      s->now >= slow_control_from(s) + 40000)
    return 0;
  s->had_fault = 1;
  return 1;
}
static int slow_control_fail(sim_t *s, const sim_call_t *c) {
  return beats_fail(s, c, 1);
}
static void slow_control_step(sim_t *s, int64_t step) {
  if (step == 0) {
    st(s)->creates_failed = (int)s->now; /* heartbeats fail from now on */
    sim_push(s, s->now + s->cfg.duration_ms / 2, EV_SCRIPT, -1, 0, 1, 0, NULL);
  } else if (s->wk[0].alive) {
    sim_worker_stall(s, 0, 0, 2 * s->cfg.duration_ms + 5000);
  }
}
static const sim_scenario_ops_t slow_control_ops = {
    .step = slow_control_step, .fail_call = slow_control_fail};
/* Two workers with heartbeats on two shards; the script's first step
 * 20-30 s in, when the group has settled. */
static void beating_pair(sim_t *s, const sim_scenario_ops_t *ops) {
  base(s, 2);
  s->cfg.members = 1;
  s->cfg.renew_ms = 2000;
  uint64_t half = UINT64_MAX / 2;
  sim_shard_add(s, -1, -1, 0, half - 1);
  sim_shard_add(s, -1, -1, half, UINT64_MAX);
  sim_push(s, sim_range(&s->rng, 20000, 30000), EV_SCRIPT, -1, 0, 0, 0, NULL);
  s->sc = ops;
}
static void slow_control(sim_t *s) { beating_pair(s, &slow_control_ops); }

/* (10) A worker's heartbeats fail for 40 s (its membership item
 * throttled) while the lease table answers: it marks its leases and reads
 * on; the other counts it dead but judges the marked leases by their
 * renewals.  Nothing moves, nothing is read twice, and the worker never
 * stops reading. */
static int beat_fallback_fail(sim_t *s, const sim_call_t *c) {
  return beats_fail(s, c, 0);
}
static void beat_fallback_step(sim_t *s, int64_t step) {
  (void)step;
  st(s)->creates_failed = (int)s->now;
}
static void beat_fallback_end(sim_t *s) {
  no_duplicates(s);
  for (size_t i = 0; !s->violated && i < s->n_ten; i++)
    if (s->ten[i].w == 0 && (s->ten[i].flags & TEN_DROPPED))
      sim_violate(s, "w0 stopped reading %s although its leases said why",
                  s->sh[s->ten[i].shard].id);
}
static const sim_scenario_ops_t beat_fallback_ops = {
    .step = beat_fallback_step,
    .fail_call = beat_fallback_fail,
    .check_end = beat_fallback_end};
static void beat_fallback(sim_t *s) { beating_pair(s, &beat_fallback_ops); }

/* (9) A create that lands late: the store layer retries a create for
 * minutes (back-off, time-outs), so it may land long after it was sent.
 * Two workers; shard 0 splits at 10 s into 1 and 2, shard 1 splits at
 * 14 s into 3 and 4; worker 1's create of shard 1 lands 90 s after it was
 * sent.  Meanwhile shard 1 is read to its end, its children start and its
 * lease is cleaned up: the late create must not bring it back. */
static void late_create_step(sim_t *s, int64_t step) {
  sim_split(s, step == 0 ? 0 : 1, 0);
}
static int64_t late_create_delay(sim_t *s, const sim_call_t *c) {
  if (c->w != 1 || c->op != KN_CC_CREATE || s->n_sh < 2 ||
      strcmp(c->key, s->sh[1].id) != 0)
    return 0;
  return 90000;
}
static const sim_scenario_ops_t late_create_ops = {
    .step = late_create_step, .apply_delay = late_create_delay};
static void late_create(sim_t *s) {
  base(s, 2);
  sim_shard_add(s, -1, -1, 0, UINT64_MAX);
  sim_push(s, 10000, EV_SCRIPT, -1, 0, 0, 0, NULL);
  sim_push(s, 14000, EV_SCRIPT, -1, 0, 1, 0, NULL);
  s->sc = &late_create_ops;
}

static const struct {
  const char *name;
  void (*setup)(sim_t *s);
} scenarios[] = {
    {"slow_control", slow_control},
    {"split_chain", split_chain},
    {"partial_table", partial_table},
    {"late_end", late_end},
    {"merge_parent", merge_parent},
    {"slow_scan", slow_scan},
    {"parent_gone", parent_gone},
    {"partial_descendant", partial_descendant},
    {"late_create", late_create},
    {"beat_fallback", beat_fallback},
};

const char *sim_scenario_names(void) {
  return "split_chain partial_table late_end merge_parent slow_scan "
         "parent_gone partial_descendant slow_control late_create "
         "beat_fallback";
}

int sim_scenario_setup(sim_t *s, const char *name) {
  for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
    if (strcmp(scenarios[i].name, name) == 0) {
      scenarios[i].setup(s);
      return 0;
    }
  return -1;
}
