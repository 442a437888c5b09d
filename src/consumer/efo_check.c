/* What the control thread finds out for the fan-out readers.
 *
 * ResourceNotFound from SubscribeToShard names neither the consumer nor
 * the shard.  Treating it as the end of the shard (as some consumers do
 * after their stream consumer was deleted) loses the rest of the shard,
 * so it is checked: DescribeStreamConsumer by ARN first (deleted: lazy
 * registration registers it again and every reader resubscribes with the
 * new ARN; the other strategies stop the consumer), then ListShards (the
 * shard is really gone: handled as the polling reader's
 * KN_CTL_SHARD_GONE).  Anything else, or a failing check, lets the
 * reader try again.
 *
 * Idle subscriptions ask for a ListShards (at most every
 * KN_EFO_LIST_MIN_MS): kinesis-local never ends a subscription at the
 * end of a closed shard, so a closed shard is only known from the
 * listing, and a reader does not call itself caught up before a listing
 * that began after it went idle. */
#include <stdlib.h>
#include <string.h>

#include "consumer/efo.h"
#include "consumer/shard_table.h"
#include "core/error.h"
#include "util/clock.h"
#include "util/str.h"

/* How long a check's findings are reused by the next checks (a deleted
 * consumer makes every reader report at once). */
#define KN_EFO_CHECK_CACHE_MS 5000

/* A new listing into efo->listing; marks the closed shards. */
static kn_error_t *list_now(kn_consumer_t *kc) {
  kn_efo_t *efo = kc->efo;
  kn_shard_list_t *list = NULL;
  kn_error_t *err = kn_list_shards(kc->client, kc->stream, KN_SHARD_FILTER_NONE,
                                   NULL, 0, &list);
  if (err) return err;
  size_t closed = 0;
  pthread_mutex_lock(&kc->mu);
  for (size_t i = 0; i < kn_shard_list_count(list); i++) {
    const kn_shard_t *s = kn_shard_list_get(list, i);
    if (kn_shard_is_open(s)) continue;
    kn_cshard_t *cs = kn_shard_table_find(kc, kn_shard_id(s));
    if (cs && !cs->closed_at_sync) {
      cs->closed_at_sync = 1;
      closed += cs->efo_reader != NULL;
    }
  }
  pthread_mutex_unlock(&kc->mu);
  if (closed)
    kn_info(&kc->log, "EFO",
            "%zu subscribed shard(s) closed: finishing "
            "them with GetRecords once their subscriptions are idle",
            closed);
  kn_shard_list_destroy(efo->listing);
  efo->listing = list;
  efo->listing_ms = kn_mono_ms();
  return NULL;
}

static void listing_for_idle(kn_consumer_t *kc) {
  kn_efo_t *efo = kc->efo;
  pthread_mutex_lock(&kc->mu);
  uint64_t seq = ++efo->lists_started;
  pthread_mutex_unlock(&kc->mu);
  kn_error_t *err = list_now(kc);
  if (err) {
    kn_dbg(&kc->log, "EFO", "ListShards: %s", kn_error_string(err));
    kn_error_destroy(err);
  }
  pthread_mutex_lock(&kc->mu);
  if (!err && seq > efo->lists_done) efo->lists_done = seq;
  efo->list_pending = 0;
  efo->list_last_ms = kn_mono_ms();
  pthread_mutex_unlock(&kc->mu);
}

typedef enum {
  CONSUMER_OK,
  CONSUMER_GONE,
  CONSUMER_UNKNOWN
} consumer_verdict_t;

static consumer_verdict_t consumer_state(kn_consumer_t *kc, const char *arn,
                                         uint64_t gen) {
  kn_efo_t *efo = kc->efo;
  if (efo->verified_gen == gen &&
      kn_mono_ms() - efo->verified_ms < KN_EFO_CHECK_CACHE_MS)
    return CONSUMER_OK;
  kn_stream_consumer_t *c = NULL;
  kn_error_t *err =
      kn_describe_stream_consumer(kc->client, NULL, NULL, arn, &c);
  if (err) {
    consumer_verdict_t v = kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND
                               ? CONSUMER_GONE
                               : CONSUMER_UNKNOWN;
    if (v == CONSUMER_UNKNOWN)
      kn_warn(&kc->log, "EFO", "checking stream consumer %s: %s", arn,
              kn_error_string(err));
    kn_error_destroy(err);
    return v;
  }
  const char *st = kn_stream_consumer_status(c);
  consumer_verdict_t v = CONSUMER_UNKNOWN; /* CREATING: try again */
  if (st && strcmp(st, "ACTIVE") == 0) {
    v = CONSUMER_OK;
    efo->verified_gen = gen;
    efo->verified_ms = kn_mono_ms();
  } else if (st && strcmp(st, "DELETING") == 0) {
    v = CONSUMER_GONE;
  }
  kn_stream_consumer_destroy(c);
  return v;
}

static void retry_all_locked(kn_consumer_t *kc) {
  for (size_t i = 0; i < kc->n_shards; i++)
    kn_efo_reader_retry_locked(kc, kc->shards[i]);
}

static void consumer_gone(kn_consumer_t *kc, const char *arn, uint64_t gen) {
  kn_efo_t *efo = kc->efo;
  pthread_mutex_lock(&kc->mu);
  int renewed = efo->generation != gen; /* by an earlier check */
  if (renewed) retry_all_locked(kc);
  pthread_mutex_unlock(&kc->mu);
  if (renewed) return;
  if (efo->registration != KN_EFO_LAZY) {
    kn_efo_fail(kc,
                kn_error_new(KN_ERR_RESOURCE_NOT_FOUND,
                             "stream consumer %s no longer exists "
                             "(efo.registration=%s does not register it "
                             "again)",
                             arn, kn_efo_registration_name(efo->registration)));
    return;
  }
  kn_warn(&kc->log, "EFO",
          "stream consumer %s is gone: registering \"%s\" "
          "again",
          arn, efo->name);
  char *fresh = NULL;
  kn_error_t *err = kn_efo_ensure(kc, &fresh);
  if (err) {
    if (kn_error_code(err) == KN_ERR__DESTROY)
      kn_error_destroy(err);
    else
      kn_efo_fail(kc, kn_error_prefix(err,
                                      "registering stream consumer "
                                      "\"%s\" again",
                                      efo->name));
    return;
  }
  pthread_mutex_lock(&kc->mu);
  free(efo->consumer_arn);
  efo->consumer_arn = fresh;
  efo->generation++;
  efo->verified_gen = efo->generation;
  efo->verified_ms = kn_mono_ms();
  retry_all_locked(kc);
  pthread_mutex_unlock(&kc->mu);
  kn_info(&kc->log, "EFO", "subscribing again through %s", fresh);
}

void kn_efo_check(kn_consumer_t *kc, kn_cshard_t *cs, int64_t tenure,
                  const kn_error_t *why) {
  kn_efo_t *efo = kc->efo;
  if (!efo) return;
  if (!cs) {
    listing_for_idle(kc);
    return;
  }
  pthread_mutex_lock(&kc->mu);
  int reading = cs->efo_reader != NULL;
  uint64_t gen = efo->generation;
  char *arn = kn_strdup0(efo->consumer_arn);
  pthread_mutex_unlock(&kc->mu);
  if (!reading || !arn) { /* stopped meanwhile */
    free(arn);
    return;
  }
  switch (consumer_state(kc, arn, gen)) {
    case CONSUMER_GONE:
      consumer_gone(kc, arn, gen);
      free(arn);
      return;
    case CONSUMER_UNKNOWN:
      break;
    case CONSUMER_OK: {
      /* The consumer is there: is the shard? */
      kn_error_t *err = NULL;
      if (!efo->listing ||
          kn_mono_ms() - efo->listing_ms >= KN_EFO_CHECK_CACHE_MS)
        err = list_now(kc);
      if (err) {
        kn_warn(&kc->log, "EFO", "shard %s: ListShards: %s", cs->id,
                kn_error_string(err));
        kn_error_destroy(err);
        break;
      }
      if (!kn_shard_list_find(efo->listing, cs->id)) {
        kn_control_post_tenure(kc, KN_CTL_SHARD_GONE, cs, tenure,
                               kn_error_copy(why), NULL);
        free(arn);
        return;
      }
      kn_warn(&kc->log, "EFO",
              "shard %s: %s, yet the shard is listed and "
              "the consumer ACTIVE: subscribing again",
              cs->id, kn_error_string(why));
      break;
    }
  }
  free(arn);
  pthread_mutex_lock(&kc->mu);
  kn_efo_reader_retry_locked(kc, cs);
  pthread_mutex_unlock(&kc->mu);
}
