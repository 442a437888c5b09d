/* Capped exponential back-off with full jitter: the delay before retry k
 * (0-based) is uniform in [0, min(max, base * 2^k)].  Full jitter spreads
 * many clients apart after a shared failure. */
#ifndef KN_UTIL_BACKOFF_H
#define KN_UTIL_BACKOFF_H

#include <stdint.h>

typedef struct kn_backoff {
  int64_t base_ms;
  int64_t max_ms;
  int attempt; /* retries so far */
} kn_backoff_t;

void kn_backoff_init(kn_backoff_t *b, int64_t base_ms, int64_t max_ms);
/* The delay for the next retry; advances the attempt count. */
int64_t kn_backoff_next(kn_backoff_t *b);
/* The ceiling of the next delay, without jitter and without advancing. */
int64_t kn_backoff_ceiling(const kn_backoff_t *b);
void kn_backoff_reset(kn_backoff_t *b);

#endif
