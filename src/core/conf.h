/* The property table and typed access for the library's internals. */
#ifndef KN_CORE_CONF_H
#define KN_CORE_CONF_H

#include <stddef.h>

#include "kn/conf.h"
#include "util/log.h"

typedef enum kn_prop_type {
  KN_PROP_STR,
  KN_PROP_SECRET, /* a string never printed or logged */
  KN_PROP_INT,    /* 64-bit, within [min, max] */
  KN_PROP_BOOL,
  KN_PROP_ENUM /* one of the comma-separated `choices` */
} kn_prop_type_t;

typedef struct kn_prop {
  const char *name;
  const char *scope; /* "client", "consumer", "producer", "lease", ... */
  kn_prop_type_t type;
  const char *def; /* default as text; NULL: unset */
  long long min, max;
  const char *choices;
  const char *doc;
} kn_prop_t;

/* Each subsystem contributes one table, terminated by {NULL}; conf.c
 * lists them all.  Order of tables decides the documentation order. */
extern const kn_prop_t kn_props_client[];
extern const kn_prop_t kn_props_consumer[];
extern const kn_prop_t kn_props_producer[];

/* Callback slots.  Each public header's setter stores its typed function
 * pointer here and the handle casts it back before calling. */
typedef void (*kn_fnptr_t)(void);
enum kn_conf_cb {
  KN_CB_STATS,
  KN_CB_LEASE_ACQUIRED,
  KN_CB_LEASE_LOST,
  KN_CB_SHARD_ENDED,
  KN_CB_DELIVERY,
  KN_CB__COUNT
};

struct kn_conf_s {
  char **values; /* one slot per property, NULL: default */
  kn_log_fn *log_cb;
  void *log_opaque;
  kn_fnptr_t cbs[KN_CB__COUNT];
  void *cb_opaque[KN_CB__COUNT];
};

/* Typed reads of a property's value or default.  The name must exist in
 * the table (a unit test checks every name the code uses). */
const char *kn_conf_str(const kn_conf_t *conf,
                        const char *name); /* NULL if unset */
long long kn_conf_int(const kn_conf_t *conf, const char *name);
int kn_conf_bool(const kn_conf_t *conf, const char *name);
/* Non-zero if the application set the property explicitly. */
int kn_conf_is_set(const kn_conf_t *conf, const char *name);

/* Logger for a handle built from conf (level from log.level / debug). */
void kn_conf_logger(const kn_conf_t *conf, kn_logger_t *lg, const char *name);

const kn_prop_t *kn_prop_find(const char *name);

#endif
