/* SigV4 signing.  The canonical request is written in one pass into one
 * allocation sized from an upper bound, so signing a typical request costs
 * two mallocs (canonical request, string to sign) plus one for a query. */
#include "aws/sigv4.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/crypto.h"
#include "util/hex.h"
#include "util/secure.h"

#define ALGORITHM "AWS4-HMAC-SHA256"
#define EMPTY_SHA256 \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/* Small requests sort their headers and query pairs on the stack. */
#define STACK_ITEMS 32

static int is_alnum(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9');
}

/* RFC 3986 unreserved: the bytes left as they are in a canonical URI. */
static int is_unreserved(unsigned char c) {
  return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* An RFC 9110 token character (header names, methods). */
static int is_tchar(unsigned char c) {
  static const unsigned char punct[256] = {
      ['!'] = 1,  ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1,
      ['\''] = 1, ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,
      ['^'] = 1,  ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1};
  return is_alnum(c) || punct[c];
}

/* What Python's str.split() splits on within ASCII, so that values trim
 * exactly as botocore's; CR and LF fold obsolete line continuations.
 * 1: white space; 2: the terminator, which also ends a run. */
static const unsigned char space_tab[256] = {
    [0] = 2,    ['\t'] = 1, ['\n'] = 1, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1,
    [0x1c] = 1, [0x1d] = 1, [0x1e] = 1, [0x1f] = 1, [' '] = 1};

static unsigned char lower(unsigned char c) {
  return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

static int hexval(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static char *put(char *w, const void *s, size_t n) {
  memcpy(w, s, n);
  return w + n;
}

/* Writes byte c percent-encoded unless it is unreserved. */
static char *put_enc(char *w, unsigned char c) {
  static const char digits[] = "0123456789ABCDEF";
  if (is_unreserved(c)) {
    *w++ = (char)c;
  } else {
    *w++ = '%';
    *w++ = digits[c >> 4];
    *w++ = digits[c & 15];
  }
  return w;
}

/* Insertion sort for the usual handful of items, qsort beyond. */
static void sort_small(void *base, size_t n, size_t size,
                       int (*cmp)(const void *, const void *)) {
  if (n > 16) {
    qsort(base, n, size, cmp);
    return;
  }
  char *b = base, tmp[64];
  if (size > sizeof(tmp)) {
    qsort(base, n, size, cmp);
    return;
  }
  for (size_t i = 1; i < n; i++) {
    size_t j = i;
    memcpy(tmp, b + i * size, size);
    while (j > 0 && cmp(b + (j - 1) * size, tmp) > 0) {
      memcpy(b + j * size, b + (j - 1) * size, size);
      j--;
    }
    if (j != i) memcpy(b + j * size, tmp, size);
  }
}

/* ---- canonical URI -------------------------------------------------- */

static int path_ok(const char *p) {
  if (!*p) return 1;
  if (*p != '/') return 0;
  for (; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c < 0x20 || c == 0x7f || c == '?' || c == '#') return 0;
  }
  return 1;
}

/* RFC 3986 dot-segment removal plus the collapsing of repeated slashes
 * that AWS requires, then encoding; writes at w, at most 3*len+2 bytes. */
static char *put_uri(char *w, const char *path) {
  char *start = w;
  const char *p = path;
  while (*p) {
    while (*p == '/') p++;
    const char *seg = p;
    while (*p && *p != '/') p++;
    size_t n = (size_t)(p - seg);
    if (n == 0 || (n == 1 && seg[0] == '.')) continue;
    if (n == 2 && seg[0] == '.' && seg[1] == '.') {
      /* Encoded segments hold no literal '/', so the last one starts at
       * the last slash written. */
      while (w > start && *--w != '/') {
      }
      continue;
    }
    *w++ = '/';
    for (size_t i = 0; i < n; i++) w = put_enc(w, (unsigned char)seg[i]);
  }
  if (w == start || p[-1] == '/') *w++ = '/';
  return w;
}

/* ---- canonical query ------------------------------------------------ */

typedef struct qpair {
  const char *k, *v; /* encoded, in the scratch buffer */
  size_t klen, vlen;
} qpair_t;

static int cmp_bytes(const char *a, size_t alen, const char *b, size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  if (c) return c;
  return alen < blen ? -1 : alen > blen;
}

static int qpair_cmp(const void *a, const void *b) {
  const qpair_t *x = a, *y = b;
  int c = cmp_bytes(x->k, x->klen, y->k, y->klen);
  return c ? c : cmp_bytes(x->v, x->vlen, y->v, y->vlen);
}

/* Decodes [s, e) and encodes it again at w; NULL on a stray '%'. */
static char *put_requoted(char *w, const char *s, const char *e) {
  while (s < e) {
    unsigned char c = (unsigned char)*s++;
    if (c == '%') {
      int hi = e - s >= 2 ? hexval((unsigned char)s[0]) : -1;
      int lo = hi >= 0 ? hexval((unsigned char)s[1]) : -1;
      if (lo < 0) return NULL;
      c = (unsigned char)(hi << 4 | lo);
      s += 2;
    }
    w = put_enc(w, c);
  }
  return w;
}

/* Writes the canonical query string for q at w; NULL on bad input or
 * out-of-memory. */
static char *put_query(char *w, const char *q) {
  size_t qlen = strlen(q), npairs = 1;
  for (size_t i = 0; i < qlen; i++) npairs += q[i] == '&';
  qpair_t stack_pairs[STACK_ITEMS];
  qpair_t *pairs = stack_pairs;
  /* Each input byte encodes to at most 3. */
  char *scratch = malloc(3 * qlen + 1);
  if (npairs > STACK_ITEMS) pairs = malloc(npairs * sizeof(*pairs));
  char *res = NULL;
  if (!scratch || !pairs) goto out;

  size_t n = 0;
  char *s = scratch;
  for (const char *p = q; *p;) {
    const char *seg = p;
    while (*p && *p != '&') p++;
    const char *end = p;
    if (*p) p++;
    if (seg == end) continue;
    const char *eq = memchr(seg, '=', (size_t)(end - seg));
    qpair_t *pr = &pairs[n++];
    pr->k = s;
    if (!(s = put_requoted(s, seg, eq ? eq : end))) goto out;
    pr->klen = (size_t)(s - pr->k);
    pr->v = s;
    if (eq && !(s = put_requoted(s, eq + 1, end))) goto out;
    pr->vlen = (size_t)(s - pr->v);
  }
  sort_small(pairs, n, sizeof(*pairs), qpair_cmp);
  for (size_t i = 0; i < n; i++) {
    if (i) *w++ = '&';
    w = put(w, pairs[i].k, pairs[i].klen);
    *w++ = '=';
    w = put(w, pairs[i].v, pairs[i].vlen);
  }
  res = w;
out:
  free(scratch);
  if (pairs != stack_pairs) free(pairs);
  return res;
}

/* ---- canonical headers ---------------------------------------------- */

typedef struct hdr {
  const char *name;
  size_t name_len;
  const char *value;
  size_t order; /* position given, so repeated names keep their order */
} hdr_t;

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen) {
  size_t n = alen < blen ? alen : blen;
  for (size_t i = 0; i < n; i++) {
    unsigned char x = lower((unsigned char)a[i]),
                  y = lower((unsigned char)b[i]);
    if (x != y) return x < y ? -1 : 1;
  }
  return alen < blen ? -1 : alen > blen;
}

static int hdr_cmp(const void *a, const void *b) {
  const hdr_t *x = a, *y = b;
  int c = name_cmp(x->name, x->name_len, y->name, y->name_len);
  if (c) return c;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* How the signer treats a header it is given. */
enum { H_SIGN, H_SKIP, H_REFUSE, H_HOST, H_CONTENT_SHA, H_TOKEN };

/* Headers botocore leaves out of the signature are hop-by-hop ones that
 * proxies may rewrite, and ones tracing or client layers may change. */
static const struct {
  const char *name;
  unsigned char len, kind;
} special[] = {
#define SPECIAL(s, k) \
  { s, sizeof(s) - 1, k }
    SPECIAL("host", H_HOST),
    SPECIAL("x-amz-content-sha256", H_CONTENT_SHA),
    SPECIAL("x-amz-date", H_SKIP),
    SPECIAL("x-amz-security-token", H_TOKEN),
    SPECIAL("authorization", H_SKIP),
    SPECIAL("date", H_REFUSE),
    SPECIAL("connection", H_SKIP),
    SPECIAL("expect", H_SKIP),
    SPECIAL("keep-alive", H_SKIP),
    SPECIAL("proxy-authenticate", H_SKIP),
    SPECIAL("proxy-authorization", H_SKIP),
    SPECIAL("te", H_SKIP),
    SPECIAL("trailer", H_SKIP),
    SPECIAL("transfer-encoding", H_SKIP),
    SPECIAL("upgrade", H_SKIP),
    SPECIAL("user-agent", H_SKIP),
    SPECIAL("x-amzn-trace-id", H_SKIP),
#undef SPECIAL
};

static int classify(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
    if (special[i].len == len && name_cmp(name, len, special[i].name, len) == 0)
      return special[i].kind;
  return H_SIGN;
}

/* Writes a value trimmed, with inner runs of white space as one space.
 * Runs without white space (most of a value, a whole session token) are
 * copied in bulk. */
static char *put_trimmed(char *w, const char *v) {
  const unsigned char *p = (const unsigned char *)v;
  for (int first = 1;; first = 0) {
    while (space_tab[*p] == 1) p++;
    if (!*p) return w;
    const unsigned char *run = p;
    while (!space_tab[*p]) p++;
    if (!first) *w++ = ' ';
    w = put(w, run, (size_t)(p - run));
  }
}

/* ---- dates and keys ------------------------------------------------- */

/* Days since 1970-01-01 to a proleptic Gregorian date (the civil-from-days
 * arithmetic of eras of 400 years); valid for the range we accept. */
static void civil_date(long long days, int *y, int *m, int *d) {
  days += 719468; /* from 0000-03-01 */
  long long era = days / 146097;
  long long doe = days - era * 146097;
  long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  long long mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = (int)(yoe + era * 400 + (*m <= 2));
}

static void put_digits(char *w, long long v, int n) {
  for (int i = n - 1; i >= 0; i--) {
    w[i] = (char)('0' + v % 10);
    v /= 10;
  }
}

static void format_amz_date(char out[17], long long t) {
  int y, mo, d;
  long long days = t / 86400, sec = t % 86400;
  civil_date(days, &y, &mo, &d);
  put_digits(out, y, 4);
  put_digits(out + 4, mo, 2);
  put_digits(out + 6, d, 2);
  out[8] = 'T';
  put_digits(out + 9, sec / 3600, 2);
  put_digits(out + 11, sec / 60 % 60, 2);
  put_digits(out + 13, sec % 60, 2);
  out[15] = 'Z';
  out[16] = '\0';
}

/* A scope part: non-empty, printable, no '/' or white space. */
static int scope_part_ok(const char *s) {
  if (!s || !*s) return 0;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c <= 0x20 || c == 0x7f || c == '/' || c == ',') return 0;
  }
  return 1;
}

static int signing_key(const char *secret, const char *date8,
                       const char *region, const char *service,
                       uint8_t key[KN_SHA256_LEN]) {
  size_t slen = strlen(secret);
  char stack_k[128];
  char *k = slen + 4 <= sizeof(stack_k) ? stack_k : malloc(slen + 4);
  if (!k) return -1;
  memcpy(k, "AWS4", 4);
  memcpy(k + 4, secret, slen);
  uint8_t k_date[KN_SHA256_LEN], k_region[KN_SHA256_LEN];
  kn_hmac_sha256(k, slen + 4, date8, 8, k_date);
  kn_secure_wipe(k, slen + 4); /* "AWS4" + the secret */
  if (k != stack_k) free(k);
  kn_hmac_sha256(k_date, sizeof(k_date), region, strlen(region), k_region);
  kn_hmac_sha256(k_region, sizeof(k_region), service, strlen(service), k_date);
  kn_hmac_sha256(k_date, sizeof(k_date), "aws4_request", 12, key);
  /* Every key of the chain signs for the day: none outlives its use. */
  kn_secure_wipe(k_date, sizeof(k_date));
  kn_secure_wipe(k_region, sizeof(k_region));
  return 0;
}

/* ---- signing -------------------------------------------------------- */

void kn_sigv4_result_clear(kn_sigv4_result_t *out) {
  if (!out) return;
  kn_secure_wipe(out->authorization, sizeof(out->authorization));
  free(out->canonical_request);
  free(out->string_to_sign);
  out->canonical_request = NULL;
  out->string_to_sign = NULL;
}

/* Sorts the signed headers and writes their lines; returns the end.
 * The signed-header list is written after them and reported in *sh. */
static char *put_headers(char *w, hdr_t *h, size_t n, const char **sh,
                         size_t *sh_len) {
  sort_small(h, n, sizeof(*h), hdr_cmp);
  for (size_t i = 0; i < n; i++) {
    int same = i && name_cmp(h[i].name, h[i].name_len, h[i - 1].name,
                             h[i - 1].name_len) == 0;
    if (same) {
      *w++ = ',';
    } else {
      if (i) *w++ = '\n';
      for (size_t j = 0; j < h[i].name_len; j++)
        *w++ = (char)lower((unsigned char)h[i].name[j]);
      *w++ = ':';
    }
    w = put_trimmed(w, h[i].value);
  }
  *w++ = '\n';
  *w++ = '\n';
  *sh = w;
  for (size_t i = 0; i < n; i++) {
    if (i && name_cmp(h[i].name, h[i].name_len, h[i - 1].name,
                      h[i - 1].name_len) == 0)
      continue;
    if (i) *w++ = ';';
    for (size_t j = 0; j < h[i].name_len; j++)
      *w++ = (char)lower((unsigned char)h[i].name[j]);
  }
  *sh_len = (size_t)(w - *sh);
  return w;
}

int kn_sigv4_sign(const kn_sigv4_request_t *req, const kn_sigv4_creds_t *creds,
                  const char *region, const char *service, long long epoch_s,
                  kn_sigv4_result_t *out) {
  if (!out) return -1;
  out->canonical_request = NULL;
  out->string_to_sign = NULL;
  out->authorization[0] = '\0';
  if (!req || !creds || !req->method || !*req->method ||
      !scope_part_ok(region) || !scope_part_ok(service) ||
      !scope_part_ok(creds->access_key_id) || !creds->secret_access_key ||
      !*creds->secret_access_key || (req->n_headers && !req->headers) ||
      (req->payload_len && !req->payload) || epoch_s < 0 ||
      epoch_s > 253402300799LL /* 9999-12-31T23:59:59Z */)
    return -1;
  const char *path = req->path ? req->path : "";
  const char *query = req->query ? req->query : "";
  const char *token = creds->session_token;
  if (token && !*token) token = NULL;
  size_t mlen = strlen(req->method);
  for (size_t i = 0; i < mlen; i++)
    if (!is_tchar((unsigned char)req->method[i])) return -1;
  if (!path_ok(path)) return -1;

  format_amz_date(out->amz_date, epoch_s);

  /* Pick the signed headers, and bound the canonical request's size. */
  hdr_t stack_h[STACK_ITEMS];
  hdr_t *h = stack_h;
  if (req->n_headers + 2 > STACK_ITEMS) {
    if (req->n_headers > SIZE_MAX / sizeof(*h) - 2) return -1;
    h = malloc((req->n_headers + 2) * sizeof(*h));
    if (!h) return -1;
  }
  int rc = -1, have_host = 0;
  const char *content_sha = NULL;
  char *cr = NULL, *sts = NULL;
  size_t n = 0, bound = mlen + 4 * strlen(path) + 4 * strlen(query) + 256;
  for (size_t i = 0; i < req->n_headers; i++) {
    const char *name = req->headers[i].name, *value = req->headers[i].value;
    if (!name || !value || !*name) goto out;
    size_t len = 0;
    for (; name[len]; len++)
      if (!is_tchar((unsigned char)name[len])) goto out;
    switch (classify(name, len)) {
      case H_REFUSE:
        goto out;
      case H_SKIP:
        continue;
      case H_TOKEN:
        if (token) continue;
        break;
      case H_HOST:
        have_host = 1;
        break;
      case H_CONTENT_SHA:
        if (!content_sha) content_sha = value;
        break;
    }
    h[n++] = (hdr_t){name, len, value, i};
    bound += 2 * len + strlen(value) + 4;
  }
  if (!have_host) goto out;
  h[n++] = (hdr_t){"x-amz-date", 10, out->amz_date, req->n_headers};
  bound += 2 * 10 + 16 + 4;
  if (token) {
    h[n++] = (hdr_t){"x-amz-security-token", 20, token, req->n_headers + 1};
    bound += 2 * 20 + strlen(token) + 4;
  }

  /* The payload hash: botocore's precedence. */
  if (content_sha || req->payload_hash) {
    const char *ph = content_sha ? content_sha : req->payload_hash;
    size_t len = strlen(ph);
    if (len >= sizeof(out->payload_hash) || (!content_sha && !len)) goto out;
    memcpy(out->payload_hash, ph, len + 1);
  } else if (req->payload_len) {
    uint8_t d[KN_SHA256_LEN];
    kn_sha256(req->payload, req->payload_len, d);
    kn_hex_encode(out->payload_hash, d, sizeof(d));
  } else {
    memcpy(out->payload_hash, EMPTY_SHA256, sizeof(EMPTY_SHA256));
  }

  /* The canonical request. */
  if (!(cr = malloc(bound))) goto out;
  char *w = cr;
  for (size_t i = 0; i < mlen; i++) {
    unsigned char c = (unsigned char)req->method[i];
    *w++ = (char)((c >= 'a' && c <= 'z') ? c - 32 : c);
  }
  *w++ = '\n';
  w = put_uri(w, path[0] ? path : "/");
  *w++ = '\n';
  if (*query && !(w = put_query(w, query))) goto out;
  *w++ = '\n';
  const char *sh;
  size_t sh_len;
  w = put_headers(w, h, n, &sh, &sh_len);
  *w++ = '\n';
  w = put(w, out->payload_hash, strlen(out->payload_hash));
  *w = '\0';

  /* The string to sign. */
  uint8_t d[KN_SHA256_LEN];
  kn_sha256(cr, (size_t)(w - cr), d);
  size_t rlen = strlen(region), slen = strlen(service);
  /* ALGORITHM \n date \n date8/region/service/aws4_request \n hex */
  size_t scope_len = 8 + 1 + rlen + 1 + slen + 1 + 12;
  size_t sts_len = sizeof(ALGORITHM) - 1 + 1 + 16 + 1 + scope_len + 1 + 64;
  if (!(sts = malloc(sts_len + 1))) goto out;
  char *s = sts;
  s = put(s, ALGORITHM "\n", sizeof(ALGORITHM));
  s = put(s, out->amz_date, 16);
  *s++ = '\n';
  char *scope = s;
  s = put(s, out->amz_date, 8);
  *s++ = '/';
  s = put(s, region, rlen);
  *s++ = '/';
  s = put(s, service, slen);
  s = put(s, "/aws4_request\n", 14);
  kn_hex_encode(s, d, sizeof(d));

  /* The signature and the header. */
  uint8_t key[KN_SHA256_LEN], sig[KN_SHA256_LEN];
  if (signing_key(creds->secret_access_key, out->amz_date, region, service,
                  key))
    goto out;
  kn_hmac_sha256(key, sizeof(key), sts, sts_len, sig);
  kn_secure_wipe(key, sizeof(key));

  size_t aklen = strlen(creds->access_key_id);
  size_t alen = sizeof(ALGORITHM " Credential=") - 1 + aklen + 1 + scope_len +
                sizeof(", SignedHeaders=") - 1 + sh_len +
                sizeof(", Signature=") - 1 + 64;
  if (alen >= sizeof(out->authorization)) {
    kn_secure_wipe(sig, sizeof(sig));
    goto out;
  }
  char *a = out->authorization;
  a = put(a, ALGORITHM " Credential=", sizeof(ALGORITHM " Credential=") - 1);
  a = put(a, creds->access_key_id, aklen);
  *a++ = '/';
  a = put(a, scope, scope_len);
  a = put(a, ", SignedHeaders=", sizeof(", SignedHeaders=") - 1);
  a = put(a, sh, sh_len);
  a = put(a, ", Signature=", sizeof(", Signature=") - 1);
  kn_hex_encode(a, sig, sizeof(sig));
  kn_secure_wipe(sig, sizeof(sig));

  out->canonical_request = cr;
  out->string_to_sign = sts;
  cr = sts = NULL;
  rc = 0;
out:
  free(cr);
  free(sts);
  if (h != stack_h) free(h);
  if (rc) out->authorization[0] = '\0';
  return rc;
}
