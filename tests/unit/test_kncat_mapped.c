/* kncat's mapped file input: the same records as the stream reader, the
 * tail left to the reader, and windows let go only once passed and
 * reported. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kncat.h"
#include "kt.h"
#include "mapped.h"
#include "reader.h"

typedef struct {
  char *data;
  size_t len;
  int too_long;
} rec_t;

typedef struct {
  rec_t *v;
  size_t n, cap;
} recs_t;

static void push(recs_t *r, const char *data, size_t len, int too_long) {
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 64;
    r->v = realloc(r->v, r->cap * sizeof(*r->v));
  }
  rec_t *e = &r->v[r->n++];
  e->too_long = too_long;
  e->len = len;
  e->data = NULL;
  if (!too_long) {
    e->data = malloc(len + 1);
    memcpy(e->data, data, len);
  }
}

static void recs_free(recs_t *r) {
  for (size_t i = 0; i < r->n; i++) free(r->v[i].data);
  free(r->v);
  memset(r, 0, sizeof(*r));
}

/* A temporary file holding content, open for reading at offset. */
static int temp_file(const void *content, size_t len, off_t offset) {
  FILE *f = tmpfile(); /* already unlinked */
  KT_CHECK(f != NULL);
  int fd = f ? dup(fileno(f)) : -1;
  if (f) fclose(f);
  KT_CHECK(fd >= 0);
  KT_CHECK(write(fd, content, len) == (ssize_t)len);
  KT_CHECK(lseek(fd, offset, SEEK_SET) == offset);
  return fd;
}

typedef kc_read_res_t(next_fn)(void *src, const char **data, size_t *len);

/* Collects src's records up to its end. */
static void drain(next_fn *next, void *src, recs_t *out) {
  const char *d;
  size_t len;
  kc_read_res_t res;
  while ((res = next(src, &d, &len)) > 0)
    push(out, d, len, res == KC_READ_TOO_LONG);
  KT_CHECK_INT(res, KC_READ_END);
}

static kc_read_res_t stream_next(void *r, const char **d, size_t *len) {
  return kc_reader_next(r, d, len);
}

static kc_read_res_t mapped_next(void *m, const char **d, size_t *len) {
  return kc_mapped_next(m, d, len);
}

/* Reads fd to its end with the stream reader. */
static void read_stream(int fd, const char *delim, size_t dlen, size_t max,
                        recs_t *out) {
  kc_reader_t r;
  KT_CHECK_INT(kc_reader_init(&r, fd, delim, dlen, max), 0);
  drain(stream_next, &r, out);
  kc_reader_free(&r);
}

/* Reads fd as produce does: the mapping to its last delimiter, the rest
 * as a stream.  Returns what kc_mapped_open returned. */
static int read_mapped(int fd, const char *delim, size_t dlen, size_t max,
                       recs_t *out) {
  kc_mapped_t m;
  int rc = kc_mapped_open(&m, fd, delim, dlen, max);
  if (rc == 1) {
    drain(mapped_next, &m, out);
    KT_CHECK(lseek(fd, (off_t)kc_mapped_offset(&m), SEEK_SET) >= 0);
    kc_mapped_close(&m);
  }
  read_stream(fd, delim, dlen, max, out);
  return rc;
}

static void check_same(const char *content, size_t len, off_t offset,
                       const char *delim, size_t max, int mapped) {
  size_t dlen = strlen(delim) ? strlen(delim) : 1; /* "" stands for "\0" */
  recs_t a = {0}, b = {0};
  int fa = temp_file(content, len, offset),
      fb = temp_file(content, len, offset);
  read_stream(fa, delim, dlen, max, &a);
  KT_CHECK_INT(read_mapped(fb, delim, dlen, max, &b), mapped);
  KT_CHECK_INT(b.n, a.n);
  for (size_t i = 0; i < a.n && i < b.n; i++) {
    KT_CHECK(a.v[i].len == b.v[i].len && a.v[i].too_long == b.v[i].too_long);
    if (!a.v[i].too_long && a.v[i].len == b.v[i].len)
      KT_CHECK(memcmp(a.v[i].data, b.v[i].data, a.v[i].len) == 0);
  }
  close(fa);
  close(fb);
  recs_free(&a);
  recs_free(&b);
}

static void test_same_records(void) {
  const char *s = "a\nb\n\nc";
  check_same(s, strlen(s), 0, "\n", 100, 1); /* no final delimiter */
  check_same("a\nb\n", 4, 0, "\n", 100, 1);  /* a final one */
  check_same("\n", 1, 0, "\n", 100, 1);      /* one empty record */
  check_same("", 0, 0, "\n", 100, 0);        /* empty: not mapped */
  check_same("xyz", 3, 0, "\n", 100, 1);     /* no delimiter at all */
  check_same(s, strlen(s), 2, "\n", 100, 1); /* from an offset */
  check_same(s, strlen(s), (off_t)strlen(s), "\n", 100, 0); /* at the end */
  s = "one--two--|three-|--|--four--";
  check_same(s, strlen(s), 0, "--|", 100, 1); /* several bytes, partial */
  check_same("a\0bb\0", 5, 0, "", 100, 1);    /* NUL as the delimiter */
  /* Records over the limit, between others and last. */
  s = "short\n0123456789abcdef\nok\nanother one far too long";
  check_same(s, strlen(s), 0, "\n", 10, 1);
  s = "short\n0123456789abcdef\n";
  check_same(s, strlen(s), 0, "\n", 10, 1);
}

static void test_not_regular(void) {
  int p[2];
  KT_CHECK(pipe(p) == 0);
  kc_mapped_t m;
  KT_CHECK_INT(kc_mapped_open(&m, p[0], "\n", 1, 100), 0);
  kc_mapped_close(&m); /* a zeroed one */
  close(p[0]);
  close(p[1]);
}

/* A file of several windows: every record the stream reader sees, and a
 * window let go exactly when the reader is past it and nothing sent from
 * it awaits its report. */
static void test_windows(void) {
  size_t size = 3 * KC_MAPPED_WINDOW + 12345, n = 0;
  char *content = malloc(size);
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < size; i++) {
    /* Records of 0 to ~3,000 bytes, a few far longer (across windows). */
    uint64_t r = kt_rand(&rng);
    content[i] = r % 1500 == 0 ? '\n' : (char)('a' + r % 26);
  }
  for (size_t i = 0; i < size; i++) n += content[i] == '\n';
  check_same(content, size, 0, "\n", 1024 * 1024, 1);

  int fd = temp_file(content, size, 0);
  kc_mapped_t m;
  KT_CHECK_INT(kc_mapped_open(&m, fd, "\n", 1, 1024 * 1024), 1);
  KT_CHECK_INT(m.n_windows, 4);
  const char **held = calloc(n, sizeof(*held));
  size_t *lens = calloc(n, sizeof(*lens)), k = 0;
  const char *d;
  size_t len;
  while (kc_mapped_next(&m, &d, &len) > 0) {
    kc_mapped_hold(&m, d, len);
    held[k] = d;
    lens[k++] = len;
  }
  KT_CHECK_INT(k, n);
  /* Read to the last delimiter, nothing reported: every window kept. */
  for (size_t w = 0; w < m.n_windows; w++) KT_CHECK(!m.dropped[w]);
  /* The first record of window 1 is reported last. */
  size_t keep = 0;
  while (keep < k &&
         ((size_t)(held[keep] - m.base) < KC_MAPPED_WINDOW || !lens[keep]))
    keep++;
  for (size_t i = 0; i < k; i++)
    if (i != keep) kc_mapped_release(&m, held[i], lens[i]);
  KT_CHECK(m.dropped[0]);
  KT_CHECK(!m.dropped[1]);
  kc_mapped_release(&m, held[keep], lens[keep]);
  KT_CHECK(m.dropped[1]);
  /* The reader stopped in window 3 (or at its last delimiter before it):
   * the last window it reached stays for the stream reader's sake. */
  KT_CHECK(!m.dropped[m.n_windows - 1]);
  for (size_t w = 0; w < m.n_windows; w++) KT_CHECK_INT(m.pending[w], 0);
  /* The records still read right after their windows went: the pages
   * come back from the file. */
  KT_CHECK(memcmp(held[0], content, lens[0]) == 0);
  kc_mapped_close(&m);
  close(fd);
  free(held);
  free(lens);
  free(content);
}

/* In a child: maps a file of two pages, then either truncates it and
 * reads past the new end (a fault in the mapping) or raises SIGBUS
 * itself (a fault elsewhere).  Returns the child's wait status. */
static int sigbus_child(int truncate_it) {
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2); /* the handler's message */
    long page = sysconf(_SC_PAGESIZE);
    char *content = malloc((size_t)page * 2);
    if (!content) _exit(90);
    memset(content, 'x', (size_t)page * 2);
    content[page * 2 - 1] = '\n';
    int fd = temp_file(content, (size_t)page * 2, 0);
    kc_mapped_t m;
    if (kc_mapped_open(&m, fd, "\n", 1, (size_t)page * 4) != 1) _exit(91);
    if (!truncate_it) {
      raise(SIGBUS);
      _exit(94); /* the default action should have ended it */
    }
    if (ftruncate(fd, 0) != 0) _exit(92);
    volatile char c = m.base[page + 1];
    (void)c;
    _exit(93); /* not reached */
  }
  int st = 0;
  KT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  return st;
}

/* A truncated input file: the promised message and exit status, not a
 * crash; a SIGBUS that is not the mapping's is left to its default. */
static void test_sigbus(void) {
  int st = sigbus_child(1);
  KT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == KC_EXIT_RUNTIME);
  st = sigbus_child(0);
  KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS);
}

int main(void) {
  KT_RUN(test_same_records);
  KT_RUN(test_not_regular);
  KT_RUN(test_windows);
  KT_RUN(test_sigbus);
  return KT_DONE();
}
