/* Batches: record storage, owned memory, accessors. */
#include <stdlib.h>

#include "kinesis/batch.h"
#include "kinesis/shard.h"
#include "kt.h"

static void test_push_and_access(void) {
  kn_batch_t *b = kn_batch_new("stream-a", "shardId-000000000001");
  KT_CHECK(b != NULL);
  KT_CHECK_STR(kn_batch_stream(b), "stream-a");
  KT_CHECK_STR(kn_batch_shard_id(b), "shardId-000000000001");
  KT_CHECK_INT(kn_batch_millis_behind(b), -1);
  KT_CHECK_INT(kn_batch_count(b), 0);
  KT_CHECK(kn_batch_record(b, 0) == NULL);
  for (int i = 0; i < 1000; i++) {
    kn_record_t *r = kn_batch_push(b);
    KT_REQUIRE(r != NULL, kn_batch_destroy(b));
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "key-%d", i);
    r->pkey = kn_batch_strndup(b, tmp, (size_t)n);
    r->seq = kn_batch_strndup(
        b, "49590338271490256608559692538361571095921575989136588898", 56);
    char *d = kn_batch_alloc(b, (size_t)i);
    KT_REQUIRE(r->pkey && r->seq && d, kn_batch_destroy(b));
    for (int k = 0; k < i; k++) d[k] = (char)(k ^ i);
    r->data = d;
    r->len = (size_t)i;
    r->subseq = (uint64_t)i;
    r->arrival_ms = 1700000000000 + i;
    b->bytes += r->len;
  }
  KT_CHECK_INT(kn_batch_count(b), 1000);
  int bad = 0;
  for (int i = 0; i < 1000; i++) {
    const kn_record_t *r = kn_batch_record(b, (size_t)i);
    char tmp[32];
    snprintf(tmp, sizeof tmp, "key-%d", i);
    size_t len;
    const unsigned char *d = kn_record_data(r, &len);
    if (strcmp(kn_record_partition_key(r), tmp) || len != (size_t)i) bad++;
    for (size_t k = 0; k < len; k++)
      if (d[k] != (unsigned char)((int)k ^ i)) bad++;
    if (kn_record_subsequence_number(r) != (uint64_t)i) bad++;
    if (kn_record_arrival_ms(r) != 1700000000000 + i) bad++;
    if (strcmp(kn_record_shard_id(r), "shardId-000000000001")) bad++;
    if (kn_record_is_aggregated(r) || kn_record_explicit_hash_key(r)) bad++;
    if (((uintptr_t)d & 7) != 0) bad++; /* arena blocks are aligned */
  }
  KT_CHECK_INT(bad, 0);
  KT_CHECK_INT(b->bytes, 999 * 1000 / 2);
  kn_batch_truncate(b, 10);
  KT_CHECK_INT(kn_batch_count(b), 10);
  KT_CHECK_INT(b->bytes, 45);
  kn_batch_truncate(b, 20); /* growing is not truncating */
  KT_CHECK_INT(kn_batch_count(b), 10);
  size_t len = 99;
  KT_CHECK(kn_record_data(kn_batch_record(b, 0), &len) != NULL || len == 0);
  kn_batch_destroy(b);
}

static void test_adopt_and_big_alloc(void) {
  kn_batch_t *b = kn_batch_new(NULL, NULL);
  KT_CHECK(b && kn_batch_stream(b) == NULL && kn_batch_shard_id(b) == NULL);
  char *small = kn_batch_alloc(b, 10);
  KT_CHECK(kn_batch_adopt(b, strdup("adopted body")) == 0);
  /* The arena stays usable after an adoption. */
  char *small2 = kn_batch_alloc(b, 10);
  KT_CHECK(small && small2 && small2 == small + 16);
  char *big = kn_batch_alloc(b, 1 << 20);
  KT_REQUIRE(big != NULL, kn_batch_destroy(b));
  memset(big, 1, 1 << 20);
  KT_CHECK(kn_batch_adopt(b, malloc(100)) == 0);
  KT_CHECK(kn_batch_adopt(b, NULL) == 0);
  KT_CHECK(kn_batch_alloc(b, SIZE_MAX - 8) == NULL);
  b->next_iterator = strdup("iter");
  b->children = kn_shard_list_new();
  b->shard_end = 0;
  KT_CHECK_STR(kn_batch_next_iterator(b), "iter");
  KT_CHECK(kn_batch_child_shards(b) != NULL);
  KT_CHECK(!kn_batch_shard_end(b));
  kn_batch_destroy(b);
  kn_batch_destroy(NULL);
  KT_CHECK_INT(kn_batch_count(NULL), 0);
}

int main(void) {
  KT_RUN(test_push_and_access);
  KT_RUN(test_adopt_and_big_alloc);
  return KT_DONE();
}
