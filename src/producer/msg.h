/* A record on its way through the producer, and the delivery report it
 * becomes (struct kn_msg_s of include/kn/producer.h).
 *
 * One allocation holds the struct, the partition key, the explicit hash
 * key and, unless sent with KN_MSG_F_NOCOPY or KN_MSG_F_FREE, the payload.
 * A message is on one list at a time (the producer's inbound queue, a
 * shard's queue, a PutRecords call, the delivery queue) through `next`,
 * and belongs to whoever holds that list. */
#ifndef KN_PRODUCER_MSG_H
#define KN_PRODUCER_MSG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kinesis/hashkey.h"
#include "kinesis/model.h"
#include "kn/producer.h"

/* A PutRecords answer shared by the reports of the records it stored: the
 * shard ids and sequence numbers point into it.  Released by the I/O
 * thread and the application's thread, hence the atomic count. */
typedef struct kn_presp {
  kn_put_results_t *res; /* owned */
  atomic_size_t refs;
} kn_presp_t;

/* Wraps res (taken, even on failure) with one reference; NULL on
 * out-of-memory. */
kn_presp_t *kn_presp_new(kn_put_results_t *res);
void kn_presp_ref(kn_presp_t *p);
/* Accepts NULL. */
void kn_presp_release(kn_presp_t *p);

struct kn_msg_s {
  kn_msg_t *next;
  const char *key; /* NUL-terminated, inside the allocation */
  const char *ehk; /* NUL-terminated, or NULL */
  const char *data;
  size_t len;
  size_t key_len, ehk_len;
  kn_u128_t hk;   /* where the record goes */
  int64_t enq_us; /* monotonic time of the send */
  int64_t deadline_us;
  void *opaque;
  int attempts;
  int flags;          /* KN_MSG_F_* */
  kn_err_t last_code; /* of the last failed attempt */
  /* The report. */
  uint8_t aggregated;
  kn_presp_t *resp; /* reference held while shard_id/seq point into it */
  const char *shard_id, *seq;
  uint64_t subseq;
  kn_error_t *err; /* owned; NULL when stored */
};

/* A new message with copies of key and ehk (NULL: none), and of data
 * unless flags say otherwise.  NULL on out-of-memory. */
kn_msg_t *kn_msg_new(const char *key, size_t key_len, const char *ehk,
                     size_t ehk_len, const void *data, size_t len, int flags,
                     void *opaque);
/* Frees m and what it owns (data too with KN_MSG_F_FREE).  Accepts NULL. */
void kn_msg_free(kn_msg_t *m);

/* Bytes a message counts against PutRecords and the queue limits. */
static inline size_t kn_msg_size(const kn_msg_t *m) {
  return m->len + m->key_len;
}

/* A FIFO of messages. */
typedef struct kn_msg_list {
  kn_msg_t *head, *tail;
  size_t n;
} kn_msg_list_t;

static inline void kn_msg_list_push(kn_msg_list_t *l, kn_msg_t *m) {
  m->next = NULL;
  if (l->tail)
    l->tail->next = m;
  else
    l->head = m;
  l->tail = m;
  l->n++;
}

static inline kn_msg_t *kn_msg_list_pop(kn_msg_list_t *l) {
  kn_msg_t *m = l->head;
  if (m) {
    l->head = m->next;
    if (!l->head) l->tail = NULL;
    m->next = NULL;
    l->n--;
  }
  return m;
}

/* Appends all of src to dst and empties src. */
static inline void kn_msg_list_concat(kn_msg_list_t *dst, kn_msg_list_t *src) {
  if (!src->head) return;
  if (dst->tail)
    dst->tail->next = src->head;
  else
    dst->head = src->head;
  dst->tail = src->tail;
  dst->n += src->n;
  src->head = src->tail = NULL;
  src->n = 0;
}

#endif
