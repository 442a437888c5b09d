/* Opening a lease store by its spec, and what the backends share. */
#include "lease/store.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lease/store_dynamodb.h"
#include "lease/store_int.h"
#include "util/str.h"

int kn_lease_store_init(kn_lease_store_t *ls, const kn_lease_store_ops_t *ops,
                        const char *name) {
  ls->ops = ops;
  ls->name = strdup(name);
  return ls->name ? 0 : -1;
}

kn_error_t *kn_lease_ccf(const kn_lease_store_t *ls, const char *op,
                         const char *key) {
  return kn_error_new(KN_ERR_CONDITIONAL_CHECK_FAILED,
                      "lease store %s: %s %s: conditional check failed "
                      "(the lease changed or does not exist)",
                      ls->name, op, key);
}

static kn_error_t *bad_spec(const char *spec, const char *why) {
  return kn_error_new(KN_ERR__CONF,
                      "invalid lease store \"%s\": %s (expected sqlite:PATH, "
                      "dynamodb:TABLE, memory or memory:NAME)",
                      spec ? spec : "(null)", why);
}

/* DynamoDB table names: 3 to 255 of [A-Za-z0-9_.-]. */
static int valid_table_name(const char *t) {
  size_t n = strlen(t);
  if (n < 3 || n > 255) return 0;
  for (const char *p = t; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

kn_lease_store_t *kn_lease_store_open(const char *spec,
                                      struct kn_client_s *client,
                                      kn_error_t **errp) {
  *errp = NULL;
  if (!spec || !*spec) {
    *errp = bad_spec(spec, "empty");
    return NULL;
  }
  if (strcmp(spec, "memory") == 0)
    return kn_lease_store_memory_open(NULL, errp);
  if (kn_str_has_prefix(spec, "memory:")) {
    const char *name = spec + strlen("memory:");
    if (!*name) {
      *errp = bad_spec(spec, "empty instance name");
      return NULL;
    }
    return kn_lease_store_memory_open(name, errp);
  }
  if (kn_str_has_prefix(spec, "sqlite:")) {
    const char *path = spec + strlen("sqlite:");
    if (!*path) {
      *errp = bad_spec(spec, "empty path");
      return NULL;
    }
    return kn_lease_store_sqlite_open(path, KN_LEASE_SQLITE_BUSY_MS, errp);
  }
  if (kn_str_has_prefix(spec, "dynamodb:")) {
    const char *table = spec + strlen("dynamodb:");
    if (!valid_table_name(table)) {
      *errp = bad_spec(spec,
                       "a DynamoDB table name has 3 to 255 characters "
                       "among A-Z a-z 0-9 _ . -");
      return NULL;
    }
    return kn_lease_store_dynamodb_open(table, client, errp);
  }
  *errp = bad_spec(spec, "unknown kind");
  return NULL;
}

void kn_lease_store_destroy(kn_lease_store_t *ls) {
  if (ls) ls->ops->destroy(ls);
}
