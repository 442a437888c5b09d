#include "consumer/records_filter.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"
#include "kinesis/batch.h"
#include "kinesis/seqnum.h"

/* (seq, subseq) of r is at or below p. */
static int at_or_below(const kn_record_t *r, const kn_pos_t *p) {
  int c = kn_seqnum_cmp(r->seq, p->seq);
  if (c != 0) return c < 0;
  return r->subseq <= p->subseq;
}

/* A span of records in b->recs forming one original record's output. */
typedef struct span {
  size_t from, n;
} span_t;

/* Expands KPL aggregates in place of the Kinesis records that carry them,
 * keeping the order of the shard; those dropped as out of range are
 * counted in kc->records_dropped. */
static void deaggregate(kn_consumer_t *kc, kn_cshard_t *cs, kn_batch_t *b,
                        const kn_pos_t *skip) {
  size_t n0 = b->n;
  size_t n_agg = 0;
  for (size_t i = 0; i < n0; i++)
    n_agg += kn_agg_has_magic(b->recs[i].data, b->recs[i].len);
  if (!n_agg) return;

  span_t *spans = malloc(n0 * sizeof(*spans));
  if (!spans) return; /* delivered as they are: still at-least-once */
  kn_agg_filter_t filter;
  memset(&filter, 0, sizeof(filter));
  /* On a stream whose service places records, an aggregate is where the
   * service put it and nowhere else: every record in it is delivered. */
  filter.check_range = !atomic_load(&kc->auto_dist);
  filter.range_start = cs->range_start;
  filter.range_end = cs->range_end;
  size_t total = 0;
  for (size_t i = 0; i < n0; i++) {
    kn_record_t r = b->recs[i]; /* b->recs may move while expanding */
    spans[i].from = i;
    spans[i].n = 1;
    if (!kn_agg_has_magic(r.data, r.len)) {
      total++;
      continue;
    }
    filter.subseq_floor = skip && kn_seqnum_cmp(r.seq, skip->seq) == 0
                              ? (int64_t)skip->subseq
                              : -1;
    kn_agg_result_t res;
    kn_error_t *err = NULL;
    size_t before = b->n;
    /* r.data points into the GetRecords body, decoded in place and owned
     * by b (kn_batch_adopt): writable, and no longer needed once expanded.
     * On error kn_agg_expand leaves it untouched, so it can still be
     * delivered as a plain record. */
    kn_err_t code = kn_agg_expand(b, (void *)(uintptr_t)r.data, r.len, r.seq,
                                  r.arrival_ms, &filter, &res, &err);
    if (code == KN_ERR_NO_ERROR && res.aggregated) {
      spans[i].from = before;
      spans[i].n = b->n - before;
      if (res.out_of_range) {
        kn_dbg(&kc->log, "READER",
               "shard %s: aggregate %s belongs to another shard's hash "
               "range: dropped (%zu user records)",
               cs->id, r.seq, res.n_user);
        pthread_mutex_lock(&kc->mu);
        kc->records_dropped += res.n_user;
        pthread_mutex_unlock(&kc->mu);
      }
    } else if (code != KN_ERR_NO_ERROR) {
      /* A corrupt aggregate is still data: hand it over as it is. */
      kn_warn(&kc->log, "READER",
              "shard %s: record %s: %s; delivered as "
              "a plain record",
              cs->id, r.seq, err ? kn_error_string(err) : kn_err2str(code));
    }
    kn_error_destroy(err);
    total += spans[i].n;
  }

  kn_record_t *out = malloc((total ? total : 1) * sizeof(*out));
  if (out) {
    size_t k = 0;
    for (size_t i = 0; i < n0; i++) {
      memcpy(out + k, b->recs + spans[i].from, spans[i].n * sizeof(*out));
      k += spans[i].n;
    }
    memcpy(b->recs, out, k * sizeof(*out)); /* b->cap >= b->n >= k */
    kn_batch_truncate(b, k);
    free(out);
  }
  free(spans);
}

void kn_records_filter(kn_consumer_t *kc, kn_cshard_t *cs, kn_batch_t *b,
                       const kn_pos_t *skip) {
  if (kc->cfg.deaggregate) deaggregate(kc, cs, b, skip);
  if (!skip) return;
  size_t out = 0;
  for (size_t i = 0; i < b->n; i++) {
    if (at_or_below(&b->recs[i], skip)) continue;
    if (out != i) b->recs[out] = b->recs[i];
    out++;
  }
  kn_batch_truncate(b, out);
}
