#include "lease/ddb_item.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/base64.h"
#include "util/str.h"

/* {"T": value}; steals value. */
static json_t *typed(const char *type, json_t *value) {
  if (!value) return NULL;
  json_t *o = json_object();
  if (o && json_object_set_new(o, type, value) == 0) return o;
  json_decref(o);
  return NULL;
}

json_t *kn_ddb_s(const char *s) { return typed("S", json_string(s)); }

json_t *kn_ddb_n(int64_t v) {
  char num[32];
  snprintf(num, sizeof(num), "%" PRId64, v);
  return typed("N", json_string(num));
}

json_t *kn_ddb_b(const void *p, size_t n) {
  char *b64 = malloc(kn_base64_encoded_len(n) + 1);
  if (!b64) return NULL;
  size_t len = kn_base64_encode(b64, p, n);
  json_t *v = typed("B", json_stringn(b64, len));
  free(b64);
  return v;
}

json_t *kn_ddb_ss(char *const *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) {
    if (json_array_append_new(a, json_string(v[i]))) {
      json_decref(a);
      a = NULL;
    }
  }
  return typed("SS", a);
}

static kn_error_t *nomem(void) {
  return kn_error_new(KN_ERR__NOMEM, "lease item: out of memory");
}

/* Sets attribute name to value (stolen); -1 when value is NULL. */
static int put(json_t *item, const char *name, json_t *value) {
  return value ? json_object_set_new(item, name, value) : -1;
}

static const char *const known[] = {
    KN_DDB_LEASE_KEY,      KN_DDB_LEASE_OWNER,      KN_DDB_LEASE_COUNTER,
    KN_DDB_OWNER_SWITCHES, KN_DDB_CHECKPOINT,       KN_DDB_CHECKPOINT_SUBSEQ,
    KN_DDB_PENDING,        KN_DDB_PENDING_SUBSEQ,   KN_DDB_PENDING_STATE,
    KN_DDB_PARENTS,        KN_DDB_CHILDREN,         KN_DDB_HASH_START,
    KN_DDB_HASH_END,       KN_DDB_CHECKPOINT_OWNER, KN_DDB_BEAT_FAILING,
};

static int is_known(const char *name) {
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (strcmp(name, known[i]) == 0) return 1;
  return 0;
}

json_t *kn_ddb_item_from_lease(const kn_lease_t *l, kn_error_t **errp) {
  *errp = NULL;
  json_t *item = NULL;
  if (l->extra) {
    json_error_t jerr;
    item = json_loads(l->extra, 0, &jerr);
    if (!json_is_object(item)) {
      json_decref(item);
      *errp = kn_error_new(KN_ERR__INVALID_ARG,
                           "lease %s: extra attributes are not a JSON "
                           "object: %s",
                           l->key ? l->key : "(no key)", jerr.text);
      return NULL;
    }
  } else {
    item = json_object();
  }
  if (!item) {
    *errp = nomem();
    return NULL;
  }
  /* The lease's own fields decide every KCL attribute. */
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    json_object_del(item, known[i]);
  int rc = put(item, KN_DDB_LEASE_KEY, kn_ddb_s(l->key ? l->key : ""));
  rc |= put(item, KN_DDB_LEASE_COUNTER, kn_ddb_n(l->counter));
  /* A free lease has no leaseOwner at all. */
  if (l->owner) rc |= put(item, KN_DDB_LEASE_OWNER, kn_ddb_s(l->owner));
  rc |= put(item, KN_DDB_OWNER_SWITCHES, kn_ddb_n(l->owner_switches));
  if (l->checkpoint) {
    rc |= put(item, KN_DDB_CHECKPOINT, kn_ddb_s(l->checkpoint));
    rc |= put(item, KN_DDB_CHECKPOINT_SUBSEQ, kn_ddb_n(l->checkpoint_subseq));
  }
  if (l->pending) {
    rc |= put(item, KN_DDB_PENDING, kn_ddb_s(l->pending));
    rc |= put(item, KN_DDB_PENDING_SUBSEQ, kn_ddb_n(l->pending_subseq));
    if (l->pending_state)
      rc |= put(item, KN_DDB_PENDING_STATE,
                kn_ddb_b(l->pending_state, l->pending_state_len));
  }
  if (l->checkpoint_owner)
    rc |= put(item, KN_DDB_CHECKPOINT_OWNER, kn_ddb_s(l->checkpoint_owner));
  if (l->beat_failing) rc |= put(item, KN_DDB_BEAT_FAILING, kn_ddb_n(1));
  if (l->n_parents)
    rc |= put(item, KN_DDB_PARENTS, kn_ddb_ss(l->parents, l->n_parents));
  if (l->n_children)
    rc |= put(item, KN_DDB_CHILDREN, kn_ddb_ss(l->children, l->n_children));
  if (l->hash_start && l->hash_end) {
    rc |= put(item, KN_DDB_HASH_START, kn_ddb_s(l->hash_start));
    rc |= put(item, KN_DDB_HASH_END, kn_ddb_s(l->hash_end));
  }
  if (rc) {
    json_decref(item);
    *errp = nomem();
    return NULL;
  }
  return item;
}

/* ---- reading ---- */

/* The value of attribute name if it has type `type`, else NULL. */
static json_t *attr(json_t *item, const char *name, const char *type) {
  return json_object_get(kn_json_obj(item, name), type);
}

/* A string attribute, copied; 0, or -1 on out-of-memory. */
static int get_s(json_t *item, const char *name, char **out) {
  const char *s = json_string_value(attr(item, name, "S"));
  *out = s ? strdup(s) : NULL;
  return s && !*out ? -1 : 0;
}

/* An integer N attribute; absent leaves *out at 0.  0, or -1 when it is
 * not an integer. */
static int get_n(json_t *item, const char *name, int64_t *out) {
  const char *s = json_string_value(attr(item, name, "N"));
  long long v = 0;
  *out = 0;
  if (!s) return 0;
  if (kn_str_to_i64(s, INT64_MIN, INT64_MAX, &v)) return -1;
  *out = (int64_t)v;
  return 0;
}

/* A string set; 0, or -1 on out-of-memory. */
static int get_ss(json_t *item, const char *name, char ***out, size_t *n) {
  json_t *a = attr(item, name, "SS");
  size_t count = json_array_size(a), k = 0;
  *out = NULL;
  *n = 0;
  if (!count) return 0;
  char **v = calloc(count, sizeof(*v));
  if (!v) return -1;
  for (size_t i = 0; i < count; i++) {
    const char *s = json_string_value(json_array_get(a, i));
    if (!s) continue;
    if (!(v[k] = strdup(s))) {
      while (k) free(v[--k]);
      free(v);
      return -1;
    }
    k++;
  }
  *out = v;
  *n = k;
  return 0;
}

/* The attributes of item that are not the KCL's, as compact JSON with
 * sorted keys (stable text), or NULL when there are none. */
static int get_extra(json_t *item, char **out) {
  json_t *extra = json_object();
  const char *name;
  json_t *value;
  *out = NULL;
  if (!extra) return -1;
  json_object_foreach(item, name, value) {
    if (is_known(name)) continue;
    if (json_object_set(extra, name, value)) {
      json_decref(extra);
      return -1;
    }
  }
  int rc = 0;
  if (json_object_size(extra)) {
    *out = json_dumps(extra, JSON_COMPACT | JSON_SORT_KEYS);
    rc = *out ? 0 : -1;
  }
  json_decref(extra);
  return rc;
}

const char *kn_ddb_item_metrics_worker(json_t *item) {
  const char *entity = json_string_value(attr(item, KN_DDB_ENTITY_TYPE, "S"));
  if (!entity || strcmp(entity, KN_DDB_ENTITY_WORKER_METRICS) != 0) return NULL;
  return json_string_value(attr(item, KN_DDB_LEASE_KEY, "S"));
}

int kn_ddb_item_to_lease(json_t *item, kn_lease_t *out, kn_error_t **errp) {
  memset(out, 0, sizeof(*out));
  *errp = NULL;
  const char *key = json_string_value(attr(item, KN_DDB_LEASE_KEY, "S"));
  if (!key) {
    *errp =
        kn_error_new(KN_ERR__BAD_MSG, "lease item without a string leaseKey");
    return -1;
  }
  const char *entity = json_string_value(attr(item, KN_DDB_ENTITY_TYPE, "S"));
  if (entity && strcmp(entity, "LEASE") != 0) return 1;

  const char *bad = NULL;
  if (get_n(item, KN_DDB_LEASE_COUNTER, &out->counter))
    bad = KN_DDB_LEASE_COUNTER;
  else if (get_n(item, KN_DDB_OWNER_SWITCHES, &out->owner_switches))
    bad = KN_DDB_OWNER_SWITCHES;
  else if (get_n(item, KN_DDB_CHECKPOINT_SUBSEQ, &out->checkpoint_subseq))
    bad = KN_DDB_CHECKPOINT_SUBSEQ;
  else if (get_n(item, KN_DDB_PENDING_SUBSEQ, &out->pending_subseq))
    bad = KN_DDB_PENDING_SUBSEQ;
  int64_t failing = 0;
  if (!bad && get_n(item, KN_DDB_BEAT_FAILING, &failing))
    bad = KN_DDB_BEAT_FAILING;
  out->beat_failing = failing != 0;
  if (bad) {
    *errp = kn_error_new(KN_ERR__BAD_MSG,
                         "lease %s: attribute %s is not an integer", key, bad);
    return -1;
  }

  int rc = get_s(item, KN_DDB_LEASE_KEY, &out->key);
  rc |= get_s(item, KN_DDB_LEASE_OWNER, &out->owner);
  rc |= get_s(item, KN_DDB_CHECKPOINT, &out->checkpoint);
  rc |= get_s(item, KN_DDB_PENDING, &out->pending);
  /* As the KCL reads it: an empty pending checkpoint is none. */
  if (out->pending && !*out->pending) {
    free(out->pending);
    out->pending = NULL;
  }
  if (!out->pending) out->pending_subseq = 0;
  rc |= get_ss(item, KN_DDB_PARENTS, &out->parents, &out->n_parents);
  rc |= get_ss(item, KN_DDB_CHILDREN, &out->children, &out->n_children);
  rc |= get_s(item, KN_DDB_HASH_START, &out->hash_start);
  rc |= get_s(item, KN_DDB_HASH_END, &out->hash_end);
  rc |= get_s(item, KN_DDB_CHECKPOINT_OWNER, &out->checkpoint_owner);
  rc |= get_extra(item, &out->extra);
  if (rc) {
    kn_lease_clear(out);
    *errp = nomem();
    return -1;
  }

  json_t *b = attr(item, KN_DDB_PENDING_STATE, "B");
  if (json_is_string(b)) {
    const char *b64 = json_string_value(b);
    size_t len = json_string_length(b);
    out->pending_state = malloc(kn_base64_decoded_max(len) + 1);
    long n =
        out->pending_state ? kn_base64_decode(out->pending_state, b64, len) : 0;
    if (!out->pending_state || n < 0) {
      *errp = out->pending_state
                  ? kn_error_new(KN_ERR__BAD_MSG,
                                 "lease %s: %s is not valid base64", key,
                                 KN_DDB_PENDING_STATE)
                  : nomem();
      kn_lease_clear(out);
      return -1;
    }
    out->pending_state_len = (size_t)n;
  }
  return 0;
}

/* ---- the membership item ---- */

json_t *kn_ddb_member_value(int64_t beat, int64_t leases) {
  json_t *a = json_array();
  if (a && (json_array_append_new(a, kn_ddb_n(beat)) ||
            json_array_append_new(a, kn_ddb_n(leases)))) {
    json_decref(a);
    a = NULL;
  }
  return typed("L", a);
}

/* An {"N": "..."} integer value; 0, or -1 when it is not one. */
static int n_value(json_t *v, int64_t *out) {
  const char *s = json_string_value(json_object_get(v, "N"));
  long long n = 0;
  if (!s || json_object_size(v) != 1 ||
      kn_str_to_i64(s, INT64_MIN, INT64_MAX, &n))
    return -1;
  *out = (int64_t)n;
  return 0;
}

static int by_worker(const void *a, const void *b) {
  return strcmp(((const kn_member_t *)a)->worker,
                ((const kn_member_t *)b)->worker);
}

/* A digest of an attribute's value (FNV-1a of its compact JSON), which
 * changes when the value does; INT64_MIN on out-of-memory. */
static int64_t value_digest(const json_t *value) {
  char *s = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
  if (!s) return INT64_MIN;
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = s; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  free(s);
  return (int64_t)(h >> 1);
}

int kn_ddb_item_to_members(json_t *item, kn_members_t *out, kn_error_t **errp) {
  memset(out, 0, sizeof(*out));
  *errp = NULL;
  if (!json_is_object(item)) {
    *errp = kn_error_new(KN_ERR__BAD_MSG,
                         "membership item: the answer has no attributes");
    return -1;
  }
  if (n_value(json_object_get(item, KN_DDB_MEMBERS_EPOCH), &out->epoch)) {
    *errp = kn_error_new(
        KN_ERR__BAD_MSG,
        "membership item: no integer attribute " KN_DDB_MEMBERS_EPOCH);
    return -1;
  }
  const char *dg = json_string_value(
      json_object_get(json_object_get(item, KN_DDB_MEMBERS_DIGEST), "S"));
  if (dg && !(out->digest = strdup(dg))) {
    *errp = nomem();
    return -1;
  }
  size_t cap = json_object_size(item);
  out->v = cap ? calloc(cap, sizeof(*out->v)) : NULL;
  out->bad = cap ? calloc(cap, sizeof(*out->bad)) : NULL;
  if (cap && (!out->v || !out->bad)) {
    kn_members_clear(out);
    *errp = nomem();
    return -1;
  }
  const char *name;
  json_t *value;
  size_t plen = strlen(KN_DDB_MEMBER_PREFIX);
  json_object_foreach(item, name, value) {
    if (strncmp(name, KN_DDB_MEMBER_PREFIX, plen) != 0) continue;
    json_t *l = json_object_get(value, "L");
    kn_member_t m = {0};
    int bad = !name[plen] || json_object_size(value) != 1 ||
              json_array_size(l) != 2 ||
              n_value(json_array_get(l, 0), &m.beat) ||
              n_value(json_array_get(l, 1), &m.leases);
    if (bad) {
      m.beat = value_digest(value);
      m.leases = 0;
    }
    if (!(m.worker = strdup(name + plen)) || (bad && m.beat == INT64_MIN)) {
      free(m.worker);
      kn_members_clear(out);
      *errp = nomem();
      return -1;
    }
    if (bad)
      out->bad[out->n_bad++] = m;
    else
      out->v[out->n++] = m;
  }
  if (!out->n_bad) {
    free(out->bad);
    out->bad = NULL;
  }
  if (!out->n) {
    free(out->v);
    out->v = NULL;
  } else if (out->n > 1) {
    qsort(out->v, out->n, sizeof(*out->v), by_worker);
  }
  return 0;
}
