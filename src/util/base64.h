/* Standard base64 (RFC 4648 section 4, with padding), as Kinesis uses for
 * record data in JSON. */
#ifndef KN_UTIL_BASE64_H
#define KN_UTIL_BASE64_H

#include <stddef.h>

/* Encoded length for n input bytes (no terminator). */
static inline size_t kn_base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }
/* Upper bound of the decoded length of n input characters. */
static inline size_t kn_base64_decoded_max(size_t n) { return n / 4 * 3 + 3; }

/* Writes kn_base64_encoded_len(n) characters to dst (no terminator);
 * returns that length. */
size_t kn_base64_encode(char *dst, const void *src, size_t n);

/* Decodes n characters.  dst may equal src (in-place decoding), otherwise
 * they must not overlap; dst needs kn_base64_decoded_max(n) bytes.
 * Strict: the length must be a multiple of 4, padding only at the end, no
 * white space.  Returns the decoded length, or -1 if the input is not
 * valid base64. */
long kn_base64_decode(void *dst, const char *src, size_t n);

#endif
