#include "util/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kn_buf_reserve(kn_buf_t *b, size_t more) {
  if (b->cap - b->len >= more && b->p) return 0;
  if (more > SIZE_MAX / 2 - b->len) return -1;
  size_t need = b->len + more;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  char *p = realloc(b->p, cap + 1);
  if (!p) return -1;
  b->p = p;
  b->cap = cap;
  b->p[b->len] = '\0';
  return 0;
}

int kn_buf_append(kn_buf_t *b, const void *data, size_t n) {
  if (kn_buf_reserve(b, n)) return -1;
  if (n) memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

int kn_buf_append_str(kn_buf_t *b, const char *s) {
  return kn_buf_append(b, s, strlen(s));
}

int kn_buf_append_char(kn_buf_t *b, char c) { return kn_buf_append(b, &c, 1); }

int kn_buf_printf(kn_buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char tmp[256];
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(tmp, sizeof(tmp), fmt, ap2);
  va_end(ap2);
  int rc = -1;
  if (n >= 0 && (size_t)n < sizeof(tmp)) {
    rc = kn_buf_append(b, tmp, (size_t)n);
  } else if (n >= 0 && kn_buf_reserve(b, (size_t)n) == 0) {
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    rc = 0;
  }
  va_end(ap);
  return rc;
}

int kn_buf_append_json_str(kn_buf_t *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  /* Worst case every byte becomes \u00XX. */
  if (n > (SIZE_MAX - 2) / 6 || kn_buf_reserve(b, n * 6 + 2)) return -1;
  char *o = b->p + b->len;
  *o++ = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
    } else if (c < 0x20) {
      *o++ = '\\';
      switch (c) {
        case '\n':
          *o++ = 'n';
          break;
        case '\r':
          *o++ = 'r';
          break;
        case '\t':
          *o++ = 't';
          break;
        case '\b':
          *o++ = 'b';
          break;
        case '\f':
          *o++ = 'f';
          break;
        default:
          *o++ = 'u';
          *o++ = '0';
          *o++ = '0';
          *o++ = hex[c >> 4];
          *o++ = hex[c & 15];
      }
    } else {
      *o++ = (char)c;
    }
  }
  *o++ = '"';
  b->len = (size_t)(o - b->p);
  b->p[b->len] = '\0';
  return 0;
}

void kn_buf_reset(kn_buf_t *b) {
  b->len = 0;
  if (b->p) b->p[0] = '\0';
}

char *kn_buf_steal(kn_buf_t *b, size_t *len) {
  char *p = b->p;
  if (len) *len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return p;
}

void kn_buf_free(kn_buf_t *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}
