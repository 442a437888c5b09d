/* Enhanced fan-out: reading shards with SubscribeToShard through a
 * registered stream consumer instead of polling with GetRecords.
 *
 *   efo_register.c  settings, the registration strategies (lazy, eager,
 *                   none) and deregistration at close: control thread
 *   efo_check.c     what the control thread does for the readers: find
 *                   out why a subscription met ResourceNotFound (consumer
 *                   gone: register again; shard gone), and list shards
 *                   for idle subscriptions (servers that never end a
 *                   subscription at the end of a closed shard)
 *   reader_efo.c    one shard's subscriptions, on the I/O thread
 *
 * A fan-out reader hands batches to the delivery queue and reports the
 * end of a shard, a missing shard and fatal errors to the control thread
 * exactly as the polling reader does, so the consumer with and without
 * leases works unchanged.  A shard that ListShards shows closed is
 * finished by a polling reader that the fan-out reader owns: GetRecords
 * reports the end of a shard on every server. */
#ifndef KN_CONSUMER_EFO_H
#define KN_CONSUMER_EFO_H

#include <stdint.h>

#include "consumer/consumer_int.h"
#include "util/buf.h"

typedef enum kn_efo_registration {
  KN_EFO_LAZY,  /* describe; register if missing; wait until ACTIVE */
  KN_EFO_EAGER, /* register at start; any failure is fatal */
  KN_EFO_NONE   /* the consumer ARN is given: no registration calls */
} kn_efo_registration_t;

const char *kn_efo_registration_name(kn_efo_registration_t r);

typedef struct kn_efo {
  /* Settings, fixed once kn_efo_conf() returns. */
  char *name; /* consumer name; NULL with none */
  kn_efo_registration_t registration;
  int deregister_on_close;
  int64_t watchdog_ms;
  int64_t in_use_poll_ms;
  int64_t register_timeout_ms;

  /* The fan-out check thread only (kc->efo_pool; the control thread
   * before it starts, in kn_efo_setup, and after it ends). */
  char *stream_arn;         /* NULL until needed */
  uint64_t verified_gen;    /* generation last seen ACTIVE ... */
  int64_t verified_ms;      /* ... and when (monotonic; 0: never) */
  kn_shard_list_t *listing; /* last ListShards of a check */
  int64_t listing_ms;

  /* [kc->mu] */
  char *consumer_arn;     /* NULL until registered */
  uint64_t generation;    /* bumped whenever consumer_arn changes */
  uint64_t lists_started; /* closure listings started ... */
  uint64_t lists_done;    /* ... and the last one finished */
  int list_pending;       /* a listing is queued or running */
  int64_t list_last_ms;   /* when the last one finished */
  size_t readers;         /* fan-out readers running */
  int warned_connections;
} kn_efo_t;

/* ---- efo_register.c ---- */

/* Reads the efo.* properties into kc->efo (left NULL when fan-out is
 * off).  kn_consumer_new; returns -1 with errstr on a bad combination. */
int kn_efo_conf(kn_consumer_t *kc, char *errstr, size_t size);
/* Accepts NULL. */
void kn_efo_free(kn_efo_t *efo);
/* Control thread, before the first shard starts: registers the consumer
 * as the strategy says.  Failure makes the consumer fail (fatal). */
void kn_efo_setup(kn_consumer_t *kc);
/* Lazy registration: an ACTIVE consumer of efo->name, registered if
 * missing; *arn is malloc'ed.  Blocks (control thread) up to
 * efo.register.timeout.ms; gives up early when the consumer closes. */
kn_error_t *kn_efo_ensure(kn_consumer_t *kc, char **arn);
/* Control thread, as it stops on a clean close: deregisters the consumer
 * when efo.deregister.on.close says so (never after a fatal error). */
void kn_efo_close(kn_consumer_t *kc);
/* Makes the consumer fail with err (taken). */
void kn_efo_fail(kn_consumer_t *kc, kn_error_t *err);

/* ---- efo_check.c (the fan-out check thread) ---- */

/* Handles KN_CTL_EFO_CHECK: cs NULL lists shards for the idle readers;
 * otherwise the subscription of cs's reader of `tenure` met
 * ResourceNotFound (err). */
void kn_efo_check(kn_consumer_t *kc, kn_cshard_t *cs, int64_t tenure,
                  const kn_error_t *err);

/* ---- reader_efo.c ---- */

/* A reader went idle on a shard not known closed: queue a listing unless
 * one is pending or the last is recent.  mu held. */
void kn_efo_request_listing_locked(kn_consumer_t *kc);

/* The fan-out readers' operations are kn_efo_reader_ops
 * (consumer_int.h). */
/* The control thread is done checking: subscribe again soon (after a
 * new registration, or a ResourceNotFound that did not hold up).  mu
 * held. */
void kn_efo_reader_retry_locked(kn_consumer_t *kc, kn_cshard_t *cs);
/* Appends ,"efo":{...} for cs when it has a fan-out reader (mu held).
 * Returns 0 or -1 (out of memory). */
int kn_efo_stats_json(kn_buf_t *b, const kn_cshard_t *cs);

/* The same for the metrics: 0 when cs has no fan-out reader, else 1 with
 * *out filled (state names as in the statistics; the list of every state
 * name, NULL-terminated, in kn_efo_state_names).  mu held. */
typedef struct kn_efo_snapshot {
  const char *state;
  uint64_t subscriptions, events, errors;
} kn_efo_snapshot_t;
int kn_efo_snapshot(const kn_cshard_t *cs, kn_efo_snapshot_t *out);
extern const char *const kn_efo_state_names[];

/* ---- reader.c: the polling reader a fan-out reader finishes a closed
 * shard with.  It is created, woken and freed on the I/O thread by its
 * owner; cs->reader stays NULL. ---- */

/* Starts reading cs at pos for the owner's tenure, dropping records at
 * or below skip (may be NULL).  NULL on out-of-memory. */
struct kn_reader *kn_poll_reader_spawn(kn_consumer_t *kc, kn_cshard_t *cs,
                                       int64_t tenure, const kn_pos_t *pos,
                                       const kn_pos_t *skip);
void kn_poll_reader_wake(struct kn_reader *r);
/* Cancels and frees; on_loop 0 when the loop has stopped (then only the
 * memory is freed: the loop freed the rest). */
void kn_poll_reader_free(struct kn_reader *r, int on_loop);

#endif
