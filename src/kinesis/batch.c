#include "kinesis/batch.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kinesis/shard.h"

/* Owned memory of a batch: either an adopted allocation or an arena whose
 * bytes follow the header. */
struct kn_batch_block {
  struct kn_batch_block *next;
  void *adopted; /* freed with the block, or NULL for an arena */
  size_t used, cap;
};

#define BLOCK_ALIGN 8u
#define BLOCK_HDR                                      \
  ((sizeof(struct kn_batch_block) + BLOCK_ALIGN - 1) & \
   ~(size_t)(BLOCK_ALIGN - 1))
#define ARENA_MIN 4096u

static char *block_data(struct kn_batch_block *bl) {
  return (char *)bl + BLOCK_HDR;
}

kn_batch_t *kn_batch_new(const char *stream, const char *shard_id) {
  kn_batch_t *b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->millis_behind = -1;
  if ((stream && !(b->stream = strdup(stream))) ||
      (shard_id && !(b->shard_id = strdup(shard_id)))) {
    kn_batch_destroy(b);
    return NULL;
  }
  return b;
}

kn_record_t *kn_batch_push(kn_batch_t *b) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    kn_record_t *r = realloc(b->recs, cap * sizeof(*r));
    if (!r) return NULL;
    b->recs = r;
    b->cap = cap;
  }
  kn_record_t *r = &b->recs[b->n++];
  memset(r, 0, sizeof(*r));
  r->batch = b;
  return r;
}

int kn_batch_adopt(kn_batch_t *b, void *block) {
  struct kn_batch_block *bl = malloc(sizeof(*bl));
  if (!bl) return -1;
  bl->adopted = block;
  bl->used = bl->cap = 0;
  /* Behind the head, so that an arena with room stays first in line. */
  if (b->blocks) {
    bl->next = b->blocks->next;
    b->blocks->next = bl;
  } else {
    bl->next = NULL;
    b->blocks = bl;
  }
  return 0;
}

void *kn_batch_alloc(kn_batch_t *b, size_t n) {
  n = (n + BLOCK_ALIGN - 1) & ~(size_t)(BLOCK_ALIGN - 1);
  struct kn_batch_block *bl = b->blocks;
  if (!bl || bl->adopted || bl->cap - bl->used < n) {
    if (n > SIZE_MAX - BLOCK_HDR - ARENA_MIN) return NULL;
    size_t cap = n > ARENA_MIN ? n : ARENA_MIN;
    bl = malloc(BLOCK_HDR + cap);
    if (!bl) return NULL;
    bl->adopted = NULL;
    bl->used = 0;
    bl->cap = cap;
    bl->next = b->blocks;
    b->blocks = bl;
  }
  void *p = block_data(bl) + bl->used;
  bl->used += n;
  return p;
}

char *kn_batch_strndup(kn_batch_t *b, const char *s, size_t n) {
  char *p = kn_batch_alloc(b, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void kn_batch_truncate(kn_batch_t *b, size_t n) {
  if (n >= b->n) return;
  for (size_t i = n; i < b->n; i++) b->bytes -= b->recs[i].len;
  b->n = n;
}

void kn_batch_destroy(kn_batch_t *b) {
  if (!b) return;
  struct kn_batch_block *bl = b->blocks;
  while (bl) {
    struct kn_batch_block *next = bl->next;
    free(bl->adopted);
    free(bl);
    bl = next;
  }
  free(b->recs);
  free(b->stream);
  free(b->shard_id);
  free(b->next_iterator);
  kn_shard_list_destroy(b->children);
  free(b);
}

/* ---- Public accessors (include/kn/record.h, include/kn/client.h) ---- */

const void *kn_record_data(const kn_record_t *r, size_t *len) {
  if (len) *len = r->len;
  return r->data;
}
const char *kn_record_partition_key(const kn_record_t *r) { return r->pkey; }
const char *kn_record_explicit_hash_key(const kn_record_t *r) { return r->ehk; }
const char *kn_record_sequence_number(const kn_record_t *r) { return r->seq; }
uint64_t kn_record_subsequence_number(const kn_record_t *r) {
  return r->subseq;
}
int kn_record_is_aggregated(const kn_record_t *r) { return r->aggregated; }
int64_t kn_record_arrival_ms(const kn_record_t *r) { return r->arrival_ms; }
const char *kn_record_shard_id(const kn_record_t *r) {
  return r->batch ? r->batch->shard_id : NULL;
}

size_t kn_batch_count(const kn_batch_t *b) { return b ? b->n : 0; }
const kn_record_t *kn_batch_record(const kn_batch_t *b, size_t i) {
  return b && i < b->n ? &b->recs[i] : NULL;
}
const char *kn_batch_shard_id(const kn_batch_t *b) { return b->shard_id; }
const char *kn_batch_stream(const kn_batch_t *b) { return b->stream; }
int64_t kn_batch_millis_behind(const kn_batch_t *b) { return b->millis_behind; }
int kn_batch_shard_end(const kn_batch_t *b) { return b->shard_end; }
const char *kn_batch_next_iterator(const kn_batch_t *b) {
  return b->next_iterator;
}
const kn_shard_list_t *kn_batch_child_shards(const kn_batch_t *b) {
  return b->children;
}
