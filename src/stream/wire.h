/* Big-endian fields for the snapshot formats (docs/STREAM_PROCESSING.md):
 * a writer that appends to a kn_buf_t and remembers running out of
 * memory, and a bounds-checked reader that remembers the first short
 * read.  Pure. */
#ifndef KN_STREAM_WIRE_H
#define KN_STREAM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "kn/position.h"
#include "util/buf.h"

typedef struct kn_wr {
  kn_buf_t b; /* owned; kn_buf_free() or kn_buf_steal() */
  int oom;    /* an append failed: the bytes are incomplete */
} kn_wr_t;

void kn_wr_u8(kn_wr_t *w, uint8_t v);
void kn_wr_u16(kn_wr_t *w, uint16_t v);
void kn_wr_u32(kn_wr_t *w, uint32_t v);
void kn_wr_u64(kn_wr_t *w, uint64_t v);
/* A string of at most 65535 bytes as u16 length and bytes; NULL is the
 * empty string. */
void kn_wr_str(kn_wr_t *w, const char *s);
/* Overwrites the u32 at offset at (written earlier). */
void kn_wr_put_u32(kn_wr_t *w, size_t at, uint32_t v);
/* A position: u8 kind, u64 sub-sequence, u64 timestamp, str sequence. */
void kn_wr_position(kn_wr_t *w, const kn_position_t *p);
/* Magic, version and flags at the start; the CRC-32 of everything so far
 * at the end.  Returns the bytes (malloc'ed) or NULL on out-of-memory. */
void kn_wr_header(kn_wr_t *w, const char magic[4], uint16_t version);
void *kn_wr_finish(kn_wr_t *w, size_t *len);

typedef struct kn_rd {
  const uint8_t *p;
  size_t n, off;
  int bad; /* a read went past the end or found a malformed field */
} kn_rd_t;

uint8_t kn_rd_u8(kn_rd_t *r);
uint16_t kn_rd_u16(kn_rd_t *r);
uint32_t kn_rd_u32(kn_rd_t *r);
uint64_t kn_rd_u64(kn_rd_t *r);
/* A string as kn_wr_str wrote it, malloc'ed and NUL-terminated (NULL
 * when empty, or on error: *oom set when memory ran out).  Strings with a
 * NUL byte are malformed. */
char *kn_rd_str(kn_rd_t *r, int *oom);
/* Reads a position; malformed kinds or sequence numbers set bad. */
void kn_rd_position(kn_rd_t *r, kn_position_t *p);

/* Checks the envelope of a snapshot of p, n bytes: the magic, a version
 * in 1..max_version, and the CRC-32 trailer.  On success returns 0, sets
 * *version and leaves r over the body (the bytes after the header,
 * without the trailer).  Otherwise returns -1 with a message in why. */
int kn_rd_open(kn_rd_t *r, const void *p, size_t n, const char magic[4],
               uint16_t max_version, uint16_t *version, char *why,
               size_t why_size);

#endif
