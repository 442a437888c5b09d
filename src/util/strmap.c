/* String-keyed pointer map (strmap.h). */
#include "util/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_of(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  /* The low bits index the table; FNV-1a's low bits depend only on the low
   * bits of the characters (shard ids differ in their last digits): mix
   * the high bits in (a 64-bit finalizer). */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

static kn_strmap_slot_t *slot_for(const kn_strmap_slot_t *slots, size_t cap,
                                  const char *key, uint64_t h) {
  size_t i = (size_t)h & (cap - 1);
  while (slots[i].key && (slots[i].hash != h || strcmp(slots[i].key, key) != 0))
    i = (i + 1) & (cap - 1);
  return (kn_strmap_slot_t *)&slots[i];
}

void kn_strmap_free(kn_strmap_t *m) {
  free(m->slots);
  m->slots = NULL;
  m->cap = m->n = 0;
}

void *kn_strmap_get(const kn_strmap_t *m, const char *key) {
  if (!m->cap) return NULL;
  kn_strmap_slot_t *s = slot_for(m->slots, m->cap, key, hash_of(key));
  return s->key ? s->val : NULL;
}

static int grow(kn_strmap_t *m) {
  size_t cap = m->cap ? m->cap * 2 : 16;
  kn_strmap_slot_t *slots = calloc(cap, sizeof(*slots));
  if (!slots) return -1;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key)
      *slot_for(slots, cap, m->slots[i].key, m->slots[i].hash) = m->slots[i];
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return 0;
}

int kn_strmap_put(kn_strmap_t *m, const char *key, void *val) {
  /* At most 3/4 full, so probes stay short and always end. */
  if ((m->n + 1) * 4 > m->cap * 3 && grow(m)) return -1;
  uint64_t h = hash_of(key);
  kn_strmap_slot_t *s = slot_for(m->slots, m->cap, key, h);
  if (!s->key) {
    s->key = key;
    s->hash = h;
    m->n++;
  }
  s->val = val;
  return 0;
}
