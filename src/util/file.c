#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/str.h"

int kn_file_read(const char *path, size_t max, kn_buf_t *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    rc = errno;
  } else if (S_ISDIR(st.st_mode)) {
    rc = EISDIR;
  } else {
    size_t total = 0;
    for (;;) {
      if (kn_buf_reserve(out, 4096)) {
        rc = ENOMEM;
        break;
      }
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
