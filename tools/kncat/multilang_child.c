#include "multilang_child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "signals.h"

extern char **environ;

void kc_ml_child_init(kc_ml_child_t *c) {
  memset(c, 0, sizeof(*c));
  c->in_fd = c->out_fd = c->err_fd = -1;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

int kc_ml_child_spawn(kc_ml_child_t *c, char *const argv[], char *err,
                      size_t errsz) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  int rc = -1;
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(er, O_CLOEXEC)) {
    snprintf(err, errsz, "pipe: %s", strerror(errno));
    goto done_pipes;
  }
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, er[1], 2);
  /* Nothing else: libcurl's sockets are not all close-on-exec. */
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_init(&attr);
  /* Own process group; default signal handling and an empty mask (kncat
   * ignores SIGPIPE, the child should not inherit that). */
  sigset_t none, def;
  sigemptyset(&none);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                      POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  pid_t pid;
  int e = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (e) {
    snprintf(err, errsz, "cannot run %s: %s", argv[0], strerror(e));
    goto done_pipes;
  }
  c->pid = pid;
  kc_signals_track_group(pid);
  c->in_fd = in[1];
  c->out_fd = out[0];
  c->err_fd = er[0];
  in[1] = out[0] = er[0] = -1;
  fcntl(c->in_fd, F_SETFL, fcntl(c->in_fd, F_GETFL) | O_NONBLOCK);
  fcntl(c->out_fd, F_SETFL, fcntl(c->out_fd, F_GETFL) | O_NONBLOCK);
  fcntl(c->err_fd, F_SETFL, fcntl(c->err_fd, F_GETFL) | O_NONBLOCK);
  rc = 0;
done_pipes:
  for (int i = 0; i < 2; i++) {
    close_fd(&in[i]);
    close_fd(&out[i]);
    close_fd(&er[i]);
  }
  return rc;
}

int kc_ml_child_flush(kc_ml_child_t *c) {
  while (c->wbuf.len) {
    if (c->in_fd < 0) return -1;
    ssize_t n = write(c->in_fd, c->wbuf.p, c->wbuf.len);
    if (n > 0) {
      kc_ml_buf_consume(&c->wbuf, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  /* A big batch's line is not kept for the next, smaller ones: with many
   * children that would add up. */
  if (c->wbuf.cap > ((size_t)256 << 10)) kc_ml_buf_free(&c->wbuf);
  return 0;
}

void kc_ml_child_close_stdin(kc_ml_child_t *c) {
  close_fd(&c->in_fd);
  c->wbuf.len = 0;
}

static void emit_lines(kc_ml_buf_t *buf, size_t max_line,
                       void (*on_line)(void *, const char *, size_t),
                       void *opaque) {
  size_t start = 0;
  for (;;) {
    char *nl = memchr(buf->p + start, '\n', buf->len - start);
    if (!nl) break;
    size_t n = (size_t)(nl - (buf->p + start));
    if (buf->skip_line) /* the end of a line already passed on, cut */
      buf->skip_line = 0;
    else
      on_line(opaque, buf->p + start, n > max_line ? max_line : n);
    start += n + 1;
  }
  kc_ml_buf_consume(buf, start);
  if (buf->skip_line) {
    buf->len = 0;
  } else if (buf->len > max_line) { /* no newline in sight: cut it, and
                                     * drop the rest up to its newline */
    on_line(opaque, buf->p, max_line);
    buf->len = 0;
    buf->skip_line = 1;
  }
}

int kc_ml_child_read(int *fd, kc_ml_buf_t *buf, size_t max_line,
                     void (*on_line)(void *, const char *, size_t),
                     void *opaque) {
  for (int rounds = 0; rounds < 16 && *fd >= 0; rounds++) {
    if (buf->cap - buf->len < 65536) {
      size_t cap = buf->cap ? buf->cap : 65536;
      while (cap - buf->len < 65536) cap *= 2;
      char *p = realloc(buf->p, cap);
      if (!p) return -1;
      buf->p = p;
      buf->cap = cap;
    }
    ssize_t n = read(*fd, buf->p + buf->len, buf->cap - buf->len);
    if (n > 0) {
      buf->len += (size_t)n;
      emit_lines(buf, max_line, on_line, opaque);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n < 0) return -1;
    close_fd(fd);
    if (buf->len) {
      on_line(opaque, buf->p, buf->len);
      buf->len = 0;
    }
    return 1;
  }
  return 0;
}

void kc_ml_child_kill(kc_ml_child_t *c) {
  if (c->pid > 0) {
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
  }
}

int kc_ml_child_reap(kc_ml_child_t *c, int block) {
  if (c->pid <= 0) return 1;
  int st;
  pid_t r;
  do r = waitpid(c->pid, &st, block ? 0 : WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == c->pid || (r < 0 && errno == ECHILD)) {
    c->status = r == c->pid ? st : 0;
    /* What it started goes with it.  The group's id is not reused while
     * the group has members, so this reaches only the child's. */
    kill(-c->pid, SIGKILL);
    kc_signals_untrack_group(c->pid);
    c->pid = 0;
    return 1;
  }
  return 0;
}

void kc_ml_child_free(kc_ml_child_t *c) {
  close_fd(&c->in_fd);
  close_fd(&c->out_fd);
  close_fd(&c->err_fd);
  kc_ml_buf_free(&c->wbuf);
  kc_ml_buf_free(&c->obuf);
  kc_ml_buf_free(&c->ebuf);
}
