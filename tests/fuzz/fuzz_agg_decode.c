/* Fuzzes the aggregated record decoder (kn_agg_expand).
 *
 * The first input byte picks a mode.  Bit 0 wraps the rest in the magic
 * number and a fresh MD5, so that mutations reach the protobuf reader;
 * bit 1 turns the hash range check on (bit 3 picks a narrow or the whole
 * range); bit 2 sets a subsequence floor from the high nibble.
 *
 * Beyond the sanitizers, every run checks the result's invariants, and
 * with a fresh MD5 protobuf-c (generated from the published schema) must
 * agree: what one accepts the other accepts, with the same records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "agg/kpl_messages.pb-c.h"
#include "core/error.h"
#include "util/crypto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                              \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                   \
    }                                                            \
  } while (0)

/* Non-zero when protobuf-c reads the message and every index is inside
 * its table: what our decoder must accept too.  *out keeps the message. */
static int pbc_accepts(const uint8_t *pb, size_t n,
                       KnKpl__AggregatedRecord **out) {
  KnKpl__AggregatedRecord *ar = kn_kpl__aggregated_record__unpack(NULL, n, pb);
  *out = ar;
  if (!ar) return 0;
  for (size_t i = 0; i < ar->n_records; i++) {
    const KnKpl__Record *r = ar->records[i];
    if (r->partition_key_index >= ar->n_partition_key_table) return 0;
    if (r->has_explicit_hash_key_index &&
        r->explicit_hash_key_index >= ar->n_explicit_hash_key_table)
      return 0;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned mode = data[0];
  data++;
  size--;

  /* The decoder gets exactly the input's bytes, in a block of their own, so
   * that any read past the end is caught. */
  uint8_t *in = malloc(size + KN_AGG_OVERHEAD);
  size_t len = size;
  if (mode & 1) {
    memcpy(in, KN_AGG_MAGIC, KN_AGG_MAGIC_LEN);
    if (size) memcpy(in + KN_AGG_MAGIC_LEN, data, size);
    kn_md5(data, size, in + KN_AGG_MAGIC_LEN + size);
    len = size + KN_AGG_OVERHEAD;
  } else if (size) {
    memcpy(in, data, size);
  }

  kn_agg_filter_t f = {.subseq_floor = -1};
  if (mode & 2) {
    f.check_range = 1;
    f.range_end = kn_u128_make(UINT64_MAX, UINT64_MAX);
    if (mode & 8) { /* the middle half */
      f.range_start = kn_u128_make(0x40ull << 56, 0);
      f.range_end =
          kn_u128_make(0xbfull << 56 | ((1ull << 56) - 1), UINT64_MAX);
    }
  }
  if (mode & 4) f.subseq_floor = mode >> 4;

  kn_batch_t *b = kn_batch_new(NULL, NULL);
  CHECK(b);
  const char *seq = "49590338271490256608559692538361571095921575989136588898";
  kn_agg_result_t res;
  kn_error_t *e = NULL;
  /* The decoder overwrites what it expands: keep the bytes to compare. */
  uint8_t *orig = malloc(len ? len : 1);
  CHECK(orig);
  if (len) memcpy(orig, in, len);
  kn_err_t err = kn_agg_expand(b, in, len, seq, 42, &f, &res, &e);
  /* Unless user records were added, the input is left as it was. */
  if (err || !res.aggregated || res.n_added == 0)
    CHECK(len == 0 || memcmp(in, orig, len) == 0);

  CHECK(err == KN_ERR_NO_ERROR || err == KN_ERR__CORRUPT ||
        err == KN_ERR__NOMEM);
  if (err) {
    CHECK(b->n == 0 && b->bytes == 0);
    CHECK(!e || (kn_error_code(e) == err && kn_error_string(e)[0]));
  } else {
    CHECK(e == NULL);
    CHECK(res.aggregated == kn_agg_has_magic(orig, len));
    CHECK(res.n_added == b->n);
    if (res.out_of_range)
      CHECK(b->n == 0 && f.check_range);
    else
      CHECK(res.n_added + res.n_below_floor == res.n_user);
    size_t bytes = 0;
    for (size_t i = 0; i < b->n; i++) {
      const kn_record_t *r = &b->recs[i];
      /* Payloads and keys are copied back into the input itself. */
      CHECK(r->data != NULL);
      CHECK((const uint8_t *)r->data >= in &&
            (const uint8_t *)r->data + r->len <= in + len);
      CHECK((const uint8_t *)r->pkey >= in &&
            (const uint8_t *)r->pkey + strlen(r->pkey) < in + len);
      CHECK(!r->ehk || ((const uint8_t *)r->ehk >= in &&
                        (const uint8_t *)r->ehk + strlen(r->ehk) < in + len));
      CHECK(r->pkey && r->seq == seq && r->aggregated == 1 &&
            r->arrival_ms == 42);
      CHECK(r->subseq < res.n_user);
      CHECK((int64_t)r->subseq > f.subseq_floor);
      CHECK(i == 0 || r->subseq == b->recs[i - 1].subseq + 1);
      bytes += r->len;
    }
    CHECK(bytes == b->bytes);
    /* Read every record (the sanitizer catches any byte outside the
     * input's block). */
    size_t sum = 0;
    for (size_t i = 0; i < b->n; i++) {
      const kn_record_t *r = &b->recs[i];
      for (size_t j = 0; j < r->len; j++) sum += (uint8_t)r->data[j];
      sum += strlen(r->pkey) + (r->ehk ? strlen(r->ehk) : 0);
    }
    (void)sum;
  }

  /* With a fresh MD5 the envelope is right, and the verdict is the
   * protobuf's alone: compare with protobuf-c.  (An empty message is
   * refused by rule, as the KCL does; an explicit hash key that is not a
   * number is refused only under the range check.) */
  if ((mode & 1) && size > 0 && err != KN_ERR__NOMEM) {
    KnKpl__AggregatedRecord *ar;
    int ok = pbc_accepts(data, size, &ar);
    /* protobuf-c takes field number 0 when its tag is written in more
     * than one byte; protobuf (and the KCL's Java parser) refuse it. */
    int field0 = err && e && strstr(kn_error_string(e), "invalid field number");
    /* A partition key over the service's bounds (256 characters, 1,024
     * bytes) is refused by rule, where protobuf-c takes it. */
    int long_key = 0;
    for (size_t k = 0; ok && k < ar->n_partition_key_table; k++) {
      const char *key = ar->partition_key_table[k];
      size_t n = strlen(key), chars = 0;
      for (size_t i = 0; i < n; i++) chars += ((uint8_t)key[i] & 0xC0) != 0x80;
      if (n > KN_AGG_KEY_MAX_BYTES || chars > KN_AGG_KEY_MAX_CHARS)
        long_key = 1;
    }
    if (long_key) CHECK(err != KN_ERR_NO_ERROR);
    if (!f.check_range && !field0 && !long_key)
      CHECK(ok == (err == KN_ERR_NO_ERROR));
    if (ok && !err) {
      CHECK(res.n_user == ar->n_records);
      for (size_t i = 0; i < b->n; i++) {
        const kn_record_t *r = &b->recs[i];
        const KnKpl__Record *pr = ar->records[r->subseq];
        CHECK(strcmp(r->pkey,
                     ar->partition_key_table[pr->partition_key_index]) == 0);
        CHECK(!r->ehk == !pr->has_explicit_hash_key_index);
        if (r->ehk)
          CHECK(strcmp(
                    r->ehk,
                    ar->explicit_hash_key_table[pr->explicit_hash_key_index]) ==
                0);
        CHECK(r->len == pr->data.len);
        CHECK(r->len == 0 || memcmp(r->data, pr->data.data, r->len) == 0);
      }
    }
    if (ar) kn_kpl__aggregated_record__free_unpacked(ar, NULL);
  }

  kn_error_destroy(e);
  kn_batch_destroy(b);
  free(in);
  free(orig);
  return 0;
}
