#include "producer/msg.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

kn_presp_t *kn_presp_new(kn_put_results_t *res) {
  kn_presp_t *p = malloc(sizeof(*p));
  if (!p) {
    kn_put_results_destroy(res);
    return NULL;
  }
  p->res = res;
  atomic_init(&p->refs, 1);
  return p;
}

void kn_presp_ref(kn_presp_t *p) {
  atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void kn_presp_release(kn_presp_t *p) {
  if (!p) return;
  if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
    kn_put_results_destroy(p->res);
    free(p);
  }
}

kn_msg_t *kn_msg_new(const char *key, size_t key_len, const char *ehk,
                     size_t ehk_len, const void *data, size_t len, int flags,
                     void *opaque) {
  int copy = !(flags & (KN_MSG_F_NOCOPY | KN_MSG_F_FREE));
  size_t extra = key_len + 1 + (ehk ? ehk_len + 1 : 0) + (copy ? len : 0);
  kn_msg_t *m = malloc(sizeof(*m) + extra);
  if (!m) return NULL;
  memset(m, 0, sizeof(*m));
  char *p = (char *)(m + 1);
  memcpy(p, key, key_len);
  p[key_len] = '\0';
  m->key = p;
  m->key_len = key_len;
  p += key_len + 1;
  if (ehk) {
    memcpy(p, ehk, ehk_len);
    p[ehk_len] = '\0';
    m->ehk = p;
    m->ehk_len = ehk_len;
    p += ehk_len + 1;
  }
  if (copy) {
    if (len) memcpy(p, data, len);
    m->data = p;
  } else {
    m->data = data;
  }
  m->len = len;
  m->flags = flags;
  m->opaque = opaque;
  return m;
}

void kn_msg_free(kn_msg_t *m) {
  if (!m) return;
  kn_presp_release(m->resp);
  kn_error_destroy(m->err);
  if (m->flags & KN_MSG_F_FREE) free((void *)m->data);
  free(m);
}

/* ---- the public accessors of a delivery report ---- */

const kn_error_t *kn_msg_error(const kn_msg_t *m) {
  /* A failure whose error could not be allocated. */
  static const kn_error_t nomem = {KN_ERR__NOMEM,          0, 0, 0, NULL, NULL,
                                   (char *)"out of memory"};
  if (!m->err && !m->shard_id) return &nomem;
  return m->err;
}
const char *kn_msg_shard_id(const kn_msg_t *m) { return m->shard_id; }
const char *kn_msg_sequence_number(const kn_msg_t *m) { return m->seq; }
uint64_t kn_msg_subsequence_number(const kn_msg_t *m) { return m->subseq; }
int kn_msg_aggregated(const kn_msg_t *m) { return m->aggregated; }
const char *kn_msg_partition_key(const kn_msg_t *m) { return m->key; }
const char *kn_msg_explicit_hash_key(const kn_msg_t *m) { return m->ehk; }
const void *kn_msg_data(const kn_msg_t *m, size_t *len) {
  if (len) *len = m->len;
  return m->data;
}
int kn_msg_attempts(const kn_msg_t *m) { return m->attempts; }
void *kn_msg_opaque(const kn_msg_t *m) { return m->opaque; }
