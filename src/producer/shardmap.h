/* The producer's shard map: which open shard holds a hash key.  Pure.
 *
 * Built from a ListShards answer: open shards (no EndingSequenceNumber)
 * sorted by their first hash key, searched by bisection.  Closed shards
 * stay findable by id, for checking where a record landed. */
#ifndef KN_PRODUCER_SHARDMAP_H
#define KN_PRODUCER_SHARDMAP_H

#include <stddef.h>

#include "kinesis/hashkey.h"
#include "kinesis/shard.h"

typedef struct kn_shardmap {
  kn_shard_list_t *all;    /* owned: every shard listed */
  const kn_shard_t **open; /* owned array; shards point into all */
  size_t n_open;
} kn_shardmap_t;

/* Takes ownership of l (even on failure).  Returns 0, or -1 on
 * out-of-memory (m is then empty). */
int kn_shardmap_init(kn_shardmap_t *m, kn_shard_list_t *l);
void kn_shardmap_clear(kn_shardmap_t *m);

/* Index in m->open of the open shard whose range holds hk, or -1 when no
 * open shard does (a gap: the listing was taken mid-reshard). */
long kn_shardmap_find(const kn_shardmap_t *m, kn_u128_t hk);

/* Any listed shard (open or closed) by id, or NULL. */
const kn_shard_t *kn_shardmap_by_id(const kn_shardmap_t *m, const char *id);

#endif
