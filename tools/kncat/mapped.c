#include "mapped.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kncat.h"

/* The mapping the handler answers for (one input file at a time). */
static const char *volatile sigbus_base;
static volatile size_t sigbus_size;

/* A fault inside the mapping is the file truncated under a record in
 * flight: said so, and the process ends with the promised exit status.
 * Any other SIGBUS is not ours to explain: it is raised again with its
 * default action. */
static void on_sigbus(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  const char *a = si ? (const char *)si->si_addr : NULL;
  const char *b = sigbus_base;
  if (!b || !a || a < b || (size_t)(a - b) >= sigbus_size) {
    signal(sig, SIG_DFL);
    raise(sig); /* pending until the handler returns */
    return;
  }
  static const char msg[] =
      "kncat: error: bus error reading the input file: was it truncated "
      "while being sent?  Records read before may not have been delivered\n";
  ssize_t w = write(2, msg, sizeof(msg) - 1);
  (void)w;
  _exit(KC_EXIT_RUNTIME);
}

int kc_mapped_open(kc_mapped_t *m, int fd, const char *delim, size_t delim_len,
                   size_t max_record) {
  memset(m, 0, sizeof(*m));
  struct stat st;
  if (delim_len == 0 || delim_len > sizeof(m->delim)) return 0;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  off_t at = lseek(fd, 0, SEEK_CUR);
  if (at < 0 || st.st_size <= at || (uintmax_t)st.st_size > SIZE_MAX) return 0;
  size_t size = (size_t)st.st_size;
  void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return 0;
  m->n_windows = (size - 1) / KC_MAPPED_WINDOW + 1;
  m->pending = calloc(m->n_windows, sizeof(*m->pending));
  m->dropped = calloc(m->n_windows, 1);
  if (!m->pending || !m->dropped) {
    munmap(p, size);
    free(m->pending);
    free(m->dropped);
    memset(m, 0, sizeof(*m));
    return -1;
  }
  m->base = p;
  m->size = size;
  m->pos = (size_t)at;
  m->passed = m->pos / KC_MAPPED_WINDOW;
  memcpy(m->delim, delim, delim_len);
  m->delim_len = delim_len;
  m->max_record = max_record;
  sigbus_size = size;
  sigbus_base = p;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, NULL);
  return 1;
}

void kc_mapped_close(kc_mapped_t *m) {
  if (m->base && sigbus_base == m->base) sigbus_base = NULL;
  if (m->base) munmap((void *)m->base, m->size);
  free(m->pending);
  free(m->dropped);
  memset(m, 0, sizeof(*m));
}

size_t kc_mapped_offset(const kc_mapped_t *m) { return m->pos; }

int kc_mapped_owns(const kc_mapped_t *m, const void *p) {
  const char *c = p;
  return m->base && c >= m->base && c < m->base + m->size;
}

/* Drops window w from the process once the reader is past it and nothing
 * sent from it awaits a report.  The pages stay in the page cache: a read
 * after the drop would fault them in again, never see other bytes. */
static void maybe_drop(kc_mapped_t *m, size_t w) {
  if (w >= m->passed || m->dropped[w] || m->pending[w]) return;
  size_t off = w * KC_MAPPED_WINDOW;
  size_t len =
      m->size - off < KC_MAPPED_WINDOW ? m->size - off : KC_MAPPED_WINDOW;
  madvise((char *)m->base + off, len, MADV_DONTNEED);
  m->dropped[w] = 1;
}

/* Every record starting before off has been handed out and, if it was
 * sent, held: the windows wholly before off can go when reported. */
static void passed_to(kc_mapped_t *m, size_t off) {
  size_t passed = off / KC_MAPPED_WINDOW;
  while (m->passed < passed) maybe_drop(m, m->passed++);
}

kc_read_res_t kc_mapped_next(kc_mapped_t *m, const char **data, size_t *len) {
  if (m->done || m->pos >= m->size) return KC_READ_END;
  const char *start = m->base + m->pos;
  size_t avail = m->size - m->pos;
  const char *d = m->delim_len == 1
                      ? memchr(start, m->delim[0], avail)
                      : memmem(start, avail, m->delim, m->delim_len);
  if (!d) {
    m->done = 1;
    return KC_READ_END;
  }
  size_t rec = (size_t)(d - start);
  *data = start;
  *len = rec;
  passed_to(m, m->pos);
  m->pos += rec + m->delim_len;
  return rec > m->max_record ? KC_READ_TOO_LONG : KC_READ_RECORD;
}

/* The windows [first, last] that len bytes at data touch. */
static int windows(const kc_mapped_t *m, const void *data, size_t len,
                   size_t *first, size_t *last) {
  if (!len || !kc_mapped_owns(m, data)) return 0;
  size_t off = (size_t)((const char *)data - m->base);
  *first = off / KC_MAPPED_WINDOW;
  *last = (off + len - 1) / KC_MAPPED_WINDOW;
  return 1;
}

void kc_mapped_hold(kc_mapped_t *m, const void *data, size_t len) {
  size_t a, b;
  if (!windows(m, data, len, &a, &b)) return;
  for (size_t w = a; w <= b; w++) m->pending[w]++;
}

void kc_mapped_release(kc_mapped_t *m, const void *data, size_t len) {
  size_t a, b;
  if (!windows(m, data, len, &a, &b)) return;
  for (size_t w = a; w <= b; w++) {
    if (m->pending[w]) m->pending[w]--;
    maybe_drop(m, w);
  }
}
