/* Sequence numbers: numeric comparison of long decimal strings. */
#include <stdlib.h>

#include "kinesis/seqnum.h"
#include "kn/client.h"
#include "kt.h"

static int sgn(int v) { return (v > 0) - (v < 0); }

static void test_valid(void) {
  KT_CHECK(kn_seqnum_valid("0", 1));
  KT_CHECK(kn_seqnum_valid(
      "49590338271490256608559692538361571095921575989136588898", 56));
  KT_CHECK(kn_seqnum_valid("007", 3));
  KT_CHECK(!kn_seqnum_valid("", 0));
  KT_CHECK(!kn_seqnum_valid(NULL, 0));
  KT_CHECK(!kn_seqnum_valid("12a", 3));
  KT_CHECK(!kn_seqnum_valid("-1", 2));
  KT_CHECK(!kn_seqnum_valid("1 ", 2));
  KT_CHECK(!kn_seqnum_valid("+1", 2));
  KT_CHECK(!kn_seqnum_valid("1.0", 3));
  char big[KN_SEQNUM_MAX_DIGITS + 2];
  memset(big, '9', sizeof(big));
  KT_CHECK(kn_seqnum_valid(big, KN_SEQNUM_MAX_DIGITS));
  KT_CHECK(!kn_seqnum_valid(big, KN_SEQNUM_MAX_DIGITS + 1));
  /* Every non-digit byte at every place of an 8-byte word and the tail. */
  char buf[24];
  int bad = 0;
  for (int pos = 0; pos < 20; pos++)
    for (int c = 0; c < 256; c++) {
      memset(buf, '5', 20);
      buf[pos] = (char)c;
      int want = c >= '0' && c <= '9';
      if (kn_seqnum_valid(buf, 20) != want) bad++;
    }
  KT_CHECK_INT(bad, 0);
  /* Only the given length counts: a digit prefix of a longer string. */
  KT_CHECK(kn_seqnum_valid("12x", 2));
}

static void test_cmp_table(void) {
  static const struct {
    const char *a, *b;
    int want;
  } cases[] = {
      {"0", "0", 0},
      {"1", "2", -1},
      {"2", "1", 1},
      {"9", "10", -1},
      {"10", "9", 1},
      {"007", "7", 0},
      {"0007", "8", -1},
      {"000", "0", 0},
      {"0", "00000000000000000000000000000000000000000000000000000001", -1},
      {"100", "099", 1},
      {"18446744073709551615", "18446744073709551616", -1},
      {"340282366920938463463374607431768211455",
       "340282366920938463463374607431768211456", -1},
      {"49590338271490256608559692538361571095921575989136588898",
       "49590338271490256608559692538361571095921575989136588898", 0},
      {"49590338271490256608559692538361571095921575989136588898",
       "49590338271490256608559692540925702759324208523137515618", -1},
      {"49590338271490256608559692540925702759324208523137515618",
       "49590338271490256608559692538361571095921575989136588898", 1},
      {"4959033827149025660855969253836157109592157598913658889",
       "49590338271490256608559692538361571095921575989136588898", -1},
      {"9223372036854775807",
       "49590338271490256608559692538361571095921575989136588898", -1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int c = sgn(kn_seqnum_cmp(cases[i].a, cases[i].b));
    KT_CHECK_MSG(c == cases[i].want, "%s vs %s: %d", cases[i].a, cases[i].b, c);
    c = sgn(kn_seqnum_cmp(cases[i].b, cases[i].a));
    KT_CHECK_MSG(c == -cases[i].want, "%s vs %s: %d", cases[i].b, cases[i].a,
                 c);
    KT_CHECK(sgn(kn_sequence_number_cmp(cases[i].a, cases[i].b)) ==
             cases[i].want);
  }
}

static void test_cmp_null(void) {
  KT_CHECK(kn_seqnum_cmp(NULL, NULL) == 0);
  KT_CHECK(kn_seqnum_cmp(NULL, "0") < 0);
  KT_CHECK(kn_seqnum_cmp("0", NULL) > 0);
  KT_CHECK(kn_seqnum_cmp("", "") == 0);
  KT_CHECK(kn_seqnum_cmp("", "0") < 0);
}

/* Random numbers of up to 60 digits against a reference: compare the
 * numbers as arrays of digits after stripping zeros by hand. */
static int ref_cmp(const char *a, const char *b) {
  while (*a == '0' && a[1]) a++;
  while (*b == '0' && b[1]) b++;
  size_t la = strlen(a), lb = strlen(b);
  if (la != lb) return la < lb ? -1 : 1;
  for (size_t i = 0; i < la; i++)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

static void random_num(char *buf, unsigned *seed) {
  int zeros = (int)(rand_r(seed) % 3);
  int len = 1 + (int)(rand_r(seed) % 60);
  int k = 0;
  for (int i = 0; i < zeros; i++) buf[k++] = '0';
  for (int i = 0; i < len; i++) {
    /* Shared prefixes make equal lengths and long common runs likely. */
    buf[k++] = (char)('0' + (i < 40 ? (i * 7) % 10 : (int)(rand_r(seed) % 10)));
  }
  buf[k] = '\0';
}

static void test_cmp_random(void) {
  unsigned seed = 12345;
  char a[80], b[80];
  int bad = 0;
  for (int i = 0; i < 20000; i++) {
    random_num(a, &seed);
    random_num(b, &seed);
    if (sgn(kn_seqnum_cmp(a, b)) != ref_cmp(a, b)) bad++;
  }
  KT_CHECK_INT(bad, 0);
}

static void test_transitive_sort(void) {
  /* Sorting with the comparison gives numeric order. */
  const char *v[] = {"10", "9", "0010", "100", "1", "0", "99", "000"};
  size_t n = sizeof(v) / sizeof(v[0]);
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (kn_seqnum_cmp(v[j], v[i]) < 0) {
        const char *t = v[i];
        v[i] = v[j];
        v[j] = t;
      }
  for (size_t i = 0; i + 1 < n; i++)
    KT_CHECK(kn_seqnum_cmp(v[i], v[i + 1]) <= 0);
  KT_CHECK(kn_seqnum_cmp(v[0], "0") == 0);
  KT_CHECK_STR(v[n - 1], "100");
}

static void test_seqpos(void) {
  const char *s1 = "49590338271490256608559692538361571095921575989136588898";
  const char *s2 = "49590338271490256608559692538361571095921575989136588899";
  KT_CHECK(kn_seqpos_cmp(s1, 0, s1, 0) == 0);
  KT_CHECK(kn_seqpos_cmp(s1, 0, s1, 1) < 0);
  KT_CHECK(kn_seqpos_cmp(s1, 5, s1, 1) > 0);
  KT_CHECK(kn_seqpos_cmp(s1, 100, s2, 0) < 0);
  KT_CHECK(kn_seqpos_cmp(s2, 0, s1, UINT64_MAX) > 0);
  KT_CHECK(kn_seqpos_cmp(s1, UINT64_MAX, s1, UINT64_MAX) == 0);
  KT_CHECK(kn_seqpos_cmp(NULL, 0, s1, 0) < 0);
}

int main(void) {
  KT_RUN(test_valid);
  KT_RUN(test_cmp_table);
  KT_RUN(test_cmp_null);
  KT_RUN(test_cmp_random);
  KT_RUN(test_transitive_sort);
  KT_RUN(test_seqpos);
  return KT_DONE();
}
