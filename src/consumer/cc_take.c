/* The coordination core's take rounds: a listing of the lease table is
 * classified, planned (lease/taker.h) and the takes issued (cc_int.h). */
#include <stdlib.h>
#include <string.h>

#include "consumer/cc_int.h"

static void start_take(kn_cc_t *c, int64_t now) {
  cc_op_t *o = kn_cc_op_new(c, KN_CC_LIST_LEASES, NULL, -1, now);
  if (!o || !kn_cc_call(c, o)) return;
  o->purpose = P_TAKE;
  o->epoch = c->mb.view.epoch;
  o->deaths = c->mb.view.deaths;
  c->tk.taking = 1;
}

/* Why a take round should list the lease table now, or NULL. */
static const char *take_reason(const kn_cc_t *c, int64_t now) {
  if (c->mb.stale_until) return NULL; /* until forgotten (cc_int.h) */
  if (!c->mb.on) return "every take round (no membership)";
  if (!c->mb.ok) return NULL; /* the first heartbeat comes first */
  if (!kn_cc_mb_fresh(c, now)) return NULL;
  if (!c->tk.scanned) return "first look";
  if (!c->tk.idle) return "the last round had work";
  if (c->ho.n_in) return "hand-offs asked for";
  if (c->tk.foreign) return "leases of workers without heartbeats";
  if (c->mb.view.epoch != c->tk.scan_epoch) return "the epoch moved";
  if (c->mb.view.deaths != c->tk.scan_deaths) return "a worker died";
  size_t held = kn_cc_held(c);
  if (c->cfg.max_leases && held >= (size_t)c->cfg.max_leases) return NULL;
  /* The counts as a round found them with nothing to do (a quiet worker,
   * children not ready): not again until they change, or for a while. */
  if (c->tk.idle_sig == kn_cc_mb_counts_sig(c) &&
      now - c->tk.idle_sig_ms < c->cfg.duration_ms)
    return NULL;
  for (size_t i = 0; i < c->mb.view.n; i++) {
    const kn_mview_ent_t *e = &c->mb.view.v[i];
    if (!e->dead && strcmp(e->worker, c->worker) != 0 &&
        e->leases >= (int64_t)held + 2)
      return "a worker holds two more leases";
  }
  /* Spread over items, the leader's digest tells of the others: of the
   * workers holding the fewest, as many look as there are leases to move
   * (drawn anew with each digest), not all of them at once. */
  if (c->mb.nb > 1 && c->mb.d_max >= (int64_t)held + 2 &&
      (int64_t)held <= c->mb.d_min &&
      (c->mb.d_nmin <= 0 ||
       (int64_t)(kn_cc_mb_draw(c) % (uint64_t)c->mb.d_nmin) < c->mb.d_over))
    return "a worker holds two more leases";
  return NULL;
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
  kn_lease_array_free(c->tk.pend, c->tk.n_pend);
  c->tk.pend = NULL;
  c->tk.n_pend = 0;
  c->tk.idle = 0;
  if (!(c->tk.pend = calloc(n, sizeof(*c->tk.pend)))) return;
  for (; c->tk.n_pend < n; c->tk.n_pend++)
    if (kn_lease_copy(&c->tk.pend[c->tk.n_pend], &v[c->tk.n_pend])) {
      kn_lease_array_free(c->tk.pend, c->tk.n_pend);
      c->tk.pend = NULL;
      c->tk.n_pend = 0;
      return;
    }
  c->tk.pend_ms = answered_ms;
  c->tk.pend_emit_ms = seen->emit_ms;
  c->tk.pend_epoch = seen->epoch;
  c->tk.pend_deaths = seen->deaths;
  kn_cc_mb_beat_now(c, now);
}

/* The round kept for a newer view, once there is one. */
void kn_cc_tk_run_pending(kn_cc_t *c, int64_t now) {
  if (!c->tk.pend || c->mb.view_sent_ms < c->tk.pend_ms || c->tk.taking ||
      c->closing || c->fatal)
    return;
  kn_lease_t *v = c->tk.pend;
  size_t n = c->tk.n_pend;
  c->tk.pend = NULL;
  c->tk.n_pend = 0;
  cc_op_t seen;
  memset(&seen, 0, sizeof(seen));
  seen.emit_ms = c->tk.pend_emit_ms;
  seen.epoch = c->tk.pend_epoch;
  seen.deaths = c->tk.pend_deaths;
  kn_cc_tk_round(c, v, n, &seen, c->tk.pend_ms, now);
  kn_lease_array_free(v, n);
  kn_cc_wr_pump_all(c, now);
}

/* Leases in this worker's name from an earlier run that it does not take
 * back (it holds its share): the others would wait for them to expire,
 * and with membership they do not look.  Let go of them. */
static void release_extra(kn_cc_t *c, const kn_lease_t *w, const char **ours,
                          size_t n, const kn_take_plan_t *plan, int64_t now) {
  for (size_t i = 0; i < n; i++) {
    if (!ours[i] || !cc_is_me(c, ours[i]) || kn_lease_is_shard_end(&w[i]) ||
        kn_cc_in_flight(c, KN_CC_RELEASE, w[i].key))
      continue;
    int taking = 0;
    for (size_t k = 0; k < plan->n_take && !taking; k++)
      taking = plan->take[k] == i;
    if (taking) continue;
    cc_op_t *o = kn_cc_op_new(c, KN_CC_RELEASE, w[i].key, -1, now);
    cc_act_t *x = o ? kn_cc_call(c, o) : NULL;
    if (x) x->a.counter = w[i].counter;
  }
}

/* Free leases this worker does not take (it holds its share): the
 * others are told to look. */
static void leftovers(kn_cc_t *c, const kn_lease_t *w, size_t n,
                      const kn_take_plan_t *plan, int64_t now) {
  if (now - c->tk.leftover_bump_ms < c->cfg.duration_ms) return;
  size_t free_ready = 0;
  for (size_t i = 0; i < n && free_ready <= plan->n_take; i++)
    if (!w[i].owner && !kn_lease_is_shard_end(&w[i]) &&
        kn_lease_is_ready(&w[i], w, n))
      free_ready++;
  if (free_ready <= plan->n_take) return;
  c->tk.leftover_bump_ms = now;
  cc_bump(c, now);
}

/* Classify, step 1: the leases held as the listing shows them.  Held
 * leases another worker has taken (a listing sent after our take was
 * answered shows them in another name, at or past our counter) are
 * dropped; those another worker asks for are handed over. */
static void check_held(kn_cc_t *c, const kn_lease_t *v, size_t n,
                       int64_t emit_ms, int64_t now) {
  kn_strmap_t byk = KN_STRMAP_INIT;
  int indexed = 1;
  for (size_t i = 0; i < n && indexed; i++)
    indexed = kn_strmap_put(&byk, v[i].key, (void *)&v[i]) == 0;
  for (size_t i = 0; i < c->wr.n_ls; i++) {
    cc_lease_t *l = c->wr.ls[i];
    if (!l->held || l->shard_end_written || emit_ms < l->since_ms) continue;
    const kn_lease_t *t =
        indexed ? kn_strmap_get(&byk, l->key) : lease_in(v, n, l->key);
    if (t && t->owner && cc_is_me(c, t->checkpoint_owner) &&
        !cc_is_me(c, t->owner)) {
      kn_cc_wr_begin_handoff(c, l, t->owner, now);
      continue;
    }
    if (!t || ((!t->owner || strcmp(t->owner, c->worker) != 0) &&
               t->counter >= l->counter)) {
      kn_cc_log(c, KN_CC_LOG_WARN,
                "lost the lease of shard %s%s%s: stopped "
                "reading it",
                l->key, t && t->owner ? " to " : "",
                t && t->owner ? t->owner : "");
      kn_cc_wr_drop(c, l, KN_ERR__LEASE_LOST);
    }
  }
  kn_strmap_free(&byk);
}

/* Classify, step 2: the leases not held, in w (a copy of the listing).
 * Leases in this worker's name that it does not hold were held by an
 * earlier run of this worker id, or were given up here when a renewal
 * came too late.  Nobody else reads them: they count as free now (owner
 * NULL in w; the owner is kept aside in ours for the take's condition),
 * as do the leases of members dead in the view.  Returns 1 when the
 * round must wait for a view newer than the listing (answered_ms). */
/* Non-zero when lease t of listing v (n) is at the initial position and
 * its family is read here (kn_cc_family_read).  Out of memory for the hash
 * ranges, only the parents and children named are looked at. */
static int family_read(const kn_lease_t *v, size_t n, const kn_lease_t *t) {
  if (!cc_at_initial(t)) return 0;
  kn_cc_range_t *r = kn_cc_ranges(v, n);
  int read = kn_cc_family_read(v, n, r, t);
  free(r);
  return read;
}

static int classify(kn_cc_t *c, kn_lease_t *w, const char **ours, size_t n,
                    int64_t answered_ms, int64_t now) {
  for (size_t i = 0; i < n; i++) {
    const cc_lease_t *l = kn_cc_wr_find(c, w[i].key);
    int held = l && l->held;
    if (!held && cc_is_me(c, w[i].checkpoint_owner) &&
        !cc_is_me(c, w[i].owner) && kn_cc_ho_answers(c, &w[i]) &&
        !kn_cc_in_flight(c, KN_CC_HANDOFF_DONE, w[i].key) &&
        !kn_cc_in_flight(c, KN_CC_TAKE, w[i].key)) {
      /* Asked for while an earlier run of this worker id held it: nothing
       * was handed out here, so it is passed on at once -- if the owner is
       * of a kind that asks (kn_cc_ho_answers): a KCL 2.x steal leaves
       * checkpointOwner behind, and a pass-on would bump the counter under
       * a holder that reads. */
      cc_op_t *o = kn_cc_op_new(c, KN_CC_HANDOFF_DONE, w[i].key, -1, now);
      cc_act_t *x = o ? kn_cc_call(c, o) : NULL;
      if (x) x->a.counter = w[i].counter;
      continue;
    }
    if (cc_is_me(c, w[i].owner) && w[i].checkpoint_owner && !held &&
        !cc_is_me(c, w[i].checkpoint_owner)) {
      /* Asked for by this worker (maybe by an earlier run of it): it is
       * watched until handed over, not taken. */
      kn_cc_ho_add(c, w[i].key, w[i].counter, family_read(w, n, &w[i]), now);
      continue;
    }
    if (w[i].owner && strcmp(w[i].owner, c->worker) == 0 && !held &&
        !kn_cc_take_in_flight(c, w[i].key) && !kn_cc_ho_find(c, w[i].key)) {
      ours[i] = w[i].owner;
      w[i].owner = NULL;
      continue;
    }
    if (!c->mb.on || !c->mb.ok || !w[i].owner || cc_is_me(c, w[i].owner) ||
        kn_lease_is_shard_end(&w[i]))
      continue;
    if (kn_mview_is_dead(&c->mb.view, w[i].owner) && !w[i].checkpoint_owner &&
        w[i].beat_failing) {
      /* Its owner's heartbeats fail, and it said so on the lease: it may
       * read on while it renews; judged by the lease, as a KCL's.  Once
       * expired it is free, as a dead member's (heirs). */
      if (!kn_lease_is_expired(&c->obs, &w[i], now, c->cfg.duration_ms)) {
        c->tk.foreign++;
      } else {
        ours[i] = w[i].owner;
        w[i].owner = NULL;
      }
    } else if (kn_mview_is_dead(&c->mb.view, w[i].owner) &&
               !w[i].checkpoint_owner) {
      /* Its owner stopped beating a lease duration ago and has stopped
       * reading since: the lease is free, if the view that says so is
       * newer than this listing (else the next heartbeat decides). */
      if (c->mb.view_sent_ms < answered_ms) return 1;
      ours[i] = w[i].owner;
      w[i].owner = NULL;
    } else if (!kn_mview_get(&c->mb.view, w[i].owner) &&
               !kn_lease_is_expired(&c->obs, &w[i], now, c->cfg.duration_ms)) {
      /* A worker without heartbeats (a KCL worker, or one that just
       * started): only listings tell when its lease expires. */
      c->tk.foreign++;
    }
  }
  return 0;
}

/* Plan: what to take and steal (lease/taker.h); 0, or -1 on
 * out-of-memory. */
static int plan(kn_cc_t *c, const kn_lease_t *w, size_t n, kn_take_plan_t *plan,
                int64_t now) {
  /* A worker that renewed nothing for two renewal intervals is likely
   * dead: its leases are taken when they expire, before anyone steals. */
  kn_take_params_t p = {c->worker,          now,
                        c->cfg.duration_ms, c->cfg.max_leases,
                        c->cfg.max_steal,   2 * c->cfg.renew_ms};
  if (kn_take_plan(w, n, &c->obs, &p, plan)) return -1;
  c->tk.idle = plan->n_take == 0 && plan->n_steal == 0;
  if (c->tk.idle && c->mb.on) {
    c->tk.idle_sig = kn_cc_mb_counts_sig(c);
    c->tk.idle_sig_ms = now;
  }
  if (c->mb.on && c->mb.ok) leftovers(c, w, n, plan, now);
  return 0;
}

/* Spread over items, a dead member's leases go to the live members of its
 * item (and to the leader where none is left), each taking its share by
 * key even past its target: nobody else looks at once, and balance
 * follows through hand-offs.  Appends them to plan->take. */
static void heirs(kn_cc_t *c, const kn_lease_t *w, const char **ours, size_t n,
                  kn_take_plan_t *plan, int64_t now) {
  if (c->mb.nb <= 1) return;
  int lead = kn_cc_mb_leader(c);
  for (size_t i = 0; i < n; i++) {
    if (w[i].owner || kn_lease_is_shard_end(&w[i]) ||
        !kn_lease_is_ready(&w[i], w, n))
      continue;
    const kn_mview_ent_t *d = ours[i] && !cc_is_me(c, ours[i])
                                  ? kn_mview_get(&c->mb.view, ours[i])
                                  : NULL;
    /* Free for a lease duration (the others were told only near the
     * change): the leader takes it. */
    int stray = (!ours[i] || w[i].beat_failing) && lead &&
                kn_lease_is_expired(&c->obs, &w[i], now, c->cfg.duration_ms);
    if (!stray && (!d || !d->dead || d->remote)) continue;
    size_t live = 0, mine = 0;
    if (!stray) {
      for (size_t k = 0; k < c->mb.view.n; k++) {
        const kn_mview_ent_t *e = &c->mb.view.v[k];
        if (e->dead || e->remote || e->bucket != d->bucket) continue;
        if (cc_is_me(c, e->worker)) mine = live;
        live++;
      }
      int me_in = d->bucket == c->mb.bucket;
      if (!(me_in && live) && !(lead && !live)) continue;
      if (live && kn_cc_mb_home(w[i].key, (int)live) != (int)mine) continue;
    }
    int planned = 0;
    for (size_t k = 0; k < plan->n_take && !planned; k++)
      planned = plan->take[k] == i;
    if (planned) continue;
    size_t *v = realloc(plan->take, (plan->n_take + 1) * sizeof(*v));
    if (!v) return;
    plan->take = v;
    plan->take[plan->n_take++] = i;
  }
}

/* Issue one take (pass 0) or steal (pass 1) of listed lease t; ours: its
 * owner when set aside as free, else NULL.  -1 when the core must stop
 * (out of memory: unsure where to start). */
/* What issue_one parses of a listing once, when first needed. */
typedef struct parsed {
  kn_cc_range_t *ranges;
  kn_cc_done_t *done;
  int done_tried;
} parsed_t;

/* A lease at its start that the lineage shows finished (ccore.h,
 * kn_cc_done_new).  Out of memory, it is read as any other. */
static int finished(kn_cc_t *c, const kn_lease_t *v, size_t n,
                    const kn_lease_t *t, parsed_t *p) {
  if (kn_cc_lease_started(t)) return 0;
  if (!p->done_tried) {
    p->done_tried = 1;
    p->done = kn_cc_done_new(v, n, c->sy.shards, c->sy.n_shards);
  }
  return kn_cc_done_has(p->done, t);
}

static int issue_one(kn_cc_t *c, const kn_lease_t *v, size_t n,
                     const kn_lease_t *t, const char *ours, int pass,
                     parsed_t *p, int64_t now) {
  const cc_lease_t *l = kn_cc_wr_find(c, t->key);
  if ((l && l->held) || kn_cc_take_in_flight(c, t->key) ||
      kn_cc_ho_find(c, t->key))
    return 0;
  /* A lease being handed over is not asked for again. */
  if (pass && t->checkpoint_owner) return 0;
  /* A live worker's lease is asked for when it can answer: it hands it
   * over once its application is done with what it was handed.  Others
   * (a KCL 2.x worker) have it stolen, as the KCL 2.x steals, once they
   * have been without heartbeats long enough to be no member. */
  int ask = pass && c->cfg.handoff_ms > 0 && t->owner && !ours;
  if (ask && !kn_cc_ho_answers(c, t)) {
    if (!kn_cc_ho_foreign(c, t->owner, now)) {
      c->tk.idle = 0; /* look again */
      return 0;
    }
    ask = 0;
  }
  cc_op_t *o =
      kn_cc_op_new(c, ask ? KN_CC_HANDOFF : KN_CC_TAKE, t->key, -1, now);
  if (!o) return 0;
  o->purpose = pass;
  if (kn_lease_copy(&o->lease, t)) {
    kn_cc_op_free(kn_cc_op_take(c, o->id));
    return 0;
  }
  o->finished = finished(c, v, n, t, p);
  if (cc_at_initial(t) && !o->finished) {
    if (!p->ranges && !(p->ranges = kn_cc_ranges(v, n))) {
      c->q.lost = 1; /* unsure where to start: the core stops */
      kn_cc_op_free(kn_cc_op_take(c, o->id));
      return -1;
    }
    o->from_start = kn_cc_family_read(v, n, p->ranges, t);
  }
  cc_act_t *x = kn_cc_call(c, o);
  if (!x) return 0;
  x->a.counter = t->counter;
  x->a.steal = pass;
  kn_cc_q_own(x, &x->a.old_owner, ours ? ours : t->owner);
  return 0;
}

/* Issue: the takes, then the steals, of the plan. */
static void issue(kn_cc_t *c, const kn_lease_t *v, size_t n, const char **ours,
                  const kn_take_plan_t *plan, int64_t now) {
  parsed_t p = {NULL, NULL, 0};
  for (int pass = 0; pass < 2; pass++) {
    size_t cnt = pass ? plan->n_steal : plan->n_take;
    const size_t *idx = pass ? plan->steal : plan->take;
    for (size_t k = 0; k < cnt; k++)
      if (issue_one(c, v, n, &v[idx[k]], ours[idx[k]], pass, &p, now)) break;
  }
  free(p.ranges);
  kn_cc_done_free(p.done);
}

void kn_cc_tk_round(kn_cc_t *c, const kn_lease_t *v, size_t n,
                    const cc_op_t *seen, int64_t answered_ms, int64_t now) {
  c->tk.at = now + c->cfg.take_ms;
  c->tk.scanned = 1;
  c->tk.scan_epoch = seen->epoch;
  c->tk.scan_deaths = seen->deaths;
  c->tk.foreign = 0;
  kn_cc_ho_seen(c);
  check_held(c, v, n, seen->emit_ms, now);
  if (kn_cc_mb_hold(c, now)) return;
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
  kn_take_plan_t p;
  if (classify(c, w, ours, n, answered_ms, now)) {
    keep_pending(c, v, n, seen, answered_ms, now);
  } else if (plan(c, w, n, &p, now) == 0) {
    heirs(c, w, ours, n, &p, now);
    issue(c, v, n, ours, &p, now);
    if (c->mb.on) release_extra(c, w, ours, n, &p, now);
    kn_take_plan_free(&p);
  }
  free(w);
  free(ours);
}

/* A lease at the initial position whose family is read here: two syncs
 * straddled a reshard, one creating the parents, the other (with the
 * newer shard listing) the child at LATEST or AT_TIMESTAMP.  The child's
 * records follow the parents', so it is read from its start.  A take
 * planned from a listing knows (kn_cc_family_read), and so does a lease
 * handed over: the asker judged it on the listing it asked from (cc_in_t).
 * Its parents in the last listing tell as well: parents stay in the table
 * until their children have checkpointed. */
static int from_start(const kn_cc_t *c, const cc_op_t *o) {
  const kn_lease_t *t = &o->lease;
  if (!cc_at_initial(t)) return 0;
  if (o->from_start) return 1;
  for (size_t i = 0; i < t->n_parents; i++)
    if (kn_lease_observer_get(&c->obs, t->parents[i])) return 1;
  return 0;
}

/* START for l's tenure from lease t as taken; from its start when
 * from_start. */
static void start_reader(kn_cc_t *c, cc_lease_t *l, const kn_lease_t *t,
                         int from_start) {
  l->reading = 1;
  cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_START);
  if (!x) return;
  x->a.tenure = l->tenure;
  x->a.until_ms = l->until_ms;
  kn_cc_q_own(x, &x->a.key, l->key);
  if (kn_cc_q_own_lease(x, t) != 0) return;
  free(x->lease.owner);
  if (!(x->lease.owner = strdup(c->worker))) c->q.lost = 1;
  x->lease.counter = l->tenure;
  if (from_start) {
    /* (NULL, on out-of-memory, is the start too.) */
    free(x->lease.checkpoint);
    x->lease.checkpoint = strdup(KN_CKPT_TRIM_HORIZON);
    kn_cc_log(c, KN_CC_LOG_INFO,
              "shard %s is read from its start: a parent was read here",
              l->key);
  }
}

static void took(kn_cc_t *c, cc_op_t *o, int64_t counter, int64_t sent,
                 int64_t now) {
  const kn_lease_t *t = &o->lease;
  cc_lease_t *l = kn_cc_wr_begin(c, o->key, t, counter, sent, now);
  if (!l) return;
  if (c->closing || c->fatal || l->shard_end_written) {
    /* Too late to read it (or nothing left in it): handed back by pump. */
    l->reading = 0;
    return;
  }
  if (o->finished) {
    /* Read here already (its children have started): SHARD_END, then
     * released; cleanup removes it again. */
    kn_cc_log(c, KN_CC_LOG_WARN,
              "shard %s: its lease was created again after the shard was "
              "read (a create that landed late); closing it unread",
              o->key);
    l->reading = 0;
    l->ended = l->end_popped = 1;
    l->delivered[0] = '\0';
    kn_cc_wr_pump(c, l, now);
    return;
  }
  kn_cc_log(c, KN_CC_LOG_INFO, "%s shard %s (counter %lld, from %s)",
            o->purpose == T_STEAL    ? "stole"
            : o->purpose == T_HANDED ? "was handed"
                                     : "took",
            o->key, (long long)counter,
            t->checkpoint ? t->checkpoint : "the start");
  if (c->mb.lifted) {
    /* Heartbeats fail and this worker reads by its leases' deadlines,
     * which the others know from each lease's mark: this one has none
     * yet, and a worker they count dead loses an unmarked lease at once.
     * Its reader waits for the mark (the next renewal). */
    l->await_from_start = from_start(c, o);
    if (!(l->await = calloc(1, sizeof(*l->await))) ||
        kn_lease_copy(l->await, t)) {
      free(l->await);
      l->await = NULL;
      c->q.lost = 1;
      return;
    }
    kn_cc_log(c, KN_CC_LOG_WARN,
              "shard %s: heartbeats failing; read once its lease says so",
              o->key);
    kn_cc_wr_pump(c, l, now);
    return;
  }
  start_reader(c, l, t, from_start(c, o));
}

void kn_cc_tk_start_awaited(kn_cc_t *c, cc_lease_t *l) {
  if (!l->await) return;
  /* (Closing, it is handed back unread.) */
  if (l->held && !l->reading && !c->closing && !c->fatal)
    start_reader(c, l, l->await, l->await_from_start);
  kn_cc_wr_unawait(l);
}

void kn_cc_tk_news(kn_cc_t *c, int64_t now) {
  if (c->mb.view.deaths != c->tk.scan_deaths ||
      c->mb.view.epoch != c->tk.scan_epoch)
    c->tk.at = cc_min64(c->tk.at, now);
}

void kn_cc_tk_done(kn_cc_t *c, cc_op_t *o, const kn_error_t *err,
                   int64_t counter, int64_t sent, int64_t now) {
  switch (o->op) {
    case KN_CC_TAKE:
      if (err) {
        kn_cc_log(c, KN_CC_LOG_DEBUG, "take %s: %s", o->key,
                  kn_error_string(err));
        c->tk.idle = 0; /* it may have landed, or another took it: look */
      } else {
        kn_cc_ho_remove(c, o->key);
        took(c, o, counter, sent, now);
      }
      break;
    case KN_CC_HANDOFF:
      if (err) {
        kn_cc_log(c, KN_CC_LOG_DEBUG, "asking for %s: %s", o->key,
                  kn_error_string(err));
        c->tk.idle = 0;
      } else if (!c->closing && !c->fatal) {
        kn_cc_log(c, KN_CC_LOG_INFO, "asked %s for shard %s",
                  o->lease.owner ? o->lease.owner : "?", o->key);
        kn_cc_ho_add(c, o->key, o->lease.counter, o->from_start, now);
        c->tk.idle = 0;
      }
      break;
    case KN_CC_HANDOFF_DONE:
      if (err) break;
      cc_bump(c, now); /* to a worker perhaps long gone: look */
      kn_cc_log(c, KN_CC_LOG_INFO,
                "shard %s: passed on (asked for while "
                "an earlier run held it)",
                o->key);
      break;
    case KN_CC_RELEASE:
      if (err) break;
      kn_cc_log(c, KN_CC_LOG_INFO,
                "released shard %s (an earlier run of this worker held it)",
                o->key);
      cc_bump(c, now);
      break;
    default:
      break;
  }
}

/* When the next take round is due: once synced, none under way. */
int64_t kn_cc_tk_next_ms(const kn_cc_t *c) {
  if (c->closing || c->fatal || !c->sy.synced || c->tk.taking) return INT64_MAX;
  return c->tk.at;
}

void kn_cc_tk_tick(kn_cc_t *c, int64_t now) {
  if (c->closing || c->fatal || !c->sy.synced || c->tk.taking || now < c->tk.at)
    return;
  const char *why = take_reason(c, now);
  if (why && c->mb.on)
    kn_cc_log(c, KN_CC_LOG_DEBUG, "listing the lease table: %s", why);
  if (why)
    start_take(c, now);
  else
    c->tk.at = now + c->cfg.take_ms;
}

void kn_cc_tk_free(kn_cc_t *c) {
  kn_lease_array_free(c->tk.pend, c->tk.n_pend);
}
