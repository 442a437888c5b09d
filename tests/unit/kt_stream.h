/* kt_stream.h - shards of a simulated stream for the tests of the
 * stream-processor model (test_enumerator.c, test_stream_model.c). */
#ifndef KT_STREAM_H
#define KT_STREAM_H

#include <stdio.h>

#include "kinesis/hashkey.h"
#include "kinesis/shard.h"

/* "shardId-" and i in 12 digits; one of 4 rotating buffers. */
static inline const char *kt_shard_id(int i) {
  static char b[4][32];
  static int k;
  char *s = b[k++ % 4];
  snprintf(s, 32, "shardId-%012d", i);
  return s;
}

/* Appends shard i (parent, adj: -1 when none) with its hash key range,
 * open or closed, as a listing shows it. */
static inline void kt_shard_add(kn_shard_list_t *l, int i, int parent, int adj,
                                kn_u128_t start, kn_u128_t end, int open) {
  char hs[48], he[48], id[32], p[32], a[32];
  hs[kn_u128_format(start, hs)] = '\0';
  he[kn_u128_format(end, he)] = '\0';
  snprintf(id, sizeof(id), "%s", kt_shard_id(i));
  snprintf(p, sizeof(p), "%s", parent >= 0 ? kt_shard_id(parent) : "");
  snprintf(a, sizeof(a), "%s", adj >= 0 ? kt_shard_id(adj) : "");
  kn_shard_desc_t d = {id,  parent >= 0 ? p : NULL, adj >= 0 ? a : NULL, hs, he,
                       "1", open ? NULL : "9"};
  kn_shard_list_add(l, &d);
}

#endif
