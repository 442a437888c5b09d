/* kt.h - the minimal unit-test harness: checks count, failures print
 * file:line and the expression, main() returns non-zero if any check failed. */
#ifndef KT_H
#define KT_H

#include <stdio.h>
#include <string.h>
#include <inttypes.h>

static int kt_checks;
static int kt_failures;
static int kt_quiet; /* failed checks are counted but not told */

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

/* Counts and tells a failed check. */
static inline void kt_fail(const char *file, int line, const char *what) {
  kt_failures++;
  if (!kt_quiet) fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
}

#define KT_CHECK(cond)                               \
  do {                                               \
    kt_checks++;                                     \
    if (!(cond)) kt_fail(__FILE__, __LINE__, #cond); \
  } while (0)

#define KT_CHECK_MSG(cond, ...)                                          \
  do {                                                                   \
    kt_checks++;                                                         \
    if (!(cond)) {                                                       \
      kt_failures++;                                                     \
      if (!kt_quiet) {                                                   \
        fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, \
                #cond);                                                  \
        fprintf(stderr, __VA_ARGS__);                                    \
        fputc('\n', stderr);                                             \
      }                                                                  \
    }                                                                    \
  } while (0)

#define KT_CHECK_STR(a, b)                                               \
  do {                                                                   \
    const char *kt_a_ = (a), *kt_b_ = (b);                               \
    kt_checks++;                                                         \
    if (!kt_a_ || !kt_b_ || strcmp(kt_a_, kt_b_) != 0) {                 \
      kt_failures++;                                                     \
      if (!kt_quiet)                                                     \
        fprintf(stderr, "%s:%d: %s == %s: \"%s\" != \"%s\"\n", __FILE__, \
                __LINE__, #a, #b, kt_a_ ? kt_a_ : "(null)",              \
                kt_b_ ? kt_b_ : "(null)");                               \
    }                                                                    \
  } while (0)

#define KT_CHECK_INT(a, b)                                                     \
  do {                                                                         \
    long long kt_a_ = (long long)(a), kt_b_ = (long long)(b);                  \
    kt_checks++;                                                               \
    if (kt_a_ != kt_b_) {                                                      \
      kt_failures++;                                                           \
      if (!kt_quiet)                                                           \
        fprintf(stderr, "%s:%d: %s == %s: %lld != %lld\n", __FILE__, __LINE__, \
                #a, #b, kt_a_, kt_b_);                                         \
    }                                                                          \
  } while (0)

/* A check the rest of the case depends on (a set-up step, a call whose
 * result the case goes on to read): when cond is false it counts as a
 * failed check, the statements given after it run (to free what the case
 * holds) and the case returns.  Under torture every such step fails in
 * turn; the case stops there instead of reading what is not there. */
#define KT_REQUIRE(cond, ...)             \
  do {                                    \
    kt_checks++;                          \
    if (!(cond)) {                        \
      kt_fail(__FILE__, __LINE__, #cond); \
      __VA_ARGS__;                        \
      return;                             \
    }                                     \
  } while (0)

/* A call that returns a kn_error_t * (NULL on success): checks that it
 * succeeded, and frees the error when it did not (under torture, it may
 * fail at any allocation). */
#define KT_CHECK_OK(call)                                                   \
  do {                                                                      \
    kn_error_t *kt_e_ = (call);                                             \
    KT_CHECK_MSG(kt_e_ == NULL, "%s", kt_e_ ? kn_error_string(kt_e_) : ""); \
    kn_error_destroy(kt_e_);                                                \
  } while (0)

#ifdef KT_TORTURE
/* Torture builds (make torture): each test runs once as usual, counting
 * the library's allocations, then again with the first, the second, ...
 * allocation failing (tests/torture/kt_torture.c).  Those runs' checks
 * may fail -- a call reports its error -- and are not counted; what
 * counts is that nothing crashes, hangs (alarm) or leaks (LeakSanitizer
 * at exit).  KT_TORTURE_MAX=N: at most about N runs per test (every
 * total/N-th allocation); KT_TORTURE_AT=N: that one only. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "../torture/kt_torture.h"

static const char *kt_tt_test;
static long kt_tt_at;

__attribute__((unused)) static void kt_tt_hang(int sig) {
  char m[256];
  int n =
      snprintf(m, sizeof(m), "torture: %s hangs with allocation %ld failing\n",
               kt_tt_test, kt_tt_at);
  (void)sig;
  if (n > 0 && write(2, m, (size_t)n) < 0) _exit(4);
  _exit(3);
}

__attribute__((unused)) static void kt_torture_run(void (*fn)(void),
                                                   const char *name) {
  int before = kt_failures;
  kt_tt_arm(0);
  fn();
  long total = kt_tt_count();
  fprintf(stderr, "%s %s (%ld allocations)\n",
          kt_failures == before ? "ok  " : "FAIL", name, total);
  if (kt_failures != before) return;
  const char *max_s = getenv("KT_TORTURE_MAX"), *at_s = getenv("KT_TORTURE_AT");
  long max = max_s ? atol(max_s) : 0, at = at_s ? atol(at_s) : 0;
  long step = max > 0 && total > max ? (total + max - 1) / max : 1;
  int checks = kt_checks, failures = kt_failures;
  long runs = 0, refused = 0;
  signal(SIGALRM, kt_tt_hang);
  kt_quiet = 1;
  for (long n = at ? at : 1; n <= (at ? at : total); n += step) {
    kt_tt_test = name;
    kt_tt_at = n;
    alarm(120);
    kt_tt_arm(n);
    fn();
    alarm(0);
    refused += kt_tt_refused();
    runs++;
  }
  kt_tt_arm(0);
  kt_quiet = 0;
  kt_checks = checks;
  kt_failures = failures;
  fprintf(stderr, "     %ld runs, %ld allocations refused\n", runs, refused);
}

#define KT_RUN(fn) kt_torture_run(fn, #fn)
#else
#define KT_RUN(fn)                                                          \
  do {                                                                      \
    int kt_before_ = kt_failures;                                           \
    fn();                                                                   \
    fprintf(stderr, "%s %s\n", kt_failures == kt_before_ ? "ok  " : "FAIL", \
            #fn);                                                           \
  } while (0)

#endif

#define KT_DONE()                                                     \
  (fprintf(stderr, "%d checks, %d failed\n", kt_checks, kt_failures), \
   kt_failures ? 1 : 0)

#endif
