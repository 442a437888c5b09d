/* The in-process lease store, for tests: a sorted array of leases behind
 * a mutex.  Named instances live in a process-wide registry so that
 * several handles (threads playing different workers) share one table. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lease/store_int.h"
#include "util/str.h"

typedef struct mem_table {
  struct mem_table *next; /* registry link (named tables only) */
  char *name;             /* NULL for a private table */
  int refs;               /* handles; guarded by registry_lock */
  pthread_mutex_t lock;   /* guards v, n, cap and the membership */
  kn_lease_t *v;          /* sorted by key */
  size_t n, cap;
  /* The membership items (store.h heartbeat): n_bk of them, each's
   * members sorted by worker id, cap entries allocated. */
  struct mem_bucket {
    kn_members_t m;
    size_t cap;
  } * bk;
  size_t n_bk;
} mem_table_t;

typedef struct mem_store {
  kn_lease_store_t head;
  mem_table_t *t;
} mem_store_t;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_table_t *registry;

static mem_table_t *table_of(kn_lease_store_t *ls) {
  return ((mem_store_t *)ls)->t;
}

static kn_error_t *nomem(const kn_lease_store_t *ls) {
  return kn_error_new(KN_ERR__NOMEM, "lease store %s: out of memory", ls->name);
}

/* Index of key, or of where it would be inserted (*found 0). */
static size_t find(const mem_table_t *t, const char *key, int *found) {
  return kn_sorted_find(t->v, t->n, sizeof(*t->v), offsetof(kn_lease_t, key),
                        key, found);
}

/* The lease at key if its counter is `counter` and its owner is `owner`
 * (NULL: free); check_owner 0 skips the owner test. */
static kn_lease_t *find_if(mem_table_t *t, const char *key, int64_t counter,
                           int check_owner, const char *owner) {
  int found;
  size_t i = find(t, key, &found);
  if (!found) return NULL;
  kn_lease_t *l = &t->v[i];
  if (l->counter != counter) return NULL;
  if (check_owner) {
    if (owner ? !l->owner || strcmp(l->owner, owner) != 0 : l->owner != NULL)
      return NULL;
  }
  return l;
}

/* The lease at key if its counter is `counter` and owner is its actual
 * owner (checkpoint owner during a hand-off). */
static kn_lease_t *find_actual(mem_table_t *t, const char *key, int64_t counter,
                               const char *owner) {
  kn_lease_t *l = owner ? find_if(t, key, counter, 0, NULL) : NULL;
  const char *a = l ? kn_lease_actual_owner(l) : NULL;
  return a && strcmp(a, owner) == 0 ? l : NULL;
}

/* A change without an owner: refused, as the SQLite and DynamoDB stores
 * do. */
static kn_error_t *no_owner(const kn_lease_store_t *ls, const char *op,
                            const char *key) {
  return kn_error_new(KN_ERR__INVALID_ARG, "lease store %s: %s %s: no owner",
                      ls->name, op, key);
}

static kn_error_t *mem_ensure_table(kn_lease_store_t *ls) { return NULL; }

static kn_error_t *mem_list(kn_lease_store_t *ls, kn_lease_t **out, size_t *n) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&t->lock);
  if (t->n) {
    kn_lease_t *v = calloc(t->n, sizeof(*v));
    size_t i = 0;
    if (v) {
      for (; i < t->n; i++)
        if (kn_lease_copy(&v[i], &t->v[i])) break;
    }
    if (v && i == t->n) {
      *out = v;
      *n = i;
    } else {
      kn_lease_array_free(v, i);
      err = nomem(ls);
    }
  }
  pthread_mutex_unlock(&t->lock);
  return err;
}

static kn_error_t *mem_get(kn_lease_store_t *ls, const char *key,
                           kn_lease_t *out) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  int found;
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&t->lock);
  size_t i = find(t, key, &found);
  if (!found)
    err = kn_error_new(KN_ERR__NOT_FOUND, "lease store %s: no lease %s",
                       ls->name, key);
  else if (kn_lease_copy(out, &t->v[i]))
    err = nomem(ls);
  pthread_mutex_unlock(&t->lock);
  return err;
}

static kn_error_t *mem_create(kn_lease_store_t *ls, const kn_lease_t *l) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  kn_lease_t copy;
  if (!l->key || !*l->key)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: a lease needs a key", ls->name);
  if (kn_lease_copy(&copy, l)) return nomem(ls);
  copy.owner_hands_over = 0; /* not an attribute (lease.h) */
  pthread_mutex_lock(&t->lock);
  int found;
  size_t i = find(t, l->key, &found);
  if (found) {
    err = kn_lease_ccf(ls, "create", l->key);
  } else if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    kn_lease_t *v = realloc(t->v, cap * sizeof(*v));
    if (v) {
      t->v = v;
      t->cap = cap;
    } else {
      err = nomem(ls);
    }
  }
  if (!err) {
    memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof(*t->v));
    t->v[i] = copy;
    t->n++;
  }
  pthread_mutex_unlock(&t->lock);
  if (err) kn_lease_clear(&copy);
  return err;
}

static kn_error_t *mem_take(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *old_owner,
                            const char *owner, int64_t *new_counter) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  if (!owner)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: take %s: no owner", ls->name, key);
  char *o = strdup(owner);
  if (!o) return nomem(ls);
  pthread_mutex_lock(&t->lock);
  kn_lease_t *l = find_if(t, key, counter, 1, old_owner);
  if (l) {
    if (l->owner && strcmp(l->owner, owner) != 0) l->owner_switches++;
    free(l->owner);
    l->owner = o;
    o = NULL;
    free(l->checkpoint_owner);
    l->checkpoint_owner = NULL;
    l->beat_failing = 0;
    *new_counter = ++l->counter;
  } else {
    err = kn_lease_ccf(ls, "take", key);
  }
  pthread_mutex_unlock(&t->lock);
  free(o);
  return err;
}

static kn_error_t *mem_renew(kn_lease_store_t *ls, const char *key,
                             int64_t counter, const char *owner,
                             int64_t *new_counter, char **handoff_to) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  *handoff_to = NULL;
  if (!owner) return no_owner(ls, "renew", key);
  pthread_mutex_lock(&t->lock);
  kn_lease_t *l = find_actual(t, key, counter, owner);
  if (l) {
    *new_counter = ++l->counter;
    if (l->checkpoint_owner && l->owner && !(*handoff_to = strdup(l->owner)))
      err = nomem(ls); /* renewed all the same */
  } else {
    err = kn_lease_ccf(ls, "renew", key);
  }
  pthread_mutex_unlock(&t->lock);
  return err;
}

static kn_error_t *mem_mark(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *owner, int failing,
                            int64_t *new_counter) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  if (!owner) return no_owner(ls, "mark", key);
  pthread_mutex_lock(&t->lock);
  kn_lease_t *l = find_actual(t, key, counter, owner);
  if (l) {
    *new_counter = ++l->counter;
    l->beat_failing = failing != 0;
  } else {
    err = kn_lease_ccf(ls, "mark", key);
  }
  pthread_mutex_unlock(&t->lock);
  return err;
}

static kn_error_t *mem_release(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *owner,
                               int64_t *new_counter) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  if (!owner) return no_owner(ls, "release", key);
  pthread_mutex_lock(&t->lock);
  kn_lease_t *l = find_actual(t, key, counter, owner);
  if (l) {
    free(l->owner);
    l->owner = NULL;
    free(l->checkpoint_owner);
    l->checkpoint_owner = NULL;
    l->beat_failing = 0;
    *new_counter = ++l->counter;
  } else {
    err = kn_lease_ccf(ls, "release", key);
  }
  pthread_mutex_unlock(&t->lock);
  return err;
}

static kn_error_t *mem_checkpoint(kn_lease_store_t *ls, const char *key,
                                  int64_t counter, const char *owner,
                                  const char *checkpoint, int64_t subseq,
                                  const char *pending, int64_t pending_subseq,
                                  const void *state, size_t state_len,
                                  int64_t *new_counter, char **handoff_to) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  *handoff_to = NULL;
  if (!owner) return no_owner(ls, "checkpoint", key);
  /* Allocate first so that a failure changes nothing. */
  char *cp = kn_strdup0(checkpoint), *pc = kn_strdup0(pending);
  void *st = NULL;
  if (pending && state) {
    st = malloc(state_len + 1);
    if (st) memcpy(st, state, state_len);
  }
  if ((checkpoint && !cp) || (pending && !pc) || (pending && state && !st)) {
    free(cp);
    free(pc);
    free(st);
    return nomem(ls);
  }
  pthread_mutex_lock(&t->lock);
  kn_lease_t *l = find_actual(t, key, counter, owner);
  if (l) {
    if (cp) {
      free(l->checkpoint);
      l->checkpoint = cp;
      cp = NULL;
      l->checkpoint_subseq = subseq;
      l->owner_switches = 0;
    }
    free(l->pending);
    free(l->pending_state);
    l->pending = pc;
    l->pending_subseq = pc ? pending_subseq : 0;
    l->pending_state = st;
    l->pending_state_len = st ? state_len : 0;
    pc = NULL;
    st = NULL;
    *new_counter = ++l->counter;
    if (l->checkpoint_owner && l->owner && !(*handoff_to = strdup(l->owner)))
      err = nomem(ls); /* checkpointed all the same */
  } else {
    err = kn_lease_ccf(ls, "checkpoint", key);
  }
  pthread_mutex_unlock(&t->lock);
  free(cp);
  free(pc);
  free(st);
  return err;
}

static kn_error_t *mem_handoff(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *old_owner,
                               const char *new_owner) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  char *o = kn_strdup0(new_owner), *co = kn_strdup0(old_owner);
  if (!o || !co) {
    free(o);
    free(co);
    return old_owner && new_owner ? nomem(ls)
                                  : kn_error_new(KN_ERR__INVALID_ARG,
                                                 "lease store %s: handoff %s: "
                                                 "no owner",
                                                 ls->name, key);
  }
  pthread_mutex_lock(&t->lock);
  kn_lease_t *l = find_if(t, key, counter, 1, old_owner);
  if (l && !l->checkpoint_owner) {
    free(l->owner);
    l->owner = o;
    l->checkpoint_owner = co;
    o = co = NULL;
  } else {
    err = kn_lease_ccf(ls, "handoff", key);
  }
  pthread_mutex_unlock(&t->lock);
  free(o);
  free(co);
  return err;
}

static kn_error_t *mem_handoff_done(kn_lease_store_t *ls, const char *key,
                                    int64_t counter, const char *owner,
                                    int64_t *new_counter) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  if (!owner) return no_owner(ls, "handoff_done", key);
  pthread_mutex_lock(&t->lock);
  kn_lease_t *l = find_if(t, key, counter, 0, NULL);
  if (l && l->checkpoint_owner && strcmp(l->checkpoint_owner, owner) == 0) {
    free(l->checkpoint_owner);
    l->checkpoint_owner = NULL;
    l->owner_switches++;
    l->beat_failing = 0;
    *new_counter = ++l->counter;
  } else {
    err = kn_lease_ccf(ls, "handoff_done", key);
  }
  pthread_mutex_unlock(&t->lock);
  return err;
}

static kn_error_t *mem_set_children(kn_lease_store_t *ls, const char *key,
                                    char *const *children, size_t n) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  /* Reuse the deep copy of kn_lease_copy for the string array. */
  kn_lease_t tmp = {.children = (char **)children, .n_children = n}, copy;
  if (kn_lease_copy(&copy, &tmp)) return nomem(ls);
  pthread_mutex_lock(&t->lock);
  int found;
  size_t i = find(t, key, &found);
  if (found) {
    kn_lease_t *l = &t->v[i];
    char **old = l->children;
    size_t old_n = l->n_children;
    l->children = copy.children;
    l->n_children = copy.n_children;
    copy.children = old;
    copy.n_children = old_n;
  } else {
    err = kn_lease_ccf(ls, "set_children", key);
  }
  pthread_mutex_unlock(&t->lock);
  kn_lease_clear(&copy);
  return err;
}

static kn_error_t *mem_remove(kn_lease_store_t *ls, const char *key,
                              int64_t counter) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  pthread_mutex_lock(&t->lock);
  kn_lease_t *l = find_if(t, key, counter, 0, NULL);
  if (l) {
    size_t i = (size_t)(l - t->v);
    kn_lease_clear(l);
    memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(*t->v));
    t->n--;
  } else {
    err = kn_lease_ccf(ls, "remove", key);
  }
  pthread_mutex_unlock(&t->lock);
  return err;
}

/* Index of worker in the membership, or of where it would go. */
static size_t find_member(const kn_members_t *m, const char *worker,
                          int *found) {
  return kn_sorted_find(m->v, m->n, sizeof(*m->v),
                        offsetof(kn_member_t, worker), worker, found);
}

static kn_error_t *bad_bucket(kn_lease_store_t *ls, const char *op, int b) {
  return kn_error_new(KN_ERR__INVALID_ARG,
                      "lease store %s: %s: no membership item %d", ls->name, op,
                      b);
}

/* Item b, created (empty) if missing; NULL on out-of-memory. */
static struct mem_bucket *bucket_at(mem_table_t *t, int b) {
  if ((size_t)b >= t->n_bk) {
    struct mem_bucket *v = realloc(t->bk, ((size_t)b + 1) * sizeof(*v));
    if (!v) return NULL;
    memset(&v[t->n_bk], 0, ((size_t)b + 1 - t->n_bk) * sizeof(*v));
    t->bk = v;
    t->n_bk = (size_t)b + 1;
  }
  return &t->bk[b];
}

static void forget_in(kn_members_t *m, char *const *forget, size_t n,
                      const char *keep) {
  int found;
  for (size_t k = 0; k < n; k++) {
    if (!forget[k] || (keep && strcmp(forget[k], keep) == 0)) continue;
    size_t j = find_member(m, forget[k], &found);
    if (!found) continue;
    free(m->v[j].worker);
    memmove(&m->v[j], &m->v[j + 1], (m->n - j - 1) * sizeof(*m->v));
    m->n--;
  }
}

static kn_error_t *mem_heartbeat(kn_lease_store_t *ls, const char *worker,
                                 int bucket, int64_t beat, int64_t leases,
                                 int64_t bump, char *const *forget,
                                 size_t n_forget, kn_members_t *out) {
  mem_table_t *t = table_of(ls);
  kn_error_t *err = NULL;
  memset(out, 0, sizeof(*out));
  if (!worker || !*worker)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: heartbeat: no worker id", ls->name);
  if (bucket < 0 || bucket >= KN_MEMBERS_BUCKETS_MAX)
    return bad_bucket(ls, "heartbeat", bucket);
  char *w = strdup(worker);
  if (!w) return nomem(ls);
  pthread_mutex_lock(&t->lock);
  struct mem_bucket *bk = bucket_at(t, bucket);
  kn_members_t *m = bk ? &bk->m : NULL;
  int found = 0;
  size_t i = m ? find_member(m, worker, &found) : 0;
  if (!m) {
    err = nomem(ls);
  } else if (!found && m->n == bk->cap) {
    size_t cap = bk->cap ? bk->cap * 2 : 8;
    kn_member_t *v = realloc(m->v, cap * sizeof(*v));
    if (v) {
      m->v = v;
      bk->cap = cap;
    } else {
      err = nomem(ls);
    }
  }
  if (!err) {
    if (!found) {
      memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
      m->v[i].worker = w;
      m->v[i].bucket = bucket;
      m->n++;
      w = NULL;
    }
    m->v[i].beat = beat;
    m->v[i].leases = leases;
    m->epoch += bump;
    forget_in(m, forget, n_forget, worker);
    /* The write stands even if the copy fails (as a store whose answer
     * was lost). */
    if (kn_members_copy(out, m)) err = nomem(ls);
  }
  pthread_mutex_unlock(&t->lock);
  free(w);
  return err;
}

static kn_error_t *mem_leave(kn_lease_store_t *ls, const char *worker,
                             int bucket) {
  mem_table_t *t = table_of(ls);
  if (bucket < 0 || bucket >= KN_MEMBERS_BUCKETS_MAX)
    return bad_bucket(ls, "leave", bucket);
  char *const one[1] = {(char *)worker};
  pthread_mutex_lock(&t->lock);
  if ((size_t)bucket < t->n_bk) forget_in(&t->bk[bucket].m, one, 1, NULL);
  pthread_mutex_unlock(&t->lock);
  return NULL;
}

static kn_error_t *mem_publish(kn_lease_store_t *ls, int bucket,
                               const char *digest, char *const *forget,
                               size_t n_forget) {
  mem_table_t *t = table_of(ls);
  if (bucket < 0 || bucket >= KN_MEMBERS_BUCKETS_MAX)
    return bad_bucket(ls, "publish", bucket);
  char *d = digest ? strdup(digest) : NULL;
  if (digest && !d) return nomem(ls);
  kn_error_t *err = NULL;
  pthread_mutex_lock(&t->lock);
  struct mem_bucket *bk = bucket_at(t, bucket);
  if (bk) {
    free(bk->m.digest);
    bk->m.digest = d;
    d = NULL;
    forget_in(&bk->m, forget, n_forget, NULL);
  } else {
    err = nomem(ls);
  }
  pthread_mutex_unlock(&t->lock);
  free(d);
  return err;
}

static kn_error_t *mem_members(kn_lease_store_t *ls, kn_members_t *out) {
  mem_table_t *t = table_of(ls);
  pthread_mutex_lock(&t->lock);
  kn_members_t *items = calloc(t->n_bk ? t->n_bk : 1, sizeof(*items));
  int rc = !items;
  for (size_t b = 0; !rc && b < t->n_bk; b++) items[b] = t->bk[b].m;
  if (!rc) rc = kn_members_merge(out, items, t->n_bk);
  pthread_mutex_unlock(&t->lock);
  free(items);
  return rc ? nomem(ls) : NULL;
}

static void table_free(mem_table_t *t) {
  kn_lease_array_free(t->v, t->n);
  for (size_t b = 0; b < t->n_bk; b++) kn_members_clear(&t->bk[b].m);
  free(t->bk);
  pthread_mutex_destroy(&t->lock);
  free(t->name);
  free(t);
}

static void mem_destroy(kn_lease_store_t *ls) {
  mem_table_t *t = table_of(ls);
  int last = 0;
  pthread_mutex_lock(&registry_lock);
  if (--t->refs == 0) {
    last = 1;
    for (mem_table_t **pp = &registry; *pp; pp = &(*pp)->next) {
      if (*pp == t) {
        *pp = t->next;
        break;
      }
    }
  }
  pthread_mutex_unlock(&registry_lock);
  if (last) table_free(t);
  free(ls->name);
  free(ls);
}

static const kn_lease_store_ops_t mem_ops = {
    mem_ensure_table, mem_list,         mem_get,       mem_create,
    mem_take,         mem_renew,        mem_mark,      mem_release,
    mem_checkpoint,   mem_set_children, mem_handoff,   mem_handoff_done,
    mem_remove,       mem_destroy,      mem_heartbeat, mem_leave,
    mem_publish,      mem_members,
};

static mem_table_t *table_new(const char *name) {
  mem_table_t *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  if (name && !(t->name = strdup(name))) {
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->lock, NULL);
  return t;
}

kn_lease_store_t *kn_lease_store_memory_open(const char *name,
                                             kn_error_t **errp) {
  *errp = NULL;
  mem_store_t *ms = calloc(1, sizeof(*ms));
  char *label = name ? kn_asprintf("memory:%s", name) : strdup("memory");
  if (!ms || !label || kn_lease_store_init(&ms->head, &mem_ops, label)) {
    free(label);
    if (ms) free(ms->head.name);
    free(ms);
    *errp = kn_error_new(KN_ERR__NOMEM, "lease store: out of memory");
    return NULL;
  }
  free(label);
  pthread_mutex_lock(&registry_lock);
  mem_table_t *t = NULL;
  if (name) {
    for (t = registry; t && strcmp(t->name, name) != 0; t = t->next) {
    }
  }
  if (!t && (t = table_new(name)) && name) {
    t->next = registry;
    registry = t;
  }
  if (t) t->refs++;
  pthread_mutex_unlock(&registry_lock);
  if (!t) {
    free(ms->head.name);
    free(ms);
    *errp = kn_error_new(KN_ERR__NOMEM, "lease store: out of memory");
    return NULL;
  }
  ms->t = t;
  return &ms->head;
}
