/* What the consumer does with a KPL aggregate whose user records belong
 * to another shard's hash range: dropped and counted on a stream of user
 * keys (the producer sends them again where they belong), delivered on a
 * stream whose service places records (RecordDistributionStrategy AUTO:
 * the service put the aggregate there, nothing else will come). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "consumer/consumer_int.h"
#include "consumer/records_filter.h"
#include "kinesis/batch.h"
#include "kt.h"

#define TOP_KEY "340282366920938463463374607431768211455"

/* One Kinesis record: an aggregate of three user records whose explicit
 * hash keys are the top of the key space.  NULL on out-of-memory. */
static kn_batch_t *aggregate_batch(void) {
  kn_aggregator_t *a = kn_aggregator_new(KN_AGG_DEFAULT_MAX_BYTES, 0);
  if (!a) return NULL;
  int ok = 1;
  for (int i = 0; i < 3 && ok; i++)
    ok = kn_aggregator_add(a, "k", 1, TOP_KEY, strlen(TOP_KEY), "data", 4) ==
         KN_ERR_NO_ERROR;
  kn_agg_out_t out;
  kn_batch_t *b = NULL;
  void *data;
  kn_record_t *r;
  if (ok && kn_aggregator_flush(a, &out) == KN_ERR_NO_ERROR &&
      (b = kn_batch_new("s", "shardId-0")) &&
      (data = kn_batch_alloc(b, out.len)) && (r = kn_batch_push(b))) {
    memcpy(data, out.data, out.len);
    r->data = data;
    r->len = out.len;
    r->pkey = "a";
    r->seq = "1";
    b->bytes = out.len;
  }
  kn_aggregator_destroy(a);
  if (b && b->n != 1) {
    kn_batch_destroy(b);
    b = NULL;
  }
  return b;
}

static void run(int auto_dist, size_t want_delivered, uint64_t want_dropped) {
  kn_consumer_t *kc = calloc(1, sizeof(*kc));
  KT_REQUIRE(kc != NULL);
  pthread_mutex_init(&kc->mu, NULL);
  kc->cfg.deaggregate = 1;
  atomic_store(&kc->auto_dist, auto_dist);
  kn_cshard_t cs;
  memset(&cs, 0, sizeof(cs));
  cs.id = "shardId-0";
  cs.range_end = kn_u128_make(UINT64_MAX >> 1, UINT64_MAX); /* lower half */
  kn_batch_t *b = aggregate_batch();
  if (b) {
    kn_records_filter(kc, &cs, b, NULL);
    KT_CHECK_INT(b->n, want_delivered);
    KT_CHECK_INT(kc->records_dropped, want_dropped);
    kn_batch_destroy(b);
  }
  pthread_mutex_destroy(&kc->mu);
  free(kc);
}

static void test_user_keys_drop_and_count(void) { run(0, 0, 3); }

static void test_auto_delivers(void) { run(1, 3, 0); }

int main(void) {
  KT_RUN(test_user_keys_drop_and_count);
  KT_RUN(test_auto_delivers);
  return KT_DONE();
}
