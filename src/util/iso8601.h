/* ISO-8601 / RFC 3339 date-times as AWS sends them in credential
 * expirations: "2024-05-01T12:00:00Z", with optional fractional seconds and
 * a numeric offset.  Pure; no locale, no time zone database. */
#ifndef KN_UTIL_ISO8601_H
#define KN_UTIL_ISO8601_H

#include <stdint.h>

/* Parses s as YYYY-MM-DD('T'|'t'|' ')hh:mm:ss[.fraction][Z|z|+hh:mm|-hh:mm|
 * +hhmm|-hhmm] into milliseconds since the Unix epoch.  A missing zone
 * means UTC (what AWS always sends).  Leading and trailing white space is
 * allowed.  Returns 0, or -1 if s is not such a date-time or is out of
 * range (years 1970..9999). */
int kn_iso8601_parse(const char *s, int64_t *epoch_ms);

/* Formats epoch_ms as "YYYY-MM-DDThh:mm:ssZ" (UTC, whole seconds) into
 * out, which must hold 21 bytes.  Returns out. */
char *kn_iso8601_format(int64_t epoch_ms, char out[21]);

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1..12). */
int64_t kn_days_from_civil(int64_t y, unsigned m, unsigned d);

#endif
