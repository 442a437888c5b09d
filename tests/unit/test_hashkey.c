/* Hash keys: 128-bit arithmetic, decimal forms and MD5 of partition
 * keys against a table computed with Python's hashlib. */
#include <stdlib.h>

#include "hashkey_table.h"
#include "kinesis/hashkey.h"
#include "kn/client.h"
#include "kt.h"

#define MAXS "340282366920938463463374607431768211455"

static kn_u128_t P(const char *s) {
  kn_u128_t v = {0xdead, 0xbeef};
  if (kn_u128_parse(s, strlen(s), &v)) fprintf(stderr, "bad literal %s\n", s);
  return v;
}

static const char *F(kn_u128_t v, char *buf) {
  kn_u128_format(v, buf);
  return buf;
}

static void test_parse_format(void) {
  char buf[KN_U128_DEC_BUFSZ];
  static const struct {
    const char *s;
    uint64_t hi, lo;
  } cases[] = {
      {"0", 0, 0},
      {"1", 0, 1},
      {"9", 0, 9},
      {"10", 0, 10},
      {"999999999", 0, 999999999},
      {"1000000000", 0, 1000000000},
      {"18446744073709551615", 0, UINT64_MAX},
      {"18446744073709551616", 1, 0},
      {"170141183460469231731687303715884105727", INT64_MAX, UINT64_MAX},
      {"170141183460469231731687303715884105728", 1ull << 63, 0},
      {MAXS, UINT64_MAX, UINT64_MAX},
      {"1000000000000000000000000000000000000", 0x00c097ce7bc90715ull,
       0xb34b9f1000000000ull},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kn_u128_t v;
    KT_CHECK(kn_u128_parse(cases[i].s, strlen(cases[i].s), &v) == 0);
    KT_CHECK_MSG(v.hi == cases[i].hi && v.lo == cases[i].lo, "%s", cases[i].s);
    size_t n = kn_u128_format(v, buf);
    KT_CHECK_STR(buf, cases[i].s);
    KT_CHECK_INT(n, strlen(cases[i].s));
  }
  kn_u128_t v;
  KT_CHECK(kn_u128_parse("007", 3, &v) == 0 && v.hi == 0 && v.lo == 7);
  KT_CHECK_STR(F(v, buf), "7");
  KT_CHECK(kn_u128_parse("0000000000000000000000000000000000000000000001", 46,
                         &v) == 0 &&
           v.lo == 1);
  /* Chunk boundaries of the formatter: zeros inside must stay. */
  KT_CHECK_STR(F(P("1000000000000000000"), buf), "1000000000000000000");
  KT_CHECK_STR(F(P("1000000001000000001"), buf), "1000000001000000001");
  KT_CHECK_STR(F(P("100000000000000000000000000000000000000"), buf),
               "100000000000000000000000000000000000000");
}

static void test_parse_reject(void) {
  kn_u128_t v = {7, 7};
  const char *bad[] = {"",
                       "-1",
                       "+1",
                       " 1",
                       "1 ",
                       "1a",
                       "0x10",
                       "1.0",
                       "340282366920938463463374607431768211456",
                       "340282366920938463463374607431768211460",
                       "999999999999999999999999999999999999999",
                       "3402823669209384634633746074317682114550"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    KT_CHECK_MSG(kn_u128_parse(bad[i], strlen(bad[i]), &v) == -1, "%s", bad[i]);
  KT_CHECK(v.hi == 7 && v.lo == 7); /* untouched on failure */
  KT_CHECK(kn_u128_parse(NULL, 0, &v) == -1);
  /* The length decides, not a terminator. */
  KT_CHECK(kn_u128_parse("12junk", 2, &v) == 0 && v.lo == 12);
}

static void test_roundtrip_random(void) {
  unsigned seed = 99;
  char buf[KN_U128_DEC_BUFSZ];
  int bad = 0;
  for (int i = 0; i < 20000; i++) {
    kn_u128_t v = {(uint64_t)rand_r(&seed) << 40 ^
                       (uint64_t)rand_r(&seed) << 20 ^ (uint64_t)rand_r(&seed),
                   (uint64_t)rand_r(&seed) << 40 ^
                       (uint64_t)rand_r(&seed) << 20 ^ (uint64_t)rand_r(&seed)};
    if (i % 4 == 1) v.hi = 0;
    if (i % 8 == 3) v.hi >>= (i % 64);
    size_t n = kn_u128_format(v, buf);
    kn_u128_t w;
    if (n != strlen(buf) || kn_u128_parse(buf, n, &w) || !kn_u128_eq(v, w))
      bad++;
  }
  KT_CHECK_INT(bad, 0);
}

static void test_arith(void) {
  char buf[KN_U128_DEC_BUFSZ];
  kn_u128_t one = {0, 1}, max = {UINT64_MAX, UINT64_MAX}, zero = {0, 0};
  KT_CHECK(kn_u128_eq(kn_u128_add(max, one), zero));
  KT_CHECK(kn_u128_eq(kn_u128_sub(zero, one), max));
  KT_CHECK_STR(F(kn_u128_add(P("18446744073709551615"), one), buf),
               "18446744073709551616");
  KT_CHECK_STR(F(kn_u128_sub(P("18446744073709551616"), one), buf),
               "18446744073709551615");
  KT_CHECK(kn_u128_cmp(zero, one) < 0);
  KT_CHECK(kn_u128_cmp(max, one) > 0);
  KT_CHECK(kn_u128_cmp(P("18446744073709551616"), P("18446744073709551615")) >
           0);
  KT_CHECK(kn_u128_cmp(max, max) == 0);
}

static void test_range(void) {
  kn_u128_t a = P("100"), b = P("200");
  KT_CHECK(kn_u128_in_range(P("100"), a, b));
  KT_CHECK(kn_u128_in_range(P("150"), a, b));
  KT_CHECK(kn_u128_in_range(P("200"), a, b));
  KT_CHECK(!kn_u128_in_range(P("99"), a, b));
  KT_CHECK(!kn_u128_in_range(P("201"), a, b));
  KT_CHECK(kn_u128_in_range(P(MAXS), P("0"), P(MAXS)));
  KT_CHECK(kn_u128_in_range(P("0"), P("0"), P(MAXS)));
  KT_CHECK(!kn_u128_in_range(P("18446744073709551616"), P("0"),
                             P("18446744073709551615")));
}

static void test_midpoint(void) {
  char buf[KN_U128_DEC_BUFSZ];
  kn_u128_t m;
  /* The whole space splits at 2^127, as the AWS examples do. */
  KT_CHECK(kn_u128_midpoint(P("0"), P(MAXS), &m) == 0);
  KT_CHECK_STR(F(m, buf), "170141183460469231731687303715884105728");
  KT_CHECK(kn_u128_midpoint(
               P("0"), P("170141183460469231731687303715884105727"), &m) == 0);
  KT_CHECK_STR(F(m, buf), "85070591730234615865843651857942052864");
  KT_CHECK(kn_u128_midpoint(P("170141183460469231731687303715884105728"),
                            P(MAXS), &m) == 0);
  KT_CHECK_STR(F(m, buf), "255211775190703847597530955573826158592");
  KT_CHECK(kn_u128_midpoint(P("10"), P("11"), &m) == 0);
  KT_CHECK_STR(F(m, buf), "11");
  KT_CHECK(kn_u128_midpoint(P("10"), P("12"), &m) == 0);
  KT_CHECK_STR(F(m, buf), "11");
  KT_CHECK(kn_u128_midpoint(P("10"), P("13"), &m) == 0);
  KT_CHECK_STR(F(m, buf), "12");
  KT_CHECK(kn_u128_midpoint(P("18446744073709551615"),
                            P("18446744073709551616"), &m) == 0);
  KT_CHECK_STR(F(m, buf), "18446744073709551616");
  KT_CHECK(kn_u128_midpoint(P(MAXS), P(MAXS), &m) == -1);
  KT_CHECK(kn_u128_midpoint(P("5"), P("5"), &m) == -1);
  KT_CHECK(kn_u128_midpoint(P("6"), P("5"), &m) == -1);
  /* Property: start < mid <= end for random ranges. */
  unsigned seed = 7;
  int bad = 0;
  for (int i = 0; i < 10000; i++) {
    kn_u128_t s = {(uint64_t)rand_r(&seed) * 977, (uint64_t)rand_r(&seed)
                                                      << 33},
              e = kn_u128_add(s, kn_u128_make((uint64_t)(rand_r(&seed) % 3),
                                              (uint64_t)rand_r(&seed) + 1));
    if (kn_u128_midpoint(s, e, &m) || kn_u128_cmp(m, s) <= 0 ||
        kn_u128_cmp(m, e) > 0)
      bad++;
    /* Both halves differ in size by at most one key. */
    kn_u128_t low = kn_u128_sub(m, s),
              high = kn_u128_add(kn_u128_sub(e, m), kn_u128_make(0, 1));
    kn_u128_t diff = kn_u128_cmp(low, high) >= 0 ? kn_u128_sub(low, high)
                                                 : kn_u128_sub(high, low);
    if (diff.hi || diff.lo > 1) bad++;
  }
  KT_CHECK_INT(bad, 0);
}

static void test_md5_table(void) {
  char buf[KN_U128_DEC_BUFSZ];
  char out[40];
  for (size_t i = 0; i < sizeof(hashkey_table) / sizeof(hashkey_table[0]);
       i++) {
    const char *k = hashkey_table[i].key;
    kn_u128_format(kn_hashkey_of(k, strlen(k)), buf);
    KT_CHECK_MSG(strcmp(buf, hashkey_table[i].hash) == 0, "key %zu: %s != %s",
                 i, buf, hashkey_table[i].hash);
    KT_CHECK(kn_partition_key_hash(k, out) == out);
    KT_CHECK_STR(out, hashkey_table[i].hash);
  }
  KT_CHECK_STR(kn_partition_key_hash(NULL, out),
               "281949768489412648962353822266799178366");
}

int main(void) {
  KT_RUN(test_parse_format);
  KT_RUN(test_parse_reject);
  KT_RUN(test_roundtrip_random);
  KT_RUN(test_arith);
  KT_RUN(test_range);
  KT_RUN(test_midpoint);
  KT_RUN(test_md5_table);
  return KT_DONE();
}
