/* The DynamoDB lease store.
 *
 * Conditions are ConditionExpressions on leaseCounter (and leaseOwner);
 * changes are UpdateExpressions (SET/REMOVE/ADD) naming only what they
 * change, never a whole item, so that attributes of other KCL versions
 * are left alone.  As in the KCL, take, renew, release and checkpoint
 * write leaseCounter + 1; create, set_children and remove do not. */
#include "lease/store_dynamodb.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lease/ddb_item.h"
#include "lease/store_int.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/pager.h"
#include "util/str.h"
#include "util/strmap.h"

#define TABLE_WAIT_MS 120000

typedef struct ddb_store {
  kn_lease_store_t head;
  char *table;
  char *members_table; /* TABLE-members; NULL when too long a name */
  kn_ddb_call_fn *call;
  void *opaque;
  void (*cleanup)(void *opaque);
  int scan_limit; /* 0: none */
  long table_wait_ms;
} ddb_store_t;

static ddb_store_t *store_of(kn_lease_store_t *ls) { return (ddb_store_t *)ls; }

static kn_error_t *nomem(const ddb_store_t *d) {
  return kn_error_new(KN_ERR__NOMEM, "lease store %s: out of memory",
                      d->head.name);
}

/* Sends req (stolen) as action; *resp (may be NULL) gets the decoded
 * response object. */
static kn_error_t *call(ddb_store_t *d, const char *action, json_t *req,
                        json_t **resp) {
  if (resp) *resp = NULL;
  char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  if (!body) return nomem(d);
  kn_buf_t out = KN_BUF_INIT;
  kn_error_t *err = d->call(d->opaque, action, body, strlen(body), &out);
  free(body);
  if (!err && resp) err = kn_json_parse_object(out.p, out.len, action, resp);
  kn_buf_free(&out);
  return err;
}

/* Names the store, the call and the key in front of err's message. */
static kn_error_t *context(ddb_store_t *d, kn_error_t *err, const char *op,
                           const char *key) {
  return kn_error_prefix(err, "lease store %s: %s%s%s", d->head.name, op,
                         key ? " " : "", key ? key : "");
}

/* {"TableName": table, "Key": {"leaseKey": {"S": key}}} and more. */
static json_t *keyed_request(ddb_store_t *d, const char *key) {
  json_t *req = json_object(), *k = json_object();
  if (!req || !k || json_object_set_new(k, KN_DDB_LEASE_KEY, kn_ddb_s(key)) ||
      json_object_set_new(req, "TableName", json_string(d->table)) ||
      json_object_set_new(req, "Key", k)) {
    json_decref(req);
    return NULL;
  }
  return req;
}

/* ---- expressions ----
 * Placeholders for every attribute name (some, like "checkpoint", may one
 * day be reserved words) and value; only the ones used are sent, as
 * DynamoDB rejects unused ones. */

typedef struct expr {
  json_t *names;
  json_t *values;
  kn_buf_t set, remove, add, cond;
  int oom;
} expr_t;

static void expr_init(expr_t *e) {
  memset(e, 0, sizeof(*e));
  e->names = json_object();
  e->values = json_object();
  if (!e->names || !e->values) e->oom = 1;
}

static void expr_free(expr_t *e) {
  json_decref(e->names);
  json_decref(e->values);
  kn_buf_free(&e->set);
  kn_buf_free(&e->remove);
  kn_buf_free(&e->add);
  kn_buf_free(&e->cond);
}

/* Registers placeholder ph ("#o") for attribute name. */
static void name(expr_t *e, const char *ph, const char *attr) {
  if (!e->oom && json_object_set_new(e->names, ph, json_string(attr)))
    e->oom = 1;
}

/* Registers placeholder ph (":o") for value (stolen). */
static void value(expr_t *e, const char *ph, json_t *v) {
  if (!v || json_object_set_new(e->values, ph, v)) e->oom = 1;
}

/* Appends a clause to one of the lists, with sep between clauses. */
static void clause(expr_t *e, kn_buf_t *b, const char *sep, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
static void clause(expr_t *e, kn_buf_t *b, const char *sep, const char *fmt,
                   ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if ((b->len && kn_buf_append_str(b, sep)) || kn_buf_append_str(b, tmp))
    e->oom = 1;
}

#define SET(e, ...) clause(e, &(e)->set, ", ", __VA_ARGS__)
#define REMOVE(e, ...) clause(e, &(e)->remove, ", ", __VA_ARGS__)
#define ADD(e, ...) clause(e, &(e)->add, ", ", __VA_ARGS__)
#define COND(e, ...) clause(e, &(e)->cond, " AND ", __VA_ARGS__)

/* Adds the expressions to req; 0, or -1 on out-of-memory. */
static int expr_apply(expr_t *e, json_t *req) {
  kn_buf_t upd = KN_BUF_INIT;
  int rc = e->oom ? -1 : 0;
  if (!rc && e->set.len) rc |= kn_buf_printf(&upd, "SET %s", e->set.p);
  if (!rc && e->remove.len)
    rc |= kn_buf_printf(&upd, "%sREMOVE %s", upd.len ? " " : "", e->remove.p);
  if (!rc && e->add.len)
    rc |= kn_buf_printf(&upd, "%sADD %s", upd.len ? " " : "", e->add.p);
  if (!rc && upd.len)
    rc |= json_object_set_new(req, "UpdateExpression", json_string(upd.p));
  if (!rc && e->cond.len)
    rc |=
        json_object_set_new(req, "ConditionExpression", json_string(e->cond.p));
  if (!rc && json_object_size(e->names))
    rc |= json_object_set(req, "ExpressionAttributeNames", e->names);
  if (!rc && json_object_size(e->values))
    rc |= json_object_set(req, "ExpressionAttributeValues", e->values);
  kn_buf_free(&upd);
  return rc ? -1 : 0;
}

/* ---- reading ---- */

static kn_error_t *ddb_get(kn_lease_store_t *ls, const char *key,
                           kn_lease_t *out) {
  ddb_store_t *d = store_of(ls);
  memset(out, 0, sizeof(*out));
  json_t *req = keyed_request(d, key), *resp = NULL;
  if (!req || json_object_set_new(req, "ConsistentRead", json_true())) {
    json_decref(req);
    return nomem(d);
  }
  kn_error_t *err = call(d, "GetItem", req, &resp);
  if (err) return context(d, err, "get", key);
  json_t *item = json_object_get(resp, "Item");
  int rc = 1;
  if (json_is_object(item) && json_object_size(item)) {
    rc = kn_ddb_item_to_lease(item, out, &err);
    if (rc < 0) err = context(d, err, "get", key);
  }
  /* No item, or an item that is not a lease (KCL 3.x coordinator state). */
  if (rc > 0)
    err = kn_error_new(KN_ERR__NOT_FOUND, "lease store %s: no lease %s",
                       ls->name, key);
  json_decref(resp);
  return err;
}

/* Workers with a KCL 3.x worker-metrics item, met in a Scan: the owners
 * that answer a hand-off (kn_lease_t.owner_hands_over). */
typedef struct kcl3_workers {
  kn_strmap_t map; /* id -> itself (owned by ids) */
  char **ids;
  size_t n, cap;
} kcl3_workers_t;

static int kcl3_add(kcl3_workers_t *w, const char *id) {
  if (kn_strmap_get(&w->map, id)) return 0;
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 8;
    char **v = realloc(w->ids, cap * sizeof(*v));
    if (!v) return -1;
    w->ids = v;
    w->cap = cap;
  }
  char *s = strdup(id);
  if (!s || kn_strmap_put(&w->map, s, s)) {
    free(s);
    return -1;
  }
  w->ids[w->n++] = s;
  return 0;
}

static void kcl3_free(kcl3_workers_t *w) {
  kn_strmap_free(&w->map);
  for (size_t i = 0; i < w->n; i++) free(w->ids[i]);
  free(w->ids);
}

/* Appends the leases of one Scan page to *v, the KCL 3.x workers to w. */
static kn_error_t *add_page(ddb_store_t *d, json_t *items, kn_lease_t **v,
                            size_t *n, size_t *cap, kcl3_workers_t *w) {
  size_t i;
  json_t *item;
  json_array_foreach(items, i, item) {
    const char *kcl3 = kn_ddb_item_metrics_worker(item);
    if (kcl3) {
      if (kcl3_add(w, kcl3)) return nomem(d);
      continue;
    }
    if (*n == *cap) {
      size_t ncap = *cap ? *cap * 2 : 64;
      kn_lease_t *nv = realloc(*v, ncap * sizeof(*nv));
      if (!nv) return nomem(d);
      *v = nv;
      *cap = ncap;
    }
    kn_error_t *err = NULL;
    int rc = kn_ddb_item_to_lease(item, &(*v)[*n], &err);
    if (rc < 0) return err;
    if (rc == 0) (*n)++;
  }
  return NULL;
}

/* A consistent Scan of table, page after page (limit items a page when
 * above 0), each page's Items given to on_page; a key seen before or
 * endless pages end it with an error. */
static kn_error_t *scan_pages(ddb_store_t *d, const char *table, int limit,
                              kn_error_t *(*on_page)(json_t *items, void *ctx),
                              void *ctx) {
  json_t *start = NULL;   /* LastEvaluatedKey of the previous page */
  kn_pager_t pager = {0}; /* a key seen before or endless pages end it */
  kn_error_t *err = NULL;
  do {
    json_t *req = json_object(), *resp = NULL;
    int rc = !req ||
             json_object_set_new(req, "TableName", json_string(table)) ||
             json_object_set_new(req, "ConsistentRead", json_true());
    if (!rc && limit > 0)
      rc = json_object_set_new(req, "Limit", json_integer(limit));
    if (!rc && start) rc = json_object_set(req, "ExclusiveStartKey", start);
    json_decref(start);
    start = NULL;
    if (rc) {
      json_decref(req);
      err = nomem(d);
      break;
    }
    err = call(d, "Scan", req, &resp);
    if (!err) err = on_page(json_object_get(resp, "Items"), ctx);
    if (!err) {
      start = json_object_get(resp, "LastEvaluatedKey");
      if (json_object_size(start))
        json_incref(start);
      else
        start = NULL;
      char *key =
          start ? json_dumps(start, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
      int pr = start && !key ? KN_PAGER_NOMEM : kn_pager_next_str(&pager, key);
      free(key);
      err = kn_pager_error(&pager, pr, "Scan");
      if (pr == KN_PAGER_REPEAT) {
        json_decref(start);
        start = NULL;
      }
    }
    json_decref(resp);
  } while (!err && start);
  kn_pager_free(&pager);
  json_decref(start);
  return err;
}

typedef struct list_ctx {
  ddb_store_t *d;
  kn_lease_t *v;
  size_t count, cap;
  kcl3_workers_t kcl3;
} list_ctx_t;

static kn_error_t *list_page(json_t *items, void *ctx) {
  list_ctx_t *l = ctx;
  return add_page(l->d, items, &l->v, &l->count, &l->cap, &l->kcl3);
}

static kn_error_t *ddb_list(kn_lease_store_t *ls, kn_lease_t **out, size_t *n) {
  ddb_store_t *d = store_of(ls);
  list_ctx_t l = {d, NULL, 0, 0, {KN_STRMAP_INIT, NULL, 0, 0}};
  *out = NULL;
  *n = 0;
  kn_error_t *err = scan_pages(d, d->table, d->scan_limit, list_page, &l);
  kn_lease_t *v = l.v;
  size_t count = l.count;
  kcl3_workers_t kcl3 = l.kcl3;
  for (size_t i = 0; !err && kcl3.n && i < count; i++)
    v[i].owner_hands_over =
        v[i].owner && kn_strmap_get(&kcl3.map, v[i].owner) != NULL;
  kcl3_free(&kcl3);
  if (err) {
    kn_lease_array_free(v, count);
    return context(d, err, "list", NULL);
  }
  if (!count) {
    free(v);
    v = NULL;
  }
  *out = v;
  *n = count;
  return NULL;
}

/* ---- changes ---- */

static kn_error_t *ddb_create(kn_lease_store_t *ls, const kn_lease_t *l) {
  ddb_store_t *d = store_of(ls);
  if (!l->key || !*l->key)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: a lease needs a key", ls->name);
  kn_error_t *err = NULL;
  json_t *item = kn_ddb_item_from_lease(l, &err);
  if (!item) return context(d, err, "create", l->key);
  json_t *req = json_object();
  expr_t e;
  expr_init(&e);
  name(&e, "#k", KN_DDB_LEASE_KEY);
  COND(&e, "attribute_not_exists(#k)");
  if (!req || json_object_set_new(req, "TableName", json_string(d->table)) ||
      json_object_set_new(req, "Item", item) || expr_apply(&e, req)) {
    if (!req) json_decref(item);
    json_decref(req);
    expr_free(&e);
    return nomem(d);
  }
  expr_free(&e);
  err = call(d, "PutItem", req, NULL);
  return err ? context(d, err, "create", l->key) : NULL;
}

/* What a successful conditional change leaves behind.  The transport
 * retries a call whose response was lost; if the first attempt had in fact
 * succeeded, the retry fails its condition.  So a failed condition is
 * looked at again: when the item holds exactly what the call meant to
 * write, the call reports success (the store is as the caller wants it and
 * the new counter is right). */
typedef struct outcome {
  const char *owner; /* NULL: no owner */
  int64_t counter;
  int checkpointed;       /* a checkpoint call: the fields below count */
  const char *checkpoint; /* NULL: left as it was, not compared */
  int64_t subseq;
  const char *pending;
  int64_t pending_subseq;
  const void *state;
  size_t state_len;
} outcome_t;

static int str_eq(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

static int outcome_matches(const kn_lease_t *l, const outcome_t *w) {
  if (l->counter != w->counter || !str_eq(kn_lease_actual_owner(l), w->owner))
    return 0;
  if (!w->checkpointed) return 1;
  if (w->checkpoint && (!str_eq(l->checkpoint, w->checkpoint) ||
                        l->checkpoint_subseq != w->subseq))
    return 0;
  if (!str_eq(l->pending, w->pending)) return 0;
  if (!w->pending) return l->pending_state == NULL;
  if (l->pending_subseq != w->pending_subseq) return 0;
  if (!w->state) return l->pending_state == NULL;
  return l->pending_state && l->pending_state_len == w->state_len &&
         memcmp(l->pending_state, w->state, w->state_len) == 0;
}

/* Whether the lease at key holds what want says, read consistently; with
 * item, when it does, *item is the lease as read (a new reference; NULL
 * on out-of-memory, *item_err then set). */
static int outcome_seen(ddb_store_t *d, const char *key, const outcome_t *want,
                        json_t **item, kn_error_t **item_err) {
  kn_lease_t l;
  kn_error_t *err = ddb_get(&d->head, key, &l);
  if (err) {
    kn_error_destroy(err);
    return 0;
  }
  int ok = outcome_matches(&l, want);
  if (ok && item) *item = kn_ddb_item_from_lease(&l, item_err);
  kn_lease_clear(&l);
  return ok;
}

/* Sends an UpdateItem on key built from e (freed here); with item, asks
 * for the item as it is after the change (*item NULL when the answer
 * had none).  After a retried call found its change done, *item is the
 * item as then read. */
static kn_error_t *update_item(ddb_store_t *d, const char *op, const char *key,
                               expr_t *e, const outcome_t *want,
                               json_t **item) {
  json_t *req = keyed_request(d, key), *resp = NULL;
  if (item) *item = NULL;
  if (!req || expr_apply(e, req) ||
      (item &&
       json_object_set_new(req, "ReturnValues", json_string("ALL_NEW")))) {
    json_decref(req);
    expr_free(e);
    return nomem(d);
  }
  expr_free(e);
  kn_error_t *err = call(d, "UpdateItem", req, item ? &resp : NULL);
  if (!err && item) {
    *item = json_object_get(resp, "Attributes");
    if (json_is_object(*item))
      json_incref(*item);
    else
      *item = NULL;
  }
  json_decref(resp);
  kn_error_t *item_err = NULL;
  if (err && want && kn_error_code(err) == KN_ERR_CONDITIONAL_CHECK_FAILED &&
      outcome_seen(d, key, want, item, &item_err)) {
    kn_error_destroy(err);
    err = item_err; /* NULL unless the item could not be built */
  }
  return err ? context(d, err, op, key) : NULL;
}

static kn_error_t *update(ddb_store_t *d, const char *op, const char *key,
                          expr_t *e, const outcome_t *want) {
  return update_item(d, op, key, e, want, NULL);
}

/* The condition every owner's call shares: the counter, and owner is the
 * actual owner (the checkpoint owner during a hand-off). */
static void owned_by(expr_t *e, int64_t counter, const char *owner) {
  name(e, "#c", KN_DDB_LEASE_COUNTER);
  name(e, "#o", KN_DDB_LEASE_OWNER);
  name(e, "#co", KN_DDB_CHECKPOINT_OWNER);
  value(e, ":c", kn_ddb_n(counter));
  value(e, ":o", kn_ddb_s(owner));
  COND(e, "#c = :c");
  COND(e, "((#o = :o AND attribute_not_exists(#co)) OR #co = :o)");
}

/* leaseCounter + 1, written as a value (as the KCL does) so that the new
 * counter is known without reading the item back. */
static void bump(expr_t *e, int64_t counter) {
  name(e, "#c", KN_DDB_LEASE_COUNTER);
  value(e, ":n", kn_ddb_n(counter + 1));
  SET(e, "#c = :n");
}

/* *handoff_to (store.h, renew) from the item an owner's change left:
 * leaseOwner when a hand-off is under way and it is not owner.  0, or -1
 * on out-of-memory. */
static int handoff_of(json_t *item, const char *owner, char **handoff_to) {
  const char *to = json_string_value(
      json_object_get(json_object_get(item, KN_DDB_LEASE_OWNER), "S"));
  *handoff_to = NULL;
  if (to && json_object_get(item, KN_DDB_CHECKPOINT_OWNER) &&
      strcmp(to, owner) != 0 && !(*handoff_to = strdup(to)))
    return -1;
  return 0;
}

static kn_error_t *no_owner(ddb_store_t *d, const char *op, const char *key) {
  return kn_error_new(KN_ERR__INVALID_ARG, "lease store %s: %s %s: no owner",
                      d->head.name, op, key);
}

static kn_error_t *ddb_take(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *old_owner,
                            const char *owner, int64_t *new_counter) {
  ddb_store_t *d = store_of(ls);
  if (!owner) return no_owner(d, "take", key);
  expr_t e;
  expr_init(&e);
  name(&e, "#c", KN_DDB_LEASE_COUNTER);
  name(&e, "#o", KN_DDB_LEASE_OWNER);
  value(&e, ":c", kn_ddb_n(counter));
  COND(&e, "#c = :c");
  if (old_owner) {
    value(&e, ":old", kn_ddb_s(old_owner));
    COND(&e, "#o = :old");
  } else {
    COND(&e, "attribute_not_exists(#o)");
  }
  value(&e, ":o", kn_ddb_s(owner));
  SET(&e, "#o = :o");
  bump(&e, counter);
  /* A take ends any hand-off under way (as the KCL 3.x's), and the
   * former owner's word on its heartbeats. */
  name(&e, "#co", KN_DDB_CHECKPOINT_OWNER);
  REMOVE(&e, "#co");
  name(&e, "#bf", KN_DDB_BEAT_FAILING);
  REMOVE(&e, "#bf");
  /* As the KCL counts: a steal is a switch, taking a free lease is not. */
  if (old_owner && strcmp(old_owner, owner) != 0) {
    name(&e, "#sw", KN_DDB_OWNER_SWITCHES);
    value(&e, ":one", kn_ddb_n(1));
    ADD(&e, "#sw :one");
  }
  outcome_t want = {.owner = owner, .counter = counter + 1};
  kn_error_t *err = update(d, "take", key, &e, &want);
  if (!err) *new_counter = counter + 1;
  return err;
}

static kn_error_t *ddb_renew(kn_lease_store_t *ls, const char *key,
                             int64_t counter, const char *owner,
                             int64_t *new_counter, char **handoff_to) {
  ddb_store_t *d = store_of(ls);
  *handoff_to = NULL;
  if (!owner) return no_owner(d, "renew", key);
  expr_t e;
  expr_init(&e);
  owned_by(&e, counter, owner);
  bump(&e, counter);
  outcome_t want = {.owner = owner, .counter = counter + 1};
  /* The item as renewed says whether a hand-off was asked: a write
   * answer, no read. */
  json_t *item = NULL;
  kn_error_t *err = update_item(d, "renew", key, &e, &want, &item);
  if (!err) {
    *new_counter = counter + 1;
    if (handoff_of(item, owner, handoff_to))
      err = nomem(d); /* renewed all the same */
  }
  json_decref(item);
  return err;
}

static kn_error_t *ddb_mark(kn_lease_store_t *ls, const char *key,
                            int64_t counter, const char *owner, int failing,
                            int64_t *new_counter) {
  ddb_store_t *d = store_of(ls);
  if (!owner) return no_owner(d, "mark", key);
  expr_t e;
  expr_init(&e);
  owned_by(&e, counter, owner);
  bump(&e, counter);
  name(&e, "#bf", KN_DDB_BEAT_FAILING);
  if (failing) {
    value(&e, ":bf", kn_ddb_n(1));
    SET(&e, "#bf = :bf");
  } else {
    REMOVE(&e, "#bf");
  }
  outcome_t want = {.owner = owner, .counter = counter + 1};
  kn_error_t *err = update(d, "mark", key, &e, &want);
  if (!err) *new_counter = counter + 1;
  return err;
}

static kn_error_t *ddb_release(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *owner,
                               int64_t *new_counter) {
  ddb_store_t *d = store_of(ls);
  if (!owner) return no_owner(d, "release", key);
  expr_t e;
  expr_init(&e);
  owned_by(&e, counter, owner);
  bump(&e, counter);
  REMOVE(&e, "#o");
  REMOVE(&e, "#co");
  name(&e, "#bf", KN_DDB_BEAT_FAILING);
  REMOVE(&e, "#bf");
  outcome_t want = {.owner = NULL, .counter = counter + 1};
  kn_error_t *err = update(d, "release", key, &e, &want);
  if (!err) *new_counter = counter + 1;
  return err;
}

static kn_error_t *ddb_checkpoint(kn_lease_store_t *ls, const char *key,
                                  int64_t counter, const char *owner,
                                  const char *checkpoint, int64_t subseq,
                                  const char *pending, int64_t pending_subseq,
                                  const void *state, size_t state_len,
                                  int64_t *new_counter, char **handoff_to) {
  ddb_store_t *d = store_of(ls);
  *handoff_to = NULL;
  if (!owner) return no_owner(d, "checkpoint", key);
  expr_t e;
  expr_init(&e);
  owned_by(&e, counter, owner);
  bump(&e, counter);
  if (checkpoint) {
    name(&e, "#cp", KN_DDB_CHECKPOINT);
    name(&e, "#cs", KN_DDB_CHECKPOINT_SUBSEQ);
    name(&e, "#sw", KN_DDB_OWNER_SWITCHES);
    value(&e, ":cp", kn_ddb_s(checkpoint));
    value(&e, ":cs", kn_ddb_n(subseq));
    value(&e, ":zero", kn_ddb_n(0));
    SET(&e, "#cp = :cp");
    SET(&e, "#cs = :cs");
    SET(&e, "#sw = :zero");
  }
  name(&e, "#st", KN_DDB_PENDING_STATE);
  if (pending) {
    name(&e, "#p", KN_DDB_PENDING);
    name(&e, "#ps", KN_DDB_PENDING_SUBSEQ);
    value(&e, ":p", kn_ddb_s(pending));
    value(&e, ":ps", kn_ddb_n(pending_subseq));
    SET(&e, "#p = :p");
    SET(&e, "#ps = :ps");
    if (state) {
      value(&e, ":st", kn_ddb_b(state, state_len));
      SET(&e, "#st = :st");
    } else {
      REMOVE(&e, "#st");
    }
  } else {
    name(&e, "#p", KN_DDB_PENDING);
    name(&e, "#ps", KN_DDB_PENDING_SUBSEQ);
    REMOVE(&e, "#p");
    REMOVE(&e, "#ps");
    REMOVE(&e, "#st");
  }
  outcome_t want = {.owner = owner,
                    .counter = counter + 1,
                    .checkpointed = 1,
                    .checkpoint = checkpoint,
                    .subseq = subseq,
                    .pending = pending,
                    .pending_subseq = pending_subseq,
                    .state = pending ? state : NULL,
                    .state_len = state_len};
  /* As for renew: the item as checkpointed says whether a hand-off was
   * asked (a busy lease checkpoints instead of renewing). */
  json_t *item = NULL;
  kn_error_t *err = update_item(d, "checkpoint", key, &e, &want, &item);
  if (!err) {
    *new_counter = counter + 1;
    if (handoff_of(item, owner, handoff_to))
      err = nomem(d); /* checkpointed all the same */
  }
  json_decref(item);
  return err;
}

static kn_error_t *ddb_handoff(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *old_owner,
                               const char *new_owner) {
  ddb_store_t *d = store_of(ls);
  if (!old_owner || !new_owner) return no_owner(d, "handoff", key);
  expr_t e;
  expr_init(&e);
  name(&e, "#c", KN_DDB_LEASE_COUNTER);
  name(&e, "#o", KN_DDB_LEASE_OWNER);
  name(&e, "#co", KN_DDB_CHECKPOINT_OWNER);
  value(&e, ":c", kn_ddb_n(counter));
  value(&e, ":old", kn_ddb_s(old_owner));
  value(&e, ":new", kn_ddb_s(new_owner));
  COND(&e, "#c = :c");
  COND(&e, "#o = :old");
  COND(&e, "attribute_not_exists(#co)");
  SET(&e, "#o = :new");
  SET(&e, "#co = :old");
  /* No outcome check: a retry that finds its own request in place fails
   * its condition and is reported as such; the next take round sees the
   * lease in this worker's name with the hand-off under way. */
  return update(d, "handoff", key, &e, NULL);
}

static kn_error_t *ddb_handoff_done(kn_lease_store_t *ls, const char *key,
                                    int64_t counter, const char *owner,
                                    int64_t *new_counter) {
  ddb_store_t *d = store_of(ls);
  if (!owner) return no_owner(d, "handoff_done", key);
  expr_t e;
  expr_init(&e);
  name(&e, "#c", KN_DDB_LEASE_COUNTER);
  name(&e, "#co", KN_DDB_CHECKPOINT_OWNER);
  name(&e, "#sw", KN_DDB_OWNER_SWITCHES);
  value(&e, ":c", kn_ddb_n(counter));
  value(&e, ":o", kn_ddb_s(owner));
  value(&e, ":one", kn_ddb_n(1));
  COND(&e, "#c = :c");
  COND(&e, "#co = :o");
  bump(&e, counter);
  REMOVE(&e, "#co");
  name(&e, "#bf", KN_DDB_BEAT_FAILING);
  REMOVE(&e, "#bf");
  ADD(&e, "#sw :one");
  kn_error_t *err = update(d, "handoff_done", key, &e, NULL);
  if (!err) *new_counter = counter + 1;
  return err;
}

static kn_error_t *ddb_set_children(kn_lease_store_t *ls, const char *key,
                                    char *const *children, size_t n) {
  ddb_store_t *d = store_of(ls);
  expr_t e;
  expr_init(&e);
  name(&e, "#k", KN_DDB_LEASE_KEY);
  name(&e, "#ch", KN_DDB_CHILDREN);
  COND(&e, "attribute_exists(#k)");
  if (n) {
    value(&e, ":ch", kn_ddb_ss(children, n));
    SET(&e, "#ch = :ch");
  } else {
    REMOVE(&e, "#ch");
  }
  return update(d, "set_children", key, &e, NULL);
}

static kn_error_t *ddb_remove(kn_lease_store_t *ls, const char *key,
                              int64_t counter) {
  ddb_store_t *d = store_of(ls);
  json_t *req = keyed_request(d, key);
  expr_t e;
  expr_init(&e);
  name(&e, "#c", KN_DDB_LEASE_COUNTER);
  value(&e, ":c", kn_ddb_n(counter));
  COND(&e, "#c = :c");
  int rc = !req || expr_apply(&e, req);
  expr_free(&e);
  if (rc) {
    json_decref(req);
    return nomem(d);
  }
  kn_error_t *err = call(d, "DeleteItem", req, NULL);
  return err ? context(d, err, "remove", key) : NULL;
}

/* ---- the tables ---- */

static json_t *table_request(const char *table) {
  json_t *req = json_object();
  if (req && json_object_set_new(req, "TableName", json_string(table))) {
    json_decref(req);
    req = NULL;
  }
  return req;
}

/* DescribeTable: *status gets a copy of TableStatus.  Checks that the key
 * is the single hash key `hash`, so that a wrong table fails here and not
 * on every call; what names the kind of table in that message. */
static kn_error_t *describe(ddb_store_t *d, const char *table,
                            const char *hash_key, const char *what,
                            char **status) {
  json_t *req = table_request(table), *resp = NULL;
  *status = NULL;
  if (!req) return nomem(d);
  kn_error_t *err = call(d, "DescribeTable", req, &resp);
  if (err) return err;
  json_t *t = json_object_get(resp, "Table");
  const char *st = json_string_value(json_object_get(t, "TableStatus"));
  json_t *ks = json_object_get(t, "KeySchema");
  const char *hash = NULL;
  size_t i;
  json_t *k;
  json_array_foreach(ks, i, k) {
    const char *type = json_string_value(json_object_get(k, "KeyType"));
    if (type && strcmp(type, "HASH") == 0)
      hash = json_string_value(json_object_get(k, "AttributeName"));
  }
  if (!st) {
    err = kn_error_new(KN_ERR__BAD_MSG, "DescribeTable: no TableStatus");
  } else if (json_array_size(ks) && (json_array_size(ks) != 1 || !hash ||
                                     strcmp(hash, hash_key) != 0)) {
    err = kn_error_new(KN_ERR__CONF,
                       "table %s is not a %s: its key is not the single hash "
                       "key %s",
                       table, what, hash_key);
  } else if (!(*status = strdup(st))) {
    err = nomem(d);
  }
  json_decref(resp);
  return err;
}

static kn_error_t *create_table(ddb_store_t *d, const char *table,
                                const char *hash_key) {
  json_t *req = table_request(table);
  json_t *defs = json_pack("[{s:s, s:s}]", "AttributeName", hash_key,
                           "AttributeType", "S");
  json_t *keys =
      json_pack("[{s:s, s:s}]", "AttributeName", hash_key, "KeyType", "HASH");
  if (!req || !defs || !keys ||
      json_object_set_new(req, "AttributeDefinitions", defs) ||
      json_object_set_new(req, "KeySchema", keys) ||
      json_object_set_new(req, "BillingMode", json_string("PAY_PER_REQUEST"))) {
    json_decref(req);
    return nomem(d);
  }
  return call(d, "CreateTable", req, NULL);
}

/* Creates table (hash key hash_key, on-demand) if missing and waits until
 * it serves reads and writes. */
static kn_error_t *ensure_one(ddb_store_t *d, const char *table,
                              const char *hash_key, const char *what) {
  char *status = NULL;
  kn_error_t *err = describe(d, table, hash_key, what, &status);
  if (err && kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND) {
    kn_error_destroy(err);
    err = create_table(d, table, hash_key);
    /* Another worker created it at the same moment: as good. */
    if (err && kn_error_code(err) == KN_ERR_RESOURCE_IN_USE) {
      kn_error_destroy(err);
      err = NULL;
    }
    if (!err) err = describe(d, table, hash_key, what, &status);
  }
  kn_backoff_t bo;
  kn_backoff_init(&bo, 100, 2000);
  int64_t deadline = kn_mono_ms() + d->table_wait_ms;
  /* UPDATING tables serve reads and writes; wait for the others. */
  while (!err && strcmp(status, "ACTIVE") != 0 &&
         strcmp(status, "UPDATING") != 0) {
    if (strcmp(status, "DELETING") == 0) {
      err = kn_error_new(KN_ERR__STATE, "table %s is being deleted", table);
      break;
    }
    if (kn_mono_ms() >= deadline) {
      err = kn_error_new(KN_ERR__TIMED_OUT, "table %s still %s after %ld ms",
                         table, status, d->table_wait_ms);
      break;
    }
    /* The ceiling, not a jittered delay: one poller, nothing to spread. */
    int64_t delay = kn_backoff_ceiling(&bo);
    kn_backoff_next(&bo);
    kn_sleep_ms(delay);
    free(status);
    status = NULL;
    err = describe(d, table, hash_key, what, &status);
  }
  free(status);
  return err;
}

/* The lease table, then the membership table.  A worker whose rights do
 * not reach the membership table (AccessDenied) still works with the
 * lease table alone: heartbeat then says it is unsupported. */
static kn_error_t *ddb_ensure_table(kn_lease_store_t *ls) {
  ddb_store_t *d = store_of(ls);
  kn_error_t *err = ensure_one(d, d->table, KN_DDB_LEASE_KEY, "lease table");
  if (!err && d->members_table) {
    err =
        ensure_one(d, d->members_table, KN_DDB_MEMBERS_KEY, "membership table");
    if (err && kn_error_code(err) == KN_ERR_ACCESS_DENIED) {
      kn_error_destroy(err);
      err = NULL;
    }
  }
  return err ? context(d, err, "ensure_table", NULL) : NULL;
}

/* ---- the membership ---- */

#define TOO_LONG                                   \
  "the lease table's name leaves no room for the " \
  "suffix " KN_DDB_MEMBERS_SUFFIX " (255 characters at most)"

/* KN_ERR__UNSUPPORTED for op, saying why (and cause's message, cause
 * destroyed). */
static kn_error_t *no_membership(ddb_store_t *d, const char *op,
                                 const char *why, kn_error_t *cause) {
  kn_error_t *e = kn_error_new(
      KN_ERR__UNSUPPORTED,
      "lease store %s: %s: no membership table%s%s: %s%s%s", d->head.name, op,
      d->members_table ? " " : "", d->members_table ? d->members_table : "",
      why, cause ? ": " : "", cause ? kn_error_string(cause) : "");
  kn_error_destroy(cause);
  return e;
}

/* The key of membership item b: {"key": "members"} for 0, else
 * {"key": "members#B"}; NULL on out-of-memory. */
static json_t *item_key(int b) {
  char k[48];
  if (b)
    snprintf(k, sizeof(k), KN_DDB_MEMBERS_ITEM "#%d", b);
  else
    snprintf(k, sizeof(k), KN_DDB_MEMBERS_ITEM);
  json_t *key = json_object();
  if (key && json_object_set_new(key, KN_DDB_MEMBERS_KEY, kn_ddb_s(k))) {
    json_decref(key);
    return NULL;
  }
  return key;
}

static void set_item(kn_members_t *m, int b) {
  for (size_t i = 0; i < m->n; i++) m->v[i].bucket = b;
  for (size_t i = 0; i < m->n_bad; i++) m->bad[i].bucket = b;
}

static kn_error_t *bad_item(ddb_store_t *d, const char *op, int b) {
  return kn_error_new(KN_ERR__INVALID_ARG,
                      "lease store %s: %s: no membership item %d", d->head.name,
                      op, b);
}

/* Names ph as worker's attribute ("w:WORKER") in e. */
static void member_name(expr_t *e, const char *ph, const char *worker) {
  char *attr = kn_asprintf(KN_DDB_MEMBER_PREFIX "%s", worker);
  if (!attr) e->oom = 1;
  name(e, ph, attr ? attr : "");
  free(attr);
}

/* Removes the forgotten workers' attributes (each once) into e. */
static void forget_into(expr_t *e, char *const *forget, size_t n,
                        const char *keep) {
  for (size_t i = 0; i < n; i++) {
    int skip = !forget[i] || (keep && strcmp(forget[i], keep) == 0);
    /* The same path twice in one expression is refused. */
    for (size_t k = 0; !skip && k < i; k++)
      skip = forget[k] && strcmp(forget[k], forget[i]) == 0;
    if (skip) continue;
    char ph[32];
    snprintf(ph, sizeof(ph), "#f%zu", i);
    member_name(e, ph, forget[i]);
    REMOVE(e, "%s", ph);
  }
}

/* One UpdateItem that writes this worker's attribute, adds bump to the
 * epoch and removes the forgotten workers' attributes, answered with the
 * whole item (ALL_NEW): no read.  Not conditional: a retried call whose
 * first attempt had gone through writes the same values again and adds
 * bump twice, which only makes the other workers look once more. */
static kn_error_t *ddb_heartbeat(kn_lease_store_t *ls, const char *worker,
                                 int bucket, int64_t beat, int64_t leases,
                                 int64_t bump, char *const *forget,
                                 size_t n_forget, kn_members_t *out) {
  ddb_store_t *d = store_of(ls);
  memset(out, 0, sizeof(*out));
  if (!worker || !*worker)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: heartbeat: no worker id", ls->name);
  if (bucket < 0 || bucket >= KN_MEMBERS_BUCKETS_MAX)
    return bad_item(d, "heartbeat", bucket);
  if (!d->members_table) return no_membership(d, "heartbeat", TOO_LONG, NULL);
  expr_t e;
  expr_init(&e);
  member_name(&e, "#w", worker);
  value(&e, ":w", kn_ddb_member_value(beat, leases));
  SET(&e, "#w = :w");
  name(&e, "#e", KN_DDB_MEMBERS_EPOCH);
  value(&e, ":bump", kn_ddb_n(bump));
  ADD(&e, "#e :bump");
  forget_into(&e, forget, n_forget, worker);
  json_t *req = table_request(d->members_table), *key = item_key(bucket),
         *resp = NULL;
  if (!req || !key || json_object_set(req, "Key", key) || expr_apply(&e, req) ||
      json_object_set_new(req, "ReturnValues", json_string("ALL_NEW"))) {
    json_decref(req);
    json_decref(key);
    expr_free(&e);
    return nomem(d);
  }
  json_decref(key);
  expr_free(&e);
  kn_error_t *err = call(d, "UpdateItem", req, &resp);
  if (err) {
    kn_err_t code = kn_error_code(err);
    if (code == KN_ERR_RESOURCE_NOT_FOUND)
      return no_membership(d, "heartbeat",
                           "it does not exist (ensure_table creates it)", err);
    if (code == KN_ERR_ACCESS_DENIED)
      return no_membership(d, "heartbeat", "no access to it", err);
    return context(d, err, "heartbeat", worker);
  }
  if (kn_ddb_item_to_members(json_object_get(resp, "Attributes"), out, &err))
    err = context(d, err, "heartbeat", worker);
  else
    set_item(out, bucket);
  json_decref(resp);
  return err;
}

/* One UpdateItem of item `bucket` (no answer read back); op names it. */
static kn_error_t *update_members(ddb_store_t *d, const char *op, int bucket,
                                  expr_t *e) {
  json_t *req = table_request(d->members_table), *key = item_key(bucket),
         *resp = NULL;
  if (!req || !key || json_object_set(req, "Key", key) || expr_apply(e, req)) {
    json_decref(req);
    json_decref(key);
    expr_free(e);
    return nomem(d);
  }
  json_decref(key);
  expr_free(e);
  kn_error_t *err = call(d, "UpdateItem", req, &resp);
  json_decref(resp);
  if (err && kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND)
    return no_membership(d, op, "it does not exist", err);
  if (err && kn_error_code(err) == KN_ERR_ACCESS_DENIED)
    return no_membership(d, op, "no access to it", err);
  return err ? context(d, err, op, NULL) : NULL;
}

static kn_error_t *ddb_leave(kn_lease_store_t *ls, const char *worker,
                             int bucket) {
  ddb_store_t *d = store_of(ls);
  if (!worker || !*worker)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "lease store %s: leave: no worker id", ls->name);
  if (bucket < 0 || bucket >= KN_MEMBERS_BUCKETS_MAX)
    return bad_item(d, "leave", bucket);
  if (!d->members_table) return no_membership(d, "leave", TOO_LONG, NULL);
  expr_t e;
  expr_init(&e);
  member_name(&e, "#w", worker);
  REMOVE(&e, "#w");
  return update_members(d, "leave", bucket, &e);
}

/* The digest set, the epoch made to exist (a heartbeat's answer needs
 * it), the forgotten removed. */
static kn_error_t *ddb_publish(kn_lease_store_t *ls, int bucket,
                               const char *digest, char *const *forget,
                               size_t n_forget) {
  ddb_store_t *d = store_of(ls);
  if (bucket < 0 || bucket >= KN_MEMBERS_BUCKETS_MAX)
    return bad_item(d, "publish", bucket);
  if (!d->members_table) return no_membership(d, "publish", TOO_LONG, NULL);
  expr_t e;
  expr_init(&e);
  name(&e, "#d", KN_DDB_MEMBERS_DIGEST);
  value(&e, ":d", kn_ddb_s(digest ? digest : ""));
  SET(&e, "#d = :d");
  name(&e, "#e", KN_DDB_MEMBERS_EPOCH);
  value(&e, ":zero", kn_ddb_n(0));
  ADD(&e, "#e :zero");
  forget_into(&e, forget, n_forget, NULL);
  return update_members(d, "publish", bucket, &e);
}

/* The item number of a membership item's key ("members" 0, "members#B"
 * B), or -1 for another item. */
static int item_of_key(json_t *item) {
  const char *k = json_string_value(
      json_object_get(json_object_get(item, KN_DDB_MEMBERS_KEY), "S"));
  size_t n = strlen(KN_DDB_MEMBERS_ITEM);
  if (!k || strncmp(k, KN_DDB_MEMBERS_ITEM, n) != 0) return -1;
  if (!k[n]) return 0;
  long long b = 0;
  if (k[n] != '#' ||
      kn_str_to_i64(k + n + 1, 1, KN_MEMBERS_BUCKETS_MAX - 1, &b))
    return -1;
  return (int)b;
}

typedef struct members_ctx {
  ddb_store_t *d;
  kn_members_t *items; /* one per membership item read (owned) */
  size_t n;
} members_ctx_t;

static kn_error_t *members_page(json_t *page, void *ctx) {
  members_ctx_t *m = ctx;
  kn_error_t *err = NULL;
  json_t *it;
  size_t i;
  json_array_foreach(page, i, it) {
    int b = item_of_key(it);
    if (b < 0) continue;
    kn_members_t *v = realloc(m->items, (m->n + 1) * sizeof(*v));
    if (!v) return nomem(m->d);
    m->items = v;
    if (kn_ddb_item_to_members(it, &m->items[m->n], &err)) return err;
    set_item(&m->items[m->n++], b);
    if (b == 0 && m->n > 1) { /* item 0 first: its digest is the merged one */
      kn_members_t t = m->items[0];
      m->items[0] = m->items[m->n - 1];
      m->items[m->n - 1] = t;
    }
  }
  return NULL;
}

/* A consistent Scan of the membership table, every item merged. */
static kn_error_t *ddb_members(kn_lease_store_t *ls, kn_members_t *out) {
  ddb_store_t *d = store_of(ls);
  memset(out, 0, sizeof(*out));
  if (!d->members_table) return no_membership(d, "members", TOO_LONG, NULL);
  members_ctx_t mc = {d, NULL, 0};
  kn_error_t *err = scan_pages(d, d->members_table, 0, members_page, &mc);
  kn_members_t *items = mc.items;
  size_t n = mc.n;
  if (!err && kn_members_merge(out, items, n)) err = nomem(d);
  for (size_t i = 0; i < n; i++) kn_members_clear(&items[i]);
  free(items);
  if (!err) return NULL;
  kn_err_t code = kn_error_code(err);
  if (code == KN_ERR_RESOURCE_NOT_FOUND)
    return no_membership(d, "members", "it does not exist", err);
  if (code == KN_ERR_ACCESS_DENIED)
    return no_membership(d, "members", "no access to it", err);
  return context(d, err, "members", NULL);
}

static void ddb_destroy(kn_lease_store_t *ls) {
  ddb_store_t *d = store_of(ls);
  if (d->cleanup) d->cleanup(d->opaque);
  free(d->table);
  free(d->members_table);
  free(ls->name);
  free(d);
}

static const kn_lease_store_ops_t ddb_ops = {
    ddb_ensure_table, ddb_list,         ddb_get,       ddb_create,
    ddb_take,         ddb_renew,        ddb_mark,      ddb_release,
    ddb_checkpoint,   ddb_set_children, ddb_handoff,   ddb_handoff_done,
    ddb_remove,       ddb_destroy,      ddb_heartbeat, ddb_leave,
    ddb_publish,      ddb_members,
};

kn_lease_store_t *kn_lease_store_dynamodb_new(const char *table,
                                              kn_ddb_call_fn *call_fn,
                                              void *opaque,
                                              void (*cleanup)(void *opaque),
                                              kn_error_t **errp) {
  *errp = NULL;
  ddb_store_t *d = calloc(1, sizeof(*d));
  char *label = kn_asprintf("dynamodb:%s", table);
  if (!d || !label || !(d->table = strdup(table)) ||
      kn_lease_store_init(&d->head, &ddb_ops, label)) {
    free(label);
    if (d) {
      free(d->table);
      free(d->head.name);
    }
    free(d);
    if (cleanup) cleanup(opaque);
    *errp = kn_error_new(KN_ERR__NOMEM, "lease store: out of memory");
    return NULL;
  }
  free(label);
  if (strlen(table) + strlen(KN_DDB_MEMBERS_SUFFIX) <= 255 &&
      !(d->members_table = kn_asprintf("%s" KN_DDB_MEMBERS_SUFFIX, table))) {
    free(d->table);
    free(d->head.name);
    free(d);
    if (cleanup) cleanup(opaque);
    *errp = kn_error_new(KN_ERR__NOMEM, "lease store: out of memory");
    return NULL;
  }
  d->call = call_fn;
  d->opaque = opaque;
  d->cleanup = cleanup;
  d->table_wait_ms = TABLE_WAIT_MS;
  return &d->head;
}

/* Other stores ignore the tuning calls. */
void kn_lease_store_dynamodb_set_scan_limit(kn_lease_store_t *ls, int limit) {
  if (ls && ls->ops == &ddb_ops) store_of(ls)->scan_limit = limit;
}

void kn_lease_store_dynamodb_set_table_wait(kn_lease_store_t *ls,
                                            long wait_ms) {
  if (ls && ls->ops == &ddb_ops) store_of(ls)->table_wait_ms = wait_ms;
}
