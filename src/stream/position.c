/* kn_position_t: constructors, comparison and the text form. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn/position.h"

/* Decimal digits without a leading zero (except "0"), short enough. */
static int valid_seq(const char *s, size_t n) {
  if (!s || n == 0 || n >= KN_POSITION_SEQ_MAX) return 0;
  if (s[0] == '0' && n > 1) return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

void kn_position_trim_horizon(kn_position_t *p) {
  memset(p, 0, sizeof(*p));
  p->kind = KN_POSITION_TRIM_HORIZON;
}

void kn_position_latest(kn_position_t *p) {
  memset(p, 0, sizeof(*p));
  p->kind = KN_POSITION_LATEST;
}

void kn_position_at_timestamp(kn_position_t *p, int64_t timestamp_ms) {
  memset(p, 0, sizeof(*p));
  p->kind = KN_POSITION_AT_TIMESTAMP;
  p->timestamp_ms = timestamp_ms;
}

static kn_err_t set_seq(kn_position_t *p, kn_position_kind_t kind,
                        const char *seq, size_t n, uint64_t subseq) {
  if (!valid_seq(seq, n)) return KN_ERR__INVALID_ARG;
  memset(p, 0, sizeof(*p));
  p->kind = kind;
  memcpy(p->seq, seq, n);
  p->subseq = subseq;
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_position_at(kn_position_t *p, const char *seq) {
  return set_seq(p, KN_POSITION_AT_SEQUENCE, seq, seq ? strlen(seq) : 0, 0);
}

kn_err_t kn_position_after(kn_position_t *p, const char *seq, uint64_t subseq) {
  return set_seq(p, KN_POSITION_AFTER, seq, seq ? strlen(seq) : 0, subseq);
}

int kn_position_equal(const kn_position_t *a, const kn_position_t *b) {
  if (a->kind != b->kind) return 0;
  switch (a->kind) {
    case KN_POSITION_AT_TIMESTAMP:
      return a->timestamp_ms == b->timestamp_ms;
    case KN_POSITION_AT_SEQUENCE:
      return strcmp(a->seq, b->seq) == 0;
    case KN_POSITION_AFTER:
      return strcmp(a->seq, b->seq) == 0 && a->subseq == b->subseq;
    default:
      return 1;
  }
}

size_t kn_position_format(const kn_position_t *p, char *buf, size_t size) {
  int n;
  switch (p->kind) {
    case KN_POSITION_TRIM_HORIZON:
      n = snprintf(buf, size, "trim_horizon");
      break;
    case KN_POSITION_LATEST:
      n = snprintf(buf, size, "latest");
      break;
    case KN_POSITION_AT_TIMESTAMP:
      n = snprintf(buf, size, "ts:%" PRId64, p->timestamp_ms);
      break;
    case KN_POSITION_AT_SEQUENCE:
      n = snprintf(buf, size, "at:%s", p->seq);
      break;
    case KN_POSITION_AFTER:
      n = snprintf(buf, size, "after:%s/%" PRIu64, p->seq, p->subseq);
      break;
    default:
      n = snprintf(buf, size, "?");
      break;
  }
  return n < 0 ? 0 : (size_t)n;
}

/* Parses all of s as an unsigned decimal of at most 20 digits. */
static int parse_u64(const char *s, uint64_t *out) {
  if (!*s || strlen(s) > 20) return -1;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    uint64_t d = (uint64_t)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

kn_err_t kn_position_parse(const char *text, kn_position_t *p) {
  if (!text) return KN_ERR__INVALID_ARG;
  if (strcmp(text, "trim_horizon") == 0) {
    kn_position_trim_horizon(p);
    return KN_ERR_NO_ERROR;
  }
  if (strcmp(text, "latest") == 0) {
    kn_position_latest(p);
    return KN_ERR_NO_ERROR;
  }
  uint64_t v;
  if (strncmp(text, "ts:", 3) == 0) {
    if (parse_u64(text + 3, &v) || v > INT64_MAX) return KN_ERR__INVALID_ARG;
    kn_position_at_timestamp(p, (int64_t)v);
    return KN_ERR_NO_ERROR;
  }
  if (strncmp(text, "at:", 3) == 0) return kn_position_at(p, text + 3);
  if (strncmp(text, "after:", 6) == 0) {
    const char *seq = text + 6, *slash = strchr(seq, '/');
    uint64_t sub = 0;
    if (slash && parse_u64(slash + 1, &sub)) return KN_ERR__INVALID_ARG;
    size_t n = slash ? (size_t)(slash - seq) : strlen(seq);
    return set_seq(p, KN_POSITION_AFTER, seq, n, sub);
  }
  return KN_ERR__INVALID_ARG;
}
