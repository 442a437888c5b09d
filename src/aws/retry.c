#include "aws/retry.h"

#include "util/backoff.h"

void kn_retry_budget_init(kn_retry_budget_t *b, int capacity) {
  b->capacity = capacity > 0 ? capacity : 0;
  b->tokens = b->capacity;
}

int kn_retry_budget_take(kn_retry_budget_t *b, const kn_error_t *err) {
  int cost = kn_error_code(err) == KN_ERR__TIMED_OUT ? KN_RETRY_TIMEOUT_COST
                                                     : KN_RETRY_COST;
  if (b->tokens < cost) return -1;
  b->tokens -= cost;
  return 0;
}

void kn_retry_budget_success(kn_retry_budget_t *b) {
  b->tokens += KN_RETRY_REFUND;
  if (b->tokens > b->capacity) b->tokens = b->capacity;
}

kn_retry_verdict_t kn_retry_decide(const kn_retry_policy_t *p,
                                   kn_retry_budget_t *b, const kn_error_t *err,
                                   int attempts, int64_t *delay_ms) {
  *delay_ms = 0;
  if (!kn_error_is_retriable(err)) return KN_RETRY_FATAL;
  if (attempts >= p->max_attempts) return KN_RETRY_ATTEMPTS;
  if (kn_retry_budget_take(b, err)) return KN_RETRY_NO_BUDGET;
  kn_backoff_t bo;
  kn_backoff_init(
      &bo, kn_error_is_throttling(err) ? p->throttle_base_ms : p->base_ms,
      p->max_ms);
  bo.attempt = attempts > 1 ? attempts - 1 : 0;
  *delay_ms = kn_backoff_next(&bo);
  return KN_RETRY;
}
