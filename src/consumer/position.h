/* Where a shard is to be read from: a starting position type plus its
 * argument, and (sequence, sub-sequence) positions of records. */
#ifndef KN_CONSUMER_POSITION_H
#define KN_CONSUMER_POSITION_H

#include <stdint.h>

#include "kn/client.h"

#define KN_SEQ_MAX 128 /* longer than any Kinesis sequence number */

typedef struct kn_pos {
  kn_iterator_type_t type;
  char seq[KN_SEQ_MAX]; /* AT/AFTER_SEQUENCE_NUMBER */
  uint64_t subseq;      /* with AT_SEQUENCE_NUMBER: skip user records of
                           an aggregate at or below this sub-sequence */
  int has_subseq;
  int64_t timestamp_ms; /* AT_TIMESTAMP */
} kn_pos_t;

/* Sets a sequence position; returns -1 if seq is too long. */
int kn_pos_set_seq(kn_pos_t *p, kn_iterator_type_t type, const char *seq,
                   uint64_t subseq, int has_subseq);

#endif
