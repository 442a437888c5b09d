/* SubscribeToShard on the I/O thread (kinesis.h): the streaming call, its
 * event-stream framing, the messages' classification (subscribe_event.c)
 * and the in-place decoding of each event's records into a batch that
 * adopts the frame. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/decode_records.h"
#include "kinesis/encode.h"
#include "kinesis/kinesis.h"
#include "util/str.h"

struct kn_ksub {
  kn_call_t *call;
  kn_evs_decoder_t *dec;
  kn_ksub_cbs_t cbs;
  void *opaque;
  char *stream, *shard_id; /* batch labels */
  kn_error_t *err;         /* what ended it, from inside the stream */
  int draining;            /* the rest is read and dropped */
  int reset;               /* the event callback ended it */
};

void kn_ksub_forget(kn_ksub_t *s) {
  if (!s) return;
  kn_evs_decoder_destroy(s->dec);
  kn_error_destroy(s->err);
  free(s->stream);
  free(s->shard_id);
  free(s);
}

kn_error_t *kn_ksub_cancel(kn_ksub_t *s) {
  if (!s) return NULL;
  kn_call_cancel(s->call);
  kn_error_t *err = s->err;
  s->err = NULL;
  kn_ksub_forget(s);
  return err;
}

void kn_ksub_resume(kn_ksub_t *s) {
  if (s) kn_call_resume(s->call);
}

int kn_ksub_draining(const kn_ksub_t *s) { return s && s->draining; }

/* A SubscribeToShardEvent: its records are decoded in place in the frame,
 * which the batch adopts.  Returns non-zero to stop the decoder. */
static int on_event(kn_ksub_t *s, kn_evs_decoder_t *d,
                    const kn_evs_msg_t *msg) {
  uint8_t *frame = kn_evs_take_frame(d);
  kn_batch_t *b = frame ? kn_batch_new(s->stream, s->shard_id) : NULL;
  if (!b || kn_batch_adopt(b, frame)) {
    if (b) kn_batch_destroy(b);
    free(frame);
    s->err = kn_error_new(KN_ERR__NOMEM, "out of memory");
    return 1;
  }
  char *payload = (char *)frame + (msg->payload - msg->frame);
  payload[msg->payload_len] = '\0'; /* over the message CRC, checked */
  kn_ksub_event_t ev;
  memset(&ev, 0, sizeof(ev));
  kn_error_t *err =
      kn_decode_records(b, payload, msg->payload_len,
                        KN_RECORDS_SUBSCRIBE_EVENT, &ev.continuation);
  if (err) {
    /* The caller subscribes again from the last good continuation. */
    kn_batch_destroy(b);
    s->err = err;
    return 1;
  }
  ev.kind = KN_SUB_EVENT;
  ev.batch = b;
  ev.frame_len = msg->frame_len;
  kn_ksub_action_t a = s->cbs.on_event(s->opaque, &ev);
  if (a == KN_KSUB_DRAIN) s->draining = 1;
  if (a == KN_KSUB_RESET) s->reset = 1;
  return a != KN_KSUB_CONTINUE;
}

static int on_message(void *opaque, kn_evs_decoder_t *d,
                      const kn_evs_msg_t *msg) {
  kn_ksub_t *s = opaque;
  kn_ksub_event_t ev;
  memset(&ev, 0, sizeof(ev));
  kn_error_t *err = NULL;
  kn_err_t code = kn_sub_event_classify(msg, 200, &ev.kind, &err);
  if (code != KN_ERR_NO_ERROR) {
    /* An exception inside the stream (ResourceInUse, ResourceNotFound,
     * ...) or a message that is not of this stream: the server ends the
     * stream after it. */
    s->err = err ? err
                 : kn_error_new(code, "SubscribeToShard: %s", kn_err2str(code));
    s->draining = 1;
    ev.exception = s->err;
    ev.frame_len = msg->frame_len;
    s->cbs.on_event(s->opaque, &ev);
    return 1;
  }
  if (ev.kind == KN_SUB_EVENT) return on_event(s, d, msg);
  /* initial-response, or unknown: nothing to decode */
  ev.frame_len = msg->frame_len;
  kn_ksub_action_t a = s->cbs.on_event(s->opaque, &ev);
  if (a == KN_KSUB_DRAIN) s->draining = 1;
  if (a == KN_KSUB_RESET) s->reset = 1;
  return a != KN_KSUB_CONTINUE;
}

static int on_data(void *opaque, const char *p, size_t n) {
  kn_ksub_t *s = opaque;
  kn_error_t *err = NULL;
  if (s->draining) return 0;
  if (kn_evs_feed(s->dec, p, n, &err) != KN_ERR_NO_ERROR) {
    /* After an exception or the end of the shard the server ends the
     * stream itself: resetting it instead upsets some servers (later
     * requests on the connection fail with framing errors).  A stream
     * that is corrupt, or that the caller ends, is reset. */
    if (s->draining) {
      kn_error_destroy(err);
      return 0;
    }
    if (!s->err && !s->reset)
      s->err = err ? err : kn_error_new(KN_ERR__NOMEM, "out of memory");
    else
      kn_error_destroy(err);
    return -1;
  }
  return s->cbs.on_data && s->cbs.on_data(s->opaque) ? 1 : 0;
}

static void on_done(void *opaque, kn_call_result_t *res) {
  kn_ksub_t *s = opaque;
  s->call = NULL;
  kn_error_t *err = res->err;
  res->err = NULL;
  if (s->err) {
    kn_error_destroy(err);
    err = s->err;
    s->err = NULL;
  }
  void (*on_end)(void *, kn_error_t *) = s->cbs.on_end;
  void *cb_opaque = s->opaque;
  kn_ksub_forget(s);
  on_end(cb_opaque, err);
}

kn_ksub_t *kn_kinesis_subscribe_async(
    kn_svc_t *svc, const char *stream, const char *consumer_arn,
    const char *shard_id, kn_iterator_type_t type, const char *sequence_number,
    int64_t timestamp_ms, const kn_ksub_cbs_t *cbs, void *opaque,
    kn_error_t **errp) {
  *errp = NULL;
  if (!consumer_arn || !shard_id || !cbs || !cbs->on_event || !cbs->on_end) {
    *errp = kn_error_new(KN_ERR__INVALID_ARG,
                         "SubscribeToShard: no consumer, shard or callback");
    return NULL;
  }
  kn_ksub_t *s = calloc(1, sizeof(*s));
  kn_buf_t body = KN_BUF_INIT;
  if (!s || (stream && !(s->stream = strdup(stream))) ||
      !(s->shard_id = strdup(shard_id)) ||
      kn_enc_subscribe_to_shard(&body, consumer_arn, shard_id, type,
                                sequence_number, timestamp_ms) ||
      !(s->dec = kn_evs_decoder_new(0, on_message, s))) {
    kn_buf_free(&body);
    kn_ksub_forget(s);
    *errp = kn_error_new(KN_ERR__NOMEM, "SubscribeToShard: out of memory");
    return NULL;
  }
  s->cbs = *cbs;
  s->opaque = opaque;
  s->call =
      kn_svc_stream(svc, "SubscribeToShard", &body, on_data, on_done, s, errp);
  kn_buf_free(&body);
  if (!s->call) {
    kn_ksub_forget(s);
    if (!*errp)
      *errp = kn_error_new(KN_ERR__NOMEM, "SubscribeToShard: out of memory");
    return NULL;
  }
  return s;
}
