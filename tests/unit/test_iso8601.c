/* ISO-8601 date-times of credential expirations. */
#include <stdint.h>

#include "kt.h"
#include "util/iso8601.h"

static int64_t parse(const char *s) {
  int64_t t = -1;
  if (kn_iso8601_parse(s, &t)) return -1;
  return t;
}

static void test_valid(void) {
  KT_CHECK_INT(parse("1970-01-01T00:00:00Z"), 0);
  KT_CHECK_INT(parse("2015-08-21T19:05:17Z"), 1440183917000LL);
  KT_CHECK_INT(parse("2015-08-21t19:05:17z"), 1440183917000LL);
  KT_CHECK_INT(parse("2015-08-21 19:05:17Z"), 1440183917000LL);
  KT_CHECK_INT(parse("  2015-08-21T19:05:17Z \n"), 1440183917000LL);
  KT_CHECK_INT(parse("2015-08-21T19:05:17"),
               1440183917000LL); /* no zone: UTC */
  KT_CHECK_INT(parse("2015-08-21T19:05:17.5Z"), 1440183917500LL);
  KT_CHECK_INT(parse("2015-08-21T19:05:17.123Z"), 1440183917123LL);
  KT_CHECK_INT(parse("2015-08-21T19:05:17.123456789Z"), 1440183917123LL);
  KT_CHECK_INT(parse("2015-08-21T19:05:17,25Z"), 1440183917250LL);
  KT_CHECK_INT(parse("2015-08-21T21:05:17+02:00"), 1440183917000LL);
  KT_CHECK_INT(parse("2015-08-21T21:05:17+0200"), 1440183917000LL);
  KT_CHECK_INT(parse("2015-08-21T14:35:17-04:30"), 1440183917000LL);
  KT_CHECK_INT(parse("2015-08-21T19:05:17+00:00"), 1440183917000LL);
  KT_CHECK_INT(parse("2000-02-29T00:00:00Z"), 951782400000LL); /* leap year */
  KT_CHECK_INT(parse("2024-02-29T12:00:00Z"), 1709208000000LL);
  KT_CHECK_INT(parse("2038-01-19T03:14:08Z"),
               2147483648000LL); /* past 32 bits */
  KT_CHECK_INT(parse("2100-03-01T00:00:00Z"), 4107542400000LL);
  KT_CHECK_INT(parse("2016-12-31T23:59:60Z"),
               1483228800000LL); /* leap second */
  KT_CHECK_INT(parse("9999-12-31T23:59:59Z"), 253402300799000LL);
}

static void test_invalid(void) {
  static const char *bad[] = {"",
                              "   ",
                              "2015",
                              "2015-08-21",
                              "2015-08-21T19:05",
                              "2015-8-21T19:05:17Z",
                              "2015-08-21T19:05:17ZZ",
                              "2015-08-21X19:05:17Z",
                              "2015-13-01T00:00:00Z",
                              "2015-00-01T00:00:00Z",
                              "2015-02-29T00:00:00Z",
                              "1900-02-29T00:00:00Z",
                              "2015-04-31T00:00:00Z",
                              "2015-01-00T00:00:00Z",
                              "2015-01-01T24:00:00Z",
                              "2015-01-01T00:60:00Z",
                              "2015-01-01T00:00:61Z",
                              "2015-01-01T00:00:00.Z",
                              "2015-01-01T00:00:00+2",
                              "2015-01-01T00:00:00+24:00",
                              "2015-01-01T00:00:00+01:60",
                              "1969-12-31T23:59:59Z",
                              "2015-01-01T00:00:00 garbage",
                              "x2015-01-01T00:00:00Z",
                              "1440183917",
                              "2015-01-01T00:00:00-"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    KT_CHECK_MSG(parse(bad[i]) == -1, "accepted \"%s\"", bad[i]);
}

static void test_format(void) {
  char buf[21];
  KT_CHECK_STR(kn_iso8601_format(0, buf), "1970-01-01T00:00:00Z");
  KT_CHECK_STR(kn_iso8601_format(1440183917999LL, buf), "2015-08-21T19:05:17Z");
  KT_CHECK_STR(kn_iso8601_format(951782400000LL, buf), "2000-02-29T00:00:00Z");
  /* Round trip over many days. */
  for (int64_t d = 0; d < 200000; d += 37) {
    int64_t t = d * 86400000LL + 3723000;
    int64_t back = -1;
    KT_CHECK(kn_iso8601_parse(kn_iso8601_format(t, buf), &back) == 0 &&
             back == t);
  }
  KT_CHECK_INT(kn_days_from_civil(1970, 1, 1), 0);
  KT_CHECK_INT(kn_days_from_civil(2000, 3, 1), 11017);
}

int main(void) {
  KT_RUN(test_valid);
  KT_RUN(test_invalid);
  KT_RUN(test_format);
  return KT_DONE();
}
