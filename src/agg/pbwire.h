/* Protocol buffers wire format, the little of it the KPL schema needs:
 * varints, tags and length-delimited fields.  Readers never look past end. */
#ifndef KN_AGG_PBWIRE_H
#define KN_AGG_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

enum {
  KN_PB_VARINT = 0,
  KN_PB_I64 = 1,
  KN_PB_LEN = 2,
  KN_PB_SGROUP = 3,
  KN_PB_EGROUP = 4,
  KN_PB_I32 = 5
};

/* Reads a varint.  Returns 0 and advances *pp, or -1 if it runs past end or
 * does not fit 64 bits (more than 10 bytes, or a 10th byte above 1). */
static inline int kn_pb_read_varint(const uint8_t **pp, const uint8_t *end,
                                    uint64_t *out) {
  const uint8_t *p = *pp;
  if (p < end && *p < 0x80) { /* the common one-byte case */
    *out = *p;
    *pp = p + 1;
    return 0;
  }
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p == end) return -1;
    uint8_t c = *p++;
    if (shift == 63 && c > 1) return -1;
    v |= (uint64_t)(c & 0x7f) << shift;
    if (c < 0x80) {
      *out = v;
      *pp = p;
      return 0;
    }
  }
  return -1;
}

/* Steps over a varint of at most 10 bytes without reading its value, as
 * parsers do for unknown fields (overflowing bits go unnoticed).  Returns
 * 0, or -1 if it runs past end or is longer. */
static inline int kn_pb_skip_varint(const uint8_t **pp, const uint8_t *end) {
  const uint8_t *p = *pp;
  for (int i = 0; i < 10 && p < end; i++) {
    if (*p++ < 0x80) {
      *pp = p;
      return 0;
    }
  }
  return -1;
}

/* Bytes a varint of v takes (1..10). */
static inline size_t kn_pb_varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Writes v at p (room for kn_pb_varint_len(v) bytes); returns the end. */
static inline uint8_t *kn_pb_write_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* Size of a length-delimited field of n bytes with a one-byte tag (field
 * numbers below 16). */
static inline size_t kn_pb_len_field_size(size_t n) {
  return 1 + kn_pb_varint_len(n) + n;
}

#endif
