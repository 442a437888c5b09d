#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A state file of this size is no state (millions of shards). */
#define STATE_MAX (256u << 20)

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads all of path into *out (malloc'ed); 0, or an errno value. */
static int read_file(const char *path, unsigned char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return errno;
  size_t cap = 4096, n = 0;
  unsigned char *b = malloc(cap);
  int err = b ? 0 : ENOMEM;
  while (!err) {
    if (n == cap) {
      unsigned char *nb = cap < STATE_MAX ? realloc(b, cap * 2) : NULL;
      if (!nb) {
        err = cap < STATE_MAX ? ENOMEM : EFBIG;
        break;
      }
      b = nb;
      cap *= 2;
    }
    size_t got = fread(b + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) err = EIO;
      break;
    }
  }
  fclose(f);
  if (err) {
    free(b);
    return err;
  }
  *out = b;
  *len = n;
  return 0;
}

/* path's directory (malloc'ed), for the fsync after a rename. */
static char *dir_of(const char *path) {
  char *c = strdup(path);
  if (!c) return NULL;
  char *d = strdup(dirname(c));
  free(c);
  return d;
}

int kc_state_write_file(const char *path, const void *p, size_t n) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  if (!tmp) return ENOMEM;
  snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = fd < 0 ? errno : 0;
  const unsigned char *b = p;
  size_t off = 0;
  while (!err && off < n) {
    ssize_t w = write(fd, b + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      err = errno;
    else
      off += (size_t)w;
  }
  if (!err && fsync(fd)) err = errno;
  if (fd >= 0 && close(fd) && !err) err = errno;
  if (!err && rename(tmp, path)) err = errno;
  if (err) {
    unlink(tmp);
  } else {
    /* The rename itself must survive a crash too. */
    char *dir = dir_of(path);
    int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
      if (fsync(dfd)) err = errno;
      close(dfd);
    }
    free(dir);
  }
  free(tmp);
  return err;
}

int kc_state_open(kc_state_t *st, kc_ctx_t *ctx, const char *path) {
  memset(st, 0, sizeof(*st));
  if (!*path) return kc_usage_error(ctx, "--state needs a file name");
  if (!(st->path = strdup(path)) || !(st->written = kn_snapshot_new())) {
    kc_errorf(ctx, "out of memory");
    return KC_EXIT_RUNTIME;
  }
  char v[32];
  size_t vn = sizeof(v);
  st->interval_ms = 5000;
  if (kn_conf_get(ctx->conf, "checkpoint.interval.ms", v, &vn) == KN_CONF_OK)
    st->interval_ms = atoll(v);
  st->next_save_ms = mono_ms() + st->interval_ms;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  st->started_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;

  unsigned char *bytes;
  size_t len;
  int e = read_file(path, &bytes, &len);
  if (e == ENOENT) {
    /* A first run: FILE must be creatable. */
    char *dir = dir_of(path);
    int ok = dir && access(dir, W_OK | X_OK) == 0;
    free(dir);
    if (!ok) {
      kc_errorf(ctx, "--state %s: cannot create it: %s", path,
                strerror(errno ? errno : EACCES));
      return KC_EXIT_USAGE;
    }
    return KC_GO_ON;
  }
  if (e) {
    kc_errorf(ctx, "--state %s: %s", path, strerror(e));
    return e == ENOMEM ? KC_EXIT_RUNTIME : KC_EXIT_USAGE;
  }
  kn_snapshot_t *s = NULL;
  kn_error_t *err = kn_snapshot_decode(bytes, len, &s);
  free(bytes);
  if (err) {
    int nomem = kn_error_code(err) == KN_ERR__NOMEM;
    kc_errorf(ctx, "--state %s: not a kncat state file (%s); left as it is",
              path, kn_error_string(err));
    kn_error_destroy(err);
    return nomem ? KC_EXIT_RUNTIME : KC_EXIT_USAGE;
  }
  char errstr[256] = "";
  kn_err_t ce =
      kn_conf_set_start_snapshot(ctx->conf, s, errstr, sizeof(errstr));
  kn_snapshot_destroy(s);
  if (ce) {
    kc_errorf(ctx, "--state %s: %s", path, errstr);
    return KC_EXIT_RUNTIME;
  }
  return KC_GO_ON;
}

void kc_state_free(kc_state_t *st) {
  free(st->path);
  kn_snapshot_destroy(st->written);
  memset(st, 0, sizeof(*st));
}

void kc_state_written(kc_state_t *st, const kn_batch_t *b, size_t n) {
  if (!n) return;
  const kn_record_t *r = kn_batch_record(b, n - 1);
  kn_position_t p;
  if (kn_position_after(&p, kn_record_sequence_number(r),
                        kn_record_subsequence_number(r)))
    return;
  /* Out of memory: the consumer's own position is used, which is at or
   * past this one only for a batch written in part. */
  (void)kn_snapshot_set_position(st->written, kn_batch_shard_id(b), &p);
}

int kc_state_due(const kc_state_t *st) { return mono_ms() >= st->next_save_ms; }

int kc_state_save(kc_state_t *st, kc_ctx_t *ctx, kn_consumer_t *kc) {
  st->next_save_ms = mono_ms() + st->interval_ms;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  st->started_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  kn_snapshot_t *s = NULL;
  kn_error_t *err = kn_consumer_snapshot(kc, &s);
  void *bytes = NULL;
  size_t len = 0;
  int oom = 0;
  /* Shards whose last batch was written in part resume after what was
   * written, not after what poll returned. */
  for (size_t i = 0; !err && i < kn_snapshot_count(st->written) && !oom; i++) {
    long j = kn_snapshot_find(s, kn_snapshot_shard(st->written, i));
    if (j < 0 || kn_snapshot_is_finished(s, (size_t)j)) continue;
    oom = kn_snapshot_set_position(s, kn_snapshot_shard(st->written, i),
                                   kn_snapshot_position(st->written, i)) != 0;
  }
  for (size_t i = 0; !err && i < kn_snapshot_count(s); i++) {
    const kn_position_t *p = kn_snapshot_position(s, i);
    if (p && p->kind == KN_POSITION_LATEST) {
      kn_position_t ts;
      kn_position_at_timestamp(&ts, st->started_ms);
      oom |= kn_snapshot_set_position(s, kn_snapshot_shard(s, i), &ts) != 0;
    }
  }
  if (!err && !oom) err = kn_snapshot_encode(s, &bytes, &len);
  kn_snapshot_destroy(s);
  int rc = KC_GO_ON;
  if (oom) {
    if (!st->failed) kc_errorf(ctx, "--state %s: out of memory", st->path);
    rc = KC_EXIT_RUNTIME;
  } else if (err) {
    if (!st->failed)
      kc_errorf(ctx, "--state %s: %s", st->path, kn_error_string(err));
    rc = KC_EXIT_RUNTIME;
  } else {
    int e = kc_state_write_file(st->path, bytes, len);
    if (e) {
      if (!st->failed)
        kc_errorf(ctx, "--state %s: cannot write it: %s", st->path,
                  strerror(e));
      rc = KC_EXIT_RUNTIME;
    }
  }
  if (rc != KC_GO_ON) st->failed = 1;
  kn_error_destroy(err);
  free(bytes);
  return rc;
}
