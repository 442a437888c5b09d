/* The delivery queue: batches handed from the readers to kn_consumer_poll(),
 * one FIFO for all shards.  A shard's entries keep their order, and a
 * parent's last entry is queued before any child's first, so one FIFO
 * keeps per-key order across resharding. */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/shard_table.h"
#include "core/error.h"

void kn_delivery_push(kn_consumer_t *kc, kn_dentry_t *e) {
  e->next = NULL;
  if (kc->q_tail)
    kc->q_tail->next = e;
  else
    kc->q_head = e;
  kc->q_tail = e;
  kc->q_len++;
  e->cs->queued_entries++;
  if (e->batch) {
    e->cs->buffered_records += kn_batch_count(e->batch);
    e->cs->buffered_bytes += e->bytes;
  }
  pthread_cond_signal(&kc->poll_cv);
}

static void account_out(kn_consumer_t *kc, kn_dentry_t *e) {
  kn_cshard_t *cs = e->cs;
  cs->queued_entries--;
  if (e->batch) {
    cs->buffered_records -= kn_batch_count(e->batch);
    cs->buffered_bytes -= e->bytes;
    kc->total_bytes -= e->bytes;
  }
}

kn_dentry_t *kn_delivery_pop(kn_consumer_t *kc) {
  kn_dentry_t *e = kc->q_head;
  if (!e) return NULL;
  kc->q_head = e->next;
  if (!kc->q_head) kc->q_tail = NULL;
  kc->q_len--;
  account_out(kc, e);
  return e;
}

void kn_delivery_purge(kn_consumer_t *kc, kn_cshard_t *cs) {
  kn_dentry_t **pp = &kc->q_head, *prev = NULL;
  while (*pp) {
    kn_dentry_t *e = *pp;
    if (e->cs != cs) {
      prev = e;
      pp = &e->next;
      continue;
    }
    *pp = e->next;
    if (kc->q_tail == e) kc->q_tail = prev;
    kc->q_len--;
    account_out(kc, e);
    kn_batch_destroy(e->batch);
    free(e);
  }
  kn_readers_wake_locked(kc);
}

int kn_delivery_caught_up(kn_consumer_t *kc) {
  if (!kc->synced || kc->q_head || kn_control_pending(kc)) return 0;
  for (size_t i = 0; i < kc->n_shards; i++) {
    kn_cshard_t *cs = kc->shards[i];
    switch (cs->state) {
      case KN_CS_READING:
        if (!cs->caught_up) return 0;
        break;
      case KN_CS_ENDED:
        return 0; /* its end marker is still queued or being handled */
      case KN_CS_WAITING:
        /* A shard whose parents are finished is about to start. */
        if (kn_shard_table_parents_done(kc, cs)) return 0;
        break;
      default:
        break;
    }
  }
  return 1;
}

void kn_delivery_queue(kn_consumer_t *kc, kn_cshard_t *cs, kn_batch_t *b,
                       size_t bytes, int shard_end) {
  kn_dentry_t *e = NULL, *end = NULL;
  if (b) e = calloc(1, sizeof(*e));
  if (shard_end) end = calloc(1, sizeof(*end));
  pthread_mutex_lock(&kc->mu);
  if (b && e) {
    e->cs = cs;
    e->batch = b;
    e->bytes = bytes;
    kc->total_bytes += bytes;
    kn_delivery_push(kc, e);
    b = NULL;
    e = NULL;
  }
  if (shard_end && end) {
    end->cs = cs;
    cs->state = KN_CS_ENDED;
    kn_delivery_push(kc, end);
    end = NULL;
  }
  if (b) {
    /* Out of memory: the batch cannot be queued.  Delivering later batches
     * of the shard would skip it, so the consumer stops here; nothing past
     * what was delivered gets checkpointed. */
    if (!kc->fatal)
      kc->fatal = kn_error_new(KN_ERR__NOMEM,
                               "shard %s: out of memory "
                               "queueing %zu records",
                               cs->id, kn_batch_count(b));
    pthread_cond_broadcast(&kc->poll_cv);
  }
  pthread_mutex_unlock(&kc->mu);
  kn_batch_destroy(b);
  free(e);
  free(end);
}

/* ---- room for the readers ---- */

void kn_reader_wake_locked(kn_consumer_t *kc, kn_cshard_t *cs) {
  if (!cs->paused || (!cs->reader && !cs->efo_reader)) return;
  /* Resume once half the room is free, not at the first byte, so a full
   * shard alternates between large responses rather than tiny ones. */
  if (cs->buffered_records > kc->cfg.max_records / 2 ||
      cs->buffered_bytes > kc->cfg.max_bytes / 2 ||
      kc->total_bytes > kc->cfg.max_total_bytes / 2)
    return;
  cs->paused = 0;
  kc->n_paused--;
  kc->readers->resume_locked(kc, cs);
}

void kn_readers_wake_locked(kn_consumer_t *kc) {
  if (kc->n_paused == 0 || kc->total_bytes > kc->cfg.max_total_bytes / 2 ||
      kc->n_shards == 0)
    return;
  /* The first reader woken takes room first: start after the one that
   * was first last time, so that no shard waits behind the others for
   * ever. */
  size_t n = kc->n_shards, start = kc->wake_next % n;
  int first = 1;
  for (size_t k = 0; k < n && kc->n_paused > 0; k++) {
    kn_cshard_t *cs = kc->shards[(start + k) % n];
    int was_paused = cs->paused;
    kn_reader_wake_locked(kc, cs);
    if (first && was_paused && !cs->paused) {
      kc->wake_next = (start + k + 1) % n;
      first = 0;
    }
  }
}
