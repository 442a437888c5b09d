/* Deaggregation: one Kinesis record in, its user records appended to a
 * batch.
 *
 * A hand-written reader for the fixed KPL schema, because protobuf-c's
 * unpack allocates every message and copies every payload; here payloads
 * stay where they are and the only copies are the key table entries, once
 * per aggregate.  The reader walks the protobuf up to three times: once
 * to check every byte and collect the key tables, once for the hash range
 * (only when asked), once to append.  Walking is cheap next to the MD5
 * that every aggregate needs anyway. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/pbwire.h"
#include "core/error.h"
#include "util/crypto.h"

int kn_agg_has_magic(const void *data, size_t len) {
  return len >= KN_AGG_MAGIC_LEN &&
         memcmp(data, KN_AGG_MAGIC, KN_AGG_MAGIC_LEN) == 0;
}

enum { HK_UNKNOWN, HK_IN, HK_OUT, HK_BAD };

/* One entry of a key table: where it is in the input, and what has been
 * worked out about it so far. */
struct key {
  const uint8_t *p;
  size_t len;
  const char *str; /* NUL-terminated copy in the batch, made on first use */
  int hk;          /* HK_*: the range check's verdict, made on first use */
};

struct table {
  struct key *v;
  size_t n, cap;
  struct key local[16]; /* most aggregates need no allocation */
};

/* One Record message, as read. */
struct urec {
  uint64_t pk, ehk;
  const uint8_t *data;
  size_t len;
  int has_pk, has_ehk, has_data;
};

/* What went wrong, and where: a byte offset in the Kinesis record, and
 * the record's position when it was inside one. */
struct fail {
  const char *what;
  size_t at;
  int in_record;
  size_t rec;
};

static void table_init(struct table *t) {
  t->v = t->local;
  t->n = 0;
  t->cap = sizeof(t->local) / sizeof(t->local[0]);
}

static void table_free(struct table *t) {
  if (t->v != t->local) free(t->v);
}

static int table_add(struct table *t, const uint8_t *p, size_t len) {
  if (t->n == t->cap) {
    size_t cap = t->cap * 2;
    struct key *v;
    if (t->v == t->local) {
      v = malloc(cap * sizeof(*v));
      if (v) memcpy(v, t->local, sizeof(t->local));
    } else {
      v = realloc(t->v, cap * sizeof(*v));
    }
    if (!v) return -1;
    t->v = v;
    t->cap = cap;
  }
  struct key *k = &t->v[t->n++];
  k->p = p;
  k->len = len;
  k->str = NULL;
  k->hk = HK_UNKNOWN;
  return 0;
}

static const char *read_tag(const uint8_t **pp, const uint8_t *end,
                            uint64_t *field, unsigned *wt) {
  uint64_t t;
  const uint8_t *start = *pp;
  /* At most 5 bytes, as protobuf-c reads tags; a field number beyond the
   * 29 bits protobuf allows is only ever an unknown field, skipped. */
  if (kn_pb_read_varint(pp, end, &t) || *pp - start > 5)
    return "truncated or oversized field tag";
  *field = t >> 3;
  *wt = (unsigned)(t & 7);
  if (*field == 0) return "invalid field number";
  return NULL;
}

static const char *read_len(const uint8_t **pp, const uint8_t *end,
                            const uint8_t **body, size_t *n) {
  uint64_t v;
  if (kn_pb_read_varint(pp, end, &v)) return "truncated or oversized length";
  if (v > (uint64_t)(end - *pp)) return "length runs past the end";
  *body = *pp;
  *n = (size_t)v;
  *pp += v;
  return NULL;
}

static const char *skip_field(const uint8_t **pp, const uint8_t *end,
                              unsigned wt) {
  const uint8_t *body;
  size_t n;
  switch (wt) {
    case KN_PB_VARINT:
      return kn_pb_skip_varint(pp, end) ? "truncated or oversized varint" : NULL;
    case KN_PB_LEN:
      return read_len(pp, end, &body, &n);
    case KN_PB_I64:
    case KN_PB_I32:
      n = wt == KN_PB_I64 ? 8 : 4;
      if (n > (size_t)(end - *pp)) return "fixed-size field runs past the end";
      *pp += n;
      return NULL;
    default: /* groups are long deprecated; 6 and 7 do not exist */
      return "unsupported wire type";
  }
}

/* Tag { required string key = 1; optional string value = 2; } */
static const char *parse_tag(const uint8_t *p, const uint8_t *end) {
  int has_key = 0;
  while (p < end) {
    uint64_t field;
    unsigned wt;
    const char *err = read_tag(&p, end, &field, &wt);
    if (err) return err;
    if (field == 1 || field == 2) {
      const uint8_t *body;
      size_t n;
      if (wt != KN_PB_LEN) return "tag key or value with a wrong wire type";
      if ((err = read_len(&p, end, &body, &n))) return err;
      if (field == 1) has_key = 1;
    } else if ((err = skip_field(&p, end, wt))) {
      return err;
    }
  }
  return has_key ? NULL : "tag without its required key";
}

/* Record { required uint64 partition_key_index = 1; optional uint64
 * explicit_hash_key_index = 2; required bytes data = 3; repeated Tag tags
 * = 4; }  A field given twice keeps its last value, as protobuf says. */
static const char *parse_record(const uint8_t *p, const uint8_t *end,
                                struct urec *r) {
  r->has_pk = r->has_ehk = r->has_data = 0;
  while (p < end) {
    uint64_t field;
    unsigned wt;
    const uint8_t *body;
    size_t n;
    const char *err = read_tag(&p, end, &field, &wt);
    if (err) return err;
    switch (field) {
      case 1:
      case 2:
        if (wt != KN_PB_VARINT) return "key index with a wrong wire type";
        if (kn_pb_read_varint(&p, end, field == 1 ? &r->pk : &r->ehk))
          return "truncated or oversized key index";
        if (field == 1)
          r->has_pk = 1;
        else
          r->has_ehk = 1;
        break;
      case 3:
        if (wt != KN_PB_LEN) return "data with a wrong wire type";
        if ((err = read_len(&p, end, &r->data, &r->len))) return err;
        r->has_data = 1;
        break;
      case 4:
        if (wt != KN_PB_LEN) return "tag with a wrong wire type";
        if ((err = read_len(&p, end, &body, &n))) return err;
        if ((err = parse_tag(body, body + n))) return err;
        break;
      default:
        if ((err = skip_field(&p, end, wt))) return err;
    }
  }
  if (!r->has_pk) return "record without its partition_key_index";
  if (!r->has_data) return "record without its data";
  return NULL;
}

struct walk {
  const uint8_t *base; /* start of the Kinesis record, for offsets */
  struct table *pks, *ehks;
  size_t n_rec;
  uint64_t max_pk, max_ehk;
  size_t max_pk_rec, max_ehk_rec;
  int any_ehk;
  int (*visit)(struct walk *w, const struct urec *r);
  void *ctx;
  struct fail fail;
  int nomem;
};

/* Walks the top level of AggregatedRecord.  Without visit, checks every
 * byte and collects the key tables; with visit, calls it for every record
 * in order, stopping at its first non-zero return, which is returned. */
static int walk(struct walk *w, const uint8_t *p, const uint8_t *end) {
  while (p < end) {
    const uint8_t *at = p, *body;
    size_t n;
    uint64_t field;
    unsigned wt;
    const char *err = read_tag(&p, end, &field, &wt);
    if (!err && field >= 1 && field <= 3 && wt != KN_PB_LEN)
      err = field == 3 ? "record with a wrong wire type"
                       : "key table entry with a wrong wire type";
    if (!err && field >= 1 && field <= 3) err = read_len(&p, end, &body, &n);
    if (!err && field == 3) {
      struct urec r;
      if ((err = parse_record(body, body + n, &r))) {
        w->fail.what = err;
        w->fail.at = (size_t)(at - w->base);
        w->fail.in_record = 1;
        w->fail.rec = w->n_rec;
        return -1;
      }
      if (w->visit) {
        int rc = w->visit(w, &r);
        if (rc) return rc;
      } else {
        if (w->n_rec == 0 || r.pk > w->max_pk) {
          w->max_pk = r.pk;
          w->max_pk_rec = w->n_rec;
        }
        if (r.has_ehk && (!w->any_ehk || r.ehk > w->max_ehk)) {
          w->max_ehk = r.ehk;
          w->max_ehk_rec = w->n_rec;
          w->any_ehk = 1;
        }
      }
      w->n_rec++;
    } else if (!err && (field == 1 || field == 2)) {
      if (!w->visit && table_add(field == 1 ? w->pks : w->ehks, body, n)) {
        w->nomem = 1;
        return -1;
      }
    } else if (!err) {
      err = skip_field(&p, end, wt); /* an unknown field */
    }
    if (err) {
      w->fail.what = err;
      w->fail.at = (size_t)(at - w->base);
      return -1;
    }
  }
  return 0;
}

/* ---- The range check ---------------------------------------------------- */

static int key_verdict(struct key *k, int is_ehk, const kn_agg_filter_t *f) {
  if (k->hk == HK_UNKNOWN) {
    kn_u128_t hk;
    if (is_ehk) {
      if (kn_u128_parse((const char *)k->p, k->len, &hk)) {
        k->hk = HK_BAD;
        return HK_BAD;
      }
    } else {
      hk = kn_hashkey_of(k->p, k->len);
    }
    k->hk = kn_u128_in_range(hk, f->range_start, f->range_end) ? HK_IN
                                                               : HK_OUT;
  }
  return k->hk;
}

struct expand {
  kn_batch_t *b;
  const kn_agg_filter_t *filter;
  const char *seq;
  int64_t arrival_ms;
  kn_agg_result_t *res;
  const char *bad_ehk; /* set when an explicit hash key is unreadable */
};

static int visit_range(struct walk *w, const struct urec *r) {
  struct expand *x = w->ctx;
  int v = r->has_ehk ? key_verdict(&w->ehks->v[r->ehk], 1, x->filter)
                     : key_verdict(&w->pks->v[r->pk], 0, x->filter);
  if (v == HK_BAD) {
    x->bad_ehk = "explicit hash key is not a decimal in [0, 2^128 - 1]";
    return -1;
  }
  return v == HK_OUT ? 1 : 0;
}

/* ---- Appending ---------------------------------------------------------- */

static const char *key_str(kn_batch_t *b, struct key *k) {
  if (!k->str) k->str = kn_batch_strndup(b, (const char *)k->p, k->len);
  return k->str;
}

static int visit_append(struct walk *w, const struct urec *r) {
  struct expand *x = w->ctx;
  if (x->filter && x->filter->subseq_floor >= 0 &&
      w->n_rec <= (uint64_t)x->filter->subseq_floor) {
    x->res->n_below_floor++;
    return 0;
  }
  const char *pkey = key_str(x->b, &w->pks->v[r->pk]);
  const char *ehk = r->has_ehk ? key_str(x->b, &w->ehks->v[r->ehk]) : NULL;
  kn_record_t *rec = pkey && (ehk || !r->has_ehk) ? kn_batch_push(x->b) : NULL;
  if (!rec) {
    w->nomem = 1;
    return -1;
  }
  rec->data = (const char *)r->data;
  rec->len = r->len;
  rec->pkey = pkey;
  rec->ehk = ehk;
  rec->seq = x->seq;
  rec->subseq = w->n_rec;
  rec->arrival_ms = x->arrival_ms;
  rec->aggregated = 1;
  x->b->bytes += r->len;
  x->res->n_added++;
  return 0;
}

/* ---- The entry point ---------------------------------------------------- */

static kn_err_t corrupt(kn_error_t **errp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static kn_err_t corrupt(kn_error_t **errp, const char *fmt, ...) {
  if (errp) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    *errp = kn_error_new(KN_ERR__CORRUPT, "aggregated record: %s", msg);
  }
  return KN_ERR__CORRUPT;
}

static kn_err_t nomem(kn_error_t **errp) {
  if (errp) *errp = kn_error_new(KN_ERR__NOMEM, "deaggregation: out of memory");
  return KN_ERR__NOMEM;
}

kn_err_t kn_agg_expand(kn_batch_t *b, const void *data, size_t len,
                       const char *seq, int64_t arrival_ms,
                       const kn_agg_filter_t *filter, kn_agg_result_t *res,
                       kn_error_t **errp) {
  const uint8_t *base = data;
  memset(res, 0, sizeof(*res));
  if (errp) *errp = NULL;
  if (!kn_agg_has_magic(data, len)) return KN_ERR_NO_ERROR;
  /* As the KCL: an empty protobuf does not make an aggregate. */
  if (len <= KN_AGG_OVERHEAD)
    return corrupt(errp, "%zu bytes are too few to hold a message and its MD5",
                   len);

  const uint8_t *pb = base + KN_AGG_MAGIC_LEN;
  const uint8_t *pb_end = base + len - KN_AGG_MD5_LEN;
  uint8_t md5[KN_AGG_MD5_LEN];
  kn_md5(pb, (size_t)(pb_end - pb), md5);
  if (memcmp(md5, pb_end, KN_AGG_MD5_LEN) != 0)
    return corrupt(errp, "MD5 mismatch");

  struct table pks, ehks;
  table_init(&pks);
  table_init(&ehks);
  struct walk w = {.base = base, .pks = &pks, .ehks = &ehks};
  struct expand x = {b, filter, seq, arrival_ms, res, NULL};
  size_t n0 = b->n, bytes0 = b->bytes;
  kn_err_t err = KN_ERR_NO_ERROR;

  if (walk(&w, pb, pb_end)) {
    if (w.nomem)
      err = nomem(errp);
    else if (w.fail.in_record)
      err = corrupt(errp, "record %zu (at byte %zu): %s", w.fail.rec, w.fail.at,
                    w.fail.what);
    else
      err = corrupt(errp, "%s at byte %zu", w.fail.what, w.fail.at);
    goto out;
  }
  if (w.n_rec && w.max_pk >= pks.n) {
    err = corrupt(errp,
                  "record %zu: partition key index %llu outside the table of "
                  "%zu",
                  w.max_pk_rec, (unsigned long long)w.max_pk, pks.n);
    goto out;
  }
  if (w.any_ehk && w.max_ehk >= ehks.n) {
    err = corrupt(errp,
                  "record %zu: explicit hash key index %llu outside the table "
                  "of %zu",
                  w.max_ehk_rec, (unsigned long long)w.max_ehk, ehks.n);
    goto out;
  }
  res->aggregated = 1;
  res->n_user = w.n_rec;
  w.ctx = &x;

  if (filter && filter->check_range && w.n_rec) {
    w.visit = visit_range;
    w.n_rec = 0;
    int rc = walk(&w, pb, pb_end);
    if (rc < 0) {
      memset(res, 0, sizeof(*res));
      err = corrupt(errp, "record %zu: %s", w.n_rec,
                    x.bad_ehk ? x.bad_ehk : "unreadable");
      goto out;
    }
    if (rc > 0) {
      res->out_of_range = 1;
      goto out;
    }
  }

  w.visit = visit_append;
  w.n_rec = 0;
  if (walk(&w, pb, pb_end)) {
    kn_batch_truncate(b, n0);
    b->bytes = bytes0;
    memset(res, 0, sizeof(*res));
    err = w.nomem ? nomem(errp) : corrupt(errp, "unreadable on second reading");
  }

out:
  table_free(&pks);
  table_free(&ehks);
  return err;
}
