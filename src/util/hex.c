#include "util/hex.h"

static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void kn_hex_encode(char *dst, const void *src, size_t n) {
  static const char digits[] = "0123456789abcdef";
  const unsigned char *s = src;
  for (size_t i = 0; i < n; i++) {
    dst[2 * i] = digits[s[i] >> 4];
    dst[2 * i + 1] = digits[s[i] & 15];
  }
  dst[2 * n] = '\0';
}

int kn_hex_decode(void *dst, const char *src, size_t n) {
  unsigned char *d = dst;
  for (size_t i = 0; i < n; i++) {
    int hi = hex_val(src[2 * i]), lo = hex_val(src[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    d[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}
