/* Where a shard is read from, as a value the application can keep: the
 * start of a shard (TRIM_HORIZON, LATEST, AT_TIMESTAMP, a sequence number)
 * or the place right after the last record it processed, with the
 * sub-sequence number of a user record inside a KPL aggregate.
 *
 * A kn_position_t is a plain value: copy it freely, nothing to free. */
#ifndef KN_POSITION_H
#define KN_POSITION_H

#include <stddef.h>
#include <stdint.h>

#include "kn/error.h"
#include "kn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_position_kind {
  KN_POSITION_TRIM_HORIZON = 0, /* the oldest record the stream keeps */
  KN_POSITION_LATEST = 1,       /* records written from now on */
  KN_POSITION_AT_TIMESTAMP = 2, /* records that arrived at or after
                                   timestamp_ms */
  KN_POSITION_AT_SEQUENCE = 3,  /* the record seq, every user record of it */
  KN_POSITION_AFTER = 4         /* right after user record (seq, subseq):
                                   the position of a processed record */
} kn_position_kind_t;

/* Longest sequence number kept, with its terminating NUL. */
#define KN_POSITION_SEQ_MAX 128

typedef struct kn_position {
  kn_position_kind_t kind;
  char seq[KN_POSITION_SEQ_MAX]; /* AT_SEQUENCE, AFTER: decimal digits */
  uint64_t subseq;               /* AFTER: 0 for a record not aggregated */
  int64_t timestamp_ms;          /* AT_TIMESTAMP: epoch milliseconds */
} kn_position_t;

/* Fills *p.  kn_position_at and kn_position_after check seq (decimal
 * digits, no leading zero, shorter than KN_POSITION_SEQ_MAX) and return
 * KN_ERR__INVALID_ARG, leaving *p untouched, when it is not one. */
KN_API void kn_position_trim_horizon(kn_position_t *p);
KN_API void kn_position_latest(kn_position_t *p);
KN_API void kn_position_at_timestamp(kn_position_t *p, int64_t timestamp_ms);
KN_API kn_err_t kn_position_at(kn_position_t *p, const char *seq);
KN_API kn_err_t kn_position_after(kn_position_t *p, const char *seq,
                                  uint64_t subseq);

/* Non-zero if both are the same position. */
KN_API int kn_position_equal(const kn_position_t *a, const kn_position_t *b);

/* Text form, for logs and files people read: "trim_horizon", "latest",
 * "ts:EPOCH_MS", "at:SEQ", "after:SEQ/SUBSEQ".  Written into buf as
 * snprintf does; returns the length of the whole text. */
KN_API size_t kn_position_format(const kn_position_t *p, char *buf,
                                 size_t size);
/* Parses the text form (also "after:SEQ", sub-sequence 0).  Returns 0 or
 * KN_ERR__INVALID_ARG, leaving *p untouched. */
KN_API kn_err_t kn_position_parse(const char *text, kn_position_t *p);

#ifdef __cplusplus
}
#endif
#endif
