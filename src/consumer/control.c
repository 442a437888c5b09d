/* The control thread: one message loop for both modes (control_mode.h).
 * It waits for a message or for the mode's next due time, handles what
 * is common -- a fatal error, a fan-out check (handed to its own thread,
 * so that nothing here waits for Kinesis), the close -- and gives the
 * mode every message and its ticks. */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/control_mode.h"
#include "consumer/efo.h"
#include "consumer/store_pool.h"
#include "core/error.h"
#include "util/clock.h"
#include "util/cond.h"

/* A fan-out check runs on the fan-out check thread. */
static void efo_check(kn_consumer_t *kc, kn_ctl_msg_t *m) {
  if (!kc->efo_pool) return;
  kn_store_job_t *j = kn_store_job_efo_check(m->cs, m->tenure, m->err);
  m->err = NULL;
  if (!j) {
    kn_consumer_set_fatal(kc, kn_error_new(KN_ERR__NOMEM, "out of memory"));
    return;
  }
  kn_store_pool_submit(kc->efo_pool, j);
}

/* Whether the service places the stream's records (AUTO), before any
 * shard is read: an aggregate there may hold keys of any range. */
static void learn_distribution(kn_consumer_t *kc) {
  kn_stream_summary_t *sum = NULL;
  kn_error_t *err = kn_describe_stream_summary(kc->client, kc->stream, &sum);
  if (err) {
    kn_warn(&kc->log, "CONTROL",
            "stream \"%s\": DescribeStreamSummary failed (%s): aggregated "
            "records outside a shard's hash range are dropped (and counted), "
            "as on a stream of user keys",
            kc->stream, kn_error_string(err));
    kn_error_destroy(err);
    return;
  }
  const char *dist = kn_stream_summary_distribution(sum);
  if (dist && strcmp(dist, "AUTO") == 0) {
    atomic_store(&kc->auto_dist, 1);
    kn_info(&kc->log, "CONTROL",
            "stream \"%s\" places records itself (RecordDistributionStrategy "
            "AUTO): every record of an aggregate is delivered, whatever its "
            "hash key",
            kc->stream);
  }
  kn_stream_summary_destroy(sum);
}

static void *control_main(void *arg) {
  kn_consumer_t *kc = arg;
  learn_distribution(kc);
  if (kc->efo) {
    /* One thread: the checks share what they found (efo.h). */
    if (!(kc->efo_pool = kn_store_pool_new(kc, 1)))
      kn_consumer_set_fatal(kc, kn_error_new(KN_ERR__FAIL,
                                             "cannot start the fan-out "
                                             "check thread"));
    else
      kn_efo_setup(kc); /* before any shard starts */
  }
  const char *store = kn_conf_str(kc->conf, "lease.store");
  const kn_ctl_mode_t *mode =
      store && strcmp(store, "none") != 0 ? &kn_lease_mode : &kn_solo_mode;
  void *st = mode->start(kc);
  int closing = 0;
  for (;;) {
    if (closing && mode->done(st)) break;
    if (kn_mono_ms() >= mode->due(st)) mode->tick(st);

    /* Only this thread moves it (messages and ticks), so it is read once,
     * before mu: the mode may take mu itself. */
    int64_t due = mode->due(st);
    pthread_mutex_lock(&kc->ctl_mu);
    while (!kc->ctl_head) {
      int64_t now = kn_mono_ms();
      if (due <= now) break;
      kn_cond_wait_until(&kc->ctl_cv, &kc->ctl_mu,
                         due - now > 60000 ? now + 60000 : due);
    }
    kn_ctl_msg_t *msgs = kc->ctl_head;
    kc->ctl_head = kc->ctl_tail = NULL;
    pthread_mutex_unlock(&kc->ctl_mu);

    while (msgs) {
      kn_ctl_msg_t *m = msgs;
      msgs = m->next;
      switch (m->kind) {
        case KN_CTL_FATAL:
          kn_err_log(&kc->log, "CONTROL", "%s", kn_error_string(m->err));
          kn_consumer_set_fatal(kc, m->err);
          m->err = NULL;
          break;
        case KN_CTL_EFO_CHECK:
          efo_check(kc, m);
          break;
        case KN_CTL_CLOSE:
          if (!closing) mode->close(st);
          closing = 1;
          break;
        default:
          break;
      }
      mode->handle(st, m);
      kn_control_msg_free(m);
      /* Handled, state and all: kn_delivery_caught_up may count it out. */
      kn_control_handled(kc, 1);
    }
  }
  mode->finish(st);
  /* A check still running finishes first (a registration gives up: the
   * consumer is closing). */
  kn_store_pool_destroy(kc->efo_pool);
  kc->efo_pool = NULL;
  if (kc->efo) kn_efo_close(kc);
  return NULL;
}

int kn_control_start(kn_consumer_t *kc, char *errstr, size_t size) {
  if (!(kc->ctl_close = calloc(1, sizeof(*kc->ctl_close)))) {
    snprintf(errstr, size, "out of memory");
    return -1;
  }
  kc->ctl_close->kind = KN_CTL_CLOSE;
  if (pthread_create(&kc->control_thread, NULL, control_main, kc)) {
    free(kc->ctl_close);
    kc->ctl_close = NULL;
    snprintf(errstr, size, "cannot start the control thread");
    return -1;
  }
  kc->control_started = 1;
  return 0;
}

void kn_control_stop(kn_consumer_t *kc) {
  if (!kc->control_started) return;
  kn_control_post_msg_locked(kc, kc->ctl_close);
  kc->ctl_close = NULL;
  pthread_join(kc->control_thread, NULL);
  kc->control_started = 0;
  /* Messages posted after CLOSE (readers finishing meanwhile). */
  pthread_mutex_lock(&kc->ctl_mu);
  kn_ctl_msg_t *msgs = kc->ctl_head;
  kc->ctl_head = kc->ctl_tail = NULL;
  kc->ctl_pending = 0;
  pthread_mutex_unlock(&kc->ctl_mu);
  while (msgs) {
    kn_ctl_msg_t *m = msgs;
    msgs = m->next;
    kn_control_msg_free(m);
  }
}
