/* consume: records of a stream to standard output, through kn_consumer_t
 * without a lease table (positions in memory only). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "kn/consumer.h"
#include "kncat.h"
#include "sink.h"

typedef struct consume {
  kc_ctx_t *ctx;
  kc_pos_t pos;
  const char *pos_text;
  char *shards; /* comma list for the `shards` property */
  size_t shards_len;
  int n_shards;
  char first_shard[128];
  kc_sink_t sink;
  kc_efo_opts_t efo;
  const char *state_path; /* --state */
} consume_t;

static int add_shard(consume_t *c, const char *arg) {
  char id[128];
  if (!*arg || strchr(arg, ',') || kc_shard_id(arg, id, sizeof(id)))
    return kc_usage_error(c->ctx, "bad shard \"%s\"", arg);
  size_t n = strlen(id);
  char *s = realloc(c->shards, c->shards_len + n + 2);
  if (!s) {
    kc_errorf(c->ctx, "out of memory");
    return KC_EXIT_RUNTIME;
  }
  c->shards = s;
  if (c->shards_len) s[c->shards_len++] = ',';
  memcpy(s + c->shards_len, id, n + 1);
  c->shards_len += n;
  if (c->n_shards++ == 0) memcpy(c->first_shard, id, n + 1);
  return KC_GO_ON;
}

static int on_opt(void *st, int id, const char *arg) {
  consume_t *c = st;
  switch (id) {
    case 'o':
      if (kc_parse_position(arg, &c->pos))
        return kc_usage_error(c->ctx, "bad position \"%s\"", arg);
      c->pos_text = arg;
      return KC_GO_ON;
    case 'p':
      return add_shard(c, arg);
    case 'e':
      c->sink.exit_at_end = 1;
      return KC_GO_ON;
    case 'c':
      if (kc_parse_int(arg, 1, INT64_MAX, &c->sink.count))
        return kc_usage_error(
            c->ctx, "-c needs a count of at least 1, not \"%s\"", arg);
      return KC_GO_ON;
    case 'J':
      c->sink.json = 1;
      return KC_GO_ON;
    case 'D':
      if (kc_parse_delim(arg, c->sink.delim, sizeof(c->sink.delim),
                         &c->sink.delim_len))
        return kc_usage_error(c->ctx, "bad delimiter \"%s\"", arg);
      return KC_GO_ON;
    case 'K':
      if (kc_parse_delim(arg, c->sink.key_delim, sizeof(c->sink.key_delim),
                         &c->sink.key_delim_len))
        return kc_usage_error(c->ctx, "bad key delimiter \"%s\"", arg);
      return KC_GO_ON;
    case KC_OPT_STATE:
      c->state_path = arg;
      return KC_GO_ON;
    case KC_OPT_EFO:
    case KC_OPT_EFO_REGISTRATION:
    case KC_OPT_EFO_ARN:
      return kc_efo_option(c->ctx, &c->efo, id, arg);
    default:
      return kc_usage_error(c->ctx, "unexpected option");
  }
}

static const kc_opt_t consume_opts[] = {{'o', 'o', "offset", 1},
                                        {'p', 'p', "shard", 1},
                                        {'e', 'e', "exit", 0},
                                        {'c', 'c', "count", 1},
                                        {'J', 'J', "json", 0},
                                        {'D', 'D', NULL, 1},
                                        {'K', 'K', NULL, 1},
                                        {KC_OPT_STATE, 0, "state", 1},
                                        KC_EFO_OPTS,
                                        KC_GLOBAL_OPTS,
                                        {0, 0, NULL, 0}};

/* Sets a consumer property; the names are part of the library's contract,
 * so a rejection is reported, not worked around. */
static int set(consume_t *c, const char *name, const char *value) {
  char errstr[256] = "";
  kn_conf_res_t r =
      kn_conf_set(c->ctx->conf, name, value, errstr, sizeof(errstr));
  if (r == KN_CONF_OK) return KC_GO_ON;
  if (r == KN_CONF_UNKNOWN)
    kc_errorf(c->ctx, "the library has no property \"%s\"", name);
  else
    kc_errorf(c->ctx, "%s=%s rejected: %s", name, value, errstr);
  return r == KN_CONF_UNKNOWN ? KC_EXIT_RUNTIME : KC_EXIT_USAGE;
}

/* Checks the stream and the -p shards before starting, for one clear
 * message and exit 3 when one is missing. */
static int check(consume_t *c, const char *stream) {
  int rc;
  kn_client_t *kc = kc_client_new(c->ctx, stream, &rc);
  if (!kc) return rc;
  kn_shard_list_t *shards = NULL;
  kn_error_t *err =
      kn_list_shards(kc, stream, KN_SHARD_FILTER_NONE, NULL, 0, &shards);
  rc = KC_GO_ON;
  if (err) {
    rc = kc_fail(c->ctx, err, stream, "cannot list shards");
    kn_error_destroy(err);
  } else {
    const char *p = c->shards;
    while (p && *p && rc == KC_GO_ON) {
      const char *e = strchr(p, ',');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      char id[128];
      memcpy(id, p, n);
      id[n] = '\0';
      if (!kn_shard_list_find(shards, id)) {
        kc_errorf(c->ctx, "shard \"%s\" not found in stream \"%s\"", id,
                  stream);
        rc = KC_EXIT_NOT_FOUND;
      }
      p = e ? e + 1 : NULL;
    }
  }
  kn_shard_list_destroy(shards);
  kn_client_destroy(kc);
  return rc;
}

static int configure(consume_t *c, const char *stream) {
  int rc;
  if ((rc = set(c, "stream", stream)) != KC_GO_ON) return rc;
  if (c->shards && (rc = set(c, "shards", c->shards)) != KC_GO_ON) return rc;
  if ((rc = set(c, "initial.position", kc_position_name(c->pos.kind))) !=
      KC_GO_ON)
    return rc;
  if (c->pos.kind == KC_POS_TIMESTAMP) {
    char ms[32];
    snprintf(ms, sizeof(ms), "%lld", (long long)c->pos.ts_ms);
    if ((rc = set(c, "initial.timestamp.ms", ms)) != KC_GO_ON) return rc;
  }
  if (c->pos.kind == KC_POS_AT_SEQ || c->pos.kind == KC_POS_AFTER_SEQ)
    if ((rc = set(c, "initial.sequence.number", c->pos.seq)) != KC_GO_ON)
      return rc;
  return KC_GO_ON;
}

static int run_consume(kc_ctx_t *ctx, int argc, char **argv) {
  consume_t c;
  memset(&c, 0, sizeof(c));
  kc_state_t state; /* --state; freed at done, so set before any goto */
  memset(&state, 0, sizeof(state));
  c.ctx = ctx;
  kc_sink_init(&c.sink, ctx);
  char *ops[1];
  int nops = 0;
  int rc =
      kc_cmd_parse(ctx, argc, argv, consume_opts, ops, 1, &nops, on_opt, &c);
  if (rc != KC_GO_ON) goto done;
  rc = KC_EXIT_USAGE;
  if (nops < 1) {
    kc_usage_error(ctx, "missing STREAM");
    goto done;
  }
  if ((c.pos.kind == KC_POS_AT_SEQ || c.pos.kind == KC_POS_AFTER_SEQ) &&
      c.n_shards != 1) {
    kc_usage_error(ctx, "-o %s needs exactly one -p SHARD", c.pos_text);
    goto done;
  }
  if (c.sink.json && c.sink.key_delim_len) {
    kc_usage_error(ctx, "-K and -J do not go together (-J has the key)");
    goto done;
  }
  if ((rc = kc_efo_apply(ctx, &c.efo)) != KC_GO_ON) goto done;
  const char *stream = ops[0];
  /* The state first: a bad FILE is a usage error, found before any call. */
  if (c.state_path) {
    if ((rc = kc_state_open(&state, ctx, c.state_path)) != KC_GO_ON) goto done;
    c.sink.state = &state;
  }
  if ((rc = check(&c, stream)) != KC_GO_ON) goto done;
  if ((rc = configure(&c, stream)) != KC_GO_ON) goto done;

  rc = kc_sink_consume(&c.sink, stream);
done:
  kc_state_free(&state);
  free(c.shards);
  return rc;
}

const kc_command_t kc_cmd_consume = {
    "consume", run_consume, "read records to standard output",
    "kncat consume STREAM [-o POSITION] [-p SHARD]... [-e] [-c COUNT] [-J]\n"
    "                     [-D DELIM] [-K DELIM] [--state FILE]\n"
    "                     [--efo NAME] [--efo-arn ARN]\n"
    "                     [--efo-registration lazy|eager|none]\n",
    "\n"
    "Reads every shard of STREAM, follows splits and merges -- a parent is\n"
    "read to its end before its children -- and writes the records to\n"
    "standard output.  With -p, only the shards given (not their children).\n"
    "\n"
    "  -o POSITION  where each shard starts (default trim_horizon):\n"
    "                 trim_horizon  the oldest record kept (alias beginning)\n"
    "                 latest        only records written from now on (alias "
    "end)\n"
    "                 at:SEQ        at sequence number SEQ (exactly one -p)\n"
    "                 after:SEQ     just after SEQ (exactly one -p)\n"
    "                 ts:EPOCH_MS   records that arrived at or after this\n"
    "                               time, in milliseconds since 1970\n"
    "  -p SHARD     read only this shard (\"shardId-000000000001\" or just "
    "1),\n"
    "               not its children; repeatable\n"
    "  -e           exit when caught up: every shard read to its current end\n"
    "  -c COUNT     exit after COUNT records\n"
    "  -J           one JSON object per line: \"stream\", \"shard\", \"seq\"\n"
    "               (string), \"subseq\", \"key\", \"ts\" (approximate "
    "arrival,\n"
    "               epoch ms), and \"data\" (the payload as a string when it\n"
    "               is valid UTF-8) or else \"data_b64\" (base64)\n"
    "  -D DELIM     without -J: written after each payload (default \\n;\n"
    "               escapes as for produce: \\0 \\t \\x1e ...)\n"
    "  -K DELIM     without -J: write each record's partition key and DELIM\n"
    "               before its payload (the input format of produce -K)\n"
    "  --state FILE every shard's position in FILE, replaced atomically\n"
    "               every checkpoint.interval.ms (-X; default 5000) and at\n"
    "               exit; a later run with the same FILE resumes right after\n"
    "               the last record written, across splits and merges\n"
    "               (finished shards are not read again; shards born since\n"
    "               start at their beginning).  -o applies only while FILE\n"
    "               does not exist yet.  A FILE that is no state: exit 2,\n"
    "               FILE untouched.\n"
    "  --efo NAME   enhanced fan-out: records pushed by SubscribeToShard "
    "through\n"
    "               the stream consumer NAME, registered if missing\n"
    "  --efo-registration lazy|eager|none\n"
    "               lazy (default): register NAME if missing, and again if it\n"
    "               is deleted while reading; eager: register at start and\n"
    "               fail on any problem; none: use --efo-arn as it is\n"
    "  --efo-arn ARN  enhanced fan-out through this existing consumer\n"
    "               (registration none)\n"
    "\n"
    "Without --state, positions live in memory only: each run starts again\n"
    "at -o.  Unlike kcat, whose default is the end, the default is\n"
    "trim_horizon, so 'consume -e' prints everything the stream holds.\n"
    "\n"
    "SIGINT or SIGTERM: the current batch is written, the consumer closed,\n"
    "exit 0.  When the reader of standard output goes away (| head), kncat\n"
    "stops quietly with exit 0.\n"
    "\n"
    "Exit: 0 done; 2 usage error or bad --state FILE; 3 stream or shard\n"
    "not found; 4 credentials rejected; 1 other errors.\n"};
