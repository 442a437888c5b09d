/* credential_process: run a command, read credentials from its output. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aws/creds_int.h"
#include "core/error.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/secure.h"

extern char **environ;

#define FAC "creds"
#define MAX_STDOUT (64 * 1024) /* as the SDKs cap it */
#define MAX_STDERR 4096

typedef struct child {
  pid_t pid;
  int out, err; /* read ends; -1 once closed */
} child_t;

/* posix_spawn, not fork: safe in a threaded process, and the child gets its
 * own process group so a timeout can kill what it started too. */
static int spawn(const char *command, child_t *c) {
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  int rc = -1;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  int fa_ok = 0, at_ok = 0;
  if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) goto out;
  if (posix_spawn_file_actions_init(&fa)) goto out;
  fa_ok = 1;
  if (posix_spawnattr_init(&at)) goto out;
  at_ok = 1;
  sigset_t none, def;
  sigemptyset(&none);
  sigemptyset(&def);
  sigaddset(&def,
            SIGPIPE); /* the application may ignore it; the child should not */
  if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) ||
      posix_spawn_file_actions_adddup2(&fa, po[1], 1) ||
      posix_spawn_file_actions_adddup2(&fa, pe[1], 2) ||
      /* Nothing else: libcurl's sockets are not all close-on-exec. */
      posix_spawn_file_actions_addclosefrom_np(&fa, 3) ||
      posix_spawnattr_setpgroup(&at, 0) ||
      posix_spawnattr_setsigmask(&at, &none) ||
      posix_spawnattr_setsigdefault(&at, &def) ||
      posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
                                        POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF))
    goto out;
  char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)command, NULL};
  int err = posix_spawn(&c->pid, "/bin/sh", &fa, &at, argv, environ);
  if (err) {
    errno = err;
    goto out;
  }
  c->out = po[0];
  c->err = pe[0];
  po[0] = pe[0] = -1;
  rc = 0;
out:;
  int saved = errno;
  if (fa_ok) posix_spawn_file_actions_destroy(&fa);
  if (at_ok) posix_spawnattr_destroy(&at);
  for (int i = 0; i < 2; i++) {
    if (po[i] >= 0) close(po[i]);
    if (pe[i] >= 0) close(pe[i]);
  }
  errno = saved;
  return rc;
}

/* Reads what is there from *fd into b (keeping at most max bytes, but
 * draining everything); closes it at end of file.  Returns 1 if more than
 * max bytes came. */
static int drain(int *fd, kn_buf_t *b, size_t max) {
  char tmp[4096];
  ssize_t n = read(*fd, tmp, sizeof(tmp));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (n <= 0) {
    close(*fd);
    *fd = -1;
    return 0;
  }
  size_t room = b->len < max ? max - b->len : 0;
  size_t keep = (size_t)n < room ? (size_t)n : room;
  if (keep) kn_buf_append(b, tmp, keep);
  return (size_t)n > keep;
}

static void kill_group(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

/* The first line of stderr, for messages. */
static char *stderr_line(const kn_buf_t *b) {
  size_t n = 0;
  while (n < b->len && b->p[n] != '\n') n++;
  return kn_creds_snippet(b->p ? b->p : "", n, 200);
}

kn_creds_res_t kn_creds_process(const char *command, long timeout_ms,
                                const char *what, const kn_logger_t *log,
                                kn_creds_t *out, kn_error_t **errp) {
  child_t c = {-1, -1, -1};
  if (spawn(command, &c)) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS, "%s: cannot start /bin/sh: %s",
                         what, strerror(errno));
    return KN_CREDS_FAILED;
  }
  kn_buf_t so = KN_BUF_INIT, se = KN_BUF_INIT;
  int64_t deadline = kn_mono_ms() + timeout_ms;
  int too_big = 0, timed_out = 0, status = 0, reaped = 0;
  /* Read both pipes until they close, then wait for the exit: all before
   * the deadline.  A child that closes its output and lingers still
   * counts against the deadline. */
  while (!too_big) {
    int64_t left = deadline - kn_mono_ms();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    if (c.out < 0 && c.err < 0) {
      pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid) {
        reaped = 1;
        break;
      }
      if (r < 0 && errno == ECHILD) { /* SIGCHLD ignored: the status is lost */
        status = 0;
        reaped = 1;
        break;
      }
      kn_sleep_ms(left < 10 ? left : 10);
      continue;
    }
    struct pollfd pf[2] = {{c.out, POLLIN, 0}, {c.err, POLLIN, 0}};
    int n = poll(pf, 2, (int)(left < 1000 ? left : 1000));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (c.out >= 0 && pf[0].revents) too_big = drain(&c.out, &so, MAX_STDOUT);
    if (c.err >= 0 && pf[1].revents) drain(&c.err, &se, MAX_STDERR);
  }
  if (!reaped) {
    kill_group(c.pid);
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (c.out >= 0) close(c.out);
  if (c.err >= 0) close(c.err);

  kn_creds_res_t res = KN_CREDS_FAILED;
  char *line = stderr_line(&se);
  if (timed_out) {
    *errp = kn_error_new(KN_ERR__TIMED_OUT,
                         "%s: did not finish within %ld ms (killed)", what,
                         timeout_ms);
  } else if (too_big) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS, "%s: output larger than %d bytes",
                         what, MAX_STDOUT);
  } else if (!reaped) {
    *errp =
        kn_error_new(KN_ERR__CREDENTIALS, "%s: lost track of the process: %s",
                     what, strerror(errno));
  } else if (WIFSIGNALED(status)) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS, "%s: killed by signal %d%s%s",
                         what, WTERMSIG(status), line && *line ? ": " : "",
                         line ? line : "");
  } else if (WEXITSTATUS(status) != 0) {
    *errp = kn_error_new(KN_ERR__CREDENTIALS, "%s: exited with status %d%s%s",
                         what, WEXITSTATUS(status), line && *line ? ": " : "",
                         line ? line : "");
  } else if (kn_creds_parse_json(so.p ? so.p : "", so.len, KN_CREDS_DOC_PROCESS,
                                 what, out, errp) == 0) {
    out->source = KN_CREDS_SRC_PROCESS;
    res = KN_CREDS_FOUND;
    if (se.len)
      kn_dbg(log, FAC, "%s wrote on stderr: %s", what, line ? line : "");
  }
  free(line);
  if (so.p) kn_secure_wipe(so.p, so.len);
  kn_buf_free(&so);
  kn_buf_free(&se);
  return res;
}
