/* Base64 decoding with SSSE3 and AVX2 (see base64_simd.h).
 *
 * The method is the one W. Muła and D. Lemire describe ("Faster Base64
 * Encoding and Decoding Using AVX2 Instructions", 2018): classify every
 * character by its two nibbles with two table shuffles, whose AND is
 * non-zero exactly for characters outside the alphabet; turn characters
 * into 6-bit values by adding an offset chosen by the high nibble; pack
 * four 6-bit values into three bytes with two multiply-adds and a
 * shuffle.  The functions are compiled for their instruction set only
 * (target attributes), so the rest of the library needs no special flags,
 * and are called only after the CPU was seen to support it. */
#include "util/base64_simd.h"

#ifdef KN_B64_HAVE_X86

#include <immintrin.h>

/* Classes of the high nibble, as bits; lo_flags below says which low
 * nibbles are invalid within each class:
 *   0x01  0x0_, 0x1_, 0x8_ .. 0xF_   every byte invalid
 *   0x02  0x2_                       only '+' (0x2B) and '/' (0x2F) valid
 *   0x04  0x3_                       digits 0x30 .. 0x39 valid
 *   0x08  0x4_, 0x6_                 0x40 and 0x60 invalid
 *   0x10  0x5_, 0x7_                 0x5B .. 0x5F, 0x7B .. 0x7F invalid */
#define HI_FLAGS                                                          \
  0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x08, 0x10, 0x01, 0x01, 0x01, 0x01, \
      0x01, 0x01, 0x01, 0x01
#define LO_FLAGS                                                          \
  0x0B, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x07, 0x15, \
      0x17, 0x17, 0x17, 0x15
/* What to add to a character to get its value, indexed by its high
 * nibble, except that '/' (which shares 0x2_ with '+') uses index 1. */
#define ROLL 0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0
/* After the multiply-adds each 32-bit lane holds 24 bits, little-endian:
 * take its three bytes high first. */
#define PACK 2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1

__attribute__((target("ssse3"))) size_t kn_b64_dec_ssse3(unsigned char *dst,
                                                         const char *src,
                                                         size_t n) {
  const __m128i hi_lut = _mm_setr_epi8(HI_FLAGS);
  const __m128i lo_lut = _mm_setr_epi8(LO_FLAGS);
  const __m128i roll_lut = _mm_setr_epi8(ROLL);
  const __m128i pack = _mm_setr_epi8(PACK);
  const __m128i nib = _mm_set1_epi8(0x0f), slash = _mm_set1_epi8('/');
  const __m128i zero = _mm_setzero_si128();
  size_t i = 0;
  unsigned char *o = dst;
  /* 16 characters in, 16 bytes stored (12 meant): the store stays within
   * n / 4 * 3 while i + 24 <= n, and the last quad is never read.  In
   * place, the store ends before the next block's characters. */
  for (; i + 24 <= n; i += 16, o += 12) {
    __m128i in = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
    __m128i hi = _mm_and_si128(_mm_srli_epi32(in, 4), nib);
    __m128i lo = _mm_and_si128(in, nib);
    __m128i bad = _mm_and_si128(_mm_shuffle_epi8(lo_lut, lo),
                                _mm_shuffle_epi8(hi_lut, hi));
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(bad, zero)) != 0xFFFF) break;
    __m128i roll =
        _mm_shuffle_epi8(roll_lut, _mm_add_epi8(_mm_cmpeq_epi8(in, slash), hi));
    __m128i v = _mm_add_epi8(in, roll);
    /* Pairs of 6-bit values into 12 bits, pairs of those into 24. */
    v = _mm_maddubs_epi16(v, _mm_set1_epi32(0x01400140));
    v = _mm_madd_epi16(v, _mm_set1_epi32(0x00011000));
    v = _mm_shuffle_epi8(v, pack);
    _mm_storeu_si128((__m128i *)(void *)o, v);
  }
  return i;
}

__attribute__((target("avx2"))) size_t kn_b64_dec_avx2(unsigned char *dst,
                                                       const char *src,
                                                       size_t n) {
  const __m256i hi_lut = _mm256_setr_epi8(HI_FLAGS, HI_FLAGS);
  const __m256i lo_lut = _mm256_setr_epi8(LO_FLAGS, LO_FLAGS);
  const __m256i roll_lut = _mm256_setr_epi8(ROLL, ROLL);
  const __m256i pack = _mm256_setr_epi8(PACK, PACK);
  /* The two lanes' 12 bytes side by side. */
  const __m256i join = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7);
  const __m256i nib = _mm256_set1_epi8(0x0f), slash = _mm256_set1_epi8('/');
  size_t i = 0;
  unsigned char *o = dst;
  /* 32 characters in, 32 bytes stored (24 meant): within n / 4 * 3 while
   * i + 44 <= n; the rest goes to the scalar decoder. */
  for (; i + 44 <= n; i += 32, o += 24) {
    __m256i in = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
    __m256i hi = _mm256_and_si256(_mm256_srli_epi32(in, 4), nib);
    __m256i lo = _mm256_and_si256(in, nib);
    if (!_mm256_testz_si256(_mm256_shuffle_epi8(lo_lut, lo),
                            _mm256_shuffle_epi8(hi_lut, hi)))
      break;
    __m256i roll = _mm256_shuffle_epi8(
        roll_lut, _mm256_add_epi8(_mm256_cmpeq_epi8(in, slash), hi));
    __m256i v = _mm256_add_epi8(in, roll);
    v = _mm256_maddubs_epi16(v, _mm256_set1_epi32(0x01400140));
    v = _mm256_madd_epi16(v, _mm256_set1_epi32(0x00011000));
    v = _mm256_shuffle_epi8(v, pack);
    v = _mm256_permutevar8x32_epi32(v, join);
    _mm256_storeu_si256((__m256i *)(void *)o, v);
  }
  return i;
}

/* ---- Encoding ----
 *
 * The method of the same paper: spread each group of three bytes over a
 * 32-bit lane (a shuffle), cut the lane into four 6-bit values with a
 * multiply-high and a multiply-low on 16-bit halves, then turn each value
 * into its character by adding an offset found with one table shuffle:
 * values 0..25 add 'A', 26..51 add 'a' - 26, 52..61 add '0' - 52, 62 and
 * 63 add what makes '+' and '/'. */

/* The three bytes b0 b1 b2 of each group, as 16-bit words b1:b0 and
 * b2:b1 (little-endian: b0 b1 ... reads b1 high). */
#define SPREAD 1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10
/* Offset by class: index 0 for 26..51, 1..10 for 52..61, 11 for 62, 12
 * for 63, 13 for 0..25. */
#define OFFSETS                                                         \
  'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, \
      '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0

__attribute__((target("ssse3"))) static inline __m128i enc_ssse3_block(
    __m128i in) {
  const __m128i spread = _mm_setr_epi8(SPREAD);
  const __m128i offsets = _mm_setr_epi8(OFFSETS);
  in = _mm_shuffle_epi8(in, spread);
  /* Lane bytes now b1 b0 b2 b1: values a (b0 >> 2) and c ((b1 & 15) << 2 |
   * b2 >> 6) come from the multiply-high, b and d from the multiply-low. */
  __m128i ac = _mm_mulhi_epu16(_mm_and_si128(in, _mm_set1_epi32(0x0fc0fc00)),
                               _mm_set1_epi32(0x04000040));
  __m128i bd = _mm_mullo_epi16(_mm_and_si128(in, _mm_set1_epi32(0x003f03f0)),
                               _mm_set1_epi32(0x01000010));
  __m128i v = _mm_or_si128(ac, bd);
  __m128i cls = _mm_subs_epu8(v, _mm_set1_epi8(51));
  __m128i low = _mm_cmpgt_epi8(_mm_set1_epi8(26), v);
  cls = _mm_or_si128(cls, _mm_and_si128(low, _mm_set1_epi8(13)));
  return _mm_add_epi8(v, _mm_shuffle_epi8(offsets, cls));
}

__attribute__((target("ssse3"))) size_t kn_b64_enc_ssse3(
    char *dst, const unsigned char *src, size_t n) {
  size_t i = 0;
  char *o = dst;
  /* 16 bytes loaded, 12 used. */
  for (; i + 16 <= n; i += 12, o += 16) {
    __m128i in = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
    _mm_storeu_si128((__m128i *)(void *)o, enc_ssse3_block(in));
  }
  return i;
}

__attribute__((target("avx2"))) size_t kn_b64_enc_avx2(char *dst,
                                                       const unsigned char *src,
                                                       size_t n) {
  const __m256i spread = _mm256_setr_epi8(SPREAD, SPREAD);
  const __m256i offsets = _mm256_setr_epi8(OFFSETS, OFFSETS);
  size_t i = 0;
  char *o = dst;
  /* Each 128-bit lane gets 12 bytes at its start: two 16-byte loads, 12
   * bytes apart, so 28 bytes are read for 24 used. */
  for (; i + 28 <= n; i += 24, o += 32) {
    __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
    __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 12));
    __m256i in = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    in = _mm256_shuffle_epi8(in, spread);
    __m256i ac =
        _mm256_mulhi_epu16(_mm256_and_si256(in, _mm256_set1_epi32(0x0fc0fc00)),
                           _mm256_set1_epi32(0x04000040));
    __m256i bd =
        _mm256_mullo_epi16(_mm256_and_si256(in, _mm256_set1_epi32(0x003f03f0)),
                           _mm256_set1_epi32(0x01000010));
    __m256i v = _mm256_or_si256(ac, bd);
    __m256i cls = _mm256_subs_epu8(v, _mm256_set1_epi8(51));
    __m256i low = _mm256_cmpgt_epi8(_mm256_set1_epi8(26), v);
    cls = _mm256_or_si256(cls, _mm256_and_si256(low, _mm256_set1_epi8(13)));
    v = _mm256_add_epi8(v, _mm256_shuffle_epi8(offsets, cls));
    _mm256_storeu_si256((__m256i *)(void *)o, v);
  }
  /* A last block of 12 to 27 bytes: the 128-bit kernel. */
  i += kn_b64_enc_ssse3(o, src + i, n - i);
  return i;
}

#endif
