/* Fast non-cryptographic randomness for jitter and sampling. */
#ifndef KN_UTIL_RAND_H
#define KN_UTIL_RAND_H

#include <stdint.h>

/* Per-thread xorshift generator, seeded once per thread from the OS. */
uint64_t kn_rand_u64(void);
/* Uniform in [0, n); 0 when n is 0. */
uint64_t kn_rand_below(uint64_t n);

#endif
