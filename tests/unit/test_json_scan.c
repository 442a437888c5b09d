/* The validating JSON skipper. */
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "util/json_scan.h"

/* Length of the value at the start of s, or -1 if invalid. */
static long skip(const char *s) {
  const char *e = kn_json_skip_value(s, s + strlen(s));
  return e ? (long)(e - s) : -1;
}

static void test_strings(void) {
  static const struct {
    const char *in;
    long len;
    int escaped;
  } cases[] = {
      {"\"\"", 2, 0},
      {"\"abc\" tail", 5, 0},
      {"\"a\\\"b\"", 6, 1},
      {"\"\\\\\"", 4, 1},
      {"\"\\\\\\\"\"", 6, 1},
      {"\"x\\\"\\\"y\"", 8, 1},
      {"\"\\u00e9\\/\\b\\f\\n\\r\\t\"", 20, 1},
      {"\"\xc3\xa9\"", 4, 0},
      {"\"abc", -1, 0},
      {"\"a\\\"", -1, 0},
      {"\"\\", -1, 0},
      {"\"\\x\"", -1, 0},
      {"\"\\u12\"", -1, 0},
      {"\"\\u12g4\"", -1, 0},
      {"\"tab\there\"", -1, 0},
      {"abc", -1, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *s = cases[i].in;
    int esc = -1;
    const char *e = kn_json_skip_string(s, s + strlen(s), &esc);
    long got = e ? (long)(e - s) : -1;
    KT_CHECK_MSG(got == cases[i].len, "%s: %ld != %ld", s, got, cases[i].len);
    if (e) KT_CHECK_INT(esc, cases[i].escaped);
  }
}

static void test_values(void) {
  KT_CHECK_INT(skip("0"), 1);
  KT_CHECK_INT(skip("-0.5e+10,"), 8);
  KT_CHECK_INT(skip("123 "), 3);
  KT_CHECK_INT(skip("1E5"), 3);
  KT_CHECK_INT(skip("true"), 4);
  KT_CHECK_INT(skip("null]"), 4);
  KT_CHECK_INT(skip("{ \"a\" : [ 1 , { } ] }x"), 21);
  KT_CHECK_INT(skip("[]"), 2);
  KT_CHECK_INT(skip("-"), -1);
  KT_CHECK_INT(skip("01"), 1); /* the value is "0"; the caller sees "1" next */
  KT_CHECK_INT(skip("1."), -1);
  KT_CHECK_INT(skip("1e"), -1);
  KT_CHECK_INT(skip(".5"), -1);
  KT_CHECK_INT(skip("nul"), -1);
  KT_CHECK_INT(skip("[1,]"), -1);
  KT_CHECK_INT(skip("[1 2]"), -1);
  KT_CHECK_INT(skip("{\"a\"}"), -1);
  KT_CHECK_INT(skip("{\"a\":1,}"), -1);
  KT_CHECK_INT(skip("{1:1}"), -1);
  KT_CHECK_INT(skip("[\"a\""), -1);
  KT_CHECK_INT(skip(""), -1);

  size_t n = 99;
  const char *a = "[1, [2, 3], {\"x\": [4]}, \"5\"]";
  KT_CHECK(kn_json_skip_array(a, a + strlen(a), &n) == a + strlen(a));
  KT_CHECK_INT(n, 4);
  a = "[ ]";
  KT_CHECK(kn_json_skip_array(a, a + 3, &n) == a + 3);
  KT_CHECK_INT(n, 0);
  KT_CHECK(kn_json_skip_array("{}", a + 2, &n) == NULL);
}

static void test_depth(void) {
  char deep[2 * (KN_JSON_MAX_DEPTH + 2) + 1];
  for (int d = KN_JSON_MAX_DEPTH; d <= KN_JSON_MAX_DEPTH + 1; d++) {
    memset(deep, '[', (size_t)d);
    memset(deep + d, ']', (size_t)d);
    deep[2 * d] = 0;
    KT_CHECK_INT(skip(deep), d == KN_JSON_MAX_DEPTH ? 2 * d : -1);
  }
}

int main(void) {
  KT_RUN(test_strings);
  KT_RUN(test_values);
  KT_RUN(test_depth);
  return KT_DONE();
}
