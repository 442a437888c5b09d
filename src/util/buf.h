/* kn_buf_t: a growable byte buffer.  The struct is embedded by its owner;
 * p is malloc'ed and freed by kn_buf_free().  p is always NUL-terminated
 * when non-NULL (one spare byte), so text can be read in place. */
#ifndef KN_UTIL_BUF_H
#define KN_UTIL_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct kn_buf {
  char *p;
  size_t len;
  size_t cap; /* usable bytes, not counting the terminator */
} kn_buf_t;

#define KN_BUF_INIT \
  { NULL, 0, 0 }

/* Makes room for at least `more` further bytes.  Returns 0, or -1 on
 * out-of-memory (the buffer is unchanged). */
int kn_buf_reserve(kn_buf_t *b, size_t more);
int kn_buf_append(kn_buf_t *b, const void *data, size_t n);
int kn_buf_append_str(kn_buf_t *b, const char *s);
int kn_buf_append_char(kn_buf_t *b, char c);
int kn_buf_printf(kn_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal with quotes and escapes. */
int kn_buf_append_json_str(kn_buf_t *b, const char *s, size_t n);
/* Keeps the allocation, forgets the contents. */
void kn_buf_reset(kn_buf_t *b);
/* Hands the allocation to the caller (who must free() it) and resets. */
char *kn_buf_steal(kn_buf_t *b, size_t *len);
void kn_buf_free(kn_buf_t *b);

#endif
