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
 * Only the headers are interpreted here, and the payload of an exception.
 * The payload of a SubscribeToShardEvent is left to the records decoder,
 * kn_decode_records(..., KN_RECORDS_SUBSCRIBE_EVENT, &continuation) in
 * kinesis/decode_records.h, which reads it in place in one pass: records,
 * continuation, MillisBehindLatest, child shards, and shard end when there
 * is no continuation (AWS sends none, and the child shards, once the
 * shard is closed and every record delivered; kinesis-local never says
 * so). */
#ifndef KN_KINESIS_SUBSCRIBE_EVENT_H
#define KN_KINESIS_SUBSCRIBE_EVENT_H

#include <stddef.h>

#include "aws/eventstream.h"
#include "kn/error.h"

typedef enum kn_sub_kind {
  KN_SUB_INITIAL_RESPONSE = 1,
  KN_SUB_EVENT,      /* SubscribeToShardEvent: decode its payload */
  KN_SUB_OTHER_EVENT /* an event type not known here: skip it */
} kn_sub_kind_t;

/* Interprets the headers of one message without reading the payload of
 * an event.  http_status is the stream's response status (200), recorded
 * in errors.  Returns
 *   KN_ERR_NO_ERROR     *kind set;
 *   a remote code       for an exception or error message, mapped from its
 *                       type (ResourceInUseException -> KN_ERR_RESOURCE_IN_USE,
 *                       ...) with kn_error_remote(); the text is the
 *                       "message" of an exception's JSON payload, or the
 *                       payload itself cut short;
 *   KN_ERR__BAD_MSG     not a message of this stream (no string
 *                       :message-type, an unknown one, an event without
 *                       :event-type);
 *   KN_ERR__NOMEM.
 * On error *errp (when errp is not NULL) gets an error the caller
 * destroys. */
kn_err_t kn_sub_event_classify(const kn_evs_msg_t *msg, int http_status,
                               kn_sub_kind_t *kind, kn_error_t **errp);

#endif
