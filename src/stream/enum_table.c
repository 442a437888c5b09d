/* The enumerator's tables: finding shards and readers, queueing actions.
 * Below enumerator.c and enum_assign.c, which both use them. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "stream/enum_int.h"
#include "util/str.h"

long kn_enum_find_at(const kn_enumerator_t *en, const char *id, size_t *at) {
  int found;
  *at = kn_sorted_find(en->shards, en->n_shards, sizeof(eshard_t),
                       offsetof(eshard_t, id), id, &found);
  return found ? (long)*at : -1;
}

long kn_enum_reader_at(const kn_enumerator_t *en, const char *id, size_t *at) {
  int found;
  *at =
      kn_sorted_find(en->readers, en->n_readers, sizeof(char *), 0, id, &found);
  return found ? (long)*at : -1;
}

long kn_enum_find(const kn_enumerator_t *en, const char *id) {
  size_t at;
  return id ? kn_enum_find_at(en, id, &at) : -1;
}

long kn_enum_reader(const kn_enumerator_t *en, const char *id) {
  size_t at;
  return id ? kn_enum_reader_at(en, id, &at) : -1;
}

kn_err_t kn_enum_push(kn_enumerator_t *en, kn_enum_action_kind_t kind,
                      const eshard_t *s) {
  if (en->head && en->head == en->n_actions) en->head = en->n_actions = 0;
  if (en->n_actions == en->cap_actions) {
    size_t cap = en->cap_actions ? en->cap_actions * 2 : 8;
    kn_enum_action_t *v = realloc(en->actions, cap * sizeof(*v));
    if (!v) return KN_ERR__NOMEM;
    en->actions = v;
    en->cap_actions = cap;
  }
  kn_enum_action_t *a = &en->actions[en->n_actions++];
  memset(a, 0, sizeof(*a));
  a->kind = kind;
  strcpy(a->shard_id, s->id);
  if (s->reader) strcpy(a->reader_id, s->reader);
  a->start = s->pos;
  if (s->parent) strcpy(a->parents[0], s->parent);
  if (s->adj) strcpy(a->parents[1], s->adj);
  strcpy(a->hash_key_start, s->hk_start);
  strcpy(a->hash_key_end, s->hk_end);
  return KN_ERR_NO_ERROR;
}
