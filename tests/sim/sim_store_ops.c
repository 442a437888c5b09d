/* The simulated lease table as a kn_lease_store_t (sim_store_ops.h). */
#include "sim_store_ops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lease/store_int.h"
#include "util/str.h"

struct sim_store_table {
  pthread_mutex_t mu; /* guards everything below and *s */
  sim_t *s;
  char **names; /* worker ids; alias i is "m<i>" */
  size_t n_names, cap_names;
};

typedef struct sim_store {
  kn_lease_store_t head;
  sim_store_table_t *t; /* borrowed */
} sim_store_t;

static sim_store_table_t *table_of(kn_lease_store_t *ls) {
  return ((sim_store_t *)ls)->t;
}

sim_store_table_t *sim_store_table_new(void) {
  sim_store_table_t *t = calloc(1, sizeof(*t));
  if (!t || !(t->s = calloc(1, sizeof(*t->s)))) {
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->mu, NULL);
  return t;
}

void sim_store_table_free(sim_store_table_t *t) {
  if (!t) return;
  kn_lease_array_free(t->s->table, t->s->n_table);
  free(t->s);
  for (size_t i = 0; i < t->n_names; i++) free(t->names[i]);
  free(t->names);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* The error for sim_store_apply's answer rc to the call `what` on key. */
static kn_error_t *error_of(const kn_lease_store_t *ls, kn_err_t rc,
                            const char *what, const char *key) {
  if (!rc) return NULL;
  if (rc == KN_ERR_CONDITIONAL_CHECK_FAILED)
    return kn_lease_ccf(ls, what, key ? key : "");
  return kn_error_new(rc, "lease store %s: %s %s: %s", ls->name, what,
                      key ? key : "", kn_err2str(rc));
}

/* Applies c at once; the error for its answer. */
static kn_error_t *apply(kn_lease_store_t *ls, sim_call_t *c,
                         const char *what) {
  sim_store_table_t *t = table_of(ls);
  pthread_mutex_lock(&t->mu);
  kn_err_t rc = sim_store_apply(t->s, c);
  pthread_mutex_unlock(&t->mu);
  return error_of(ls, rc, what, c->key);
}

/* The call's inputs are borrowed from the caller: sim_store_apply reads
 * them and copies what it keeps, so the casts below drop a const that
 * sim_call_t does not spell. */
static sim_call_t call(kn_cc_op_t op, const char *key, int64_t counter,
                       const char *owner) {
  sim_call_t c;
  memset(&c, 0, sizeof(c));
  c.op = op;
  c.key = (char *)key;
  c.counter = counter;
  c.owner = (char *)owner;
  return c;
}

static kn_error_t *sst_ensure_table(kn_lease_store_t *ls) {
  (void)ls;
  return NULL;
}

static kn_error_t *sst_list(kn_lease_store_t *ls, kn_lease_t **out, size_t *n) {
  sim_call_t c = call(KN_CC_LIST_LEASES, NULL, 0, NULL);
  kn_error_t *e = apply(ls, &c, "list");
  *out = c.list;
  *n = c.n_list;
  return e;
}

static kn_error_t *sst_get(kn_lease_store_t *ls, const char *key,
                           kn_lease_t *out) {
  sim_call_t c = call(KN_CC_GET, key, 0, NULL);
  kn_error_t *e = apply(ls, &c, "get");
  *out = c.got; /* zeroed on error */
  return e;
}

static kn_error_t *sst_create(kn_lease_store_t *ls, const kn_lease_t *l) {
  sim_call_t c = call(KN_CC_CREATE, l->key, 0, NULL);
  c.lease = *l; /* copied by the table */
  return apply(ls, &c, "create");
}

static kn_error_t *sst_take(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *old_owner,
                            const char *owner, int64_t *new_counter) {
  sim_call_t c = call(KN_CC_TAKE, key, counter, owner);
  c.old_owner = (char *)old_owner;
  kn_error_t *e = apply(ls, &c, "take");
  if (!e) *new_counter = c.new_counter;
  return e;
}

static kn_error_t *sst_mark(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *owner, int failing,
                            int64_t *new_counter) {
  sim_call_t c = call(KN_CC_RENEW, key, counter, owner);
  c.mark = failing ? 1 : 2;
  kn_error_t *e = apply(ls, &c, "mark");
  if (!e) *new_counter = c.new_counter;
  free(c.handoff_to);
  return e;
}

static kn_error_t *sst_renew(kn_lease_store_t *ls, const char *key,
                             int64_t counter, const char *owner,
                             int64_t *new_counter, char **handoff_to) {
  sim_call_t c = call(KN_CC_RENEW, key, counter, owner);
  kn_error_t *e = apply(ls, &c, "renew");
  if (!e) *new_counter = c.new_counter;
  *handoff_to = c.handoff_to; /* set only on success */
  return e;
}

/* A change by owner that answers only the new counter. */
static kn_error_t *counted(kn_lease_store_t *ls, kn_cc_op_t op,
                           const char *what, const char *key, int64_t counter,
                           const char *owner, int64_t *new_counter) {
  sim_call_t c = call(op, key, counter, owner);
  kn_error_t *e = apply(ls, &c, what);
  if (!e) *new_counter = c.new_counter;
  return e;
}

static kn_error_t *sst_release(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *owner,
                               int64_t *new_counter) {
  return counted(ls, KN_CC_RELEASE, "release", key, counter, owner,
                 new_counter);
}

static kn_error_t *sst_checkpoint(kn_lease_store_t *ls, const char *key,
                                  int64_t counter, const char *owner,
                                  const char *checkpoint, int64_t subseq,
                                  const char *pending, int64_t pending_subseq,
                                  const void *state, size_t state_len,
                                  int64_t *new_counter, char **handoff_to) {
  sim_call_t c = call(KN_CC_CHECKPOINT, key, counter, owner);
  c.ckpt = (char *)checkpoint;
  c.subseq = subseq;
  c.pending = (char *)pending;
  c.pending_subseq = pending_subseq;
  c.state = (void *)state;
  c.state_len = state_len;
  kn_error_t *e = apply(ls, &c, "checkpoint");
  if (!e) *new_counter = c.new_counter;
  *handoff_to = c.handoff_to;
  return e;
}

static kn_error_t *sst_set_children(kn_lease_store_t *ls, const char *key,
                                    char *const *children, size_t n) {
  sim_call_t c = call(KN_CC_SET_CHILDREN, key, 0, NULL);
  c.children = (char **)children;
  c.n_children = n;
  return apply(ls, &c, "set_children");
}

static kn_error_t *sst_handoff(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *old_owner,
                               const char *new_owner) {
  sim_call_t c = call(KN_CC_HANDOFF, key, counter, new_owner);
  c.old_owner = (char *)old_owner;
  return apply(ls, &c, "handoff");
}

static kn_error_t *sst_handoff_done(kn_lease_store_t *ls, const char *key,
                                    int64_t counter, const char *owner,
                                    int64_t *new_counter) {
  return counted(ls, KN_CC_HANDOFF_DONE, "handoff_done", key, counter, owner,
                 new_counter);
}

static kn_error_t *sst_remove(kn_lease_store_t *ls, const char *key,
                              int64_t counter) {
  sim_call_t c = call(KN_CC_REMOVE, key, counter, NULL);
  return apply(ls, &c, "remove");
}

/* ---- membership, with aliases for the worker ids (t->mu held) ---- */

typedef char sim_alias_t[sizeof(((sim_member_t *)0)->worker)];

/* The alias of worker into a; with make, one is given to a new id.  0, or
 * -1 when worker has none (or memory runs out). */
static int alias_of(sim_store_table_t *t, const char *worker, int make,
                    sim_alias_t a) {
  size_t i = 0;
  while (i < t->n_names && strcmp(t->names[i], worker) != 0) i++;
  if (i == t->n_names) {
    if (!make) return -1;
    if (t->n_names == t->cap_names) {
      size_t cap = t->cap_names ? 2 * t->cap_names : 8;
      char **v = realloc(t->names, cap * sizeof(*v));
      if (!v) return -1;
      t->names = v;
      t->cap_names = cap;
    }
    if (!(t->names[i] = strdup(worker))) return -1;
    t->n_names++;
  }
  return snprintf(a, sizeof(sim_alias_t), "m%zu", i) < (int)sizeof(sim_alias_t)
             ? 0
             : -1;
}

static int by_worker(const void *a, const void *b) {
  return strcmp(((const kn_member_t *)a)->worker,
                ((const kn_member_t *)b)->worker);
}

/* Gives m's members their ids back in place of the aliases, sorted by
 * id.  0, or -1 when memory runs out. */
static int unalias(sim_store_table_t *t, kn_members_t *m) {
  for (size_t k = 0; k < m->n; k++) {
    const char *a = m->v[k].worker;
    char *end = NULL;
    size_t i = a[0] == 'm' && a[1] ? (size_t)strtoul(a + 1, &end, 10) : 0;
    if (!end || *end || i >= t->n_names) continue; /* not an alias */
    char *id = strdup(t->names[i]);
    if (!id) return -1;
    free(m->v[k].worker);
    m->v[k].worker = id;
  }
  if (m->n > 1) qsort(m->v, m->n, sizeof(*m->v), by_worker);
  return 0;
}

static kn_error_t *nomem(const kn_lease_store_t *ls) {
  return kn_error_new(KN_ERR__NOMEM, "lease store %s: out of memory", ls->name);
}

static kn_error_t *sst_heartbeat(kn_lease_store_t *ls, const char *worker,
                                 int bucket, int64_t beat, int64_t leases,
                                 int64_t bump, char *const *forget,
                                 size_t n_forget, kn_members_t *out) {
  sim_store_table_t *t = table_of(ls);
  memset(out, 0, sizeof(*out));
  (void)bucket; /* one item (no publish) */
  sim_alias_t me;
  sim_alias_t *fa = calloc(n_forget + 1, sizeof(*fa));
  char **fp = calloc(n_forget + 1, sizeof(*fp));
  sim_call_t c = call(KN_CC_HEARTBEAT, NULL, 0, worker);
  kn_err_t rc = KN_ERR__NOMEM;
  pthread_mutex_lock(&t->mu);
  /* An id the table would refuse goes to it as it is. */
  if (fa && fp && (!worker || !*worker || alias_of(t, worker, 1, me) == 0)) {
    if (worker && *worker) c.owner = me;
    /* A worker never seen has no alias and is no member. */
    for (size_t k = 0; k < n_forget; k++)
      if (forget[k] && alias_of(t, forget[k], 0, fa[c.n_children]) == 0)
        fp[c.n_children] = fa[c.n_children], c.n_children++;
    c.children = fp;
    c.leave = -1;
    c.beat = beat;
    c.leases = leases;
    c.bump = bump;
    rc = sim_store_apply(t->s, &c);
    if (!rc && unalias(t, &c.members)) rc = KN_ERR__NOMEM;
  }
  pthread_mutex_unlock(&t->mu);
  free(fa);
  free(fp);
  if (rc) {
    kn_members_clear(&c.members);
    return rc == KN_ERR__NOMEM ? nomem(ls)
                               : error_of(ls, rc, "heartbeat", worker);
  }
  *out = c.members;
  return NULL;
}

/* The membership as it is: a read of the table (the core has no call
 * for it, it is for tools). */
static kn_error_t *sst_members(kn_lease_store_t *ls, kn_members_t *out) {
  sim_store_table_t *t = table_of(ls);
  int rc = 0;
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&t->mu);
  const sim_t *s = t->s;
  out->epoch = s->epoch;
  if (s->n_mb && !(out->v = calloc((size_t)s->n_mb, sizeof(*out->v)))) rc = -1;
  for (int k = 0; !rc && k < s->n_mb; k++) {
    if (!(out->v[k].worker = strdup(s->mb[k].worker))) rc = -1;
    out->n = (size_t)k + 1;
    out->v[k].beat = s->mb[k].beat;
    out->v[k].leases = s->mb[k].leases;
  }
  if (!rc) rc = unalias(t, out);
  pthread_mutex_unlock(&t->mu);
  if (!rc) return NULL;
  kn_members_clear(out);
  return nomem(ls);
}

static void sst_destroy(kn_lease_store_t *ls) {
  free(ls->name);
  free(ls);
}

static const kn_lease_store_ops_t sst_ops = {
    sst_ensure_table,
    sst_list,
    sst_get,
    sst_create,
    sst_take,
    sst_renew,
    sst_mark,
    sst_release,
    sst_checkpoint,
    sst_set_children,
    sst_handoff,
    sst_handoff_done,
    sst_remove,
    sst_destroy,
    sst_heartbeat,
    NULL,
    NULL,
    sst_members,
};

kn_lease_store_t *sim_store_open(sim_store_table_t *t, kn_error_t **errp) {
  *errp = NULL;
  sim_store_t *ss = calloc(1, sizeof(*ss));
  if (!ss || kn_lease_store_init(&ss->head, &sst_ops, "sim")) {
    free(ss);
    *errp = kn_error_new(KN_ERR__NOMEM, "lease store: out of memory");
    return NULL;
  }
  ss->t = t;
  return &ss->head;
}
