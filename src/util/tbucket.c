#include "util/tbucket.h"

static void refill(kn_tbucket_t *tb, int64_t now_us) {
  if (now_us > tb->last_us) {
    tb->tokens += tb->rate * (double)(now_us - tb->last_us) / 1e6;
    if (tb->tokens > tb->burst) tb->tokens = tb->burst;
    tb->last_us = now_us;
  }
}

void kn_tbucket_init(kn_tbucket_t *tb, double rate, double burst,
                     int64_t now_us) {
  tb->rate = rate;
  tb->burst = burst > 0 ? burst : rate;
  tb->tokens = tb->burst;
  tb->last_us = now_us;
}

int64_t kn_tbucket_wait_us(kn_tbucket_t *tb, double n, int64_t now_us) {
  if (tb->rate <= 0) return 0;
  refill(tb, now_us);
  /* A request larger than the burst waits for a full bucket. */
  double need = n > tb->burst ? tb->burst : n;
  if (tb->tokens >= need) return 0;
  return (int64_t)((need - tb->tokens) / tb->rate * 1e6) + 1;
}

void kn_tbucket_take(kn_tbucket_t *tb, double n, int64_t now_us) {
  if (tb->rate <= 0) return;
  refill(tb, now_us);
  tb->tokens -= n;
}

int kn_tbucket_try_take(kn_tbucket_t *tb, double n, int64_t now_us) {
  if (kn_tbucket_wait_us(tb, n, now_us)) return 0;
  kn_tbucket_take(tb, n, now_us);
  return 1;
}
