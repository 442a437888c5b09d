/* consume --state FILE: the positions of every shard in a file that a
 * later run resumes from.  FILE holds a reader snapshot
 * (include/kn/snapshot.h, format of docs/STREAM_PROCESSING.md), replaced
 * atomically (a temporary file next to it, fsync, rename, fsync of the
 * directory) every checkpoint.interval.ms and at exit.
 *
 * What it holds is what was written to standard output and flushed:
 * positions come from the consumer's snapshot, which follows every batch
 * poll returned, lowered to the last record actually written for a batch
 * written in part (-c, a failed write).  A shard still at LATEST with
 * nothing written is saved at AT_TIMESTAMP of the run's start, so that
 * records written between two runs are not skipped. */
#ifndef KNCAT_STATE_H
#define KNCAT_STATE_H

#include <stdint.h>

#include "kn/snapshot.h"
#include "kncat.h"

typedef struct kc_state {
  char *path;             /* owned */
  kn_snapshot_t *written; /* owned: last record written, per shard */
  int64_t interval_ms;
  int64_t next_save_ms; /* monotonic */
  int failed;           /* a save failed (told once) */
  int64_t started_ms;   /* epoch ms before the consumer started */
} kc_state_t;

/* Reads FILE (absent: a first run) and makes the consumer start from it
 * (kn_conf_set_start_snapshot on ctx->conf).  A FILE that is no valid
 * state, or a directory where no file can be written next to it: message
 * and KC_EXIT_USAGE, FILE untouched.  KC_GO_ON otherwise. */
int kc_state_open(kc_state_t *st, kc_ctx_t *ctx, const char *path);
void kc_state_free(kc_state_t *st);

/* The first n records of b were written. */
void kc_state_written(kc_state_t *st, const kn_batch_t *b, size_t n);
/* Non-zero when checkpoint.interval.ms has passed since the last save. */
int kc_state_due(const kc_state_t *st);
/* Replaces FILE with the positions as of now (the output must have been
 * flushed first).  KC_GO_ON, or KC_EXIT_RUNTIME with a message. */
int kc_state_save(kc_state_t *st, kc_ctx_t *ctx, kn_consumer_t *kc);

/* Writes bytes to path atomically; 0 or an errno value. */
int kc_state_write_file(const char *path, const void *p, size_t n);

#endif
