#include "util/iso8601.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int64_t kn_days_from_civil(int64_t y, unsigned m, unsigned d) {
  /* Count from 0000-03-01 so that the leap day ends each 4-year cycle and
   * a 400-year era has a fixed length of 146097 days. */
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;                       /* [0, 399] */
  int64_t mp = (m + 9) % 12;                         /* March = 0 */
  int64_t doy = (153 * mp + 2) / 5 + (int64_t)d - 1; /* [0, 365] */
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = (int)(yoe + era * 400 + (*m <= 2));
}

static int is_leap(int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m) {
  static const int dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* Reads exactly n digits; -1 if any is missing. */
static int digits(const char **p, int n) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (!isdigit((unsigned char)**p)) return -1;
    v = v * 10 + (**p - '0');
    (*p)++;
  }
  return v;
}

int kn_iso8601_parse(const char *s, int64_t *epoch_ms) {
  const char *p = s;
  while (isspace((unsigned char)*p)) p++;
  int y = digits(&p, 4);
  if (y < 0 || *p++ != '-') return -1;
  int mo = digits(&p, 2);
  if (mo < 0 || *p++ != '-') return -1;
  int d = digits(&p, 2);
  if (d < 0) return -1;
  if (*p != 'T' && *p != 't' && *p != ' ') return -1;
  p++;
  int h = digits(&p, 2);
  if (h < 0 || *p++ != ':') return -1;
  int mi = digits(&p, 2);
  if (mi < 0 || *p++ != ':') return -1;
  int sec = digits(&p, 2);
  if (sec < 0) return -1;
  int ms = 0;
  if (*p == '.' || *p == ',') {
    p++;
    if (!isdigit((unsigned char)*p)) return -1;
    /* Keep milliseconds, ignore finer digits (truncation). */
    int n = 0;
    for (; isdigit((unsigned char)*p); n++, p++)
      if (n < 3) ms = ms * 10 + (*p - '0');
    for (; n < 3; n++) ms *= 10;
  }
  int off_min = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p++ == '-' ? -1 : 1;
    int oh = digits(&p, 2);
    if (oh < 0) return -1;
    if (*p == ':') p++;
    int om = digits(&p, 2);
    if (om < 0 || oh > 23 || om > 59) return -1;
    off_min = sign * (oh * 60 + om);
  }
  while (isspace((unsigned char)*p)) p++;
  if (*p) return -1;
  if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 ||
      d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60)
    return -1;
  /* A leap second (:60) counts as the first second of the next minute,
   * which POSIX time cannot tell apart anyway. */
  int64_t days = kn_days_from_civil(y, (unsigned)mo, (unsigned)d);
  int64_t t = ((days * 24 + h) * 60 + mi) * 60 + sec - (int64_t)off_min * 60;
  *epoch_ms = t * 1000 + ms;
  return 0;
}

char *kn_iso8601_format(int64_t epoch_ms, char out[21]) {
  int64_t t = epoch_ms / 1000 - (epoch_ms % 1000 < 0);
  int64_t days = t / 86400 - (t % 86400 < 0);
  int64_t rem = t - days * 86400;
  int y, m, d;
  civil_from_days(days, &y, &m, &d);
  char tmp[64]; /* room for any int, so no truncation to reason about */
  snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02dZ", y % 10000, m, d,
           (int)(rem / 3600), (int)(rem / 60 % 60), (int)(rem % 60));
  memcpy(out, tmp, 20);
  out[20] = '\0';
  return out;
}
