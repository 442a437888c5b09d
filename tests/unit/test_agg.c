/* The KPL aggregated record format: hash keys, the published byte layout,
 * round trips (also through protobuf-c, generated from the published
 * schema), corrupt input, checkpoint and hash range filtering, and the
 * aggregator's caps. */
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/kpl_messages.pb-c.h"
#include "core/error.h"
#include "kt.h"
#include "util/crypto.h"
#include "util/hex.h"

/* ---- Helpers ------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64*: reproducible, no libc state */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static void unhex(const char *hex, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    out[i] = (uint8_t)v;
  }
}

/* A protobuf writer for hand-built messages. */
typedef struct {
  uint8_t b[4096];
  size_t n;
} pb_t;

static void pb_varint(pb_t *m, uint64_t v) {
  while (v >= 0x80) {
    m->b[m->n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  m->b[m->n++] = (uint8_t)v;
}
static void pb_raw(pb_t *m, const void *p, size_t n) {
  memcpy(m->b + m->n, p, n);
  m->n += n;
}
static void pb_tag(pb_t *m, unsigned field, unsigned wt) {
  pb_varint(m, (uint64_t)field << 3 | wt);
}
static void pb_bytes(pb_t *m, unsigned field, const void *p, size_t n) {
  pb_tag(m, field, 2);
  pb_varint(m, n);
  pb_raw(m, p, n);
}
static void pb_str(pb_t *m, unsigned field, const char *s) {
  pb_bytes(m, field, s, strlen(s));
}
static void pb_uint(pb_t *m, unsigned field, uint64_t v) {
  pb_tag(m, field, 0);
  pb_varint(m, v);
}
/* A record sub-message (field 3) holding body. */
static void pb_record(pb_t *m, const pb_t *body) {
  pb_bytes(m, 3, body->b, body->n);
}

/* Wraps a protobuf into a Kinesis record owned by the batch: magic, the
 * bytes, their MD5. */
static uint8_t *wrap(kn_batch_t *b, const void *pb, size_t n, size_t *len) {
  uint8_t *d = kn_batch_alloc(b, n + KN_AGG_OVERHEAD);
  memcpy(d, KN_AGG_MAGIC, 4);
  if (n) memcpy(d + 4, pb, n);
  kn_md5(d + 4, n, d + 4 + n);
  *len = n + KN_AGG_OVERHEAD;
  return d;
}

/* Expands a copy of data, in a block of its own that b owns, as the
 * consumer does with the GetRecords body: kn_agg_expand writes over what
 * it expands, and the tests expand the same bytes more than once.  Checks
 * that the copy is left as it was unless user records were added, and
 * that every payload and key points inside it. */
static kn_err_t expand(kn_batch_t *b, const void *data, size_t len,
                       const kn_agg_filter_t *f, kn_agg_result_t *res,
                       char *msg, size_t msg_size) {
  kn_error_t *e = NULL;
  const char *seq = kn_batch_strndup(b, "4960000000000000042", 19);
  uint8_t *copy = malloc(len ? len : 1);
  KT_CHECK(copy != NULL && kn_batch_adopt(b, copy) == 0);
  if (len) memcpy(copy, data, len);
  size_t n0 = b->n;
  kn_err_t err = kn_agg_expand(b, copy, len, seq, 1700000000123, f, res, &e);
  if (msg) snprintf(msg, msg_size, "%s", e ? kn_error_string(e) : "");
  if (err) KT_CHECK(e != NULL && kn_error_code(e) == err);
  if (!err) KT_CHECK(e == NULL);
  if (err || res->n_added == 0)
    KT_CHECK(len == 0 || memcmp(copy, data, len) == 0);
  for (size_t i = n0; i < b->n; i++) {
    const kn_record_t *r = &b->recs[i];
    KT_CHECK((const uint8_t *)r->data >= copy &&
             (const uint8_t *)r->data + r->len <= copy + len);
    KT_CHECK((const uint8_t *)r->pkey >= copy &&
             (const uint8_t *)r->pkey + strlen(r->pkey) < copy + len);
    KT_CHECK(!r->ehk ||
             ((const uint8_t *)r->ehk >= copy &&
              (const uint8_t *)r->ehk + strlen(r->ehk) < copy + len));
  }
  kn_error_destroy(e);
  return err;
}

/* A user record as the tests hold it. */
typedef struct {
  char pk[300];
  char ehk[48]; /* "" for none */
  uint8_t *data;
  size_t len;
} urec_t;

static void urec_random(urec_t *u, size_t max_data, int key_space,
                        int ehk_chance) {
  snprintf(u->pk, sizeof(u->pk), "key-%d",
           key_space ? (int)(rnd() % key_space) : 0);
  if ((int)(rnd() % 100) < ehk_chance) {
    kn_u128_t hk = kn_u128_make(rnd(), rnd());
    kn_u128_format(hk, u->ehk);
  } else {
    u->ehk[0] = '\0';
  }
  u->len = max_data ? rnd() % (max_data + 1) : 0;
  free(u->data);
  u->data = malloc(u->len + 1);
  for (size_t i = 0; i < u->len; i++) u->data[i] = (uint8_t)rnd();
}

/* Aggregates us[0..n) with the given caps, expands every Kinesis record
 * produced (plain ones as they would arrive) and compares the user records
 * with the input, in order.  Every aggregate is also unpacked by
 * protobuf-c.  Returns the number of Kinesis records. */
static size_t roundtrip(const urec_t *us, size_t n, size_t max_bytes,
                        size_t max_count) {
  kn_aggregator_t *a = kn_aggregator_new(max_bytes, max_count);
  kn_batch_t *b = kn_batch_new("s", "shardId-000000000000");
  size_t n_kinesis = 0, cap = max_bytes ? max_bytes : KN_AGG_DEFAULT_MAX_BYTES;
  KT_CHECK(a && b);

  for (size_t i = 0; i <= n; i++) {
    kn_err_t err = KN_ERR__QUEUE_FULL;
    /* Copied and borrowed payloads, mixed in one aggregate. */
    if (i < n)
      err = (i % 2 ? kn_aggregator_add_borrowed : kn_aggregator_add)(
          a, us[i].pk, strlen(us[i].pk), us[i].ehk[0] ? us[i].ehk : NULL,
          strlen(us[i].ehk), us[i].data, us[i].len);
    if (err == KN_ERR_NO_ERROR) continue;
    KT_CHECK_INT(err, KN_ERR__QUEUE_FULL);
    size_t count = kn_aggregator_count(a), size = kn_aggregator_size(a);
    kn_agg_out_t out;
    if (!count) break;
    kn_err_t flushed = kn_aggregator_flush(a, &out);
    KT_CHECK_INT(flushed, KN_ERR_NO_ERROR);
    if (flushed != KN_ERR_NO_ERROR) break;
    KT_CHECK_INT(out.n_records, count);
    KT_CHECK_INT(out.aggregated, count > 1);
    n_kinesis++;
    size_t first = b->n;
    if (out.aggregated) {
      KT_CHECK_INT(out.len, size);
      KT_CHECK(out.len <= cap);
      KT_CHECK_STR(out.pkey, "a");
      /* Bytes handed to the decoder must be owned by the batch. */
      uint8_t *copy = kn_batch_alloc(b, out.len);
      memcpy(copy, out.data, out.len);
      kn_agg_result_t res;
      KT_CHECK_INT(expand(b, copy, out.len, NULL, &res, NULL, 0), 0);
      KT_CHECK_INT(res.aggregated, 1);
      KT_CHECK_INT(res.n_user, count);
      KT_CHECK_INT(res.n_added, count);

      KnKpl__AggregatedRecord *ar = kn_kpl__aggregated_record__unpack(
          NULL, out.len - KN_AGG_OVERHEAD, copy + 4);
      KT_CHECK(ar != NULL);
      if (ar) {
        KT_CHECK_INT(ar->n_records, count);
        for (size_t j = 0; j < ar->n_records && j < count && first + j < b->n;
             j++) {
          const kn_record_t *r = &b->recs[first + j];
          KnKpl__Record *pr = ar->records[j];
          KT_CHECK(pr->partition_key_index < ar->n_partition_key_table);
          KT_CHECK_STR(ar->partition_key_table[pr->partition_key_index],
                       r->pkey);
          KT_CHECK_INT(pr->data.len, r->len);
          KT_CHECK(pr->data.len == 0 ||
                   memcmp(pr->data.data, r->data, r->len) == 0);
          KT_CHECK_INT(pr->has_explicit_hash_key_index, r->ehk != NULL);
        }
        kn_kpl__aggregated_record__free_unpacked(ar, NULL);
      }
      /* The aggregate is sent where its first user record belongs. */
      const urec_t *u0 = &us[i - count];
      kn_u128_t hk;
      char dec[KN_U128_DEC_BUFSZ];
      if (u0->ehk[0])
        kn_u128_parse(u0->ehk, strlen(u0->ehk), &hk);
      else
        hk = kn_hashkey_of(u0->pk, strlen(u0->pk));
      kn_u128_format(hk, dec);
      KT_CHECK_STR(out.ehk, dec);
    } else {
      kn_agg_result_t res;
      KT_CHECK_INT(expand(b, out.data, out.len, NULL, &res, NULL, 0), 0);
      KT_CHECK_INT(res.aggregated, 0);
      kn_record_t *r = kn_batch_push(b);
      KT_CHECK(r != NULL);
      if (!r) break;
      r->data = kn_batch_alloc(b, out.len);
      if (out.len && r->data) memcpy((char *)r->data, out.data, out.len);
      r->len = out.len;
      b->bytes += out.len;
      r->pkey = kn_batch_strndup(b, out.pkey, strlen(out.pkey));
      r->ehk = out.ehk ? kn_batch_strndup(b, out.ehk, strlen(out.ehk)) : NULL;
    }
    if (i < n) i--; /* add it again, to the empty aggregator */
  }
  KT_CHECK_INT(b->n, n);
  int bad = 0;
  size_t bytes = 0;
  for (size_t i = 0; i < n && i < b->n; i++) {
    const kn_record_t *r = &b->recs[i];
    bytes += r->len;
    if (!r->pkey || (r->len && !r->data)) { /* out of memory (torture) */
      bad++;
      continue;
    }
    bad += strcmp(r->pkey, us[i].pk) != 0;
    bad += (r->ehk ? strcmp(r->ehk, us[i].ehk) : us[i].ehk[0] != 0) != 0;
    bad += r->len != us[i].len;
    bad += r->len == us[i].len && r->len && memcmp(r->data, us[i].data, r->len);
  }
  KT_CHECK_INT(bad, 0);
  KT_CHECK_INT(b->bytes, bytes);
  kn_batch_destroy(b);
  kn_aggregator_destroy(a);
  return n_kinesis;
}

static void urecs_free(urec_t *us, size_t n) {
  for (size_t i = 0; i < n; i++) free(us[i].data);
  free(us);
}

/* ---- The published layout --------------------------------------------------
 */

/* partition_key_table ["pk1", "pk2"], explicit_hash_key_table ["123"],
 * records [{0, -, "hello"}, {1, 0, ""}], wrapped in magic and MD5 (the
 * expected bytes were worked out independently of this code). */
static const char *spec_hex =
    "f3899ac2"
    "0a03706b31"
    "0a03706b32"
    "1203313233"
    "1a09"
    "0800"
    "1a0568656c6c6f"
    "1a06"
    "0801"
    "1000"
    "1a00"
    "47bf1346520eb83cc774c13ab536dde3";

static void test_spec_decode(void) {
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  size_t len = strlen(spec_hex) / 2;
  uint8_t *d = kn_batch_alloc(b, len);
  unhex(spec_hex, d, len);
  kn_agg_result_t res;
  KT_REQUIRE(expand(b, d, len, NULL, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.aggregated, 1);
  KT_CHECK_INT(res.n_user, 2);
  KT_CHECK_INT(b->n, 2);
  if (b->n == 2) {
    const kn_record_t *r = &b->recs[0];
    KT_CHECK_STR(r->pkey, "pk1");
    KT_CHECK(r->ehk == NULL);
    KT_CHECK(r->len == 5 && memcmp(r->data, "hello", 5) == 0);
    /* A copy, in a block the batch owns: the input may go. */
    KT_CHECK(r->data != (const char *)d + 25);
    KT_CHECK_STR(r->seq, "4960000000000000042");
    KT_CHECK_INT(r->subseq, 0);
    KT_CHECK_INT(r->aggregated, 1);
    KT_CHECK_INT(r->arrival_ms, 1700000000123);
    KT_CHECK(r->batch == b);
    r = &b->recs[1];
    KT_CHECK_STR(r->pkey, "pk2");
    KT_CHECK_STR(r->ehk, "123");
    KT_CHECK_INT(r->len, 0);
    KT_CHECK_INT(r->subseq, 1);
    KT_CHECK(b->recs[0].seq == b->recs[1].seq);
  }
  KT_CHECK_INT(b->bytes, 5);
  kn_batch_destroy(b);
}

static void test_spec_encode(void) {
  kn_aggregator_t *a = kn_aggregator_new(0, 0);
  uint8_t want[64];
  size_t len = strlen(spec_hex) / 2;
  unhex(spec_hex, want, len);
  KT_CHECK_INT(kn_aggregator_add(a, "pk1", 3, NULL, 0, "hello", 5), 0);
  KT_CHECK_INT(kn_aggregator_size(a), 4 + 5 + 11 + 16);
  KT_CHECK_INT(kn_aggregator_add(a, "pk2", 3, "123", 3, "", 0), 0);
  KT_CHECK_INT(kn_aggregator_count(a), 2);
  KT_CHECK_INT(kn_aggregator_size(a), len);
  kn_agg_out_t out;
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK_INT(out.len, len);
  KT_CHECK(out.len == len && memcmp(out.data, want, len) == 0);
  KT_CHECK_INT(out.aggregated, 1);
  KT_CHECK_INT(out.n_records, 2);
  KT_CHECK_STR(out.pkey, "a");
  /* The decimal MD5 of "pk1", the first record's partition key. */
  KT_CHECK_STR(out.ehk, "329398341438914906102347661116985167824");
  KT_CHECK_INT(kn_aggregator_count(a), 0);
  KT_CHECK_INT(kn_aggregator_size(a), 0);
  KT_CHECK_INT(kn_aggregator_flush(a, &out), KN_ERR__STATE);
  /* Cleared: what was added is forgotten, the next records start afresh. */
  KT_CHECK_INT(kn_aggregator_add(a, "gone", 4, NULL, 0, "x", 1), 0);
  KT_CHECK_INT(kn_aggregator_add(a, "gone2", 5, NULL, 0, "y", 1), 0);
  kn_aggregator_clear(a);
  KT_CHECK_INT(kn_aggregator_count(a), 0);
  KT_CHECK_INT(kn_aggregator_size(a), 0);
  KT_CHECK_INT(kn_aggregator_flush(a, &out), KN_ERR__STATE);

  /* Shared keys go in the tables once. */
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, "7", 1, "x", 1), 0);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, "7", 1, "y", 1), 0);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, "z", 1), 0);
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  static const uint8_t shared[] = {0x0a, 1,    'k', 0x12, 1, '7', 0x1a, 7, 0x08,
                                   0,    0x10, 0,   0x1a, 1, 'x', 0x1a, 7, 0x08,
                                   0,    0x10, 0,   0x1a, 1, 'y', 0x1a, 5, 0x08,
                                   0,    0x1a, 1,   'z'};
  KT_CHECK_INT(out.len, sizeof(shared) + 20);
  KT_CHECK(out.len == sizeof(shared) + 20 &&
           memcmp((const uint8_t *)out.data + 4, shared, sizeof(shared)) == 0);
  KT_CHECK_STR(out.ehk, "7"); /* the first record's explicit hash key */
  kn_aggregator_destroy(a);
}

/* ---- Round trips ------------------------------------------------------------
 */

static void test_roundtrip_shapes(void) {
  urec_t *us = calloc(6000, sizeof(*us));

  /* Two records with empty data. */
  for (int i = 0; i < 2; i++) urec_random(&us[i], 0, 0, 0);
  KT_CHECK_INT(roundtrip(us, 2, 0, 0), 1);

  /* One record: sent plain. */
  KT_CHECK_INT(roundtrip(us, 1, 0, 0), 1);

  /* Shared keys, distinct keys, explicit hash keys, mixed sizes. */
  for (int i = 0; i < 500; i++) urec_random(&us[i], 300, 3, 0);
  KT_CHECK(roundtrip(us, 500, 0, 0) > 1);
  for (int i = 0; i < 500; i++) urec_random(&us[i + 500], 300, 1000000, 30);
  KT_CHECK(roundtrip(us + 500, 500, 0, 0) > 1);
  KT_CHECK(roundtrip(us, 1000, 4096, 0) > 10);
  KT_CHECK_INT(roundtrip(us, 1000, 0, 7), 143);
  urecs_free(us, 6000);

  /* Thousands of tiny records in one aggregate. */
  us = calloc(6000, sizeof(*us));
  for (int i = 0; i < 6000; i++) urec_random(&us[i], 4, 200, 5);
  KT_CHECK_INT(roundtrip(us, 6000, KN_AGG_RECORD_LIMIT - 1, 0), 1);
  urecs_free(us, 6000);
}

static void test_roundtrip_big(void) {
  urec_t *us = calloc(3, sizeof(*us));
  /* 1 MiB minus the key: the largest a Kinesis record can carry, alone. */
  snprintf(us[0].pk, sizeof(us[0].pk), "big");
  us[0].len = KN_AGG_RECORD_LIMIT - 3;
  us[0].data = malloc(us[0].len);
  for (size_t i = 0; i < us[0].len; i++) us[0].data[i] = (uint8_t)(i * 7);
  urec_random(&us[1], 10, 5, 0);
  urec_random(&us[2], 10, 5, 0);
  /* Alone, then the two small ones together. */
  KT_CHECK_INT(roundtrip(us, 3, 0, 0), 2);
  KT_CHECK_INT(roundtrip(us, 3, KN_AGG_RECORD_LIMIT - 1, 0), 2);

  /* 1 MiB of data in an aggregate of two, decoded. */
  free(us[0].data);
  us[0].len = 1024 * 1024 - 100;
  us[0].data = malloc(us[0].len);
  memset(us[0].data, 0xab, us[0].len);
  us[1].len = 0;
  KT_CHECK_INT(roundtrip(us, 2, KN_AGG_RECORD_LIMIT - 1, 0), 1);

  /* Over the limit: refused. */
  kn_aggregator_t *a = kn_aggregator_new(0, 0);
  KT_CHECK_INT(kn_aggregator_add(a, "big", 3, NULL, 0, us[0].data,
                                 KN_AGG_RECORD_LIMIT - 2),
               KN_ERR__INVALID_ARG);
  KT_CHECK_INT(kn_aggregator_count(a), 0);
  kn_aggregator_destroy(a);
  urecs_free(us, 3);
}

/* protobuf-c writes, we read: random messages, also with the fields in
 * an order the KPL never writes (records before tables). */
static void test_protobuf_c_writes(void) {
  for (int iter = 0; iter < 300; iter++) {
    size_t npk = 1 + rnd() % 20, nehk = rnd() % 5, nrec = rnd() % 40;
    char **pks = calloc(npk, sizeof(char *)),
         **ehks = calloc(nehk + 1, sizeof(char *));
    for (size_t i = 0; i < npk; i++) {
      pks[i] = malloc(32);
      snprintf(pks[i], 32, "pk\xc3\xa9-%zu-%u", i, (unsigned)(rnd() % 1000));
    }
    for (size_t i = 0; i < nehk; i++) {
      ehks[i] = malloc(48);
      snprintf(ehks[i], 48, "%llu", (unsigned long long)rnd());
    }
    KnKpl__Record *recs = calloc(nrec + 1, sizeof(*recs));
    KnKpl__Record **precs = calloc(nrec + 1, sizeof(*precs));
    uint8_t datas[40][64];
    KnKpl__Tag tag = KN_KPL__TAG__INIT, *ptag = &tag;
    tag.key = "k";
    for (size_t i = 0; i < nrec; i++) {
      kn_kpl__record__init(&recs[i]);
      recs[i].partition_key_index = rnd() % npk;
      if (nehk && rnd() % 2) {
        recs[i].has_explicit_hash_key_index = 1;
        recs[i].explicit_hash_key_index = rnd() % nehk;
      }
      recs[i].data.len = rnd() % 64;
      for (size_t j = 0; j < recs[i].data.len; j++)
        datas[i][j] = (uint8_t)rnd();
      recs[i].data.data = datas[i];
      if (rnd() % 5 == 0) {
        recs[i].n_tags = 1;
        recs[i].tags = &ptag;
      }
      precs[i] = &recs[i];
    }
    KnKpl__AggregatedRecord ar = KN_KPL__AGGREGATED_RECORD__INIT;
    ar.n_partition_key_table = npk;
    ar.partition_key_table = pks;
    ar.n_explicit_hash_key_table = nehk;
    ar.explicit_hash_key_table = ehks;
    ar.n_records = nrec;
    ar.records = precs;

    kn_batch_t *b = kn_batch_new(NULL, NULL);
    size_t pblen = kn_kpl__aggregated_record__get_packed_size(&ar);
    uint8_t *pb = malloc(pblen + 1);
    kn_kpl__aggregated_record__pack(&ar, pb);
    if (iter % 2) { /* records first, then the tables: still valid */
      KnKpl__AggregatedRecord part = KN_KPL__AGGREGATED_RECORD__INIT;
      part.n_records = nrec;
      part.records = precs;
      size_t n1 = kn_kpl__aggregated_record__pack(&part, pb);
      part.n_records = 0;
      part.n_partition_key_table = npk;
      part.partition_key_table = pks;
      part.n_explicit_hash_key_table = nehk;
      part.explicit_hash_key_table = ehks;
      size_t n2 = kn_kpl__aggregated_record__pack(&part, pb + n1);
      KT_CHECK_INT(n1 + n2, pblen);
    }
    size_t len;
    uint8_t *d = wrap(b, pb, pblen, &len);
    kn_agg_result_t res;
    char msg[256];
    kn_err_t err = expand(b, d, len, NULL, &res, msg, sizeof(msg));
    /* An empty message is not an aggregate (as the KCL says). */
    if (pblen == 0) {
      KT_CHECK_INT(err, KN_ERR__CORRUPT);
    } else {
      KT_CHECK_MSG(err == 0, "%s", msg);
      KT_CHECK_INT(res.n_user, nrec);
      KT_CHECK_INT(b->n, nrec);
      for (size_t i = 0; i < nrec && i < b->n; i++) {
        const kn_record_t *r = &b->recs[i];
        KT_CHECK_STR(r->pkey, pks[recs[i].partition_key_index]);
        if (recs[i].has_explicit_hash_key_index)
          KT_CHECK_STR(r->ehk, ehks[recs[i].explicit_hash_key_index]);
        else
          KT_CHECK(r->ehk == NULL);
        KT_CHECK(
            r->len == recs[i].data.len &&
            (r->len == 0 || memcmp(r->data, recs[i].data.data, r->len) == 0));
      }
    }
    free(pb);
    kn_batch_destroy(b);
    for (size_t i = 0; i < npk; i++) free(pks[i]);
    for (size_t i = 0; i < nehk; i++) free(ehks[i]);
    free(pks);
    free(ehks);
    free(recs);
    free(precs);
  }
}

/* ---- Corrupt input
 * ------------------------------------------------------------ */

/* Expects m to be rejected as corrupt with a message containing what,
 * leaving the batch as it was. */
static void check_corrupt(const pb_t *m, const char *what, int line) {
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  kn_record_t *keep = kn_batch_push(b);
  keep->len = 3;
  b->bytes = 3;
  size_t len;
  uint8_t *d = wrap(b, m->b, m->n, &len);
  kn_agg_result_t res;
  char msg[256];
  kn_err_t err = expand(b, d, len, NULL, &res, msg, sizeof(msg));
  KT_CHECK_MSG(err == KN_ERR__CORRUPT, "line %d: err %d", line, err);
  KT_CHECK_MSG(strstr(msg, what) != NULL, "line %d: \"%s\" lacks \"%s\"", line,
               msg, what);
  KT_CHECK_MSG(b->n == 1 && b->bytes == 3, "line %d: batch changed", line);
  /* Without errp too. */
  const char *seq = "1";
  KT_CHECK_INT(kn_agg_expand(b, d, len, seq, 0, NULL, &res, NULL),
               KN_ERR__CORRUPT);
  kn_batch_destroy(b);
}
#define CHECK_CORRUPT(m, what) check_corrupt(m, what, __LINE__)
/* What protobuf-c refuses to unpack gets one message for every fault. */
#define UNPACKABLE "protobuf-c cannot unpack the message"

static void test_corrupt_envelope(void) {
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  kn_agg_result_t res;
  char msg[256];
  size_t len = strlen(spec_hex) / 2;
  uint8_t *good = kn_batch_alloc(b, len), *d = kn_batch_alloc(b, len);
  unhex(spec_hex, good, len);

  /* No magic: a plain record, nothing appended, no error. */
  memcpy(d, good, len);
  d[0] ^= 1;
  KT_REQUIRE(expand(b, d, len, NULL, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.aggregated, 0);
  KT_REQUIRE(expand(b, d, 0, NULL, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_REQUIRE(expand(b, good, 3, NULL, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.aggregated, 0);
  KT_CHECK_INT(b->n, 0);
  KT_CHECK_INT(kn_agg_has_magic(good, len), 1);
  KT_CHECK_INT(kn_agg_has_magic(good, 3), 0);

  /* The magic alone, or with just an MD5 (of an empty message). */
  KT_CHECK_INT(expand(b, good, 4, NULL, &res, msg, sizeof(msg)),
               KN_ERR__CORRUPT);
  KT_CHECK(strstr(msg, "too few") != NULL);
  size_t n;
  uint8_t *e = wrap(b, "", 0, &n);
  KT_CHECK_INT(expand(b, e, n, NULL, &res, NULL, 0), KN_ERR__CORRUPT);

  /* Any flipped bit, anywhere past the magic: MD5 mismatch. */
  for (size_t i = 4; i < len; i++) {
    memcpy(d, good, len);
    d[i] ^= (uint8_t)(1u << (i % 8));
    KT_CHECK_INT(expand(b, d, len, NULL, &res, msg, sizeof(msg)),
                 KN_ERR__CORRUPT);
    KT_CHECK(strstr(msg, "MD5") != NULL);
  }
  /* Cut short: the MD5 no longer matches. */
  for (size_t cut = 5; cut < len; cut++)
    KT_CHECK_INT(expand(b, good, cut, NULL, &res, NULL, 0), KN_ERR__CORRUPT);
  KT_CHECK_INT(b->n, 0);
  KT_CHECK_INT(b->bytes, 0);
  kn_batch_destroy(b);
}

/* Truncating the protobuf anywhere (with a fresh MD5) gives either an
 * error or a valid message holding a prefix of the records. */
static void test_corrupt_truncated(void) {
  size_t len = strlen(spec_hex) / 2;
  uint8_t full[64];
  unhex(spec_hex, full, len);
  const uint8_t *pb = full + 4;
  size_t pblen = len - 20;
  int valid = 0;
  for (size_t cut = 1; cut < pblen; cut++) {
    kn_batch_t *b = kn_batch_new(NULL, NULL);
    size_t n;
    uint8_t *d = wrap(b, pb, cut, &n);
    kn_agg_result_t res;
    kn_err_t err = expand(b, d, n, NULL, &res, NULL, 0);
    if (err == 0) {
      valid++;
      KT_CHECK(b->n <= 1);
    } else {
      KT_CHECK_INT(err, KN_ERR__CORRUPT);
      KT_CHECK_INT(b->n, 0);
    }
    kn_batch_destroy(b);
  }
  /* After each table entry, and after the first record: the first record's
   * cut leaves a pk table of two, no ehk table needed. */
  KT_CHECK_INT(valid, 4);

  pb_t m = {.n = 0}, r = {.n = 0};
  pb_str(&m, 1, "k");
  pb_uint(&r, 1, 0);
  pb_tag(&r, 3, 2);
  pb_varint(&r, 10); /* data says 10 bytes, has 2 */
  pb_raw(&r, "ab", 2);
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);

  m.n = 0;
  pb_str(&m, 1, "k");
  pb_tag(&m, 3, 2);
  pb_varint(&m, 100); /* the record says 100 bytes */
  pb_raw(&m, "\x08\x00", 2);
  CHECK_CORRUPT(&m, UNPACKABLE);

  m.n = 0;
  pb_str(&m, 1, "k");
  pb_raw(&m, "\x1a", 1); /* a tag and nothing else */
  CHECK_CORRUPT(&m, UNPACKABLE);

  m.n = 0;
  pb_raw(&m, "\x8a", 1); /* a tag cut in the middle */
  CHECK_CORRUPT(&m, UNPACKABLE);

  m.n = 0;
  pb_str(&m, 1, "k");
  r.n = 0;
  pb_raw(&r, "\x08\x80", 2); /* index varint cut in the middle */
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);

  m.n = 0;
  pb_str(&m, 1, "k");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_str(&r, 3, "x");
  pb_raw(&r, "\x2d\x01\x02", 3); /* fixed32 of an unknown field, cut */
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);
}

/* m: the partition key table k0 (and k1 when not NULL), and one record of
 * data "x" with key 0. */
static void one_record_keys(pb_t *m, const char *k0, const char *k1) {
  pb_t r = {.n = 0};
  m->n = 0;
  pb_str(m, 1, k0);
  if (k1) pb_str(m, 1, k1);
  pb_uint(&r, 1, 0);
  pb_str(&r, 3, "x");
  pb_record(m, &r);
}

static void test_corrupt_fields(void) {
  pb_t m, r;

  /* Index outside its table. */
  m.n = 0;
  pb_str(&m, 1, "k0");
  pb_str(&m, 1, "k1");
  r.n = 0;
  pb_uint(&r, 1, 1);
  pb_str(&r, 3, "ok");
  pb_record(&m, &r);
  r.n = 0;
  pb_uint(&r, 1, 2);
  pb_str(&r, 3, "bad");
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, "record 1: partition key index 2 outside the table of 2");

  m.n = 0;
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_str(&r, 3, "no tables at all");
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, "partition key index 0 outside the table of 0");

  m.n = 0;
  pb_str(&m, 1, "k0");
  pb_str(&m, 2, "5");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_uint(&r, 2, 1);
  pb_str(&r, 3, "x");
  pb_record(&m, &r);
  CHECK_CORRUPT(&m,
                "record 0: explicit hash key index 1 outside the table of 1");

  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_uint(&r, 2, 0);
  pb_str(&r, 3, "x");
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, "explicit hash key index 0 outside the table of 0");

  /* Partition keys longer than the service's 256 characters: a producer
   * could not have sent them, and a consumer would carry them everywhere. */
  char longkey[1100];
  memset(longkey, 'k', 257);
  longkey[257] = '\0';
  one_record_keys(&m, "k0", longkey);
  CHECK_CORRUPT(&m, "partition key 1 has 257 characters, over 256");
  /* Counted in characters: 256 two-byte ones pass, 257 do not. */
  for (int i = 0; i < 257; i++) memcpy(longkey + 2 * i, "\xc3\xa9", 2);
  longkey[2 * 257] = '\0';
  one_record_keys(&m, longkey, NULL);
  CHECK_CORRUPT(&m, "partition key 0 has 257 characters, over 256");
  longkey[2 * 256] = '\0';
  one_record_keys(&m, longkey, NULL);
  {
    kn_batch_t *ok = kn_batch_new(NULL, NULL);
    size_t len;
    uint8_t *d = wrap(ok, m.b, m.n, &len);
    kn_agg_result_t res;
    KT_CHECK_INT(expand(ok, d, len, NULL, &res, NULL, 0), KN_ERR_NO_ERROR);
    KT_CHECK(ok->n == 1 && strcmp(ok->recs[0].pkey, longkey) == 0);
    kn_batch_destroy(ok);
  }
  /* Bytes that continue no character count too: at most 4 per character. */
  memset(longkey, 0x80, 1025);
  longkey[1025] = '\0';
  one_record_keys(&m, longkey, NULL);
  CHECK_CORRUPT(&m, "partition key 0 has 1025 bytes, over 1024");

  /* Huge indices and varints. */
  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_uint(&r, 1, UINT64_MAX); /* ten bytes, valid varint, absurd index */
  pb_str(&r, 3, "x");
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, "partition key index 18446744073709551615");

  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_raw(&r, "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02",
         11); /* > 64 bits */
  pb_str(&r, 3, "x");
  /* protobuf-c drops the bits past 64 (as protobuf does), which leaves an
   * absurd index. */
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, "partition key index 9223372036854775807 outside");

  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_raw(&r, "\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00",
         12); /* 12 bytes */
  pb_str(&r, 3, "x");
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);

  m.n = 0;
  pb_str(&m, 1, "k0");
  pb_raw(&m, "\x1a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
         11); /* 2^64-1 long */
  CHECK_CORRUPT(&m, UNPACKABLE);

  m.n = 0;
  pb_raw(&m, "\xfa\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00",
         11); /* 10-byte tag */
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_raw(&m, "\x8a\x80\x80\x80\x80\x00\x01k", 8); /* field 1 in a 6-byte tag */
  CHECK_CORRUPT(&m, UNPACKABLE);

  m.n = 0;
  pb_raw(&m, "\x02\x00", 2); /* field 0 */
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_raw(&m, "\x80\x00\x0a",
         3); /* field 0 in two bytes (protobuf-c takes it) */
  CHECK_CORRUPT(&m, "invalid field number");

  /* Wrong wire types for known fields. */
  m.n = 0;
  pb_uint(&m, 1, 5);
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_uint(&m, 2, 5);
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_str(&m, 1, "k0");
  pb_uint(&m, 3, 5);
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_str(&r, 1, "0");
  pb_str(&r, 3, "x");
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_uint(&r, 3, 7);
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_str(&r, 3, "x");
  pb_uint(&r, 4, 1);
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);

  /* Groups and the undefined wire types 6 and 7. */
  m.n = 0;
  pb_str(&m, 1, "k0");
  pb_raw(&m, "\x70\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
         12); /* 11 bytes */
  CHECK_CORRUPT(&m, UNPACKABLE);

  for (unsigned wt = 3; wt <= 7; wt++) {
    if (wt == 5) continue;
    m.n = 0;
    pb_str(&m, 1, "k0");
    pb_tag(&m, 9, wt);
    CHECK_CORRUPT(&m, UNPACKABLE);
  }

  /* Required fields. */
  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_str(&r, 3, "x");
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);
  m.n = 0;
  pb_str(&m, 1, "k0");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_str(&r, 3, "x");
  pb_str(&r, 4, "\x12\x01v"); /* a tag with a value and no key */
  pb_record(&m, &r);
  CHECK_CORRUPT(&m, UNPACKABLE);
}

/* What protobuf allows and the KPL does not write is still read. */
static void test_lenient(void) {
  pb_t m = {.n = 0}, r = {.n = 0};
  pb_uint(&m, 15, 99); /* unknown varint field */
  pb_raw(&m, "\x70\xf6\xff\xff\xff\xff\xff\xff\xff\xff\x1a",
         11);       /* overflowing */
  pb_tag(&m, 6, 1); /* unknown fixed64 */
  pb_raw(&m, "12345678", 8);
  pb_tag(&m, 7, 5); /* unknown fixed32 */
  pb_raw(&m, "1234", 4);
  pb_str(&m, 100000, "unknown bytes");
  pb_raw(&m, "\xa8\xff\xff\xff\x2e\x32", 6); /* field 2^31 + ..., a varint */
  r.n = 0;
  pb_str(&r, 3, "first"); /* data before the index */
  pb_uint(&r, 1, 0);
  pb_str(&r, 3, "last");               /* given twice: the last one wins */
  pb_str(&r, 4, "\x0a\x01k\x12\x01v"); /* a tag */
  pb_uint(&r, 9, 1);                   /* unknown field in a record */
  pb_record(&m, &r);
  pb_str(&m, 1, "\xe6\x97\xa5\xe6\x9c\xac"); /* the table after the record */
  r.n = 0;
  pb_raw(&r, "\x88\x80\x00", 3);     /* field 1 tag in a non-minimal varint */
  pb_raw(&r, "\x81\x80\x80\x00", 4); /* index 1, non-minimal */
  pb_str(&r, 3, "");
  pb_record(&m, &r);
  pb_str(&m, 1, "second");
  pb_str(&m, 2, "00042"); /* leading zeros, passed through */

  kn_batch_t *b = kn_batch_new(NULL, NULL);
  size_t len;
  uint8_t *d = wrap(b, m.b, m.n, &len);
  kn_agg_result_t res;
  char msg[256];
  KT_REQUIRE(expand(b, d, len, NULL, &res, msg, sizeof(msg)) == 0,
             kn_batch_destroy(b));
  KT_CHECK_MSG(b->n == 2, "%s", msg);
  if (b->n == 2) {
    KT_CHECK_STR(b->recs[0].pkey, "\xe6\x97\xa5\xe6\x9c\xac");
    KT_CHECK(b->recs[0].len == 4 && memcmp(b->recs[0].data, "last", 4) == 0);
    KT_CHECK_STR(b->recs[1].pkey, "second");
    KT_CHECK_INT(b->recs[1].len, 0);
  }
  /* The explicit hash key is passed through as written. */
  m.n = 0;
  pb_str(&m, 1, "k");
  pb_str(&m, 2, "00042");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_uint(&r, 2, 0);
  pb_str(&r, 3, "x");
  pb_record(&m, &r);
  d = wrap(b, m.b, m.n, &len);
  KT_REQUIRE(expand(b, d, len, NULL, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK(b->n == 3 && strcmp(b->recs[2].ehk, "00042") == 0);

  /* Tables and no records: an aggregate of nothing. */
  m.n = 0;
  pb_str(&m, 1, "k");
  d = wrap(b, m.b, m.n, &len);
  KT_REQUIRE(expand(b, d, len, NULL, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.aggregated, 1);
  KT_CHECK_INT(res.n_user, 0);
  KT_CHECK_INT(b->n, 3);

  /* Many keys: the tables outgrow their first storage. */
  m.n = 0;
  for (int i = 0; i < 100; i++) {
    char k[16];
    snprintf(k, sizeof(k), "k%d", i);
    pb_str(&m, 1, k);
    pb_str(&m, 2, k + 1);
  }
  for (int i = 99; i >= 0; i -= 3) {
    r.n = 0;
    pb_uint(&r, 1, (uint64_t)i);
    pb_uint(&r, 2, (uint64_t)i);
    pb_str(&r, 3, "d");
    pb_record(&m, &r);
  }
  d = wrap(b, m.b, m.n, &len);
  KT_REQUIRE(expand(b, d, len, NULL, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 34);
  KT_CHECK_STR(b->recs[3].pkey, "k99");
  KT_CHECK_STR(b->recs[3].ehk, "99");
  KT_CHECK_STR(b->recs[36].pkey, "k0");
  kn_batch_destroy(b);
}

/* ---- Filtering
 * ------------------------------------------------------------------ */

/* An aggregate of ten records: keys pk1 and pk2 alternate; record 7 has the
 * explicit hash key "5". */
static uint8_t *ten(kn_batch_t *b, size_t *len) {
  kn_aggregator_t *a = kn_aggregator_new(0, 0);
  for (int i = 0; i < 10; i++) {
    char data[8];
    snprintf(data, sizeof(data), "d%d", i);
    kn_aggregator_add(a, i % 2 ? "pk2" : "pk1", 3, i == 7 ? "5" : NULL, 1, data,
                      strlen(data));
  }
  kn_agg_out_t out;
  if (kn_aggregator_flush(a, &out) != KN_ERR_NO_ERROR) {
    kn_aggregator_destroy(a);
    *len = 0;
    return NULL;
  }
  uint8_t *d = kn_batch_alloc(b, out.len);
  memcpy(d, out.data, out.len);
  *len = out.len;
  kn_aggregator_destroy(a);
  return d;
}

static void test_filter_checkpoint(void) {
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  size_t len;
  uint8_t *d = ten(b, &len);
  KT_REQUIRE(d != NULL, kn_batch_destroy(b));
  kn_agg_filter_t f = {.subseq_floor = 4};
  kn_agg_result_t res;
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.n_user, 10);
  KT_CHECK_INT(res.n_below_floor, 5);
  KT_CHECK_INT(res.n_added, 5);
  KT_CHECK_INT(b->n, 5);
  for (size_t i = 0; i < b->n; i++) {
    char want[8];
    snprintf(want, sizeof(want), "d%zu", i + 5);
    KT_CHECK_INT(b->recs[i].subseq, i + 5);
    KT_CHECK(b->recs[i].len == strlen(want) &&
             memcmp(b->recs[i].data, want, b->recs[i].len) == 0);
  }
  KT_CHECK_INT(b->bytes, 10);
  /* One copy of a key per aggregate. */
  KT_CHECK(b->recs[0].pkey == b->recs[2].pkey);
  KT_CHECK(b->recs[0].pkey != b->recs[1].pkey);
  f.subseq_floor = -1;
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 10);
  f.subseq_floor = 0;
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 9);
  f.subseq_floor = 9;
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 0);
  KT_CHECK_INT(res.aggregated, 1);
  f.subseq_floor = INT64_MAX;
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 0);
  KT_CHECK_INT(b->n, 5 + 10 + 9);
  kn_batch_destroy(b);
}

static void test_filter_range(void) {
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  size_t len;
  uint8_t *d = ten(b, &len);
  KT_REQUIRE(d != NULL, kn_batch_destroy(b));
  kn_agg_filter_t f = {.subseq_floor = -1, .check_range = 1};
  kn_agg_result_t res;
  kn_u128_t hk1 = kn_hashkey_of("pk1", 3); /* 0xf7cf... */
  kn_u128_t hk2 = kn_hashkey_of("pk2", 3); /* 0x5c70... */
  const kn_u128_t one = kn_u128_make(0, 1);

  /* The whole range. */
  f.range_start = kn_u128_make(0, 0);
  f.range_end = kn_u128_make(UINT64_MAX, UINT64_MAX);
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 10);
  KT_CHECK_INT(res.out_of_range, 0);

  /* Inclusive bounds: [5, MD5(pk1)] holds every record's hash key. */
  f.range_start = kn_u128_make(0, 5);
  f.range_end = hk1;
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 10);

  /* Record 7's explicit hash key 5 is left out: all ten are dropped, even
   * though MD5(pk2), its partition key's hash, is inside. */
  size_t n0 = b->n, bytes0 = b->bytes;
  f.range_start = kn_u128_make(0, 6);
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.aggregated, 1);
  KT_CHECK_INT(res.out_of_range, 1);
  KT_CHECK_INT(res.n_added, 0);
  KT_CHECK_INT(b->n, n0);
  KT_CHECK_INT(b->bytes, bytes0);

  /* MD5(pk1) just outside the end. */
  f.range_start = kn_u128_make(0, 5);
  f.range_end = kn_u128_sub(hk1, one);
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.out_of_range, 1);

  /* MD5(pk2) just outside the start. */
  f.range_start = kn_u128_add(hk2, one);
  f.range_end = kn_u128_make(UINT64_MAX, UINT64_MAX);
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.out_of_range, 1);

  /* Filters together: the range decides for the whole aggregate first. */
  f.range_start = kn_u128_make(0, 0);
  f.subseq_floor = 8;
  KT_REQUIRE(expand(b, d, len, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(res.out_of_range, 0);
  KT_CHECK_INT(res.n_added, 1);
  KT_CHECK_INT(b->recs[b->n - 1].subseq, 9);

  /* An explicit hash key that is not a number cannot be placed. */
  pb_t m = {.n = 0}, r = {.n = 0};
  pb_str(&m, 1, "k");
  pb_str(&m, 2, "12x");
  pb_uint(&r, 1, 0);
  pb_uint(&r, 2, 0);
  pb_str(&r, 3, "x");
  pb_record(&m, &r);
  size_t n;
  uint8_t *e = wrap(b, m.b, m.n, &n);
  char msg[256];
  n0 = b->n;
  KT_CHECK_INT(expand(b, e, n, &f, &res, msg, sizeof(msg)), KN_ERR__CORRUPT);
  KT_CHECK(strstr(msg, "record 0: explicit hash key is not a decimal") != NULL);
  KT_CHECK_INT(b->n, n0);
  f.check_range = 0; /* without the range check, passed through */
  f.subseq_floor = -1;
  KT_REQUIRE(expand(b, e, n, &f, &res, NULL, 0) == 0, kn_batch_destroy(b));
  KT_CHECK_INT(b->n, n0 + 1);
  kn_batch_destroy(b);
}

/* ---- The aggregator
 * ------------------------------------------------------------- */

static void test_aggregator(void) {
  KT_CHECK(kn_aggregator_new(63, 0) == NULL);
  KT_CHECK(kn_aggregator_new(KN_AGG_RECORD_LIMIT, 0) == NULL);
  kn_aggregator_t *a = kn_aggregator_new(KN_AGG_RECORD_LIMIT - 1, 0);
  KT_CHECK(a != NULL);
  kn_aggregator_destroy(a);
  kn_aggregator_destroy(NULL);

  a = kn_aggregator_new(0, 0);
  KT_CHECK_INT(kn_aggregator_add(a, "", 0, NULL, 0, "x", 1),
               KN_ERR__INVALID_ARG);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, "x", 1, "x", 1),
               KN_ERR__INVALID_ARG);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, "", 0, "x", 1),
               KN_ERR__INVALID_ARG);
  const char *over = "340282366920938463463374607431768211456";
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, over, strlen(over), "x", 1),
               KN_ERR__INVALID_ARG);
  KT_CHECK_INT(kn_aggregator_count(a), 0);

  /* A lone record goes as itself, with its explicit hash key normalised. */
  KT_CHECK_INT(kn_aggregator_add(a, "key", 3, "007", 3, "payload", 7), 0);
  kn_agg_out_t out;
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK_INT(out.aggregated, 0);
  KT_CHECK(out.len == 7 && memcmp(out.data, "payload", 7) == 0);
  KT_CHECK_STR(out.pkey, "key");
  KT_CHECK_STR(out.ehk, "7");
  KT_CHECK_INT(kn_aggregator_add(a, "key", 3, NULL, 0, "", 0), 0);
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK(out.len == 0 && out.ehk == NULL);
  KT_CHECK_STR(out.pkey, "key");
  /* A lone borrowed record is sent from the caller's bytes. */
  static const char mine[] = "borrowed";
  KT_CHECK_INT(kn_aggregator_add_borrowed(a, "key", 3, NULL, 0, mine, 8), 0);
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK(out.data == mine && out.len == 8 && out.aggregated == 0);
  /* An empty borrowed payload, in an aggregate and alone. */
  KT_CHECK_INT(kn_aggregator_add_borrowed(a, "key", 3, NULL, 0, NULL, 0), 0);
  KT_CHECK_INT(kn_aggregator_add_borrowed(a, "k2", 2, NULL, 0, mine, 3), 0);
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK_INT(out.aggregated, 1);
  kn_batch_t *eb = kn_batch_new("s", "shardId-000000000000");
  void *copy = malloc(out.len);
  memcpy(copy, out.data, out.len);
  kn_agg_result_t er;
  KT_CHECK(kn_batch_adopt(eb, copy) == 0);
  KT_REQUIRE(kn_agg_expand(eb, copy, out.len, "1", 0, NULL, &er, NULL) == 0,
             kn_batch_destroy(eb), kn_aggregator_destroy(a));
  KT_CHECK_INT(er.n_added, 2);
  size_t l0 = 9, l1 = 9;
  kn_record_data(kn_batch_record(eb, 0), &l0);
  const void *d1 = kn_record_data(kn_batch_record(eb, 1), &l1);
  KT_CHECK(l0 == 0 && l1 == 3 && memcmp(d1, "bor", 3) == 0);
  kn_batch_destroy(eb);
  KT_CHECK_INT(kn_aggregator_add_borrowed(a, "key", 3, NULL, 0, NULL, 0), 0);
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK(out.len == 0 && out.aggregated == 0);
  kn_aggregator_destroy(a);

  /* The size cap with 1 KB records: every aggregate is as full as the cap
   * allows, and its size is what was announced. */
  a = kn_aggregator_new(0, 0);
  static uint8_t kb[1024];
  size_t flushed = 0, records = 0;
  for (int i = 0; i < 1000; i++) {
    char pk[32];
    int n = snprintf(pk, sizeof(pk), "user-%d", i);
    size_t before = kn_aggregator_size(a);
    kn_err_t err = kn_aggregator_add(a, pk, (size_t)n, NULL, 0, kb, sizeof(kb));
    if (err == KN_ERR__QUEUE_FULL) {
      /* Refused only when it would not have fitted. */
      /* record field 1 + 2 + (1 + 1 + 1 + 2 + 1024), key entry 1 + 1 + n */
      KT_CHECK(before + 1034 + (size_t)n > KN_AGG_DEFAULT_MAX_BYTES);
      KT_CHECK_INT(kn_aggregator_size(a), before);
      records += kn_aggregator_count(a);
      KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
      KT_CHECK_INT(out.len, before);
      KT_CHECK(out.len <= KN_AGG_DEFAULT_MAX_BYTES);
      KT_CHECK(out.len > KN_AGG_DEFAULT_MAX_BYTES - 1100);
      flushed++;
      err = kn_aggregator_add(a, pk, (size_t)n, NULL, 0, kb, sizeof(kb));
    }
    KT_CHECK_INT(err, 0);
  }
  records += kn_aggregator_count(a);
  KT_CHECK_INT(records, 1000);
  KT_CHECK_INT(flushed, 20); /* 49 records of about 1,042 bytes each */
  kn_aggregator_destroy(a);

  /* The count cap. */
  a = kn_aggregator_new(0, 3);
  for (int i = 0; i < 3; i++)
    KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, "x", 1), 0);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, "x", 1),
               KN_ERR__QUEUE_FULL);
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK_INT(out.n_records, 3);
  kn_aggregator_destroy(a);

  /* A record bigger than the cap is taken by an empty aggregator only. */
  a = kn_aggregator_new(100, 0);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, kb, 200), 0);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, "x", 1),
               KN_ERR__QUEUE_FULL);
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK_INT(out.aggregated, 0);
  KT_CHECK_INT(out.len, 200);
  /* Exactly at the cap is allowed: 20 + (1+1+1) + (1+1+(2+1+1+60)) = 89;
   * a record of 6 data bytes adds 1+1+(2+1+1+6) = 12, one more than fits. */
  uint8_t d60[60] = {0};
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, d60, 60), 0);
  KT_CHECK_INT(kn_aggregator_size(a), 89);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, d60, 6),
               KN_ERR__QUEUE_FULL);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, d60, 5), 0);
  KT_CHECK_INT(kn_aggregator_size(a), 100);
  KT_CHECK_INT(kn_aggregator_add(a, "k", 1, NULL, 0, d60, 0),
               KN_ERR__QUEUE_FULL);
  KT_REQUIRE(kn_aggregator_flush(a, &out) == 0, kn_aggregator_destroy(a));
  KT_CHECK_INT(out.len, 100);
  kn_aggregator_destroy(a);
}

/* The size the aggregator tracks as records are added is what protobuf-c
 * packs, plus the magic and the MD5: random shapes, with keys, indices and
 * payloads long enough for varints of one to three bytes, and keys holding
 * a NUL byte. */
static void test_tracked_size(void) {
  static uint8_t payload[40000];
  for (size_t i = 0; i < sizeof(payload); i++) payload[i] = (uint8_t)rnd();
  size_t checked = 0;
  for (int iter = 0; iter < 400; iter++) {
    size_t max_bytes = 64 + rnd() % (KN_AGG_RECORD_LIMIT - 64);
    size_t max_count = rnd() % 4 ? 0 : 1 + rnd() % 300;
    size_t key_space = 1 + rnd() % (rnd() % 2 ? 8 : 400);
    size_t max_data = rnd() % 3 == 0 ? sizeof(payload) : 1 + rnd() % 300;
    int ehk_chance = (int)(rnd() % 101);
    size_t max_key = 1 + rnd() % (rnd() % 4 ? 16 : 300);
    kn_aggregator_t *a = kn_aggregator_new(max_bytes, max_count);
    KT_CHECK(a != NULL);
    if (!a) continue;
    size_t n = 1 + rnd() % 600;
    for (size_t i = 0; i <= n; i++) {
      kn_err_t err = KN_ERR__QUEUE_FULL;
      if (i < n) {
        char pk[320], ehk[KN_U128_DEC_BUFSZ];
        size_t k = rnd() % key_space, klen = 1 + (k * 7919) % max_key;
        int m = snprintf(pk, sizeof(pk), "%zu-", k);
        for (size_t j = (size_t)m; j < klen && j < sizeof(pk) - 1; j++)
          pk[j] = (char)('a' + (k + j) % 26);
        if ((size_t)m > klen) klen = (size_t)m;
        pk[klen] = '\0';
        if (rnd() % 16 == 0) pk[rnd() % klen] = '\0'; /* cut short */
        int with_ehk = (int)(rnd() % 100) < ehk_chance;
        if (with_ehk) kn_u128_format(kn_u128_make(rnd() % 4, rnd() % 8), ehk);
        size_t dlen = rnd() % (max_data + 1);
        err = kn_aggregator_add(
            a, pk, klen, with_ehk ? ehk : NULL, with_ehk ? strlen(ehk) : 0,
            payload + rnd() % (sizeof(payload) - dlen + 1), dlen);
        if (err == KN_ERR_NO_ERROR) continue;
      }
      KT_CHECK_INT(err, KN_ERR__QUEUE_FULL);
      size_t count = kn_aggregator_count(a), size = kn_aggregator_size(a);
      if (!count) break;
      kn_agg_out_t out;
      kn_err_t flushed = kn_aggregator_flush(a, &out);
      KT_CHECK_INT(flushed, KN_ERR_NO_ERROR);
      if (flushed != KN_ERR_NO_ERROR) break;
      if (out.aggregated) {
        KT_CHECK_INT(out.len, size);
        KnKpl__AggregatedRecord *ar = kn_kpl__aggregated_record__unpack(
            NULL, out.len - KN_AGG_OVERHEAD, (const uint8_t *)out.data + 4);
        KT_CHECK(ar != NULL);
        if (ar) {
          KT_CHECK_INT(
              kn_kpl__aggregated_record__get_packed_size(ar) + KN_AGG_OVERHEAD,
              size);
          KT_CHECK_INT(ar->n_records, count);
          kn_kpl__aggregated_record__free_unpacked(ar, NULL);
          checked++;
        }
      }
      if (i < n) i--; /* add it again, to the empty aggregator */
    }
    kn_aggregator_destroy(a);
  }
  KT_CHECK(checked > 400);
}

/* ---- Writing over the input ------------------------------------------------
 */

/* kn_agg_expand copies the payloads, then the keys, back over the
 * aggregate's own bytes, and leaves them alone whenever it fails. */
static void test_in_place(void) {
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  size_t len;
  const uint8_t *orig = ten(b, &len);
  KT_REQUIRE(orig != NULL, kn_batch_destroy(b));
  uint8_t *d = kn_batch_alloc(b, len);
  memcpy(d, orig, len);
  kn_agg_result_t res;
  KT_REQUIRE(kn_agg_expand(b, d, len, "1", 0, NULL, &res, NULL) == 0,
             kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 10);
  /* The payloads one after the other from the start, then the keys. */
  size_t off = 0;
  for (size_t i = 0; i < b->n; i++) {
    const kn_record_t *r = &b->recs[i];
    char want[24];
    snprintf(want, sizeof(want), "d%zu", i);
    KT_CHECK((const uint8_t *)r->data == d + off);
    KT_CHECK(r->len == strlen(want) && memcmp(r->data, want, r->len) == 0);
    off += r->len;
  }
  for (size_t i = 0; i < b->n; i++) {
    const kn_record_t *r = &b->recs[i];
    KT_CHECK((const uint8_t *)r->pkey >= d + off &&
             (const uint8_t *)r->pkey + strlen(r->pkey) < d + len);
    KT_CHECK_STR(r->pkey, i % 2 ? "pk2" : "pk1");
    if (i == 7) {
      KT_CHECK((const uint8_t *)r->ehk >= d + off &&
               (const uint8_t *)r->ehk + strlen(r->ehk) < d + len);
      KT_CHECK_STR(r->ehk, "5");
    } else {
      KT_CHECK(r->ehk == NULL);
    }
  }

  /* Corrupt only after the unpack (an index outside its table, an explicit
   * hash key that is not a number under the range check): the batch and
   * data are as they were. */
  pb_t m, r;
  m.n = 0;
  pb_str(&m, 1, "k0");
  pb_str(&m, 2, "not a number");
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_str(&r, 3, "payload zero");
  pb_record(&m, &r);
  r.n = 0;
  pb_uint(&r, 1, 0);
  pb_uint(&r, 2, 0);
  pb_str(&r, 3, "payload one");
  pb_record(&m, &r);
  r.n = 0;
  pb_uint(&r, 1, 1);
  pb_str(&r, 3, "bad index");
  pb_record(&m, &r);
  size_t n0 = b->n, bytes0 = b->bytes;
  uint8_t *bad = wrap(b, m.b, m.n, &len);
  uint8_t *keep = kn_batch_alloc(b, len);
  memcpy(keep, bad, len);
  KT_CHECK_INT(kn_agg_expand(b, bad, len, "2", 0, NULL, &res, NULL),
               KN_ERR__CORRUPT);
  KT_CHECK(memcmp(bad, keep, len) == 0);
  KT_CHECK(b->n == n0 && b->bytes == bytes0);
  KT_CHECK(res.aggregated == 0 && res.n_added == 0);

  /* Without the bad record the indices are fine; the range check then
   * refuses the explicit hash key. */
  m.n -= r.n + 2;
  bad = wrap(b, m.b, m.n, &len);
  memcpy(keep, bad, len);
  kn_agg_filter_t f = {.subseq_floor = -1, .check_range = 1};
  f.range_end = kn_u128_make(UINT64_MAX, UINT64_MAX);
  KT_CHECK_INT(kn_agg_expand(b, bad, len, "2", 0, &f, &res, NULL),
               KN_ERR__CORRUPT);
  KT_CHECK(memcmp(bad, keep, len) == 0);
  KT_CHECK(b->n == n0 && b->bytes == bytes0);
  KT_CHECK(res.aggregated == 0 && res.n_added == 0);

  /* Without the range check it expands, over data. */
  KT_REQUIRE(kn_agg_expand(b, bad, len, "2", 0, NULL, &res, NULL) == 0,
             kn_batch_destroy(b));
  KT_CHECK_INT(res.n_added, 2);
  KT_CHECK(b->n == n0 + 2);
  KT_CHECK((const uint8_t *)b->recs[n0].data == bad);
  KT_CHECK(memcmp(bad, "payload zeropayload one", 23) == 0);
  KT_CHECK_STR(b->recs[n0 + 1].ehk, "not a number");
  kn_batch_destroy(b);
}

int main(void) {
  KT_RUN(test_spec_decode);
  KT_RUN(test_spec_encode);
  KT_RUN(test_roundtrip_shapes);
  KT_RUN(test_roundtrip_big);
  KT_RUN(test_protobuf_c_writes);
  KT_RUN(test_corrupt_envelope);
  KT_RUN(test_corrupt_truncated);
  KT_RUN(test_corrupt_fields);
  KT_RUN(test_lenient);
  KT_RUN(test_filter_checkpoint);
  KT_RUN(test_filter_range);
  KT_RUN(test_aggregator);
  KT_RUN(test_tracked_size);
  KT_RUN(test_in_place);
  return KT_DONE();
}
