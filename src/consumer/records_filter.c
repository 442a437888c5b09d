#include "consumer/records_filter.h"

#include "kinesis/batch.h"

/* (seq, subseq) of r is at or below p. */
static int at_or_below(const kn_record_t *r, const kn_pos_t *p) {
  int c = kn_sequence_number_cmp(r->seq, p->seq);
  if (c != 0) return c < 0;
  return r->subseq <= p->subseq;
}

void kn_records_filter(kn_consumer_t *kc, kn_cshard_t *cs, kn_batch_t *b,
                       const kn_pos_t *skip) {
  (void)kc;
  (void)cs;
  if (!skip) return;
  size_t out = 0;
  for (size_t i = 0; i < b->n; i++) {
    if (at_or_below(&b->recs[i], skip)) continue;
    if (out != i) b->recs[out] = b->recs[i];
    out++;
  }
  kn_batch_truncate(b, out);
}
