/* kn_enumerator_t: the shard graph and its events.  Pure: no clock, no
 * thread, no I/O (the listing is in enum_sync.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kinesis/shard.h"
#include "stream/enum_int.h"
#include "util/str.h"

#define ID_MAX (KN_ENUM_ID_MAX - 1)

/* Test builds of the simulator set KN_ENUM_MUTANT to break one rule on
 * purpose (tests/sim/README.md); 0 in the library. */
#ifndef KN_ENUM_MUTANT
#define KN_ENUM_MUTANT 0
#endif

static int valid_id(const char *id) {
  size_t n = id ? strlen(id) : 0;
  return n >= 1 && n <= ID_MAX;
}

kn_enumerator_t *kn_enumerator_new(const kn_position_t *initial,
                                   kn_assigner_t assigner) {
  kn_enumerator_t *en = calloc(1, sizeof(*en));
  if (!en) return NULL;
  if (initial)
    en->initial = *initial;
  else
    kn_position_trim_horizon(&en->initial);
  en->assigner = assigner;
  en->interval_ms = 10000;
  return en;
}

static void shard_free(eshard_t *s) {
  free(s->id);
  free(s->parent);
  free(s->adj);
  free(s->reader);
}

void kn_enumerator_destroy(kn_enumerator_t *en) {
  if (!en) return;
  for (size_t i = 0; i < en->n_shards; i++) shard_free(&en->shards[i]);
  free(en->shards);
  for (size_t i = 0; i < en->n_readers; i++) free(en->readers[i]);
  free(en->readers);
  free(en->actions);
  free(en);
}

void kn_enumerator_set_assign_fn(kn_enumerator_t *en, kn_assign_fn *fn,
                                 void *opaque) {
  en->assign_fn = fn;
  en->assign_opaque = opaque;
}

void kn_enumerator_set_sync_interval(kn_enumerator_t *en, int64_t interval_ms) {
  en->interval_ms = interval_ms > 0 ? interval_ms : 1;
}

/* Index of id in the sorted shards or readers, or -1; *at gets where it
 * would go. */

static char *dup_or_null(const char *s, int *oom) {
  if (!s || !*s) return NULL;
  char *d = strdup(s);
  if (!d) *oom = 1;
  return d;
}

long kn_enum_add(kn_enumerator_t *en, const char *id, const char *parent,
                 const char *adj, const char *hk_start, const char *hk_end) {
  eshard_t s;
  memset(&s, 0, sizeof(s));
  if (!valid_id(id) || (parent && strlen(parent) > ID_MAX) ||
      (adj && strlen(adj) > ID_MAX))
    return -2;
  if (!hk_start) hk_start = "0";
  if (!hk_end) hk_end = "340282366920938463463374607431768211455";
  if (strlen(hk_start) >= sizeof(s.hk_start) ||
      strlen(hk_end) >= sizeof(s.hk_end) ||
      kn_u128_parse(hk_start, strlen(hk_start), &s.start) ||
      kn_u128_parse(hk_end, strlen(hk_end), &s.end))
    return -2;
  size_t at;
  if (kn_enum_find_at(en, id, &at) >= 0) return -2;
  if (en->n_shards == en->cap_shards) {
    size_t cap = en->cap_shards ? en->cap_shards * 2 : 16;
    eshard_t *v = realloc(en->shards, cap * sizeof(*v));
    if (!v) return -1;
    en->shards = v;
    en->cap_shards = cap;
  }
  int oom = 0;
  s.id = strdup(id);
  if (!s.id) oom = 1;
  s.parent = dup_or_null(parent, &oom);
  s.adj = dup_or_null(adj, &oom);
  if (oom) {
    shard_free(&s);
    return -1;
  }
  strcpy(s.hk_start, hk_start);
  strcpy(s.hk_end, hk_end);
  kn_position_trim_horizon(&s.pos);
  memmove(&en->shards[at + 1], &en->shards[at],
          (en->n_shards - at) * sizeof(*en->shards));
  en->shards[at] = s;
  en->n_shards++;
  return (long)at;
}

kn_err_t kn_enum_add_reader(kn_enumerator_t *en, const char *id) {
  if (!valid_id(id)) return KN_ERR__INVALID_ARG;
  size_t at;
  if (kn_enum_reader_at(en, id, &at) >= 0) return KN_ERR_NO_ERROR;
  if (en->n_readers == en->cap_readers) {
    size_t cap = en->cap_readers ? en->cap_readers * 2 : 8;
    char **v = realloc(en->readers, cap * sizeof(*v));
    if (!v) return KN_ERR__NOMEM;
    en->readers = v;
    en->cap_readers = cap;
  }
  char *d = strdup(id);
  if (!d) return KN_ERR__NOMEM;
  memmove(&en->readers[at + 1], &en->readers[at],
          (en->n_readers - at) * sizeof(char *));
  en->readers[at] = d;
  en->n_readers++;
  return KN_ERR_NO_ERROR;
}

int kn_enum_parents_done(const kn_enumerator_t *en, const eshard_t *s) {
#if KN_ENUM_MUTANT == 1 /* the simulator's check that this rule matters */
  (void)en;
  (void)s;
  return 1; /* a child is offered before its parents are finished */
#endif
  const char *ps[2] = {s->parent, s->adj};
  for (int i = 0; i < 2; i++) {
    if (!ps[i]) continue;
    long p = kn_enum_find(en, ps[i]);
    if (p >= 0 && en->shards[p].state != ST_FINISHED) return 0;
    /* An unknown parent has aged out only if a listing that shows the
     * child lacks it: a child known from ChildShards alone may have a
     * parent (the other one of a merge) born since the last listing. */
    if (p < 0 && !s->listed) return 0;
  }
  return 1;
}

static void set_reader(eshard_t *s, char *reader) {
  free(s->reader);
  s->reader = reader;
}

/* ---- listing ---- */

kn_err_t kn_enumerator_shards(kn_enumerator_t *en, const kn_shard_list_t *list,
                              int64_t now_ms) {
  size_t n = kn_shard_list_count(list);
  /* Add first (the only step that can fail), then judge absences. */
  for (size_t i = 0; i < n; i++) {
    const kn_shard_t *sh = kn_shard_list_get(list, i);
    if (kn_enum_find(en, kn_shard_id(sh)) >= 0) continue;
    long at =
        kn_enum_add(en, kn_shard_id(sh), kn_shard_parent_id(sh),
                    kn_shard_adjacent_parent_id(sh),
                    kn_shard_hash_key_start(sh), kn_shard_hash_key_end(sh));
    if (at == -1) return KN_ERR__NOMEM;
    if (at < 0) continue; /* malformed: the listing decoder prevents it */
    eshard_t *s = &en->shards[at];
    if (!en->listed_once) {
      s->pos = en->initial;
      /* Nothing new will ever arrive in a closed shard. */
      if (en->initial.kind == KN_POSITION_LATEST && !kn_shard_is_open(sh))
        s->state = ST_FINISHED;
    }
  }
  /* A shard the listing no longer shows has aged out. */
  size_t keep = 0;
  for (size_t i = 0; i < en->n_shards; i++) {
    eshard_t *s = &en->shards[i];
    int shown = kn_shard_list_find(list, s->id) != NULL;
    if (shown) s->listed = 1;
    if (!shown && s->listed && s->state == ST_PENDING) s->state = ST_FINISHED;
    if (!shown && s->listed && s->state == ST_FINISHED) {
      shard_free(s); /* gone: its children treat it as finished */
      continue;
    }
    en->shards[keep++] = *s;
  }
  en->n_shards = keep;
  en->listed_once = 1;
  en->synced = 1;
  en->last_sync_ms = now_ms;
  return KN_ERR_NO_ERROR;
}

int64_t kn_enumerator_due_ms(const kn_enumerator_t *en, int64_t now_ms) {
  return en->synced ? en->last_sync_ms + en->interval_ms : now_ms;
}

/* ---- readers ---- */

kn_err_t kn_enumerator_reader_joined(kn_enumerator_t *en,
                                     const char *reader_id) {
  return kn_enum_add_reader(en, reader_id);
}

kn_err_t kn_enumerator_reader_left(kn_enumerator_t *en, const char *reader_id) {
  long r = kn_enum_reader(en, reader_id);
  if (r < 0) return KN_ERR_NO_ERROR;
  for (size_t i = 0; i < en->n_shards; i++) {
    eshard_t *s = &en->shards[i];
    if ((s->state == ST_ASSIGNED || s->state == ST_REVOKING) &&
        strcmp(s->reader, reader_id) == 0) {
      s->state = ST_PENDING;
      set_reader(s, NULL);
    }
  }
  /* Actions queued for it are void: its shards are offered again. */
  size_t keep = en->head;
  for (size_t i = en->head; i < en->n_actions; i++)
    if (strcmp(en->actions[i].reader_id, reader_id) != 0)
      en->actions[keep++] = en->actions[i];
  en->n_actions = keep;
  free(en->readers[r]);
  memmove(&en->readers[r], &en->readers[r + 1],
          (en->n_readers - (size_t)r - 1) * sizeof(char *));
  en->n_readers--;
  return KN_ERR_NO_ERROR;
}

/* ---- reports ---- */

kn_err_t kn_enumerator_finished(kn_enumerator_t *en, const char *reader_id,
                                const char *shard_id,
                                const kn_shard_list_t *children) {
  long i = kn_enum_find(en, shard_id);
  if (i < 0) return KN_ERR__NOT_FOUND;
  /* Children first: adding them may fail, finishing may not. */
  for (size_t c = 0; c < kn_shard_list_count(children); c++) {
    const kn_shard_t *ch = kn_shard_list_get(children, c);
    if (kn_enum_find(en, kn_shard_id(ch)) >= 0) continue;
    long at =
        kn_enum_add(en, kn_shard_id(ch), kn_shard_parent_id(ch),
                    kn_shard_adjacent_parent_id(ch),
                    kn_shard_hash_key_start(ch), kn_shard_hash_key_end(ch));
    if (at == -1) return KN_ERR__NOMEM;
  }
  eshard_t *s = &en->shards[kn_enum_find(en, shard_id)];
  if (s->state == ST_FINISHED) return KN_ERR_NO_ERROR;
  if (s->state == ST_ASSIGNED && reader_id &&
      strcmp(s->reader, reader_id) != 0) {
    /* Another reader holds it (a stale assignment after a restore): it
     * has nothing left to read there. */
    if (kn_enum_push(en, KN_ENUM_REVOKE, s)) return KN_ERR__NOMEM;
  }
  s->state = ST_FINISHED;
  set_reader(s, NULL);
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_enumerator_shard_returned(kn_enumerator_t *en, const char *shard_id,
                                      const kn_position_t *pos) {
  long i = kn_enum_find(en, shard_id);
  if (i < 0) return KN_ERR__NOT_FOUND;
  eshard_t *s = &en->shards[i];
  if (s->state == ST_FINISHED) return KN_ERR_NO_ERROR;
  if (pos) s->pos = *pos;
  s->state = ST_PENDING;
  set_reader(s, NULL);
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_enumerator_shard_load(kn_enumerator_t *en, const char *shard_id,
                                  uint64_t load) {
  long i = kn_enum_find(en, shard_id);
  if (i < 0) return KN_ERR__NOT_FOUND;
  en->shards[i].load = load;
  en->shards[i].has_load = 1;
  return KN_ERR_NO_ERROR;
}

/* ---- actions ---- */

/* Assigns every ready shard, in id order (parents before children). */
static void offer(kn_enumerator_t *en) {
  if (!en->n_readers) return;
  for (size_t i = 0; i < en->n_shards; i++) {
    eshard_t *s = &en->shards[i];
    if (s->state != ST_PENDING || !kn_enum_parents_done(en, s)) continue;
    long r = kn_enum_pick(en, s);
    if (r < 0) return; /* out of memory: offered again next call */
    char *who = strdup(en->readers[r]);
    if (!who) return;
    set_reader(s, who);
    s->state = ST_ASSIGNED;
    if (kn_enum_push(en, KN_ENUM_ASSIGN, s)) {
      s->state = ST_PENDING;
      set_reader(s, NULL);
      return;
    }
  }
}

int kn_enumerator_next_action(kn_enumerator_t *en, kn_enum_action_t *out) {
  offer(en);
  if (en->head == en->n_actions) return 0;
  *out = en->actions[en->head++];
  return 1;
}

/* ---- state ---- */

kn_enum_shard_state_t kn_enumerator_shard_state(const kn_enumerator_t *en,
                                                const char *shard_id,
                                                char *reader_id, size_t size) {
  if (reader_id && size) reader_id[0] = '\0';
  long i = kn_enum_find(en, shard_id);
  if (i < 0) return KN_ENUM_UNKNOWN;
  const eshard_t *s = &en->shards[i];
  if (reader_id && size && s->reader) {
    strncpy(reader_id, s->reader, size - 1);
    reader_id[size - 1] = '\0';
  }
  switch (s->state) {
    case ST_ASSIGNED:
      return KN_ENUM_ASSIGNED;
    case ST_REVOKING:
      return KN_ENUM_REVOKING;
    case ST_FINISHED:
      return KN_ENUM_FINISHED;
    default:
      return kn_enum_parents_done(en, s) ? KN_ENUM_READY : KN_ENUM_WAITING;
  }
}

size_t kn_enumerator_shard_count(const kn_enumerator_t *en) {
  return en->n_shards;
}

size_t kn_enumerator_reader_shards(const kn_enumerator_t *en,
                                   const char *reader_id) {
  size_t n = 0;
  for (size_t i = 0; i < en->n_shards; i++)
    if (en->shards[i].state == ST_ASSIGNED &&
        strcmp(en->shards[i].reader, reader_id) == 0)
      n++;
  return n;
}
