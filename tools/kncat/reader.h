/* Splits a byte stream into delimited records without holding more than
 * one record (and one read chunk) in memory.  Binary-safe: the delimiter
 * may be any byte string, NUL bytes included. */
#ifndef KNCAT_READER_H
#define KNCAT_READER_H

#include <stddef.h>
#include <stdint.h>

typedef struct kc_reader {
  int fd;
  char delim[64];
  size_t delim_len;
  size_t max_record; /* longer records are skipped and reported */
  char *buf;
  size_t cap, start, end, scan;
  int eof;
  int skipping;     /* inside a record longer than max_record */
  uint64_t skipped; /* bytes of it dropped so far */
  int error;        /* errno of a failed read */
  /* Called before a read(2) that would block (input is a pipe or a
   * terminal with nothing ready), so that what was read can go out
   * instead of waiting for more.  May be NULL. */
  void (*idle)(void *opaque);
  void *idle_opaque;
} kc_reader_t;

typedef enum kc_read_res {
  KC_READ_END = 0,      /* no more records */
  KC_READ_RECORD = 1,   /* *data, *len: valid until the next call */
  KC_READ_TOO_LONG = 2, /* a record longer than max_record; *len is its size */
  KC_READ_ERROR = -1,   /* read(2) failed: r->error */
  KC_READ_AGAIN = -2    /* read(2) was interrupted by a signal */
} kc_read_res_t;

int kc_reader_init(kc_reader_t *r, int fd, const char *delim, size_t delim_len,
                   size_t max_record);
void kc_reader_free(kc_reader_t *r);
/* The next record.  The empty record after a final delimiter is not one:
 * "a\nb\n" and "a\nb" both hold two records, "" none and "\n" one. */
kc_read_res_t kc_reader_next(kc_reader_t *r, const char **data, size_t *len);

#endif
