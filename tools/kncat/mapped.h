/* Delimited records read from a regular file through a read-only mapping,
 * so that produce can hand them to the producer without a copy
 * (KN_MSG_F_NOCOPY): the producer reads each payload where the page cache
 * already holds it, and no memory is allocated or written for it.
 *
 * Only records ended by a delimiter are served from the mapping; what
 * follows the last one (an unterminated last record, or bytes appended
 * since the file was opened) is left to a kc_reader_t started at
 * kc_mapped_offset(), so the records are the same as reading the file as
 * a stream.  The mapping is cut into windows; a window is dropped from the
 * process (MADV_DONTNEED) once every record in it has been read and every
 * record sent from it has been reported, so memory stays bounded however
 * large the file.
 *
 * A file truncated while it is mapped makes the next access to the lost
 * pages raise SIGBUS; kc_mapped_open installs a handler that says so and
 * ends the process when the fault address is in the mapping (any other
 * SIGBUS takes its default action). */
#ifndef KNCAT_MAPPED_H
#define KNCAT_MAPPED_H

#include <stddef.h>
#include <stdint.h>

#include "reader.h"

typedef struct kc_mapped {
  const char *base; /* the mapping of the file's bytes [0, size) */
  size_t size;
  size_t pos; /* where the next record starts */
  char delim[64];
  size_t delim_len;
  size_t max_record;
  int done; /* no delimiter after pos: the rest is the reader's */
  /* Windows of KC_MAPPED_WINDOW bytes: records sent from each and not yet
   * reported, and whether it was dropped. */
  uint32_t *pending;
  uint8_t *dropped;
  size_t n_windows;
  size_t passed; /* windows wholly before pos */
} kc_mapped_t;

#define KC_MAPPED_WINDOW ((size_t)8 << 20)

/* Maps fd from its current offset when it is a non-empty regular file.
 * Returns 1 when mapped, 0 when fd is not such a file or cannot be mapped
 * (read it with a kc_reader_t; nothing changed), -1 when out of memory.
 * The delimiter and max_record are as for kc_reader_init. */
int kc_mapped_open(kc_mapped_t *m, int fd, const char *delim, size_t delim_len,
                   size_t max_record);
/* Unmaps.  Call once nothing sent from the mapping can be read any more
 * (the producer destroyed).  Accepts a zeroed m. */
void kc_mapped_close(kc_mapped_t *m);

/* The next record, as kc_reader_next: KC_READ_RECORD or KC_READ_TOO_LONG
 * (data and len valid until kc_mapped_close), or KC_READ_END when no
 * delimiter follows: the rest of the file, from kc_mapped_offset(), is to
 * be read as a stream. */
kc_read_res_t kc_mapped_next(kc_mapped_t *m, const char **data, size_t *len);
/* File offset of the first byte not served. */
size_t kc_mapped_offset(const kc_mapped_t *m);

/* Does p point into the mapping? */
int kc_mapped_owns(const kc_mapped_t *m, const void *p);
/* len bytes at data, inside the mapping, were sent without a copy... */
void kc_mapped_hold(kc_mapped_t *m, const void *data, size_t len);
/* ...and their report has come: the windows they touch may be dropped. */
void kc_mapped_release(kc_mapped_t *m, const void *data, size_t len);

#endif
