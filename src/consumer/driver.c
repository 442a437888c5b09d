/* Lease mode: the control thread runs the coordination core (ccore.h).
 *
 * The thread owns the core and every shard's reading state.  It waits
 * for a message or for the core's next due time, feeds what happened to
 * the core as events -- store results, reader reports with the tenure
 * they were started for, the application's progress and checkpoint
 * requests, the time -- and carries out the actions the core returns:
 * store calls and listings go to the store threads (store_pool.c), whose
 * results come back as messages; readers are started and stopped here;
 * the application hears of leases through its events and replies.
 *
 * Apart from opening the store at start, nothing here waits for the
 * lease store, so renewals are sent on time whatever a slow call is
 * doing.  (The fan-out checks still ask Kinesis from this thread, as they
 * did before.) */
#include <stdlib.h>
#include <string.h>

#include "consumer/ccore.h"
#include "consumer/consumer_int.h"
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
  kn_cc_t *cc; /* NULL when the start failed */
  kn_store_pool_t *pool;
  kn_shard_list_t *listing; /* the last good ListShards */
  kn_ckpt_req_t *reqs;      /* handed to the core, not yet answered */
  kn_err_t verdict;         /* code of the last non-retriable failure */
  int close_asked;          /* CLOSE came */
  int close_started;        /* kn_cc_close called, or the core failed */
  int cc_closed;            /* the core said CLOSED */
  int64_t close_deadline;
  /* Extensions that came after the shard's time had run out: told to the
   * core as expiries once the actions in hand are done. */
  struct late {
    char *key;
    int64_t tenure;
  } * late;
  size_t n_late, cap_late;
} drv_t;

static void drain(drv_t *d);

static void set_fatal(kn_consumer_t *kc, kn_error_t *err) {
  pthread_mutex_lock(&kc->mu);
  if (!kc->fatal) {
    kc->fatal = err;
    err = NULL;
  }
  pthread_cond_broadcast(&kc->poll_cv);
  pthread_mutex_unlock(&kc->mu);
  kn_error_destroy(err);
}

static int is_fatal(kn_consumer_t *kc) {
  pthread_mutex_lock(&kc->mu);
  int f = kc->fatal != NULL;
  pthread_mutex_unlock(&kc->mu);
  return f;
}

static int live(const drv_t *d) { return d->cc && !d->cc_closed; }

/* ---- application checkpoint requests ---- */

static void answer(kn_consumer_t *kc, kn_ckpt_req_t *req, kn_error_t *err) {
  pthread_mutex_lock(&kc->mu);
  req->err = err;
  req->done = 1;
  pthread_cond_broadcast(&req->cv);
  pthread_mutex_unlock(&kc->mu);
}

static void unlink_req(drv_t *d, kn_ckpt_req_t *req) {
  for (kn_ckpt_req_t **pp = &d->reqs; *pp; pp = &(*pp)->next)
    if (*pp == req) {
      *pp = req->next;
      req->next = NULL;
      return;
    }
}

static kn_error_t *closed_error(kn_consumer_t *kc, const char *shard) {
  return kn_error_new(KN_ERR__LEASE_LOST,
                      "shard %s: the consumer %s; checkpoint not written",
                      shard, is_fatal(kc) ? "has failed" : "is closing");
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

static kn_cshard_t *find(kn_consumer_t *kc, const char *key) {
  pthread_mutex_lock(&kc->mu);
  kn_cshard_t *cs = key ? kn_shard_table_find(kc, key) : NULL;
  pthread_mutex_unlock(&kc->mu);
  return cs;
}

/* Stops the reader of the tenure a names and drops what it queued (never
 * handed out: the next owner reads it from the checkpoint).  Returns the
 * shard with mu held, or NULL (mu not held) when the tenure is not this
 * shard's any more. */
static kn_cshard_t *stop_reader_locked(drv_t *d, const kn_cc_action_t *a) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = find(kc, a->key);
  if (!cs) return NULL;
  pthread_mutex_lock(&kc->mu);
  int ours = cs->fencing_token == a->tenure;
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
static void stop_shard(drv_t *d, const kn_cc_action_t *a) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = stop_reader_locked(d, a);
  if (!cs) return;
  kc->lstats.lost += a->reason == KN_ERR__LEASE_LOST;
  cs->fencing_token = -1;
  cs->lease_until_ms = 0;
  cs->view.held = 0;
  kn_app_event_locked(kc, KN_APP_EV_LOST, cs->id, 0, a->reason, NULL, 0);
  pthread_mutex_unlock(&kc->mu);
  /* The core has said why (KN_CC_LOG). */
  kn_dbg(&kc->log, "COORD", "shard %s: stopped reading it (%s)", cs->id,
         kn_err2str(a->reason));
}

/* The shard is asked for by another worker: the application hears of it
 * in its next poll, finishes what it was handed, and the driver is told
 * (KN_CTL_YIELDED).  The tenure stays until then: the application may
 * still checkpoint. */
static void yield_shard(drv_t *d, const kn_cc_action_t *a) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = stop_reader_locked(d, a);
  if (!cs) return;
  kn_app_event_locked(kc, KN_APP_EV_HANDOFF, cs->id, a->tenure, KN_ERR__HANDOFF,
                      NULL, 0);
  pthread_mutex_unlock(&kc->mu);
  kn_dbg(&kc->log, "COORD", "shard %s: stopped reading it for %s", cs->id,
         a->old_owner ? a->old_owner : "another worker");
}

static void start_shard(drv_t *d, const kn_cc_action_t *a) {
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
  if (!cs) {
    set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory taking shard %s",
                               a->key));
    return;
  }
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
  cs->view.held = 1;
  cs->view.counter = a->tenure;
  view_ckpt_locked(cs, l ? l->checkpoint : NULL, l ? l->checkpoint_subseq : 0);
  kn_app_event_locked(kc, KN_APP_EV_ACQUIRED, cs->id, a->tenure,
                      KN_ERR_NO_ERROR, state, state ? l->pending_state_len : 0);
  pthread_mutex_unlock(&kc->mu);
  if (kn_reader_start(kc, cs))
    set_fatal(kc, kn_error_new(KN_ERR__NOMEM,
                               "out of memory starting shard "
                               "%s",
                               cs->id));
}

static void extend_shard(drv_t *d, const kn_cc_action_t *a) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = find(kc, a->key);
  if (!cs) return;
  int64_t now = kn_mono_ms();
  pthread_mutex_lock(&kc->mu);
  int ours = cs->fencing_token == a->tenure;
  /* Once the time has run out poll may have dropped records: the tenure
   * must end, not go on past a gap. */
  int late = ours && kn_lease_expired_locked(cs, now);
  if (ours && !late && a->until_ms > cs->lease_until_ms)
    cs->lease_until_ms = a->until_ms;
  pthread_mutex_unlock(&kc->mu);
  if (!late) return;
  if (d->n_late == d->cap_late) {
    size_t cap = d->cap_late ? d->cap_late * 2 : 8;
    struct late *v = realloc(d->late, cap * sizeof(*v));
    if (!v) return; /* the reader or the core's own deadline stops it */
    d->late = v;
    d->cap_late = cap;
  }
  char *key = strdup(a->key);
  if (!key) return;
  d->late[d->n_late].key = key;
  d->late[d->n_late++].tenure = a->tenure;
}

static void done_shard(drv_t *d, const kn_cc_action_t *a) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = find(kc, a->key);
  if (!cs) return;
  pthread_mutex_lock(&kc->mu);
  int other = cs->fencing_token >= 0 && cs->fencing_token != a->tenure;
  pthread_mutex_unlock(&kc->mu);
  if (other) return;
  kn_reader_stop(kc, cs); /* it stopped at the end already */
  pthread_mutex_lock(&kc->mu);
  cs->state = KN_CS_DONE;
  cs->fencing_token = -1;
  cs->lease_until_ms = 0;
  cs->view.held = 0;
  view_ckpt_locked(cs, KN_CKPT_SHARD_END, 0);
  pthread_mutex_unlock(&kc->mu);
}

/* ---- actions ---- */

static void submit(drv_t *d, const kn_cc_action_t *a) {
  kn_store_job_t *j = kn_store_job_new(a);
  if (!j) {
    /* The core would wait for the answer for ever: it stops. */
    set_fatal(d->kc, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    kn_cc_fail(d->cc);
    return;
  }
  kn_store_pool_submit(d->pool, j);
}

/* Carries out one action. */
static void act(drv_t *d, const kn_cc_action_t *a) {
  kn_consumer_t *kc = d->kc;
  int keyed = a->op != KN_CC_LIST_LEASES && a->op != KN_CC_LIST_SHARDS &&
              a->op != KN_CC_CREATE && a->op != KN_CC_HEARTBEAT &&
              a->op < KN_CC_REPLY;
  if ((keyed && !a->key) || (a->op == KN_CC_CREATE && !a->lease)) {
    /* The core ran out of memory copying the shard id or the lease. */
    set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory (%s)",
                               kn_cc_op_name(a->op)));
    kn_cc_fail(d->cc);
    return;
  }
  switch (a->op) {
    case KN_CC_LIST_LEASES:
    case KN_CC_LIST_SHARDS:
    case KN_CC_CREATE:
    case KN_CC_TAKE:
    case KN_CC_RENEW:
    case KN_CC_CHECKPOINT:
    case KN_CC_RELEASE:
    case KN_CC_REMOVE:
    case KN_CC_SET_CHILDREN:
    case KN_CC_GET:
    case KN_CC_HANDOFF:
    case KN_CC_HANDOFF_DONE:
    case KN_CC_HEARTBEAT:
      submit(d, a);
      break;
    case KN_CC_YIELD:
      yield_shard(d, a);
      break;
    case KN_CC_START:
      start_shard(d, a);
      break;
    case KN_CC_STOP:
      stop_shard(d, a);
      break;
    case KN_CC_EXTEND:
      extend_shard(d, a);
      break;
    case KN_CC_DONE:
      done_shard(d, a);
      break;
    case KN_CC_REPLY: {
      kn_ckpt_req_t *req = a->req;
      if (!req) break;
      unlink_req(d, req);
      kn_error_t *err = NULL;
      if (a->reason != KN_ERR_NO_ERROR)
        err = kn_error_new(a->reason, "%s",
                           a->err_msg ? a->err_msg : kn_err2str(a->reason));
      answer(kc, req, err);
      break;
    }
    case KN_CC_FATAL: {
      kn_err_t code = a->reason != KN_ERR_NO_ERROR    ? a->reason
                      : d->verdict != KN_ERR_NO_ERROR ? d->verdict
                                                      : KN_ERR__FAIL;
      kn_error_t *err =
          kn_error_new(code, "%s", a->err_msg ? a->err_msg : kn_err2str(code));
      set_fatal(kc, err);   /* the application is told */
      d->close_started = 1; /* the core releases its leases itself */
      break;
    }
    case KN_CC_CLOSED:
      d->cc_closed = 1;
      /* None is left with a core that stopped short (out of memory). */
      while (d->reqs) {
        kn_ckpt_req_t *req = d->reqs;
        d->reqs = req->next;
        answer(kc, req, closed_error(kc, req->cs->id));
      }
      break;
    case KN_CC_LOG: {
      const char *msg = a->err_msg ? a->err_msg : "";
      if (a->level >= KN_CC_LOG_WARN)
        kn_warn(&kc->log, "COORD", "%s", msg);
      else if (a->level == KN_CC_LOG_INFO)
        kn_info(&kc->log, "COORD", "%s", msg);
      else
        kn_dbg(&kc->log, "COORD", "%s", msg);
      break;
    }
  }
}

static void publish(drv_t *d) {
  kn_consumer_t *kc = d->kc;
  pthread_mutex_lock(&kc->mu);
  kc->taker_idle = kn_cc_idle(d->cc);
  kc->synced = kn_cc_synced(d->cc);
  pthread_mutex_unlock(&kc->mu);
}

/* Runs every action the core has decided.  An action may feed the core
 * an event of its own (an extension that came too late), so the loop
 * goes on until none is left. */
static void drain(drv_t *d) {
  kn_cc_action_t a;
  for (;;) {
    while (kn_cc_next(d->cc, &a))
      if (!d->cc_closed) act(d, &a); /* nothing after CLOSED */
    if (!d->n_late) break;
    struct late l = d->late[--d->n_late];
    if (live(d)) kn_cc_shard_expired(d->cc, l.key, l.tenure, kn_mono_ms());
    free(l.key);
  }
  publish(d);
}

/* ---- results of store calls ---- */

static void count_store(drv_t *d, const kn_store_job_t *j) {
  kn_consumer_t *kc = d->kc;
  kn_cshard_t *cs = find(kc, j->key);
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
  /* The statistics' view of a lease held now. */
  if (cs && !j->err && cs->view.held && cs->fencing_token == j->tenure &&
      j->tenure >= 0) {
    if (j->op == KN_CC_RENEW || j->op == KN_CC_CHECKPOINT)
      cs->view.counter = j->new_counter;
    if (j->op == KN_CC_CHECKPOINT && j->checkpoint)
      view_ckpt_locked(cs, j->checkpoint, j->subseq);
    if (j->op == KN_CC_RELEASE || j->op == KN_CC_HANDOFF_DONE)
      cs->view.held = 0;
  }
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
  if (j->stream_check) {
    stream_checked(d, j);
    return;
  }
  int64_t now = kn_mono_ms();
  count_store(d, j);
  log_store(d, j);
  if (j->err && !kn_error_is_retriable(j->err) &&
      kn_error_code(j->err) != KN_ERR_CONDITIONAL_CHECK_FAILED)
    d->verdict = kn_error_code(j->err);
  if (!live(d)) return;
  switch (j->op) {
    case KN_CC_LIST_LEASES:
      kn_cc_leases_done(d->cc, j->id, j->err, j->leases, j->n_leases, now);
      break;
    case KN_CC_LIST_SHARDS:
      if (!j->err) note_listing(d, j);
      kn_cc_shards_done(d->cc, j->id, j->err, j->shards, j->n_shards, now);
      if (!j->err) {
        kn_shard_list_destroy(d->listing);
        d->listing = j->list; /* j->shards pointed into it: not used again */
        j->list = NULL;
      }
      break;
    case KN_CC_GET:
      kn_cc_lease_got(d->cc, j->id, j->err, j->err ? NULL : &j->got, now);
      break;
    case KN_CC_HEARTBEAT:
      kn_cc_members_done(d->cc, j->id, j->err, &j->members, j->sent_ms, now);
      break;
    default:
      kn_cc_store_done(d->cc, j->id, j->err, j->new_counter, j->handoff_to,
                       j->sent_ms, now);
      break;
  }
  drain(d);
}

/* ---- messages ---- */

static int current(kn_consumer_t *kc, kn_cshard_t *cs, int64_t tenure) {
  pthread_mutex_lock(&kc->mu);
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
  kn_cc_shard_ended(d->cc, m->cs->id, m->tenure, v, n, kn_mono_ms());
  free(v);
  drain(d);
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
    set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return;
  }
  kn_store_pool_submit(d->pool, j);
}

static void stream_checked(drv_t *d, kn_store_job_t *j) {
  kn_consumer_t *kc = d->kc;
  if (j->err && kn_error_code(j->err) == KN_ERR_RESOURCE_NOT_FOUND) {
    set_fatal(kc, kn_error_prefix(j->err, "stream \"%s\"", kc->stream));
    j->err = NULL;
    return; /* handle() closes the core */
  }
  /* The stream is there (or cannot be asked now, which is taken as
   * there, as before): the shard has aged out of retention and nothing
   * is left to read in it (the core says so). */
  if (j->err)
    kn_dbg(&kc->log, "CONTROL", "stream \"%s\": %s", kc->stream,
           kn_error_string(j->err));
  if (!live(d)) return;
  kn_cc_shard_gone(d->cc, j->cs->id, j->tenure, kn_mono_ms());
  drain(d);
}

static void checkpoint_req(drv_t *d, kn_ckpt_req_t *req) {
  kn_consumer_t *kc = d->kc;
  if (!live(d) || d->close_started) {
    answer(kc, req, closed_error(kc, req->cs->id));
    return;
  }
  req->next = d->reqs;
  d->reqs = req;
  kn_cc_pos_t p = {req->pos.seq, (int64_t)req->pos.subseq};
  kn_cc_checkpoint(d->cc, req->cs->id, &p, req->prepare, req->state,
                   req->state_len, req, kn_mono_ms());
  drain(d);
}

static void progress(drv_t *d, kn_ctl_msg_t *m) {
  if (!live(d)) return;
  int64_t now = kn_mono_ms();
  kn_cc_pos_t p = {m->pos.seq, (int64_t)m->pos.subseq};
  const kn_cc_pos_t *pp = m->pos.seq[0] ? &p : NULL;
  if (m->kind == KN_CTL_DELIVERED)
    kn_cc_delivered(d->cc, m->cs->id, m->tenure, pp, m->end, now);
  else if (pp)
    kn_cc_processed(d->cc, m->cs->id, m->tenure, pp, now);
  drain(d);
}

static void begin_close(drv_t *d) {
  if (!live(d) || d->close_started) return;
  d->close_started = 1;
  kn_cc_close(d->cc, kn_mono_ms());
  drain(d);
}

static void handle(drv_t *d, kn_ctl_msg_t *m) {
  kn_consumer_t *kc = d->kc;
  switch (m->kind) {
    case KN_CTL_SHARD_ENDED:
      shard_ended(d, m);
      break;
    case KN_CTL_SHARD_GONE:
      shard_gone(d, m);
      break;
    case KN_CTL_LEASE_EXPIRED:
      if (live(d)) {
        kn_cc_shard_expired(d->cc, m->cs->id, m->tenure, kn_mono_ms());
        drain(d);
      }
      break;
    case KN_CTL_FATAL:
      kn_err_log(&kc->log, "CONTROL", "%s", kn_error_string(m->err));
      set_fatal(kc, m->err);
      m->err = NULL;
      break;
    case KN_CTL_EFO_CHECK:
      kn_efo_check(kc, m->cs, m->tenure, m->err);
      break;
    case KN_CTL_DELIVERED:
    case KN_CTL_PROCESSED:
      progress(d, m);
      break;
    case KN_CTL_YIELDED:
      if (live(d)) {
        kn_cc_pos_t p = {m->pos.seq, (int64_t)m->pos.subseq};
        kn_cc_yielded(d->cc, m->cs->id, m->tenure, m->pos.seq[0] ? &p : NULL,
                      kn_mono_ms());
        drain(d);
      }
      break;
    case KN_CTL_CHECKPOINT:
      checkpoint_req(d, m->req);
      m->req = NULL;
      break;
    case KN_CTL_STORE_DONE:
      store_done(d, m->job);
      break;
    case KN_CTL_CLOSE:
      if (!d->close_asked) {
        d->close_asked = 1;
        /* Bounded: a store that does not answer must not hold up the
         * application's close for longer than a lease lasts. */
        d->close_deadline = kn_mono_ms() + kc->lease.duration_ms;
      }
      begin_close(d);
      break;
    case KN_CTL_SHARD_DONE:
    case KN_CTL_RESYNC:
      break;
  }
  /* A failure from elsewhere (a reader, fan-out, memory): stop reading
   * and hand the leases back at once, so other workers go on. */
  if (is_fatal(kc)) begin_close(d);
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
  };
  d->cc = kn_cc_new(&cfg, kn_mono_ms());
  if (!d->cc) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  return NULL;
}

/* Answers whatever is left: requests still queued or with the core. */
static void finish(drv_t *d) {
  kn_consumer_t *kc = d->kc;
  pthread_mutex_lock(&kc->mu);
  kc->ctl_open = 0; /* no request is posted after this */
  kn_ctl_msg_t *msgs = kc->ctl_head;
  kc->ctl_head = kc->ctl_tail = NULL;
  pthread_mutex_unlock(&kc->mu);
  while (msgs) {
    kn_ctl_msg_t *m = msgs;
    msgs = m->next;
    if (m->kind == KN_CTL_CHECKPOINT) {
      answer(kc, m->req, closed_error(kc, m->req->cs->id));
      m->req = NULL;
    }
    kn_control_msg_free(m);
    pthread_mutex_lock(&kc->mu);
    kc->ctl_pending--;
    pthread_mutex_unlock(&kc->mu);
  }
  while (d->reqs) {
    kn_ckpt_req_t *req = d->reqs;
    d->reqs = req->next;
    answer(kc, req, closed_error(kc, req->cs->id));
  }
  /* Calls still running finish first; their results are dropped. */
  kn_store_pool_destroy(d->pool);
  d->pool = NULL;
  if (d->close_asked && !d->cc_closed && d->cc)
    kn_warn(&kc->log, "COORD",
            "closing: the lease store did not answer "
            "within %lld ms; leases not released expire on their own",
            (long long)kc->lease.duration_ms);
  kn_cc_destroy(d->cc);
  d->cc = NULL;
  kn_shard_list_destroy(d->listing);
  d->listing = NULL;
  free(d->late);
}

void kn_driver_run(kn_consumer_t *kc) {
  drv_t d;
  memset(&d, 0, sizeof(d));
  d.kc = kc;
  pthread_mutex_lock(&kc->mu);
  kc->ctl_open = 1;
  pthread_mutex_unlock(&kc->mu);
  if (!is_fatal(kc)) { /* fan-out setup may have failed */
    kn_error_t *err = start(&d);
    if (err) {
      set_fatal(kc, err);
      kn_cc_destroy(d.cc);
      d.cc = NULL;
    }
  }
  if (d.cc) {
    kn_cc_tick(d.cc, kn_mono_ms());
    drain(&d);
  }
  for (;;) {
    if (d.close_asked && (!live(&d) || kn_mono_ms() >= d.close_deadline)) break;
    pthread_mutex_lock(&kc->mu);
    while (!kc->ctl_head) {
      int64_t due = live(&d) ? kn_cc_wake_ms(d.cc) : INT64_MAX;
      if (d.close_asked && d.close_deadline < due) due = d.close_deadline;
      int64_t now = kn_mono_ms();
      if (due <= now) break;
      if (due - now > 60000) due = now + 60000;
      kn_cond_wait_until(&kc->ctl_cv, &kc->mu, due);
    }
    kn_ctl_msg_t *msgs = kc->ctl_head;
    kc->ctl_head = kc->ctl_tail = NULL;
    pthread_mutex_unlock(&kc->mu);

    while (msgs) {
      kn_ctl_msg_t *m = msgs;
      msgs = m->next;
      handle(&d, m);
      kn_control_msg_free(m);
      pthread_mutex_lock(&kc->mu);
      kc->ctl_pending--;
      pthread_mutex_unlock(&kc->mu);
    }
    if (live(&d)) {
      int64_t now = kn_mono_ms();
      if (now >= kn_cc_wake_ms(d.cc)) {
        kn_cc_tick(d.cc, now);
        drain(&d);
      }
    }
  }
  finish(&d);
}
