/* Event stream decoder: prelude and message CRCs, length bounds, headers.
 * See eventstream.h for the format and the buffering rules. */
#include "aws/eventstream.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/crc32.h"
#include "util/str.h"

/* A buffer bigger than this is freed after its frame, so that one large
 * event does not pin its size in every idle subscription. */
#define KEEP_BUF_MAX (64u * 1024)

struct kn_evs_decoder {
  kn_evs_msg_cb *cb;
  void *opaque;
  size_t max_frame;

  /* The frame being received: have bytes so far, the first 12 in pre
   * until the prelude is whole, then all of them in buf. */
  uint8_t pre[KN_EVS_PRELUDE_LEN];
  size_t have;
  uint32_t total, hlen;
  uint32_t crc; /* running CRC of buf[0 .. min(have, total - 4)) */
  uint8_t *buf; /* owned; cap + 1 bytes */
  size_t cap;

  kn_evs_header_t *hdrs; /* owned, reused for every message */
  size_t hdr_cap;

  uint64_t offset; /* stream offset of the current frame */
  uint64_t frames;

  /* During the callback: what kn_evs_take_frame() may hand over. */
  int in_cb;
  int taken;
  int cur_in_buf; /* the frame is d->buf, not the caller's bytes */
  const uint8_t *cur;
  size_t cur_len;

  kn_err_t fail_code; /* KN_ERR_NO_ERROR while healthy */
  char *fail_msg;     /* owned; NULL if out of memory when failing */
};

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static uint64_t be64(const uint8_t *p) {
  return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/* Two's complement of a bits-wide value, without relying on
 * implementation-defined conversions. */
static int64_t sext(uint64_t u, unsigned bits) {
  uint64_t sign = (uint64_t)1 << (bits - 1);
  if (bits < 64) u &= (sign << 1) - 1;
  return u < sign ? (int64_t)u : -(int64_t)((sign << 1) - u - 1) - 1;
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n) {
  /* Every byte of a subscription passes here: the folding CRC. */
  return kn_crc32(crc, p, n);
}

/* Records the first failure; every later call reports it again. */
static kn_err_t fail(kn_evs_decoder_t *d, kn_error_t **errp, kn_err_t code,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static kn_err_t fail(kn_evs_decoder_t *d, kn_error_t **errp, kn_err_t code,
                     const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = kn_vasprintf(fmt, ap);
  va_end(ap);
  d->fail_code = code;
  free(d->fail_msg);
  d->fail_msg = msg;
  if (errp)
    *errp =
        kn_error_new(code, "event stream: %s", msg ? msg : kn_err2str(code));
  return code;
}

static kn_err_t refail(const kn_evs_decoder_t *d, kn_error_t **errp) {
  if (errp)
    *errp =
        kn_error_new(d->fail_code, "event stream: decoder failed earlier: %s",
                     d->fail_msg ? d->fail_msg : kn_err2str(d->fail_code));
  return d->fail_code;
}

kn_evs_decoder_t *kn_evs_decoder_new(size_t max_frame, kn_evs_msg_cb *cb,
                                     void *opaque) {
  if (!cb) return NULL;
  kn_evs_decoder_t *d = calloc(1, sizeof(*d));
  if (!d) return NULL;
  if (max_frame == 0) max_frame = KN_EVS_DEFAULT_MAX_FRAME;
  if (max_frame < KN_EVS_MIN_FRAME) max_frame = KN_EVS_MIN_FRAME;
  if (max_frame > KN_EVS_MAX_MESSAGE) max_frame = KN_EVS_MAX_MESSAGE;
  d->max_frame = max_frame;
  d->cb = cb;
  d->opaque = opaque;
  return d;
}

void kn_evs_decoder_destroy(kn_evs_decoder_t *d) {
  if (!d) return;
  free(d->buf);
  free(d->hdrs);
  free(d->fail_msg);
  free(d);
}

size_t kn_evs_pending(const kn_evs_decoder_t *d) { return d->have; }
uint64_t kn_evs_frames(const kn_evs_decoder_t *d) { return d->frames; }

/* Checks the prelude at p and sets total and hlen.  The CRC comes first:
 * on garbage it is the most telling complaint, and lengths are only
 * trusted (to size a buffer) once it matches. */
static kn_err_t check_prelude(kn_evs_decoder_t *d, const uint8_t *p,
                              kn_error_t **errp) {
  uint32_t total = be32(p), hlen = be32(p + 4), want = be32(p + 8);
  uint32_t got = crc_update(0, p, 8);
  if (got != want)
    return fail(d, errp, KN_ERR__CORRUPT,
                "prelude CRC mismatch at offset %llu (computed 0x%08x, "
                "frame says 0x%08x)",
                (unsigned long long)d->offset, got, want);
  if (total < KN_EVS_MIN_FRAME)
    return fail(d, errp, KN_ERR__CORRUPT,
                "frame at offset %llu too short: %u bytes (minimum %d)",
                (unsigned long long)d->offset, total, KN_EVS_MIN_FRAME);
  if (total > d->max_frame)
    return fail(d, errp, KN_ERR__CORRUPT,
                "frame at offset %llu too large: %u bytes (maximum %zu)",
                (unsigned long long)d->offset, total, d->max_frame);
  if (hlen > KN_EVS_MAX_HEADERS)
    return fail(d, errp, KN_ERR__CORRUPT,
                "frame at offset %llu: headers length %u over the protocol's "
                "maximum of %u",
                (unsigned long long)d->offset, hlen, KN_EVS_MAX_HEADERS);
  if (hlen > total - KN_EVS_MIN_FRAME)
    return fail(d, errp, KN_ERR__CORRUPT,
                "frame at offset %llu: headers length %u exceeds the %u "
                "bytes the %u-byte frame has room for",
                (unsigned long long)d->offset, hlen, total - KN_EVS_MIN_FRAME,
                total);
  d->total = total;
  d->hlen = hlen;
  d->crc = got;
  return KN_ERR_NO_ERROR;
}

static int push_header(kn_evs_decoder_t *d, size_t n) {
  if (n < d->hdr_cap) return 0;
  size_t cap = d->hdr_cap ? d->hdr_cap * 2 : 8;
  kn_evs_header_t *h = realloc(d->hdrs, cap * sizeof(*h));
  if (!h) return -1;
  d->hdrs = h;
  d->hdr_cap = cap;
  return 0;
}

/* Parses the headers block into d->hdrs; returns the count, or -1 after
 * fail(). */
static long parse_headers(kn_evs_decoder_t *d, const uint8_t *h, size_t hlen,
                          kn_error_t **errp) {
  static const uint8_t fixed_len[] = {0, 0, 1, 2, 4, 8, 0, 0, 8, 16};
  size_t pos = 0, n = 0;
  unsigned long long off = (unsigned long long)d->offset;
  while (pos < hlen) {
    size_t start = pos;
    size_t nl = h[pos++];
    if (nl > hlen - pos) {
      fail(d, errp, KN_ERR__CORRUPT,
           "frame at offset %llu: header name at byte %zu runs past the "
           "headers",
           off, start);
      return -1;
    }
    const char *name = (const char *)h + pos;
    pos += nl;
    if (pos == hlen) {
      fail(d, errp, KN_ERR__CORRUPT,
           "frame at offset %llu: header \"%.*s\" has no value type", off,
           (int)nl, name);
      return -1;
    }
    unsigned type = h[pos++];
    if (type > KN_EVS_UUID) {
      fail(d, errp, KN_ERR__CORRUPT,
           "frame at offset %llu: header \"%.*s\" has unknown value type %u",
           off, (int)nl, name, type);
      return -1;
    }
    size_t vlen = fixed_len[type];
    const uint8_t *v = h + pos;
    if (type == KN_EVS_BYTES || type == KN_EVS_STRING) {
      if (hlen - pos < 2)
        vlen = 2; /* reported as truncated below */
      else {
        vlen = (size_t)v[0] << 8 | v[1];
        pos += 2;
        v += 2;
      }
    }
    if (vlen > hlen - pos) {
      fail(d, errp, KN_ERR__CORRUPT,
           "frame at offset %llu: %s value of header \"%.*s\" is truncated",
           off, kn_evs_type_name((kn_evs_type_t)type), (int)nl, name);
      return -1;
    }
    if (push_header(d, n)) {
      fail(d, errp, KN_ERR__NOMEM, "out of memory for headers");
      return -1;
    }
    kn_evs_header_t *hd = &d->hdrs[n++];
    hd->name = name;
    hd->name_len = nl;
    hd->type = (kn_evs_type_t)type;
    hd->num = 0;
    hd->val = NULL;
    hd->val_len = 0;
    switch (hd->type) {
      case KN_EVS_BOOL_TRUE:
        hd->num = 1;
        break;
      case KN_EVS_BOOL_FALSE:
        break;
      case KN_EVS_BYTE:
        hd->num = sext(v[0], 8);
        break;
      case KN_EVS_SHORT:
        hd->num = sext((uint64_t)v[0] << 8 | v[1], 16);
        break;
      case KN_EVS_INT:
        hd->num = sext(be32(v), 32);
        break;
      case KN_EVS_LONG:
      case KN_EVS_TIMESTAMP:
        hd->num = sext(be64(v), 64);
        break;
      case KN_EVS_BYTES:
      case KN_EVS_STRING:
      case KN_EVS_UUID:
        hd->val = v;
        hd->val_len = vlen;
        break;
    }
    pos += vlen;
  }
  return (long)n;
}

/* Verifies the message CRC (crc covers all but the last 4 bytes), parses
 * the headers and runs the callback. */
static kn_err_t deliver(kn_evs_decoder_t *d, const uint8_t *f, int in_buf,
                        kn_error_t **errp) {
  uint32_t want = be32(f + d->total - 4);
  if (d->crc != want)
    return fail(d, errp, KN_ERR__CORRUPT,
                "message CRC mismatch in the %u-byte frame at offset %llu "
                "(computed 0x%08x, frame says 0x%08x)",
                d->total, (unsigned long long)d->offset, d->crc, want);
  long nh = parse_headers(d, f + KN_EVS_PRELUDE_LEN, d->hlen, errp);
  if (nh < 0) return d->fail_code;
  kn_evs_msg_t m = {
      .headers = d->hdrs,
      .n_headers = (size_t)nh,
      .payload = f + KN_EVS_PRELUDE_LEN + d->hlen,
      .payload_len = d->total - d->hlen - KN_EVS_MIN_FRAME,
      .frame = f,
      .frame_len = d->total,
      .offset = d->offset,
  };
  d->in_cb = 1;
  d->taken = 0;
  d->cur_in_buf = in_buf;
  d->cur = f;
  d->cur_len = d->total;
  int rc = d->cb(d->opaque, d, &m);
  d->in_cb = 0;
  d->cur = NULL;
  d->frames++;
  d->offset += d->total;
  d->have = 0;
  if (d->fail_code != KN_ERR_NO_ERROR) return refail(d, errp); /* misuse */
  if (rc)
    return fail(d, errp, KN_ERR__STATE,
                "stopped by the message callback after %llu frames",
                (unsigned long long)d->frames);
  return KN_ERR_NO_ERROR;
}

/* Makes buf hold at least total + 1 bytes; its contents do not matter. */
static kn_err_t frame_buf(kn_evs_decoder_t *d, kn_error_t **errp) {
  if (d->buf && d->cap >= d->total) return KN_ERR_NO_ERROR;
  size_t cap = d->cap * 2;
  if (cap < d->total || cap > KEEP_BUF_MAX) cap = d->total;
  free(d->buf);
  d->buf = malloc(cap + 1);
  d->cap = d->buf ? cap : 0;
  if (!d->buf)
    return fail(d, errp, KN_ERR__NOMEM, "out of memory for a %u-byte frame",
                d->total);
  return KN_ERR_NO_ERROR;
}

static void release_big_buf(kn_evs_decoder_t *d) {
  if (d->cap > KEEP_BUF_MAX) {
    free(d->buf);
    d->buf = NULL;
    d->cap = 0;
  }
}

/* Copies n bytes of the current frame into buf, folding into the CRC
 * those that precede the message CRC. */
static void append(kn_evs_decoder_t *d, const uint8_t *p, size_t n) {
  memcpy(d->buf + d->have, p, n);
  size_t crc_end = d->total - 4;
  if (d->have < crc_end) {
    size_t k = crc_end - d->have;
    if (k > n) k = n;
    d->crc = crc_update(d->crc, p, k);
  }
  d->have += n;
}

kn_err_t kn_evs_feed(kn_evs_decoder_t *d, const void *data, size_t len,
                     kn_error_t **errp) {
  if (errp) *errp = NULL;
  if (d->fail_code != KN_ERR_NO_ERROR) return refail(d, errp);
  if (d->in_cb)
    return fail(d, errp, KN_ERR__STATE, "fed from its own callback");
  const uint8_t *p = data;
  kn_err_t err;
  while (len) {
    if (d->have == 0 && len >= KN_EVS_PRELUDE_LEN) {
      /* At a frame boundary with the prelude at hand. */
      if ((err = check_prelude(d, p, errp))) return err;
      if (len >= d->total) {
        d->crc = crc_update(d->crc, p + 8, d->total - 12);
        if ((err = deliver(d, p, 0, errp))) return err;
        p += d->total;
        len -= d->total;
        continue;
      }
      if ((err = frame_buf(d, errp))) return err;
      /* The CRC of the first 8 bytes is known: copy those, then append. */
      memcpy(d->buf, p, 8);
      d->have = 8;
      append(d, p + 8, len - 8);
      return KN_ERR_NO_ERROR;
    }
    if (d->have < KN_EVS_PRELUDE_LEN) {
      size_t k = KN_EVS_PRELUDE_LEN - d->have;
      if (k > len) k = len;
      memcpy(d->pre + d->have, p, k);
      d->have += k;
      p += k;
      len -= k;
      if (d->have < KN_EVS_PRELUDE_LEN) break;
      if ((err = check_prelude(d, d->pre, errp))) return err;
      if ((err = frame_buf(d, errp))) return err;
      memcpy(d->buf, d->pre, 8);
      d->have = 8;
      append(d, d->pre + 8, 4);
      continue;
    }
    size_t k = d->total - d->have;
    if (k > len) k = len;
    append(d, p, k);
    p += k;
    len -= k;
    if (d->have == d->total) {
      err = deliver(d, d->buf, 1, errp);
      release_big_buf(d);
      if (err) return err;
    }
  }
  return KN_ERR_NO_ERROR;
}

kn_err_t kn_evs_finish(kn_evs_decoder_t *d, kn_error_t **errp) {
  if (errp) *errp = NULL;
  if (d->fail_code != KN_ERR_NO_ERROR) return refail(d, errp);
  if (d->have == 0) return KN_ERR_NO_ERROR;
  if (d->have < KN_EVS_PRELUDE_LEN)
    return fail(d, errp, KN_ERR__CORRUPT,
                "stream truncated inside the prelude of the frame at offset "
                "%llu (%zu of 12 bytes)",
                (unsigned long long)d->offset, d->have);
  return fail(d, errp, KN_ERR__CORRUPT,
              "stream truncated inside the frame at offset %llu (%zu of %u "
              "bytes)",
              (unsigned long long)d->offset, d->have, d->total);
}

uint8_t *kn_evs_take_frame(kn_evs_decoder_t *d) {
  if (!d->in_cb || d->taken) return NULL;
  uint8_t *f;
  if (d->cur_in_buf) {
    f = d->buf;
    d->buf = NULL;
    d->cap = 0;
  } else {
    f = malloc(d->cur_len + 1);
    if (!f) return NULL;
    memcpy(f, d->cur, d->cur_len);
  }
  f[d->cur_len] = 0;
  d->taken = 1;
  return f;
}

/* ---- Message helpers ---- */

const kn_evs_header_t *kn_evs_msg_header(const kn_evs_msg_t *msg,
                                         const char *name) {
  size_t nl = strlen(name);
  for (size_t i = msg->n_headers; i-- > 0;) {
    const kn_evs_header_t *h = &msg->headers[i];
    if (h->name_len == nl && memcmp(h->name, name, nl) == 0) return h;
  }
  return NULL;
}

const char *kn_evs_msg_str(const kn_evs_msg_t *msg, const char *name,
                           size_t *len) {
  const kn_evs_header_t *h = kn_evs_msg_header(msg, name);
  if (!h || h->type != KN_EVS_STRING) return NULL;
  if (len) *len = h->val_len;
  /* A zero-length value still needs a non-NULL pointer to mean
   * "present". */
  return h->val ? (const char *)h->val : "";
}

int kn_evs_msg_str_eq(const kn_evs_msg_t *msg, const char *name,
                      const char *s) {
  size_t len;
  const char *v = kn_evs_msg_str(msg, name, &len);
  return v && len == strlen(s) && memcmp(v, s, len) == 0;
}
