#include "kinesis/shard.h"

#include <stdlib.h>
#include <string.h>

kn_shard_list_t *kn_shard_list_new(void) {
  return calloc(1, sizeof(kn_shard_list_t));
}

static void shard_clear(kn_shard_t *s) {
  free(s->id);
  free(s->parent);
  free(s->adjacent_parent);
  free(s->hk_start);
  free(s->hk_end);
  free(s->seq_start);
  free(s->seq_end);
}

static int dup_field(char **dst, const char *src) {
  *dst = NULL;
  if (!src) return 0;
  *dst = strdup(src);
  return *dst ? 0 : -1;
}

int kn_shard_list_add(kn_shard_list_t *l, const kn_shard_desc_t *d) {
  kn_shard_t s;
  memset(&s, 0, sizeof(s));
  if (!d->id || !*d->id || !d->hk_start || !d->hk_end) return -1;
  if (kn_u128_parse(d->hk_start, strlen(d->hk_start), &s.start) ||
      kn_u128_parse(d->hk_end, strlen(d->hk_end), &s.end))
    return -1;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    kn_shard_t *v = realloc(l->v, cap * sizeof(*v));
    if (!v) return -2;
    l->v = v;
    l->cap = cap;
  }
  if (dup_field(&s.id, d->id) || dup_field(&s.parent, d->parent) ||
      dup_field(&s.adjacent_parent, d->adjacent_parent) ||
      dup_field(&s.hk_start, d->hk_start) || dup_field(&s.hk_end, d->hk_end) ||
      dup_field(&s.seq_start, d->seq_start) ||
      dup_field(&s.seq_end, d->seq_end)) {
    shard_clear(&s);
    return -2;
  }
  l->v[l->n++] = s;
  return 0;
}

long kn_shard_list_index(const kn_shard_list_t *l, const char *id) {
  if (!l || !id) return -1;
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i].id, id) == 0) return (long)i;
  return -1;
}

kn_shard_list_t *kn_shard_list_dup(const kn_shard_list_t *l) {
  kn_shard_list_t *c = kn_shard_list_new();
  if (!c) return NULL;
  for (size_t i = 0; l && i < l->n; i++) {
    const kn_shard_t *s = &l->v[i];
    kn_shard_desc_t d = {s->id,       s->parent, s->adjacent_parent,
                         s->hk_start, s->hk_end, s->seq_start,
                         s->seq_end};
    if (kn_shard_list_add(c, &d)) {
      kn_shard_list_destroy(c);
      return NULL;
    }
  }
  return c;
}

size_t kn_shard_list_count(const kn_shard_list_t *l) { return l ? l->n : 0; }

const kn_shard_t *kn_shard_list_get(const kn_shard_list_t *l, size_t i) {
  return l && i < l->n ? &l->v[i] : NULL;
}

const kn_shard_t *kn_shard_list_find(const kn_shard_list_t *l,
                                     const char *shard_id) {
  long i = kn_shard_list_index(l, shard_id);
  return i < 0 ? NULL : &l->v[i];
}

void kn_shard_list_destroy(kn_shard_list_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) shard_clear(&l->v[i]);
  free(l->v);
  free(l);
}

const char *kn_shard_id(const kn_shard_t *s) { return s->id; }
const char *kn_shard_parent_id(const kn_shard_t *s) { return s->parent; }
const char *kn_shard_adjacent_parent_id(const kn_shard_t *s) {
  return s->adjacent_parent;
}
const char *kn_shard_hash_key_start(const kn_shard_t *s) { return s->hk_start; }
const char *kn_shard_hash_key_end(const kn_shard_t *s) { return s->hk_end; }
const char *kn_shard_sequence_start(const kn_shard_t *s) {
  return s->seq_start;
}
const char *kn_shard_sequence_end(const kn_shard_t *s) { return s->seq_end; }
int kn_shard_is_open(const kn_shard_t *s) { return s->seq_end == NULL; }
