#include "util/rand.h"

#include "util/clock.h"
#include "util/crypto.h"

static _Thread_local uint64_t state;

uint64_t kn_rand_u64(void) {
  if (!state) {
    if (kn_random_bytes(&state, sizeof(state)) || !state)
      state = (uint64_t)kn_mono_us() * 0x9E3779B97F4A7C15ull | 1;
  }
  /* xorshift64* */
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

uint64_t kn_rand_below(uint64_t n) { return n ? kn_rand_u64() % n : 0; }
