#include "consumer/position.h"

#include <string.h>

int kn_pos_set_seq(kn_pos_t *p, kn_iterator_type_t type, const char *seq,
                   uint64_t subseq, int has_subseq) {
  size_t n = strlen(seq);
  if (n == 0 || n >= sizeof(p->seq)) return -1;
  memset(p, 0, sizeof(*p));
  p->type = type;
  memcpy(p->seq, seq, n + 1);
  p->subseq = subseq;
  p->has_subseq = has_subseq;
  return 0;
}

const char *kn_iterator_type_name(kn_iterator_type_t type) {
  switch (type) {
    case KN_ITER_TRIM_HORIZON: return "TRIM_HORIZON";
    case KN_ITER_LATEST: return "LATEST";
    case KN_ITER_AT_SEQUENCE_NUMBER: return "AT_SEQUENCE_NUMBER";
    case KN_ITER_AFTER_SEQUENCE_NUMBER: return "AFTER_SEQUENCE_NUMBER";
    case KN_ITER_AT_TIMESTAMP: return "AT_TIMESTAMP";
  }
  return "TRIM_HORIZON";
}
