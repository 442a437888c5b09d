/* Logging through the application's log callback (or stderr).  Levels
 * follow syslog: 3 error, 4 warning, 5 notice, 6 info, 7 debug. */
#ifndef KN_UTIL_LOG_H
#define KN_UTIL_LOG_H

typedef void(kn_log_fn)(void *opaque, int level, const char *facility,
                        const char *message);

typedef struct kn_logger {
  int level;     /* messages above this level are dropped */
  kn_log_fn *cb; /* NULL: write to stderr */
  void *opaque;
  const char *name; /* handle name shown by the default writer; not owned */
} kn_logger_t;

enum {
  KN_LOG_ERR = 3,
  KN_LOG_WARN = 4,
  KN_LOG_NOTICE = 5,
  KN_LOG_INFO = 6,
  KN_LOG_DEBUG = 7
};

/* lg may be NULL (then only errors and warnings reach stderr). */
void kn_log(const kn_logger_t *lg, int level, const char *facility,
            const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define KN_LOG_ENABLED(lg, lvl) \
  ((lg) ? (lvl) <= (lg)->level : (lvl) <= KN_LOG_WARN)
#define kn_err_log(lg, fac, ...) kn_log(lg, KN_LOG_ERR, fac, __VA_ARGS__)
#define kn_warn(lg, fac, ...) kn_log(lg, KN_LOG_WARN, fac, __VA_ARGS__)
#define kn_info(lg, fac, ...) kn_log(lg, KN_LOG_INFO, fac, __VA_ARGS__)
#define kn_dbg(lg, fac, ...)                      \
  do {                                            \
    if (KN_LOG_ENABLED(lg, KN_LOG_DEBUG))         \
      kn_log(lg, KN_LOG_DEBUG, fac, __VA_ARGS__); \
  } while (0)

#endif
