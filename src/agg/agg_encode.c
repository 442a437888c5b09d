/* Aggregation: user records in, KPL aggregated records out.
 *
 * The aggregator keeps the user records' payloads and the two key tables
 * in its own buffers, and the size the aggregate will take, exact at every
 * step: each add counts the bytes its fields take on the wire.  The flush
 * builds an AggregatedRecord (the code protoc-c generates from
 * kpl_messages.proto) whose fields point into those buffers, and protobuf-c
 * packs it straight into the output, after the magic number; the MD5 goes
 * after it.  Keys are deduplicated through a small hash index. */
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/kpl_messages.pb-c.h"
#include "util/buf.h"
#include "util/crypto.h"

#define MIN_MAX_BYTES 64

/* Bytes a varint of v takes on the wire. */
static size_t varint_size(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) n++;
  return n;
}

/* Bytes a length-delimited field of n bytes takes, its tag included (all
 * the schema's field numbers are below 16: one-byte tags). */
static size_t len_field_size(size_t n) { return 1 + varint_size(n) + n; }

struct kent {
  size_t off; /* of the key's bytes (NUL-terminated) in chars */
  size_t len;
  uint32_t hash;
};

/* One key table: the keys, NUL-terminated one after the other, and an
 * open-addressing index over them. */
struct keyset {
  kn_buf_t chars;
  struct kent *ents;
  char **ptrs; /* filled at flush: the table protobuf-c packs */
  size_t n, cap;
  uint32_t *slots; /* entry index + 1; 0 is empty */
  size_t nslots;   /* a power of two, at least twice n */
  size_t wire;     /* bytes the table takes on the wire */
};

/* One user record: its fields as protobuf-c packs them, and where its
 * payload is: the caller's bytes (borrowed), or the aggregator's data
 * buffer at data_off. */
struct urec {
  KnKpl__Record pb; /* data.data is set at flush */
  const uint8_t *borrowed;
  size_t data_off;
};

struct kn_aggregator {
  size_t max_bytes, max_count;
  struct keyset pks, ehks;
  kn_buf_t data; /* the payloads, one after the other */
  struct urec *recs;
  KnKpl__Record **rec_ptrs;
  size_t count, cap;
  size_t recs_wire;   /* bytes the records take on the wire */
  kn_u128_t first_hk; /* the first record's hash key */
  int first_has_ehk;
  kn_buf_t out; /* magic, protobuf, MD5 */
  char ehk_out[KN_U128_DEC_BUFSZ];
};

static uint32_t key_hash(const void *p, size_t len) {
  const uint8_t *s = p;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ s[i]) * 16777619u;
  return h;
}

/* Index of the key, or -1 when absent. */
static long keyset_find(const struct keyset *ks, const void *key, size_t len,
                        uint32_t hash) {
  if (!ks->nslots) return -1;
  size_t mask = ks->nslots - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    uint32_t s = ks->slots[i];
    if (!s) return -1;
    const struct kent *e = &ks->ents[s - 1];
    if (e->hash == hash && e->len == len &&
        memcmp(ks->chars.p + e->off, key, len) == 0)
      return (long)(s - 1);
  }
}

static void keyset_slot(struct keyset *ks, size_t idx) {
  size_t mask = ks->nslots - 1;
  size_t i = ks->ents[idx].hash & mask;
  while (ks->slots[i]) i = (i + 1) & mask;
  ks->slots[i] = (uint32_t)(idx + 1);
}

/* Makes room for one more key of len bytes, so that keyset_insert cannot
 * fail.  Returns 0 or -1 (out of memory, nothing lost). */
static int keyset_reserve(struct keyset *ks, size_t len) {
  if (kn_buf_reserve(&ks->chars, len + 1)) return -1;
  if (ks->n == ks->cap) {
    size_t cap = ks->cap ? ks->cap * 2 : 16;
    struct kent *e = realloc(ks->ents, cap * sizeof(*e));
    if (!e) return -1;
    ks->ents = e;
    char **p = realloc(ks->ptrs, cap * sizeof(*p));
    if (!p) return -1;
    ks->ptrs = p;
    ks->cap = cap;
  }
  if ((ks->n + 1) * 2 > ks->nslots) {
    size_t nslots = ks->nslots ? ks->nslots * 2 : 32;
    uint32_t *slots = calloc(nslots, sizeof(*slots));
    if (!slots) return -1;
    free(ks->slots);
    ks->slots = slots;
    ks->nslots = nslots;
    for (size_t i = 0; i < ks->n; i++) keyset_slot(ks, i);
  }
  return 0;
}

static void keyset_insert(struct keyset *ks, const void *key, size_t len,
                          uint32_t hash) {
  struct kent *e = &ks->ents[ks->n];
  e->off = ks->chars.len;
  e->len = len;
  e->hash = hash;
  if (len) memcpy(ks->chars.p + e->off, key, len);
  ks->chars.p[e->off + len] = '\0';
  ks->chars.len = e->off + len + 1;
  ks->wire += len_field_size(len);
  keyset_slot(ks, ks->n++);
}

/* Points ptrs at the keys, for protobuf-c. */
static void keyset_fix(struct keyset *ks) {
  for (size_t i = 0; i < ks->n; i++)
    ks->ptrs[i] = ks->chars.p + ks->ents[i].off;
}

static void keyset_clear(struct keyset *ks) {
  ks->chars.len = 0; /* the bytes stay, for a lone record's flush */
  if (ks->n) memset(ks->slots, 0, ks->nslots * sizeof(*ks->slots));
  ks->n = 0;
  ks->wire = 0;
}

static void keyset_free(struct keyset *ks) {
  kn_buf_free(&ks->chars);
  free(ks->ents);
  free(ks->ptrs);
  free(ks->slots);
}

kn_aggregator_t *kn_aggregator_new(size_t max_bytes, size_t max_count) {
  if (!max_bytes) max_bytes = KN_AGG_DEFAULT_MAX_BYTES;
  /* The aggregate goes out with the one-byte partition key "a", which
   * counts toward the record limit. */
  if (max_bytes < MIN_MAX_BYTES || max_bytes > KN_AGG_RECORD_LIMIT - 1)
    return NULL;
  kn_aggregator_t *a = calloc(1, sizeof(*a));
  if (!a) return NULL;
  a->max_bytes = max_bytes;
  a->max_count = max_count ? max_count : SIZE_MAX;
  return a;
}

void kn_aggregator_destroy(kn_aggregator_t *a) {
  if (!a) return;
  keyset_free(&a->pks);
  keyset_free(&a->ehks);
  kn_buf_free(&a->data);
  free(a->recs);
  free(a->rec_ptrs);
  kn_buf_free(&a->out);
  free(a);
}

size_t kn_aggregator_count(const kn_aggregator_t *a) { return a->count; }

size_t kn_aggregator_size(const kn_aggregator_t *a) {
  if (!a->count) return 0;
  return KN_AGG_OVERHEAD + a->pks.wire + a->ehks.wire + a->recs_wire;
}

/* Makes room for one more record.  Returns 0 or -1. */
static int recs_reserve(kn_aggregator_t *a) {
  if (a->count < a->cap) return 0;
  size_t cap = a->cap ? a->cap * 2 : 64;
  struct urec *r = realloc(a->recs, cap * sizeof(*r));
  if (!r) return -1;
  a->recs = r;
  KnKpl__Record **p = realloc(a->rec_ptrs, cap * sizeof(*p));
  if (!p) return -1;
  a->rec_ptrs = p;
  a->cap = cap;
  return 0;
}

static kn_err_t add(kn_aggregator_t *a, const char *pkey, size_t pkey_len,
                    const char *ehk, size_t ehk_len, const void *data,
                    size_t data_len, int borrow) {
  kn_u128_t hk;
  if (!pkey || !pkey_len || (!data && data_len)) return KN_ERR__INVALID_ARG;
  if (ehk && kn_u128_parse(ehk, ehk_len, &hk)) return KN_ERR__INVALID_ARG;
  if (data_len > KN_AGG_RECORD_LIMIT ||
      pkey_len > KN_AGG_RECORD_LIMIT - data_len)
    return KN_ERR__INVALID_ARG;
  if (a->count >= a->max_count) return KN_ERR__QUEUE_FULL;

  /* The tables hold strings, which protobuf-c packs up to their first NUL
   * byte: a key holding one is cut short there, in the table as on the
   * wire (the aggregate's hash key is still the whole key's). */
  const char *nul = memchr(pkey, '\0', pkey_len);
  size_t key_len = nul ? (size_t)(nul - pkey) : pkey_len;
  uint32_t pk_hash = key_hash(pkey, key_len), ehk_hash = 0;
  long pk_idx = keyset_find(&a->pks, pkey, key_len, pk_hash), ehk_idx = -1;
  int pk_new = pk_idx < 0, ehk_new = 0;
  if (pk_new) pk_idx = (long)a->pks.n;
  if (ehk) {
    ehk_hash = key_hash(ehk, ehk_len);
    ehk_idx = keyset_find(&a->ehks, ehk, ehk_len, ehk_hash);
    ehk_new = ehk_idx < 0;
    if (ehk_new) ehk_idx = (long)a->ehks.n;
  }

  /* Record { partition_key_index = 1; explicit_hash_key_index = 2;
   * data = 3; }, each with a one-byte tag. */
  size_t body = 1 + varint_size((uint64_t)pk_idx) + len_field_size(data_len);
  if (ehk) body += 1 + varint_size((uint64_t)ehk_idx);
  size_t rec_wire = len_field_size(body);
  size_t grow = rec_wire;
  if (pk_new) grow += len_field_size(key_len);
  if (ehk_new) grow += len_field_size(ehk_len);
  if (a->count && kn_aggregator_size(a) + grow > a->max_bytes)
    return KN_ERR__QUEUE_FULL;

  /* Every allocation first, so that a failure changes nothing. */
  if ((pk_new && keyset_reserve(&a->pks, key_len)) ||
      (ehk_new && keyset_reserve(&a->ehks, ehk_len)) ||
      (!borrow && kn_buf_reserve(&a->data, data_len + 1)) || recs_reserve(a))
    return KN_ERR__NOMEM;

  if (pk_new) keyset_insert(&a->pks, pkey, key_len, pk_hash);
  if (ehk_new) keyset_insert(&a->ehks, ehk, ehk_len, ehk_hash);
  struct urec *r = &a->recs[a->count];
  kn_kpl__record__init(&r->pb);
  r->pb.partition_key_index = (uint64_t)pk_idx;
  if (ehk) {
    r->pb.has_explicit_hash_key_index = 1;
    r->pb.explicit_hash_key_index = (uint64_t)ehk_idx;
  }
  r->pb.data.len = data_len;
  if (borrow) {
    /* Never NULL, so that a borrowed empty payload is told apart. */
    r->borrowed = data_len ? data : (const uint8_t *)"";
  } else {
    r->borrowed = NULL;
    r->data_off = a->data.len;
    if (data_len) memcpy(a->data.p + a->data.len, data, data_len);
    a->data.len += data_len;
  }
  if (!a->count) {
    a->first_has_ehk = ehk != NULL;
    a->first_hk = ehk ? hk : kn_hashkey_of(pkey, pkey_len);
  }
  a->recs_wire += rec_wire;
  a->count++;
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_aggregator_add(kn_aggregator_t *a, const char *pkey,
                           size_t pkey_len, const char *ehk, size_t ehk_len,
                           const void *data, size_t data_len) {
  return add(a, pkey, pkey_len, ehk, ehk_len, data, data_len, 0);
}

kn_err_t kn_aggregator_add_borrowed(kn_aggregator_t *a, const char *pkey,
                                    size_t pkey_len, const char *ehk,
                                    size_t ehk_len, const void *data,
                                    size_t data_len) {
  return add(a, pkey, pkey_len, ehk, ehk_len, data, data_len, 1);
}

/* Where a record's payload is, once no add can move the data buffer. */
static uint8_t *payload(const kn_aggregator_t *a, const struct urec *r) {
  return r->borrowed ? (uint8_t *)r->borrowed
                     : (uint8_t *)a->data.p + r->data_off;
}

static void clear(kn_aggregator_t *a) {
  keyset_clear(&a->pks);
  keyset_clear(&a->ehks);
  a->data.len = 0; /* the bytes stay, for a lone record's flush */
  a->count = 0;
  a->recs_wire = 0;
}

void kn_aggregator_clear(kn_aggregator_t *a) { clear(a); }

kn_err_t kn_aggregator_flush(kn_aggregator_t *a, kn_agg_out_t *out) {
  if (!a->count) return KN_ERR__STATE;
  if (a->count == 1) {
    /* Sent as itself: its payload and key stay where they are. */
    memset(out, 0, sizeof(*out));
    out->n_records = 1;
    out->data = payload(a, &a->recs[0]); /* add reserved a copy's room */
    out->len = a->recs[0].pb.data.len;
    out->pkey = a->pks.chars.p + a->pks.ents[0].off;
    if (a->first_has_ehk) {
      kn_u128_format(a->first_hk, a->ehk_out);
      out->ehk = a->ehk_out;
    }
    clear(a);
    return KN_ERR_NO_ERROR;
  }

  size_t total = kn_aggregator_size(a);
  kn_buf_reset(&a->out);
  if (kn_buf_reserve(&a->out, total)) return KN_ERR__NOMEM;

  /* The message points into the aggregator's buffers, which stay put
   * until the next add. */
  keyset_fix(&a->pks);
  keyset_fix(&a->ehks);
  for (size_t i = 0; i < a->count; i++) {
    struct urec *r = &a->recs[i];
    r->pb.data.data = payload(a, r);
    a->rec_ptrs[i] = &r->pb;
  }
  KnKpl__AggregatedRecord m = KN_KPL__AGGREGATED_RECORD__INIT;
  m.n_partition_key_table = a->pks.n;
  m.partition_key_table = a->pks.ptrs;
  m.n_explicit_hash_key_table = a->ehks.n;
  m.explicit_hash_key_table = a->ehks.ptrs;
  m.n_records = a->count;
  m.records = a->rec_ptrs;

  uint8_t *w = (uint8_t *)a->out.p;
  memcpy(w, KN_AGG_MAGIC, KN_AGG_MAGIC_LEN);
  size_t pb_len = kn_kpl__aggregated_record__pack(&m, w + KN_AGG_MAGIC_LEN);
  kn_md5(w + KN_AGG_MAGIC_LEN, pb_len, w + KN_AGG_MAGIC_LEN + pb_len);
  a->out.len = pb_len + KN_AGG_OVERHEAD;

  memset(out, 0, sizeof(*out));
  out->n_records = a->count;
  out->data = a->out.p;
  out->len = a->out.len;
  out->pkey = "a";
  kn_u128_format(a->first_hk, a->ehk_out);
  out->ehk = a->ehk_out;
  out->aggregated = 1;
  clear(a);
  return KN_ERR_NO_ERROR;
}
