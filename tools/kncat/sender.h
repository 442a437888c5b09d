/* Delivery side of produce: batches records into PutRecords calls and
 * retries the entries the service rejected.
 *
 * Kept apart from the input parsing (reader.c, cmd_produce.c) so that it
 * can be replaced by the library's asynchronous producer without touching
 * how input is read.
 *
 * Order per partition key: a PutRecords call may accept a key's later
 * record and reject an earlier one (a partial failure, typically a
 * throttled shard); the rejected one then lands after it, and no client
 * can undo that.  The sender never adds to it: rejected records are sent
 * again first, in their original order, ahead of every newer record, and
 * a newer record of a key that is being retried waits for a later call
 * rather than riding along with its retry (which could fail again while
 * the newer record succeeds). */
#ifndef KNCAT_SENDER_H
#define KNCAT_SENDER_H

#include <stddef.h>
#include <stdint.h>

#include "kn/client.h"

/* Limits of PutRecords. */
#define KC_PUT_MAX_RECORDS 500
#define KC_PUT_MAX_BYTES (5u * 1024 * 1024)  /* keys and data of one call */
#define KC_RECORD_MAX_BYTES (1024u * 1024)   /* key and data of one record */
#define KC_KEY_MAX_CHARS 256

typedef struct kc_sender_cfg {
  int max_attempts;   /* per record, the first included */
  int backoff_ms;     /* first retry delay; doubles each time */
  int backoff_max_ms; /* ceiling of the delay */
  /* Called for each record finally not delivered (recno counts from 1). */
  void (*on_failed)(void *opaque, uint64_t recno, const char *code,
                    const char *message);
  void *opaque;
} kc_sender_cfg_t;

typedef struct kc_sender_stats {
  uint64_t sent, failed, retries, calls;
} kc_sender_stats_t;

typedef struct kc_sender kc_sender_t;

/* client and stream must outlive the sender. */
kc_sender_t *kc_sender_new(kn_client_t *client, const char *stream,
                           const kc_sender_cfg_t *cfg);
void kc_sender_destroy(kc_sender_t *s);

/* Queues a record (copied; key: 1 to 256 characters, checked by the
 * caller), sending calls as batches fill up.  0, or -1 once a call failed
 * as a whole (see kc_sender_error()); queued records then count as failed. */
int kc_sender_add(kc_sender_t *s, uint64_t recno, const char *key,
                  size_t key_len, const void *data, size_t len);
/* Sends everything queued, retries included.  0 or -1 as above. */
int kc_sender_flush(kc_sender_t *s);
/* The error of the call that failed as a whole, or NULL.  Owned by the
 * sender. */
const kn_error_t *kc_sender_error(const kc_sender_t *s);
/* Counts a record that never reached the sender (too large, bad key). */
void kc_sender_count_failed(kc_sender_t *s);
const kc_sender_stats_t *kc_sender_stats(const kc_sender_t *s);

#endif
