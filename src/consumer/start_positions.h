/* A consumer without a lease store that starts from a reader snapshot
 * (the `start.positions` property, include/kn/snapshot.h): decoding it,
 * and turning its entries into each shard's start. */
#ifndef KN_CONSUMER_START_POSITIONS_H
#define KN_CONSUMER_START_POSITIONS_H

#include "consumer/consumer_int.h"
#include "kn/snapshot.h"

/* The snapshot of `start.positions` into *out (NULL when the property is
 * unset or the snapshot empty; the caller owns it).  An error names what
 * is wrong with the property. */
kn_error_t *kn_start_positions_load(kn_consumer_t *kc, kn_snapshot_t **out);

/* Sets where cs starts from s (NULL: leaves it): finished shards become
 * KN_CS_DONE, positions become cs->start, absent shards TRIM_HORIZON.
 * Control thread, mu held. */
void kn_start_positions_apply(const kn_snapshot_t *s, kn_cshard_t *cs);

/* kn_pos_t and kn_position_t into each other. */
void kn_start_position_to_pos(const kn_position_t *p, kn_pos_t *out);
void kn_start_pos_to_position(const kn_pos_t *p, kn_position_t *out);

#endif
