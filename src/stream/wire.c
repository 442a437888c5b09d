/* Big-endian fields, a CRC-32 trailer, bounds-checked reads. */
#include "stream/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32.h"

static void put(kn_wr_t *w, const void *p, size_t n) {
  if (!w->oom && kn_buf_append(&w->b, p, n)) w->oom = 1;
}

void kn_wr_u8(kn_wr_t *w, uint8_t v) { put(w, &v, 1); }

void kn_wr_u16(kn_wr_t *w, uint16_t v) {
  uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
  put(w, b, 2);
}

void kn_wr_u32(kn_wr_t *w, uint32_t v) {
  kn_wr_u16(w, (uint16_t)(v >> 16));
  kn_wr_u16(w, (uint16_t)v);
}

void kn_wr_u64(kn_wr_t *w, uint64_t v) {
  kn_wr_u32(w, (uint32_t)(v >> 32));
  kn_wr_u32(w, (uint32_t)v);
}

void kn_wr_str(kn_wr_t *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n > UINT16_MAX) n = UINT16_MAX; /* callers check lengths first */
  kn_wr_u16(w, (uint16_t)n);
  put(w, s, n);
}

void kn_wr_put_u32(kn_wr_t *w, size_t at, uint32_t v) {
  if (w->oom || at + 4 > w->b.len) return;
  uint8_t *p = (uint8_t *)w->b.p + at;
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

void kn_wr_position(kn_wr_t *w, const kn_position_t *p) {
  kn_wr_u8(w, (uint8_t)p->kind);
  kn_wr_u64(w, p->subseq);
  kn_wr_u64(w, (uint64_t)p->timestamp_ms);
  int seq = p->kind == KN_POSITION_AT_SEQUENCE || p->kind == KN_POSITION_AFTER;
  kn_wr_str(w, seq ? p->seq : NULL);
}

void kn_wr_header(kn_wr_t *w, const char magic[4], uint16_t version) {
  put(w, magic, 4);
  kn_wr_u16(w, version);
  kn_wr_u16(w, 0); /* flags: none defined */
}

void *kn_wr_finish(kn_wr_t *w, size_t *len) {
  uint32_t crc = w->oom ? 0 : kn_crc32_zlib(0, w->b.p, w->b.len);
  kn_wr_u32(w, crc);
  if (w->oom) {
    kn_buf_free(&w->b);
    return NULL;
  }
  return kn_buf_steal(&w->b, len);
}

static const uint8_t *take(kn_rd_t *r, size_t n) {
  if (r->bad || r->n - r->off < n) {
    r->bad = 1;
    return NULL;
  }
  const uint8_t *p = r->p + r->off;
  r->off += n;
  return p;
}

uint8_t kn_rd_u8(kn_rd_t *r) {
  const uint8_t *p = take(r, 1);
  return p ? p[0] : 0;
}

uint16_t kn_rd_u16(kn_rd_t *r) {
  const uint8_t *p = take(r, 2);
  return p ? (uint16_t)((p[0] << 8) | p[1]) : 0;
}

uint32_t kn_rd_u32(kn_rd_t *r) {
  uint32_t hi = kn_rd_u16(r);
  return (hi << 16) | kn_rd_u16(r);
}

uint64_t kn_rd_u64(kn_rd_t *r) {
  uint64_t hi = kn_rd_u32(r);
  return (hi << 32) | kn_rd_u32(r);
}

char *kn_rd_str(kn_rd_t *r, int *oom) {
  size_t n = kn_rd_u16(r);
  const uint8_t *p = take(r, n);
  if (!p || n == 0) return NULL;
  if (memchr(p, '\0', n)) {
    r->bad = 1;
    return NULL;
  }
  char *s = malloc(n + 1);
  if (!s) {
    *oom = 1;
    return NULL;
  }
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

void kn_rd_position(kn_rd_t *r, kn_position_t *p) {
  memset(p, 0, sizeof(*p));
  uint8_t kind = kn_rd_u8(r);
  p->subseq = kn_rd_u64(r);
  p->timestamp_ms = (int64_t)kn_rd_u64(r);
  size_t n = kn_rd_u16(r);
  const uint8_t *s = take(r, n);
  if (r->bad) return;
  switch (kind) {
    case KN_POSITION_TRIM_HORIZON:
    case KN_POSITION_LATEST:
    case KN_POSITION_AT_TIMESTAMP:
      p->kind = (kn_position_kind_t)kind;
      if (n) r->bad = 1;
      return;
    case KN_POSITION_AT_SEQUENCE:
    case KN_POSITION_AFTER: {
      char seq[KN_POSITION_SEQ_MAX];
      if (n >= sizeof(seq)) {
        r->bad = 1;
        return;
      }
      memcpy(seq, s, n);
      seq[n] = '\0';
      uint64_t sub = p->subseq;
      kn_err_t e = kind == KN_POSITION_AFTER ? kn_position_after(p, seq, sub)
                                             : kn_position_at(p, seq);
      if (e) r->bad = 1;
      return;
    }
    default:
      r->bad = 1;
  }
}

int kn_rd_open(kn_rd_t *r, const void *p, size_t n, const char magic[4],
               uint16_t max_version, uint16_t *version, char *why,
               size_t why_size) {
  const uint8_t *b = p;
  if (!p || n < 12 || memcmp(b, magic, 4) != 0) {
    snprintf(why, why_size, "not a %.4s snapshot (bad magic or too short)",
             magic);
    return -1;
  }
  uint32_t want = ((uint32_t)b[n - 4] << 24) | ((uint32_t)b[n - 3] << 16) |
                  ((uint32_t)b[n - 2] << 8) | b[n - 1];
  if (kn_crc32_zlib(0, b, n - 4) != want) {
    snprintf(why, why_size, "%.4s snapshot corrupt (CRC-32 mismatch)", magic);
    return -1;
  }
  r->p = b;
  r->n = n - 4;
  r->off = 4;
  r->bad = 0;
  *version = kn_rd_u16(r);
  (void)kn_rd_u16(r); /* flags: none defined yet, ignored */
  if (*version < 1 || *version > max_version) {
    snprintf(why, why_size,
             "%.4s snapshot format %u: this version reads formats 1 to %u",
             magic, (unsigned)*version, (unsigned)max_version);
    return -1;
  }
  return 0;
}
