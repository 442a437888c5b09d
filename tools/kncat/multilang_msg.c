#include "multilang_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn/base64.h"
#include "output.h"

/* ---- buffer ---- */

void kc_ml_buf_free(kc_ml_buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof(*b));
}

void kc_ml_buf_consume(kc_ml_buf_t *b, size_t n) {
  if (n >= b->len) {
    b->len = 0;
    return;
  }
  memmove(b->p, b->p + n, b->len - n);
  b->len -= n;
}

static int reserve(kc_ml_buf_t *b, size_t n) {
  if (b->len + n <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) return -1;
  b->p = p;
  b->cap = cap;
  return 0;
}

static int put(kc_ml_buf_t *b, const char *s, size_t n) {
  if (reserve(b, n)) return -1;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  return 0;
}

static int puts_(kc_ml_buf_t *b, const char *s) { return put(b, s, strlen(s)); }

/* A JSON string; bytes that are not valid UTF-8 become U+FFFD (partition
 * keys and shard ids are Unicode, so this does not happen in practice). */
static int put_str(kc_ml_buf_t *b, const char *s) {
  if (!s) return puts_(b, "null");
  size_t n = strlen(s);
  if (reserve(b, 6 * n + 2)) return -1;
  char *d = b->p + b->len;
  *d++ = '"';
  d = kc_json_text(d, (const uint8_t *)s, n, "\\ufffd");
  *d++ = '"';
  b->len = (size_t)(d - b->p);
  return 0;
}

static int put_i64(kc_ml_buf_t *b, int64_t v, int null_if_negative) {
  if (null_if_negative && v < 0) return puts_(b, "null");
  char s[32];
  int n = snprintf(s, sizeof(s), "%lld", (long long)v);
  return put(b, s, (size_t)n);
}

/* Runs the steps of an encoder; on failure the buffer is cut back. */
#define ENC(b, steps)        \
  do {                       \
    size_t mark_ = (b)->len; \
    if (steps) {             \
      (b)->len = mark_;      \
      return -1;             \
    }                        \
    return 0;                \
  } while (0)

int kc_ml_enc_initialize(kc_ml_buf_t *b, const char *shard_id, const char *seq,
                         int64_t subseq) {
  ENC(b, puts_(b, "{\"action\":\"initialize\",\"shardId\":") ||
             put_str(b, shard_id) || puts_(b, ",\"sequenceNumber\":") ||
             put_str(b, seq) || puts_(b, ",\"subSequenceNumber\":") ||
             put_i64(b, subseq, 1) || puts_(b, "}\n"));
}

int kc_ml_enc_records_begin(kc_ml_buf_t *b) {
  return puts_(b, "{\"action\":\"processRecords\",\"records\":[");
}

int kc_ml_enc_record(kc_ml_buf_t *b, int first, const kc_ml_rec_t *r) {
  size_t mark = b->len;
  if (puts_(b, first ? "{\"action\":\"record\",\"data\":\""
                     : ",{\"action\":\"record\",\"data\":\"") ||
      reserve(b, (r->len + 2) / 3 * 4))
    goto fail;
  b->len += kn_base64_encode(b->p + b->len, r->data, r->len);
  if (puts_(b, "\",\"partitionKey\":") || put_str(b, r->key) ||
      puts_(b, ",\"sequenceNumber\":") || put_str(b, r->seq) ||
      puts_(b, ",\"subSequenceNumber\":") ||
      put_i64(b, (int64_t)r->subseq, 0) ||
      puts_(b, ",\"approximateArrivalTimestamp\":") ||
      put_i64(b, r->arrival_ms, 1) || puts_(b, "}"))
    goto fail;
  return 0;
fail:
  b->len = mark;
  return -1;
}

int kc_ml_enc_records_end(kc_ml_buf_t *b, int64_t millis_behind) {
  ENC(b, puts_(b, "],\"millisBehindLatest\":") ||
             put_i64(b, millis_behind, 1) || puts_(b, "}\n"));
}

int kc_ml_enc_action(kc_ml_buf_t *b, const char *action) {
  ENC(b, puts_(b, "{\"action\":") || put_str(b, action) || puts_(b, "}\n"));
}

int kc_ml_enc_checkpoint(kc_ml_buf_t *b, const char *seq, int64_t subseq,
                         const char *error) {
  ENC(b, puts_(b, "{\"action\":\"checkpoint\",\"sequenceNumber\":") ||
             put_str(b, seq) || puts_(b, ",\"subSequenceNumber\":") ||
             put_i64(b, subseq, 1) || puts_(b, ",\"error\":") ||
             put_str(b, error) || puts_(b, "}\n"));
}

/* ---- decoding: a small JSON reader, enough for flat objects ---- */

typedef struct rd {
  const char *s, *end;
} rd_t;

static void ws(rd_t *r) {
  while (r->s < r->end &&
         (*r->s == ' ' || *r->s == '\t' || *r->s == '\r' || *r->s == '\n'))
    r->s++;
}

static int hex4(const char *s, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    int h = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (h < 0) return -1;
    v = v << 4 | (unsigned)h;
  }
  *out = v;
  return 0;
}

/* A string at r->s (the opening quote); its value, truncated to cap - 1
 * bytes, into dst (may be NULL); *too_long when truncated or holding a NUL
 * (which would end it early): the value cannot be taken as it is.  -1 if
 * malformed. */
static int str(rd_t *r, char *dst, size_t cap, int *too_long) {
  if (r->s >= r->end || *r->s != '"') return -1;
  r->s++;
  size_t n = 0;
  if (too_long) *too_long = 0;
  for (;;) {
    if (r->s >= r->end) return -1;
    unsigned char c = (unsigned char)*r->s++;
    if (c == '"') break;
    if (c < 0x20) return -1;
    char tmp[4];
    size_t tn = 1;
    tmp[0] = (char)c;
    if (c == '\\') {
      if (r->s >= r->end) return -1;
      char e = *r->s++;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          tmp[0] = e;
          break;
        case 'b':
          tmp[0] = '\b';
          break;
        case 'f':
          tmp[0] = '\f';
          break;
        case 'n':
          tmp[0] = '\n';
          break;
        case 'r':
          tmp[0] = '\r';
          break;
        case 't':
          tmp[0] = '\t';
          break;
        case 'u': {
          unsigned cp;
          if (r->end - r->s < 4 || hex4(r->s, &cp)) return -1;
          r->s += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && r->end - r->s >= 6 &&
              r->s[0] == '\\' && r->s[1] == 'u') {
            unsigned lo;
            if (!hex4(r->s + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              r->s += 6;
            }
          }
          if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
          if (cp < 0x80) {
            tmp[0] = (char)cp;
          } else if (cp < 0x800) {
            tmp[0] = (char)(0xC0 | cp >> 6);
            tmp[1] = (char)(0x80 | (cp & 0x3F));
            tn = 2;
          } else if (cp < 0x10000) {
            tmp[0] = (char)(0xE0 | cp >> 12);
            tmp[1] = (char)(0x80 | (cp >> 6 & 0x3F));
            tmp[2] = (char)(0x80 | (cp & 0x3F));
            tn = 3;
          } else {
            tmp[0] = (char)(0xF0 | cp >> 18);
            tmp[1] = (char)(0x80 | (cp >> 12 & 0x3F));
            tmp[2] = (char)(0x80 | (cp >> 6 & 0x3F));
            tmp[3] = (char)(0x80 | (cp & 0x3F));
            tn = 4;
          }
          break;
        }
        default:
          return -1;
      }
    }
    if (tn == 1 && tmp[0] == '\0' && too_long) *too_long = 1;
    if (dst) {
      if (n + tn < cap) {
        memcpy(dst + n, tmp, tn);
        n += tn;
      } else if (too_long) {
        *too_long = 1;
      }
    }
  }
  if (dst && cap) dst[n] = '\0';
  return 0;
}

/* Skips any value; -1 if malformed. */
static int skip(rd_t *r, int depth) {
  ws(r);
  if (r->s >= r->end || depth > 64) return -1;
  char c = *r->s;
  if (c == '"') return str(r, NULL, 0, NULL);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    r->s++;
    ws(r);
    if (r->s < r->end && *r->s == close) {
      r->s++;
      return 0;
    }
    for (;;) {
      if (c == '{') {
        ws(r);
        if (str(r, NULL, 0, NULL)) return -1;
        ws(r);
        if (r->s >= r->end || *r->s++ != ':') return -1;
      }
      if (skip(r, depth + 1)) return -1;
      ws(r);
      if (r->s >= r->end) return -1;
      char d = *r->s++;
      if (d == close) return 0;
      if (d != ',') return -1;
    }
  }
  /* number, true, false, null */
  const char *st = r->s;
  while (r->s < r->end &&
         (strchr("+-.eE", *r->s) || (*r->s >= '0' && *r->s <= '9') ||
          (*r->s >= 'a' && *r->s <= 'z')))
    r->s++;
  size_t n = (size_t)(r->s - st);
  if (n == 0) return -1;
  if ((*st >= 'a' && *st <= 'z') && !((n == 4 && !memcmp(st, "true", 4)) ||
                                      (n == 5 && !memcmp(st, "false", 5)) ||
                                      (n == 4 && !memcmp(st, "null", 4))))
    return -1;
  return 0;
}

static int all_digits(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* sequenceNumber: a string (or bare number) of digits, or null. */
static int get_seq(rd_t *r, kc_ml_in_t *o) {
  ws(r);
  if (r->s < r->end && *r->s == '"') {
    int long_ = 0;
    if (str(r, o->seq, sizeof(o->seq), &long_)) return -1;
    o->has_seq = 1;
    o->seq_bad = long_ || !all_digits(o->seq);
    return 0;
  }
  const char *st = r->s;
  if (skip(r, 0)) return -1;
  size_t n = (size_t)(r->s - st);
  if (n == 4 && !memcmp(st, "null", 4)) return 0;
  o->has_seq = 1;
  o->seq_bad = 1;
  if (n < sizeof(o->seq)) {
    memcpy(o->seq, st, n);
    o->seq[n] = '\0';
    o->seq_bad = !all_digits(o->seq);
  }
  return 0;
}

/* subSequenceNumber: a number (or a string of digits), or null. */
static int get_subseq(rd_t *r, kc_ml_in_t *o) {
  ws(r);
  char tmp[32];
  int long_ = 0;
  if (r->s < r->end && *r->s == '"') {
    if (str(r, tmp, sizeof(tmp), &long_)) return -1;
  } else {
    const char *st = r->s;
    if (skip(r, 0)) return -1;
    size_t n = (size_t)(r->s - st);
    if (n == 4 && !memcmp(st, "null", 4)) return 0;
    long_ = n >= sizeof(tmp);
    if (!long_) {
      memcpy(tmp, st, n);
      tmp[n] = '\0';
    }
  }
  o->has_subseq = 1;
  if (long_ || !all_digits(tmp) || strlen(tmp) > 19) {
    o->subseq_bad = 1;
    return 0;
  }
  o->subseq = strtoull(tmp, NULL, 10);
  return 0;
}

static void why_(char *why, size_t whysz, const char *s) {
  if (whysz) snprintf(why, whysz, "%s", s);
}

int kc_ml_decode(const char *line, size_t len, kc_ml_in_t *o, char *why,
                 size_t whysz) {
  memset(o, 0, sizeof(*o));
  rd_t r = {line, line + len};
  ws(&r);
  if (r.s == r.end) {
    why_(why, whysz, "blank line");
    return KC_ML_DEC_SKIP;
  }
  if (*r.s != '{') {
    why_(why, whysz, "not a JSON object");
    return KC_ML_DEC_SKIP;
  }
  /* Validate the whole line first: garbage after a '{' is still garbage. */
  rd_t v = r;
  if (skip(&v, 0)) {
    why_(why, whysz, "not a JSON object");
    return KC_ML_DEC_SKIP;
  }
  ws(&v);
  if (v.s != v.end) {
    why_(why, whysz, "text after the JSON object");
    return KC_ML_DEC_SKIP;
  }
  char action[32] = "";
  int has_action = 0, action_long = 0;
  r.s++;
  ws(&r);
  if (r.s < r.end && *r.s == '}') r.s = r.end;
  while (r.s < r.end) {
    char key[32];
    int key_long;
    ws(&r);
    if (str(&r, key, sizeof(key), &key_long)) break;
    ws(&r);
    r.s++; /* ':' (checked above) */
    ws(&r);
    int rc = 0;
    if (key_long) {
      rc = skip(&r, 0);
    } else if (!strcmp(key, "action")) {
      if (r.s < r.end && *r.s == '"') {
        rc = str(&r, action, sizeof(action), &action_long);
        has_action = 1;
      } else {
        rc = skip(&r, 0);
      }
    } else if (!strcmp(key, "responseFor")) {
      int bad = 0;
      if (r.s < r.end && *r.s == '"')
        rc = str(&r, o->response_for, sizeof(o->response_for), &bad);
      else
        rc = skip(&r, 0);
      if (bad) /* names no action */
        snprintf(o->response_for, sizeof(o->response_for), "%s", "(invalid)");
    } else if (!strcmp(key, "sequenceNumber")) {
      rc = get_seq(&r, o);
    } else if (!strcmp(key, "subSequenceNumber")) {
      rc = get_subseq(&r, o);
    } else {
      rc = skip(&r, 0);
    }
    if (rc) break;
    ws(&r);
    if (r.s < r.end && *r.s == ',')
      r.s++;
    else
      break;
  }
  if (!has_action) {
    why_(why, whysz, "no \"action\"");
    return KC_ML_DEC_SKIP;
  }
  if (!action_long && !strcmp(action, "status")) {
    o->kind = KC_ML_IN_STATUS;
    return KC_ML_DEC_OK;
  }
  if (!action_long && !strcmp(action, "checkpoint")) {
    o->kind = KC_ML_IN_CHECKPOINT;
    return KC_ML_DEC_OK;
  }
  if (whysz)
    snprintf(why, whysz, "unknown action \"%s%s\"", action,
             action_long ? "..." : "");
  return KC_ML_DEC_PROTOCOL;
}
