/* The failing allocator of torture builds (kt_torture.c). */
#ifndef KT_TORTURE_H
#define KT_TORTURE_H

#include <stdarg.h>
#include <stddef.h>

/* Counts from zero again; allocation number fail_at (from 1) will fail,
 * none when 0. */
void kt_tt_arm(long fail_at);
long kt_tt_count(void);   /* allocations since kt_tt_arm() */
long kt_tt_refused(void); /* of which refused */

/* What the library's renamed calls reach. */
void *kt_tt_malloc(size_t n);
void *kt_tt_calloc(size_t n, size_t m);
void *kt_tt_realloc(void *p, size_t n);
char *kt_tt_strdup(const char *s);
char *kt_tt_strndup(const char *s, size_t n);
int kt_tt_vasprintf(char **out, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
int kt_tt_asprintf(char **out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
