/* The shard graph of a stream: who is whose parent, which shards may be
 * read, in what order, and whether the open shards tile the hash key
 * space.  Pure: built from a shard list (ListShards, ChildShards, or the
 * lease table), no I/O.
 *
 * A split closes one parent and opens two children that each name it as
 * ParentShardId; a merge closes two parents and opens one child naming
 * them as ParentShardId and AdjacentParentShardId.  Parents older than the
 * retention period disappear from ListShards while their children still
 * name them: a parent absent from the list counts as finished. */
#ifndef KN_KINESIS_SHARDGRAPH_H
#define KN_KINESIS_SHARDGRAPH_H

#include <stddef.h>

#include "kinesis/hashkey.h"
#include "kinesis/shard.h"

typedef struct kn_shardgraph kn_shardgraph_t;

/* Indexes l, which is borrowed: it must not change or go away while the
 * graph lives.  Duplicate ids keep the first occurrence.  NULL on
 * out-of-memory. */
kn_shardgraph_t *kn_shardgraph_new(const kn_shard_list_t *l);
/* Accepts NULL. */
void kn_shardgraph_destroy(kn_shardgraph_t *g);

/* Index into the list of the shard with that id, or -1 (binary search). */
long kn_shardgraph_find(const kn_shardgraph_t *g, const char *id);

/* The shards naming shard i as a parent or adjacent parent, as list
 * indexes in shard id order; *n gets the count.  Owned by the graph. */
const size_t *kn_shardgraph_children(const kn_shardgraph_t *g, size_t i,
                                     size_t *n);

/* Called with a parent's id: non-zero if that parent has been read to its
 * end (its lease reached SHARD_END). */
typedef int(kn_shard_done_fn)(void *opaque, const char *shard_id);

/* Non-zero if shard i may be read: each of its parents is either done or
 * absent from the list. */
int kn_shardgraph_ready(const kn_shardgraph_t *g, size_t i,
                        kn_shard_done_fn *done, void *opaque);

/* Every list index once, parents before children; among shards whose
 * parents are placed, smaller ids first, so the order is deterministic.
 * Owned by the graph; kn_shardgraph_count() entries. */
const size_t *kn_shardgraph_order(const kn_shardgraph_t *g);
size_t kn_shardgraph_count(const kn_shardgraph_t *g);
/* Non-zero if the parent links form a cycle (malformed input); the order
 * then ends with the shards of the cycle in id order. */
int kn_shardgraph_has_cycle(const kn_shardgraph_t *g);

/* Index of the open shard whose range holds key, or -1.  Where open
 * shards overlap, the one with the greatest starting key wins. */
long kn_shardgraph_cover(const kn_shardgraph_t *g, kn_u128_t key);

typedef enum kn_hash_issue_kind {
  KN_HASH_GAP = 1,    /* keys no open shard holds */
  KN_HASH_OVERLAP = 2 /* keys two open shards hold */
} kn_hash_issue_kind_t;

typedef struct kn_hash_issue {
  kn_hash_issue_kind_t kind;
  kn_u128_t start, end; /* the keys concerned, inclusive */
  long a, b; /* GAP: the open shards below and above (-1 at the edges);
                OVERLAP: the two shards */
} kn_hash_issue_t;

/* Checks that the open shards cover 0 .. 2^128-1 exactly once.  Writes at
 * most max issues, in key order, and returns how many there are (0: the
 * open shards tile the space). */
size_t kn_shardgraph_check(const kn_shardgraph_t *g, kn_hash_issue_t *out,
                           size_t max);

#endif
