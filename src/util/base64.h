/* Standard base64 (RFC 4648 section 4, with padding), as Kinesis uses for
 * record data in JSON. */
#ifndef KN_UTIL_BASE64_H
#define KN_UTIL_BASE64_H

#include <stddef.h>

/* kn_base64_encoded_len() and kn_base64_encode(), public. */
#include "kn/base64.h"

/* Upper bound of the decoded length of n input characters. */
static inline size_t kn_base64_decoded_max(size_t n) { return n / 4 * 3 + 3; }

/* Decodes n characters.  dst may equal src or start before it (in-place
 * decoding: the output never overtakes the input), otherwise they must
 * not overlap; dst needs kn_base64_decoded_max(n) bytes, and its bytes
 * past the decoded length may be overwritten too.  Strict: the length must
 * be a multiple of 4, padding only at the end, no white space.  Returns
 * the decoded length, or -1 if the input is not valid base64 (dst then
 * holds anything). */
long kn_base64_decode(void *dst, const char *src, size_t n);

/* In-place decoding of the start of a string whose end is not known yet
 * (base64 inside JSON, found by the same pass): decodes, at s, the longest
 * run of whole blocks of alphabet characters at the start of s[0..avail),
 * with the vector decoder, and returns how many characters it took (a
 * multiple of 4, possibly 0; always 0 without a vector decoder).  Nothing
 * is judged: the caller decodes the rest of the string with
 * kn_base64_decode into s + ret / 4 * 3, which is then valid exactly when
 * the whole string was. */
size_t kn_base64_decode_prefix(char *s, size_t avail);

/* kn_base64_encode and kn_base64_decode use the fastest implementation
 * the CPU supports, chosen at the first call; all give the same results.
 * The others are reachable for tests and benchmarks. */
typedef enum kn_base64_impl {
  KN_BASE64_SCALAR,
  KN_BASE64_SSSE3, /* x86 */
  KN_BASE64_AVX2   /* x86 */
} kn_base64_impl_t;

kn_base64_impl_t kn_base64_impl(void);
int kn_base64_impl_supported(kn_base64_impl_t impl);
const char *kn_base64_impl_name(kn_base64_impl_t impl);
/* As kn_base64_decode, with impl, which must be supported. */
long kn_base64_decode_with(kn_base64_impl_t impl, void *dst, const char *src,
                           size_t n);
/* As kn_base64_encode, with impl, which must be supported. */
size_t kn_base64_encode_with(kn_base64_impl_t impl, char *dst, const void *src,
                             size_t n);

#endif
