/* Internal layout of kn_record_t and kn_batch_t (include/kn/record.h).
 *
 * A batch owns every byte its records point at: response bodies decoded in
 * place and arena blocks are adopted by the batch and freed with it. */
#ifndef KN_KINESIS_BATCH_H
#define KN_KINESIS_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "kn/record.h"

struct kn_record_s {
  const char *data;
  size_t len;
  const char *pkey; /* NUL-terminated; "" for a record without a key */
  const char *ehk;  /* explicit hash key (aggregates only), or NULL */
  const char *seq;  /* NUL-terminated decimal */
  uint64_t subseq;
  int64_t arrival_ms;
  const kn_batch_t *batch;
  uint8_t aggregated;
};

struct kn_batch_block;

struct kn_batch_s {
  kn_record_t *recs;
  size_t n, cap;
  struct kn_batch_block *blocks; /* owned memory, freed at destroy */
  char *stream;                  /* owned, may be NULL */
  char *shard_id;                /* owned, may be NULL */
  char *next_iterator;           /* owned, NULL at the end of a shard */
  kn_shard_list_t *children;     /* owned, NULL when not reported */
  int64_t millis_behind;         /* -1 unknown */
  int shard_end;
  size_t bytes;     /* sum of record payload lengths */
  void *owner_data; /* for the consumer's bookkeeping */
};

/* NULL on out-of-memory.  stream and shard_id are copied (may be NULL). */
kn_batch_t *kn_batch_new(const char *stream, const char *shard_id);
/* A new zeroed record at the end (its batch pointer set), or NULL on
 * out-of-memory.  Pointers to earlier records may move: use indexes
 * while filling. */
kn_record_t *kn_batch_push(kn_batch_t *b);
/* Takes ownership of a malloc'ed block, freed with the batch. */
int kn_batch_adopt(kn_batch_t *b, void *block);
/* n bytes owned by the batch (8-byte aligned), or NULL. */
void *kn_batch_alloc(kn_batch_t *b, size_t n);
char *kn_batch_strndup(kn_batch_t *b, const char *s, size_t n);
/* Drops records [from, n) (used when filtering); memory stays owned. */
void kn_batch_truncate(kn_batch_t *b, size_t n);

#endif
