/* kn_stream_reader_t: the bookkeeping of reader_book.c around a
 * kn_consumer_t without a lease store that reads the active shards
 * (property `shards`) from the book's positions (`start.positions`),
 * restarted whenever the set of shards changes. */
#include "kn/stream_reader.h"

#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "core/error.h"
#include "kn/client.h"
#include "kn/consumer.h"
#include "stream/reader_book.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

struct kn_stream_reader_s {
  kn_conf_t *conf; /* owned: the application's, with our callback */
  char *stream;    /* owned */
  kn_logger_t log;
  kn_rbook_t book;
  kn_consumer_t *kc; /* owned; NULL while no shard is active */
  int dirty;         /* the set changed: restart at the next poll */
  kn_error_t *fatal; /* owned: an error of the reader itself */
};

static void on_ended(kn_consumer_t *kc, const char *shard_id, void *opaque) {
  kn_stream_reader_t *r = opaque;
  (void)kc;
  kn_rbook_finished(&r->book, shard_id);
}

kn_stream_reader_t *kn_stream_reader_new(const kn_conf_t *conf, char *errstr,
                                         size_t errstr_size) {
  const char *stream = kn_conf_str(conf, "stream");
  const char *store = kn_conf_str(conf, "lease.store");
  if (!stream || !*stream) {
    snprintf(errstr, errstr_size, "the stream property is required");
    return NULL;
  }
  if ((store && strcmp(store, "none") != 0) || kn_conf_is_set(conf, "shards") ||
      kn_conf_is_set(conf, "start.positions")) {
    snprintf(errstr, errstr_size,
             "a stream reader takes no lease store, shards or "
             "start.positions: its shards are added by the application");
    return NULL;
  }
  kn_stream_reader_t *r = calloc(1, sizeof(*r));
  if (!r || !(r->conf = kn_conf_dup(conf)) || !(r->stream = strdup(stream))) {
    snprintf(errstr, errstr_size, "out of memory");
    kn_stream_reader_destroy(r);
    return NULL;
  }
  kn_rbook_init(&r->book);
  kn_conf_logger(r->conf, &r->log, "reader");
  kn_conf_set_shard_ended_cb(r->conf, on_ended, r);
  return r;
}

void kn_stream_reader_destroy(kn_stream_reader_t *r) {
  if (!r) return;
  kn_consumer_destroy(r->kc);
  kn_rbook_free(&r->book);
  kn_error_destroy(r->fatal);
  kn_conf_destroy(r->conf);
  free(r->stream);
  free(r);
}

kn_err_t kn_stream_reader_add_shard(kn_stream_reader_t *r, const char *shard_id,
                                    const kn_position_t *start) {
  kn_err_t e =
      kn_rbook_add(&r->book, shard_id, start, kn_mono_ms(), kn_wall_ms());
  if (!e) r->dirty = 1;
  return e;
}

kn_err_t kn_stream_reader_remove_shard(kn_stream_reader_t *r,
                                       const char *shard_id,
                                       kn_position_t *resume_at) {
  kn_err_t e = kn_rbook_remove(&r->book, shard_id, resume_at);
  if (!e) r->dirty = 1;
  return e;
}

static kn_err_t pause_shard(kn_stream_reader_t *r, const char *id, int p) {
  kn_rb_shard_t *s = kn_rbook_find(&r->book, id);
  if (!s) return KN_ERR__NOT_FOUND;
  if (s->paused != p) r->dirty = 1;
  return kn_rbook_pause(&r->book, id, p);
}

kn_err_t kn_stream_reader_pause_shard(kn_stream_reader_t *r,
                                      const char *shard_id) {
  return pause_shard(r, shard_id, 1);
}

kn_err_t kn_stream_reader_resume_shard(kn_stream_reader_t *r,
                                       const char *shard_id) {
  return pause_shard(r, shard_id, 0);
}

kn_err_t kn_stream_reader_restore(kn_stream_reader_t *r,
                                  const kn_snapshot_t *s) {
  kn_err_t e = kn_rbook_restore(&r->book, s, kn_mono_ms(), kn_wall_ms());
  if (kn_snapshot_count(s)) r->dirty = 1;
  return e;
}

/* Active shards the stream no longer lists have aged out: finished. */
static kn_error_t *drop_gone(kn_stream_reader_t *r, kn_client_t *client) {
  kn_shard_list_t *list = NULL;
  kn_error_t *err =
      kn_list_shards(client, r->stream, KN_SHARD_FILTER_NONE, NULL, 0, &list);
  if (err) return kn_error_prefix(err, "stream \"%s\": ListShards", r->stream);
  for (size_t i = 0; i < r->book.n; i++) {
    kn_rb_shard_t *s = &r->book.v[i];
    if (kn_rbook_active(s) && !kn_shard_list_find(list, s->id)) {
      kn_warn(&r->log, "READER",
              "shard %s: no longer in the stream (aged out): finished", s->id);
      s->finished = 1;
    }
  }
  kn_shard_list_destroy(list);
  return NULL;
}

/* Sequence numbers compare as decimal numbers without leading zeros. */
static int seq_cmp(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la != lb) return la < lb ? -1 : 1;
  return strcmp(a, b);
}

/* The sequence number of the oldest record shard_id keeps (*out
 * malloc'ed), or *out NULL when a few pages from TRIM_HORIZON hold none
 * (an empty shard, or one whose first pages are empty). */
#define KN_TRIM_PAGES 4
static kn_error_t *oldest_seq(kn_stream_reader_t *r, kn_client_t *client,
                              const char *shard_id, char **out) {
  *out = NULL;
  char *it = NULL;
  kn_error_t *err = kn_get_shard_iterator(client, r->stream, shard_id,
                                          KN_ITER_TRIM_HORIZON, NULL, 0, &it);
  for (int page = 0; !err && it && !*out && page < KN_TRIM_PAGES; page++) {
    kn_batch_t *b = NULL;
    err = kn_get_records(client, it, 1, &b);
    free(it);
    it = NULL;
    if (err) break;
    const char *next = kn_batch_next_iterator(b);
    if (kn_batch_count(b)) {
      const char *seq = kn_record_sequence_number(kn_batch_record(b, 0));
      if (!(*out = strdup(seq)))
        err = kn_error_new(KN_ERR__NOMEM, "out of memory");
    } else if (next && !(it = strdup(next))) {
      err = kn_error_new(KN_ERR__NOMEM, "out of memory");
    }
    kn_batch_destroy(b);
  }
  free(it);
  return err;
}

/* A shard added (or restored) at a sequence number that is older than the
 * oldest record the stream keeps has aged out of the retention period
 * there: the records between are gone, and the service may refuse the
 * position.  Such a shard starts at TRIM_HORIZON, and the log says so.
 * Checked once per shard, before its first read. */
static kn_error_t *check_trim_horizon(kn_stream_reader_t *r,
                                      kn_client_t *client) {
  for (size_t i = 0; i < r->book.n; i++) {
    kn_rb_shard_t *s = &r->book.v[i];
    if (!s->check_trim || !kn_rbook_active(s)) continue;
    char *oldest = NULL;
    kn_error_t *err = oldest_seq(r, client, s->id, &oldest);
    if (err && kn_error_code(err) == KN_ERR__NOMEM) return err;
    s->check_trim = 0;
    if (err) {
      /* Reading from the position is still right: only the check is
       * lost. */
      kn_warn(&r->log, "READER",
              "shard %s: cannot compare with the trim horizon: %s", s->id,
              kn_error_string(err));
      kn_error_destroy(err);
      continue;
    }
    if (oldest && !s->got_record && seq_cmp(oldest, s->pos.seq) > 0) {
      char at[KN_POSITION_SEQ_MAX + 64];
      kn_position_format(&s->pos, at, sizeof(at));
      kn_warn(&r->log, "READER",
              "shard %s: position %s is older than the trim horizon (the "
              "oldest record kept is %s): the records in between aged out; "
              "reading from TRIM_HORIZON",
              s->id, at, oldest);
      kn_position_trim_horizon(&s->pos);
    }
    free(oldest);
  }
  return NULL;
}

/* The listing and the trim-horizon checks before a start.  The client
 * lives for them only: restarts are rare, and an idle client would cost
 * its I/O thread all the time. */
static kn_error_t *prepare(kn_stream_reader_t *r) {
  char errstr[512] = "";
  kn_client_t *client = kn_client_new(r->conf, errstr, sizeof(errstr));
  if (!client) return kn_error_new(KN_ERR__FAIL, "%s", errstr);
  kn_error_t *err = drop_gone(r, client);
  if (!err) err = check_trim_horizon(r, client);
  kn_client_destroy(client);
  return err;
}

/* A consumer for the active shards, from the book's positions. */
static kn_error_t *start(kn_stream_reader_t *r) {
  kn_consumer_destroy(r->kc);
  r->kc = NULL;
  r->dirty = 0;
  kn_error_t *err = prepare(r);
  if (err) return err;
  kn_buf_t ids = KN_BUF_INIT;
  kn_snapshot_t *starts = kn_snapshot_new();
  int oom = !starts;
  for (size_t i = 0; !oom && i < r->book.n; i++) {
    const kn_rb_shard_t *s = &r->book.v[i];
    if (!kn_rbook_active(s)) continue;
    kn_position_t p;
    kn_rbook_resume_at(s, &p);
    oom = (ids.len && kn_buf_append_char(&ids, ',')) ||
          kn_buf_append_str(&ids, s->id) ||
          kn_snapshot_set_position(starts, s->id, &p);
  }
  kn_conf_t *conf = NULL;
  char errstr[512] = "";
  if (!oom && ids.len) {
    oom = !(conf = kn_conf_dup(r->conf));
    if (!oom &&
        (kn_conf_set(conf, "shards", ids.p, errstr, sizeof(errstr)) ||
         kn_conf_set_start_snapshot(conf, starts, errstr, sizeof(errstr))))
      err = kn_error_new(KN_ERR__CONF, "%s", errstr);
    if (!oom && !err &&
        !(r->kc = kn_consumer_new(conf, errstr, sizeof(errstr))))
      err = kn_error_new(KN_ERR__FAIL, "cannot start reading: %s", errstr);
  }
  if (oom && !err) err = kn_error_new(KN_ERR__NOMEM, "out of memory");
  kn_conf_destroy(conf);
  kn_snapshot_destroy(starts);
  kn_buf_free(&ids);
  return err;
}

kn_batch_t *kn_stream_reader_poll(kn_stream_reader_t *r, int timeout_ms) {
  if (r->fatal) return NULL;
  if (r->dirty && (r->fatal = start(r)) != NULL) return NULL;
  if (!r->kc) {
    kn_sleep_ms(timeout_ms >= 0 ? timeout_ms : 100);
    return NULL;
  }
  kn_batch_t *b = kn_consumer_poll(r->kc, timeout_ms);
  size_t n = b ? kn_batch_count(b) : 0;
  if (n) {
    const kn_record_t *last = kn_batch_record(b, n - 1);
    int64_t arrival = KN_WATERMARK_NONE;
    for (size_t i = 0; i < n; i++) {
      int64_t t = kn_record_arrival_ms(kn_batch_record(b, i));
      if (t > arrival) arrival = t;
    }
    kn_rbook_returned(
        &r->book, kn_batch_shard_id(b), kn_record_sequence_number(last),
        kn_record_subsequence_number(last), arrival, kn_mono_ms());
  }
  return b;
}

const kn_error_t *kn_stream_reader_fatal_error(kn_stream_reader_t *r) {
  if (r->fatal) return r->fatal;
  return r->kc ? kn_consumer_fatal_error(r->kc) : NULL;
}

int kn_stream_reader_take_finished(kn_stream_reader_t *r, char *shard_id,
                                   size_t size) {
  const char *id = kn_rbook_take_finished(&r->book);
  if (!id) return 0;
  snprintf(shard_id, size, "%s", id);
  return 1;
}

int64_t kn_stream_reader_watermark(kn_stream_reader_t *r,
                                   const char *shard_id) {
  return kn_rbook_watermark(&r->book, shard_id, kn_mono_ms());
}

void kn_stream_reader_set_idle_ms(kn_stream_reader_t *r, int64_t idle_ms) {
  r->book.idle_ms = idle_ms;
}

int kn_stream_reader_is_idle(kn_stream_reader_t *r, const char *shard_id) {
  return kn_rbook_idle(&r->book, shard_id, kn_mono_ms());
}

kn_error_t *kn_stream_reader_snapshot(kn_stream_reader_t *r,
                                      int64_t checkpoint_id,
                                      kn_snapshot_t **out) {
  *out = kn_snapshot_new();
  kn_err_t e =
      *out ? kn_rbook_snapshot(&r->book, checkpoint_id, *out) : KN_ERR__NOMEM;
  if (!e) return NULL;
  kn_snapshot_destroy(*out);
  *out = NULL;
  return kn_error_new(e, "cannot take the snapshot: %s", kn_err2str(e));
}

void kn_stream_reader_confirm(kn_stream_reader_t *r, int64_t checkpoint_id) {
  kn_rbook_confirm(&r->book, checkpoint_id);
}
