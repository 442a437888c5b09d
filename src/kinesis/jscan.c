#include "kinesis/jscan.h"

#include <stdlib.h>

#include "core/error.h"

const unsigned char kn_js_ws_tab[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

/* Bytes that end the fast scan of a text string: the quote, a backslash,
 * control characters (the terminator among them) and non-ASCII bytes. */
const unsigned char kn_js_stop_tab[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

int kn_js_init(kn_jscan_t *js, char *body, size_t len) {
  memset(js, 0, sizeof(*js));
  if (!body || body[len] != '\0') return -1;
  js->p = body;
  js->end = body + len;
  js->base = body;
  return 0;
}

int kn_js_finish(kn_jscan_t *js) {
  kn_js_ws(js);
  if (js->p != js->end) KN_JS_FAIL(js, "unexpected data after the document");
  return 0;
}

kn_error_t *kn_js_error(const kn_jscan_t *js, const char *what) {
  if (js->nomem) return kn_error_new(KN_ERR__NOMEM, "%s: out of memory", what);
  if (!js->base)
    return kn_error_new(KN_ERR__INVALID_ARG, "%s: body not terminated", what);
  return kn_error_new(KN_ERR__BAD_MSG, "malformed %s: %s at byte %zu of %zu",
                      what, js->err ? js->err : "invalid JSON",
                      (size_t)((js->at ? js->at : js->p) - js->base),
                      (size_t)(js->end - js->base));
}

int kn_js_fail(kn_jscan_t *js, const char *at, const char *msg) {
  if (!js->err) {
    js->err = msg;
    js->at = at;
  }
  return -1;
}

/* ---- Strings ---- */

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Four hex digits at s; each is checked before the next is read, so the
 * terminator stops it. */
static int hex4(const char *s, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(s[i]);
    if (h < 0) return -1;
    v = v << 4 | (unsigned)h;
  }
  *out = v;
  return 0;
}

static char *put_utf8(char *w, unsigned cp) {
  if (cp < 0x80) {
    *w++ = (char)cp;
  } else if (cp < 0x800) {
    *w++ = (char)(0xC0 | cp >> 6);
    *w++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *w++ = (char)(0xE0 | cp >> 12);
    *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
    *w++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *w++ = (char)(0xF0 | cp >> 18);
    *w++ = (char)(0x80 | (cp >> 12 & 0x3F));
    *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
    *w++ = (char)(0x80 | (cp & 0x3F));
  }
  return w;
}

/* Well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF);
 * with no_ctl, also no control characters below 0x20. */
int kn_js_utf8_ok(const unsigned char *s, size_t n, int no_ctl) {
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  size_t i = 0;
  while (i < n) {
    /* Eight plain ASCII bytes at a time: no high bit set and, when asked,
     * none below 0x20 (the classic "has byte less than" test). */
    if (n - i >= 8) {
      uint64_t w;
      memcpy(&w, s + i, 8);
      uint64_t bad = w & highs;
      if (no_ctl) bad |= (w - ones * 0x20) & ~w & highs;
      if (!bad) {
        i += 8;
        continue;
      }
    }
    unsigned c = s[i];
    if (c < 0x80) {
      if (no_ctl && c < 0x20) return 0;
      i++;
      continue;
    }
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return 0;
    }
    if (n - i - 1 < need) return 0;
    if (s[i + 1] < lo || s[i + 1] > hi) return 0;
    for (size_t k = 2; k <= need; k++)
      if ((s[i + k] & 0xC0) != 0x80) return 0;
    i += need + 1;
  }
  return 1;
}

/* Slow path of kn_js_str: the content from r on holds a backslash.
 * Resolves escapes by writing over the text itself (output never outruns
 * input); lone surrogates become U+FFFD. */
int kn_js_unescape(kn_jscan_t *js, char *b, char *r, char **s, size_t *n,
                   int text) {
  char *w = r;
  for (;;) {
    unsigned char c = (unsigned char)*r;
    if (c == '"') break;
    if (c == '\\') {
      char e = r[1];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          *w++ = e;
          r += 2;
          continue;
        case 'b':
          *w++ = '\b';
          r += 2;
          continue;
        case 'f':
          *w++ = '\f';
          r += 2;
          continue;
        case 'n':
          *w++ = '\n';
          r += 2;
          continue;
        case 'r':
          *w++ = '\r';
          r += 2;
          continue;
        case 't':
          *w++ = '\t';
          r += 2;
          continue;
        case 'u': {
          unsigned cp, lo;
          if (hex4(r + 2, &cp)) return kn_js_fail(js, r, "invalid \\u escape");
          r += 6;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (r[0] == '\\' && r[1] == 'u' && hex4(r + 2, &lo) == 0 &&
                lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              r += 6;
            } else {
              cp = 0xFFFD;
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            cp = 0xFFFD;
          }
          w = put_utf8(w, cp);
          continue;
        }
        default:
          return kn_js_fail(js, r, "invalid escape in string");
      }
    }
    if (c < 0x20)
      return kn_js_fail(
          js, r,
          r == js->end ? "unterminated string" : "control character in string");
    *w++ = (char)c;
    r++;
  }
  *s = b;
  *n = (size_t)(w - b);
  js->p = r + 1;
  if (text && !kn_js_utf8_ok((const unsigned char *)b, *n, 0))
    return kn_js_fail(js, b, "invalid UTF-8 in string");
  return 0;
}

/* ---- Numbers ---- */

#define MANT_LIMIT ((UINT64_MAX - 9) / 10)
#define EXP_LIMIT 100000

int kn_js_num(kn_jscan_t *js, kn_jsnum_t *o) {
  const char *p = js->p;
  uint64_t m = 0;
  long exp = 0;
  int neg = 0;
  if (*p == '-') {
    neg = 1;
    p++;
  }
  if (*p == '0') {
    p++;
  } else if (kn_js_digit(*p)) {
    for (; kn_js_digit(*p); p++) {
      if (m <= MANT_LIMIT)
        m = m * 10 + (uint64_t)(*p - '0');
      else
        exp++; /* digits past the precision only scale the value */
    }
  } else {
    KN_JS_FAIL(js, "invalid number");
  }
  if (*p == '.') {
    p++;
    if (!kn_js_digit(*p)) return kn_js_fail(js, p, "invalid number");
    for (; kn_js_digit(*p); p++) {
      if (m <= MANT_LIMIT) {
        m = m * 10 + (uint64_t)(*p - '0');
        exp--;
      }
    }
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    int eneg = 0;
    if (*p == '+' || *p == '-') eneg = *p++ == '-';
    if (!kn_js_digit(*p)) return kn_js_fail(js, p, "invalid number exponent");
    long e = 0;
    for (; kn_js_digit(*p); p++)
      if (e < EXP_LIMIT) e = e * 10 + (*p - '0');
    exp += eneg ? -e : e;
  }
  o->mant = m;
  o->exp = exp;
  o->neg = neg;
  js->p = (char *)p;
  return 0;
}

/* value * 10^shift as an integer, rounded half away from zero; -1 when it
 * does not fit in int64_t. */
int kn_js_num_to_i64(const kn_jsnum_t *n, int shift, int64_t *out) {
  uint64_t m = n->mant;
  long e = n->exp + shift;
  if (m == 0) {
    *out = 0;
    return 0;
  }
  if (e > 0) {
    if (e > 19) return -1;
    for (; e > 0; e--) {
      if (m > UINT64_MAX / 10) return -1;
      m *= 10;
    }
  } else if (e < 0) {
    if (e < -19) {
      m = 0; /* below 10^19 / 10^20: rounds to zero */
    } else {
      uint64_t div = 1;
      for (long k = 0; k < -e; k++) div *= 10;
      uint64_t q = m / div, r = m % div;
      m = q + (r >= div - r);
    }
  }
  if (m > (uint64_t)INT64_MAX + (uint64_t)n->neg) return -1;
  *out = n->neg ? (int64_t)(0 - m) : (int64_t)m;
  return 0;
}

int kn_js_i64(kn_jscan_t *js, int shift, int64_t *out) {
  kn_jsnum_t n;
  const char *at = js->p;
  if (!(*js->p == '-' || kn_js_digit(*js->p)))
    KN_JS_FAIL(js, "expected a number");
  if (kn_js_num(js, &n)) return -1;
  if (kn_js_num_to_i64(&n, shift, out))
    return kn_js_fail(js, at, "number out of range");
  return 0;
}

/* ---- Other values ---- */

int kn_js_lit(kn_jscan_t *js, const char *s, size_t n) {
  if ((size_t)(js->end - js->p) < n || memcmp(js->p, s, n) != 0)
    KN_JS_FAIL(js, "invalid literal");
  js->p += n;
  return 0;
}

int kn_js_obj_open(kn_jscan_t *js) {
  if (*js->p != '{') KN_JS_FAIL(js, "expected an object");
  if (++js->depth > KN_JS_MAX_DEPTH) KN_JS_FAIL(js, "nesting too deep");
  js->p++;
  kn_js_ws(js);
  return 0;
}

int kn_js_arr_open(kn_jscan_t *js) {
  if (*js->p != '[') KN_JS_FAIL(js, "expected an array");
  if (++js->depth > KN_JS_MAX_DEPTH) KN_JS_FAIL(js, "nesting too deep");
  js->p++;
  kn_js_ws(js);
  return 0;
}

int kn_js_skip(kn_jscan_t *js) {
  int first = 1, rc;
  char *k;
  size_t kn;
  switch (*js->p) {
    case '"':
      return kn_js_str(js, &k, &kn, 1);
    case '{':
      if (kn_js_obj_open(js)) return -1;
      while ((rc = kn_js_obj_next(js, &first, &k, &kn)) > 0)
        if (kn_js_skip(js)) return -1;
      js->depth--;
      return rc;
    case '[':
      if (kn_js_arr_open(js)) return -1;
      while ((rc = kn_js_arr_next(js, &first)) > 0)
        if (kn_js_skip(js)) return -1;
      js->depth--;
      return rc;
    case 't':
      return kn_js_lit(js, "true", 4);
    case 'f':
      return kn_js_lit(js, "false", 5);
    case 'n':
      return kn_js_lit(js, "null", 4);
    default: {
      kn_jsnum_t n;
      if (*js->p == '-' || kn_js_digit(*js->p)) return kn_js_num(js, &n);
      KN_JS_FAIL(js, *js->p || js->p < js->end ? "unexpected character"
                                               : "unexpected end of input");
    }
  }
}
