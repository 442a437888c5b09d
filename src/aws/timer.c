/* Loop timers: a binary min-heap ordered by (due time, start order). */
#include <stdlib.h>

#include "aws/http_int.h"
#include "util/clock.h"

static int before(const struct kn_timer *a, const struct kn_timer *b) {
  return a->due_us < b->due_us || (a->due_us == b->due_us && a->seq < b->seq);
}

static void place(kn_loop_t *loop, size_t i, struct kn_timer *t) {
  loop->heap[i] = t;
  t->idx = i;
}

static void sift_up(kn_loop_t *loop, size_t i) {
  struct kn_timer *t = loop->heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(t, loop->heap[parent])) break;
    place(loop, i, loop->heap[parent]);
    i = parent;
  }
  place(loop, i, t);
}

static void sift_down(kn_loop_t *loop, size_t i) {
  struct kn_timer *t = loop->heap[i];
  size_t n = loop->heap_len;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(loop->heap[c + 1], loop->heap[c])) c++;
    if (!before(loop->heap[c], t)) break;
    place(loop, i, loop->heap[c]);
    i = c;
  }
  place(loop, i, t);
}

static void heap_remove(kn_loop_t *loop, struct kn_timer *t) {
  size_t i = t->idx;
  struct kn_timer *last = loop->heap[--loop->heap_len];
  t->idx = KN_TIMER_IDLE;
  if (last == t) return;
  place(loop, i, last);
  sift_up(loop, i);
  sift_down(loop, last->idx);
}

kn_timer_t *kn_timer_new(kn_loop_t *loop, void (*fn)(void *arg), void *arg) {
  /* The heap has a slot for every timer, so starting one cannot fail. */
  if (loop->n_timers == loop->heap_cap) {
    size_t cap = loop->heap_cap ? loop->heap_cap * 2 : 16;
    struct kn_timer **h = realloc(loop->heap, cap * sizeof(*h));
    if (!h) return NULL;
    loop->heap = h;
    loop->heap_cap = cap;
  }
  struct kn_timer *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->loop = loop;
  t->fn = fn;
  t->arg = arg;
  t->idx = KN_TIMER_IDLE;
  t->next = loop->timers;
  if (t->next) t->next->prev = t;
  loop->timers = t;
  loop->n_timers++;
  return t;
}

void kn_timer_start(kn_timer_t *t, int64_t delay_ms) {
  kn_loop_t *loop = t->loop;
  if (delay_ms < 0) delay_ms = 0;
  if (t->idx != KN_TIMER_IDLE) heap_remove(loop, t);
  t->due_us = kn_mono_us() + delay_ms * 1000;
  t->seq = ++loop->timer_seq;
  loop->heap_len++;
  place(loop, loop->heap_len - 1, t);
  sift_up(loop, t->idx);
}

void kn_timer_stop(kn_timer_t *t) {
  if (t && t->idx != KN_TIMER_IDLE) heap_remove(t->loop, t);
}

int kn_timer_armed(const kn_timer_t *t) { return t && t->idx != KN_TIMER_IDLE; }

void kn_timer_free(kn_timer_t *t) {
  if (!t) return;
  kn_timer_stop(t);
  if (t->prev)
    t->prev->next = t->next;
  else
    t->loop->timers = t->next;
  if (t->next) t->next->prev = t->prev;
  t->loop->n_timers--;
  free(t);
}

void kn_timers_run(kn_loop_t *loop) {
  int64_t now = kn_mono_us();
  /* Timers started by these callbacks wait for the next turn, so a timer
   * re-armed with delay 0 cannot starve the rest of the loop. */
  uint64_t last_seq = loop->timer_seq;
  while (loop->heap_len) {
    struct kn_timer *t = loop->heap[0];
    if (t->due_us > now || t->seq > last_seq) break;
    heap_remove(loop, t);
    t->fn(t->arg); /* may free t */
  }
}

long kn_timers_next_ms(const kn_loop_t *loop) {
  if (!loop->heap_len) return -1;
  int64_t d = loop->heap[0]->due_us - kn_mono_us();
  if (d <= 0) return 0;
  return (long)((d + 999) / 1000);
}

void kn_timers_free_all(kn_loop_t *loop) {
  while (loop->timers) kn_timer_free(loop->timers);
  free(loop->heap);
  loop->heap = NULL;
  loop->heap_len = loop->heap_cap = 0;
}
