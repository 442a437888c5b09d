/* kn_consumer_t: construction, poll, checkpoints, close. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consumer/consumer_int.h"
#include "consumer/efo.h"
#include "consumer/metrics.h"
#include "consumer/shard_table.h"
#include "core/error.h"
#include "kinesis/batch.h"
#include "kinesis/client_int.h"
#include "lease/store.h"
#include "util/rand.h"
#include <unistd.h>
#include "util/buf.h"
#include "util/clock.h"
#include "util/cond.h"
#include "util/str.h"

/* ---- configuration ---- */

static char **split_list(const char *s) {
  size_t n = 1;
  for (const char *p = s; *p; p++) n += *p == ',';
  char **v = calloc(n + 1, sizeof(char *));
  if (!v) return NULL;
  size_t k = 0;
  for (const char *p = s; *p;) {
    size_t len = strcspn(p, ",");
    char *item = kn_strndup(p, len);
    if (!item) goto fail;
    kn_str_trim(item);
    if (*item)
      v[k++] = item;
    else
      free(item);
    p += len;
    if (*p == ',') p++;
  }
  return v;
fail:
  for (size_t i = 0; i < k; i++) free(v[i]);
  free(v);
  return NULL;
}

static void free_list(char **v) {
  for (char **p = v; p && *p; p++) free(*p);
  free(v);
}

static int load_cfg(kn_consumer_t *kc, char *errstr, size_t size) {
  const kn_conf_t *c = kc->conf;
  const char *stream = kn_conf_str(c, "stream");
  if (!stream || !*stream) {
    snprintf(errstr, size, "the \"stream\" property is required");
    return -1;
  }
  if (!(kc->stream = strdup(stream))) goto oom;
  kc->cfg.deaggregate = kn_conf_bool(c, "deaggregate");
  kc->cfg.auto_checkpoint = kn_conf_bool(c, "checkpoint.auto");
  kc->cfg.checkpoint_interval_ms = kn_conf_int(c, "checkpoint.interval.ms");
  kc->cfg.max_records = (size_t)kn_conf_int(c, "buffer.max.records");
  kc->cfg.max_bytes = (size_t)kn_conf_int(c, "buffer.max.bytes");
  kc->cfg.max_total_bytes = (size_t)kn_conf_int(c, "buffer.max.total.bytes");
  kc->cfg.poll_max_records = (int)kn_conf_int(c, "poll.max.records");
  kc->cfg.poll_idle_ms = kn_conf_int(c, "poll.idle.ms");
  double share = (double)kn_conf_int(c, "poll.share") / 100.0;
  kc->cfg.calls_per_s = (double)kn_conf_int(c, "poll.calls.per.second") * share;
  kc->cfg.bytes_per_s = (double)kn_conf_int(c, "poll.bytes.per.second") * share;
  kc->cfg.sync_interval_ms = kn_conf_int(c, "shard.sync.interval.ms");

  kc->lease.duration_ms = kn_conf_int(c, "lease.duration.ms");
  kc->lease.renew_ms = kn_conf_int(c, "lease.renew.interval.ms");
  kc->lease.members = kn_conf_bool(c, "lease.members");
  kc->lease.scan_ms = kn_conf_int(c, "lease.scan.interval.ms");
  /* Heartbeats ride on the same interval: a little longer than the KCL's
   * third keeps renewals and heartbeats within its write budget. */
  if (kc->lease.renew_ms <= 0)
    kc->lease.renew_ms = kc->lease.members ? kc->lease.duration_ms * 2 / 5
                                           : kc->lease.duration_ms / 3;
  if (kc->lease.renew_ms * 3 >= kc->lease.duration_ms * 2) {
    /* A worker reads a shard until duration - renew / 2 after its last
     * good renewal was sent: with a longer interval that grace period
     * ends before the next renewal, and every lease expires on its own. */
    snprintf(errstr, size,
             "lease.renew.interval.ms (%lld) must be less than "
             "2/3 of lease.duration.ms (%lld): the leases would expire "
             "between two renewals",
             (long long)kc->lease.renew_ms, (long long)kc->lease.duration_ms);
    return -1;
  }
  kc->lease.grace_ms = kc->lease.duration_ms - kc->lease.renew_ms / 2;
  kc->lstats.table_leases = kc->lstats.waiting_parents = -1;
  kc->lease.take_ms = kn_conf_int(c, "lease.take.interval.ms");
  kc->lease.handoff_ms = kn_conf_int(c, "lease.handoff.timeout.ms");
  kc->lease.max_leases = (int)kn_conf_int(c, "lease.max.per.worker");
  kc->lease.max_steal = (int)kn_conf_int(c, "lease.max.steal");
  const char *wid = kn_conf_str(c, "worker.id");
  if (wid && *wid) {
    kc->worker_id = strdup(wid);
  } else {
    char host[256] = "host";
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    kc->worker_id =
        kn_asprintf("%s:%d:%08llx", host, (int)getpid(),
                    (unsigned long long)(kn_rand_u64() & 0xffffffffu));
  }
  if (!kc->worker_id) goto oom;
  const char *store = kn_conf_str(c, "lease.store");
  int leases = store && strcmp(store, "none") != 0;

  const char *shards = kn_conf_str(c, "shards");
  if (shards && *shards) {
    if (!(kc->cfg.only_shards = split_list(shards))) goto oom;
    if (!kc->cfg.only_shards[0]) {
      snprintf(errstr, size, "shards: no shard id given");
      return -1;
    }
    if (leases) {
      snprintf(errstr, size,
               "shards cannot be combined with a lease store: "
               "the workers share every shard");
      return -1;
    }
  }

  const char *ip = kn_conf_str(c, "initial.position");
  kn_pos_t *p = &kc->cfg.initial;
  memset(p, 0, sizeof(*p));
  if (strcmp(ip, "latest") == 0) {
    p->type = KN_ITER_LATEST;
  } else if (strcmp(ip, "at_timestamp") == 0) {
    p->type = KN_ITER_AT_TIMESTAMP;
    p->timestamp_ms = kn_conf_int(c, "initial.timestamp.ms");
  } else if (strcmp(ip, "at_sequence") == 0 ||
             strcmp(ip, "after_sequence") == 0) {
    const char *seq = kn_conf_str(c, "initial.sequence.number");
    int n_only = 0;
    for (char **s = kc->cfg.only_shards; s && *s; s++) n_only++;
    if (!seq || !*seq) {
      snprintf(errstr, size,
               "initial.position=%s needs initial.sequence.number", ip);
      return -1;
    }
    if (leases) {
      snprintf(errstr, size, "initial.position=%s needs lease.store=none", ip);
      return -1;
    }
    if (n_only != 1) {
      snprintf(errstr, size,
               "initial.position=%s needs exactly one shard in \"shards\"", ip);
      return -1;
    }
    for (const char *q = seq; *q; q++)
      if (*q < '0' || *q > '9') {
        snprintf(errstr, size,
                 "initial.sequence.number: not a decimal "
                 "sequence number: \"%s\"",
                 seq);
        return -1;
      }
    if (kn_pos_set_seq(p,
                       ip[0] == 'a' && ip[1] == 't'
                           ? KN_ITER_AT_SEQUENCE_NUMBER
                           : KN_ITER_AFTER_SEQUENCE_NUMBER,
                       seq, 0, 0)) {
      snprintf(errstr, size, "initial.sequence.number is too long");
      return -1;
    }
  } else {
    p->type = KN_ITER_TRIM_HORIZON;
  }
  return 0;
oom:
  snprintf(errstr, size, "out of memory");
  return -1;
}

/* ---- construction ---- */

kn_consumer_t *kn_consumer_new(const kn_conf_t *conf, char *errstr,
                               size_t errstr_size) {
  char dummy[1];
  if (!errstr || !errstr_size) {
    errstr = dummy;
    errstr_size = sizeof(dummy);
  }
  kn_consumer_t *kc = calloc(1, sizeof(*kc));
  if (!kc) {
    snprintf(errstr, errstr_size, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&kc->mu, NULL);
  pthread_mutex_init(&kc->ctl_mu, NULL);
  kn_cond_init(&kc->poll_cv);
  kn_cond_init(&kc->ctl_cv);
  kc->readers = &kn_poll_reader_ops;
  kc->conf = conf ? kn_conf_dup(conf) : kn_conf_new();
  if (!kc->conf) {
    snprintf(errstr, errstr_size, "out of memory");
    goto fail;
  }
  kn_conf_logger(kc->conf, &kc->log, "consumer");
  if (load_cfg(kc, errstr, errstr_size)) goto fail;
  if (kn_efo_conf(kc, errstr, errstr_size)) goto fail;
  if (kc->efo) kc->readers = &kn_efo_reader_ops;
  kc->client = kn_client_new(kc->conf, errstr, errstr_size);
  if (!kc->client) goto fail;
  kc->loop = kc->client->loop;
  kc->svc = kc->client->svc;
  if (kn_control_start(kc, errstr, errstr_size)) goto fail;
  return kc;
fail:
  kn_consumer_destroy(kc);
  return NULL;
}

static int leases_on(const kn_consumer_t *kc) {
  return strcmp(kn_conf_str(kc->conf, "lease.store"), "none") != 0;
}

/* ---- application events ---- */

static void app_event_free(kn_app_ev_t *e) {
  free(e->shard_id);
  free(e->state);
  free(e);
}

static void report_locked(kn_consumer_t *kc, kn_ctl_kind_t kind,
                          kn_cshard_t *cs, const kn_pos_t *pos, int end);

/* After the hand-off callback: the application is done with what it was
 * handed of the shard.  With auto-checkpoint all of it counts as
 * processed (this poll marked it so), and is what the next owner starts
 * after. */
static void yielded_locked(kn_consumer_t *kc, const kn_app_ev_t *e) {
  kn_cshard_t *cs = kn_shard_table_find(kc, e->shard_id);
  if (!cs || cs->fencing_token != e->token) return;
  int pos = kc->cfg.auto_checkpoint && cs->has_delivered;
  report_locked(kc, KN_CTL_YIELDED, cs, pos ? &cs->delivered : NULL, 0);
  cs->fencing_token = -1;
  cs->lease_until_ms = 0;
  cs->view.held = 0;
}

/* Runs queued callbacks; called with mu held, returns with mu held. */
static void dispatch_events_locked(kn_consumer_t *kc) {
  typedef void (*acq_cb_t)(kn_consumer_t *, const char *, int64_t, const void *,
                           size_t, void *);
  typedef void (*lost_cb_t)(kn_consumer_t *, const char *, kn_err_t, void *);
  while (kc->ev_head) {
    kn_app_ev_t *e = kc->ev_head;
    kc->ev_head = e->next;
    if (!kc->ev_head) kc->ev_tail = NULL;
    pthread_mutex_unlock(&kc->mu);
    if (e->kind == KN_APP_EV_ACQUIRED && kc->conf->cbs[KN_CB_LEASE_ACQUIRED])
      ((acq_cb_t)kc->conf->cbs[KN_CB_LEASE_ACQUIRED])(
          kc, e->shard_id, e->token, e->state, e->state_len,
          kc->conf->cb_opaque[KN_CB_LEASE_ACQUIRED]);
    else if (e->kind != KN_APP_EV_ACQUIRED && kc->conf->cbs[KN_CB_LEASE_LOST])
      ((lost_cb_t)kc->conf->cbs[KN_CB_LEASE_LOST])(
          kc, e->shard_id, e->reason, kc->conf->cb_opaque[KN_CB_LEASE_LOST]);
    pthread_mutex_lock(&kc->mu);
    if (e->kind == KN_APP_EV_HANDOFF) yielded_locked(kc, e);
    app_event_free(e);
  }
}

/* ---- poll ---- */

static void pos_of_last(const kn_batch_t *b, kn_pos_t *p) {
  const kn_record_t *r = &b->recs[b->n - 1];
  kn_pos_set_seq(p, KN_ITER_AT_SEQUENCE_NUMBER, r->seq, r->subseq, 1);
}

/* Lease mode: tells the driver what the application has been handed
 * (DELIVERED) or has processed (PROCESSED) of cs under its current
 * tenure; pos NULL: no record (only the end).  mu held. */
static void report_locked(kn_consumer_t *kc, kn_ctl_kind_t kind,
                          kn_cshard_t *cs, const kn_pos_t *pos, int end) {
  if (cs->fencing_token < 0) return; /* not held: nothing to report */
  kn_ctl_msg_t *m = calloc(1, sizeof(*m));
  if (!m) {
    /* A lost report could leave a shard unfinished for ever. */
    if (!kc->fatal) kc->fatal = kn_error_new(KN_ERR__NOMEM, "out of memory");
    pthread_cond_broadcast(&kc->poll_cv);
    return;
  }
  m->kind = kind;
  m->cs = cs;
  m->tenure = cs->fencing_token;
  if (pos) m->pos = *pos;
  m->end = end;
  kn_control_post_msg_locked(kc, m);
}

/* With auto-checkpoint, everything returned before this poll counts as
 * processed.  Without it only the application's checkpoints do. */
static void mark_processed_locked(kn_consumer_t *kc) {
  for (size_t i = 0; i < kc->n_dirty; i++) {
    kn_cshard_t *cs = kc->dirty[i];
    if (kc->cfg.auto_checkpoint) {
      cs->processed = cs->delivered;
      cs->has_processed = 1;
      /* Not what an earlier tenure delivered (has_delivered is reset when
       * the lease is taken again). */
      if (leases_on(kc) && cs->has_delivered)
        report_locked(kc, KN_CTL_PROCESSED, cs, &cs->delivered, 0);
    }
    cs->in_dirty = 0;
  }
  kc->n_dirty = 0;
}

static void mark_dirty_locked(kn_consumer_t *kc, kn_cshard_t *cs) {
  if (cs->in_dirty) return;
  if (kc->n_dirty == kc->cap_dirty) {
    size_t cap = kc->cap_dirty ? kc->cap_dirty * 2 : 16;
    kn_cshard_t **d = realloc(kc->dirty, cap * sizeof(*d));
    if (!d) return; /* the shard is simply not auto-checkpointed this round */
    kc->dirty = d;
    kc->cap_dirty = cap;
  }
  kc->dirty[kc->n_dirty++] = cs;
  cs->in_dirty = 1;
}

kn_batch_t *kn_consumer_poll(kn_consumer_t *kc, int timeout_ms) {
  int64_t deadline = timeout_ms > 0 ? kn_mono_ms() + timeout_ms : 0;
  typedef void (*ended_cb_t)(kn_consumer_t *, const char *, void *);
  ended_cb_t ended_cb = (ended_cb_t)kc->conf->cbs[KN_CB_SHARD_ENDED];

  kn_stats_maybe_emit(kc);
  pthread_mutex_lock(&kc->mu);
  mark_processed_locked(kc);
  for (;;) {
    dispatch_events_locked(kc);
    /* After running out of memory nothing more may be delivered: a
     * dropped batch would be skipped. */
    if (kc->fatal && kn_error_code(kc->fatal) == KN_ERR__NOMEM) break;
    kn_dentry_t *e = kn_delivery_pop(kc);
    if (e && kn_lease_expired_locked(e->cs, kn_mono_ms())) {
      /* The lease may be another worker's by now: what was read under it
       * is left to the next owner. */
      kn_batch_destroy(e->batch);
      free(e);
      kn_readers_wake_locked(kc);
      continue;
    }
    if (e) {
      kn_cshard_t *cs = e->cs;
      kn_batch_t *b = e->batch;
      free(e);
      if (!b) {
        /* End of a shard: every record of it has been handed out. */
        cs->end_popped = 1;
        /* With leases the shard is done once SHARD_END is written. */
        if (leases_on(kc)) {
          report_locked(kc, KN_CTL_DELIVERED, cs,
                        cs->has_delivered ? &cs->delivered : NULL, 1);
        } else {
          cs->state = KN_CS_DONE;
          kn_control_post_locked(kc, KN_CTL_SHARD_DONE, cs, NULL, NULL);
        }
        if (ended_cb) {
          char *id = strdup(cs->id);
          pthread_mutex_unlock(&kc->mu);
          if (id) ended_cb(kc, id, kc->conf->cb_opaque[KN_CB_SHARD_ENDED]);
          free(id);
          pthread_mutex_lock(&kc->mu);
        }
        continue;
      }
      if (b->n == 0) { /* nothing to hand out */
        kn_batch_destroy(b);
        continue;
      }
      pos_of_last(b, &cs->delivered);
      cs->has_delivered = 1;
      if (leases_on(kc))
        report_locked(kc, KN_CTL_DELIVERED, cs, &cs->delivered, 0);
      cs->records_delivered += b->n;
      cs->bytes_delivered += b->bytes;
      if (leases_on(kc)) kn_metrics_delivered_locked(cs, b->n);
      mark_dirty_locked(kc, cs);
      kn_readers_wake_locked(kc);
      pthread_mutex_unlock(&kc->mu);
      return b;
    }
    if (kc->ev_head) continue;
    if (kc->fatal || kc->closing || timeout_ms == 0) break;
    if (timeout_ms < 0) {
      pthread_cond_wait(&kc->poll_cv, &kc->mu);
    } else if (kn_cond_wait_until(&kc->poll_cv, &kc->mu, deadline) ==
               ETIMEDOUT) {
      break;
    }
  }
  pthread_mutex_unlock(&kc->mu);
  return NULL;
}

const kn_error_t *kn_consumer_fatal_error(kn_consumer_t *kc) {
  pthread_mutex_lock(&kc->mu);
  const kn_error_t *e = kc->fatal;
  pthread_mutex_unlock(&kc->mu);
  return e;
}

int kn_consumer_caught_up(kn_consumer_t *kc) {
  pthread_mutex_lock(&kc->mu);
  int r = kn_delivery_caught_up(kc) && !kc->ev_head;
  /* With leases: also nothing left for this worker to take. */
  if (r && leases_on(kc)) r = kc->taker_idle;
  pthread_mutex_unlock(&kc->mu);
  return r;
}

/* ---- checkpoints ---- */

/* Lease mode: hands the checkpoint to the driver and waits for the
 * outcome (the core writes it, conditional on the lease counter). */
static kn_error_t *request_checkpoint(kn_consumer_t *kc, kn_cshard_t *cs,
                                      const kn_pos_t *p, const void *state,
                                      size_t state_len, int prepare) {
  kn_ckpt_req_t req;
  memset(&req, 0, sizeof(req));
  req.cs = cs;
  req.pos = *p;
  req.prepare = prepare;
  req.state = state;
  req.state_len = state_len;
  kn_ctl_msg_t *m = calloc(1, sizeof(*m));
  if (!m) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  pthread_cond_init(&req.cv, NULL); /* untimed: the driver answers all */
  m->kind = KN_CTL_CHECKPOINT;
  m->req = &req;
  if (kn_control_post_request(kc, m)) {
    free(m);
    pthread_cond_destroy(&req.cv);
    return kn_error_new(KN_ERR__LEASE_LOST,
                        "shard %s: the consumer is closed; checkpoint not "
                        "written",
                        cs->id);
  }
  pthread_mutex_lock(&kc->ctl_mu);
  while (!req.done) pthread_cond_wait(&req.cv, &kc->ctl_mu);
  pthread_mutex_unlock(&kc->ctl_mu);
  pthread_cond_destroy(&req.cv);
  return req.err;
}

static kn_error_t *checkpoint_pos(kn_consumer_t *kc, const char *shard_id,
                                  const char *seq, uint64_t subseq,
                                  const void *state, size_t state_len,
                                  int prepare) {
  kn_pos_t p;
  if (!seq || !*seq ||
      kn_pos_set_seq(&p, KN_ITER_AT_SEQUENCE_NUMBER, seq, subseq, 1))
    return kn_error_new(KN_ERR__INVALID_ARG, "bad sequence number");
  pthread_mutex_lock(&kc->mu);
  kn_cshard_t *cs = kn_shard_table_find(kc, shard_id);
  if (cs && !leases_on(kc)) {
    cs->processed = p;
    cs->has_processed = 1;
  }
  pthread_mutex_unlock(&kc->mu);
  if (!cs)
    return kn_error_new(KN_ERR__LEASE_LOST,
                        "shard %s is not read by this consumer", shard_id);
  if (!leases_on(kc)) {
    if (prepare)
      return kn_error_new(KN_ERR__STATE,
                          "prepared checkpoints need a lease store");
    return NULL;
  }
  return request_checkpoint(kc, cs, &p, state, state_len, prepare);
}

static kn_error_t *checkpoint_at(kn_consumer_t *kc, const kn_record_t *r,
                                 const void *state, size_t state_len,
                                 int prepare) {
  if (!r || !r->batch || !r->batch->shard_id)
    return kn_error_new(KN_ERR__INVALID_ARG, "not a record of this consumer");
  return checkpoint_pos(kc, r->batch->shard_id, r->seq, r->subseq, state,
                        state_len, prepare);
}

kn_error_t *kn_consumer_checkpoint_seq(kn_consumer_t *kc, const char *shard_id,
                                       const char *seq, uint64_t subseq) {
  if (!shard_id) return kn_error_new(KN_ERR__INVALID_ARG, "no shard id");
  return checkpoint_pos(kc, shard_id, seq, subseq, NULL, 0, 0);
}

int kn_consumer_lease_checkpoint(kn_consumer_t *kc, const char *shard_id,
                                 char *seq, size_t size, uint64_t *subseq) {
  int rc = -1;
  if (!shard_id || !seq || !leases_on(kc)) return -1;
  pthread_mutex_lock(&kc->mu);
  kn_cshard_t *cs = kn_shard_table_find(kc, shard_id);
  if (cs && cs->fencing_token >= 0 && cs->view.held &&
      strlen(cs->view.ckpt) < size) {
    strcpy(seq, cs->view.ckpt);
    if (subseq) *subseq = cs->view.ckpt_subseq;
    rc = 0;
  }
  pthread_mutex_unlock(&kc->mu);
  return rc;
}

kn_error_t *kn_consumer_checkpoint(kn_consumer_t *kc, const kn_record_t *r) {
  return checkpoint_at(kc, r, NULL, 0, 0);
}

kn_error_t *kn_consumer_checkpoint_batch(kn_consumer_t *kc,
                                         const kn_batch_t *b) {
  if (!b || b->n == 0) return kn_error_new(KN_ERR__INVALID_ARG, "empty batch");
  return checkpoint_at(kc, &b->recs[b->n - 1], NULL, 0, 0);
}

kn_err_t kn_consumer_checkpoint_async(kn_consumer_t *kc, const kn_record_t *r) {
  if (!r || !r->batch || !r->batch->shard_id) return KN_ERR__INVALID_ARG;
  /* Recorded as processed; the control thread writes it with the next
   * flush (checkpoint.interval.ms). */
  kn_err_t code = KN_ERR_NO_ERROR;
  pthread_mutex_lock(&kc->mu);
  kn_cshard_t *cs = kn_shard_table_find(kc, r->batch->shard_id);
  if (!cs || (leases_on(kc) && cs->fencing_token < 0))
    code = KN_ERR__LEASE_LOST;
  else if (kn_pos_set_seq(&cs->processed, KN_ITER_AT_SEQUENCE_NUMBER, r->seq,
                          r->subseq, 1) == 0) {
    cs->has_processed = 1;
    if (leases_on(kc))
      report_locked(kc, KN_CTL_PROCESSED, cs, &cs->processed, 0);
  }
  cs = NULL;
  pthread_mutex_unlock(&kc->mu);
  return code;
}

kn_error_t *kn_consumer_prepare_checkpoint(kn_consumer_t *kc,
                                           const kn_record_t *r,
                                           const void *state,
                                           size_t state_len) {
  if (state_len > 65536)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "checkpoint state larger than 64 KiB");
  return checkpoint_at(kc, r, state, state_len, 1);
}

int64_t kn_consumer_fencing_token(kn_consumer_t *kc, const char *shard_id) {
  pthread_mutex_lock(&kc->mu);
  kn_cshard_t *cs = kn_shard_table_find(kc, shard_id);
  int64_t t = -1;
  if (cs && leases_on(kc))
    t = cs->fencing_token;
  else if (cs && (cs->state == KN_CS_READING || cs->state == KN_CS_ENDED))
    t = 0;
  pthread_mutex_unlock(&kc->mu);
  return t;
}

/* ---- callbacks ---- */

void kn_conf_set_lease_acquired_cb(kn_conf_t *conf,
                                   void (*cb)(kn_consumer_t *, const char *,
                                              int64_t, const void *, size_t,
                                              void *),
                                   void *opaque) {
  conf->cbs[KN_CB_LEASE_ACQUIRED] = (kn_fnptr_t)cb;
  conf->cb_opaque[KN_CB_LEASE_ACQUIRED] = opaque;
}

void kn_conf_set_lease_lost_cb(kn_conf_t *conf,
                               void (*cb)(kn_consumer_t *, const char *,
                                          kn_err_t, void *),
                               void *opaque) {
  conf->cbs[KN_CB_LEASE_LOST] = (kn_fnptr_t)cb;
  conf->cb_opaque[KN_CB_LEASE_LOST] = opaque;
}

void kn_conf_set_shard_ended_cb(kn_conf_t *conf,
                                void (*cb)(kn_consumer_t *, const char *,
                                           void *),
                                void *opaque) {
  conf->cbs[KN_CB_SHARD_ENDED] = (kn_fnptr_t)cb;
  conf->cb_opaque[KN_CB_SHARD_ENDED] = opaque;
}

/* ---- close ---- */

kn_error_t *kn_consumer_close(kn_consumer_t *kc) {
  pthread_mutex_lock(&kc->mu);
  int already = kc->closed;
  kc->closed = 1;
  kc->closing = 1;
  pthread_cond_broadcast(&kc->poll_cv);
  pthread_mutex_unlock(&kc->mu);
  if (already) return NULL;

  /* Closing says the application is done with what it was given. */
  pthread_mutex_lock(&kc->mu);
  mark_processed_locked(kc);
  pthread_mutex_unlock(&kc->mu);
  kn_control_stop(kc);
  for (size_t i = 0; i < kc->n_shards; i++) kn_reader_stop(kc, kc->shards[i]);
  pthread_mutex_lock(&kc->mu);
  for (size_t i = 0; i < kc->n_shards; i++)
    kn_delivery_purge(kc, kc->shards[i]);
  pthread_mutex_unlock(&kc->mu);
  return NULL;
}

void kn_consumer_destroy(kn_consumer_t *kc) {
  if (!kc) return;
  if (kc->control_started || kc->n_shards)
    kn_error_destroy(kn_consumer_close(kc));
  kn_lease_store_destroy(kc->ls);
  kn_client_destroy(kc->client);
  kn_shard_table_clear(kc);
  while (kc->ev_head) {
    kn_app_ev_t *e = kc->ev_head;
    kc->ev_head = e->next;
    app_event_free(e);
  }
  free(kc->worker_id);
  free(kc->dirty);
  kn_error_destroy(kc->fatal);
  free_list(kc->cfg.only_shards);
  kn_efo_free(kc->efo);
  free(kc->stream);
  kn_conf_destroy(kc->conf);
  pthread_cond_destroy(&kc->poll_cv);
  pthread_cond_destroy(&kc->ctl_cv);
  pthread_mutex_destroy(&kc->mu);
  pthread_mutex_destroy(&kc->ctl_mu);
  free(kc);
}
