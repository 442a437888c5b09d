/* Internals of kn_producer_t.
 *
 * Two threads meet here: the application's (send, poll, flush, close) and
 * the I/O thread of the handle's loop (sender.c), which owns the engine
 * (core.h), its timers, the PutRecords calls and the shard listing.
 * kp->mu guards the fields marked [mu]: the inbound queue, the queue of
 * reports waiting for poll, and the counters.  Records move
 * application -> inbound -> core -> reports -> application. */
#ifndef KN_PRODUCER_INT_H
#define KN_PRODUCER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "aws/http.h"
#include "aws/service.h"
#include "core/conf.h"
#include "core/metrics.h"
#include "kn/client.h"
#include "kn/producer.h"
#include "producer/core.h"
#include "producer/msg.h"
#include "util/backoff.h"
#include "util/log.h"
#include "util/pager.h"

struct kn_producer_s {
  kn_conf_t *conf; /* owned copy */
  kn_logger_t log;
  kn_client_t *client; /* owned: settings, credentials, loop, svc */
  kn_loop_t *loop;     /* borrowed from client */
  kn_svc_t *svc;       /* borrowed from client */
  char *stream;

  struct {
    int64_t ttl_us;
    size_t max_records, max_bytes;
    int max_in_flight;
  } cfg;
  kn_pcore_cfg_t core_cfg;

  pthread_mutex_t mu;
  pthread_cond_t dr_cv; /* reports arrived */
  /* [mu] */
  kn_msg_list_t inbound;
  size_t inbound_bytes;
  int drain_posted;
  /* When the I/O thread takes the inbound queue by itself: its timer's
   * deadline (linger, back-off), INT64_MIN while every call slot is busy
   * (an answer takes it), INT64_MAX when nothing is due.  A send wakes the
   * I/O thread only when its record could not wait that long, or when the
   * queue holds enough for a call: one wake-up per record would cost more
   * than the record. */
  int64_t next_look_us;
  kn_msg_list_t reports;
  size_t outq_records, outq_bytes; /* sent, report not yet served */
  int flushing;
  int closing;
  int closed;
  uint64_t counters[KN_PC__COUNT];
  uint64_t throttled;  /* entries refused as throttled (metrics) */
  kn_hist_t put_hist;  /* PutRecords durations (metrics) */
  kn_error_t *map_err; /* why no shard map could be listed yet */
  int map_loaded;
  /* What DescribeStreamSummary said, set once by the I/O thread before
   * the first record reaches the core: the largest record (data and key,
   * bytes) and whether the service picks the shard (AUTO). */
  int described;
  size_t record_max;
  int auto_dist;
  uint64_t keyless_seq; /* spreads records without a key over the map */

  /* I/O thread only. */
  kn_pcore_t *core;       /* NULL once stopped */
  kn_timer_t *timer;      /* next call, linger, time-outs */
  kn_timer_t *list_timer; /* ListShards again after a failure */
  kn_pbatch_t *calls;     /* PutRecords in flight */
  int n_calls;
  kn_call_t *describe_call;  /* DescribeStreamSummary in flight */
  int stream_known;          /* described (the I/O thread's copy) */
  uint64_t spread_seq;       /* AUTO: spreads records over the map */
  kn_call_t *list_call;      /* ListShards page in flight */
  kn_shard_list_t *list_acc; /* pages so far */
  char *list_token;
  kn_pager_t list_pager; /* tokens of this listing */
  int list_again;        /* asked for while one was running */
  kn_backoff_t list_backoff;
};

/* sender.c: I/O thread work.  kn_sender_start and kn_sender_stop run
 * through kn_loop_call; the others through kn_loop_post. */
void kn_sender_start(void *kp);
void kn_sender_drain(void *kp); /* take the inbound queue */
void kn_sender_kick(void *kp);  /* send what is due (flush) */
/* Stops everything; records not yet reported get KN_ERR__DESTROY. */
void kn_sender_stop(void *kp);

/* Hands reports to the application's queue.  Any thread; mu NOT held. */
void kn_producer_deliver(kn_producer_t *kp, kn_msg_list_t *done);

#endif
