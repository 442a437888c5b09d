/* A strict JSON scanner for the response decoders on hot paths (records,
 * PutRecords results).  It walks a writable, '\0'-terminated body and
 * resolves string escapes where they lie, so decoders can point into the
 * body instead of copying.  The terminator ends every scan: no token
 * contains a '\0', and one before the end is rejected like any stray
 * byte.  Pure; no allocation.
 *
 * Decoders drive it member by member:
 *
 *   if (kn_js_obj_open(js)) return -1;
 *   while ((rc = kn_js_obj_next(js, &first, &k, &kn)) > 0)
 *     if (KN_JS_KEY_IS(k, kn, "Name")) ... else if (kn_js_skip(js)) ...
 *   js->depth--;
 *
 * Every failure records its first cause and position for kn_js_error(). */
#ifndef KN_KINESIS_JSCAN_H
#define KN_KINESIS_JSCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kn/error.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Deepest nesting of arrays and objects accepted (deeper input is
 * rejected rather than risking the stack). */
#define KN_JS_MAX_DEPTH 64

typedef struct kn_jscan {
  char *p; /* cursor */
  char *end;
  const char *base;
  const char *err; /* static description of the first failure */
  const char *at;
  int depth;
  int nomem; /* set by decoders when an allocation failed */
} kn_jscan_t;

/* Starts a scan of body[0..len); body[len] must be '\0' (returns -1 if
 * not). */
int kn_js_init(kn_jscan_t *js, char *body, size_t len);
/* After the top-level value: only white space may follow. */
int kn_js_finish(kn_jscan_t *js);
/* The error of a failed scan: KN_ERR__NOMEM, or KN_ERR__BAD_MSG saying
 * what went wrong where; what names the document ("GetRecords
 * response"). */
kn_error_t *kn_js_error(const kn_jscan_t *js, const char *what);

/* Records a failure at `at`; returns -1. */
int kn_js_fail(kn_jscan_t *js, const char *at, const char *msg);
#define KN_JS_FAIL(js, msg) return kn_js_fail((js), (js)->p, (msg))

#define KN_JS_KEY_IS(k, kn, lit) \
  ((kn) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

extern const unsigned char kn_js_ws_tab[256];
extern const unsigned char kn_js_stop_tab[256];

static inline void kn_js_ws(kn_jscan_t *js) {
  while (kn_js_ws_tab[(unsigned char)*js->p]) js->p++;
}

static inline int kn_js_digit(char c) { return c >= '0' && c <= '9'; }

/* Well-formed UTF-8; with no_ctl, also no bytes below 0x20. */
int kn_js_utf8_ok(const unsigned char *s, size_t n, int no_ctl);
/* The escape-resolving path of kn_js_str, from the first backslash r. */
int kn_js_unescape(kn_jscan_t *js, char *b, char *r, char **s, size_t *n,
                   int text);

/* The rest of a string whose content starts at b, the cursor being at
 * its opening quote: *s and *n get the content from b on, escapes
 * resolved in place (lone surrogates become U+FFFD), and the cursor moves
 * past the closing quote.  Syntax only: the end is found with memchr,
 * which is fast for long strings such as base64 record data. */
static inline int kn_js_str_rest(kn_jscan_t *js, char *b, char **s, size_t *n) {
  char *q = memchr(b, '"', (size_t)(js->end - b));
  if (!q) KN_JS_FAIL(js, "unterminated string");
  char *bs = memchr(b, '\\', (size_t)(q - b));
  if (bs) return kn_js_unescape(js, b, bs, s, n, 0);
  *s = b;
  *n = (size_t)(q - b);
  js->p = q + 1;
  return 0;
}

/* Where the plain start of a string at b ends: the first quote,
 * backslash, control or non-ASCII byte (the terminator stops it). */
static inline const unsigned char *kn_js_plain_end(const kn_jscan_t *js,
                                                   const char *b) {
  const unsigned char *q = (const unsigned char *)b;
#ifdef __SSE2__
  /* Sixteen bytes at a time while they lie inside the body: sequence
   * numbers, keys and member names are mostly longer than a few bytes. */
  const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                space = _mm_set1_epi8(0x20);
  while (js->end - (const char *)q >= 16) {
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
    /* Signed compare: bytes >= 0x80 are negative, below 0x20 too. */
    __m128i stop = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
        _mm_cmplt_epi8(v, space));
    unsigned m = (unsigned)_mm_movemask_epi8(stop);
    if (m) return q + __builtin_ctz(m);
    q += 16;
  }
#endif
  while (!kn_js_stop_tab[*q]) q++;
  return q;
}

/* The string at the cursor (a '"'): *s and *n get its content with
 * escapes resolved in place (lone surrogates become U+FFFD).  text: check
 * that it is UTF-8 without raw control characters; without it only the
 * syntax is checked (kn_js_str_rest). */
static inline int kn_js_str(kn_jscan_t *js, char **s, size_t *n, int text) {
  char *b = js->p + 1;
  if (!text) return kn_js_str_rest(js, b, s, n);
  /* Plain ASCII strings (names, keys, numbers) in one pass. */
  const unsigned char *q = kn_js_plain_end(js, b);
  if (*q == '"') {
    *s = b;
    *n = (size_t)((const char *)q - b);
    js->p = (char *)q + 1;
    return 0;
  }
  char *e = memchr(b, '"', (size_t)(js->end - b));
  if (!e) KN_JS_FAIL(js, "unterminated string");
  char *bs = memchr(b, '\\', (size_t)(e - b));
  if (bs) return kn_js_unescape(js, b, bs, s, n, text);
  *s = b;
  *n = (size_t)(e - b);
  js->p = e + 1;
  if (!kn_js_utf8_ok((const unsigned char *)b, *n, 1))
    return kn_js_fail(js, b, "invalid UTF-8 or control character in string");
  return 0;
}

/* A string value turned into a C string in place: the byte after its
 * content (at the latest its closing quote, already consumed) becomes the
 * terminator.  Fails if the value is not a string. */
static inline int kn_js_cstr(kn_jscan_t *js, char **s, size_t *n) {
  if (*js->p != '"') KN_JS_FAIL(js, "expected a string");
  if (kn_js_str(js, s, n, 1)) return -1;
  (*s)[*n] = '\0';
  return 0;
}

/* A JSON number: value = mant * 10^exp, keeping 19 significant digits. */
typedef struct kn_jsnum {
  uint64_t mant;
  long exp;
  int neg;
} kn_jsnum_t;

int kn_js_num(kn_jscan_t *js, kn_jsnum_t *o);
/* value * 10^shift as an integer, rounded half away from zero; -1 when it
 * does not fit in int64_t. */
int kn_js_num_to_i64(const kn_jsnum_t *n, int shift, int64_t *out);
/* A number value scaled by 10^shift (3 turns seconds into milliseconds). */
int kn_js_i64(kn_jscan_t *js, int shift, int64_t *out);

/* Consumes s (a literal of n bytes) or fails. */
int kn_js_lit(kn_jscan_t *js, const char *s, size_t n);

/* Consumes "null" if it is next and returns 1 (with *err -1 when the
 * literal is broken); 0 when another value follows. */
static inline int kn_js_null(kn_jscan_t *js, int *err) {
  *err = 0;
  if (*js->p != 'n') return 0;
  *err = kn_js_lit(js, "null", 4);
  return 1;
}

/* Skips any value, checking its syntax. */
int kn_js_skip(kn_jscan_t *js);

/* At '{' or '[': enters it (depth counted; the caller decrements after
 * the closing bracket). */
int kn_js_obj_open(kn_jscan_t *js);
int kn_js_arr_open(kn_jscan_t *js);

/* Iteration over an object's members, *first set to 1 before the first
 * call: 1 with the next name in *k (cursor at its value), 0 after the
 * closing '}', -1 on error. */
static inline int kn_js_obj_next(kn_jscan_t *js, int *first, char **k,
                                 size_t *kn) {
  if (*first) {
    *first = 0;
    if (*js->p == '}') {
      js->p++;
      return 0;
    }
  } else {
    kn_js_ws(js);
    if (*js->p == '}') {
      js->p++;
      return 0;
    }
    if (*js->p != ',') KN_JS_FAIL(js, "expected ',' or '}'");
    js->p++;
    kn_js_ws(js);
  }
  if (*js->p != '"') KN_JS_FAIL(js, "expected a member name");
  if (kn_js_str(js, k, kn, 1)) return -1;
  kn_js_ws(js);
  if (*js->p != ':') KN_JS_FAIL(js, "expected ':'");
  js->p++;
  kn_js_ws(js);
  return 1;
}

/* As kn_js_obj_next for arrays: 1 with the cursor at the next element. */
static inline int kn_js_arr_next(kn_jscan_t *js, int *first) {
  if (*first) {
    *first = 0;
    if (*js->p == ']') {
      js->p++;
      return 0;
    }
    return 1;
  }
  kn_js_ws(js);
  if (*js->p == ']') {
    js->p++;
    return 0;
  }
  if (*js->p != ',') KN_JS_FAIL(js, "expected ',' or ']'");
  js->p++;
  kn_js_ws(js);
  return 1;
}

#endif
