/* Internal layout of kn_shard_t and kn_shard_list_t (include/kn/client.h).
 *
 * A list owns its shards and every string they point at. */
#ifndef KN_KINESIS_SHARD_H
#define KN_KINESIS_SHARD_H

#include <stddef.h>

#include "kinesis/hashkey.h"
#include "kn/client.h"

struct kn_shard_s {
  char *id;
  char *parent;          /* NULL when none */
  char *adjacent_parent; /* NULL when none (set for the child of a merge) */
  char *hk_start;        /* decimal, as the service sent it */
  char *hk_end;
  kn_u128_t start, end; /* parsed hash key range */
  char *seq_start;      /* NULL when not reported (ChildShards) */
  char *seq_end;        /* non-NULL only for a closed shard */
};

struct kn_shard_list_s {
  kn_shard_t *v;
  size_t n, cap;
};

/* NULL on out-of-memory. */
kn_shard_list_t *kn_shard_list_new(void);

/* The fields of one shard as borrowed strings (copied by the list). */
typedef struct kn_shard_desc {
  const char *id;
  const char *parent, *adjacent_parent; /* or NULL */
  const char *hk_start, *hk_end;        /* decimal */
  const char *seq_start, *seq_end;      /* or NULL */
} kn_shard_desc_t;

/* Appends a copy of the shard.  Returns 0; -1 when a hash key is not a
 * 128-bit decimal or the id is missing or empty; -2 on out-of-memory.
 * The list is unchanged on failure. */
int kn_shard_list_add(kn_shard_list_t *l, const kn_shard_desc_t *d);

/* Index of the shard with that id, or -1.  Linear: for a few lookups; the
 * shard graph indexes large lists. */
long kn_shard_list_index(const kn_shard_list_t *l, const char *id);

/* A deep copy, or NULL on out-of-memory. */
kn_shard_list_t *kn_shard_list_dup(const kn_shard_list_t *l);

#endif
