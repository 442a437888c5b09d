/* Messages of a SubscribeToShard response stream (enhanced fan-out).
 *
 * Each event stream message is one of
 *   :message-type event, :event-type initial-response   (AWS; kinesis-local
 *                                                         sends none)
 *   :message-type event, :event-type SubscribeToShardEvent, JSON payload
 *     {"Records":[...],"ContinuationSequenceNumber":"...",
 *      "MillisBehindLatest":N,"ChildShards":[...]}
 *   :message-type exception, :exception-type T, JSON {"message":"..."}
 *   :message-type error, :error-code C, :error-message M
 *
 * Only the scalars of an event are read here, with a validating scanner
 * that does not build a tree (an event can hold megabytes of records).
 * The Records array has the shape of GetRecords records and is handed on
 * as a span for the records decoder; ChildShards likewise. */
#ifndef KN_KINESIS_SUBSCRIBE_EVENT_H
#define KN_KINESIS_SUBSCRIBE_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "aws/eventstream.h"
#include "kn/error.h"

typedef enum kn_sub_kind {
  KN_SUB_INITIAL_RESPONSE = 1,
  KN_SUB_EVENT,       /* SubscribeToShardEvent: the fields below are set */
  KN_SUB_OTHER_EVENT  /* an event type not known here: skip it */
} kn_sub_kind_t;

/* Every pointer points into the message's payload (msg->payload), so it
 * is valid as long as those bytes are; after kn_evs_take_frame() find the
 * same spans at the same offsets from msg->frame in the taken buffer.
 * Nothing is NUL-terminated. */
typedef struct kn_sub_event {
  kn_sub_kind_t kind;
  const char *payload;      /* the whole JSON payload */
  size_t payload_len;
  /* KN_SUB_EVENT only. */
  const char *records;      /* the Records array, '[' to ']'; NULL if absent */
  size_t records_len;
  size_t n_records;
  const char *cont_seq;     /* ContinuationSequenceNumber (decimal digits);
                               NULL when null or absent */
  size_t cont_seq_len;
  int64_t millis_behind;    /* MillisBehindLatest; -1 when null or absent */
  const char *child_shards; /* the ChildShards array; NULL when null or absent */
  size_t child_shards_len;
  size_t n_child_shards;
  /* The shard is closed and every record has been delivered: AWS sends no
   * continuation then (and the child shards).  kinesis-local never says
   * so; see LAB.md. */
  int shard_end;
} kn_sub_event_t;

/* Interprets one message.  http_status is the stream's response status
 * (200), recorded in errors.  Returns
 *   KN_ERR_NO_ERROR     *ev filled;
 *   a remote code       for an exception or error message, mapped from its
 *                       type (ResourceInUseException -> KN_ERR_RESOURCE_IN_USE,
 *                       ...) with kn_error_remote();
 *   KN_ERR__BAD_MSG     not a message of this stream (no :message-type, an
 *                       event whose payload is not the documented JSON);
 *   KN_ERR__NOMEM.
 * On error *errp (when errp is not NULL) gets an error the caller
 * destroys. */
kn_err_t kn_sub_event_parse(const kn_evs_msg_t *msg, int http_status,
                            kn_sub_event_t *ev, kn_error_t **errp);

/* The same without reading the payload of a SubscribeToShardEvent: only
 * the kind, or the error of an exception or error message.  For a caller
 * whose records decoder walks the whole event payload itself (the scan
 * above costs one more pass over the records). */
kn_err_t kn_sub_event_classify(const kn_evs_msg_t *msg, int http_status,
                               kn_sub_kind_t *kind, kn_error_t **errp);

#endif
