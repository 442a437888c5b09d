/* leases: the rows of an application's lease table. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "kn/leases.h"
#include "kncat.h"
#include "output.h"

typedef struct leases_cmd {
  kc_ctx_t *ctx;
  const char *store;
  int json;
} leases_cmd_t;

static int on_opt(void *st, int id, const char *arg) {
  leases_cmd_t *c = st;
  switch (id) {
    case KC_OPT_LEASES:
      c->store = arg;
      return KC_GO_ON;
    case 'J':
      c->json = 1;
      return KC_GO_ON;
    default:
      return kc_usage_error(c->ctx, "unexpected option");
  }
}

static const kc_opt_t leases_opts[] = {{KC_OPT_LEASES, 0, "leases", 1},
                                       {'J', 'J', "json", 0},
                                       KC_GLOBAL_OPTS,
                                       {0, 0, NULL, 0}};

static void print_json(const kn_lease_list_t *l, size_t i) {
  fputs("{\"shard\":", stdout);
  kc_json_str(stdout, kn_lease_list_shard(l, i));
  fputs(",\"owner\":", stdout);
  kc_json_str(stdout, kn_lease_list_owner(l, i));
  printf(",\"counter\":%lld,\"checkpoint\":",
         (long long)kn_lease_list_counter(l, i));
  kc_json_str(stdout, kn_lease_list_checkpoint(l, i));
  printf(",\"subseq\":%lld,\"pending\":",
         (long long)kn_lease_list_checkpoint_subseq(l, i));
  kc_json_str(stdout, kn_lease_list_pending(l, i));
  printf(",\"owner_switches\":%lld,\"parents\":[",
         (long long)kn_lease_list_owner_switches(l, i));
  for (size_t k = 0; k < kn_lease_list_parent_count(l, i); k++) {
    if (k) putchar(',');
    kc_json_str(stdout, kn_lease_list_parent(l, i, k));
  }
  fputs("]}\n", stdout);
}

/* The workers after the leases, when the store keeps a membership: in the
 * text, a blank line, a table and the epoch; with -J, one object per
 * worker (told from a lease by its "worker" key). */
static void print_members(const kn_lease_list_t *l, int json) {
  size_t n = kn_lease_list_member_count(l);
  if (!n) return;
  long long epoch = (long long)kn_lease_list_epoch(l);
  if (!json) printf("\n%-51s %8s  %s\n", "WORKER", "LEASES", "BEAT");
  for (size_t i = 0; i < n; i++) {
    const char *w = kn_lease_list_member_worker(l, i);
    long long leases = (long long)kn_lease_list_member_leases(l, i);
    long long beat = (long long)kn_lease_list_member_beat(l, i);
    if (json) {
      fputs("{\"worker\":", stdout);
      kc_json_str(stdout, w);
      printf(",\"leases\":%lld,\"beat\":%lld,\"epoch\":%lld}\n", leases, beat,
             epoch);
    } else {
      kc_linef("%-51s %8lld  %lld", w, leases, beat);
    }
  }
  if (!json) printf("EPOCH %lld\n", epoch);
}

static int run_leases(kc_ctx_t *ctx, int argc, char **argv) {
  leases_cmd_t c;
  memset(&c, 0, sizeof(c));
  c.ctx = ctx;
  char *ops[1];
  int nops = 0;
  int rc =
      kc_cmd_parse(ctx, argc, argv, leases_opts, ops, 1, &nops, on_opt, &c);
  if (rc != KC_GO_ON) return rc;
  if (nops < 1) return kc_usage_error(ctx, "missing APP");
  char defstore[512];
  if (!c.store) {
    snprintf(defstore, sizeof(defstore), "sqlite:%s.leases.db", ops[0]);
    c.store = defstore;
  }
  kn_lease_list_t *l = NULL;
  kn_error_t *err = kn_leases_list(ctx->conf, c.store, &l);
  if (err) {
    rc = kc_fail(ctx, err, NULL, c.store);
    kn_error_destroy(err);
    return rc;
  }
  if (!c.json)
    printf("%-22s %-28s %8s  %-58s %6s  %s\n", "SHARD", "OWNER", "COUNTER",
           "CHECKPOINT", "SUBSEQ", "PARENTS");
  for (size_t i = 0; i < kn_lease_list_count(l); i++) {
    if (c.json) {
      print_json(l, i);
      continue;
    }
    const char *owner = kn_lease_list_owner(l, i);
    const char *ck = kn_lease_list_checkpoint(l, i);
    char parents[512] = "-";
    size_t np = kn_lease_list_parent_count(l, i), used = 0;
    for (size_t k = 0; k < np && used < sizeof(parents); k++)
      used += (size_t)snprintf(parents + used, sizeof(parents) - used, "%s%s",
                               k ? "," : "", kn_lease_list_parent(l, i, k));
    kc_linef("%-22s %-28s %8lld  %-58s %6lld  %s", kn_lease_list_shard(l, i),
             owner ? owner : "-", (long long)kn_lease_list_counter(l, i),
             ck ? ck : "-", (long long)kn_lease_list_checkpoint_subseq(l, i),
             parents);
  }
  print_members(l, c.json);
  kn_lease_list_destroy(l);
  return fflush(stdout) == 0 ? KC_EXIT_OK : KC_EXIT_RUNTIME;
}

const kc_command_t kc_cmd_leases = {
    "leases", run_leases, "print an application's lease table",
    "kncat leases APP [--leases sqlite:PATH|dynamodb:TABLE] [-J]\n",
    "\n"
    "Prints one row per lease: shard, owner (- when free), lease counter,\n"
    "checkpoint (a sequence number, TRIM_HORIZON, LATEST, AT_TIMESTAMP or\n"
    "SHARD_END), sub-sequence number and parent shards.  Where the workers\n"
    "keep a membership, a table of them follows after a blank line (worker,\n"
    "leases held at its last heartbeat, heartbeat number), then a line\n"
    "EPOCH N.  Nothing is written.\n"
    "\n"
    "  --leases S   the lease table, as for group (default\n"
    "               sqlite:APP.leases.db)\n"
    "  -J           one JSON object per lease: shard, owner, counter,\n"
    "               checkpoint, subseq, pending, owner_switches, parents;\n"
    "               then one per worker: worker, leases, beat, epoch\n"
    "\n"
    "Exit: 0 done; 3 no such table; 1 other errors.\n"};
