/* kncat's output formatting (JSON escaping, UTF-8 validation, base64) and
 * its delimited input reader. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "kn/base64.h"
#include "kt.h"
#include "output.h"
#include "reader.h"

/* Reference validator: decode code points one at a time, the slow way. */
static int ref_utf8_valid(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint32_t c = s[i];
    size_t k;
    uint32_t min;
    if (c < 0x80) {
      i++;
      continue;
    }
    if ((c & 0xE0) == 0xC0)
      k = 2, c &= 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
      k = 3, c &= 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
      k = 4, c &= 0x07, min = 0x10000;
    else
      return 0;
    if (i + k > n) return 0;
    for (size_t j = 1; j < k; j++) {
      if ((s[i + j] & 0xC0) != 0x80) return 0;
      c = c << 6 | (s[i + j] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    i += k;
  }
  return 1;
}

/* Reference escaper: byte by byte. */
static size_t ref_escape(char *d, const uint8_t *s, size_t n) {
  char *p = d;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = s[i];
    if (c == '"')
      p += sprintf(p, "\\\"");
    else if (c == '\\')
      p += sprintf(p, "\\\\");
    else if (c == '\n')
      p += sprintf(p, "\\n");
    else if (c == '\r')
      p += sprintf(p, "\\r");
    else if (c == '\t')
      p += sprintf(p, "\\t");
    else if (c == '\b')
      p += sprintf(p, "\\b");
    else if (c == '\f')
      p += sprintf(p, "\\f");
    else if (c < 0x20)
      p += sprintf(p, "\\u%04x", c);
    else if (c == 0xC2 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] < 0xA0)
      p += sprintf(p, "\\u%04x", s[++i]); /* C1 */
    else if (c == 0xE2 && i + 2 < n &&
             ((s[i + 1] == 0x80 && (s[i + 2] == 0x8E || s[i + 2] == 0x8F ||
                                    (s[i + 2] >= 0xAA && s[i + 2] <= 0xAE))) ||
              (s[i + 1] == 0x81 && s[i + 2] >= 0xA6 && s[i + 2] <= 0xA9))) {
      p += sprintf(p, "\\u%04x",
                   0x2000u | (s[i + 1] & 0x3Fu) << 6 |
                       (s[i + 2] & 0x3Fu)); /* direction */
      i += 2;
    } else
      *p++ = (char)c;
  }
  return (size_t)(p - d);
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void) { return kt_rand(&rng); }

static void test_utf8_edges(void) {
  struct {
    const char *s;
    int ok;
  } cases[] = {
      {"", 1},
      {"plain ascii text, longer than eight bytes", 1},
      {"\xC2\x80", 1},
      {"\xC1\xBF", 0},     /* overlong */
      {"\xC0\x80", 0},     /* overlong NUL */
      {"\xE0\x9F\xBF", 0}, /* overlong 3-byte */
      {"\xE0\xA0\x80", 1},
      {"\xED\x9F\xBF", 1},     /* U+D7FF */
      {"\xED\xA0\x80", 0},     /* U+D800 surrogate */
      {"\xED\xBF\xBF", 0},     /* U+DFFF surrogate */
      {"\xEE\x80\x80", 1},     /* U+E000 */
      {"\xF0\x8F\xBF\xBF", 0}, /* overlong 4-byte */
      {"\xF0\x90\x80\x80", 1}, /* U+10000 */
      {"\xF4\x8F\xBF\xBF", 1}, /* U+10FFFF */
      {"\xF4\x90\x80\x80", 0}, /* U+110000 */
      {"\xF5\x80\x80\x80", 0},
      {"\xFF", 0},
      {"\x80", 0},
      {"abcdefg\xE2\x82", 0}, /* truncated at the end */
      {"\xE2\x82\xAC euro", 1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t n = strlen(cases[i].s);
    KT_CHECK_MSG(kc_utf8_valid((const uint8_t *)cases[i].s, n) == cases[i].ok,
                 "case %zu", i);
    char out[64];
    KT_CHECK_MSG((kc_json_escape(out, (const uint8_t *)cases[i].s, n) !=
                  NULL) == cases[i].ok,
                 "escape case %zu", i);
  }
}

/* Random strings built from a palette that hits every path, checked
 * against the references. */
/* What a terminal would act on comes out as \u escapes. */
static void test_escape_terminal(void) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"a\x1b[2Jb", "a\\u001b[2Jb"},
      {"\xC2\x9B"
       "2J",
       "\\u009b2J"},
      {"\xC2\x80\xC2\x9F\xC2\xA0", "\\u0080\\u009f\xC2\xA0"},
      {"x\xE2\x80\xAEy", "x\\u202ey"},
      {"\xE2\x80\x8E\xE2\x80\x8F\xE2\x80\xAA", "\\u200e\\u200f\\u202a"},
      {"\xE2\x81\xA6\xE2\x81\xA9\xE2\x81\xAA", "\\u2066\\u2069\xE2\x81\xAA"},
      {"\xE2\x80\x94", "\xE2\x80\x94"}, /* an em dash stays */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char out[128];
    char *e =
        kc_json_escape(out, (const uint8_t *)cases[i].in, strlen(cases[i].in));
    KT_CHECK(e != NULL);
    if (!e) continue;
    *e = '\0';
    KT_CHECK_STR(out, cases[i].out);
  }
}

/* Text for a terminal (diagnostics quoting a record processor). */
static void test_term_text(void) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"plain \"text\" \\ tab\tend", "plain \"text\" \\ tab\tend"},
      {"a\x1b[2Jb\x07\x7f", "a\\x1b[2Jb\\x07\\x7f"},
      {"\xC2\x9B"
       "2J \xE2\x80\xAE",
       "\\u009b2J \\u202e"},
      {"caf\xC3\xA9 \xFF\xC3", "caf\xC3\xA9 \\xff\\xc3"},
      {"\r\n", "\\x0d\\x0a"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char out[128];
    size_t n = kc_term_text(out, cases[i].in, strlen(cases[i].in));
    out[n] = '\0';
    KT_CHECK_STR(out, cases[i].out);
  }
}

static void test_escape_random(void) {
  static const uint8_t palette[] = {'a',  'Z',  ' ',  '~',  0x7f, '"',  '\\',
                                    '\n', 0,    0x1f, 0x80, 0xBF, 0xC2, 0xDF,
                                    0xE0, 0xED, 0xA0, 0xF0, 0xF4, 0x90, 0x8F,
                                    0xF5, 0xE2, 0x81, 0xAE, 0xA6, 0x9B, 0x8E};
  uint8_t in[160];
  char out[160 * 6 + 1], ref[160 * 6 + 1];
  for (int iter = 0; iter < 200000; iter++) {
    size_t n = next() % sizeof(in);
    int mostly_ascii = iter & 1;
    for (size_t i = 0; i < n; i++) {
      uint64_t r = next();
      in[i] = mostly_ascii && (r & 7) ? (uint8_t)('a' + r % 26)
                                      : palette[(r >> 8) % sizeof(palette)];
    }
    int valid = ref_utf8_valid(in, n);
    if (kc_utf8_valid(in, n) != valid) {
      KT_CHECK_MSG(0, "utf8_valid differs at iteration %d", iter);
      break;
    }
    char *e = kc_json_escape(out, in, n);
    if ((e != NULL) != valid) {
      KT_CHECK_MSG(0, "escape validity differs at iteration %d", iter);
      break;
    }
    if (e) {
      size_t rn = ref_escape(ref, in, n);
      if ((size_t)(e - out) != rn || memcmp(out, ref, rn)) {
        KT_CHECK_MSG(0, "escape output differs at iteration %d", iter);
        break;
      }
    }
  }
  /* Every byte value after a run of ASCII: the vector and SWAR tests
   * must flag it wherever it is in their blocks. */
  for (int c = 0; c < 256; c++) {
    uint8_t s[71];
    memset(s, 'x', sizeof(s));
    for (int at = 0; at < (int)sizeof(s); at++) {
      memset(s, 'x', sizeof(s));
      s[at] = (uint8_t)c;
      int valid = ref_utf8_valid(s, sizeof(s));
      char *e = kc_json_escape(out, s, sizeof(s));
      KT_CHECK_MSG((e != NULL) == valid, "byte %d at %d", c, at);
      if (e) {
        size_t rn = ref_escape(ref, s, sizeof(s));
        KT_CHECK_MSG((size_t)(e - out) == rn && !memcmp(out, ref, rn),
                     "byte %d at %d", c, at);
      }
    }
  }
}

static void test_base64(void) {
  static const char *const expect[] = {
      "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  char out[16];
  for (size_t n = 0; n <= 6; n++) {
    size_t len = kn_base64_encode(out, (const uint8_t *)"foobar", n);
    out[len] = '\0';
    KT_CHECK_STR(out, expect[n]);
  }
  uint8_t all[256];
  for (int i = 0; i < 256; i++) all[i] = (uint8_t)i;
  char b64[400];
  size_t len = kn_base64_encode(b64, all, 256);
  KT_CHECK_INT(len, 344);
  b64[len] = '\0';
  KT_CHECK(!strncmp(
      b64, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v",
      64));
  KT_CHECK(!strcmp(b64 + 340, "/w=="));
  /* Every length and offset against a plain reference encoder. */
  static const char tab[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint8_t in[300];
  char got[420], ref[420];
  for (int iter = 0; iter < 3000; iter++) {
    size_t n = (size_t)iter % 300;
    for (size_t i = 0; i < n; i++) in[i] = (uint8_t)next();
    size_t gl = kn_base64_encode(got, in, n), rl = 0;
    for (size_t i = 0; i < n; i += 3) {
      uint32_t v = (uint32_t)in[i] << 16 |
                   (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                   (i + 2 < n ? in[i + 2] : 0);
      ref[rl++] = tab[v >> 18];
      ref[rl++] = tab[(v >> 12) & 63];
      ref[rl++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
      ref[rl++] = i + 2 < n ? tab[v & 63] : '=';
    }
    if (gl != rl || memcmp(got, ref, rl)) {
      KT_CHECK_MSG(0, "base64 differs for length %zu", n);
      break;
    }
  }
}

static char *slurp(int fd, size_t *n) {
  static char buf[1 << 16];
  *n = 0;
  ssize_t r;
  while ((r = read(fd, buf + *n, sizeof(buf) - 1 - *n)) > 0) *n += (size_t)r;
  buf[*n] = '\0';
  return buf;
}

/* The longest names fit the room kc_json_prefix_cap() asks for, escaped
 * throughout. */
static void test_json_prefix_long(void) {
  char stream[129], shard[129];
  memset(stream, '"', 128);
  memset(shard, '\x01', 128);
  stream[128] = shard[128] = '\0';
  size_t cap = kc_json_prefix_cap(stream, shard);
  char *buf = malloc(cap);
  size_t n = kc_json_prefix(buf, cap, stream, shard);
  KT_CHECK(n > 0 && n <= cap);
  KT_CHECK_INT(kc_json_prefix(buf, cap - 1, stream, shard), 0);
  free(buf);
}

static void test_json_record(void) {
  int p[2];
  KT_CHECK(pipe(p) == 0);
  kc_out_t o;
  KT_CHECK(kc_out_init(&o, p[1], 1 << 20) == 0);
  char prefix[256];
  size_t plen =
      kc_json_prefix(prefix, sizeof(prefix), "s\"1", "shardId-000000000000");
  KT_CHECK(plen > 0);
  kc_json_rec_t r = {"4959", 3, "k\n", 1700000000123LL, "h\xC3\xA9\"llo", 7};
  KT_CHECK(kc_out_json_record(&o, prefix, plen, &r) == 0);
  kc_json_rec_t b = {"1", 0, "k", 5, "\xff\x00\x01", 3};
  KT_CHECK(kc_out_json_record(&o, prefix, plen, &b) == 0);
  kc_json_rec_t e = {"2", 0, "bad\xff", 0, "", 0};
  KT_CHECK(kc_out_json_record(&o, prefix, plen, &e) == 0);
  /* No key: a record of a stream that places records itself. */
  kc_json_rec_t nk = {"3", 0, "", 6, "x", 1};
  KT_CHECK(kc_out_json_record(&o, prefix, plen, &nk) == 0);
  KT_CHECK(kc_out_raw_record(&o, "key", "\t", 1, "a\0b", 3, "\n", 1) == 0);
  KT_CHECK(kc_out_raw_record(&o, NULL, NULL, 0, "x", 1, "--", 2) == 0);
  KT_CHECK(kc_out_flush(&o) == 0);
  close(p[1]);
  size_t n;
  char *got = slurp(p[0], &n);
  close(p[0]);
  static const char want[] =
      "{\"stream\":\"s\\\"1\",\"shard\":\"shardId-000000000000\",\"seq\":"
      "\"4959\","
      "\"subseq\":3,\"key\":\"k\\n\",\"ts\":1700000000123,\"data\":"
      "\"h\xC3\xA9\\\"llo\"}\n"
      "{\"stream\":\"s\\\"1\",\"shard\":\"shardId-000000000000\",\"seq\":\"1\","
      "\"subseq\":0,\"key\":\"k\",\"ts\":5,\"data_b64\":\"/wAB\"}\n"
      "{\"stream\":\"s\\\"1\",\"shard\":\"shardId-000000000000\",\"seq\":\"2\","
      "\"subseq\":0,\"key\":\"bad\xEF\xBF\xBD\",\"ts\":0,\"data\":\"\"}\n"
      "{\"stream\":\"s\\\"1\",\"shard\":\"shardId-000000000000\",\"seq\":\"3\","
      "\"subseq\":0,\"key\":null,\"ts\":6,\"data\":\"x\"}\n"
      "key\ta\0b\nx--";
  KT_CHECK_INT(n, sizeof(want) - 1);
  KT_CHECK(!memcmp(got, want, sizeof(want) - 1));
  /* A closed reader: the error is kept and later output dropped. */
  KT_CHECK(pipe(p) == 0);
  o.fd = p[1];
  KT_CHECK(!kc_out_reader_gone(&o));
  close(p[0]);
  KT_CHECK(kc_out_reader_gone(&o));
  o.error = 0;
  KT_CHECK(kc_out_write(&o, "x", 1) == 0);
  KT_CHECK(kc_out_flush(&o) == -1);
  KT_CHECK(o.error != 0);
  KT_CHECK(kc_out_write(&o, "x", 1) == -1);
  close(p[1]);
  kc_out_free(&o);
}

/* Feeds input through a pipe in pieces of `chunk` bytes (via a child
 * writer) and collects the records as "len:bytes|" or "TOO:len|". */
static void read_all(const char *in, size_t n, const char *delim, size_t dlen,
                     size_t max, char *trace, size_t cap) {
  char path[] = "/tmp/kncat-reader-XXXXXX";
  int fd = mkstemp(path);
  KT_CHECK(fd >= 0);
  KT_CHECK(write(fd, in, n) == (ssize_t)n);
  lseek(fd, 0, SEEK_SET);
  unlink(path);
  kc_reader_t r;
  KT_CHECK(kc_reader_init(&r, fd, delim, dlen, max) == 0);
  size_t t = 0;
  trace[0] = '\0';
  for (;;) {
    const char *d;
    size_t len;
    kc_read_res_t res = kc_reader_next(&r, &d, &len);
    if (res == KC_READ_END || res < 0) break;
    if (res == KC_READ_TOO_LONG)
      t += (size_t)snprintf(trace + t, cap - t, "TOO:%zu|", len);
    else {
      t += (size_t)snprintf(trace + t, cap - t, "%zu:", len);
      if (len < 40 && t + len < cap) {
        memcpy(trace + t, d, len);
        t += len;
      }
      t += (size_t)snprintf(trace + t, cap - t, "|");
    }
  }
  kc_reader_free(&r);
  close(fd);
}

static void test_reader(void) {
  char trace[4096];
  read_all("a\nbb\n", 5, "\n", 1, 100, trace, sizeof(trace));
  KT_CHECK_STR(trace, "1:a|2:bb|");
  read_all("a\nbb", 4, "\n", 1, 100, trace, sizeof(trace));
  KT_CHECK_STR(trace, "1:a|2:bb|");
  read_all("", 0, "\n", 1, 100, trace, sizeof(trace));
  KT_CHECK_STR(trace, "");
  read_all("\n", 1, "\n", 1, 100, trace, sizeof(trace));
  KT_CHECK_STR(trace, "0:|");
  read_all("a\n\n", 3, "\n", 1, 100, trace, sizeof(trace));
  KT_CHECK_STR(trace, "1:a|0:|");
  read_all("x\0y\0", 4, "\0", 1, 100, trace, sizeof(trace));
  KT_CHECK(!memcmp(trace, "1:x|1:y|", 8));
  read_all("ab--cd---ef--", 13, "--", 2, 100, trace, sizeof(trace));
  KT_CHECK_STR(trace, "2:ab|2:cd|3:-ef|");
  read_all("abc\r\ndef", 8, "\r\n", 2, 100, trace, sizeof(trace));
  KT_CHECK_STR(trace, "3:abc|3:def|");
  /* Records over the limit are skipped whole and reported. */
  read_all("aaaaaaaaaa\nbb\naaaaaaaaaaaa", 26, "\n", 1, 5, trace,
           sizeof(trace));
  KT_CHECK_STR(trace, "TOO:10|2:bb|TOO:12|");
  read_all("aaaaa\nbbbbbb--c", 15, "--", 2, 5, trace, sizeof(trace));
  KT_CHECK_STR(trace, "TOO:12|1:c|");
  read_all("12345--123456", 13, "--", 2, 5, trace, sizeof(trace));
  KT_CHECK_STR(trace, "5:12345|TOO:6|");
  /* Large input crossing many reads: records of many lengths, delimiter
   * pieces landing on read boundaries. */
  size_t cap = 4u << 20, n = 0, want = 0, want_bytes = 0;
  char *big = malloc(cap);
  for (size_t i = 0; n + 6000 < cap; i++) {
    size_t len = (i * 7919) % 5000;
    memset(big + n, 'a' + (int)(i % 26), len);
    n += len;
    memcpy(big + n, "#|", 2);
    n += 2;
    want++;
    want_bytes += len;
  }
  char path[] = "/tmp/kncat-reader-XXXXXX";
  int fd = mkstemp(path);
  KT_CHECK(write(fd, big, n) == (ssize_t)n);
  lseek(fd, 0, SEEK_SET);
  unlink(path);
  kc_reader_t r;
  KT_CHECK(kc_reader_init(&r, fd, "#|", 2, 4096) == 0);
  size_t got = 0, got_bytes = 0, too = 0, bad = 0;
  for (;;) {
    const char *d;
    size_t len;
    kc_read_res_t res = kc_reader_next(&r, &d, &len);
    if (res == KC_READ_END || res < 0) break;
    size_t expect_len = (got * 7919) % 5000;
    if (len != expect_len) bad++;
    if (res == KC_READ_TOO_LONG) {
      too++;
    } else {
      for (size_t i = 0; i < len; i++)
        if (d[i] != 'a' + (int)(got % 26)) {
          bad++;
          break;
        }
    }
    got++;
    got_bytes += len;
  }
  KT_CHECK_INT(got, want);
  KT_CHECK_INT(got_bytes, want_bytes);
  KT_CHECK_INT(bad, 0);
  KT_CHECK(too > 0);
  kc_reader_free(&r);
  close(fd);
  free(big);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* a closed reader must be an EPIPE */
  KT_RUN(test_utf8_edges);
  KT_RUN(test_escape_terminal);
  KT_RUN(test_term_text);
  KT_RUN(test_json_prefix_long);
  KT_RUN(test_escape_random);
  KT_RUN(test_base64);
  KT_RUN(test_json_record);
  KT_RUN(test_reader);
  return KT_DONE();
}
