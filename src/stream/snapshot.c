/* kn_snapshot_t: entries in shard id order, and format 1 of its bytes
 * (docs/STREAM_PROCESSING.md). */
#include "kn/snapshot.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "stream/wire.h"
#include "util/str.h"

typedef struct entry {
  char *id;
  int finished;
  kn_position_t pos; /* when not finished */
  char **children;
  size_t n_children;
} entry_t;

struct kn_snapshot_s {
  entry_t *v;
  size_t n, cap;
};

#define MAGIC "KNRS"
#define STATE_READING 1
#define STATE_FINISHED 2
#define ID_MAX 255

static void entry_clear(entry_t *e) {
  free(e->id);
  for (size_t i = 0; i < e->n_children; i++) free(e->children[i]);
  free(e->children);
  memset(e, 0, sizeof(*e));
}

kn_snapshot_t *kn_snapshot_new(void) {
  return calloc(1, sizeof(kn_snapshot_t));
}

void kn_snapshot_destroy(kn_snapshot_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) entry_clear(&s->v[i]);
  free(s->v);
  free(s);
}

/* Index of id, or where it would go (*found 0). */
static size_t locate(const kn_snapshot_t *s, const char *id, int *found) {
  return kn_sorted_find(s->v, s->n, sizeof(*s->v), offsetof(entry_t, id), id,
                        found);
}

long kn_snapshot_find(const kn_snapshot_t *s, const char *id) {
  int found;
  if (!s || !id) return -1;
  size_t i = locate(s, id, &found);
  return found ? (long)i : -1;
}

static int valid_id(const char *id) {
  size_t n = id ? strlen(id) : 0;
  return n >= 1 && n <= ID_MAX;
}

/* Puts e (whose strings the snapshot takes) in place of id's entry. */
static kn_err_t put(kn_snapshot_t *s, entry_t *e) {
  int found;
  size_t i = locate(s, e->id, &found);
  if (found) {
    entry_clear(&s->v[i]);
    s->v[i] = *e;
    return KN_ERR_NO_ERROR;
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    entry_t *v = realloc(s->v, cap * sizeof(*v));
    if (!v) return KN_ERR__NOMEM;
    s->v = v;
    s->cap = cap;
  }
  memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
  s->v[i] = *e;
  s->n++;
  return KN_ERR_NO_ERROR;
}

static int valid_pos(const kn_position_t *p) {
  kn_position_t q;
  switch (p->kind) {
    case KN_POSITION_TRIM_HORIZON:
    case KN_POSITION_LATEST:
    case KN_POSITION_AT_TIMESTAMP:
      return 1;
    case KN_POSITION_AT_SEQUENCE:
      return memchr(p->seq, '\0', sizeof(p->seq)) &&
             kn_position_at(&q, p->seq) == KN_ERR_NO_ERROR;
    case KN_POSITION_AFTER:
      return memchr(p->seq, '\0', sizeof(p->seq)) &&
             kn_position_after(&q, p->seq, 0) == KN_ERR_NO_ERROR;
    default:
      return 0;
  }
}

kn_err_t kn_snapshot_set_position(kn_snapshot_t *s, const char *shard_id,
                                  const kn_position_t *pos) {
  if (!s || !valid_id(shard_id) || !pos || !valid_pos(pos))
    return KN_ERR__INVALID_ARG;
  entry_t e = {0};
  if (!(e.id = strdup(shard_id))) return KN_ERR__NOMEM;
  e.pos = *pos;
  kn_err_t err = put(s, &e);
  if (err) entry_clear(&e);
  return err;
}

kn_err_t kn_snapshot_set_finished(kn_snapshot_t *s, const char *shard_id,
                                  const char *const *children, size_t n) {
  if (!s || !valid_id(shard_id) || (n && !children) || n > UINT16_MAX)
    return KN_ERR__INVALID_ARG;
  for (size_t i = 0; i < n; i++)
    if (!valid_id(children[i])) return KN_ERR__INVALID_ARG;
  entry_t e = {0};
  e.finished = 1;
  if (!(e.id = strdup(shard_id))) return KN_ERR__NOMEM;
  if (n && !(e.children = calloc(n, sizeof(char *)))) {
    entry_clear(&e);
    return KN_ERR__NOMEM;
  }
  for (size_t i = 0; i < n; i++, e.n_children++) {
    if (!(e.children[i] = strdup(children[i]))) {
      entry_clear(&e);
      return KN_ERR__NOMEM;
    }
  }
  kn_err_t err = put(s, &e);
  if (err) entry_clear(&e);
  return err;
}

int kn_snapshot_remove(kn_snapshot_t *s, const char *shard_id) {
  long i = kn_snapshot_find(s, shard_id);
  if (i < 0) return -1;
  entry_clear(&s->v[i]);
  memmove(&s->v[i], &s->v[i + 1], (s->n - (size_t)i - 1) * sizeof(*s->v));
  s->n--;
  return 0;
}

kn_snapshot_t *kn_snapshot_dup(const kn_snapshot_t *s) {
  kn_snapshot_t *d = kn_snapshot_new();
  for (size_t i = 0; d && s && i < s->n; i++) {
    const entry_t *e = &s->v[i];
    kn_err_t err = e->finished ? kn_snapshot_set_finished(
                                     d, e->id, (const char *const *)e->children,
                                     e->n_children)
                               : kn_snapshot_set_position(d, e->id, &e->pos);
    if (err) {
      kn_snapshot_destroy(d);
      return NULL;
    }
  }
  return d;
}

size_t kn_snapshot_count(const kn_snapshot_t *s) { return s ? s->n : 0; }
const char *kn_snapshot_shard(const kn_snapshot_t *s, size_t i) {
  return s->v[i].id;
}
int kn_snapshot_is_finished(const kn_snapshot_t *s, size_t i) {
  return s->v[i].finished;
}
const kn_position_t *kn_snapshot_position(const kn_snapshot_t *s, size_t i) {
  return s->v[i].finished ? NULL : &s->v[i].pos;
}
size_t kn_snapshot_child_count(const kn_snapshot_t *s, size_t i) {
  return s->v[i].n_children;
}
const char *kn_snapshot_child(const kn_snapshot_t *s, size_t i, size_t j) {
  return s->v[i].children[j];
}

/* ---- format 1 ---- */

kn_error_t *kn_snapshot_encode(const kn_snapshot_t *s, void **out,
                               size_t *len) {
  kn_wr_t w = {KN_BUF_INIT, 0};
  *out = NULL;
  *len = 0;
  kn_wr_header(&w, MAGIC, KN_SNAPSHOT_FORMAT);
  kn_wr_u32(&w, (uint32_t)kn_snapshot_count(s));
  for (size_t i = 0; i < kn_snapshot_count(s); i++) {
    const entry_t *e = &s->v[i];
    size_t at = w.b.len;
    kn_wr_u32(&w, 0); /* the entry's length, filled in below */
    kn_wr_str(&w, e->id);
    kn_wr_u8(&w, e->finished ? STATE_FINISHED : STATE_READING);
    if (e->finished) {
      kn_wr_u16(&w, (uint16_t)e->n_children);
      for (size_t j = 0; j < e->n_children; j++) kn_wr_str(&w, e->children[j]);
    } else {
      kn_wr_position(&w, &e->pos);
    }
    kn_wr_put_u32(&w, at, (uint32_t)(w.b.len - at - 4));
  }
  void *p = kn_wr_finish(&w, len);
  if (!p) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  *out = p;
  return NULL;
}

/* One entry of body r into s; returns 0, -1 malformed, -2 out of memory. */
static int decode_entry(kn_rd_t *r, kn_snapshot_t *s) {
  uint32_t elen = kn_rd_u32(r);
  if (r->bad || elen > r->n - r->off) return -1;
  /* Within the entry; fields a later format appends are skipped. */
  kn_rd_t er = {r->p, r->off + elen, r->off, 0};
  r->off += elen;
  int oom = 0, rc = 0;
  char *id = kn_rd_str(&er, &oom);
  uint8_t state = kn_rd_u8(&er);
  if (oom) return -2;
  if (er.bad || !valid_id(id)) {
    free(id);
    return -1;
  }
  if (kn_snapshot_find(s, id) >= 0) rc = -1; /* a shard twice */
  if (!rc && state == STATE_READING) {
    kn_position_t pos;
    kn_rd_position(&er, &pos);
    if (er.bad)
      rc = -1;
    else if (kn_snapshot_set_position(s, id, &pos))
      rc = -2;
  } else if (!rc && state == STATE_FINISHED) {
    size_t n = kn_rd_u16(&er);
    char **kids = n ? calloc(n, sizeof(char *)) : NULL;
    if (n && !kids) rc = -2;
    for (size_t j = 0; !rc && j < n; j++) {
      kids[j] = kn_rd_str(&er, &oom);
      if (oom)
        rc = -2;
      else if (er.bad || !kids[j])
        rc = -1;
    }
    if (!rc) {
      kn_err_t e =
          kn_snapshot_set_finished(s, id, (const char *const *)kids, n);
      rc = e == KN_ERR__NOMEM ? -2 : e ? -1 : 0;
    }
    for (size_t j = 0; kids && j < n; j++) free(kids[j]);
    free(kids);
  } else if (!rc) {
    rc = -1;
  }
  free(id);
  return rc;
}

kn_error_t *kn_snapshot_decode(const void *p, size_t len, kn_snapshot_t **out) {
  *out = NULL;
  kn_rd_t r;
  uint16_t version;
  char why[160];
  if (kn_rd_open(&r, p, len, MAGIC, KN_SNAPSHOT_FORMAT, &version, why,
                 sizeof(why)))
    return kn_error_new(KN_ERR__CORRUPT, "%s", why);
  kn_snapshot_t *s = kn_snapshot_new();
  if (!s) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  uint32_t n = kn_rd_u32(&r);
  for (uint32_t i = 0; i < n && !r.bad; i++) {
    int rc = decode_entry(&r, s);
    if (rc == -2) {
      kn_snapshot_destroy(s);
      return kn_error_new(KN_ERR__NOMEM, "out of memory");
    }
    if (rc) r.bad = 1;
  }
  if (r.bad || r.off != r.n) {
    kn_snapshot_destroy(s);
    return kn_error_new(KN_ERR__CORRUPT,
                        "KNRS snapshot malformed (entry list does not parse)");
  }
  *out = s;
  return NULL;
}
