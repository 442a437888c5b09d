/* The consumer's metrics and health (metrics.h, docs/METRICS.md). */
#include "consumer/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/efo.h"
#include "consumer/shard_table.h"
#include "kinesis/seqnum.h"
#include "lease/taker.h"
#include "util/clock.h"

/* ---- counting (control thread and poll) ---- */

/* A checkpoint's position is known to the core only; the lag counts the
 * records delivered after the last batch at or below it. */
static void ckpt_reset_if_new_tenure(kn_cshard_t *cs, uint64_t base) {
  if (cs->ck_tenure == cs->fencing_token) return;
  cs->ck_tenure = cs->fencing_token;
  cs->ck_n = 0;
  cs->ck_records = base;
}

void kn_metrics_delivered_locked(kn_cshard_t *cs, size_t n_records) {
  /* The first batch of a tenure: the lag counts from before it. */
  ckpt_reset_if_new_tenure(cs, cs->records_delivered - n_records);
  if (!cs->has_delivered) return;
  int n = (int)(sizeof(cs->ck_marks) / sizeof(cs->ck_marks[0]));
  if (cs->ck_n == n) { /* the oldest goes; a later checkpoint passes it */
    memmove(&cs->ck_marks[0], &cs->ck_marks[1],
            (size_t)(n - 1) * sizeof(cs->ck_marks[0]));
    cs->ck_n--;
  }
  struct kn_ckpt_mark *m = &cs->ck_marks[cs->ck_n++];
  memcpy(m->seq, cs->delivered.seq, sizeof(m->seq));
  m->subseq = cs->delivered.subseq;
  m->records = cs->records_delivered;
}

static int is_seq(const char *s) { return s && *s >= '0' && *s <= '9'; }

void kn_metrics_ckpt_written_locked(kn_cshard_t *cs, const char *ckpt,
                                    int64_t subseq) {
  ckpt_reset_if_new_tenure(cs, cs->records_delivered);
  if (ckpt && strcmp(ckpt, "SHARD_END") == 0) {
    cs->ck_records = cs->records_delivered;
    cs->ck_n = 0;
    return;
  }
  if (!is_seq(ckpt)) return;
  uint64_t sub = (uint64_t)(subseq > 0 ? subseq : 0);
  int k = 0;
  while (k < cs->ck_n && kn_seqpos_cmp(cs->ck_marks[k].seq,
                                       cs->ck_marks[k].subseq, ckpt, sub) <= 0)
    k++;
  if (k == 0) return; /* before every batch still remembered */
  cs->ck_records = cs->ck_marks[k - 1].records;
  memmove(&cs->ck_marks[0], &cs->ck_marks[k],
          (size_t)(cs->ck_n - k) * sizeof(cs->ck_marks[0]));
  cs->ck_n -= k;
}

static void table_shape_locked(kn_consumer_t *kc, const kn_store_job_t *j) {
  int64_t waiting = 0;
  for (size_t i = 0; i < j->n_leases; i++) {
    const kn_lease_t *l = &j->leases[i];
    if (!kn_lease_is_shard_end(l) &&
        !kn_lease_is_ready(l, j->leases, j->n_leases))
      waiting++;
  }
  kc->lstats.table_leases = (int64_t)j->n_leases;
  kc->lstats.waiting_parents = waiting;
}

void kn_metrics_store_done_locked(kn_consumer_t *kc, const kn_store_job_t *j) {
  if (j->stream_check || (unsigned)j->op >= KN_STORE_OPS ||
      j->op == KN_CC_LIST_SHARDS)
    return;
  size_t op = (size_t)j->op;
  int cond = j->err && kn_error_code(j->err) == KN_ERR_CONDITIONAL_CHECK_FAILED;
  kc->lstats.store_calls[op]++;
  if (cond)
    kc->lstats.store_cond[op]++;
  else if (j->err)
    kc->lstats.store_errors[op]++;
  kn_hist_observe(&kc->lstats.store_hist[op], (double)j->took_us / 1e6);
  /* From when the call was sent, as the core counts its grace period. */
  if ((!j->err || cond) && j->sent_ms > kc->lstats.store_ok_ms)
    kc->lstats.store_ok_ms = j->sent_ms;
  if (j->err) return;
  switch (j->op) {
    case KN_CC_TAKE:
    case KN_CC_HANDOFF: /* asked of a live worker: a steal by hand-off */
      kc->lstats.stolen += j->steal != 0;
      break;
    case KN_CC_RELEASE:
      kc->lstats.released++;
      break;
    case KN_CC_LIST_LEASES:
      table_shape_locked(kc, j);
      break;
    default:
      break;
  }
}

/* ---- health ---- */

static size_t held_locked(const kn_consumer_t *kc) {
  size_t held = 0;
  for (size_t i = 0; i < kc->n_shards; i++) held += kc->shards[i]->view.held;
  return held;
}

/* mu held. */
static void health_locked(kn_consumer_t *kc, kn_consumer_health_t *h,
                          int64_t now) {
  memset(h, 0, sizeof(*h));
  if (kc->fatal) {
    snprintf(h->reason, sizeof(h->reason), "failed: %s",
             kn_error_string(kc->fatal));
    return;
  }
  if (kc->closing) {
    snprintf(h->reason, sizeof(h->reason), "closing");
    return;
  }
  h->alive = 1;
  int lease_mode = strcmp(kn_conf_str(kc->conf, "lease.store"), "none") != 0;
  if (!kc->synced) {
    snprintf(h->reason, sizeof(h->reason), "%s",
             lease_mode ? "not yet synced with the lease table"
                        : "the first shard listing is not done");
    return;
  }
  if (lease_mode) {
    int64_t since = now - kc->lstats.store_ok_ms;
    if (kc->lstats.store_ok_ms && since > kc->lease.grace_ms) {
      snprintf(h->reason, sizeof(h->reason),
               "the lease store has not answered for %lld ms",
               (long long)since);
      return;
    }
    if (held_locked(kc) == 0 && !kc->taker_idle) {
      snprintf(h->reason, sizeof(h->reason), "taking leases");
      return;
    }
  }
  h->ready = 1;
  snprintf(h->reason, sizeof(h->reason), "ok");
}

void kn_consumer_health(kn_consumer_t *kc, kn_consumer_health_t *h) {
  int64_t now = kn_mono_ms();
  pthread_mutex_lock(&kc->mu);
  health_locked(kc, h, now);
  pthread_mutex_unlock(&kc->mu);
}

/* ---- rendering ---- */

/* What a shard's series need, copied under mu and rendered without it. */
typedef struct shard_snap {
  char *id;
  int held, reading;
  int64_t millis_behind;
  uint64_t records, bytes, gr_calls, gr_throttles, gr_errors;
  size_t buffered_records, buffered_bytes;
  int paused;
  int has_ckpt_lag;
  uint64_t ckpt_lag;
  int efo;
  kn_efo_snapshot_t fo;
} shard_snap_t;

typedef struct snap {
  int lease_mode;
  kn_consumer_health_t health;
  int failed;
  uint64_t records, bytes, dropped;
  size_t queued, buffered, held;
  struct kn_lease_stats ls;
  int64_t now;
  shard_snap_t *shards;
  size_t n;
} snap_t;

static void snap_free(snap_t *s) {
  for (size_t i = 0; i < s->n; i++) free(s->shards[i].id);
  free(s->shards);
}

static int take_snapshot(kn_consumer_t *kc, snap_t *s) {
  memset(s, 0, sizeof(*s));
  s->lease_mode = strcmp(kn_conf_str(kc->conf, "lease.store"), "none") != 0;
  s->now = kn_mono_ms();
  int rc = 0;
  pthread_mutex_lock(&kc->mu);
  health_locked(kc, &s->health, s->now);
  s->failed = kc->fatal != NULL;
  s->queued = kc->q_len;
  s->buffered = kc->total_bytes;
  s->dropped = kc->records_dropped;
  s->ls = kc->lstats;
  s->shards = calloc(kc->n_shards ? kc->n_shards : 1, sizeof(*s->shards));
  if (!s->shards) rc = -1;
  for (size_t i = 0; !rc && i < kc->n_shards; i++) {
    const kn_cshard_t *cs = kc->shards[i];
    shard_snap_t *o = &s->shards[s->n];
    o->id = strdup(cs->id);
    if (!o->id) {
      rc = -1;
      break;
    }
    s->n++;
    o->held = s->lease_mode
                  ? cs->view.held
                  : cs->state != KN_CS_STOPPED && cs->state != KN_CS_DONE;
    o->reading = cs->state == KN_CS_READING || cs->state == KN_CS_ENDED;
    o->millis_behind = cs->millis_behind;
    o->records = cs->records_delivered;
    o->bytes = cs->bytes_delivered;
    o->gr_calls = cs->gr_calls;
    o->gr_throttles = cs->gr_throttles;
    o->gr_errors = cs->gr_errors;
    o->buffered_records = cs->buffered_records;
    o->buffered_bytes = cs->buffered_bytes;
    o->paused = cs->paused;
    if (s->lease_mode && cs->view.held && cs->ck_tenure == cs->fencing_token) {
      o->has_ckpt_lag = 1;
      o->ckpt_lag = cs->records_delivered - cs->ck_records;
    } else if (s->lease_mode && cs->view.held) {
      o->has_ckpt_lag = 1; /* nothing delivered in this tenure yet */
    }
    o->efo = kn_efo_snapshot(cs, &o->fo);
    s->records += o->records;
    s->bytes += o->bytes;
    s->held += cs->view.held;
  }
  pthread_mutex_unlock(&kc->mu);
  return rc;
}

static const char *const op_names[KN_STORE_OPS] = {
    "list",       NULL,           "create",   "take",         "renew",
    "checkpoint", "release",      "remove",   "set_children", "get",
    "handoff",    "handoff_done", "heartbeat"};
_Static_assert(KN_CC_HEARTBEAT == KN_STORE_OPS - 1 && KN_CC_LIST_SHARDS == 1 &&
                   KN_CC_GET == 9,
               "op_names follows kn_cc_op_t");

static void per_op_u64(kn_mw_t *w, kn_metric_id_t id, const uint64_t *v) {
  kn_mw_family(w, id);
  for (size_t op = 0; op < KN_STORE_OPS; op++)
    if (op_names[op]) kn_mw_u64(w, "op", op_names[op], v[op]);
}

static void render_worker(kn_mw_t *w, const snap_t *s) {
  kn_mw_family(w, KN_M_C_READY);
  kn_mw_u64(w, NULL, NULL, (uint64_t)s->health.ready);
  kn_mw_family(w, KN_M_C_FAILED);
  kn_mw_u64(w, NULL, NULL, (uint64_t)s->failed);
  kn_mw_family(w, KN_M_C_RECORDS);
  kn_mw_u64(w, NULL, NULL, s->records);
  kn_mw_family(w, KN_M_C_BYTES);
  kn_mw_u64(w, NULL, NULL, s->bytes);
  kn_mw_family(w, KN_M_C_DROPPED);
  kn_mw_u64(w, NULL, NULL, s->dropped);
  kn_mw_family(w, KN_M_C_QUEUED_BATCHES);
  kn_mw_u64(w, NULL, NULL, s->queued);
  kn_mw_family(w, KN_M_C_BUFFERED_BYTES);
  kn_mw_u64(w, NULL, NULL, s->buffered);
  if (!s->lease_mode) return;
  const struct {
    kn_metric_id_t id;
    uint64_t v;
  } plain[] = {
      {KN_M_C_LEASES_HELD, s->held},
      {KN_M_C_LEASES_TAKEN, s->ls.taken},
      {KN_M_C_LEASES_STOLEN, s->ls.stolen},
      {KN_M_C_LEASES_LOST, s->ls.lost},
      {KN_M_C_LEASES_RELEASED, s->ls.released},
      {KN_M_C_LEASES_HANDED_OVER, s->ls.handed_over},
      {KN_M_C_RENEWALS, s->ls.renewals},
      {KN_M_C_RENEWAL_FAILURES, s->ls.renew_failures},
  };
  for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
    kn_mw_family(w, plain[i].id);
    kn_mw_u64(w, NULL, NULL, plain[i].v);
  }
  per_op_u64(w, KN_M_C_STORE_CALLS, s->ls.store_calls);
  per_op_u64(w, KN_M_C_STORE_ERRORS, s->ls.store_errors);
  per_op_u64(w, KN_M_C_STORE_CONDITIONAL, s->ls.store_cond);
  kn_mw_family(w, KN_M_C_STORE_DURATION);
  for (size_t op = 0; op < KN_STORE_OPS; op++)
    if (op_names[op]) kn_mw_hist(w, "op", op_names[op], &s->ls.store_hist[op]);
  if (s->ls.store_ok_ms) {
    kn_mw_family(w, KN_M_C_STORE_SINCE_OK);
    kn_mw_f64(w, NULL, NULL, (double)(s->now - s->ls.store_ok_ms) / 1000.0);
  }
  if (s->ls.table_leases >= 0) {
    kn_mw_family(w, KN_M_C_TABLE_LEASES);
    kn_mw_u64(w, NULL, NULL, (uint64_t)s->ls.table_leases);
    kn_mw_family(w, KN_M_C_WAITING_PARENTS);
    kn_mw_u64(w, NULL, NULL, (uint64_t)s->ls.waiting_parents);
  }
}

/* The value of a per-shard family for one shard; 0 when it has none. */
static int shard_value(kn_metric_id_t id, const shard_snap_t *o, double *v,
                       uint64_t *u) {
  *v = -1;
  switch (id) {
    case KN_M_S_LEASE_HELD:
      *u = (uint64_t)o->held;
      return 1;
    case KN_M_S_LAG:
      if (!o->held || !o->reading || o->millis_behind < 0) return 0;
      *v = (double)o->millis_behind / 1000.0;
      return 1;
    case KN_M_S_RECORDS:
      *u = o->records;
      return 1;
    case KN_M_S_BYTES:
      *u = o->bytes;
      return 1;
    case KN_M_S_GR_CALLS:
      *u = o->gr_calls;
      return 1;
    case KN_M_S_GR_THROTTLES:
      *u = o->gr_throttles;
      return 1;
    case KN_M_S_GR_ERRORS:
      *u = o->gr_errors;
      return 1;
    case KN_M_S_BUFFERED_RECORDS:
      *u = o->buffered_records;
      return 1;
    case KN_M_S_BUFFERED_BYTES:
      *u = o->buffered_bytes;
      return 1;
    case KN_M_S_PAUSED:
      *u = (uint64_t)o->paused;
      return 1;
    case KN_M_S_CKPT_LAG:
      *u = o->ckpt_lag;
      return o->has_ckpt_lag;
    case KN_M_S_FO_SUBSCRIPTIONS:
      *u = o->fo.subscriptions;
      return o->efo;
    case KN_M_S_FO_RESUBSCRIBES:
      *u = o->fo.subscriptions ? o->fo.subscriptions - 1 : 0;
      return o->efo;
    case KN_M_S_FO_EVENTS:
      *u = o->fo.events;
      return o->efo;
    case KN_M_S_FO_ERRORS:
      *u = o->fo.errors;
      return o->efo;
    default:
      return 0;
  }
}

static void render_shards(kn_mw_t *w, const snap_t *s) {
  for (kn_metric_id_t id = KN_M_S_LEASE_HELD; id <= KN_M_S_FO_ERRORS; id++) {
    kn_mw_family(w, id);
    for (size_t i = 0; i < s->n; i++) {
      const shard_snap_t *o = &s->shards[i];
      if (id == KN_M_S_FO_STATE) {
        if (!o->efo) continue;
        for (size_t k = 0; kn_efo_state_names[k]; k++)
          kn_mw_u64_2(w, "shard", o->id, "state", kn_efo_state_names[k],
                      strcmp(kn_efo_state_names[k], o->fo.state) == 0);
        continue;
      }
      double v;
      uint64_t u = 0;
      if (!shard_value(id, o, &v, &u)) continue;
      if (id == KN_M_S_LAG)
        kn_mw_f64(w, "shard", o->id, v);
      else
        kn_mw_u64(w, "shard", o->id, u);
    }
  }
}

size_t kn_consumer_metrics(kn_consumer_t *kc, char *buf, size_t size) {
  if (!kc) return 0;
  snap_t s;
  kn_buf_t b = KN_BUF_INIT;
  int rc = take_snapshot(kc, &s);
  const char *base[] = {
      "stream", kc->stream,    "app", kn_conf_str(kc->conf, "app.name"),
      "worker", kc->worker_id, NULL};
  kn_mw_t w;
  kn_mw_init(&w, &b, base);
  if (!rc) {
    render_worker(&w, &s);
    render_shards(&w, &s);
  }
  size_t n = rc || w.rc ? 0 : kn_metrics_copy_out(&b, buf, size);
  if (!n && size) buf[0] = '\0';
  kn_mw_free(&w);
  kn_buf_free(&b);
  snap_free(&s);
  return n;
}
