/* multilang: one record processor child process, talking over pipes.
 *
 * The child runs in its own process group (a terminal's Ctrl-C reaches the
 * daemon only), with stdin, stdout and stderr on non-blocking pipes.
 * Nothing here waits: the daemon's loop polls the descriptors. */
#ifndef KNCAT_MULTILANG_CHILD_H
#define KNCAT_MULTILANG_CHILD_H

#include <stddef.h>
#include <sys/types.h>

#include "multilang_msg.h"

typedef struct kc_ml_child {
  pid_t pid;                 /* 0: none (never started or reaped) */
  int in_fd, out_fd, err_fd; /* -1 once closed */
  kc_ml_buf_t wbuf;          /* still to be written to stdin; owned */
  kc_ml_buf_t obuf, ebuf;    /* partial lines of stdout, stderr; owned */
  int status;                /* waitpid status once reaped */
} kc_ml_child_t;

/* A child that was never started. */
void kc_ml_child_init(kc_ml_child_t *c);
/* Starts argv[0] (searched in PATH) with argv.  0, or -1 with err. */
int kc_ml_child_spawn(kc_ml_child_t *c, char *const argv[], char *err,
                      size_t errsz);
/* Writes what it can of wbuf; 0, or -1 when the child's stdin is gone. */
int kc_ml_child_flush(kc_ml_child_t *c);
/* Closes the child's stdin (after the last message). */
void kc_ml_child_close_stdin(kc_ml_child_t *c);
/* Reads what is available on *fd into buf and calls on_line for each
 * whole line (without its newline; a line longer than max_line is cut
 * there, the rest of it dropped).  Returns 0, 1 at end of file (*fd is then
 * closed and set to -1; a last partial line is passed on), or -1 on a read
 * error. */
int kc_ml_child_read(int *fd, kc_ml_buf_t *buf, size_t max_line,
                     void (*on_line)(void *opaque, const char *line,
                                     size_t len),
                     void *opaque);
/* SIGKILL to the child's process group. */
void kc_ml_child_kill(kc_ml_child_t *c);
/* Non-zero once the child has exited (reaped now or before; whatever is
 * left of its process group is then killed); with block, waits for it. */
int kc_ml_child_reap(kc_ml_child_t *c, int block);
/* Closes the descriptors and frees the buffers; the process is left as it
 * is (kill and reap first). */
void kc_ml_child_free(kc_ml_child_t *c);

#endif
