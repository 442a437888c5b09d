#include "kinesis/hashkey.h"

#include <string.h>

#include "kn/client.h"
#include "util/crypto.h"

kn_u128_t kn_u128_add(kn_u128_t a, kn_u128_t b) {
  kn_u128_t r;
  r.lo = a.lo + b.lo;
  r.hi = a.hi + b.hi + (r.lo < a.lo);
  return r;
}

kn_u128_t kn_u128_sub(kn_u128_t a, kn_u128_t b) {
  kn_u128_t r;
  r.lo = a.lo - b.lo;
  r.hi = a.hi - b.hi - (a.lo < b.lo);
  return r;
}

/* v * 10 + d, or -1 on overflow.  Works on 32-bit limbs so that it needs
 * no 128-bit compiler type. */
static int mul10_add(kn_u128_t *v, unsigned d) {
  uint64_t limb[4] = {v->lo & 0xffffffffu, v->lo >> 32, v->hi & 0xffffffffu,
                      v->hi >> 32};
  uint64_t carry = d;
  for (int i = 0; i < 4; i++) {
    uint64_t x = limb[i] * 10 + carry;
    limb[i] = x & 0xffffffffu;
    carry = x >> 32;
  }
  if (carry) return -1;
  v->lo = limb[1] << 32 | limb[0];
  v->hi = limb[3] << 32 | limb[2];
  return 0;
}

int kn_u128_parse(const char *s, size_t n, kn_u128_t *out) {
  if (!s || n == 0) return -1;
  kn_u128_t v = {0, 0};
  for (size_t i = 0; i < n; i++) {
    unsigned d = (unsigned char)s[i] - '0';
    if (d > 9 || mul10_add(&v, d)) return -1;
  }
  *out = v;
  return 0;
}

/* v / div in place on 32-bit limbs; returns the remainder. */
static uint32_t divmod_u32(kn_u128_t *v, uint32_t div) {
  uint64_t limb[4] = {v->hi >> 32, v->hi & 0xffffffffu, v->lo >> 32,
                      v->lo & 0xffffffffu};
  uint64_t rem = 0;
  for (int i = 0; i < 4; i++) {
    uint64_t x = rem << 32 | limb[i];
    limb[i] = x / div;
    rem = x % div;
  }
  v->hi = limb[0] << 32 | limb[1];
  v->lo = limb[2] << 32 | limb[3];
  return (uint32_t)rem;
}

size_t kn_u128_format(kn_u128_t v, char *buf) {
  char tmp[KN_U128_DEC_BUFSZ];
  size_t n = 0;
  /* Nine digits per division keeps the loop short. */
  do {
    uint32_t chunk = divmod_u32(&v, 1000000000u);
    int last = v.hi == 0 && v.lo == 0;
    for (int i = 0; i < 9 && (!last || chunk); i++) {
      tmp[n++] = (char)('0' + chunk % 10);
      chunk /= 10;
    }
  } while (v.hi || v.lo);
  if (n == 0) tmp[n++] = '0';
  for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
  return n;
}

kn_u128_t kn_hashkey_of(const void *key, size_t n) {
  uint8_t d[KN_MD5_LEN];
  kn_md5(key, n, d);
  kn_u128_t v = {0, 0};
  for (int i = 0; i < 8; i++) v.hi = v.hi << 8 | d[i];
  for (int i = 8; i < 16; i++) v.lo = v.lo << 8 | d[i];
  return v;
}

int kn_u128_midpoint(kn_u128_t start, kn_u128_t end, kn_u128_t *out) {
  if (kn_u128_cmp(start, end) >= 0) return -1;
  kn_u128_t d = kn_u128_sub(end, start);
  /* ceil(d / 2) without overflowing d + 1 at the full range. */
  kn_u128_t half = {d.hi >> 1, d.lo >> 1 | d.hi << 63};
  half = kn_u128_add(half, kn_u128_make(0, d.lo & 1));
  *out = kn_u128_add(start, half);
  return 0;
}

char *kn_partition_key_hash(const char *partition_key, char *buf) {
  const char *k = partition_key ? partition_key : "";
  kn_u128_format(kn_hashkey_of(k, strlen(k)), buf);
  return buf;
}
