/* Internal to the lease stores: the backends' constructors and the
 * helpers they share. */
#ifndef KN_LEASE_STORE_INT_H
#define KN_LEASE_STORE_INT_H

#include <stdint.h>

#include "lease/store.h"

/* name NULL: a private instance; otherwise the process-wide instance of
 * that name, created on first use and freed with its last handle. */
kn_lease_store_t *kn_lease_store_memory_open(const char *name,
                                             kn_error_t **errp);

/* Default time a SQLite call waits for another process's lock. */
#define KN_LEASE_SQLITE_BUSY_MS 5000

/* Opens (creating if needed) the SQLite file at path; a call that finds
 * the file locked for longer than busy_ms fails with a retriable
 * KN_ERR__IO.  path is copied. */
kn_lease_store_t *kn_lease_store_sqlite_open(const char *path, long busy_ms,
                                             kn_error_t **errp);
/* The same file for reading only (kn_leases_list): opened read-only, its
 * journal mode and schema left as they are; a schema of another version
 * than this library's, or none, is an error.  Only list and members may
 * be called. */
kn_lease_store_t *kn_lease_store_sqlite_open_ro(const char *path, long busy_ms,
                                                kn_error_t **errp);

/* The error for a failed condition, naming the store, the call and the
 * key. */
kn_error_t *kn_lease_ccf(const kn_lease_store_t *ls, const char *op,
                         const char *key);

/* Fills the head of a store: ops, and name (copied).  0, or -1 on
 * out-of-memory. */
int kn_lease_store_init(kn_lease_store_t *ls, const kn_lease_store_ops_t *ops,
                        const char *name);

#endif
