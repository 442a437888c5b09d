/* CRC-32 by carry-less multiplication (see crc32.h).
 *
 * The method is the one V. Gopal et al. describe ("Fast CRC Computation
 * for Generic Polynomials Using PCLMULQDQ Instruction", Intel, 2009), for
 * the bit-reflected polynomial: four 128-bit lanes are each folded forward
 * over 512 bits (x^(512+-32) mod P), then into one lane (x^(128+-32) mod
 * P), which is reduced to 64 and 32 bits and finished by a Barrett
 * reduction.  The constants are those powers of x mod P, bit-reflected.
 * The kernel is compiled for its instruction set only (a target
 * attribute) and called only after the CPU was seen to support it. */
#include "util/crc32.h"

#include <zlib.h>

uint32_t kn_crc32_zlib(uint32_t crc, const void *p, size_t n) {
  const unsigned char *b = p;
  /* zlib takes uInt lengths. */
  while (n) {
    uInt k = n > 0x40000000u ? 0x40000000u : (uInt)n;
    crc = (uint32_t)crc32(crc, b, k);
    b += k;
    n -= k;
  }
  return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define KN_CRC_HAVE_CLMUL 1
#include <immintrin.h>

#define CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

CLMUL_TARGET static inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
  __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

#define LOAD(q) _mm_loadu_si128((const __m128i *)(const void *)(q))

/* n >= 64 and a multiple of 16. */
CLMUL_TARGET static uint32_t crc_clmul(uint32_t crc, const unsigned char *p,
                                       size_t n) {
  const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
  const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
  const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  __m128i x0 = _mm_xor_si128(LOAD(p), _mm_cvtsi32_si128((int)~crc));
  __m128i x1 = LOAD(p + 16), x2 = LOAD(p + 32), x3 = LOAD(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    x0 = fold(x0, k1k2, LOAD(p));
    x1 = fold(x1, k1k2, LOAD(p + 16));
    x2 = fold(x2, k1k2, LOAD(p + 32));
    x3 = fold(x3, k1k2, LOAD(p + 48));
  }
  x0 = fold(x0, k3k4, x1);
  x0 = fold(x0, k3k4, x2);
  x0 = fold(x0, k3k4, x3);
  for (; n >= 16; p += 16, n -= 16) x0 = fold(x0, k3k4, LOAD(p));
  /* 128 bits to 64, then to 32 (each fold appends 32 zero bits). */
  __m128i t = _mm_clmulepi64_si128(x0, k3k4, 0x10);
  x0 = _mm_xor_si128(_mm_srli_si128(x0, 8), t);
  t = _mm_srli_si128(x0, 4);
  x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), k5, 0x00);
  x0 = _mm_xor_si128(x0, t);
  /* Barrett reduction to the 32-bit remainder. */
  t = x0;
  x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), poly, 0x10);
  x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), poly, 0x00);
  x0 = _mm_xor_si128(x0, t);
  return ~(uint32_t)_mm_extract_epi32(x0, 1);
}

static int clmul_supported(void) {
  static int known = -1;
  if (known < 0) {
    __builtin_cpu_init();
    known =
        __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }
  return known;
}
#endif

uint32_t kn_crc32(uint32_t crc, const void *p, size_t n) {
#ifdef KN_CRC_HAVE_CLMUL
  if (n >= 64 && clmul_supported()) {
    size_t bulk = n & ~(size_t)15;
    crc = crc_clmul(crc, p, bulk);
    return kn_crc32_zlib(crc, (const unsigned char *)p + bulk, n - bulk);
  }
#endif
  return kn_crc32_zlib(crc, p, n);
}
