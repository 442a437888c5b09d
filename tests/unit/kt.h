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

/* A check that must hold even under torture, whichever allocation fails
 * (a malformed file is never accepted, say): unlike the others it is told
 * and counted in the runs with a failing allocation too. */
__attribute__((unused)) static int kt_always_failures;
#define KT_ALWAYS(cond)                                                  \
  do {                                                                   \
    kt_checks++;                                                         \
    if (!(cond)) {                                                       \
      kt_failures++;                                                     \
      kt_always_failures++;                                              \
      fprintf(stderr, "%s:%d: check failed: %s%s\n", __FILE__, __LINE__, \
              #cond, kt_quiet ? " (with an allocation failing)" : "");   \
    }                                                                    \
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
 * may fail -- a call reports its error -- and are not counted (except
 * KT_ALWAYS); what counts is that nothing crashes, hangs (alarm) or leaks
 * (LeakSanitizer at exit).
 *
 * Sampling, per case (one KT_RUN): KT_TORTURE_MAX=M makes at most about M
 * runs, of which the first KT_TORTURE_FIRST=F (default 0) fail
 * allocations 1 to F, one each, and the rest every k-th allocation after
 * F, evenly along the case's path to its end.  KT_TORTURE_SECONDS=S lowers
 * M to what fits in about S seconds at the pace of the counting run (a
 * case that waits for a server's second is sampled more thinly; F too if
 * need be).  KT_TORTURE_AT=N: that one only; KT_TORTURE_CASE=NAME: that
 * case only. */
#include <signal.h>
#include <stdlib.h>
#include <time.h>
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

__attribute__((unused)) static long kt_tt_env(const char *name) {
  const char *v = getenv(name);
  return v ? atol(v) : 0;
}

/* The allocation to fail after n (from 0): each up to first + 1, then
 * every step-th. */
__attribute__((unused)) static long kt_tt_next(long n, long first, long step) {
  return n <= first ? n + 1 : n + step;
}

__attribute__((unused)) static void kt_torture_run(void (*fn)(void),
                                                   const char *name) {
  const char *only = getenv("KT_TORTURE_CASE");
  if (only && *only && strcmp(only, name) != 0) return;
  int before = kt_failures;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kt_tt_arm(0);
  fn();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long total = kt_tt_count();
  long ms = (long)(t1.tv_sec - t0.tv_sec) * 1000 +
            (long)(t1.tv_nsec - t0.tv_nsec) / 1000000;
  fprintf(stderr, "%s %s (%ld allocations, %ld ms)\n",
          kt_failures == before ? "ok  " : "FAIL", name, total, ms);
  if (kt_failures != before) return;
  long max = kt_tt_env("KT_TORTURE_MAX"), at = kt_tt_env("KT_TORTURE_AT");
  long first = kt_tt_env("KT_TORTURE_FIRST");
  long secs = kt_tt_env("KT_TORTURE_SECONDS");
  if (secs > 0) {
    long fit = secs * 1000 / (ms > 0 ? ms : 1);
    if (fit < 1) fit = 1;
    if (max <= 0 || fit < max) max = fit;
  }
  if (first < 0) first = 0;
  if (max > 0 && first > max) first = max;
  long step = 1;
  if (max > 0 && total > max) {
    long rest = total - first, slots = max - first;
    step = slots > 0 ? (rest + slots - 1) / slots : total + 1;
  }
  int checks = kt_checks, failures = kt_failures;
  int always = kt_always_failures;
  long runs = 0, refused = 0;
  signal(SIGALRM, kt_tt_hang);
  kt_quiet = 1;
  for (long n = at ? at : kt_tt_next(0, first, step); n <= (at ? at : total);
       n = kt_tt_next(n, first, step)) {
    kt_tt_test = name;
    kt_tt_at = n;
    alarm(120);
    kt_tt_arm(n);
    int was = kt_always_failures;
    fn();
    alarm(0);
    if (kt_always_failures != was)
      fprintf(stderr, "torture: %s fails a check with allocation %ld failing\n",
              name, n);
    refused += kt_tt_refused();
    runs++;
  }
  kt_tt_arm(0);
  kt_quiet = 0;
  kt_checks = checks;
  kt_failures = failures + (kt_always_failures - always);
  if (step > 1)
    fprintf(stderr,
            "     %ld runs (allocations 1 to %ld, then every %ld-th), "
            "%ld allocations refused\n",
            runs, first, step, refused);
  else
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
