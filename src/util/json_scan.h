/* A small validating JSON scanner for walking large documents without
 * building a tree: skip values, find where they start and end.  Pointers
 * in, pointers out; nothing is allocated.  Every function takes the end of
 * the input and returns NULL when the text is not valid JSON (RFC 8259)
 * there. */
#ifndef KN_UTIL_JSON_SCAN_H
#define KN_UTIL_JSON_SCAN_H

#include <stddef.h>

/* Nesting deeper than this is rejected (no recursion without bounds). */
#define KN_JSON_MAX_DEPTH 64

/* Skips white space; returns the first other byte, or end. */
const char *kn_json_ws(const char *p, const char *end);

/* p at the opening quote: returns the byte after the closing quote.
 * *escaped (may be NULL) is set non-zero if the string holds escapes,
 * i.e. its raw bytes are not its value. */
const char *kn_json_skip_string(const char *p, const char *end, int *escaped);

/* p at the first byte of any value (no leading white space): returns the
 * byte after it. */
const char *kn_json_skip_value(const char *p, const char *end);

/* p at '[': skips the array and counts its elements into *count. */
const char *kn_json_skip_array(const char *p, const char *end, size_t *count);

#endif
