/* The producer's I/O thread: feeds the engine, sends its calls, lists
 * shards, and runs the timer that wakes it for linger, back-off, rate
 * limits and time-outs.  Nothing here blocks. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/decode.h"
#include "kinesis/encode.h"
#include "kinesis/kinesis.h"
#include "producer/producer_int.h"
#include "util/clock.h"

#define LIST_BACKOFF_MS 200
#define LIST_BACKOFF_MAX_MS 5000

static void start_list(kn_producer_t *kp);
static void start_describe(kn_producer_t *kp);

/* ---- reports ---- */

void kn_producer_deliver(kn_producer_t *kp, kn_msg_list_t *done) {
  if (!done->head) return;
  uint64_t ok = 0, failed = 0, bytes = 0;
  for (kn_msg_t *m = done->head; m; m = m->next) {
    if (m->shard_id) {
      ok++;
      bytes += m->len;
    } else {
      failed++;
    }
  }
  pthread_mutex_lock(&kp->mu);
  kn_msg_list_concat(&kp->reports, done);
  kp->counters[KN_PC_DELIVERED] += ok;
  kp->counters[KN_PC_FAILED] += failed;
  kp->counters[KN_PC_BYTES] += bytes;
  pthread_cond_broadcast(&kp->dr_cv);
  pthread_mutex_unlock(&kp->mu);
}

/* ---- sending ---- */

static void on_put(void *opaque, kn_error_t *err, kn_put_results_t *res,
                   kn_buf_t *sent);

static void unlink_call(kn_producer_t *kp, kn_pbatch_t *b) {
  for (kn_pbatch_t **p = &kp->calls; *p; p = &(*p)->next) {
    if (*p == b) {
      *p = b->next;
      kp->n_calls--;
      return;
    }
  }
}

/* A call that failed as a whole with an error no retry can fix fails
 * every queued record now instead of at its time-to-live. */
static int fails_everything(const kn_error_t *err) {
  if (!err || kn_error_is_retriable(err)) return 0;
  switch (kn_error_code(err)) {
    case KN_ERR_RESOURCE_NOT_FOUND:
    case KN_ERR_ACCESS_DENIED:
    case KN_ERR_AUTH:
    case KN_ERR_KMS:
    case KN_ERR__CREDENTIALS:
      return 1;
    default:
      return 0;
  }
}

/* Entries refused as throttled: all of a throttled call, or those the
 * answer marks so. */
static uint64_t throttled_entries(const kn_pbatch_t *b, const kn_error_t *err,
                                  const kn_put_results_t *res) {
  if (err) return kn_error_is_throttling(err) ? b->n : 0;
  uint64_t n = 0;
  for (size_t i = 0; res && res->failed && i < res->n; i++)
    n += res->v[i].error_code &&
         strcmp(res->v[i].error_code,
                "ProvisionedThroughputExceededException") == 0;
  return n;
}

static void finish_call(kn_producer_t *kp, kn_pbatch_t *b, kn_error_t *err,
                        kn_put_results_t *res) {
  kn_msg_list_t done = {0};
  uint64_t throttled = throttled_entries(b, err, res);
  double took_s = (double)(kn_mono_us() - b->sent_us) / 1e6;
  kn_presp_t *resp = res ? kn_presp_new(res) : NULL;
  if (err)
    kn_warn(&kp->log, "PRODUCE", "PutRecords of %zu records failed: %s",
            b->n_msgs, kn_error_string(err));
  int flags = kn_pcore_done(kp->core, b, err, resp, kn_mono_us(), &done);
  kn_presp_release(resp);
  if (fails_everything(err)) kn_pcore_fail_all(kp->core, err, &done);
  kn_error_destroy(err);
  pthread_mutex_lock(&kp->mu);
  kp->counters[KN_PC_CALLS]++;
  kp->throttled += throttled;
  kn_hist_observe(&kp->put_hist, took_s);
  pthread_mutex_unlock(&kp->mu);
  kn_producer_deliver(kp, &done);
  if (flags & KN_PCORE_REFRESH) {
    kn_info(&kp->log, "PRODUCE",
            "a record went to an unexpected shard: "
            "listing shards again");
    if (kp->list_call)
      kp->list_again = 1;
    else if (!kn_timer_armed(kp->list_timer))
      start_list(kp);
  }
}

static void start_call(kn_producer_t *kp, kn_pbatch_t *b) {
  kn_error_t *err = NULL;
  /* Failed entries are retried here, one by one, not the whole call. */
  kn_call_opts_t opts = {1, 0};
  b->owner = kp;
  b->sent_us = kn_mono_us();
  b->next = kp->calls;
  kp->calls = b;
  kp->n_calls++;
  b->req = kn_kinesis_put_records_body_async(kp->svc, &b->body, b->n, &opts,
                                             on_put, b, &err);
  if (!b->req) {
    unlink_call(kp, b);
    finish_call(kp, b,
                err ? err
                    : kn_error_new(KN_ERR__NOMEM,
                                   "PutRecords: "
                                   "out of memory"),
                NULL);
  }
}

static int take_inbound(kn_producer_t *kp);

static void kick(kn_producer_t *kp) {
  if (!take_inbound(kp)) return;
  int64_t now = kn_mono_us();
  pthread_mutex_lock(&kp->mu);
  int flush = kp->flushing > 0 || kp->closing;
  pthread_mutex_unlock(&kp->mu);

  kn_msg_list_t done = {0};
  int64_t next = kn_pcore_expire(kp->core, now, &done), wake = INT64_MAX;
  while (kp->n_calls < kp->cfg.max_in_flight) {
    kn_pbatch_t *b = kn_pcore_take(kp->core, now, flush, &wake, &done);
    if (!b) break;
    start_call(kp, b);
  }
  if (kp->n_calls >= kp->cfg.max_in_flight) wake = INT64_MAX; /* answers kick */
  if (wake < next) next = wake;
  if (next == INT64_MAX) {
    kn_timer_stop(kp->timer);
  } else {
    int64_t ms = next > now ? (next - now + 999) / 1000 : 0;
    kn_timer_start(kp->timer, ms);
  }

  kn_pcore_stats_t st;
  kn_pcore_stats(kp->core, &st);
  pthread_mutex_lock(&kp->mu);
  kp->next_look_us = kp->n_calls >= kp->cfg.max_in_flight ? INT64_MIN : next;
  kp->counters[KN_PC_IN_FLIGHT] = st.inflight;
  kp->counters[KN_PC_RETRIES] = st.retries;
  pthread_mutex_unlock(&kp->mu);
  kn_producer_deliver(kp, &done);
}

static void on_put(void *opaque, kn_error_t *err, kn_put_results_t *res,
                   kn_buf_t *sent) {
  kn_pbatch_t *b = opaque;
  kn_producer_t *kp = b->owner;
  /* The core keeps the body's memory for the next call. */
  b->body = *sent;
  *sent = (kn_buf_t)KN_BUF_INIT;
  unlink_call(kp, b);
  finish_call(kp, b, err, res);
  kick(kp);
}

static void on_timer(void *arg) { kick(arg); }

void kn_sender_kick(void *arg) { kick(arg); }

void kn_sender_drain(void *arg) { kick(arg); }

/* A record the stream cannot take, told apart before it reaches the core
 * (send() checks them too once the stream is described). */
static kn_error_t *refusal(const kn_producer_t *kp, const kn_msg_t *m) {
  if (kn_msg_size(m) > kp->record_max)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "stream \"%s\": a record of %zu bytes (data and "
                        "partition key) is over the stream's "
                        "MaxRecordSizeInKiB of %zu KiB",
                        kp->stream, kn_msg_size(m), kp->record_max / 1024);
  if (!m->key_len && !kp->auto_dist)
    return kn_error_new(KN_ERR__INVALID_ARG,
                        "stream \"%s\": a record without a partition key "
                        "needs a stream whose RecordDistributionStrategy is "
                        "AUTO",
                        kp->stream);
  return NULL;
}

/* Moves the inbound queue into the core (or fails its records at once when
 * the stream cannot be listed).  Records wait in the inbound queue until
 * the stream is described.  Returns 0 when the producer is stopped:
 * nothing more to do. */
static int take_inbound(kn_producer_t *kp) {
  if (kp->core && !kp->stream_known) return 1;
  pthread_mutex_lock(&kp->mu);
  kn_msg_list_t in = kp->inbound;
  memset(&kp->inbound, 0, sizeof(kp->inbound));
  kp->inbound_bytes = 0;
  kp->drain_posted = 0;
  const kn_error_t *map_err = kp->map_loaded ? NULL : kp->map_err;
  kn_error_t *fatal =
      map_err && fails_everything(map_err) ? kn_error_copy(map_err) : NULL;
  pthread_mutex_unlock(&kp->mu);
  if (!kp->core) { /* stopped: only a destroy gets here */
    for (kn_msg_t *m = in.head; m; m = m->next)
      m->err = kn_error_new(KN_ERR__DESTROY, "the producer was destroyed");
    kn_producer_deliver(kp, &in);
    kn_error_destroy(fatal);
    return 0;
  }
  if (fatal) {
    /* The stream cannot be listed (gone, access denied): fail at once. */
    for (kn_msg_t *m = in.head; m; m = m->next) m->err = kn_error_copy(fatal);
    kn_error_destroy(fatal);
    kn_producer_deliver(kp, &in);
    return 1;
  }
  kn_msg_list_t refused = {0};
  for (kn_msg_t *m; (m = kn_msg_list_pop(&in));) {
    if ((m->err = refusal(kp, m))) {
      kn_msg_list_push(&refused, m);
      continue;
    }
    if (kp->auto_dist) {
      /* The service ignores keys: queues and rates go evenly over the
       * shards, not by key. */
      uint64_t seq = kp->spread_seq++;
      m->hk = kn_hashkey_of((const char *)&seq, sizeof(seq));
    }
    kn_pcore_add(kp->core, m);
  }
  kn_producer_deliver(kp, &refused);
  return 1;
}

/* ---- what the stream says of itself ---- */

static void on_describe(void *opaque, kn_call_result_t *res) {
  kn_producer_t *kp = opaque;
  kp->describe_call = NULL;
  kn_error_t *err = res->err;
  res->err = NULL;
  kn_stream_summary_t *s = NULL;
  if (!err)
    err = kn_decode_stream_summary(res->body.p ? res->body.p : "",
                                   res->body.len, &s);
  size_t record_max = KN_PUT_RECORD_MAX;
  int auto_dist = 0;
  if (err) {
    /* Retries of the call are spent (or it is refused): go on as for a
     * stream of the defaults rather than hold every record. */
    kn_warn(&kp->log, "PRODUCE",
            "stream \"%s\": DescribeStreamSummary failed (%s): taking "
            "records of at most 1 MiB and partition keys as placing them",
            kp->stream, kn_error_string(err));
    kn_error_destroy(err);
  } else {
    int kib = kn_stream_summary_max_record_kib(s);
    if (kib >= KN_RECORD_KIB_MIN && kib <= KN_RECORD_KIB_MAX)
      record_max = (size_t)kib * 1024;
    const char *dist = kn_stream_summary_distribution(s);
    auto_dist = dist && strcmp(dist, "AUTO") == 0;
    kn_stream_summary_destroy(s);
  }
  kn_pcore_set_stream(kp->core, record_max, auto_dist);
  if (auto_dist && kp->core_cfg.aggregate)
    kn_log(&kp->log, KN_LOG_NOTICE, "PRODUCE",
           "stream \"%s\" places records itself (RecordDistributionStrategy "
           "AUTO): aggregation is off, as readers would drop aggregated "
           "records the service puts outside their shard's range",
           kp->stream);
  pthread_mutex_lock(&kp->mu);
  kp->described = 1;
  kp->record_max = record_max;
  kp->auto_dist = auto_dist;
  pthread_mutex_unlock(&kp->mu);
  kp->stream_known = 1;
  start_list(kp);
  kick(kp);
}

static void start_describe(kn_producer_t *kp) {
  kn_buf_t body = KN_BUF_INIT;
  kn_error_t *err = NULL;
  if (kn_enc_stream(&body, kp->stream) == 0)
    kp->describe_call = kn_svc_call(kp->svc, "DescribeStreamSummary", &body,
                                    NULL, on_describe, kp, &err);
  kn_buf_free(&body);
  if (!kp->describe_call) {
    kn_call_result_t res = {0};
    res.err = err ? err : kn_error_new(KN_ERR__NOMEM, "out of memory");
    on_describe(kp, &res);
  }
}

/* ---- the shard map ---- */

static void on_list_timer(void *arg) {
  kn_producer_t *kp = arg;
  if (kp->core && !kp->list_call && kp->stream_known) start_list(kp);
}

static void list_failed(kn_producer_t *kp, kn_error_t *err) {
  kn_shard_list_destroy(kp->list_acc);
  kp->list_acc = NULL;
  free(kp->list_token);
  kp->list_token = NULL;
  kn_pager_free(&kp->list_pager);
  err = kn_error_prefix(err, "stream \"%s\": ListShards", kp->stream);
  kn_warn(&kp->log, "PRODUCE", "%s",
          err ? kn_error_string(err) : "out of memory");
  kn_msg_list_t done = {0};
  if (err) kn_pcore_note_error(kp->core, err);
  int fatal = err && fails_everything(err) && !kn_pcore_has_map(kp->core);
  if (fatal) kn_pcore_fail_all(kp->core, err, &done);
  pthread_mutex_lock(&kp->mu);
  if (!kp->map_loaded) {
    kn_error_destroy(kp->map_err);
    kp->map_err = err;
    err = NULL;
  }
  pthread_mutex_unlock(&kp->mu);
  kn_error_destroy(err);
  kn_producer_deliver(kp, &done);
  kn_timer_start(kp->list_timer, kn_backoff_next(&kp->list_backoff));
}

static void on_list(void *opaque, kn_call_result_t *res) {
  kn_producer_t *kp = opaque;
  kp->list_call = NULL;
  kn_error_t *err = res->err;
  res->err = NULL;
  char *next = NULL;
  if (!err && !kp->list_acc && !(kp->list_acc = kn_shard_list_new()))
    err = kn_error_new(KN_ERR__NOMEM, "out of memory");
  if (!err)
    err = kn_decode_list_shards(res->body.p ? res->body.p : "", res->body.len,
                                kp->list_acc, &next);
  if (err) {
    free(next);
    list_failed(kp, err);
    return;
  }
  /* Servers that ignore paging may hand tokens back: one seen before ends
   * the listing. */
  free(kp->list_token);
  kp->list_token = next;
  int pr = kn_pager_next_str(&kp->list_pager, next);
  if (pr == KN_PAGER_LIMIT || pr == KN_PAGER_NOMEM) {
    list_failed(kp, kn_pager_error(&kp->list_pager, pr, "ListShards"));
    return;
  }
  if (next && pr != KN_PAGER_REPEAT) {
    start_list(kp);
    return;
  }
  free(kp->list_token);
  kp->list_token = NULL;
  kn_pager_free(&kp->list_pager);
  kn_shard_list_t *l = kp->list_acc;
  kp->list_acc = NULL;
  size_t n = l->n;
  kn_msg_list_t done = {0};
  if (kn_pcore_set_map(kp->core, l, !kp->list_again, kn_mono_us(), &done)) {
    list_failed(kp, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return;
  }
  kn_backoff_reset(&kp->list_backoff);
  kn_info(&kp->log, "PRODUCE", "stream \"%s\": %zu shards listed", kp->stream,
          n);
  pthread_mutex_lock(&kp->mu);
  kp->map_loaded = 1;
  kp->counters[KN_PC_MAP_REFRESHES]++;
  pthread_mutex_unlock(&kp->mu);
  kn_producer_deliver(kp, &done);
  if (kp->list_again) {
    kp->list_again = 0;
    start_list(kp);
  }
  kick(kp);
}

static void start_list(kn_producer_t *kp) {
  kn_buf_t body = KN_BUF_INIT;
  kn_error_t *err = NULL;
  if (kn_enc_list_shards(&body, kp->stream, KN_SHARD_FILTER_NONE, NULL, 0,
                         kp->list_token)) {
    kn_buf_free(&body);
    list_failed(kp, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return;
  }
  kp->list_call =
      kn_svc_call(kp->svc, "ListShards", &body, NULL, on_list, kp, &err);
  kn_buf_free(&body);
  if (!kp->list_call) list_failed(kp, err);
}

/* ---- life cycle ---- */

void kn_sender_start(void *arg) {
  kn_producer_t *kp = arg;
  kn_backoff_init(&kp->list_backoff, LIST_BACKOFF_MS, LIST_BACKOFF_MAX_MS);
  kp->timer = kn_timer_new(kp->loop, on_timer, kp);
  kp->list_timer = kn_timer_new(kp->loop, on_list_timer, kp);
  kp->core = kn_pcore_new(&kp->core_cfg, kn_mono_us());
  if (!kp->timer || !kp->list_timer || !kp->core) {
    kn_timer_free(kp->timer);
    kn_timer_free(kp->list_timer);
    kn_pcore_destroy(kp->core, NULL);
    kp->timer = kp->list_timer = NULL;
    kp->core = NULL;
    return;
  }
  start_describe(kp);
}

void kn_sender_stop(void *arg) {
  kn_producer_t *kp = arg;
  if (!kp->core) return;
  kn_call_cancel(kp->describe_call);
  kp->describe_call = NULL;
  kn_call_cancel(kp->list_call);
  kp->list_call = NULL;
  kn_shard_list_destroy(kp->list_acc);
  kp->list_acc = NULL;
  free(kp->list_token);
  kp->list_token = NULL;
  kn_pager_free(&kp->list_pager);
  kn_timer_free(kp->timer);
  kn_timer_free(kp->list_timer);
  kp->timer = kp->list_timer = NULL;
  kn_msg_list_t left = {0};
  while (kp->calls) {
    kn_pbatch_t *b = kp->calls;
    kp->calls = b->next;
    kn_kreq_cancel(b->req);
    kn_pcore_abandon(kp->core, b, &left);
  }
  kp->n_calls = 0;
  kn_pcore_destroy(kp->core, &left);
  kp->core = NULL;
  for (kn_msg_t *m = left.head; m; m = m->next)
    m->err = kn_error_new(KN_ERR__DESTROY,
                          "the producer was destroyed before the record was "
                          "stored");
  kn_producer_deliver(kp, &left);
}
