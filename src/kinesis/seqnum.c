#include "kinesis/seqnum.h"

#include <string.h>

#include "kn/client.h"

int kn_seqnum_valid(const char *s, size_t n) {
  if (!s || n == 0 || n > KN_SEQNUM_MAX_DIGITS) return 0;
  size_t i = 0;
  /* Eight digits at a time (every record carries a 56-digit number): a
   * byte is a digit when its high nibble is 3, and still 3 after adding
   * 6, which carries 0x3A..0x3F over into 0x4_. */
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    if ((w & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull ||
        ((w + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) !=
            0x3030303030303030ull)
      return 0;
  }
  for (; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

static size_t skip_zeros(const char *s, size_t n) {
  size_t i = 0;
  /* Keep the last digit so that "000" compares as "0". */
  while (i + 1 < n && s[i] == '0') i++;
  return i;
}

int kn_seqnum_cmp_n(const char *a, size_t an, const char *b, size_t bn) {
  size_t za = skip_zeros(a, an), zb = skip_zeros(b, bn);
  a += za;
  an -= za;
  b += zb;
  bn -= zb;
  /* Among digit strings without leading zeros, the longer one is larger;
   * equal lengths compare byte by byte, like the digits they are. */
  if (an != bn) return an < bn ? -1 : 1;
  if (an == 0) return 0;
  int c = memcmp(a, b, an);
  return (c > 0) - (c < 0);
}

int kn_seqnum_cmp(const char *a, const char *b) {
  if (!a || !b) return (a != NULL) - (b != NULL);
  return kn_seqnum_cmp_n(a, strlen(a), b, strlen(b));
}

int kn_seqpos_cmp(const char *a_seq, uint64_t a_sub, const char *b_seq,
                  uint64_t b_sub) {
  int c = kn_seqnum_cmp(a_seq, b_seq);
  if (c) return c;
  return (a_sub > b_sub) - (a_sub < b_sub);
}

int kn_sequence_number_cmp(const char *a, const char *b) {
  return kn_seqnum_cmp(a, b);
}
