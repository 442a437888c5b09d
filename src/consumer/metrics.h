/* The consumer's metrics (docs/METRICS.md) and health: the counters the
 * statistics do not keep already, and kn_consumer_metrics() /
 * kn_consumer_health(). */
#ifndef KN_CONSUMER_METRICS_H
#define KN_CONSUMER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/consumer_int.h"
#include "consumer/store_pool.h"

/* A lease-store call or listing finished (driver.c, control thread):
 * counts it, its duration, what it did to leases (released, stolen) and
 * the table's shape after a listing.  mu held. */
void kn_metrics_store_done_locked(kn_consumer_t *kc, const kn_store_job_t *j);
/* poll handed out a batch of n_records records of cs (already added to
 * records_delivered), for the checkpoint lag.  Lease mode; mu held. */
void kn_metrics_delivered_locked(kn_cshard_t *cs, size_t n_records);
/* cs's checkpoint was written (the drive's view), for the checkpoint lag.
 * mu held. */
void kn_metrics_ckpt_written_locked(kn_cshard_t *cs, const char *ckpt,
                                    int64_t subseq);

#endif
