/* evstream_tool: the event stream codec from the command line, for the
 * interoperability tests and for measuring speed.
 *
 *   evstream_tool decode [SEED [MAXCHUNK]]  < frames > dump
 *       Feeds stdin to the decoder in pieces of random sizes (mostly
 *       1..MAXCHUNK, default 4096, chosen from SEED) and prints every
 *       message in the dump format below.  A decoder error prints
 *       "error NAME: text" and exits 1.
 *   evstream_tool encode  < dump > frames
 *       Encodes the messages of a dump.
 *   evstream_tool bench [MB [FRAME_KB]]
 *       Decode throughput of FRAME_KB frames fed in 16 KiB pieces (as
 *       HTTP delivers them) and whole, and with the records of each
 *       SubscribeToShardEvent decoded as the fan-out reader does.
 *
 * Dump format, one line each:
 *   message N_HEADERS PAYLOAD_LEN
 *   header NAME_HEX TYPE VALUE     (N_HEADERS times, in wire order)
 *   payload HEX
 * TYPE is bool, byte, short, int, long, bytes, string, timestamp or uuid;
 * VALUE is 1/0 for bool, decimal for numbers and timestamps, hex for bytes,
 * strings and UUIDs.  Empty hex is written "-". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aws/eventstream.h"
#include "core/error.h"
#include "kinesis/batch.h"
#include "kinesis/decode_records.h"
#include "kinesis/subscribe_event.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/hex.h"

static int read_all(FILE *f, kn_buf_t *b) {
  char tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
    if (kn_buf_append(b, tmp, n)) return -1;
  return ferror(f) ? -1 : 0;
}

static void put_hex(FILE *out, const uint8_t *p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  if (!n) {
    fputc('-', out);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    fputc(digits[p[i] >> 4], out);
    fputc(digits[p[i] & 15], out);
  }
}

static int dump_msg(void *opaque, kn_evs_decoder_t *d, const kn_evs_msg_t *m) {
  (void)d;
  FILE *out = opaque;
  fprintf(out, "message %zu %zu\n", m->n_headers, m->payload_len);
  for (size_t i = 0; i < m->n_headers; i++) {
    const kn_evs_header_t *h = &m->headers[i];
    fputs("header ", out);
    put_hex(out, (const uint8_t *)h->name, h->name_len);
    fprintf(out, " %s ", kn_evs_type_name(h->type));
    if (h->val)
      put_hex(out, h->val, h->val_len);
    else
      fprintf(out, "%lld", (long long)h->num);
    fputc('\n', out);
  }
  fputs("payload ", out);
  put_hex(out, m->payload, m->payload_len);
  fputc('\n', out);
  return 0;
}

static uint64_t rng_state;
static uint64_t rng(void) {
  /* xorshift64*: reproducible from the seed, unlike kn_rand_u64(). */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static int cmd_decode(int argc, char **argv) {
  rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) * 2 + 1 : 1;
  size_t max_chunk = argc > 3 ? strtoull(argv[3], NULL, 10) : 4096;
  if (!max_chunk) max_chunk = 1;
  kn_buf_t in = KN_BUF_INIT;
  if (read_all(stdin, &in)) {
    fprintf(stderr, "evstream_tool: cannot read stdin\n");
    return 2;
  }
  kn_evs_decoder_t *d = kn_evs_decoder_new(0, dump_msg, stdout);
  kn_error_t *e = NULL;
  kn_err_t err = KN_ERR_NO_ERROR;
  for (size_t off = 0; off < in.len && !err;) {
    /* Mostly pieces up to max_chunk, now and then a much larger one that
     * holds whole frames. */
    size_t n = 1 + rng() % (rng() % 32 ? max_chunk : max_chunk * 256);
    if (n > in.len - off) n = in.len - off;
    err = kn_evs_feed(d, in.p + off, n, &e);
    off += n;
  }
  if (!err) err = kn_evs_finish(d, &e);
  if (err) printf("error %s: %s\n", kn_err2name(err), kn_error_string(e));
  kn_error_destroy(e);
  kn_evs_decoder_destroy(d);
  kn_buf_free(&in);
  return err ? 1 : 0;
}

/* ---- encode ---- */

static const struct {
  const char *name;
  kn_evs_type_t type;
} type_names[] = {{"byte", KN_EVS_BYTE},
                  {"short", KN_EVS_SHORT},
                  {"int", KN_EVS_INT},
                  {"long", KN_EVS_LONG},
                  {"bytes", KN_EVS_BYTES},
                  {"string", KN_EVS_STRING},
                  {"timestamp", KN_EVS_TIMESTAMP},
                  {"uuid", KN_EVS_UUID}};

/* Decodes hex ("-" is empty) into a new allocation. */
static uint8_t *unhex(const char *s, size_t *n) {
  if (strcmp(s, "-") == 0) s = "";
  size_t len = strlen(s);
  uint8_t *p = malloc(len / 2 + 1);
  if (!p || len % 2 || kn_hex_decode(p, s, len / 2)) {
    free(p);
    return NULL;
  }
  *n = len / 2;
  return p;
}

typedef struct spec {
  kn_evs_header_t *h;
  uint8_t **owned; /* names and values to free */
  size_t n, n_owned;
} spec_t;

static void spec_clear(spec_t *s) {
  for (size_t i = 0; i < s->n_owned; i++) free(s->owned[i]);
  free(s->h);
  free(s->owned);
  memset(s, 0, sizeof(*s));
}

static int own(spec_t *s, uint8_t *p) {
  uint8_t **o = realloc(s->owned, (s->n_owned + 1) * sizeof(*o));
  if (!o) return -1;
  s->owned = o;
  s->owned[s->n_owned++] = p;
  return 0;
}

/* Parses "NAME_HEX TYPE VALUE" into the next header. */
static int parse_header(spec_t *s, char *line) {
  char *name = strtok(line, " "), *type = strtok(NULL, " "),
       *value = strtok(NULL, " \n");
  if (!name || !type || !value) return -1;
  kn_evs_header_t *h = realloc(s->h, (s->n + 1) * sizeof(*h));
  if (!h) return -1;
  s->h = h;
  h = &s->h[s->n];
  memset(h, 0, sizeof(*h));
  uint8_t *nm = unhex(name, &h->name_len);
  if (!nm || own(s, nm)) {
    free(nm);
    return -1;
  }
  h->name = (const char *)nm;
  if (strcmp(type, "bool") == 0) {
    h->type = atoi(value) ? KN_EVS_BOOL_TRUE : KN_EVS_BOOL_FALSE;
    h->num = atoi(value) ? 1 : 0;
  } else {
    size_t i = 0;
    while (i < sizeof(type_names) / sizeof(type_names[0]) &&
           strcmp(type_names[i].name, type) != 0)
      i++;
    if (i == sizeof(type_names) / sizeof(type_names[0])) return -1;
    h->type = type_names[i].type;
    if (h->type == KN_EVS_BYTES || h->type == KN_EVS_STRING ||
        h->type == KN_EVS_UUID) {
      uint8_t *v = unhex(value, &h->val_len);
      if (!v || own(s, v)) {
        free(v);
        return -1;
      }
      h->val = v;
    } else {
      h->num = strtoll(value, NULL, 10);
    }
  }
  s->n++;
  return 0;
}

static int cmd_encode(void) {
  kn_buf_t in = KN_BUF_INIT, out = KN_BUF_INIT;
  if (read_all(stdin, &in)) return 2;
  spec_t s = {0};
  int rc = 0, line_no = 0;
  for (char *line = in.p, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    line_no++;
    if (strncmp(line, "message ", 8) == 0) {
      spec_clear(&s);
    } else if (strncmp(line, "header ", 7) == 0) {
      if (parse_header(&s, line + 7)) {
        fprintf(stderr, "evstream_tool: bad header on line %d\n", line_no);
        rc = 2;
        break;
      }
    } else if (strncmp(line, "payload ", 8) == 0) {
      size_t plen;
      uint8_t *p = unhex(line + 8, &plen);
      kn_error_t *e = NULL;
      if (!p || kn_evs_encode(&out, s.h, s.n, p, plen, &e)) {
        fprintf(stderr, "evstream_tool: line %d: %s\n", line_no,
                e ? kn_error_string(e) : "bad payload");
        kn_error_destroy(e);
        free(p);
        rc = 2;
        break;
      }
      free(p);
      spec_clear(&s);
    } else if (*line) {
      fprintf(stderr, "evstream_tool: bad line %d\n", line_no);
      rc = 2;
      break;
    }
  }
  spec_clear(&s);
  if (!rc && fwrite(out.p, 1, out.len, stdout) != out.len) rc = 2;
  kn_buf_free(&in);
  kn_buf_free(&out);
  return rc;
}

/* ---- bench ---- */

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

typedef struct bench_sink {
  size_t bytes, frames, records;
  int parse;
} bench_sink_t;

static int bench_msg(void *opaque, kn_evs_decoder_t *d, const kn_evs_msg_t *m) {
  bench_sink_t *s = opaque;
  s->bytes += m->payload_len;
  s->frames++;
  if (s->parse) {
    /* As the fan-out reader: classify, take the frame, decode the payload
     * in place (terminated over the message CRC) into a batch. */
    kn_sub_kind_t kind;
    if (kn_sub_event_classify(m, 200, &kind, NULL) != KN_ERR_NO_ERROR ||
        kind != KN_SUB_EVENT)
      return 0;
    uint8_t *f = kn_evs_take_frame(d);
    kn_batch_t *b = f ? kn_batch_new("bench", "shardId-000000000000") : NULL;
    if (!b || kn_batch_adopt(b, f)) {
      free(f);
      kn_batch_destroy(b);
      return 1;
    }
    char *payload = (char *)f + (m->payload - m->frame);
    payload[m->payload_len] = '\0';
    kn_error_t *e = kn_decode_records(b, payload, m->payload_len,
                                      KN_RECORDS_SUBSCRIBE_EVENT, NULL);
    if (!e) s->records += kn_batch_count(b);
    kn_error_destroy(e);
    kn_batch_destroy(b);
  }
  return 0;
}

/* A SubscribeToShardEvent payload of about size bytes of 1 KB records. */
static void make_event(kn_buf_t *p, size_t size) {
  kn_buf_append_str(p, "{\"Records\":[");
  char data[1368 + 1];
  for (size_t i = 0; i < sizeof(data) - 1; i++)
    data[i] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[i *
                                                                           7 %
                                                                           64];
  data[sizeof(data) - 1] = 0;
  for (int i = 0; p->len < size; i++)
    kn_buf_printf(p,
                  "%s{\"SequenceNumber\":\"4968068133154170545668521448319"
                  "%025d\",\"ApproximateArrivalTimestamp\":1700000000.123,"
                  "\"Data\":\"%s\",\"PartitionKey\":\"pk-%d\","
                  "\"EncryptionType\":\"NONE\"}",
                  i ? "," : "", i, data, i);
  kn_buf_append_str(p,
                    "],\"ContinuationSequenceNumber\":\"49680681331541705456"
                    "685214483199093715879666769899552770\","
                    "\"MillisBehindLatest\":0,\"ChildShards\":null}");
}

static int cmd_bench(int argc, char **argv) {
  size_t mb = argc > 2 ? strtoull(argv[2], NULL, 10) : 512;
  size_t frame_kb = argc > 3 ? strtoull(argv[3], NULL, 10) : 1024;
  kn_buf_t payload = KN_BUF_INIT, frame = KN_BUF_INIT;
  make_event(&payload, frame_kb * 1024);
  kn_evs_header_t hs[] = {
      kn_evs_h_str(":message-type", "event"),
      kn_evs_h_str(":event-type", "SubscribeToShardEvent"),
      kn_evs_h_str(":content-type", "application/json"),
  };
  if (kn_evs_encode(&frame, hs, 3, payload.p, payload.len, NULL)) return 2;
  size_t reps = mb * 1024 * 1024 / frame.len + 1;
  static const struct {
    const char *what;
    size_t piece;
    int parse;
  } runs[] = {{"decode, 16 KiB pieces", 16384, 0},
              {"decode, whole frames", 0, 0},
              {"decode + records, 16 KiB pieces", 16384, 1}};
  for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
    bench_sink_t s = {0, 0, 0, runs[r].parse};
    kn_evs_decoder_t *d = kn_evs_decoder_new(0, bench_msg, &s);
    size_t piece = runs[r].piece ? runs[r].piece : frame.len;
    double t0 = cpu_s();
    int64_t w0 = kn_mono_us();
    for (size_t i = 0; i < reps; i++)
      for (size_t off = 0; off < frame.len; off += piece)
        kn_evs_feed(d, frame.p + off,
                    frame.len - off < piece ? frame.len - off : piece, NULL);
    double cpu = cpu_s() - t0;
    double wall = (double)(kn_mono_us() - w0) / 1e6;
    double total_mb = (double)(reps * frame.len) / (1024.0 * 1024.0);
    printf("%-40s %zu frames of %zu KiB: %.0f MB/s (cpu), %.0f MB/s (wall)",
           runs[r].what, s.frames, frame.len / 1024, total_mb / cpu,
           total_mb / wall);
    if (runs[r].parse) printf(", %zu records", s.records);
    printf("\n");
    kn_evs_decoder_destroy(d);
  }
  kn_buf_free(&payload);
  kn_buf_free(&frame);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "decode") == 0) return cmd_decode(argc, argv);
  if (argc > 1 && strcmp(argv[1], "encode") == 0) return cmd_encode();
  if (argc > 1 && strcmp(argv[1], "bench") == 0) return cmd_bench(argc, argv);
  fprintf(stderr,
          "usage: evstream_tool decode [SEED [MAXCHUNK]] | encode | "
          "bench [MB [FRAME_KB]]\n");
  return 2;
}
