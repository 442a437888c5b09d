/* Hash keys: unsigned 128-bit integers.  A record goes to the shard whose
 * [StartingHashKey, EndingHashKey] holds the MD5 of its partition key read
 * as a big-endian integer (or its explicit hash key).  Pure functions. */
#ifndef KN_KINESIS_HASHKEY_H
#define KN_KINESIS_HASHKEY_H

#include <stddef.h>
#include <stdint.h>

typedef struct kn_u128 {
  uint64_t hi, lo;
} kn_u128_t;

/* Decimal digits of 2^128-1, and a buffer size that holds them. */
#define KN_U128_DEC_MAX 39
#define KN_U128_DEC_BUFSZ 40

static inline kn_u128_t kn_u128_make(uint64_t hi, uint64_t lo) {
  kn_u128_t v = {hi, lo};
  return v;
}
static inline int kn_u128_cmp(kn_u128_t a, kn_u128_t b) {
  if (a.hi != b.hi) return a.hi < b.hi ? -1 : 1;
  return (a.lo > b.lo) - (a.lo < b.lo);
}
static inline int kn_u128_eq(kn_u128_t a, kn_u128_t b) {
  return a.hi == b.hi && a.lo == b.lo;
}
/* Wrapping arithmetic modulo 2^128. */
kn_u128_t kn_u128_add(kn_u128_t a, kn_u128_t b);
kn_u128_t kn_u128_sub(kn_u128_t a, kn_u128_t b);

/* Parses s[0..n) as a decimal integer in 0 .. 2^128-1: digits only, at
 * least one (leading zeros allowed).  Returns 0, or -1 when empty, not a
 * number or too large. */
int kn_u128_parse(const char *s, size_t n, kn_u128_t *out);
/* Writes the decimal form and a terminator into buf (KN_U128_DEC_BUFSZ
 * bytes); returns the number of digits. */
size_t kn_u128_format(kn_u128_t v, char *buf);

/* MD5 of the bytes, as a big-endian integer. */
kn_u128_t kn_hashkey_of(const void *key, size_t n);

/* Non-zero if start <= v <= end. */
static inline int kn_u128_in_range(kn_u128_t v, kn_u128_t start,
                                   kn_u128_t end) {
  return kn_u128_cmp(start, v) <= 0 && kn_u128_cmp(v, end) <= 0;
}

/* The default split point of [start, end]: the first key of the upper
 * half, start + ceil((end - start) / 2), so both halves are non-empty and
 * the whole space splits at 2^127.  Returns -1 when the range holds fewer
 * than two keys (it cannot be split). */
int kn_u128_midpoint(kn_u128_t start, kn_u128_t end, kn_u128_t *out);

#endif
