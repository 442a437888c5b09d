/* Metrics in the Prometheus text exposition format (version 0.0.4).
 *
 * One table (metrics.c) names every metric family the consumer and the
 * producer export: its name, type, labels and meaning.  The renderers
 * (consumer/metrics.c, producer/metrics.c) write samples through the
 * writer below, which takes the name, HELP and TYPE from the table, and
 * docs/METRICS.md is generated from the same table (kncat -X
 * list-metrics-md), so code and documentation cannot drift apart.
 *
 * Every name starts with "kn_", is in base units (seconds, bytes) and
 * counters end in "_total". */
#ifndef KN_CORE_METRICS_H
#define KN_CORE_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/buf.h"

typedef enum kn_metric_kind {
  KN_MK_COUNTER,
  KN_MK_GAUGE,
  KN_MK_HISTOGRAM
} kn_metric_kind_t;

/* The families, in the order they are rendered and documented. */
typedef enum kn_metric_id {
  /* consumer, one series per worker */
  KN_M_C_READY,
  KN_M_C_FAILED,
  KN_M_C_RECORDS,
  KN_M_C_BYTES,
  KN_M_C_DROPPED,
  KN_M_C_QUEUED_BATCHES,
  KN_M_C_BUFFERED_BYTES,
  KN_M_C_LEASES_HELD,
  KN_M_C_LEASES_TAKEN,
  KN_M_C_LEASES_STOLEN,
  KN_M_C_LEASES_LOST,
  KN_M_C_LEASES_RELEASED,
  KN_M_C_LEASES_HANDED_OVER,
  KN_M_C_RENEWALS,
  KN_M_C_RENEWAL_FAILURES,
  KN_M_C_STORE_CALLS,
  KN_M_C_STORE_ERRORS,
  KN_M_C_STORE_CONDITIONAL,
  KN_M_C_STORE_DURATION,
  KN_M_C_STORE_SINCE_OK,
  KN_M_C_TABLE_LEASES,
  KN_M_C_WAITING_PARENTS,
  /* consumer, one series per shard this worker has read */
  KN_M_S_LEASE_HELD,
  KN_M_S_LAG,
  KN_M_S_RECORDS,
  KN_M_S_BYTES,
  KN_M_S_GR_CALLS,
  KN_M_S_GR_THROTTLES,
  KN_M_S_GR_ERRORS,
  KN_M_S_BUFFERED_RECORDS,
  KN_M_S_BUFFERED_BYTES,
  KN_M_S_PAUSED,
  KN_M_S_CKPT_LAG,
  KN_M_S_FO_STATE,
  KN_M_S_FO_SUBSCRIPTIONS,
  KN_M_S_FO_RESUBSCRIBES,
  KN_M_S_FO_EVENTS,
  KN_M_S_FO_ERRORS,
  /* producer */
  KN_M_P_SENT,
  KN_M_P_DELIVERED,
  KN_M_P_FAILED,
  KN_M_P_RETRIED,
  KN_M_P_THROTTLED,
  KN_M_P_BYTES,
  KN_M_P_CALLS,
  KN_M_P_QUEUE_RECORDS,
  KN_M_P_QUEUE_BYTES,
  KN_M_P_IN_FLIGHT,
  KN_M_P_MAP_REFRESHES,
  KN_M_P_PUT_DURATION,
  KN_M__COUNT
} kn_metric_id_t;

typedef struct kn_metric_def {
  const char *name;
  kn_metric_kind_t kind;
  const char *labels; /* for the documentation: "stream, app, worker" */
  const char *help;   /* one line: the HELP text */
  const char *more;   /* for the documentation only, or NULL */
} kn_metric_def_t;

const kn_metric_def_t *kn_metric_def(kn_metric_id_t id);

/* ---- histograms of durations ---- */

/* Upper bounds of the buckets, in seconds (the +Inf bucket is implied). */
#define KN_HIST_BUCKETS 14
extern const double kn_hist_bounds[KN_HIST_BUCKETS];

typedef struct kn_hist {
  uint64_t n[KN_HIST_BUCKETS + 1]; /* per bucket, not cumulative; last +Inf */
  uint64_t count;
  double sum; /* seconds */
} kn_hist_t;

void kn_hist_observe(kn_hist_t *h, double seconds);

/* ---- the writer ---- */

/* Writes one document into b.  Families must be written whole, one after
 * the other (the text format wants a family's samples together). */
typedef struct kn_mw {
  kn_buf_t *b;
  int rc;        /* non-zero once an append failed */
  kn_buf_t base; /* the labels every sample carries, formatted */
  int started;   /* the current family's HELP/TYPE are written */
  kn_metric_id_t cur;
} kn_mw_t;

/* base_labels: NULL-terminated name, value pairs (a NULL value is written
 * as ""). */
void kn_mw_init(kn_mw_t *w, kn_buf_t *b, const char *const *base_labels);
void kn_mw_free(kn_mw_t *w);
/* Appends `name="escaped value"` to b (quotes, backslashes, newlines
 * escaped as the format wants). */
int kn_mw_label(kn_buf_t *b, const char *name, const char *value);
/* Starts family id: its HELP and TYPE lines come with the first sample,
 * so a family with no sample writes nothing. */
void kn_mw_family(kn_mw_t *w, kn_metric_id_t id);
/* One sample of the current family; the extra label (name NULL: none)
 * follows the base labels. */
void kn_mw_u64(kn_mw_t *w, const char *lname, const char *lvalue, uint64_t v);
void kn_mw_f64(kn_mw_t *w, const char *lname, const char *lvalue, double v);
/* With two extra labels. */
void kn_mw_u64_2(kn_mw_t *w, const char *l1, const char *v1, const char *l2,
                 const char *v2, uint64_t v);
void kn_mw_hist(kn_mw_t *w, const char *lname, const char *lvalue,
                const kn_hist_t *h);

/* Copies a rendered document into the caller's buffer as snprintf does:
 * returns the full length; out is NUL-terminated when size > 0. */
size_t kn_metrics_copy_out(const kn_buf_t *b, char *out, size_t size);

#endif
