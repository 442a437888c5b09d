/* CRC-32 (the IEEE polynomial of zlib, gzip and the AWS event stream), as
 * zlib's crc32(): kn_crc32(0, p, n) is the CRC of p[0..n), and
 * kn_crc32(kn_crc32(0, a, n), b, m) that of a followed by b.  On x86-64
 * CPUs with carry-less multiplication (PCLMULQDQ) the bulk is folded 64
 * bytes at a time, several times faster than zlib's tables; elsewhere it
 * is zlib's crc32(). */
#ifndef KN_UTIL_CRC32_H
#define KN_UTIL_CRC32_H

#include <stddef.h>
#include <stdint.h>

uint32_t kn_crc32(uint32_t crc, const void *p, size_t n);
/* zlib's crc32() alone, whatever the CPU (for tests and benchmarks). */
uint32_t kn_crc32_zlib(uint32_t crc, const void *p, size_t n);

#endif
