/* The DynamoDB lease store: a table per application, items as the KCL 2.x
 * writes them (see ddb_item.h), every change a conditional UpdateItem
 * that names only the attributes it changes, so attributes written by
 * other KCL versions survive. */
#ifndef KN_LEASE_STORE_DYNAMODB_H
#define KN_LEASE_STORE_DYNAMODB_H

#include <stddef.h>

#include "kn/conf.h"
#include "kn/error.h"
#include "lease/store.h"
#include "util/buf.h"

/* One blocking DynamoDB call (JSON 1.0): action ("UpdateItem") with a
 * JSON body; on success returns NULL and fills *out with the response
 * body (the store frees it).  Retrying retriable failures is the
 * transport's job. */
typedef kn_error_t *kn_ddb_call_fn(void *opaque, const char *action,
                                   const char *body, size_t len, kn_buf_t *out);

/* A store on table calling through call(opaque, ...).  The store owns
 * opaque from this call on: cleanup(opaque) (may be NULL) runs when the
 * store is destroyed, or before this returns NULL on failure.  table is
 * copied. */
kn_lease_store_t *kn_lease_store_dynamodb_new(const char *table,
                                              kn_ddb_call_fn *call,
                                              void *opaque,
                                              void (*cleanup)(void *opaque),
                                              kn_error_t **errp);

/* What kn_lease_store_open() does for "dynamodb:TABLE": calls go through
 * the client's DynamoDB settings, or, with client NULL, through a
 * service handle of the store's own built from the environment. */
struct kn_client_s;
kn_lease_store_t *kn_lease_store_dynamodb_open(const char *table,
                                               struct kn_client_s *client,
                                               kn_error_t **errp);

/* A store with a service handle, I/O thread and credentials of its own,
 * from conf's client properties (NULL: defaults; copied), the
 * environment and the shared config files. */
kn_lease_store_t *kn_lease_store_dynamodb_open_conf(const char *table,
                                                    const kn_conf_t *conf,
                                                    kn_error_t **errp);

/* Tuning for tests: Scan pages of at most limit items (0: the service's
 * 1 MB pages), and how long ensure_table waits for ACTIVE.  No effect on
 * other stores. */
void kn_lease_store_dynamodb_set_scan_limit(kn_lease_store_t *ls, int limit);
void kn_lease_store_dynamodb_set_table_wait(kn_lease_store_t *ls, long wait_ms);

#endif
