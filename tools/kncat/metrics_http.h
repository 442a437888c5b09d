/* --metrics HOST:PORT: an HTTP endpoint with /metrics (the library's
 * Prometheus text), /healthz and /readyz, served by libmicrohttpd on a
 * thread of its own.  Scrapers never touch the consuming or producing
 * thread: a request only copies the library's counters (under its lock,
 * briefly); a slow or hostile client ties up one of a few connections of
 * this thread, with a time-out and a deadline (enforced by a second thread
 * that shuts down the connections past it).
 *
 * A command supports --metrics by calling kc_metrics_start() before it
 * creates its consumer or producer, attaching it, and detaching it before
 * destroying it; main() calls kc_metrics_finish() when the command has
 * returned. */
#ifndef KNCAT_METRICS_HTTP_H
#define KNCAT_METRICS_HTTP_H

#include <stddef.h>

#include "kn/consumer.h"
#include "kn/producer.h"
#include "kncat.h"

typedef struct kc_metrics kc_metrics_t;

/* The server alone. */

/* Listens on addr only: "HOST:PORT", "[V6]:PORT", ":PORT" for loopback
 * (127.0.0.1); every address only when asked for ("0.0.0.0:PORT", or
 * "[::]:PORT" for IPv6 and IPv4); port 0 picks a free one.  NULL with a
 * reason in err on failure.  At most 16 connections, 4 from one address;
 * each request has 10 s in all; the reasons behind 503s go to stderr. */
kc_metrics_t *kc_metrics_open(const char *addr, char *err, size_t size);
/* The port listened on. */
int kc_metrics_port(const kc_metrics_t *m);
/* What the endpoints report on; one at a time (the last attached).
 * Attach before use, detach before the object is destroyed: afterwards
 * /metrics serves the last document rendered at detach, and /healthz and
 * /readyz answer 503 with `why`. */
void kc_metrics_attach_consumer(kc_metrics_t *m, kn_consumer_t *kc);
void kc_metrics_attach_producer(kc_metrics_t *m, kn_producer_t *kp);
void kc_metrics_detach(kc_metrics_t *m, const char *why);
/* Stops the thread and frees m.  Accepts NULL. */
void kc_metrics_close(kc_metrics_t *m);

/* For commands, through ctx (each a no-op without --metrics). */

/* Opens ctx->metrics and prints its address on stderr.  KC_GO_ON or an
 * exit code (the address cannot be used). */
int kc_metrics_start(kc_ctx_t *ctx);
/* Before the consumer or producer is destroyed: detaches it, saying why
 * (its fatal error, or that the command has finished). */
void kc_metrics_stop_consumer(kc_ctx_t *ctx, kn_consumer_t *kc);
void kc_metrics_stop_producer(kc_ctx_t *ctx, kn_producer_t *kp);
/* main(): serves on for --metrics-linger seconds (until a signal), then
 * closes the server. */
void kc_metrics_finish(kc_ctx_t *ctx);

#endif
