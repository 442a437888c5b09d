/* Kinesis sequence numbers: decimal strings far wider than 64 bits (about
 * 56 digits today, up to 129 allowed by the API), compared as numbers.
 * Pure functions on buffers; no allocation. */
#ifndef KN_KINESIS_SEQNUM_H
#define KN_KINESIS_SEQNUM_H

#include <stddef.h>
#include <stdint.h>

/* The API's limit: "0|([1-9]\d{0,128})". */
#define KN_SEQNUM_MAX_DIGITS 129

/* Non-zero if s[0..n) is 1 to KN_SEQNUM_MAX_DIGITS decimal digits.
 * Leading zeros are tolerated (they do not change the value) but count
 * towards the length. */
int kn_seqnum_valid(const char *s, size_t n);

/* Compares two digit strings as unsigned integers: <0, 0, >0.  Leading
 * zeros are ignored, so "007" equals "7".  Strings holding other
 * characters are still ordered totally and deterministically (by their
 * significant length, then bytes), but the order only means something for
 * valid numbers. */
int kn_seqnum_cmp_n(const char *a, size_t an, const char *b, size_t bn);

/* As kn_seqnum_cmp_n on NUL-terminated strings; NULL sorts before any
 * string and equals NULL. */
int kn_seqnum_cmp(const char *a, const char *b);

/* Positions inside a shard: a sequence number and the index of a user
 * record inside an aggregated record (0 for plain records).  Ordered by
 * sequence number first. */
int kn_seqpos_cmp(const char *a_seq, uint64_t a_sub, const char *b_seq,
                  uint64_t b_sub);

#endif
