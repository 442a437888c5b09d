/* The coordination core's per-lease writes: renewals, checkpoints,
 * releases, the owner's side of a hand-off, reading deadlines (cc_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/cc_int.h"
#include "kinesis/seqnum.h"

cc_lease_t *kn_cc_wr_find(kn_cc_t *c, const char *key) {
  return kn_strmap_get(&c->wr.lmap, key);
}

static cc_lease_t *lease_get(kn_cc_t *c, const char *key) {
  cc_lease_t *l = kn_cc_wr_find(c, key);
  if (l) return l;
  if (c->wr.n_ls == c->wr.cap_ls) {
    size_t cap = c->wr.cap_ls ? c->wr.cap_ls * 2 : 16;
    cc_lease_t **v = realloc(c->wr.ls, cap * sizeof(*v));
    if (!v) return NULL;
    c->wr.ls = v;
    c->wr.cap_ls = cap;
  }
  l = calloc(1, sizeof(*l));
  if (!l || !(l->key = strdup(key)) || kn_strmap_put(&c->wr.lmap, l->key, l)) {
    if (l) free(l->key);
    free(l);
    return NULL;
  }
  c->wr.ls[c->wr.n_ls++] = l;
  return l;
}

/* A tenure begins: the entry of key as the take (counter, sent at sent)
 * left lease t; not reading yet.  NULL on out-of-memory. */
cc_lease_t *kn_cc_wr_begin(kn_cc_t *c, const char *key, const kn_lease_t *t,
                           int64_t counter, int64_t sent, int64_t now) {
  cc_lease_t *l = lease_get(c, key);
  if (!l) return NULL;
  kn_cc_wr_unawait(l);
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
  cc_set_str(l->ckpt, cc_is_seq(t->checkpoint) ||
                              (t->checkpoint &&
                               strcmp(t->checkpoint, KN_CKPT_SHARD_END) == 0)
                          ? t->checkpoint
                          : "");
  l->ckpt_sub = t->checkpoint_subseq > 0 ? t->checkpoint_subseq : 0;
  l->processed[0] = l->delivered[0] = '\0';
  l->ended = l->end_popped = 0;
  l->shard_end_written = kn_lease_is_shard_end(t);
  l->marked = 0; /* a take removes the mark */
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
    kn_cc_reply(c, r->req, code, msg);
    kn_cc_req_free(r);
  }
  l->reqs_tail = NULL;
}

/* The tenure's reading ends (STOP): the reader stops, the application
 * hears of it. */
void kn_cc_wr_stop_reading(kn_cc_t *c, cc_lease_t *l, kn_err_t reason) {
  if (!l->reading) return;
  l->reading = 0;
  cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_STOP);
  if (!x) return;
  x->a.tenure = l->tenure;
  x->a.reason = reason;
  kn_cc_q_own(x, &x->a.key, l->key);
}

void kn_cc_wr_unawait(cc_lease_t *l) {
  if (!l->await) return;
  kn_lease_clear(l->await);
  free(l->await);
  l->await = NULL;
}

/* The lease is no longer ours to write. */
void kn_cc_wr_drop(kn_cc_t *c, cc_lease_t *l, kn_err_t reason) {
  if (reason == KN_ERR__TIMED_OUT && l->held) c->wr.unsure = 1;
  kn_cc_wr_stop_reading(c, l, reason);
  kn_cc_wr_unawait(l);
  l->held = 0;
  free(l->handoff_to);
  l->handoff_to = NULL;
  c->tk.idle = 0; /* a take round decides what happens to it */
  fail_reqs(c, l, KN_ERR__LEASE_LOST);
}

static int after_ckpt(const cc_lease_t *l, const char *seq, int64_t sub) {
  if (!cc_is_seq(l->ckpt)) return 1;
  return kn_seqpos_cmp(seq, (uint64_t)sub, l->ckpt, (uint64_t)l->ckpt_sub) > 0;
}

static void write_ckpt(kn_cc_t *c, cc_lease_t *l, const char *ckpt, int64_t sub,
                       cc_req_t *req, int64_t now) {
  cc_op_t *o = kn_cc_op_new(c, KN_CC_CHECKPOINT, l->key, l->tenure, now);
  if (!o) {
    if (req) kn_cc_reply(c, req->req, KN_ERR__NOMEM, "out of memory");
    kn_cc_req_free(req);
    return;
  }
  cc_set_str(o->ckpt, ckpt);
  o->ckpt_sub = sub;
  o->req = req;
  cc_act_t *x = kn_cc_call(c, o);
  if (!x) return;
  x->a.counter = l->counter;
  if (req && req->prepare) {
    kn_cc_q_own(x, &x->a.pending, req->seq);
    x->a.pending_subseq = req->subseq;
    x->a.state = req->state;
    x->a.state_len = req->state_len;
  } else {
    kn_cc_q_own(x, &x->a.checkpoint, ckpt);
    x->a.subseq = sub;
  }
  l->busy = o->id;
}

/* The application's checkpoints first, in order: those at or behind the
 * table's checkpoint are answered at once, the next is written.  1 when
 * a write went out. */
static int next_req(kn_cc_t *c, cc_lease_t *l, int64_t now) {
  while (l->reqs) {
    cc_req_t *r = l->reqs;
    l->reqs = r->next;
    if (!l->reqs) l->reqs_tail = NULL;
    if (!r->prepare &&
        (l->shard_end_written || !after_ckpt(l, r->seq, r->subseq))) {
      kn_cc_reply(c, r->req, KN_ERR_NO_ERROR, NULL);
      kn_cc_req_free(r);
      continue;
    }
    write_ckpt(c, l, r->prepare ? NULL : r->seq, r->subseq, r, now);
    return 1;
  }
  return 0;
}

/* A write of the lease on its counter (RENEW, RELEASE, HANDOFF_DONE);
 * mark: kn_cc_action_t.mark of a RENEW. */
static void lease_call_mark(kn_cc_t *c, cc_lease_t *l, kn_cc_op_t op, int mark,
                            int64_t now) {
  cc_op_t *o = kn_cc_op_new(c, op, l->key, l->tenure, now);
  if (o) o->mark = mark;
  cc_act_t *x = o ? kn_cc_call(c, o) : NULL;
  if (x) {
    x->a.counter = l->counter;
    x->a.mark = mark;
  }
  if (o) l->busy = o->id;
}

static void lease_call(kn_cc_t *c, cc_lease_t *l, kn_cc_op_t op, int64_t now) {
  lease_call_mark(c, l, op, 0, now);
}

/* Starts the next write the lease needs, if none is in flight. */
void kn_cc_wr_pump(kn_cc_t *c, cc_lease_t *l, int64_t now) {
  if (!l->held || l->busy) return;
  /* Most calls find nothing to do (a worker may hold thousands): no
   * request, no end, no hand-off, not closing, no renewal due. */
  int failing = cc_beat_failing(c, now);
  if (!l->reqs && !l->ended && !l->handoff_to && !l->shard_end_written &&
      !c->closing && !c->fatal && now < l->next_renew_ms &&
      failing == l->marked)
    return;
  /* Heartbeats failing: the mark goes first, before the heartbeat's
   * deadline (kn_cc_mb_relift).  Heartbeats back: it goes at once, so
   * that a death soon after is judged by the membership again (a marked
   * lease of a dead worker waits a lease duration of listings). */
  if (failing != l->marked && !l->shard_end_written && !l->handoff_to &&
      !l->failed_write && !c->mb.no_mark && (failing || c->mb.ok)) {
    lease_call_mark(c, l, KN_CC_RENEW, failing ? 1 : 2, now);
    return;
  }
  if (next_req(c, l, now)) return;
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
    lease_call(c, l, op, now);
    return;
  }
  if (now >= l->next_renew_ms) lease_call(c, l, KN_CC_RENEW, now);
}

void kn_cc_wr_pump_all(kn_cc_t *c, int64_t now) {
  for (size_t i = 0; i < c->wr.n_ls; i++) kn_cc_wr_pump(c, c->wr.ls[i], now);
}

/* The owner's side: another worker asked for l. */
void kn_cc_wr_begin_handoff(kn_cc_t *c, cc_lease_t *l, const char *to,
                            int64_t now) {
  if (l->handoff_to || !l->held) return;
  if (!(l->handoff_to = strdup(to))) return;
  l->handoff_since = now;
  l->yielded = !l->reading;
  kn_cc_log(c, KN_CC_LOG_INFO, "shard %s: %s asks for it: handing it over",
            l->key, to);
  if (!l->reading) return;
  l->reading = 0;
  cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_YIELD);
  if (!x) return;
  x->a.tenure = l->tenure;
  kn_cc_q_own(x, &x->a.key, l->key);
  kn_cc_q_own(x, &x->a.old_owner, to);
}

/* A write failed (not refused): tried again soon, or, closing, the
 * lease is given up. */
static void write_failed(kn_cc_t *c, cc_lease_t *l, const cc_op_t *o,
                         cc_req_t *req, const kn_error_t *err, int64_t now) {
  if (req) {
    char msg[512];
    snprintf(msg, sizeof(msg), "shard %s: checkpoint: %s", l->key,
             kn_error_string(err));
    kn_cc_reply(c, req->req, kn_error_code(err), msg);
    kn_cc_req_free(req);
  } else if (o->op == KN_CC_CHECKPOINT && strcmp(o->ckpt, KN_CKPT_SHARD_END)) {
    l->flush_due = 1;
  }
  kn_cc_log(c, KN_CC_LOG_WARN, "shard %s: %s: %s%s", l->key,
            kn_cc_op_name(o->op), kn_error_string(err),
            o->op == KN_CC_RENEW ? " (still held)" : "");
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
}

/* A hand-off done: the lease is the next owner's. */
static void passed_on(kn_cc_t *c, cc_lease_t *l, int64_t now) {
  kn_cc_wr_unawait(l);
  /* Passed on to a worker that died meanwhile: the others look; one
   * alive now is watched for a while (kn_cc_mb_watch_asker). */
  if (l->handoff_to && (!kn_mview_get(&c->mb.view, l->handoff_to) ||
                        kn_mview_is_dead(&c->mb.view, l->handoff_to)))
    cc_bump(c, now);
  else if (l->handoff_to && c->mb.on)
    kn_cc_mb_watch_asker(c, l->handoff_to, now);
  l->held = 0;
  fail_reqs(c, l, KN_ERR__LEASE_LOST);
  kn_cc_log(c, KN_CC_LOG_INFO, "handed shard %s over to %s at %s", l->key,
            l->handoff_to ? l->handoff_to : "?",
            l->ckpt[0] ? l->ckpt : "its checkpoint");
  free(l->handoff_to);
  l->handoff_to = NULL;
}

static void released(kn_cc_t *c, cc_lease_t *l, int64_t now) {
  kn_cc_wr_unawait(l);
  l->held = 0;
  fail_reqs(c, l, KN_ERR__LEASE_LOST);
  cc_bump(c, now); /* free, or its children ready: the others look */
  if (!l->shard_end_written) {
    kn_cc_log(c, KN_CC_LOG_INFO, "released shard %s", l->key);
    return;
  }
  l->reading = 0;
  cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_DONE);
  if (x) {
    x->a.tenure = l->tenure;
    kn_cc_q_own(x, &x->a.key, l->key);
  }
  c->tk.at = now; /* its children may be ready */
  c->tk.idle = 0;
}

/* A write succeeded: the lease is renewed, and what the write was for is
 * done. */
static void written(kn_cc_t *c, cc_lease_t *l, const cc_op_t *o, cc_req_t *req,
                    int64_t counter, const char *handoff_to, int64_t sent,
                    int64_t now) {
  l->counter = counter;
  l->failed_write = 0;
  if (sent + c->grace_ms > l->until_ms) l->until_ms = sent + c->grace_ms;
  l->next_renew_ms = sent + c->cfg.renew_ms;
  if (l->reading) {
    cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_EXTEND);
    if (x) {
      x->a.tenure = l->tenure;
      x->a.until_ms = l->until_ms;
      kn_cc_q_own(x, &x->a.key, l->key);
    }
  }
  if (o->op == KN_CC_CHECKPOINT) {
    if (o->ckpt[0]) {
      cc_set_str(l->ckpt, o->ckpt);
      l->ckpt_sub = o->ckpt_sub;
    }
    if (strcmp(o->ckpt, KN_CKPT_SHARD_END) == 0) {
      l->shard_end_written = 1;
      kn_cc_log(c, KN_CC_LOG_INFO, "shard %s finished: SHARD_END checkpointed",
                l->key);
    }
    if (req) kn_cc_reply(c, req->req, KN_ERR_NO_ERROR, NULL);
    kn_cc_req_free(req);
    /* A checkpoint stands for the renewal of its slot: it brings news of
     * a hand-off as well. */
    if (handoff_to && l->held && !l->shard_end_written)
      kn_cc_wr_begin_handoff(c, l, handoff_to, now);
  } else if (o->op == KN_CC_HANDOFF_DONE) {
    passed_on(c, l, now);
  } else if (o->op == KN_CC_RENEW && o->mark) {
    l->marked = o->mark == 1;
    kn_cc_mb_relift(c, now);
    /* The others judge it by its renewals now: its reader may start. */
    if (l->marked) kn_cc_tk_start_awaited(c, l);
  } else if (o->op == KN_CC_RENEW && handoff_to && l->held) {
    kn_cc_wr_begin_handoff(c, l, handoff_to, now);
  } else if (o->op == KN_CC_RELEASE) {
    released(c, l, now);
  }
}

/* A write refused after one that failed: the failed one may have landed
 * (a time-out, a connection cut after the request went out), moving the
 * counter one past what this tenure knows.  The lease is looked at
 * before it is given up.  Returns 1 when the GET went out (l stays busy
 * with it). */
static int verify(kn_cc_t *c, cc_lease_t *l, const cc_op_t *o, int64_t now) {
  if (o->op != KN_CC_RENEW && o->op != KN_CC_CHECKPOINT) return 0;
  cc_op_t *g = kn_cc_op_new(c, KN_CC_GET, l->key, l->tenure, now);
  if (!g) return 0;
  g->purpose = P_VERIFY;
  if (!kn_cc_call(c, g)) return 0;
  l->busy = g->id;
  kn_cc_log(c, KN_CC_LOG_INFO,
            "shard %s: %s refused after a write that failed: looking at "
            "the lease",
            l->key, kn_cc_op_name(o->op));
  return 1;
}

void kn_cc_wr_verified(kn_cc_t *c, const cc_op_t *o, const kn_error_t *err,
                       const kn_lease_t *t, int64_t now) {
  cc_lease_t *l = kn_cc_wr_find(c, o->key);
  if (!l || l->tenure != o->tenure || l->busy != o->id || !l->held) {
    if (l && l->busy == o->id) l->busy = 0;
    return;
  }
  l->busy = 0;
  /* Still this tenure's: in its name (or, during a hand-off, as its
   * checkpointOwner) and exactly one write past what it knows. */
  const char *holder = t && t->checkpoint_owner ? t->checkpoint_owner
                       : t                      ? t->owner
                                                : NULL;
  if (!err && t && cc_is_me(c, holder) && t->counter == l->counter + 1) {
    kn_cc_log(c, KN_CC_LOG_INFO,
              "shard %s: the write that failed had landed (counter %lld)",
              l->key, (long long)t->counter);
    l->counter = t->counter;
    if (t->checkpoint && kn_cc_lease_started(t) &&
        strcmp(t->checkpoint, KN_CKPT_SHARD_END) != 0 &&
        strlen(t->checkpoint) < SEQ_CAP &&
        after_ckpt(l, t->checkpoint, t->checkpoint_subseq)) {
      cc_set_str(l->ckpt, t->checkpoint);
      l->ckpt_sub = t->checkpoint_subseq;
    }
    l->next_renew_ms = now; /* the refused write goes again */
    kn_cc_wr_pump(c, l, now);
    return;
  }
  if (err && kn_error_code(err) != KN_ERR__NOT_FOUND) {
    /* Unknown still: looked at again at the next write. */
    l->next_renew_ms = now + c->cfg.renew_ms / 3;
    return;
  }
  kn_cc_log(c, KN_CC_LOG_WARN, "shard %s: lease taken by another worker",
            l->key);
  kn_cc_wr_drop(c, l, KN_ERR__LEASE_LOST);
}

void kn_cc_wr_done(kn_cc_t *c, cc_op_t *o, const kn_error_t *err,
                   int64_t counter, const char *handoff_to, int64_t sent,
                   int64_t now) {
  cc_lease_t *l = kn_cc_wr_find(c, o->key);
  cc_req_t *req = o->req;
  o->req = NULL;
  if (!l || l->tenure != o->tenure || l->busy != o->id || !l->held) {
    /* A write of an ended tenure: whatever it did, this one ignores it. */
    if (l && l->busy == o->id) l->busy = 0;
    if (req)
      kn_cc_reply(c, req->req, KN_ERR__LEASE_LOST,
                  "lease lost; checkpoint not written");
    kn_cc_req_free(req);
    return;
  }
  l->busy = 0;
  if (cc_is_cond(err) && l->failed_write && !c->closing && !c->fatal &&
      verify(c, l, o, now)) {
    /* Held back until the lease is seen (kn_cc_wr_verified). */
    if (req) {
      req->next = l->reqs;
      l->reqs = req;
      if (!l->reqs_tail) l->reqs_tail = req;
    }
    return;
  }
  if (cc_is_cond(err)) {
    kn_cc_log(c, KN_CC_LOG_WARN,
              "shard %s: %s refused: lease taken by another "
              "worker",
              l->key, kn_cc_op_name(o->op));
    if (req)
      kn_cc_reply(c, req->req, KN_ERR__LEASE_LOST,
                  "lease taken by another "
                  "worker; checkpoint not written");
    kn_cc_req_free(req);
    kn_cc_wr_drop(c, l, KN_ERR__LEASE_LOST);
    return;
  }
  if (err && o->op == KN_CC_RENEW && o->mark &&
      kn_error_code(err) == KN_ERR__UNSUPPORTED) {
    /* The store keeps no mark: heartbeats failing stop reading at
     * their deadline, as ever. */
    if (!c->mb.no_mark)
      kn_cc_log(c, KN_CC_LOG_INFO, "%s", kn_error_string(err));
    c->mb.no_mark = 1;
    l->next_renew_ms = now;
    return;
  }
  if (err)
    write_failed(c, l, o, req, err, now);
  else
    written(c, l, o, req, counter, handoff_to, sent, now);
}

size_t kn_cc_held(const kn_cc_t *c) {
  size_t n = 0;
  for (size_t i = 0; i < c->wr.n_ls; i++) n += c->wr.ls[i]->held;
  return n;
}

/* When the leases held want the time next: their reading deadlines (and
 * the heartbeat's, with membership), hand-offs given time to finish,
 * renewals, and the next checkpoint flush. */
int64_t kn_cc_wr_next_ms(const kn_cc_t *c) {
  int64_t t = c->closing || c->fatal ? INT64_MAX : c->wr.flush_at;
  int fence = cc_beat_fenced(c);
  if (c->mb.stale_until) t = cc_min64(t, c->mb.stale_until);
  if (c->mb.on && c->mb.ok && !c->mb.no_mark && !c->closing && !c->fatal)
    for (size_t i = 0; i < c->wr.n_ls; i++)
      if (c->wr.ls[i]->held && !c->wr.ls[i]->marked && !c->wr.ls[i]->busy &&
          !c->wr.ls[i]->shard_end_written && !c->wr.ls[i]->handoff_to &&
          !c->wr.ls[i]->failed_write) {
        t = cc_min64(
            t, c->mb.ok_sent_ms + c->cfg.renew_ms + c->cfg.renew_ms / 2 + 1);
        break;
      }
  for (size_t i = 0; i < c->wr.n_ls; i++) {
    const cc_lease_t *l = c->wr.ls[i];
    if (!l->held) continue;
    t = cc_min64(t, fence ? cc_min64(l->until_ms, c->mb.until) : l->until_ms);
    /* The hand-off's time limit, until the application has answered (the
     * tick looks no further: waking for it then would find nothing). */
    if (l->handoff_to && !l->yielded)
      t = cc_min64(t, l->handoff_since + c->cfg.handoff_ms);
    if (!l->busy) t = cc_min64(t, l->next_renew_ms);
  }
  return t;
}

/* The deadlines that passed; a flush due marks every lease (the writes
 * themselves go out with kn_cc_wr_pump_all). */
void kn_cc_wr_tick(kn_cc_t *c, int64_t now) {
  /* Without a heartbeat for grace_ms the others may count this worker
   * dead and take its leases: it stops reading first. */
  kn_cc_mb_relift(c, now);
  if (c->mb.stale_until && now >= c->mb.stale_until) {
    c->mb.stale_until = 0; /* forgotten by now: a worker without beats */
    c->tk.idle = 0;
    kn_cc_mb_fence(c);
  }
  int fenced = cc_beat_fenced(c) && now >= c->mb.until;
  for (size_t i = 0; i < c->wr.n_ls; i++) {
    cc_lease_t *l = c->wr.ls[i];
    if (l->held && (now >= l->until_ms || fenced)) {
      kn_cc_log(c, KN_CC_LOG_WARN,
                "shard %s: %s not written within %lld ms: stopped reading it",
                l->key, now >= l->until_ms ? "lease" : "heartbeat",
                (long long)c->grace_ms);
      kn_cc_wr_drop(c, l, KN_ERR__TIMED_OUT);
    } else if (l->held && l->handoff_to && !l->yielded &&
               now - l->handoff_since >= c->cfg.handoff_ms) {
      /* The application has not finished in time: what it processed is
       * checkpointed, the rest is read again by the next owner. */
      kn_cc_log(c, KN_CC_LOG_WARN,
                "shard %s: the application did not finish "
                "within %lld ms: handing it over as it is",
                l->key, (long long)c->cfg.handoff_ms);
      l->yielded = 1;
    }
  }
  if (!c->closing && !c->fatal && now >= c->wr.flush_at) {
    for (size_t i = 0; i < c->wr.n_ls; i++) c->wr.ls[i]->flush_due = 1;
    c->wr.flush_at = now + c->cfg.checkpoint_ms;
  }
}

void kn_cc_wr_free(kn_cc_t *c) {
  for (size_t i = 0; i < c->wr.n_ls; i++) {
    cc_lease_t *l = c->wr.ls[i];
    while (l->reqs) {
      cc_req_t *r = l->reqs;
      l->reqs = r->next;
      kn_cc_req_free(r);
    }
    free(l->handoff_to);
    kn_cc_wr_unawait(l);
    free(l->key);
    free(l);
  }
  free(c->wr.ls);
  kn_strmap_free(&c->wr.lmap);
}
