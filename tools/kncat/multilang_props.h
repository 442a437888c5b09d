/* multilang: the MultiLangDaemon's properties file.
 *
 * Two steps, both pure and unit-tested: kc_ml_props_parse() reads the
 * Java properties syntax into (key, value, line) entries; kc_ml_conf_build()
 * maps the daemon's keys onto library properties and the daemon's own
 * settings, naming the key and line of anything it rejects. */
#ifndef KNCAT_MULTILANG_PROPS_H
#define KNCAT_MULTILANG_PROPS_H

#include <stddef.h>
#include <stdint.h>

#include "kn/conf.h"

typedef struct kc_ml_prop {
  char *key, *value; /* owned by the list */
  int line;          /* 1-based line where the entry starts */
} kc_ml_prop_t;

typedef struct kc_ml_props {
  kc_ml_prop_t *v; /* owned */
  size_t n, cap;
} kc_ml_props_t;

/* Parses text (len bytes) as a Java properties file: `key=value`,
 * `key: value` or `key value`, `#`/`!` comments, backslash line
 * continuations and escapes (\t \n \r \f \uXXXX, \x for x).  Appends to *p
 * (zeroed by the caller).  Returns 0, or -1 with "line N: why" in err. */
int kc_ml_props_parse(kc_ml_props_t *p, const char *text, size_t len, char *err,
                      size_t errsz);
/* The last entry for key (compared without regard to case), or NULL.
 * Owned by p. */
const kc_ml_prop_t *kc_ml_props_get(const kc_ml_props_t *p, const char *key);
/* Accepts a zeroed struct. */
void kc_ml_props_free(kc_ml_props_t *p);

enum { KC_ML_RETRIEVAL_POLLING, KC_ML_RETRIEVAL_FANOUT };

/* What the daemon needs beyond the library's configuration. */
typedef struct kc_ml_conf {
  char **argv;        /* executableName split on spaces, NULL-ended;
                         owned (kc_ml_conf_free) */
  char *stream;       /* owned */
  char *app;          /* owned */
  int retrieval;      /* KC_ML_RETRIEVAL_* as resolved */
  int call_empty;     /* callProcessRecordsEvenForEmptyRecordList */
  int64_t grace_ms;   /* shutdownGraceMillis */
  int64_t timeout_ms; /* timeoutInSeconds * 1000; 0: no limit */
} kc_ml_conf_t;

/* Applies p to conf and fills *out (zeroed by the caller).  note(opaque,
 * line) gets each notice (accepted keys without effect, unknown keys)
 * once.  Returns 0, or -1 with "line N: KEY: why" (or "KEY is required")
 * in err; *out is then to be freed all the same. */
int kc_ml_conf_build(const kc_ml_props_t *p, kn_conf_t *conf, kc_ml_conf_t *out,
                     void (*note)(void *opaque, const char *line), void *opaque,
                     char *err, size_t errsz);
void kc_ml_conf_free(kc_ml_conf_t *c);

/* The default shutdownGraceMillis when the file has none: the Java default
 * of 0 leaves children no time to checkpoint. */
#define KC_ML_DEFAULT_GRACE_MS 10000

#endif
