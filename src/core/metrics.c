/* The metrics table, the text-format writer and the generated
 * documentation (metrics.h). */
#include "core/metrics.h"

#include <math.h>
#include <string.h>

#include "kn/metrics.h"
#include "util/str.h"

#define W "stream, app, worker"
#define S "stream, app, worker, shard"
#define P "stream"

static const kn_metric_def_t defs[KN_M__COUNT] = {
    [KN_M_C_READY] =
        {"kn_consumer_ready", KN_MK_GAUGE, W,
         "1 when the worker is ready: synced with the lease table, holding "
         "leases or finding none to take, and the lease store reachable",
         "Without a lease store: 1 once the first shard listing is done. "
         "The same judgement as `/readyz`."},
    [KN_M_C_FAILED] = {"kn_consumer_failed", KN_MK_GAUGE, W,
                       "1 once the consumer has stopped on a fatal error",
                       "`/healthz` answers 503 then."},
    [KN_M_C_RECORDS] = {"kn_consumer_records_total", KN_MK_COUNTER, W,
                        "Records handed to the application (user records after "
                        "deaggregation)",
                        "Statistics: `records`."},
    [KN_M_C_BYTES] = {"kn_consumer_bytes_total", KN_MK_COUNTER, W,
                      "Payload bytes handed to the application",
                      "Statistics: `bytes`."},
    [KN_M_C_DROPPED] = {"kn_consumer_dropped_records_total", KN_MK_COUNTER, W,
                        "User records of KPL aggregates dropped as belonging "
                        "to another shard's hash range (never on a stream "
                        "whose RecordDistributionStrategy is AUTO)",
                        "Statistics: `dropped_records`."},
    [KN_M_C_QUEUED_BATCHES] = {"kn_consumer_queued_batches", KN_MK_GAUGE, W,
                               "Batches waiting for kn_consumer_poll()",
                               "Statistics: `queued_batches`."},
    [KN_M_C_BUFFERED_BYTES] =
        {"kn_consumer_buffered_bytes", KN_MK_GAUGE, W,
         "Memory held by queued batches and GetRecords responses in flight",
         "Statistics: `buffered_bytes`; bounded by "
         "`buffer.max.total.bytes`."},
    [KN_M_C_LEASES_HELD] = {"kn_consumer_leases_held", KN_MK_GAUGE, W,
                            "Leases this worker holds now",
                            "Statistics: `leases.held`. Lease "
                            "mode only, as every lease family below."},
    [KN_M_C_LEASES_TAKEN] =
        {"kn_consumer_leases_taken_total", KN_MK_COUNTER, W,
         "Leases taken (free, expired or stolen) by a successful write",
         "Statistics: `leases.taken`."},
    [KN_M_C_LEASES_STOLEN] =
        {"kn_consumer_leases_stolen_total", KN_MK_COUNTER, W,
         "Leases asked of or taken from a live worker to balance the load",
         "With hand-offs (`lease.handoff.timeout.ms`) a steal is a request the "
         "other "
         "worker answers by handing the lease over; it is counted when the "
         "request is written, and in `kn_consumer_leases_taken_total` when "
         "the lease passes."},
    [KN_M_C_LEASES_LOST] = {"kn_consumer_leases_lost_total", KN_MK_COUNTER, W,
                            "Leases lost to another worker or to expiry",
                            "Statistics: `leases.lost`."},
    [KN_M_C_LEASES_RELEASED] =
        {"kn_consumer_leases_released_total", KN_MK_COUNTER, W,
         "Leases handed back by this worker (shutdown, shard finished)", NULL},
    [KN_M_C_LEASES_HANDED_OVER] =
        {"kn_consumer_leases_handed_over_total", KN_MK_COUNTER, W,
         "Leases passed to another worker at its request, once the "
         "application had finished what it was handed",
         "Statistics: `leases.handed_over`."},
    [KN_M_C_RENEWALS] = {"kn_consumer_lease_renewals_total", KN_MK_COUNTER, W,
                         "Lease renewal writes answered",
                         "Statistics: `leases.renewals`."},
    [KN_M_C_RENEWAL_FAILURES] =
        {"kn_consumer_lease_renewal_failures_total", KN_MK_COUNTER, W,
         "Lease renewal writes that failed (refused or store unreachable)",
         "Statistics: `leases.renew_failures`."},
    [KN_M_C_STORE_CALLS] =
        {"kn_consumer_lease_store_calls_total", KN_MK_COUNTER, W ", op",
         "Lease-store calls answered or failed, by operation",
         "`op`: `list`, `create`, `take`, `renew`, `checkpoint`, `release`, "
         "`remove`, `set_children`, `get`, `handoff`, `handoff_done`."},
    [KN_M_C_STORE_ERRORS] =
        {"kn_consumer_lease_store_errors_total", KN_MK_COUNTER, W ", op",
         "Lease-store calls that failed other than by a failed condition "
         "(store unreachable, throttled, refused)",
         NULL},
    [KN_M_C_STORE_CONDITIONAL] =
        {"kn_consumer_lease_store_conditional_failures_total", KN_MK_COUNTER,
         W ", op",
         "Lease-store writes refused because the lease had changed (another "
         "worker wrote it)",
         "Expected now and then: two workers taking the same lease, a lease "
         "stolen."},
    [KN_M_C_STORE_DURATION] = {"kn_consumer_lease_store_call_duration_seconds",
                               KN_MK_HISTOGRAM, W ", op",
                               "Duration of lease-store calls", NULL},
    [KN_M_C_STORE_SINCE_OK] =
        {"kn_consumer_lease_store_seconds_since_success", KN_MK_GAUGE, W,
         "Time since the last lease-store call that was answered (a success "
         "or a failed condition) was sent",
         "Past the grace period (`lease.duration.ms` less half the renewal "
         "interval) the worker is not ready."},
    [KN_M_C_TABLE_LEASES] = {"kn_consumer_lease_table_leases", KN_MK_GAUGE, W,
                             "Leases in the lease table at the last listing",
                             NULL},
    [KN_M_C_WAITING_PARENTS] =
        {"kn_consumer_shards_waiting_on_parents", KN_MK_GAUGE, W,
         "Leases in the table whose shard waits for a parent to be finished",
         "From the last listing of the table: leases not at SHARD_END with a "
         "parent lease not yet at SHARD_END."},

    [KN_M_S_LEASE_HELD] =
        {"kn_consumer_shard_lease_held", KN_MK_GAUGE, S,
         "1 while this worker holds the shard's lease (without a lease "
         "store: until the shard is finished)",
         "Shards this worker has read stay listed with 0 after their lease "
         "went elsewhere."},
    [KN_M_S_LAG] =
        {"kn_consumer_shard_lag_seconds", KN_MK_GAUGE, S,
         "MillisBehindLatest of the shard's last read, in seconds",
         "Only while the shard is held and the value is known. Statistics: "
         "`shards[].millis_behind` / 1000."},
    [KN_M_S_RECORDS] = {"kn_consumer_shard_records_total", KN_MK_COUNTER, S,
                        "Records of the shard handed to the application",
                        "Statistics: `shards[].records`."},
    [KN_M_S_BYTES] = {"kn_consumer_shard_bytes_total", KN_MK_COUNTER, S,
                      "Payload bytes of the shard handed to the application",
                      "Statistics: `shards[].bytes`."},
    [KN_M_S_GR_CALLS] = {"kn_consumer_shard_get_records_calls_total",
                         KN_MK_COUNTER, S,
                         "GetRecords calls answered or failed", NULL},
    [KN_M_S_GR_THROTTLES] =
        {"kn_consumer_shard_get_records_throttles_total", KN_MK_COUNTER, S,
         "GetRecords calls throttled (ProvisionedThroughputExceeded and other "
         "throttling answers)",
         NULL},
    [KN_M_S_GR_ERRORS] =
        {"kn_consumer_shard_get_records_errors_total", KN_MK_COUNTER, S,
         "GetRecords calls that failed otherwise (expired iterators, 5xx, "
         "connection errors, malformed answers)",
         NULL},
    [KN_M_S_BUFFERED_RECORDS] =
        {"kn_consumer_shard_buffered_records", KN_MK_GAUGE, S,
         "Records of the shard queued for the application",
         "Statistics: `shards[].buffered_records`."},
    [KN_M_S_BUFFERED_BYTES] = {"kn_consumer_shard_buffered_bytes", KN_MK_GAUGE,
                               S, "Memory of the shard's queued batches",
                               "Statistics: `shards[].buffered_bytes`."},
    [KN_M_S_PAUSED] =
        {"kn_consumer_shard_paused", KN_MK_GAUGE, S,
         "1 while retrieval of the shard is paused because the buffers are "
         "full",
         "Statistics: `shards[].paused`."},
    [KN_M_S_CKPT_LAG] =
        {"kn_consumer_shard_checkpoint_lag_records", KN_MK_GAUGE, S,
         "Records handed to the application since the position of the "
         "shard's last checkpoint",
         "Lease mode, while the lease is held; counted from the take. A "
         "checkpoint between two batches counts from the batch before it."},
    [KN_M_S_FO_STATE] =
        {"kn_consumer_shard_fanout_state", KN_MK_GAUGE, S ", state",
         "Enhanced fan-out: 1 for the subscription's current state, 0 for "
         "the others",
         "Only for shards read with enhanced fan-out while their reader "
         "runs. `state`: as `shards[].efo.state` in the statistics "
         "(`subscribing`, `streaming`, `waiting`, `room`, `checking`, "
         "`polling`, `ended`)."},
    [KN_M_S_FO_SUBSCRIPTIONS] = {"kn_consumer_shard_fanout_subscriptions_total",
                                 KN_MK_COUNTER, S,
                                 "SubscribeToShard calls made",
                                 "Counted per reader: starts again at "
                                 "0 when the shard's lease is taken again."},
    [KN_M_S_FO_RESUBSCRIBES] = {"kn_consumer_shard_fanout_resubscribes_total",
                                KN_MK_COUNTER, S,
                                "SubscribeToShard calls after the first", NULL},
    [KN_M_S_FO_EVENTS] =
        {"kn_consumer_shard_fanout_events_total", KN_MK_COUNTER, S,
         "SubscribeToShardEvent messages received (empty ones included)", NULL},
    [KN_M_S_FO_ERRORS] =
        {"kn_consumer_shard_fanout_errors_total", KN_MK_COUNTER, S,
         "Subscriptions that failed and were retried (connection lost, "
         "corrupt stream, 5xx)",
         NULL},

    [KN_M_P_SENT] = {"kn_producer_records_sent_total", KN_MK_COUNTER, P,
                     "Records accepted by kn_producer_send()", NULL},
    [KN_M_P_DELIVERED] = {"kn_producer_records_delivered_total", KN_MK_COUNTER,
                          P, "Records stored in the stream (reported)", NULL},
    [KN_M_P_FAILED] = {"kn_producer_records_failed_total", KN_MK_COUNTER, P,
                       "Records reported as not stored", NULL},
    [KN_M_P_RETRIED] = {"kn_producer_records_retried_total", KN_MK_COUNTER, P,
                        "Times a record was queued again after a failure",
                        NULL},
    [KN_M_P_THROTTLED] =
        {"kn_producer_records_throttled_total", KN_MK_COUNTER, P,
         "Records refused with ProvisionedThroughputExceeded (per entry, or "
         "the whole call throttled)",
         NULL},
    [KN_M_P_BYTES] = {"kn_producer_bytes_delivered_total", KN_MK_COUNTER, P,
                      "Payload bytes of the records stored", NULL},
    [KN_M_P_CALLS] = {"kn_producer_put_records_calls_total", KN_MK_COUNTER, P,
                      "PutRecords calls answered or failed", NULL},
    [KN_M_P_QUEUE_RECORDS] =
        {"kn_producer_queue_records", KN_MK_GAUGE, P,
         "Records sent and not yet reported (queued, in flight, or with a "
         "report waiting)",
         "kn_producer_outq_len()."},
    [KN_M_P_QUEUE_BYTES] = {"kn_producer_queue_bytes", KN_MK_GAUGE, P,
                            "Memory of the records sent and not yet reported",
                            "Bounded by `queue.max.bytes`."},
    [KN_M_P_IN_FLIGHT] = {"kn_producer_in_flight_records", KN_MK_GAUGE, P,
                          "Records in PutRecords calls now", NULL},
    [KN_M_P_MAP_REFRESHES] = {"kn_producer_shard_map_refreshes_total",
                              KN_MK_COUNTER, P, "Shard map listings", NULL},
    [KN_M_P_PUT_DURATION] = {"kn_producer_put_records_duration_seconds",
                             KN_MK_HISTOGRAM, P, "Duration of PutRecords calls",
                             NULL},
};

const kn_metric_def_t *kn_metric_def(kn_metric_id_t id) {
  return id < KN_M__COUNT ? &defs[id] : NULL;
}

static const char *kind_name(kn_metric_kind_t k) {
  switch (k) {
    case KN_MK_COUNTER:
      return "counter";
    case KN_MK_GAUGE:
      return "gauge";
    default:
      return "histogram";
  }
}

/* ---- histograms ---- */

const double kn_hist_bounds[KN_HIST_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

void kn_hist_observe(kn_hist_t *h, double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  size_t i = 0;
  while (i < KN_HIST_BUCKETS && seconds > kn_hist_bounds[i]) i++;
  h->n[i]++;
  h->count++;
  h->sum += seconds;
}

/* ---- the writer ---- */

int kn_mw_label(kn_buf_t *b, const char *name, const char *value) {
  int rc = kn_buf_printf(b, "%s=\"", name);
  for (const char *p = value ? value : ""; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c >= 0x80) {
      /* UTF-8 as it is; a byte that starts no valid sequence becomes
       * U+FFFD (Prometheus refuses a whole scrape for one bad label). */
      size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      if (k && strnlen(p, k) == k && kn_utf8_count(p, k) == 1) {
        rc |= kn_buf_append(b, p, k);
        p += k - 1;
      } else {
        rc |= kn_buf_append_str(b, "\xEF\xBF\xBD");
      }
    } else if (c == '\\')
      rc |= kn_buf_append_str(b, "\\\\");
    else if (c == '"')
      rc |= kn_buf_append_str(b, "\\\"");
    else if (c == '\n')
      rc |= kn_buf_append_str(b, "\\n");
    else
      rc |= kn_buf_append_char(b, *p);
  }
  return rc | kn_buf_append_char(b, '"');
}

void kn_mw_init(kn_mw_t *w, kn_buf_t *b, const char *const *base_labels) {
  memset(w, 0, sizeof(*w));
  w->b = b;
  w->base = (kn_buf_t)KN_BUF_INIT;
  w->cur = KN_M__COUNT;
  for (size_t i = 0; base_labels && base_labels[i]; i += 2) {
    if (w->base.len) w->rc |= kn_buf_append_char(&w->base, ',');
    w->rc |= kn_mw_label(&w->base, base_labels[i], base_labels[i + 1]);
  }
}

void kn_mw_free(kn_mw_t *w) { kn_buf_free(&w->base); }

void kn_mw_family(kn_mw_t *w, kn_metric_id_t id) {
  w->cur = id;
  w->started = 0;
}

/* HELP and TYPE before the first sample of the family. */
static void head(kn_mw_t *w) {
  if (w->started || w->cur >= KN_M__COUNT) return;
  const kn_metric_def_t *d = &defs[w->cur];
  w->rc |= kn_buf_printf(w->b, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help,
                         d->name, kind_name(d->kind));
  w->started = 1;
}

/* name{base,extra...,le="..."} with the suffix after the name; up to two
 * extra labels (name NULL: absent). */
static void series2(kn_mw_t *w, const char *suffix, const char *l1,
                    const char *v1, const char *l2, const char *v2,
                    const char *le) {
  kn_buf_t *b = w->b;
  w->rc |= kn_buf_printf(b, "%s%s", defs[w->cur].name, suffix);
  if (!w->base.len && !l1 && !l2 && !le) {
    w->rc |= kn_buf_append_char(b, ' ');
    return;
  }
  w->rc |= kn_buf_append_char(b, '{');
  int any = 0;
  if (w->base.len) {
    w->rc |= kn_buf_append(b, w->base.p, w->base.len);
    any = 1;
  }
  const char *names[3] = {l1, l2, le ? "le" : NULL};
  const char *values[3] = {v1, v2, le};
  for (int i = 0; i < 3; i++) {
    if (!names[i]) continue;
    if (any) w->rc |= kn_buf_append_char(b, ',');
    w->rc |= kn_mw_label(b, names[i], values[i]);
    any = 1;
  }
  w->rc |= kn_buf_append_str(b, "} ");
}

static void series(kn_mw_t *w, const char *suffix, const char *lname,
                   const char *lvalue, const char *le) {
  series2(w, suffix, lname, lvalue, NULL, NULL, le);
}

void kn_mw_u64(kn_mw_t *w, const char *lname, const char *lvalue, uint64_t v) {
  head(w);
  series(w, "", lname, lvalue, NULL);
  w->rc |= kn_buf_printf(w->b, "%llu\n", (unsigned long long)v);
}

void kn_mw_u64_2(kn_mw_t *w, const char *l1, const char *v1, const char *l2,
                 const char *v2, uint64_t v) {
  head(w);
  series2(w, "", l1, v1, l2, v2, NULL);
  w->rc |= kn_buf_printf(w->b, "%llu\n", (unsigned long long)v);
}

static void put_double(kn_mw_t *w, double v) {
  if (isnan(v))
    w->rc |= kn_buf_append_str(w->b, "NaN\n");
  else if (isinf(v))
    w->rc |= kn_buf_append_str(w->b, v > 0 ? "+Inf\n" : "-Inf\n");
  else
    w->rc |= kn_buf_printf(w->b, "%.15g\n", v);
}

void kn_mw_f64(kn_mw_t *w, const char *lname, const char *lvalue, double v) {
  head(w);
  series(w, "", lname, lvalue, NULL);
  put_double(w, v);
}

void kn_mw_hist(kn_mw_t *w, const char *lname, const char *lvalue,
                const kn_hist_t *h) {
  head(w);
  uint64_t cum = 0;
  char le[32];
  for (size_t i = 0; i <= KN_HIST_BUCKETS; i++) {
    cum += h->n[i];
    if (i < KN_HIST_BUCKETS)
      snprintf(le, sizeof(le), "%g", kn_hist_bounds[i]);
    else
      strcpy(le, "+Inf");
    series(w, "_bucket", lname, lvalue, le);
    w->rc |= kn_buf_printf(w->b, "%llu\n", (unsigned long long)cum);
  }
  series(w, "_sum", lname, lvalue, NULL);
  put_double(w, h->sum);
  series(w, "_count", lname, lvalue, NULL);
  w->rc |= kn_buf_printf(w->b, "%llu\n", (unsigned long long)h->count);
}

size_t kn_metrics_copy_out(const kn_buf_t *b, char *out, size_t size) {
  if (size) {
    size_t n = b->len < size - 1 ? b->len : size - 1;
    if (n) memcpy(out, b->p, n);
    out[n] = '\0';
  }
  return b->len;
}

/* ---- docs/METRICS.md ---- */

static void md_cell(FILE *out, const char *s) {
  for (; s && *s; s++) {
    if (*s == '|')
      fputs("\\|", out);
    else
      fputc(*s, out);
  }
}

static void md_section(FILE *out, const char *title, kn_metric_id_t from,
                       kn_metric_id_t to) {
  fprintf(out,
          "\n## %s\n\n| Metric | Type | Labels | Meaning |\n"
          "|---|---|---|---|\n",
          title);
  for (kn_metric_id_t i = from; i < to; i++) {
    const kn_metric_def_t *d = &defs[i];
    fprintf(out, "| `%s` | %s | %s | ", d->name, kind_name(d->kind), d->labels);
    md_cell(out, d->help);
    fputc('.', out);
    if (d->more) {
      fputc(' ', out);
      md_cell(out, d->more);
    }
    fputs(" |\n", out);
  }
}

void kn_metrics_markdown(FILE *out) {
  fputs(
      "# Metrics\n\n"
      "Generated from the library's metrics table by `kncat -X "
      "list-metrics-md` (`make docs`); do not edit.\n\n"
      "`kn_consumer_metrics()` and `kn_producer_metrics()` render these "
      "metrics in the Prometheus text exposition format (version 0.0.4) "
      "into the caller's buffer, from the same counters as the JSON "
      "statistics (`STATISTICS.md`); `kncat group`, `consume`, "
      "`produce` and `multilang` serve them with `--metrics HOST:PORT` "
      "(`kncat.md`).\n\n"
      "Names start with `kn_`, are in base units (seconds, bytes) and "
      "counters end in `_total`. Counters count from the start of the "
      "consumer or producer. Labels: `stream` (the stream name), `app` "
      "(`app.name`, empty without one), `worker` (`worker.id`), `shard` "
      "(the shard id) and, where said, `op` or `state`.\n\n"
      "Histograms of durations have the buckets (seconds) ",
      out);
  for (size_t i = 0; i < KN_HIST_BUCKETS; i++)
    fprintf(out, "%s%g", i ? ", " : "", kn_hist_bounds[i]);
  fputs(" and +Inf.\n", out);
  md_section(out, "Consumer: one series per worker", KN_M_C_READY,
             KN_M_S_LEASE_HELD);
  md_section(out, "Consumer: one series per shard", KN_M_S_LEASE_HELD,
             KN_M_P_SENT);
  fputs(
      "\nShards are those this worker has read since it started (in "
      "lease mode, those whose lease it has held).\n",
      out);
  md_section(out, "Producer", KN_M_P_SENT, KN_M__COUNT);
  fputs(
      "\n## Health endpoints\n\n"
      "`kncat --metrics` also serves `/healthz` and `/readyz` (plain "
      "text, the reason in the body):\n\n"
      "| Path | 200 | 503 |\n|---|---|---|\n"
      "| `/healthz` | the consumer's (producer's) threads run | the "
      "consumer stopped on a fatal error, or the command has finished "
      "(`--metrics-linger`) |\n"
      "| `/readyz` | as `kn_consumer_ready` (1); a producer: its shard map "
      "is loaded | not yet synced with the lease table, still taking "
      "leases, the lease store unreachable past the grace period, or not "
      "healthy |\n",
      out);
}
