/* When to retry a failed AWS call, and after how long: capped exponential
 * back-off with full jitter, bounded by a number of attempts and by a token
 * budget shared by all calls of one service, so that an outage does not
 * multiply the load on it.  Pure: no clock, no I/O, no locks (a service
 * uses its budget from its loop's thread only). */
#ifndef KN_AWS_RETRY_H
#define KN_AWS_RETRY_H

#include <stdint.h>

#include "kn/error.h"

#define KN_RETRY_COST 5          /* tokens a retry takes */
#define KN_RETRY_TIMEOUT_COST 10 /* after a timeout */
#define KN_RETRY_REFUND 1        /* tokens a success gives back */

typedef struct kn_retry_budget {
  int tokens;
  int capacity; /* 0: never retry */
} kn_retry_budget_t;

void kn_retry_budget_init(kn_retry_budget_t *b, int capacity);
/* Takes the price of retrying after err; returns 0, or -1 (nothing taken)
 * when the budget cannot pay it. */
int kn_retry_budget_take(kn_retry_budget_t *b, const kn_error_t *err);
void kn_retry_budget_success(kn_retry_budget_t *b);

typedef struct kn_retry_policy {
  int max_attempts;         /* >= 1 */
  int64_t base_ms;          /* back-off base */
  int64_t throttle_base_ms; /* base after a throttling error */
  int64_t max_ms;           /* ceiling of one delay */
} kn_retry_policy_t;

typedef enum kn_retry_verdict {
  KN_RETRY = 0,      /* retry after *delay_ms */
  KN_RETRY_FATAL,    /* the error is not retriable */
  KN_RETRY_ATTEMPTS, /* retriable, but no attempts left */
  KN_RETRY_NO_BUDGET /* retriable, but the budget is empty */
} kn_retry_verdict_t;

/* Decides what to do after attempt number `attempts` (1-based) failed with
 * err.  On KN_RETRY the budget has paid and *delay_ms is uniform in
 * [0, min(max, base * 2^(attempts-1))]. */
kn_retry_verdict_t kn_retry_decide(const kn_retry_policy_t *p,
                                   kn_retry_budget_t *b, const kn_error_t *err,
                                   int attempts, int64_t *delay_ms);

#endif
