/* Stream administration: create, delete, list, split, merge. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "kncat.h"
#include "output.h"

typedef struct admin_opts {
  const kc_ctx_t *ctx;
  long long shards;
  long long max_record_kib; /* 0: the service's default */
  long long timeout_s;
  int no_wait, force, json;
  const char *at;
} admin_opts_t;

static int on_opt(void *st, int id, const char *arg) {
  admin_opts_t *o = st;
  switch (id) {
    case KC_OPT_SHARDS:
      if (kc_parse_int(arg, 0, 100000, &o->shards))
        return kc_usage_error(o->ctx, "--shards needs a number, not \"%s\"",
                              arg);
      return KC_GO_ON;
    case KC_OPT_MAX_RECORD_SIZE:
      if (kc_parse_int(arg, KN_RECORD_KIB_MIN, KN_RECORD_KIB_MAX,
                       &o->max_record_kib))
        return kc_usage_error(o->ctx,
                              "--max-record-size needs KiB (1024 to 10240), "
                              "not \"%s\"",
                              arg);
      return KC_GO_ON;
    case KC_OPT_TIMEOUT:
      if (kc_parse_int(arg, 1, 86400, &o->timeout_s))
        return kc_usage_error(
            o->ctx, "--timeout needs seconds (1 to 86400), not \"%s\"", arg);
      return KC_GO_ON;
    case KC_OPT_NO_WAIT:
      o->no_wait = 1;
      return KC_GO_ON;
    case KC_OPT_FORCE:
      o->force = 1;
      return KC_GO_ON;
    case KC_OPT_AT:
      if (!kc_is_hash_key(arg))
        return kc_usage_error(
            o->ctx, "--at needs a decimal hash key below 2^128, not \"%s\"",
            arg);
      o->at = arg;
      return KC_GO_ON;
    case 'J':
      o->json = 1;
      return KC_GO_ON;
    default:
      return kc_usage_error(o->ctx, "unexpected option");
  }
}

/* Parses the options and checks the operand count. */
static int parse(kc_ctx_t *ctx, int argc, char **argv, const kc_opt_t *opts,
                 admin_opts_t *o, char **ops, int min_ops, int max_ops) {
  memset(o, 0, sizeof(*o));
  o->ctx = ctx;
  o->shards = 1;
  o->timeout_s = 300;
  int n = 0;
  int rc = kc_cmd_parse(ctx, argc, argv, opts, ops, max_ops, &n, on_opt, o);
  if (rc != KC_GO_ON) return rc;
  if (n < min_ops) return kc_usage_error(ctx, "missing arguments");
  for (int i = n; i < max_ops; i++) ops[i] = NULL;
  return KC_GO_ON;
}

/* Waits for the stream to be ACTIVE (or gone) unless --no-wait. */
static int wait_stream(const kc_ctx_t *ctx, kn_client_t *kc,
                       const admin_opts_t *o, const char *stream, int gone) {
  if (o->no_wait) return KC_EXIT_OK;
  kn_error_t *err =
      kn_wait_stream(kc, stream, gone, (int)(o->timeout_s * 1000));
  if (!err) return KC_EXIT_OK;
  int rc;
  if (kn_error_code(err) == KN_ERR__TIMED_OUT) {
    kc_errorf(ctx, "stream \"%s\" not %s after %lld s", stream,
              gone ? "deleted" : "ACTIVE", o->timeout_s);
    rc = KC_EXIT_RUNTIME;
  } else {
    rc = kc_fail(ctx, err, gone ? NULL : stream, "waiting for the stream");
  }
  kn_error_destroy(err);
  return rc;
}

/* ---- create ---- */

static const kc_opt_t create_opts[] = {
    {KC_OPT_SHARDS, 0, "shards", 1},
    {KC_OPT_MAX_RECORD_SIZE, 0, "max-record-size", 1},
    {KC_OPT_NO_WAIT, 0, "no-wait", 0},
    {KC_OPT_TIMEOUT, 0, "timeout", 1},
    KC_GLOBAL_OPTS,
    {0, 0, NULL, 0}};

static int run_create(kc_ctx_t *ctx, int argc, char **argv) {
  admin_opts_t o;
  char *ops[1];
  int rc = parse(ctx, argc, argv, create_opts, &o, ops, 1, 1);
  if (rc != KC_GO_ON) return rc;
  if (strncmp(ops[0], "arn:", 4) == 0)
    return kc_usage_error(ctx,
                          "a stream is created by name (CreateStream takes no "
                          "ARN): \"%s\"",
                          ops[0]);
  kn_client_t *kc = kc_client_new(ctx, NULL, &rc);
  if (!kc) return rc;
  kn_error_t *err =
      kn_create_stream_sized(kc, ops[0], (int)o.shards, (int)o.max_record_kib);
  if (err) {
    char what[300];
    snprintf(what, sizeof(what), "cannot create stream \"%s\"", ops[0]);
    rc = kc_fail(ctx, err, NULL, what);
    kn_error_destroy(err);
  } else {
    rc = wait_stream(ctx, kc, &o, ops[0], 0);
  }
  kn_client_destroy(kc);
  return rc;
}

const kc_command_t kc_cmd_create = {
    "create", run_create, "create a stream and wait until it is ACTIVE",
    "kncat create STREAM [--shards N] [--max-record-size KIB] [--no-wait]\n"
    "             [--timeout SEC]\n",
    "\n"
    "Creates STREAM and waits until it is ACTIVE.\n"
    "\n"
    "  --shards N     number of shards (default 1); 0 creates an on-demand\n"
    "                 stream (capacity managed by the service)\n"
    "  --max-record-size KIB  the stream's MaxRecordSizeInKiB: the largest\n"
    "                 record (data and partition key), 1024 (the default,\n"
    "                 1 MiB) to 10240 (10 MiB)\n"
    "  --no-wait      return as soon as the request is accepted\n"
    "  --timeout SEC  give up waiting after SEC seconds (default 300; exit "
    "1)\n"};

/* ---- delete ---- */

static const kc_opt_t delete_opts[] = {{KC_OPT_FORCE, 0, "force", 0},
                                       {KC_OPT_NO_WAIT, 0, "no-wait", 0},
                                       {KC_OPT_TIMEOUT, 0, "timeout", 1},
                                       KC_GLOBAL_OPTS,
                                       {0, 0, NULL, 0}};

static int run_delete(kc_ctx_t *ctx, int argc, char **argv) {
  admin_opts_t o;
  char *ops[1];
  int rc = parse(ctx, argc, argv, delete_opts, &o, ops, 1, 1);
  if (rc != KC_GO_ON) return rc;
  kn_client_t *kc = kc_client_new(ctx, ops[0], &rc);
  if (!kc) return rc;
  kn_error_t *err = kn_delete_stream(kc, ops[0], o.force);
  if (err) {
    char what[300];
    snprintf(what, sizeof(what), "cannot delete stream \"%s\"", ops[0]);
    rc = kc_fail(ctx, err, ops[0], what);
    kn_error_destroy(err);
  } else {
    rc = wait_stream(ctx, kc, &o, ops[0], 1);
  }
  kn_client_destroy(kc);
  return rc;
}

const kc_command_t kc_cmd_delete = {
    "delete", run_delete, "delete a stream and wait until it is gone",
    "kncat delete STREAM [--force] [--no-wait] [--timeout SEC]\n",
    "\n"
    "Deletes STREAM and waits until the service no longer knows it.\n"
    "\n"
    "  --force        also deregister the stream's enhanced fan-out consumers\n"
    "                 (otherwise a stream that has some is not deleted)\n"
    "  --no-wait      return as soon as the request is accepted\n"
    "  --timeout SEC  give up waiting after SEC seconds (default 300; exit "
    "1)\n"};

/* ---- list ---- */

static const kc_opt_t list_opts[] = {
    {'J', 'J', "json", 0}, KC_GLOBAL_OPTS, {0, 0, NULL, 0}};

/* A JSON string value (or null) into a small line buffer. */
static int list_streams(const kc_ctx_t *ctx, kn_client_t *kc, int json) {
  kn_strlist_t *names = NULL;
  kn_error_t *err = kn_list_streams(kc, &names);
  if (err) {
    int rc = kc_fail(ctx, err, NULL, "cannot list streams");
    kn_error_destroy(err);
    return rc;
  }
  for (size_t i = 0; i < kn_strlist_count(names); i++) {
    if (json) {
      fputs("{\"stream\":", stdout);
      kc_json_str(stdout, kn_strlist_get(names, i));
      fputs("}\n", stdout);
    } else {
      kc_linef("%s", kn_strlist_get(names, i));
    }
  }
  kn_strlist_destroy(names);
  return KC_EXIT_OK;
}

static const char *or_dash(const char *s) { return s && *s ? s : "-"; }

static void parents_text(const kn_shard_t *s, char *buf, size_t cap) {
  const char *p = kn_shard_parent_id(s), *a = kn_shard_adjacent_parent_id(s);
  if (p && a)
    snprintf(buf, cap, "%s,%s", p, a);
  else
    snprintf(buf, cap, "%s", or_dash(p ? p : a));
}

static int list_shards(const kc_ctx_t *ctx, kn_client_t *kc, const char *stream,
                       int json) {
  kn_shard_list_t *shards = NULL;
  kn_error_t *err =
      kn_list_shards(kc, stream, KN_SHARD_FILTER_NONE, NULL, 0, &shards);
  if (err) {
    int rc = kc_fail(ctx, err, stream, "cannot list shards");
    kn_error_destroy(err);
    return rc;
  }
  size_t n = kn_shard_list_count(shards);
  char parents[160];
  if (json) {
    for (size_t i = 0; i < n; i++) {
      const kn_shard_t *s = kn_shard_list_get(shards, i);
      fputs("{\"shard\":", stdout);
      kc_json_str(stdout, kn_shard_id(s));
      fputs(",\"parent\":", stdout);
      kc_json_str(stdout, kn_shard_parent_id(s));
      fputs(",\"adjacent_parent\":", stdout);
      kc_json_str(stdout, kn_shard_adjacent_parent_id(s));
      fputs(",\"hash_key_start\":", stdout);
      kc_json_str(stdout, kn_shard_hash_key_start(s));
      fputs(",\"hash_key_end\":", stdout);
      kc_json_str(stdout, kn_shard_hash_key_end(s));
      fputs(",\"seq_start\":", stdout);
      kc_json_str(stdout, kn_shard_sequence_start(s));
      fputs(",\"seq_end\":", stdout);
      kc_json_str(stdout, kn_shard_sequence_end(s));
      printf(",\"open\":%s}\n", kn_shard_is_open(s) ? "true" : "false");
    }
  } else {
    /* Column widths from the data: hash keys take up to 39 digits and
     * sequence numbers 56, so fixed widths would waste a line. */
    int w[4] = {5, 7, 14, 12};
    for (size_t i = 0; i < n; i++) {
      const kn_shard_t *s = kn_shard_list_get(shards, i);
      parents_text(s, parents, sizeof(parents));
      int l[4] = {(int)strlen(kn_shard_id(s)), (int)strlen(parents),
                  (int)strlen(or_dash(kn_shard_hash_key_start(s))),
                  (int)strlen(or_dash(kn_shard_hash_key_end(s)))};
      for (int k = 0; k < 4; k++)
        if (l[k] > w[k]) w[k] = l[k];
    }
    printf("%-*s  %-*s  %*s  %*s  %-6s  %s\n", w[0], "SHARD", w[1], "PARENTS",
           w[2], "HASH_KEY_START", w[3], "HASH_KEY_END", "STATE",
           "SEQUENCE_START");
    for (size_t i = 0; i < n; i++) {
      const kn_shard_t *s = kn_shard_list_get(shards, i);
      parents_text(s, parents, sizeof(parents));
      kc_linef("%-*s  %-*s  %*s  %*s  %-6s  %s", w[0], kn_shard_id(s), w[1],
               parents, w[2], or_dash(kn_shard_hash_key_start(s)), w[3],
               or_dash(kn_shard_hash_key_end(s)),
               kn_shard_is_open(s) ? "open" : "closed",
               or_dash(kn_shard_sequence_start(s)));
    }
  }
  kn_shard_list_destroy(shards);
  return KC_EXIT_OK;
}

static int run_list(kc_ctx_t *ctx, int argc, char **argv) {
  admin_opts_t o;
  char *ops[1];
  int rc = parse(ctx, argc, argv, list_opts, &o, ops, 0, 1);
  if (rc != KC_GO_ON) return rc;
  kn_client_t *kc = kc_client_new(ctx, ops[0], &rc);
  if (!kc) return rc;
  rc = ops[0] ? list_shards(ctx, kc, ops[0], o.json)
              : list_streams(ctx, kc, o.json);
  kn_client_destroy(kc);
  return rc;
}

const kc_command_t kc_cmd_list = {
    "list", run_list, "list streams, or the shards of a stream",
    "kncat list [STREAM] [-J]\n",
    "\n"
    "Without STREAM: the name of every stream, one per line.\n"
    "With STREAM: a table of its shards, open and closed: id, parent(s),\n"
    "hash key range, state (open or closed) and starting sequence number.\n"
    "\n"
    "  -J, --json  one JSON object per line instead: {\"stream\"} for "
    "streams;\n"
    "              for shards \"shard\", \"parent\", \"adjacent_parent\",\n"
    "              \"hash_key_start\", \"hash_key_end\", \"seq_start\", "
    "\"seq_end\"\n"
    "              (strings or null) and \"open\" (true or false)\n"};

/* ---- split and merge ---- */

/* Checks that every shard exists, for a clear message before resharding.
 * Returns KC_GO_ON or an exit code. */
static int check_shards(const kc_ctx_t *ctx, kn_client_t *kc,
                        const char *stream, char *const *ids, int n) {
  kn_shard_list_t *shards = NULL;
  kn_error_t *err =
      kn_list_shards(kc, stream, KN_SHARD_FILTER_NONE, NULL, 0, &shards);
  if (err) {
    int rc = kc_fail(ctx, err, stream, "cannot list shards");
    kn_error_destroy(err);
    return rc;
  }
  int rc = KC_GO_ON;
  for (int i = 0; i < n && rc == KC_GO_ON; i++) {
    const kn_shard_t *s = kn_shard_list_find(shards, ids[i]);
    if (!s) {
      kc_errorf(ctx, "shard \"%s\" not found in stream \"%s\"", ids[i], stream);
      rc = KC_EXIT_NOT_FOUND;
    } else if (!kn_shard_is_open(s)) {
      kc_errorf(ctx, "shard \"%s\" of stream \"%s\" is closed", ids[i], stream);
      rc = KC_EXIT_RUNTIME;
    }
  }
  kn_shard_list_destroy(shards);
  return rc;
}

static const kc_opt_t split_opts[] = {{KC_OPT_AT, 0, "at", 1},
                                      {KC_OPT_NO_WAIT, 0, "no-wait", 0},
                                      {KC_OPT_TIMEOUT, 0, "timeout", 1},
                                      KC_GLOBAL_OPTS,
                                      {0, 0, NULL, 0}};

static int run_split(kc_ctx_t *ctx, int argc, char **argv) {
  admin_opts_t o;
  char *ops[2];
  int rc = parse(ctx, argc, argv, split_opts, &o, ops, 2, 2);
  if (rc != KC_GO_ON) return rc;
  char shard[128];
  if (kc_shard_id(ops[1], shard, sizeof(shard)))
    return kc_usage_error(ctx, "shard id too long");
  kn_client_t *kc = kc_client_new(ctx, ops[0], &rc);
  if (!kc) return rc;
  char *ids[1] = {shard};
  rc = check_shards(ctx, kc, ops[0], ids, 1);
  if (rc == KC_GO_ON) {
    kn_error_t *err = kn_split_shard(kc, ops[0], shard, o.at);
    if (err) {
      char what[300];
      snprintf(what, sizeof(what), "cannot split shard \"%s\"", shard);
      rc = kc_fail(ctx, err, ops[0], what);
      kn_error_destroy(err);
    } else {
      rc = wait_stream(ctx, kc, &o, ops[0], 0);
    }
  }
  kn_client_destroy(kc);
  return rc;
}

const kc_command_t kc_cmd_split = {
    "split", run_split, "split a shard in two",
    "kncat split STREAM SHARD [--at HASHKEY] [--no-wait] [--timeout SEC]\n",
    "\n"
    "Splits the open shard SHARD (\"shardId-000000000001\", or just 1) into\n"
    "two children and waits until the stream is ACTIVE again.\n"
    "\n"
    "  --at HASHKEY   first hash key (decimal) of the upper child; default:\n"
    "                 the middle of the shard's range\n"
    "  --no-wait      return as soon as the request is accepted\n"
    "  --timeout SEC  give up waiting after SEC seconds (default 300; exit "
    "1)\n"};

static const kc_opt_t merge_opts[] = {{KC_OPT_NO_WAIT, 0, "no-wait", 0},
                                      {KC_OPT_TIMEOUT, 0, "timeout", 1},
                                      KC_GLOBAL_OPTS,
                                      {0, 0, NULL, 0}};

static int run_merge(kc_ctx_t *ctx, int argc, char **argv) {
  admin_opts_t o;
  char *ops[3];
  int rc = parse(ctx, argc, argv, merge_opts, &o, ops, 3, 3);
  if (rc != KC_GO_ON) return rc;
  char a[128], b[128];
  if (kc_shard_id(ops[1], a, sizeof(a)) || kc_shard_id(ops[2], b, sizeof(b)))
    return kc_usage_error(ctx, "shard id too long");
  kn_client_t *kc = kc_client_new(ctx, ops[0], &rc);
  if (!kc) return rc;
  char *ids[2] = {a, b};
  rc = check_shards(ctx, kc, ops[0], ids, 2);
  if (rc == KC_GO_ON) {
    kn_error_t *err = kn_merge_shards(kc, ops[0], a, b);
    if (err) {
      char what[400];
      snprintf(what, sizeof(what), "cannot merge shards \"%s\" and \"%s\"", a,
               b);
      rc = kc_fail(ctx, err, ops[0], what);
      kn_error_destroy(err);
    } else {
      rc = wait_stream(ctx, kc, &o, ops[0], 0);
    }
  }
  kn_client_destroy(kc);
  return rc;
}

const kc_command_t kc_cmd_merge = {
    "merge", run_merge, "merge two adjacent shards",
    "kncat merge STREAM SHARD1 SHARD2 [--no-wait] [--timeout SEC]\n",
    "\n"
    "Merges two open shards whose hash key ranges are adjacent into one\n"
    "child and waits until the stream is ACTIVE again.  Shards are given as\n"
    "\"shardId-000000000001\" or just 1.\n"
    "\n"
    "  --no-wait      return as soon as the request is accepted\n"
    "  --timeout SEC  give up waiting after SEC seconds (default 300; exit "
    "1)\n"};
