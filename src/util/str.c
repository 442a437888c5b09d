#include "util/str.h"

#include "kn/error.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *kn_vasprintf(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (!s) return NULL;
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

char *kn_asprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = kn_vasprintf(fmt, ap);
  va_end(ap);
  return s;
}

char *kn_strndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *kn_strdup0(const char *s) { return s ? strdup(s) : NULL; }

size_t kn_strlcpy(char *dst, const char *src, size_t size) {
  size_t n = strlen(src);
  if (size) {
    size_t c = n < size - 1 ? n : size - 1;
    memcpy(dst, src, c);
    dst[c] = '\0';
  }
  return n;
}

int kn_str_has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

int kn_str_ieq(const char *a, const char *b) { return strcasecmp(a, b) == 0; }

int kn_str_to_bool(const char *s) {
  static const char *yes[] = {"true", "1", "yes", "on"};
  static const char *no[] = {"false", "0", "no", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (kn_str_ieq(s, yes[i])) return 1;
    if (kn_str_ieq(s, no[i])) return 0;
  }
  return -1;
}

int kn_str_to_i64(const char *s, long long min, long long max, long long *out) {
  if (!s || !*s || isspace((unsigned char)*s)) return -1;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

char *kn_str_trim(char *s) {
  char *b = s;
  while (*b && isspace((unsigned char)*b)) b++;
  size_t n = strlen(b);
  while (n && isspace((unsigned char)b[n - 1])) n--;
  memmove(s, b, n);
  s[n] = '\0';
  return s;
}

/* Length of the valid UTF-8 sequence at s (NUL-terminated), 0 if none;
 * reads no byte past a NUL. */
static size_t utf8_at(const unsigned char *s) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return (s[1] & 0xC0) == 0x80 ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0)) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
      return 0;
    if ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90)) return 0;
    return 4;
  }
  return 0;
}

/* A terminal may act on these: C0, DEL, C1 (U+0080..U+009F) and the
 * Unicode direction marks, embeddings, overrides and isolates. */
static int is_control(const unsigned char *s, size_t k) {
  if (k == 1) return s[0] < 0x20 || s[0] == 0x7f;
  if (k == 2) return s[0] == 0xC2 && s[1] < 0xA0;
  if (k == 3 && s[0] == 0xE2 && s[1] == 0x80)
    return s[2] == 0x8E || s[2] == 0x8F || (s[2] >= 0xAA && s[2] <= 0xAE);
  if (k == 3 && s[0] == 0xE2 && s[1] == 0x81)
    return s[2] >= 0xA6 && s[2] <= 0xA9;
  return 0;
}

size_t kn_text_sanitize(char *text) {
  if (!text) return 0;
  unsigned char *s = (unsigned char *)text, *d = s;
  while (*s) {
    size_t k = utf8_at(s);
    if (!k || is_control(s, k)) {
      *d++ = *s == '\t' || *s == '\n' || *s == '\r' ? ' ' : '?';
      s += k ? k : 1;
      continue;
    }
    memmove(d, s, k);
    d += k;
    s += k;
  }
  *d = '\0';
  return (size_t)(d - (unsigned char *)text);
}

long kn_utf8_count(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  long count = 0;
  while (p < end) {
    unsigned c = *p;
    size_t len;
    unsigned min;
    if (c < 0x80) {
      p++;
      count++;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, c &= 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, c &= 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, c &= 0x07;
    } else {
      return -1;
    }
    if ((size_t)(end - p) < len) return -1;
    for (size_t i = 1; i < len; i++) {
      if ((p[i] & 0xC0) != 0x80) return -1;
      c = (c << 6) | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return -1;
    p += len;
    count++;
  }
  return count;
}

size_t kn_sorted_find(const void *v, size_t n, size_t size, size_t off,
                      const char *key, int *found) {
  size_t lo = 0, hi = n;
  *found = 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const char *k;
    memcpy(&k, (const char *)v + mid * size + off, sizeof(k));
    int c = strcmp(k, key);
    if (c == 0) {
      *found = 1;
      return mid;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}
