/* util/base64: the scalar decoder against known vectors and the encoder,
 * and every vector decoder the CPU supports against the scalar one, for
 * every length up to a few hundred characters, every invalid byte at every
 * position, padding forms, in place and into separate buffers sized
 * exactly (so that AddressSanitizer sees any write past the end), and the
 * bulk-then-rest decoding of strings inside JSON.  Every vector encoder
 * against the scalar one, for every length up to a few hundred bytes at
 * every alignment, input and output in buffers sized exactly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/base64_simd.h"
#include "kt.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static unsigned rnd(void) { return (unsigned)(kt_rand(&rng) >> 11); }

static const kn_base64_impl_t impls[] = {KN_BASE64_SCALAR, KN_BASE64_SSSE3,
                                         KN_BASE64_AVX2};
#define N_IMPLS (sizeof(impls) / sizeof(impls[0]))

/* Decodes src[0..n) with impl into a fresh buffer of exactly
 * kn_base64_decoded_max(n) bytes; the result and up to *len bytes go to
 * out. */
static long decode_exact(kn_base64_impl_t impl, const char *src, size_t n,
                         unsigned char *out) {
  size_t cap = kn_base64_decoded_max(n);
  unsigned char *d = malloc(cap);
  long r = kn_base64_decode_with(impl, d, src, n);
  if (r > 0) memcpy(out, d, (size_t)r);
  free(d);
  return r;
}

/* Decodes a copy of src[0..n) in place, the copy sized exactly. */
static long decode_in_place(kn_base64_impl_t impl, const char *src, size_t n,
                            unsigned char *out) {
  char *w = malloc(n ? n : 1);
  memcpy(w, src, n);
  long r = kn_base64_decode_with(impl, w, w, n);
  if (r > 0) memcpy(out, w, (size_t)r);
  free(w);
  return r;
}

/* Every supported implementation, both ways, gives what the scalar
 * decoder gives for src[0..n).  Returns 0 when they agree. */
static int agree(const char *src, size_t n) {
  size_t cap = kn_base64_decoded_max(n) + 1;
  unsigned char *want = malloc(cap), *got = malloc(cap);
  long w = decode_exact(KN_BASE64_SCALAR, src, n, want);
  int bad = 0;
  for (size_t k = 0; k < N_IMPLS && !bad; k++) {
    if (!kn_base64_impl_supported(impls[k])) continue;
    for (int in_place = 0; in_place < 2 && !bad; in_place++) {
      long g = in_place ? decode_in_place(impls[k], src, n, got)
                        : decode_exact(impls[k], src, n, got);
      if (g != w || (w > 0 && memcmp(got, want, (size_t)w) != 0)) {
        fprintf(stderr, "  %s%s, %zu characters: %ld, scalar %ld\n",
                kn_base64_impl_name(impls[k]), in_place ? " in place" : "", n,
                g, w);
        bad = 1;
      }
    }
  }
  /* The JSON decoder's way: the bulk with kn_base64_decode_prefix, the
   * string's closing quote behind it, then the rest. */
  if (!bad) {
    char *wb = malloc(n + 1);
    memcpy(wb, src, n);
    wb[n] = '"';
    size_t done = kn_base64_decode_prefix(wb, n + 1);
    long r = done % 4 || done > n
                 ? -2
                 : kn_base64_decode(wb + done / 4 * 3, wb + done, n - done);
    long g = r < 0 ? r : (long)(done / 4 * 3) + r;
    if (g != w || (w > 0 && memcmp(wb, want, (size_t)w) != 0)) {
      fprintf(stderr, "  prefix %zu + rest, %zu characters: %ld, scalar %ld\n",
              done, n, g, w);
      bad = 1;
    }
    free(wb);
  }
  free(want);
  free(got);
  return bad;
}

static void test_vectors(void) {
  /* RFC 4648 section 10. */
  static const char *const plain[] = {"",     "f",     "fo",    "foo",
                                      "foob", "fooba", "foobar"};
  static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                    "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (size_t i = 0; i < 7; i++) {
    unsigned char out[16];
    char e[16];
    KT_CHECK_INT(kn_base64_encode(e, plain[i], strlen(plain[i])),
                 strlen(enc[i]));
    KT_CHECK(memcmp(e, enc[i], strlen(enc[i])) == 0);
    for (size_t k = 0; k < N_IMPLS; k++) {
      if (!kn_base64_impl_supported(impls[k])) continue;
      long n = kn_base64_decode_with(impls[k], out, enc[i], strlen(enc[i]));
      KT_CHECK_INT(n, strlen(plain[i]));
      KT_CHECK(n >= 0 && memcmp(out, plain[i], (size_t)n) == 0);
    }
  }
  KT_CHECK(kn_base64_impl_supported(KN_BASE64_SCALAR));
  KT_CHECK(kn_base64_impl_supported(kn_base64_impl()));
  fprintf(stderr, "  in use: %s (ssse3 %s, avx2 %s)\n",
          kn_base64_impl_name(kn_base64_impl()),
          kn_base64_impl_supported(KN_BASE64_SSSE3) ? "yes" : "no",
          kn_base64_impl_supported(KN_BASE64_AVX2) ? "yes" : "no");
}

/* Encoded random bytes of every length decode back, by every
 * implementation, the same way. */
static void test_round_trip_every_length(void) {
  unsigned char raw[1200], back[1200];
  char enc[1700];
  for (size_t len = 0; len <= 1100; len++) {
    for (size_t i = 0; i < len; i++) raw[i] = (unsigned char)rnd();
    size_t n = kn_base64_encode(enc, raw, len);
    for (size_t k = 0; k < N_IMPLS; k++) {
      if (!kn_base64_impl_supported(impls[k])) continue;
      long r = decode_exact(impls[k], enc, n, back);
      KT_CHECK_MSG(r == (long)len && memcmp(back, raw, len) == 0,
                   "%s, %zu bytes", kn_base64_impl_name(impls[k]), len);
      r = decode_in_place(impls[k], enc, n, back);
      KT_CHECK_MSG(r == (long)len && memcmp(back, raw, len) == 0,
                   "%s in place, %zu bytes", kn_base64_impl_name(impls[k]),
                   len);
    }
  }
}

/* Strings of every length, not only multiples of 4, made of the alphabet
 * and '=' in any arrangement: valid or not, all agree. */
static void test_every_length(void) {
  char s[600];
  for (size_t n = 0; n <= 520; n++) {
    for (int round = 0; round < 8; round++) {
      for (size_t i = 0; i < n; i++) s[i] = alphabet[rnd() % 64];
      if (n && round >= 2) s[n - 1] = '=';
      if (n > 1 && round >= 4) s[n - 2] = '=';
      if (n && round == 6) s[rnd() % n] = '='; /* padding in the middle */
      KT_CHECK_MSG(agree(s, n) == 0, "length %zu round %d", n, round);
    }
  }
}

/* Every byte value at every position of strings of several lengths. */
static void test_every_byte_everywhere(void) {
  static const size_t lengths[] = {4,  8,   12,  16,  20,  24,  28,  32, 36,
                                   40, 44,  48,  52,  60,  64,  68,  76, 92,
                                   96, 100, 124, 128, 132, 188, 1336};
  char *s = malloc(1400);
  for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++) {
    size_t n = lengths[li];
    for (size_t i = 0; i < n; i++) s[i] = alphabet[rnd() % 64];
    int fails = 0;
    size_t step = n > 200 ? 7 : 1; /* long strings: a sample of positions */
    for (size_t p = 0; p < n; p += step) {
      char keep = s[p];
      for (int c = 0; c < 256; c++) {
        s[p] = (char)c;
        fails += agree(s, n);
      }
      s[p] = keep;
    }
    KT_CHECK_MSG(fails == 0, "length %zu: %d disagreements", n, fails);
  }
  free(s);
}

/* The last quad: each of its forms, with stray low bits too, and the
 * invalid ones, after a bulk long enough for the vector kernels. */
static void test_padding(void) {
  char s[200];
  for (size_t i = 0; i < 196; i++) s[i] = alphabet[(i * 7) % 64];
  static const char *const tails[] = {
      "QQ==", "QR==", "QUE=", "QUF=", "QUFB",  "Q===",
      "====", "=QQ=", "Q=Q=", "QQ=A", "QQ\n=", "QQ= "};
  static const int valid[] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  for (size_t t = 0; t < sizeof(tails) / sizeof(tails[0]); t++) {
    memcpy(s + 196, tails[t], 4);
    KT_CHECK_MSG(agree(s, 200) == 0, "tail %s", tails[t]);
    unsigned char out[160];
    long r = kn_base64_decode(out, s, 200);
    KT_CHECK_MSG((r >= 0) == valid[t], "tail %s: %ld", tails[t], r);
  }
  /* Padding before the last quad is invalid wherever it is. */
  memcpy(s + 196, "QUFB", 4);
  for (size_t p = 0; p < 196; p++) {
    char keep = s[p];
    s[p] = '=';
    unsigned char out[160];
    KT_CHECK_MSG(kn_base64_decode(out, s, 200) == -1, "'=' at %zu", p);
    s[p] = keep;
  }
  /* Lengths that are not multiples of 4. */
  unsigned char out[8];
  KT_CHECK_INT(kn_base64_decode(out, "QUF", 3), -1);
  KT_CHECK_INT(kn_base64_decode(out, "QUFBQ", 5), -1);
}

/* A decoder writing in place into a body may not touch what follows the
 * string. */
static void test_in_place_bounds(void) {
  char buf[1500];
  unsigned char raw[1000];
  for (size_t len = 990; len < 1000; len++) {
    for (size_t i = 0; i < len; i++) raw[i] = (unsigned char)rnd();
    size_t n = kn_base64_encode(buf, raw, len);
    memset(buf + n, '#', sizeof(buf) - n);
    long r = kn_base64_decode(buf, buf, n);
    KT_CHECK_INT(r, len);
    KT_CHECK(r >= 0 && memcmp(buf, raw, len) == 0);
    int kept = 1;
    for (size_t i = n; i < sizeof(buf); i++) kept &= buf[i] == '#';
    KT_CHECK(kept);
  }
}

/* The kernels themselves: they must take every valid block they may (a
 * character wrongly classed invalid would only cost speed, unseen by the
 * tests above) and stop at the block of any invalid one. */
static void test_kernels(void) {
#ifdef KN_B64_HAVE_X86
  typedef size_t (*kernel_t)(unsigned char *, const char *, size_t);
  static const struct {
    kn_base64_impl_t impl;
    kernel_t fn;
    size_t block, reserve; /* a block is decoded while at + reserve <= n */
  } ks[] = {{KN_BASE64_SSSE3, kn_b64_dec_ssse3, 16, 24},
            {KN_BASE64_AVX2, kn_b64_dec_avx2, 32, 44}};
  char s[520];
  unsigned char out[400];
  for (size_t k = 0; k < 2; k++) {
    if (!kn_base64_impl_supported(ks[k].impl)) continue;
    for (size_t n = 0; n <= 512; n += 4) {
      for (size_t i = 0; i < n; i++) s[i] = alphabet[(i + n) % 64];
      size_t want = n >= ks[k].reserve
                        ? ((n - ks[k].reserve) / ks[k].block + 1) * ks[k].block
                        : 0;
      KT_CHECK_MSG(ks[k].fn(out, s, n) == want, "%s, %zu characters",
                   kn_base64_impl_name(ks[k].impl), n);
    }
    size_t n = 512;
    for (size_t p = 0; p < 400; p++) {
      for (size_t i = 0; i < n; i++) s[i] = alphabet[(i * 5) % 64];
      for (int c = 0; c < 256; c++) {
        if (memchr(alphabet, c, 64)) continue;
        s[p] = (char)c;
        size_t got = ks[k].fn(out, s, n);
        KT_CHECK_MSG(got == p / ks[k].block * ks[k].block,
                     "%s: byte %d at %zu: %zu", kn_base64_impl_name(ks[k].impl),
                     c, p, got);
      }
    }
  }
#endif
}

/* Encodes src[0..n) with impl from a buffer that ends exactly where the
 * input does (at src_off from an allocation's start) into one that ends
 * exactly where the output does (at dst_off), so that AddressSanitizer
 * sees any read or write past either. */
static size_t encode_exact(kn_base64_impl_t impl, const unsigned char *src,
                           size_t n, size_t src_off, size_t dst_off,
                           char *out) {
  size_t elen = kn_base64_encoded_len(n);
  unsigned char *in = malloc(src_off + n ? src_off + n : 1);
  char *d = malloc(dst_off + elen ? dst_off + elen : 1);
  if (n) memcpy(in + src_off, src, n);
  size_t r = kn_base64_encode_with(impl, d + dst_off, in + src_off, n);
  if (r) memcpy(out, d + dst_off, r);
  free(in);
  free(d);
  return r;
}

/* Every encoder gives what the scalar one gives, for every length from 0
 * to 300 bytes, at 32 input and 32 output alignments, on random bytes and
 * on runs of 0x00 and 0xFF (every 6-bit value shows up at every place of
 * a block in the random rounds). */
static void test_encode_every_length(void) {
  unsigned char raw[320];
  char want[440], got[440];
  for (int round = 0; round < 4; round++) {
    for (size_t len = 0; len <= 300; len++) {
      for (size_t i = 0; i < len; i++)
        raw[i] = round == 0 ? 0x00 : round == 1 ? 0xFF : (unsigned char)rnd();
      size_t wn = kn_base64_encode_with(KN_BASE64_SCALAR, want, raw, len);
      KT_CHECK_INT(wn, kn_base64_encoded_len(len));
      for (size_t k = 1; k < N_IMPLS; k++) {
        if (!kn_base64_impl_supported(impls[k])) continue;
        for (size_t off = 0; off < 32; off++) {
          size_t doff = (off * 13 + len) % 32;
          memset(got, 0, sizeof(got));
          size_t gn = encode_exact(impls[k], raw, len, off, doff, got);
          KT_CHECK_MSG(gn == wn && memcmp(got, want, wn) == 0,
                       "%s, %zu bytes at offset %zu/%zu",
                       kn_base64_impl_name(impls[k]), len, off, doff);
        }
      }
    }
  }
}

/* Every 6-bit value at every place of every group of a vector block, one
 * group at a time (the rest zero), and every 3-byte value through the
 * default encoder against the scalar one. */
static void test_encode_all_groups(void) {
  unsigned char raw[64];
  char want[96], got[96];
  for (size_t k = 1; k < N_IMPLS; k++) {
    if (!kn_base64_impl_supported(impls[k])) continue;
    for (size_t g = 0; g < 16; g++) {
      for (uint32_t v = 0; v < (1u << 24); v += 4093) {
        memset(raw, 0, sizeof(raw));
        raw[3 * g] = (unsigned char)(v >> 16);
        raw[3 * g + 1] = (unsigned char)(v >> 8);
        raw[3 * g + 2] = (unsigned char)v;
        size_t wn = kn_base64_encode_with(KN_BASE64_SCALAR, want, raw, 60);
        size_t gn = kn_base64_encode_with(impls[k], got, raw, 60);
        KT_CHECK_MSG(gn == wn && memcmp(got, want, wn) == 0,
                     "%s, group %zu value %06x", kn_base64_impl_name(impls[k]),
                     g, (unsigned)v);
      }
    }
  }
  unsigned char all[3 * 4096];
  char w2[4 * 4096], g2[4 * 4096];
  for (uint32_t hi = 0; hi < 4096; hi++) {
    for (uint32_t lo = 0; lo < 4096; lo++) {
      uint32_t v = hi << 12 | lo;
      all[3 * lo] = (unsigned char)(v >> 16);
      all[3 * lo + 1] = (unsigned char)(v >> 8);
      all[3 * lo + 2] = (unsigned char)v;
    }
    kn_base64_encode_with(KN_BASE64_SCALAR, w2, all, sizeof(all));
    kn_base64_encode(g2, all, sizeof(all));
    if (memcmp(w2, g2, sizeof(w2)) != 0) {
      KT_CHECK_MSG(0, "%s, values %03x000..%03xfff",
                   kn_base64_impl_name(kn_base64_impl()), (unsigned)hi,
                   (unsigned)hi);
      break;
    }
  }
}

/* The encoding kernels take every whole block their reads allow. */
static void test_encode_kernels(void) {
#ifdef KN_B64_HAVE_X86
  unsigned char raw[300];
  char out[400];
  for (size_t i = 0; i < sizeof(raw); i++) raw[i] = (unsigned char)(i * 7);
  for (size_t n = 0; n <= 300; n++) {
    if (kn_base64_impl_supported(KN_BASE64_SSSE3)) {
      size_t want = n >= 16 ? ((n - 16) / 12 + 1) * 12 : 0;
      KT_CHECK_MSG(kn_b64_enc_ssse3(out, raw, n) == want, "ssse3, %zu bytes",
                   n);
    }
    if (kn_base64_impl_supported(KN_BASE64_AVX2)) {
      size_t big = n >= 28 ? ((n - 28) / 24 + 1) * 24 : 0;
      size_t want = big + (n - big >= 16 ? ((n - big - 16) / 12 + 1) * 12 : 0);
      KT_CHECK_MSG(kn_b64_enc_avx2(out, raw, n) == want, "avx2, %zu bytes", n);
    }
  }
#endif
}

int main(void) {
  KT_RUN(test_kernels);
  KT_RUN(test_vectors);
  KT_RUN(test_round_trip_every_length);
  KT_RUN(test_every_length);
  KT_RUN(test_every_byte_everywhere);
  KT_RUN(test_padding);
  KT_RUN(test_in_place_bounds);
  KT_RUN(test_encode_kernels);
  KT_RUN(test_encode_every_length);
  KT_RUN(test_encode_all_groups);
  return KT_DONE();
}
