/* Command-line parsing helpers: a small option scanner and strict parsers
 * for the values kncat takes.  Pure functions, unit-tested. */
#ifndef KNCAT_ARGS_H
#define KNCAT_ARGS_H

#include <stddef.h>
#include <stdint.h>

/* One accepted option.  id is returned by kc_args_next(); short_name 0
 * for a long-only option, long_name NULL for a short-only one. */
typedef struct kc_opt {
  int id;
  char short_name;
  const char *long_name;
  int has_arg;
} kc_opt_t;

/* Ids of long-only options (short options use their letter). */
enum {
  KC_OPT_HELP = 'h',
  KC_OPT_ENDPOINT = 256,
  KC_OPT_REGION,
  KC_OPT_PROFILE,
  KC_OPT_NO_VERIFY_SSL,
  KC_OPT_VERSION,
  KC_OPT_SHARDS,
  KC_OPT_NO_WAIT,
  KC_OPT_TIMEOUT,
  KC_OPT_FORCE,
  KC_OPT_AT,
  KC_OPT_AGGREGATE,
  KC_OPT_EFO,
  KC_OPT_LINGER,
  KC_OPT_RATE,
  KC_OPT_RATE_BYTES,
  KC_OPT_APP,
  KC_OPT_LEASES,
  KC_OPT_WORKER,
  KC_OPT_EFO_REGISTRATION,
  KC_OPT_EFO_ARN,
  KC_OPT_METRICS,
  KC_OPT_METRICS_LINGER,
  KC_OPT_STATE,
  KC_OPT_MAX_RECORD_SIZE
};

/* The global options, accepted before the command and after it. */
#define KC_GLOBAL_OPTS                                                    \
  {KC_OPT_ENDPOINT, 0, "endpoint", 1}, {KC_OPT_REGION, 0, "region", 1},   \
      {KC_OPT_PROFILE, 0, "profile", 1},                                  \
      {KC_OPT_NO_VERIFY_SSL, 0, "no-verify-ssl", 0}, {'X', 'X', NULL, 1}, \
      {'v', 'v', "verbose", 0}, {'q', 'q', "quiet", 0},                   \
      {KC_OPT_METRICS, 0, "metrics", 1},                                  \
      {KC_OPT_METRICS_LINGER, 0, "metrics-linger", 1}, {                  \
    KC_OPT_HELP, 'h', "help", 0                                           \
  }

typedef struct kc_args {
  int argc;
  char **argv;
  int idx;             /* next argv element */
  const char *cluster; /* rest of a "-abc" group being scanned */
  int stop_at_operand; /* stop at the first operand (global options) */
  int operands_only;   /* after "--" */
  char **operands;     /* operands collected in order (caller's array) */
  int n_operands, max_operands;
  const char *arg; /* value of the option just returned */
  char err[200];   /* why kc_args_next() returned -1 */
} kc_args_t;

/* Starts scanning argv[0..argc) (argv[0] is an option or operand, not a
 * program name).  operands holds at most max_operands pointers. */
void kc_args_init(kc_args_t *a, int argc, char **argv, char **operands,
                  int max_operands, int stop_at_operand);
/* The next option's id (its value in a->arg), 0 at the end (with
 * stop_at_operand: at the first operand, a->idx indexes it), -1 on an
 * unknown option, a missing value or too many operands (reason in
 * a->err). */
int kc_args_next(kc_args_t *a, const kc_opt_t *opts);

/* Whole decimal integer in [min, max]; 0 on success. */
int kc_parse_int(const char *s, long long min, long long max, long long *out);

/* A delimiter with C-like escapes: \n \r \t \0 \\ \a \b \e \f \v \xHH and
 * \NNN (octal).  Writes at most cap bytes to out, sets *len; returns 0, or
 * -1 if the text is empty, malformed or too long. */
int kc_parse_delim(const char *s, char *out, size_t cap, size_t *len);

/* Starting position of consume -o. */
typedef enum kc_pos_kind {
  KC_POS_TRIM_HORIZON,
  KC_POS_LATEST,
  KC_POS_AT_SEQ,
  KC_POS_AFTER_SEQ,
  KC_POS_TIMESTAMP
} kc_pos_kind_t;

typedef struct kc_pos {
  kc_pos_kind_t kind;
  const char *seq; /* points into the parsed text, for AT/AFTER */
  int64_t ts_ms;   /* for TIMESTAMP */
} kc_pos_t;

/* trim_horizon (also "beginning"), latest (also "end"), at:SEQ, after:SEQ,
 * ts:EPOCH_MS.  0 on success. */
int kc_parse_position(const char *s, kc_pos_t *pos);
/* The `initial.position` property value for a kind. */
const char *kc_position_name(kc_pos_kind_t kind);

/* Non-zero if s is a decimal sequence number (1 to 128 digits). */
int kc_is_sequence_number(const char *s);
/* Non-zero if s is a decimal hash key in [0, 2^128 - 1]. */
int kc_is_hash_key(const char *s);

/* Expands a bare shard number ("3") to "shardId-000000000003"; other text
 * is copied as is.  0 on success, -1 if it does not fit in cap. */
int kc_shard_id(const char *s, char *out, size_t cap);

#endif
