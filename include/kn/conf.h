/* Configuration: one table of named properties for every handle.
 *
 * Every property, its type, default and meaning are listed in
 * docs/CONFIGURATION.md, which is generated from the same table that
 * kn_conf_set() validates against (`kncat -X list` prints it too). */
#ifndef KN_CONF_H
#define KN_CONF_H

#include <stddef.h>
#include <stdio.h>

#include "kn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_conf_s kn_conf_t;

typedef enum kn_conf_res_t {
  KN_CONF_UNKNOWN = -2, /* no property of that name */
  KN_CONF_INVALID = -1, /* value rejected; errstr says why */
  KN_CONF_OK = 0
} kn_conf_res_t;

/* A new configuration with every property at its default.  NULL on
 * out-of-memory.  Destroy with kn_conf_destroy() unless ownership passes
 * to a handle (constructors say whether they copy or take the conf). */
KN_API kn_conf_t *kn_conf_new(void);
KN_API kn_conf_t *kn_conf_dup(const kn_conf_t *conf);
/* Accepts NULL. */
KN_API void kn_conf_destroy(kn_conf_t *conf);

/* Sets a property from text.  name and value are copied.  On failure a
 * one-line reason is written to errstr (if errstr_size > 0). */
KN_API kn_conf_res_t kn_conf_set(kn_conf_t *conf, const char *name,
                                 const char *value, char *errstr,
                                 size_t errstr_size);

/* Copies the value (or default) of name into dest.  When dest is NULL or
 * too small, *dest_size is set to the size needed (with terminator) and
 * KN_CONF_INVALID is returned. Unset properties with no default read as "". */
KN_API kn_conf_res_t kn_conf_get(const kn_conf_t *conf, const char *name,
                                 char *dest, size_t *dest_size);

/* Log callback: level is syslog-like (3 error ... 7 debug).  Called from
 * internal threads as well as the application's: it must be thread-safe.
 * Strings are valid only during the call.  Default: lines on stderr. */
KN_API void kn_conf_set_log_cb(kn_conf_t *conf,
                               void (*log_cb)(void *opaque, int level,
                                              const char *facility,
                                              const char *message),
                               void *opaque);

/* Statistics callback: a JSON document (docs/STATISTICS.md) every
 * statistics.interval.ms, called only from within the application's poll
 * calls.  json is valid only during the call. */
KN_API void kn_conf_set_stats_cb(kn_conf_t *conf,
                                 void (*stats_cb)(void *opaque,
                                                  const char *json,
                                                  size_t json_len),
                                 void *opaque);

/* Prints every property (name, scope, default, description) to fp. */
KN_API void kn_conf_properties_show(FILE *fp);
/* Writes the Markdown reference that docs/CONFIGURATION.md holds. */
KN_API void kn_conf_properties_markdown(FILE *fp);

#ifdef __cplusplus
}
#endif
#endif
