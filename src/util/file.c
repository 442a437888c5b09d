#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/secure.h"
#include "util/str.h"

/* Room for `more` bytes after out->len; a grown buffer is a fresh one, and
 * the old one is wiped. */
static int reserve_wiped(kn_buf_t *out, size_t more) {
  if (out->cap - out->len >= more && out->p) return 0;
  if (more > SIZE_MAX / 2 - out->len) return -1;
  size_t cap = out->cap * 2 > out->len + more ? out->cap * 2 : out->len + more;
  char *p = malloc(cap + 1);
  if (!p) return -1;
  if (out->len) memcpy(p, out->p, out->len);
  p[out->len] = '\0';
  if (out->p) {
    kn_secure_wipe(out->p, out->cap + 1);
    free(out->p);
  }
  out->p = p;
  out->cap = cap;
  return 0;
}

int kn_file_read(const char *path, size_t max, kn_buf_t *out) {
  /* O_NONBLOCK: opening a FIFO without a writer does not wait (and reading
   * from anything but a regular file is refused below). */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    rc = errno;
  } else if (S_ISDIR(st.st_mode)) {
    rc = EISDIR;
  } else if (!S_ISREG(st.st_mode)) {
    rc = ENODEV;
  } else {
    size_t total = 0;
    /* The whole file at once (and a byte more, to see its end). */
    size_t want = st.st_size > 0 && (uint64_t)st.st_size < max
                      ? (size_t)st.st_size + 1
                      : 4096;
    for (;;) {
      if (reserve_wiped(out, want)) {
        rc = ENOMEM;
        break;
      }
      want = 4096;
      ssize_t n = read(fd, out->p + out->len, out->cap - out->len);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        rc = errno;
        break;
      }
      if (n == 0) break;
      total += (size_t)n;
      out->len += (size_t)n;
      out->p[out->len] = '\0';
      if (total > max) {
        rc = EFBIG;
        break;
      }
    }
  }
  close(fd);
  return rc;
}

const char *kn_file_strerror(int rc) {
  return rc == ENODEV ? "not a regular file" : strerror(rc);
}

static const char *home(void) {
  const char *h = getenv("HOME");
  return h && *h ? h : NULL;
}

char *kn_path_expand_home(const char *path) {
  const char *h = home();
  if (h && (strcmp(path, "~") == 0 || kn_str_has_prefix(path, "~/")))
    return kn_asprintf("%s%s", h, path + 1);
  return strdup(path);
}

char *kn_path_display(const char *path) {
  const char *h = home();
  size_t n = h ? strlen(h) : 0;
  while (n > 1 && h[n - 1] == '/') n--;
  if (h && n > 1 && strncmp(path, h, n) == 0 && path[n] == '/')
    return kn_asprintf("~%s", path + n);
  return strdup(path);
}
