/* The store threads of lease mode: the coordination core's lease-store
 * calls and shard listings run here, a few at a time, so one slow call
 * (a DynamoDB retry, a busy SQLite file, a long ListShards) never holds up
 * the others, renewals above all.  Each finished job goes back to the
 * control thread as a KN_CTL_STORE_DONE message.
 *
 * A job copies everything it needs from the core's action: the core's
 * strings are only valid until its next call. */
#ifndef KN_CONSUMER_STORE_POOL_H
#define KN_CONSUMER_STORE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/consumer_int.h"
#include "consumer/store_job.h"

typedef struct kn_store_pool kn_store_pool_t;

/* Starts n threads running jobs against kc->ls and kc->client (both must
 * outlive the pool).  NULL when no thread could be started. */
kn_store_pool_t *kn_store_pool_new(kn_consumer_t *kc, int n);
/* Queues j (taken).  Renewals go before the other queued calls. */
void kn_store_pool_submit(kn_store_pool_t *p, kn_store_job_t *j);
/* Drops the queued jobs, waits for the running ones (their results are
 * posted as usual) and frees the pool.  Accepts NULL. */
void kn_store_pool_destroy(kn_store_pool_t *p);

#endif
