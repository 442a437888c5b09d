/* kncat: shared declarations of the command-line tool.
 *
 * Each command lives in its own cmd_*.c file and is reached through the
 * table in main.c; the helpers it needs (option parsing, diagnostics,
 * output, signals) are in files of their own. */
#ifndef KNCAT_H
#define KNCAT_H

#include <stdarg.h>
#include <stddef.h>

#include "kn/client.h"
#include "kn/conf.h"
#include "kn/error.h"

/* Exit codes: the table of DESIGN.md section 5.1 and docs/kncat.md. */
enum {
  KC_EXIT_OK = 0,
  KC_EXIT_RUNTIME = 1,
  KC_EXIT_USAGE = 2,
  KC_EXIT_NOT_FOUND = 3,
  KC_EXIT_AUTH = 4,
  KC_EXIT_UNDELIVERED = 5
};

struct kc_command;

/* What every command gets: the configuration built from the global options
 * (and the command's own -X), the output mode and the command it runs. */
typedef struct kc_ctx {
  kn_conf_t *conf;
  int quiet;   /* -q: diagnostics only for errors */
  int verbose; /* number of -v */
  const struct kc_command *cmd;
  /* --metrics HOST:PORT and --metrics-linger SECONDS (metrics_http.h) */
  const char *metrics_addr;
  long long metrics_linger_ms;
  struct kc_metrics *metrics; /* the server, once a command started it */
  int metrics_tried;          /* a command supports --metrics */
} kc_ctx_t;

typedef struct kc_command {
  const char *name;
  int (*run)(kc_ctx_t *ctx, int argc, char **argv);
  const char *summary; /* one line for `kncat --help` */
  const char *usage;   /* synopsis, printed after a usage error */
  const char *help;    /* the rest of `kncat CMD --help` */
} kc_command_t;

extern const kc_command_t kc_cmd_create, kc_cmd_delete, kc_cmd_list,
    kc_cmd_split, kc_cmd_merge, kc_cmd_produce, kc_cmd_consume, kc_cmd_group,
    kc_cmd_leases, kc_cmd_efo, kc_cmd_multilang;

/* ---- diag.c: one-line diagnostics and exit codes ---- */

/* The exit code an error of the library deserves. */
int kc_exit_code(const kn_error_t *err);
/* "kncat: CMD: message" on stderr (always, even with -q). */
void kc_errorf(const kc_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* One line of text output on stdout (a table row), with the control
 * characters of servers' text replaced (kn_text_sanitize); adds the
 * newline. */
void kc_linef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same unless -q: notices such as produce's summary. */
void kc_noticef(const kc_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "kncat: CMD: WHAT: <error>" -- or, for a missing resource,
 * "kncat: CMD: stream "S" not found (<error>)" -- and returns the exit
 * code.  stream may be NULL. */
int kc_fail(const kc_ctx_t *ctx, const kn_error_t *err, const char *stream,
            const char *what);
/* A usage error: the message, the command's synopsis on stderr; returns
 * KC_EXIT_USAGE. */
int kc_usage_error(const kc_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The full help of the command on stdout; returns KC_EXIT_OK. */
int kc_print_help(const kc_command_t *cmd);

/* ---- main.c: global options, also accepted after the command ---- */

/* Handles one option of the global table (see args.h KC_GLOBAL_OPTS).
 * Returns -1 if it was not a global option, else an exit code to stop
 * with, or -2 to go on. */
int kc_global_option(kc_ctx_t *ctx, int id, const char *arg);
#define KC_GO_ON (-2)
#define KC_NOT_GLOBAL (-1)

struct kc_opt;
/* Parses a command's options (opts ends with KC_GLOBAL_OPTS and {0}):
 * global options are applied, --help prints the command's help, the
 * others go to on_opt (which returns KC_GO_ON or an exit code).  Returns
 * KC_GO_ON with the operands collected, or the exit code to stop with. */
int kc_cmd_parse(kc_ctx_t *ctx, int argc, char **argv,
                 const struct kc_opt *opts, char **operands, int max_operands,
                 int *n_operands,
                 int (*on_opt)(void *st, int id, const char *arg), void *st);

/* Creates the client from ctx->conf for calls on stream (may be NULL; an
 * ARN is set as the stream property, so that its region is used); on
 * failure prints the reason and returns NULL with *rc set. */
kn_client_t *kc_client_new(const kc_ctx_t *ctx, const char *stream, int *rc);

/* ---- cmd_efo.c: the enhanced fan-out options of consume and group ---- */

#define KC_EFO_OPTS                                          \
  {KC_OPT_EFO, 0, "efo", 1},                                 \
      {KC_OPT_EFO_REGISTRATION, 0, "efo-registration", 1}, { \
    KC_OPT_EFO_ARN, 0, "efo-arn", 1                          \
  }

typedef struct kc_efo_opts {
  const char *name, *registration, *arn; /* point into argv */
} kc_efo_opts_t;

/* Takes one of KC_EFO_OPTS: KC_GO_ON, an exit code for a bad value, or
 * KC_NOT_GLOBAL for another option. */
int kc_efo_option(const kc_ctx_t *ctx, kc_efo_opts_t *o, int id,
                  const char *arg);
/* Checks the combination and sets the efo.* properties; KC_GO_ON or an
 * exit code (nothing set without --efo or --efo-arn). */
int kc_efo_apply(const kc_ctx_t *ctx, const kc_efo_opts_t *o);

#endif
