/* Aggregation: user records in, KPL aggregated records out.
 *
 * Every part of the protobuf is kept already encoded: the partition key
 * table (field 1), the explicit hash key table (field 2) and the records
 * (field 3), so the size of the aggregate is a sum of buffer lengths, exact
 * at every step.  The records buffer starts with a gap that the flush fills
 * with the magic number and the two tables, so the aggregate is emitted in
 * place: the payloads are copied once (when added) and read once more by
 * the MD5.  Keys are deduplicated through a small hash index over the
 * encoded tables. */
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/pbwire.h"
#include "util/buf.h"
#include "util/crypto.h"

/* Field tags with wire type 2 (length-delimited). */
#define TAG_PKEY 0x0a
#define TAG_EHK 0x12
#define TAG_RECORD 0x1a
/* Inside Record. */
#define TAG_PK_INDEX 0x08
#define TAG_EHK_INDEX 0x10
#define TAG_DATA 0x1a

#define MIN_MAX_BYTES 64
#define MIN_GAP 512

struct kent {
  size_t off; /* of the key's bytes in wire */
  size_t len;
  uint32_t hash;
};

/* One key table: its wire form and an open-addressing index over it. */
struct keyset {
  kn_buf_t wire;
  struct kent *ents;
  size_t n, cap;
  uint32_t *slots; /* entry index + 1; 0 is empty */
  size_t nslots;   /* a power of two, at least twice n */
  uint8_t tag;
};

struct kn_aggregator {
  size_t max_bytes, max_count;
  struct keyset pks, ehks;
  /* The gap, then the encoded Record fields from rec_start on.  Not text:
   * kn_buf's terminator is not kept. */
  kn_buf_t recs;
  size_t rec_start;
  size_t count;
  size_t first_data_off;    /* the first record's data, from rec_start */
  size_t first_data_len;
  int first_has_ehk;
  kn_u128_t first_hk;       /* the first record's hash key */
  kn_buf_t pkey_out;        /* the partition key of a lone record */
  char ehk_out[KN_U128_DEC_BUFSZ];
};

static uint32_t key_hash(const void *p, size_t len) {
  const uint8_t *s = p;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ s[i]) * 16777619u;
  return h;
}

/* Makes room for `more` record bytes, and for the magic and tables of
 * `head` bytes in the gap before the records (moving them when the gap is
 * too small, leaving twice what is needed).  Returns 0 or -1. */
static int recs_reserve(kn_aggregator_t *a, size_t head, size_t more) {
  size_t gap = a->rec_start;
  if (head > gap) gap = head * 2 > MIN_GAP ? head * 2 : MIN_GAP;
  if (kn_buf_reserve(&a->recs, (gap - a->rec_start) + more)) return -1;
  if (gap != a->rec_start) {
    memmove(a->recs.p + gap, a->recs.p + a->rec_start,
            a->recs.len - a->rec_start);
    a->recs.len += gap - a->rec_start;
    a->rec_start = gap;
  }
  return 0;
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
        memcmp(ks->wire.p + e->off, key, len) == 0)
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
  if (kn_buf_reserve(&ks->wire, kn_pb_len_field_size(len))) return -1;
  if (ks->n == ks->cap) {
    size_t cap = ks->cap ? ks->cap * 2 : 16;
    struct kent *e = realloc(ks->ents, cap * sizeof(*e));
    if (!e) return -1;
    ks->ents = e;
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
  uint8_t *w = (uint8_t *)ks->wire.p + ks->wire.len;
  *w++ = ks->tag;
  w = kn_pb_write_varint(w, len);
  struct kent *e = &ks->ents[ks->n];
  e->off = (size_t)((char *)w - ks->wire.p);
  e->len = len;
  e->hash = hash;
  if (len) memcpy(w, key, len);
  ks->wire.len = e->off + len;
  ks->wire.p[ks->wire.len] = '\0';
  keyset_slot(ks, ks->n++);
}

static void keyset_clear(struct keyset *ks) {
  kn_buf_reset(&ks->wire);
  if (ks->n) memset(ks->slots, 0, ks->nslots * sizeof(*ks->slots));
  ks->n = 0;
}

static void keyset_free(struct keyset *ks) {
  kn_buf_free(&ks->wire);
  free(ks->ents);
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
  a->pks.tag = TAG_PKEY;
  a->ehks.tag = TAG_EHK;
  return a;
}

void kn_aggregator_destroy(kn_aggregator_t *a) {
  if (!a) return;
  keyset_free(&a->pks);
  keyset_free(&a->ehks);
  kn_buf_free(&a->recs);
  kn_buf_free(&a->pkey_out);
  free(a);
}

size_t kn_aggregator_count(const kn_aggregator_t *a) { return a->count; }

size_t kn_aggregator_size(const kn_aggregator_t *a) {
  if (!a->count) return 0;
  return KN_AGG_OVERHEAD + a->pks.wire.len + a->ehks.wire.len +
         (a->recs.len - a->rec_start);
}

kn_err_t kn_aggregator_add(kn_aggregator_t *a, const char *pkey,
                           size_t pkey_len, const char *ehk, size_t ehk_len,
                           const void *data, size_t data_len) {
  kn_u128_t hk;
  if (!pkey || !pkey_len || (!data && data_len)) return KN_ERR__INVALID_ARG;
  if (ehk && kn_u128_parse(ehk, ehk_len, &hk)) return KN_ERR__INVALID_ARG;
  if (data_len > KN_AGG_RECORD_LIMIT || pkey_len > KN_AGG_RECORD_LIMIT - data_len)
    return KN_ERR__INVALID_ARG;
  if (a->count >= a->max_count) return KN_ERR__QUEUE_FULL;

  uint32_t pk_hash = key_hash(pkey, pkey_len), ehk_hash = 0;
  long pk_idx = keyset_find(&a->pks, pkey, pkey_len, pk_hash), ehk_idx = -1;
  int pk_new = pk_idx < 0, ehk_new = 0;
  if (pk_new) pk_idx = (long)a->pks.n;
  if (ehk) {
    ehk_hash = key_hash(ehk, ehk_len);
    ehk_idx = keyset_find(&a->ehks, ehk, ehk_len, ehk_hash);
    ehk_new = ehk_idx < 0;
    if (ehk_new) ehk_idx = (long)a->ehks.n;
  }

  size_t body = 1 + kn_pb_varint_len((uint64_t)pk_idx) +
                kn_pb_len_field_size(data_len);
  if (ehk) body += 1 + kn_pb_varint_len((uint64_t)ehk_idx);
  size_t grow = kn_pb_len_field_size(body);
  if (pk_new) grow += kn_pb_len_field_size(pkey_len);
  if (ehk_new) grow += kn_pb_len_field_size(ehk_len);
  if (a->count && kn_aggregator_size(a) + grow > a->max_bytes)
    return KN_ERR__QUEUE_FULL;

  /* Every allocation first, so that a failure changes nothing. */
  size_t head = KN_AGG_MAGIC_LEN + a->pks.wire.len + a->ehks.wire.len +
                (pk_new ? kn_pb_len_field_size(pkey_len) : 0) +
                (ehk_new ? kn_pb_len_field_size(ehk_len) : 0);
  if ((pk_new && keyset_reserve(&a->pks, pkey_len)) ||
      (ehk_new && keyset_reserve(&a->ehks, ehk_len)) ||
      recs_reserve(a, head, kn_pb_len_field_size(body) + KN_AGG_MD5_LEN))
    return KN_ERR__NOMEM;

  if (pk_new) keyset_insert(&a->pks, pkey, pkey_len, pk_hash);
  if (ehk_new) keyset_insert(&a->ehks, ehk, ehk_len, ehk_hash);
  uint8_t *w = (uint8_t *)a->recs.p + a->recs.len;
  *w++ = TAG_RECORD;
  w = kn_pb_write_varint(w, body);
  *w++ = TAG_PK_INDEX;
  w = kn_pb_write_varint(w, (uint64_t)pk_idx);
  if (ehk) {
    *w++ = TAG_EHK_INDEX;
    w = kn_pb_write_varint(w, (uint64_t)ehk_idx);
  }
  *w++ = TAG_DATA;
  w = kn_pb_write_varint(w, data_len);
  if (!a->count) {
    a->first_data_off = (size_t)((char *)w - a->recs.p) - a->rec_start;
    a->first_data_len = data_len;
    a->first_has_ehk = ehk != NULL;
    if (ehk)
      a->first_hk = hk;
    else
      a->first_hk = kn_hashkey_of(pkey, pkey_len);
  }
  if (data_len) memcpy(w, data, data_len);
  w += data_len;
  a->recs.len = (size_t)((char *)w - a->recs.p);
  a->count++;
  return KN_ERR_NO_ERROR;
}

static void clear(kn_aggregator_t *a) {
  keyset_clear(&a->pks);
  keyset_clear(&a->ehks);
  a->recs.len = a->rec_start; /* the bytes stay, for the last flush */
  a->count = 0;
}

kn_err_t kn_aggregator_flush(kn_aggregator_t *a, kn_agg_out_t *out) {
  if (!a->count) return KN_ERR__STATE;
  if (a->count == 1) {
    /* Sent as itself: its bytes stay where they are in recs; its key is
     * copied out to get a terminated string. */
    const struct kent *pk = &a->pks.ents[0];
    kn_buf_reset(&a->pkey_out);
    if (kn_buf_append(&a->pkey_out, a->pks.wire.p + pk->off, pk->len))
      return KN_ERR__NOMEM;
    memset(out, 0, sizeof(*out));
    out->n_records = 1;
    out->data = a->recs.p + a->rec_start + a->first_data_off;
    out->len = a->first_data_len;
    out->pkey = a->pkey_out.p;
    if (a->first_has_ehk) {
      kn_u128_format(a->first_hk, a->ehk_out);
      out->ehk = a->ehk_out;
    }
    clear(a);
    return KN_ERR_NO_ERROR;
  }

  /* The magic and the tables go in the gap, right before the records (add
   * made the room, and the room for the MD5 after them). */
  size_t tables = a->pks.wire.len + a->ehks.wire.len;
  size_t pb_len = tables + (a->recs.len - a->rec_start);
  char *start = a->recs.p + a->rec_start - tables - KN_AGG_MAGIC_LEN;
  char *w = start;
  memcpy(w, KN_AGG_MAGIC, KN_AGG_MAGIC_LEN);
  w += KN_AGG_MAGIC_LEN;
  memcpy(w, a->pks.wire.p, a->pks.wire.len);
  w += a->pks.wire.len;
  if (a->ehks.wire.len) memcpy(w, a->ehks.wire.p, a->ehks.wire.len);
  kn_md5(start + KN_AGG_MAGIC_LEN, pb_len,
         (uint8_t *)start + KN_AGG_MAGIC_LEN + pb_len);

  memset(out, 0, sizeof(*out));
  out->n_records = a->count;
  out->data = start;
  out->len = pb_len + KN_AGG_OVERHEAD;
  out->pkey = "a";
  kn_u128_format(a->first_hk, a->ehk_out);
  out->ehk = a->ehk_out;
  out->aggregated = 1;
  clear(a);
  return KN_ERR_NO_ERROR;
}
