/* Where fan-out's extra CPU per MB goes, in process: the same 1,000 records
 * of 1 KiB of text decoded as a GetRecords body and as a
 * SubscribeToShardEvent fed through the event-stream decoder in network
 * reads of 16 KiB (as ops_subscribe.c does: frame, CRCs, take the frame,
 * decode in place), next to the parts: the message CRC over the frame
 * (the library's and zlib's crc32) and a copy of the frame.
 *
 * Usage: bench_efo_decode [rounds]   (default 200) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "aws/eventstream.h"
#include "kinesis/batch.h"
#include "kinesis/decode_records.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/crc32.h"

#define NREC 1000
#define RECLEN 1024
#define READ_LEN 16384

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The records as JSON members of a Records array, then `tail`. */
static char *records_json(const char *head, const char *tail, size_t *len) {
  static const char words[] =
      "the quick brown fox jumps over the lazy dog 0123456789 ";
  size_t cap = (size_t)NREC * (RECLEN * 2 + 300) + 1024;
  char *body = malloc(cap);
  unsigned char payload[RECLEN];
  unsigned long long rng = 88172645463325252ull;
  size_t k = (size_t)sprintf(body, "%s\"Records\":[", head);
  for (int i = 0; i < NREC; i++) {
    for (int j = 0; j < RECLEN; j++) {
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      payload[j] = (unsigned char)words[rng % (sizeof(words) - 1)];
    }
    k += (size_t)sprintf(
        body + k, "%s{\"PartitionKey\":\"partition-key-%06d\",\"Data\":\"",
        i ? "," : "", i);
    k += kn_base64_encode(body + k, payload, RECLEN);
    k += (size_t)sprintf(
        body + k,
        "\",\"ApproximateArrivalTimestamp\":1795971594.%03d,"
        "\"SequenceNumber\":\"4968068138506349393315871002288%025d\"}",
        i % 1000, i);
  }
  k += (size_t)sprintf(body + k, "]%s", tail);
  *len = k;
  return body;
}

typedef struct sink {
  size_t records, bytes;
  int failed;
} sink_t;

/* What ops_subscribe.c does with a SubscribeToShardEvent. */
static int on_message(void *opaque, kn_evs_decoder_t *d,
                      const kn_evs_msg_t *msg) {
  sink_t *s = opaque;
  uint8_t *frame = kn_evs_take_frame(d);
  kn_batch_t *b = kn_batch_new("s", "shardId-000000000000");
  if (!frame || !b || kn_batch_adopt(b, frame)) {
    s->failed = 1;
    return 1;
  }
  char *payload = (char *)frame + (msg->payload - msg->frame);
  payload[msg->payload_len] = '\0';
  const char *cont = NULL;
  kn_error_t *e = kn_decode_records(b, payload, msg->payload_len,
                                    KN_RECORDS_SUBSCRIBE_EVENT, &cont);
  if (e) {
    fprintf(stderr, "event decode: %s\n", kn_error_string(e));
    kn_error_destroy(e);
    s->failed = 1;
  }
  s->records += kn_batch_count(b);
  s->bytes += b->bytes;
  kn_batch_destroy(b);
  return s->failed;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  if (rounds < 1) rounds = 1;
  const double mb = (double)NREC * RECLEN / 1e6;
  size_t body_len, payload_len;
  char *body =
      records_json("{\"MillisBehindLatest\":0,\"NextShardIterator\":\"AAAA\",",
                   "}", &body_len);
  char *payload = records_json(
      "{",
      ",\"ContinuationSequenceNumber\":\"49680681385063493933158710"
      "02288000000000000000000999\",\"MillisBehindLatest\":0}",
      &payload_len);
  kn_evs_header_t h[3] = {kn_evs_h_str(":message-type", "event"),
                          kn_evs_h_str(":event-type", "SubscribeToShardEvent"),
                          kn_evs_h_str(":content-type", "application/json")};
  kn_buf_t frame = KN_BUF_INIT;
  if (kn_evs_encode(&frame, h, 3, payload, payload_len, NULL)) return 1;
  char *work = malloc(body_len + 1), *copy = malloc(frame.len + 1);
  double best_poll = 1e9, best_efo = 1e9, best_crc = 1e9, best_zcrc = 1e9,
         best_copy = 1e9;
  unsigned long crc_sum = 0;
  for (int r = 0; r < rounds; r++) {
    /* GetRecords: the body is in one buffer already (not timed: the
     * HTTP layer reads it there), decoded in place. */
    memcpy(work, body, body_len + 1);
    double t0 = now_s();
    kn_batch_t *b = kn_batch_new("s", "shardId-000000000000");
    kn_error_t *e =
        kn_decode_records(b, work, body_len, KN_RECORDS_GET_RECORDS, NULL);
    double t1 = now_s();
    if (e || kn_batch_count(b) != NREC) return 1;
    kn_batch_destroy(b);
    if (t1 - t0 < best_poll) best_poll = t1 - t0;

    /* Fan-out: network reads of the frame through the decoder. */
    sink_t s = {0};
    kn_evs_decoder_t *d = kn_evs_decoder_new(0, on_message, &s);
    t0 = now_s();
    for (size_t off = 0; off < frame.len; off += READ_LEN) {
      size_t n = frame.len - off < READ_LEN ? frame.len - off : READ_LEN;
      if (kn_evs_feed(d, frame.p + off, n, NULL)) return 1;
    }
    t1 = now_s();
    kn_evs_decoder_destroy(d);
    if (s.failed || s.records != NREC) return 1;
    if (t1 - t0 < best_efo) best_efo = t1 - t0;

    t0 = now_s();
    crc_sum += kn_crc32(0, frame.p, frame.len);
    t1 = now_s();
    if (t1 - t0 < best_crc) best_crc = t1 - t0;
    t0 = now_s();
    crc_sum += crc32(0, (const Bytef *)frame.p, (uInt)frame.len);
    t1 = now_s();
    if (t1 - t0 < best_zcrc) best_zcrc = t1 - t0;
    t0 = now_s();
    memcpy(copy, frame.p, frame.len);
    t1 = now_s();
    if (t1 - t0 < best_copy) best_copy = t1 - t0;
  }
  printf(
      "records decode, %d x %d B of text, best of %d rounds (ms per MB of "
      "data)\n",
      NREC, RECLEN, rounds);
  printf("  GetRecords body (%.2f MB), in place        %7.3f\n", body_len / 1e6,
         best_poll * 1e3 / mb);
  printf(
      "  SubscribeToShardEvent (%.2f MB frame), %d KiB reads %7.3f  (%.2fx)\n",
      frame.len / 1e6, READ_LEN / 1024, best_efo * 1e3 / mb,
      best_efo / best_poll);
  printf("    of which message CRC (kn_crc32)              %7.3f\n",
         best_crc * 1e3 / mb);
  printf("  (the same CRC by zlib's crc32                  %7.3f)\n",
         best_zcrc * 1e3 / mb);
  printf("    of which one copy of the frame              %7.3f\n",
         best_copy * 1e3 / mb);
  free(work);
  free(copy);
  free(body);
  free(payload);
  kn_buf_free(&frame);
  return crc_sum == 0xFFFFFFFFul; /* keep the CRC from being optimized out */
}
