/* The consumer's table of known shards (kc->shards), with mu held. */
#ifndef KN_CONSUMER_SHARD_TABLE_H
#define KN_CONSUMER_SHARD_TABLE_H

#include "consumer/consumer_int.h"

kn_cshard_t *kn_shard_table_find(kn_consumer_t *kc, const char *id);
/* A new WAITING entry for s (copied), or NULL on out-of-memory. */
kn_cshard_t *kn_shard_table_add(kn_consumer_t *kc, const kn_shard_t *s);
/* The same from fields (copied; parents and hash keys may be NULL). */
kn_cshard_t *kn_shard_table_add_raw(kn_consumer_t *kc, const char *id,
                                    const char *parent,
                                    const char *adjacent_parent,
                                    const char *hash_start,
                                    const char *hash_end, int closed);
/* Each parent of cs has been read to its end, is not ours to read, or is
 * not known (expired past retention). */
int kn_shard_table_parents_done(kn_consumer_t *kc, const kn_cshard_t *cs);
/* Frees every entry (the queue must hold none of them). */
void kn_shard_table_clear(kn_consumer_t *kc);

#endif
