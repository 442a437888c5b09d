/* kn_producer_t: writes records to a stream asynchronously.
 *
 * kn_producer_send() queues a record and returns at once.  An internal
 * I/O thread predicts each record's shard from the stream's shard map
 * (ListShards; the MD5 of the partition key, or the explicit hash key),
 * optionally packs the records of a shard into KPL aggregated records,
 * collects them into PutRecords calls (at most 500 records and 5 MiB), waits
 * up to `linger.ms` for a call to fill, keeps each shard under its write
 * limits (token buckets), and re-sends only the entries the service
 * rejected, with back-off, until the record's `message.timeout.ms` runs out.
 *
 * Every record sent gets exactly one delivery report: where it was stored
 * (shard id, sequence number, sub-sequence number) or why it was not.
 * Reports are handed to the delivery callback inside kn_producer_poll(),
 * kn_producer_flush() and kn_producer_close(), on the application's thread,
 * never on the internal one.
 *
 * Order.  Records of one partition key are sent in the order they were
 * queued, and a shard has one PutRecords call in flight at a time
 * (`shard.max.in.flight`), so they are stored in that order as long as
 * the service takes them.  A record the service rejects is sent again
 * ahead of its shard's newer records, but newer records of its key that
 * were accepted in the same call are already stored before it (PutRecords
 * gives no order among the entries of one call when some fail).  With
 * `ordering.strict` no call carries two records of one partition key for
 * a shard (with aggregation: one aggregate per shard per call), so a
 * retried record is never overtaken by a later one of its key.  Both
 * modes follow resharding: a new shard waits until the calls to the shards
 * it replaces are answered, and a record whose shard was predicted wrong
 * is re-routed (an aggregate that landed on a shard whose range does not
 * hold all its records is sent again; consumers that check hash ranges,
 * as kn_consumer_t and the KCL do, drop the misplaced copy).
 *
 * Memory is bounded: records count against `queue.max.records` and
 * `queue.max.bytes` from send until their report has been served, and send
 * returns KN_ERR__QUEUE_FULL rather than growing past them. */
#ifndef KN_PRODUCER_H
#define KN_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

#include "kn/conf.h"
#include "kn/error.h"
#include "kn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_producer_s kn_producer_t;
/* One record as its delivery report shows it. */
typedef struct kn_msg_s kn_msg_t;

/* conf is copied; the caller keeps ownership.  The `stream` property is
 * required.  Starts listing the stream's shards at once.  NULL on failure
 * (bad configuration, no credentials) with a reason in errstr. */
KN_API kn_producer_t *kn_producer_new(const kn_conf_t *conf, char *errstr,
                                      size_t errstr_size);

/* Flags of kn_producer_send. */
#define KN_MSG_F_COPY 0x0 /* data is copied (the default) */
#define KN_MSG_F_NOCOPY                           \
  0x1 /* data is borrowed: it must stay valid and \
         unchanged until its report has been served */
#define KN_MSG_F_FREE                                \
  0x2 /* data is taken: free()d after its report (on \
         a failed send the caller keeps it) */

/* Queues one record.  partition_key (1 to 256 Unicode characters, UTF-8)
 * and explicit_hash_key (a decimal in [0, 2^128-1], or NULL) are copied;
 * data as flags say.  opaque comes back in the delivery report.
 * partition_key NULL sends the record without a key, which only a stream
 * whose service places records takes (RecordDistributionStrategy AUTO).
 * Records may be as large as the stream's MaxRecordSizeInKiB (data and
 * partition key together: 1 MiB by default, up to 10 MiB).  The producer
 * asks the stream both (DescribeStreamSummary) before sending anything;
 * until it knows, a record over 1 MiB or without a key is taken and, if
 * the stream refuses it, reported failed with KN_ERR__INVALID_ARG and a
 * message naming the setting.  On an AUTO stream aggregation is off
 * (said once in the log at notice level).
 * Returns KN_ERR_NO_ERROR, and then exactly one delivery report follows;
 * KN_ERR__QUEUE_FULL when the queue is at `queue.max.records` or the record
 * would take it past `queue.max.bytes` (poll, then send again);
 * KN_ERR__INVALID_ARG for a bad key or hash key, a record over 10 MiB or
 * over the stream's limit once known, or no key once the stream is known
 * not to be AUTO; KN_ERR__STATE once closing.  On an error no report
 * follows.  Thread-safe. */
KN_API kn_err_t kn_producer_send(kn_producer_t *kp, const char *partition_key,
                                 const char *explicit_hash_key,
                                 const void *data, size_t len, int flags,
                                 void *opaque);

/* Serves the delivery reports ready now, waiting up to timeout_ms (0: no
 * wait, -1: forever) for the first one.  The delivery callback runs here.
 * Returns the number of reports served. */
KN_API int kn_producer_poll(kn_producer_t *kp, int timeout_ms);

/* Sends everything queued without waiting for `linger.ms` and serves
 * reports until every record sent before the call has been reported, or
 * timeout_ms ran out (KN_ERR__TIMED_OUT).  -1: no limit (each record is
 * reported within its `message.timeout.ms` in any case). */
KN_API kn_err_t kn_producer_flush(kn_producer_t *kp, int timeout_ms);

/* Records sent and not yet reported (queued, in flight, or with a report
 * waiting to be served).  0 for NULL. */
KN_API size_t kn_producer_outq_len(kn_producer_t *kp);

/* Counters since the producer started. */
typedef enum kn_producer_counter {
  KN_PC_SENT = 0,      /* records accepted by kn_producer_send */
  KN_PC_DELIVERED,     /* reports of records stored */
  KN_PC_FAILED,        /* reports of records not stored */
  KN_PC_RETRIES,       /* times a record was queued again after a failure */
  KN_PC_CALLS,         /* PutRecords calls answered or failed */
  KN_PC_IN_FLIGHT,     /* records in PutRecords calls now */
  KN_PC_BYTES,         /* payload bytes of the records stored */
  KN_PC_MAP_REFRESHES, /* shard map listings */
  KN_PC__COUNT
} kn_producer_counter_t;
KN_API uint64_t kn_producer_counter(kn_producer_t *kp,
                                    kn_producer_counter_t which);

/* The producer's metrics (docs/METRICS.md) in the Prometheus text
 * exposition format, as kn_consumer_metrics() renders the consumer's.
 * Any thread. */
KN_API size_t kn_producer_metrics(kn_producer_t *kp, char *buf, size_t size);

/* Non-zero while the producer runs (not closed); *ready (may be NULL) is
 * set non-zero once its shard map has loaded. */
KN_API int kn_producer_alive(kn_producer_t *kp, int *ready);

/* Stops accepting records, sends everything queued and serves every
 * report (each record is stored or reported failed within its
 * `message.timeout.ms`).  Returns NULL, or the error that kept the shard
 * map from ever loading (records were then reported failed).  Safe to call
 * once; kn_producer_destroy() calls it if needed. */
KN_API kn_error_t *kn_producer_close(kn_producer_t *kp);

/* Accepts NULL.  Without a prior close, records not yet reported are
 * reported with KN_ERR__DESTROY (their delivery callbacks run here). */
KN_API void kn_producer_destroy(kn_producer_t *kp);

/* ---- Delivery reports ----
 * A kn_msg_t and everything it points at are valid only during the
 * delivery callback. */

/* NULL when the record was stored; otherwise why not (KN_ERR__MSG_TIMED_OUT
 * when `message.timeout.ms` ran out, with the last failure in its message). */
KN_API const kn_error_t *kn_msg_error(const kn_msg_t *m);
/* The shard that stored the record (from the PutRecords answer), or NULL. */
KN_API const char *kn_msg_shard_id(const kn_msg_t *m);
/* Decimal sequence number of the Kinesis record holding it, or NULL. */
KN_API const char *kn_msg_sequence_number(const kn_msg_t *m);
/* Its position in the aggregated record (0 when sent plain). */
KN_API uint64_t kn_msg_subsequence_number(const kn_msg_t *m);
/* Non-zero if it was stored inside a KPL aggregate. */
KN_API int kn_msg_aggregated(const kn_msg_t *m);
KN_API const char *kn_msg_partition_key(const kn_msg_t *m);
KN_API const char *kn_msg_explicit_hash_key(const kn_msg_t *m); /* or NULL */
KN_API const void *kn_msg_data(const kn_msg_t *m, size_t *len);
/* PutRecords attempts that carried it. */
KN_API int kn_msg_attempts(const kn_msg_t *m);
/* The opaque given to kn_producer_send. */
KN_API void *kn_msg_opaque(const kn_msg_t *m);

/* Delivery callback, run only inside kn_producer_poll, _flush, _close and
 * _destroy on the calling thread; one call per record.  It may call
 * kn_producer_send but not poll, flush, close or destroy. */
KN_API void kn_conf_set_delivery_cb(kn_conf_t *conf,
                                    void (*cb)(kn_producer_t *kp,
                                               const kn_msg_t *m, void *opaque),
                                    void *opaque);

#ifdef __cplusplus
}
#endif
#endif
