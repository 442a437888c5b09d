/* The credentials provider's clock, for the unit tests, which wait for
 * events rather than for time to pass.  Compiled into the tests only,
 * never into the library. */
#ifndef KN_TEST_CREDS_HOOKS_H
#define KN_TEST_CREDS_HOOKS_H

#include <stdint.h>

#include "aws/creds.h"

/* Moves the provider's monotonic clock (the refresh interval and the wait
 * after a failed refresh) ms ahead of the real one. */
void kn_creds_provider_advance(kn_creds_provider_t *p, int64_t ms);
/* Stops that clock where it is: from then on only advance moves it, so a
 * slow test run cannot reach the next refresh by itself. */
void kn_creds_provider_freeze_clock(kn_creds_provider_t *p);
/* Fetches finished so far (each installed its credentials or its
 * failure before it counts). */
uint64_t kn_creds_provider_fetches(kn_creds_provider_t *p);

#endif
