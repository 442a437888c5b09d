/* group: one worker of a coordinated consumer.  Workers of the same
 * application share the shards through a lease table, checkpoint there,
 * and take over from each other when one stops or dies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "kn/consumer.h"
#include "kncat.h"
#include "sink.h"

/* Seconds between two status lines on stderr. */
#define STATUS_EVERY_S 5

typedef struct group {
  kc_ctx_t *ctx;
  kc_sink_t sink;
  kc_pos_t pos;
  const char *pos_text;
  const char *app, *leases, *worker;
  kc_efo_opts_t efo;
  /* status line */
  time_t next_status;
  long long last_records;
  time_t last_time;
} group_t;

static int on_opt(void *st, int id, const char *arg) {
  group_t *g = st;
  switch (id) {
    case 'o':
      if (kc_parse_position(arg, &g->pos) || g->pos.kind == KC_POS_AT_SEQ ||
          g->pos.kind == KC_POS_AFTER_SEQ)
        return kc_usage_error(g->ctx,
                              "bad position \"%s\" (group takes "
                              "trim_horizon, latest or ts:EPOCH_MS)",
                              arg);
      g->pos_text = arg;
      return KC_GO_ON;
    case 'e':
      g->sink.exit_at_end = 1;
      return KC_GO_ON;
    case 'c':
      if (kc_parse_int(arg, 1, INT64_MAX, &g->sink.count))
        return kc_usage_error(g->ctx,
                              "-c needs a count of at least 1, not "
                              "\"%s\"",
                              arg);
      return KC_GO_ON;
    case 'J':
      g->sink.json = 1;
      return KC_GO_ON;
    case 'D':
      if (kc_parse_delim(arg, g->sink.delim, sizeof(g->sink.delim),
                         &g->sink.delim_len))
        return kc_usage_error(g->ctx, "bad delimiter \"%s\"", arg);
      return KC_GO_ON;
    case 'K':
      if (kc_parse_delim(arg, g->sink.key_delim, sizeof(g->sink.key_delim),
                         &g->sink.key_delim_len))
        return kc_usage_error(g->ctx, "bad key delimiter \"%s\"", arg);
      return KC_GO_ON;
    case KC_OPT_APP:
      g->app = arg;
      return KC_GO_ON;
    case KC_OPT_LEASES:
      g->leases = arg;
      return KC_GO_ON;
    case KC_OPT_WORKER:
      g->worker = arg;
      return KC_GO_ON;
    case KC_OPT_EFO:
    case KC_OPT_EFO_REGISTRATION:
    case KC_OPT_EFO_ARN:
      return kc_efo_option(g->ctx, &g->efo, id, arg);
    default:
      return kc_usage_error(g->ctx, "unexpected option");
  }
}

static const kc_opt_t group_opts[] = {{KC_OPT_APP, 0, "app", 1},
                                      {KC_OPT_LEASES, 0, "leases", 1},
                                      {KC_OPT_WORKER, 0, "worker", 1},
                                      {'o', 'o', "offset", 1},
                                      {'e', 'e', "exit", 0},
                                      {'c', 'c', "count", 1},
                                      {'J', 'J', "json", 0},
                                      {'D', 'D', NULL, 1},
                                      {'K', 'K', NULL, 1},
                                      KC_EFO_OPTS,
                                      KC_GLOBAL_OPTS,
                                      {0, 0, NULL, 0}};

static int set(group_t *g, const char *name, const char *value) {
  char errstr[256] = "";
  kn_conf_res_t r =
      kn_conf_set(g->ctx->conf, name, value, errstr, sizeof(errstr));
  if (r == KN_CONF_OK) return KC_GO_ON;
  if (r == KN_CONF_UNKNOWN)
    kc_errorf(g->ctx, "the library has no property \"%s\"", name);
  else
    kc_errorf(g->ctx, "%s=%s rejected: %s", name, value, errstr);
  return r == KN_CONF_UNKNOWN ? KC_EXIT_RUNTIME : KC_EXIT_USAGE;
}

/* A top-level integer of the statistics document (before "shards"). */
static long long stat_int(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof(pat), "\"%s\":", key);
  const char *end = strstr(json, "\"shards\"");
  const char *p = strstr(json, pat);
  if (!p || (end && p > end)) return 0;
  return strtoll(p + strlen(pat), NULL, 10);
}

static void status(void *opaque, kn_consumer_t *kc) {
  group_t *g = opaque;
  time_t now = time(NULL);
  if (g->ctx->quiet || now < g->next_status) return;
  char *json = kn_consumer_stats_json(kc);
  if (!json) return;
  long long records = stat_int(json, "records");
  long long lag = stat_int(json, "max_millis_behind");
  /* "held" is inside "leases": the first match is that one. */
  long long held = stat_int(json, "held");
  free(json);
  if (g->last_time) {
    double dt = difftime(now, g->last_time);
    double rate = dt > 0 ? (double)(records - g->last_records) / dt : 0;
    fprintf(stderr,
            "kncat: group: %s: %lld leases, %.0f records/s, "
            "max lag %s%lld ms\n",
            g->app, held, rate, lag < 0 ? "~" : "", lag < 0 ? 0 : lag);
  }
  g->last_records = records;
  g->last_time = now;
  g->next_status = now + STATUS_EVERY_S;
}

static int run_group(kc_ctx_t *ctx, int argc, char **argv) {
  group_t g;
  memset(&g, 0, sizeof(g));
  g.ctx = ctx;
  kc_sink_init(&g.sink, ctx);
  char *ops[1];
  int nops = 0;
  int rc = kc_cmd_parse(ctx, argc, argv, group_opts, ops, 1, &nops, on_opt, &g);
  if (rc != KC_GO_ON) return rc;
  if (nops < 1) return kc_usage_error(ctx, "missing STREAM");
  if (!g.app || !*g.app) return kc_usage_error(ctx, "missing --app APP");
  if (g.sink.json && g.sink.key_delim_len)
    return kc_usage_error(ctx, "-K and -J do not go together (-J has the key)");
  if ((rc = kc_efo_apply(ctx, &g.efo)) != KC_GO_ON) return rc;
  const char *stream = ops[0];
  char defstore[512];
  if (!g.leases) {
    /* A SQLite file named after the application, in the current
     * directory: workers of one host share it. */
    snprintf(defstore, sizeof(defstore), "sqlite:%s.leases.db", g.app);
    g.leases = defstore;
  }
  if ((rc = set(&g, "stream", stream)) != KC_GO_ON ||
      (rc = set(&g, "app.name", g.app)) != KC_GO_ON ||
      (rc = set(&g, "lease.store", g.leases)) != KC_GO_ON ||
      (rc = set(&g, "checkpoint.auto", "false")) != KC_GO_ON ||
      (g.worker && (rc = set(&g, "worker.id", g.worker)) != KC_GO_ON) ||
      (rc = set(&g, "initial.position", kc_position_name(g.pos.kind))) !=
          KC_GO_ON)
    return rc;
  if (g.pos.kind == KC_POS_TIMESTAMP) {
    char ms[32];
    snprintf(ms, sizeof(ms), "%lld", (long long)g.pos.ts_ms);
    if ((rc = set(&g, "initial.timestamp.ms", ms)) != KC_GO_ON) return rc;
  }
  g.sink.checkpoint_written = 1;
  g.sink.tick = status;
  g.sink.tick_opaque = &g;
  g.next_status = time(NULL) + STATUS_EVERY_S;
  g.last_time = time(NULL);
  return kc_sink_consume(&g.sink, stream);
}

const kc_command_t kc_cmd_group = {
    "group", run_group, "read as one worker of a coordinated consumer",
    "kncat group STREAM --app APP [--leases sqlite:PATH|dynamodb:TABLE]\n"
    "                   [--worker ID] [-o POSITION] [-e] [-c COUNT] [-J]\n"
    "                   [-D DELIM] [-K DELIM] [--efo NAME] [--efo-arn ARN]\n"
    "                   [--efo-registration lazy|eager|none]\n",
    "\n"
    "Workers started with the same --app share the shards of STREAM through\n"
    "a lease table: each shard is read by one worker at a time, progress is\n"
    "checkpointed in the table, and when a worker stops or dies its shards\n"
    "are taken over by the others -- from the last checkpoint, so records\n"
    "after it may be delivered twice (at-least-once), none lost.  Parents\n"
    "are finished before their children are read.  The table is compatible\n"
    "with the KCL 2.x, so a KCL application's checkpoints are continued.\n"
    "\n"
    "  --app APP     application name (required)\n"
    "  --leases S    the lease table: sqlite:PATH (workers of one host) or\n"
    "                dynamodb:TABLE (created if missing); default\n"
    "                sqlite:APP.leases.db in the current directory\n"
    "  --worker ID   this worker's name in the table (default: host, process\n"
    "                id and a random suffix); must be unique\n"
    "  -o POSITION   where shards without a checkpoint start:\n"
    "                trim_horizon (default), latest or ts:EPOCH_MS\n"
    "  -e            exit when this worker is caught up on its shards and\n"
    "                has nothing more to take\n"
    "  -c, -J, -D, -K  as for consume\n"
    "  --efo NAME, --efo-registration R, --efo-arn ARN\n"
    "                enhanced fan-out, as for consume: every worker of the\n"
    "                application subscribes through the same consumer\n"
    "\n"
    "A record is checkpointed once it has been written to standard output\n"
    "(the checkpoint is stored every checkpoint.interval.ms, -X), so a\n"
    "worker killed at any moment loses nothing.  A status line goes to stderr\n"
    "every few seconds (leases held, records/s, max lag); -q turns it off.\n"
    "\n"
    "SIGINT or SIGTERM: the current batch is written, the final checkpoint\n"
    "made and every lease released, so other workers take over at once;\n"
    "exit 0.\n"
    "\n"
    "Exit: 0 done; 3 stream not found; 4 credentials rejected; 1 other\n"
    "errors.\n"};
