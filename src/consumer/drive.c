/* The lease-mode driver without threads (drive.h): the core's actions
 * carried out through the world's operations, the world's answers fed to
 * the core as events, and every reader's deadline decided here. */
#include "consumer/drive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Test builds of the simulator set KN_DRIVE_MUTANT to break one rule on
 * purpose and show that the simulator's invariants catch it:
 * 1: readers are not told the heartbeat deadline (FENCE ignored);
 * 2: a hand-off goes on before the application has answered. */
#ifndef KN_DRIVE_MUTANT
#define KN_DRIVE_MUTANT 0
#endif

/* A tenure started here and not yet ended. */
typedef struct ten {
  char *key;
  int64_t tenure;
  int reading;         /* its reader runs (not yielded) */
  int late;            /* its deadline passed: the core hears of it */
  int64_t lease_until; /* the core's deadline for the lease (EXTEND) */
  int64_t told;        /* what the reader was given */
  int64_t counter;     /* the lease as last written (the view) */
  char *ckpt;          /* NULL: not known */
  int64_t subseq;
} ten_t;

/* A write for a tenure in flight: what it will have written once it
 * lands (the view follows). */
typedef struct call {
  uint64_t id;
  kn_cc_op_t op;
  char *key;
  int64_t tenure;
  char *ckpt;
  int64_t subseq;
} call_t;

/* An event to feed the core once the actions in hand are carried out. */
typedef struct later {
  char *key;
  int64_t tenure;
  int yielded; /* else: expired */
} later_t;

struct kn_drive {
  kn_cc_t *cc;
  const kn_drive_ops_t *ops;
  void *env;
  ten_t *ten;
  size_t n_ten, cap_ten;
  void **reqs; /* checkpoint requests with the core */
  size_t n_reqs, cap_reqs;
  later_t *later;
  size_t n_later, cap_later;
  call_t *calls;
  size_t n_calls, cap_calls;
  int64_t fence; /* FENCE's deadline; INT64_MAX: none */
  kn_err_t verdict;
  int stopping, closed;
};

/* The deadline a reader is given: the earlier of its lease's and the
 * heartbeat's. */
static int64_t earliest(const kn_drive_t *d, int64_t lease_until) {
#if KN_DRIVE_MUTANT == 1
  (void)d;
  return lease_until;
#else
  return lease_until < d->fence ? lease_until : d->fence;
#endif
}

static int grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 0;
  size_t c = *cap ? *cap * 2 : 8;
  void *p = realloc(*v, c * size);
  if (!p) return -1;
  *v = p;
  *cap = c;
  return 0;
}

static void fail(kn_drive_t *d, const char *what) {
  char msg[160];
  snprintf(msg, sizeof(msg), "out of memory (%s)", what);
  d->ops->fatal(d->env, KN_ERR__NOMEM, msg);
  kn_cc_fail(d->cc); /* the core would wait for ever: it stops */
}

/* ---- tenures ---- */

static ten_t *ten_find(kn_drive_t *d, const char *key, int64_t tenure) {
  for (size_t i = 0; i < d->n_ten; i++)
    if (strcmp(d->ten[i].key, key) == 0 &&
        (tenure < 0 || d->ten[i].tenure == tenure))
      return &d->ten[i];
  return NULL;
}

static void ten_remove(kn_drive_t *d, ten_t *t) {
  free(t->key);
  free(t->ckpt);
  *t = d->ten[--d->n_ten];
}

static void publish(kn_drive_t *d, const char *key, int64_t tenure, int held,
                    int64_t counter, const char *ckpt, int64_t subseq,
                    int changed) {
  kn_drive_view_t v = {held, counter, ckpt, subseq};
  if (d->ops->view) d->ops->view(d->env, key, tenure, &v, changed);
}

/* Writes whose outcome changes the view. */
static int viewed(kn_cc_op_t op) {
  return op == KN_CC_RENEW || op == KN_CC_CHECKPOINT || op == KN_CC_RELEASE ||
         op == KN_CC_HANDOFF_DONE;
}

static void remember(kn_drive_t *d, const kn_cc_action_t *a) {
  if (!viewed(a->op) || a->tenure < 0 || !a->key) return;
  if (grow((void **)&d->calls, &d->cap_calls, d->n_calls, sizeof(*d->calls)))
    return; /* only the statistics miss it */
  call_t *c = &d->calls[d->n_calls];
  memset(c, 0, sizeof(*c));
  c->id = a->id;
  c->op = a->op;
  c->tenure = a->tenure;
  c->subseq = a->subseq;
  if (!(c->key = strdup(a->key))) return;
  if (a->op == KN_CC_CHECKPOINT && a->checkpoint &&
      !(c->ckpt = strdup(a->checkpoint))) {
    free(c->key);
    return;
  }
  d->n_calls++;
}

/* A write landed (or failed): the view follows what landed. */
static void landed(kn_drive_t *d, const kn_drive_result_t *r) {
  size_t i = 0;
  while (i < d->n_calls && d->calls[i].id != r->id) i++;
  if (i == d->n_calls) return;
  call_t c = d->calls[i];
  d->calls[i] = d->calls[--d->n_calls];
  ten_t *t = r->err ? NULL : ten_find(d, c.key, c.tenure);
  if (t) {
    int changed = c.ckpt != NULL;
    t->counter = r->new_counter;
    if (changed) {
      free(t->ckpt);
      t->ckpt = c.ckpt;
      t->subseq = c.subseq;
      c.ckpt = NULL;
    }
    int held = c.op != KN_CC_RELEASE && c.op != KN_CC_HANDOFF_DONE;
    publish(d, t->key, t->tenure, held, t->counter, t->ckpt, t->subseq,
            changed);
    if (!held && !t->reading) ten_remove(d, t);
  }
  free(c.key);
  free(c.ckpt);
}

static void defer(kn_drive_t *d, const char *key, int64_t tenure, int yielded) {
  char *k = strdup(key);
  if (!k ||
      grow((void **)&d->later, &d->cap_later, d->n_later, sizeof(*d->later))) {
    free(k);
    /* Lost, the core would never end the tenure: it stops instead. */
    fail(d, "a reader's deadline");
    return;
  }
  d->later[d->n_later++] = (later_t){k, tenure, yielded};
}

/* Gives t's reader the deadline `until`, unless its own has passed: poll
 * may have dropped records since, so the tenure must end, not go on past
 * a gap. */
static void retime(kn_drive_t *d, ten_t *t, int64_t until) {
  if (!t->reading || t->late || until == t->told) return;
  int64_t now = d->ops->now(d->env);
  if (now >= t->told) {
    defer(d, t->key, t->tenure, 0);
    t->late = 1; /* told once; the tenure is still stopped as the core says */
    return;
  }
  t->told = until;
  d->ops->deadline(d->env, t->key, t->tenure, until);
  if (now >= until) { /* an earlier heartbeat deadline, already passed */
    defer(d, t->key, t->tenure, 0);
    t->late = 1;
  }
}

/* ---- actions ---- */

static void start(kn_drive_t *d, const kn_cc_action_t *a) {
  ten_t *t = ten_find(d, a->key, -1);
  if (!t) {
    if (grow((void **)&d->ten, &d->cap_ten, d->n_ten, sizeof(*d->ten))) {
      fail(d, "starting a shard");
      return;
    }
    t = &d->ten[d->n_ten];
    memset(t, 0, sizeof(*t));
    if (!(t->key = strdup(a->key))) {
      fail(d, "starting a shard");
      return;
    }
    d->n_ten++;
  }
  t->tenure = a->tenure;
  t->reading = 1;
  t->late = 0;
  t->counter = a->tenure;
  free(t->ckpt);
  t->ckpt =
      a->lease && a->lease->checkpoint ? strdup(a->lease->checkpoint) : NULL;
  t->subseq = a->lease ? a->lease->checkpoint_subseq : 0;
  t->lease_until = a->until_ms;
  t->told = earliest(d, a->until_ms);
  kn_cc_action_t s = *a;
  s.until_ms = t->told;
  if (d->ops->start(d->env, &s)) {
    char msg[160];
    snprintf(msg, sizeof(msg), "out of memory starting shard %s", a->key);
    d->ops->fatal(d->env, KN_ERR__NOMEM, msg);
    return;
  }
  publish(d, t->key, t->tenure, 1, t->counter, t->ckpt, t->subseq, 0);
}

static void stop(kn_drive_t *d, const kn_cc_action_t *a) {
  ten_t *t = ten_find(d, a->key, a->tenure);
  if (!t) return;
  publish(d, a->key, a->tenure, 0, t->counter, t->ckpt, t->subseq, 0);
  ten_remove(d, t);
  d->ops->stop(d->env, a->key, a->tenure, KN_DRIVE_LOST, a->reason, NULL);
}

static void yield(kn_drive_t *d, const kn_cc_action_t *a) {
  ten_t *t = ten_find(d, a->key, a->tenure);
  if (!t || !t->reading) return;
  /* The tenure stays until the application has answered: it may still
   * checkpoint. */
  t->reading = 0;
  d->ops->stop(d->env, a->key, a->tenure, KN_DRIVE_YIELD, KN_ERR__HANDOFF,
               a->old_owner);
#if KN_DRIVE_MUTANT == 2
  defer(d, a->key, a->tenure, 1);
#endif
}

static void done(kn_drive_t *d, const kn_cc_action_t *a) {
  ten_t *t = ten_find(d, a->key, -1);
  if (t && t->tenure != a->tenure) return; /* a later tenure reads it */
  if (t) ten_remove(d, t);
  publish(d, a->key, a->tenure, 0, -1, KN_CKPT_SHARD_END, 0, 1);
  d->ops->stop(d->env, a->key, a->tenure, KN_DRIVE_DONE, KN_ERR_NO_ERROR, NULL);
}

static void extend(kn_drive_t *d, const kn_cc_action_t *a) {
  ten_t *t = ten_find(d, a->key, a->tenure);
  if (!t) return;
  if (a->until_ms > t->lease_until) t->lease_until = a->until_ms;
  retime(d, t, earliest(d, t->lease_until));
}

static void fence(kn_drive_t *d, const kn_cc_action_t *a) {
  d->fence = a->until_ms;
  for (size_t i = 0; i < d->n_ten; i++)
    retime(d, &d->ten[i], earliest(d, d->ten[i].lease_until));
}

static void unlink_req(kn_drive_t *d, void *req) {
  for (size_t i = 0; i < d->n_reqs; i++)
    if (d->reqs[i] == req) {
      d->reqs[i] = d->reqs[--d->n_reqs];
      return;
    }
}

static void answer_all(kn_drive_t *d) {
  while (d->n_reqs)
    d->ops->reply(d->env, d->reqs[--d->n_reqs], KN_ERR__LEASE_LOST, NULL);
}

static void act(kn_drive_t *d, const kn_cc_action_t *a) {
  int keyed = a->op != KN_CC_LIST_LEASES && a->op != KN_CC_LIST_SHARDS &&
              a->op != KN_CC_CREATE && a->op != KN_CC_HEARTBEAT &&
              a->op != KN_CC_FENCE && a->op < KN_CC_REPLY;
  if ((keyed && !a->key) || (a->op == KN_CC_CREATE && !a->lease)) {
    fail(d, kn_cc_op_name(a->op)); /* the core could not copy them */
    return;
  }
  if (kn_cc_op_is_call(a->op)) {
    if (d->ops->submit(d->env, a))
      fail(d, kn_cc_op_name(a->op));
    else
      remember(d, a);
    return;
  }
  switch (a->op) {
    case KN_CC_START:
      start(d, a);
      break;
    case KN_CC_STOP:
      stop(d, a);
      break;
    case KN_CC_YIELD:
      yield(d, a);
      break;
    case KN_CC_DONE:
      done(d, a);
      break;
    case KN_CC_EXTEND:
      extend(d, a);
      break;
    case KN_CC_FENCE:
      fence(d, a);
      break;
    case KN_CC_REPLY:
      if (!a->req) break;
      unlink_req(d, a->req);
      d->ops->reply(d->env, a->req, a->reason,
                    a->reason == KN_ERR_NO_ERROR ? NULL
                    : a->err_msg                 ? a->err_msg
                                                 : kn_err2str(a->reason));
      break;
    case KN_CC_FATAL: {
      kn_err_t code = a->reason != KN_ERR_NO_ERROR    ? a->reason
                      : d->verdict != KN_ERR_NO_ERROR ? d->verdict
                                                      : KN_ERR__FAIL;
      d->stopping = 1; /* the core releases its leases itself */
      d->ops->fatal(d->env, code, a->err_msg ? a->err_msg : kn_err2str(code));
      break;
    }
    case KN_CC_CLOSED:
      d->closed = 1;
      answer_all(d); /* none is left with a core that stopped short */
      break;
    case KN_CC_LOG:
      d->ops->log(d->env, a->level, a->err_msg ? a->err_msg : "");
      break;
    default:
      break;
  }
}

/* Runs every action the core has decided.  An action may call for an
 * event of its own (a deadline that passed), fed once the actions in hand
 * are done, so the loop goes on until none is left. */
static void drain(kn_drive_t *d) {
  kn_cc_action_t a;
  for (;;) {
    while (kn_cc_next(d->cc, &a))
      if (!d->closed) act(d, &a); /* nothing after CLOSED */
    if (!d->n_later) break;
    later_t l = d->later[--d->n_later];
    if (kn_drive_live(d)) {
      int64_t now = d->ops->now(d->env);
      if (l.yielded)
        kn_cc_yielded(d->cc, l.key, l.tenure, NULL, now);
      else
        kn_cc_shard_expired(d->cc, l.key, l.tenure, now);
    }
    free(l.key);
  }
}

/* ---- life ---- */

kn_drive_t *kn_drive_new(const kn_cc_cfg_t *cfg, const kn_drive_ops_t *ops,
                         void *env) {
  kn_drive_t *d = calloc(1, sizeof(*d));
  if (!d) return NULL;
  d->ops = ops;
  d->env = env;
  d->fence = INT64_MAX;
  if (!(d->cc = kn_cc_new(cfg, ops->now(env)))) {
    free(d);
    return NULL;
  }
  return d;
}

void kn_drive_destroy(kn_drive_t *d) {
  if (!d) return;
  answer_all(d);
  kn_cc_destroy(d->cc);
  for (size_t i = 0; i < d->n_ten; i++) {
    free(d->ten[i].key);
    free(d->ten[i].ckpt);
  }
  for (size_t i = 0; i < d->n_later; i++) free(d->later[i].key);
  for (size_t i = 0; i < d->n_calls; i++) {
    free(d->calls[i].key);
    free(d->calls[i].ckpt);
  }
  free(d->calls);
  free(d->ten);
  free(d->reqs);
  free(d->later);
  free(d);
}

int kn_drive_live(const kn_drive_t *d) { return d && !d->closed; }
int kn_drive_stopping(const kn_drive_t *d) { return d->stopping; }
int kn_drive_closed(const kn_drive_t *d) { return d->closed; }
kn_err_t kn_drive_verdict(const kn_drive_t *d) { return d->verdict; }
const kn_cc_t *kn_drive_core(const kn_drive_t *d) { return d->cc; }

int64_t kn_drive_wake_ms(const kn_drive_t *d) {
  return kn_drive_live(d) ? kn_cc_wake_ms(d->cc) : INT64_MAX;
}

int64_t kn_drive_deadline(const kn_drive_t *d, const char *key,
                          int64_t tenure) {
  ten_t *t = ten_find((kn_drive_t *)d, key, tenure);
  return t && t->reading ? t->told : -1;
}

/* ---- events ---- */

void kn_drive_tick(kn_drive_t *d) {
  if (!kn_drive_live(d)) return;
  kn_cc_tick(d->cc, d->ops->now(d->env));
  drain(d);
}

void kn_drive_result(kn_drive_t *d, const kn_drive_result_t *r) {
  if (!d) return;
  if (r->err && !kn_error_is_retriable(r->err) &&
      kn_error_code(r->err) != KN_ERR_CONDITIONAL_CHECK_FAILED)
    d->verdict = kn_error_code(r->err);
  if (!kn_drive_live(d)) return;
  landed(d, r);
  int64_t now = d->ops->now(d->env);
  if (!r->err && r->roster) kn_cc_roster(d->cc, r->id, r->roster, now);
  if (!r->err && r->roster_refused) kn_cc_roster_refused(d->cc, r->id);
  switch (r->op) {
    case KN_CC_LIST_LEASES:
      kn_cc_leases_done(d->cc, r->id, r->err, r->err ? NULL : r->leases,
                        r->err ? 0 : r->n_leases, now);
      break;
    case KN_CC_LIST_SHARDS:
      kn_cc_shards_done(d->cc, r->id, r->err, r->err ? NULL : r->shards,
                        r->err ? 0 : r->n_shards, now);
      break;
    case KN_CC_GET:
      kn_cc_lease_got(d->cc, r->id, r->err, r->err ? NULL : r->got, now);
      break;
    case KN_CC_HEARTBEAT:
      kn_cc_members_done(d->cc, r->id, r->err, r->err ? NULL : r->members,
                         r->sent_ms, now);
      break;
    default:
      kn_cc_store_done(d->cc, r->id, r->err, r->err ? 0 : r->new_counter,
                       r->err ? NULL : r->handoff_to, r->sent_ms, now);
      break;
  }
  drain(d);
}

void kn_drive_shard_ended(kn_drive_t *d, const char *key, int64_t tenure,
                          const kn_cc_shard_t *children, size_t n) {
  if (!kn_drive_live(d)) return;
  kn_cc_shard_ended(d->cc, key, tenure, children, n, d->ops->now(d->env));
  drain(d);
}

void kn_drive_shard_gone(kn_drive_t *d, const char *key, int64_t tenure) {
  if (!kn_drive_live(d)) return;
  kn_cc_shard_gone(d->cc, key, tenure, d->ops->now(d->env));
  drain(d);
}

void kn_drive_expired(kn_drive_t *d, const char *key, int64_t tenure) {
  if (!kn_drive_live(d)) return;
  kn_cc_shard_expired(d->cc, key, tenure, d->ops->now(d->env));
  drain(d);
}

void kn_drive_delivered(kn_drive_t *d, const char *key, int64_t tenure,
                        const kn_cc_pos_t *pos, int end) {
  if (!kn_drive_live(d)) return;
  kn_cc_delivered(d->cc, key, tenure, pos, end, d->ops->now(d->env));
  drain(d);
}

void kn_drive_processed(kn_drive_t *d, const char *key, int64_t tenure,
                        const kn_cc_pos_t *pos) {
  if (!kn_drive_live(d) || !pos) return;
  kn_cc_processed(d->cc, key, tenure, pos, d->ops->now(d->env));
  drain(d);
}

void kn_drive_yielded(kn_drive_t *d, const char *key, int64_t tenure,
                      const kn_cc_pos_t *pos) {
  if (!kn_drive_live(d)) return;
#if KN_DRIVE_MUTANT == 2
  /* the mutant went on without the application: its answer is late */
  (void)key, (void)tenure, (void)pos;
  return;
#endif
  kn_cc_yielded(d->cc, key, tenure, pos, d->ops->now(d->env));
  drain(d);
}

void kn_drive_checkpoint(kn_drive_t *d, const char *key, const kn_cc_pos_t *pos,
                         int prepare, const void *state, size_t state_len,
                         void *req) {
  if (!kn_drive_live(d) || d->stopping) {
    d->ops->reply(d->env, req, KN_ERR__LEASE_LOST, NULL);
    return;
  }
  if (grow((void **)&d->reqs, &d->cap_reqs, d->n_reqs, sizeof(*d->reqs))) {
    d->ops->reply(d->env, req, KN_ERR__NOMEM, "out of memory");
    return;
  }
  d->reqs[d->n_reqs++] = req;
  kn_cc_checkpoint(d->cc, key, pos, prepare, state, state_len, req,
                   d->ops->now(d->env));
  drain(d);
}

void kn_drive_close(kn_drive_t *d) {
  if (!kn_drive_live(d) || d->stopping) return;
  d->stopping = 1;
  kn_cc_close(d->cc, d->ops->now(d->env));
  drain(d);
}
