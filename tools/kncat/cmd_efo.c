/* Enhanced fan-out: the --efo options of consume and group, and the efo
 * command that registers, deregisters and lists stream consumers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "kncat.h"
#include "output.h"

/* ---- the options of consume and group ---- */

int kc_efo_option(const kc_ctx_t *ctx, kc_efo_opts_t *o, int id,
                  const char *arg) {
  switch (id) {
    case KC_OPT_EFO:
      if (!*arg) return kc_usage_error(ctx, "--efo needs a consumer name");
      o->name = arg;
      return KC_GO_ON;
    case KC_OPT_EFO_REGISTRATION:
      if (strcmp(arg, "lazy") && strcmp(arg, "eager") && strcmp(arg, "none"))
        return kc_usage_error(ctx,
                              "--efo-registration takes lazy, eager or "
                              "none, not \"%s\"",
                              arg);
      o->registration = arg;
      return KC_GO_ON;
    case KC_OPT_EFO_ARN:
      if (strncmp(arg, "arn:", 4) != 0)
        return kc_usage_error(ctx, "--efo-arn needs a consumer ARN, not \"%s\"",
                              arg);
      o->arn = arg;
      return KC_GO_ON;
    default:
      return KC_NOT_GLOBAL;
  }
}

static int set(const kc_ctx_t *ctx, const char *name, const char *value) {
  char errstr[256] = "";
  kn_conf_res_t r = kn_conf_set(ctx->conf, name, value, errstr, sizeof(errstr));
  if (r == KN_CONF_OK) return KC_GO_ON;
  kc_errorf(ctx, "%s=%s rejected: %s", name, value,
            r == KN_CONF_UNKNOWN ? "no such property" : errstr);
  return r == KN_CONF_UNKNOWN ? KC_EXIT_RUNTIME : KC_EXIT_USAGE;
}

int kc_efo_apply(const kc_ctx_t *ctx, const kc_efo_opts_t *o) {
  const char *reg = o->registration;
  if (!o->name && !o->arn) {
    if (reg)
      return kc_usage_error(ctx,
                            "--efo-registration needs --efo NAME "
                            "or --efo-arn ARN");
    return KC_GO_ON; /* polling */
  }
  if (!reg) reg = o->arn && !o->name ? "none" : "lazy"; /* as the library */
  if (!strcmp(reg, "none") && !o->arn)
    return kc_usage_error(ctx, "--efo-registration none needs --efo-arn ARN");
  if (strcmp(reg, "none") && o->arn)
    return kc_usage_error(ctx,
                          "--efo-arn goes with --efo-registration none "
                          "(%s registration registers --efo NAME)",
                          reg);
  if (strcmp(reg, "none") && !o->name)
    return kc_usage_error(ctx, "--efo-registration %s needs --efo NAME", reg);
  int rc;
  if (o->name && (rc = set(ctx, "efo.consumer.name", o->name)) != KC_GO_ON)
    return rc;
  if (o->arn && (rc = set(ctx, "efo.consumer.arn", o->arn)) != KC_GO_ON)
    return rc;
  return set(ctx, "efo.registration", reg);
}

/* ---- kncat efo ---- */

typedef struct efo_cmd {
  const kc_ctx_t *ctx;
  long long timeout_s;
  int no_wait, json;
} efo_cmd_t;

static int on_opt(void *st, int id, const char *arg) {
  efo_cmd_t *e = st;
  switch (id) {
    case KC_OPT_TIMEOUT:
      if (kc_parse_int(arg, 1, 86400, &e->timeout_s))
        return kc_usage_error(e->ctx,
                              "--timeout needs seconds (1 to 86400), "
                              "not \"%s\"",
                              arg);
      return KC_GO_ON;
    case KC_OPT_NO_WAIT:
      e->no_wait = 1;
      return KC_GO_ON;
    case 'J':
      e->json = 1;
      return KC_GO_ON;
    default:
      return kc_usage_error(e->ctx, "unexpected option");
  }
}

static const kc_opt_t efo_opts[] = {{KC_OPT_NO_WAIT, 0, "no-wait", 0},
                                    {KC_OPT_TIMEOUT, 0, "timeout", 1},
                                    {'J', 'J', "json", 0},
                                    KC_GLOBAL_OPTS,
                                    {0, 0, NULL, 0}};

static void print_consumer(const efo_cmd_t *e, const kn_stream_consumer_t *c) {
  if (e->json) {
    fputs("{\"name\":", stdout);
    kc_json_str(stdout, kn_stream_consumer_name(c));
    fputs(",\"status\":", stdout);
    kc_json_str(stdout, kn_stream_consumer_status(c));
    fputs(",\"arn\":", stdout);
    kc_json_str(stdout, kn_stream_consumer_arn(c));
    printf(",\"created_ms\":%lld}\n",
           (long long)kn_stream_consumer_created_ms(c));
  } else {
    /* Sanitized one by one: the tabs between them stay. */
    const char *f[3] = {kn_stream_consumer_name(c),
                        kn_stream_consumer_status(c),
                        kn_stream_consumer_arn(c)};
    for (int i = 0; i < 3; i++) {
      char *t = strdup(f[i] ? f[i] : "");
      if (t) kn_text_sanitize(t);
      printf("%s%c", t ? t : "?", i < 2 ? '\t' : '\n');
      free(t);
    }
  }
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* The stream's ARN (malloc'ed), or NULL with the failure reported. */
static char *stream_arn(const efo_cmd_t *e, kn_client_t *kc, const char *stream,
                        int *rc) {
  kn_stream_summary_t *sum = NULL;
  kn_error_t *err = kn_describe_stream_summary(kc, stream, &sum);
  if (err) {
    *rc = kc_fail(e->ctx, err, stream, "cannot describe the stream");
    kn_error_destroy(err);
    return NULL;
  }
  const char *a = kn_stream_summary_arn(sum);
  char *arn = a && *a ? strdup(a) : NULL;
  kn_stream_summary_destroy(sum);
  if (!arn) {
    kc_errorf(e->ctx, "stream \"%s\": no ARN", stream);
    *rc = KC_EXIT_RUNTIME;
  }
  return arn;
}

/* Polls DescribeStreamConsumer until the consumer is ACTIVE (gone 0) or
 * no longer exists (gone 1); prints it when ACTIVE. */
static int wait_consumer(const efo_cmd_t *e, kn_client_t *kc, const char *arn,
                         const char *name, int gone) {
  time_t until = time(NULL) + (time_t)e->timeout_s;
  for (;;) {
    kn_stream_consumer_t *c = NULL;
    kn_error_t *err = kn_describe_stream_consumer(kc, arn, name, NULL, &c);
    if (err) {
      int not_found = kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND;
      int rc = KC_EXIT_OK;
      if (!gone || !not_found) {
        char what[300];
        snprintf(what, sizeof(what), "consumer \"%s\"", name);
        rc = kc_fail(e->ctx, err, NULL, what);
      }
      kn_error_destroy(err);
      return rc;
    }
    const char *st = kn_stream_consumer_status(c);
    if (!gone && st && !strcmp(st, "ACTIVE")) {
      print_consumer(e, c);
      kn_stream_consumer_destroy(c);
      return KC_EXIT_OK;
    }
    kn_stream_consumer_destroy(c);
    if (time(NULL) >= until) {
      kc_errorf(e->ctx, "consumer \"%s\" not %s after %lld s", name,
                gone ? "deleted" : "ACTIVE", e->timeout_s);
      return KC_EXIT_RUNTIME;
    }
    sleep_ms(500);
  }
}

static int efo_register(const efo_cmd_t *e, kn_client_t *kc, const char *arn,
                        const char *name) {
  kn_stream_consumer_t *c = NULL;
  kn_error_t *err = kn_register_stream_consumer(kc, arn, name, &c);
  if (err && kn_error_code(err) == KN_ERR_RESOURCE_IN_USE) {
    /* Registered already: the command is done (it may still be CREATING,
     * or DELETING, which waiting shows). */
    kc_noticef(e->ctx, "consumer \"%s\" is registered already", name);
    kn_error_destroy(err);
  } else if (err) {
    char what[300];
    snprintf(what, sizeof(what), "cannot register consumer \"%s\"", name);
    int rc = kc_fail(e->ctx, err, NULL, what);
    kn_error_destroy(err);
    return rc;
  }
  if (e->no_wait) {
    if (c) print_consumer(e, c);
    kn_stream_consumer_destroy(c);
    return KC_EXIT_OK;
  }
  kn_stream_consumer_destroy(c);
  return wait_consumer(e, kc, arn, name, 0);
}

static int efo_deregister(const efo_cmd_t *e, kn_client_t *kc, const char *arn,
                          const char *name) {
  kn_error_t *err = kn_deregister_stream_consumer(kc, arn, name, NULL);
  if (err) {
    char what[300];
    snprintf(what, sizeof(what), "cannot deregister consumer \"%s\"", name);
    int rc = kc_fail(e->ctx, err, NULL, what);
    kn_error_destroy(err);
    return rc;
  }
  return e->no_wait ? KC_EXIT_OK : wait_consumer(e, kc, arn, name, 1);
}

static int efo_list(const efo_cmd_t *e, kn_client_t *kc, const char *arn) {
  kn_stream_consumer_list_t *l = NULL;
  kn_error_t *err = kn_list_stream_consumers(kc, arn, &l);
  if (err) {
    int rc = kc_fail(e->ctx, err, NULL, "cannot list consumers");
    kn_error_destroy(err);
    return rc;
  }
  for (size_t i = 0; i < kn_stream_consumer_list_count(l); i++)
    print_consumer(e, kn_stream_consumer_list_get(l, i));
  kn_stream_consumer_list_destroy(l);
  return KC_EXIT_OK;
}

static int run_efo(kc_ctx_t *ctx, int argc, char **argv) {
  efo_cmd_t e;
  memset(&e, 0, sizeof(e));
  e.ctx = ctx;
  e.timeout_s = 300;
  char *ops[3];
  int n = 0;
  int rc = kc_cmd_parse(ctx, argc, argv, efo_opts, ops, 3, &n, on_opt, &e);
  if (rc != KC_GO_ON) return rc;
  if (n < 1) return kc_usage_error(ctx, "missing register, deregister or list");
  const char *what = ops[0];
  int list = !strcmp(what, "list");
  if (!list && strcmp(what, "register") && strcmp(what, "deregister"))
    return kc_usage_error(ctx, "unknown efo command \"%s\"", what);
  if (n < (list ? 2 : 3))
    return kc_usage_error(ctx,
                          list ? "missing STREAM" : "missing STREAM or NAME");
  if (list && n > 2)
    return kc_usage_error(ctx, "unexpected argument \"%s\"", ops[2]);
  kn_client_t *kc = kc_client_new(ctx, ops[1], &rc);
  if (!kc) return rc;
  char *arn = stream_arn(&e, kc, ops[1], &rc);
  if (arn) {
    if (list)
      rc = efo_list(&e, kc, arn);
    else if (!strcmp(what, "register"))
      rc = efo_register(&e, kc, arn, ops[2]);
    else
      rc = efo_deregister(&e, kc, arn, ops[2]);
  }
  free(arn);
  kn_client_destroy(kc);
  return rc;
}

const kc_command_t kc_cmd_efo = {
    "efo", run_efo, "register, deregister or list fan-out consumers",
    "kncat efo register|deregister STREAM NAME [--no-wait] [--timeout SEC] "
    "[-J]\n"
    "       kncat efo list STREAM [-J]\n",
    "\n"
    "Enhanced fan-out consumers of STREAM, for operators (consume and group\n"
    "--efo register theirs when needed: see --efo-registration).\n"
    "\n"
    "  register NAME    register consumer NAME and wait until it is ACTIVE,\n"
    "                   then print it; a consumer registered already is\n"
    "                   printed as it is\n"
    "  deregister NAME  deregister it and wait until it is gone; readers\n"
    "                   subscribed through it lose their subscriptions\n"
    "  list             every consumer of the stream\n"
    "\n"
    "  --no-wait        return as soon as the request is accepted\n"
    "  --timeout SEC    give up waiting after SEC seconds (default 300; exit "
    "1)\n"
    "  -J, --json       one JSON object per consumer: \"name\", \"status\",\n"
    "                   \"arn\", \"created_ms\"; without -J: NAME, STATUS and\n"
    "                   ARN separated by tabs\n"
    "\n"
    "Exit: 0 done; 3 stream or consumer not found; 4 credentials rejected;\n"
    "1 other errors.\n"};
