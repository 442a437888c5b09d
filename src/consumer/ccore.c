/* The coordination core's state machine (ccore.h). */
#include "consumer/ccore.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/ccore_queue.h"
#include "kinesis/seqnum.h"
#include "lease/members.h"
#include "lease/taker.h"
#include "util/strmap.h"

#define SEQ_CAP 136 /* a sequence number, a sentinel or "" */

/* A checkpoint write the application waits for. */
typedef struct cc_req {
  struct cc_req *next;
  char seq[SEQ_CAP];
  int64_t subseq;
  int prepare;
  void *state;
  size_t state_len;
  void *req;
} cc_req_t;

/* A lease this worker holds, or held. */
typedef struct cc_lease {
  char *key;
  int held;    /* ours in the table: writes may go on */
  int reading; /* a reader runs (START sent, no STOP yet) */
  int64_t tenure;
  int64_t counter;  /* after our last good write */
  int64_t since_ms; /* when the take was answered */
  int64_t until_ms; /* reading deadline */
  int64_t next_renew_ms;
  uint64_t busy; /* id of our write in flight, 0: none */
  int flush_due;
  int failed_write;   /* the last write failed: the next waits a while */
  char ckpt[SEQ_CAP]; /* in the table */
  int64_t ckpt_sub;
  char processed[SEQ_CAP];
  int64_t processed_sub;
  char delivered[SEQ_CAP];
  int64_t delivered_sub;
  int ended, end_popped, shard_end_written;
  cc_req_t *reqs, *reqs_tail;
  /* Handing off: to whom, since when; yielded: the application is done
   * with what it was handed. */
  char *handoff_to;
  int64_t handoff_since;
  int yielded;
} cc_lease_t;

/* A lease asked for from its owner (HANDOFF), watched until passed on. */
typedef struct cc_in {
  char *key;
  int64_t counter;    /* as last seen */
  int64_t since_ms;   /* asked at */
  int64_t changed_ms; /* the counter last changed (observed) */
  int64_t next_ms;    /* next look */
  uint64_t busy;      /* GET in flight */
} cc_in_t;

/* What a listing is for.  A sync lists the leases, the shards, then the
 * leases again, and plans on both lease listings: one older than the
 * shard listing (a shard open in the listing and leaseless before it was
 * never finished) and one newer (a closed shard's family as it is now). */
enum {
  P_NONE,
  P_SYNC_LEASES1,
  P_SYNC_SHARDS,
  P_SYNC_LEASES2,
  P_TAKE,
  P_PROBE /* the leader's ListShards: a sync only if something changed */
};
/* What a TAKE is: a free or expired lease, a steal, the end of a
 * hand-off. */
enum { T_TAKE, T_STEAL, T_HANDED };

/* A call in flight. */
typedef struct cc_op {
  uint64_t id;
  kn_cc_op_t op;
  int purpose;
  char *key;
  int64_t tenure;
  int64_t emit_ms;
  kn_lease_t lease;   /* TAKE: the lease as listed */
  int from_start;     /* TAKE: read from the start (kn_cc_family_read) */
  char ckpt[SEQ_CAP]; /* CHECKPOINT: what it writes ("" for none) */
  int64_t ckpt_sub;
  int wave;        /* CREATE */
  int64_t bump;    /* HEARTBEAT: added to the epoch */
  int64_t epoch;   /* LIST_LEASES, P_PROBE: the epoch when sent */
  uint64_t deaths; /* LIST_LEASES: deaths counted when sent */
  cc_req_t *req;   /* CHECKPOINT for the application */
} cc_op_t;

struct kn_cc {
  kn_cc_cfg_t cfg;
  char *worker, *initial;
  int64_t grace_ms;
  uint64_t next_id;
  cc_queue_t q;
  cc_op_t **ops;
  size_t n_ops, cap_ops;
  cc_lease_t **ls;
  size_t n_ls, cap_ls;
  kn_strmap_t lmap; /* key -> ls entry (a worker may hold thousands) */
  cc_in_t *in;      /* hand-offs asked for */
  size_t n_in, cap_in;
  int64_t watch_ms;
  kn_lease_observer_t obs;
  /* shard sync */
  int synced, syncing, resync;
  int64_t sync_at;
  int sync_failures;
  kn_cc_shard_t *shards; /* the last listing, owned strings */
  size_t n_shards;
  kn_lease_t *snap; /* the sync's first lease listing (owned) */
  size_t n_snap;
  int64_t sync_emit_ms; /* when that listing was asked for */
  kn_cc_create_t *plan; /* creates of the sync in progress */
  size_t n_plan, plan_next;
  int wave_left, create_failed;
  /* take */
  int taking, idle;
  int64_t take_at;
  int64_t flush_at;
  int closing, fatal, closed_sent;
  /* Out of memory for an action: FATAL and CLOSED, allocated up front. */
  int broken;
  cc_act_t *spare_fatal, *spare_closed;
  /* membership */
  int mb_on;        /* heartbeats are written */
  int mb_ok;        /* one was answered */
  uint64_t hb_busy; /* HEARTBEAT in flight */
  int64_t hb_at, beat;
  int64_t bump_pending; /* epoch bumps not yet written */
  int64_t member_until; /* reading stops then without a heartbeat */
  int64_t fence_told;   /* the last FENCE (INT64_MAX: none) */
  int close_beat;       /* the closing heartbeat was sent */
  kn_mview_t view;
  int scanned;          /* a take round since the first heartbeat */
  int64_t scan_epoch;   /* the epoch of the last take round */
  uint64_t scan_deaths; /* deaths counted by then */
  int64_t last_scan_ms; /* when the last take round was answered */
  uint64_t idle_sig;    /* the lease counts it found balanced */
  int64_t idle_sig_ms;  /* when */
  size_t foreign;       /* leases of non-members it had to watch */
  int64_t leftover_bump_ms;
  int sync_asked;       /* a sync was asked for (a shard ended) */
  int64_t sync_epoch;   /* the epoch of the last full sync */
  int64_t full_sync_ms; /* when it ended */
  int sync_more;        /* it left a cleanup to do */
  /* A listing with leases of dead members, kept for the round that takes
   * them: it runs on the first heartbeat sent after it was answered.  A
   * member seen dead in a view older than the listing may have come back
   * (a restart under the same id) and taken them meanwhile; one that is
   * back beat before it took anything, so that heartbeat tells. */
  kn_lease_t *pend;
  size_t n_pend;
  int64_t view_sent_ms;  /* the heartbeat behind the view was sent then */
  int64_t hb_ok_sent_ms; /* the last good heartbeat was sent then */
  int64_t pend_ms, pend_emit_ms, pend_epoch;
  uint64_t pend_deaths;
};

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int is_seq(const char *s) { return s && *s >= '0' && *s <= '9'; }
/* At the initial position: not started, nor finished. */
static int at_initial(const kn_lease_t *t) {
  return t->checkpoint && (strcmp(t->checkpoint, KN_CKPT_LATEST) == 0 ||
                           strcmp(t->checkpoint, KN_CKPT_AT_TIMESTAMP) == 0);
}

const char *kn_cc_op_name(kn_cc_op_t op) {
  static const char *names[] = {
      "LIST_LEASES", "LIST_SHARDS",  "CREATE",    "TAKE",         "RENEW",
      "CHECKPOINT",  "RELEASE",      "REMOVE",    "SET_CHILDREN", "GET",
      "HANDOFF",     "HANDOFF_DONE", "HEARTBEAT", "START",        "STOP",
      "EXTEND",      "FENCE",        "DONE",      "YIELD",        "REPLY",
      "FATAL",       "CLOSED",       "LOG"};
  return (unsigned)op < sizeof(names) / sizeof(names[0]) ? names[op] : "?";
}

static void set_str(char *dst, const char *s) {
  dst[0] = '\0';
  if (s && strlen(s) < SEQ_CAP) strcpy(dst, s);
}

/* ---- actions ---- */

static void logf_(kn_cc_t *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_(kn_cc_t *c, int level, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  /* A line lost to a failed allocation is only a line: the core goes on. */
  int lost = c->q.lost;
  cc_act_t *x = cc_push(&c->q, KN_CC_LOG);
  if (x) {
    x->a.level = level;
    cc_own(x, &x->a.err_msg, line);
  }
  c->q.lost = lost;
}

static cc_op_t *op_new(kn_cc_t *c, kn_cc_op_t op, const char *key,
                       int64_t tenure, int64_t now) {
  if (c->n_ops == c->cap_ops) {
    size_t cap = c->cap_ops ? c->cap_ops * 2 : 16;
    cc_op_t **v = realloc(c->ops, cap * sizeof(*v));
    if (!v) return NULL;
    c->ops = v;
    c->cap_ops = cap;
  }
  cc_op_t *o = calloc(1, sizeof(*o));
  if (!o || (key && !(o->key = strdup(key)))) {
    free(o);
    return NULL;
  }
  o->id = ++c->next_id;
  o->op = op;
  o->tenure = tenure;
  o->emit_ms = now;
  c->ops[c->n_ops++] = o;
  return o;
}

/* Removes the op with id from the table and returns it (the caller frees
 * it with op_free), or NULL. */
static cc_op_t *op_take(kn_cc_t *c, uint64_t id) {
  for (size_t i = 0; i < c->n_ops; i++) {
    if (c->ops[i]->id != id) continue;
    cc_op_t *o = c->ops[i];
    c->ops[i] = c->ops[--c->n_ops];
    return o;
  }
  return NULL;
}

static void req_free(cc_req_t *r) {
  if (!r) return;
  free(r->state);
  free(r);
}

static void op_free(cc_op_t *o) {
  if (!o) return;
  free(o->key);
  kn_lease_clear(&o->lease);
  req_free(o->req);
  free(o);
}

/* A store call for op o: the action carries its id. */
static cc_act_t *call(kn_cc_t *c, cc_op_t *o) {
  cc_act_t *x = cc_push(&c->q, o->op);
  if (!x) return NULL;
  x->a.id = o->id;
  x->a.tenure = o->tenure;
  if (cc_own(x, &x->a.key, o->key)) return NULL;
  return x;
}

static void reply(kn_cc_t *c, void *req, kn_err_t code, const char *msg) {
  cc_act_t *x = cc_push(&c->q, KN_CC_REPLY);
  if (!x) return;
  x->a.req = req;
  x->a.reason = code;
  cc_own(x, &x->a.err_msg, msg);
}

/* ---- leases held ---- */

static cc_lease_t *lease_find(kn_cc_t *c, const char *key) {
  return kn_strmap_get(&c->lmap, key);
}

static cc_lease_t *lease_get(kn_cc_t *c, const char *key) {
  cc_lease_t *l = lease_find(c, key);
  if (l) return l;
  if (c->n_ls == c->cap_ls) {
    size_t cap = c->cap_ls ? c->cap_ls * 2 : 16;
    cc_lease_t **v = realloc(c->ls, cap * sizeof(*v));
    if (!v) return NULL;
    c->ls = v;
    c->cap_ls = cap;
  }
  l = calloc(1, sizeof(*l));
  if (!l || !(l->key = strdup(key)) || kn_strmap_put(&c->lmap, l->key, l)) {
    if (l) free(l->key);
    free(l);
    return NULL;
  }
  c->ls[c->n_ls++] = l;
  return l;
}

static void fail_reqs(kn_cc_t *c, cc_lease_t *l, kn_err_t code) {
  while (l->reqs) {
    cc_req_t *r = l->reqs;
    l->reqs = r->next;
    char msg[256];
    snprintf(msg, sizeof(msg), "shard %s: %s", l->key,
             code == KN_ERR__LEASE_LOST
                 ? "this worker does not hold its lease; checkpoint not written"
                 : "closing; checkpoint not written");
    reply(c, r->req, code, msg);
    req_free(r);
  }
  l->reqs_tail = NULL;
}

/* The tenure's reading ends (STOP): the reader stops, the application
 * hears of it. */
static void stop_reading(kn_cc_t *c, cc_lease_t *l, kn_err_t reason) {
  if (!l->reading) return;
  l->reading = 0;
  cc_act_t *x = cc_push(&c->q, KN_CC_STOP);
  if (!x) return;
  x->a.tenure = l->tenure;
  x->a.reason = reason;
  cc_own(x, &x->a.key, l->key);
}

/* The lease is no longer ours to write. */
static void drop(kn_cc_t *c, cc_lease_t *l, kn_err_t reason) {
  stop_reading(c, l, reason);
  l->held = 0;
  free(l->handoff_to);
  l->handoff_to = NULL;
  c->idle = 0; /* a take round decides what happens to it */
  fail_reqs(c, l, KN_ERR__LEASE_LOST);
}

static int after_ckpt(const cc_lease_t *l, const char *seq, int64_t sub) {
  if (!is_seq(l->ckpt)) return 1;
  return kn_seqpos_cmp(seq, (uint64_t)sub, l->ckpt, (uint64_t)l->ckpt_sub) > 0;
}

static void write_ckpt(kn_cc_t *c, cc_lease_t *l, const char *ckpt, int64_t sub,
                       cc_req_t *req, int64_t now) {
  cc_op_t *o = op_new(c, KN_CC_CHECKPOINT, l->key, l->tenure, now);
  if (!o) {
    if (req) reply(c, req->req, KN_ERR__NOMEM, "out of memory");
    req_free(req);
    return;
  }
  set_str(o->ckpt, ckpt);
  o->ckpt_sub = sub;
  o->req = req;
  cc_act_t *x = call(c, o);
  if (!x) return;
  x->a.counter = l->counter;
  if (req && req->prepare) {
    cc_own(x, &x->a.pending, req->seq);
    x->a.pending_subseq = req->subseq;
    x->a.state = req->state;
    x->a.state_len = req->state_len;
  } else {
    cc_own(x, &x->a.checkpoint, ckpt);
    x->a.subseq = sub;
  }
  l->busy = o->id;
}

/* Starts the next write the lease needs, if none is in flight. */
static void pump(kn_cc_t *c, cc_lease_t *l, int64_t now) {
  if (!l->held || l->busy) return;
  /* Most calls find nothing to do (a worker may hold thousands): no
   * request, no end, no hand-off, not closing, no renewal due. */
  if (!l->reqs && !l->ended && !l->handoff_to && !l->shard_end_written &&
      !c->closing && !c->fatal && now < l->next_renew_ms)
    return;
  while (l->reqs) {
    cc_req_t *r = l->reqs;
    if (!r->prepare &&
        (l->shard_end_written || !after_ckpt(l, r->seq, r->subseq))) {
      /* At or behind the table's checkpoint: nothing to write. */
      l->reqs = r->next;
      if (!l->reqs) l->reqs_tail = NULL;
      reply(c, r->req, KN_ERR_NO_ERROR, NULL);
      req_free(r);
      continue;
    }
    l->reqs = r->next;
    if (!l->reqs) l->reqs_tail = NULL;
    write_ckpt(c, l, r->prepare ? NULL : r->seq, r->subseq, r, now);
    return;
  }
  int done_reading = l->ended && l->end_popped;
  if (done_reading && !l->shard_end_written &&
      (c->cfg.auto_checkpoint || !l->delivered[0] ||
       !after_ckpt(l, l->delivered, l->delivered_sub))) {
    write_ckpt(c, l, KN_CKPT_SHARD_END, 0, NULL, now);
    return;
  }
  int final = c->closing || c->fatal;
  /* Handing off: once the application is done, what it processed is
   * checkpointed and the lease passed on. */
  int leaving = l->handoff_to && (l->yielded || final);
  /* After a failed write, the next waits (renewals keep their pace). */
  int wait = l->failed_write && now < l->next_renew_ms;
  int has_work = l->processed[0] && !l->shard_end_written &&
                 after_ckpt(l, l->processed, l->processed_sub);
  /* A flush rides on the lease's next renewal (the checkpoint renews it):
   * a lease costs one write per renewal interval, records or not. */
  int flush_now = l->flush_due && now >= l->next_renew_ms;
  if (has_work && (final || flush_now || leaving)) {
    if (wait) return;
    l->flush_due = 0;
    write_ckpt(c, l, l->processed, l->processed_sub, NULL, now);
    return;
  }
  if (!has_work) l->flush_due = 0;
  if (l->shard_end_written || final || leaving) {
    if (wait) return;
    /* Closing, it releases even a lease asked for: the asker may be
     * closing too (a group stopped as a whole), and a lease passed on to a
     * worker gone would stay in its name until it expired.  A live asker
     * takes the free lease at the same checkpoint. */
    kn_cc_op_t op = l->handoff_to && !l->shard_end_written && !final
                        ? KN_CC_HANDOFF_DONE
                        : KN_CC_RELEASE;
    cc_op_t *o = op_new(c, op, l->key, l->tenure, now);
    cc_act_t *x = o ? call(c, o) : NULL;
    if (x) x->a.counter = l->counter;
    if (o) l->busy = o->id;
    return;
  }
  if (now >= l->next_renew_ms) {
    cc_op_t *o = op_new(c, KN_CC_RENEW, l->key, l->tenure, now);
    cc_act_t *x = o ? call(c, o) : NULL;
    if (x) x->a.counter = l->counter;
    if (o) l->busy = o->id;
  }
}

static void pump_all(kn_cc_t *c, int64_t now) {
  for (size_t i = 0; i < c->n_ls; i++) pump(c, c->ls[i], now);
}

/* ---- closing ---- */

static int writes_in_flight(const kn_cc_t *c) {
  for (size_t i = 0; i < c->n_ops; i++) {
    kn_cc_op_t op = c->ops[i]->op;
    if (op != KN_CC_LIST_LEASES && op != KN_CC_LIST_SHARDS && op != KN_CC_GET)
      return 1;
  }
  return 0;
}

static void send_heartbeat(kn_cc_t *c, int64_t now);

static void maybe_closed(kn_cc_t *c) {
  if (!(c->closing || c->fatal) || c->closed_sent) return;
  for (size_t i = 0; i < c->n_ls; i++)
    if (c->ls[i]->held) return;
  if (writes_in_flight(c)) return;
  if (c->mb_on && c->mb_ok && c->bump_pending > 0 && !c->close_beat) {
    /* The others look at the leases let go now, not in a lease duration. */
    c->close_beat = 1;
    send_heartbeat(c, c->hb_at);
    if (c->hb_busy) return;
  }
  c->closed_sent = 1;
  cc_push(&c->q, KN_CC_CLOSED);
}

static void wind_down(kn_cc_t *c, kn_err_t reason, int64_t now) {
  for (size_t i = 0; i < c->n_ls; i++) stop_reading(c, c->ls[i], reason);
  pump_all(c, now);
  maybe_closed(c);
}

static void go_fatal(kn_cc_t *c, kn_err_t code, const char *msg, int64_t now) {
  if (c->fatal || c->closing) return;
  c->fatal = 1;
  cc_act_t *x = cc_push(&c->q, KN_CC_FATAL);
  if (x) {
    x->a.reason = code;
    cc_own(x, &x->a.err_msg, msg);
  }
  wind_down(c, KN_ERR__FAIL, now);
}

void kn_cc_close(kn_cc_t *c, int64_t now_ms) {
  cc_retire(&c->q);
  if (c->closing) {
    if (c->closed_sent) cc_push(&c->q, KN_CC_CLOSED);
    return;
  }
  c->closing = 1;
  if (c->fatal && c->closed_sent) {
    cc_push(&c->q, KN_CC_CLOSED);
    return;
  }
  wind_down(c, KN_ERR__DESTROY, now_ms);
}

/* ---- construction ---- */

kn_cc_t *kn_cc_new(const kn_cc_cfg_t *cfg, int64_t now_ms) {
  if (!cfg || !cfg->worker || cfg->duration_ms <= 0 || cfg->renew_ms <= 0 ||
      cfg->renew_ms * 3 >= cfg->duration_ms * 2)
    return NULL;
  kn_cc_t *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->cfg = *cfg;
  c->worker = strdup(cfg->worker);
  c->initial = strdup(cfg->initial ? cfg->initial : KN_CKPT_TRIM_HORIZON);
  if (!c->worker || !c->initial) {
    kn_cc_destroy(c);
    return NULL;
  }
  c->cfg.worker = c->worker;
  c->cfg.initial = c->initial;
  c->spare_fatal = calloc(1, sizeof(*c->spare_fatal));
  c->spare_closed = calloc(1, sizeof(*c->spare_closed));
  if (!c->spare_fatal || !c->spare_closed) {
    kn_cc_destroy(c);
    return NULL;
  }
  /* Others judge expiry from when they saw our write, no earlier than when
   * it was sent: stopping half a renewal before the duration keeps two
   * readers of a shard apart. */
  c->grace_ms = cfg->duration_ms - cfg->renew_ms / 2;
  /* How often a lease asked for is looked at: a fraction of a renewal,
   * so the hand-off ends soon after its owner lets go. */
  c->watch_ms = cfg->renew_ms / 4;
  if (c->watch_ms > 500) c->watch_ms = 500;
  if (c->watch_ms < 50) c->watch_ms = 50;
  kn_lease_observer_init(&c->obs);
  c->sync_at = now_ms;
  c->take_at = now_ms;
  c->mb_on = cfg->members;
  c->fence_told = INT64_MAX;
  c->hb_at = now_ms;
  c->beat = cfg->beat_base;
  kn_mview_init(&c->view);
  c->flush_at = now_ms + cfg->checkpoint_ms;
  return c;
}

static void shards_free(kn_cc_shard_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free((char *)v[i].id);
    free((char *)v[i].parent);
    free((char *)v[i].adjacent);
    free((char *)v[i].hash_start);
    free((char *)v[i].hash_end);
  }
  free(v);
}

void kn_cc_destroy(kn_cc_t *c) {
  if (!c) return;
  cc_queue_free(&c->q);
  for (size_t i = 0; i < c->n_ops; i++) op_free(c->ops[i]);
  free(c->ops);
  for (size_t i = 0; i < c->n_ls; i++) {
    cc_lease_t *l = c->ls[i];
    while (l->reqs) {
      cc_req_t *r = l->reqs;
      l->reqs = r->next;
      req_free(r);
    }
    free(l->handoff_to);
    free(l->key);
    free(l);
  }
  free(c->ls);
  kn_strmap_free(&c->lmap);
  for (size_t i = 0; i < c->n_in; i++) free(c->in[i].key);
  free(c->in);
  kn_lease_observer_free(&c->obs);
  kn_mview_free(&c->view);
  kn_lease_array_free(c->pend, c->n_pend);
  shards_free(c->shards, c->n_shards);
  kn_lease_array_free(c->snap, c->n_snap);
  free(c->plan);
  free(c->worker);
  free(c->initial);
  free(c->spare_fatal);
  free(c->spare_closed);
  free(c);
}

/* An action was lost to a failed allocation (or could not be carried
 * out): a call the core waits for, a reply the application waits for.
 * Nothing it decides can be trusted any more: what is queued is dropped
 * and it stops at once, FATAL then CLOSED; the leases it holds expire on
 * their own. */
static void break_down(kn_cc_t *c) {
  c->broken = c->fatal = c->closed_sent = 1;
  cc_queue_free(&c->q);
  cc_act_t *f = c->spare_fatal, *d = c->spare_closed;
  c->spare_fatal = c->spare_closed = NULL;
  f->q = d->q = &c->q;
  f->a.op = KN_CC_FATAL;
  f->a.tenure = d->a.tenure = -1;
  f->a.reason = KN_ERR__NOMEM;
  f->a.err_msg =
      "out of memory: lease coordination stopped; "
      "leases not released expire on their own";
  d->a.op = KN_CC_CLOSED;
  f->next = d;
  c->q.head = f;
  c->q.tail = d;
}

void kn_cc_fail(kn_cc_t *c) { c->q.lost = 1; }

int kn_cc_next(kn_cc_t *c, kn_cc_action_t *a) {
  if (c->q.lost && !c->broken) break_down(c);
  return cc_pop(&c->q, a);
}

int64_t kn_cc_wake_ms(const kn_cc_t *c) {
  int64_t t = INT64_MAX;
  if (c->closed_sent) return t;
  if (!c->closing && !c->fatal) {
    if (!c->syncing) t = min64(t, c->sync_at);
    if (c->synced && !c->taking) t = min64(t, c->take_at);
    t = min64(t, c->flush_at);
    for (size_t i = 0; i < c->n_in; i++)
      if (!c->in[i].busy) t = min64(t, c->in[i].next_ms);
  }
  if (c->mb_on && !c->hb_busy && !c->closing && !c->fatal)
    t = min64(t, c->hb_at);
  int fence = c->mb_on && c->mb_ok;
  for (size_t i = 0; i < c->n_ls; i++) {
    const cc_lease_t *l = c->ls[i];
    if (!l->held) continue;
    t = min64(t, fence ? min64(l->until_ms, c->member_until) : l->until_ms);
    if (l->handoff_to) t = min64(t, l->handoff_since + c->cfg.handoff_ms);
    if (!l->busy) t = min64(t, l->next_renew_ms);
  }
  return t;
}

size_t kn_cc_held(const kn_cc_t *c) {
  size_t n = 0;
  for (size_t i = 0; i < c->n_ls; i++) n += c->ls[i]->held;
  return n;
}

int kn_cc_idle(const kn_cc_t *c) {
  return c->synced && c->idle && !c->syncing && !c->resync && !c->n_in;
}

int kn_cc_synced(const kn_cc_t *c) { return c->synced; }

size_t kn_cc_members(const kn_cc_t *c) {
  return c->mb_on && c->mb_ok ? kn_mview_live(&c->view) : 0;
}

static int leader(const kn_cc_t *c) {
  const char *w = kn_mview_leader(&c->view);
  return w && strcmp(w, c->worker) == 0;
}

int kn_cc_is_leader(const kn_cc_t *c) {
  return c->mb_on && c->mb_ok && leader(c);
}

/* ---- time ---- */

static void start_sync(kn_cc_t *c, int64_t now) {
  cc_op_t *o = op_new(c, KN_CC_LIST_LEASES, NULL, -1, now);
  if (!o || !call(c, o)) return;
  o->purpose = P_SYNC_LEASES1;
  o->epoch = c->view.epoch;
  c->sync_epoch = c->view.epoch;
  c->sync_emit_ms = now;
  c->syncing = 1;
  c->resync = 0;
}

static void start_take(kn_cc_t *c, int64_t now) {
  cc_op_t *o = op_new(c, KN_CC_LIST_LEASES, NULL, -1, now);
  if (!o || !call(c, o)) return;
  o->purpose = P_TAKE;
  o->epoch = c->view.epoch;
  o->deaths = c->view.deaths;
  c->taking = 1;
}

/* Periodic syncs: every worker without membership; with it, the leader
 * only, and it lists the leases only when something changed. */
static void sync_due(kn_cc_t *c, int64_t now) {
  if (!c->mb_on || !c->synced || c->sync_asked) {
    c->sync_asked = 0;
    start_sync(c, now);
    return;
  }
  if (!c->mb_ok || !leader(c)) {
    c->sync_at = now + c->cfg.sync_ms;
    return;
  }
  cc_op_t *o = op_new(c, KN_CC_LIST_SHARDS, NULL, -1, now);
  if (!o || !call(c, o)) {
    if (o) op_free(op_take(c, o->id));
    c->sync_at = now + 1000;
    return;
  }
  o->purpose = P_PROBE;
  o->epoch = c->view.epoch;
  c->syncing = 1;
}

static void watch_handoffs(kn_cc_t *c, int64_t now);

/* ---- membership ---- */

static void run_pending(kn_cc_t *c, int64_t now);

static void send_heartbeat(kn_cc_t *c, int64_t now) {
  if (c->hb_busy) return;
  cc_op_t *o = op_new(c, KN_CC_HEARTBEAT, NULL, -1, now);
  cc_act_t *x = o ? call(c, o) : NULL;
  if (!x) {
    if (o) op_free(op_take(c, o->id));
    c->hb_at = now + 100;
    return;
  }
  c->hb_busy = o->id;
  o->bump = c->bump_pending;
  x->a.beat = ++c->beat;
  x->a.leases = (int64_t)kn_cc_held(c);
  x->a.bump = o->bump;
  /* The leader forgets members long dead: the item stays small. */
  if (!leader(c)) return;
  size_t n = 0;
  for (size_t i = 0; i < c->view.n; i++)
    n += c->view.v[i].dead &&
         now - c->view.v[i].changed_ms >= 6 * c->cfg.duration_ms;
  if (!n || !(x->children = calloc(n, sizeof(char *)))) return;
  for (size_t i = 0; i < c->view.n; i++)
    if (c->view.v[i].dead &&
        now - c->view.v[i].changed_ms >= 6 * c->cfg.duration_ms &&
        (x->children[x->n_children] = strdup(c->view.v[i].worker)))
      x->n_children++;
  x->a.forget = x->children;
  x->a.n_forget = x->n_children;
}

/* Something the others should look at: the next heartbeat says so, now. */
static void bump(kn_cc_t *c, int64_t now) {
  if (!c->mb_on) return;
  c->bump_pending++;
  if (c->hb_at > now) c->hb_at = now;
}

/* The interval to the next heartbeat: a renewal interval, or a quarter of
 * it while a member has not beaten for longer than usual, so that its
 * death is seen soon after a lease duration. */
static int is_me(const kn_cc_t *c, const char *who);

static int64_t next_beat_ms(const kn_cc_t *c, int64_t now) {
  int64_t late = c->cfg.renew_ms + c->cfg.renew_ms / 2;
  for (size_t i = 0; i < c->view.n; i++) {
    const kn_mview_ent_t *e = &c->view.v[i];
    if (!e->dead && now - e->changed_ms > late && !is_me(c, e->worker))
      return c->cfg.renew_ms / 4 > 100 ? c->cfg.renew_ms / 4 : 100;
  }
  return c->cfg.renew_ms;
}

/* Readers judge the heartbeat deadline themselves (FENCE), so that a
 * driver busy elsewhere cannot keep them going past it. */
static void tell_fence(kn_cc_t *c) {
  int64_t t = c->mb_on && c->mb_ok ? c->member_until : INT64_MAX;
  if (t == c->fence_told) return;
  cc_act_t *x = cc_push(&c->q, KN_CC_FENCE);
  if (!x) return;
  x->a.tenure = -1;
  x->a.until_ms = t;
  c->fence_told = t;
}

void kn_cc_members_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                        const kn_members_t *m, int64_t sent, int64_t now) {
  cc_retire(&c->q);
  cc_op_t *o = op_take(c, id);
  if (!o) return;
  int64_t bumped = o->bump;
  op_free(o);
  c->hb_busy = 0;
  if (err && kn_error_code(err) == KN_ERR__UNSUPPORTED) {
    logf_(c, KN_CC_LOG_INFO,
          "%s: listing the lease table every take round instead",
          kn_error_string(err));
    c->mb_on = 0;
    c->mb_ok = 0;
    c->idle = 0;
  } else if (err) {
    logf_(c, KN_CC_LOG_WARN, "heartbeat: %s", kn_error_string(err));
    int64_t again = c->cfg.renew_ms / 3 < 1000 ? c->cfg.renew_ms / 3 : 1000;
    c->hb_at = now + again;
  } else {
    uint64_t deaths = c->view.deaths;
    if (kn_mview_update(&c->view, m, now, c->cfg.duration_ms) == 0) {
      c->mb_ok = 1;
      if (sent > c->view_sent_ms) c->view_sent_ms = sent;
      if (sent > c->hb_ok_sent_ms) c->hb_ok_sent_ms = sent;
      if (sent + c->grace_ms > c->member_until)
        c->member_until = sent + c->grace_ms;
      c->bump_pending -= bumped;
      if (c->view.deaths != deaths)
        logf_(c, KN_CC_LOG_INFO,
              "a worker stopped beating: looking for its leases");
    }
    c->hb_at = c->bump_pending > 0 ? now : sent + next_beat_ms(c, now);
    /* News of a death or a change: the take round looks now. */
    if (c->view.deaths != c->scan_deaths || c->view.epoch != c->scan_epoch)
      c->take_at = min64(c->take_at, now);
    run_pending(c, now);
  }
  tell_fence(c);
  if (c->closing || c->fatal) {
    c->hb_at = sent + c->cfg.renew_ms;
    pump_all(c, now);
    maybe_closed(c);
  }
}

/* Whether a take round is worth a listing of the lease table. */
static uint64_t counts_sig(const kn_cc_t *c) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < c->view.n; i++) {
    const kn_mview_ent_t *e = &c->view.v[i];
    if (e->dead) continue;
    for (const char *p = e->worker; *p; p++)
      h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ (uint64_t)e->leases) * 1099511628211ULL;
  }
  return h;
}

/* Heartbeats failing: what it took now it might soon have to drop. */
static int hb_fresh(const kn_cc_t *c, int64_t now) {
  return now - c->hb_ok_sent_ms <= c->cfg.renew_ms + c->cfg.renew_ms / 2;
}

/* Why a take round should list the lease table now, or NULL. */
static const char *take_reason(const kn_cc_t *c, int64_t now) {
  if (!c->mb_on) return "every take round (no membership)";
  if (!c->mb_ok) return NULL; /* the first heartbeat comes first */
  if (!hb_fresh(c, now)) return NULL;
  if (!c->scanned) return "first look";
  if (!c->idle) return "the last round had work";
  if (c->n_in) return "hand-offs asked for";
  if (c->foreign) return "leases of workers without heartbeats";
  if (c->view.epoch != c->scan_epoch) return "the epoch moved";
  if (c->view.deaths != c->scan_deaths) return "a worker died";
  size_t held = kn_cc_held(c);
  if (c->cfg.max_leases && held >= (size_t)c->cfg.max_leases) return NULL;
  /* The counts as a round found them with nothing to do (a quiet worker,
   * children not ready): not again until they change, or for a while. */
  if (c->idle_sig == counts_sig(c) && now - c->idle_sig_ms < c->cfg.duration_ms)
    return NULL;
  for (size_t i = 0; i < c->view.n; i++) {
    const kn_mview_ent_t *e = &c->view.v[i];
    if (!e->dead && strcmp(e->worker, c->worker) != 0 &&
        e->leases >= (int64_t)held + 2)
      return "a worker holds two more leases";
  }
  return NULL;
}

void kn_cc_tick(kn_cc_t *c, int64_t now) {
  cc_retire(&c->q);
  /* Without a heartbeat for grace_ms the others may count this worker
   * dead and take its leases: it stops reading first. */
  int fenced = c->mb_on && c->mb_ok && now >= c->member_until;
  for (size_t i = 0; i < c->n_ls; i++) {
    cc_lease_t *l = c->ls[i];
    if (l->held && (now >= l->until_ms || fenced)) {
      logf_(c, KN_CC_LOG_WARN,
            "shard %s: %s not written within %lld ms: stopped reading it",
            l->key, now >= l->until_ms ? "lease" : "heartbeat",
            (long long)c->grace_ms);
      drop(c, l, KN_ERR__TIMED_OUT);
    } else if (l->held && l->handoff_to && !l->yielded &&
               now - l->handoff_since >= c->cfg.handoff_ms) {
      /* The application has not finished in time: what it processed is
       * checkpointed, the rest is read again by the next owner. */
      logf_(c, KN_CC_LOG_WARN,
            "shard %s: the application did not finish "
            "within %lld ms: handing it over as it is",
            l->key, (long long)c->cfg.handoff_ms);
      l->yielded = 1;
    }
  }
  if (c->mb_on && !c->hb_busy && !c->closed_sent && now >= c->hb_at)
    send_heartbeat(c, now);
  if (!c->closing && !c->fatal) {
    watch_handoffs(c, now);
    if (!c->syncing && now >= c->sync_at) sync_due(c, now);
    if (c->synced && !c->taking && now >= c->take_at) {
      const char *why = take_reason(c, now);
      if (why && c->mb_on)
        logf_(c, KN_CC_LOG_DEBUG, "listing the lease table: %s", why);
      if (why)
        start_take(c, now);
      else
        c->take_at = now + c->cfg.take_ms;
    }
    if (now >= c->flush_at) {
      for (size_t i = 0; i < c->n_ls; i++) c->ls[i]->flush_due = 1;
      c->flush_at = now + c->cfg.checkpoint_ms;
    }
  }
  pump_all(c, now);
  maybe_closed(c);
}

/* ---- shard sync ---- */

static int64_t backoff_ms(int failures) {
  return 1000LL << (failures < 5 ? failures : 5);
}

static void sync_failed(kn_cc_t *c, const kn_error_t *err, const char *what,
                        int64_t now) {
  c->syncing = 0;
  free(c->plan);
  c->plan = NULL;
  c->n_plan = c->plan_next = 0;
  char msg[512];
  snprintf(msg, sizeof(msg), "%s: %s", what,
           err ? kn_error_string(err) : "failed");
  if (err && !kn_error_is_retriable(err) &&
      kn_error_code(err) != KN_ERR__TIMED_OUT &&
      kn_error_code(err) != KN_ERR__TRANSPORT) {
    /* A verdict (stream missing, credentials rejected): say so instead of
     * retrying for ever. */
    go_fatal(c, kn_error_code(err), msg, now);
    return;
  }
  logf_(c, KN_CC_LOG_WARN, "%s (retrying)", msg);
  c->sync_at = now + backoff_ms(c->sync_failures++);
}

static void sync_succeeded(kn_cc_t *c, int64_t now) {
  if (c->n_plan) {
    c->idle = 0; /* leases were created: look before saying */
    bump(c, now);
  }
  c->full_sync_ms = now;
  c->syncing = 0;
  c->synced = 1;
  c->sync_failures = 0;
  free(c->plan);
  c->plan = NULL;
  c->n_plan = c->plan_next = 0;
  c->sync_at = c->resync ? now : now + c->cfg.sync_ms;
  c->take_at = now; /* new leases may be ready: look now */
}

static void create_wave(kn_cc_t *c, int64_t now) {
  if (c->plan_next >= c->n_plan) {
    sync_succeeded(c, now);
    return;
  }
  int wave = c->plan[c->plan_next].wave;
  c->wave_left = 0;
  c->create_failed = 0;
  while (c->plan_next < c->n_plan && c->plan[c->plan_next].wave == wave) {
    const kn_cc_create_t *p = &c->plan[c->plan_next++];
    const kn_cc_shard_t *s = &c->shards[p->shard];
    cc_op_t *o = op_new(c, KN_CC_CREATE, s->id, -1, now);
    cc_act_t *x = o ? call(c, o) : NULL;
    if (!x) continue;
    o->wave = wave;
    set_str(o->ckpt, p->checkpoint);
    kn_lease_t l;
    memset(&l, 0, sizeof(l));
    char *parents[2];
    l.key = (char *)s->id;
    l.checkpoint = (char *)p->checkpoint;
    if (s->parent) parents[l.n_parents++] = (char *)s->parent;
    if (s->adjacent) parents[l.n_parents++] = (char *)s->adjacent;
    l.parents = l.n_parents ? parents : NULL;
    l.hash_start = (char *)s->hash_start;
    l.hash_end = (char *)s->hash_end;
    cc_own_lease(x, &l);
    c->wave_left++;
  }
  if (c->wave_left == 0) create_wave(c, now);
}

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

static int same_listing(const kn_cc_t *c, const kn_cc_shard_t *v, size_t n) {
  if (n != c->n_shards) return 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].id, c->shards[i].id) != 0 ||
        !v[i].closed != !c->shards[i].closed)
      return 0;
  return 1;
}

void kn_cc_shards_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                       const kn_cc_shard_t *v, size_t n, int64_t now) {
  cc_retire(&c->q);
  cc_op_t *po = op_take(c, id);
  int probe = po && po->purpose == P_PROBE;
  op_free(po);
  if (c->closing || c->fatal) {
    c->syncing = 0;
    return;
  }
  if (err) {
    sync_failed(c, err, "ListShards", now);
    return;
  }
  if (probe) {
    /* The leader's look: the leases are listed only when the shards, the
     * epoch or a cleanup to finish call for it, or for a look now and
     * then (scan_ms) at what no event announced. */
    c->syncing = 0;
    const char *why = !same_listing(c, v, n)           ? "the shards changed"
                      : c->view.epoch != c->sync_epoch ? "the epoch moved"
                      : c->sync_more                   ? "a cleanup is pending"
                      : now - c->full_sync_ms >= c->cfg.scan_ms
                          ? "the periodic look"
                          : NULL;
    if (why) {
      logf_(c, KN_CC_LOG_DEBUG, "shard sync with the lease table: %s", why);
      start_sync(c, now);
    } else {
      c->sync_at = c->resync ? now : now + c->cfg.sync_ms;
      c->sync_failures = 0;
    }
    return;
  }
  kn_cc_shard_t *copy = calloc(n + 1, sizeof(*copy));
  int oom = !copy;
  for (size_t i = 0; copy && i < n; i++) {
    copy[i].id = dup0(v[i].id);
    copy[i].parent = dup0(v[i].parent);
    copy[i].adjacent = dup0(v[i].adjacent);
    copy[i].hash_start = dup0(v[i].hash_start);
    copy[i].hash_end = dup0(v[i].hash_end);
    copy[i].closed = v[i].closed;
    if (!copy[i].id) oom = 1;
  }
  if (oom) {
    shards_free(copy, copy ? n : 0);
    c->syncing = 0;
    c->sync_at = now + 1000;
    return;
  }
  shards_free(c->shards, c->n_shards);
  c->shards = copy;
  c->n_shards = n;
  cc_op_t *o = op_new(c, KN_CC_LIST_LEASES, NULL, -1, now);
  if (!o || !call(c, o)) {
    c->syncing = 0;
    c->sync_at = now + 1000;
    return;
  }
  o->purpose = P_SYNC_LEASES2;
  o->epoch = c->sync_epoch;
  o->deaths = c->view.deaths;
}

/* The first lease listing of a sync: kept, then the shards are listed. */
static void sync_snapshot(kn_cc_t *c, const kn_lease_t *v, size_t n,
                          int64_t now) {
  kn_lease_array_free(c->snap, c->n_snap);
  c->snap = NULL;
  c->n_snap = 0;
  int oom = 0;
  if (n && !(c->snap = calloc(n, sizeof(*c->snap)))) oom = 1;
  for (size_t i = 0; i < n && !oom; i++, c->n_snap++)
    if (kn_lease_copy(&c->snap[i], &v[i])) oom = 1;
  cc_op_t *o = oom ? NULL : op_new(c, KN_CC_LIST_SHARDS, NULL, -1, now);
  if (!o || !call(c, o)) {
    c->syncing = 0;
    c->sync_at = now + 1000;
    return;
  }
  o->purpose = P_SYNC_SHARDS;
}

static int has_child(const kn_lease_t *l, const char *id) {
  for (size_t k = 0; k < l->n_children; k++)
    if (strcmp(l->children[k], id) == 0) return 1;
  return 0;
}

/* Leases of closed shards get their children from the listing (servers
 * without ChildShards): the table then keeps the family even after the
 * shards leave the listing. */
static void record_children(kn_cc_t *c, const kn_lease_t *v, size_t n,
                            int64_t now) {
  for (size_t i = 0; i < n; i++) {
    size_t kids = 0, missing = 0;
    for (size_t j = 0; j < c->n_shards; j++) {
      const kn_cc_shard_t *s = &c->shards[j];
      if (!((s->parent && strcmp(s->parent, v[i].key) == 0) ||
            (s->adjacent && strcmp(s->adjacent, v[i].key) == 0)))
        continue;
      kids++;
      missing += !has_child(&v[i], s->id);
    }
    if (!missing) continue;
    cc_op_t *o = op_new(c, KN_CC_SET_CHILDREN, v[i].key, -1, now);
    cc_act_t *x = o ? call(c, o) : NULL;
    if (!x) continue;
    /* The list replaces the lease's: one short of a child is no list. */
    if (!(x->children = calloc(kids + v[i].n_children, sizeof(char *)))) {
      c->q.lost = 1;
      continue;
    }
    for (size_t k = 0; k < v[i].n_children; k++)
      if ((x->children[x->n_children] = strdup(v[i].children[k])))
        x->n_children++;
      else
        c->q.lost = 1;
    for (size_t j = 0; j < c->n_shards; j++) {
      const kn_cc_shard_t *s = &c->shards[j];
      if (((s->parent && strcmp(s->parent, v[i].key) == 0) ||
           (s->adjacent && strcmp(s->adjacent, v[i].key) == 0)) &&
          !has_child(&v[i], s->id)) {
        if ((x->children[x->n_children] = strdup(s->id)))
          x->n_children++;
        else
          c->q.lost = 1;
      }
    }
    x->a.children = x->children;
    x->a.n_children = x->n_children;
  }
}

static int has_kids(const kn_cc_t *c, const kn_lease_t *l) {
  if (l->n_children) return 1;
  for (size_t j = 0; j < c->n_shards; j++) {
    const kn_cc_shard_t *s = &c->shards[j];
    if ((s->parent && strcmp(s->parent, l->key) == 0) ||
        (s->adjacent && strcmp(s->adjacent, l->key) == 0))
      return 1;
  }
  return 0;
}

static kn_lease_t *both_of(kn_lease_t *both, const kn_lease_t *v, size_t n,
                           const kn_cc_t *c) {
  if (n) memcpy(both, v, n * sizeof(*v));
  if (c->n_snap) memcpy(both + n, c->snap, c->n_snap * sizeof(*v));
  return both;
}

static void sync_leases(kn_cc_t *c, const kn_lease_t *v, size_t n,
                        int64_t now) {
  if (now - c->sync_emit_ms > c->cfg.duration_ms / 2) {
    /* The view spans a pause or a very slow store: a lease may have been
     * created, finished and cleaned up meanwhile.  Look again. */
    logf_(c, KN_CC_LOG_WARN,
          "shard sync took %lld ms: its view is too old "
          "to act on; syncing again",
          (long long)(now - c->sync_emit_ms));
    c->syncing = 0;
    c->sync_at = now + backoff_ms(c->sync_failures++);
    return;
  }
  record_children(c, v, n, now);
  /* Cleanup first: finished parents whose children have started, once
   * their lease has stood still for a while: a create of the same lease
   * still on its way (a slow or retried call of a sync that saw no lease
   * yet) must not land after the removal and start the shard again. */
  int64_t settle =
      c->cfg.duration_ms > c->cfg.sync_ms ? c->cfg.duration_ms : c->cfg.sync_ms;
  c->sync_more = 0;
  for (size_t i = 0; i < n; i++) {
    if (!kn_lease_is_shard_end(&v[i])) continue;
    /* A finished lease with a known family goes once its children have
     * started: the leader's syncs go on until then. */
    if (has_kids(c, &v[i])) c->sync_more = 1;
    if (!kn_cc_can_remove(v, n, i, c->shards, c->n_shards)) continue;
    const kn_lease_obs_t *ob = kn_lease_observer_get(&c->obs, v[i].key);
    if (!ob || now - ob->changed_ms < settle) continue;
    cc_op_t *o = op_new(c, KN_CC_REMOVE, v[i].key, -1, now);
    cc_act_t *x = o ? call(c, o) : NULL;
    if (x) x->a.counter = v[i].counter;
  }
  free(c->plan);
  c->plan = NULL;
  c->n_plan = c->plan_next = 0;
  /* Both listings: a lease in either counts (the array borrows them). */
  kn_lease_t *both = malloc((n + c->n_snap + 1) * sizeof(*both));
  if (!both ||
      kn_cc_plan_sync(c->shards, c->n_shards, both_of(both, v, n, c),
                      n + c->n_snap, c->initial, &c->plan, &c->n_plan)) {
    free(both);
    c->syncing = 0;
    c->sync_at = now + 1000;
    return;
  }
  free(both);
  create_wave(c, now);
}

static void take_round(kn_cc_t *c, const kn_lease_t *v, size_t n,
                       const cc_op_t *seen, int64_t answered_ms, int64_t now);

void kn_cc_leases_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                       const kn_lease_t *v, size_t n, int64_t now) {
  cc_retire(&c->q);
  cc_op_t *o = op_take(c, id);
  if (!o) return;
  int purpose = o->purpose;
  cc_op_t seen = *o; /* when it was sent: time, epoch, deaths */
  seen.key = NULL;
  seen.req = NULL;
  memset(&seen.lease, 0, sizeof(seen.lease));
  op_free(o);
  if (purpose == P_TAKE) c->taking = 0;
  int sync = purpose == P_SYNC_LEASES1 || purpose == P_SYNC_LEASES2;
  if (c->closing || c->fatal) {
    if (sync) c->syncing = 0;
    return;
  }
  if (err) {
    if (sync) {
      sync_failed(c, err, "lease table", now);
    } else {
      logf_(c, KN_CC_LOG_WARN, "lease table: %s", kn_error_string(err));
      c->take_at = now + c->cfg.take_ms;
    }
    return;
  }
  int obs_ok = kn_lease_observer_update(&c->obs, v, n, now) == 0;
  if (obs_ok && purpose == P_TAKE) take_round(c, v, n, &seen, now, now);
  /* With membership a sync's fresh listing is a take round's too: the
   * leader's look costs no listing more. */
  if (obs_ok && purpose == P_SYNC_LEASES2 && c->mb_on && c->mb_ok &&
      c->synced && !c->taking && hb_fresh(c, now))
    take_round(c, v, n, &seen, now, now);
  if (purpose == P_SYNC_LEASES1) sync_snapshot(c, v, n, now);
  if (purpose == P_SYNC_LEASES2) sync_leases(c, v, n, now);
  pump_all(c, now);
}

/* ---- taking ---- */

static int in_flight(const kn_cc_t *c, kn_cc_op_t op, const char *key) {
  for (size_t i = 0; i < c->n_ops; i++)
    if (c->ops[i]->op == op && strcmp(c->ops[i]->key, key) == 0) return 1;
  return 0;
}

static int take_in_flight(const kn_cc_t *c, const char *key) {
  return in_flight(c, KN_CC_TAKE, key) || in_flight(c, KN_CC_HANDOFF, key);
}

static int is_me(const kn_cc_t *c, const char *who) {
  return who && strcmp(who, c->worker) == 0;
}

/* ---- hand-offs ---- */

static cc_in_t *in_find(kn_cc_t *c, const char *key) {
  for (size_t i = 0; i < c->n_in; i++)
    if (strcmp(c->in[i].key, key) == 0) return &c->in[i];
  return NULL;
}

static void in_remove(kn_cc_t *c, const char *key) {
  cc_in_t *x = in_find(c, key);
  if (!x) return;
  free(x->key);
  *x = c->in[--c->n_in];
}

/* Starts watching a lease asked for. */
static void in_add(kn_cc_t *c, const char *key, int64_t counter, int64_t now) {
  if (in_find(c, key)) return;
  if (c->n_in == c->cap_in) {
    size_t cap = c->cap_in ? c->cap_in * 2 : 8;
    cc_in_t *v = realloc(c->in, cap * sizeof(*v));
    if (!v) return; /* the lease expires and is taken the ordinary way */
    c->in = v;
    c->cap_in = cap;
  }
  cc_in_t *x = &c->in[c->n_in];
  memset(x, 0, sizeof(*x));
  if (!(x->key = strdup(key))) return;
  x->counter = counter;
  x->since_ms = x->changed_ms = now;
  x->next_ms = now + c->watch_ms;
  c->n_in++;
}

static void watch_handoffs(kn_cc_t *c, int64_t now) {
  for (size_t i = 0; i < c->n_in; i++) {
    cc_in_t *x = &c->in[i];
    if (x->busy || now < x->next_ms) continue;
    cc_op_t *o = op_new(c, KN_CC_GET, x->key, -1, now);
    if (o && call(c, o)) x->busy = o->id;
  }
}

/* Takes a lease in this worker's name at the end of a hand-off. */
static void take_handed(kn_cc_t *c, const kn_lease_t *t, int64_t now) {
  cc_op_t *o = op_new(c, KN_CC_TAKE, t->key, -1, now);
  if (!o) return;
  o->purpose = T_HANDED;
  if (kn_lease_copy(&o->lease, t)) {
    op_free(op_take(c, o->id));
    return;
  }
  cc_act_t *x = call(c, o);
  if (!x) return;
  x->a.counter = t->counter;
  cc_own(x, &x->a.old_owner, c->worker);
}

void kn_cc_lease_got(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                     const kn_lease_t *t, int64_t now) {
  cc_retire(&c->q);
  cc_op_t *o = op_take(c, id);
  if (!o) return;
  cc_in_t *x = in_find(c, o->key);
  op_free(o);
  if (!x || x->busy != id) return;
  x->busy = 0;
  x->next_ms = now + c->watch_ms;
  if (c->closing || c->fatal) {
    maybe_closed(c);
    return;
  }
  if (err && kn_error_code(err) != KN_ERR__NOT_FOUND) return; /* again */
  if (err || !t || !is_me(c, t->owner)) {
    logf_(c, KN_CC_LOG_INFO, "shard %s: no longer handed to this worker%s%s",
          x->key, t && t->owner ? " (now " : "", t && t->owner ? t->owner : "");
    in_remove(c, x->key);
    return;
  }
  if (t->counter != x->counter) {
    x->counter = t->counter;
    x->changed_ms = now;
  }
  int passed = !t->checkpoint_owner;
  int silent = now - x->changed_ms >= c->cfg.duration_ms;
  int late = now - x->since_ms >= c->cfg.handoff_ms;
  if (!passed && !silent && !late) return;
  if (!passed)
    logf_(c, KN_CC_LOG_WARN,
          "shard %s: %s did not hand it over (%s): "
          "taking it",
          t->key, t->checkpoint_owner,
          silent ? "no renewal for a lease duration" : "hand-off too long");
  in_remove(c, t->key);
  if (!take_in_flight(c, t->key)) take_handed(c, t, now);
}

/* The owner's side: another worker asked for l. */
static void begin_handoff(kn_cc_t *c, cc_lease_t *l, const char *to,
                          int64_t now) {
  if (l->handoff_to || !l->held) return;
  if (!(l->handoff_to = strdup(to))) return;
  l->handoff_since = now;
  l->yielded = !l->reading;
  logf_(c, KN_CC_LOG_INFO, "shard %s: %s asks for it: handing it over", l->key,
        to);
  if (!l->reading) return;
  l->reading = 0;
  cc_act_t *x = cc_push(&c->q, KN_CC_YIELD);
  if (!x) return;
  x->a.tenure = l->tenure;
  cc_own(x, &x->a.key, l->key);
  cc_own(x, &x->a.old_owner, to);
}

void kn_cc_yielded(kn_cc_t *c, const char *key, int64_t tenure,
                   const kn_cc_pos_t *pos, int64_t now) {
  cc_retire(&c->q);
  cc_lease_t *l = lease_find(c, key);
  if (!l || !l->held || l->tenure != tenure || !l->handoff_to) return;
  if (pos && pos->seq &&
      (!l->processed[0] ||
       kn_seqpos_cmp(pos->seq, (uint64_t)pos->subseq, l->processed,
                     (uint64_t)l->processed_sub) > 0)) {
    set_str(l->processed, pos->seq);
    l->processed_sub = pos->subseq;
  }
  l->yielded = 1;
  pump(c, l, now);
}

static const kn_lease_t *lease_in(const kn_lease_t *v, size_t n,
                                  const char *key) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].key, key) == 0) return &v[i];
  return NULL;
}

static void keep_pending(kn_cc_t *c, const kn_lease_t *v, size_t n,
                         const cc_op_t *seen, int64_t answered_ms,
                         int64_t now) {
  kn_lease_array_free(c->pend, c->n_pend);
  c->pend = NULL;
  c->n_pend = 0;
  c->idle = 0;
  if (!(c->pend = calloc(n, sizeof(*c->pend)))) return;
  for (; c->n_pend < n; c->n_pend++)
    if (kn_lease_copy(&c->pend[c->n_pend], &v[c->n_pend])) {
      kn_lease_array_free(c->pend, c->n_pend);
      c->pend = NULL;
      c->n_pend = 0;
      return;
    }
  c->pend_ms = answered_ms;
  c->pend_emit_ms = seen->emit_ms;
  c->pend_epoch = seen->epoch;
  c->pend_deaths = seen->deaths;
  if (c->hb_at > now) c->hb_at = now;
}

/* The round kept for a newer view, once there is one. */
static void run_pending(kn_cc_t *c, int64_t now) {
  if (!c->pend || c->view_sent_ms < c->pend_ms || c->taking || c->closing ||
      c->fatal)
    return;
  kn_lease_t *v = c->pend;
  size_t n = c->n_pend;
  c->pend = NULL;
  c->n_pend = 0;
  cc_op_t seen;
  memset(&seen, 0, sizeof(seen));
  seen.emit_ms = c->pend_emit_ms;
  seen.epoch = c->pend_epoch;
  seen.deaths = c->pend_deaths;
  take_round(c, v, n, &seen, c->pend_ms, now);
  kn_lease_array_free(v, n);
  pump_all(c, now);
}

/* Leases in this worker's name from an earlier run that it does not take
 * back (it holds its share): the others would wait for them to expire,
 * and with membership they do not look.  Let go of them. */
static void release_extra(kn_cc_t *c, const kn_lease_t *w, const char **ours,
                          size_t n, const kn_take_plan_t *plan, int64_t now) {
  for (size_t i = 0; i < n; i++) {
    if (!ours[i] || !is_me(c, ours[i]) || kn_lease_is_shard_end(&w[i]) ||
        in_flight(c, KN_CC_RELEASE, w[i].key))
      continue;
    int taking = 0;
    for (size_t k = 0; k < plan->n_take && !taking; k++)
      taking = plan->take[k] == i;
    if (taking) continue;
    cc_op_t *o = op_new(c, KN_CC_RELEASE, w[i].key, -1, now);
    cc_act_t *x = o ? call(c, o) : NULL;
    if (x) x->a.counter = w[i].counter;
  }
}

/* Free leases this worker does not take (it holds its share): the
 * others are told to look. */
static void leftovers(kn_cc_t *c, const kn_lease_t *w, size_t n,
                      const kn_take_plan_t *plan, int64_t now) {
  if (now - c->leftover_bump_ms < c->cfg.duration_ms) return;
  size_t free_ready = 0;
  for (size_t i = 0; i < n && free_ready <= plan->n_take; i++)
    if (!w[i].owner && !kn_lease_is_shard_end(&w[i]) &&
        kn_lease_is_ready(&w[i], w, n))
      free_ready++;
  if (free_ready <= plan->n_take) return;
  c->leftover_bump_ms = now;
  bump(c, now);
}

static void take_round(kn_cc_t *c, const kn_lease_t *v, size_t n,
                       const cc_op_t *seen, int64_t answered_ms, int64_t now) {
  int64_t emit_ms = seen->emit_ms;
  c->take_at = now + c->cfg.take_ms;
  c->scanned = 1;
  c->scan_epoch = seen->epoch;
  c->scan_deaths = seen->deaths;
  c->last_scan_ms = now;
  c->foreign = 0;
  /* Held leases another worker has taken (a listing sent after our take
   * was answered shows them in another name, at or past our counter). */
  kn_strmap_t byk = KN_STRMAP_INIT;
  int indexed = 1;
  for (size_t i = 0; i < n && indexed; i++)
    indexed = kn_strmap_put(&byk, v[i].key, (void *)&v[i]) == 0;
  for (size_t i = 0; i < c->n_ls; i++) {
    cc_lease_t *l = c->ls[i];
    if (!l->held || l->shard_end_written || emit_ms < l->since_ms) continue;
    const kn_lease_t *t =
        indexed ? kn_strmap_get(&byk, l->key) : lease_in(v, n, l->key);
    if (t && t->owner && is_me(c, t->checkpoint_owner) && !is_me(c, t->owner)) {
      begin_handoff(c, l, t->owner, now);
      continue;
    }
    if (!t || ((!t->owner || strcmp(t->owner, c->worker) != 0) &&
               t->counter >= l->counter)) {
      logf_(c, KN_CC_LOG_WARN,
            "lost the lease of shard %s%s%s: stopped "
            "reading it",
            l->key, t && t->owner ? " to " : "", t && t->owner ? t->owner : "");
      drop(c, l, KN_ERR__LEASE_LOST);
    }
  }
  kn_strmap_free(&byk);
  /* Leases in this worker's name that it does not hold were held by an
   * earlier run of this worker id, or were given up here when a renewal
   * came too late.  Nobody else reads them: they count as free now
   * (their owner is kept aside for the take's condition). */
  kn_lease_t *w = NULL;
  const char **ours = NULL;
  if (n) {
    w = malloc(n * sizeof(*w));
    ours = calloc(n, sizeof(*ours));
    if (!w || !ours) {
      free(w);
      free(ours);
      return;
    }
    memcpy(w, v, n * sizeof(*w));
  }
  int defer = 0;
  for (size_t i = 0; i < n; i++) {
    const cc_lease_t *l = lease_find(c, w[i].key);
    int held = l && l->held;
    if (!held && is_me(c, w[i].checkpoint_owner) && !is_me(c, w[i].owner) &&
        !in_flight(c, KN_CC_HANDOFF_DONE, w[i].key) &&
        !in_flight(c, KN_CC_TAKE, w[i].key)) {
      /* Asked for while an earlier run of this worker id held it: nothing
       * was handed out here, so it is passed on at once. */
      cc_op_t *o = op_new(c, KN_CC_HANDOFF_DONE, w[i].key, -1, now);
      cc_act_t *x = o ? call(c, o) : NULL;
      if (x) x->a.counter = w[i].counter;
      continue;
    }
    if (is_me(c, w[i].owner) && w[i].checkpoint_owner && !held &&
        !is_me(c, w[i].checkpoint_owner)) {
      /* Asked for by this worker (maybe by an earlier run of it): it is
       * watched until handed over, not taken. */
      in_add(c, w[i].key, w[i].counter, now);
      continue;
    }
    if (w[i].owner && strcmp(w[i].owner, c->worker) == 0 && !held &&
        !take_in_flight(c, w[i].key) && !in_find(c, w[i].key)) {
      ours[i] = w[i].owner;
      w[i].owner = NULL;
      continue;
    }
    if (!c->mb_on || !c->mb_ok || !w[i].owner || is_me(c, w[i].owner) ||
        kn_lease_is_shard_end(&w[i]))
      continue;
    if (kn_mview_is_dead(&c->view, w[i].owner) && !w[i].checkpoint_owner) {
      /* Its owner stopped beating a lease duration ago and has stopped
       * reading since: the lease is free, if the view that says so is
       * newer than this listing (else the next heartbeat decides). */
      if (c->view_sent_ms < answered_ms) {
        defer = 1;
        break;
      }
      ours[i] = w[i].owner;
      w[i].owner = NULL;
    } else if (!kn_mview_get(&c->view, w[i].owner) &&
               !kn_lease_is_expired(&c->obs, &w[i], now, c->cfg.duration_ms)) {
      /* A worker without heartbeats (a KCL worker, or one that just
       * started): only listings tell when its lease expires. */
      c->foreign++;
    }
  }
  if (defer) {
    keep_pending(c, v, n, seen, answered_ms, now);
    free(w);
    free(ours);
    return;
  }
  /* A worker that renewed nothing for two renewal intervals is likely
   * dead: its leases are taken when they expire, before anyone steals. */
  kn_take_params_t p = {c->worker,          now,
                        c->cfg.duration_ms, c->cfg.max_leases,
                        c->cfg.max_steal,   2 * c->cfg.renew_ms};
  kn_take_plan_t plan;
  if (kn_take_plan(w, n, &c->obs, &p, &plan)) {
    free(w);
    free(ours);
    return;
  }
  c->idle = plan.n_take == 0 && plan.n_steal == 0;
  if (c->idle && c->mb_on) {
    c->idle_sig = counts_sig(c);
    c->idle_sig_ms = now;
  }
  if (c->mb_on && c->mb_ok) leftovers(c, w, n, &plan, now);
  kn_cc_range_t *ranges = NULL; /* parsed once, when first needed */
  for (int pass = 0; pass < 2; pass++) {
    size_t cnt = pass ? plan.n_steal : plan.n_take;
    const size_t *idx = pass ? plan.steal : plan.take;
    for (size_t k = 0; k < cnt; k++) {
      const kn_lease_t *t = &v[idx[k]];
      const cc_lease_t *l = lease_find(c, t->key);
      if ((l && l->held) || take_in_flight(c, t->key) || in_find(c, t->key))
        continue;
      /* A lease being handed over is not asked for again. */
      if (pass && t->checkpoint_owner) continue;
      /* A live worker's lease is asked for: it hands it over once its
       * application is done with what it was handed. */
      int ask = pass && c->cfg.handoff_ms > 0 && t->owner && !ours[idx[k]];
      cc_op_t *o = op_new(c, ask ? KN_CC_HANDOFF : KN_CC_TAKE, t->key, -1, now);
      if (!o) continue;
      o->purpose = pass;
      if (kn_lease_copy(&o->lease, t)) {
        op_free(op_take(c, o->id));
        continue;
      }
      if (at_initial(t)) {
        if (!ranges && !(ranges = kn_cc_ranges(v, n))) {
          c->q.lost = 1; /* unsure where to start: the core stops */
          op_free(op_take(c, o->id));
          break;
        }
        o->from_start = kn_cc_family_read(v, n, ranges, t);
      }
      cc_act_t *x = call(c, o);
      if (!x) continue;
      x->a.counter = t->counter;
      x->a.steal = pass;
      cc_own(x, &x->a.old_owner, ours[idx[k]] ? ours[idx[k]] : t->owner);
    }
  }
  free(ranges);
  if (c->mb_on) release_extra(c, w, ours, n, &plan, now);
  kn_take_plan_free(&plan);
  free(w);
  free(ours);
}

/* A lease at the initial position whose family is read here: two syncs
 * straddled a reshard, one creating the parents, the other (with the
 * newer shard listing) the child at LATEST or AT_TIMESTAMP.  The child's
 * records follow the parents', so it is read from its start.  A take
 * planned from a listing knows (kn_cc_family_read); a lease handed over
 * looks for its parents in the last listing, which still shows them:
 * parents stay in the table until their children have checkpointed. */
static int from_start(const kn_cc_t *c, const cc_op_t *o) {
  const kn_lease_t *t = &o->lease;
  if (!at_initial(t)) return 0;
  if (o->from_start) return 1;
  for (size_t i = 0; i < t->n_parents; i++)
    if (kn_lease_observer_get(&c->obs, t->parents[i])) return 1;
  return 0;
}

static void took(kn_cc_t *c, cc_op_t *o, int64_t counter, int64_t sent,
                 int64_t now) {
  cc_lease_t *l = lease_get(c, o->key);
  if (!l) return;
  const kn_lease_t *t = &o->lease;
  l->held = 1;
  l->tenure = counter;
  l->counter = counter;
  l->since_ms = now;
  l->until_ms = sent + c->grace_ms;
  l->next_renew_ms = sent + c->cfg.renew_ms;
  l->busy = 0;
  l->flush_due = 0;
  l->failed_write = 0;
  free(l->handoff_to);
  l->handoff_to = NULL;
  l->yielded = 0;
  set_str(l->ckpt, is_seq(t->checkpoint) ||
                           (t->checkpoint &&
                            strcmp(t->checkpoint, KN_CKPT_SHARD_END) == 0)
                       ? t->checkpoint
                       : "");
  l->ckpt_sub = t->checkpoint_subseq > 0 ? t->checkpoint_subseq : 0;
  l->processed[0] = l->delivered[0] = '\0';
  l->ended = l->end_popped = 0;
  l->shard_end_written = kn_lease_is_shard_end(t);
  if (c->closing || c->fatal || l->shard_end_written) {
    /* Too late to read it (or nothing left in it): handed back by pump. */
    l->reading = 0;
    return;
  }
  l->reading = 1;
  logf_(c, KN_CC_LOG_INFO, "%s shard %s (counter %lld, from %s)",
        o->purpose == T_STEAL    ? "stole"
        : o->purpose == T_HANDED ? "was handed"
                                 : "took",
        o->key, (long long)counter,
        t->checkpoint ? t->checkpoint : "the start");
  cc_act_t *x = cc_push(&c->q, KN_CC_START);
  if (!x) return;
  x->a.tenure = counter;
  x->a.until_ms = l->until_ms;
  cc_own(x, &x->a.key, o->key);
  if (cc_own_lease(x, t) == 0) {
    free(x->lease.owner);
    if (!(x->lease.owner = strdup(c->worker))) c->q.lost = 1;
    x->lease.counter = counter;
    if (from_start(c, o)) {
      /* (NULL, on out-of-memory, is the start too.) */
      free(x->lease.checkpoint);
      x->lease.checkpoint = strdup(KN_CKPT_TRIM_HORIZON);
      logf_(c, KN_CC_LOG_INFO,
            "shard %s is read from its start: a parent was read here", o->key);
    }
  }
}

/* ---- store answers ---- */

static int is_cond(const kn_error_t *err) {
  return err && kn_error_code(err) == KN_ERR_CONDITIONAL_CHECK_FAILED;
}

static void lease_write_done(kn_cc_t *c, cc_op_t *o, const kn_error_t *err,
                             int64_t counter, const char *handoff_to,
                             int64_t sent, int64_t now) {
  cc_lease_t *l = lease_find(c, o->key);
  cc_req_t *req = o->req;
  o->req = NULL;
  if (!l || l->tenure != o->tenure || l->busy != o->id || !l->held) {
    /* A write of an ended tenure: whatever it did, this one ignores it. */
    if (l && l->busy == o->id) l->busy = 0;
    if (req)
      reply(c, req->req, KN_ERR__LEASE_LOST,
            "lease lost; checkpoint not written");
    req_free(req);
    return;
  }
  l->busy = 0;
  if (is_cond(err)) {
    logf_(c, KN_CC_LOG_WARN,
          "shard %s: %s refused: lease taken by another "
          "worker",
          l->key, kn_cc_op_name(o->op));
    if (req)
      reply(c, req->req, KN_ERR__LEASE_LOST,
            "lease taken by another "
            "worker; checkpoint not written");
    req_free(req);
    drop(c, l, KN_ERR__LEASE_LOST);
    return;
  }
  if (err) {
    if (req) {
      char msg[512];
      snprintf(msg, sizeof(msg), "shard %s: checkpoint: %s", l->key,
               kn_error_string(err));
      reply(c, req->req, kn_error_code(err), msg);
      req_free(req);
    } else if (o->op == KN_CC_CHECKPOINT &&
               strcmp(o->ckpt, KN_CKPT_SHARD_END)) {
      l->flush_due = 1;
    }
    logf_(c, KN_CC_LOG_WARN, "shard %s: %s: %s%s", l->key, kn_cc_op_name(o->op),
          kn_error_string(err), o->op == KN_CC_RENEW ? " (still held)" : "");
    l->failed_write = 1;
    if ((o->op == KN_CC_RELEASE || o->op == KN_CC_HANDOFF_DONE) &&
        (c->closing || c->fatal)) {
      l->held = 0; /* given up: it expires in the others' eyes */
      fail_reqs(c, l, KN_ERR__LEASE_LOST);
      return;
    }
    /* Again soon, well before the deadline. */
    int64_t again = c->cfg.renew_ms / 3 < 1000 ? c->cfg.renew_ms / 3 : 1000;
    l->next_renew_ms = now + again;
    return;
  }
  l->counter = counter;
  l->failed_write = 0;
  if (sent + c->grace_ms > l->until_ms) l->until_ms = sent + c->grace_ms;
  l->next_renew_ms = sent + c->cfg.renew_ms;
  if (l->reading) {
    cc_act_t *x = cc_push(&c->q, KN_CC_EXTEND);
    if (x) {
      x->a.tenure = l->tenure;
      x->a.until_ms = l->until_ms;
      cc_own(x, &x->a.key, l->key);
    }
  }
  if (o->op == KN_CC_CHECKPOINT) {
    if (o->ckpt[0]) {
      set_str(l->ckpt, o->ckpt);
      l->ckpt_sub = o->ckpt_sub;
    }
    if (strcmp(o->ckpt, KN_CKPT_SHARD_END) == 0) {
      l->shard_end_written = 1;
      logf_(c, KN_CC_LOG_INFO, "shard %s finished: SHARD_END checkpointed",
            l->key);
    }
    if (req) reply(c, req->req, KN_ERR_NO_ERROR, NULL);
    req_free(req);
    /* A checkpoint stands for the renewal of its slot: it brings news of
     * a hand-off as well. */
    if (handoff_to && l->held && !l->shard_end_written)
      begin_handoff(c, l, handoff_to, now);
  } else if (o->op == KN_CC_HANDOFF_DONE) {
    /* Passed on to a worker that died meanwhile: the others look. */
    if (l->handoff_to && (!kn_mview_get(&c->view, l->handoff_to) ||
                          kn_mview_is_dead(&c->view, l->handoff_to)))
      bump(c, now);
    l->held = 0;
    fail_reqs(c, l, KN_ERR__LEASE_LOST);
    logf_(c, KN_CC_LOG_INFO, "handed shard %s over to %s at %s", l->key,
          l->handoff_to ? l->handoff_to : "?",
          l->ckpt[0] ? l->ckpt
                     : "its "
                       "checkpoint");
    free(l->handoff_to);
    l->handoff_to = NULL;
  } else if (o->op == KN_CC_RENEW && handoff_to && l->held) {
    begin_handoff(c, l, handoff_to, now);
  } else if (o->op == KN_CC_RELEASE) {
    l->held = 0;
    fail_reqs(c, l, KN_ERR__LEASE_LOST);
    bump(c, now); /* free, or its children ready: the others look */
    if (l->shard_end_written) {
      l->reading = 0;
      cc_act_t *x = cc_push(&c->q, KN_CC_DONE);
      if (x) {
        x->a.tenure = l->tenure;
        cc_own(x, &x->a.key, l->key);
      }
      c->take_at = now; /* its children may be ready */
      c->idle = 0;
    } else {
      logf_(c, KN_CC_LOG_INFO, "released shard %s", l->key);
    }
  }
}

void kn_cc_store_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                      int64_t new_counter, const char *handoff_to,
                      int64_t sent_ms, int64_t now) {
  cc_retire(&c->q);
  cc_op_t *o = op_take(c, id);
  if (!o) return;
  switch (o->op) {
    case KN_CC_CREATE:
      if (err && !is_cond(err)) {
        c->create_failed = 1;
        logf_(c, KN_CC_LOG_WARN, "creating the lease of shard %s: %s", o->key,
              kn_error_string(err));
      } else if (!err) {
        logf_(c, KN_CC_LOG_INFO, "lease created for shard %s at %s", o->key,
              o->ckpt);
      }
      if (c->syncing && --c->wave_left <= 0) {
        if (c->create_failed) {
          /* The children of a lease that could not be created must wait:
           * the next sync tries again. */
          c->syncing = 0;
          free(c->plan);
          c->plan = NULL;
          c->n_plan = c->plan_next = 0;
          c->sync_at = now + backoff_ms(c->sync_failures++);
        } else if (!c->closing && !c->fatal) {
          create_wave(c, now);
        } else {
          c->syncing = 0;
        }
      }
      break;
    case KN_CC_TAKE:
      if (err) {
        logf_(c, KN_CC_LOG_DEBUG, "take %s: %s", o->key, kn_error_string(err));
        c->idle = 0; /* it may have landed, or another took it: look */
      } else {
        in_remove(c, o->key);
        took(c, o, new_counter, sent_ms, now);
      }
      break;
    case KN_CC_HANDOFF:
      if (err) {
        logf_(c, KN_CC_LOG_DEBUG, "asking for %s: %s", o->key,
              kn_error_string(err));
        c->idle = 0;
      } else if (!c->closing && !c->fatal) {
        logf_(c, KN_CC_LOG_INFO, "asked %s for shard %s",
              o->lease.owner ? o->lease.owner : "?", o->key);
        in_add(c, o->key, o->lease.counter, now);
        c->idle = 0;
      }
      break;
    case KN_CC_HANDOFF_DONE:
      if (o->tenure < 0) {
        if (!err) bump(c, now); /* to a worker perhaps long gone: look */
        if (!err)
          logf_(c, KN_CC_LOG_INFO,
                "shard %s: passed on (asked for while "
                "an earlier run held it)",
                o->key);
        break;
      }
      lease_write_done(c, o, err, new_counter, NULL, sent_ms, now);
      break;
    case KN_CC_RELEASE:
      if (o->tenure < 0) {
        if (!err) {
          logf_(c, KN_CC_LOG_INFO,
                "released shard %s (an earlier run of this worker held it)",
                o->key);
          bump(c, now);
        }
        break;
      }
      lease_write_done(c, o, err, new_counter, handoff_to, sent_ms, now);
      break;
    case KN_CC_RENEW:
    case KN_CC_CHECKPOINT:
      lease_write_done(c, o, err, new_counter, handoff_to, sent_ms, now);
      break;
    case KN_CC_REMOVE:
      if (!err)
        logf_(c, KN_CC_LOG_INFO, "removed the finished lease of shard %s",
              o->key);
      break;
    default:
      break;
  }
  /* Only the lease the call was for has something new to do. */
  if (c->closing || c->fatal) {
    pump_all(c, now);
  } else if (o->key) {
    cc_lease_t *l = lease_find(c, o->key);
    if (l) pump(c, l, now);
  }
  op_free(o);
  maybe_closed(c);
}

/* ---- readers ---- */

/* A sync now, or right after the one under way. */
static void sync_soon(kn_cc_t *c, int64_t now) {
  c->sync_asked = 1;
  if (c->syncing)
    c->resync = 1;
  else
    c->sync_at = now;
}

static cc_lease_t *tenure_of(kn_cc_t *c, const char *key, int64_t tenure) {
  cc_lease_t *l = lease_find(c, key);
  if (!l || !l->reading || l->tenure != tenure) return NULL;
  return l;
}

void kn_cc_shard_ended(kn_cc_t *c, const char *key, int64_t tenure,
                       const kn_cc_shard_t *children, size_t n, int64_t now) {
  cc_retire(&c->q);
  cc_lease_t *l = tenure_of(c, key, tenure);
  if (!l) {
    logf_(c, KN_CC_LOG_DEBUG,
          "shard %s: end reported for an ended tenure "
          "(%lld): ignored",
          key, (long long)tenure);
    return;
  }
  l->ended = 1;
  if (n > 0 && l->held) {
    cc_op_t *o = op_new(c, KN_CC_SET_CHILDREN, key, tenure, now);
    cc_act_t *x = o ? call(c, o) : NULL;
    if (x && (x->children = calloc(n, sizeof(char *)))) {
      for (size_t i = 0; i < n; i++)
        if ((x->children[x->n_children] = strdup(children[i].id)))
          x->n_children++;
      x->a.children = x->children;
      x->a.n_children = x->n_children;
    }
  }
  /* Leases for the children come from a sync now (ListShards also finds
   * them where the server sends no ChildShards). */
  sync_soon(c, now);
  pump(c, l, now);
}

void kn_cc_shard_gone(kn_cc_t *c, const char *key, int64_t tenure,
                      int64_t now) {
  cc_retire(&c->q);
  cc_lease_t *l = tenure_of(c, key, tenure);
  if (!l) return;
  logf_(c, KN_CC_LOG_WARN,
        "shard %s: gone (past retention); treating it as "
        "read",
        key);
  l->ended = l->end_popped = 1;
  l->delivered[0] = '\0';
  sync_soon(c, now);
  pump(c, l, now);
}

void kn_cc_shard_expired(kn_cc_t *c, const char *key, int64_t tenure,
                         int64_t now) {
  cc_retire(&c->q);
  cc_lease_t *l = tenure_of(c, key, tenure);
  if (!l) return;
  /* The reader judged the deadline (maybe one a renewal has moved since):
   * the tenure ends; a later take round takes the lease back. */
  drop(c, l, KN_ERR__TIMED_OUT);
  maybe_closed(c);
  (void)now;
}

/* ---- the application ---- */

void kn_cc_delivered(kn_cc_t *c, const char *key, int64_t tenure,
                     const kn_cc_pos_t *pos, int end, int64_t now) {
  cc_retire(&c->q);
  cc_lease_t *l = tenure_of(c, key, tenure);
  if (!l) return;
  if (pos && pos->seq &&
      (!l->delivered[0] ||
       kn_seqpos_cmp(pos->seq, (uint64_t)pos->subseq, l->delivered,
                     (uint64_t)l->delivered_sub) > 0)) {
    set_str(l->delivered, pos->seq);
    l->delivered_sub = pos->subseq;
  }
  if (end) l->end_popped = 1;
  pump(c, l, now);
}

void kn_cc_processed(kn_cc_t *c, const char *key, int64_t tenure,
                     const kn_cc_pos_t *pos, int64_t now) {
  cc_retire(&c->q);
  cc_lease_t *l = lease_find(c, key);
  if (!l || !l->held || l->tenure != tenure || !pos || !pos->seq) return;
  if (!l->processed[0] ||
      kn_seqpos_cmp(pos->seq, (uint64_t)pos->subseq, l->processed,
                    (uint64_t)l->processed_sub) > 0) {
    set_str(l->processed, pos->seq);
    l->processed_sub = pos->subseq;
  }
  (void)now;
}

void kn_cc_checkpoint(kn_cc_t *c, const char *key, const kn_cc_pos_t *pos,
                      int prepare, const void *state, size_t state_len,
                      void *req, int64_t now) {
  cc_retire(&c->q);
  cc_lease_t *l = lease_find(c, key);
  if (!l || !l->held) {
    char msg[256];
    snprintf(msg, sizeof(msg), "shard %s: this worker does not hold its lease",
             key);
    reply(c, req, KN_ERR__LEASE_LOST, msg);
    return;
  }
  cc_req_t *r = calloc(1, sizeof(*r));
  if (!r || !pos || !pos->seq || strlen(pos->seq) >= SEQ_CAP) {
    free(r);
    reply(c, req, r ? KN_ERR__INVALID_ARG : KN_ERR__NOMEM,
          r ? "bad sequence number" : "out of memory");
    return;
  }
  strcpy(r->seq, pos->seq);
  r->subseq = pos->subseq;
  r->prepare = prepare;
  r->req = req;
  if (state && state_len) {
    if (!(r->state = malloc(state_len))) {
      free(r);
      reply(c, req, KN_ERR__NOMEM, "out of memory");
      return;
    }
    memcpy(r->state, state, state_len);
    r->state_len = state_len;
  }
  if (l->reqs_tail)
    l->reqs_tail->next = r;
  else
    l->reqs = r;
  l->reqs_tail = r;
  pump(c, l, now);
}
