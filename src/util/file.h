/* Whole-file reads for small local files (config files, token files). */
#ifndef KN_UTIL_FILE_H
#define KN_UTIL_FILE_H

#include <stddef.h>

#include "util/buf.h"

/* Appends the contents of path to out, reading at most max bytes (a larger
 * file fails with EFBIG).  Returns 0, or an errno value (ENOENT when the
 * file does not exist, EISDIR for a directory, ENODEV for anything else
 * that is not a regular file: a FIFO, a device, a socket, never waited
 * on); out may then hold part of the file.  The file may hold secrets: out
 * is sized from the file's size at once, and should it have to grow, its
 * old copy is wiped before it is freed. */
int kn_file_read(const char *path, size_t max, kn_buf_t *out);
/* strerror() of kn_file_read()'s answer, ENODEV as "not a regular file". */
const char *kn_file_strerror(int rc);

/* path with a leading "~/" replaced by $HOME; NULL on out-of-memory.
 * Caller frees.  Other paths are copied unchanged. */
char *kn_path_expand_home(const char *path);

/* path for messages: $HOME at its start shown as "~".  Caller frees. */
char *kn_path_display(const char *path);

#endif
