/* The allocator of torture builds: the library's copies for these tests
 * call kt_tt_malloc() and the rest instead of malloc() and the rest (their
 * symbols renamed with objcopy, see tests/CMakeLists.txt), so that exactly
 * one allocation of the library, the Nth since kt_tt_arm(N), fails.  The
 * tests' own allocations are left alone. */
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

void kt_tt_arm(long n) {
  atomic_store(&fail_at, 0);
  atomic_store(&count, 0);
  atomic_store(&refused, 0);
  atomic_store(&fail_at, n);
}
long kt_tt_count(void) { return atomic_load(&count); }
long kt_tt_refused(void) { return atomic_load(&refused); }

/* Non-zero when this allocation is the one to refuse. */
static int refuse(void) {
  long n = atomic_fetch_add(&count, 1) + 1;
  if (n != atomic_load(&fail_at)) return 0;
  atomic_fetch_add(&refused, 1);
  errno = ENOMEM;
  return 1;
}

void *kt_tt_malloc(size_t n) { return refuse() ? NULL : malloc(n); }
void *kt_tt_calloc(size_t n, size_t m) { return refuse() ? NULL : calloc(n, m); }
void *kt_tt_realloc(void *p, size_t n) { return refuse() ? NULL : realloc(p, n); }
char *kt_tt_strdup(const char *s) { return refuse() ? NULL : strdup(s); }
char *kt_tt_strndup(const char *s, size_t n) { return refuse() ? NULL : strndup(s, n); }

int kt_tt_vasprintf(char **out, const char *fmt, va_list ap) {
  if (refuse()) return -1;
  return vasprintf(out, fmt, ap);
}

int kt_tt_asprintf(char **out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = kt_tt_vasprintf(out, fmt, ap);
  va_end(ap);
  return r;
}
