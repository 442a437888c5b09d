/* kn_producer_t: the application's side (send, poll, flush, close). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "kinesis/client_int.h"
#include "producer/producer_int.h"
#include "util/clock.h"
#include "util/cond.h"
#include "util/str.h"

static void load_cfg(kn_producer_t *kp) {
  const kn_conf_t *c = kp->conf;
  kp->cfg.ttl_us = kn_conf_int(c, "message.timeout.ms") * 1000;
  kp->cfg.max_records = (size_t)kn_conf_int(c, "queue.max.records");
  kp->cfg.max_bytes = (size_t)kn_conf_int(c, "queue.max.bytes");
  kp->cfg.max_in_flight = (int)kn_conf_int(c, "max.in.flight");
  kn_pcore_cfg_t *cc = &kp->core_cfg;
  cc->stream = kp->stream;
  cc->aggregate = kn_conf_bool(c, "aggregation.enable");
  cc->agg_max_bytes = (size_t)kn_conf_int(c, "aggregation.max.bytes");
  cc->agg_max_count = (size_t)kn_conf_int(c, "aggregation.max.records");
  cc->batch_max_records = (size_t)kn_conf_int(c, "batch.max.records");
  cc->batch_max_bytes = (size_t)kn_conf_int(c, "batch.max.bytes");
  cc->linger_us = kn_conf_int(c, "linger.ms") * 1000;
  double share = (double)kn_conf_int(c, "shard.rate.percent") / 100.0;
  cc->shard_records_per_s =
      (double)kn_conf_int(c, "shard.records.per.second") * share;
  cc->shard_bytes_per_s =
      (double)kn_conf_int(c, "shard.bytes.per.second") * share;
  cc->strict = kn_conf_bool(c, "ordering.strict");
  cc->shard_max_calls = (int)kn_conf_int(c, "shard.max.in.flight");
  cc->backoff_ms = kn_conf_int(c, "retry.backoff.ms");
  cc->backoff_max_ms = kn_conf_int(c, "retry.backoff.max.ms");
}

kn_producer_t *kn_producer_new(const kn_conf_t *conf, char *errstr,
                               size_t errstr_size) {
  char dummy[1];
  if (!errstr || !errstr_size) {
    errstr = dummy;
    errstr_size = sizeof(dummy);
  }
  kn_producer_t *kp = calloc(1, sizeof(*kp));
  if (!kp) {
    snprintf(errstr, errstr_size, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&kp->mu, NULL);
  kn_cond_init(&kp->dr_cv);
  kp->next_look_us = INT64_MAX;
  kp->conf = conf ? kn_conf_dup(conf) : kn_conf_new();
  if (!kp->conf) {
    snprintf(errstr, errstr_size, "out of memory");
    goto fail;
  }
  kn_conf_logger(kp->conf, &kp->log, "producer");
  const char *stream = kn_conf_str(kp->conf, "stream");
  if (!stream || !*stream) {
    snprintf(errstr, errstr_size, "the \"stream\" property is required");
    goto fail;
  }
  if (!(kp->stream = strdup(stream))) {
    snprintf(errstr, errstr_size, "out of memory");
    goto fail;
  }
  load_cfg(kp);
  kp->client = kn_client_new(kp->conf, errstr, errstr_size);
  if (!kp->client) goto fail;
  kp->loop = kp->client->loop;
  kp->svc = kp->client->svc;
  if (kn_loop_call(kp->loop, kn_sender_start, kp) || !kp->core) {
    snprintf(errstr, errstr_size, "out of memory");
    goto fail;
  }
  return kp;
fail:
  kp->closed = 1; /* nothing to flush */
  kn_producer_destroy(kp);
  return NULL;
}

/* ---- send ---- */

kn_err_t kn_producer_send(kn_producer_t *kp, const char *partition_key,
                          const char *explicit_hash_key, const void *data,
                          size_t len, int flags, void *opaque) {
  if (!kp || (!data && len)) return KN_ERR__INVALID_ARG;
  /* NULL: no key, for a stream whose service picks the shard. */
  int keyless = !partition_key;
  if (keyless) partition_key = "";
  size_t key_len = strlen(partition_key);
  long chars = kn_utf8_count(partition_key, key_len);
  if (chars < !keyless || chars > KN_PKEY_MAX_CHARS) return KN_ERR__INVALID_ARG;
  if (len > KN_PUT_RECORD_MAX_LARGE || key_len > KN_PUT_RECORD_MAX_LARGE - len)
    return KN_ERR__INVALID_ARG;
  kn_u128_t hk = kn_u128_make(0, 0);
  size_t ehk_len = 0;
  if (explicit_hash_key) {
    ehk_len = strlen(explicit_hash_key);
    if (kn_u128_parse(explicit_hash_key, ehk_len, &hk))
      return KN_ERR__INVALID_ARG;
  } else if (key_len) {
    hk = kn_hashkey_of(partition_key, key_len);
  }
  kn_msg_t *m = kn_msg_new(partition_key, key_len, explicit_hash_key, ehk_len,
                           data, len, flags, opaque);
  if (!m) return KN_ERR__NOMEM;
  m->hk = hk;
  m->enq_us = kn_mono_us();
  m->deadline_us = m->enq_us + kp->cfg.ttl_us;
  size_t size = kn_msg_size(m);

  kn_err_t rc = KN_ERR_NO_ERROR;
  pthread_mutex_lock(&kp->mu);
  if (kp->closing) {
    rc = KN_ERR__STATE;
  } else if (kp->described &&
             (len + key_len > kp->record_max || (!key_len && !kp->auto_dist))) {
    rc = KN_ERR__INVALID_ARG; /* checked on the I/O thread until known */
  } else if (kp->outq_records >= kp->cfg.max_records ||
             kp->outq_bytes + size > kp->cfg.max_bytes) {
    rc = KN_ERR__QUEUE_FULL;
  } else {
    if (!key_len && !explicit_hash_key) {
      /* Spread over the shards the producer's queues and rates. */
      uint64_t seq = kp->keyless_seq++;
      m->hk = kn_hashkey_of((const char *)&seq, sizeof(seq));
    }
    kn_msg_list_push(&kp->inbound, m);
    kp->inbound_bytes += size;
    kp->outq_records++;
    kp->outq_bytes += size;
    kp->counters[KN_PC_SENT]++;
    /* One wake-up of the I/O thread takes everything queued meanwhile. */
    int due = kp->inbound_bytes >= kp->core_cfg.batch_max_bytes / 4 ||
              m->enq_us + kp->core_cfg.linger_us < kp->next_look_us;
    if (due && !kp->drain_posted &&
        kn_loop_post(kp->loop, kn_sender_drain, kp) == 0)
      kp->drain_posted = 1;
  }
  pthread_mutex_unlock(&kp->mu);
  if (rc != KN_ERR_NO_ERROR) {
    m->flags &= ~KN_MSG_F_FREE; /* the caller keeps data */
    kn_msg_free(m);
  }
  return rc;
}

/* ---- poll and flush ---- */

int kn_producer_poll(kn_producer_t *kp, int timeout_ms) {
  /* No conf: a producer whose construction failed, being destroyed. */
  if (!kp || !kp->conf) return 0;
  typedef void (*dr_cb_t)(kn_producer_t *, const kn_msg_t *, void *);
  dr_cb_t cb = (dr_cb_t)kp->conf->cbs[KN_CB_DELIVERY];
  void *cb_opaque = kp->conf->cb_opaque[KN_CB_DELIVERY];
  int64_t deadline = timeout_ms > 0 ? kn_mono_ms() + timeout_ms : 0;

  pthread_mutex_lock(&kp->mu);
  while (!kp->reports.head && timeout_ms != 0) {
    if (timeout_ms < 0) {
      pthread_cond_wait(&kp->dr_cv, &kp->mu);
    } else if (kn_cond_wait_until(&kp->dr_cv, &kp->mu, deadline) == ETIMEDOUT) {
      break;
    }
  }
  kn_msg_list_t l = kp->reports;
  memset(&kp->reports, 0, sizeof(kp->reports));
  pthread_mutex_unlock(&kp->mu);
  if (!l.head) return 0;

  size_t n = 0, bytes = 0;
  for (kn_msg_t *m; (m = kn_msg_list_pop(&l));) {
    if (cb) cb(kp, m, cb_opaque);
    n++;
    bytes += kn_msg_size(m);
    kn_msg_free(m);
  }
  pthread_mutex_lock(&kp->mu);
  kp->outq_records -= n;
  kp->outq_bytes -= bytes;
  if (!kp->outq_records) pthread_cond_broadcast(&kp->dr_cv);
  pthread_mutex_unlock(&kp->mu);
  return (int)n;
}

kn_err_t kn_producer_flush(kn_producer_t *kp, int timeout_ms) {
  if (!kp) return KN_ERR__INVALID_ARG;
  int64_t end = timeout_ms < 0 ? INT64_MAX : kn_mono_ms() + timeout_ms;
  pthread_mutex_lock(&kp->mu);
  kp->flushing++;
  pthread_mutex_unlock(&kp->mu);
  kn_loop_post(kp->loop, kn_sender_kick, kp);
  kn_err_t rc = KN_ERR_NO_ERROR;
  for (;;) {
    pthread_mutex_lock(&kp->mu);
    size_t left = kp->outq_records;
    pthread_mutex_unlock(&kp->mu);
    if (!left) break;
    int64_t now = kn_mono_ms();
    if (now >= end) {
      rc = KN_ERR__TIMED_OUT;
      break;
    }
    int64_t wait = end - now;
    kn_producer_poll(kp, wait > 100 ? 100 : (int)wait);
  }
  pthread_mutex_lock(&kp->mu);
  kp->flushing--;
  pthread_mutex_unlock(&kp->mu);
  return rc;
}

size_t kn_producer_outq_len(kn_producer_t *kp) {
  if (!kp) return 0;
  pthread_mutex_lock(&kp->mu);
  size_t n = kp->outq_records;
  pthread_mutex_unlock(&kp->mu);
  return n;
}

uint64_t kn_producer_counter(kn_producer_t *kp, kn_producer_counter_t which) {
  if (!kp || (unsigned)which >= KN_PC__COUNT) return 0;
  pthread_mutex_lock(&kp->mu);
  uint64_t v = kp->counters[which];
  pthread_mutex_unlock(&kp->mu);
  return v;
}

/* ---- close and destroy ---- */

kn_error_t *kn_producer_close(kn_producer_t *kp) {
  if (!kp) return NULL;
  pthread_mutex_lock(&kp->mu);
  int already = kp->closed;
  kp->closed = kp->closing = 1;
  pthread_mutex_unlock(&kp->mu);
  if (already) return NULL;
  /* Every record is reported within its time-to-live, so this ends. */
  kn_producer_flush(kp, -1);
  kn_loop_call(kp->loop, kn_sender_stop, kp);
  while (kn_producer_poll(kp, 0) > 0) {
  }
  pthread_mutex_lock(&kp->mu);
  kn_error_t *err =
      !kp->map_loaded && kp->map_err ? kn_error_copy(kp->map_err) : NULL;
  pthread_mutex_unlock(&kp->mu);
  return err;
}

void kn_producer_destroy(kn_producer_t *kp) {
  if (!kp) return;
  pthread_mutex_lock(&kp->mu);
  kp->closing = 1;
  pthread_mutex_unlock(&kp->mu);
  if (kp->loop) {
    kn_loop_call(kp->loop, kn_sender_stop, kp);
    while (kn_producer_poll(kp, 0) > 0) {
    }
  }
  kn_client_destroy(kp->client);
  /* Reports of records drained after the stop (a send racing destroy). */
  while (kn_producer_poll(kp, 0) > 0) {
  }
  for (kn_msg_t *m; (m = kn_msg_list_pop(&kp->inbound));) kn_msg_free(m);
  kn_error_destroy(kp->map_err);
  free(kp->stream);
  kn_conf_destroy(kp->conf);
  pthread_cond_destroy(&kp->dr_cv);
  pthread_mutex_destroy(&kp->mu);
  free(kp);
}

void kn_conf_set_delivery_cb(kn_conf_t *conf,
                             void (*cb)(kn_producer_t *, const kn_msg_t *,
                                        void *),
                             void *opaque) {
  conf->cbs[KN_CB_DELIVERY] = (kn_fnptr_t)cb;
  conf->cb_opaque[KN_CB_DELIVERY] = opaque;
}
