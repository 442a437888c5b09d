#ifndef KN_UTIL_HEX_H
#define KN_UTIL_HEX_H

#include <stddef.h>

/* Lower-case hex of n bytes into dst (2n characters plus a terminator). */
void kn_hex_encode(char *dst, const void *src, size_t n);
/* Decodes 2n hex characters (either case) into n bytes; -1 if invalid. */
int kn_hex_decode(void *dst, const char *src, size_t n);

#endif
