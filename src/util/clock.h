/* Clocks.  Durations and expiry use the monotonic clock only; the wall
 * clock is for timestamps shown to people and sent to AWS. */
#ifndef KN_UTIL_CLOCK_H
#define KN_UTIL_CLOCK_H

#include <stdint.h>

int64_t kn_mono_ms(void);
int64_t kn_mono_us(void);
int64_t kn_wall_ms(void); /* milliseconds since the Unix epoch */
/* Sleeps for ms milliseconds (restarts on EINTR). */
void kn_sleep_ms(int64_t ms);

#endif
