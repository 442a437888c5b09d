/* kn_crc32 against zlib's crc32 (and the check value of CRC-32) for every
 * length around the folding steps, at every alignment, and in pieces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "util/crc32.h"

static unsigned char buf[4096 + 64];

static void fill(void) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < sizeof(buf); i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buf[i] = (unsigned char)x;
  }
}

static void test_check_value(void) {
  KT_CHECK_INT(kn_crc32(0, "123456789", 9), 0xCBF43926u);
  static const char text[] =
      "The quick brown fox jumps over the lazy dog, "
      "then over the lazy cat, then home again.";
  KT_CHECK_INT(kn_crc32(0, text, sizeof(text) - 1),
               kn_crc32_zlib(0, text, sizeof(text) - 1));
  KT_CHECK_INT(kn_crc32(0, NULL, 0), 0);
}

static void test_lengths_and_alignments(void) {
  for (size_t off = 0; off < 16; off++)
    for (size_t n = 0; n <= 600; n++)
      if (kn_crc32(0, buf + off, n) != kn_crc32_zlib(0, buf + off, n)) {
        KT_CHECK_MSG(0, "offset %zu, %zu bytes", off, n);
        return;
      }
  KT_CHECK_INT(kn_crc32(0, buf, 4096), kn_crc32_zlib(0, buf, 4096));
}

static void test_continued(void) {
  uint32_t whole = kn_crc32_zlib(0, buf, 4096);
  for (size_t cut = 0; cut <= 4096; cut += 37) {
    uint32_t c = kn_crc32(0, buf, cut);
    KT_CHECK_INT(kn_crc32(c, buf + cut, 4096 - cut), whole);
  }
  KT_CHECK_INT(kn_crc32(0x12345678u, buf, 1000),
               kn_crc32_zlib(0x12345678u, buf, 1000));
}

static void test_zeros_and_ones(void) {
  unsigned char z[256], o[256];
  memset(z, 0, sizeof(z));
  memset(o, 0xFF, sizeof(o));
  KT_CHECK_INT(kn_crc32(0, z, sizeof(z)), kn_crc32_zlib(0, z, sizeof(z)));
  KT_CHECK_INT(kn_crc32(0, o, sizeof(o)), kn_crc32_zlib(0, o, sizeof(o)));
}

int main(void) {
  fill();
  KT_RUN(test_check_value);
  KT_RUN(test_lengths_and_alignments);
  KT_RUN(test_continued);
  KT_RUN(test_zeros_and_ones);
  return KT_DONE();
}
