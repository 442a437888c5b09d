/* produce: delimited records from a file or standard input to a stream.
 * This file turns input into (key, payload) records; sender.c delivers
 * them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "kncat.h"
#include "output.h"
#include "reader.h"
#include "sender.h"
#include "signals.h"

/* Individual failures reported before going quiet (the summary still
 * counts them all). */
#define MAX_FAILURE_LINES 10

typedef struct produce {
  kc_ctx_t *ctx;
  char delim[64], key_delim[64];
  size_t delim_len, key_delim_len;
  const char *key; /* -k */
  int aggregate;
  uint64_t failure_lines;
  uint64_t rng;
} produce_t;

static int on_opt(void *st, int id, const char *arg) {
  produce_t *p = st;
  switch (id) {
    case 'D':
      if (kc_parse_delim(arg, p->delim, sizeof(p->delim), &p->delim_len))
        return kc_usage_error(p->ctx, "bad delimiter \"%s\"", arg);
      return KC_GO_ON;
    case 'K':
      if (kc_parse_delim(arg, p->key_delim, sizeof(p->key_delim),
                         &p->key_delim_len))
        return kc_usage_error(p->ctx, "bad key delimiter \"%s\"", arg);
      return KC_GO_ON;
    case 'k': p->key = arg; return KC_GO_ON;
    case KC_OPT_AGGREGATE: p->aggregate = 1; return KC_GO_ON;
    default: return kc_usage_error(p->ctx, "unexpected option");
  }
}

static void failure_line(produce_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void failure_line(produce_t *p, const char *fmt, ...) {
  if (p->failure_lines++ >= MAX_FAILURE_LINES) {
    if (p->failure_lines == MAX_FAILURE_LINES + 1)
      kc_errorf(p->ctx, "more records not delivered; see the summary");
    return;
  }
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  kc_errorf(p->ctx, "%s", msg);
}

static void on_failed(void *opaque, uint64_t recno, const char *code,
                      const char *message) {
  failure_line(opaque, "record %llu not delivered: %s%s%s",
               (unsigned long long)recno, code, message ? ": " : "",
               message ? message : "");
}

/* A fresh random key per record spreads records evenly over the shards
 * (the shard is chosen by the MD5 of the key). */
static size_t random_key(produce_t *p, char *buf) {
  uint64_t z = (p->rng += 0x9E3779B97F4A7C15ULL); /* splitmix64 */
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  static const char hex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; i--, z >>= 4) buf[i] = hex[z & 15];
  buf[16] = '\0';
  return 16;
}

/* Why key cannot be a partition key, or NULL: 1 to 256 Unicode
 * characters of valid UTF-8, and no NUL (keys travel as C strings). */
static const char *key_problem(const char *key, size_t n) {
  if (n == 0) return "is empty";
  if (memchr(key, '\0', n)) return "contains a NUL byte";
  if (!kc_utf8_valid((const uint8_t *)key, n)) return "is not valid UTF-8";
  size_t chars = 0;
  for (size_t i = 0; i < n; i++) chars += ((uint8_t)key[i] & 0xC0) != 0x80;
  if (chars > KC_KEY_MAX_CHARS) return "is longer than 256 characters";
  return NULL;
}

/* Checks the stream first so that a typo fails before input is read. */
static int check_stream(kc_ctx_t *ctx, kn_client_t *kc, const char *stream) {
  kn_stream_summary_t *sum = NULL;
  kn_error_t *err = kn_describe_stream_summary(kc, stream, &sum);
  kn_stream_summary_destroy(sum);
  if (!err) return KC_GO_ON;
  int rc = kc_fail(ctx, err, stream, "cannot describe the stream");
  kn_error_destroy(err);
  return rc;
}

/* Reads conf integers that govern the sender's retries. */
static int conf_int(const kn_conf_t *conf, const char *name, int def) {
  char buf[32];
  size_t size = sizeof(buf);
  long long v;
  if (kn_conf_get(conf, name, buf, &size) != KN_CONF_OK ||
      kc_parse_int(buf, 0, 1000000000, &v))
    return def;
  return (int)v;
}

/* Input paused (someone typing, a slow pipe): send what is queued now
 * rather than when a batch fills up.  A failure is kept by the sender and
 * ends the loop at the next record. */
static void send_queued(void *snd) { kc_sender_flush(snd); }

static const kc_opt_t produce_opts[] = {
    {'D', 'D', NULL, 1},           {'K', 'K', NULL, 1},
    {'k', 'k', "key", 1},          {KC_OPT_AGGREGATE, 0, "aggregate", 0},
    KC_GLOBAL_OPTS, {0, 0, NULL, 0}};

static int produce_loop(produce_t *p, kc_reader_t *rd, kc_sender_t *snd,
                        const char *path) {
  uint64_t recno = 0;
  char keybuf[17];
  for (;;) {
    if (kc_signal_received()) return KC_EXIT_OK;
    const char *data;
    size_t len;
    kc_read_res_t r = kc_reader_next(rd, &data, &len);
    if (r == KC_READ_END) return KC_EXIT_OK;
    if (r == KC_READ_AGAIN) continue;
    if (r == KC_READ_ERROR) {
      kc_errorf(p->ctx, "cannot read %s: %s", path, strerror(rd->error));
      return KC_EXIT_RUNTIME;
    }
    recno++;
    if (r == KC_READ_TOO_LONG) {
      failure_line(p, "record %llu not sent: %zu bytes, over the 1 MiB limit",
                   (unsigned long long)recno, len);
      kc_sender_count_failed(snd);
      continue;
    }
    const char *key = NULL;
    size_t key_len = 0;
    if (p->key_delim_len) {
      const char *d = memmem(data, len, p->key_delim, p->key_delim_len);
      if (d && d > data) {
        key = data;
        key_len = (size_t)(d - data);
      }
      if (d) {
        len -= (size_t)(d - data) + p->key_delim_len;
        data = d + p->key_delim_len;
      }
    }
    if (!key && p->key) {
      key = p->key;
      key_len = strlen(p->key);
    }
    if (!key) {
      key = keybuf;
      key_len = random_key(p, keybuf);
    }
    const char *why = key_problem(key, key_len);
    if (why) {
      failure_line(p, "record %llu not sent: its partition key %s",
                   (unsigned long long)recno, why);
      kc_sender_count_failed(snd);
      continue;
    }
    if (key_len + len > KC_RECORD_MAX_BYTES) {
      failure_line(p,
                   "record %llu not sent: %zu bytes with its key, over the "
                   "1 MiB limit",
                   (unsigned long long)recno, key_len + len);
      kc_sender_count_failed(snd);
      continue;
    }
    if (kc_sender_add(snd, recno, key, key_len, data, len)) return -1;
  }
}

static int run_produce(kc_ctx_t *ctx, int argc, char **argv) {
  produce_t p;
  memset(&p, 0, sizeof(p));
  p.ctx = ctx;
  p.delim[0] = '\n';
  p.delim_len = 1;
  char *ops[2] = {NULL, NULL};
  int nops = 0;
  int rc = kc_cmd_parse(ctx, argc, argv, produce_opts, ops, 2, &nops, on_opt, &p);
  if (rc != KC_GO_ON) return rc;
  if (nops < 1) return kc_usage_error(ctx, "missing STREAM");
  if (p.key && key_problem(p.key, strlen(p.key)))
    return kc_usage_error(ctx, "-k: the partition key %s",
                          key_problem(p.key, strlen(p.key)));
  if (p.aggregate) {
    kc_errorf(ctx, "--aggregate: not supported yet");
    return KC_EXIT_RUNTIME;
  }
  const char *stream = ops[0];
  const char *path = ops[1] && strcmp(ops[1], "-") ? ops[1] : NULL;

  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  p.rng = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
          ((uint64_t)getpid() << 40);

  int fd = 0;
  if (path && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
    kc_errorf(ctx, "cannot open %s: %s", path, strerror(errno));
    return KC_EXIT_RUNTIME;
  }
  kc_signals_install();
  kn_client_t *kc = kc_client_new(ctx, &rc);
  kc_reader_t rd;
  memset(&rd, 0, sizeof(rd));
  kc_sender_t *snd = NULL;
  if (!kc) goto out;
  if ((rc = check_stream(ctx, kc, stream)) != KC_GO_ON) goto out;
  kc_sender_cfg_t cfg = {conf_int(ctx->conf, "retry.max.attempts", 8),
                         conf_int(ctx->conf, "retry.backoff.ms", 100),
                         conf_int(ctx->conf, "retry.backoff.max.ms", 20000),
                         on_failed, &p};
  snd = kc_sender_new(kc, stream, &cfg);
  /* A raw record holds the key, its delimiter and the payload. */
  if (!snd || kc_reader_init(&rd, fd, p.delim, p.delim_len,
                             KC_RECORD_MAX_BYTES + p.key_delim_len)) {
    kc_errorf(ctx, "out of memory");
    rc = KC_EXIT_RUNTIME;
    goto out;
  }
  rd.idle = send_queued;
  rd.idle_opaque = snd;
  rc = produce_loop(&p, &rd, snd, path ? path : "standard input");
  if (rc == KC_EXIT_OK || rc == KC_EXIT_RUNTIME) {
    int read_rc = rc;
    rc = kc_sender_flush(snd) ? -1 : read_rc;
  }
  if (rc == -1) {
    const kn_error_t *err = kc_sender_error(snd);
    if (err)
      rc = kc_fail(ctx, err, stream, "PutRecords failed");
    else {
      kc_errorf(ctx, "out of memory");
      rc = KC_EXIT_RUNTIME;
    }
  }
  const kc_sender_stats_t *st = kc_sender_stats(snd);
  kc_noticef(ctx, "%llu record%s sent, %llu failed, %llu retr%s (%llu call%s)",
             (unsigned long long)st->sent, st->sent == 1 ? "" : "s",
             (unsigned long long)st->failed, (unsigned long long)st->retries,
             st->retries == 1 ? "y" : "ies", (unsigned long long)st->calls,
             st->calls == 1 ? "" : "s");
  if (rc == KC_EXIT_OK && st->failed) rc = KC_EXIT_UNDELIVERED;
out:
  kc_reader_free(&rd);
  kc_sender_destroy(snd);
  kn_client_destroy(kc);
  if (fd > 0) close(fd);
  return rc;
}

const kc_command_t kc_cmd_produce = {
    "produce", run_produce, "write records from standard input or a file",
    "kncat produce STREAM [FILE] [-D DELIM] [-K DELIM] [-k KEY]\n",
    "\n"
    "Reads records from FILE (standard input when FILE is absent or \"-\")\n"
    "and writes them to STREAM with PutRecords, up to 500 records or 5 MiB\n"
    "per call.  Input is read as a stream, never whole, and may hold any\n"
    "bytes (NUL included).  The empty record after a final delimiter is not\n"
    "sent; an empty line elsewhere is an empty record.  Records go out when\n"
    "a call is full or when the input pauses (typed lines are sent at once).\n"
    "\n"
    "  -D DELIM   record delimiter (default \\n).  Escapes: \\n \\r \\t \\0 \\\\\n"
    "             \\xHH \\NNN (octal); several bytes make one delimiter\n"
    "             (-D '\\r\\n', -D '\\x1e', -D '--')\n"
    "  -K DELIM   the partition key is the part of each record before the\n"
    "             first DELIM, the payload the rest; a record without DELIM\n"
    "             (or with an empty key) gets the default key\n"
    "  -k KEY     partition key of every record (with -K: the default key)\n"
    "  --aggregate  KPL aggregation: reserved, not supported yet (exit 1)\n"
    "\n"
    "Partition keys: without -k and -K every record gets a new random key\n"
    "(16 hex digits), which spreads records evenly over the shards; such\n"
    "records have no order between them.  Records that share a key go to\n"
    "one shard, in input order.\n"
    "\n"
    "Limits: a key is 1 to 256 characters of UTF-8; key and payload of a\n"
    "record together at most 1 MiB.  A record over a limit is reported on\n"
    "stderr, not sent, and counted as failed.\n"
    "\n"
    "Retries: records that the service rejects (throttling, internal\n"
    "failure) are sent again with exponential back-off (-X retry.backoff.ms,\n"
    "retry.backoff.max.ms), up to -X retry.max.attempts attempts per record\n"
    "(default 8).  Retried records go out first, in input order, and newer\n"
    "records of a key being retried wait for the retry's answer, so retries\n"
    "never reorder a key's records.  (A call that accepts a key's later\n"
    "record but rejects an earlier one has already reordered that pair; only\n"
    "sending one record per key at a time could prevent it.)\n"
    "\n"
    "At the end a summary goes to stderr unless -q: records sent, failed,\n"
    "retries and calls.  SIGINT or SIGTERM stops reading; what was read is\n"
    "still sent.\n"
    "\n"
    "Exit: 0 every record delivered; 5 some not (too large, bad key, retries\n"
    "used up); 3 stream not found; 4 credentials rejected; 1 other errors,\n"
    "including a PutRecords call that failed as a whole after the\n"
    "library's own retries (its records count as failed).\n"};
