/* Fuzzes the in-place decoder of GetRecords responses and
 * SubscribeToShardEvent payloads: any input must be decoded or rejected
 * with KN_ERR__BAD_MSG, without reading outside the buffer; everything a
 * decoded batch points at must be readable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kinesis/batch.h"
#include "kinesis/decode_records.h"
#include "kinesis/seqnum.h"
#include "kinesis/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

static void touch(const kn_batch_t *b) {
  for (size_t i = 0; i < kn_batch_count(b); i++) {
    const kn_record_t *r = kn_batch_record(b, i);
    size_t len;
    const unsigned char *d = kn_record_data(r, &len);
    for (size_t k = 0; k < len; k++) sink += d[k];
    sink += (unsigned)strlen(kn_record_partition_key(r));
    const char *seq = kn_record_sequence_number(r);
    if (!kn_seqnum_valid(seq, strlen(seq))) abort();
  }
  if (kn_batch_next_iterator(b))
    sink += (unsigned)strlen(kn_batch_next_iterator(b));
  const kn_shard_list_t *c = kn_batch_child_shards(b);
  for (size_t i = 0; i < kn_shard_list_count(c); i++) {
    const kn_shard_t *s = kn_shard_list_get(c, i);
    sink += (unsigned)strlen(kn_shard_id(s)) +
            (unsigned)strlen(kn_shard_hash_key_end(s));
  }
}

static void one(const uint8_t *data, size_t size, kn_records_kind_t kind) {
  char *body = malloc(size + 1);
  if (!body) return;
  if (size) memcpy(body, data, size);
  body[size] = '\0';
  kn_batch_t *b = kn_batch_new("stream", "shardId-000000000000");
  if (!b || kn_batch_adopt(b, body)) {
    free(body);
    kn_batch_destroy(b);
    return;
  }
  const char *cont = NULL;
  kn_error_t *e = kn_decode_records(b, body, size, kind, &cont);
  if (e) {
    if (kn_error_code(e) != KN_ERR__BAD_MSG &&
        kn_error_code(e) != KN_ERR__NOMEM)
      abort();
  } else {
    touch(b);
    if (cont) sink += (unsigned)strlen(cont);
  }
  kn_error_destroy(e);
  kn_batch_destroy(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  one(data, size, KN_RECORDS_GET_RECORDS);
  one(data, size, KN_RECORDS_SUBSCRIBE_EVENT);
  return 0;
}
