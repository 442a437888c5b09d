/* libFuzzer target: the event stream decoder and SubscribeToShard messages
 * read as the fan-out reader reads them (kn_sub_event_classify, then
 * kn_decode_records for an event).  The first byte picks what the rest
 * is:
 *   mode 0: a raw byte stream, decoded whole and in pieces (sizes from the
 *           second byte); both must agree, and every message must encode
 *           back to its exact frame;
 *   mode 1: a headers block (u16 length first) and a payload, framed here
 *           with valid CRCs so that header parsing is reached;
 *   mode 2: a SubscribeToShardEvent JSON payload, framed with the usual
 *           headers, so that the records decoder is reached.  Events are
 *           decoded from a copy of the payload and, when the frame is
 *           taken, in place in it as the reader does; both must agree.
 * A disagreement traps; memory errors are the sanitizers' to find. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "aws/eventstream.h"
#include "core/error.h"
#include "kinesis/batch.h"
#include "kinesis/decode_records.h"
#include "kinesis/seqnum.h"
#include "kinesis/shard.h"
#include "kinesis/subscribe_event.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FRAME (256 * 1024)

typedef struct run {
  uint32_t digest; /* CRC of everything delivered, in order */
  size_t frames;
  size_t take_every;
} run_t;

/* What decoding an event gave, to compare two decodings. */
typedef struct event {
  int done;
  kn_err_t err;
  size_t records, bytes, children;
  int shard_end;
  int64_t millis;
  uint32_t cont_digest; /* CRC of the continuation, 0 without one */
} event_t;

/* Decodes an event payload body[0..len) (body[len] is '\0') into a batch
 * that adopts block, and checks what the batch holds: every pointer
 * inside the body, valid sequence numbers, the counts adding up, shard
 * end exactly when there is no continuation. */
static void check_event_in(void *block, char *body, size_t len, event_t *out) {
  kn_batch_t *b = kn_batch_new("s", "shardId-000000000000");
  if (!b || kn_batch_adopt(b, block)) {
    free(block);
    kn_batch_destroy(b);
    return;
  }
  const char *cont = "unset";
  kn_error_t *e =
      kn_decode_records(b, body, len, KN_RECORDS_SUBSCRIBE_EVENT, &cont);
  const char *lo = body, *hi = body + len;
  out->done = 1;
  if (e) {
    out->err = kn_error_code(e);
    if (out->err != KN_ERR__BAD_MSG && out->err != KN_ERR__NOMEM)
      __builtin_trap();
    if (!kn_error_string(e) || cont != NULL) __builtin_trap();
    kn_error_destroy(e);
    kn_batch_destroy(b);
    return;
  }
  if (cont) {
    size_t n = strlen(cont);
    if (cont < lo || cont + n > hi || !kn_seqnum_valid(cont, n))
      __builtin_trap();
    out->cont_digest =
        (uint32_t)crc32(crc32(0, NULL, 0), (const Bytef *)cont, (uInt)n) | 1;
  }
  if (kn_batch_shard_end(b) != (cont == NULL)) __builtin_trap();
  if (kn_batch_millis_behind(b) < -1) __builtin_trap();
  size_t bytes = 0;
  for (size_t i = 0; i < kn_batch_count(b); i++) {
    const kn_record_t *rec = kn_batch_record(b, i);
    size_t dlen;
    const char *data = kn_record_data(rec, &dlen);
    const char *pk = kn_record_partition_key(rec);
    const char *seq = kn_record_sequence_number(rec);
    if (!data || data < lo || dlen > (size_t)(hi - data)) __builtin_trap();
    /* A record without a key (service-placed streams) has "" of its own. */
    if (!pk || (*pk && (pk < lo || pk + strlen(pk) > hi))) __builtin_trap();
    if (!seq || seq < lo || seq + strlen(seq) > hi ||
        !kn_seqnum_valid(seq, strlen(seq)))
      __builtin_trap();
    bytes += dlen;
  }
  if (bytes != b->bytes) __builtin_trap();
  const kn_shard_list_t *cl = kn_batch_child_shards(b);
  if (cl && kn_shard_list_count(cl) == 0) __builtin_trap();
  for (size_t i = 0; cl && i < kn_shard_list_count(cl); i++) {
    const char *id = kn_shard_id(kn_shard_list_get(cl, i));
    if (!id || !*id) __builtin_trap();
  }
  out->records = kn_batch_count(b);
  out->bytes = bytes;
  out->children = cl ? kn_shard_list_count(cl) : 0;
  out->shard_end = kn_batch_shard_end(b);
  out->millis = kn_batch_millis_behind(b);
  kn_batch_destroy(b);
}

static void check_event(char *body, size_t len, event_t *out) {
  check_event_in(body, body, len, out);
}

static int on_msg(void *opaque, kn_evs_decoder_t *d, const kn_evs_msg_t *m) {
  run_t *r = opaque;
  r->frames++;
  r->digest = (uint32_t)crc32(r->digest, m->frame, (uInt)m->frame_len);

  /* Headers and payload encode back to the same frame. */
  kn_buf_t b = KN_BUF_INIT;
  if (kn_evs_encode(&b, m->headers, m->n_headers, m->payload, m->payload_len,
                    NULL) == KN_ERR_NO_ERROR &&
      (b.len != m->frame_len || memcmp(b.p, m->frame, b.len) != 0))
    __builtin_trap();
  kn_buf_free(&b);

  for (size_t i = 0; i < m->n_headers; i++)
    if (m->headers[i].name_len > 255 ||
        (m->headers[i].val && m->headers[i].val_len > 65535))
      __builtin_trap();

  kn_sub_kind_t kind = 0;
  kn_error_t *e = NULL;
  kn_err_t err = kn_sub_event_classify(m, 200, &kind, &e);
  if ((err != KN_ERR_NO_ERROR) != (e != NULL)) __builtin_trap();
  if (e && !kn_error_string(e)) __builtin_trap();
  kn_error_destroy(e);
  int is_event = !err && kind == KN_SUB_EVENT;
  event_t copied = {0}, in_place = {0};
  if (is_event) {
    /* A writable, terminated copy of the payload, kept by the batch. */
    kn_buf_t copy = KN_BUF_INIT;
    if (kn_buf_reserve(&copy, m->payload_len) == 0 &&
        kn_buf_append(&copy, m->payload, m->payload_len) == 0) {
      size_t len;
      char *body = kn_buf_steal(&copy, &len);
      check_event(body, len, &copied);
    }
    kn_buf_free(&copy);
  }

  if (r->take_every && (r->frames - 1) % r->take_every == 0) {
    uint8_t *f = kn_evs_take_frame(d);
    if (f && memcmp(f, m->frame, m->frame_len) != 0) __builtin_trap();
    if (f && is_event) {
      /* The payload is terminated over the message CRC, already checked. */
      char *body = (char *)f + (m->payload - m->frame);
      body[m->payload_len] = '\0';
      check_event_in(f, body, m->payload_len, &in_place);
      if (copied.done && in_place.done &&
          (copied.err != in_place.err || copied.records != in_place.records ||
           copied.bytes != in_place.bytes ||
           copied.shard_end != in_place.shard_end ||
           copied.millis != in_place.millis ||
           copied.children != in_place.children ||
           copied.cont_digest != in_place.cont_digest))
        __builtin_trap();
    } else {
      free(f);
    }
  }
  return 0;
}

static kn_err_t decode(const uint8_t *p, size_t n, size_t piece, run_t *r) {
  kn_evs_decoder_t *d = kn_evs_decoder_new(MAX_FRAME, on_msg, r);
  if (!d) return KN_ERR__NOMEM;
  kn_err_t err = KN_ERR_NO_ERROR;
  kn_error_t *e = NULL;
  for (size_t off = 0; off < n && !err; off += piece) {
    err = kn_evs_feed(d, p + off, n - off < piece ? n - off : piece, &e);
    if ((err != KN_ERR_NO_ERROR) != (e != NULL)) __builtin_trap();
    kn_error_destroy(e);
    e = NULL;
  }
  if (!err) {
    err = kn_evs_finish(d, &e);
    kn_error_destroy(e);
  }
  kn_evs_decoder_destroy(d);
  return err;
}

static void check_stream(const uint8_t *p, size_t n, unsigned piece_seed) {
  run_t whole = {0, 0, 0}, parts = {0, 0, 3};
  kn_err_t e1 = decode(p, n, n ? n : 1, &whole);
  kn_err_t e2 = decode(p, n, 1 + piece_seed % 23, &parts);
  if (e1 != e2 || whole.frames != parts.frames || whole.digest != parts.digest)
    __builtin_trap();
}

static void put32(uint8_t *o, uint32_t v) {
  o[0] = (uint8_t)(v >> 24);
  o[1] = (uint8_t)(v >> 16);
  o[2] = (uint8_t)(v >> 8);
  o[3] = (uint8_t)v;
}

/* Frames a raw headers block and payload with correct lengths and CRCs. */
static void frame_raw(const uint8_t *p, size_t n, unsigned piece_seed) {
  if (n < 2) return;
  size_t hlen = (size_t)p[0] << 8 | p[1];
  p += 2;
  n -= 2;
  if (hlen > n) hlen = n;
  size_t total = 16 + n;
  uint8_t *f = malloc(total);
  if (!f) return;
  put32(f, (uint32_t)total);
  put32(f + 4, (uint32_t)hlen);
  put32(f + 8, (uint32_t)crc32(crc32(0, NULL, 0), f, 8));
  memcpy(f + 12, p, n);
  put32(f + total - 4,
        (uint32_t)crc32(crc32(0, NULL, 0), f, (uInt)(total - 4)));
  check_stream(f, total, piece_seed);
  free(f);
}

static void frame_event(const uint8_t *p, size_t n, unsigned piece_seed) {
  kn_evs_header_t hs[] = {
      kn_evs_h_str(":message-type", "event"),
      kn_evs_h_str(":event-type", "SubscribeToShardEvent"),
      kn_evs_h_str(":content-type", "application/json"),
  };
  kn_buf_t b = KN_BUF_INIT;
  if (kn_evs_encode(&b, hs, 3, p, n, NULL) == KN_ERR_NO_ERROR)
    check_stream((const uint8_t *)b.p, b.len, piece_seed);
  kn_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  unsigned mode = data[0] % 3, piece_seed = data[1];
  data += 2;
  size -= 2;
  if (mode == 0)
    check_stream(data, size, piece_seed);
  else if (mode == 1)
    frame_raw(data, size, piece_seed);
  else
    frame_event(data, size, piece_seed);
  return 0;
}
