#include "util/backoff.h"

#include "util/rand.h"

void kn_backoff_init(kn_backoff_t *b, int64_t base_ms, int64_t max_ms) {
  b->base_ms = base_ms > 0 ? base_ms : 1;
  b->max_ms = max_ms >= b->base_ms ? max_ms : b->base_ms;
  b->attempt = 0;
}

int64_t kn_backoff_ceiling(const kn_backoff_t *b) {
  int64_t c = b->base_ms;
  for (int i = 0; i < b->attempt && c < b->max_ms; i++) c *= 2;
  return c < b->max_ms ? c : b->max_ms;
}

int64_t kn_backoff_next(kn_backoff_t *b) {
  int64_t c = kn_backoff_ceiling(b);
  if (b->attempt < 62) b->attempt++;
  return (int64_t)kn_rand_below((uint64_t)c + 1);
}

void kn_backoff_reset(kn_backoff_t *b) { b->attempt = 0; }
