/* The stream reader's bookkeeping (pure). */
#include "stream/reader_book.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

/* Test builds of the simulator set KN_RB_MUTANT to break one rule on
 * purpose (tests/sim/README.md); 0 in the library. */
#ifndef KN_RB_MUTANT
#define KN_RB_MUTANT 0
#endif

void kn_rbook_init(kn_rbook_t *b) {
  memset(b, 0, sizeof(*b));
  b->idle_ms = 60000;
}

void kn_rbook_free(kn_rbook_t *b) {
  for (size_t i = 0; i < b->n; i++) free(b->v[i].id);
  free(b->v);
  memset(b, 0, sizeof(*b));
}

static size_t locate(const kn_rbook_t *b, const char *id, int *found) {
  return kn_sorted_find(b->v, b->n, sizeof(*b->v), offsetof(kn_rb_shard_t, id),
                        id, found);
}

kn_rb_shard_t *kn_rbook_find(kn_rbook_t *b, const char *id) {
  int found;
  if (!id) return NULL;
  size_t i = locate(b, id, &found);
  return found ? &b->v[i] : NULL;
}

kn_err_t kn_rbook_add(kn_rbook_t *b, const char *id, const kn_position_t *pos,
                      int64_t now_ms, int64_t wall_ms) {
  size_t n = id ? strlen(id) : 0;
  if (n < 1 || n > 255 || !pos) return KN_ERR__INVALID_ARG;
  int found;
  size_t at = locate(b, id, &found);
  if (found && !b->v[at].finished) return KN_ERR__STATE;
  char *copy = strdup(id);
  if (!copy) return KN_ERR__NOMEM;
  if (!found) {
    if (b->n == b->cap) {
      size_t cap = b->cap ? b->cap * 2 : 8;
      kn_rb_shard_t *v = realloc(b->v, cap * sizeof(*v));
      if (!v) {
        free(copy);
        return KN_ERR__NOMEM;
      }
      b->v = v;
      b->cap = cap;
    }
    memmove(&b->v[at + 1], &b->v[at], (b->n - at) * sizeof(*b->v));
    b->n++;
  } else {
    free(b->v[at].id);
  }
  kn_rb_shard_t *s = &b->v[at];
  memset(s, 0, sizeof(*s));
  s->id = copy;
  s->pos = *pos;
  s->added_wall_ms = wall_ms;
  s->finished_ckpt = KN_RB_NONE;
  s->watermark_ms = KN_RB_NONE;
  s->active_ms = now_ms;
  s->check_trim =
      pos->kind == KN_POSITION_AT_SEQUENCE || pos->kind == KN_POSITION_AFTER;
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_rbook_restore(kn_rbook_t *b, const kn_snapshot_t *s, int64_t now_ms,
                          int64_t wall_ms) {
  kn_position_t th;
  kn_position_trim_horizon(&th);
  for (size_t i = 0; i < kn_snapshot_count(s); i++) {
    const char *id = kn_snapshot_shard(s, i);
    const kn_position_t *p = kn_snapshot_position(s, i);
    kn_err_t e = kn_rbook_add(b, id, p ? p : &th, now_ms, wall_ms);
    if (e) return e;
    if (!p) kn_rbook_finished(b, id);
  }
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_rbook_remove(kn_rbook_t *b, const char *id, kn_position_t *pos) {
  int found;
  size_t at = id ? locate(b, id, &found) : 0;
  if (!id || !found) return KN_ERR__NOT_FOUND;
  /* Read to its end: handing it back would read it again (a finished
   * shard restored from a snapshot has no position). */
  if (b->v[at].finished) return KN_ERR__STATE;
  if (pos) kn_rbook_resume_at(&b->v[at], pos);
  free(b->v[at].id);
  memmove(&b->v[at], &b->v[at + 1], (b->n - at - 1) * sizeof(*b->v));
  b->n--;
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_rbook_pause(kn_rbook_t *b, const char *id, int paused) {
  kn_rb_shard_t *s = kn_rbook_find(b, id);
  if (!s) return KN_ERR__NOT_FOUND;
  s->paused = paused;
  return KN_ERR_NO_ERROR;
}

void kn_rbook_returned(kn_rbook_t *b, const char *id, const char *seq,
                       uint64_t subseq, int64_t max_arrival_ms,
                       int64_t now_ms) {
  kn_rb_shard_t *s = kn_rbook_find(b, id);
  if (!s) return;
  kn_position_t p;
  if (seq && kn_position_after(&p, seq, subseq) == KN_ERR_NO_ERROR) {
    s->pos = p;
    s->got_record = 1;
  }
  if (max_arrival_ms > s->watermark_ms) s->watermark_ms = max_arrival_ms;
  s->active_ms = now_ms;
}

void kn_rbook_finished(kn_rbook_t *b, const char *id) {
  kn_rb_shard_t *s = kn_rbook_find(b, id);
  if (s) s->finished = 1;
}

const char *kn_rbook_take_finished(kn_rbook_t *b) {
  for (size_t i = 0; i < b->n; i++) {
    kn_rb_shard_t *s = &b->v[i];
    if (s->finished && !s->announced) {
      s->announced = 1;
      return s->id;
    }
  }
  return NULL;
}

void kn_rbook_resume_at(const kn_rb_shard_t *s, kn_position_t *out) {
  if (s->pos.kind == KN_POSITION_LATEST && !s->got_record)
    kn_position_at_timestamp(out, s->added_wall_ms);
  else
    *out = s->pos;
}

int kn_rbook_active(const kn_rb_shard_t *s) {
  return !s->paused && !s->finished;
}

static int idle(const kn_rbook_t *b, const kn_rb_shard_t *s, int64_t now_ms) {
  return now_ms - s->active_ms >= b->idle_ms;
}

int kn_rbook_idle(const kn_rbook_t *b, const char *id, int64_t now_ms) {
  kn_rb_shard_t *s = kn_rbook_find((kn_rbook_t *)b, id);
  return s && idle(b, s, now_ms);
}

int64_t kn_rbook_watermark(const kn_rbook_t *b, const char *id,
                           int64_t now_ms) {
  if (id) {
    kn_rb_shard_t *s = kn_rbook_find((kn_rbook_t *)b, id);
    return s ? s->watermark_ms : KN_RB_NONE;
  }
  int64_t least = INT64_MAX, most = KN_RB_NONE;
  int active = 0;
  for (size_t i = 0; i < b->n; i++) {
    const kn_rb_shard_t *s = &b->v[i];
    if (s->watermark_ms > most) most = s->watermark_ms;
    /* A paused shard holds the watermark back: its records are to come. */
    if (s->finished || (!s->paused && idle(b, s, now_ms))) continue;
    active = 1;
    if (s->watermark_ms < least) least = s->watermark_ms;
  }
  return active ? least : most;
}

kn_err_t kn_rbook_snapshot(kn_rbook_t *b, int64_t ckpt_id, kn_snapshot_t *out) {
  while (kn_snapshot_count(out))
    kn_snapshot_remove(out, kn_snapshot_shard(out, 0));
  for (size_t i = 0; i < b->n; i++) {
    kn_rb_shard_t *s = &b->v[i];
    kn_err_t e;
#if KN_RB_MUTANT == 1 /* the simulator's check that this rule matters */
    /* Forgets a finished shard once its report is taken, before any
     * checkpoint is confirmed (FLINK-37627). */
    if (s->finished && s->announced) continue;
#endif
    if (s->finished) {
      e = kn_snapshot_set_finished(out, s->id, NULL, 0);
    } else {
      kn_position_t p;
      kn_rbook_resume_at(s, &p);
      e = kn_snapshot_set_position(out, s->id, &p);
    }
    if (e) return e;
  }
  /* Only once the whole snapshot is made: the first snapshot taken after
   * the application took a shard's report, which it hands to the
   * enumerator before that snapshot, so that the enumerator's state of
   * the same checkpoint knows the shard is finished. */
  for (size_t i = 0; i < b->n; i++)
    if (b->v[i].finished && b->v[i].announced &&
        b->v[i].finished_ckpt == KN_RB_NONE)
      b->v[i].finished_ckpt = ckpt_id;
  return KN_ERR_NO_ERROR;
}

void kn_rbook_confirm(kn_rbook_t *b, int64_t ckpt_id) {
  size_t keep = 0;
  for (size_t i = 0; i < b->n; i++) {
    kn_rb_shard_t *s = &b->v[i];
    if (s->finished && s->finished_ckpt != KN_RB_NONE &&
        s->finished_ckpt <= ckpt_id) {
      free(s->id);
      continue;
    }
    b->v[keep++] = *s;
  }
  b->n = keep;
}
