/* Shard readers: the polling retrieval of one shard, on the I/O thread.
 *
 *   start -> GetShardIterator -> GetRecords -> (queue batch) -> GetRecords ...
 *                    ^                |
 *                    +-- expired -----+      end of shard -> report, stop
 *
 * Each reader keeps to the per-shard service limits with two token buckets
 * (calls and bytes per second, times poll.share), waits poll.idle.ms when
 * it is caught up, backs off on throttling, pauses while its shard's
 * buffer (or the consumer's total budget) is full, and sizes Limit so a
 * response fits the room left.
 *
 * kn_reader_start/stop/wake_locked also front the fan-out reader
 * (reader_efo.c) when the consumer reads with SubscribeToShard. */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/efo.h"
#include "consumer/records_filter.h"
#include "core/error.h"
#include "kinesis/batch.h"
#include "kinesis/kinesis.h"
#include "util/backoff.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/str.h"
#include "util/tbucket.h"

typedef enum reader_step {
  STEP_ITERATOR, /* next: GetShardIterator */
  STEP_RECORDS   /* next: GetRecords */
} reader_step_t;

typedef struct kn_reader {
  kn_consumer_t *kc;
  kn_cshard_t *cs;
  int64_t tenure; /* the lease tenure it reads for (0: none) */
  reader_step_t step;
  kn_pos_t pos;  /* where a new iterator starts */
  kn_pos_t skip; /* drop records at or below this position */
  int has_skip;
  char *iterator;
  char last_seq[KN_SEQ_MAX]; /* last Kinesis record queued */
  kn_kreq_t *call;
  kn_timer_t *timer;
  kn_tbucket_t calls_tb, bytes_tb;
  int64_t sent_us; /* when the GetRecords in flight was sent */
  double guard_s;  /* pacing guard per call (KN_PACE_GUARD_*) */
  kn_backoff_t backoff;
  double avg_rec_bytes; /* response bytes per record, smoothed */
  size_t reserved;      /* bytes reserved in kc->total_bytes in flight */
  int waiting_room;     /* paused for buffer room */
  int stopped;
} kn_reader_t;

static void reader_next(kn_reader_t *r);
static int reader_expired(kn_reader_t *r);

/* Limit of GetRecords while the shard's record size is unknown. */
#define KN_PROBE_RECORDS 16

/* The service counts a shard's reads as a debt: the data of a response,
 * paid off at the byte rate from the call, with calls refused while any
 * is left (a 10 MiB response: 5 s at 2 MiB/s).  So the buckets save no
 * credit (a burst of one token), each response's data is charged from the
 * time its call was sent, and every call pays a guard time more, so that a
 * call reaching the service a little sooner after the previous one than
 * that one did is not refused.  The guard follows how much the path
 * jitters: doubled at each throttled call, it shrinks back by 1% a call. */
#define KN_PACE_GUARD_MIN_S 0.004
#define KN_PACE_GUARD_MAX_S 0.2

static void reader_log_err(kn_reader_t *r, const char *what,
                           const kn_error_t *err) {
  kn_warn(&r->kc->log, "READER", "shard %s: %s: %s", r->cs->id, what,
          kn_error_string(err));
}

static void schedule(kn_reader_t *r, int64_t delay_ms) {
  if (delay_ms <= 0) delay_ms = 0;
  kn_timer_start(r->timer, delay_ms);
}

static void reader_timer_fired(void *arg) { reader_next(arg); }

/* ---- GetShardIterator ---- */

static void iterator_done(void *opaque, kn_get_records_result_t *res) {
  kn_reader_t *r = opaque;
  r->call = NULL;
  if (res->err && !res->answered) {
    kn_err_t code = kn_error_code(res->err);
    if (code == KN_ERR_RESOURCE_NOT_FOUND) {
      /* The stream is gone, or the shard is past retention: the control
       * thread tells which. */
      kn_control_post_tenure(r->kc, KN_CTL_SHARD_GONE, r->cs, r->tenure,
                             res->err, NULL);
      res->err = NULL;
      r->stopped = 1;
      return;
    }
    if (!kn_error_is_retriable(res->err) && code != KN_ERR_INTERNAL_FAILURE) {
      kn_control_post(
          r->kc, KN_CTL_FATAL, r->cs,
          kn_error_prefix(res->err, "shard %s: GetShardIterator", r->cs->id),
          NULL);
      res->err = NULL;
      r->stopped = 1;
      return;
    }
    reader_log_err(r, "GetShardIterator", res->err);
    kn_error_destroy(res->err);
    res->err = NULL;
    schedule(r, kn_backoff_next(&r->backoff));
    return;
  }
  if (res->err) {
    reader_log_err(r, "GetShardIterator response", res->err);
    schedule(r, kn_backoff_next(&r->backoff));
    return;
  }
  free(r->iterator);
  r->iterator = res->iterator;
  res->iterator = NULL;
  r->step = STEP_RECORDS;
  reader_next(r);
}

static void request_iterator(kn_reader_t *r) {
  kn_error_t *err = NULL;
  r->call = kn_kinesis_get_shard_iterator_async(
      r->kc->svc, r->kc->stream, r->cs->id, r->pos.type, r->pos.seq,
      r->pos.timestamp_ms, NULL, iterator_done, r, &err);
  if (!r->call) {
    if (err) reader_log_err(r, "GetShardIterator", err);
    kn_error_destroy(err);
    schedule(r, kn_backoff_next(&r->backoff));
  }
}

/* ---- GetRecords ---- */

/* How many records to ask for so the response fits the room left in the
 * shard's buffer and the consumer's budget; 0 when there is no room. */
static int records_limit(kn_reader_t *r, size_t *reserve) {
  kn_consumer_t *kc = r->kc;
  kn_cshard_t *cs = r->cs;
  size_t rec_room = cs->buffered_records < kc->cfg.max_records
                        ? kc->cfg.max_records - cs->buffered_records
                        : 0;
  size_t byte_room = cs->buffered_bytes < kc->cfg.max_bytes
                         ? kc->cfg.max_bytes - cs->buffered_bytes
                         : 0;
  size_t total_room = kc->total_bytes < kc->cfg.max_total_bytes
                          ? kc->cfg.max_total_bytes - kc->total_bytes
                          : 0;
  if (total_room < byte_room) byte_room = total_room;
  /* Not for a sliver of room: every call is signed, sent and parsed, so
   * small responses cost more per byte.  Waiting is safe: a paused reader
   * is woken once half its buffer and half the total are free, which is
   * at least this much. */
  size_t min_fetch =
      (kc->cfg.max_bytes < kc->cfg.max_total_bytes ? kc->cfg.max_bytes
                                                   : kc->cfg.max_total_bytes) /
      4;
  double per = r->avg_rec_bytes > 64 ? r->avg_rec_bytes : 64;
  double lim = byte_room >= min_fetch ? (double)byte_room / per : 0;
  /* Until a response tells the size of this shard's records, a few: a
   * full Limit of unknown records could overrun the budget many times. */
  if (r->avg_rec_bytes <= 0 && lim > KN_PROBE_RECORDS) lim = KN_PROBE_RECORDS;
  if (lim > (double)rec_room) lim = (double)rec_room;
  if (lim > kc->cfg.poll_max_records) lim = kc->cfg.poll_max_records;
  if (lim < 1) {
    /* Records larger than the room: one at a time, once the shard's
     * buffer is empty and half the total free, or the shard would never
     * move (the budget is then exceeded by one record). */
    if (rec_room == 0 || cs->buffered_records ||
        kc->total_bytes > kc->cfg.max_total_bytes / 2)
      return 0;
    lim = 1;
  }
  *reserve = (size_t)(lim * per);
  return (int)lim;
}

static void release_reserve(kn_reader_t *r) {
  if (!r->reserved) return;
  pthread_mutex_lock(&r->kc->mu);
  r->kc->total_bytes -= r->reserved;
  /* Room in the total budget came back: a shard paused for it must hear
   * of it now, as no later poll may come to tell it. */
  kn_readers_wake_locked(r->kc);
  pthread_mutex_unlock(&r->kc->mu);
  r->reserved = 0;
}

static void charge_bytes(kn_reader_t *r, double data_bytes) {
  kn_tbucket_take(&r->bytes_tb, data_bytes + r->bytes_tb.rate * r->guard_s,
                  r->sent_us);
}

static void records_done(void *opaque, kn_get_records_result_t *res) {
  kn_reader_t *r = opaque;
  kn_consumer_t *kc = r->kc;
  r->call = NULL;
  release_reserve(r);
  pthread_mutex_lock(&kc->mu);
  r->cs->gr_calls++;
  if (res->err && kn_error_is_throttling(res->err))
    r->cs->gr_throttles++;
  else if (res->err)
    r->cs->gr_errors++;
  pthread_mutex_unlock(&kc->mu);
  if (res->err && !res->answered) {
    kn_err_t code = kn_error_code(res->err);
    if (code == KN_ERR_EXPIRED_ITERATOR || code == KN_ERR_INTERNAL_FAILURE ||
        code == KN_ERR_INVALID_ARGUMENT) {
      /* Expired or unusable iterator (some servers answer a bad one with a
       * bare 500): get a new one after the last record queued. */
      kn_dbg(&kc->log, "READER", "shard %s: %s: new iterator", r->cs->id,
             kn_error_string(res->err));
      if (r->last_seq[0])
        kn_pos_set_seq(&r->pos, KN_ITER_AFTER_SEQUENCE_NUMBER, r->last_seq, 0,
                       0);
      r->step = STEP_ITERATOR;
      if (code == KN_ERR_INVALID_ARGUMENT || code == KN_ERR_INTERNAL_FAILURE)
        reader_log_err(r, "GetRecords", res->err);
      kn_error_destroy(res->err);
      res->err = NULL;
      schedule(r, code == KN_ERR_EXPIRED_ITERATOR
                      ? 0
                      : kn_backoff_next(&r->backoff));
      return;
    }
    if (code == KN_ERR_RESOURCE_NOT_FOUND) {
      kn_control_post_tenure(kc, KN_CTL_SHARD_GONE, r->cs, r->tenure, res->err,
                             NULL);
      res->err = NULL;
      r->stopped = 1;
      return;
    }
    if (kn_error_is_retriable(res->err)) {
      if (!kn_error_is_throttling(res->err))
        reader_log_err(r, "GetRecords", res->err);
      else if ((r->guard_s *= 2) > KN_PACE_GUARD_MAX_S)
        r->guard_s = KN_PACE_GUARD_MAX_S;
      kn_error_destroy(res->err);
      res->err = NULL;
      schedule(r, kn_backoff_next(&r->backoff));
      return;
    }
    kn_control_post(
        kc, KN_CTL_FATAL, r->cs,
        kn_error_prefix(res->err, "shard %s: GetRecords", r->cs->id), NULL);
    res->err = NULL;
    r->stopped = 1;
    return;
  }

  size_t raw = res->body_len;
  if (res->err) {
    /* A malformed response: read the same records again. */
    charge_bytes(r, (double)raw);
    reader_log_err(r, "GetRecords response", res->err);
    schedule(r, kn_backoff_next(&r->backoff));
    return;
  }
  /* Records were decoded in place: the batch owns the body. */
  kn_batch_t *b = res->batch;
  res->batch = NULL;
  /* The service's measure: the records' data (aggregates whole), not the
   * base64 and JSON around it, which make the body about 1.4 times as
   * long. */
  charge_bytes(r, (double)b->bytes);
  if ((r->guard_s *= 0.99) < KN_PACE_GUARD_MIN_S)
    r->guard_s = KN_PACE_GUARD_MIN_S;
  kn_backoff_reset(&r->backoff);
  size_t kinesis_records = kn_batch_count(b);
  if (kinesis_records) {
    double per = (double)raw / (double)kinesis_records;
    r->avg_rec_bytes =
        r->avg_rec_bytes > 0 ? 0.7 * r->avg_rec_bytes + 0.3 * per : per;
    kn_strlcpy(
        r->last_seq,
        kn_record_sequence_number(kn_batch_record(b, kinesis_records - 1)),
        sizeof(r->last_seq));
  }
  int64_t behind = kn_batch_millis_behind(b);
  const char *next = kn_batch_next_iterator(b);
  int shard_end = next == NULL;
  free(r->iterator);
  r->iterator = next ? strdup(next) : NULL;
  kn_shard_list_t *children = NULL;
  if (shard_end) {
    children = b->children;
    b->children = NULL;
    b->shard_end = 1;
  }

  if (reader_expired(r)) {
    kn_batch_destroy(b);
    kn_shard_list_destroy(children);
    return;
  }
  kn_records_filter(kc, r->cs, b, r->has_skip ? &r->skip : NULL);
  if (kinesis_records)
    r->has_skip = 0; /* only the first records can be at
                        or below the resume position */
  pthread_mutex_lock(&kc->mu);
  /* A shard known to be closed is caught up only at its end: kinesalite
   * reports MillisBehindLatest 0 and a next iterator on an empty read of
   * a closed shard before it reports the end. */
  r->cs->caught_up =
      !kinesis_records && behind <= 0 && !shard_end && !r->cs->closed_at_sync;
  r->cs->millis_behind = behind;
  pthread_mutex_unlock(&kc->mu);

  if (kn_batch_count(b) == 0) { /* the end marker travels on its own */
    kn_batch_destroy(b);
    b = NULL;
  }
  kn_delivery_queue(kc, r->cs, b, raw, shard_end);
  if (shard_end) {
    kn_control_post_tenure(kc, KN_CTL_SHARD_ENDED, r->cs, r->tenure, NULL,
                           children);
    r->stopped = 1;
    return;
  }
  if (!r->iterator) { /* out of memory copying it: start over */
    r->step = STEP_ITERATOR;
    schedule(r, 100);
    return;
  }
  schedule(r, kinesis_records || behind > 0 ? 0 : kc->cfg.poll_idle_ms);
}

static void request_records(kn_reader_t *r) {
  kn_consumer_t *kc = r->kc;
  int64_t now_us = kn_mono_us();
  int64_t wait = kn_tbucket_wait_us(&r->calls_tb, 1, now_us);
  int64_t wait_b = kn_tbucket_wait_us(&r->bytes_tb, 1, now_us);
  if (wait_b > wait) wait = wait_b;
  if (wait > 0) {
    schedule(r, (wait + 999) / 1000);
    return;
  }
  size_t reserve = 0;
  pthread_mutex_lock(&kc->mu);
  int limit = records_limit(r, &reserve);
  if (limit == 0) {
    if (!r->cs->paused) kc->n_paused++;
    r->cs->paused = 1;
    r->waiting_room = 1;
  } else {
    kc->total_bytes += reserve;
  }
  pthread_mutex_unlock(&kc->mu);
  if (limit == 0) return; /* kn_reader_wake_locked() resumes us */
  r->reserved = reserve;
  kn_tbucket_take(&r->calls_tb, 1 + r->calls_tb.rate * r->guard_s, now_us);
  r->sent_us = now_us;

  kn_error_t *err = NULL;
  /* One attempt: a throttled call retried by the client after its own
   * back-off would be charged from a time the buckets do not know, and
   * this reader retries every retriable failure itself. */
  static const kn_call_opts_t once = {.max_attempts = 1};
  r->call =
      kn_kinesis_get_records_async(kc->svc, r->iterator, limit, kc->stream,
                                   r->cs->id, &once, records_done, r, &err);
  if (!r->call) {
    release_reserve(r);
    if (err) reader_log_err(r, "GetRecords", err);
    kn_error_destroy(err);
    schedule(r, kn_backoff_next(&r->backoff));
  }
}

/* Lease mode: the shard's time is up (the lease was not renewed within the
 * grace period).  The reader stops without fetching or queueing more, and
 * the control thread gives the shard up. */
static int reader_expired(kn_reader_t *r) {
  pthread_mutex_lock(&r->kc->mu);
  int expired = kn_lease_expired_locked(r->cs, kn_mono_ms());
  pthread_mutex_unlock(&r->kc->mu);
  if (!expired) return 0;
  kn_warn(&r->kc->log, "READER",
          "shard %s: lease not renewed within %lld ms: "
          "stopped reading it",
          r->cs->id, (long long)r->kc->lease.grace_ms);
  r->stopped = 1;
  kn_control_post_tenure(r->kc, KN_CTL_LEASE_EXPIRED, r->cs, r->tenure, NULL,
                         NULL);
  return 1;
}

static void reader_next(kn_reader_t *r) {
  if (r->stopped || r->call) return;
  if (reader_expired(r)) return;
  if (r->step == STEP_ITERATOR)
    request_iterator(r);
  else
    request_records(r);
}

/* ---- life cycle ---- */

static void reader_begin(void *arg) {
  kn_reader_t *r = arg;
  r->timer = kn_timer_new(r->kc->loop, reader_timer_fired, r);
  if (!r->timer) {
    kn_control_post(r->kc, KN_CTL_FATAL, r->cs,
                    kn_error_new(KN_ERR__NOMEM, "out of memory"), NULL);
    r->stopped = 1;
    return;
  }
  reader_next(r);
}

static kn_reader_t *reader_new(kn_consumer_t *kc, kn_cshard_t *cs,
                               int64_t tenure, const kn_pos_t *pos,
                               const kn_pos_t *skip) {
  kn_reader_t *r = calloc(1, sizeof(*r));
  if (!r) return NULL;
  r->kc = kc;
  r->cs = cs;
  r->tenure = tenure;
  r->step = STEP_ITERATOR;
  r->pos = *pos;
  if (skip) {
    r->skip = *skip;
    r->has_skip = 1;
  }
  int64_t now = kn_mono_us();
  kn_tbucket_init(&r->calls_tb, kc->cfg.calls_per_s, 1, now);
  kn_tbucket_init(&r->bytes_tb, kc->cfg.bytes_per_s, 1, now);
  kn_backoff_init(&r->backoff, 200, 10000);
  r->guard_s = KN_PACE_GUARD_MIN_S;
  r->avg_rec_bytes = 0;
  return r;
}

static int poll_start(kn_consumer_t *kc, kn_cshard_t *cs) {
  int resume =
      cs->start.type == KN_ITER_AT_SEQUENCE_NUMBER && cs->start.has_subseq;
  pthread_mutex_lock(&kc->mu);
  int64_t tenure = kn_cshard_tenure_locked(cs);
  pthread_mutex_unlock(&kc->mu);
  kn_reader_t *r =
      reader_new(kc, cs, tenure, &cs->start, resume ? &cs->start : NULL);
  if (!r) return -1;
  cs->reader = r;
  pthread_mutex_lock(&kc->mu);
  cs->state = KN_CS_READING;
  cs->caught_up = 0;
  cs->paused = 0;
  pthread_mutex_unlock(&kc->mu);
  if (kn_loop_post(kc->loop, reader_begin, r)) {
    cs->reader = NULL;
    free(r);
    return -1;
  }
  return 0;
}

static void reader_teardown(void *arg) {
  kn_reader_t *r = arg;
  kn_kreq_cancel(r->call);
  r->call = NULL;
  release_reserve(r);
  kn_timer_free(r->timer);
  r->timer = NULL;
  free(r->iterator);
  free(r);
}

static void poll_stop(kn_consumer_t *kc, kn_cshard_t *cs) {
  pthread_mutex_lock(&kc->mu);
  kn_reader_t *r = cs->reader;
  cs->reader = NULL; /* no wake-up is posted for r after this */
  if (cs->paused) kc->n_paused--;
  cs->paused = 0;
  pthread_mutex_unlock(&kc->mu);
  if (!r) return;
  /* Posted work runs in order, so a wake-up posted earlier runs before the
   * teardown; kn_loop_call waits until the reader is gone. */
  if (kn_loop_call(kc->loop, reader_teardown, r)) {
    kn_kreq_forget(r->call);
    free(r->iterator);
    free(r);
  }
}

static void reader_wake(void *arg) {
  kn_reader_t *r = arg;
  if (r->stopped || !r->waiting_room) return;
  r->waiting_room = 0;
  reader_next(r);
}

static void poll_resume_locked(kn_consumer_t *kc, kn_cshard_t *cs) {
  if (cs->reader) kn_loop_post(kc->loop, reader_wake, cs->reader);
}

const struct kn_reader_ops kn_poll_reader_ops = {
    .start = poll_start,
    .stop = poll_stop,
    .resume_locked = poll_resume_locked,
};

/* ---- owned by a fan-out reader ---- */

kn_reader_t *kn_poll_reader_spawn(kn_consumer_t *kc, kn_cshard_t *cs,
                                  int64_t tenure, const kn_pos_t *pos,
                                  const kn_pos_t *skip) {
  kn_reader_t *r = reader_new(kc, cs, tenure, pos, skip);
  if (r) reader_begin(r);
  return r;
}

void kn_poll_reader_wake(kn_reader_t *r) { reader_wake(r); }

void kn_poll_reader_free(kn_reader_t *r, int on_loop) {
  if (!r) return;
  if (on_loop) {
    reader_teardown(r);
    return;
  }
  kn_kreq_forget(r->call);
  free(r->iterator);
  free(r);
}
