#include "producer/core.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/encode.h"

/* An aggregate that was stored on a shard other than the predicted one,
 * waiting for a fresh map to tell whether that shard's range holds every
 * record in it. */
typedef struct kn_pverify {
  struct kn_pverify *next;
  kn_msg_list_t msgs;
  kn_presp_t *resp; /* holds shard_id and seq */
  const char *shard_id, *seq;
} kn_pverify_t;

#define SPARE_BODIES 4

struct kn_pcore {
  kn_pcore_cfg_t cfg;
  char *stream;
  kn_shardmap_t map;
  int has_map;
  kn_pshard_t **shards; /* parallel to map.open */
  size_t n_shards;
  kn_pshard_t *retired;   /* left the map with entries still in flight */
  kn_msg_list_t unrouted; /* no map yet, or no open shard holds them */
  kn_pverify_t *verify;
  kn_aggregator_t *agg; /* NULL: not aggregating */
  int auto_dist;        /* the service picks the shard */
  uint64_t batch_seq;
  size_t rr; /* first shard looked at by the next take */
  size_t queued, inflight;
  uint64_t retries;
  kn_error_t *last_err;
  int64_t now_us; /* of the latest call, for new shards' buckets */
  /* Bodies of answered calls, kept for the next ones while the producer
   * is busy: a fresh multi-megabyte body costs a page fault every 4 KiB,
   * more than filling it.  Freed when nothing is queued or in flight. */
  kn_buf_t spare[SPARE_BODIES];
  size_t n_spare;
};

/* ---- shards ---- */

static kn_pshard_t *pshard_new(kn_pcore_t *c, const kn_shard_t *s) {
  kn_pshard_t *ps = calloc(1, sizeof(*ps));
  if (!ps || !(ps->id = strdup(s->id))) {
    free(ps);
    return NULL;
  }
  ps->start = s->start;
  ps->end = s->end;
  /* A second's worth of burst, as the service allows. */
  kn_tbucket_init(&ps->tb_records, c->cfg.shard_records_per_s,
                  c->cfg.shard_records_per_s, c->now_us);
  kn_tbucket_init(&ps->tb_bytes, c->cfg.shard_bytes_per_s,
                  c->cfg.shard_bytes_per_s, c->now_us);
  kn_backoff_init(&ps->backoff, c->cfg.backoff_ms, c->cfg.backoff_max_ms);
  return ps;
}

static void pshard_free(kn_pshard_t *ps) {
  if (!ps) return;
  free(ps->id);
  free(ps);
}

static kn_pshard_t *route(kn_pcore_t *c, kn_u128_t hk) {
  if (!c->has_map) return NULL;
  long i = kn_shardmap_find(&c->map, hk);
  return i < 0 ? NULL : c->shards[i];
}

const kn_pshard_t *kn_pcore_predict(const kn_pcore_t *c, kn_u128_t hk) {
  return route((kn_pcore_t *)c, hk);
}

static void enqueue_tail(kn_pcore_t *c, kn_msg_t *m) {
  kn_pshard_t *ps = route(c, m->hk);
  if (!ps) {
    kn_msg_list_push(&c->unrouted, m);
  } else {
    kn_msg_list_push(&ps->q, m);
    ps->q_bytes += kn_msg_size(m);
  }
  c->queued++;
}

/* Queues a record again ahead of its shard's newer records. */
static void enqueue_front(kn_pcore_t *c, kn_msg_t *m) {
  kn_pshard_t *ps = route(c, m->hk);
  kn_msg_list_t *l = ps ? &ps->q : &c->unrouted;
  m->next = l->head;
  l->head = m;
  if (!l->tail) l->tail = m;
  l->n++;
  if (ps) ps->q_bytes += kn_msg_size(m);
  c->queued++;
}

static kn_msg_t *dequeue(kn_pcore_t *c, kn_pshard_t *ps) {
  kn_msg_t *m = kn_msg_list_pop(&ps->q);
  if (m) {
    ps->q_bytes -= kn_msg_size(m);
    c->queued--;
  }
  return m;
}

/* ---- construction ---- */

int kn_pcore_set_stream(kn_pcore_t *c, size_t record_max, int auto_dist) {
  if (record_max < KN_PUT_RECORD_MAX || record_max > KN_PUT_RECORD_MAX_LARGE)
    return -1;
  size_t call_max = record_max > KN_PUT_RECORD_MAX ? KN_PUT_MAX_BYTES_LARGE
                                                   : KN_PUT_MAX_BYTES;
  if (c->cfg.batch_max_bytes < record_max) c->cfg.batch_max_bytes = record_max;
  if (c->cfg.batch_max_bytes > call_max) c->cfg.batch_max_bytes = call_max;
  c->auto_dist = auto_dist;
  if (auto_dist && c->agg) {
    /* Aggregates exist only inside kn_pcore_take: none is lost here. */
    kn_aggregator_destroy(c->agg);
    c->agg = NULL;
  }
  return 0;
}

kn_pcore_t *kn_pcore_new(const kn_pcore_cfg_t *cfg, int64_t now_us) {
  kn_pcore_t *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->cfg = *cfg;
  c->now_us = now_us;
  if (!c->cfg.batch_max_records ||
      c->cfg.batch_max_records > KN_PUT_MAX_RECORDS)
    c->cfg.batch_max_records = KN_PUT_MAX_RECORDS;
  if (!c->cfg.batch_max_bytes || c->cfg.batch_max_bytes > KN_PUT_MAX_BYTES)
    c->cfg.batch_max_bytes = KN_PUT_MAX_BYTES;
  if (!c->cfg.agg_max_bytes) c->cfg.agg_max_bytes = KN_AGG_DEFAULT_MAX_BYTES;
  if (c->cfg.shard_max_calls < 1 || c->cfg.strict) c->cfg.shard_max_calls = 1;
  c->cfg.stream = NULL;
  if (!(c->stream = strdup(cfg->stream ? cfg->stream : "")) ||
      (cfg->aggregate && !(c->agg = kn_aggregator_new(c->cfg.agg_max_bytes,
                                                      c->cfg.agg_max_count)))) {
    kn_pcore_destroy(c, NULL);
    return NULL;
  }
  return c;
}

static void verify_free(kn_pverify_t *v, kn_msg_list_t *out) {
  if (out) kn_msg_list_concat(out, &v->msgs);
  kn_presp_release(v->resp);
  free(v);
}

static void free_spares(kn_pcore_t *c) {
  while (c->n_spare) kn_buf_free(&c->spare[--c->n_spare]);
}

void kn_pcore_destroy(kn_pcore_t *c, kn_msg_list_t *out) {
  if (!c) return;
  kn_msg_list_t sink = {0};
  if (!out) out = &sink;
  kn_msg_list_concat(out, &c->unrouted);
  for (size_t i = 0; i < c->n_shards; i++) {
    kn_msg_list_concat(out, &c->shards[i]->q);
    pshard_free(c->shards[i]);
  }
  while (c->retired) {
    kn_pshard_t *ps = c->retired;
    c->retired = ps->next_retired;
    kn_msg_list_concat(out, &ps->q);
    pshard_free(ps);
  }
  while (c->verify) {
    kn_pverify_t *v = c->verify;
    c->verify = v->next;
    verify_free(v, out);
  }
  for (kn_msg_t *m; (m = kn_msg_list_pop(&sink));) kn_msg_free(m);
  free(c->shards);
  kn_shardmap_clear(&c->map);
  kn_aggregator_destroy(c->agg);
  kn_error_destroy(c->last_err);
  free(c->stream);
  free_spares(c);
  free(c);
}

void kn_pcore_add(kn_pcore_t *c, kn_msg_t *m) { enqueue_tail(c, m); }

int kn_pcore_has_map(const kn_pcore_t *c) { return c->has_map; }

void kn_pcore_note_error(kn_pcore_t *c, const kn_error_t *err) {
  kn_error_t *copy = err ? kn_error_copy(err) : NULL;
  if (!copy) return;
  kn_error_destroy(c->last_err);
  c->last_err = copy;
}

/* ---- reports ---- */

static void report_ok(kn_msg_t *m, kn_presp_t *resp, const char *shard_id,
                      const char *seq, uint64_t subseq, int aggregated,
                      kn_msg_list_t *done) {
  kn_presp_ref(resp);
  m->resp = resp;
  m->shard_id = shard_id;
  m->seq = seq;
  m->subseq = subseq;
  m->aggregated = (uint8_t)aggregated;
  kn_msg_list_push(done, m);
}

static void report_err(kn_msg_t *m, kn_error_t *err, kn_msg_list_t *done) {
  /* err NULL (memory ran out making it) still reads as a failure: a
   * report without a shard id is one (see kn_msg_error). */
  m->err = err;
  kn_msg_list_push(done, m);
}

static kn_error_t *timed_out(const kn_pcore_t *c, const kn_msg_t *m) {
  const char *last = c->last_err ? kn_error_string(c->last_err) : NULL;
  if (m->attempts)
    return kn_error_new(KN_ERR__MSG_TIMED_OUT,
                        "record not stored within message.timeout.ms after "
                        "%d attempt%s; last error: %s",
                        m->attempts, m->attempts == 1 ? "" : "s",
                        last ? last : kn_err2str(m->last_code));
  if (!c->has_map)
    return kn_error_new(KN_ERR__MSG_TIMED_OUT,
                        "record not sent within message.timeout.ms: no shard "
                        "map%s%s",
                        last ? "; last error: " : "", last ? last : "");
  return kn_error_new(KN_ERR__MSG_TIMED_OUT,
                      "record not sent within message.timeout.ms (shard rate "
                      "limits or back-off held it)");
}

/* ---- the shard map ---- */

/* Moves every record queued for ps (a shard leaving the map) to where the
 * current map sends it, in order. */
static void reroute(kn_pcore_t *c, kn_msg_list_t *q) {
  for (kn_msg_t *m; (m = kn_msg_list_pop(q));) {
    c->queued--;
    enqueue_tail(c, m);
  }
}

static int all_in_range(const kn_msg_list_t *l, const kn_shard_t *s) {
  for (const kn_msg_t *m = l->head; m; m = m->next)
    if (!kn_u128_in_range(m->hk, s->start, s->end)) return 0;
  return 1;
}

static void requeue_list(kn_pcore_t *c, kn_msg_list_t *l, int64_t now_us,
                         kn_msg_list_t *done);

int kn_pcore_set_map(kn_pcore_t *c, kn_shard_list_t *l, int resolve_verify,
                     int64_t now_us, kn_msg_list_t *done) {
  c->now_us = now_us;
  kn_shardmap_t map;
  if (kn_shardmap_init(&map, l)) return -1;
  kn_pshard_t **shards = calloc(map.n_open ? map.n_open : 1, sizeof(*shards));
  long *from = calloc(map.n_open ? map.n_open : 1, sizeof(*from));
  if (!shards || !from) goto nomem;
  /* Shards that stay keep their queues, buckets and back-off; the new
   * ones are made before anything changes, so that running out of memory
   * leaves the old map whole. */
  for (size_t i = 0; i < map.n_open; i++) {
    from[i] = -1;
    for (size_t j = 0; j < c->n_shards && from[i] < 0; j++) {
      const kn_pshard_t *o = c->shards[j];
      if (strcmp(o->id, map.open[i]->id) == 0 &&
          kn_u128_eq(o->start, map.open[i]->start) &&
          kn_u128_eq(o->end, map.open[i]->end))
        from[i] = (long)j;
    }
    if (from[i] < 0 && !(shards[i] = pshard_new(c, map.open[i]))) goto nomem;
  }
  for (size_t i = 0; i < map.n_open; i++) {
    if (from[i] >= 0) {
      shards[i] = c->shards[from[i]];
      shards[i]->held = 0;
      c->shards[from[i]] = NULL;
    } else if (c->has_map) {
      shards[i]->fresh = 1;
    }
  }
  free(from);
  kn_pshard_t **old = c->shards;
  size_t n_old = c->n_shards;
  kn_shardmap_clear(&c->map);
  c->map = map;
  c->shards = shards;
  c->n_shards = map.n_open;
  c->has_map = 1;
  c->rr = 0;
  /* Shards that left: their records go to the new shards, in order. */
  for (size_t j = 0; j < n_old; j++) {
    kn_pshard_t *ps = old[j];
    if (!ps) continue;
    reroute(c, &ps->q);
    ps->q_bytes = 0;
    if (ps->inflight) {
      ps->next_retired = c->retired;
      c->retired = ps;
    } else {
      pshard_free(ps);
    }
  }
  free(old);
  /* Records that had nowhere to go. */
  kn_msg_list_t un = c->unrouted;
  memset(&c->unrouted, 0, sizeof(c->unrouted));
  c->queued -= un.n;
  for (kn_msg_t *m; (m = kn_msg_list_pop(&un));) enqueue_tail(c, m);

  if (resolve_verify) {
    kn_pverify_t *v = c->verify;
    c->verify = NULL;
    while (v) {
      kn_pverify_t *next = v->next;
      const kn_shard_t *s = kn_shardmap_by_id(&c->map, v->shard_id);
      if (s && all_in_range(&v->msgs, s)) {
        uint64_t i = 0;
        for (kn_msg_t *m; (m = kn_msg_list_pop(&v->msgs)); i++)
          report_ok(m, v->resp, v->shard_id, v->seq, i, 1, done);
      } else {
        kn_error_t *e =
            kn_error_new(KN_ERR__FAIL,
                         "aggregate stored on shard %s, whose hash key "
                         "range does not hold all its records: sent again",
                         v->shard_id);
        kn_pcore_note_error(c, e);
        kn_error_destroy(e);
        for (kn_msg_t *m = v->msgs.head; m; m = m->next)
          m->last_code = KN_ERR__FAIL;
        requeue_list(c, &v->msgs, now_us, done);
      }
      verify_free(v, NULL);
      v = next;
    }
  }
  return 0;
nomem:
  for (size_t i = 0; shards && from && i < map.n_open; i++)
    if (from[i] < 0) pshard_free(shards[i]);
  free(shards);
  free(from);
  kn_shardmap_clear(&map);
  return -1;
}

/* ---- building calls ---- */

static kn_pentry_t *batch_entry(kn_pbatch_t *b, kn_pshard_t *ps) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 16;
    kn_pentry_t *e = realloc(b->e, cap * sizeof(*e));
    if (!e) return NULL;
    b->e = e;
    b->cap = cap;
  }
  kn_pentry_t *e = &b->e[b->n];
  memset(e, 0, sizeof(*e));
  e->shard = ps;
  return e;
}

static void batch_free(kn_pcore_t *c, kn_pbatch_t *b) {
  if (b->body.cap && c->n_spare < SPARE_BODIES) {
    kn_buf_reset(&b->body);
    c->spare[c->n_spare++] = b->body;
  } else {
    kn_buf_free(&b->body);
  }
  free(b->e);
  free(b);
}

/* May ps add entries to b?  Calls to one shard in flight together can be
 * stored in either order, so a shard has at most shard_max_calls (by
 * default one).  In that ordered mode a new shard of a reshard also waits
 * until the calls to the shards it replaced are answered. */
static int calls_ok(const kn_pcore_t *c, const kn_pshard_t *ps,
                    const kn_pbatch_t *b) {
  if (ps->batch_id == b->id) return 1;
  if (c->cfg.shard_max_calls == 1 && ps->fresh && (c->retired || c->verify))
    return 0;
  return ps->calls < c->cfg.shard_max_calls;
}

/* A plain record of a key that already has an entry of ps in b would,
 * if that entry failed, be stored ahead of it. */
static int key_in_batch(const kn_pbatch_t *b, const kn_pshard_t *ps,
                        kn_u128_t hk) {
  for (size_t i = 0; i < b->n; i++)
    if (b->e[i].shard == ps && kn_u128_eq(b->e[i].msgs.head->hk, hk)) return 1;
  return 0;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The service refuses a record its shard's buckets cannot pay for whole,
 * so the head record waits until its own size is there (an aggregate:
 * what it may grow to), and a little more: the service fills its buckets
 * from when calls reach it, which is not quite when they were filled here.
 * Waiting for a higher level costs no rate, only keeps a reserve. */
#define KN_PRODUCE_GUARD_S 0.1

/* Microseconds until ps's buckets allow its head record, 0: now. */
static int64_t bucket_wait(const kn_pcore_t *c, kn_pshard_t *ps,
                           int64_t now_us) {
  double need = ps->q.head ? (double)kn_msg_size(ps->q.head) : 1;
  if (c->agg) {
    double agg = (double)c->cfg.agg_max_bytes;
    need = (double)ps->q_bytes < agg ? (double)ps->q_bytes : agg;
  }
  int64_t a = kn_tbucket_wait_us(
      &ps->tb_records, 1 + ps->tb_records.rate * KN_PRODUCE_GUARD_S, now_us);
  int64_t b = kn_tbucket_wait_us(
      &ps->tb_bytes, need + ps->tb_bytes.rate * KN_PRODUCE_GUARD_S, now_us);
  return a > b ? a : b;
}

/* Fails the expired records at the head of ps's queue. */
static void expire_head(kn_pcore_t *c, kn_pshard_t *ps, int64_t now_us,
                        kn_msg_list_t *done) {
  while (ps->q.head && ps->q.head->deadline_us <= now_us) {
    kn_msg_t *m = dequeue(c, ps);
    report_err(m, timed_out(c, m), done);
  }
}

typedef enum { FILL_MORE, FILL_FULL, FILL_NOMEM } fill_res_t;

/* Puts l's records (taken from the head of ps's queue) back there. */
static void splice_front(kn_pcore_t *c, kn_pshard_t *ps, kn_msg_list_t *l) {
  if (!l->head) return;
  for (kn_msg_t *m = l->head; m; m = m->next) ps->q_bytes += kn_msg_size(m);
  c->queued += l->n;
  l->tail->next = ps->q.head;
  ps->q.head = l->head;
  if (!ps->q.tail) ps->q.tail = l->tail;
  ps->q.n += l->n;
  memset(l, 0, sizeof(*l));
}

static fill_res_t add_entry(kn_pcore_t *c, kn_pbatch_t *b, kn_pentry_t *e,
                            const kn_put_entry_t *pe, size_t bytes,
                            int64_t now_us) {
  if (kn_enc_put_records_entry(&b->body, b->n == 0, pe)) return FILL_NOMEM;
  kn_pshard_t *ps = e->shard;
  kn_tbucket_take(&ps->tb_records, 1, now_us);
  kn_tbucket_take(&ps->tb_bytes, (double)bytes, now_us);
  ps->inflight++;
  if (ps->batch_id != b->id) ps->calls++;
  ps->batch_id = b->id;
  b->bytes += bytes;
  b->n_msgs += e->msgs.n;
  c->inflight += e->msgs.n;
  for (kn_msg_t *m = e->msgs.head; m; m = m->next) m->attempts++;
  b->n++;
  return b->n >= c->cfg.batch_max_records ? FILL_FULL : FILL_MORE;
}

/* Moves ps's entries into b while its limits allow.  *wake_us is lowered
 * to when ps could send more if it has to wait. */
static fill_res_t fill_from(kn_pcore_t *c, kn_pshard_t *ps, kn_pbatch_t *b,
                            int64_t now_us, int64_t *wake_us,
                            kn_msg_list_t *done) {
  for (;;) {
    expire_head(c, ps, now_us, done);
    kn_msg_t *head = ps->q.head;
    if (!head || ps->held) return FILL_MORE;
    if (now_us < ps->retry_at_us) {
      *wake_us = min64(*wake_us, ps->retry_at_us);
      return FILL_MORE;
    }
    if (!calls_ok(c, ps, b)) return FILL_MORE;
    int64_t w = bucket_wait(c, ps, now_us);
    if (w) {
      *wake_us = min64(*wake_us, now_us + w);
      return FILL_MORE;
    }
    size_t room = c->cfg.batch_max_bytes - b->bytes;
    kn_pentry_t *e;
    if (!c->agg) {
      if (kn_msg_size(head) > room) return FILL_FULL;
      if (c->cfg.strict && key_in_batch(b, ps, head->hk)) return FILL_MORE;
      if (!(e = batch_entry(b, ps))) return FILL_NOMEM;
      kn_msg_list_push(&e->msgs, dequeue(c, ps));
      kn_put_entry_t pe = {head->key, head->data, head->len, head->ehk};
      fill_res_t r = add_entry(c, b, e, &pe, kn_msg_size(head), now_us);
      if (r == FILL_NOMEM) splice_front(c, ps, &e->msgs);
      if (r != FILL_MORE) return r;
      continue;
    }
    /* One aggregate: it always fits when the room holds a full one. */
    size_t need = c->cfg.agg_max_bytes + 1;
    if (kn_msg_size(head) > need) need = kn_msg_size(head);
    if (need > room) return FILL_FULL;
    if (c->cfg.strict && ps->batch_id == b->id) return FILL_MORE;
    if (!(e = batch_entry(b, ps))) return FILL_NOMEM;
    while ((head = ps->q.head)) {
      if (head->deadline_us <= now_us) {
        kn_msg_t *m = dequeue(c, ps);
        report_err(m, timed_out(c, m), done);
        continue;
      }
      /* Records keep their data until reported, past the flush. */
      kn_err_t rc = kn_aggregator_add_borrowed(c->agg, head->key, head->key_len,
                                               head->ehk, head->ehk_len,
                                               head->data, head->len);
      if (rc == KN_ERR__QUEUE_FULL) break;
      if (rc != KN_ERR_NO_ERROR) {
        /* send() validated the record, so only memory can run out: send
         * what is aggregated so far, if anything. */
        if (!e->msgs.n) return FILL_NOMEM;
        break;
      }
      kn_msg_list_push(&e->msgs, dequeue(c, ps));
    }
    if (!e->msgs.n) continue; /* every record had expired */
    kn_agg_out_t out;
    if (kn_aggregator_flush(c->agg, &out) != KN_ERR_NO_ERROR) {
      /* The records go back to their queue, to be added again. */
      kn_aggregator_clear(c->agg);
      splice_front(c, ps, &e->msgs);
      return FILL_NOMEM;
    }
    e->aggregated = (uint8_t)out.aggregated;
    kn_put_entry_t pe = {out.pkey, out.data, out.len, out.ehk};
    fill_res_t r = add_entry(c, b, e, &pe, out.len + strlen(out.pkey), now_us);
    if (r == FILL_NOMEM) splice_front(c, ps, &e->msgs);
    if (r != FILL_MORE) return r;
  }
}

kn_pbatch_t *kn_pcore_take(kn_pcore_t *c, int64_t now_us, int flush,
                           int64_t *wake_us, kn_msg_list_t *done) {
  c->now_us = now_us;
  *wake_us = INT64_MAX;
  /* Is a call due?  Yes when flushing, when the records that could go
   * now would fill one, or when one of them has waited linger. */
  size_t ready_records = 0, ready_bytes = 0;
  int64_t oldest = INT64_MAX;
  for (size_t i = 0; i < c->n_shards; i++) {
    kn_pshard_t *ps = c->shards[i];
    if (!ps->q.head || ps->held) continue;
    if (now_us < ps->retry_at_us) {
      *wake_us = min64(*wake_us, ps->retry_at_us);
      continue;
    }
    int64_t w = bucket_wait(c, ps, now_us);
    if (w) {
      *wake_us = min64(*wake_us, now_us + w);
      continue;
    }
    ready_records += ps->q.n;
    ready_bytes += ps->q_bytes;
    oldest = min64(oldest, ps->q.head->enq_us);
  }
  if (oldest == INT64_MAX) return NULL;
  size_t entries = c->agg ? ready_bytes / c->cfg.agg_max_bytes : ready_records;
  int due = flush || ready_bytes >= c->cfg.batch_max_bytes ||
            entries >= c->cfg.batch_max_records ||
            oldest + c->cfg.linger_us <= now_us;
  if (!due) {
    *wake_us = min64(*wake_us, oldest + c->cfg.linger_us);
    return NULL;
  }

  /* One allocation for the body: growing a multi-megabyte buffer by
   * doubling copies it and touches fresh pages several times over. */
  size_t est_bytes = ready_bytes < c->cfg.batch_max_bytes
                         ? ready_bytes
                         : c->cfg.batch_max_bytes;
  size_t est_n = ready_records < c->cfg.batch_max_records
                     ? ready_records
                     : c->cfg.batch_max_records;
  kn_pbatch_t *b = calloc(1, sizeof(*b));
  if (b && c->n_spare) b->body = c->spare[--c->n_spare];
  if (!b || kn_buf_reserve(&b->body, est_bytes / 3 * 4 + est_n * 112 + 256) ||
      kn_enc_put_records_begin(&b->body, c->stream))
    goto nomem;
  b->id = ++c->batch_seq;
  size_t n = c->n_shards, k;
  fill_res_t r = FILL_MORE;
  for (k = 0; k < n && r == FILL_MORE; k++)
    r = fill_from(c, c->shards[(c->rr + k) % n], b, now_us, wake_us, done);
  /* The next call starts where this one stopped, so that no shard waits
   * behind a busy one. */
  c->rr = n ? (c->rr + k) % n : 0;
  if (b->n && r != FILL_NOMEM && !kn_enc_put_records_end(&b->body)) return b;
  /* Nothing to send, or memory ran out: the records go back to their
   * queues, in order. */
  kn_msg_list_t back = {0};
  kn_pcore_abandon(c, b, &back);
  kn_msg_t *rev = NULL;
  for (kn_msg_t *m; (m = kn_msg_list_pop(&back));) {
    m->attempts--;
    m->next = rev;
    rev = m;
  }
  while (rev) {
    kn_msg_t *m = rev;
    rev = m->next;
    enqueue_front(c, m);
  }
  return NULL;
nomem:
  if (b) batch_free(c, b);
  return NULL;
}

/* ---- answers ---- */

/* Queues l's records again (ahead of newer ones, in order), or reports
 * those whose time-to-live ran out. */
static void requeue_list(kn_pcore_t *c, kn_msg_list_t *l, int64_t now_us,
                         kn_msg_list_t *done) {
  kn_msg_t *rev = NULL;
  for (kn_msg_t *m; (m = kn_msg_list_pop(l));) {
    m->next = rev;
    rev = m;
  }
  while (rev) {
    kn_msg_t *m = rev;
    rev = m->next;
    if (m->deadline_us <= now_us) {
      report_err(m, timed_out(c, m), done);
    } else {
      c->retries++;
      enqueue_front(c, m);
    }
  }
}

/* Entries of one shard are next to each other in a call (fill_from adds
 * them in one go), so the first of each run stands for the call. */
static void shard_release(kn_pcore_t *c, const kn_pbatch_t *b, size_t i) {
  kn_pshard_t *ps = b->e[i].shard;
  if (i == 0 || b->e[i - 1].shard != ps) ps->calls--;
  ps->inflight--;
  if (ps->inflight || !c->retired) return;
  for (kn_pshard_t **p = &c->retired; *p; p = &(*p)->next_retired) {
    if (*p == ps) {
      *p = ps->next_retired;
      reroute(c, &ps->q);
      pshard_free(ps);
      return;
    }
  }
}

/* Once per shard and answer: a call with 200 rejected entries is one
 * signal to slow down, not 200 (which would push the back-off to its
 * ceiling at once). */
static void back_off(kn_pshard_t *ps, uint64_t batch_id, int64_t now_us,
                     int throttled) {
  if (ps->backoff_batch == batch_id) return;
  ps->backoff_batch = batch_id;
  int64_t ms = kn_backoff_next(&ps->backoff);
  /* Full jitter can draw 0: a rejected entry still waits a little. */
  if (ms < 1) ms = 1;
  if (throttled) ms *= 2;
  int64_t at = now_us + ms * 1000;
  if (at > ps->retry_at_us) ps->retry_at_us = at;
}

int kn_pcore_done(kn_pcore_t *c, kn_pbatch_t *b, const kn_error_t *err,
                  kn_presp_t *resp, int64_t now_us, kn_msg_list_t *done) {
  c->now_us = now_us;
  int flags = 0;
  const kn_put_results_t *res = resp ? resp->res : NULL;
  if (!err && res && res->n != b->n) res = NULL;
  kn_msg_list_t retry = {0};
  int fatal = err && !kn_error_is_retriable(err);
  if (err) kn_pcore_note_error(c, err);
  for (size_t i = 0; i < b->n; i++) {
    kn_pentry_t *e = &b->e[i];
    kn_pshard_t *ps = e->shard;
    c->inflight -= e->msgs.n;
    if (err || !res) {
      kn_err_t code = err ? kn_error_code(err) : KN_ERR__BAD_MSG;
      if (fatal) {
        for (kn_msg_t *m; (m = kn_msg_list_pop(&e->msgs));)
          report_err(m, kn_error_copy(err), done);
      } else {
        for (kn_msg_t *m = e->msgs.head; m; m = m->next) m->last_code = code;
        back_off(ps, b->id, now_us, err && kn_error_is_throttling(err));
        kn_msg_list_concat(&retry, &e->msgs);
      }
    } else if (res->v[i].error_code) {
      const kn_put_result_t *r = &res->v[i];
      kn_error_t *ee =
          kn_error_remote(0, r->error_code, r->error_message, NULL);
      kn_err_t code = ee ? kn_error_code(ee) : KN_ERR__NOMEM;
      int throttled = ee && kn_error_is_throttling(ee);
      if (ee) {
        kn_error_destroy(c->last_err);
        c->last_err = ee;
      }
      for (kn_msg_t *m = e->msgs.head; m; m = m->next) m->last_code = code;
      back_off(ps, b->id, now_us, throttled);
      kn_msg_list_concat(&retry, &e->msgs);
    } else {
      const kn_put_result_t *r = &res->v[i];
      int expected = c->auto_dist || strcmp(r->shard_id, ps->id) == 0;
      kn_backoff_reset(&ps->backoff);
      if (!expected) {
        /* The map is stale (a split or merge): hold the shard until a new
         * listing says where its records go. */
        flags |= KN_PCORE_REFRESH;
        ps->held = 1;
      }
      if (expected || !e->aggregated) {
        uint64_t sub = 0;
        for (kn_msg_t *m; (m = kn_msg_list_pop(&e->msgs)); sub++)
          report_ok(m, resp, r->shard_id, r->seq, e->aggregated ? sub : 0,
                    e->aggregated, done);
      } else {
        kn_pverify_t *v = calloc(1, sizeof(*v));
        if (!v) { /* cannot check it: send it again to be safe */
          kn_msg_list_concat(&retry, &e->msgs);
        } else {
          kn_presp_ref(resp);
          v->resp = resp;
          v->shard_id = r->shard_id;
          v->seq = r->seq;
          v->msgs = e->msgs;
          memset(&e->msgs, 0, sizeof(e->msgs));
          v->next = c->verify;
          c->verify = v;
        }
      }
    }
  }
  requeue_list(c, &retry, now_us, done);
  /* Last to first: a retired shard may be freed by its first entry. */
  for (size_t i = b->n; i-- > 0;) shard_release(c, b, i);
  batch_free(c, b);
  if (!c->queued && !c->inflight) free_spares(c);
  return flags;
}

void kn_pcore_abandon(kn_pcore_t *c, kn_pbatch_t *b, kn_msg_list_t *out) {
  for (size_t i = 0; i < b->n; i++) {
    c->inflight -= b->e[i].msgs.n;
    kn_msg_list_concat(out, &b->e[i].msgs);
  }
  /* Last to first: a retired shard may be freed by its first entry. */
  for (size_t i = b->n; i-- > 0;) shard_release(c, b, i);
  batch_free(c, b);
}

/* ---- time-outs ---- */

int64_t kn_pcore_expire(kn_pcore_t *c, int64_t now_us, kn_msg_list_t *done) {
  c->now_us = now_us;
  int64_t next = INT64_MAX;
  for (size_t i = 0; i < c->n_shards; i++) {
    kn_pshard_t *ps = c->shards[i];
    expire_head(c, ps, now_us, done);
    if (ps->q.head) next = min64(next, ps->q.head->deadline_us);
  }
  while (c->unrouted.head && c->unrouted.head->deadline_us <= now_us) {
    kn_msg_t *m = kn_msg_list_pop(&c->unrouted);
    c->queued--;
    report_err(m, timed_out(c, m), done);
  }
  if (c->unrouted.head) next = min64(next, c->unrouted.head->deadline_us);
  /* Aggregates waiting for a check were stored somewhere; after their
   * time-to-live they are reported as failed, which errs on the side of
   * a duplicate if the application sends them again. */
  for (kn_pverify_t **p = &c->verify; *p;) {
    kn_pverify_t *v = *p;
    if (v->msgs.head->deadline_us <= now_us) {
      *p = v->next;
      for (kn_msg_t *m; (m = kn_msg_list_pop(&v->msgs));)
        report_err(m, timed_out(c, m), done);
      verify_free(v, NULL);
    } else {
      next = min64(next, v->msgs.head->deadline_us);
      p = &v->next;
    }
  }
  return next;
}

void kn_pcore_fail_all(kn_pcore_t *c, const kn_error_t *err,
                       kn_msg_list_t *done) {
  kn_msg_list_t all = {0};
  kn_msg_list_concat(&all, &c->unrouted);
  for (size_t i = 0; i < c->n_shards; i++) {
    kn_msg_list_concat(&all, &c->shards[i]->q);
    c->shards[i]->q_bytes = 0;
  }
  for (kn_pshard_t *ps = c->retired; ps; ps = ps->next_retired)
    kn_msg_list_concat(&all, &ps->q);
  c->queued = 0;
  for (kn_msg_t *m; (m = kn_msg_list_pop(&all));)
    report_err(m, kn_error_copy(err), done);
}

void kn_pcore_stats(const kn_pcore_t *c, kn_pcore_stats_t *out) {
  out->queued = c->queued;
  out->inflight = c->inflight;
  out->retries = c->retries;
  out->shards = c->n_shards;
}
