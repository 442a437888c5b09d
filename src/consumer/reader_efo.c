/* Fan-out readers: the SubscribeToShard retrieval of one shard, on the
 * I/O thread.
 *
 *   subscribe -> events (batches queued) -> ... -> the stream ends
 *       ^                                              |
 *       +------ AFTER the last ContinuationSequenceNumber
 *
 * - At most one SubscribeToShard per second: the service's limit per
 *   consumer and shard.
 * - ResourceInUse (the server still holds the previous subscription for a
 *   few seconds after a disconnect, or another reader has the shard):
 *   back off and retry.  In lease mode, after efo.in.use.poll.ms of
 *   nothing else, the shard is read by a polling reader owned by this one:
 *   kinesis-local can hold the subscription of a client that died for
 *   minutes, and no other worker may read a shard whose lease we hold.
 * - ResourceNotFound goes to the control thread (efo_check.c), which tells
 *   a deleted consumer from a deleted shard; the reader waits for its
 *   verdict.
 * - A watchdog renews a subscription that delivers no event (not even an
 *   empty one) for efo.watchdog.ms while the shard has buffer room.
 * - A full buffer pauses the transfer, so HTTP/2 flow control (TCP for
 *   HTTP/1.1) holds the server back: no more than one network read is
 *   ever queued past the limits.
 * - An event without a continuation ends the shard (AWS sends the
 *   children with it).  Once ListShards shows the shard closed and its
 *   subscription delivers an empty event, the rest is read by a polling
 *   reader owned by this one: kinesis-local never ends such a
 *   subscription, and GetRecords reports the end on every server.
 * - After a resubscription, records at or below the last one queued are
 *   dropped, so a server whose continuation lags cannot cause duplicates.
 *
 * A reader is freed only by the stop operation, which cancels its call
 * and timers: no callback of a stopped reader ever runs. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "consumer/efo.h"
#include "consumer/records_filter.h"
#include "core/error.h"
#include "kinesis/batch.h"
#include "kinesis/client_int.h"
#include "kinesis/kinesis.h"
#include "kinesis/model.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/rand.h"
#include "util/str.h"

#define KN_EFO_SUBSCRIBE_GAP_US 1000000 /* one call per second and shard */
/* ResourceInUse answers retried every 1-2 s before backing off. */
#define KN_EFO_IN_USE_FAST 10
/* After ResourceNotFound, subscribe again by this time even if the control
 * thread has not answered (it may be busy registering). */
#define KN_EFO_CHECK_WAIT_MS 60000

typedef enum efo_state {
  EFO_WAITING,     /* the timer starts the next subscription */
  EFO_ROOM,        /* waiting for buffer room before subscribing */
  EFO_SUBSCRIBING, /* request sent, nothing received yet */
  EFO_STREAMING,   /* events arriving */
  EFO_CHECKING,    /* ResourceNotFound: the control thread looks into it */
  EFO_POLLING,     /* a closed shard being finished by GetRecords */
  EFO_ENDED        /* end of shard reported, or stopped by an error */
} efo_state_t;

const char *const kn_efo_state_names[] = {
    "waiting",  "room",    "subscribing", "streaming",
    "checking", "polling", "ended",       NULL};

static const char *state_name(efo_state_t s) {
  return (unsigned)s < 7 ? kn_efo_state_names[s] : "?";
}

typedef struct kn_efo_reader {
  kn_consumer_t *kc;
  kn_cshard_t *cs;
  int64_t tenure; /* the lease tenure it reads for (0: none) */
  kn_pos_t start; /* where the first subscription starts */
  kn_pos_t skip;  /* drop records at or below this position */
  int has_skip;
  char cont[KN_SEQ_MAX];     /* last ContinuationSequenceNumber, or "" */
  char last_seq[KN_SEQ_MAX]; /* last Kinesis record queued, or "" */
  kn_ksub_t *call;           /* the subscription in flight */
  int end_seen;              /* the shard ended in it */
  int to_polling;            /* finish by polling once it is gone */
  int paused;                /* its transfer is paused for room */
  int idle;                  /* the last event was empty */
  int in_use_streak;         /* ResourceInUse answers in a row */
  int64_t in_use_since_us;   /* when the streak began */
  int expired;               /* lease mode: the shard's time ran out */
  uint64_t idle_list;        /* efo->lists_started when it became idle */
  kn_timer_t *timer;
  kn_timer_t *watchdog;
  kn_backoff_t backoff;
  int64_t last_subscribe_us;
  int64_t last_event_us;
  struct kn_reader *poller; /* finishing a closed shard, or NULL */

  /* [mu] for the statistics */
  efo_state_t state;
  uint64_t subscriptions, events, watchdog_renewals, in_use, errors;
  int64_t last_event_ms; /* monotonic; 0: none yet */
  int64_t behind;        /* MillisBehindLatest of the last event */
} kn_efo_reader_t;

static void subscribe(kn_efo_reader_t *r);

static void set_state(kn_efo_reader_t *r, efo_state_t s) {
  pthread_mutex_lock(&r->kc->mu);
  r->state = s;
  pthread_mutex_unlock(&r->kc->mu);
}

static void count(kn_efo_reader_t *r, uint64_t *counter) {
  pthread_mutex_lock(&r->kc->mu);
  (*counter)++;
  pthread_mutex_unlock(&r->kc->mu);
}

static void fatal(kn_efo_reader_t *r, kn_error_t *err) {
  kn_control_post(r->kc, KN_CTL_FATAL, r->cs, err, NULL);
  set_state(r, EFO_ENDED);
}

/* Lease mode: the shard's lease was not renewed within the grace period
 * (kn_cshard_t.lease_until_ms).  Nothing more is subscribed or queued; the
 * control thread is told once and gives the shard up. */
static int lease_expired(kn_efo_reader_t *r) {
  if (r->expired) return 1;
  pthread_mutex_lock(&r->kc->mu);
  r->expired = kn_lease_expired_locked(r->cs, kn_mono_ms());
  pthread_mutex_unlock(&r->kc->mu);
  if (!r->expired) return 0;
  kn_warn(&r->kc->log, "EFO",
          "shard %s: lease not renewed within %lld ms: "
          "stopped reading it",
          r->cs->id, (long long)r->kc->lease.grace_ms);
  kn_control_post_tenure(r->kc, KN_CTL_LEASE_EXPIRED, r->cs, r->tenure, NULL,
                         NULL);
  return 1;
}

static void schedule(kn_efo_reader_t *r, int64_t delay_ms) {
  set_state(r, EFO_WAITING);
  kn_timer_start(r->timer, delay_ms > 0 ? delay_ms : 0);
}

static void timer_fired(void *arg) { subscribe(arg); }

/* The shard may take more records (mu held). */
static int has_room_locked(const kn_consumer_t *kc, const kn_cshard_t *cs) {
  return cs->buffered_records < kc->cfg.max_records &&
         cs->buffered_bytes < kc->cfg.max_bytes &&
         kc->total_bytes < kc->cfg.max_total_bytes;
}

/* kn_reader_wake_locked() wakes us once there is room again (mu held). */
static void wait_room_locked(kn_efo_reader_t *r) {
  if (!r->cs->paused) r->kc->n_paused++;
  r->cs->paused = 1;
}

/* Drops the subscription in flight, if any. */
static void drop_call(kn_efo_reader_t *r) {
  kn_error_destroy(kn_ksub_cancel(r->call));
  r->call = NULL;
  kn_timer_stop(r->watchdog);
  r->paused = 0;
}

/* ---- events ---- */

/* One SubscribeToShardEvent, its records decoded in place in the frame
 * (a malformed one ends the subscription, which is renewed from the last
 * good continuation).  Ends the subscription at the end of the shard, to
 * switch to polling, or when the lease expired. */
static kn_ksub_action_t on_event(kn_efo_reader_t *r, kn_batch_t *b,
                                 const char *cont, size_t frame_len) {
  kn_consumer_t *kc = r->kc;
  kn_cshard_t *cs = r->cs;
  if (lease_expired(r)) {
    /* The subscription is reset rather than drained: the next owner of the
     * shard cannot subscribe (ResourceInUse) while it lasts, and this
     * worker's control thread may be stuck with the store for a while. */
    kn_batch_destroy(b);
    return KN_KSUB_RESET;
  }
  size_t n = kn_batch_count(b);
  if (cont) kn_strlcpy(r->cont, cont, sizeof(r->cont));
  if (n)
    kn_strlcpy(r->last_seq,
               kn_record_sequence_number(kn_batch_record(b, n - 1)),
               sizeof(r->last_seq));
  int shard_end = b->shard_end;
  kn_shard_list_t *children = NULL;
  if (shard_end) {
    children = b->children;
    b->children = NULL;
  }
  int64_t behind = kn_batch_millis_behind(b);
  kn_records_filter(kc, cs, b, r->has_skip ? &r->skip : NULL);
  if (n) r->has_skip = 0; /* only the first records can be at or below it */

  int to_polling = 0;
  pthread_mutex_lock(&kc->mu);
  r->events++;
  r->last_event_ms = kn_mono_ms();
  r->behind = behind;
  cs->millis_behind = behind;
  if (n || shard_end) {
    r->idle = 0;
    cs->caught_up = 0;
  } else if (cs->closed_at_sync) {
    to_polling = 1;
    cs->caught_up = 0;
  } else {
    /* Caught up only once a listing begun after going idle shows the
     * shard still open: a closed shard may never say so itself. */
    if (!r->idle) {
      r->idle = 1;
      r->idle_list = kc->efo->lists_started;
    }
    int confirmed = kc->efo->lists_done > r->idle_list;
    cs->caught_up = confirmed && behind <= 0;
    if (!confirmed) kn_efo_request_listing_locked(kc);
  }
  pthread_mutex_unlock(&kc->mu);

  if (kn_batch_count(b) == 0) { /* the end marker travels on its own */
    kn_batch_destroy(b);
    b = NULL;
  }
  kn_delivery_queue(kc, cs, b, frame_len, shard_end);
  if (shard_end) {
    kn_info(&kc->log, "EFO", "shard %s: end of shard (%zu child shards)",
            cs->id, kn_shard_list_count(children));
    kn_control_post_tenure(kc, KN_CTL_SHARD_ENDED, cs, r->tenure, NULL,
                           children);
    r->end_seen = 1;
    return KN_KSUB_DRAIN;
  }
  if (to_polling) {
    r->to_polling = 1;
    return KN_KSUB_RESET;
  }
  return KN_KSUB_CONTINUE;
}

static kn_ksub_action_t on_message(void *opaque, kn_ksub_event_t *ev) {
  kn_efo_reader_t *r = opaque;
  r->last_event_us = kn_mono_us();
  /* An exception (ResourceInUse, ResourceNotFound, ...) ends the
   * subscription with it. */
  if (ev->exception) return KN_KSUB_DRAIN;
  if (r->state == EFO_SUBSCRIBING) {
    kn_backoff_reset(&r->backoff);
    r->in_use_streak = 0;
    set_state(r, EFO_STREAMING);
  }
  if (ev->kind != KN_SUB_EVENT) { /* initial-response, or unknown: skipped */
    pthread_mutex_lock(&r->kc->mu);
    r->last_event_ms = kn_mono_ms();
    pthread_mutex_unlock(&r->kc->mu);
    return KN_KSUB_CONTINUE;
  }
  kn_batch_t *b = ev->batch;
  ev->batch = NULL;
  return on_event(r, b, ev->continuation, ev->frame_len);
}

/* After each piece of the stream: a full buffer pauses the transfer. */
static int on_data(void *opaque) {
  kn_efo_reader_t *r = opaque;
  kn_consumer_t *kc = r->kc;
  pthread_mutex_lock(&kc->mu);
  int full = !has_room_locked(kc, r->cs);
  if (full) wait_room_locked(r);
  pthread_mutex_unlock(&kc->mu);
  if (!full) return 0;
  r->paused = 1;
  kn_dbg(&kc->log, "EFO", "shard %s: buffer full: subscription paused",
         r->cs->id);
  return 1;
}

/* ---- the end of a subscription ---- */

/* The rest of the shard is read with GetRecords; why ends "shard %s ...". */
static void start_polling(kn_efo_reader_t *r, const char *why) {
  kn_consumer_t *kc = r->kc;
  kn_pos_t pos, skip;
  int has_skip = 0;
  if (r->last_seq[0]) {
    kn_pos_set_seq(&pos, KN_ITER_AFTER_SEQUENCE_NUMBER, r->last_seq, 0, 0);
  } else if (r->cont[0] && r->start.type == KN_ITER_LATEST) {
    kn_pos_set_seq(&pos, KN_ITER_AFTER_SEQUENCE_NUMBER, r->cont, 0, 0);
  } else {
    /* Nothing was received: where the subscriptions started. */
    pos = r->start;
    skip = r->skip;
    has_skip = r->has_skip;
  }
  kn_info(&kc->log, "EFO", "shard %s %s with GetRecords from %s %s", r->cs->id,
          why, kn_iterator_type_name(pos.type), pos.seq);
  r->poller =
      kn_poll_reader_spawn(kc, r->cs, r->tenure, &pos, has_skip ? &skip : NULL);
  if (!r->poller) {
    fatal(r, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return;
  }
  set_state(r, EFO_POLLING);
}

/* The subscription is over (r->call gone); err (taken) is how it ended
 * (what the stream said, before the transfer's own error). */
static void ended(kn_efo_reader_t *r, kn_error_t *err) {
  kn_consumer_t *kc = r->kc;
  drop_call(r);
  if (r->end_seen || r->expired) {
    kn_error_destroy(err);
    set_state(r, EFO_ENDED);
    return;
  }
  if (r->to_polling) {
    kn_error_destroy(err);
    start_polling(r, "is closed: finishing it");
    return;
  }
  if (!err) {
    /* Subscriptions last five minutes: renew from the continuation (at
     * once, unless it ended without a word). */
    kn_dbg(&kc->log, "EFO", "shard %s: subscription ended: renewing after %s",
           r->cs->id, r->cont[0] ? r->cont : "its start");
    if (r->state == EFO_SUBSCRIBING)
      schedule(r, kn_backoff_next(&r->backoff));
    else
      subscribe(r);
    return;
  }
  kn_err_t code = kn_error_code(err);
  if (code == KN_ERR_RESOURCE_IN_USE) {
    /* The previous holder lets go within seconds (a lost connection, or a
     * shard handed over): try at the allowed pace for a while, so a new
     * owner starts soon, then back off (two readers of one shard). */
    count(r, &r->in_use);
    int64_t now = kn_mono_us();
    if (r->in_use_streak == 0) r->in_use_since_us = now;
    /* With a lease nobody else may read the shard, so a holder that stays
     * is a dead one; without, it may be another consumer reading. */
    if (kc->ls && now - r->in_use_since_us >= kc->efo->in_use_poll_ms * 1000) {
      kn_warn(&kc->log, "EFO",
              "shard %s: %s for %lld ms: reading it with "
              "GetRecords instead",
              r->cs->id, kn_error_string(err),
              (long long)((now - r->in_use_since_us) / 1000));
      kn_error_destroy(err);
      start_polling(r, "read");
      return;
    }
    kn_info(&kc->log, "EFO", "shard %s: %s: retrying", r->cs->id,
            kn_error_string(err));
    kn_error_destroy(err);
    schedule(r, r->in_use_streak++ < KN_EFO_IN_USE_FAST
                    ? 1000 + (int64_t)kn_rand_below(1000)
                    : kn_backoff_next(&r->backoff));
  } else if (code == KN_ERR_RESOURCE_NOT_FOUND) {
    kn_info(&kc->log, "EFO", "shard %s: %s: checking why", r->cs->id,
            kn_error_string(err));
    schedule(r, KN_EFO_CHECK_WAIT_MS);
    set_state(r, EFO_CHECKING);
    kn_control_post_tenure(kc, KN_CTL_EFO_CHECK, r->cs, r->tenure, err, NULL);
  } else if (kn_error_is_retriable(err) || code == KN_ERR__FAIL ||
             code == KN_ERR__CORRUPT || code == KN_ERR__BAD_MSG) {
    count(r, &r->errors);
    if (!kn_error_is_throttling(err))
      kn_warn(&kc->log, "EFO", "shard %s: SubscribeToShard: %s", r->cs->id,
              kn_error_string(err));
    kn_error_destroy(err);
    schedule(r, kn_backoff_next(&r->backoff));
  } else {
    fatal(r, kn_error_prefix(err, "shard %s: SubscribeToShard", r->cs->id));
  }
}

static void on_done(void *opaque, kn_error_t *err) {
  kn_efo_reader_t *r = opaque;
  r->call = NULL;
  ended(r, err);
}

static void watchdog_fired(void *arg) {
  kn_efo_reader_t *r = arg;
  if (!r->call) return;
  int64_t limit = r->kc->efo->watchdog_ms;
  int64_t quiet = (kn_mono_us() - r->last_event_us) / 1000;
  if (r->paused || quiet < limit) { /* a paused stream is quiet on purpose */
    kn_timer_start(r->watchdog, r->paused ? limit : limit - quiet);
    return;
  }
  if (kn_ksub_draining(r->call)) { /* the server did not end it: we do */
    kn_error_t *err = kn_ksub_cancel(r->call);
    r->call = NULL;
    ended(r, err);
    return;
  }
  kn_warn(&r->kc->log, "EFO",
          "shard %s: no event for %lld ms: renewing the "
          "subscription",
          r->cs->id, (long long)quiet);
  count(r, &r->watchdog_renewals);
  drop_call(r);
  schedule(r, kn_backoff_next(&r->backoff));
}

/* ---- subscribing ---- */

static void subscribe(kn_efo_reader_t *r) {
  kn_consumer_t *kc = r->kc;
  if (r->call || r->poller || r->state == EFO_ENDED) return;
  if (lease_expired(r)) {
    set_state(r, EFO_ENDED);
    return;
  }
  int64_t now = kn_mono_us();
  if (r->last_subscribe_us &&
      now - r->last_subscribe_us < KN_EFO_SUBSCRIBE_GAP_US) {
    schedule(
        r, (r->last_subscribe_us + KN_EFO_SUBSCRIBE_GAP_US - now + 999) / 1000);
    return;
  }
  pthread_mutex_lock(&kc->mu);
  int room = has_room_locked(kc, r->cs);
  if (!room) {
    wait_room_locked(r);
    r->state = EFO_ROOM;
  }
  char *arn = room ? kn_strdup0(kc->efo->consumer_arn) : NULL;
  pthread_mutex_unlock(&kc->mu);
  if (!room) return; /* the resume operation wakes us */
  if (!arn) { /* not registered (the consumer closed during registration) */
    schedule(r, 1000);
    return;
  }

  kn_pos_t pos = r->start;
  if (r->cont[0])
    kn_pos_set_seq(&pos, KN_ITER_AFTER_SEQUENCE_NUMBER, r->cont, 0, 0);
  if (r->last_seq[0] && kn_pos_set_seq(&r->skip, KN_ITER_AT_SEQUENCE_NUMBER,
                                       r->last_seq, INT64_MAX, 1) == 0)
    r->has_skip = 1;
  static const kn_ksub_cbs_t cbs = {on_message, on_data, on_done};
  kn_error_t *err = NULL;
  r->call =
      kn_kinesis_subscribe_async(kc->svc, kc->stream, arn, r->cs->id, pos.type,
                                 pos.seq, pos.timestamp_ms, &cbs, r, &err);
  free(arn);
  if (!r->call) {
    kn_warn(&kc->log, "EFO", "shard %s: SubscribeToShard: %s", r->cs->id,
            err ? kn_error_string(err) : "out of memory");
    kn_error_destroy(err);
    schedule(r, kn_backoff_next(&r->backoff));
    return;
  }
  kn_dbg(&kc->log, "EFO", "shard %s: SubscribeToShard %s %s", r->cs->id,
         kn_iterator_type_name(pos.type), pos.seq);
  r->end_seen = r->to_polling = 0;
  r->last_subscribe_us = r->last_event_us = now;
  pthread_mutex_lock(&kc->mu);
  r->state = EFO_SUBSCRIBING;
  r->subscriptions++;
  pthread_mutex_unlock(&kc->mu);
  kn_timer_start(r->watchdog, kc->efo->watchdog_ms);
}

/* ---- life cycle ---- */

static void begin(void *arg) {
  kn_efo_reader_t *r = arg;
  r->timer = kn_timer_new(r->kc->loop, timer_fired, r);
  r->watchdog = kn_timer_new(r->kc->loop, watchdog_fired, r);
  if (!r->timer || !r->watchdog) {
    fatal(r, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return;
  }
  subscribe(r);
}

/* Over HTTP/1.1 every subscription holds a connection for minutes, and
 * calls beyond http.max.connections wait for one (mu held). */
static void check_connections_locked(kn_consumer_t *kc) {
  const kn_aws_settings_t *st = &kc->client->settings;
  kn_efo_t *efo = kc->efo;
  int cleartext = st->kinesis_endpoint &&
                  strncasecmp(st->kinesis_endpoint, "http:", 5) == 0;
  int http11 = st->http.version == KN_HTTP_1_1 ||
               (cleartext && st->http.version != KN_HTTP_2_PRIOR);
  if (!http11 || efo->warned_connections ||
      efo->readers + 2 <= (size_t)st->http.max_connections)
    return;
  efo->warned_connections = 1;
  kn_warn(&kc->log, "EFO",
          "%zu subscriptions over HTTP/1.1 take a connection "
          "each: raise http.max.connections (%ld) above the shards read, or "
          "use HTTP/2 (https)",
          efo->readers, st->http.max_connections);
}

/* Idle subscriptions ask the control side for a ListShards (at most
 * every KN_EFO_LIST_MIN_MS): kinesis-local never ends a subscription at
 * the end of a closed shard (efo_check.c). */
#define KN_EFO_LIST_MIN_MS 2000

void kn_efo_request_listing_locked(kn_consumer_t *kc) {
  kn_efo_t *efo = kc->efo;
  if (efo->list_pending) return;
  if (efo->list_last_ms &&
      kn_mono_ms() - efo->list_last_ms < KN_EFO_LIST_MIN_MS)
    return;
  efo->list_pending = 1;
  kn_control_post_locked(kc, KN_CTL_EFO_CHECK, NULL, NULL, NULL);
}

static int efo_start(kn_consumer_t *kc, kn_cshard_t *cs) {
  kn_efo_reader_t *r = calloc(1, sizeof(*r));
  if (!r) return -1;
  r->kc = kc;
  r->cs = cs;
  r->start = cs->start;
  if (cs->start.type == KN_ITER_AT_SEQUENCE_NUMBER && cs->start.has_subseq) {
    r->skip = cs->start;
    r->has_skip = 1;
  }
  kn_backoff_init(&r->backoff, 1000, 10000);
  r->state = EFO_WAITING;
  r->behind = -1;
  pthread_mutex_lock(&kc->mu);
  r->tenure = kn_cshard_tenure_locked(cs);
  kc->efo->readers++;
  check_connections_locked(kc);
  cs->efo_reader = r;
  cs->state = KN_CS_READING;
  cs->caught_up = 0;
  cs->paused = 0;
  pthread_mutex_unlock(&kc->mu);
  if (kn_loop_post(kc->loop, begin, r)) {
    pthread_mutex_lock(&kc->mu);
    kc->efo->readers--;
    cs->efo_reader = NULL;
    pthread_mutex_unlock(&kc->mu);
    free(r);
    return -1;
  }
  return 0;
}

static void teardown(void *arg) {
  kn_efo_reader_t *r = arg;
  drop_call(r);
  kn_timer_free(r->timer);
  kn_timer_free(r->watchdog);
  kn_poll_reader_free(r->poller, 1);
  free(r);
}

static void efo_stop(kn_consumer_t *kc, kn_cshard_t *cs) {
  pthread_mutex_lock(&kc->mu);
  kn_efo_reader_t *r = cs->efo_reader;
  cs->efo_reader = NULL; /* nothing is posted for r after this */
  if (r && cs->paused) {
    kc->n_paused--;
    cs->paused = 0;
  }
  if (r) kc->efo->readers--;
  pthread_mutex_unlock(&kc->mu);
  if (!r) return;
  /* Posted work runs in order: a wake-up posted earlier runs first, and
   * kn_loop_call returns once the reader is gone. */
  if (kn_loop_call(kc->loop, teardown, r)) {
    /* The loop has stopped and freed the transfers and timers. */
    kn_ksub_forget(r->call);
    kn_poll_reader_free(r->poller, 0);
    free(r);
  }
}

static void wake(void *arg) {
  kn_efo_reader_t *r = arg;
  if (r->poller) {
    kn_poll_reader_wake(r->poller);
    return;
  }
  if (r->paused && r->call) {
    r->paused = 0;
    r->last_event_us = kn_mono_us(); /* the watchdog counts from here */
    kn_ksub_resume(r->call);
    return;
  }
  r->paused = 0;
  if (r->state == EFO_ROOM) subscribe(r);
}

static void efo_resume_locked(kn_consumer_t *kc, kn_cshard_t *cs) {
  if (cs->efo_reader) kn_loop_post(kc->loop, wake, cs->efo_reader);
}

/* A polling reader of cs, if any, goes too (the fan-out reader's own
 * GetRecords finisher is freed with it). */
static void efo_stop_all(kn_consumer_t *kc, kn_cshard_t *cs) {
  efo_stop(kc, cs);
  kn_poll_reader_ops.stop(kc, cs);
}

const struct kn_reader_ops kn_efo_reader_ops = {
    .start = efo_start,
    .stop = efo_stop_all,
    .resume_locked = efo_resume_locked,
};

static void retry(void *arg) {
  kn_efo_reader_t *r = arg;
  if (r->call || r->poller || r->state == EFO_ENDED) return;
  if (r->state == EFO_ROOM) return; /* the wake-up subscribes */
  schedule(r, kn_backoff_next(&r->backoff));
}

void kn_efo_reader_retry_locked(kn_consumer_t *kc, kn_cshard_t *cs) {
  if (cs->efo_reader) kn_loop_post(kc->loop, retry, cs->efo_reader);
}

int kn_efo_stats_json(kn_buf_t *b, const kn_cshard_t *cs) {
  const kn_efo_reader_t *r = cs->efo_reader;
  if (!r) return 0;
  long long age =
      r->last_event_ms ? (long long)(kn_mono_ms() - r->last_event_ms) : -1;
  return kn_buf_printf(
      b,
      ",\"efo\":{\"state\":\"%s\",\"subscriptions\":%llu,"
      "\"resubscribes\":%llu,\"events\":%llu,\"last_event_age_ms\":%lld,"
      "\"millis_behind_latest\":%lld,\"watchdog_renewals\":%llu,"
      "\"in_use\":%llu,\"errors\":%llu}",
      state_name(r->state), (unsigned long long)r->subscriptions,
      (unsigned long long)(r->subscriptions ? r->subscriptions - 1 : 0),
      (unsigned long long)r->events, age, (long long)r->behind,
      (unsigned long long)r->watchdog_renewals, (unsigned long long)r->in_use,
      (unsigned long long)r->errors);
}

int kn_efo_snapshot(const kn_cshard_t *cs, kn_efo_snapshot_t *out) {
  const kn_efo_reader_t *r = cs->efo_reader;
  if (!r) return 0;
  out->state = state_name(r->state);
  out->subscriptions = r->subscriptions;
  out->events = r->events;
  out->errors = r->errors;
  return 1;
}
