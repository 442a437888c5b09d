/* The allocator of torture builds: the library's copies for these tests
 * call kt_tt_malloc() and the rest instead of malloc() and the rest (their
 * symbols renamed with objcopy, see tests/CMakeLists.txt), so that exactly
 * one allocation of the library, the Nth since kt_tt_arm(N), fails.  The
 * tests' own allocations are left alone.
 *
 * Only allocations made inside a library call count (the function that
 * allocates was called by the library, not by the test): that a
 * constructor the test calls returns NULL is plain, and tests do not check
 * every one.  KT_TORTURE_ALL=1 counts those too.  The library's code is
 * in section kn_tt_text of the copies (renamed from .text), whose bounds
 * the linker provides; frame pointers (the sanitizer builds keep them)
 * give the caller's caller. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_torture.h"

static atomic_long count, fail_at, refused;
static int all = -1;

extern const char __start_kn_tt_text[] __attribute__((weak));
extern const char __stop_kn_tt_text[] __attribute__((weak));

void __sanitizer_print_stack_trace(void) __attribute__((weak));

static int in_library(const void *pc) {
  const char *p = pc;
  return __start_kn_tt_text && p >= __start_kn_tt_text && p < __stop_kn_tt_text;
}

void kt_tt_arm(long n) {
  atomic_store(&fail_at, 0);
  atomic_store(&count, 0);
  atomic_store(&refused, 0);
  atomic_store(&fail_at, n);
}
long kt_tt_count(void) { return atomic_load(&count); }
long kt_tt_refused(void) { return atomic_load(&refused); }

/* Non-zero when this allocation is the one to refuse; caller: where the
 * allocating library function returns to. */
static int refuse(const void *caller) {
  if (all < 0) all = getenv("KT_TORTURE_ALL") != NULL;
  if (!all && !in_library(caller)) return 0;
  long n = atomic_fetch_add(&count, 1) + 1;
  if (n != atomic_load(&fail_at)) return 0;
  atomic_fetch_add(&refused, 1);
  /* KT_TORTURE_TRACE=1: where (with KT_TORTURE_AT=N). */
  if (getenv("KT_TORTURE_TRACE") && __sanitizer_print_stack_trace) {
    fprintf(stderr, "torture: allocation %ld refused at\n", n);
    __sanitizer_print_stack_trace();
  }
  errno = ENOMEM;
  return 1;
}

/* The return address of the library function that called the wrapper:
 * safe here, the frames of the library and this file have pointers. */
#pragma GCC diagnostic ignored "-Wframe-address"
#define CALLER __builtin_return_address(1)

void *kt_tt_malloc(size_t n) { return refuse(CALLER) ? NULL : malloc(n); }
void *kt_tt_calloc(size_t n, size_t m) {
  return refuse(CALLER) ? NULL : calloc(n, m);
}
void *kt_tt_realloc(void *p, size_t n) {
  return refuse(CALLER) ? NULL : realloc(p, n);
}
char *kt_tt_strdup(const char *s) { return refuse(CALLER) ? NULL : strdup(s); }
char *kt_tt_strndup(const char *s, size_t n) {
  return refuse(CALLER) ? NULL : strndup(s, n);
}

int kt_tt_vasprintf(char **out, const char *fmt, va_list ap) {
  if (refuse(CALLER)) return -1;
  return vasprintf(out, fmt, ap);
}

int kt_tt_asprintf(char **out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = kt_tt_vasprintf(out, fmt, ap);
  va_end(ap);
  return r;
}
