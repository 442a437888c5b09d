/* What happens to a GetRecords batch between decoding and delivery:
 * KPL aggregates are split into user records, user records at or below the
 * resume position are dropped, and aggregates that belong to another
 * shard's hash range are dropped (the producer re-sends them there) and
 * counted, except on a stream whose service places records (AUTO), where
 * they are delivered. */
#ifndef KN_CONSUMER_RECORDS_FILTER_H
#define KN_CONSUMER_RECORDS_FILTER_H

#include "consumer/consumer_int.h"

/* I/O thread.  skip may be NULL. */
void kn_records_filter(kn_consumer_t *kc, kn_cshard_t *cs, kn_batch_t *b,
                       const kn_pos_t *skip);

#endif
