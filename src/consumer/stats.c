/* The consumer's statistics document (docs/STATISTICS.md). */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/efo.h"
#include "util/buf.h"
#include "util/clock.h"

static int add_str(kn_buf_t *b, const char *key, const char *v) {
  int rc = kn_buf_printf(b, "\"%s\":", key);
  if (!v) return rc | kn_buf_append_str(b, "null");
  return rc | kn_buf_append_json_str(b, v, strlen(v));
}

static int add_checkpoint(kn_buf_t *b, const kn_cshard_t *cs, int leases) {
  int rc = kn_buf_append_str(b, ",\"checkpoint\":");
  if (leases) {
    const char *c = cs->view.ckpt;
    if (!c[0]) return rc | kn_buf_append_str(b, "null");
    if (c[0] < '0' || c[0] > '9') return rc | kn_buf_printf(b, "\"%s\"", c);
    return rc | kn_buf_printf(b, "{\"seq\":\"%s\",\"subseq\":%llu}", c,
                              (unsigned long long)cs->view.ckpt_subseq);
  }
  if (!cs->has_processed) return rc | kn_buf_append_str(b, "null");
  return rc |
         kn_buf_printf(b, "{\"seq\":\"%s\",\"subseq\":%llu}", cs->processed.seq,
                       (unsigned long long)cs->processed.subseq);
}

char *kn_consumer_stats_json(kn_consumer_t *kc) {
  kn_buf_t b = KN_BUF_INIT;
  int leases = strcmp(kn_conf_str(kc->conf, "lease.store"), "none") != 0;
  /* mu only: the lease fields are the driver's view (cs->view). */
  pthread_mutex_lock(&kc->mu);
  size_t held = 0;
  uint64_t records = 0, bytes = 0;
  int64_t max_behind = -1;
  for (size_t i = 0; i < kc->n_shards; i++) {
    const kn_cshard_t *cs = kc->shards[i];
    held += cs->view.held;
    records += cs->records_delivered;
    bytes += cs->bytes_delivered;
    if ((cs->state == KN_CS_READING) && cs->millis_behind > max_behind)
      max_behind = cs->millis_behind;
  }
  int rc = kn_buf_printf(&b, "{\"ts\":%lld,", (long long)kn_wall_ms());
  rc |= add_str(&b, "stream", kc->stream);
  rc |= kn_buf_append_char(&b, ',');
  rc |= add_str(&b, "app", kn_conf_str(kc->conf, "app.name"));
  rc |= kn_buf_append_char(&b, ',');
  rc |= add_str(&b, "worker", kc->worker_id);
  rc |= kn_buf_append_char(&b, ',');
  rc |= add_str(&b, "lease_store", kn_conf_str(kc->conf, "lease.store"));
  rc |= kn_buf_printf(
      &b,
      ",\"records\":%llu,\"bytes\":%llu,\"dropped_records\":%llu,"
      "\"max_millis_behind\":%lld,"
      "\"queued_batches\":%zu,\"buffered_bytes\":%zu,"
      "\"leases\":{\"held\":%zu,\"taken\":%llu,\"lost\":%llu,"
      "\"handed_over\":%llu,"
      "\"renewals\":%llu,\"renew_failures\":%llu,\"renew_last_ms\":%.3f,"
      "\"renew_max_ms\":%.3f},\"shards\":[",
      (unsigned long long)records, (unsigned long long)bytes,
      (unsigned long long)kc->records_dropped, (long long)max_behind, kc->q_len,
      kc->total_bytes, held, (unsigned long long)kc->lstats.taken,
      (unsigned long long)kc->lstats.lost,
      (unsigned long long)kc->lstats.handed_over,
      (unsigned long long)kc->lstats.renewals,
      (unsigned long long)kc->lstats.renew_failures,
      (double)kc->lstats.renew_last_us / 1000.0,
      (double)kc->lstats.renew_max_us / 1000.0);
  for (size_t i = 0; i < kc->n_shards; i++) {
    const kn_cshard_t *cs = kc->shards[i];
    rc |= kn_buf_append_str(&b, i ? ",{" : "{");
    rc |= add_str(&b, "shard", cs->id);
    rc |= kn_buf_append_char(&b, ',');
    rc |= add_str(&b, "owner", !leases || cs->view.held ? kc->worker_id : NULL);
    rc |= kn_buf_printf(
        &b,
        ",\"state\":\"%s\",\"lease_counter\":%lld,\"fencing_token\":%lld,"
        "\"millis_behind\":%lld,\"records\":%llu,\"bytes\":%llu,"
        "\"buffered_records\":%zu,\"buffered_bytes\":%zu,\"paused\":%s,"
        "\"caught_up\":%s",
        kn_cshard_state_name(cs->state),
        (long long)(leases && cs->view.held ? cs->view.counter : -1),
        (long long)cs->fencing_token, (long long)cs->millis_behind,
        (unsigned long long)cs->records_delivered,
        (unsigned long long)cs->bytes_delivered, cs->buffered_records,
        cs->buffered_bytes, cs->paused ? "true" : "false",
        cs->caught_up ? "true" : "false");
    rc |= add_checkpoint(&b, cs, leases);
    rc |= kn_efo_stats_json(&b, cs);
    rc |= kn_buf_append_char(&b, '}');
  }
  rc |= kn_buf_append_str(&b, "]}");
  pthread_mutex_unlock(&kc->mu);
  if (rc) {
    kn_buf_free(&b);
    return NULL;
  }
  return kn_buf_steal(&b, NULL);
}

void kn_stats_maybe_emit(kn_consumer_t *kc) {
  typedef void (*stats_cb_t)(void *, const char *, size_t);
  stats_cb_t cb = (stats_cb_t)kc->conf->cbs[KN_CB_STATS];
  int64_t every = kn_conf_int(kc->conf, "statistics.interval.ms");
  if (!cb || every <= 0) return;
  int64_t now = kn_mono_ms();
  if (kc->next_stats_ms == 0) kc->next_stats_ms = now + every;
  if (now < kc->next_stats_ms) return;
  kc->next_stats_ms = now + every;
  char *json = kn_consumer_stats_json(kc);
  if (json) cb(kc->conf->cb_opaque[KN_CB_STATS], json, strlen(json));
  free(json);
}
