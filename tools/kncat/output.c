#include "output.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kn/base64.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

int kc_out_init(kc_out_t *o, int fd, size_t flush_at) {
  memset(o, 0, sizeof(*o));
  o->fd = fd;
  o->flush_at = flush_at;
  return kc_out_reserve(o, flush_at + 64 * 1024);
}

void kc_out_free(kc_out_t *o) {
  free(o->buf);
  o->buf = NULL;
  o->len = o->cap = 0;
}

int kc_out_reserve(kc_out_t *o, size_t n) {
  if (o->cap - o->len >= n) return 0;
  size_t cap = o->cap ? o->cap : 4096;
  while (cap - o->len < n) cap *= 2;
  char *b = realloc(o->buf, cap);
  if (!b) return -1;
  o->buf = b;
  o->cap = cap;
  return 0;
}

int kc_out_flush(kc_out_t *o) {
  size_t off = 0;
  if (o->error) {
    o->len = 0;
    return -1;
  }
  while (off < o->len) {
    ssize_t w = write(o->fd, o->buf + off, o->len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      o->error = errno;
      o->len = 0;
      return -1;
    }
    off += (size_t)w;
  }
  o->len = 0;
  return 0;
}

int kc_out_reader_gone(kc_out_t *o) {
  if (o->error) return o->error == EPIPE;
  /* With no events asked for, poll(2) still reports POLLERR on the write
   * end of a pipe without readers and POLLHUP on a closed socket. */
  struct pollfd pfd = {o->fd, 0, 0};
  if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLERR | POLLHUP))) {
    o->error = EPIPE;
    o->len = 0;
    return 1;
  }
  return 0;
}

int kc_out_write(kc_out_t *o, const void *p, size_t n) {
  if (o->error) return -1;
  if (kc_out_reserve(o, n)) return -1;
  memcpy(o->buf + o->len, p, n);
  o->len += n;
  return 0;
}

/* ---- UTF-8 and JSON ---- */

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static inline uint64_t load8(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* High bit set in some byte iff the 8 bytes hold a byte that JSON must
 * escape (< 0x20, '"', '\\') or a non-ASCII byte.  Exact as an "any"
 * test: borrows can only come from bytes that are themselves flagged. */
static inline uint64_t json_attention(uint64_t v) {
  uint64_t ctl = (v - ONES * 0x20) & ~v;
  uint64_t q = v ^ (ONES * '"');
  uint64_t b = v ^ (ONES * '\\');
  q = (q - ONES) & ~q;
  b = (b - ONES) & ~b;
  return (ctl | q | b | v) & HIGHS;
}

/* Length of the valid UTF-8 sequence at p (2 to 4), or 0.  Strict as
 * RFC 3629 table 3.7: no overlongs, no surrogates, at most U+10FFFF.
 * p[0] is known to be >= 0x80. */
static inline size_t utf8_seq(const uint8_t *p, const uint8_t *end) {
  uint8_t c = p[0];
  size_t avail = (size_t)(end - p);
  if (c < 0xC2) return 0; /* stray continuation or overlong lead */
  if (c < 0xE0) return avail >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
  if (c < 0xF0) {
    if (avail < 3) return 0;
    uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
  }
  if (c < 0xF5) {
    if (avail < 4) return 0;
    uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 &&
                   (p[3] & 0xC0) == 0x80
               ? 4
               : 0;
  }
  return 0;
}

int kc_utf8_valid(const uint8_t *s, size_t n) {
  const uint8_t *end = s + n;
  while (s < end) {
#ifdef __SSE2__
    if (end - s >= 16 &&
        !_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)s))) {
      s += 16;
      continue;
    }
#endif
    if (end - s >= 8 && !(load8(s) & HIGHS)) {
      s += 8;
      continue;
    }
    if (*s < 0x80) {
      s++;
      continue;
    }
    size_t k = utf8_seq(s, end);
    if (!k) return 0;
    s += k;
  }
  return 1;
}

static const char hexdig[] = "0123456789abcdef";

/* If the valid UTF-8 sequence s (k bytes) is a C1 control or a direction
 * override, which terminals act on (of U+0080..U+009F, U+200E..U+206F),
 * writes it as a \\u escape and returns the end; else NULL. */
static inline char *escape_control(char *d, const uint8_t *s, size_t k) {
  uint8_t c = s[0];
  if ((k == 2 && c == 0xC2 && s[1] < 0xA0) ||
      (k == 3 && c == 0xE2 &&
       ((s[1] == 0x80 &&
         (s[2] == 0x8E || s[2] == 0x8F || (s[2] >= 0xAA && s[2] <= 0xAE))) ||
        (s[1] == 0x81 && s[2] >= 0xA6 && s[2] <= 0xA9)))) {
    unsigned u =
        k == 2 ? s[1] : 0x2000u | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    memcpy(d, "\\u", 2);
    for (int i = 0; i < 4; i++) d[2 + i] = hexdig[(u >> (12 - 4 * i)) & 15];
    return d + 6;
  }
  return NULL;
}

/* Escapes one character at s (a byte, or a whole UTF-8 sequence); NULL if
 * s starts no valid sequence. */
static inline char *escape_unit(char *d, const uint8_t **sp,
                                const uint8_t *end) {
  const uint8_t *s = *sp;
  uint8_t c = *s;
  if (c >= 0x80) {
    size_t k = utf8_seq(s, end);
    if (!k) return NULL;
    *sp = s + k;
    char *e = escape_control(d, s, k);
    if (e) return e;
    memcpy(d, s, k); /* JSON carries UTF-8 as is */
    return d + k;
  }
  *sp = s + 1;
  if (c >= 0x20 && c != '"' && c != '\\') {
    *d = (char)c;
    return d + 1;
  }
  *d++ = '\\';
  switch (c) {
    case '"':
      *d++ = '"';
      break;
    case '\\':
      *d++ = '\\';
      break;
    case '\n':
      *d++ = 'n';
      break;
    case '\r':
      *d++ = 'r';
      break;
    case '\t':
      *d++ = 't';
      break;
    case '\b':
      *d++ = 'b';
      break;
    case '\f':
      *d++ = 'f';
      break;
    default:
      memcpy(d, "u00", 3);
      d[3] = hexdig[c >> 4];
      d[4] = hexdig[c & 15];
      d += 5;
  }
  return d;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define KC_X86_AVX2 1
#include <immintrin.h>

/* The plain ASCII run at the start of s, copied to d 32 bytes at a time
 * while 32 remain; returns its length (a multiple of 32 when no byte
 * needed care).  Stores whole blocks, as the SSE2 loop below. */
__attribute__((target("avx2"))) static size_t plain_avx2(char *d,
                                                         const uint8_t *s,
                                                         size_t n) {
  const __m256i quote = _mm256_set1_epi8('"'), bslash = _mm256_set1_epi8('\\'),
                space = _mm256_set1_epi8(0x20);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
    __m256i bad = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, quote),
                                                  _mm256_cmpeq_epi8(v, bslash)),
                                  _mm256_cmpgt_epi8(space, v));
    _mm256_storeu_si256((__m256i *)(void *)(d + i), v);
    unsigned mask = (unsigned)_mm256_movemask_epi8(bad);
    if (mask) return i + (unsigned)__builtin_ctz(mask);
  }
  return i;
}

static int have_avx2(void) {
  static int avx2 = -1; /* kncat formats on one thread */
  if (avx2 < 0) {
    __builtin_cpu_init();
    avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
  }
  return avx2;
}
#endif

char *kc_json_escape(char *d, const uint8_t *s, size_t n) {
  const uint8_t *end = s + n;
#ifdef KC_X86_AVX2
  int avx2 = have_avx2();
#endif
  for (;;) {
    /* Plain ASCII is copied as it is, 32, 16 or 8 bytes at a time; a byte
     * that needs care costs one trip through escape_unit(). */
#ifdef KC_X86_AVX2
    if (avx2 && end - s >= 32) {
      size_t plain = plain_avx2(d, s, (size_t)(end - s));
      d += plain;
      s += plain;
      if (end - s >= 32) goto unit; /* stopped at a byte that needs care */
    }
#endif
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  space = _mm_set1_epi8(0x20);
    while (end - s >= 16) {
      __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
      /* Signed compare: bytes >= 0x80 are negative, so "< 0x20" flags
       * control characters and non-ASCII bytes alike. */
      __m128i bad = _mm_or_si128(
          _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
          _mm_cmplt_epi8(v, space));
      unsigned mask = (unsigned)_mm_movemask_epi8(bad);
      /* Stored whole even when only its start is plain: the caller's
       * room of 6 * n bytes covers it, and the rest is overwritten. */
      _mm_storeu_si128((__m128i *)(void *)d, v);
      if (mask) {
        unsigned plain = (unsigned)__builtin_ctz(mask);
        d += plain;
        s += plain;
        goto unit;
      }
      d += 16;
      s += 16;
    }
#endif
    while (end - s >= 8) {
      uint64_t v = load8(s);
      if (json_attention(v)) break;
      memcpy(d, &v, 8);
      d += 8;
      s += 8;
    }
    if (s == end) return d;
#if defined(__SSE2__) || defined(KC_X86_AVX2)
  unit:
#endif
    d = escape_unit(d, &s, end);
    if (!d) return NULL;
  }
}

/* ---- records ---- */

static inline char *put_u64(char *d, uint64_t v) {
  char tmp[20];
  int i = 20;
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  memcpy(d, tmp + i, (size_t)(20 - i));
  return d + (20 - i);
}

#define LIT(d, s) (memcpy((d), (s), sizeof(s) - 1), (d) + sizeof(s) - 1)

char *kc_json_text(char *d, const uint8_t *s, size_t n, const char *repl) {
  size_t repl_len = strlen(repl);
  for (;;) {
    char *e = kc_json_escape(d, s, n);
    if (e) return e;
    /* Find how much was valid, copy that, replace one byte, go on: each
     * byte is looked at a bounded number of times, whatever the input. */
    size_t ok = 0;
    while (ok < n) {
      size_t k = s[ok] < 0x80 ? 1 : utf8_seq(s + ok, s + n);
      if (!k) break;
      ok += k;
    }
    d = kc_json_escape(d, s, ok);
    memcpy(d, repl, repl_len);
    d += repl_len;
    s += ok + 1;
    n -= ok + 1;
  }
}

size_t kc_term_text(char *dst, const void *src, size_t n) {
  const uint8_t *s = src, *end = s + n;
  char *d = dst;
  while (s < end) {
    uint8_t c = *s;
    size_t k = c < 0x80 ? 1 : utf8_seq(s, end);
    char *e = k > 1 ? escape_control(d, s, k) : NULL;
    if (e) {
      d = e;
    } else if (k > 1 || (c >= 0x20 && c < 0x7F) || c == '\t') {
      memcpy(d, s, k);
      d += k;
    } else { /* controls, DEL, bytes that are not UTF-8 */
      k = 1;
      d[0] = '\\';
      d[1] = 'x';
      d[2] = hexdig[c >> 4];
      d[3] = hexdig[c & 15];
      d += 4;
    }
    s += k;
  }
  return (size_t)(d - dst);
}

/* Escapes text (keys, names); an invalid byte becomes U+FFFD so the line
 * stays valid JSON. */
static char *put_text(char *d, const char *text) {
  return kc_json_text(d, (const uint8_t *)text, strlen(text), "\xEF\xBF\xBD");
}

void kc_json_str(FILE *fp, const char *s) {
  if (!s) {
    fputs("null", fp);
    return;
  }
  char *buf = malloc(6 * strlen(s) + 3);
  if (!buf) {
    fputs("null", fp);
    return;
  }
  char *d = buf;
  *d++ = '"';
  d = put_text(d, s);
  *d++ = '"';
  fwrite(buf, 1, (size_t)(d - buf), fp);
  free(buf);
}

size_t kc_json_prefix_cap(const char *stream, const char *shard) {
  return 40 + 6 * (strlen(stream) + strlen(shard));
}

size_t kc_json_prefix(char *dst, size_t cap, const char *stream,
                      const char *shard) {
  if (cap < kc_json_prefix_cap(stream, shard)) return 0;
  char *d = dst;
  d = LIT(d, "{\"stream\":\"");
  d = put_text(d, stream);
  d = LIT(d, "\",\"shard\":\"");
  d = put_text(d, shard);
  d = LIT(d, "\",\"seq\":\"");
  return (size_t)(d - dst);
}

int kc_out_json_record(kc_out_t *o, const char *prefix, size_t prefix_len,
                       const kc_json_rec_t *r) {
  if (o->error) return -1;
  size_t seq_len = strlen(r->seq), key_len = strlen(r->key);
  size_t data_max = r->len * 6 > (r->len + 2) / 3 * 4 ? r->len * 6 : 4;
  if (kc_out_reserve(o, prefix_len + seq_len + 6 * key_len + data_max + 128))
    return -1;
  char *d = o->buf + o->len;
  memcpy(d, prefix, prefix_len);
  d += prefix_len;
  memcpy(d, r->seq, seq_len);
  d += seq_len;
  d = LIT(d, "\",\"subseq\":");
  d = put_u64(d, r->subseq);
  if (*r->key) {
    d = LIT(d, ",\"key\":\"");
    d = put_text(d, r->key);
    d = LIT(d, "\",\"ts\":");
  } else { /* written without a key, to a stream that places records */
    d = LIT(d, ",\"key\":null,\"ts\":");
  }
  if (r->ts_ms < 0) {
    *d++ = '-';
    d = put_u64(d, (uint64_t)0 - (uint64_t)r->ts_ms);
  } else {
    d = put_u64(d, (uint64_t)r->ts_ms);
  }
  char *data_at = d;
  d = LIT(d, ",\"data\":\"");
  char *e = kc_json_escape(d, r->data, r->len);
  if (e) {
    d = e;
  } else { /* not UTF-8: start the field again as base64 */
    d = LIT(data_at, ",\"data_b64\":\"");
    d += kn_base64_encode(d, r->data, r->len);
  }
  d = LIT(d, "\"}\n");
  o->len = (size_t)(d - o->buf);
  return kc_out_maybe_flush(o);
}

int kc_out_raw_record(kc_out_t *o, const char *key, const char *key_delim,
                      size_t key_delim_len, const void *data, size_t len,
                      const char *delim, size_t delim_len) {
  if (o->error) return -1;
  size_t key_len = key_delim ? strlen(key) : 0;
  if (kc_out_reserve(o, key_len + key_delim_len + len + delim_len)) return -1;
  char *d = o->buf + o->len;
  if (key_delim) {
    memcpy(d, key, key_len);
    memcpy(d + key_len, key_delim, key_delim_len);
    d += key_len + key_delim_len;
  }
  memcpy(d, data, len);
  memcpy(d + len, delim, delim_len);
  o->len = (size_t)(d + len + delim_len - o->buf);
  return kc_out_maybe_flush(o);
}
