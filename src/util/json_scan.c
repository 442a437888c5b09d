#include "util/json_scan.h"

#include <stdint.h>
#include <string.h>

const char *kn_json_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
}

/* Word-at-a-time test for a byte that ends a run of plain string bytes:
 * '"', '\\' or a control byte (the classic "has zero byte" trick). */
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
static int word_special(uint64_t v) {
  uint64_t q = v ^ (ONES * '"'), b = v ^ (ONES * '\\');
  uint64_t t = ((q - ONES) & ~q) | ((b - ONES) & ~b) | (v - ONES * 0x20);
  return (t & ~v & HIGHS) != 0;
}

const char *kn_json_skip_string(const char *p, const char *end, int *escaped) {
  if (escaped) *escaped = 0;
  if (p >= end || *p != '"') return NULL;
  p++;
  for (;;) {
    /* Long runs of plain bytes (base64 record data) dominate. */
    while (end - p >= 8) {
      uint64_t v;
      memcpy(&v, p, 8);
      if (word_special(v)) break;
      p += 8;
    }
    if (p >= end) return NULL;
    unsigned char c = (unsigned char)*p;
    if (c == '"') return p + 1;
    if (c < 0x20) return NULL;
    if (c != '\\') {
      p++;
      continue;
    }
    if (escaped) *escaped = 1;
    if (++p >= end) return NULL;
    switch (*p) {
      case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r':
      case 't':
        break;
      case 'u':
        if (end - p < 5 || !is_hex(p[1]) || !is_hex(p[2]) || !is_hex(p[3]) ||
            !is_hex(p[4]))
          return NULL;
        p += 4;
        break;
      default:
        return NULL;
    }
    p++;
  }
}

static const char *skip_number(const char *p, const char *end) {
  if (p < end && *p == '-') p++;
  if (p >= end) return NULL;
  if (*p == '0') {
    p++;
  } else if (*p >= '1' && *p <= '9') {
    while (p < end && *p >= '0' && *p <= '9') p++;
  } else {
    return NULL;
  }
  if (p < end && *p == '.') {
    p++;
    if (p >= end || *p < '0' || *p > '9') return NULL;
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || *p < '0' || *p > '9') return NULL;
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  return p;
}

static const char *skip_word(const char *p, const char *end, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(end - p) < n || memcmp(p, w, n) != 0) return NULL;
  return p + n;
}

static const char *skip_value(const char *p, const char *end, int depth);

/* p at '[' or '{'. */
static const char *skip_container(const char *p, const char *end, int depth,
                                  size_t *count) {
  char close = *p == '[' ? ']' : '}';
  int object = close == '}';
  size_t n = 0;
  if (depth >= KN_JSON_MAX_DEPTH) return NULL;
  p = kn_json_ws(p + 1, end);
  if (p < end && *p == close) {
    if (count) *count = 0;
    return p + 1;
  }
  for (;;) {
    if (object) {
      p = kn_json_skip_string(p, end, NULL);
      if (!p) return NULL;
      p = kn_json_ws(p, end);
      if (p >= end || *p != ':') return NULL;
      p = kn_json_ws(p + 1, end);
    }
    p = skip_value(p, end, depth + 1);
    if (!p) return NULL;
    n++;
    p = kn_json_ws(p, end);
    if (p >= end) return NULL;
    if (*p == close) break;
    if (*p != ',') return NULL;
    p = kn_json_ws(p + 1, end);
  }
  if (count) *count = n;
  return p + 1;
}

static const char *skip_value(const char *p, const char *end, int depth) {
  if (p >= end) return NULL;
  switch (*p) {
    case '"': return kn_json_skip_string(p, end, NULL);
    case '{':
    case '[': return skip_container(p, end, depth, NULL);
    case 't': return skip_word(p, end, "true");
    case 'f': return skip_word(p, end, "false");
    case 'n': return skip_word(p, end, "null");
    default: return skip_number(p, end);
  }
}

const char *kn_json_skip_value(const char *p, const char *end) {
  return skip_value(p, end, 0);
}

const char *kn_json_skip_array(const char *p, const char *end, size_t *count) {
  if (p >= end || *p != '[') return NULL;
  return skip_container(p, end, 0, count);
}
