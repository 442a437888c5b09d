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
