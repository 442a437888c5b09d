#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "kn/error.h"

static const char *level_name(int level) {
  switch (level) {
    case KN_LOG_ERR:
      return "ERROR";
    case KN_LOG_WARN:
      return "WARN";
    case KN_LOG_NOTICE:
      return "NOTICE";
    case KN_LOG_INFO:
      return "INFO";
    case KN_LOG_DEBUG:
      return "DEBUG";
    default:
      return level < KN_LOG_ERR ? "CRIT" : "TRACE";
  }
}

void kn_log(const kn_logger_t *lg, int level, const char *facility,
            const char *fmt, ...) {
  if (!KN_LOG_ENABLED(lg, level)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  kn_text_sanitize(msg); /* server text in a line stays one harmless line */
  if (lg && lg->cb) {
    lg->cb(lg->opaque, level, facility, msg);
    return;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  /* One fprintf call so concurrent lines do not interleave. */
  fprintf(stderr, "%02d:%02d:%02d.%03ld %s %s%s[%s] %s\n", tm.tm_hour,
          tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, level_name(level),
          lg && lg->name ? lg->name : "", lg && lg->name ? " " : "", facility,
          msg);
}
