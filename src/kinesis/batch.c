/* kn_batch_t: a growable array of records plus an arena that owns every
 * byte they point at.  The arena is a list of blocks: small allocations are
 * carved from the newest block, large ones and adopted buffers get a block
 * of their own, so nothing ever moves once handed out. */
#include "kinesis/batch.h"

#include <stdlib.h>
#include <string.h>

#include "util/str.h"

#define BLOCK_SIZE (64 * 1024)

struct kn_batch_block {
  struct kn_batch_block *next;
  size_t used, cap;
  void *adopted; /* a caller's malloc'ed buffer, or NULL */
  /* Keeps data[] aligned for any 8-byte type. */
  _Alignas(16) unsigned char data[];
};

kn_batch_t *kn_batch_new(const char *stream, const char *shard_id) {
  kn_batch_t *b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->millis_behind = -1;
  if ((stream && !(b->stream = kn_strdup0(stream))) ||
      (shard_id && !(b->shard_id = kn_strdup0(shard_id)))) {
    kn_batch_destroy(b);
    return NULL;
  }
  return b;
}

kn_record_t *kn_batch_push(kn_batch_t *b) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    kn_record_t *recs = realloc(b->recs, cap * sizeof(*recs));
    if (!recs) return NULL;
    b->recs = recs;
    b->cap = cap;
  }
  kn_record_t *r = &b->recs[b->n++];
  memset(r, 0, sizeof(*r));
  r->batch = b;
  return r;
}

/* Links blk at the head (it becomes the block to carve from), or right
 * behind the head so the head's free space stays usable. */
static void block_link(kn_batch_t *b, struct kn_batch_block *blk, int behind) {
  if (behind && b->blocks) {
    blk->next = b->blocks->next;
    b->blocks->next = blk;
  } else {
    blk->next = b->blocks;
    b->blocks = blk;
  }
}

static struct kn_batch_block *block_new(size_t cap) {
  struct kn_batch_block *blk = malloc(sizeof(*blk) + cap);
  if (!blk) return NULL;
  blk->next = NULL;
  blk->used = 0;
  blk->cap = cap;
  blk->adopted = NULL;
  return blk;
}

int kn_batch_adopt(kn_batch_t *b, void *block) {
  struct kn_batch_block *blk = block_new(0);
  if (!blk) return -1;
  blk->adopted = block;
  block_link(b, blk, 1);
  return 0;
}

void *kn_batch_alloc(kn_batch_t *b, size_t n) {
  size_t need = (n + 7) & ~(size_t)7;
  if (need < n) return NULL;
  struct kn_batch_block *blk = b->blocks;
  if (blk && blk->cap - blk->used >= need) {
    void *p = blk->data + blk->used;
    blk->used += need;
    return p;
  }
  /* A large request gets a block of its own behind the head. */
  int big = need > BLOCK_SIZE / 4;
  blk = block_new(big ? need : BLOCK_SIZE);
  if (!blk) return NULL;
  block_link(b, blk, big);
  blk->used = need;
  return blk->data;
}

char *kn_batch_strndup(kn_batch_t *b, const char *s, size_t n) {
  char *p = kn_batch_alloc(b, n + 1);
  if (!p) return NULL;
  if (n) memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void kn_batch_truncate(kn_batch_t *b, size_t n) {
  for (size_t i = n; i < b->n; i++) b->bytes -= b->recs[i].len;
  if (n < b->n) b->n = n;
}

void kn_batch_destroy(kn_batch_t *b) {
  if (!b) return;
  struct kn_batch_block *blk = b->blocks;
  while (blk) {
    struct kn_batch_block *next = blk->next;
    free(blk->adopted);
    free(blk);
    blk = next;
  }
  /* children: shard lists have no implementation on this branch yet, and
   * nothing here sets the field; it is freed where kn_shard_list_t lives. */
  free(b->recs);
  free(b->stream);
  free(b->shard_id);
  free(b->next_iterator);
  free(b);
}
