#include "reader.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes asked of read(2) at a time, at least. */
#define CHUNK (256 * 1024)

int kc_reader_init(kc_reader_t *r, int fd, const char *delim, size_t delim_len,
                   size_t max_record) {
  memset(r, 0, sizeof(*r));
  if (delim_len == 0 || delim_len > sizeof(r->delim)) return -1;
  r->fd = fd;
  memcpy(r->delim, delim, delim_len);
  r->delim_len = delim_len;
  r->max_record = max_record;
  r->cap = max_record + delim_len + CHUNK;
  r->buf = malloc(r->cap);
  return r->buf ? 0 : -1;
}

void kc_reader_free(kc_reader_t *r) {
  free(r->buf);
  r->buf = NULL;
}

static const char *find_delim(const kc_reader_t *r) {
  size_t n = r->end - r->scan;
  if (n < r->delim_len) return NULL;
  if (r->delim_len == 1) return memchr(r->buf + r->scan, r->delim[0], n);
  return memmem(r->buf + r->scan, n, r->delim, r->delim_len);
}

/* Reads more input after making room; 1 if some came, 0 at end of input,
 * or a kc_read_res_t error. */
static int fill(kc_reader_t *r) {
  if (r->cap - r->end < CHUNK) { /* move the partial record to the front */
    size_t keep = r->end - r->start;
    memmove(r->buf, r->buf + r->start, keep);
    r->scan -= r->start;
    r->start = 0;
    r->end = keep;
  }
  if (r->idle) {
    struct pollfd pfd = {r->fd, POLLIN, 0};
    if (poll(&pfd, 1, 0) == 0) r->idle(r->idle_opaque);
  }
  ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end);
  if (n < 0) {
    if (errno == EINTR) return KC_READ_AGAIN;
    r->error = errno;
    return KC_READ_ERROR;
  }
  if (n == 0) {
    r->eof = 1;
    return 0;
  }
  r->end += (size_t)n;
  return 1;
}

kc_read_res_t kc_reader_next(kc_reader_t *r, const char **data, size_t *len) {
  for (;;) {
    const char *p = find_delim(r);
    if (p) {
      size_t rec = (size_t)(p - (r->buf + r->start));
      size_t next = (size_t)(p - r->buf) + r->delim_len;
      *data = r->buf + r->start;
      r->start = r->scan = next;
      if (r->skipping) {
        r->skipping = 0;
        *len = (size_t)r->skipped + rec;
        return KC_READ_TOO_LONG;
      }
      *len = rec;
      return rec > r->max_record ? KC_READ_TOO_LONG : KC_READ_RECORD;
    }
    /* No delimiter starts before end - (delim_len - 1). */
    if (r->end - r->scan >= r->delim_len) r->scan = r->end - (r->delim_len - 1);
    if (!r->skipping && (r->scan - r->start > r->max_record ||
                         (r->eof && r->end - r->start > r->max_record))) {
      r->skipping = 1;
      r->skipped = 0;
    }
    if (r->skipping) { /* drop what cannot be part of a delimiter */
      size_t upto = r->eof ? r->end : r->scan;
      r->skipped += upto - r->start;
      r->start = upto;
    }
    if (r->eof) {
      size_t rest = r->end - r->start;
      *data = r->buf + r->start;
      r->start = r->scan = r->end;
      if (r->skipping) {
        r->skipping = 0;
        *len = (size_t)r->skipped + rest;
        return KC_READ_TOO_LONG;
      }
      if (rest == 0) return KC_READ_END;
      *len = rest;
      return rest > r->max_record ? KC_READ_TOO_LONG : KC_READ_RECORD;
    }
    int f = fill(r);
    if (f < 0) return (kc_read_res_t)f;
  }
}
