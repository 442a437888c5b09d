/* Fuzzes the aggregator: user records read from the input are aggregated
 * under a small size cap, every Kinesis record produced is decoded again
 * (and unpacked by protobuf-c when aggregated), and the user records must
 * come back as they went in, each aggregate within the cap.
 *
 * Input: one byte for the cap, then records: a key length byte (key bytes
 * follow; 0 ends the input), a flags byte (bit 0: an explicit hash key
 * from the next 16 bytes), a data length byte, the data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/kpl_messages.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                              \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                   \
    }                                                            \
  } while (0)

struct urec {
  const uint8_t *pk, *data;
  size_t pk_len, len;
  char ehk[KN_U128_DEC_BUFSZ]; /* "" for none */
};

/* Checks the Kinesis record in out against us[0..out->n_records). */
static void check_out(const kn_agg_out_t *out, const struct urec *us,
                      size_t cap) {
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  CHECK(b);
  if (!out->aggregated) {
    CHECK(out->n_records == 1);
    CHECK(out->len == us[0].len &&
          (!out->len || memcmp(out->data, us[0].data, out->len) == 0));
    CHECK(strlen(out->pkey) <= us[0].pk_len &&
          memcmp(out->pkey, us[0].pk, strlen(out->pkey)) == 0);
    CHECK(us[0].ehk[0] ? out->ehk && strcmp(out->ehk, us[0].ehk) == 0
                       : !out->ehk);
    kn_batch_destroy(b);
    return;
  }
  CHECK(out->n_records >= 2 && out->len <= cap);
  kn_agg_result_t res;
  /* The decoder writes over its input: give it a copy in a block of its
   * own, which the batch owns (any byte outside it is caught). */
  void *copy = malloc(out->len);
  CHECK(copy && kn_batch_adopt(b, copy) == 0);
  memcpy(copy, out->data, out->len);
  kn_err_t err = kn_agg_expand(b, copy, out->len, "1", 0, NULL, &res, NULL);
  CHECK(err == KN_ERR_NO_ERROR && res.aggregated && b->n == out->n_records);
  KnKpl__AggregatedRecord *ar = kn_kpl__aggregated_record__unpack(
      NULL, out->len - KN_AGG_OVERHEAD,
      (const uint8_t *)out->data + KN_AGG_MAGIC_LEN);
  CHECK(ar && ar->n_records == out->n_records);
  for (size_t i = 0; i < b->n; i++) {
    const kn_record_t *r = &b->recs[i];
    CHECK(r->len == us[i].len &&
          (!r->len || memcmp(r->data, us[i].data, r->len) == 0));
    /* Keys holding a NUL byte read as cut short there. */
    CHECK(strlen(r->pkey) <= us[i].pk_len &&
          memcmp(r->pkey, us[i].pk, strlen(r->pkey)) == 0);
    CHECK(us[i].ehk[0] ? r->ehk && strcmp(r->ehk, us[i].ehk) == 0 : !r->ehk);
    const KnKpl__Record *pr = ar->records[i];
    CHECK(pr->partition_key_index < ar->n_partition_key_table);
    CHECK(pr->data.len == us[i].len);
  }
  /* The aggregate goes where its first user record belongs. */
  kn_u128_t hk;
  char dec[KN_U128_DEC_BUFSZ];
  if (us[0].ehk[0])
    kn_u128_parse(us[0].ehk, strlen(us[0].ehk), &hk);
  else
    hk = kn_hashkey_of(us[0].pk, us[0].pk_len);
  kn_u128_format(hk, dec);
  CHECK(strcmp(out->pkey, "a") == 0 && strcmp(out->ehk, dec) == 0);
  kn_kpl__aggregated_record__free_unpacked(ar, NULL);
  kn_batch_destroy(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t cap = 64 + (size_t)data[0] * 8;
  const uint8_t *p = data + 1, *end = data + size;
  struct urec *us = calloc(size, sizeof(*us));
  size_t n = 0, first = 0;
  kn_aggregator_t *a = kn_aggregator_new(cap, 0);
  CHECK(us && a);

  for (;;) {
    struct urec u = {0};
    int done = 1;
    if (p < end && *p && (size_t)(end - p) > (size_t)*p + 2) {
      u.pk_len = *p++;
      u.pk = p;
      p += u.pk_len;
      uint8_t flags = *p++;
      if ((flags & 1) && end - p >= 16) {
        uint64_t hi = 0, lo = 0;
        for (int k = 0; k < 8; k++) {
          hi = hi << 8 | p[k];
          lo = lo << 8 | p[8 + k];
        }
        kn_u128_format(kn_u128_make(hi, lo), u.ehk);
        p += 16;
      }
      u.len = p < end ? *p++ : 0;
      if (u.len > (size_t)(end - p)) u.len = (size_t)(end - p);
      u.data = p;
      p += u.len;
      done = 0;
    }
    kn_err_t err = done ? KN_ERR__QUEUE_FULL
                        : kn_aggregator_add(a, (const char *)u.pk, u.pk_len,
                                            u.ehk[0] ? u.ehk : NULL,
                                            strlen(u.ehk), u.data, u.len);
    if (err == KN_ERR_NO_ERROR) {
      us[n++] = u;
      continue;
    }
    CHECK(err == KN_ERR__QUEUE_FULL);
    size_t count = kn_aggregator_count(a);
    if (count) {
      size_t announced = kn_aggregator_size(a);
      kn_agg_out_t out;
      CHECK(kn_aggregator_flush(a, &out) == KN_ERR_NO_ERROR);
      CHECK(out.n_records == count && n - first == count);
      CHECK(!out.aggregated || out.len == announced);
      check_out(&out, us + first, cap);
      first = n;
    }
    if (done) break;
    CHECK(kn_aggregator_add(a, (const char *)u.pk, u.pk_len,
                            u.ehk[0] ? u.ehk : NULL, strlen(u.ehk), u.data,
                            u.len) == KN_ERR_NO_ERROR);
    us[n++] = u;
  }
  CHECK(kn_aggregator_count(a) == 0);
  kn_aggregator_destroy(a);
  free(us);
  return 0;
}
