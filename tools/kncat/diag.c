/* Diagnostics: every message is one line on stderr, "kncat: CMD: ...", so
 * that scripts can show it as is; the exit code carries the category. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kncat.h"

int kc_exit_code(const kn_error_t *err) {
  if (!err) return KC_EXIT_OK;
  switch (kn_error_code(err)) {
    case KN_ERR_NO_ERROR:
      return KC_EXIT_OK;
    case KN_ERR_RESOURCE_NOT_FOUND:
      return KC_EXIT_NOT_FOUND;
    case KN_ERR_AUTH:
    case KN_ERR_ACCESS_DENIED:
    case KN_ERR__CREDENTIALS:
      return KC_EXIT_AUTH;
    case KN_ERR__CONF:
      return KC_EXIT_USAGE;
    default:
      return KC_EXIT_RUNTIME;
  }
}

static const char *cmd_name(const kc_ctx_t *ctx) {
  return ctx && ctx->cmd ? ctx->cmd->name : NULL;
}

/* Writes the prefix and the formatted text with line breaks flattened and
 * control characters replaced (messages carry servers' text), then the
 * newline, in one call so lines do not interleave with the library's log
 * lines. */
static void vline(const kc_ctx_t *ctx, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void vline(const kc_ctx_t *ctx, const char *fmt, va_list ap) {
  char msg[2048];
  int n =
      snprintf(msg, sizeof(msg), "kncat: %s%s",
               cmd_name(ctx) ? cmd_name(ctx) : "", cmd_name(ctx) ? ": " : "");
  if (n < 0) return;
  vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
  kn_text_sanitize(msg);
  fprintf(stderr, "%s\n", msg);
}

void kc_linef(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line = NULL;
  int n = vasprintf(&line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  kn_text_sanitize(line);
  printf("%s\n", line);
  free(line);
}

void kc_errorf(const kc_ctx_t *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(ctx, fmt, ap);
  va_end(ap);
}

void kc_noticef(const kc_ctx_t *ctx, const char *fmt, ...) {
  if (ctx && ctx->quiet) return;
  va_list ap;
  va_start(ap, fmt);
  vline(ctx, fmt, ap);
  va_end(ap);
}

int kc_fail(const kc_ctx_t *ctx, const kn_error_t *err, const char *stream,
            const char *what) {
  const char *text = err ? kn_error_string(err) : "unknown error";
  int rc = err ? kc_exit_code(err) : KC_EXIT_RUNTIME;
  if (rc == KC_EXIT_OK) rc = KC_EXIT_RUNTIME;
  if (err && kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND && stream)
    kc_errorf(ctx, "stream \"%s\" not found (%s)", stream, text);
  else
    kc_errorf(ctx, "%s: %s", what, text);
  return rc;
}

int kc_usage_error(const kc_ctx_t *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(ctx, fmt, ap);
  va_end(ap);
  if (ctx && ctx->cmd)
    fprintf(stderr, "usage: %sTry 'kncat %s --help' for more.\n",
            ctx->cmd->usage, ctx->cmd->name);
  else
    fputs(
        "usage: kncat [global options] COMMAND [options]\n"
        "Try 'kncat --help' for more.\n",
        stderr);
  return KC_EXIT_USAGE;
}

int kc_print_help(const kc_command_t *cmd) {
  printf("usage: %s%s", cmd->usage, cmd->help);
  return KC_EXIT_OK;
}
