/* The control thread: lists shards, decides which to read and when, and
 * reacts to what readers report (shard ended, shard gone, fatal errors).
 *
 * Without a lease store every shard is ours: a shard starts once each of
 * its parents has been read to its end (or is unknown: expired past the
 * retention period), so records of a key are delivered parent first. */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/efo.h"
#include "kinesis/model.h"
#include "consumer/shard_table.h"
#include "consumer/start_positions.h"
#include "consumer/store_pool.h"
#include "core/error.h"
#include "util/clock.h"
#include "util/cond.h"
#include "util/str.h"

/* ---- messages ---- */

void kn_control_post_msg_locked(kn_consumer_t *kc, kn_ctl_msg_t *m) {
  m->next = NULL;
  if (kc->ctl_tail)
    kc->ctl_tail->next = m;
  else
    kc->ctl_head = m;
  kc->ctl_tail = m;
  kc->ctl_pending++;
  pthread_cond_signal(&kc->ctl_cv);
}

static void post_locked(kn_consumer_t *kc, kn_ctl_kind_t kind, kn_cshard_t *cs,
                        int64_t tenure, kn_error_t *err,
                        kn_shard_list_t *children) {
  kn_ctl_msg_t *m = calloc(1, sizeof(*m));
  if (!m) {
    /* Losing a message would leave a shard unfinished; failing the
     * consumer is the honest outcome. */
    if (!kc->fatal)
      kc->fatal = err ? err : kn_error_new(KN_ERR__NOMEM, "out of memory");
    else
      kn_error_destroy(err);
    kn_shard_list_destroy(children);
    pthread_cond_broadcast(&kc->poll_cv);
    return;
  }
  m->kind = kind;
  m->cs = cs;
  m->tenure = tenure;
  m->err = err;
  m->children = children;
  kn_control_post_msg_locked(kc, m);
}

void kn_control_post_locked(kn_consumer_t *kc, kn_ctl_kind_t kind,
                            kn_cshard_t *cs, kn_error_t *err,
                            kn_shard_list_t *children) {
  post_locked(kc, kind, cs, 0, err, children);
}

void kn_control_post(kn_consumer_t *kc, kn_ctl_kind_t kind, kn_cshard_t *cs,
                     kn_error_t *err, kn_shard_list_t *children) {
  pthread_mutex_lock(&kc->mu);
  post_locked(kc, kind, cs, 0, err, children);
  pthread_mutex_unlock(&kc->mu);
}

void kn_control_post_tenure(kn_consumer_t *kc, kn_ctl_kind_t kind,
                            kn_cshard_t *cs, int64_t tenure, kn_error_t *err,
                            kn_shard_list_t *children) {
  pthread_mutex_lock(&kc->mu);
  post_locked(kc, kind, cs, tenure, err, children);
  pthread_mutex_unlock(&kc->mu);
}

void kn_control_msg_free(kn_ctl_msg_t *m) {
  kn_error_destroy(m->err);
  kn_shard_list_destroy(m->children);
  kn_store_job_free(m->job);
  free(m);
}

int kn_lease_expired_locked(const kn_cshard_t *cs, int64_t now_ms) {
  return cs->lease_until_ms && now_ms >= cs->lease_until_ms;
}

int64_t kn_cshard_tenure_locked(const kn_cshard_t *cs) {
  return cs->fencing_token > 0 ? cs->fencing_token : 0;
}

static void set_fatal(kn_consumer_t *kc, kn_error_t *err) {
  pthread_mutex_lock(&kc->mu);
  if (!kc->fatal) {
    kc->fatal = err;
    err = NULL;
  }
  pthread_cond_broadcast(&kc->poll_cv);
  pthread_mutex_unlock(&kc->mu);
  if (err) kn_error_destroy(err);
}

static int is_fatal(kn_consumer_t *kc) {
  pthread_mutex_lock(&kc->mu);
  int f = kc->fatal != NULL;
  pthread_mutex_unlock(&kc->mu);
  return f;
}

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
    if (!go || is_fatal(kc)) return;
    kn_info(&kc->log, "CONTROL", "shard %s: start reading at %s", go->id,
            kn_iterator_type_name(go->start.type));
    if (kn_reader_start(kc, go)) {
      set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory"));
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
int kn_control_stream_exists(kn_consumer_t *kc) {
  kn_stream_summary_t *sum = NULL;
  kn_error_t *err = kn_describe_stream_summary(kc->client, kc->stream, &sum);
  kn_stream_summary_destroy(sum);
  if (err && kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND) {
    set_fatal(kc, kn_error_prefix(err, "stream \"%s\"", kc->stream));
    return 0;
  }
  kn_error_destroy(err);
  return 1;
}

/* A message without a lease store. */
static void handle(kn_consumer_t *kc, kn_ctl_msg_t *m, int64_t *next_sync) {
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
      if (!kn_control_stream_exists(kc)) break;
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
    case KN_CTL_FATAL:
      kn_err_log(&kc->log, "CONTROL", "%s", kn_error_string(m->err));
      set_fatal(kc, m->err);
      m->err = NULL;
      break;
    case KN_CTL_RESYNC:
      *next_sync = 0;
      break;
    case KN_CTL_EFO_CHECK:
      kn_efo_check(kc, m->cs, m->tenure, m->err);
      break;
    default: /* SHARD_DONE wakes start_ready; lease messages never come */
      break;
  }
}

/* Periodic work without a lease store; returns when it is next due. */
static int64_t tick_alone(kn_consumer_t *kc, int64_t now, int64_t *next_sync,
                          int *first, int *failures) {
  if (now >= *next_sync && !is_fatal(kc)) {
    kn_error_t *err = sync_shards(kc, *first);
    if (!err) {
      *first = 0;
      *failures = 0;
      *next_sync = now + kc->cfg.sync_interval_ms;
    } else if (*first || !kn_error_is_retriable(err)) {
      /* Nothing read yet, or a verdict (stream missing, credentials
       * rejected): tell the application instead of retrying forever. */
      set_fatal(kc, err);
    } else {
      kn_warn(&kc->log, "CONTROL", "%s", kn_error_string(err));
      kn_error_destroy(err);
      *next_sync = now + (1000LL << (*failures < 5 ? (*failures)++ : 5));
    }
    start_ready(kc);
  }
  return *next_sync;
}

static void *control_main(void *arg) {
  kn_consumer_t *kc = arg;
  int64_t next_sync = 0;
  int first = 1, failures = 0;
  if (kc->efo) kn_efo_setup(kc); /* before any shard starts */
  if (kn_conf_str(kc->conf, "lease.store") &&
      strcmp(kn_conf_str(kc->conf, "lease.store"), "none") != 0) {
    kn_driver_run(kc);
    if (kc->efo) kn_efo_close(kc);
    return NULL;
  }
  for (;;) {
    int64_t now = kn_mono_ms();
    int64_t due = tick_alone(kc, now, &next_sync, &first, &failures);

    pthread_mutex_lock(&kc->mu);
    while (!kc->ctl_head) {
      /* After a fatal error only messages (CLOSE) matter. */
      int64_t wait = kc->fatal ? 60000 : due - kn_mono_ms();
      if (wait <= 0) break;
      if (wait > 60000) wait = 60000;
      kn_cond_wait_until(&kc->ctl_cv, &kc->mu, kn_mono_ms() + wait);
    }
    kn_ctl_msg_t *msgs = kc->ctl_head;
    kc->ctl_head = kc->ctl_tail = NULL;
    pthread_mutex_unlock(&kc->mu);

    int closing = 0;
    while (msgs) {
      kn_ctl_msg_t *m = msgs;
      msgs = m->next;
      if (m->kind == KN_CTL_CLOSE) closing = 1;
      handle(kc, m, &next_sync);
      kn_control_msg_free(m);
      if (next_sync == 0 && !is_fatal(kc)) {
        /* Resync before the counter drops so kn_consumer_caught_up()
         * never sees a moment with the children still unknown. */
        kn_error_t *err = sync_shards(kc, 0);
        if (err) {
          kn_warn(&kc->log, "CONTROL", "%s", kn_error_string(err));
          kn_error_destroy(err);
          next_sync = kn_mono_ms() + 1000;
        } else {
          next_sync = kn_mono_ms() + kc->cfg.sync_interval_ms;
        }
      }
      start_ready(kc);
      pthread_mutex_lock(&kc->mu);
      kc->ctl_pending--;
      pthread_mutex_unlock(&kc->mu);
    }
    if (closing) break;
  }
  if (kc->efo) kn_efo_close(kc);
  return NULL;
}

int kn_control_start(kn_consumer_t *kc, char *errstr, size_t size) {
  if (!(kc->ctl_close = calloc(1, sizeof(*kc->ctl_close)))) {
    snprintf(errstr, size, "out of memory");
    return -1;
  }
  kc->ctl_close->kind = KN_CTL_CLOSE;
  if (pthread_create(&kc->control_thread, NULL, control_main, kc)) {
    free(kc->ctl_close);
    kc->ctl_close = NULL;
    snprintf(errstr, size, "cannot start the control thread");
    return -1;
  }
  kc->control_started = 1;
  return 0;
}

void kn_control_stop(kn_consumer_t *kc) {
  if (!kc->control_started) return;
  pthread_mutex_lock(&kc->mu);
  kn_control_post_msg_locked(kc, kc->ctl_close);
  kc->ctl_close = NULL;
  pthread_mutex_unlock(&kc->mu);
  pthread_join(kc->control_thread, NULL);
  kc->control_started = 0;
  /* Messages posted after CLOSE (readers finishing meanwhile). */
  pthread_mutex_lock(&kc->mu);
  kn_ctl_msg_t *msgs = kc->ctl_head;
  kc->ctl_head = kc->ctl_tail = NULL;
  kc->ctl_pending = 0;
  pthread_mutex_unlock(&kc->mu);
  while (msgs) {
    kn_ctl_msg_t *m = msgs;
    msgs = m->next;
    kn_control_msg_free(m);
  }
}
