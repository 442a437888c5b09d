/* 128-bit hash keys as 16 big-endian bytes, and their decimal form.
 * Byte-wise arithmetic keeps this portable (no __int128) and it runs once
 * per key table entry, never per byte of payload. */
#include <string.h>

#include "agg/agg.h"
#include "util/crypto.h"

int kn_agg_hashkey_parse(const char *s, size_t len, uint8_t out[KN_HASHKEY_LEN]) {
  uint8_t v[KN_HASHKEY_LEN] = {0};
  if (len == 0) return -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    unsigned carry = (unsigned)(s[i] - '0');
    for (int j = KN_HASHKEY_LEN - 1; j >= 0; j--) {
      unsigned x = v[j] * 10u + carry;
      v[j] = (uint8_t)x;
      carry = x >> 8;
    }
    if (carry) return -1; /* above 2^128 - 1 */
  }
  memcpy(out, v, KN_HASHKEY_LEN);
  return 0;
}

size_t kn_agg_hashkey_format(const uint8_t hk[KN_HASHKEY_LEN],
                             char out[KN_HASHKEY_DEC_MAX]) {
  uint8_t v[KN_HASHKEY_LEN];
  char rev[KN_HASHKEY_DEC_MAX];
  size_t n = 0;
  int nonzero;
  memcpy(v, hk, KN_HASHKEY_LEN);
  do { /* divide by 10, collecting remainders least significant first */
    unsigned rem = 0;
    nonzero = 0;
    for (int j = 0; j < KN_HASHKEY_LEN; j++) {
      unsigned x = (rem << 8) | v[j];
      v[j] = (uint8_t)(x / 10);
      rem = x % 10;
      nonzero |= v[j];
    }
    rev[n++] = (char)('0' + rem);
  } while (nonzero);
  for (size_t i = 0; i < n; i++) out[i] = rev[n - 1 - i];
  out[n] = '\0';
  return n;
}

void kn_agg_hashkey_of_pkey(const void *pkey, size_t len,
                            uint8_t out[KN_HASHKEY_LEN]) {
  kn_md5(pkey, len, out);
}
