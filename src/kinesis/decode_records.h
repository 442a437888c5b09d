/* The decoder of record responses: GetRecords bodies and the JSON payload
 * of SubscribeToShardEvent.  It is the consume hot path, so it parses by
 * hand and in place: record data is base64-decoded where it lies, string
 * escapes are resolved where they lie, and records point into the body.
 *
 * Strict JSON (RFC 8259) in any member order with any white space; unknown
 * members are skipped whatever their value; explicit nulls count as absent;
 * numbers in any JSON form (MillisBehindLatest must be a whole number, not
 * negative).  Malformed input gives KN_ERR__BAD_MSG and is
 * never read out of bounds.  Pure: no I/O. */
#ifndef KN_KINESIS_DECODE_RECORDS_H
#define KN_KINESIS_DECODE_RECORDS_H

#include <stddef.h>

#include "kinesis/batch.h"
#include "kinesis/jscan.h"
#include "kn/error.h"

typedef enum kn_records_kind {
  KN_RECORDS_GET_RECORDS = 0, /* the shard ended when no NextShardIterator */
  KN_RECORDS_SUBSCRIBE_EVENT  /* ... when no ContinuationSequenceNumber */
} kn_records_kind_t;

/* Decodes body[0..len) into b: appends its records and sets
 * b->next_iterator (a malloc'ed copy), b->millis_behind, b->children (a
 * new list, when the response has ChildShards) and b->shard_end.
 *
 * body[len] must be '\0' (a kn_buf_t always is) and body must be writable:
 * it is rewritten, and the records point into it, so the caller adopts it
 * into the batch (kn_batch_adopt) or keeps it alive longer than the batch.
 * For events, *continuation (when not NULL) gets ContinuationSequenceNumber
 * inside body, or NULL.
 *
 * On failure the batch may hold part of the records: destroy it. */
kn_error_t *kn_decode_records(kn_batch_t *b, char *body, size_t len,
                              kn_records_kind_t kind,
                              const char **continuation);

#endif
