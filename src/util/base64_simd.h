/* Vector kernels of the base64 decoder and encoder (x86-64 with SSSE3 or
 * AVX2), used by util/base64.c, which picks one at run time.  Not for
 * other callers: they handle only the bulk of an input and leave the rest
 * to the scalar code (for decoding, any block holding an invalid character
 * included, which the scalar decoder judges). */
#ifndef KN_UTIL_BASE64_SIMD_H
#define KN_UTIL_BASE64_SIMD_H

#include <stddef.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define KN_B64_HAVE_X86 1

/* Decode whole blocks (16 or 32 characters) from the start of src[0..n)
 * while every character of a block is in the alphabet, never touching the
 * last quad (which may carry padding) and never writing past n / 4 * 3
 * bytes of dst.  dst may equal src.  Return how many characters were
 * decoded (a multiple of 4); their bytes are at dst[0 .. ret / 4 * 3). */
size_t kn_b64_dec_ssse3(unsigned char *dst, const char *src, size_t n);
size_t kn_b64_dec_avx2(unsigned char *dst, const char *src, size_t n);

/* Encode whole blocks (12 or 24 bytes) from the start of src[0..n),
 * reading no byte at or past n, into dst (4 characters per 3 bytes, no
 * padding, never written past what the blocks encode to).  Return how
 * many bytes were encoded (a multiple of 3); their characters are at
 * dst[0 .. ret / 3 * 4). */
size_t kn_b64_enc_ssse3(char *dst, const unsigned char *src, size_t n);
size_t kn_b64_enc_avx2(char *dst, const unsigned char *src, size_t n);

#endif

#endif
