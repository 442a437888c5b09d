/* Leases as DynamoDB items, attribute for attribute as the KCL's
 * DynamoDBLeaseSerializer writes them.  Pure: JSON in, JSON out. */
#ifndef KN_LEASE_DDB_ITEM_H
#define KN_LEASE_DDB_ITEM_H

#include "util/json.h"
#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"
#include "lease/lease.h"

/* Attribute names (DESIGN.md 5.3). */
#define KN_DDB_LEASE_KEY "leaseKey"
#define KN_DDB_LEASE_OWNER "leaseOwner"
#define KN_DDB_LEASE_COUNTER "leaseCounter"
#define KN_DDB_OWNER_SWITCHES "ownerSwitchesSinceCheckpoint"
#define KN_DDB_CHECKPOINT "checkpoint"
#define KN_DDB_CHECKPOINT_SUBSEQ "checkpointSubSequenceNumber"
#define KN_DDB_PENDING "pendingCheckpoint"
#define KN_DDB_PENDING_SUBSEQ "pendingCheckpointSubSequenceNumber"
#define KN_DDB_PENDING_STATE "pendingCheckpointState"
#define KN_DDB_PARENTS "parentShardId"
#define KN_DDB_CHILDREN "childShardIds"
#define KN_DDB_HASH_START "startingHashKey"
#define KN_DDB_HASH_END "endingHashKey"
#define KN_DDB_CHECKPOINT_OWNER "checkpointOwner"
/* Written by this library alone (store.h, mark). */
#define KN_DDB_BEAT_FAILING "ownerBeatFailing"
/* Written by KCL 3.x; items of another entity type than LEASE are not
 * leases and are skipped. */
#define KN_DDB_ENTITY_TYPE "entityType"
/* The KCL 3.x's item for one worker's metrics in the lease table, whose
 * leaseKey is the worker's id. */
#define KN_DDB_ENTITY_WORKER_METRICS "WORKER_METRIC_STATS"

/* Attribute values; new references, NULL on out-of-memory. */
json_t *kn_ddb_s(const char *s);
json_t *kn_ddb_n(int64_t v);
json_t *kn_ddb_b(const void *p, size_t n);
json_t *kn_ddb_ss(char *const *v, size_t n); /* n > 0 */

/* The item for l: the KCL attributes it has, plus the attributes of
 * l->extra (the known ones win).  New reference; NULL with *errp set on
 * out-of-memory or a malformed l->extra. */
json_t *kn_ddb_item_from_lease(const kn_lease_t *l, kn_error_t **errp);

/* Reads a lease from an item (borrowed).  Attributes that are not the
 * KCL's go, verbatim, to out->extra.  A known attribute of another type
 * than expected is ignored, as the KCL does.  Returns 0; 1 when the item
 * is not a lease (another entityType); -1 with *errp set (out-of-memory,
 * no leaseKey, a malformed number).  out is cleared on error. */
int kn_ddb_item_to_lease(json_t *item, kn_lease_t *out, kn_error_t **errp);
/* The worker id of a KCL 3.x worker-metrics item (borrowed from item), or
 * NULL for any other item. */
const char *kn_ddb_item_metrics_worker(json_t *item);

/* The membership item (store.h, heartbeat): in the table TABLE-members,
 * whose hash key is "key", the one item {"key": {"S": "members"}} holds
 * the epoch (N) and one attribute "w:WORKER" per worker, a list
 * [N beat, N leases]. */
#define KN_DDB_MEMBERS_SUFFIX "-members"
#define KN_DDB_MEMBERS_KEY "key"
#define KN_DDB_MEMBERS_ITEM "members"
#define KN_DDB_MEMBERS_EPOCH "epoch"
#define KN_DDB_MEMBERS_DIGEST "digest"
#define KN_DDB_MEMBER_PREFIX "w:"

/* The attribute value of one member: {"L": [{"N": beat}, {"N": leases}]};
 * new reference, NULL on out-of-memory. */
json_t *kn_ddb_member_value(int64_t beat, int64_t leases);

/* Reads the membership from the item (borrowed), sorted by worker id,
 * with the leader's digest (a string attribute "digest") where there is
 * one.  Other attributes than those, the epoch and "w:..." are ignored,
 * and so are
 * "w:..." attributes that are not a list of two integers.  Returns 0, or
 * -1 with *errp set: KN_ERR__BAD_MSG when item is not an object or has no
 * integer epoch, KN_ERR__NOMEM.  out is zeroed on error. */
int kn_ddb_item_to_members(json_t *item, kn_members_t *out, kn_error_t **errp);

#endif
