#include "kinesis/decode_records.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/seqnum.h"
#include "kinesis/shard.h"
#include "util/base64.h"

/* The body ends with a '\0' that no JSON token contains, so every scan
 * stops there without checking the end pointer; a '\0' before the end is
 * rejected the same way (JSON text never holds one). */
typedef struct dec {
  char *p; /* cursor */
  char *end;
  const char *base;
  const char *err; /* static description of the first failure */
  const char *at;
  int depth;
  int nomem;
} dec_t;

static int fail_at(dec_t *d, const char *at, const char *msg) {
  if (!d->err) {
    d->err = msg;
    d->at = at;
  }
  return -1;
}
#define FAIL(d, msg) return fail_at((d), (d)->p, (msg))

static const unsigned char ws_tab[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1,
                                          ['\r'] = 1};

static inline void skip_ws(dec_t *d) {
  while (ws_tab[(unsigned char)*d->p]) d->p++;
}

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

#define KEY_IS(k, kn, lit) \
  ((kn) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

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
static int utf8_ok(const unsigned char *s, size_t n, int no_ctl) {
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

/* Slow path of parse_str: the content from r on holds a backslash.
 * Resolves escapes by writing over the text itself (output never outruns
 * input); lone surrogates become U+FFFD. */
static int unescape(dec_t *d, char *b, char *r, char **s, size_t *n,
                    int text) {
  char *w = r;
  for (;;) {
    unsigned char c = (unsigned char)*r;
    if (c == '"') break;
    if (c == '\\') {
      char e = r[1];
      switch (e) {
        case '"': case '\\': case '/': *w++ = e; r += 2; continue;
        case 'b': *w++ = '\b'; r += 2; continue;
        case 'f': *w++ = '\f'; r += 2; continue;
        case 'n': *w++ = '\n'; r += 2; continue;
        case 'r': *w++ = '\r'; r += 2; continue;
        case 't': *w++ = '\t'; r += 2; continue;
        case 'u': {
          unsigned cp, lo;
          if (hex4(r + 2, &cp)) return fail_at(d, r, "invalid \\u escape");
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
          return fail_at(d, r, "invalid escape in string");
      }
    }
    if (c < 0x20)
      return fail_at(d, r, r == d->end ? "unterminated string"
                                       : "control character in string");
    *w++ = (char)c;
    r++;
  }
  *s = b;
  *n = (size_t)(w - b);
  d->p = r + 1;
  if (text && !utf8_ok((const unsigned char *)b, *n, 0))
    return fail_at(d, b, "invalid UTF-8 in string");
  return 0;
}

/* Bytes that end the fast scan of a text string: the quote, a backslash,
 * control characters (the terminator among them) and non-ASCII bytes. */
static const unsigned char stop_tab[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

/* The string at d->p (a '"'): *s and *n get its content with escapes
 * resolved in place.  text: check it is UTF-8 without raw control
 * characters (record data skips this: base64 is checked instead, and
 * memchr finds the end of long strings faster than a byte loop). */
static inline int parse_str(dec_t *d, char **s, size_t *n, int text) {
  char *b = d->p + 1;
  if (text) {
    /* Short plain ASCII strings (names, keys, numbers) in one pass. */
    const unsigned char *q = (const unsigned char *)b;
    while (!stop_tab[*q]) q++;
    if (*q == '"') {
      *s = b;
      *n = (size_t)((const char *)q - b);
      d->p = (char *)q + 1;
      return 0;
    }
  }
  char *q = memchr(b, '"', (size_t)(d->end - b));
  if (!q) FAIL(d, "unterminated string");
  char *bs = memchr(b, '\\', (size_t)(q - b));
  if (bs) return unescape(d, b, bs, s, n, text);
  *s = b;
  *n = (size_t)(q - b);
  d->p = q + 1;
  if (text && !utf8_ok((const unsigned char *)b, *n, 1))
    return fail_at(d, b, "invalid UTF-8 or control character in string");
  return 0;
}

/* A string value turned into a C string in place: the byte after its
 * content (at the latest its closing quote, already consumed) becomes
 * the terminator. */
static int parse_cstr(dec_t *d, char **s, size_t *n) {
  if (*d->p != '"') FAIL(d, "expected a string");
  if (parse_str(d, s, n, 1)) return -1;
  (*s)[*n] = '\0';
  return 0;
}

/* ---- Numbers ---- */

typedef struct num {
  uint64_t mant; /* up to 19 significant digits */
  long exp;      /* value = mant * 10^exp */
  int neg;
} num_t;

#define MANT_LIMIT ((UINT64_MAX - 9) / 10)
#define EXP_LIMIT 100000

static int parse_num(dec_t *d, num_t *o) {
  const char *p = d->p;
  uint64_t m = 0;
  long exp = 0;
  int neg = 0;
  if (*p == '-') {
    neg = 1;
    p++;
  }
  if (*p == '0') {
    p++;
  } else if (is_digit(*p)) {
    for (; is_digit(*p); p++) {
      if (m <= MANT_LIMIT)
        m = m * 10 + (uint64_t)(*p - '0');
      else
        exp++; /* digits past the precision only scale the value */
    }
  } else {
    FAIL(d, "invalid number");
  }
  if (*p == '.') {
    p++;
    if (!is_digit(*p)) return fail_at(d, p, "invalid number");
    for (; is_digit(*p); p++) {
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
    if (!is_digit(*p)) return fail_at(d, p, "invalid number exponent");
    long e = 0;
    for (; is_digit(*p); p++)
      if (e < EXP_LIMIT) e = e * 10 + (*p - '0');
    exp += eneg ? -e : e;
  }
  o->mant = m;
  o->exp = exp;
  o->neg = neg;
  d->p = (char *)p;
  return 0;
}

/* value * 10^shift as an integer, rounded half away from zero; -1 when it
 * does not fit in int64_t. */
static int num_to_i64(const num_t *n, int shift, int64_t *out) {
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

static int parse_i64(dec_t *d, int shift, int64_t *out) {
  num_t n;
  const char *at = d->p;
  if (!(*d->p == '-' || is_digit(*d->p))) FAIL(d, "expected a number");
  if (parse_num(d, &n)) return -1;
  if (num_to_i64(&n, shift, out)) return fail_at(d, at, "number out of range");
  return 0;
}

/* ---- Generic values ---- */

static int lit(dec_t *d, const char *s, size_t n) {
  if ((size_t)(d->end - d->p) < n || memcmp(d->p, s, n) != 0)
    FAIL(d, "invalid literal");
  d->p += n;
  return 0;
}

/* Consumes "null" if it is next; 1 if it was. */
static inline int take_null(dec_t *d, int *err) {
  *err = 0;
  if (*d->p != 'n') return 0;
  *err = lit(d, "null", 4);
  return 1;
}

static int skip_value(dec_t *d);

/* Iteration over an object's members, cursor after '{' and white space:
 * 1 with the next name in *k (cursor at its value), 0 after the closing
 * '}', -1 on error. */
static inline int obj_next(dec_t *d, int *first, char **k, size_t *kn) {
  if (*first) {
    *first = 0;
    if (*d->p == '}') {
      d->p++;
      return 0;
    }
  } else {
    skip_ws(d);
    if (*d->p == '}') {
      d->p++;
      return 0;
    }
    if (*d->p != ',') FAIL(d, "expected ',' or '}'");
    d->p++;
    skip_ws(d);
  }
  if (*d->p != '"') FAIL(d, "expected a member name");
  if (parse_str(d, k, kn, 1)) return -1;
  skip_ws(d);
  if (*d->p != ':') FAIL(d, "expected ':'");
  d->p++;
  skip_ws(d);
  return 1;
}

/* As obj_next for arrays: 1 with the cursor at the next element. */
static inline int arr_next(dec_t *d, int *first) {
  if (*first) {
    *first = 0;
    if (*d->p == ']') {
      d->p++;
      return 0;
    }
    return 1;
  }
  skip_ws(d);
  if (*d->p == ']') {
    d->p++;
    return 0;
  }
  if (*d->p != ',') FAIL(d, "expected ',' or ']'");
  d->p++;
  skip_ws(d);
  return 1;
}

static int open_obj(dec_t *d) {
  if (*d->p != '{') FAIL(d, "expected an object");
  if (++d->depth > KN_JSON_MAX_DEPTH) FAIL(d, "nesting too deep");
  d->p++;
  skip_ws(d);
  return 0;
}

static int open_arr(dec_t *d) {
  if (*d->p != '[') FAIL(d, "expected an array");
  if (++d->depth > KN_JSON_MAX_DEPTH) FAIL(d, "nesting too deep");
  d->p++;
  skip_ws(d);
  return 0;
}

static int skip_value(dec_t *d) {
  int first = 1, rc;
  char *k;
  size_t kn;
  switch (*d->p) {
    case '"':
      return parse_str(d, &k, &kn, 1);
    case '{':
      if (open_obj(d)) return -1;
      while ((rc = obj_next(d, &first, &k, &kn)) > 0)
        if (skip_value(d)) return -1;
      d->depth--;
      return rc;
    case '[':
      if (open_arr(d)) return -1;
      while ((rc = arr_next(d, &first)) > 0)
        if (skip_value(d)) return -1;
      d->depth--;
      return rc;
    case 't':
      return lit(d, "true", 4);
    case 'f':
      return lit(d, "false", 5);
    case 'n':
      return lit(d, "null", 4);
    default: {
      num_t n;
      if (*d->p == '-' || is_digit(*d->p)) return parse_num(d, &n);
      FAIL(d, *d->p || d->p < d->end ? "unexpected character"
                                     : "unexpected end of input");
    }
  }
}

/* ---- Records ---- */

enum { HAVE_DATA = 1, HAVE_KEY = 2, HAVE_SEQ = 4 };

static int parse_record(dec_t *d, kn_batch_t *b) {
  const char *start = d->p;
  if (open_obj(d)) return -1;
  kn_record_t *r = kn_batch_push(b);
  if (!r) {
    d->nomem = 1;
    return -1;
  }
  unsigned have = 0;
  int first = 1, rc, isnull;
  char *k, *s;
  size_t kn, n;
  while ((rc = obj_next(d, &first, &k, &kn)) > 0) {
    if (KEY_IS(k, kn, "Data")) {
      if (*d->p != '"') FAIL(d, "Data is not a string");
      if (parse_str(d, &s, &n, 0)) return -1;
      long m = kn_base64_decode(s, s, n);
      if (m < 0) return fail_at(d, s, "Data is not valid base64");
      r->data = s;
      r->len = (size_t)m;
      have |= HAVE_DATA;
    } else if (KEY_IS(k, kn, "PartitionKey")) {
      if (parse_cstr(d, &s, &n)) return -1;
      r->pkey = s;
      have |= HAVE_KEY;
    } else if (KEY_IS(k, kn, "SequenceNumber")) {
      const char *at = d->p;
      if (parse_cstr(d, &s, &n)) return -1;
      if (!kn_seqnum_valid(s, n))
        return fail_at(d, at, "SequenceNumber is not a decimal number");
      r->seq = s;
      have |= HAVE_SEQ;
    } else if (KEY_IS(k, kn, "ApproximateArrivalTimestamp")) {
      if (take_null(d, &isnull)) {
        if (isnull) return -1;
      } else if (parse_i64(d, 3, &r->arrival_ms)) {
        return -1;
      }
    } else if (skip_value(d)) {
      return -1;
    }
  }
  d->depth--;
  if (rc < 0) return -1;
  if (have != (HAVE_DATA | HAVE_KEY | HAVE_SEQ))
    return fail_at(d, start,
                   !(have & HAVE_DATA) ? "record without Data"
                   : !(have & HAVE_KEY) ? "record without PartitionKey"
                                        : "record without SequenceNumber");
  b->bytes += r->len;
  return 0;
}

static int parse_records(dec_t *d, kn_batch_t *b) {
  int first = 1, rc;
  if (open_arr(d)) return -1;
  while ((rc = arr_next(d, &first)) > 0)
    if (parse_record(d, b)) return -1;
  d->depth--;
  return rc;
}

/* ---- ChildShards ---- */

static int parse_hash_range(dec_t *d, kn_shard_desc_t *sd) {
  int first = 1, rc;
  char *k, *s;
  size_t kn, n;
  if (open_obj(d)) return -1;
  while ((rc = obj_next(d, &first, &k, &kn)) > 0) {
    if (KEY_IS(k, kn, "StartingHashKey")) {
      if (parse_cstr(d, &s, &n)) return -1;
      sd->hk_start = s;
    } else if (KEY_IS(k, kn, "EndingHashKey")) {
      if (parse_cstr(d, &s, &n)) return -1;
      sd->hk_end = s;
    } else if (skip_value(d)) {
      return -1;
    }
  }
  d->depth--;
  return rc;
}

static int parse_parents(dec_t *d, kn_shard_desc_t *sd) {
  int first = 1, rc, isnull;
  char *s;
  size_t n;
  if (take_null(d, &isnull)) return isnull;
  if (open_arr(d)) return -1;
  while ((rc = arr_next(d, &first)) > 0) {
    if (parse_cstr(d, &s, &n)) return -1;
    /* A merge names two parents; the first is ParentShardId. */
    if (!sd->parent)
      sd->parent = s;
    else if (!sd->adjacent_parent)
      sd->adjacent_parent = s;
  }
  d->depth--;
  return rc;
}

static int parse_child(dec_t *d, kn_shard_list_t *l) {
  const char *start = d->p;
  kn_shard_desc_t sd;
  memset(&sd, 0, sizeof(sd));
  int first = 1, rc, isnull;
  char *k, *s;
  size_t kn, n;
  if (open_obj(d)) return -1;
  while ((rc = obj_next(d, &first, &k, &kn)) > 0) {
    if (KEY_IS(k, kn, "ShardId")) {
      if (parse_cstr(d, &s, &n)) return -1;
      sd.id = s;
    } else if (KEY_IS(k, kn, "ParentShards")) {
      if (parse_parents(d, &sd)) return -1;
    } else if (KEY_IS(k, kn, "HashKeyRange")) {
      if (take_null(d, &isnull)) {
        if (isnull) return -1;
      } else if (parse_hash_range(d, &sd)) {
        return -1;
      }
    } else if (skip_value(d)) {
      return -1;
    }
  }
  d->depth--;
  if (rc < 0) return -1;
  rc = kn_shard_list_add(l, &sd);
  if (rc == -2) d->nomem = 1;
  if (rc) return fail_at(d, start, "child shard without ShardId or hash keys");
  return 0;
}

static int parse_children(dec_t *d, kn_batch_t *b) {
  int first = 1, rc;
  if (open_arr(d)) return -1;
  kn_shard_list_t *l = kn_shard_list_new();
  if (!l) {
    d->nomem = 1;
    return -1;
  }
  while ((rc = arr_next(d, &first)) > 0)
    if (parse_child(d, l)) break;
  d->depth--;
  if (rc != 0 || l->n == 0) {
    kn_shard_list_destroy(l);
    return rc ? -1 : 0;
  }
  kn_shard_list_destroy(b->children);
  b->children = l;
  return 0;
}

/* ---- The response ---- */

static int parse_top(dec_t *d, kn_batch_t *b, const char **cont) {
  int first = 1, rc, isnull;
  char *k, *s;
  size_t kn, n;
  skip_ws(d);
  if (open_obj(d)) return -1;
  while ((rc = obj_next(d, &first, &k, &kn)) > 0) {
    if (take_null(d, &isnull)) {
      if (isnull) return -1;
      continue; /* null members count as absent */
    }
    if (KEY_IS(k, kn, "Records")) {
      if (parse_records(d, b)) return -1;
    } else if (KEY_IS(k, kn, "NextShardIterator")) {
      if (parse_cstr(d, &s, &n)) return -1;
      free(b->next_iterator);
      if (!(b->next_iterator = strdup(s))) {
        d->nomem = 1;
        return -1;
      }
    } else if (KEY_IS(k, kn, "ContinuationSequenceNumber")) {
      const char *at = d->p;
      if (parse_cstr(d, &s, &n)) return -1;
      if (!kn_seqnum_valid(s, n))
        return fail_at(d, at, "ContinuationSequenceNumber is not a number");
      *cont = s;
    } else if (KEY_IS(k, kn, "MillisBehindLatest")) {
      if (parse_i64(d, 0, &b->millis_behind)) return -1;
    } else if (KEY_IS(k, kn, "ChildShards")) {
      if (parse_children(d, b)) return -1;
    } else if (skip_value(d)) {
      return -1;
    }
  }
  d->depth--;
  if (rc < 0) return -1;
  skip_ws(d);
  if (d->p != d->end) FAIL(d, "unexpected data after the response");
  return 0;
}

kn_error_t *kn_decode_records(kn_batch_t *b, char *body, size_t len,
                              kn_records_kind_t kind,
                              const char **continuation) {
  const char *what = kind == KN_RECORDS_SUBSCRIBE_EVENT
                         ? "SubscribeToShardEvent"
                         : "GetRecords response";
  const char *cont = NULL;
  if (continuation) *continuation = NULL;
  if (!body || body[len] != '\0')
    return kn_error_new(KN_ERR__INVALID_ARG, "%s: body not terminated", what);
  dec_t d = {body, body + len, body, NULL, NULL, 0, 0};
  if (parse_top(&d, b, &cont)) {
    if (d.nomem) return kn_error_new(KN_ERR__NOMEM, "%s: out of memory", what);
    return kn_error_new(KN_ERR__BAD_MSG, "malformed %s: %s at byte %zu of %zu",
                        what, d.err ? d.err : "invalid JSON",
                        (size_t)(d.at - d.base), len);
  }
  if (kind == KN_RECORDS_SUBSCRIBE_EVENT) {
    b->shard_end = cont == NULL;
    if (continuation) *continuation = cont;
  } else {
    b->shard_end = b->next_iterator == NULL;
  }
  return NULL;
}
