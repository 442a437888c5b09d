/* multilang: a drop-in for the KCL MultiLangDaemon.  The same properties
 * file, the same lease table, the same line protocol to one record
 * processor child per shard (docs/multilang.md).
 *
 * Threads: an intake thread runs kn_consumer_poll() (so the lease and
 * shard callbacks run there) and turns what it gets into events; the main
 * thread owns every shard and child, applies the events, talks to the
 * children and makes the checkpoints they ask for.  The intake pauses
 * while too many bytes wait unsent, so memory stays bounded.
 *
 * A child that crashes, breaks the protocol or misses timeoutInSeconds
 * costs its own shard only: the batches since the last checkpoint are
 * kept, and a new child (after a back-off) gets them again. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "kn/consumer.h"
#include "kncat.h"
#include "metrics_http.h"
#include "multilang_child.h"
#include "multilang_msg.h"
#include "output.h"
#include "multilang_props.h"
#include "signals.h"

/* Bytes of records polled but not yet sent to a child, over all shards,
 * before the intake pauses. */
#define UNSENT_MAX ((size_t)4 << 20)
/* Bytes kept per shard for a new child after a failure; past it a failed
 * child cannot be replaced and the daemon stops (as the Java one does). */
#define RETAIN_MAX ((size_t)32 << 20)
#define MAX_LINE ((size_t)1 << 20)
/* Encoded bytes of a batch buffered ahead of the pipe. */
#define STREAM_AHEAD ((size_t)64 << 10)
/* What may wait in a child's input when it asks for a checkpoint. */
#define ANSWERS_MAX ((size_t)1 << 20)
/* Checkpoints a child may ask for while one of its own is being written
 * (a child waits for each answer: only one that does not read them gets
 * near this). */
#define HELD_MAX 256
/* After its last message a child has this long to exit (or the shutdown
 * grace, if longer) before it is killed. */
#define EXIT_GRACE_MS 5000
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
/* Consecutive failures that make a shard's child "failing": reported in
 * the status line and as exit code 1. */
#define FAILING_AFTER 3
#define STATUS_EVERY_MS 5000

typedef enum act {
  A_NONE,
  A_INIT,
  A_RECORDS,
  A_LEASE_LOST,
  A_SHARD_ENDED,
  A_SHUTDOWN
} act_t;

static const char *const act_names[] = {
    "",          "initialize", "processRecords",
    "leaseLost", "shardEnded", "shutdownRequested"};

/* ---- positions: (decimal sequence number, sub-sequence number) ---- */

typedef struct pos {
  char seq[KC_ML_SEQ_MAX]; /* digits, or a sentinel */
  uint64_t sub;
} pos_t;

static int is_digits(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* Sentinels order before every record, except SHARD_END after. */
static int seq_rank(const char *s) {
  if (is_digits(s)) return 1;
  return strcmp(s, "SHARD_END") == 0 ? 2 : 0;
}

static int pos_cmp(const pos_t *a, const pos_t *b) {
  int ra = seq_rank(a->seq), rb = seq_rank(b->seq);
  if (ra != rb || ra != 1) return ra < rb ? -1 : ra > rb;
  const char *x = a->seq, *y = b->seq;
  while (*x == '0' && x[1]) x++;
  while (*y == '0' && y[1]) y++;
  size_t lx = strlen(x), ly = strlen(y);
  if (lx != ly) return lx < ly ? -1 : 1;
  int c = strcmp(x, y);
  if (c) return c < 0 ? -1 : 1;
  return a->sub < b->sub ? -1 : a->sub > b->sub;
}

static void pos_of(pos_t *p, const kn_record_t *r) {
  snprintf(p->seq, sizeof(p->seq), "%s", kn_record_sequence_number(r));
  p->sub = kn_record_subsequence_number(r);
}

/* ---- events from the intake thread ---- */

typedef enum ev_kind {
  EV_BATCH,
  EV_ACQUIRED,
  EV_LOST,
  EV_ENDED,
  EV_HANDOFF,
  EV_CKPT /* a checkpoint written (or not) by the checkpoint thread */
} ev_kind_t;

/* A hand-off the intake thread waits on (inside the lease callback, so the
 * lease is still this worker's): the child finishes and checkpoints
 * first.  Fields under ml_t.mu; freed by whichever side lets go last
 * (handoff_release). */
typedef struct handoff {
  int done;      /* the main thread is finished with it */
  int abandoned; /* the intake stopped waiting */
} handoff_t;

typedef struct ev {
  struct ev *next;
  ev_kind_t kind;
  char *shard;       /* owned */
  kn_batch_t *batch; /* EV_BATCH; owned */
  size_t bytes;
  pos_t ckpt; /* EV_ACQUIRED: the lease's checkpoint */
  int has_ckpt;
  kn_err_t reason; /* EV_LOST */
  handoff_t *hand; /* EV_HANDOFF */
  /* EV_CKPT: a job of the checkpoint thread, then its outcome.  The
   * shard object (sid) and the child (child_serial) that asked; the
   * position to write (ckpt) and what the child asked (for the answer). */
  long long sid, child_serial;
  char asked[KC_ML_SEQ_MAX];
  int has_asked;
  int64_t asked_sub;
  kn_error_t *err; /* the write's error; owned */
} ev_t;

/* ---- shards ---- */

typedef struct item {
  struct item *next;
  kn_batch_t *batch; /* NULL: the end of the shard */
  size_t bytes;
  pos_t last; /* position of the batch's last record */
} item_t;

typedef struct shard {
  struct shard *next;
  char *id;
  kc_ml_child_t child;
  int retired;     /* lease gone or shard finished: only the child's exit
                      is awaited */
  int lost;        /* leaseLost still to be sent */
  handoff_t *hand; /* asked for by another worker: shutdownRequested,
                      then the intake is told (handoff_done) */
  int final_sent;  /* leaseLost, shardEnded or shutdownRequested sent */
  int done;        /* the final message answered; stdin closed */
  int64_t exit_by; /* kill the child if it has not exited by then */
  act_t pending;
  int64_t pending_since;
  item_t *head, *tail, *next_send; /* from the last checkpoint on */
  size_t retained;                 /* bytes of items already sent */
  int gap;                         /* items were dropped: no replay possible */
  pos_t ckpt;
  int has_ckpt;
  pos_t delivered; /* last record sent to the child */
  int has_delivered;
  int failures; /* consecutive */
  int64_t restart_at;
  int starting; /* no child: one starts at restart_at */
  /* processRecords being written: the batch is encoded a piece at a time
   * as the pipe takes it, so a big batch never sits whole in memory twice.
   * stream_it is not freed while set. */
  item_t *stream_it;
  size_t stream_idx, stream_n;
  /* A failure found while the child's output is being read: handled once
   * the read returns (the read owns the buffers until then). */
  int deferred;
  char deferred_why[512];
  /* Checkpoints: sid names this shard object, child_serial its current
   * child, for the answers of the checkpoint thread.  While a checkpoint
   * of the shard is being written (ck_inflight), the child's further
   * checkpoints wait in held (n_held of them; owned) to be answered in
   * order. */
  long long sid, child_serial;
  int ck_inflight;
  kc_ml_in_t *held;
  size_t n_held;
} shard_t;

typedef struct ml {
  kc_ctx_t *ctx;
  kc_ml_conf_t conf;
  kn_consumer_t *kc;
  shard_t *shards;
  /* intake */
  pthread_t intake;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_cond_t hand_cv;  /* a hand-off is done */
  ev_t *ev_head, *ev_tail; /* [mu] */
  size_t unsent;           /* [mu] bytes queued or unsent */
  int intake_stop;         /* [mu] */
  int intake_done;         /* [mu] the consumer failed */
  /* the checkpoint thread: writes checkpoints in order, one at a time, so
   * that a slow lease table holds up no other shard */
  pthread_t ckpt;
  int ckpt_started;
  pthread_cond_t ck_cv;    /* a job, or stop */
  ev_t *ck_head, *ck_tail; /* [mu] jobs (EV_CKPT) */
  int ck_stop;             /* [mu] once the queue is empty */
  long long serial;        /* sid and child_serial counter (main thread) */
  int wake[2];             /* pipe: wakes the main loop */
  /* state */
  int shutting_down;
  int64_t shutdown_by;
  int fatal; /* a shard could not be continued */
  int ever_failing;
  long long records_sent, failures_total;
  int64_t next_status;
  long long last_records;
  int64_t last_status_ms;
  shard_t *reading; /* the shard whose stdout is being read */
  /* poll(2) sets, grown as needed; owned */
  struct pollfd *pfd;
  shard_t **owner;
  int *which;
  size_t cap;
} ml_t;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logf_(ml_t *m, int notice, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_(ml_t *m, int notice, const char *fmt, ...) {
  if (notice && m->ctx->quiet) return;
  char buf[1024], shown[4 * sizeof(buf)];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  size_t len = n < 0                     ? 0
               : (size_t)n < sizeof(buf) ? (size_t)n
                                         : sizeof(buf) - 1;
  /* Lines may quote a record processor: no terminal controls. */
  fprintf(stderr, "kncat: multilang: %.*s\n",
          (int)kc_term_text(shown, buf, len), shown);
}

/* ---- intake thread ---- */

static void push_locked(ml_t *m, ev_t *e) {
  if (m->ev_tail)
    m->ev_tail->next = e;
  else
    m->ev_head = e;
  m->ev_tail = e;
  char c = 1;
  ssize_t w = write(m->wake[1], &c, 1);
  (void)w; /* full pipe: a wake-up is already pending */
}

static ev_t *new_ev(ev_kind_t kind, const char *shard) {
  ev_t *e = calloc(1, sizeof(*e));
  if (e && shard && !(e->shard = strdup(shard))) {
    free(e);
    return NULL;
  }
  if (e) e->kind = kind;
  return e;
}

static void push(ml_t *m, ev_t *e) {
  if (!e) return; /* out of memory: see the fatal check of the loop */
  pthread_mutex_lock(&m->mu);
  push_locked(m, e);
  pthread_mutex_unlock(&m->mu);
}

static void on_acquired(kn_consumer_t *kc, const char *shard, int64_t token,
                        const void *st, size_t st_len, void *opaque) {
  (void)token, (void)st, (void)st_len;
  ml_t *m = opaque;
  ev_t *e = new_ev(EV_ACQUIRED, shard);
  if (e &&
      kn_consumer_lease_checkpoint(kc, shard, e->ckpt.seq, sizeof(e->ckpt.seq),
                                   &e->ckpt.sub) == 0 &&
      e->ckpt.seq[0])
    e->has_ckpt = 1;
  push(m, e);
}

static void on_lost(kn_consumer_t *kc, const char *shard, kn_err_t reason,
                    void *opaque) {
  (void)kc;
  ml_t *m = opaque;
  if (reason != KN_ERR__HANDOFF) {
    ev_t *e = new_ev(EV_LOST, shard);
    if (e) e->reason = reason;
    push(m, e);
    return;
  }
  /* Another worker asked for the shard: the lease passes when this
   * returns, so wait (within the grace period) for the child to answer
   * shutdownRequested and checkpoint what it finished. */
  handoff_t *h = calloc(1, sizeof(*h));
  ev_t *e = h ? new_ev(EV_HANDOFF, shard) : NULL;
  if (!e) {
    free(h);
    return;
  }
  e->hand = h;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  int64_t wait_ms = m->conf.grace_ms > 25000 ? 25000 : m->conf.grace_ms;
  until.tv_sec += wait_ms / 1000;
  until.tv_nsec += (wait_ms % 1000) * 1000000;
  if (until.tv_nsec >= 1000000000) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&m->mu);
  push_locked(m, e);
  while (!h->done && !m->intake_stop)
    if (pthread_cond_timedwait(&m->hand_cv, &m->mu, &until) == ETIMEDOUT) break;
  if (h->done)
    free(h);
  else
    h->abandoned = 1;
  pthread_mutex_unlock(&m->mu);
}

/* The main thread is finished with h (NULL accepted). */
static void handoff_release(ml_t *m, handoff_t *h) {
  if (!h) return;
  pthread_mutex_lock(&m->mu);
  if (h->abandoned) {
    free(h);
  } else {
    h->done = 1;
    pthread_cond_broadcast(&m->hand_cv);
  }
  pthread_mutex_unlock(&m->mu);
}

/* The child of s is finished with a hand-off: let the intake go on. */
static void handoff_done(ml_t *m, shard_t *s) {
  handoff_release(m, s->hand);
  s->hand = NULL;
}

static void on_ended(kn_consumer_t *kc, const char *shard, void *opaque) {
  (void)kc;
  push(opaque, new_ev(EV_ENDED, shard));
}

static size_t batch_bytes(const kn_batch_t *b) {
  size_t n = 0, len;
  for (size_t i = 0; i < kn_batch_count(b); i++) {
    kn_record_data(kn_batch_record(b, i), &len);
    n += len + 128;
  }
  return n;
}

static void *intake_main(void *arg) {
  ml_t *m = arg;
  for (;;) {
    pthread_mutex_lock(&m->mu);
    while (!m->intake_stop && m->unsent >= UNSENT_MAX)
      pthread_cond_wait(&m->cv, &m->mu);
    int stop = m->intake_stop;
    pthread_mutex_unlock(&m->mu);
    if (stop) break;
    kn_batch_t *b = kn_consumer_poll(m->kc, 100);
    if (b) {
      ev_t *e = new_ev(EV_BATCH, kn_batch_shard_id(b));
      if (!e) {
        kn_batch_destroy(b);
        continue;
      }
      e->batch = b;
      e->bytes = batch_bytes(b);
      pthread_mutex_lock(&m->mu);
      m->unsent += e->bytes;
      push_locked(m, e);
      pthread_mutex_unlock(&m->mu);
    } else if (kn_consumer_fatal_error(m->kc)) {
      pthread_mutex_lock(&m->mu);
      m->intake_done = 1;
      char c = 1;
      ssize_t w = write(m->wake[1], &c, 1);
      (void)w;
      pthread_mutex_unlock(&m->mu);
      break;
    }
  }
  return NULL;
}

/* The checkpoint thread: each job is written, then handed back to the
 * main loop as an event, in order. */
static void *ckpt_main(void *arg) {
  ml_t *m = arg;
  pthread_mutex_lock(&m->mu);
  for (;;) {
    while (!m->ck_head && !m->ck_stop) pthread_cond_wait(&m->ck_cv, &m->mu);
    ev_t *j = m->ck_head;
    if (!j) break; /* stopped, nothing left */
    m->ck_head = j->next;
    if (!m->ck_head) m->ck_tail = NULL;
    j->next = NULL;
    pthread_mutex_unlock(&m->mu);
    j->err =
        kn_consumer_checkpoint_seq(m->kc, j->shard, j->ckpt.seq, j->ckpt.sub);
    pthread_mutex_lock(&m->mu);
    push_locked(m, j);
  }
  pthread_mutex_unlock(&m->mu);
  return NULL;
}

static void free_ev(ml_t *m, ev_t *e) {
  handoff_release(m, e->hand);
  kn_batch_destroy(e->batch);
  kn_error_destroy(e->err);
  free(e->shard);
  free(e);
}

static void unsent_sub(ml_t *m, size_t bytes) {
  pthread_mutex_lock(&m->mu);
  m->unsent = m->unsent > bytes ? m->unsent - bytes : 0;
  pthread_cond_signal(&m->cv);
  pthread_mutex_unlock(&m->mu);
}

/* ---- shard items ---- */

static void item_free(ml_t *m, shard_t *s, item_t *it, int sent) {
  if (!sent)
    unsent_sub(m, it->bytes);
  else
    s->retained -= it->bytes;
  kn_batch_destroy(it->batch);
  free(it);
}

/* Frees every item, but the batch being written to the child (its line
 * must be finished) unless the child is gone too. */
static void drop_items(ml_t *m, shard_t *s) {
  int sent = 1;
  item_t *keep = s->child.pid > 0 ? s->stream_it : NULL;
  for (item_t *it = s->head, *nx; it; it = nx) {
    nx = it->next;
    if (it == s->next_send) sent = 0;
    if (it != keep) item_free(m, s, it, sent);
  }
  s->head = s->tail = keep;
  s->next_send = NULL;
  s->retained = keep ? keep->bytes : 0;
  if (keep) keep->next = NULL;
  s->stream_it = keep;
}

/* Frees the items not sent yet (a shutdown does not deliver them). */
static void drop_unsent(ml_t *m, shard_t *s) {
  item_t *prev = NULL;
  for (item_t *it = s->head; it && it != s->next_send; it = it->next) prev = it;
  for (item_t *it = s->next_send, *nx; it; it = nx) {
    nx = it->next;
    item_free(m, s, it, 0);
  }
  s->next_send = NULL;
  s->tail = prev;
  if (prev)
    prev->next = NULL;
  else
    s->head = NULL;
}

/* After a checkpoint at p: batches wholly at or below it are not needed
 * for a replay any more. */
static void release_upto(ml_t *m, shard_t *s, const pos_t *p) {
  while (s->head && s->head != s->next_send && s->head != s->stream_it &&
         s->head->batch && pos_cmp(&s->head->last, p) <= 0) {
    item_t *it = s->head;
    s->head = it->next;
    if (!s->head) s->tail = NULL;
    item_free(m, s, it, 1);
  }
}

/* ---- shards and children ---- */

static shard_t *find(ml_t *m, const char *id) {
  for (shard_t *s = m->shards; s; s = s->next)
    if (!s->retired && strcmp(s->id, id) == 0) return s;
  return NULL;
}

/* The action just queued for the child waits for its status. */
static void set_pending(shard_t *s, act_t a) {
  s->pending = a;
  s->pending_since = now_ms();
}

static void fail_child(ml_t *m, shard_t *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int start_child(ml_t *m, shard_t *s) {
  char err[256];
  kc_ml_child_init(&s->child);
  s->starting = 0;
  s->child_serial = ++m->serial;
  if (kc_ml_child_spawn(&s->child, m->conf.argv, err, sizeof(err))) {
    fail_child(m, s, "%s", err);
    return -1;
  }
  const char *seq = s->has_ckpt ? s->ckpt.seq : NULL;
  int64_t sub = s->has_ckpt ? (int64_t)s->ckpt.sub : -1;
  if (kc_ml_enc_initialize(&s->child.wbuf, s->id, seq, sub)) {
    fail_child(m, s, "out of memory");
    return -1;
  }
  set_pending(s, A_INIT);
  s->next_send = s->head; /* everything after the checkpoint, again */
  s->has_delivered = 0;
  s->retained = 0;
  return 0;
}

static void close_child(shard_t *s) {
  s->stream_it = NULL;
  free(s->held); /* the child's waiting checkpoints go with it */
  s->held = NULL;
  s->n_held = 0;
  kc_ml_child_kill(&s->child);
  kc_ml_child_reap(&s->child, 1);
  kc_ml_child_free(&s->child);
  kc_ml_child_init(&s->child);
}

static void fail_child(ml_t *m, shard_t *s, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  if (m->reading == s) {
    if (!s->deferred)
      snprintf(s->deferred_why, sizeof(s->deferred_why), "%s", why);
    s->deferred = 1;
    return;
  }
  close_child(s);
  s->failures++;
  m->failures_total++;
  if (s->failures >= FAILING_AFTER) m->ever_failing = 1;
  s->pending = A_NONE;
  if (s->retired || s->lost || s->hand || m->shutting_down || s->done) {
    logf_(m, 0, "shard %s: record processor failed (%s)", s->id, why);
    s->retired = 1;
    s->starting = 0;
    return;
  }
  if (s->gap) {
    logf_(m, 0,
          "shard %s: record processor failed (%s) with more than "
          "%zu MB not checkpointed: its records cannot be given to a new "
          "one; stopping",
          s->id, why, RETAIN_MAX >> 20);
    m->fatal = 1;
    s->retired = 1;
    return;
  }
  int64_t backoff = BACKOFF_MIN_MS;
  for (int i = 1; i < s->failures && backoff < BACKOFF_MAX_MS; i++)
    backoff *= 2;
  if (backoff > BACKOFF_MAX_MS) backoff = BACKOFF_MAX_MS;
  logf_(m, 0,
        "shard %s: record processor failed (%s); a new one starts "
        "from the last checkpoint in %lld ms",
        s->id, why, (long long)backoff);
  /* Sent items become unsent again. */
  for (item_t *it = s->head; it && it != s->next_send; it = it->next) {
    pthread_mutex_lock(&m->mu);
    m->unsent += it->bytes;
    pthread_mutex_unlock(&m->mu);
  }
  s->retained = 0;
  s->next_send = s->head;
  s->has_delivered = 0;
  s->starting = 1;
  s->restart_at = now_ms() + backoff;
}

static shard_t *shard_new(ml_t *m, const char *id) {
  shard_t *s = calloc(1, sizeof(*s));
  if (!s || !(s->id = strdup(id))) {
    free(s);
    return NULL;
  }
  kc_ml_child_init(&s->child);
  s->sid = ++m->serial;
  s->next = m->shards;
  m->shards = s;
  return s;
}

static void handoff_done(ml_t *m, shard_t *s);

static void shard_free(ml_t *m, shard_t *s) {
  handoff_done(m, s);
  close_child(s);
  drop_items(m, s);
  free(s->id);
  free(s);
}

/* ---- sending ---- */

/* Sends the next item of an idle child, if any. */
static void dispatch(ml_t *m, shard_t *s) {
  if (s->child.pid <= 0 || s->pending != A_NONE || s->final_sent ||
      s->stream_it)
    return;
  kc_ml_buf_t *w = &s->child.wbuf;
  if (s->lost) {
    if (kc_ml_enc_action(w, "leaseLost") == 0) {
      s->final_sent = 1;
      set_pending(s, A_LEASE_LOST);
    }
    return;
  }
  if (m->shutting_down || s->hand) {
    if (kc_ml_enc_action(w, "shutdownRequested") == 0) {
      s->final_sent = 1;
      set_pending(s, A_SHUTDOWN);
    }
    return;
  }
  while (s->next_send) {
    item_t *it = s->next_send;
    if (!it->batch) {
      if (kc_ml_enc_action(w, "shardEnded") == 0) {
        s->final_sent = 1;
        set_pending(s, A_SHARD_ENDED);
      }
      return;
    }
    /* Records at or below the checkpoint are not sent again (a replay
     * after a failure); they are the batch's first ones. */
    size_t count = kn_batch_count(it->batch), first = 0;
    while (s->has_ckpt && first < count) {
      pos_t p;
      pos_of(&p, kn_batch_record(it->batch, first));
      if (pos_cmp(&p, &s->ckpt) > 0) break;
      first++;
    }
    s->next_send = it->next;
    unsent_sub(m, it->bytes);
    s->retained += it->bytes;
    if (first == count && !m->conf.call_empty) continue;
    if (kc_ml_enc_records_begin(w)) {
      fail_child(m, s, "out of memory");
      return;
    }
    s->stream_it = it;
    s->stream_idx = first;
    s->stream_n = 0;
    s->delivered = it->last;
    s->has_delivered = 1;
    m->records_sent += (long long)(count - first);
    set_pending(s, A_RECORDS);
    /* Bound what is kept for a replay. */
    while (s->retained > RETAIN_MAX && s->head != s->next_send &&
           s->head != s->stream_it) {
      item_t *old = s->head;
      s->head = old->next;
      item_free(m, s, old, 1);
      s->gap = 1;
    }
    return;
  }
}

/* Encodes more of the batch being sent, up to STREAM_AHEAD buffered. */
static int pump(shard_t *s) {
  kc_ml_buf_t *w = &s->child.wbuf;
  while (s->stream_it && w->len < STREAM_AHEAD) {
    const kn_batch_t *b = s->stream_it->batch;
    if (s->stream_idx == kn_batch_count(b)) {
      if (kc_ml_enc_records_end(w, kn_batch_millis_behind(b))) return -1;
      s->stream_it = NULL;
      break;
    }
    const kn_record_t *r = kn_batch_record(b, s->stream_idx);
    kc_ml_rec_t mr;
    mr.data = kn_record_data(r, &mr.len);
    /* No key (a stream that places records itself): null, as the
     * MultiLangDaemon passes the KCL's absent key on. */
    mr.key = *kn_record_partition_key(r) ? kn_record_partition_key(r) : NULL;
    mr.seq = kn_record_sequence_number(r);
    mr.subseq = kn_record_subsequence_number(r);
    mr.arrival_ms = kn_record_arrival_ms(r);
    if (kc_ml_enc_record(w, s->stream_n == 0, &mr)) return -1;
    s->stream_idx++;
    s->stream_n++;
  }
  return 0;
}

/* Writes what the child's stdin takes, encoding more as it goes.  0, or
 * -1 when the child's stdin is gone; *oom set on out of memory. */
static int feed(shard_t *s, int *oom) {
  for (;;) {
    if (pump(s)) {
      *oom = 1;
      return 0;
    }
    if (kc_ml_child_flush(&s->child)) return -1;
    if (s->child.wbuf.len || !s->stream_it) return 0;
  }
}

/* ---- child messages ---- */

static const char *ckpt_error(const kn_error_t *e) {
  kn_err_t c = kn_error_code(e);
  if (c == KN_ERR__LEASE_LOST || c == KN_ERR__DESTROY)
    return "ShutdownException";
  if (c == KN_ERR__INVALID_ARG) return "IllegalArgumentException";
  if (kn_error_is_throttling(e)) return "ThrottlingException";
  return "KinesisClientLibDependencyException";
}

static void on_checkpoint(ml_t *m, shard_t *s, const kc_ml_in_t *in) {
  const char *error = NULL;
  const char *asked = in->has_seq ? in->seq : NULL;
  int64_t asked_sub =
      in->has_subseq && !in->subseq_bad ? (int64_t)in->subseq : -1;
  pos_t p;
  int write = 0;
  if (s->pending == A_INIT || s->pending == A_LEASE_LOST) {
    error = "InvalidStateException";
  } else if (s->lost || s->retired) {
    error = "ShutdownException";
  } else if (!in->has_seq ||
             (s->pending == A_SHARD_ENDED && !strcmp(in->seq, "SHARD_END"))) {
    /* Everything delivered so far. */
    if (s->has_delivered &&
        (!s->has_ckpt || pos_cmp(&s->delivered, &s->ckpt) > 0)) {
      p = s->delivered;
      write = 1;
    }
  } else if (in->seq_bad || in->subseq_bad) {
    error = "IllegalArgumentException";
  } else {
    snprintf(p.seq, sizeof(p.seq), "%s", in->seq);
    p.sub = in->has_subseq ? in->subseq : 0;
    if (!s->has_delivered || pos_cmp(&p, &s->delivered) > 0 ||
        (s->has_ckpt && pos_cmp(&p, &s->ckpt) < 0))
      error = "IllegalArgumentException";
    else
      write = !s->has_ckpt || pos_cmp(&p, &s->ckpt) > 0;
  }
  /* A child reads each answer before its next checkpoint: one that does
   * not would grow its queue without end. */
  if (s->child.wbuf.len > ANSWERS_MAX) {
    fail_child(m, s,
               "does not read its standard input (%zu KB waiting for it "
               "when it asked for another checkpoint)",
               s->child.wbuf.len >> 10);
    return;
  }
  if (write) {
    /* Written by the checkpoint thread; the child is answered when it is
     * done (on_written), and its next checkpoints wait till then. */
    ev_t *j = new_ev(EV_CKPT, s->id);
    if (!j) {
      fail_child(m, s, "out of memory");
      return;
    }
    j->sid = s->sid;
    j->child_serial = s->child_serial;
    j->ckpt = p;
    j->has_asked = asked != NULL;
    if (asked) snprintf(j->asked, sizeof(j->asked), "%s", asked);
    j->asked_sub = asked_sub;
    s->ck_inflight = 1;
    pthread_mutex_lock(&m->mu);
    if (m->ck_tail)
      m->ck_tail->next = j;
    else
      m->ck_head = j;
    m->ck_tail = j;
    pthread_cond_signal(&m->ck_cv);
    pthread_mutex_unlock(&m->mu);
    return;
  }
  if (kc_ml_enc_checkpoint(&s->child.wbuf, asked, asked_sub, error))
    fail_child(m, s, "out of memory");
}

/* A checkpoint asked for by s's child: answered now, or once the one being
 * written is done. */
static void ask_checkpoint(ml_t *m, shard_t *s, const kc_ml_in_t *in) {
  if (!s->ck_inflight) {
    on_checkpoint(m, s, in);
    return;
  }
  if (s->n_held == HELD_MAX) {
    fail_child(m, s,
               "does not read its standard input (%d checkpoints asked "
               "for while the answer to an earlier one waited)",
               HELD_MAX);
    return;
  }
  if (!s->held && !(s->held = malloc(HELD_MAX * sizeof(*s->held)))) {
    fail_child(m, s, "out of memory");
    return;
  }
  s->held[s->n_held++] = *in;
}

/* The checkpoint thread is done with j: the shard's checkpoint moves, the
 * child that asked (if it is still there) gets its answer, then the
 * checkpoints it asked for meanwhile, in order. */
static void on_written(ml_t *m, ev_t *j) {
  shard_t *s = m->shards;
  while (s && s->sid != j->sid) s = s->next;
  if (!s) return; /* the shard is gone */
  s->ck_inflight = 0;
  const char *error = NULL;
  if (j->err) {
    error = ckpt_error(j->err);
    logf_(m, 1, "shard %s: checkpoint at %s/%llu: %s", s->id, j->ckpt.seq,
          (unsigned long long)j->ckpt.sub, kn_error_string(j->err));
  } else if (!s->has_ckpt || pos_cmp(&j->ckpt, &s->ckpt) > 0) {
    s->ckpt = j->ckpt;
    s->has_ckpt = 1;
    release_upto(m, s, &j->ckpt);
  }
  if (s->child.pid <= 0 || s->deferred) return;
  /* The child that asked is answered; a child started since (the one that
   * asked failed) is not, but what it asked for meanwhile is. */
  if (s->child_serial == j->child_serial &&
      kc_ml_enc_checkpoint(&s->child.wbuf, j->has_asked ? j->asked : NULL,
                           j->asked_sub, error)) {
    fail_child(m, s, "out of memory");
    return;
  }
  size_t i = 0;
  while (i < s->n_held && !s->ck_inflight && s->child.pid > 0) {
    kc_ml_in_t in = s->held[i++];
    on_checkpoint(m, s, &in);
  }
  if (s->held && i) {
    memmove(s->held, s->held + i, (s->n_held - i) * sizeof(*s->held));
    s->n_held -= i;
  }
}

typedef struct line_ctx {
  ml_t *m;
  shard_t *s;
} line_ctx_t;

static void on_stdout_line(void *opaque, const char *line, size_t len) {
  line_ctx_t *lc = opaque;
  ml_t *m = lc->m;
  shard_t *s = lc->s;
  if (s->child.pid <= 0 || s->deferred) return; /* failed already */
  kc_ml_in_t in;
  char why[128];
  int rc = kc_ml_decode(line, len, &in, why, sizeof(why));
  if (rc == KC_ML_DEC_SKIP) {
    if (strcmp(why, "blank line") != 0)
      logf_(m, 1,
            "shard %s: skipped a line from the record processor "
            "(%s): %.*s",
            s->id, why, (int)(len > 200 ? 200 : len), line);
    return;
  }
  if (rc == KC_ML_DEC_PROTOCOL) {
    fail_child(m, s, "%s", why);
    return;
  }
  if (in.kind == KC_ML_IN_CHECKPOINT) {
    ask_checkpoint(m, s, &in);
    return;
  }
  /* status */
  if (s->pending == A_NONE ||
      strcmp(in.response_for, act_names[s->pending]) != 0) {
    fail_child(m, s, "status for \"%s\" while %s%s%s", in.response_for,
               s->pending == A_NONE ? "nothing was asked" : "waiting for \"",
               s->pending == A_NONE ? "" : act_names[s->pending],
               s->pending == A_NONE ? "" : "\"");
    return;
  }
  act_t was = s->pending;
  s->pending = A_NONE;
  if (was == A_RECORDS) s->failures = 0;
  if (was == A_LEASE_LOST || was == A_SHARD_ENDED || was == A_SHUTDOWN) {
    kc_ml_child_close_stdin(&s->child);
    s->done = 1;
    s->retired = 1;
    int64_t grace =
        m->conf.grace_ms > EXIT_GRACE_MS ? m->conf.grace_ms : EXIT_GRACE_MS;
    s->exit_by = now_ms() + grace;
  }
}

static void on_stderr_line(void *opaque, const char *line, size_t len) {
  line_ctx_t *lc = opaque;
  /* Copied a piece at a time: a line may be as long as MAX_LINE. */
  char shown[4 * 4096];
  fprintf(stderr, "%s: ", lc->s->id);
  for (size_t at = 0; at < len; at += 4096) {
    size_t n = len - at < 4096 ? len - at : 4096;
    fwrite(shown, 1, kc_term_text(shown, line + at, n), stderr);
  }
  fputc('\n', stderr);
}

/* ---- events ---- */

static void apply(ml_t *m, ev_t *e) {
  shard_t *s = e->shard ? find(m, e->shard) : NULL;
  switch (e->kind) {
    case EV_CKPT:
      on_written(m, e);
      break;
    case EV_ACQUIRED:
      if (m->shutting_down) break;
      if (s) { /* a lease lost unnoticed: the new tenure replaces it */
        drop_items(m, s);
        s->retired = 1;
        s->lost = 1;
      }
      if (!(s = shard_new(m, e->shard))) {
        m->fatal = 1;
        break;
      }
      s->ckpt = e->ckpt;
      s->has_ckpt = e->has_ckpt;
      logf_(m, 1, "shard %s: lease taken (checkpoint %s)", s->id,
            e->has_ckpt ? e->ckpt.seq : "none");
      start_child(m, s);
      break;
    case EV_HANDOFF:
      if (!s || s->child.pid <= 0) {
        handoff_release(m, e->hand);
        if (s) s->retired = 1;
        break;
      }
      logf_(m, 1,
            "shard %s: another worker asked for it: "
            "shutdownRequested",
            s->id);
      drop_unsent(m, s);
      s->hand = e->hand;
      break;
    case EV_LOST:
      if (!s) break;
      drop_items(m, s);
      s->lost = 1;
      if (s->child.pid <= 0) s->retired = 1;
      break;
    case EV_ENDED:
    case EV_BATCH: {
      item_t *it = calloc(1, sizeof(*it));
      if (!s || s->lost || m->shutting_down || !it) {
        free(it);
        if (e->batch) unsent_sub(m, e->bytes);
        kn_batch_destroy(e->batch);
        e->batch = NULL;
        break;
      }
      it->batch = e->batch;
      it->bytes = e->bytes;
      e->batch = NULL;
      if (it->batch && kn_batch_count(it->batch))
        pos_of(&it->last,
               kn_batch_record(it->batch, kn_batch_count(it->batch) - 1));
      if (s->tail)
        s->tail->next = it;
      else
        s->head = it;
      s->tail = it;
      if (!s->next_send) s->next_send = it;
      break;
    }
  }
}

static void start_shutdown(ml_t *m) {
  m->shutting_down = 1;
  m->shutdown_by = now_ms() + m->conf.grace_ms;
  logf_(m, 1,
        "stopping: shutdownRequested to every record processor "
        "(%lld ms to checkpoint)",
        (long long)m->conf.grace_ms);
  for (shard_t *s = m->shards; s; s = s->next) {
    if (s->retired) continue;
    drop_unsent(m, s);
    if (s->child.pid <= 0) s->retired = 1;
  }
}

static void status_line(ml_t *m, int64_t now) {
  if (m->ctx->quiet || now < m->next_status) return;
  int n = 0, children = 0;
  char failing[256] = "";
  size_t fl = 0;
  for (shard_t *s = m->shards; s; s = s->next) {
    if (!s->retired) n++;
    if (s->child.pid > 0) children++;
    if (!s->retired && s->failures >= FAILING_AFTER && fl < 200)
      fl += (size_t)snprintf(failing + fl, sizeof(failing) - fl, " %s", s->id);
  }
  double dt = (double)(now - m->last_status_ms) / 1000.0;
  double rate = dt > 0 ? (double)(m->records_sent - m->last_records) / dt : 0;
  fprintf(stderr,
          "kncat: multilang: %s: %d shards, %d processors, %.0f "
          "records/s, %lld processor failures%s%s\n",
          m->conf.app, n, children, rate, m->failures_total,
          *failing ? "; failing:" : "", failing);
  m->last_records = m->records_sent;
  m->last_status_ms = now;
  m->next_status = now + STATUS_EVERY_MS;
}

/* ---- the loop ---- */

static int loop(ml_t *m) {
  for (;;) {
    int64_t now = now_ms();
    if (kc_signal_received() && !m->shutting_down) start_shutdown(m);
    /* events */
    pthread_mutex_lock(&m->mu);
    ev_t *evs = m->ev_head;
    m->ev_head = m->ev_tail = NULL;
    int consumer_failed = m->intake_done;
    pthread_mutex_unlock(&m->mu);
    char drain[256];
    while (read(m->wake[0], drain, sizeof(drain)) > 0) {
    }
    for (ev_t *e = evs, *nx; e; e = nx) {
      nx = e->next;
      apply(m, e);
      kn_error_destroy(e->err);
      free(e->shard);
      free(e);
    }
    if (consumer_failed || m->fatal) return consumer_failed ? 2 : 1;
    /* children: restarts, deadlines, sends, reaping */
    for (shard_t **pp = &m->shards; *pp;) {
      shard_t *s = *pp;
      if (s->starting && !s->retired && now >= s->restart_at) start_child(m, s);
      if (s->child.pid > 0 && s->pending != A_NONE && m->conf.timeout_ms &&
          now - s->pending_since > m->conf.timeout_ms && !s->done)
        fail_child(m, s, "no answer to %s within timeoutInSeconds",
                   act_names[s->pending]);
      if (s->child.pid > 0 && !s->done) dispatch(m, s);
      int oom = 0;
      if (s->child.pid > 0 && feed(s, &oom) && !s->done)
        fail_child(m, s, "its standard input is closed");
      else if (oom)
        fail_child(m, s, "out of memory");
      if (s->done && s->child.pid > 0) {
        if (kc_ml_child_reap(&s->child, 0)) {
          kc_ml_child_free(&s->child);
          kc_ml_child_init(&s->child);
        } else if (now >= s->exit_by) {
          logf_(m, 0, "shard %s: record processor did not exit; killed", s->id);
          close_child(s);
        }
      }
      if (s->hand && (s->done || s->retired || s->child.pid <= 0))
        handoff_done(m, s);
      if (s->retired && s->child.pid <= 0) {
        *pp = s->next;
        shard_free(m, s);
        continue;
      }
      pp = &s->next;
    }
    if (m->shutting_down) {
      int left = 0;
      for (shard_t *s = m->shards; s; s = s->next) left += s->child.pid > 0;
      if (!left) return 0;
      if (now >= m->shutdown_by) {
        logf_(m, 0,
              "%d record processor(s) still running after "
              "shutdownGraceMillis; killed",
              left);
        return 0;
      }
    }
    status_line(m, now);
    /* wait */
    size_t nfd = 1;
    for (shard_t *s = m->shards; s; s = s->next) nfd += 3;
    if (nfd > m->cap) {
      m->cap = nfd * 2;
      free(m->pfd);
      free(m->owner);
      free(m->which);
      m->pfd = malloc(m->cap * sizeof(*m->pfd));
      m->owner = malloc(m->cap * sizeof(*m->owner));
      m->which = malloc(m->cap * sizeof(*m->which));
      if (!m->pfd || !m->owner || !m->which) {
        logf_(m, 0, "out of memory");
        m->cap = 0;
        return 1;
      }
    }
    struct pollfd *pfd = m->pfd;
    shard_t **owner = m->owner;
    int *which = m->which;
    nfd = 0;
    pfd[nfd].fd = m->wake[0];
    pfd[nfd].events = POLLIN;
    owner[nfd] = NULL;
    which[nfd++] = 0;
    for (shard_t *s = m->shards; s; s = s->next) {
      if (s->child.out_fd >= 0) {
        pfd[nfd] = (struct pollfd){s->child.out_fd, POLLIN, 0};
        owner[nfd] = s;
        which[nfd++] = 1;
      }
      if (s->child.err_fd >= 0) {
        pfd[nfd] = (struct pollfd){s->child.err_fd, POLLIN, 0};
        owner[nfd] = s;
        which[nfd++] = 2;
      }
      if (s->child.in_fd >= 0 && (s->child.wbuf.len || s->stream_it)) {
        pfd[nfd] = (struct pollfd){s->child.in_fd, POLLOUT, 0};
        owner[nfd] = s;
        which[nfd++] = 3;
      }
    }
    int timeout = 200;
    int r = poll(pfd, (nfds_t)nfd, timeout);
    if (r < 0 && errno != EINTR) {
      logf_(m, 0, "poll: %s", strerror(errno));
      return 1;
    }
    if (r <= 0) continue;
    for (size_t i = 1; i < nfd; i++) {
      if (!pfd[i].revents) continue;
      shard_t *s = owner[i];
      line_ctx_t lc = {m, s};
      if (which[i] == 1 && s->child.out_fd == pfd[i].fd) {
        m->reading = s;
        int rc = kc_ml_child_read(&s->child.out_fd, &s->child.obuf, MAX_LINE,
                                  on_stdout_line, &lc);
        m->reading = NULL;
        if (s->deferred) {
          s->deferred = 0;
          fail_child(m, s, "%s", s->deferred_why);
        } else if (rc != 0 && s->child.pid > 0 && !s->done)
          fail_child(m, s, "exited (or closed its standard output)");
      } else if (which[i] == 2 && s->child.err_fd == pfd[i].fd) {
        kc_ml_child_read(&s->child.err_fd, &s->child.ebuf, 65536,
                         on_stderr_line, &lc);
      }
    }
  }
}

/* ---- the command ---- */

typedef struct opts {
  kc_ctx_t *ctx;
  const char *file;
} opts_t;

enum { OPT_PROPS = 1000, OPT_LOGCONF };

static int on_opt(void *st, int id, const char *arg) {
  opts_t *o = st;
  switch (id) {
    case OPT_PROPS:
      o->file = arg;
      return KC_GO_ON;
    case OPT_LOGCONF:
      kc_noticef(o->ctx,
                 "--log-configuration %s: ignored (kncat logs to "
                 "stderr; -v, -q)",
                 arg);
      return KC_GO_ON;
    default:
      return kc_usage_error(o->ctx, "unexpected option");
  }
}

static const kc_opt_t ml_opts[] = {{OPT_PROPS, 'p', "properties-file", 1},
                                   {OPT_LOGCONF, 'l', "log-configuration", 1},
                                   KC_GLOBAL_OPTS,
                                   {0, 0, NULL, 0}};

static void note(void *opaque, const char *line) {
  kc_noticef(opaque, "%s", line);
}

static int read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (n < cap) break;
    char *nb = realloc(buf, cap *= 2);
    if (!nb) {
      free(buf);
      buf = NULL;
    } else {
      buf = nb;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!buf || err) {
    free(buf);
    return -1;
  }
  *out = buf;
  *len = n;
  return 0;
}

static int run_multilang(kc_ctx_t *ctx, int argc, char **argv) {
  opts_t o = {ctx, NULL};
  char *ops[1];
  int nops = 0;
  int rc = kc_cmd_parse(ctx, argc, argv, ml_opts, ops, 1, &nops, on_opt, &o);
  if (rc != KC_GO_ON) return rc;
  if (!o.file && nops == 1)
    o.file = ops[0];
  else if (nops)
    return kc_usage_error(ctx, "one properties file only");
  if (!o.file) return kc_usage_error(ctx, "missing --properties-file FILE");

  char *text;
  size_t len;
  if (read_file(o.file, &text, &len)) {
    kc_errorf(ctx, "%s: %s", o.file, strerror(errno ? errno : EIO));
    return KC_EXIT_USAGE;
  }
  kc_ml_props_t props;
  memset(&props, 0, sizeof(props));
  ml_t m;
  memset(&m, 0, sizeof(m));
  m.ctx = ctx;
  char err[512];
  rc = KC_EXIT_USAGE;
  if (kc_ml_props_parse(&props, text, len, err, sizeof(err)) ||
      kc_ml_conf_build(&props, ctx->conf, &m.conf, note, ctx, err,
                       sizeof(err))) {
    kc_errorf(ctx, "%s: %s", o.file, err);
    free(text);
    kc_ml_props_free(&props);
    kc_ml_conf_free(&m.conf);
    return KC_EXIT_USAGE;
  }
  free(text);
  kc_ml_props_free(&props);
  char errstr[512] = "";
  kn_conf_set(ctx->conf, "checkpoint.auto", "false", errstr, sizeof(errstr));
  kn_conf_set_lease_acquired_cb(ctx->conf, on_acquired, &m);
  kn_conf_set_lease_lost_cb(ctx->conf, on_lost, &m);
  kn_conf_set_shard_ended_cb(ctx->conf, on_ended, &m);
  int mrc = kc_metrics_start(ctx);
  if (mrc != KC_GO_ON) {
    kc_ml_conf_free(&m.conf);
    return mrc;
  }
  if (pipe2(m.wake, O_CLOEXEC | O_NONBLOCK)) {
    kc_errorf(ctx, "pipe: %s", strerror(errno));
    kc_ml_conf_free(&m.conf);
    return KC_EXIT_RUNTIME;
  }
  kc_signals_install();
  m.kc = kn_consumer_new(ctx->conf, errstr, sizeof(errstr));
  if (!m.kc) {
    kc_errorf(ctx, "%s", errstr);
    close(m.wake[0]);
    close(m.wake[1]);
    kc_ml_conf_free(&m.conf);
    return KC_EXIT_RUNTIME;
  }
  if (ctx->metrics) kc_metrics_attach_consumer(ctx->metrics, m.kc);
  pthread_mutex_init(&m.mu, NULL);
  pthread_cond_init(&m.cv, NULL);
  pthread_cond_init(&m.hand_cv, NULL);
  pthread_cond_init(&m.ck_cv, NULL);
  m.last_status_ms = now_ms();
  m.next_status = m.last_status_ms + STATUS_EVERY_MS;
  kc_noticef(ctx, "%s: stream %s, %s, record processor %s", m.conf.app,
             m.conf.stream,
             m.conf.retrieval == KC_ML_RETRIEVAL_FANOUT ? "fan-out" : "polling",
             m.conf.argv[0]);
  m.ckpt_started = pthread_create(&m.ckpt, NULL, ckpt_main, &m) == 0;
  if (!m.ckpt_started || pthread_create(&m.intake, NULL, intake_main, &m)) {
    kc_errorf(ctx, "cannot start a thread");
    rc = KC_EXIT_RUNTIME;
  } else {
    int lr = loop(&m);
    pthread_mutex_lock(&m.mu);
    m.intake_stop = 1;
    pthread_cond_broadcast(&m.cv);
    pthread_mutex_unlock(&m.mu);
    pthread_join(m.intake, NULL);
    rc = lr == 0 ? (m.ever_failing ? KC_EXIT_RUNTIME : KC_EXIT_OK)
                 : KC_EXIT_RUNTIME;
    if (lr == 2)
      rc = kc_fail(ctx, kn_consumer_fatal_error(m.kc), m.conf.stream,
                   "consumer");
    if (m.ever_failing && lr == 0)
      kc_errorf(ctx, "a record processor kept failing (see above)");
  }
  /* The checkpoints asked for are written (the children asked before
   * they went), then the thread ends. */
  if (m.ckpt_started) {
    pthread_mutex_lock(&m.mu);
    m.ck_stop = 1;
    pthread_cond_signal(&m.ck_cv);
    pthread_mutex_unlock(&m.mu);
    pthread_join(m.ckpt, NULL);
  }
  for (ev_t *e = m.ck_head, *nx; e; e = nx) { /* never started */
    nx = e->next;
    free_ev(&m, e);
  }
  /* Whatever is left: children killed, events dropped. */
  while (m.shards) {
    shard_t *s = m.shards;
    m.shards = s->next;
    shard_free(&m, s);
  }
  for (ev_t *e = m.ev_head, *nx; e; e = nx) {
    nx = e->next;
    free_ev(&m, e);
  }
  kn_error_t *ce = kn_consumer_close(m.kc);
  if (ce) {
    kc_errorf(ctx, "closing: %s", kn_error_string(ce));
    kn_error_destroy(ce);
    if (rc == KC_EXIT_OK) rc = KC_EXIT_RUNTIME;
  }
  kc_metrics_stop_consumer(ctx, m.kc);
  kn_consumer_destroy(m.kc);
  free(m.pfd);
  free(m.owner);
  free(m.which);
  pthread_mutex_destroy(&m.mu);
  pthread_cond_destroy(&m.cv);
  pthread_cond_destroy(&m.hand_cv);
  pthread_cond_destroy(&m.ck_cv);
  close(m.wake[0]);
  close(m.wake[1]);
  kc_ml_conf_free(&m.conf);
  return rc;
}

const kc_command_t kc_cmd_multilang = {
    "multilang", run_multilang,
    "run record processors of the KCL MultiLangDaemon protocol",
    "kncat multilang --properties-file FILE | -p FILE | FILE\n"
    "                [--log-configuration FILE]\n",
    "\n"
    "A drop-in for the KCL MultiLangDaemon: the same properties file, the\n"
    "same lease table (DynamoDB, compatible with the KCL 2.x) and the same\n"
    "line protocol to one record processor child per shard, so processors\n"
    "written with amazon_kclpy, aws-kcl (Node.js) and the others run\n"
    "unchanged, without a JVM.  docs/multilang.md lists the keys and every\n"
    "difference from the Java daemon.\n"
    "\n"
    "A processor that crashes, breaks the protocol or misses\n"
    "timeoutInSeconds costs its own shard only: a new one gets the records\n"
    "again from the last checkpoint, after a back-off.\n"
    "\n"
    "SIGINT or SIGTERM: every processor gets shutdownRequested and has\n"
    "shutdownGraceMillis (default 10000) to checkpoint; then the leases are\n"
    "released so other workers take them at once; exit 0.\n"
    "\n"
    "Exit: 0 after a clean stop; 2 bad properties file (key and line\n"
    "named); 1 runtime failure, or a processor that kept failing.\n"};
