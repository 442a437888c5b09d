/* The producer's engine with a fake clock and fake answers: shard
 * prediction (before and after split and merge), call limits (500
 * records, 5 MiB, 1 MiB records), aggregation, linger, per-shard token
 * buckets, retries of failed entries only and in order, time-to-live,
 * records that land on an unexpected shard, strict ordering. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "core/error.h"
#include "kinesis/decode.h"
#include "kt.h"
#include "producer/core.h"
#include "producer/shardmap.h"
#include "util/base64.h"

#define MS 1000LL
#define SEC 1000000LL

/* ---- helpers ---- */

static const char *SEQ_OPEN = NULL;
static const char *SEQ_CLOSED = "99";

static void add_shard(kn_shard_list_t *l, const char *id, kn_u128_t start,
                      kn_u128_t end, const char *seq_end) {
  char s[KN_U128_DEC_BUFSZ], e[KN_U128_DEC_BUFSZ];
  kn_u128_format(start, s);
  kn_u128_format(end, e);
  kn_shard_desc_t d = {id, NULL, NULL, s, e, "0", seq_end};
  if (kn_shard_list_add(l, &d)) fprintf(stderr, "add %s failed\n", id);
}

/* n (a power of two, <= 2^20) shards splitting the key space evenly. */
static kn_shard_list_t *even_shards(unsigned n) {
  kn_shard_list_t *l = kn_shard_list_new();
  int bits = 0;
  while ((1u << bits) < n) bits++;
  for (unsigned i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof(id), "shardId-%012u", i);
    kn_u128_t s = kn_u128_make(bits ? (uint64_t)i << (64 - bits) : 0, 0);
    kn_u128_t e =
        i + 1 == n
            ? kn_u128_make(UINT64_MAX, UINT64_MAX)
            : kn_u128_make(((uint64_t)(i + 1) << (64 - bits)) - 1, UINT64_MAX);
    add_shard(l, id, s, e, SEQ_OPEN);
  }
  return l;
}

static kn_u128_t top_half(void) { return kn_u128_make(1ULL << 63, 0); }
static kn_u128_t max_key(void) { return kn_u128_make(UINT64_MAX, UINT64_MAX); }

static kn_pcore_cfg_t base_cfg(void) {
  kn_pcore_cfg_t c;
  memset(&c, 0, sizeof(c));
  c.stream = "s";
  c.batch_max_records = 500;
  c.batch_max_bytes = KN_PUT_MAX_BYTES;
  c.linger_us = 100 * MS;
  c.backoff_ms = 100;
  c.backoff_max_ms = 1000;
  return c;
}

static int64_t ttl_us = 30 * SEC;

static kn_msg_t *msg_at(const char *key, const void *data, size_t len,
                        int64_t now) {
  kn_msg_t *m = kn_msg_new(key, strlen(key), NULL, 0, data, len, 0, NULL);
  m->hk = kn_hashkey_of(key, strlen(key));
  m->enq_us = now;
  m->deadline_us = now + ttl_us;
  return m;
}

static kn_msg_t *msg_ehk(const char *key, kn_u128_t hk, int64_t now) {
  char e[KN_U128_DEC_BUFSZ];
  kn_u128_format(hk, e);
  kn_msg_t *m = kn_msg_new(key, strlen(key), e, strlen(e), "x", 1, 0, NULL);
  m->hk = hk;
  m->enq_us = now;
  m->deadline_us = now + ttl_us;
  return m;
}

/* The first message of l, or a blank one when l is empty (under torture a
 * case may come out with no message where it expects one). */
static const kn_msg_t *head_of(const kn_msg_list_t *l) {
  static const kn_msg_t blank = {.key = "", .data = "\0\0\0\0\0\0\0"};
  return l->head ? l->head : &blank;
}

static size_t free_list(kn_msg_list_t *l) {
  size_t n = 0;
  for (kn_msg_t *m; (m = kn_msg_list_pop(l));) {
    kn_msg_free(m);
    n++;
  }
  return n;
}

/* The request body's Records array. */
static json_t *records_of(const kn_pbatch_t *b) {
  json_error_t je;
  json_t *root = json_loadb(b->body.p, b->body.len, 0, &je);
  if (!root) {
    fprintf(stderr, "bad body: %s\n", je.text);
    return NULL;
  }
  json_t *r = json_incref(json_object_get(root, "Records"));
  json_decref(root);
  return r;
}

/* An answer to b: every entry stored on shard_id, except those listed in
 * fail (a NUL-terminated string of '0'/'1' by entry). */
static kn_presp_t *answer(const kn_pbatch_t *b, const char *shard_id,
                          const char *fail) {
  kn_buf_t body = KN_BUF_INIT;
  size_t nf = 0, fl = fail ? strlen(fail) : 0;
  for (size_t i = 0; i < b->n; i++) nf += i < fl && fail[i] == '1';
  kn_buf_printf(&body, "{\"FailedRecordCount\":%zu,\"Records\":[", nf);
  for (size_t i = 0; i < b->n; i++) {
    if (i < fl && fail[i] == '1')
      kn_buf_printf(
          &body,
          "%s{\"ErrorCode\":\"ProvisionedThroughputExceededException\","
          "\"ErrorMessage\":\"Rate exceeded\"}",
          i ? "," : "");
    else
      kn_buf_printf(&body, "%s{\"SequenceNumber\":\"%zu\",\"ShardId\":\"%s\"}",
                    i ? "," : "", 1000 + i,
                    shard_id ? shard_id : b->e[i].shard->id);
  }
  kn_buf_append_str(&body, "]}");
  size_t len;
  char *p = kn_buf_steal(&body, &len);
  kn_put_results_t *res = NULL;
  kn_error_t *err = kn_decode_put_records(p, len, b->n, &res);
  if (err) {
    fprintf(stderr, "answer: %s\n", kn_error_string(err));
    kn_error_destroy(err);
    return NULL;
  }
  return kn_presp_new(res);
}

/* Takes no batch (one taken is given back). */
static int none_taken(kn_pcore_t *c, int64_t now, int flush, int64_t *wake,
                      kn_msg_list_t *done) {
  kn_pbatch_t *b = kn_pcore_take(c, now, flush, wake, done);
  if (b) kn_pcore_abandon(c, b, done);
  return b == NULL;
}

static int done_ok(kn_pcore_t *c, kn_pbatch_t *b, const char *shard_id,
                   const char *fail, int64_t now, kn_msg_list_t *done) {
  if (!b) return 0; /* nothing was taken (out of memory) */
  kn_presp_t *r = answer(b, shard_id, fail);
  if (!r) { /* out of memory */
    kn_pcore_abandon(c, b, done);
    return 0;
  }
  int flags = kn_pcore_done(c, b, NULL, r, now, done);
  kn_presp_release(r);
  return flags;
}

/* ---- shard prediction ---- */

static void test_predict_even(void) {
  kn_shardmap_t m;
  KT_CHECK_INT(kn_shardmap_init(&m, even_shards(4)), 0);
  KT_CHECK_INT(m.n_open, 4);
  KT_CHECK_INT(kn_shardmap_find(&m, kn_u128_make(0, 0)), 0);
  KT_CHECK_INT(kn_shardmap_find(&m, max_key()), 3);
  KT_CHECK_INT(kn_shardmap_find(&m, kn_u128_make((1ULL << 62) - 1, UINT64_MAX)),
               0);
  KT_CHECK_INT(kn_shardmap_find(&m, kn_u128_make(1ULL << 62, 0)), 1);
  /* Every key's shard is the one whose range holds it. */
  for (int i = 0; i < 2000; i++) {
    char key[32];
    snprintf(key, sizeof(key), "key-%d", i);
    kn_u128_t hk = kn_hashkey_of(key, strlen(key));
    long s = kn_shardmap_find(&m, hk);
    KT_CHECK(s >= 0 && kn_u128_in_range(hk, m.open[s]->start, m.open[s]->end));
  }
  kn_shardmap_clear(&m);
}

static void test_predict_split_merge(void) {
  /* 0 was split into 2 and 3; 1 is open; unsorted as servers list. */
  kn_shard_list_t *l = kn_shard_list_new();
  kn_u128_t q1 = kn_u128_make(1ULL << 62, 0),
            q1m = kn_u128_make((1ULL << 62) - 1, UINT64_MAX);
  add_shard(l, "shardId-000000000001", top_half(), max_key(), SEQ_OPEN);
  add_shard(l, "shardId-000000000000", kn_u128_make(0, 0),
            kn_u128_sub(top_half(), kn_u128_make(0, 1)), SEQ_CLOSED);
  add_shard(l, "shardId-000000000003", q1,
            kn_u128_sub(top_half(), kn_u128_make(0, 1)), SEQ_OPEN);
  add_shard(l, "shardId-000000000002", kn_u128_make(0, 0), q1m, SEQ_OPEN);
  kn_shardmap_t m;
  KT_CHECK_INT(kn_shardmap_init(&m, l), 0);
  KT_REQUIRE(m.n_open == 3, kn_shardmap_clear(&m));
  KT_CHECK_STR(m.open[kn_shardmap_find(&m, kn_u128_make(5, 0))]->id,
               "shardId-000000000002");
  KT_CHECK_STR(m.open[kn_shardmap_find(&m, q1)]->id, "shardId-000000000003");
  KT_CHECK_STR(m.open[kn_shardmap_find(&m, top_half())]->id,
               "shardId-000000000001");
  KT_CHECK(kn_shardmap_by_id(&m, "shardId-000000000000") != NULL);
  KT_CHECK(kn_shardmap_by_id(&m, "nope") == NULL);
  kn_shardmap_clear(&m);

  /* 0 and 1 merged into 4: only 4 is open. */
  l = kn_shard_list_new();
  add_shard(l, "shardId-000000000000", kn_u128_make(0, 0),
            kn_u128_sub(top_half(), kn_u128_make(0, 1)), SEQ_CLOSED);
  add_shard(l, "shardId-000000000001", top_half(), max_key(), SEQ_CLOSED);
  add_shard(l, "shardId-000000000004", kn_u128_make(0, 0), max_key(), SEQ_OPEN);
  KT_CHECK_INT(kn_shardmap_init(&m, l), 0);
  KT_CHECK_INT(m.n_open, 1);
  KT_CHECK_INT(kn_shardmap_find(&m, max_key()), 0);
  KT_CHECK_INT(kn_shardmap_find(&m, kn_u128_make(0, 0)), 0);
  kn_shardmap_clear(&m);

  /* A gap (a listing taken mid-reshard) predicts nothing. */
  l = kn_shard_list_new();
  add_shard(l, "a", kn_u128_make(0, 0), q1m, SEQ_OPEN);
  add_shard(l, "b", top_half(), max_key(), SEQ_OPEN);
  KT_CHECK_INT(kn_shardmap_init(&m, l), 0);
  KT_CHECK_INT(kn_shardmap_find(&m, q1), -1);
  kn_shardmap_clear(&m);
}

/* Records follow a split: queued ones move to the children. */
static void test_core_reroute_on_split(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  KT_CHECK_INT(kn_pcore_set_map(c, even_shards(1), 1, 0, &done), 0);
  kn_pcore_add(c, msg_ehk("lo", kn_u128_make(1, 0), 0));
  kn_pcore_add(c, msg_ehk("hi", max_key(), 0));
  kn_shard_list_t *l = kn_shard_list_new();
  add_shard(l, "shardId-000000000000", kn_u128_make(0, 0), max_key(),
            SEQ_CLOSED);
  add_shard(l, "shardId-000000000001", kn_u128_make(0, 0),
            kn_u128_sub(top_half(), kn_u128_make(0, 1)), SEQ_OPEN);
  add_shard(l, "shardId-000000000002", top_half(), max_key(), SEQ_OPEN);
  KT_CHECK_INT(kn_pcore_set_map(c, l, 1, 0, &done), 0);
  const kn_pshard_t *ps = kn_pcore_predict(c, kn_u128_make(1, 0));
  KT_CHECK_STR(ps ? ps->id : NULL, "shardId-000000000001");
  int64_t wake;
  kn_pbatch_t *b = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK(b && b->n == 2);
  if (b) {
    if (b->n == 2) {
      KT_CHECK_STR(b->e[0].shard->id, "shardId-000000000001");
      KT_CHECK_STR(b->e[1].shard->id, "shardId-000000000002");
    }
    done_ok(c, b, NULL, NULL, 0, &done);
  }
  KT_CHECK_INT(done.n, 2);
  KT_CHECK_STR(head_of(&done)->shard_id, "shardId-000000000001");
  free_list(&done);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

/* ---- call limits ---- */

static void test_limits_records(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(4), 1, 0, &done);
  for (int i = 0; i < 1200; i++) {
    char key[16];
    snprintf(key, sizeof(key), "k%d", i);
    kn_pcore_add(c, msg_at(key, "data", 4, 0));
  }
  size_t sizes[4] = {0};
  int64_t wake;
  for (int i = 0; i < 4; i++) {
    kn_pbatch_t *b = kn_pcore_take(c, 0, 0, &wake, &done);
    if (!b) break;
    sizes[i] = b->n;
    json_t *recs = records_of(b);
    KT_CHECK_INT(json_array_size(recs), b->n);
    json_decref(recs);
    done_ok(c, b, NULL, NULL, 0, &done);
  }
  /* Two full calls at once; the rest waits for linger. */
  KT_CHECK_INT(sizes[0], 500);
  KT_CHECK_INT(sizes[1], 500);
  KT_CHECK_INT(sizes[2], 0);
  KT_CHECK_INT(wake, 100 * MS);
  kn_pbatch_t *b = kn_pcore_take(c, 100 * MS, 0, &wake, &done);
  KT_CHECK(b && b->n == 200);
  if (b) done_ok(c, b, NULL, NULL, 100 * MS, &done);
  KT_CHECK_INT(free_list(&done), 1200);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

static void test_limits_bytes(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  /* Records of exactly 1 MiB with their key: five fill a call. */
  size_t len = KN_PUT_RECORD_MAX - 3;
  char *big = calloc(1, len);
  for (int i = 0; i < 12; i++) {
    char key[8];
    snprintf(key, sizeof(key), "k%02d", i);
    kn_pcore_add(c, msg_at(key, big, len, 0));
  }
  size_t got[4] = {0};
  int64_t wake;
  const char *first_body = NULL;
  for (int i = 0; i < 4; i++) {
    kn_pbatch_t *b = kn_pcore_take(c, 0, 1, &wake, &done);
    if (!b) break;
    got[i] = b->n;
    KT_CHECK(b->bytes <= KN_PUT_MAX_BYTES);
    /* Each call is filled in the memory of the one answered before. */
    if (i == 0)
      first_body = b->body.p;
    else
      KT_CHECK(b->body.p == first_body);
    done_ok(c, b, NULL, NULL, 0, &done);
  }
  KT_CHECK_INT(got[0], 5);
  KT_CHECK_INT(got[1], 5);
  KT_CHECK_INT(got[2], 2);
  KT_CHECK_INT(got[3], 0);
  KT_CHECK_INT(free_list(&done), 12);
  free(big);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

/* ---- aggregation ---- */

static void test_aggregation(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  cfg.aggregate = 1;
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(2), 1, 0, &done);
  char payload[100];
  memset(payload, 'p', sizeof(payload));
  for (int i = 0; i < 2000; i++) {
    char key[16];
    snprintf(key, sizeof(key), "k%d", i);
    snprintf(payload, sizeof(payload), "%d", i);
    kn_pcore_add(c, msg_at(key, payload, sizeof(payload), 0));
  }
  int64_t wake;
  kn_pbatch_t *b = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_REQUIRE(b != NULL, free_list(&done), kn_pcore_destroy(c, NULL));
  KT_CHECK_INT(b->n_msgs, 2000);
  json_t *recs = records_of(b);
  KT_CHECK_INT(json_array_size(recs), b->n);
  size_t users = 0;
  for (size_t i = 0; i < b->n; i++) {
    json_t *r = json_array_get(recs, i);
    const char *d = json_string_value(json_object_get(r, "Data"));
    char *raw = malloc(kn_base64_decoded_max(strlen(d)));
    long n = kn_base64_decode(raw, d, strlen(d));
    KT_CHECK(n > 0 && (size_t)n <= KN_AGG_DEFAULT_MAX_BYTES);
    KT_CHECK_STR(json_string_value(json_object_get(r, "PartitionKey")), "a");
    kn_batch_t *kb = kn_batch_new("s", b->e[i].shard->id);
    kn_batch_adopt(kb, raw);
    /* The aggregate belongs to its shard's whole range. */
    kn_agg_filter_t f = {-1, 1, b->e[i].shard->start, b->e[i].shard->end};
    kn_agg_result_t ar;
    KT_CHECK_INT(kn_agg_expand(kb, raw, (size_t)n, "1", 0, &f, &ar, NULL), 0);
    KT_CHECK(ar.aggregated && !ar.out_of_range);
    KT_CHECK_INT(ar.n_added, b->e[i].msgs.n);
    /* In the order they were added. */
    const kn_msg_t *m = b->e[i].msgs.head;
    for (size_t k = 0; k < kb->n && m; k++, m = m->next)
      KT_CHECK_STR(kb->recs[k].pkey, m->key);
    users += ar.n_added;
    kn_batch_destroy(kb);
  }
  json_decref(recs);
  KT_CHECK_INT(users, 2000);
  /* Reports: sub-sequence numbers are positions in the aggregate. */
  done_ok(c, b, NULL, NULL, 0, &done);
  KT_CHECK_INT(done.n, 2000);
  const char *seq = NULL;
  uint64_t expect = 0;
  int ok = 1;
  for (kn_msg_t *m = done.head; m; m = m->next) {
    if (!seq || strcmp(seq, m->seq)) {
      seq = m->seq;
      expect = 0;
    }
    ok &= m->subseq == expect++ && m->aggregated;
  }
  KT_CHECK(ok);
  free_list(&done);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

/* ---- linger and rate limits ---- */

static void test_linger(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  int64_t wake;
  kn_pcore_add(c, msg_at("a", "1", 1, 0));
  /* No map yet: nothing to send. */
  KT_CHECK(none_taken(c, 0, 1, &wake, &done));
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  kn_pcore_add(c, msg_at("b", "2", 1, 30 * MS));
  KT_CHECK(none_taken(c, 50 * MS, 0, &wake, &done));
  KT_CHECK_INT(wake, 100 * MS);
  kn_pbatch_t *b = kn_pcore_take(c, 100 * MS, 0, &wake, &done);
  KT_CHECK(b && b->n == 2);
  if (b) done_ok(c, b, NULL, NULL, 100 * MS, &done);
  KT_CHECK_INT(free_list(&done), 2);
  KT_CHECK(none_taken(c, 200 * MS, 0, &wake, &done));
  KT_CHECK_INT(wake, INT64_MAX);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

static size_t drain_at(kn_pcore_t *c, int64_t now, size_t *bytes,
                       int64_t *wake) {
  kn_msg_list_t done = {0};
  size_t n = 0;
  kn_pbatch_t *b;
  while ((b = kn_pcore_take(c, now, 1, wake, &done))) {
    n += b->n_msgs;
    if (bytes) *bytes += b->bytes;
    done_ok(c, b, NULL, NULL, now, &done);
  }
  free_list(&done);
  return n;
}

static void test_token_bucket_records(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  cfg.shard_records_per_s = 1000;
  cfg.shard_bytes_per_s = 1 << 20;
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  for (int i = 0; i < 3000; i++) kn_pcore_add(c, msg_at("k", "x", 1, 0));
  int64_t wake;
  /* A full bucket less the reserve kept against the service's timing
   * (100 ms of rate: 100 records), then the rate. */
  KT_CHECK_INT(drain_at(c, 0, NULL, &wake), 900);
  KT_CHECK(wake > 0 && wake <= 2 * MS);
  KT_CHECK_INT(drain_at(c, 100 * MS, NULL, &wake), 100);
  KT_CHECK_INT(drain_at(c, 1100 * MS, NULL, &wake), 900);
  KT_CHECK_INT(drain_at(c, 10 * SEC, NULL, &wake), 900);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

static void test_token_bucket_bytes(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  cfg.shard_records_per_s = 1000;
  cfg.shard_bytes_per_s = 1 << 20;
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(2), 1, 0, &done);
  static char blob[100000];
  /* 80 records of 100 kB on each of the two shards: 8 s of their rate. */
  for (int i = 0; i < 80; i++) {
    kn_pcore_add(c, msg_ehk("lo", kn_u128_make(1, 0), 0));
    kn_msg_t *m = msg_at("x", blob, sizeof(blob), 0);
    m->hk = kn_u128_make(2, 0);
    kn_pcore_add(c, m);
    m = msg_at("x", blob, sizeof(blob), 0);
    m->hk = max_key();
    kn_pcore_add(c, m);
  }
  /* Over 5 s each shard sends at most burst + 5 s of rate + one record. */
  size_t bytes = 0;
  int64_t wake = 0, t = 0;
  size_t n = 0;
  while (t <= 5 * SEC) {
    n += drain_at(c, t, &bytes, &wake);
    KT_CHECK(wake > t);
    if (wake == INT64_MAX) break;
    t = wake;
  }
  size_t cap = 2 * ((size_t)(6 * (1 << 20)) + sizeof(blob) + 1);
  KT_CHECK_MSG(bytes <= cap, "%zu bytes in 5 s", bytes);
  KT_CHECK(n > 100);
  /* and not much less: the buckets are the only brake. */
  KT_CHECK_MSG(bytes >= (size_t)(2 * 5.5 * (1 << 20)) - 2 * sizeof(blob),
               "%zu bytes in 5 s", bytes);
  kn_msg_list_t left = {0};
  kn_pcore_destroy(c, &left);
  free_list(&left);
}

/* ---- failures ---- */

static void test_retry_failed_only_in_order(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  const char *data[] = {"a1", "a2", "a3"};
  for (int i = 0; i < 3; i++) kn_pcore_add(c, msg_at("a", data[i], 2, 0));
  int64_t wake;
  kn_pbatch_t *b = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK(b && b->n == 3);
  done_ok(c, b, NULL, "010", 0, &done);
  KT_CHECK_INT(done.n, 2);
  KT_CHECK(memcmp(head_of(&done)->data, "a1", 2) == 0 &&
           head_of(&done)->attempts == 1);
  KT_CHECK_STR(head_of(&done)->shard_id, "shardId-000000000000");
  free_list(&done);
  kn_pcore_add(c, msg_at("a", "a4", 2, 0));
  /* Back-off first, then the failed record ahead of the newer one. */
  KT_CHECK(none_taken(c, 0, 1, &wake, &done));
  KT_CHECK(wake > 0 && wake <= 200 * MS);
  b = kn_pcore_take(c, wake, 1, &wake, &done);
  KT_CHECK(b && b->n == 2);
  if (b) {
    KT_CHECK(memcmp(b->e[0].msgs.head->data, "a2", 2) == 0);
    KT_CHECK_INT(b->e[0].msgs.head->attempts, 2);
    KT_CHECK(memcmp(b->e[1].msgs.head->data, "a4", 2) == 0);
    done_ok(c, b, NULL, NULL, 0, &done);
  }
  KT_CHECK_INT(free_list(&done), 2);
  kn_pcore_stats_t st;
  kn_pcore_stats(c, &st);
  KT_CHECK_INT(st.retries, 1);
  KT_CHECK_INT(st.queued, 0);
  KT_CHECK_INT(st.inflight, 0);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

static void test_ttl(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  ttl_us = 1 * SEC;
  /* Without a map: expires where it waits. */
  kn_pcore_add(c, msg_at("a", "1", 1, 0));
  KT_CHECK_INT(kn_pcore_expire(c, 500 * MS, &done), 1 * SEC);
  KT_CHECK_INT(done.n, 0);
  kn_pcore_expire(c, 1 * SEC, &done);
  KT_CHECK_INT(done.n, 1);
  KT_CHECK(done.head &&
           kn_error_code(head_of(&done)->err) == KN_ERR__MSG_TIMED_OUT);
  free_list(&done);

  /* Failing every time: the last failure after the deadline reports. */
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  kn_pcore_add(c, msg_at("b", "2", 1, 0));
  int64_t t = 0, wake;
  int calls = 0;
  while (!done.n && calls < 100) {
    kn_pbatch_t *b = kn_pcore_take(c, t, 1, &wake, &done);
    if (b) {
      calls++;
      kn_error_t *err = kn_error_remote(500, "InternalFailure", "boom", NULL);
      kn_pcore_done(c, b, err, NULL, t, &done);
      kn_error_destroy(err);
    } else {
      kn_pcore_expire(c, t, &done);
      t = wake == INT64_MAX ? t + 10 * MS : wake;
    }
  }
  KT_CHECK(calls > 1);
  KT_CHECK_INT(done.n, 1);
  const kn_msg_t *m = done.head;
  KT_CHECK(m && kn_error_code(m->err) == KN_ERR__MSG_TIMED_OUT && !m->shard_id);
  KT_CHECK(m && strstr(kn_error_string(m->err), "boom") != NULL);
  KT_CHECK(m && m->attempts == calls);
  free_list(&done);
  ttl_us = 30 * SEC;
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

static void test_fatal_call_error(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  kn_pcore_add(c, msg_at("a", "1", 1, 0));
  int64_t wake;
  kn_pbatch_t *b = kn_pcore_take(c, 0, 1, &wake, &done);
  kn_error_t *err =
      kn_error_remote(400, "ResourceNotFoundException", "gone", NULL);
  if (b) kn_pcore_done(c, b, err, NULL, 0, &done);
  kn_error_destroy(err);
  KT_CHECK_INT(done.n, 1);
  KT_CHECK(done.head &&
           kn_error_code(head_of(&done)->err) == KN_ERR_RESOURCE_NOT_FOUND);
  free_list(&done);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

/* ---- unexpected shards ---- */

static kn_shard_list_t *split_of_one(void) {
  kn_shard_list_t *l = kn_shard_list_new();
  add_shard(l, "shardId-000000000000", kn_u128_make(0, 0), max_key(),
            SEQ_CLOSED);
  add_shard(l, "shardId-000000000001", kn_u128_make(0, 0),
            kn_u128_sub(top_half(), kn_u128_make(0, 1)), SEQ_OPEN);
  add_shard(l, "shardId-000000000002", top_half(), max_key(), SEQ_OPEN);
  return l;
}

static void test_wrong_shard(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  cfg.aggregate = 1;
  cfg.shard_max_calls = 2; /* two aggregates in flight to the stale shard */
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  /* Aggregate 1: both records in the low half.  Aggregate 2 (sent
   * later): one low, one high. */
  kn_pcore_add(c, msg_ehk("a", kn_u128_make(1, 0), 0));
  kn_pcore_add(c, msg_ehk("b", kn_u128_make(2, 0), 0));
  int64_t wake;
  kn_pbatch_t *b1 = kn_pcore_take(c, 0, 1, &wake, &done);
  kn_pcore_add(c, msg_ehk("c", kn_u128_make(3, 0), 0));
  kn_pcore_add(c, msg_ehk("d", max_key(), 0));
  kn_pbatch_t *b2 = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK(b1 && b1->n == 1 && b1->e[0].aggregated);
  KT_CHECK(b2 && b2->n == 1 && b2->e[0].aggregated);
  if (!b1 || !b2) { /* out of memory: give back what was taken */
    done_ok(c, b1, NULL, NULL, 0, &done);
    done_ok(c, b2, NULL, NULL, 0, &done);
    free_list(&done);
    kn_pcore_destroy(c, NULL);
    return;
  }
  KT_CHECK_INT(done_ok(c, b1, "shardId-000000000001", NULL, 0, &done),
               KN_PCORE_REFRESH);
  KT_CHECK_INT(done_ok(c, b2, "shardId-000000000001", NULL, 0, &done),
               KN_PCORE_REFRESH);
  KT_CHECK_INT(done.n, 0);
  /* The stale shard is held until the map comes. */
  kn_pcore_add(c, msg_ehk("e", kn_u128_make(4, 0), 0));
  KT_CHECK(none_taken(c, 0, 1, &wake, &done));
  KT_CHECK_INT(kn_pcore_set_map(c, split_of_one(), 1, 0, &done), 0);
  /* Aggregate 1 was where it belongs; aggregate 2 is sent again. */
  KT_CHECK_INT(done.n, 2);
  KT_CHECK_STR(head_of(&done)->key, "a");
  KT_CHECK_STR(head_of(&done)->shard_id, "shardId-000000000001");
  KT_CHECK_INT(head_of(&done)->subseq, 0);
  KT_CHECK_INT(done.tail ? (long long)done.tail->subseq : -1, 1);
  free_list(&done);
  kn_pbatch_t *b3 = kn_pcore_take(c, 1 * SEC, 1, &wake, &done);
  KT_CHECK(b3 != NULL);
  if (b3) {
    KT_CHECK_INT(b3->n_msgs, 3); /* c and e low, d high */
    KT_CHECK_INT(b3->n, 2);
    KT_CHECK_STR(b3->e[0].msgs.head->key, "c");
    done_ok(c, b3, NULL, NULL, 1 * SEC, &done);
  }
  KT_CHECK_INT(done.n, 3);
  for (kn_msg_t *m = done.head; m; m = m->next)
    KT_CHECK_STR(m->shard_id, strcmp(m->key, "d") ? "shardId-000000000001"
                                                  : "shardId-000000000002");
  free_list(&done);
  kn_pcore_destroy(c, NULL);

  /* Plain records: where the service put it is where it belongs. */
  cfg.aggregate = 0;
  c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  kn_pcore_add(c, msg_ehk("a", max_key(), 0));
  b1 = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK_INT(done_ok(c, b1, "shardId-000000000002", NULL, 0, &done),
               KN_PCORE_REFRESH);
  KT_CHECK_INT(done.n, 1);
  KT_CHECK_STR(head_of(&done)->shard_id, "shardId-000000000002");
  free_list(&done);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

/* ---- what the stream says of itself ---- */

/* A stream of 10 MiB records: calls of up to 10 MiB, a record bigger than
 * an aggregate goes out alone, next to the aggregates. */
static void test_large_records(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  cfg.aggregate = 1;
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  KT_CHECK_INT(kn_pcore_set_stream(c, KN_PUT_RECORD_MAX_LARGE, 0), 0);
  size_t len = 3 * 1024 * 1024;
  char *big = calloc(1, len);
  for (int i = 0; i < 5; i++) {
    char key[8];
    snprintf(key, sizeof(key), "b%d", i);
    kn_pcore_add(c, msg_at(key, big, len, 0));
    kn_pcore_add(c, msg_at("small", "s", 1, 0));
  }
  int64_t wake;
  size_t calls = 0, big_entries = 0;
  for (kn_pbatch_t *b; (b = kn_pcore_take(c, 0, 1, &wake, &done));) {
    calls++;
    KT_CHECK(b->bytes <= KN_PUT_MAX_BYTES_LARGE);
    for (size_t i = 0; i < b->n; i++)
      big_entries += b->e[i].msgs.n == 1 && !b->e[i].aggregated &&
                     b->e[i].msgs.head->len == len;
    done_ok(c, b, NULL, NULL, 0, &done);
  }
  KT_CHECK_INT(big_entries, 5);
  KT_CHECK_INT(calls, 2); /* three of 3 MiB fill a call of 10 MiB */
  KT_CHECK_INT(free_list(&done), 10);
  free(big);
  kn_pcore_destroy(c, NULL);
}

/* A stream whose service picks the shard (AUTO): no aggregates, a record
 * stored on another shard than predicted is no news, a record without a
 * key goes without PartitionKey. */
static void test_auto_distribution(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  cfg.aggregate = 1;
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(2), 1, 0, &done);
  KT_CHECK_INT(kn_pcore_set_stream(c, KN_PUT_RECORD_MAX, 1), 0);
  for (int i = 0; i < 10; i++) {
    char key[8];
    snprintf(key, sizeof(key), "k%d", i);
    kn_pcore_add(c, msg_at(key, "x", 1, 0));
  }
  kn_pcore_add(c, msg_at("", "y", 1, 0));
  int64_t wake;
  kn_pbatch_t *b = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_REQUIRE(b != NULL, free_list(&done), kn_pcore_destroy(c, NULL));
  KT_CHECK_INT(b->n, 11);
  KT_CHECK_INT(b->n_msgs, 11);
  json_t *recs = records_of(b);
  size_t keyless = 0;
  for (size_t i = 0; i < json_array_size(recs); i++)
    keyless += !json_object_get(json_array_get(recs, i), "PartitionKey");
  json_decref(recs);
  KT_CHECK_INT(keyless, 1);
  /* All stored on one shard, whatever was predicted. */
  KT_CHECK_INT(done_ok(c, b, "shardId-000000000001", NULL, 0, &done), 0);
  KT_CHECK_INT(done.n, 11);
  for (kn_msg_t *m = done.head; m; m = m->next)
    KT_CHECK_STR(m->shard_id, "shardId-000000000001");
  free_list(&done);
  /* Nothing is held. */
  kn_pcore_add(c, msg_at("k0", "z", 1, 0));
  b = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK(b != NULL);
  if (b) done_ok(c, b, "shardId-000000000000", NULL, 0, &done);
  KT_CHECK_INT(free_list(&done), 1);
  kn_pcore_destroy(c, NULL);
}

/* ---- strict order ---- */

static void test_strict(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  cfg.strict = 1;
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(1), 1, 0, &done);
  kn_pcore_add(c, msg_at("a", "1", 1, 0));
  kn_pcore_add(c, msg_at("b", "1", 1, 0));
  kn_pcore_add(c, msg_at("a", "2", 1, 0));
  int64_t wake;
  /* a1 and b1 go; a2 waits: its key is in the call. */
  kn_pbatch_t *b = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK(b && b->n == 2);
  /* One call per shard in flight. */
  KT_CHECK(none_taken(c, 0, 1, &wake, &done));
  done_ok(c, b, NULL, "10", 0, &done);
  KT_CHECK_INT(free_list(&done), 1);
  /* a1 again, then a2 in a later call. */
  b = kn_pcore_take(c, 1 * SEC, 1, &wake, &done);
  KT_CHECK(b && b->n == 1 && memcmp(b->e[0].msgs.head->data, "1", 1) == 0);
  done_ok(c, b, NULL, NULL, 1 * SEC, &done);
  b = kn_pcore_take(c, 1 * SEC, 1, &wake, &done);
  KT_CHECK(b && b->n == 1 && memcmp(b->e[0].msgs.head->data, "2", 1) == 0);
  done_ok(c, b, NULL, NULL, 1 * SEC, &done);
  KT_CHECK_INT(free_list(&done), 2);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

/* By default a shard has one call in flight: calls in flight together
 * could be stored in either order. */
static void test_one_call_per_shard(void) {
  kn_pcore_cfg_t cfg = base_cfg();
  kn_pcore_t *c = kn_pcore_new(&cfg, 0);
  KT_REQUIRE(c != NULL);
  kn_msg_list_t done = {0};
  kn_pcore_set_map(c, even_shards(2), 1, 0, &done);
  kn_pcore_add(c, msg_ehk("lo1", kn_u128_make(1, 0), 0));
  int64_t wake;
  kn_pbatch_t *b1 = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK(b1 && b1->n == 1);
  kn_pcore_add(c, msg_ehk("lo2", kn_u128_make(2, 0), 0));
  kn_pcore_add(c, msg_ehk("hi1", max_key(), 0));
  /* The other shard may go; the first waits for its answer. */
  kn_pbatch_t *b2 = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK(b2 && b2->n == 1);
  if (b2) KT_CHECK_STR(b2->e[0].msgs.head->key, "hi1");
  KT_CHECK(none_taken(c, 0, 1, &wake, &done));
  done_ok(c, b1, NULL, NULL, 0, &done);
  kn_pbatch_t *b3 = kn_pcore_take(c, 0, 1, &wake, &done);
  KT_CHECK(b3 && b3->n == 1);
  if (b3) KT_CHECK_STR(b3->e[0].msgs.head->key, "lo2");
  if (b2) done_ok(c, b2, NULL, NULL, 0, &done);
  if (b3) done_ok(c, b3, NULL, NULL, 0, &done);
  KT_CHECK_INT(free_list(&done), 3);
  free_list(&done); /* what an unexpected turn left there */
  kn_pcore_destroy(c, NULL);
}

int main(void) {
  KT_RUN(test_predict_even);
  KT_RUN(test_predict_split_merge);
  KT_RUN(test_core_reroute_on_split);
  KT_RUN(test_limits_records);
  KT_RUN(test_limits_bytes);
  KT_RUN(test_aggregation);
  KT_RUN(test_linger);
  KT_RUN(test_token_bucket_records);
  KT_RUN(test_token_bucket_bytes);
  KT_RUN(test_retry_failed_only_in_order);
  KT_RUN(test_ttl);
  KT_RUN(test_fatal_call_error);
  KT_RUN(test_wrong_shard);
  KT_RUN(test_strict);
  KT_RUN(test_one_call_per_shard);
  KT_RUN(test_large_records);
  KT_RUN(test_auto_distribution);
  return KT_DONE();
}
