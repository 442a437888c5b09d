/* Reading a lease table, for operators and tools (`kncat leases`).
 *
 * The consumer (consumer.h) owns the leases while it runs; this is a
 * read-only view of the table at one moment. */
#ifndef KN_LEASES_H
#define KN_LEASES_H

#include <stddef.h>
#include <stdint.h>

#include "kn/conf.h"
#include "kn/error.h"
#include "kn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_lease_list_s kn_lease_list_t;

/* Reads every lease of the table named by store ("sqlite:PATH",
 * "dynamodb:TABLE"), ordered by shard id, and the workers' membership
 * where the store keeps one (nothing is written).  conf (may be NULL) supplies
 * region, endpoint and credentials for DynamoDB; it is only read.  The
 * table is not created.  *out is owned by the caller. */
KN_API kn_error_t *kn_leases_list(const kn_conf_t *conf, const char *store,
                                  kn_lease_list_t **out);

KN_API size_t kn_lease_list_count(const kn_lease_list_t *l);
/* Strings are owned by the list. */
KN_API const char *kn_lease_list_shard(const kn_lease_list_t *l, size_t i);
/* The worker holding the lease, or NULL when free. */
KN_API const char *kn_lease_list_owner(const kn_lease_list_t *l, size_t i);
KN_API int64_t kn_lease_list_counter(const kn_lease_list_t *l, size_t i);
/* A decimal sequence number, TRIM_HORIZON, LATEST, AT_TIMESTAMP or
 * SHARD_END; NULL when absent. */
KN_API const char *kn_lease_list_checkpoint(const kn_lease_list_t *l, size_t i);
KN_API int64_t kn_lease_list_checkpoint_subseq(const kn_lease_list_t *l,
                                               size_t i);
/* The prepared (pending) checkpoint, or NULL. */
KN_API const char *kn_lease_list_pending(const kn_lease_list_t *l, size_t i);
KN_API int64_t kn_lease_list_owner_switches(const kn_lease_list_t *l, size_t i);
KN_API size_t kn_lease_list_parent_count(const kn_lease_list_t *l, size_t i);
KN_API const char *kn_lease_list_parent(const kn_lease_list_t *l, size_t i,
                                        size_t k);

/* The membership read with the leases (the workers' last heartbeats),
 * ordered by worker id: none when the store keeps no membership (a
 * DynamoDB lease table without its side table TABLE-members, or without
 * the rights to read it) or no worker has written a heartbeat yet. */
KN_API size_t kn_lease_list_member_count(const kn_lease_list_t *l);
/* Owned by the list. */
KN_API const char *kn_lease_list_member_worker(const kn_lease_list_t *l,
                                               size_t i);
/* The leases the worker held at its last heartbeat. */
KN_API int64_t kn_lease_list_member_leases(const kn_lease_list_t *l, size_t i);
/* A number that changes with every heartbeat of the worker. */
KN_API int64_t kn_lease_list_member_beat(const kn_lease_list_t *l, size_t i);
/* The epoch: a number the workers add to when they change what the
 * others may take; 0 without a membership. */
KN_API int64_t kn_lease_list_epoch(const kn_lease_list_t *l);

/* Accepts NULL. */
KN_API void kn_lease_list_destroy(kn_lease_list_t *l);

#ifdef __cplusplus
}
#endif
#endif
