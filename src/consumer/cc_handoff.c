/* The coordination core's hand-offs asked for: a lease asked of its
 * owner is watched until passed on, then taken (cc_int.h). */
#include <stdlib.h>
#include <string.h>

#include "consumer/cc_int.h"

cc_in_t *kn_cc_ho_find(kn_cc_t *c, const char *key) {
  for (size_t i = 0; i < c->ho.n_in; i++)
    if (strcmp(c->ho.in[i].key, key) == 0) return &c->ho.in[i];
  return NULL;
}

void kn_cc_ho_remove(kn_cc_t *c, const char *key) {
  cc_in_t *x = kn_cc_ho_find(c, key);
  if (!x) return;
  free(x->key);
  *x = c->ho.in[--c->ho.n_in];
}

/* Whether the owner of listed lease t answers when asked for it: a live
 * member, or a KCL 3.x worker (owner_hands_over).  Another owner (a KCL
 * 2.x worker) never would: asked, it keeps reading the shard, its
 * checkpoints are refused, and the lease stays unread here for handoff_ms.
 * Without membership nobody can tell: everyone is asked. */
int kn_cc_ho_answers(const kn_cc_t *c, const kn_lease_t *t) {
  if (!c->mb.on || t->owner_hands_over) return 1;
  const kn_mview_ent_t *e = kn_mview_get(&c->mb.view, t->owner);
  return e && !e->dead;
}

/* Non-zero when owner, seen in no view, has been so for a lease duration
 * of views (first asked about now, it has not).  A member that a leader
 * with a stale view forgot is missing from the views until its next
 * heartbeat, within a renewal interval; one whose heartbeats fail stops
 * reading within the grace.  So an owner missing that long is no member
 * that reads: a worker of another kind (a KCL 2.x). */
int kn_cc_ho_foreign(kn_cc_t *c, const char *owner, int64_t now) {
  for (size_t i = 0; i < c->ho.n_fg; i++)
    if (strcmp(c->ho.fg[i].worker, owner) == 0)
      return c->mb.view_sent_ms - c->ho.fg[i].since >= c->cfg.duration_ms;
  if (c->ho.n_fg == c->ho.cap_fg) {
    size_t cap = c->ho.cap_fg ? c->ho.cap_fg * 2 : 4;
    cc_foreign_t *v = realloc(c->ho.fg, cap * sizeof(*v));
    if (!v) return 0; /* asked for later */
    c->ho.fg = v;
    c->ho.cap_fg = cap;
  }
  char *w = strdup(owner);
  if (!w) return 0;
  c->ho.fg[c->ho.n_fg].worker = w;
  c->ho.fg[c->ho.n_fg++].since = now;
  return 0;
}

/* Forgets the owners a view shows as members again. */
void kn_cc_ho_seen(kn_cc_t *c) {
  for (size_t i = 0; i < c->ho.n_fg;) {
    if (kn_mview_get(&c->mb.view, c->ho.fg[i].worker)) {
      free(c->ho.fg[i].worker);
      c->ho.fg[i] = c->ho.fg[--c->ho.n_fg];
    } else {
      i++;
    }
  }
}

/* Starts watching a lease asked for. */
void kn_cc_ho_add(kn_cc_t *c, const char *key, int64_t counter, int from_start,
                  int64_t now) {
  if (kn_cc_ho_find(c, key)) return;
  if (c->ho.n_in == c->ho.cap_in) {
    size_t cap = c->ho.cap_in ? c->ho.cap_in * 2 : 8;
    cc_in_t *v = realloc(c->ho.in, cap * sizeof(*v));
    if (!v) return; /* the lease expires and is taken the ordinary way */
    c->ho.in = v;
    c->ho.cap_in = cap;
  }
  cc_in_t *x = &c->ho.in[c->ho.n_in];
  memset(x, 0, sizeof(*x));
  if (!(x->key = strdup(key))) return;
  x->counter = counter;
  x->from_start = from_start;
  x->since_ms = x->changed_ms = now;
  x->next_ms = now + c->ho.watch_ms;
  c->ho.n_in++;
}

/* The leases asked for are looked at every watch_ms (GET). */
void kn_cc_ho_tick(kn_cc_t *c, int64_t now) {
  if (c->closing || c->fatal) return;
  for (size_t i = 0; i < c->ho.n_in; i++) {
    cc_in_t *x = &c->ho.in[i];
    if (x->busy || now < x->next_ms) continue;
    cc_op_t *o = kn_cc_op_new(c, KN_CC_GET, x->key, -1, now);
    if (o && kn_cc_call(c, o)) x->busy = o->id;
  }
}

/* Takes a lease in this worker's name at the end of a hand-off;
 * from_start: its family is read here (cc_in_t). */
static void take_handed(kn_cc_t *c, const kn_lease_t *t, int from_start,
                        int64_t now) {
  cc_op_t *o = kn_cc_op_new(c, KN_CC_TAKE, t->key, -1, now);
  if (!o) return;
  o->purpose = T_HANDED;
  o->from_start = from_start;
  if (kn_lease_copy(&o->lease, t)) {
    kn_cc_op_free(kn_cc_op_take(c, o->id));
    return;
  }
  cc_act_t *x = kn_cc_call(c, o);
  if (!x) return;
  x->a.counter = t->counter;
  kn_cc_q_own(x, &x->a.old_owner, c->worker);
}

/* The answer to GET for a lease asked for (key). */
int kn_cc_ho_got(kn_cc_t *c, uint64_t id, const char *key,
                 const kn_error_t *err, const kn_lease_t *t, int64_t now) {
  cc_in_t *x = kn_cc_ho_find(c, key);
  if (!x || x->busy != id) return 0;
  x->busy = 0;
  x->next_ms = now + c->ho.watch_ms;
  if (c->closing || c->fatal) return 1;
  if (err && kn_error_code(err) != KN_ERR__NOT_FOUND) return 0; /* again */
  if (err || !t || !cc_is_me(c, t->owner)) {
    kn_cc_log(c, KN_CC_LOG_INFO,
              "shard %s: no longer handed to this worker%s%s", x->key,
              t && t->owner ? " (now " : "", t && t->owner ? t->owner : "");
    kn_cc_ho_remove(c, x->key);
    return 0;
  }
  if (t->counter != x->counter) {
    x->counter = t->counter;
    x->changed_ms = now;
  }
  int passed = !t->checkpoint_owner;
  int silent = now - x->changed_ms >= c->cfg.duration_ms;
  /* One clock for the hand-off: the owner's.  It learns of the ask from
   * a renewal answered after it, and gives its application handoff_ms
   * from then; that renewal is answered within a lease duration of the
   * ask, or the owner has stopped reading the shard (its reading deadline
   * is its last good write plus the grace, under a lease duration).  So
   * the asker waits that much longer: an application that finishes in
   * time has its final checkpoint taken, and nothing is read twice. */
  int late = now - x->since_ms >= c->cfg.handoff_ms + c->cfg.duration_ms;
  if (!passed && !silent && !late) return 0;
  if (!passed)
    kn_cc_log(c, KN_CC_LOG_WARN,
              "shard %s: %s did not hand it over (%s): "
              "taking it",
              t->key, t->checkpoint_owner,
              silent ? "no renewal for a lease duration" : "hand-off too long");
  int from_start = x->from_start;
  kn_cc_ho_remove(c, t->key);
  if (!kn_cc_take_in_flight(c, t->key)) take_handed(c, t, from_start, now);
  return 0;
}

int64_t kn_cc_ho_next_ms(const kn_cc_t *c) {
  int64_t t = INT64_MAX;
  if (c->closing || c->fatal) return t;
  for (size_t i = 0; i < c->ho.n_in; i++)
    if (!c->ho.in[i].busy) t = cc_min64(t, c->ho.in[i].next_ms);
  return t;
}

void kn_cc_ho_free(kn_cc_t *c) {
  for (size_t i = 0; i < c->ho.n_in; i++) free(c->ho.in[i].key);
  free(c->ho.in);
  for (size_t i = 0; i < c->ho.n_fg; i++) free(c->ho.fg[i].worker);
  free(c->ho.fg);
}
