/* Token bucket with an injected clock (pure): `rate` tokens per second,
 * holding at most `burst`.  Used for per-shard read and write limits. */
#ifndef KN_UTIL_TBUCKET_H
#define KN_UTIL_TBUCKET_H

#include <stdint.h>

typedef struct kn_tbucket {
  double rate;   /* tokens per second; <= 0 means unlimited */
  double burst;  /* capacity */
  double tokens; /* may go negative after a take larger than the balance */
  int64_t last_us;
} kn_tbucket_t;

void kn_tbucket_init(kn_tbucket_t *tb, double rate, double burst,
                     int64_t now_us);
/* Microseconds to wait until n tokens could be taken (0 = now). */
int64_t kn_tbucket_wait_us(kn_tbucket_t *tb, double n, int64_t now_us);
/* Takes n tokens now, going into debt if needed (actual usage is known
 * only after a response, e.g. bytes returned by GetRecords). */
void kn_tbucket_take(kn_tbucket_t *tb, double n, int64_t now_us);
/* Takes n tokens if available now; returns 1 if taken. */
int kn_tbucket_try_take(kn_tbucket_t *tb, double n, int64_t now_us);

#endif
