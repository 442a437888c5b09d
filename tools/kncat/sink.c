#include "sink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics_http.h"
#include "output.h"
#include "signals.h"

/* Output is written in blocks of this size... */
#define OUT_BLOCK (1024 * 1024)
/* ...or when this much time passed since the last write, so that a live
 * tail shows records promptly. */
#define OUT_LINGER_NS (100 * 1000000LL)
/* Poll timeout: how soon a signal is noticed while the stream is idle. */
#define POLL_MS 100

void kc_sink_init(kc_sink_t *s, kc_ctx_t *ctx) {
  memset(s, 0, sizeof(*s));
  s->ctx = ctx;
  s->delim[0] = '\n';
  s->delim_len = 1;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Asks the caches for a record's bytes ahead of their turn: a batch is
 * decoded on the library's thread, often long enough before it is written
 * here that its records had to be fetched from memory one miss at a time
 * (about a third of consume -J's time went to waiting for them). */
static inline void prefetch_record(const kn_record_t *r) {
  size_t len;
  const char *d = kn_record_data(r, &len);
  if (len > 4096) len = 4096;
  for (size_t off = 0; off < len; off += 64) __builtin_prefetch(d + off);
  __builtin_prefetch(kn_record_sequence_number(r));
  __builtin_prefetch(kn_record_partition_key(r));
}

/* Writes up to *left records of the batch (all when count is off);
 * returns how many. */
static size_t write_batch(kc_sink_t *s, kc_out_t *out, const kn_batch_t *b,
                          long long *left) {
  size_t n = kn_batch_count(b);
  if (s->count && (long long)n > *left) n = (size_t)*left;
  if (s->count) *left -= (long long)n;
  if (s->json) {
    /* On the stack unless names are long (128-character stream names and
     * shard ids, escaped, take more). */
    char stack_prefix[1024], *prefix = stack_prefix;
    size_t cap = kc_json_prefix_cap(kn_batch_stream(b), kn_batch_shard_id(b));
    if (cap > sizeof(stack_prefix) && !(prefix = malloc(cap))) {
      out->error = ENOMEM;
      return 0;
    }
    size_t plen =
        kc_json_prefix(prefix, cap, kn_batch_stream(b), kn_batch_shard_id(b));
    size_t done = n;
    if (n) prefetch_record(kn_batch_record(b, 0));
    for (size_t i = 0; i < n; i++) {
      const kn_record_t *r = kn_batch_record(b, i);
      if (i + 1 < n) prefetch_record(kn_batch_record(b, i + 1));
      kc_json_rec_t jr;
      jr.seq = kn_record_sequence_number(r);
      jr.subseq = kn_record_subsequence_number(r);
      jr.key = kn_record_partition_key(r);
      if (!jr.key) jr.key = "";
      jr.ts_ms = kn_record_arrival_ms(r);
      jr.data = kn_record_data(r, &jr.len);
      if (kc_out_json_record(out, prefix, plen, &jr)) {
        done = i;
        break;
      }
    }
    if (prefix != stack_prefix) free(prefix);
    return done;
  } else {
    const char *kd = s->key_delim_len ? s->key_delim : NULL;
    for (size_t i = 0; i < n; i++) {
      const kn_record_t *r = kn_batch_record(b, i);
      size_t len;
      const void *data = kn_record_data(r, &len);
      const char *key = kd ? kn_record_partition_key(r) : NULL;
      if (kc_out_raw_record(out, key ? key : "", kd, s->key_delim_len, data,
                            len, s->delim, s->delim_len))
        return i;
    }
  }
  return n;
}

/* The records of b up to n are on their way to the reader: checkpoint
 * them.  The output is flushed first, so a record is never checkpointed
 * while it only sits in this process's buffer. */
static void checkpoint_written(kc_sink_t *s, kn_consumer_t *kc, kc_out_t *out,
                               const kn_batch_t *b, size_t n) {
  if (!n || kc_out_flush(out) || out->error) return;
  kn_err_t e = kn_consumer_checkpoint_async(kc, kn_batch_record(b, n - 1));
  if (e != KN_ERR_NO_ERROR && e != KN_ERR__LEASE_LOST)
    kc_errorf(s->ctx, "checkpoint: %s", kn_err2str(e));
}

/* Saves the positions of what is written, once it is flushed; with an
 * output error the last state saved stays (it holds less, never more). */
static int save_state(kc_sink_t *s, kn_consumer_t *kc, kc_out_t *out) {
  if (kc_out_flush(out) || out->error) return KC_GO_ON;
  return kc_state_save(s->state, s->ctx, kc);
}

static int loop(kc_sink_t *s, kn_consumer_t *kc, kc_out_t *out,
                const char *stream) {
  long long left = s->count;
  int64_t last_write = now_ns();
  int tty = isatty(out->fd);
  for (;;) {
    if (kc_signal_received()) return KC_EXIT_OK;
    if (s->tick) s->tick(s->tick_opaque, kc);
    if (s->state && kc_state_due(s->state)) save_state(s, kc, out);
    kn_batch_t *b = kn_consumer_poll(kc, POLL_MS);
    if (!b) {
      const kn_error_t *fe = kn_consumer_fatal_error(kc);
      if (fe) return kc_fail(s->ctx, fe, stream, "consumer stopped");
      if (s->exit_at_end && kn_consumer_caught_up(kc)) return KC_EXIT_OK;
      if (out->len) {
        kc_out_flush(out);
        last_write = now_ns();
      }
      kc_out_reader_gone(out);
    } else {
      size_t n = write_batch(s, out, b, &left);
      if (s->state) kc_state_written(s->state, b, n);
      if (s->checkpoint_written) {
        checkpoint_written(s, kc, out, b, n);
        last_write = now_ns();
      }
      kn_batch_destroy(b);
      if (s->count && left == 0) return KC_EXIT_OK;
      if (s->exit_at_end && kn_consumer_caught_up(kc)) return KC_EXIT_OK;
      if (out->len && (tty || now_ns() - last_write >= OUT_LINGER_NS)) {
        kc_out_flush(out);
        last_write = now_ns();
      }
    }
    if (out->error) return KC_EXIT_OK; /* judged by the caller */
  }
}

int kc_sink_consume(kc_sink_t *s, const char *stream) {
  kc_ctx_t *ctx = s->ctx;
  kc_signals_install();
  int mrc = kc_metrics_start(ctx);
  if (mrc != KC_GO_ON) return mrc;
  char errstr[512] = "";
  kn_consumer_t *kc = kn_consumer_new(ctx->conf, errstr, sizeof(errstr));
  if (!kc) {
    kc_errorf(ctx, "cannot start the consumer: %s", errstr);
    return KC_EXIT_RUNTIME;
  }
  if (ctx->metrics) kc_metrics_attach_consumer(ctx->metrics, kc);
  kc_out_t out;
  if (kc_out_init(&out, STDOUT_FILENO, OUT_BLOCK)) {
    kc_errorf(ctx, "out of memory");
    kc_metrics_stop_consumer(ctx, kc);
    kn_consumer_destroy(kc);
    return KC_EXIT_RUNTIME;
  }
  int rc = loop(s, kc, &out, stream);
  kc_out_flush(&out);
  if (s->state && !out.error && save_state(s, kc, &out) != KC_GO_ON &&
      rc == KC_EXIT_OK)
    rc = KC_EXIT_RUNTIME;
  /* A reader that went away (| head) ends the output; that is no error. */
  if (out.error && out.error != EPIPE) {
    kc_errorf(ctx, "cannot write the output: %s", strerror(out.error));
    if (rc == KC_EXIT_OK) rc = KC_EXIT_RUNTIME;
  }
  kn_error_t *err = kn_consumer_close(kc);
  if (err) {
    int crc = kc_fail(ctx, err, stream, "closing the consumer");
    if (rc == KC_EXIT_OK) rc = crc;
    kn_error_destroy(err);
  }
  kc_metrics_stop_consumer(ctx, kc);
  kn_consumer_destroy(kc);
  kc_out_free(&out);
  return rc;
}
