/* Small string helpers.  Returned strings are malloc'ed and owned by the
 * caller (free()); NULL means out of memory. */
#ifndef KN_UTIL_STR_H
#define KN_UTIL_STR_H

#include <stdarg.h>
#include <stddef.h>

char *kn_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *kn_vasprintf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
char *kn_strndup(const char *s, size_t n);
/* strdup that accepts NULL (and returns NULL for it). */
char *kn_strdup0(const char *s);
/* Copies at most size-1 bytes and terminates; returns strlen(src). */
size_t kn_strlcpy(char *dst, const char *src, size_t size);
int kn_str_has_prefix(const char *s, const char *prefix);
/* Case-insensitive ASCII compare, for header names and booleans. */
int kn_str_ieq(const char *a, const char *b);
/* Parses "true/false/1/0/yes/no/on/off"; returns -1 if none of them. */
int kn_str_to_bool(const char *s);
/* Parses a whole base-10 integer in [min, max]; returns 0 on success. */
int kn_str_to_i64(const char *s, long long min, long long max, long long *out);
/* Trims ASCII white space at both ends, in place; returns s. */
char *kn_str_trim(char *s);

/* Unicode characters in s[0..n) if it is valid UTF-8 (shortest forms,
 * no surrogates, at most U+10FFFF), else -1. */
long kn_utf8_count(const char *s, size_t n);
/* Binary search in v, n elements of `size` bytes sorted (strcmp) by the
 * string pointer found at byte offset `off` of each: the index of key,
 * or where it would be inserted (*found then 0). */
size_t kn_sorted_find(const void *v, size_t n, size_t size, size_t off,
                      const char *key, int *found);

#endif
