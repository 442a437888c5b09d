/* produce: delimited records from a file or standard input to a stream.
 * This file turns input into (key, payload) records and hands them to the
 * library's producer (kn/producer.h), which batches, aggregates, rate
 * limits and retries them; delivery reports come back through poll. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "kn/producer.h"
#include "kncat.h"
#include "metrics_http.h"
#include "mapped.h"
#include "output.h"
#include "reader.h"
#include "signals.h"

/* Limits of Kinesis. */
/* Key and data of one record: the stream's MaxRecordSizeInKiB, 1 MiB by
 * default, up to 10 MiB. */
#define KC_RECORD_MAX_BYTES (1024u * 1024)
#define KC_KEY_MAX_CHARS 256
#define KC_KEY_MAX_BYTES (KC_KEY_MAX_CHARS * 4)

/* Individual failures reported before going quiet (the summary still
 * counts them all). */
#define MAX_FAILURE_LINES 10

typedef struct produce {
  kc_ctx_t *ctx;
  char delim[64], key_delim[64];
  size_t delim_len, key_delim_len;
  const char *key;   /* -k */
  size_t record_max; /* key and data of one record, as the stream says */
  int auto_dist;     /* the service places records: keys are optional */
  int aggregate;
  const char *linger;         /* --linger MS, or NULL */
  long long rate, rate_bytes; /* --rate, --rate-bytes; 0: none */
  uint64_t failure_lines;
  uint64_t not_sent; /* refused before the producer */
  /* A regular file's records, sent from its mapping until the last
   * delimiter, the rest read as a stream; NULL when not mapped. */
  kc_mapped_t *mapped;
  int map_done;
  uint64_t rng;
  /* Progress. */
  double start, next_progress;
  int progress_shown, tty;
  /* Back-pressure by time: the bytes sent and not yet reported are kept
   * to what the stream takes in hold_s at the rate it has been taking
   * them, so that no record waits in the queue until its time-to-live
   * (message.timeout.ms) runs out when the input is faster than the
   * shards' write limits. */
  uint64_t queued, delivered, taken_mark;
  double taken_bps, taken_t, hold_s;
} produce_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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
    case 'k':
      p->key = arg;
      return KC_GO_ON;
    case KC_OPT_AGGREGATE:
      p->aggregate = 1;
      return KC_GO_ON;
    case KC_OPT_LINGER: {
      long long v;
      if (kc_parse_int(arg, 0, 86400000, &v))
        return kc_usage_error(p->ctx,
                              "--linger: not a number of milliseconds: "
                              "\"%s\"",
                              arg);
      p->linger = arg;
      return KC_GO_ON;
    }
    case KC_OPT_RATE:
    case KC_OPT_RATE_BYTES: {
      long long v;
      if (kc_parse_int(arg, 1, 1000000000000LL, &v))
        return kc_usage_error(p->ctx, "%s: not a positive number: \"%s\"",
                              id == KC_OPT_RATE ? "--rate" : "--rate-bytes",
                              arg);
      *(id == KC_OPT_RATE ? &p->rate : &p->rate_bytes) = v;
      return KC_GO_ON;
    }
    default:
      return kc_usage_error(p->ctx, "unexpected option");
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

/* The delivery callback: counts are kept by the producer; failures are
 * told (up to MAX_FAILURE_LINES). */
static void on_delivery(kn_producer_t *kp, const kn_msg_t *m, void *opaque) {
  (void)kp;
  produce_t *p = opaque;
  size_t len;
  const void *data = kn_msg_data(m, &len);
  p->queued -= len < p->queued ? len : p->queued;
  p->delivered += len;
  if (p->mapped) kc_mapped_release(p->mapped, data, len);
  const kn_error_t *err = kn_msg_error(m);
  if (err)
    failure_line(p, "record %llu not delivered: %s",
                 (unsigned long long)(uintptr_t)kn_msg_opaque(m),
                 kn_error_string(err));
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
static int check_stream(produce_t *p, kn_client_t *kc, const char *stream) {
  kc_ctx_t *ctx = p->ctx;
  kn_stream_summary_t *sum = NULL;
  kn_error_t *err = kn_describe_stream_summary(kc, stream, &sum);
  if (sum) {
    p->record_max = (size_t)kn_stream_summary_max_record_kib(sum) * 1024;
    const char *dist = kn_stream_summary_distribution(sum);
    p->auto_dist = dist && strcmp(dist, "AUTO") == 0;
  }
  kn_stream_summary_destroy(sum);
  if (!err) return KC_GO_ON;
  int rc = kc_fail(ctx, err, stream, "cannot describe the stream");
  kn_error_destroy(err);
  return rc;
}

static void clear_progress(produce_t *p) {
  if (p->progress_shown && p->tty) fputs("\r\033[K", stderr);
  p->progress_shown = 0;
}

/* A progress line once the input has run for a while: on a terminal one
 * line updated in place every second, otherwise a line every 10 s. */
static void progress(produce_t *p, kn_producer_t *kp, int final) {
  if (p->ctx->quiet) return;
  double t = now_s();
  if (final) {
    clear_progress(p);
    return;
  }
  if (t < p->next_progress) return;
  p->next_progress = t + (p->tty ? 1.0 : 10.0);
  double el = t - p->start;
  if (el < 2.0) return;
  unsigned long long ok = kn_producer_counter(kp, KN_PC_DELIVERED);
  fprintf(
      stderr,
      "%skncat: produce: %llu records in %.0f s (%.0f/s), %llu in "
      "flight, %llu queued, %llu retries, %llu failed%s",
      p->tty ? "\r\033[K" : "", ok, el, (double)ok / el,
      (unsigned long long)kn_producer_counter(kp, KN_PC_IN_FLIGHT),
      (unsigned long long)kn_producer_outq_len(kp),
      (unsigned long long)kn_producer_counter(kp, KN_PC_RETRIES),
      (unsigned long long)(kn_producer_counter(kp, KN_PC_FAILED) + p->not_sent),
      p->tty ? "" : "\n");
  p->progress_shown = 1;
}

/* The rate the stream has been taking the records at (bytes a second). */
static void update_rate(produce_t *p) {
  double t = now_s();
  if (p->taken_t == 0) {
    p->taken_t = t;
    p->taken_mark = p->delivered;
    return;
  }
  if (t - p->taken_t < 1.0) return;
  double r = (double)(p->delivered - p->taken_mark) / (t - p->taken_t);
  p->taken_bps = p->taken_bps > 0 ? 0.7 * p->taken_bps + 0.3 * r : r;
  p->taken_t = t;
  p->taken_mark = p->delivered;
}

/* Holds the input while the queue is more than the stream takes in
 * hold_s (at least 1 MiB, so that a start or a pause does not throttle
 * it). */
static void hold_input(produce_t *p, kn_producer_t *kp) {
  for (;;) {
    update_rate(p);
    double cap = p->taken_bps * p->hold_s;
    if (cap < 1024.0 * 1024) cap = 1024.0 * 1024;
    if ((double)p->queued <= cap || kc_signal_received()) return;
    kn_producer_poll(kp, 100);
    progress(p, kp, 0);
  }
}

/* Waits, serving delivery reports, until `due` (monotonic seconds). */
static void wait_until(produce_t *p, kn_producer_t *kp, double due) {
  for (double t; (t = now_s()) < due && !kc_signal_received();) {
    double ms = (due - t) * 1000;
    kn_producer_poll(kp, ms > 100 ? 100 : (int)ms + 1);
    progress(p, kp, 0);
  }
}

static const kc_opt_t produce_opts[] = {{'D', 'D', NULL, 1},
                                        {'K', 'K', NULL, 1},
                                        {'k', 'k', "key", 1},
                                        {KC_OPT_AGGREGATE, 0, "aggregate", 0},
                                        {KC_OPT_LINGER, 0, "linger", 1},
                                        {KC_OPT_RATE, 0, "rate", 1},
                                        {KC_OPT_RATE_BYTES, 0, "rate-bytes", 1},
                                        KC_GLOBAL_OPTS,
                                        {0, 0, NULL, 0}};

/* Input paused (someone typing, a slow pipe): serve the reports that are
 * ready; what was read goes out within the linger time anyway. */
static void on_idle(void *kp) { kn_producer_poll(kp, 0); }

static int produce_loop(produce_t *p, kc_reader_t *rd, kn_producer_t *kp,
                        const char *path) {
  uint64_t recno = 0, bytes = 0;
  char keybuf[KC_KEY_MAX_BYTES + 1];
  for (;;) {
    if (kc_signal_received()) return KC_EXIT_OK;
    const char *data;
    size_t len;
    int from_map = p->mapped && !p->map_done;
    kc_read_res_t r = from_map ? kc_mapped_next(p->mapped, &data, &len)
                               : kc_reader_next(rd, &data, &len);
    if (from_map && r == KC_READ_END) {
      /* What follows the last delimiter is read as a stream. */
      p->map_done = 1;
      if (lseek(rd->fd, (off_t)kc_mapped_offset(p->mapped), SEEK_SET) < 0) {
        kc_errorf(p->ctx, "cannot read %s: %s", path, strerror(errno));
        return KC_EXIT_RUNTIME;
      }
      continue;
    }
    if (r == KC_READ_END) return KC_EXIT_OK;
    if (r == KC_READ_AGAIN) continue;
    if (r == KC_READ_ERROR) {
      kc_errorf(p->ctx, "cannot read %s: %s", path, strerror(rd->error));
      return KC_EXIT_RUNTIME;
    }
    recno++;
    if (r == KC_READ_TOO_LONG) {
      failure_line(p,
                   "record %llu not sent: %zu bytes, over the stream's "
                   "MaxRecordSizeInKiB of %zu KiB",
                   (unsigned long long)recno, len, p->record_max / 1024);
      p->not_sent++;
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
    /* On a stream whose service places records, a record without a key
     * goes without one. */
    int keyless = !key && p->auto_dist;
    if (!key && !keyless) {
      key = keybuf;
      key_len = random_key(p, keybuf);
    }
    const char *why = keyless ? NULL : key_problem(key, key_len);
    if (!why && key_len > KC_KEY_MAX_BYTES) why = "is too long";
    if (why) {
      failure_line(p, "record %llu not sent: its partition key %s",
                   (unsigned long long)recno, why);
      p->not_sent++;
      continue;
    }
    if (key_len + len > p->record_max) {
      failure_line(p,
                   "record %llu not sent: %zu bytes with its key, over the "
                   "stream's MaxRecordSizeInKiB of %zu KiB",
                   (unsigned long long)recno, key_len + len,
                   p->record_max / 1024);
      p->not_sent++;
      continue;
    }
    if (key && key != keybuf) { /* the producer wants a terminated key */
      memcpy(keybuf, key, key_len);
      keybuf[key_len] = '\0';
    }
    /* --rate, --rate-bytes: hold the record until its time. */
    if (p->rate)
      wait_until(p, kp, p->start + (double)(recno - 1) / (double)p->rate);
    if (p->rate_bytes)
      wait_until(p, kp, p->start + (double)bytes / (double)p->rate_bytes);
    bytes += len;
    hold_input(p, kp);
    kn_err_t rc;
    /* A mapped record stays where it is until its report. */
    int flags = from_map ? KN_MSG_F_NOCOPY : KN_MSG_F_COPY;
    while ((rc = kn_producer_send(kp, keyless ? NULL : keybuf, NULL, data, len,
                                  flags, (void *)(uintptr_t)recno)) ==
           KN_ERR__QUEUE_FULL) {
      /* Backpressure: the producer holds as much as it may. */
      kn_producer_poll(kp, 100);
      progress(p, kp, 0);
    }
    if (rc != KN_ERR_NO_ERROR) {
      failure_line(p, "record %llu not sent: %s", (unsigned long long)recno,
                   kn_err2str(rc));
      p->not_sent++;
      continue;
    }
    p->queued += len;
    if (from_map) kc_mapped_hold(p->mapped, data, len);
    if ((recno & 1023) == 0) {
      kn_producer_poll(kp, 0);
      progress(p, kp, 0);
    }
  }
}

static int set_conf(produce_t *p, kn_conf_t *conf, const char *name,
                    const char *value) {
  char err[256];
  if (kn_conf_set(conf, name, value, err, sizeof(err)) == KN_CONF_OK) return 0;
  kc_errorf(p->ctx, "%s", err);
  return -1;
}

static int run_produce(kc_ctx_t *ctx, int argc, char **argv) {
  produce_t p;
  memset(&p, 0, sizeof(p));
  p.ctx = ctx;
  p.delim[0] = '\n';
  p.delim_len = 1;
  char *ops[2] = {NULL, NULL};
  int nops = 0;
  int rc =
      kc_cmd_parse(ctx, argc, argv, produce_opts, ops, 2, &nops, on_opt, &p);
  if (rc != KC_GO_ON) return rc;
  if (nops < 1) return kc_usage_error(ctx, "missing STREAM");
  if (p.key && key_problem(p.key, strlen(p.key)))
    return kc_usage_error(ctx, "-k: the partition key %s",
                          key_problem(p.key, strlen(p.key)));
  const char *stream = ops[0];
  const char *path = ops[1] && strcmp(ops[1], "-") ? ops[1] : NULL;

  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  p.rng = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
          ((uint64_t)getpid() << 40);
  p.tty = isatty(2);

  int fd = 0;
  if (path && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
    kc_errorf(ctx, "cannot open %s: %s", path, strerror(errno));
    return KC_EXIT_RUNTIME;
  }
  kc_signals_install();
  kc_reader_t rd;
  memset(&rd, 0, sizeof(rd));
  kc_mapped_t map;
  memset(&map, 0, sizeof(map));
  kn_producer_t *kp = NULL;
  kn_conf_t *conf = NULL;
  /* The stream is checked first so that a typo fails before input is
   * read, with its own exit code. */
  kn_client_t *kc = kc_client_new(ctx, stream, &rc);
  if (!kc) goto out;
  p.record_max = KC_RECORD_MAX_BYTES;
  rc = check_stream(&p, kc, stream);
  kn_client_destroy(kc);
  if (rc != KC_GO_ON) goto out;

  rc = KC_EXIT_RUNTIME;
  if (!(conf = kn_conf_dup(ctx->conf))) {
    kc_errorf(ctx, "out of memory");
    goto out;
  }
  if (set_conf(&p, conf, "stream", stream) ||
      (p.aggregate && set_conf(&p, conf, "aggregation.enable", "true")) ||
      (p.linger && set_conf(&p, conf, "linger.ms", p.linger))) {
    rc = KC_EXIT_USAGE;
    goto out;
  }
  kn_conf_set_delivery_cb(conf, on_delivery, &p);
  char ttl[32];
  size_t ttl_size = sizeof(ttl);
  p.hold_s = 10.0;
  if (kn_conf_get(conf, "message.timeout.ms", ttl, &ttl_size) == KN_CONF_OK)
    p.hold_s = atof(ttl) / 3000.0;
  if ((rc = kc_metrics_start(ctx)) != KC_GO_ON) goto out;
  rc = KC_EXIT_RUNTIME;
  char err[512];
  if (!(kp = kn_producer_new(conf, err, sizeof(err)))) {
    kc_errorf(ctx, "%s", err);
    goto out;
  }
  if (ctx->metrics) kc_metrics_attach_producer(ctx->metrics, kp);
  /* A raw record holds the key, its delimiter and the payload. */
  if (kc_reader_init(&rd, fd, p.delim, p.delim_len,
                     p.record_max + p.key_delim_len)) {
    kc_errorf(ctx, "out of memory");
    goto out;
  }
  rd.idle = on_idle;
  rd.idle_opaque = kp;
  int mapped = kc_mapped_open(&map, fd, p.delim, p.delim_len,
                              p.record_max + p.key_delim_len);
  if (mapped < 0) {
    kc_errorf(ctx, "out of memory");
    goto out;
  }
  if (mapped) p.mapped = &map;
  p.start = now_s();
  p.next_progress = p.start + 2.0;
  rc = produce_loop(&p, &rd, kp, path ? path : "standard input");
  /* Everything read is sent (or reported failed within
   * message.timeout.ms), also after a signal. */
  while (kn_producer_flush(kp, 1000) == KN_ERR__TIMED_OUT) progress(&p, kp, 0);
  kn_error_t *cerr = kn_producer_close(kp);
  progress(&p, kp, 1);
  uint64_t sent = kn_producer_counter(kp, KN_PC_DELIVERED);
  uint64_t failed = kn_producer_counter(kp, KN_PC_FAILED) + p.not_sent;
  uint64_t retries = kn_producer_counter(kp, KN_PC_RETRIES);
  uint64_t calls = kn_producer_counter(kp, KN_PC_CALLS);
  double el = now_s() - p.start;
  kc_noticef(ctx,
             "%llu record%s sent, %llu failed, %llu retr%s (%llu call%s, "
             "%.1f s, %.0f records/s)",
             (unsigned long long)sent, sent == 1 ? "" : "s",
             (unsigned long long)failed, (unsigned long long)retries,
             retries == 1 ? "y" : "ies", (unsigned long long)calls,
             calls == 1 ? "" : "s", el, el > 0 ? (double)sent / el : 0.0);
  if (cerr) {
    /* The shard map never loaded: the records were reported failed. */
    if (rc == KC_EXIT_OK) rc = kc_fail(ctx, cerr, stream, "cannot list shards");
    kn_error_destroy(cerr);
  }
  if (rc == KC_EXIT_OK && failed) rc = KC_EXIT_UNDELIVERED;
out:
  kc_reader_free(&rd);
  if (kp) kc_metrics_stop_producer(ctx, kp);
  kn_producer_destroy(kp);
  kc_mapped_close(&map); /* after the producer: it read from the mapping */
  kn_conf_destroy(conf);
  if (fd > 0) close(fd);
  return rc;
}

const kc_command_t kc_cmd_produce = {
    "produce", run_produce, "write records from standard input or a file",
    "kncat produce STREAM [FILE] [-D DELIM] [-K DELIM] [-k KEY] [--aggregate]\n"
    "              [--linger MS] [--rate N] [--rate-bytes N]\n",
    "\n"
    "Reads records from FILE (standard input when FILE is absent or \"-\")\n"
    "and writes them to STREAM through the library's producer: records are\n"
    "collected per shard into PutRecords calls (up to 500 records or 5 MiB;\n"
    "10 MiB on a stream of large records), each shard kept under its write\n"
    "limits.  Input is read as a stream, never whole (a regular file through a "
    "memory mapping, each part let\n"
    "go once its records are delivered, so they are sent without a copy),\n"
    "and may hold any bytes (NUL included).  The empty record after a final\n"
    "delimiter is not sent; an empty line elsewhere is an empty record.  A\n"
    "record waits at most the linger time (100 ms) for its call to fill.\n"
    "\n"
    "  -D DELIM   record delimiter (default \\n).  Escapes: \\n \\r \\t \\0 "
    "\\\\\n"
    "             \\xHH \\NNN (octal); several bytes make one delimiter\n"
    "             (-D '\\r\\n', -D '\\x1e', -D '--')\n"
    "  -K DELIM   the partition key is the part of each record before the\n"
    "             first DELIM, the payload the rest; a record without DELIM\n"
    "             (or with an empty key) gets the default key\n"
    "  -k KEY     partition key of every record (with -K: the default key)\n"
    "  --aggregate  pack the records of each shard into KPL aggregated\n"
    "             records (-X aggregation.max.bytes, default 51200); readers\n"
    "             must deaggregate (kncat consume and the KCL do)\n"
    "  --linger MS  longest wait for a call to fill (-X linger.ms)\n"
    "  --rate N   send at most N records per second\n"
    "  --rate-bytes N  send at most N payload bytes per second\n"
    "\n"
    "Other producer settings go with -X (kncat -X list): per-shard limits\n"
    "shard.rate.percent, message.timeout.ms, queue.max.records, ...\n"
    "\n"
    "Partition keys: without -k and -K every record gets a new random key\n"
    "(16 hex digits), which spreads records evenly over the shards; such\n"
    "records have no order between them.  Records that share a key go to\n"
    "one shard, in input order.  On a stream whose service places records\n"
    "(RecordDistributionStrategy AUTO) a record without a key is sent\n"
    "without one, keys given are ignored by the service, and --aggregate is\n"
    "turned off (said once on stderr).\n"
    "\n"
    "Limits: a key is 1 to 256 characters of UTF-8; key and payload of a\n"
    "record together at most the stream's MaxRecordSizeInKiB (1 MiB unless\n"
    "the stream was created or updated for larger records, up to 10 MiB).\n"
    "A record over a limit is reported on stderr, not sent, and counted as\n"
    "failed.\n"
    "\n"
    "Retries: records that the service rejects (throttling, internal\n"
    "failure) and calls that fail as a whole are sent again, only those, with\n"
    "exponential back-off (-X retry.backoff.ms, retry.backoff.max.ms), ahead\n"
    "of newer records of their shard, until the record's time-to-live\n"
    "(-X message.timeout.ms, default 30000) runs out.  A call that accepts\n"
    "a key's later record but rejects an earlier one reorders that pair;\n"
    "-X ordering.strict=true prevents it (one call in flight per shard, no\n"
    "two records of a key for a shard in one call) at a cost in speed.\n"
    "\n"
    "Progress: for inputs that take more than 2 s, a line on stderr (updated\n"
    "every second on a terminal, every 10 s otherwise): records stored and\n"
    "per second, in flight, queued, retries, failures.  At the end a summary\n"
    "unless -q: records sent, failed, retries, calls, time.  SIGINT or\n"
    "SIGTERM stops reading; what was read is still sent.\n"
    "\n"
    "Exit: 0 every record delivered; 5 some not (too large, bad key, its\n"
    "time-to-live ran out); 3 stream not found; 4 credentials rejected; 1\n"
    "other errors.\n"};
