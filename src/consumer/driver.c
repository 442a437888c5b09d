/* Lease mode (control_mode.h): the thin threaded shell around the drive
 * (drive.h).
 *
 * The control thread owns the drive.  Its loop (control.c) hands it what
 * happened -- store results,
 * reader reports with the tenure they were started for, the
 * application's progress and checkpoint requests, the time.  The drive's
 * operations are carried out here: store calls and listings go to the
 * store threads (store_pool.c), whose results come back as messages;
 * readers are started, stopped and given their deadlines; the
 * application hears of leases through its events and replies.
 *
 * Apart from opening the store at start, nothing here waits for the
 * lease store, so renewals are sent on time whatever a slow call is
 * doing, and the fan-out checks run on a thread of their own; readers and
 * poll judge their deadlines themselves all the same. */
#include <stdlib.h>
#include <string.h>

#include "consumer/ccore.h"
#include "consumer/consumer_int.h"
#include "consumer/control_mode.h"
#include "consumer/drive.h"
#include "consumer/efo.h"
#include "consumer/metrics.h"
#include "consumer/shard_table.h"
#include "consumer/store_pool.h"
#include "core/error.h"
#include "lease/store.h"
#include "util/clock.h"
#include "util/cond.h"
#include "util/rand.h"
#include "util/str.h"

/* Store calls at once: renewals of many leases go out together, and a
 * slow scan or a locked SQLite file holds up one thread only. */
#define KN_STORE_THREADS 4

typedef struct drv {
  kn_consumer_t *kc;
  kn_drive_t *dr; /* NULL when the start failed */
  kn_store_pool_t *pool;
  kn_shard_list_t *listing; /* the last good ListShards */
  int close_asked;          /* CLOSE came */
  int64_t close_deadline;
} drv_t;

static int live(const drv_t *d) { return kn_drive_live(d->dr); }

/* ---- application checkpoint requests ---- */

static void answer(kn_consumer_t *kc, kn_ckpt_req_t *req, kn_error_t *err) {
  pthread_mutex_lock(&kc->ctl_mu);
  req->err = err;
  req->done = 1;
  pthread_cond_broadcast(&req->cv);
  pthread_mutex_unlock(&kc->ctl_mu);
}

static kn_error_t *closed_error(kn_consumer_t *kc, const char *shard) {
  return kn_error_new(
      KN_ERR__LEASE_LOST, "shard %s: the consumer %s; checkpoint not written",
      shard, kn_consumer_is_fatal(kc) ? "has failed" : "is closing");
}

/* ---- starting and stopping shards ---- */

static int is_seq(const char *s) { return s && *s >= '0' && *s <= '9'; }

/* Where reading starts for a lease's checkpoint. */
static void start_of(const kn_consumer_t *kc, const kn_lease_t *l,
                     kn_pos_t *p) {
  memset(p, 0, sizeof(*p));
  const char *c = l && l->checkpoint ? l->checkpoint : KN_CKPT_TRIM_HORIZON;
  if (is_seq(c) &&
      kn_pos_set_seq(
          p, KN_ITER_AT_SEQUENCE_NUMBER, c,
          (uint64_t)(l->checkpoint_subseq > 0 ? l->checkpoint_subseq : 0),
          1) == 0)
    return; /* AT the checkpoint, dropping records at or below it */
  if (strcmp(c, KN_CKPT_LATEST) == 0) {
    p->type = KN_ITER_LATEST;
  } else if (strcmp(c, KN_CKPT_AT_TIMESTAMP) == 0) {
    p->type = KN_ITER_AT_TIMESTAMP;
    p->timestamp_ms = kc->cfg.initial.timestamp_ms;
  } else {
    p->type = KN_ITER_TRIM_HORIZON;
  }
}

static void view_ckpt_locked(kn_cshard_t *cs, const char *ckpt,
                             int64_t subseq) {
  cs->view.ckpt[0] = '\0';
  cs->view.ckpt_subseq = 0;
  if (ckpt && strlen(ckpt) < sizeof(cs->view.ckpt)) {
    strcpy(cs->view.ckpt, ckpt);
    cs->view.ckpt_subseq = (uint64_t)(subseq > 0 ? subseq : 0);
  }
}

/* The shard table changes on this thread only, under mu: looking it up
 * here needs no lock (consumer_int.h). */
static kn_cshard_t *find(kn_consumer_t *kc, const char *key) {
  return key ? kn_shard_table_find(kc, key) : NULL;
}

/* ---- the drive's operations ---- */

static int64_t op_now(void *env) {
  (void)env;
  return kn_mono_ms();
}

static int op_submit(void *env, const kn_cc_action_t *a) {
  drv_t *d = env;
  kn_store_job_t *j = kn_store_job_new(a);
  if (!j) return -1;
  kn_store_pool_submit(d->pool, j);
  return 0;
}

/* Stops the reader of (key, tenure) and drops what it queued (never
 * handed out: the next owner reads it from the checkpoint).  Returns the
 * shard with mu held, or NULL (mu not held) when the tenure is not this
 * shard's any more. */
static kn_cshard_t *stop_reader_locked(drv_t *d, const char *key,
                                       int64_t tenure) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = find(kc, key);
  if (!cs) return NULL;
  pthread_mutex_lock(&kc->mu);
  int ours = cs->fencing_token == tenure;
  pthread_mutex_unlock(&kc->mu);
  if (!ours) return NULL;
  kn_reader_stop(kc, cs);
  pthread_mutex_lock(&kc->mu);
  kn_delivery_purge(kc, cs);
  cs->state = KN_CS_STOPPED;
  cs->caught_up = 0;
  return cs;
}

/* The tenure ended (lost, expired, closing). */
static void stop_shard(drv_t *d, const char *key, int64_t tenure,
                       kn_err_t reason) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = stop_reader_locked(d, key, tenure);
  if (!cs) return;
  kc->lstats.lost += reason == KN_ERR__LEASE_LOST;
  cs->fencing_token = -1;
  cs->lease_until_ms = 0;
  kn_app_event_locked(kc, KN_APP_EV_LOST, cs->id, 0, reason, NULL, 0);
  pthread_mutex_unlock(&kc->mu);
  /* The core has said why (KN_CC_LOG). */
  kn_dbg(&kc->log, "COORD", "shard %s: stopped reading it (%s)", cs->id,
         kn_err2str(reason));
}

/* The shard is asked for by another worker: the application hears of it
 * in its next poll, finishes what it was handed, and the driver is told
 * (KN_CTL_YIELDED).  The tenure stays until then: the application may
 * still checkpoint. */
static void yield_shard(drv_t *d, const char *key, int64_t tenure,
                        const char *next_owner) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = stop_reader_locked(d, key, tenure);
  if (!cs) return;
  kn_app_event_locked(kc, KN_APP_EV_HANDOFF, cs->id, tenure, KN_ERR__HANDOFF,
                      NULL, 0);
  pthread_mutex_unlock(&kc->mu);
  kn_dbg(&kc->log, "COORD", "shard %s: stopped reading it for %s", cs->id,
         next_owner ? next_owner : "another worker");
}

static void done_shard(drv_t *d, const char *key, int64_t tenure) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = find(kc, key);
  if (!cs) return;
  pthread_mutex_lock(&kc->mu);
  int other = cs->fencing_token >= 0 && cs->fencing_token != tenure;
  pthread_mutex_unlock(&kc->mu);
  if (other) return;
  kn_reader_stop(kc, cs); /* it stopped at the end already */
  pthread_mutex_lock(&kc->mu);
  cs->state = KN_CS_DONE;
  cs->fencing_token = -1;
  cs->lease_until_ms = 0;
  pthread_mutex_unlock(&kc->mu);
}

static void op_stop(void *env, const char *key, int64_t tenure,
                    kn_drive_stop_t why, kn_err_t reason,
                    const char *next_owner) {
  drv_t *d = env;
  if (why == KN_DRIVE_LOST)
    stop_shard(d, key, tenure, reason);
  else if (why == KN_DRIVE_YIELD)
    yield_shard(d, key, tenure, next_owner);
  else
    done_shard(d, key, tenure);
}

static int op_start(void *env, const kn_cc_action_t *a) {
  drv_t *d = env;
  kn_consumer_t *kc = d->kc;
  const kn_lease_t *l = a->lease;
  const kn_shard_t *s =
      d->listing ? kn_shard_list_find(d->listing, a->key) : NULL;
  pthread_mutex_lock(&kc->mu);
  kn_cshard_t *cs = kn_shard_table_find(kc, a->key);
  if (!cs)
    cs = kn_shard_table_add_raw(
        kc, a->key, l && l->n_parents > 0 ? l->parents[0] : NULL,
        l && l->n_parents > 1 ? l->parents[1] : NULL, l ? l->hash_start : NULL,
        l ? l->hash_end : NULL, s && !kn_shard_is_open(s));
  pthread_mutex_unlock(&kc->mu);
  if (!cs) return -1;
  /* A reader of an earlier tenure would have been stopped first; never
   * let two run. */
  kn_reader_stop(kc, cs);
  void *state = NULL;
  if (l && l->pending_state && l->pending_state_len) {
    state = malloc(l->pending_state_len);
    if (state) memcpy(state, l->pending_state, l->pending_state_len);
  }
  start_of(kc, l, &cs->start);
  pthread_mutex_lock(&kc->mu);
  kn_delivery_purge(kc, cs);
  cs->fencing_token = a->tenure;
  cs->lease_until_ms = a->until_ms;
  cs->has_delivered = cs->has_processed = 0;
  cs->end_popped = 0;
  cs->caught_up = 0;
  cs->state = KN_CS_WAITING;
  /* The lease shows as held before the reader's first batch can reach
   * the application (the drive publishes its view after start returns). */
  cs->view.held = 1;
  cs->view.counter = a->tenure;
  view_ckpt_locked(cs, l ? l->checkpoint : NULL, l ? l->checkpoint_subseq : 0);
  kn_app_event_locked(kc, KN_APP_EV_ACQUIRED, cs->id, a->tenure,
                      KN_ERR_NO_ERROR, state, state ? l->pending_state_len : 0);
  pthread_mutex_unlock(&kc->mu);
  return kn_reader_start(kc, cs);
}

static void op_deadline(void *env, const char *key, int64_t tenure,
                        int64_t until_ms) {
  drv_t *d = env;
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = find(kc, key);
  if (!cs) return;
  pthread_mutex_lock(&kc->mu);
  if (cs->fencing_token == tenure) cs->lease_until_ms = until_ms;
  pthread_mutex_unlock(&kc->mu);
}

/* The statistics' copy of the drive's view of a lease. */
static void op_view(void *env, const char *key, int64_t tenure,
                    const kn_drive_view_t *v, int checkpoint_changed) {
  drv_t *d = env;
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = find(kc, key);
  if (!cs) return;
  (void)tenure;
  pthread_mutex_lock(&kc->mu);
  cs->view.held = v->held;
  if (v->counter >= 0) cs->view.counter = v->counter;
  view_ckpt_locked(cs, v->checkpoint, v->subseq);
  if (checkpoint_changed)
    kn_metrics_ckpt_written_locked(cs, v->checkpoint, v->subseq);
  pthread_mutex_unlock(&kc->mu);
}

static void op_reply(void *env, void *r, kn_err_t code, const char *msg) {
  drv_t *d = env;
  kn_ckpt_req_t *req = r;
  kn_error_t *err = NULL;
  if (code == KN_ERR__LEASE_LOST && !msg)
    err = closed_error(d->kc, req->cs->id);
  else if (code != KN_ERR_NO_ERROR)
    err = kn_error_new(code, "%s", msg ? msg : kn_err2str(code));
  answer(d->kc, req, err);
}

static void op_fatal(void *env, kn_err_t code, const char *msg) {
  drv_t *d = env;
  kn_consumer_set_fatal(
      d->kc, kn_error_new(code, "%s", msg)); /* the application is told */
}

static void op_log(void *env, int level, const char *msg) {
  drv_t *d = env;
  if (level >= KN_CC_LOG_WARN)
    kn_warn(&d->kc->log, "COORD", "%s", msg);
  else if (level == KN_CC_LOG_INFO)
    kn_info(&d->kc->log, "COORD", "%s", msg);
  else
    kn_dbg(&d->kc->log, "COORD", "%s", msg);
}

static const kn_drive_ops_t drive_ops = {
    .now = op_now,
    .submit = op_submit,
    .start = op_start,
    .stop = op_stop,
    .deadline = op_deadline,
    .reply = op_reply,
    .fatal = op_fatal,
    .log = op_log,
    .view = op_view,
};

static void publish(drv_t *d) {
  kn_consumer_t *kc = d->kc;
  if (!d->dr) return;
  pthread_mutex_lock(&kc->mu);
  kc->taker_idle = kn_cc_idle(kn_drive_core(d->dr));
  kc->synced = kn_cc_synced(kn_drive_core(d->dr));
  pthread_mutex_unlock(&kc->mu);
}

/* ---- results of store calls ---- */

static void count_store(drv_t *d, const kn_store_job_t *j) {
  kn_consumer_t *kc = d->kc;
  pthread_mutex_lock(&kc->mu);
  if (j->op == KN_CC_RENEW) {
    kc->lstats.renewals++;
    kc->lstats.renew_failures += j->err != NULL;
    kc->lstats.renew_last_us = j->took_us;
    if (j->took_us > kc->lstats.renew_max_us)
      kc->lstats.renew_max_us = j->took_us;
  }
  if (j->op == KN_CC_TAKE && !j->err) kc->lstats.taken++;
  kn_metrics_store_done_locked(kc, j);
  if (j->op == KN_CC_HANDOFF_DONE && !j->err && j->tenure >= 0)
    kc->lstats.handed_over++;
  pthread_mutex_unlock(&kc->mu);
}

/* The core logs what it makes of results; not who held a lease taken. */
static void log_store(drv_t *d, const kn_store_job_t *j) {
  kn_consumer_t *kc = d->kc;
  if (j->err || j->op != KN_CC_TAKE || !j->old_owner) return;
  if (strcmp(j->old_owner, kc->worker_id) == 0)
    kn_info(&kc->log, "COORD",
            "shard %s was in this worker's name but not "
            "read here: taken back",
            j->key);
  else
    kn_dbg(&kc->log, "COORD", "shard %s taken from %s", j->key, j->old_owner);
}

/* ListShards shows which shards are closed: an empty read of a closed
 * shard is not "caught up" until its end is seen. */
static void note_listing(drv_t *d, kn_store_job_t *j) {
  kn_consumer_t *kc = d->kc;
  pthread_mutex_lock(&kc->mu);
  for (size_t i = 0; i < kc->n_shards; i++) {
    const kn_shard_t *s = kn_shard_list_find(j->list, kc->shards[i]->id);
    if (s && !kn_shard_is_open(s)) kc->shards[i]->closed_at_sync = 1;
  }
  pthread_mutex_unlock(&kc->mu);
}

static void stream_checked(drv_t *d, kn_store_job_t *j);

static void store_done(drv_t *d, kn_store_job_t *j) {
  if (j->efo_check) return; /* nothing for the drive */
  if (j->stream_check) {
    stream_checked(d, j);
    return;
  }
  count_store(d, j);
  log_store(d, j);
  if (j->op == KN_CC_LIST_SHARDS && !j->err) {
    note_listing(d, j);
    /* Leases started by this listing look their shards up in it;
     * j->shards still points into it. */
    kn_shard_list_destroy(d->listing);
    d->listing = j->list;
    j->list = NULL;
  }
  kn_drive_result_t r = kn_store_job_result(j);
  kn_drive_result(d->dr, &r);
}

/* ---- messages ---- */

static int current(kn_consumer_t *kc, kn_cshard_t *cs, int64_t tenure) {
  pthread_mutex_lock(&kc->mu); /* poll ends a yielded tenure's token */
  int r = cs->fencing_token >= 0 && cs->fencing_token == tenure;
  pthread_mutex_unlock(&kc->mu);
  return r;
}

static void shard_ended(drv_t *d, kn_ctl_msg_t *m) {
  kn_consumer_t *kc = d->kc;
  kn_info(&kc->log, "CONTROL", "shard %s: end of shard reached", m->cs->id);
  if (current(kc, m->cs, m->tenure)) kn_reader_stop(kc, m->cs);
  if (!live(d)) return;
  size_t n = kn_shard_list_count(m->children);
  kn_cc_shard_t *v = calloc(n ? n : 1, sizeof(*v));
  if (!v) n = 0; /* the next sync finds them */
  for (size_t i = 0; i < n; i++) {
    const kn_shard_t *s = kn_shard_list_get(m->children, i);
    v[i].id = kn_shard_id(s);
    v[i].parent = kn_shard_parent_id(s);
    v[i].adjacent = kn_shard_adjacent_parent_id(s);
    v[i].hash_start = kn_shard_hash_key_start(s);
    v[i].hash_end = kn_shard_hash_key_end(s);
    v[i].closed = !kn_shard_is_open(s);
  }
  kn_drive_shard_ended(d->dr, m->cs->id, m->tenure, v, n);
  free(v);
}

/* A reader found its shard missing: gone past retention if the stream is
 * still there (asked on a store thread: DescribeStreamSummary may retry
 * for a while), or the stream is gone and the consumer fails. */
static void shard_gone(drv_t *d, kn_ctl_msg_t *m) {
  kn_consumer_t *kc = d->kc;
  if (current(kc, m->cs, m->tenure)) kn_reader_stop(kc, m->cs);
  kn_dbg(&kc->log, "CONTROL", "shard %s: %s: does the stream exist?", m->cs->id,
         kn_error_string(m->err));
  if (!live(d)) return;
  kn_store_job_t *j = kn_store_job_stream_check(m->cs, m->tenure);
  if (!j) {
    kn_consumer_set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return;
  }
  kn_store_pool_submit(d->pool, j);
}

static void stream_checked(drv_t *d, kn_store_job_t *j) {
  kn_consumer_t *kc = d->kc;
  if (j->err && kn_error_code(j->err) == KN_ERR_RESOURCE_NOT_FOUND) {
    kn_consumer_set_fatal(kc,
                          kn_error_prefix(j->err, "stream \"%s\"", kc->stream));
    j->err = NULL;
    return; /* handle() closes the drive */
  }
  /* The stream is there (or cannot be asked now, which is taken as
   * there, as before): the shard has aged out of retention and nothing
   * is left to read in it (the core says so). */
  if (j->err)
    kn_dbg(&kc->log, "CONTROL", "stream \"%s\": %s", kc->stream,
           kn_error_string(j->err));
  kn_drive_shard_gone(d->dr, j->cs->id, j->tenure);
}

static kn_cc_pos_t cc_pos(const kn_pos_t *p) {
  return (kn_cc_pos_t){p->seq, (int64_t)p->subseq};
}

static void handle(void *arg, kn_ctl_msg_t *m) {
  drv_t *d = arg;
  if (!d) return;
  kn_consumer_t *kc = d->kc;
  kn_cc_pos_t p = cc_pos(&m->pos);
  const kn_cc_pos_t *pp = m->pos.seq[0] ? &p : NULL;
  switch (m->kind) {
    case KN_CTL_SHARD_ENDED:
      shard_ended(d, m);
      break;
    case KN_CTL_SHARD_GONE:
      shard_gone(d, m);
      break;
    case KN_CTL_LEASE_EXPIRED:
      kn_drive_expired(d->dr, m->cs->id, m->tenure);
      break;
    case KN_CTL_DELIVERED:
      kn_drive_delivered(d->dr, m->cs->id, m->tenure, pp, m->end);
      break;
    case KN_CTL_PROCESSED:
      kn_drive_processed(d->dr, m->cs->id, m->tenure, pp);
      break;
    case KN_CTL_YIELDED:
      kn_drive_yielded(d->dr, m->cs->id, m->tenure, pp);
      break;
    case KN_CTL_CHECKPOINT: {
      kn_ckpt_req_t *req = m->req;
      kn_cc_pos_t rp = cc_pos(&req->pos);
      m->req = NULL;
      if (!d->dr)
        answer(kc, req, closed_error(kc, req->cs->id));
      else
        kn_drive_checkpoint(d->dr, req->cs->id, &rp, req->prepare, req->state,
                            req->state_len, req);
      break;
    }
    case KN_CTL_STORE_DONE:
      store_done(d, m->job);
      break;
    default: /* FATAL, EFO_CHECK and CLOSE are the loop's */
      break;
  }
  /* A failure from elsewhere (a reader, fan-out, memory): stop reading
   * and hand the leases back at once, so other workers go on. */
  if (kn_consumer_is_fatal(kc)) kn_drive_close(d->dr);
  publish(d);
}

/* ---- start and end ---- */

static kn_error_t *open_store(kn_consumer_t *kc) {
  const char *spec = kn_conf_str(kc->conf, "lease.store");
  kn_error_t *err = NULL;
  kc->ls = kn_lease_store_open(spec, kc->client, &err);
  if (!kc->ls) return kn_error_prefix(err, "lease store \"%s\"", spec);
  err = kc->ls->ops->ensure_table(kc->ls);
  if (err) return kn_error_prefix(err, "lease store %s", kc->ls->name);
  return NULL;
}

static const char *initial_checkpoint(const kn_consumer_t *kc) {
  switch (kc->cfg.initial.type) {
    case KN_ITER_LATEST:
      return KN_CKPT_LATEST;
    case KN_ITER_AT_TIMESTAMP:
      return KN_CKPT_AT_TIMESTAMP;
    default:
      return KN_CKPT_TRIM_HORIZON;
  }
}

static kn_error_t *start(drv_t *d) {
  kn_consumer_t *kc = d->kc;
  kn_error_t *err = open_store(kc);
  if (err) return err;
  d->pool = kn_store_pool_new(kc, KN_STORE_THREADS);
  if (!d->pool)
    return kn_error_new(KN_ERR__FAIL, "cannot start the lease store threads");
  kn_cc_cfg_t cfg = {
      .worker = kc->worker_id,
      .duration_ms = kc->lease.duration_ms,
      .renew_ms = kc->lease.renew_ms,
      .take_ms = kc->lease.take_ms,
      .sync_ms = kc->cfg.sync_interval_ms,
      .checkpoint_ms = kc->cfg.checkpoint_interval_ms,
      .max_leases = kc->lease.max_leases,
      .max_steal = kc->lease.max_steal,
      .initial = initial_checkpoint(kc),
      .auto_checkpoint = kc->cfg.auto_checkpoint,
      .handoff_ms = kc->lease.handoff_ms,
      .members = kc->lease.members,
      .scan_ms = kc->lease.scan_ms,
      .beat_base = (int64_t)(kn_rand_u64() >> 2),
      /* Past 16 members, spread over items where the store keeps them
       * (DynamoDB, memory): no item is written by every worker. */
      .member_items = kc->ls->ops->publish ? KN_MEMBERS_BUCKETS_MAX : 1,
  };
  d->dr = kn_drive_new(&cfg, &drive_ops, d);
  if (!d->dr) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  return NULL;
}

/* Answers whatever is left: requests still queued or with the drive. */
static void finish(drv_t *d) {
  kn_consumer_t *kc = d->kc;
  pthread_mutex_lock(&kc->ctl_mu);
  kc->ctl_open = 0; /* no request is posted after this */
  kn_ctl_msg_t *msgs = kc->ctl_head;
  kc->ctl_head = kc->ctl_tail = NULL;
  for (kn_ctl_msg_t *m = msgs; m; m = m->next) kc->ctl_pending--;
  pthread_mutex_unlock(&kc->ctl_mu);
  while (msgs) {
    kn_ctl_msg_t *m = msgs;
    msgs = m->next;
    if (m->kind == KN_CTL_CHECKPOINT) {
      answer(kc, m->req, closed_error(kc, m->req->cs->id));
      m->req = NULL;
    }
    kn_control_msg_free(m);
  }
  /* Calls still running finish first; their results are dropped. */
  kn_store_pool_destroy(d->pool);
  d->pool = NULL;
  if (d->close_asked && live(d))
    kn_warn(&kc->log, "COORD",
            "closing: the lease store did not answer "
            "within %lld ms; leases not released expire on their own",
            (long long)kc->lease.duration_ms);
  kn_drive_destroy(d->dr); /* answers the requests it holds */
  d->dr = NULL;
  kn_shard_list_destroy(d->listing);
  d->listing = NULL;
}

static void *lease_start(kn_consumer_t *kc) {
  drv_t *d = calloc(1, sizeof(*d));
  if (!d) {
    kn_consumer_set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return NULL;
  }
  d->kc = kc;
  pthread_mutex_lock(&kc->ctl_mu);
  kc->ctl_open = 1;
  pthread_mutex_unlock(&kc->ctl_mu);
  if (!kn_consumer_is_fatal(kc)) { /* fan-out setup may have failed */
    kn_error_t *err = start(d);
    if (err) {
      kn_consumer_set_fatal(kc, err);
      kn_drive_destroy(d->dr);
      d->dr = NULL;
    }
  }
  return d;
}

static int64_t lease_due(void *arg) {
  drv_t *d = arg;
  if (!d) return INT64_MAX;
  int64_t due = kn_drive_wake_ms(d->dr);
  if (d->close_asked && d->close_deadline < due) due = d->close_deadline;
  return due;
}

static void lease_tick(void *arg) {
  drv_t *d = arg;
  if (!d || kn_mono_ms() < kn_drive_wake_ms(d->dr)) return;
  kn_drive_tick(d->dr);
  publish(d);
}

static void lease_close(void *arg) {
  drv_t *d = arg;
  if (!d) return;
  d->close_asked = 1;
  /* Bounded: a store that does not answer must not hold up the
   * application's close for longer than a lease lasts. */
  d->close_deadline = kn_mono_ms() + d->kc->lease.duration_ms;
  kn_drive_close(d->dr);
  publish(d);
}

static int lease_done(void *arg) {
  drv_t *d = arg;
  return !d || !live(d) || kn_mono_ms() >= d->close_deadline;
}

static void lease_finish(void *arg) {
  drv_t *d = arg;
  if (!d) return;
  finish(d);
  free(d);
}

const kn_ctl_mode_t kn_lease_mode = {
    .start = lease_start,
    .handle = handle,
    .due = lease_due,
    .tick = lease_tick,
    .close = lease_close,
    .done = lease_done,
    .finish = lease_finish,
};
