/* The consuming half shared by `consume` and `group`: runs a
 * kn_consumer_t built from the command's configuration and writes its
 * records to standard output (raw or -J), until a signal, -c or -e. */
#ifndef KNCAT_SINK_H
#define KNCAT_SINK_H

#include "kn/consumer.h"
#include "kncat.h"
#include "state.h"

typedef struct kc_sink {
  kc_ctx_t *ctx;
  int exit_at_end; /* -e */
  int json;        /* -J */
  long long count; /* -c; 0: no limit */
  char delim[64], key_delim[64];
  size_t delim_len, key_delim_len;
  /* group: checkpoint each batch once its records are written to standard
   * output (the consumer runs with checkpoint.auto=false), so neither
   * SIGKILL, -c nor a failed write checkpoints a record that was not
   * written. */
  int checkpoint_written;
  /* consume --state: positions saved every checkpoint.interval.ms and at
   * exit (borrowed; NULL without --state). */
  kc_state_t *state;
  /* Called between polls (about every 100 ms), e.g. for a status line. */
  void (*tick)(void *opaque, kn_consumer_t *kc);
  void *tick_opaque;
} kc_sink_t;

/* Defaults: newline delimiter, no key, no limit. */
void kc_sink_init(kc_sink_t *s, kc_ctx_t *ctx);

/* Starts the consumer from s->ctx->conf, writes records until done,
 * closes it (final checkpoint and release of leases) and returns the exit
 * code.  Installs the SIGINT/SIGTERM handlers. */
int kc_sink_consume(kc_sink_t *s, const char *stream);

#endif
