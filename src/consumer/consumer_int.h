/* Internals of kn_consumer_t.
 *
 * Five kinds of thread meet here:
 * - the application's, in kn_consumer_poll(), the checkpoint calls, the
 *   metrics and the close (consumer.c, stats.c, metrics.c);
 * - the I/O thread of the handle's loop, which runs the shard readers
 *   (reader.c, reader_efo.c): GetRecords, SubscribeToShard, their timers,
 *   and queues what they read (delivery.c);
 * - the control thread (control.c), which runs one message loop for the
 *   mode without a lease store (solo.c) or with one (driver.c: the drive,
 *   drive.h, and with it the coordination core);
 * - the store threads (store_pool.c), which carry out lease-store calls
 *   and listings and answer by message (lease mode);
 * - the fan-out check thread (a one-thread pool, efo_check.c and the
 *   registration of efo_register.c), when reading by fan-out.
 *
 * Locks, and where they are taken (pthread_mutex_lock calls in
 * src/consumer, by file: threads):
 * - kc->mu, what the application, the I/O thread and the control thread
 *   share: the shard table, the kn_cshard_t fields marked [mu], the
 *   delivery queue, the application's events, fatal, the lease
 *   statistics, the fan-out fields marked [kc->mu] in efo.h.  59 calls:
 *   consumer.c 12, wait.c 1, metrics.c 2 and stats.c 1 (application),
 *   start_positions.c 1 (application: the consumer's snapshot),
 *   driver.c 12 and solo.c 4 (control), reader.c 6, reader_efo.c 7 and
 *   delivery.c 1 (I/O; delivery.c also the application), efo_check.c 7
 *   and efo_register.c 2 (fan-out check; efo_register.c also control at
 *   start and close), mailbox.c 2 (any: the consumer's failure),
 *   store_pool.c 1 (store: a result lost to out-of-memory).  Readers
 *   judge their deadline (lease_until_ms) and count their calls with
 *   atomics, without mu.
 * - kc->ctl_mu, the control thread's mailbox (the queue, its pending
 *   count, ctl_open, the checkpoint requests' answers), taken after mu
 *   when both are held, never before it.  11 calls: mailbox.c 4 (any),
 *   control.c 2 and driver.c 3 (control), consumer.c 1 (application),
 *   efo_register.c 1 (fan-out check: its sleep until the close).
 * - a store pool's own lock (store_pool.c 4: the pool's queue).
 * The shard table changes only on the control thread (under mu), which
 * reads it without mu; readers belong to the I/O thread; the drive and
 * the core belong to the control thread and take no lock. */
#ifndef KN_CONSUMER_INT_H
#define KN_CONSUMER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "aws/http.h"
#include "aws/service.h"
#include "consumer/position.h"
#include "core/conf.h"
#include "core/metrics.h"
#include "kn/client.h"
#include "kn/consumer.h"
#include "lease/taker.h"
#include "kinesis/hashkey.h"
#include "util/log.h"
#include "util/strmap.h"

typedef enum kn_cshard_state {
  KN_CS_WAITING, /* known, not started: parents unfinished or not ours */
  KN_CS_READING, /* a reader runs for it */
  KN_CS_ENDED,   /* the reader saw the end; records may still be queued */
  KN_CS_DONE,    /* closed shard, every record handed to the application */
  KN_CS_STOPPED, /* no longer ours (lease lost, or skipped at start) */
} kn_cshard_state_t;

const char *kn_cshard_state_name(kn_cshard_state_t s);

struct kn_reader;

/* Lease-store operations counted by the metrics: KN_CC_LIST_LEASES ..
 * KN_CC_HANDOFF_DONE of consumer/ccore.h. */
#define KN_STORE_OPS 13
struct kn_efo_reader;
struct kn_efo;

/* One shard as the consumer knows it.  Created and freed by the control
 * thread (under mu); fields without a mark are fixed after creation. */
typedef struct kn_cshard {
  char *id;
  char *parent;                     /* or NULL */
  char *adjacent_parent;            /* or NULL */
  kn_u128_t range_start, range_end; /* hash key range */
  int closed_at_sync;               /* [mu] ListShards showed it closed */

  kn_cshard_state_t state;    /* [mu] */
  int caught_up;              /* [mu] reader reached the tip */
  int paused;                 /* [mu] reader waits for buffer room */
  size_t buffered_records;    /* [mu] queued, not yet polled */
  size_t buffered_bytes;      /* [mu] */
  int in_dirty;               /* [mu] listed in kc->dirty */
  kn_pos_t delivered;         /* [mu] last record returned by poll */
  int has_delivered;          /* [mu] */
  kn_pos_t processed;         /* [mu] last record of an earlier poll */
  int has_processed;          /* [mu] */
  int64_t fencing_token;      /* [mu] -1: not held */
  int64_t millis_behind;      /* [mu] of the last response */
  uint64_t records_delivered; /* [mu] */
  uint64_t bytes_delivered;   /* [mu] */
  int queued_entries;         /* [mu] delivery entries referring to it */
  /* [mu] For the metrics (consumer/metrics.h). */
  /* GetRecords answers: atomic, counted by the I/O thread without mu. */
  _Atomic uint64_t gr_calls, gr_throttles, gr_errors;
  struct kn_ckpt_mark { /* (position, records delivered up to it) of
                           the batches since the last checkpoint */
    char seq[KN_SEQ_MAX];
    uint64_t subseq;
    uint64_t records;
  } ck_marks[8];
  int ck_n;
  uint64_t ck_records; /* records_delivered at the last checkpoint */
  int64_t ck_tenure;   /* the tenure the three above belong to */

  kn_pos_t start;                   /* control: where the reader starts */
  struct kn_reader *reader;         /* control: running reader, or NULL */
  struct kn_efo_reader *efo_reader; /* [mu] fan-out reader, or NULL */
  int end_popped; /* [mu] the application polled past the end */
  /* Lease mode: from this monotonic time on, records of the shard are
   * neither fetched nor handed out, unless a write to the lease moves it
   * first (0: no limit).  The readers and poll judge it themselves, so a
   * renewal stuck in an unreachable store cannot keep them going.  Once
   * passed it is never moved again for the same tenure (poll may have
   * dropped records): the driver stops the shard. */
  /* Atomic: written by the control thread (with mu, beside the tenure
   * it belongs to), read by readers without a lock on every step. */
  _Atomic int64_t lease_until_ms;

  /* [mu] Lease mode: the lease as the driver last learnt it, for the
   * statistics (the coordination core owns the lease itself). */
  struct {
    int held;
    int64_t counter;
    char ckpt[KN_SEQ_MAX];
    uint64_t ckpt_subseq;
  } view;
} kn_cshard_t;

/* Events for the application's callbacks, run inside kn_consumer_poll. */
typedef enum kn_app_ev_kind {
  KN_APP_EV_ACQUIRED,
  KN_APP_EV_LOST,
  /* Another worker asked for the shard: the application is told, may
   * checkpoint, and the driver hears back (KN_CTL_YIELDED) when the
   * callback returns. */
  KN_APP_EV_HANDOFF
} kn_app_ev_kind_t;

typedef struct kn_app_ev {
  struct kn_app_ev *next;
  kn_app_ev_kind_t kind;
  char *shard_id;
  int64_t token;
  kn_err_t reason;
  void *state; /* pending checkpoint state, or NULL */
  size_t state_len;
} kn_app_ev_t;

/* An entry of the delivery queue: a batch, or the end of a shard. */
typedef struct kn_dentry {
  struct kn_dentry *next;
  kn_cshard_t *cs;
  kn_batch_t *batch; /* NULL for an end-of-shard marker */
  size_t bytes;      /* memory accounted for this entry */
} kn_dentry_t;

/* A checkpoint the application waits for (lease mode): it lives on the
 * caller's stack until `done`; the driver answers every request it is
 * handed, at the latest when it stops. */
typedef struct kn_ckpt_req {
  struct kn_ckpt_req *next; /* driver thread: the unanswered requests */
  kn_cshard_t *cs;
  kn_pos_t pos;
  int prepare;
  const void *state; /* borrowed from the waiting caller */
  size_t state_len;
  int done;          /* [ctl_mu] */
  kn_error_t *err;   /* [ctl_mu] the outcome, owned by the caller */
  pthread_cond_t cv; /* with ctl_mu: signalled when done */
} kn_ckpt_req_t;

struct kn_store_job;

/* Messages to the control thread. */
typedef enum kn_ctl_kind {
  KN_CTL_SHARD_ENDED,   /* reader reached the end of cs (tenure) */
  KN_CTL_SHARD_DONE,    /* no lease store: the application polled past the
                           end of cs */
  KN_CTL_SHARD_GONE,    /* the shard no longer exists (trimmed) (tenure) */
  KN_CTL_FATAL,         /* a reader hit an error that stops the consumer */
  KN_CTL_RESYNC,        /* list shards again soon */
  KN_CTL_LEASE_EXPIRED, /* cs's lease was not renewed in time (tenure) */
  KN_CTL_EFO_CHECK,     /* fan-out: a subscription found no resource (cs,
                           tenure), or idle shards ask whether they closed
                           (NULL) */
  KN_CTL_DELIVERED,     /* lease mode: poll handed out cs's records up to
                           pos (end: and its end) under tenure */
  KN_CTL_PROCESSED,     /* lease mode: cs's records up to pos are processed */
  KN_CTL_CHECKPOINT,    /* lease mode: req waits for a checkpoint */
  KN_CTL_STORE_DONE,    /* lease mode: a store call or listing finished */
  KN_CTL_YIELDED,       /* lease mode: the application is done with what it
                           was handed of cs (tenure) before its hand-off;
                           pos: the last record (auto-checkpoint) or none */
  KN_CTL_CLOSE
} kn_ctl_kind_t;

typedef struct kn_ctl_msg {
  struct kn_ctl_msg *next;
  kn_ctl_kind_t kind;
  kn_cshard_t *cs;
  int64_t tenure;            /* the reader's or poll's tenure (0 without a
                                lease store) */
  kn_error_t *err;           /* owned by the message */
  kn_shard_list_t *children; /* owned by the message, or NULL */
  kn_pos_t pos;              /* DELIVERED, PROCESSED, YIELDED */
  int end;                   /* DELIVERED */
  kn_ckpt_req_t *req;        /* CHECKPOINT: borrowed, answered */
  struct kn_store_job *job;  /* STORE_DONE: owned by the message */
} kn_ctl_msg_t;

struct kn_reader_ops;

struct kn_consumer_s {
  kn_conf_t *conf;                     /* owned copy */
  const struct kn_reader_ops *readers; /* polling or fan-out; fixed */
  kn_logger_t log;
  kn_client_t *client; /* owned: settings, credentials, loop, svc */
  kn_loop_t *loop;     /* borrowed from client */
  kn_svc_t *svc;       /* borrowed from client */
  char *stream;
  struct kn_efo *efo; /* owned; NULL when reading by polling */
  /* The service places records (RecordDistributionStrategy AUTO): set by
   * the control thread from DescribeStreamSummary before any shard is
   * read, read by the I/O thread's de-aggregation. */
  atomic_int auto_dist;

  /* Settings read once at start. */
  struct {
    int deaggregate;
    int auto_checkpoint;
    int64_t checkpoint_interval_ms;
    size_t max_records, max_bytes, max_total_bytes;
    int poll_max_records;
    int64_t poll_idle_ms;
    double calls_per_s, bytes_per_s;
    int64_t sync_interval_ms;
    kn_pos_t initial;
    char **only_shards; /* from `shards`, NULL-terminated, or NULL */
  } cfg;

  pthread_mutex_t mu;
  pthread_cond_t poll_cv; /* delivery queue became non-empty */
  /* The control thread's mailbox (mailbox.c) has a lock of its own,
   * taken after mu when a thread needs both, never before it. */
  pthread_mutex_t ctl_mu;
  pthread_cond_t ctl_cv;             /* with ctl_mu: a message came */
  kn_ctl_msg_t *ctl_head, *ctl_tail; /* [ctl_mu] */
  int ctl_pending; /* [ctl_mu] messages posted and not yet handled */
  int ctl_open;    /* [ctl_mu] lease mode: checkpoint requests are taken */
  int ctl_closing; /* [ctl_mu] CLOSE was posted */

  /* [mu] */
  kn_cshard_t **shards;
  size_t n_shards, cap_shards;
  kn_strmap_t shard_map; /* id -> shards entry */
  kn_dentry_t *q_head, *q_tail;
  size_t q_len;
  size_t total_bytes; /* buffered + reserved in flight */
  /* User records of aggregates dropped as belonging to another shard's
   * hash range (statistics `dropped_records`). */
  uint64_t records_dropped;
  int n_paused;        /* shards whose reader waits for room */
  size_t wake_next;    /* where the next wake-up round starts */
  kn_cshard_t **dirty; /* shards delivered since the last poll */
  size_t n_dirty, cap_dirty;
  int synced; /* first shard listing done */
  int closing;
  kn_error_t *fatal;

  kn_app_ev_t *ev_head, *ev_tail; /* [mu] */

  pthread_t control_thread;
  /* Control thread: the fan-out checks' own thread (NULL without
   * fan-out), so that the control thread never waits for Kinesis. */
  struct kn_store_pool *efo_pool;
  int control_started;
  /* CLOSE, allocated with the thread: the thread is joined on it, so
   * posting it must not fail. */
  struct kn_ctl_msg *ctl_close;
  int closed;

  /* Lease mode: NULL store means every shard is ours (no coordination).
   * The store is opened and used by the driver (driver.c) and its store
   * threads (store_pool.c). */
  struct kn_lease_store *ls;
  char *worker_id;
  int taker_idle; /* [mu] the core has nothing left to take */
  struct {
    int64_t duration_ms, renew_ms, take_ms, handoff_ms, scan_ms;
    int members;
    /* How long after a good write this worker reads on without another
     * (the core's rule, for messages): duration - renew / 2. */
    int64_t grace_ms;
    int max_leases, max_steal;
  } lease;
  int64_t next_stats_ms;  /* poll thread */
  struct kn_lease_stats { /* [mu] worker statistics */
    uint64_t taken, lost, renewals, renew_failures;
    uint64_t handed_over; /* passed on at another worker's request */
    int64_t renew_last_us, renew_max_us;
    /* consumer/metrics.c: per lease-store operation (kn_cc_op_t up to
     * KN_CC_HANDOFF_DONE; ListShards not counted) */
    uint64_t stolen, released;
    uint64_t store_calls[KN_STORE_OPS], store_errors[KN_STORE_OPS],
        store_cond[KN_STORE_OPS];
    kn_hist_t store_hist[KN_STORE_OPS];
    int64_t store_ok_ms;     /* monotonic: when the last call answered
                                was sent (0: none yet) */
    int64_t table_leases;    /* at the last listing; -1: none yet */
    int64_t waiting_parents; /* -1: none yet */
  } lstats;
};

/* delivery.c, all with mu held unless said otherwise */
void kn_delivery_push(kn_consumer_t *kc, kn_dentry_t *e);
kn_dentry_t *kn_delivery_pop(kn_consumer_t *kc);
/* Queues a batch of cs (owned by the queue afterwards; NULL for none)
 * accounting `bytes` of memory, and an end-of-shard marker when shard_end.
 * Takes mu itself; any thread. */
void kn_delivery_queue(kn_consumer_t *kc, kn_cshard_t *cs, kn_batch_t *b,
                       size_t bytes, int shard_end);
/* Removes and frees the queued entries of cs (lease lost, close). */
void kn_delivery_purge(kn_consumer_t *kc, kn_cshard_t *cs);
/* Everything read to its current end and handed out. */
int kn_delivery_caught_up(kn_consumer_t *kc);

/* control.c: the control thread */
int kn_control_start(kn_consumer_t *kc, char *errstr, size_t size);
void kn_control_stop(kn_consumer_t *kc);

/* mailbox.c: the control thread's queue and the application's events */
/* Posts a message (takes ownership of err and children). mu NOT held. */
void kn_control_post(kn_consumer_t *kc, kn_ctl_kind_t kind, kn_cshard_t *cs,
                     kn_error_t *err, kn_shard_list_t *children);
/* As kn_control_post with mu held. */
void kn_control_post_locked(kn_consumer_t *kc, kn_ctl_kind_t kind,
                            kn_cshard_t *cs, kn_error_t *err,
                            kn_shard_list_t *children);
/* As kn_control_post for a reader's report of the tenure it was started
 * for (SHARD_ENDED, SHARD_GONE, LEASE_EXPIRED, EFO_CHECK). */
void kn_control_post_tenure(kn_consumer_t *kc, kn_ctl_kind_t kind,
                            kn_cshard_t *cs, int64_t tenure, kn_error_t *err,
                            kn_shard_list_t *children);
/* Queues a message built by the caller (kind and payload set; taken).
 * Any thread, mu held or not. */
void kn_control_post_msg_locked(kn_consumer_t *kc, kn_ctl_msg_t *m);
/* The same for a checkpoint request, unless the control thread takes no
 * more (then -1 and m is not taken). */
int kn_control_post_request(kn_consumer_t *kc, kn_ctl_msg_t *m);
/* The control thread has handled n messages (kn_delivery_caught_up counts
 * the rest). */
void kn_control_handled(kn_consumer_t *kc, int n);
/* Messages posted and not yet handled.  Any thread. */
int kn_control_pending(kn_consumer_t *kc);
void kn_control_msg_free(kn_ctl_msg_t *m);
/* The consumer fails with err (taken; the first failure stays) and the
 * application's poll wakes to say so.  mu NOT held. */
void kn_consumer_set_fatal(kn_consumer_t *kc, kn_error_t *err);
int kn_consumer_is_fatal(kn_consumer_t *kc); /* mu NOT held */
/* Queues an application event (takes ownership of state).  mu held. */
void kn_app_event_locked(kn_consumer_t *kc, kn_app_ev_kind_t kind,
                         const char *shard_id, int64_t token, kn_err_t reason,
                         void *state, size_t state_len);

/* shard_table.c: a shard's state */
/* Lease mode: non-zero when cs's time is up (lease_until_ms passed).
 * Any thread, mu held or not (the deadline is atomic). */
int kn_lease_expired_locked(const kn_cshard_t *cs, int64_t now_ms);
/* The tenure a reader of cs is started for: its fencing token, 0 without
 * a lease store.  mu held. */
int64_t kn_cshard_tenure_locked(const kn_cshard_t *cs);

/* stats.c: runs the statistics callback when it is due (poll thread). */
void kn_stats_maybe_emit(kn_consumer_t *kc);

/* Readers: polling (reader.c) or fan-out (reader_efo.c), chosen when the
 * consumer is made; the rest of the consumer reaches them through this
 * table only. */
struct kn_reader_ops {
  /* Starts a reader for cs at cs->start (I/O thread work is posted).  Any
   * thread but the I/O thread.  Returns 0 or -1 (out of memory). */
  int (*start)(kn_consumer_t *kc, kn_cshard_t *cs);
  /* Stops and frees cs's reader and waits until the I/O thread has let go
   * of it.  Any thread but the I/O thread. */
  void (*stop)(kn_consumer_t *kc, kn_cshard_t *cs);
  /* cs's reader waited for room and may go on.  mu held. */
  void (*resume_locked)(kn_consumer_t *kc, kn_cshard_t *cs);
};
extern const struct kn_reader_ops kn_poll_reader_ops; /* reader.c */
extern const struct kn_reader_ops kn_efo_reader_ops;  /* reader_efo.c */

static inline int kn_reader_start(kn_consumer_t *kc, kn_cshard_t *cs) {
  return kc->readers->start(kc, cs);
}
static inline void kn_reader_stop(kn_consumer_t *kc, kn_cshard_t *cs) {
  kc->readers->stop(kc, cs);
}

/* delivery.c: room in the buffers */
/* The application made room in cs's buffer: wake its reader.  mu held. */
void kn_reader_wake_locked(kn_consumer_t *kc, kn_cshard_t *cs);
/* Room came back in the total budget (a poll, a purge, a response smaller
 * than reserved): wake the paused readers that may go on.  mu held; any
 * thread.  Every decrease of a shard's buffer or of the total must be
 * followed by one of the two wake calls, or a paused reader may wait for
 * ever. */
void kn_readers_wake_locked(kn_consumer_t *kc);

#endif
