/* Event stream framing: frames written byte by byte from the format,
 * published test vectors, every split of a stream, corruption of every
 * kind, and the encoder. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "aws/eventstream.h"
#include "core/error.h"
#include "kt.h"
#include "util/buf.h"

/* ---- Writing frames by hand ---- */

static void put_u8(kn_buf_t *b, unsigned v) {
  kn_buf_append_char(b, (char)(uint8_t)v);
}
static void put_u16(kn_buf_t *b, unsigned v) {
  put_u8(b, v >> 8);
  put_u8(b, v);
}
static void put_u32(kn_buf_t *b, uint32_t v) {
  put_u16(b, v >> 16);
  put_u16(b, v & 0xffff);
}
static void put_u64(kn_buf_t *b, uint64_t v) {
  put_u32(b, (uint32_t)(v >> 32));
  put_u32(b, (uint32_t)v);
}
static void put_name(kn_buf_t *b, const char *name, unsigned type) {
  put_u8(b, (unsigned)strlen(name));
  kn_buf_append_str(b, name);
  put_u8(b, type);
}

static uint32_t crc(const void *p, size_t n) {
  return (uint32_t)crc32(crc32(0, NULL, 0), p, (uInt)n);
}

/* Appends a frame with the given headers block and payload.  total and
 * hlen override the true lengths when non-zero; both CRCs are computed
 * over what is written, so only the lengths are wrong. */
static void frame_raw(kn_buf_t *out, const void *hdrs, size_t hlen,
                      const void *payload, size_t plen, uint32_t total,
                      uint32_t hlen_field) {
  size_t start = out->len;
  put_u32(out, total ? total : (uint32_t)(16 + hlen + plen));
  put_u32(out, hlen_field ? hlen_field : (uint32_t)hlen);
  put_u32(out, crc(out->p + start, 8));
  kn_buf_append(out, hdrs, hlen);
  kn_buf_append(out, payload, plen);
  put_u32(out, crc(out->p + start, out->len - start));
}

static void frame(kn_buf_t *out, const kn_buf_t *hdrs, const char *payload) {
  frame_raw(out, hdrs->p, hdrs->len, payload, strlen(payload), 0, 0);
}

/* ---- Collecting what the decoder delivers ---- */

/* A canonical text form of a message, for comparisons. */
static void dump(kn_buf_t *o, const kn_evs_msg_t *m) {
  kn_buf_printf(o, "msg %zu headers, %zu bytes\n", m->n_headers,
                m->payload_len);
  for (size_t i = 0; i < m->n_headers; i++) {
    const kn_evs_header_t *h = &m->headers[i];
    kn_buf_printf(o, " %.*s %s ", (int)h->name_len, h->name,
                  kn_evs_type_name(h->type));
    if (h->val) {
      for (size_t k = 0; k < h->val_len; k++)
        kn_buf_printf(o, "%02x", h->val[k]);
    } else {
      kn_buf_printf(o, "%lld", (long long)h->num);
    }
    kn_buf_append_char(o, '\n');
  }
  kn_buf_append(o, m->payload, m->payload_len);
  kn_buf_append_char(o, '\n');
}

typedef struct sink {
  kn_buf_t text;
  int n;
  int stop_after; /* stop when n reaches it; 0: never */
  int take;       /* take every frame */
  int in_place, buffered;
} sink_t;

static int on_msg(void *opaque, kn_evs_decoder_t *d, const kn_evs_msg_t *m) {
  sink_t *s = opaque;
  dump(&s->text, m);
  s->n++;
  if (s->take) {
    uint8_t *f = kn_evs_take_frame(d);
    KT_CHECK(f != NULL);
    if (f) {
      /* Same bytes, NUL after them, and nothing to take a second time. */
      KT_CHECK(memcmp(f, m->frame, m->frame_len) == 0);
      KT_CHECK(f[m->frame_len] == 0);
      if (f == m->frame)
        s->buffered++;
      else
        s->in_place++;
      KT_CHECK(kn_evs_take_frame(d) == NULL);
      free(f);
    }
  }
  return s->stop_after && s->n >= s->stop_after;
}

/* Feeds data in pieces of `step` bytes (0: all at once); returns the feed
 * or finish error code. */
static kn_err_t decode(const void *data, size_t len, size_t step, sink_t *s,
                       kn_error_t **errp) {
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, on_msg, s);
  const uint8_t *p = data;
  kn_err_t err = KN_ERR_NO_ERROR;
  if (!step) step = len ? len : 1;
  for (size_t off = 0; off < len && !err; off += step)
    err = kn_evs_feed(d, p + off, len - off < step ? len - off : step, errp);
  if (!err) err = kn_evs_finish(d, errp);
  kn_evs_decoder_destroy(d);
  return err;
}

static kn_err_t decode_quiet(const void *data, size_t len, size_t step) {
  sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
  kn_error_t *e = NULL;
  kn_err_t err = decode(data, len, step, &s, &e);
  KT_CHECK((err != KN_ERR_NO_ERROR) == (e != NULL));
  kn_error_destroy(e);
  kn_buf_free(&s.text);
  return err;
}

/* ---- Tests ---- */

/* Published in the AWS SDKs' event stream test vectors. */
static void test_vectors(void) {
  static const uint8_t empty[] = {0, 0,   0,  16,  0,   0,   0,   0,
                                  5, 194, 72, 235, 125, 152, 200, 255};
  static const uint8_t int32_header[] = {
      0,   0,   0,   45, 0,   0,   0,   16,  65,  196, 36,  184, 10,  101, 118,
      101, 110, 116, 45, 116, 121, 112, 101, 4,   0,   0,   160, 12,  123, 39,
      102, 111, 111, 39, 58,  39,  98,  97,  114, 39,  125, 54,  244, 128, 160};
  sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
  KT_CHECK_INT(decode(empty, sizeof(empty), 0, &s, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(decode(int32_header, sizeof(int32_header), 1, &s, NULL),
               KN_ERR_NO_ERROR);
  KT_CHECK_STR(s.text.p,
               "msg 0 headers, 0 bytes\n\n"
               "msg 1 headers, 13 bytes\n event-type int 40972\n"
               "{'foo':'bar'}\n");

  kn_buf_t b = KN_BUF_INIT;
  KT_CHECK_INT(kn_evs_encode(&b, NULL, 0, NULL, 0, NULL), KN_ERR_NO_ERROR);
  KT_CHECK(b.len == sizeof(empty) && memcmp(b.p, empty, b.len) == 0);
  kn_buf_reset(&b);
  kn_evs_header_t h = kn_evs_h_num("event-type", KN_EVS_INT, 40972);
  KT_CHECK_INT(kn_evs_encode(&b, &h, 1, "{'foo':'bar'}", 13, NULL),
               KN_ERR_NO_ERROR);
  KT_CHECK(b.len == sizeof(int32_header) &&
           memcmp(b.p, int32_header, b.len) == 0);
  kn_buf_free(&b);
  kn_buf_free(&s.text);
}

static const uint8_t uuid[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55,
                                 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
                                 0xcc, 0xdd, 0xee, 0xff};

/* One header of every type, extremes included. */
static void all_types_headers(kn_buf_t *h) {
  put_name(h, "t", 0);
  put_name(h, "f", 1);
  put_name(h, "b", 2);
  put_u8(h, 0x80);
  put_name(h, "s", 3);
  put_u16(h, 0x8000);
  put_name(h, "i", 4);
  put_u32(h, 0xfffffffeu);
  put_name(h, "l", 5);
  put_u64(h, 0x8000000000000000ull);
  put_name(h, "ba", 6);
  put_u16(h, 3);
  kn_buf_append(h, "\0\1\2", 3);
  put_name(h, "str", 7);
  put_u16(h, 5);
  kn_buf_append(h, "h\xc3\xa9ll", 5); /* "h", e-acute, "ll" */
  put_name(h, "ts", 8);
  put_u64(h, 1700000000123ull);
  put_name(h, "u", 9);
  kn_buf_append(h, uuid, 16);
  put_name(h, "empty", 7);
  put_u16(h, 0);
  put_name(h, "lmax", 5);
  put_u64(h, 0x7fffffffffffffffull);
}

static const char *all_types_dump =
    "msg 12 headers, 7 bytes\n"
    " t bool 1\n f bool 0\n b byte -128\n s short -32768\n i int -2\n"
    " l long -9223372036854775808\n ba bytes 000102\n str string 68c3a96c6c\n"
    " ts timestamp 1700000000123\n u uuid 00112233445566778899aabbccddeeff\n"
    " empty string \n lmax long 9223372036854775807\n"
    "payload\n";

static void test_all_header_types(void) {
  kn_buf_t h = KN_BUF_INIT, f = KN_BUF_INIT;
  all_types_headers(&h);
  frame(&f, &h, "payload");
  sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
  KT_CHECK_INT(decode(f.p, f.len, 0, &s, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_STR(s.text.p, all_types_dump);

  /* The encoder writes the same bytes from the decoded values. */
  kn_evs_header_t hs[] = {
      kn_evs_h_bool("t", 1),
      kn_evs_h_bool("f", 0),
      kn_evs_h_num("b", KN_EVS_BYTE, -128),
      kn_evs_h_num("s", KN_EVS_SHORT, -32768),
      kn_evs_h_num("i", KN_EVS_INT, -2),
      kn_evs_h_num("l", KN_EVS_LONG, INT64_MIN),
      kn_evs_h_bin("ba", KN_EVS_BYTES, "\0\1\2", 3),
      kn_evs_h_str("str", "h\xc3\xa9ll"),
      kn_evs_h_num("ts", KN_EVS_TIMESTAMP, 1700000000123),
      kn_evs_h_bin("u", KN_EVS_UUID, uuid, 16),
      kn_evs_h_str("empty", ""),
      kn_evs_h_num("lmax", KN_EVS_LONG, INT64_MAX),
  };
  size_t n = sizeof(hs) / sizeof(hs[0]);
  kn_buf_t e = KN_BUF_INIT;
  KT_CHECK_INT(kn_evs_encode(&e, hs, n, "payload", 7, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(e.len, f.len);
  KT_CHECK(e.len == f.len && memcmp(e.p, f.p, f.len) == 0);
  KT_CHECK_INT(kn_evs_encoded_len(hs, n, 7), f.len);
  kn_buf_free(&e);
  kn_buf_free(&s.text);
  kn_buf_free(&h);
  kn_buf_free(&f);
}

static int lookup_cb(void *opaque, kn_evs_decoder_t *d, const kn_evs_msg_t *m) {
  (void)d;
  int *ok = opaque;
  size_t len = 99;
  const kn_evs_header_t *h = kn_evs_msg_header(m, "dup");
  *ok = h && h->type == KN_EVS_INT && h->num == 2 &&
        !kn_evs_msg_header(m, "du") && !kn_evs_msg_header(m, "dupe") &&
        kn_evs_msg_str(m, ":message-type", &len) && len == 5 &&
        kn_evs_msg_str_eq(m, ":message-type", "event") &&
        !kn_evs_msg_str_eq(m, ":message-type", "even") &&
        !kn_evs_msg_str(m, "dup", NULL) && kn_evs_msg_str(m, "e", &len) &&
        len == 0 && kn_evs_msg_str_eq(m, "e", "");
  return 0;
}

static void test_lookup(void) {
  kn_evs_header_t hs[] = {
      kn_evs_h_num("dup", KN_EVS_INT, 1),
      kn_evs_h_str(":message-type", "event"),
      kn_evs_h_num("dup", KN_EVS_INT, 2),
      kn_evs_h_str("e", ""),
  };
  kn_buf_t f = KN_BUF_INIT;
  KT_CHECK_INT(kn_evs_encode(&f, hs, 4, NULL, 0, NULL), KN_ERR_NO_ERROR);
  int ok = 0;
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, lookup_cb, &ok);
  KT_CHECK_INT(kn_evs_feed(d, f.p, f.len, NULL), KN_ERR_NO_ERROR);
  KT_CHECK(ok);
  kn_evs_decoder_destroy(d);
  kn_buf_free(&f);
}

/* A stream of frames of many shapes, used for the split tests. */
static void sample_stream(kn_buf_t *st) {
  kn_buf_t h = KN_BUF_INIT;
  all_types_headers(&h);
  frame(st, &h, "payload");
  kn_buf_reset(&h);
  frame(st, &h, "");
  put_name(&h, ":message-type", 7);
  put_u16(&h, 5);
  kn_buf_append_str(&h, "event");
  frame(st, &h, "{\"Records\":[]}");
  kn_buf_reset(&h);
  char big[3000];
  for (size_t i = 0; i < sizeof(big); i++) big[i] = (char)('a' + i % 26);
  big[sizeof(big) - 1] = 0;
  frame(st, &h, big);
  frame(st, &h, "x");
  kn_buf_free(&h);
}

static void test_every_split(void) {
  kn_buf_t st = KN_BUF_INIT;
  sample_stream(&st);
  sink_t whole = {KN_BUF_INIT, 0, 0, 0, 0, 0};
  KT_CHECK_INT(decode(st.p, st.len, 0, &whole, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(whole.n, 5);

  /* One split point anywhere, including 0 and the end. */
  int mismatches = 0;
  for (size_t cut = 0; cut <= st.len; cut++) {
    sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
    kn_evs_decoder_t *d = kn_evs_decoder_new(0, on_msg, &s);
    kn_err_t e1 = kn_evs_feed(d, st.p, cut, NULL);
    kn_err_t e2 = kn_evs_feed(d, st.p + cut, st.len - cut, NULL);
    kn_err_t e3 = kn_evs_finish(d, NULL);
    if (e1 || e2 || e3 || s.n != 5 || !s.text.p || !whole.text.p ||
        strcmp(s.text.p, whole.text.p) != 0)
      mismatches++;
    kn_evs_decoder_destroy(d);
    kn_buf_free(&s.text);
  }
  KT_CHECK_INT(mismatches, 0);

  /* Pieces of every size from 1 byte up, with frames taken over. */
  for (size_t step = 1; step <= 64; step++) {
    sink_t s = {KN_BUF_INIT, 0, 0, 1, 0, 0};
    KT_CHECK_INT(decode(st.p, st.len, step, &s, NULL), KN_ERR_NO_ERROR);
    KT_CHECK_STR(s.text.p, whole.text.p);
    KT_CHECK_INT(s.in_place + s.buffered, 5);
    if (step == 1) KT_CHECK_INT(s.buffered, 5);
    kn_buf_free(&s.text);
  }
  /* All at once: every frame in place. */
  sink_t s = {KN_BUF_INIT, 0, 0, 1, 0, 0};
  KT_CHECK_INT(decode(st.p, st.len, 0, &s, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(s.in_place, 5);
  kn_buf_free(&s.text);
  kn_buf_free(&whole.text);
  kn_buf_free(&st);
}

static void test_many_frames_one_chunk(void) {
  kn_buf_t st = KN_BUF_INIT, h = KN_BUF_INIT;
  put_name(&h, "n", 4);
  put_u32(&h, 7);
  for (int i = 0; i < 1000; i++) frame(&st, &h, i % 2 ? "odd" : "");
  sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, on_msg, &s);
  KT_CHECK_INT(kn_evs_feed(d, st.p, st.len, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(s.n, 1000);
  KT_CHECK_INT(kn_evs_frames(d), 1000);
  KT_CHECK_INT(kn_evs_pending(d), 0);
  /* Half a frame more is pending, and finishing now is truncation. */
  KT_CHECK_INT(kn_evs_feed(d, st.p, 20, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(kn_evs_pending(d), 20);
  kn_error_t *e = NULL;
  KT_CHECK_INT(kn_evs_finish(d, &e), KN_ERR__CORRUPT);
  KT_CHECK(e && strstr(kn_error_string(e), "truncated"));
  kn_error_destroy(e);
  kn_evs_decoder_destroy(d);
  kn_buf_free(&s.text);
  kn_buf_free(&st);
  kn_buf_free(&h);
}

static void test_truncated_prelude(void) {
  kn_buf_t st = KN_BUF_INIT, h = KN_BUF_INIT;
  frame(&st, &h, "abc");
  for (size_t n = 1; n < st.len; n++)
    KT_CHECK_INT(decode_quiet(st.p, n, 1), KN_ERR__CORRUPT);
  KT_CHECK_INT(decode_quiet(st.p, 0, 1), KN_ERR_NO_ERROR);
  kn_buf_free(&st);
  kn_buf_free(&h);
}

/* Every single-bit flip anywhere in a frame is caught by one of the CRCs,
 * whatever the piece size. */
static void test_every_bit_flip(void) {
  kn_buf_t st = KN_BUF_INIT, h = KN_BUF_INIT;
  all_types_headers(&h);
  frame(&st, &h, "payload");
  int missed = 0;
  for (size_t i = 0; i < st.len * 8; i++) {
    st.p[i / 8] ^= (char)(1u << (i % 8));
    if (decode_quiet(st.p, st.len, 0) != KN_ERR__CORRUPT) missed++;
    if (decode_quiet(st.p, st.len, 1 + i % 13) != KN_ERR__CORRUPT) missed++;
    st.p[i / 8] ^= (char)(1u << (i % 8));
  }
  KT_CHECK_INT(missed, 0);
  kn_buf_free(&st);
  kn_buf_free(&h);
}

static void check_corrupt(const kn_buf_t *f, const char *needle) {
  for (size_t step = 0; step <= 5; step += 5) {
    sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
    kn_error_t *e = NULL;
    KT_CHECK_INT(decode(f->p, f->len, step, &s, &e), KN_ERR__CORRUPT);
    KT_CHECK_INT(s.n, 0);
    KT_CHECK_MSG(e && strstr(kn_error_string(e), needle), "%s lacks \"%s\"",
                 e ? kn_error_string(e) : "(no error)", needle);
    kn_error_destroy(e);
    kn_buf_free(&s.text);
  }
}

static void test_bad_crcs(void) {
  kn_buf_t f = KN_BUF_INIT, h = KN_BUF_INIT;
  frame(&f, &h, "hello");
  f.p[8] ^= 1;
  check_corrupt(&f, "prelude CRC");
  f.p[8] ^= 1;
  f.p[f.len - 1] ^= 0x80;
  check_corrupt(&f, "message CRC");
  f.p[f.len - 1] ^= 0x80;
  f.p[14] ^= 0x20; /* payload */
  check_corrupt(&f, "message CRC");
  kn_buf_free(&f);
  kn_buf_free(&h);
}

static void test_bad_lengths(void) {
  kn_buf_t f = KN_BUF_INIT, h = KN_BUF_INIT;
  /* Total below the minimum (with a valid prelude CRC). */
  for (uint32_t t = 1; t < 16; t++) {
    kn_buf_reset(&f);
    frame_raw(&f, "", 0, "", 0, t, 0);
    check_corrupt(&f, "too short");
  }
  kn_buf_reset(&f);
  put_u32(&f, 0);
  put_u32(&f, 0);
  put_u32(&f, crc(f.p, 8));
  put_u32(&f, 0);
  check_corrupt(&f, "too short");
  /* Over the cap, and over a small configured cap. */
  kn_buf_reset(&f);
  frame_raw(&f, "", 0, "", 0, KN_EVS_DEFAULT_MAX_FRAME + 1, 0);
  check_corrupt(&f, "too large");
  kn_buf_reset(&f);
  frame_raw(&f, "", 0, "", 0, 0xffffffffu, 0);
  check_corrupt(&f, "too large");
  /* The protocol's limits bound every decoder, whatever it asks for. */
  kn_buf_reset(&f);
  frame_raw(&f, "", 0, "", 0, 16u * 1024 * 1024 + 1, 0);
  check_corrupt(&f, "too large");
  {
    sink_t s0 = {KN_BUF_INIT, 0, 0, 0, 0, 0};
    kn_evs_decoder_t *big = kn_evs_decoder_new(SIZE_MAX, on_msg, &s0);
    KT_CHECK_INT(kn_evs_feed(big, f.p, f.len, NULL), KN_ERR__CORRUPT);
    kn_evs_decoder_destroy(big);
    kn_buf_free(&s0.text);
  }
  kn_buf_reset(&f);
  frame_raw(&f, "", 0, "", 0, 16u * 1024 * 1024, 128u * 1024 + 1);
  check_corrupt(&f, "over the protocol's maximum");
  kn_buf_reset(&f);
  frame_raw(&f, "", 0, "0123456789", 10, 0, 0);
  sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
  kn_evs_decoder_t *d = kn_evs_decoder_new(25, on_msg, &s);
  KT_CHECK_INT(kn_evs_feed(d, f.p, f.len, NULL), KN_ERR__CORRUPT);
  kn_evs_decoder_destroy(d);
  d = kn_evs_decoder_new(26, on_msg, &s);
  KT_CHECK_INT(kn_evs_feed(d, f.p, f.len, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(s.n, 1);
  kn_evs_decoder_destroy(d);
  kn_buf_free(&s.text);
  /* Headers longer than the frame has room for. */
  put_name(&h, "x", 0);
  kn_buf_reset(&f);
  frame_raw(&f, h.p, h.len, "", 0, 0, (uint32_t)h.len + 1);
  check_corrupt(&f, "headers length");
  kn_buf_reset(&f);
  frame_raw(&f, h.p, h.len, "", 0, 0, 0xffffffffu);
  check_corrupt(&f, "headers length");
  /* Exactly as long as the room: fine. */
  kn_buf_reset(&f);
  frame_raw(&f, h.p, h.len, "", 0, 0, 0);
  KT_CHECK_INT(decode_quiet(f.p, f.len, 0), KN_ERR_NO_ERROR);
  kn_buf_free(&f);
  kn_buf_free(&h);
}

/* Headers blocks whose last value stops short, for every type with a
 * value, and for names. */
static void test_truncated_headers(void) {
  static const struct {
    unsigned type;
    size_t need; /* value bytes, length prefix included */
  } types[] = {{2, 1},     {3, 2},     {4, 4}, {5, 8},
               {6, 2 + 4}, {7, 2 + 4}, {8, 8}, {9, 16}};
  kn_buf_t f = KN_BUF_INIT, h = KN_BUF_INIT;
  for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
    for (size_t have = 0; have < types[t].need; have++) {
      kn_buf_reset(&h);
      put_name(&h, "ok", 0);
      put_name(&h, "v", types[t].type);
      uint8_t val[32] = {0, 4, 'a', 'b', 'c', 'd'};
      if (types[t].type != 6 && types[t].type != 7)
        memset(val, 0x11, sizeof(val));
      kn_buf_append(&h, val, have);
      kn_buf_reset(&f);
      /* The payload after the headers must not be read as their end. */
      frame_raw(&f, h.p, h.len, "PAYLOAD-PAYLOAD-PAYLOAD", 23, 0, 0);
      check_corrupt(&f, "truncated");
    }
    /* The complete value decodes. */
    kn_buf_reset(&h);
    put_name(&h, "v", types[t].type);
    uint8_t val[32] = {0, 4, 'a', 'b', 'c', 'd'};
    if (types[t].type != 6 && types[t].type != 7)
      memset(val, 0x11, sizeof(val));
    kn_buf_append(&h, val, types[t].need);
    kn_buf_reset(&f);
    frame_raw(&f, h.p, h.len, "", 0, 0, 0);
    KT_CHECK_INT(decode_quiet(f.p, f.len, 0), KN_ERR_NO_ERROR);
  }
  /* Name longer than the headers; name without a type byte. */
  kn_buf_reset(&h);
  put_u8(&h, 10);
  kn_buf_append_str(&h, "abc");
  kn_buf_reset(&f);
  frame_raw(&f, h.p, h.len, "0123456789", 10, 0, 0);
  check_corrupt(&f, "runs past");
  kn_buf_reset(&h);
  put_u8(&h, 3);
  kn_buf_append_str(&h, "abc");
  kn_buf_reset(&f);
  frame_raw(&f, h.p, h.len, "0123456789", 10, 0, 0);
  check_corrupt(&f, "no value type");
  kn_buf_free(&f);
  kn_buf_free(&h);
}

static void test_unknown_type(void) {
  kn_buf_t f = KN_BUF_INIT, h = KN_BUF_INIT;
  static const unsigned types[] = {10, 11, 100, 200, 254};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
    unsigned t = types[i];
    kn_buf_reset(&h);
    put_name(&h, "x", t);
    put_u32(&h, 0);
    kn_buf_reset(&f);
    frame_raw(&f, h.p, h.len, "", 0, 0, 0);
    check_corrupt(&f, "unknown value type");
  }
  kn_buf_reset(&h);
  put_name(&h, "x", 255);
  kn_buf_reset(&f);
  frame_raw(&f, h.p, h.len, "", 0, 0, 0);
  check_corrupt(&f, "unknown value type 255");
  kn_buf_free(&f);
  kn_buf_free(&h);
}

/* After a failure the decoder refuses everything with the same code. */
static void test_stays_failed(void) {
  kn_buf_t good = KN_BUF_INIT, bad = KN_BUF_INIT, h = KN_BUF_INIT;
  frame(&good, &h, "ok");
  frame(&bad, &h, "bad");
  bad.p[bad.len - 2] ^= 1;
  sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, on_msg, &s);
  KT_CHECK_INT(kn_evs_feed(d, good.p, good.len, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(kn_evs_feed(d, bad.p, bad.len, NULL), KN_ERR__CORRUPT);
  kn_error_t *e = NULL;
  KT_CHECK_INT(kn_evs_feed(d, good.p, good.len, &e), KN_ERR__CORRUPT);
  KT_CHECK(e && strstr(kn_error_string(e), "failed earlier") &&
           strstr(kn_error_string(e), "message CRC"));
  KT_CHECK_INT(kn_error_code(e), KN_ERR__CORRUPT);
  kn_error_destroy(e);
  KT_CHECK_INT(kn_evs_finish(d, NULL), KN_ERR__CORRUPT);
  KT_CHECK_INT(s.n, 1);
  kn_evs_decoder_destroy(d);
  kn_buf_free(&s.text);
  kn_buf_free(&good);
  kn_buf_free(&bad);
  kn_buf_free(&h);
}

static void test_stop(void) {
  kn_buf_t st = KN_BUF_INIT;
  sample_stream(&st);
  for (size_t step = 0; step <= 7; step += 7) {
    sink_t s = {KN_BUF_INIT, 0, 2, 0, 0, 0};
    kn_error_t *e = NULL;
    KT_CHECK_INT(decode(st.p, st.len, step, &s, &e), KN_ERR__STATE);
    KT_CHECK_INT(s.n, 2);
    KT_CHECK(e && strstr(kn_error_string(e), "stopped"));
    kn_error_destroy(e);
    kn_buf_free(&s.text);
  }
  kn_buf_free(&st);
}

/* A big frame in small pieces: copied once into an exact-size buffer that
 * the callback can take; the decoder does not keep big buffers. */
static void test_big_frame(void) {
  size_t n = 5u * 1024 * 1024;
  char *payload = malloc(n);
  for (size_t i = 0; i < n; i++) payload[i] = (char)(i * 7);
  kn_buf_t f = KN_BUF_INIT;
  kn_evs_header_t h = kn_evs_h_str(":event-type", "SubscribeToShardEvent");
  KT_CHECK_INT(kn_evs_encode(&f, &h, 1, payload, n, NULL), KN_ERR_NO_ERROR);
  kn_evs_encode(&f, &h, 1, payload, 10, NULL);
  for (int take = 0; take < 2; take++) {
    sink_t s = {KN_BUF_INIT, 0, 0, take, 0, 0};
    KT_CHECK_INT(decode(f.p, f.len, 16384, &s, NULL), KN_ERR_NO_ERROR);
    KT_CHECK_INT(s.n, 2);
    /* The small frame after the big one arrives whole in a piece. */
    if (take) KT_CHECK(s.buffered == 1 && s.in_place == 1);
    kn_buf_free(&s.text);
  }
  free(payload);
  kn_buf_free(&f);
}

static void test_encode_errors(void) {
  char name[300];
  memset(name, 'n', sizeof(name));
  name[256] = 0;
  static char big[70000];
  kn_evs_header_t bad[] = {
      kn_evs_h_bool(name, 1),
      kn_evs_h_num("b", KN_EVS_BYTE, 128),
      kn_evs_h_num("b", KN_EVS_BYTE, -129),
      kn_evs_h_num("s", KN_EVS_SHORT, 32768),
      kn_evs_h_num("i", KN_EVS_INT, (int64_t)INT32_MIN - 1),
      kn_evs_h_bin("ba", KN_EVS_BYTES, big, 65536),
      kn_evs_h_bin("u", KN_EVS_UUID, big, 15),
      kn_evs_h_bin("u", KN_EVS_UUID, NULL, 16),
      kn_evs_h_num("x", (kn_evs_type_t)10, 0),
  };
  kn_buf_t b = KN_BUF_INIT;
  kn_buf_append_str(&b, "keep");
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    kn_evs_header_t hs[2] = {kn_evs_h_str("ok", "v"), bad[i]};
    kn_error_t *e = NULL;
    KT_CHECK_INT(kn_evs_encode(&b, hs, 2, "p", 1, &e), KN_ERR__INVALID_ARG);
    KT_CHECK(e && strstr(kn_error_string(e), "header 1"));
    kn_error_destroy(e);
    KT_CHECK_INT(kn_evs_encoded_len(hs, 2, 1), 0);
  }
  KT_CHECK_STR(b.p, "keep");
  /* The limits themselves are fine. */
  name[255] = 0;
  kn_evs_header_t ok[] = {kn_evs_h_bool(name, 0),
                          kn_evs_h_bin("ba", KN_EVS_BYTES, big, 65535),
                          kn_evs_h_num("b", KN_EVS_BYTE, 127)};
  KT_CHECK_INT(kn_evs_encode(&b, ok, 3, NULL, 0, NULL), KN_ERR_NO_ERROR);
  KT_CHECK_INT(decode_quiet(b.p + 4, b.len - 4, 1000), KN_ERR_NO_ERROR);
  kn_buf_free(&b);
}

static int refeed_cb(void *opaque, kn_evs_decoder_t *d, const kn_evs_msg_t *m) {
  int *calls = opaque;
  (*calls)++;
  KT_CHECK_INT(kn_evs_feed(d, m->frame, m->frame_len, NULL), KN_ERR__STATE);
  return 0;
}

/* Feeding a decoder from its own callback fails it, inside and out. */
static void test_feed_from_callback(void) {
  kn_buf_t st = KN_BUF_INIT;
  sample_stream(&st);
  int calls = 0;
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, refeed_cb, &calls);
  kn_error_t *e = NULL;
  KT_CHECK_INT(kn_evs_feed(d, st.p, st.len, &e), KN_ERR__STATE);
  KT_CHECK(e && strstr(kn_error_string(e), "own callback"));
  KT_CHECK_INT(calls, 1);
  kn_error_destroy(e);
  kn_evs_decoder_destroy(d);
  kn_buf_free(&st);
}

static void test_take_outside_callback(void) {
  sink_t s = {KN_BUF_INIT, 0, 0, 0, 0, 0};
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, on_msg, &s);
  KT_CHECK(kn_evs_take_frame(d) == NULL);
  kn_evs_decoder_destroy(d);
  kn_evs_decoder_destroy(NULL);
  KT_CHECK(kn_evs_decoder_new(0, NULL, NULL) == NULL);
  KT_CHECK_STR(kn_evs_type_name((kn_evs_type_t)42), "unknown");
}

int main(void) {
  KT_RUN(test_vectors);
  KT_RUN(test_all_header_types);
  KT_RUN(test_lookup);
  KT_RUN(test_every_split);
  KT_RUN(test_many_frames_one_chunk);
  KT_RUN(test_truncated_prelude);
  KT_RUN(test_every_bit_flip);
  KT_RUN(test_bad_crcs);
  KT_RUN(test_bad_lengths);
  KT_RUN(test_truncated_headers);
  KT_RUN(test_unknown_type);
  KT_RUN(test_stays_failed);
  KT_RUN(test_stop);
  KT_RUN(test_big_frame);
  KT_RUN(test_encode_errors);
  KT_RUN(test_feed_from_callback);
  KT_RUN(test_take_outside_callback);
  return KT_DONE();
}
