/* kn_sim: runs seeds (or a named scenario) and prints a summary line.
 * Exit status 0 when no invariant was violated, 1 otherwise, 2 on usage
 * errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"
#include "sim_roles.h"

static const char *topo_names[] = {"static", "split", "merge",
                                   "mixed",  "idle",  "random"};
static const char *fault_names[] = {"none", "kills", "all"};

static int lookup(const char *v, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(v, names[i]) == 0) return i;
  return -1;
}

static void usage(void) {
  fprintf(
      stderr,
      "usage: kn_sim [--seed N] [--runs K] [--workers 1..1024] [--shards "
      "1..16]\n"
      "              [--faults none|kills|all|mixed]\n"
      "              [--topology static|split|merge|mixed|idle|random]\n"
      "              [--seconds T] [--trace] [--first] [--scenario NAME]\n"
      "       kn_sim --roles [--seed N] [--runs K] [--readers 1..4] "
      "[--shards S]\n"
      "              [--faults none|kills|mixed] [--protocol tx|rpc]\n"
      "              [--topology static|split|merge|mixed|random]\n"
      "              [--seconds T] [--trace] [--first]\n"
      "              (the enumerator and readers: README.md)\n"
      "       kn_sim --cost --shards S --workers W [--seconds T] "
      "[--no-members]\n"
      "              [--ddb-limits] [--one-item] [--max-hot-wcu X]\n"
      "              (the lease table's DynamoDB cost: one JSON line;\n"
      "              --ddb-limits: writes past 1,000 WCU/s an item refused;\n"
      "              --one-item: every member in one membership item;\n"
      "              --max-hot-wcu X: exit 1 if an item took more)\n"
      "scenarios: %s\n",
      sim_scenario_names());
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  sim_opts_t o = {.seed = 1,
                  .workers = 0,
                  .shards = 0,
                  .faults = -1,
                  .topology = SIM_TOPO_RANDOM,
                  .seconds = 60};
  long long runs = 1;
  int first = 0; /* stop at the first violation */
  int cost = 0, members = 1, limits = 0, one_item = 0;
  double max_hot = 0;
  int roles = 0, readers = 0, rpc = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--trace") == 0) {
      o.trace_always = 1;
      continue;
    }
    if (strcmp(a, "--first") == 0) {
      first = 1;
      continue;
    }
    if (strcmp(a, "--cost") == 0) {
      cost = 1;
      continue;
    }
    if (strcmp(a, "--roles") == 0) {
      roles = 1;
      continue;
    }
    if (strcmp(a, "--no-members") == 0) {
      members = 0;
      continue;
    }
    if (strcmp(a, "--max-hot-wcu") == 0 && v) {
      max_hot = atof(v);
      i++;
      continue;
    }
    if (strcmp(a, "--one-item") == 0) {
      one_item = 1;
      continue;
    }
    if (strcmp(a, "--ddb-limits") == 0) {
      limits = 1;
      continue;
    }
    if (!v) {
      usage();
      return 2;
    }
    i++;
    if (strcmp(a, "--seed") == 0)
      o.seed = strtoull(v, NULL, 10);
    else if (strcmp(a, "--runs") == 0)
      runs = atoll(v);
    else if (strcmp(a, "--workers") == 0)
      o.workers = atoi(v);
    else if (strcmp(a, "--shards") == 0)
      o.shards = atoi(v);
    else if (strcmp(a, "--seconds") == 0)
      o.seconds = atoll(v);
    else if (strcmp(a, "--readers") == 0)
      readers = atoi(v);
    else if (strcmp(a, "--protocol") == 0) {
      rpc = strcmp(v, "rpc") == 0 ? 1 : strcmp(v, "tx") == 0 ? 0 : -2;
      if (rpc == -2) {
        usage();
        return 2;
      }
    } else if (strcmp(a, "--scenario") == 0)
      o.scenario = v;
    else if (strcmp(a, "--faults") == 0) {
      o.faults = strcmp(v, "mixed") == 0 ? -1 : lookup(v, fault_names, 3);
      if (o.faults < 0 && strcmp(v, "mixed") != 0) {
        usage();
        return 2;
      }
    } else if (strcmp(a, "--topology") == 0) {
      if ((o.topology = lookup(v, topo_names, 6)) < 0) {
        usage();
        return 2;
      }
    } else {
      usage();
      return 2;
    }
  }
  if (cost) {
    if (o.shards < 1 || o.workers < 1 || o.shards > 100000 ||
        o.workers > 10000) {
      usage();
      return 2;
    }
    return sim_cost_main(o.shards, o.workers, o.seconds, o.seed, members,
                         limits, one_item, max_hot);
  }
  if (roles) {
    if (runs < 1 || readers < 0 || readers > 4 || o.shards < 0 ||
        o.shards > 16 || o.seconds < 1 || o.scenario) {
      usage();
      return 2;
    }
    return sim_roles_main(&o, readers, rpc, runs, first);
  }
  if (runs < 1 || o.workers < 0 || o.workers > SIM_MAX_WORKERS ||
      o.shards < 0 || o.shards > 16 || o.seconds < 1) {
    usage();
    return 2;
  }
  double t0 = wall_now();
  long long violations = 0, records = 0, deliveries = 0, dups[DUP_N] = {0};
  long long stale = 0, stale_lost = 0, recreated = 0;
  double vhours = 0;
  for (long long r = 0; r < runs; r++) {
    sim_opts_t ro = o;
    ro.seed = o.seed + (uint64_t)r;
    /* what the command line leaves open varies with the seed */
    sim_rng_t pick = {ro.seed ^ 0x5bd1e995ULL};
    if (!ro.workers) ro.workers = (int)sim_range(&pick, 1, 5);
    if (!ro.shards) ro.shards = (int)sim_range(&pick, 1, 6);
    if (ro.faults < 0) ro.faults = (int)sim_range(&pick, 0, 2);
    static sim_t s;
    sim_init(&s, &ro);
    if (ro.scenario && sim_scenario_setup(&s, ro.scenario)) {
      fprintf(stderr, "kn_sim: no scenario %s\n", ro.scenario);
      usage();
      sim_free(&s);
      return 2;
    }
    sim_run(&s);
    if (s.violated) {
      violations++;
      printf(
          "VIOLATION seed %llu (workers %d shards %d faults %s topology "
          "%s initial %s child_shards %d%s%s): %s\n",
          (unsigned long long)ro.seed, s.n_wk, ro.scenario ? s.n_sh : ro.shards,
          fault_names[s.o.faults], topo_names[s.o.topology], s.initial,
          s.child_shards, ro.scenario ? " scenario " : "",
          ro.scenario ? ro.scenario : "", s.violation);
      if (violations <= 1) sim_trace_print(&s, 200);
      if (ro.scenario)
        printf("reproduce: kn_sim --scenario %s --seed %llu --seconds %lld\n",
               ro.scenario, (unsigned long long)ro.seed, (long long)ro.seconds);
      else
        printf(
            "reproduce: kn_sim --seed %llu --workers %d --shards %d "
            "--faults %s --topology %s --seconds %lld\n",
            (unsigned long long)ro.seed, ro.workers, ro.shards,
            fault_names[ro.faults], topo_names[o.topology],
            (long long)ro.seconds);
    }
    records += s.records;
    deliveries += s.deliveries;
    stale += s.stale_counter;
    recreated += s.recreated;
    stale_lost += s.stale_lost;
    for (int d = 0; d < DUP_N; d++) dups[d] += s.dups[d];
    vhours += (double)s.end / 3.6e6;
    sim_free(&s);
    if (first && violations) {
      runs = r + 1;
      break;
    }
  }
  printf(
      "kn_sim: runs %lld violations %lld records %lld deliveries %lld "
      "duplicates kill %lld freeze %lld store %lld move %lld "
      "stale_counter %lld stale_lost %lld recreated %lld virtual_hours %.1f "
      "wall_s %.1f\n",
      runs, violations, records, deliveries, dups[DUP_KILL], dups[DUP_FREEZE],
      dups[DUP_STORE], dups[DUP_MOVE], stale, stale_lost, recreated, vhours,
      wall_now() - t0);
  return violations ? 1 : 0;
}
