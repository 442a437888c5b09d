/* kt.h - the minimal unit-test harness: checks count, failures print
 * file:line and the expression, main() returns non-zero if any check failed. */
#ifndef KT_H
#define KT_H

#include <stdio.h>
#include <string.h>
#include <inttypes.h>

static int kt_checks;
static int kt_failures;

/* A reproducible pseudo-random sequence for test data (xorshift64);
 * *state must start non-zero. */
static inline uint64_t kt_rand(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

/* An upper bound for what happens at once or after a short time-out.  A
 * test checks only that a wrong path (a hang, a wait for a long time-out,
 * which such a test sets far beyond this) is not taken: a loaded 2-core
 * machine under AddressSanitizer stays well below it. */
#define KT_PROMPT_MS 20000

#define KT_CHECK(cond)                                                        \
  do {                                                                        \
    kt_checks++;                                                              \
    if (!(cond)) {                                                            \
      kt_failures++;                                                          \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                         \
  } while (0)

#define KT_CHECK_MSG(cond, ...)                                               \
  do {                                                                        \
    kt_checks++;                                                              \
    if (!(cond)) {                                                            \
      kt_failures++;                                                          \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                           \
      fputc('\n', stderr);                                                    \
    }                                                                         \
  } while (0)

#define KT_CHECK_STR(a, b)                                                    \
  do {                                                                        \
    const char *kt_a_ = (a), *kt_b_ = (b);                                    \
    kt_checks++;                                                              \
    if (!kt_a_ || !kt_b_ || strcmp(kt_a_, kt_b_) != 0) {                      \
      kt_failures++;                                                          \
      fprintf(stderr, "%s:%d: %s == %s: \"%s\" != \"%s\"\n", __FILE__,        \
              __LINE__, #a, #b, kt_a_ ? kt_a_ : "(null)",                     \
              kt_b_ ? kt_b_ : "(null)");                                      \
    }                                                                         \
  } while (0)

#define KT_CHECK_INT(a, b)                                                    \
  do {                                                                        \
    long long kt_a_ = (long long)(a), kt_b_ = (long long)(b);                 \
    kt_checks++;                                                              \
    if (kt_a_ != kt_b_) {                                                     \
      kt_failures++;                                                          \
      fprintf(stderr, "%s:%d: %s == %s: %lld != %lld\n", __FILE__, __LINE__,  \
              #a, #b, kt_a_, kt_b_);                                          \
    }                                                                         \
  } while (0)

#define KT_RUN(fn)                                                            \
  do {                                                                        \
    int kt_before_ = kt_failures;                                             \
    fn();                                                                     \
    fprintf(stderr, "%s %s\n", kt_failures == kt_before_ ? "ok  " : "FAIL", #fn); \
  } while (0)

#define KT_DONE()                                                             \
  (fprintf(stderr, "%d checks, %d failed\n", kt_checks, kt_failures),         \
   kt_failures ? 1 : 0)

#endif
