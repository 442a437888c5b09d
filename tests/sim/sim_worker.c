/* Workers: the consumer's own driver each (consumer/drive.h, with the
 * real coordination core inside), its operations carried out against the
 * simulated store and stream, simulated readers (batches from the lease's
 * checkpoint, the reading deadline, the shard's end) and the simulated
 * application (polls, processed positions, checkpoints). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sim.h"
#include "util/str.h"

int64_t sim_wnow(const sim_t *s, int w) { return s->now + s->wk[w].off; }

static const kn_drive_ops_t *drive_ops(void);

/* Messages to the control thread (see post()). */
enum {
  CTL_DELIVERED,
  CTL_PROCESSED,
  CTL_YIELDED,
  CTL_CHECKPOINT,
  CTL_EXPIRED,
  CTL_GONE,
  CTL_CLOSE
};
typedef struct sim_ctl {
  int what;
  char key[24];
  int64_t tenure;
  char seq[32]; /* "" for none */
  int end;
  uint64_t req;
} sim_ctl_t;

static void post(sim_t *s, int w, int what, const char *key, int64_t tenure,
                 const char *seq, int end, uint64_t req);

static void schedule_tick(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  int64_t wake = kn_drive_wake_ms(k->dr);
  if (wake == INT64_MAX) return;
  int64_t t = wake - k->off;
  if (t < s->now) t = s->now;
  if (k->tick_at >= 0 && k->tick_at <= t) return;
  k->tick_at = t;
  sim_push(s, t, EV_TICK, w, k->inc, t, 0, NULL);
}

void sim_worker_start(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  k->inc++;
  k->alive = 1;
  k->closing = k->closed = k->close_fault = 0;
  k->fault_t = -1;
  k->hb_fault_t = -1;
  k->tick_at = -1;
  k->frozen_until = 0;
  k->off = sim_range(&s->rng, 1000, 100000000);
  k->crashed = k->dying = 0;
  k->stall_until = 0;
  k->ctl_pending = 0;
  k->env.s = s;
  k->env.w = w;
  kn_cc_cfg_t cfg = s->cfg;
  cfg.worker = k->id;
  cfg.auto_checkpoint = k->auto_ckpt;
  cfg.beat_base = (int64_t)(sim_rand(&s->rng) >> 2);
  k->dr = kn_drive_new(&cfg, drive_ops(), &k->env);
  sim_trace(s, w, "start", k->id, k->inc, k->auto_ckpt);
  if (!k->dr) {
    sim_violate(s, "kn_drive_new refused a valid configuration");
    k->alive = 0;
    return;
  }
  sim_push(s, s->now + sim_range(&s->rng, 10, 300), EV_POLL, w, k->inc, 0, 0,
           NULL);
  sim_worker_after(s, w);
}

void sim_worker_drop_drive(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  k->dying = 1; /* the requests it answers go nowhere */
  kn_drive_destroy(k->dr);
  k->dr = NULL;
  k->dying = 0;
}

static void remove_reader(sim_worker_t *k, size_t i) {
  k->rd[i] = k->rd[--k->n_rd];
}

void sim_worker_kill(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  if (!k->alive) return;
  sim_flag_tenures(s, w, TEN_KILLED);
  k->n_rd = 0;
  k->n_proc = 0;
  k->n_yields = 0;
  sim_worker_drop_drive(s, w);
  k->alive = 0;
  k->inc++;
  k->tick_at = -1;
  sim_trace(s, w, "kill", NULL, k->inc, 0);
}

static void app_checkpoint(sim_t *s, int w, const char *key, const char *seq,
                           int64_t last);
static void answer_yields(sim_t *s, int w);

void sim_worker_stall(sim_t *s, int w, int freeze, int64_t ms) {
  sim_worker_t *k = &s->wk[w];
  if (freeze)
    k->frozen_until = s->now + ms;
  else if (s->now + ms > k->stall_until)
    k->stall_until = s->now + ms;
  for (size_t i = 0; i < k->n_rd; i++) s->ten[k->rd[i].ten].flags |= TEN_FROZEN;
  for (size_t i = 0; i < s->n_ten; i++)
    if (s->ten[i].w == w && s->ten[i].inc == k->inc &&
        !(s->ten[i].flags & (TEN_RELEASED | TEN_DONE)))
      s->ten[i].flags |= TEN_FROZEN;
  s->had_fault = 1;
  sim_trace(s, w, freeze ? "freeze" : "stall", NULL, s->now + ms, 0);
}

void sim_worker_close(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  if (!k->alive || k->closing) return;
  k->closing = 1;
  k->close_t = s->now;
  sim_trace(s, w, "close", NULL, k->inc, 0);
  /* The application is done with what it was handed: with
   * auto-checkpoint closing says so (kn_consumer_close); with its own
   * checkpoints it writes them first. */
  if (k->auto_ckpt) {
    for (size_t i = 0; i < k->n_proc; i++)
      post(s, w, CTL_PROCESSED, k->proc[i].key, k->proc[i].tenure,
           k->proc[i].seq, 0, 0);
    k->n_proc = 0;
  } else {
    for (size_t i = 0; i < k->n_rd; i++) {
      sim_reader_t *r = &k->rd[i];
      if (r->last < 0 || r->last <= r->ckpted) continue;
      r->ckpted = r->last;
      app_checkpoint(s, w, r->key, s->sh[r->shard].rec[r->last].seq, r->last);
    }
  }
  answer_yields(s, w);
  post(s, w, CTL_CLOSE, "", -1, NULL, 0, 0);
  sim_worker_after(s, w);
}

/* After CLOSED: nothing is read any more and, unless the store failed
 * meanwhile, no lease is left in this worker's name. */
static void closed(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  if (k->n_rd)
    sim_violate(s, "w%d: CLOSED while it still reads %s", w, k->rd[0].key);
  /* only the tenures running when the close began: leases of an earlier
   * life under the same id, or dropped before, do not count; nor does a
   * close shortly after a failed store call (a write that landed but
   * answered a time-out leaves the core a counter behind) */
  if (k->fault_t >= 0 && k->fault_t >= k->close_t - s->cfg.duration_ms)
    k->close_fault = 1;
  for (size_t t = 0; t < s->n_ten && !k->close_fault; t++) {
    /* A tenure dropped at the very moment of the close (a freeze ended
     * both) is not the close's to release either; nor one whose control
     * thread stalled past its heartbeat deadline (the core then gives the
     * lease up without a write: others may already count it dead). */
    if (s->ten[t].w != w || s->ten[t].inc != k->inc ||
        (s->ten[t].end_t >= 0 && s->ten[t].end_t < k->close_t) ||
        (s->ten[t].flags & (TEN_DROPPED | TEN_FROZEN)))
      continue;
    int li = sim_store_find(s, s->sh[s->ten[t].shard].id);
    const kn_lease_t *l = li >= 0 ? &s->table[li] : NULL;
    if (l && l->owner && strcmp(l->owner, k->id) == 0)
      sim_violate(s, "w%d: CLOSED but still owns the lease of %s", w, l->key);
  }
  sim_worker_drop_drive(s, w);
  k->alive = 0;
  k->inc++;
  k->tick_at = -1;
  k->n_proc = 0;
  k->n_yields = 0;
  /* A redeploy (KN_SIM_NEW_IDS=1): half the workers closed gracefully
   * come back under a new id (drawn from a hash, not the stream of draws:
   * the other runs stay as they were); the old id's membership entries
   * remain until the leader forgets them, and what it left in its name
   * goes to the others. */
  uint64_t h = (s->o.seed ^ ((uint64_t)w << 20) ^ (uint64_t)k->inc) *
               0x9e3779b97f4a7c15ULL;
  const char *ni = getenv("KN_SIM_NEW_IDS");
  if (ni && *ni == '1' && (h >> 40) & 1 && !s->o.scenario)
    snprintf(k->id, sizeof(k->id), "w%d.%d", w, k->inc % 1000);
  sim_push(s, s->now + sim_range(&s->rng, 0, 20000), EV_RESTART, w, 0, 0, 0,
           NULL);
}

static sim_reader_t *find_reader(sim_worker_t *k, const char *key,
                                 int64_t tenure, size_t *idx) {
  for (size_t i = 0; i < k->n_rd; i++)
    if (strcmp(k->rd[i].key, key) == 0 &&
        (tenure < 0 || k->rd[i].tenure == tenure)) {
      if (idx) *idx = i;
      return &k->rd[i];
    }
  return NULL;
}

static char **copy_strv(char *const *v, size_t n) {
  if (!n) return NULL;
  char **c = calloc(n, sizeof(*c));
  for (size_t i = 0; i < n; i++) c[i] = kn_strdup0(v[i]);
  return c;
}

static void store_call(sim_t *s, int w, const kn_cc_action_t *a) {
  sim_worker_t *k = &s->wk[w];
  sim_call_t *c = calloc(1, sizeof(*c));
  if (!c) abort();
  c->w = w;
  c->inc = k->inc;
  c->id = a->id;
  c->op = a->op;
  c->tenure = a->tenure;
  c->counter = a->counter;
  c->mark = a->mark;
  c->sent_ms = sim_wnow(s, w);
  c->sent_t = s->now;
  c->key = kn_strdup0(a->key);
  c->old_owner = kn_strdup0(a->old_owner);
  c->owner = kn_strdup0(k->id);
  if (a->op == KN_CC_CREATE && a->lease) {
    if (kn_lease_copy(&c->lease, a->lease)) abort();
    if (!c->key) c->key = kn_strdup0(a->lease->key);
  }
  if (a->op == KN_CC_CHECKPOINT) {
    c->ckpt = kn_strdup0(a->checkpoint);
    c->subseq = a->subseq;
    c->pending = kn_strdup0(a->pending);
    c->pending_subseq = a->pending_subseq;
    if (a->state && a->state_len) {
      c->state = malloc(a->state_len);
      memcpy(c->state, a->state, a->state_len);
      c->state_len = a->state_len;
    }
  }
  if (a->op == KN_CC_SET_CHILDREN) {
    c->children = copy_strv(a->children, a->n_children);
    c->n_children = a->n_children;
  }
  c->leave = -1;
  c->roster = a->roster;
  if (a->op == KN_CC_HEARTBEAT) {
    c->beat = a->beat;
    c->leases = a->leases;
    c->bump = a->bump;
    c->children = copy_strv(a->forget, a->n_forget);
    c->n_children = a->n_forget;
    c->bucket = a->bucket;
    c->leave = a->leave;
    c->probe = a->probe;
    c->publish_n = a->publish_n;
    c->digest = kn_strdup0(a->digest);
    if (a->forget_bucket && a->n_forget) {
      c->forget_bucket = malloc(a->n_forget * sizeof(int));
      if (!c->forget_bucket) abort();
      memcpy(c->forget_bucket, a->forget_bucket, a->n_forget * sizeof(int));
    }
  }
  sim_trace(
      s, w, kn_cc_op_name(a->op), c->key, (int64_t)a->id,
      a->op == KN_CC_HEARTBEAT ? a->bucket * 100 + a->leave + 1 : a->counter);
  sim_fault_store(s, c);
}

static void start_reader(sim_t *s, int w, const kn_cc_action_t *a) {
  sim_worker_t *k = &s->wk[w];
  int sh = sim_shard_find(s, a->key);
  sim_trace(s, w, "START", a->key, a->tenure, a->until_ms - sim_wnow(s, w));
  if (sh < 0) {
    sim_violate(s, "w%d: START of unknown shard %s", w, a->key);
    return;
  }
  sim_check_start(s, w, a, sh);
  if (s->n_ten == s->cap_ten) {
    s->cap_ten = s->cap_ten ? s->cap_ten * 2 : 64;
    s->ten = realloc(s->ten, s->cap_ten * sizeof(*s->ten));
    if (!s->ten) abort();
  }
  sim_ten_t *t = &s->ten[s->n_ten];
  memset(t, 0, sizeof(*t));
  t->shard = sh;
  t->w = w;
  t->inc = k->inc;
  t->tenure = a->tenure;
  t->start_t = s->now;
  t->end_t = -1;
  if (a->tenure < s->sh[sh].cur_tenure) t->flags |= TEN_STALE;
  if (strcmp(k->slow_take, a->key) == 0) t->flags |= TEN_STORE_FAULT;
  /* Just after its control thread stalled, its heartbeat may be past
   * its deadline: what it takes now it may have to drop at once. */
  if (k->stall_until && s->now - k->stall_until <= 2 * s->cfg.duration_ms)
    t->flags |= TEN_FROZEN;
  /* Its heartbeats failing, the worker may stop reading it soon. */
  if (k->hb_fault_t >= 0 && s->now - k->hb_fault_t <= 2 * s->cfg.duration_ms)
    t->flags |= TEN_STORE_FAULT;
  if (find_reader(k, a->key, -1, NULL))
    sim_violate(s, "w%d: START of %s tenure %lld while a reader runs", w,
                a->key, (long long)a->tenure);
  if (k->n_rd == k->cap_rd) {
    k->cap_rd = k->cap_rd ? k->cap_rd * 2 : 8;
    k->rd = realloc(k->rd, k->cap_rd * sizeof(*k->rd));
    if (!k->rd) abort();
  }
  sim_reader_t *r = &k->rd[k->n_rd++];
  memset(r, 0, sizeof(*r));
  r->serial = s->next_serial++;
  r->shard = sh;
  r->ten = (int)s->n_ten++;
  memcpy(r->key, s->sh[sh].id, sizeof(r->key));
  r->tenure = a->tenure;
  r->until_ms = a->until_ms;
  r->next = sim_start_index(s, sh, a->lease ? a->lease->checkpoint : NULL);
  r->last = -1;
  r->ckpted = -1;
  sim_push(s, s->now + sim_range(&s->rng, 1, 200), EV_READER, w, k->inc,
           r->serial, 0, NULL);
}

static void end_tenure(sim_t *s, int w, const char *key, int64_t tenure,
                       int flag) {
  sim_worker_t *k = &s->wk[w];
  size_t i;
  sim_reader_t *r = find_reader(k, key, tenure, &i);
  if (!r) return;
  s->ten[r->ten].flags |= flag;
  s->ten[r->ten].end_t = s->now;
  remove_reader(k, i);
}

/* ---- the drive's operations ---- */

#define ENV_WORKER(env, s, w, k) \
  struct sim_env *e_ = (env);    \
  sim_t *s = e_->s;              \
  int w = e_->w;                 \
  sim_worker_t *k = &s->wk[w];

/* A crash between two actions of one decision: what the drive asks after
 * it is lost; the worker dies once the drive returns. */
static int gone(sim_t *s, sim_worker_t *k) {
  if (k->dying || k->crashed) return 1;
  if (s->faults_on && s->o.faults >= 1 && sim_chance(&s->rng, 2)) {
    k->crashed = 1;
    return 1;
  }
  return 0;
}

static int64_t op_now(void *env) {
  ENV_WORKER(env, s, w, k);
  (void)k;
  return sim_wnow(s, w);
}

static int op_submit(void *env, const kn_cc_action_t *a) {
  ENV_WORKER(env, s, w, k);
  if (gone(s, k)) return 0;
  if (a->op != KN_CC_LIST_SHARDS) {
    store_call(s, w, a);
    return 0;
  }
  int fail = s->faults_on && s->o.faults >= 2 && sim_chance(&s->rng, 30);
  sim_trace(s, w, "LIST_SHARDS", NULL, (int64_t)a->id, 0);
  sim_push(s, s->now + sim_latency(s), EV_SHARDS_REPLY, w, k->inc,
           (int64_t)a->id, fail, NULL);
  return 0;
}

static int op_start(void *env, const kn_cc_action_t *a) {
  ENV_WORKER(env, s, w, k);
  if (!gone(s, k)) start_reader(s, w, a);
  return 0;
}

static void yield_reader(sim_t *s, int w, const char *key, int64_t tenure) {
  sim_worker_t *k = &s->wk[w];
  sim_reader_t *r;
  sim_trace(s, w, "YIELD", key, tenure, 0);
  if (!(r = find_reader(k, key, tenure, NULL))) return;
  if (k->n_yields == k->cap_yields) {
    k->cap_yields = k->cap_yields ? k->cap_yields * 2 : 8;
    k->yields = realloc(k->yields, k->cap_yields * sizeof(*k->yields));
    if (!k->yields) abort();
  }
  sim_yield_t *y = &k->yields[k->n_yields++];
  memcpy(y->key, r->key, sizeof(y->key));
  y->tenure = r->tenure;
  y->seq[0] = 0;
  /* manual checkpoints: what the application has not checkpointed
   * yet is checkpointed when it answers */
  if (r->last >= 0 && (k->auto_ckpt || r->last > r->ckpted))
    memcpy(y->seq, s->sh[r->shard].rec[r->last].seq, sizeof(y->seq));
  end_tenure(s, w, key, tenure, TEN_STOPPED);
}

static int still_ours(const sim_t *s, const sim_worker_t *k, const char *key,
                      int64_t tenure) {
  int i = sim_store_find(s, key), sh = sim_shard_find(s, key);
  if (i < 0 || sh < 0 || !s->table[i].owner) return 0;
  const char *holder = s->table[i].checkpoint_owner
                           ? s->table[i].checkpoint_owner
                           : s->table[i].owner;
  return strcmp(holder, k->id) == 0 && s->sh[sh].cur_tenure == tenure;
}

static void op_stop(void *env, const char *key, int64_t tenure,
                    kn_drive_stop_t why, kn_err_t reason,
                    const char *next_owner) {
  ENV_WORKER(env, s, w, k);
  (void)next_owner;
  if (gone(s, k)) return;
  switch (why) {
    case KN_DRIVE_YIELD:
      yield_reader(s, w, key, tenure);
      break;
    case KN_DRIVE_LOST:
      sim_trace(s, w, "STOP", key, tenure, reason);
      if (reason == KN_ERR__LEASE_LOST && still_ours(s, k, key, tenure)) {
        /* Given up although the table still says this tenure holds it
         * (its counter fell behind a write of its own). */
        s->stale_lost++;
        sim_trace(s, w, "stale_lost", key, tenure, 0);
      }
      end_tenure(s, w, key, tenure,
                 TEN_STOPPED | (reason == KN_ERR__LEASE_LOST ||
                                        reason == KN_ERR__TIMED_OUT
                                    ? TEN_DROPPED
                                    : 0));
      break;
    case KN_DRIVE_DONE:
      sim_trace(s, w, "DONE", key, tenure, 0);
      end_tenure(s, w, key, tenure, TEN_DONE);
      break;
  }
}

static void op_deadline(void *env, const char *key, int64_t tenure,
                        int64_t until_ms) {
  ENV_WORKER(env, s, w, k);
  sim_reader_t *r;
  if (gone(s, k)) return;
  if ((r = find_reader(k, key, tenure, NULL))) r->until_ms = until_ms;
}

static void op_reply(void *env, void *req, kn_err_t code, const char *msg) {
  ENV_WORKER(env, s, w, k);
  (void)msg;
  if (gone(s, k)) return;
  sim_trace(s, w, "REPLY", NULL, (int64_t)(uintptr_t)req, code);
  if (code) k->ckpt_retry = 1;
}

static void op_fatal(void *env, kn_err_t code, const char *msg) {
  ENV_WORKER(env, s, w, k);
  (void)k;
  sim_violate(s, "w%d: FATAL (%s): %s", w, kn_err2name(code), msg);
}

static void op_log(void *env, int level, const char *msg) {
  ENV_WORKER(env, s, w, k);
  if (gone(s, k)) return;
  if (level >= KN_CC_LOG_INFO) sim_trace_msg(s, w, msg);
}

static const kn_drive_ops_t sim_drive_ops = {
    .now = op_now,
    .submit = op_submit,
    .start = op_start,
    .stop = op_stop,
    .deadline = op_deadline,
    .reply = op_reply,
    .fatal = op_fatal,
    .log = op_log,
};

static const kn_drive_ops_t *drive_ops(void) { return &sim_drive_ops; }

void sim_worker_after(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  if (!k->alive || !k->dr) return;
  if (k->crashed) {
    sim_worker_kill(s, w);
    s->had_fault = 1;
    sim_push(s, s->now + sim_range(&s->rng, 0, 20000), EV_RESTART, w, 0, 0, 0,
             NULL);
    return;
  }
  if (kn_drive_closed(k->dr)) {
    sim_trace(s, w, "CLOSED", NULL, 0, 0);
    if (k->closing) {
      k->closed = 1;
      closed(s, w);
      return;
    }
  }
  schedule_tick(s, w);
}

/* A failed write for a held lease may cost that tenure its checkpoint or
 * its lease: duplicates after it are the store's doing. */
void sim_flag_store_fault(sim_t *s, int w, const char *key) {
  sim_worker_t *k = &s->wk[w];
  s->had_fault = 1;
  if (k->closing) k->close_fault = 1;
  k->fault_t = s->now;
  if (!key) return;
  /* the running tenure of key, and one that stopped lately (a close or a
   * hand-off whose last checkpoint this was) */
  for (size_t i = s->n_ten; i-- > 0;) {
    sim_ten_t *t = &s->ten[i];
    if (t->w != w || t->inc != k->inc || strcmp(s->sh[t->shard].id, key) != 0)
      continue;
    if (t->end_t < 0 || s->now - t->end_t <= 2 * s->cfg.duration_ms)
      t->flags |= TEN_STORE_FAULT;
  }
}

void sim_flag_call_fault(sim_t *s, const sim_call_t *c) {
  if (c->op != KN_CC_HEARTBEAT) {
    sim_flag_store_fault(s, c->w, c->key);
    return;
  }
  sim_worker_t *k = &s->wk[c->w];
  sim_flag_store_fault(s, c->w, NULL);
  k->hb_fault_t = s->now;
  for (size_t i = s->n_ten; i-- > 0;) {
    sim_ten_t *t = &s->ten[i];
    if (t->w == c->w && t->inc == k->inc &&
        (t->end_t < 0 || s->now - t->end_t <= 2 * s->cfg.duration_ms))
      t->flags |= TEN_STORE_FAULT;
  }
}

static void store_reply(sim_t *s, int w, sim_call_t *c) {
  sim_worker_t *k = &s->wk[w];
  kn_error_t *err = NULL;
  if (c->fate == FATE_FAIL)
    err = sim_chance(&s->rng, 500)
              ? kn_error_new(KN_ERR_THROTTLING, "simulated throttling")
              : kn_error_new(KN_ERR_SERVICE_UNAVAILABLE, "simulated 503");
  else if (c->fate != FATE_OK)
    err = kn_error_new(KN_ERR__TIMED_OUT, "simulated time-out");
  else if (c->rc)
    err = kn_error_new(c->rc, "simulated conditional check failed");
  /* a failure, or an answer that took over a second, is a store fault */
  if (c->fate != FATE_OK || sim_wnow(s, w) - c->sent_ms > 1000)
    sim_flag_call_fault(s, c);
  sim_trace(s, w, c->op == KN_CC_LIST_LEASES ? "leases_done" : "store_done",
            c->key, (int64_t)c->id, err ? kn_error_code(err) : 0);
  int64_t now = sim_wnow(s, w);
  if (c->op == KN_CC_TAKE) {
    int slow = now - c->sent_ms > 1000;
    if (slow)
      memcpy(k->slow_take, c->key, strlen(c->key) + 1);
    else if (strcmp(k->slow_take, c->key) == 0)
      k->slow_take[0] = 0;
  }
  kn_drive_result_t res = {
      .id = c->id,
      .op = c->op,
      .err = err,
      .leases = c->list,
      .n_leases = c->n_list,
      .got = &c->got,
      .members = &c->members,
      .roster = c->has_roster ? &c->roster_m : NULL,
      .new_counter = c->new_counter,
      .handoff_to = c->handoff_to,
      .sent_ms = c->sent_ms,
  };
  kn_drive_result(k->dr, &res);
  kn_error_destroy(err);
}

/* ---- messages to the control thread ----
 *
 * Readers and the application reach the drive through the control
 * thread's queue.  While that thread is busy (a stall: a slow store
 * answer, a fan-out check) they wait in order; readers and polls go on,
 * judging their deadlines themselves. */
static int stalled(const sim_t *s, const sim_worker_t *k) {
  return s->now < k->stall_until || k->ctl_pending;
}

static void run_ctl(sim_t *s, int w, const sim_ctl_t *m) {
  sim_worker_t *k = &s->wk[w];
  kn_cc_pos_t pos = {m->seq, 0};
  const kn_cc_pos_t *pp = m->seq[0] ? &pos : NULL;
  switch (m->what) {
    case CTL_DELIVERED:
      kn_drive_delivered(k->dr, m->key, m->tenure, pp, m->end);
      break;
    case CTL_PROCESSED:
      kn_drive_processed(k->dr, m->key, m->tenure, pp);
      break;
    case CTL_YIELDED:
      kn_drive_yielded(k->dr, m->key, m->tenure, pp);
      break;
    case CTL_CHECKPOINT:
      kn_drive_checkpoint(k->dr, m->key, pp, 0, NULL, 0,
                          (void *)(uintptr_t)m->req);
      break;
    case CTL_EXPIRED:
      kn_drive_expired(k->dr, m->key, m->tenure);
      break;
    case CTL_GONE:
      kn_drive_shard_gone(k->dr, m->key, m->tenure);
      break;
    case CTL_CLOSE:
      kn_drive_close(k->dr);
      break;
  }
}

static void post(sim_t *s, int w, int what, const char *key, int64_t tenure,
                 const char *seq, int end, uint64_t req) {
  sim_worker_t *k = &s->wk[w];
  sim_ctl_t m = {.what = what, .tenure = tenure, .end = end, .req = req};
  snprintf(m.key, sizeof(m.key), "%s", key);
  snprintf(m.seq, sizeof(m.seq), "%s", seq ? seq : "");
  if (!stalled(s, k)) {
    run_ctl(s, w, &m);
    return;
  }
  sim_ctl_t *p = malloc(sizeof(*p));
  if (!p) abort();
  *p = m;
  k->ctl_pending++;
  sim_push(s, s->now > k->stall_until ? s->now : k->stall_until, EV_CTL, w,
           k->inc, 0, 0, p);
}

static void reader_step(sim_t *s, int w, int64_t serial) {
  sim_worker_t *k = &s->wk[w];
  size_t i;
  for (i = 0; i < k->n_rd && k->rd[i].serial != serial; i++) {
  }
  if (i == k->n_rd || k->rd[i].finished) return;
  sim_reader_t *r = &k->rd[i];
  int64_t now = sim_wnow(s, w);
  if (now >= r->until_ms) {
    char key[24];
    int64_t tenure = r->tenure;
    memcpy(key, r->key, sizeof(key));
    /* Past its deadline the tenure is dropped, as a STOP for a time-out
     * would drop it: no longer the worker's to release. */
    s->ten[r->ten].flags |= TEN_STOPPED | TEN_DROPPED;
    s->ten[r->ten].end_t = s->now;
    remove_reader(k, i);
    sim_trace(s, w, "shard_expired", key, tenure, 0);
    post(s, w, CTL_EXPIRED, key, tenure, NULL, 0, 0);
    return;
  }
  sim_shard_t *h = &s->sh[r->shard];
  if (h->gone) {
    char key[24];
    int64_t tenure = r->tenure;
    memcpy(key, r->key, sizeof(key));
    /* gone: an end of its own */
    s->ten[r->ten].flags |= TEN_STOPPED | TEN_ENDED;
    s->ten[r->ten].end_t = s->now;
    remove_reader(k, i);
    sim_trace(s, w, "shard_gone", key, tenure, 0);
    post(s, w, CTL_GONE, key, tenure, NULL, 0, 0);
    return;
  }
  sim_check_reading(s, w, r);
  size_t avail = h->n > r->next ? h->n - r->next : 0;
  size_t take = (size_t)sim_range(&s->rng, 1, 60);
  if (take > avail) take = avail;
  for (size_t j = 0; j < take; j++) {
    sim_check_delivery(s, w, r, r->next);
    r->last = (int)r->next++;
  }
  int end = h->closed && r->next >= h->n;
  if (take || end) {
    sim_trace(s, w, end ? "delivered_end" : "delivered", r->key, r->tenure,
              (int64_t)take);
    post(s, w, CTL_DELIVERED, r->key, r->tenure,
         r->last >= 0 ? h->rec[r->last].seq : NULL, end, 0);
    if (take && k->auto_ckpt) {
      if (k->n_proc == k->cap_proc) {
        k->cap_proc = k->cap_proc ? k->cap_proc * 2 : 8;
        k->proc = realloc(k->proc, k->cap_proc * sizeof(*k->proc));
        if (!k->proc) abort();
      }
      sim_proc_t *p = &k->proc[k->n_proc++];
      memcpy(p->key, r->key, sizeof(p->key));
      p->tenure = r->tenure;
      memcpy(p->seq, h->rec[r->last].seq, sizeof(p->seq));
    }
  }
  if (end) {
    r->finished = 1;
    int64_t d = sim_range(&s->rng, 0, 600);
    if (s->sc && s->sc->ended_delay)
      d += s->sc->ended_delay(s, w, r->key, r->tenure);
    sim_push(s, s->now + d, EV_ENDED, w, k->inc, r->shard, r->ten, NULL);
  } else {
    int64_t d = sim_range(&s->rng, 50, 1000);
    if (sim_chance(&s->rng, 20)) d += sim_range(&s->rng, 1000, 5000);
    sim_push(s, s->now + d, EV_READER, w, k->inc, serial, 0, NULL);
  }
}

static void ended(sim_t *s, int w, int shard, int ten) {
  sim_worker_t *k = &s->wk[w];
  sim_ten_t *t = &s->ten[ten];
  kn_cc_shard_t ch[2];
  size_t n = 0;
  if (s->child_shards)
    for (int j = 0; j < s->sh[shard].n_children; j++)
      sim_shard_desc(s, s->sh[shard].children[j], &ch[n++]);
  t->flags |= TEN_ENDED;
  sim_trace(s, w, "shard_ended", s->sh[shard].id, t->tenure, (int64_t)n);
  kn_drive_shard_ended(k->dr, s->sh[shard].id, t->tenure, ch, n);
}

static void app_checkpoint(sim_t *s, int w, const char *key, const char *seq,
                           int64_t last) {
  sim_worker_t *k = &s->wk[w];
  k->reqs++;
  sim_trace(s, w, "app_checkpoint", key, (int64_t)k->reqs, last);
  post(s, w, CTL_CHECKPOINT, key, -1, seq, 0, k->reqs);
}

/* The hand-offs asked since the last poll: the application is done with
 * what it was handed (with its own checkpoints, it checkpoints it). */
static void answer_yields(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  for (size_t i = 0; i < k->n_yields; i++) {
    sim_yield_t *y = &k->yields[i];
    if (!k->auto_ckpt && y->seq[0]) app_checkpoint(s, w, y->key, y->seq, -1);
    sim_trace(s, w, "yielded", y->key, y->tenure, 0);
    post(s, w, CTL_YIELDED, y->key, y->tenure, k->auto_ckpt ? y->seq : NULL, 0,
         0);
  }
  k->n_yields = 0;
}

static void poll(sim_t *s, int w) {
  sim_worker_t *k = &s->wk[w];
  if (k->auto_ckpt) {
    for (size_t i = 0; i < k->n_proc; i++)
      post(s, w, CTL_PROCESSED, k->proc[i].key, k->proc[i].tenure,
           k->proc[i].seq, 0, 0);
    k->n_proc = 0;
    answer_yields(s, w);
  } else {
    answer_yields(s, w);
    int retry = k->ckpt_retry;
    k->ckpt_retry = 0;
    int quiet = !s->faults_on;
    if (retry || sim_chance(&s->rng, quiet ? 600 : 200))
      for (size_t i = 0; i < k->n_rd; i++) {
        sim_reader_t *r = &k->rd[i];
        if (r->last < 0 || (r->last <= r->ckpted && !retry)) continue;
        r->ckpted = r->last;
        app_checkpoint(s, w, r->key, s->sh[r->shard].rec[r->last].seq, r->last);
      }
  }
  sim_push(s, s->now + sim_range(&s->rng, 50, 500), EV_POLL, w, k->inc, 0, 0,
           NULL);
}

void sim_worker_event(sim_t *s, const sim_ev_t *ev) {
  int w = ev->w;
  sim_worker_t *k = &s->wk[w];
  if (!k->alive || ev->inc != k->inc) {
    sim_ev_free(ev);
    return;
  }
  if (s->now < k->frozen_until) {
    /* its events wait; its clock jumps when it wakes */
    int64_t t = k->frozen_until;
    if (ev->kind == EV_TICK) {
      if (ev->a != k->tick_at) return;
      k->tick_at = t;
      sim_push(s, t, EV_TICK, w, ev->inc, t, 0, NULL);
    } else {
      sim_push(s, t, ev->kind, w, ev->inc, ev->a, ev->b, ev->p);
    }
    return;
  }
  if (s->now < k->stall_until &&
      (ev->kind == EV_TICK || ev->kind == EV_STORE_REPLY ||
       ev->kind == EV_SHARDS_REPLY || ev->kind == EV_ENDED ||
       ev->kind == EV_CTL)) {
    /* the control thread is busy: its work waits, readers go on */
    if (ev->kind == EV_TICK) {
      if (ev->a != k->tick_at) return;
      k->tick_at = k->stall_until;
    }
    sim_push(s, k->stall_until, ev->kind, w, ev->inc,
             ev->kind == EV_TICK ? k->stall_until : ev->a, ev->b, ev->p);
    return;
  }
  switch (ev->kind) {
    case EV_TICK: {
      if (ev->a != k->tick_at) return;
      k->tick_at = -1;
      uint64_t idle = kn_cc_idle_ticks(kn_drive_core(k->dr));
      kn_drive_tick(k->dr);
      /* Woken for nothing (nothing done, the wake-up where it was): a
       * driver would spin. */
      if (k->dr && kn_cc_idle_ticks(kn_drive_core(k->dr)) != idle)
        sim_violate(s, "w%d: the core woke at %lld for nothing", w,
                    (long long)sim_wnow(s, w));
      break;
    }
    case EV_CTL:
      k->ctl_pending--;
      run_ctl(s, w, ev->p);
      free(ev->p);
      break;
    case EV_STORE_REPLY:
      store_reply(s, w, ev->p);
      sim_call_free(ev->p);
      break;
    case EV_SHARDS_REPLY: {
      kn_drive_result_t res = {.id = (uint64_t)ev->a, .op = KN_CC_LIST_SHARDS};
      kn_cc_shard_t *v = NULL;
      kn_error_t *err = NULL;
      sim_trace(s, w, "shards_done", NULL, ev->a, ev->b);
      if (ev->b)
        err = kn_error_new(KN_ERR_LIMIT_EXCEEDED, "simulated");
      else
        sim_list_shards(s, &v, &res.n_shards);
      res.err = err;
      res.shards = v;
      kn_drive_result(k->dr, &res);
      kn_error_destroy(err);
      free(v);
      break;
    }
    case EV_READER:
      reader_step(s, w, ev->a);
      break;
    case EV_ENDED:
      ended(s, w, (int)ev->a, (int)ev->b);
      break;
    case EV_POLL:
      poll(s, w);
      break;
    default:
      break;
  }
  sim_worker_after(s, w);
}
