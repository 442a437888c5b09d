/* kncat: entry point, global options and command dispatch. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "kn/version.h"
#include "kn/metrics.h"
#include "kncat.h"
#include "metrics_http.h"

/* Commands in the order `kncat --help` lists them. */
static const kc_command_t *const commands[] = {
    &kc_cmd_create, &kc_cmd_delete,  &kc_cmd_list,      &kc_cmd_split,
    &kc_cmd_merge,  &kc_cmd_produce, &kc_cmd_consume,   &kc_cmd_group,
    &kc_cmd_leases, &kc_cmd_efo,     &kc_cmd_multilang,
};

static const char global_help[] =
    "usage: kncat [global options] COMMAND [options] [ARGS]\n"
    "\n"
    "A command-line client for Amazon Kinesis Data Streams: produce from\n"
    "standard input, consume to standard output, list and reshard.\n"
    "\n"
    "Commands:\n"
    "%s"
    "\n"
    "Global options (before the command, or after it):\n"
    "  --endpoint URL   Kinesis endpoint URL (property endpoint)\n"
    "  --region R       AWS region (property region)\n"
    "  --profile P      profile of the shared AWS config and credentials "
    "files\n"
    "  --no-verify-ssl  do not verify TLS certificates (ssl.verify=false)\n"
    "  -X PROP=VALUE    set a library property; -X list prints every "
    "property,\n"
    "                   -X list-md the same as Markdown; -X list-metrics-md\n"
    "                   the metrics of --metrics as Markdown\n"
    "  --metrics HOST:PORT  group, consume, produce, multilang: serve "
    "/metrics\n"
    "                   (Prometheus), /healthz and /readyz there (:PORT is\n"
    "                   loopback; 0.0.0.0:PORT or [::]:PORT every address);\n"
    "                   port 0 picks a free port (printed on stderr)\n"
    "  --metrics-linger S  keep serving S seconds after the command ends\n"
    "  -v               more logging: -v info, -vv debug (log.level 6, 7)\n"
    "  -q               quiet: only errors on stderr\n"
    "  --version        print the versions of kncat and libkinesis and exit\n"
    "  -h, --help       this help; 'kncat COMMAND --help' for a command's\n"
    "\n"
    "Environment: the library reads AWS_ENDPOINT_URL_KINESIS, "
    "AWS_ENDPOINT_URL,\n"
    "AWS_REGION, AWS_DEFAULT_REGION, AWS_PROFILE, AWS_CA_BUNDLE and the "
    "standard\n"
    "credentials chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...).\n"
    "\n"
    "Exit codes: 0 success, 1 runtime error, 2 usage or configuration error,\n"
    "3 stream or resource not found, 4 credentials or signature rejected,\n"
    "5 some records not delivered (produce).\n";

static void print_global_help(void) {
  char list[1024];
  size_t n = 0;
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
    int w = snprintf(list + n, sizeof(list) - n, "  %-10s%s\n",
                     commands[i]->name, commands[i]->summary);
    if (w > 0 && (size_t)w < sizeof(list) - n) n += (size_t)w;
  }
  printf(global_help, list);
}

static int set_prop(const kc_ctx_t *ctx, const char *name, const char *value) {
  char errstr[256] = "";
  kn_conf_res_t r = kn_conf_set(ctx->conf, name, value, errstr, sizeof(errstr));
  if (r == KN_CONF_UNKNOWN) {
    kc_errorf(ctx, "unknown property \"%s\" ('kncat -X list' shows them)",
              name);
    return KC_EXIT_USAGE;
  }
  if (r != KN_CONF_OK) {
    kc_errorf(ctx, "invalid value for %s: %s", name,
              *errstr ? errstr : "rejected");
    return KC_EXIT_USAGE;
  }
  return KC_GO_ON;
}

int kc_global_option(kc_ctx_t *ctx, int id, const char *arg) {
  switch (id) {
    case KC_OPT_ENDPOINT:
      return set_prop(ctx, "endpoint", arg);
    case KC_OPT_REGION:
      return set_prop(ctx, "region", arg);
    case KC_OPT_PROFILE:
      return set_prop(ctx, "profile", arg);
    case KC_OPT_NO_VERIFY_SSL:
      return set_prop(ctx, "ssl.verify", "false");
    case 'v':
      ctx->verbose++;
      ctx->quiet = 0;
      return set_prop(ctx, "log.level", ctx->verbose > 1 ? "7" : "6");
    case 'q':
      ctx->quiet = 1;
      ctx->verbose = 0;
      return set_prop(ctx, "log.level", "3");
    case KC_OPT_METRICS:
      ctx->metrics_addr = arg;
      return KC_GO_ON;
    case KC_OPT_METRICS_LINGER: {
      char *end;
      double sec = strtod(arg, &end);
      if (end == arg || *end || !(sec >= 0) || sec > 86400)
        return kc_usage_error(ctx,
                              "--metrics-linger needs seconds (0 to "
                              "86400), not \"%s\"",
                              arg);
      ctx->metrics_linger_ms = (long long)(sec * 1000);
      return KC_GO_ON;
    }
    case 'X': {
      if (!strcmp(arg, "list-metrics-md")) {
        kn_metrics_markdown(stdout);
        return KC_EXIT_OK;
      }
      if (!strcmp(arg, "list")) {
        kn_conf_properties_show(stdout);
        return KC_EXIT_OK;
      }
      if (!strcmp(arg, "list-md")) {
        kn_conf_properties_markdown(stdout);
        return KC_EXIT_OK;
      }
      const char *eq = strchr(arg, '=');
      if (!eq || eq == arg)
        return kc_usage_error(ctx, "-X needs PROP=VALUE, not \"%s\"", arg);
      char name[128];
      if ((size_t)(eq - arg) >= sizeof(name)) {
        kc_errorf(ctx, "unknown property \"%.*s\"", (int)(eq - arg), arg);
        return KC_EXIT_USAGE;
      }
      memcpy(name, arg, (size_t)(eq - arg));
      name[eq - arg] = '\0';
      return set_prop(ctx, name, eq + 1);
    }
    default:
      return KC_NOT_GLOBAL;
  }
}

int kc_cmd_parse(kc_ctx_t *ctx, int argc, char **argv, const kc_opt_t *opts,
                 char **operands, int max_operands, int *n_operands,
                 int (*on_opt)(void *st, int id, const char *arg), void *st) {
  kc_args_t a;
  kc_args_init(&a, argc, argv, operands, max_operands, 0);
  int id;
  while ((id = kc_args_next(&a, opts)) != 0) {
    if (id < 0) return kc_usage_error(ctx, "%s", a.err);
    if (id == KC_OPT_HELP) return kc_print_help(ctx->cmd);
    int rc = kc_global_option(ctx, id, a.arg);
    if (rc == KC_NOT_GLOBAL) rc = on_opt(st, id, a.arg);
    if (rc != KC_GO_ON) return rc;
  }
  *n_operands = a.n_operands;
  return KC_GO_ON;
}

kn_client_t *kc_client_new(const kc_ctx_t *ctx, const char *stream, int *rc) {
  char errstr[512] = "";
  /* A stream ARN names the region (the library's settings read it). */
  if (stream && strncmp(stream, "arn:", 4) == 0 &&
      (*rc = set_prop(ctx, "stream", stream)) != KC_GO_ON)
    return NULL;
  kn_client_t *client = kn_client_new(ctx->conf, errstr, sizeof(errstr));
  if (!client) {
    kc_errorf(ctx, "cannot set up the client: %s",
              *errstr ? errstr : "unknown reason");
    *rc = KC_EXIT_USAGE;
  }
  return client;
}

static const kc_opt_t global_opts[] = {
    KC_GLOBAL_OPTS, {KC_OPT_VERSION, 0, "version", 0}, {0, 0, NULL, 0}};

static int run(kc_ctx_t *ctx, int argc, char **argv) {
  kc_args_t a;
  kc_args_init(&a, argc, argv, NULL, 0, 1);
  int id;
  while ((id = kc_args_next(&a, global_opts)) != 0) {
    if (id < 0) return kc_usage_error(ctx, "%s", a.err);
    if (id == KC_OPT_HELP) {
      print_global_help();
      return KC_EXIT_OK;
    }
    if (id == KC_OPT_VERSION) {
      printf("kncat %s (libkinesis %s)\n", KN_VERSION_STR, kn_version_str());
      return KC_EXIT_OK;
    }
    int rc = kc_global_option(ctx, id, a.arg);
    if (rc != KC_GO_ON) return rc;
  }
  if (a.idx >= a.argc) return kc_usage_error(ctx, "no command given");
  const char *name = argv[a.idx];
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    if (!strcmp(commands[i]->name, name)) {
      ctx->cmd = commands[i];
      return commands[i]->run(ctx, argc - a.idx - 1, argv + a.idx + 1);
    }
  return kc_usage_error(ctx, "unknown command \"%s\"", name);
}

int main(int argc, char **argv) {
  kc_ctx_t ctx;
  memset(&ctx, 0, sizeof(ctx));
  ctx.conf = kn_conf_new();
  if (!ctx.conf) {
    fputs("kncat: out of memory\n", stderr);
    return KC_EXIT_RUNTIME;
  }
  /* A reader that goes away early (kncat list | head) shows up as EPIPE
   * and ends the output quietly instead of killing kncat. */
  signal(SIGPIPE, SIG_IGN);
  int rc = run(&ctx, argc - 1, argv + 1);
  if (ctx.metrics_addr && !ctx.metrics_tried && ctx.cmd && rc == KC_EXIT_OK)
    kc_errorf(&ctx,
              "--metrics is served by group, consume, produce and "
              "multilang only");
  kc_metrics_finish(&ctx);
  kn_conf_destroy(ctx.conf);
  fflush(stdout);
  return rc;
}
