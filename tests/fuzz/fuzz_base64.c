/* Fuzzes the base64 encoders and decoders.  Encoding: every
 * implementation the CPU supports must give what the scalar encoder gives
 * for the input bytes (into a buffer of exactly the encoded length), and
 * the scalar decoder must give the bytes back.  Decoding: every implementation
 * the CPU supports must give what the scalar decoder gives, in place and into a
 * buffer of exactly kn_base64_decoded_max(n) bytes, and so must the bulk
 * decoded by kn_base64_decode_prefix followed by the rest.  The first input
 * byte picks how the rest is read: as it is, or mapped onto the alphabet with a
 * few bytes left raw, so that long valid strings with rare defects are common.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static long run(kn_base64_impl_t impl, const char *src, size_t n,
                unsigned char *out, int in_place) {
  size_t cap = in_place ? (n ? n : 1) : kn_base64_decoded_max(n);
  unsigned char *d = malloc(cap);
  if (!d) abort();
  long r;
  if (in_place) {
    memcpy(d, src, n);
    r = kn_base64_decode_with(impl, d, (const char *)d, n);
  } else {
    r = kn_base64_decode_with(impl, d, src, n);
  }
  if (r > 0) memcpy(out, d, (size_t)r);
  free(d);
  return r;
}

static const kn_base64_impl_t impls[] = {KN_BASE64_SCALAR, KN_BASE64_SSSE3,
                                         KN_BASE64_AVX2};
#define N_IMPLS (sizeof(impls) / sizeof(impls[0]))

static void check_encoders(const uint8_t *data, size_t n) {
  size_t elen = kn_base64_encoded_len(n);
  char *want = malloc(elen ? elen : 1), *got = malloc(elen ? elen : 1);
  unsigned char *back = malloc(kn_base64_decoded_max(elen));
  if (!want || !got || !back) abort();
  if (kn_base64_encode_with(KN_BASE64_SCALAR, want, data, n) != elen) abort();
  for (size_t k = 1; k < N_IMPLS; k++) {
    if (!kn_base64_impl_supported(impls[k])) continue;
    if (kn_base64_encode_with(impls[k], got, data, n) != elen ||
        memcmp(got, want, elen) != 0)
      abort();
  }
  long r = kn_base64_decode_with(KN_BASE64_SCALAR, back, want, elen);
  if (r != (long)n || (n && memcmp(back, data, n) != 0)) abort();
  free(want);
  free(got);
  free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  check_encoders(data + 1, size - 1);
  size_t n = size - 1;
  char *src = malloc(n ? n : 1);
  if (!src) abort();
  if (data[0] & 1) {
    memcpy(src, data + 1, n);
  } else {
    /* Bytes >= 0xF8 stay raw (mostly invalid); the rest map onto the
     * alphabet, with '=' for 0xF0..0xF7 so padding appears too. */
    for (size_t i = 0; i < n; i++) {
      uint8_t b = data[1 + i];
      src[i] = b >= 0xF8 ? (char)b : b >= 0xF0 ? '=' : alphabet[b & 63];
    }
  }
  size_t cap = kn_base64_decoded_max(n) + 1;
  unsigned char *want = malloc(cap), *got = malloc(cap);
  if (!want || !got) abort();
  long w = run(KN_BASE64_SCALAR, src, n, want, 0);
  for (size_t k = 0; k < N_IMPLS; k++) {
    if (!kn_base64_impl_supported(impls[k])) continue;
    for (int in_place = 0; in_place < 2; in_place++) {
      long g = run(impls[k], src, n, got, in_place);
      if (g != w || (w > 0 && memcmp(got, want, (size_t)w) != 0)) abort();
    }
  }
  /* As the JSON decoder uses it: the bulk by kn_base64_decode_prefix on
   * a string followed by its closing quote, then the rest. */
  char *w_buf = malloc(n + 1);
  if (!w_buf) abort();
  memcpy(w_buf, src, n);
  w_buf[n] = '"';
  size_t done = kn_base64_decode_prefix(w_buf, n + 1);
  if (done % 4 || done > n) abort();
  long r = kn_base64_decode(w_buf + done / 4 * 3, w_buf + done, n - done);
  long g = r < 0 ? -1 : (long)(done / 4 * 3) + r;
  if (g != w || (w > 0 && memcmp(w_buf, want, (size_t)w) != 0)) abort();
  free(w_buf);
  free(want);
  free(got);
  free(src);
  return 0;
}
