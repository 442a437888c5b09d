#include "util/base64.h"
#include "util/base64_simd.h"

#include <stdint.h>
#include <string.h>

static const char enc_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* dec[k][c]: the 6-bit value of character c at position k of a quad,
 * already shifted to its place in the 24-bit big-endian group; invalid
 * characters set bit 31 so one test per quad catches them. */
static uint32_t dec[4][256];
static uint16_t enc_pairs[4096]; /* 12 bits -> two characters */
static int tables_ready;

#define BAD 0x80000000u

static void build_tables(void) {
  for (int k = 0; k < 4; k++)
    for (int c = 0; c < 256; c++) dec[k][c] = BAD;
  for (int v = 0; v < 64; v++) {
    unsigned char c = (unsigned char)enc_alphabet[v];
    dec[0][c] = (uint32_t)v << 18;
    dec[1][c] = (uint32_t)v << 12;
    dec[2][c] = (uint32_t)v << 6;
    dec[3][c] = (uint32_t)v;
  }
  for (int i = 0; i < 4096; i++) {
    unsigned char pair[2] = {(unsigned char)enc_alphabet[i >> 6],
                             (unsigned char)enc_alphabet[i & 63]};
    memcpy(&enc_pairs[i], pair, 2);
  }
  __atomic_store_n(&tables_ready, 1, __ATOMIC_RELEASE);
}

static inline void ensure_tables(void) {
  /* Idempotent and race-free in effect: every thread writes the same
   * values, so a duplicate build is harmless. */
  if (!__atomic_load_n(&tables_ready, __ATOMIC_ACQUIRE)) build_tables();
}

/* The scalar encoder: the reference, and the finisher of what the vector
 * kernels leave (the last bytes, padding). */
static size_t encode_scalar(char *dst, const void *src, size_t n) {
  ensure_tables();
  const unsigned char *s = src;
  char *o = dst;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
    memcpy(o, &enc_pairs[v >> 12], 2);
    memcpy(o + 2, &enc_pairs[v & 4095], 2);
    o += 4;
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)s[i] << 16;
    *o++ = enc_alphabet[v >> 18];
    *o++ = enc_alphabet[(v >> 12) & 63];
    *o++ = '=';
    *o++ = '=';
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
    *o++ = enc_alphabet[v >> 18];
    *o++ = enc_alphabet[(v >> 12) & 63];
    *o++ = enc_alphabet[(v >> 6) & 63];
    *o++ = '=';
  }
  return (size_t)(o - dst);
}

/* The scalar decoder: the reference the vector kernels must match, and
 * the finisher of what they leave (the last quad, short inputs, a block
 * with an invalid character). */
static long decode_scalar(void *dst, const char *src, size_t n) {
  ensure_tables();
  if (n % 4) return -1;
  if (n == 0) return 0;
  const unsigned char *s = (const unsigned char *)src;
  unsigned char *o = dst;
  size_t full = n - 4; /* the last quad may carry padding */
  size_t i = 0;
  /* Two quads per round; every input byte is read before its place in
   * the output is written, which keeps in-place decoding correct. */
  for (; i + 8 <= full; i += 8) {
    uint32_t a =
        dec[0][s[i]] | dec[1][s[i + 1]] | dec[2][s[i + 2]] | dec[3][s[i + 3]];
    uint32_t b = dec[0][s[i + 4]] | dec[1][s[i + 5]] | dec[2][s[i + 6]] |
                 dec[3][s[i + 7]];
    if ((a | b) & BAD) return -1;
    o[0] = (unsigned char)(a >> 16);
    o[1] = (unsigned char)(a >> 8);
    o[2] = (unsigned char)a;
    o[3] = (unsigned char)(b >> 16);
    o[4] = (unsigned char)(b >> 8);
    o[5] = (unsigned char)b;
    o += 6;
  }
  for (; i < full; i += 4) {
    uint32_t a =
        dec[0][s[i]] | dec[1][s[i + 1]] | dec[2][s[i + 2]] | dec[3][s[i + 3]];
    if (a & BAD) return -1;
    o[0] = (unsigned char)(a >> 16);
    o[1] = (unsigned char)(a >> 8);
    o[2] = (unsigned char)a;
    o += 3;
  }
  /* Last quad: "xx==", "xxx=" or "xxxx". */
  unsigned char c0 = s[i], c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
  if (c3 == '=') {
    if (c2 == '=') {
      uint32_t a = dec[0][c0] | dec[1][c1];
      if (a & BAD) return -1; /* stray low bits are ignored */
      o[0] = (unsigned char)(a >> 16);
      o += 1;
    } else {
      uint32_t a = dec[0][c0] | dec[1][c1] | dec[2][c2];
      if (a & BAD) return -1;
      o[0] = (unsigned char)(a >> 16);
      o[1] = (unsigned char)(a >> 8);
      o += 2;
    }
  } else {
    uint32_t a = dec[0][c0] | dec[1][c1] | dec[2][c2] | dec[3][c3];
    if (a & BAD) return -1;
    o[0] = (unsigned char)(a >> 16);
    o[1] = (unsigned char)(a >> 8);
    o[2] = (unsigned char)a;
    o += 3;
  }
  return (long)(o - (unsigned char *)dst);
}

/* ---- Implementations ---- */

static int cpu_has(kn_base64_impl_t impl) {
  switch (impl) {
    case KN_BASE64_SCALAR:
      return 1;
#ifdef KN_B64_HAVE_X86
    case KN_BASE64_SSSE3:
      __builtin_cpu_init();
      return __builtin_cpu_supports("ssse3");
    case KN_BASE64_AVX2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2");
#endif
    default:
      return 0;
  }
}

int kn_base64_impl_supported(kn_base64_impl_t impl) { return cpu_has(impl); }

const char *kn_base64_impl_name(kn_base64_impl_t impl) {
  switch (impl) {
    case KN_BASE64_SCALAR:
      return "scalar";
    case KN_BASE64_SSSE3:
      return "ssse3";
    case KN_BASE64_AVX2:
      return "avx2";
    default:
      return "?";
  }
}

/* -1: not chosen yet.  Every thread would choose the same, so a race only
 * repeats the choice. */
static int best_impl = -1;

kn_base64_impl_t kn_base64_impl(void) {
  int b = __atomic_load_n(&best_impl, __ATOMIC_RELAXED);
  if (b < 0) {
    b = cpu_has(KN_BASE64_AVX2)    ? KN_BASE64_AVX2
        : cpu_has(KN_BASE64_SSSE3) ? KN_BASE64_SSSE3
                                   : KN_BASE64_SCALAR;
    __atomic_store_n(&best_impl, b, __ATOMIC_RELAXED);
  }
  return (kn_base64_impl_t)b;
}

long kn_base64_decode_with(kn_base64_impl_t impl, void *dst, const char *src,
                           size_t n) {
  if (n % 4) return -1;
  size_t done = 0;
#ifdef KN_B64_HAVE_X86
  if (impl == KN_BASE64_AVX2)
    done = kn_b64_dec_avx2(dst, src, n);
  else if (impl == KN_BASE64_SSSE3)
    done = kn_b64_dec_ssse3(dst, src, n);
#else
  (void)impl;
#endif
  if (done == 0) return decode_scalar(dst, src, n);
  /* The kernel stopped at its last whole block, or at one holding a
   * character outside the alphabet: the scalar decoder goes on from there
   * (in place too: the output is still behind the input). */
  long rest =
      decode_scalar((unsigned char *)dst + done / 4 * 3, src + done, n - done);
  return rest < 0 ? -1 : (long)(done / 4 * 3) + rest;
}

size_t kn_base64_decode_prefix(char *s, size_t avail) {
#ifdef KN_B64_HAVE_X86
  /* The kernels never read past avail and, in place, never write past
   * what they read; a block holding the string's closing quote (or an
   * escape, or padding) is not alphabet, so it stops them. */
  switch (kn_base64_impl()) {
    case KN_BASE64_AVX2:
      return kn_b64_dec_avx2((unsigned char *)s, s, avail);
    case KN_BASE64_SSSE3:
      return kn_b64_dec_ssse3((unsigned char *)s, s, avail);
    default:
      break;
  }
#endif
  (void)s;
  (void)avail;
  return 0;
}

size_t kn_base64_encode_with(kn_base64_impl_t impl, char *dst, const void *src,
                             size_t n) {
  size_t done = 0;
#ifdef KN_B64_HAVE_X86
  if (impl == KN_BASE64_AVX2)
    done = kn_b64_enc_avx2(dst, src, n);
  else if (impl == KN_BASE64_SSSE3)
    done = kn_b64_enc_ssse3(dst, src, n);
#else
  (void)impl;
#endif
  return done / 3 * 4 + encode_scalar(dst + done / 3 * 4,
                                      (const unsigned char *)src + done,
                                      n - done);
}

size_t kn_base64_encode(char *dst, const void *src, size_t n) {
  return kn_base64_encode_with(kn_base64_impl(), dst, src, n);
}

long kn_base64_decode(void *dst, const char *src, size_t n) {
  return kn_base64_decode_with(kn_base64_impl(), dst, src, n);
}
