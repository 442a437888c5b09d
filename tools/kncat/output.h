/* Record output of consume: a large write(2) buffer and the formatting of
 * records as raw payloads or JSON lines.
 *
 * Speed matters here (consume's budget is ~1 ms of CPU per MB, library
 * included), so the buffer is filled in place, JSON escaping and UTF-8
 * validation run eight bytes at a time, and a record is written in one
 * optimistic pass: as a JSON string, rolled back to base64 only when the
 * payload turns out not to be valid UTF-8. */
#ifndef KNCAT_OUTPUT_H
#define KNCAT_OUTPUT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef struct kc_out {
  int fd;
  char *buf;
  size_t len, cap;
  size_t flush_at; /* kc_out_maybe_flush() writes once len reaches this */
  int error;       /* errno of the first failed write (EPIPE: reader gone) */
} kc_out_t;

/* flush_at: buffer size to accumulate before writing (e.g. 1 MiB). */
int kc_out_init(kc_out_t *o, int fd, size_t flush_at);
void kc_out_free(kc_out_t *o);
/* Writes everything buffered; -1 (o->error set) if the write failed.  After
 * a failure later output is discarded. */
int kc_out_flush(kc_out_t *o);
static inline int kc_out_maybe_flush(kc_out_t *o) {
  return o->len >= o->flush_at ? kc_out_flush(o) : 0;
}
/* Non-zero (and o->error set to EPIPE) if fd is a pipe or socket whose
 * reader has gone, found without writing: an idle consumer behind
 * `| head` must notice that too. */
int kc_out_reader_gone(kc_out_t *o);
/* Makes room for n more bytes; -1 on out of memory. */
int kc_out_reserve(kc_out_t *o, size_t n);
int kc_out_write(kc_out_t *o, const void *p, size_t n);

/* The fields of one record for JSON output.  prefix is the constant
 * start of every line of a batch, from kc_json_prefix(). */
typedef struct kc_json_rec {
  const char *seq;
  uint64_t subseq;
  const char *key;
  int64_t ts_ms;
  const void *data;
  size_t len;
} kc_json_rec_t;

/* Writes s as a JSON string ("null" for NULL): escaped, C1 controls as
 * \u escapes, a byte that is not UTF-8 as U+FFFD. */
void kc_json_str(FILE *fp, const char *s);

/* Builds `{"stream":"S","shard":"ID","seq":"` into dst (cap bytes, escaped
 * as needed); returns its length, 0 if cap is less than
 * kc_json_prefix_cap(stream, shard). */
size_t kc_json_prefix_cap(const char *stream, const char *shard);
size_t kc_json_prefix(char *dst, size_t cap, const char *stream,
                      const char *shard);
/* One JSON line: prefix, then seq, subseq, key, ts, and data or data_b64. */
int kc_out_json_record(kc_out_t *o, const char *prefix, size_t prefix_len,
                       const kc_json_rec_t *r);
/* Raw: [key, key_delim,] payload, delim.  key_delim NULL: no key. */
int kc_out_raw_record(kc_out_t *o, const char *key, const char *key_delim,
                      size_t key_delim_len, const void *data, size_t len,
                      const char *delim, size_t delim_len);

/* ---- Pure helpers, exposed for the tests ---- */

/* Escapes src as the inside of a JSON string, into dst (room for 6 * n
 * bytes).  Stops at the first byte that is not part of valid UTF-8 (strict:
 * no overlong forms, no surrogates, nothing above U+10FFFF) and returns
 * NULL then; otherwise returns the end of the output. */
char *kc_json_escape(char *dst, const uint8_t *src, size_t n);
/* As kc_json_escape, but each byte that is not part of valid UTF-8 becomes
 * repl (a NUL-terminated string of at most 6 bytes, valid inside a JSON
 * string, such as "\\ufffd"); linear in n whatever the input.  Returns the
 * end of the output. */
char *kc_json_text(char *dst, const uint8_t *src, size_t n, const char *repl);
/* src as a terminal may show it, into dst (room for 4 * n bytes): control
 * characters, DEL and bytes that are not UTF-8 as \\xNN, C1 controls and
 * direction overrides as \\uNNNN, the rest as it is.  Returns the length
 * written (no NUL). */
size_t kc_term_text(char *dst, const void *src, size_t n);
/* Non-zero if src is valid UTF-8 (same rules). */
int kc_utf8_valid(const uint8_t *src, size_t n);

#endif
