/* Standard base64 (RFC 4648 section 4, with padding), the encoding of
 * record data in Kinesis' JSON, for programs that print records as JSON. */
#ifndef KN_BASE64_H
#define KN_BASE64_H

#include <stddef.h>

#include "kn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Encoded length for n input bytes (no terminator). */
static inline size_t kn_base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

/* Writes kn_base64_encoded_len(n) characters to dst (no terminator) and
 * returns that length; with the fastest implementation the CPU supports
 * (SSSE3 or AVX2 on x86), chosen at the first call.  Thread-safe. */
KN_API size_t kn_base64_encode(char *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif
#endif
