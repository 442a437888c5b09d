/* The coordination core's state machine (ccore.h): construction, the
 * answers to its calls, wake-up and tick over the concerns' timers, and
 * closing.  The concerns live in cc_*.c (cc_int.h lists them). */
#include "consumer/ccore.h"

#include <stdlib.h>
#include <string.h>

#include "consumer/cc_int.h"

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
  c->ho.watch_ms = cfg->renew_ms / 4;
  if (c->ho.watch_ms > 500) c->ho.watch_ms = 500;
  if (c->ho.watch_ms < 50) c->ho.watch_ms = 50;
  kn_lease_observer_init(&c->obs);
  c->sy.at = now_ms;
  c->tk.at = now_ms;
  c->mb.on = cfg->members;
  c->mb.fence_told = INT64_MAX;
  c->mb.hb_at = now_ms;
  c->mb.beat = cfg->beat_base;
  kn_mview_init(&c->mb.view);
  c->mb.nb = 1;
  c->mb.leave = -1;
  c->wr.flush_at = now_ms + cfg->checkpoint_ms;
  return c;
}

void kn_cc_destroy(kn_cc_t *c) {
  if (!c) return;
  kn_cc_q_free(&c->q);
  for (size_t i = 0; i < c->n_ops; i++) kn_cc_op_free(c->ops[i]);
  free(c->ops);
  kn_cc_wr_free(c);
  kn_cc_ho_free(c);
  kn_cc_mb_free(c);
  kn_cc_tk_free(c);
  kn_cc_sy_free(c);
  kn_lease_observer_free(&c->obs);
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
  kn_cc_q_free(&c->q);
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
  return kn_cc_q_pop(&c->q, a);
}

/* The concerns' timers, in the order a tick runs them: each says when
 * it wants the time next and does what is due then, so that wake-up and
 * tick are one list.  The order is the order of the actions a tick
 * queues: reading deadlines first (a reader stops before anything else
 * goes out), then the heartbeat, then the calls. */
static const struct cc_timer {
  int64_t (*next_ms)(const kn_cc_t *c);
  void (*tick)(kn_cc_t *c, int64_t now);
} timers[] = {
    {kn_cc_wr_next_ms, kn_cc_wr_tick}, {kn_cc_mb_next_ms, kn_cc_mb_tick},
    {kn_cc_ho_next_ms, kn_cc_ho_tick}, {kn_cc_sy_next_ms, kn_cc_sy_tick},
    {kn_cc_tk_next_ms, kn_cc_tk_tick},
};
#define N_TIMERS (sizeof(timers) / sizeof(timers[0]))

int64_t kn_cc_wake_ms(const kn_cc_t *c) {
  int64_t t = INT64_MAX;
  if (c->closed_sent) return t;
  for (size_t i = 0; i < N_TIMERS; i++) t = cc_min64(t, timers[i].next_ms(c));
  return t;
}

int kn_cc_idle(const kn_cc_t *c) {
  return c->sy.synced && c->tk.idle && !c->sy.syncing && !c->sy.resync &&
         !c->ho.n_in;
}

void kn_cc_tick(kn_cc_t *c, int64_t now) {
  kn_cc_q_retire(&c->q);
  int64_t wake = kn_cc_wake_ms(c);
  uint64_t pushed = c->q.pushed;
  for (size_t i = 0; i < N_TIMERS; i++) timers[i].tick(c, now);
  kn_cc_wr_pump_all(c, now);
  kn_cc_maybe_closed(c);
  /* The self-check: a tick at (or past) the wake-up queues an action or
   * moves the wake-up; else a driver that waits for kn_cc_wake_ms would
   * tick again at once, and again. */
  if (now >= wake && c->q.pushed == pushed && kn_cc_wake_ms(c) == wake)
    c->idle_ticks++;
}

uint64_t kn_cc_idle_ticks(const kn_cc_t *c) { return c->idle_ticks; }

/* ---- answers to calls ---- */

void kn_cc_members_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                        const kn_members_t *m, int64_t sent, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_op_t *o = kn_cc_op_take(c, id);
  if (!o) return;
  int news = kn_cc_mb_done(c, o, err, m, sent, now);
  kn_cc_op_free(o);
  if (news) {
    /* News of a death or a change: the take round looks now, and a round
     * kept for a newer view runs. */
    kn_cc_tk_news(c, now);
    kn_cc_tk_run_pending(c, now);
  }
  kn_cc_mb_relift(c, now);
  kn_cc_mb_fence(c);
  /* Closing, the leases go; heartbeats back, their marks go. */
  kn_cc_wr_pump_all(c, now);
  if (c->closing || c->fatal) kn_cc_maybe_closed(c);
}

/* A listing of the sync failed: retried, or a verdict that stops it. */
static void sync_failed(kn_cc_t *c, const kn_error_t *err, const char *what,
                        int64_t now) {
  char msg[512];
  if (kn_cc_sy_failed(c, err, what, msg, sizeof(msg), now))
    kn_cc_go_fatal(c, kn_error_code(err), msg, now);
}

void kn_cc_shards_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                       const kn_cc_shard_t *v, size_t n, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_op_t *po = kn_cc_op_take(c, id);
  int probe = po && po->purpose == P_PROBE;
  kn_cc_op_free(po);
  if (c->closing || c->fatal) {
    c->sy.syncing = 0;
    return;
  }
  if (err)
    sync_failed(c, err, "ListShards", now);
  else
    kn_cc_sy_shards(c, probe, v, n, now);
}

void kn_cc_roster(kn_cc_t *c, uint64_t id, const kn_members_t *roster,
                  int64_t now) {
  kn_cc_mb_roster(c, id, roster, now);
}

void kn_cc_roster_refused(kn_cc_t *c, uint64_t id) {
  kn_cc_mb_roster_refused(c, id);
}

void kn_cc_leases_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                       const kn_lease_t *v, size_t n, int64_t now) {
  kn_cc_q_retire(&c->q);
  if (!err) kn_cc_mb_roster_listed(c, id, now);
  cc_op_t *o = kn_cc_op_take(c, id);
  if (!o) return;
  int purpose = o->purpose;
  cc_op_t seen = *o; /* when it was sent: time, epoch, deaths */
  seen.key = NULL;
  seen.req = NULL;
  memset(&seen.lease, 0, sizeof(seen.lease));
  kn_cc_op_free(o);
  if (purpose == P_TAKE) c->tk.taking = 0;
  int sync = purpose == P_SYNC_LEASES1 || purpose == P_SYNC_LEASES2;
  if (c->closing || c->fatal) {
    if (sync) c->sy.syncing = 0;
    return;
  }
  if (err) {
    if (sync) {
      sync_failed(c, err, "lease table", now);
    } else {
      kn_cc_log(c, KN_CC_LOG_WARN, "lease table: %s", kn_error_string(err));
      c->tk.at = now + c->cfg.take_ms;
    }
    return;
  }
  int obs_ok = kn_lease_observer_update(&c->obs, v, n, now) == 0;
  /* Spread over items, owners are judged by the roster read with the
   * listing: without it (no right to Scan, say), no take round. */
  int rounds = obs_ok && (!seen.roster || kn_cc_mb_roster_read(c, id));
  if (obs_ok && !rounds && purpose == P_TAKE) {
    kn_cc_log(c, KN_CC_LOG_WARN,
              "membership items could not be read with the lease table: "
              "no take round");
    c->tk.at = now + c->cfg.take_ms;
  }
  if (rounds && purpose == P_TAKE) kn_cc_tk_round(c, v, n, &seen, now, now);
  /* With membership a sync's fresh listing is a take round's too: the
   * leader's look costs no listing more. */
  if (rounds && purpose == P_SYNC_LEASES2 && c->mb.on && c->mb.ok &&
      c->sy.synced && !c->tk.taking && kn_cc_mb_fresh(c, now))
    kn_cc_tk_round(c, v, n, &seen, now, now);
  if (sync) kn_cc_sy_leases(c, purpose, v, n, now);
  kn_cc_wr_pump_all(c, now);
}

void kn_cc_store_done(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                      int64_t new_counter, const char *handoff_to,
                      int64_t sent_ms, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_op_t *o = kn_cc_op_take(c, id);
  if (!o) return;
  switch (o->op) {
    case KN_CC_CREATE:
      kn_cc_sy_created(c, o, err, now);
      break;
    case KN_CC_TAKE:
    case KN_CC_HANDOFF:
      kn_cc_tk_done(c, o, err, new_counter, sent_ms, now);
      break;
    case KN_CC_HANDOFF_DONE:
    case KN_CC_RELEASE:
      /* Tenure -1: a lease an earlier run of this worker id held. */
      if (o->tenure < 0)
        kn_cc_tk_done(c, o, err, new_counter, sent_ms, now);
      else
        kn_cc_wr_done(c, o, err, new_counter,
                      o->op == KN_CC_RELEASE ? handoff_to : NULL, sent_ms, now);
      break;
    case KN_CC_RENEW:
    case KN_CC_CHECKPOINT:
      kn_cc_wr_done(c, o, err, new_counter, handoff_to, sent_ms, now);
      break;
    case KN_CC_REMOVE:
      if (!err)
        kn_cc_log(c, KN_CC_LOG_INFO, "removed the finished lease of shard %s",
                  o->key);
      break;
    default:
      break;
  }
  /* Only the lease the call was for has something new to do. */
  if (c->closing || c->fatal) {
    kn_cc_wr_pump_all(c, now);
  } else if (o->key) {
    cc_lease_t *l = kn_cc_wr_find(c, o->key);
    if (l) kn_cc_wr_pump(c, l, now);
  }
  kn_cc_op_free(o);
  kn_cc_maybe_closed(c);
}

void kn_cc_lease_got(kn_cc_t *c, uint64_t id, const kn_error_t *err,
                     const kn_lease_t *t, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_op_t *o = kn_cc_op_take(c, id);
  if (!o) return;
  if (o->purpose == P_VERIFY) {
    kn_cc_wr_verified(c, o, err, t, now);
    kn_cc_op_free(o);
    kn_cc_maybe_closed(c);
    return;
  }
  int closed = kn_cc_ho_got(c, id, o->key, err, t, now);
  kn_cc_op_free(o);
  if (closed) kn_cc_maybe_closed(c);
}
