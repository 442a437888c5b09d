/* The control thread's mode without a lease store (control_mode.h):
 * lists shards and decides which to read and when, and reacts to what
 * readers report (shard ended, shard gone).
 *
 * Every shard is ours: a shard starts once each of its parents has been
 * read to its end (or is unknown: expired past the retention period), so
 * records of a key are delivered parent first. */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/control_mode.h"
#include "consumer/shard_table.h"
#include "consumer/start_positions.h"
#include "core/error.h"
#include "kinesis/model.h"
#include "util/clock.h"
#include "util/str.h"

typedef struct solo {
  kn_consumer_t *kc;
  int64_t next_sync;
  int first, failures;
} solo_t;

/* ---- starting shards ---- */

static int listed(kn_consumer_t *kc, const char *id) {
  for (char **s = kc->cfg.only_shards; s && *s; s++)
    if (strcmp(*s, id) == 0) return 1;
  return 0;
}

/* Starts every waiting shard whose parents are finished. */
static void start_ready(kn_consumer_t *kc) {
  for (;;) {
    kn_cshard_t *go = NULL;
    pthread_mutex_lock(&kc->mu);
    for (size_t i = 0; i < kc->n_shards && !go; i++) {
      kn_cshard_t *cs = kc->shards[i];
      if (cs->state == KN_CS_WAITING && kn_shard_table_parents_done(kc, cs))
        go = cs;
    }
    pthread_mutex_unlock(&kc->mu);
    if (!go || kn_consumer_is_fatal(kc)) return;
    kn_info(&kc->log, "CONTROL", "shard %s: start reading at %s", go->id,
            kn_iterator_type_name(go->start.type));
    if (kn_reader_start(kc, go)) {
      kn_consumer_set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory"));
      return;
    }
  }
}

/* ---- shard listing ---- */

static kn_error_t *sync_shards(kn_consumer_t *kc, int first) {
  kn_shard_list_t *list = NULL;
  kn_error_t *err = kn_list_shards(kc->client, kc->stream, KN_SHARD_FILTER_NONE,
                                   NULL, 0, &list);
  if (err) return kn_error_prefix(err, "stream \"%s\": ListShards", kc->stream);

  if (first && kc->cfg.only_shards) {
    for (char **s = kc->cfg.only_shards; *s; s++) {
      if (!kn_shard_list_find(list, *s)) {
        kn_shard_list_destroy(list);
        return kn_error_new(KN_ERR_RESOURCE_NOT_FOUND,
                            "shard %s not found in stream \"%s\"", *s,
                            kc->stream);
      }
    }
  }

  kn_snapshot_t *starts = NULL; /* start.positions, at the first listing */
  if (first && (err = kn_start_positions_load(kc, &starts))) {
    kn_shard_list_destroy(list);
    return err;
  }

  pthread_mutex_lock(&kc->mu);
  int oom = 0;
  for (size_t i = 0; i < kn_shard_list_count(list); i++) {
    const kn_shard_t *s = kn_shard_list_get(list, i);
    if (kn_shard_table_find(kc, kn_shard_id(s))) continue;
    kn_cshard_t *cs = kn_shard_table_add(kc, s);
    if (!cs) {
      oom = 1;
      break;
    }
    if (!first) {
      /* Shards born after we started are read from their beginning. */
      cs->start.type = KN_ITER_TRIM_HORIZON;
    } else {
      cs->start = kc->cfg.initial;
      kn_start_positions_apply(starts, cs);
    }
    if (kc->cfg.only_shards) {
      if (!listed(kc, cs->id)) cs->state = KN_CS_STOPPED;
    } else if (first && cs->start.type == KN_ITER_LATEST &&
               !kn_shard_is_open(s)) {
      /* Nothing new will ever arrive in a closed shard. */
      cs->state = KN_CS_DONE;
    }
  }
  kc->synced = 1;
  pthread_mutex_unlock(&kc->mu);
  kn_snapshot_destroy(starts);
  kn_shard_list_destroy(list);
  if (oom) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  return NULL;
}

/* Children reported with the end of a shard (ChildShards).  The next
 * ListShards confirms them; adding them now saves a round trip. */
static void add_children(kn_consumer_t *kc, const kn_shard_list_t *children) {
  if (!children || kc->cfg.only_shards) return;
  pthread_mutex_lock(&kc->mu);
  for (size_t i = 0; i < kn_shard_list_count(children); i++) {
    const kn_shard_t *s = kn_shard_list_get(children, i);
    if (kn_shard_table_find(kc, kn_shard_id(s))) continue;
    kn_cshard_t *cs = kn_shard_table_add(kc, s);
    if (cs) cs->start.type = KN_ITER_TRIM_HORIZON;
  }
  pthread_mutex_unlock(&kc->mu);
}

/* ---- message handling ---- */

/* The stream still exists (so a missing shard has aged out); a missing
 * stream is fatal. */
static int stream_exists(kn_consumer_t *kc) {
  kn_stream_summary_t *sum = NULL;
  kn_error_t *err = kn_describe_stream_summary(kc->client, kc->stream, &sum);
  kn_stream_summary_destroy(sum);
  if (err && kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND) {
    kn_consumer_set_fatal(kc,
                          kn_error_prefix(err, "stream \"%s\"", kc->stream));
    return 0;
  }
  kn_error_destroy(err);
  return 1;
}

/* A message without a lease store. */
static void handle_msg(kn_consumer_t *kc, kn_ctl_msg_t *m, int64_t *next_sync) {
  switch (m->kind) {
    case KN_CTL_SHARD_ENDED:
      kn_info(&kc->log, "CONTROL", "shard %s: end of shard reached", m->cs->id);
      kn_reader_stop(kc, m->cs);
      add_children(kc, m->children);
      /* kinesalite reports no children: list shards now to find them. */
      *next_sync = 0;
      break;
    case KN_CTL_SHARD_GONE:
      kn_reader_stop(kc, m->cs);
      if (!stream_exists(kc)) break;
      /* The stream is there, so the shard has aged out of retention:
       * nothing is left to read in it. */
      kn_warn(&kc->log, "CONTROL", "shard %s: gone (%s); treating it as read",
              m->cs->id, kn_error_string(m->err));
      pthread_mutex_lock(&kc->mu);
      m->cs->end_popped = 1;
      m->cs->state = KN_CS_DONE;
      pthread_mutex_unlock(&kc->mu);
      *next_sync = 0;
      break;
    case KN_CTL_RESYNC:
      *next_sync = 0;
      break;
    default: /* SHARD_DONE wakes start_ready; FATAL, EFO_CHECK and CLOSE
                are the loop's (control.c); lease messages never come */
      break;
  }
}

/* Periodic work without a lease store; returns when it is next due. */
static int64_t tick_alone(kn_consumer_t *kc, int64_t now, int64_t *next_sync,
                          int *first, int *failures) {
  if (now >= *next_sync && !kn_consumer_is_fatal(kc)) {
    kn_error_t *err = sync_shards(kc, *first);
    if (!err) {
      *first = 0;
      *failures = 0;
      *next_sync = now + kc->cfg.sync_interval_ms;
    } else if (*first || !kn_error_is_retriable(err)) {
      /* Nothing read yet, or a verdict (stream missing, credentials
       * rejected): tell the application instead of retrying forever. */
      kn_consumer_set_fatal(kc, err);
    } else {
      kn_warn(&kc->log, "CONTROL", "%s", kn_error_string(err));
      kn_error_destroy(err);
      *next_sync = now + (1000LL << (*failures < 5 ? (*failures)++ : 5));
    }
    start_ready(kc);
  }
  return *next_sync;
}

static void *solo_start(kn_consumer_t *kc) {
  solo_t *st = calloc(1, sizeof(*st));
  if (!st) {
    kn_consumer_set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return NULL;
  }
  st->kc = kc;
  st->first = 1;
  return st;
}

static void solo_handle(void *arg, kn_ctl_msg_t *m) {
  solo_t *st = arg;
  kn_consumer_t *kc = st->kc;
  handle_msg(kc, m, &st->next_sync);
  if (st->next_sync == 0 && !kn_consumer_is_fatal(kc)) {
    /* Resync before the counter drops so kn_consumer_caught_up() never
     * sees a moment with the children still unknown. */
    kn_error_t *err = sync_shards(kc, 0);
    if (err) {
      kn_warn(&kc->log, "CONTROL", "%s", kn_error_string(err));
      kn_error_destroy(err);
      st->next_sync = kn_mono_ms() + 1000;
    } else {
      st->next_sync = kn_mono_ms() + kc->cfg.sync_interval_ms;
    }
  }
  start_ready(kc);
}

static int64_t solo_due(void *arg) {
  solo_t *st = arg;
  /* After a fatal error only messages (CLOSE) matter. */
  return kn_consumer_is_fatal(st->kc) ? INT64_MAX : st->next_sync;
}

static void solo_tick(void *arg) {
  solo_t *st = arg;
  tick_alone(st->kc, kn_mono_ms(), &st->next_sync, &st->first, &st->failures);
}

static void solo_close(void *arg) { (void)arg; }
static int solo_done(void *arg) {
  (void)arg;
  return 1; /* nothing to let go of */
}
static void solo_finish(void *arg) { free(arg); }

const kn_ctl_mode_t kn_solo_mode = {
    .start = solo_start,
    .handle = solo_handle,
    .due = solo_due,
    .tick = solo_tick,
    .close = solo_close,
    .done = solo_done,
    .finish = solo_finish,
};
