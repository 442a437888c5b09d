#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kc_args_init(kc_args_t *a, int argc, char **argv, char **operands,
                  int max_operands, int stop_at_operand) {
  memset(a, 0, sizeof(*a));
  a->argc = argc;
  a->argv = argv;
  a->operands = operands;
  a->max_operands = max_operands;
  a->stop_at_operand = stop_at_operand;
}

static const kc_opt_t *find_short(const kc_opt_t *opts, char c) {
  for (; opts->id; opts++)
    if (opts->short_name == c) return opts;
  return NULL;
}

static const kc_opt_t *find_long(const kc_opt_t *opts, const char *name,
                                 size_t len) {
  for (; opts->id; opts++)
    if (opts->long_name && strlen(opts->long_name) == len &&
        memcmp(opts->long_name, name, len) == 0)
      return opts;
  return NULL;
}

static int scan_short(kc_args_t *a, const kc_opt_t *opts) {
  char c = *a->cluster++;
  const kc_opt_t *o = find_short(opts, c);
  if (!o) {
    snprintf(a->err, sizeof(a->err), "unknown option -%c", c);
    a->cluster = NULL;
    return -1;
  }
  if (o->has_arg) {
    if (*a->cluster) { /* -c10 */
      a->arg = a->cluster;
    } else if (a->idx < a->argc) {
      a->arg = a->argv[a->idx++];
    } else {
      snprintf(a->err, sizeof(a->err), "option -%c needs a value", c);
      a->cluster = NULL;
      return -1;
    }
    a->cluster = NULL;
  } else if (!*a->cluster) {
    a->cluster = NULL;
  }
  return o->id;
}

static int scan_long(kc_args_t *a, const kc_opt_t *opts, const char *s) {
  const char *eq = strchr(s, '=');
  size_t len = eq ? (size_t)(eq - s) : strlen(s);
  const kc_opt_t *o = find_long(opts, s, len);
  if (!o) {
    snprintf(a->err, sizeof(a->err), "unknown option --%.*s", (int)len, s);
    return -1;
  }
  if (!o->has_arg) {
    if (eq) {
      snprintf(a->err, sizeof(a->err), "option --%s takes no value",
               o->long_name);
      return -1;
    }
    return o->id;
  }
  if (eq) {
    a->arg = eq + 1;
  } else if (a->idx < a->argc) {
    a->arg = a->argv[a->idx++];
  } else {
    snprintf(a->err, sizeof(a->err), "option --%s needs a value", o->long_name);
    return -1;
  }
  return o->id;
}

int kc_args_next(kc_args_t *a, const kc_opt_t *opts) {
  a->arg = NULL;
  if (a->cluster) return scan_short(a, opts);
  while (a->idx < a->argc) {
    char *s = a->argv[a->idx];
    /* "-" alone is an operand (standard input), as is everything after
     * "--" and, when scanning global options, the command name. */
    if (a->operands_only || s[0] != '-' || s[1] == '\0') {
      if (a->stop_at_operand) return 0;
      if (a->n_operands == a->max_operands) {
        snprintf(a->err, sizeof(a->err), "unexpected argument \"%s\"", s);
        return -1;
      }
      a->operands[a->n_operands++] = s;
      a->idx++;
      continue;
    }
    a->idx++;
    if (s[1] == '-') {
      if (s[2] == '\0') {
        a->operands_only = 1;
        continue;
      }
      return scan_long(a, opts, s + 2);
    }
    a->cluster = s + 1;
    return scan_short(a, opts);
  }
  return 0;
}

int kc_parse_int(const char *s, long long min, long long max, long long *out) {
  if (!s || !*s) return -1;
  const char *p = s;
  if (*p == '-' || *p == '+') p++;
  if (*p < '0' || *p > '9') return -1; /* strtoll would skip spaces */
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int kc_parse_delim(const char *s, char *out, size_t cap, size_t *len) {
  size_t n = 0;
  while (*s) {
    int c = (unsigned char)*s++;
    if (c == '\\') {
      char e = *s++;
      switch (e) {
        case 'n':
          c = '\n';
          break;
        case 'r':
          c = '\r';
          break;
        case 't':
          c = '\t';
          break;
        case 'a':
          c = '\a';
          break;
        case 'b':
          c = '\b';
          break;
        case 'e':
          c = 0x1b;
          break;
        case 'f':
          c = '\f';
          break;
        case 'v':
          c = '\v';
          break;
        case '\\':
          c = '\\';
          break;
        case 'x': {
          int h1 = hexval(*s);
          if (h1 < 0) return -1;
          s++;
          c = h1;
          int h2 = hexval(*s);
          if (h2 >= 0) {
            s++;
            c = c * 16 + h2;
          }
          break;
        }
        default:
          if (e >= '0' && e <= '7') { /* \0, \036, \177 */
            c = e - '0';
            for (int i = 0; i < 2 && *s >= '0' && *s <= '7'; i++)
              c = c * 8 + (*s++ - '0');
            if (c > 255) return -1;
            break;
          }
          return -1; /* unknown escape or a trailing backslash */
      }
    }
    if (n >= cap) return -1;
    out[n++] = (char)c;
  }
  if (n == 0) return -1;
  *len = n;
  return 0;
}

int kc_is_sequence_number(const char *s) {
  size_t n = 0;
  for (; s[n]; n++)
    if (s[n] < '0' || s[n] > '9') return 0;
  return n >= 1 && n <= 128;
}

int kc_is_hash_key(const char *s) {
  static const char max[] = "340282366920938463463374607431768211455";
  size_t n = 0;
  for (; s[n]; n++)
    if (s[n] < '0' || s[n] > '9') return 0;
  if (n == 0) return 0;
  /* Compare without leading zeros so "007" is fine. */
  while (n > 1 && *s == '0') s++, n--;
  if (n != sizeof(max) - 1) return n < sizeof(max) - 1;
  return strcmp(s, max) <= 0;
}

int kc_parse_position(const char *s, kc_pos_t *pos) {
  memset(pos, 0, sizeof(*pos));
  if (!strcmp(s, "trim_horizon") || !strcmp(s, "beginning")) {
    pos->kind = KC_POS_TRIM_HORIZON;
    return 0;
  }
  if (!strcmp(s, "latest") || !strcmp(s, "end")) {
    pos->kind = KC_POS_LATEST;
    return 0;
  }
  if (!strncmp(s, "at:", 3) || !strncmp(s, "after:", 6)) {
    pos->kind = s[1] == 't' ? KC_POS_AT_SEQ : KC_POS_AFTER_SEQ;
    pos->seq = strchr(s, ':') + 1;
    return kc_is_sequence_number(pos->seq) ? 0 : -1;
  }
  if (!strncmp(s, "ts:", 3)) {
    long long ms;
    if (kc_parse_int(s + 3, 0, INT64_MAX, &ms)) return -1;
    pos->kind = KC_POS_TIMESTAMP;
    pos->ts_ms = ms;
    return 0;
  }
  return -1;
}

const char *kc_position_name(kc_pos_kind_t kind) {
  switch (kind) {
    case KC_POS_LATEST:
      return "latest";
    case KC_POS_AT_SEQ:
      return "at_sequence";
    case KC_POS_AFTER_SEQ:
      return "after_sequence";
    case KC_POS_TIMESTAMP:
      return "at_timestamp";
    default:
      return "trim_horizon";
  }
}

int kc_shard_id(const char *s, char *out, size_t cap) {
  long long n;
  int w;
  if (kc_parse_int(s, 0, 999999999999LL, &n) == 0 && s[0] != '-' && s[0] != '+')
    w = snprintf(out, cap, "shardId-%012lld", n);
  else
    w = snprintf(out, cap, "%s", s);
  return w < 0 || (size_t)w >= cap ? -1 : 0;
}
