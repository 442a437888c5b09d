/* Fan-out settings and the registration strategies, as Flink's FLIP-128
 * names them:
 *
 * - lazy (default): DescribeStreamConsumer by name; when missing, wait a
 *   random moment (workers starting together spread out), describe again
 *   and register; wait for ACTIVE.  ResourceInUse on register means
 *   another worker won the race: describe again.  Throttling
 *   (RegisterStreamConsumer 5/s per account, 5 consumers CREATING at once,
 *   DescribeStreamConsumer 20/s) and other retriable failures back off
 *   with jitter until efo.register.timeout.ms.  A consumer deleted while
 *   reading is registered again (efo_check.c).
 * - eager: RegisterStreamConsumer at start (ResourceInUse: it exists
 *   already) and wait for ACTIVE; any other failure is fatal at once, as
 *   is the consumer's deletion later.
 * - none: efo.consumer.arn is used as given; no registration calls.
 *
 * All of it runs on the control thread, whose blocking calls these are;
 * waits end early when the consumer closes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consumer/efo.h"
#include "core/error.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/cond.h"
#include "util/rand.h"
#include "util/str.h"

const char *kn_efo_registration_name(kn_efo_registration_t r) {
  switch (r) {
    case KN_EFO_LAZY:
      return "lazy";
    case KN_EFO_EAGER:
      return "eager";
    case KN_EFO_NONE:
      return "none";
  }
  return "?";
}

/* ---- settings ---- */

int kn_efo_conf(kn_consumer_t *kc, char *errstr, size_t size) {
  const kn_conf_t *c = kc->conf;
  const char *name = kn_conf_str(c, "efo.consumer.name");
  const char *arn = kn_conf_str(c, "efo.consumer.arn");
  int has_name = name && *name, has_arn = arn && *arn;
  if (!has_name && !has_arn) {
    if (!kn_conf_is_set(c, "efo.registration")) return 0; /* polling */
    snprintf(errstr, size,
             "efo.registration is set but neither "
             "efo.consumer.name nor efo.consumer.arn");
    return -1;
  }
  const char *reg = kn_conf_str(c, "efo.registration");
  kn_efo_registration_t r = strcmp(reg, "eager") == 0  ? KN_EFO_EAGER
                            : strcmp(reg, "none") == 0 ? KN_EFO_NONE
                                                       : KN_EFO_LAZY;
  /* A bare ARN names the consumer completely. */
  if (has_arn && !has_name && !kn_conf_is_set(c, "efo.registration"))
    r = KN_EFO_NONE;
  if (r == KN_EFO_NONE && !has_arn) {
    snprintf(errstr, size, "efo.registration=none needs efo.consumer.arn");
    return -1;
  }
  if (r != KN_EFO_NONE && has_arn) {
    snprintf(errstr, size,
             "efo.consumer.arn goes with efo.registration=none "
             "(%s registration uses efo.consumer.name)",
             kn_efo_registration_name(r));
    return -1;
  }
  if (r != KN_EFO_NONE && !has_name) {
    snprintf(errstr, size, "efo.registration=%s needs efo.consumer.name",
             kn_efo_registration_name(r));
    return -1;
  }
  if (has_arn && strncmp(arn, "arn:", 4) != 0) {
    snprintf(errstr, size, "efo.consumer.arn: not an ARN: \"%s\"", arn);
    return -1;
  }
  kn_efo_t *efo = calloc(1, sizeof(*efo));
  if (!efo) goto oom;
  kc->efo = efo;
  efo->registration = r;
  efo->deregister_on_close = kn_conf_bool(c, "efo.deregister.on.close");
  efo->watchdog_ms = kn_conf_int(c, "efo.watchdog.ms");
  efo->in_use_poll_ms = kn_conf_int(c, "efo.in.use.poll.ms");
  efo->register_timeout_ms = kn_conf_int(c, "efo.register.timeout.ms");
  if (has_name && !(efo->name = strdup(name))) goto oom;
  if (has_arn && !(efo->consumer_arn = strdup(arn))) goto oom;
  if (has_arn) efo->generation = 1;
  return 0;
oom:
  snprintf(errstr, size, "out of memory");
  return -1;
}

void kn_efo_free(kn_efo_t *efo) {
  if (!efo) return;
  free(efo->name);
  free(efo->stream_arn);
  free(efo->consumer_arn);
  kn_shard_list_destroy(efo->listing);
  free(efo);
}

void kn_efo_fail(kn_consumer_t *kc, kn_error_t *err) {
  if (!err) err = kn_error_new(KN_ERR__NOMEM, "out of memory");
  kn_err_log(&kc->log, "EFO", "%s", kn_error_string(err));
  kn_consumer_set_fatal(kc, err);
}

/* ---- waiting ---- */

/* Sleeps ms (control or fan-out check thread).  Non-zero when the consumer is
 * closing (then at once). */
static int efo_sleep(kn_consumer_t *kc, int64_t ms) {
  int64_t until = kn_mono_ms() + ms;
  /* The close posts CLOSE, which wakes every waiter on ctl_cv. */
  pthread_mutex_lock(&kc->ctl_mu);
  while (!kc->ctl_closing) {
    if (kn_cond_wait_until(&kc->ctl_cv, &kc->ctl_mu, until) == ETIMEDOUT) break;
  }
  int closing = kc->ctl_closing;
  pthread_mutex_unlock(&kc->ctl_mu);
  return closing;
}

/* Uniform in [c/2, c]: status polls keep their pace but drift apart. */
static int64_t half_jitter(int64_t c) {
  return c / 2 + (int64_t)kn_rand_below((uint64_t)(c / 2) + 1);
}

/* The n-th wait for a status change: 1 s growing by half to 5 s. */
static int64_t status_wait(int n) {
  int64_t c = 1000;
  for (int i = 0; i < n && c < 5000; i++) c += c / 2;
  return half_jitter(c < 5000 ? c : 5000);
}

static kn_error_t *closing_error(void) {
  return kn_error_new(KN_ERR__DESTROY, "the consumer is closing");
}

static kn_error_t *fetch_stream_arn(kn_consumer_t *kc) {
  kn_efo_t *efo = kc->efo;
  if (efo->stream_arn) return NULL;
  kn_stream_summary_t *sum = NULL;
  kn_error_t *err = kn_describe_stream_summary(kc->client, kc->stream, &sum);
  if (err) return kn_error_prefix(err, "stream \"%s\"", kc->stream);
  const char *arn = kn_stream_summary_arn(sum);
  if (!arn || !*arn)
    err = kn_error_new(KN_ERR__BAD_MSG,
                       "stream \"%s\": no StreamARN in "
                       "DescribeStreamSummary",
                       kc->stream);
  else if (!(efo->stream_arn = strdup(arn)))
    err = kn_error_new(KN_ERR__NOMEM, "out of memory");
  kn_stream_summary_destroy(sum);
  return err;
}

static int status_is(const kn_stream_consumer_t *c, const char *s) {
  const char *st = kn_stream_consumer_status(c);
  return st && strcmp(st, s) == 0;
}

static kn_error_t *take_arn(const kn_stream_consumer_t *c, char **arn) {
  const char *a = kn_stream_consumer_arn(c);
  if (!a || !*a)
    return kn_error_new(KN_ERR__BAD_MSG,
                        "DescribeStreamConsumer: no "
                        "ConsumerARN");
  *arn = strdup(a);
  return *arn ? NULL : kn_error_new(KN_ERR__NOMEM, "out of memory");
}

/* ---- lazy ---- */

kn_error_t *kn_efo_ensure(kn_consumer_t *kc, char **arn) {
  kn_efo_t *efo = kc->efo;
  int64_t deadline = kn_mono_ms() + efo->register_timeout_ms;
  kn_backoff_t retry;
  kn_backoff_init(&retry, 500, 5000);
  int spread = 0, waits = 0;
  char last[32] = "not found";
  *arn = NULL;
  for (;;) {
    int64_t wait;
    kn_stream_consumer_t *c = NULL;
    kn_error_t *err = fetch_stream_arn(kc);
    if (!err)
      err = kn_describe_stream_consumer(kc->client, efo->stream_arn, efo->name,
                                        NULL, &c);
    if (!err) {
      if (status_is(c, "ACTIVE")) {
        err = take_arn(c, arn);
        kn_stream_consumer_destroy(c);
        return err;
      }
      /* CREATING, or DELETING (registered again once it is gone). */
      kn_strlcpy(last, kn_stream_consumer_status(c), sizeof(last));
      kn_stream_consumer_destroy(c);
      wait = status_wait(waits++);
    } else if (kn_error_code(err) == KN_ERR_RESOURCE_NOT_FOUND &&
               efo->stream_arn) {
      kn_error_destroy(err);
      err = NULL;
      if (!spread) {
        /* Workers that start together would all register at once: a
         * random pause lets the first one's registration show. */
        spread = 1;
        wait = (int64_t)kn_rand_below(1000);
        kn_dbg(&kc->log, "EFO",
               "consumer \"%s\" not registered; registering "
               "in %lld ms",
               efo->name, (long long)wait);
      } else {
        err = kn_register_stream_consumer(kc->client, efo->stream_arn,
                                          efo->name, &c);
        if (!err) {
          kn_info(&kc->log, "EFO", "registered stream consumer \"%s\" (%s)",
                  efo->name, kn_stream_consumer_arn(c));
          kn_stream_consumer_destroy(c);
          wait = status_wait(waits++);
        } else if (kn_error_code(err) == KN_ERR_RESOURCE_IN_USE) {
          /* Registered by someone else meanwhile, or still being deleted. */
          kn_dbg(&kc->log, "EFO", "%s", kn_error_string(err));
          kn_error_destroy(err);
          err = NULL;
          wait = status_wait(waits++);
        }
      }
    }
    if (err) {
      if (!kn_error_is_retriable(err)) return err;
      if (!kn_error_is_throttling(err))
        kn_warn(&kc->log, "EFO", "consumer \"%s\": %s (retrying)", efo->name,
                kn_error_string(err));
      kn_error_destroy(err);
      wait = kn_backoff_next(&retry);
    }
    if (kn_mono_ms() + wait > deadline)
      return kn_error_new(KN_ERR__TIMED_OUT,
                          "stream consumer \"%s\" not ACTIVE after %lld ms "
                          "(last seen: %s)",
                          efo->name, (long long)efo->register_timeout_ms, last);
    if (efo_sleep(kc, wait)) return closing_error();
  }
}

/* ---- eager ---- */

static kn_error_t *eager(kn_consumer_t *kc, char **arn) {
  kn_efo_t *efo = kc->efo;
  int64_t deadline = kn_mono_ms() + efo->register_timeout_ms;
  *arn = NULL;
  kn_stream_consumer_t *c = NULL;
  kn_error_t *err = fetch_stream_arn(kc);
  if (!err)
    err =
        kn_register_stream_consumer(kc->client, efo->stream_arn, efo->name, &c);
  if (!err) {
    kn_info(&kc->log, "EFO", "registered stream consumer \"%s\" (%s)",
            efo->name, kn_stream_consumer_arn(c));
    kn_stream_consumer_destroy(c);
  } else if (kn_error_code(err) == KN_ERR_RESOURCE_IN_USE) {
    kn_error_destroy(err); /* registered before: use it */
  } else {
    return err;
  }
  for (int waits = 0;; waits++) {
    err = kn_describe_stream_consumer(kc->client, efo->stream_arn, efo->name,
                                      NULL, &c);
    if (err) return err;
    if (status_is(c, "ACTIVE")) {
      err = take_arn(c, arn);
      kn_stream_consumer_destroy(c);
      return err;
    }
    int deleting = status_is(c, "DELETING");
    kn_stream_consumer_destroy(c);
    if (deleting)
      return kn_error_new(KN_ERR_RESOURCE_IN_USE,
                          "stream consumer \"%s\" is "
                          "being deleted",
                          efo->name);
    int64_t wait = status_wait(waits);
    if (kn_mono_ms() + wait > deadline)
      return kn_error_new(KN_ERR__TIMED_OUT,
                          "stream consumer \"%s\" not "
                          "ACTIVE after %lld ms",
                          efo->name, (long long)efo->register_timeout_ms);
    if (efo_sleep(kc, wait)) return closing_error();
  }
}

/* ---- start and close ---- */

void kn_efo_setup(kn_consumer_t *kc) {
  kn_efo_t *efo = kc->efo;
  if (efo->registration == KN_EFO_NONE) {
    kn_info(&kc->log, "EFO", "reading through stream consumer %s",
            efo->consumer_arn);
    return;
  }
  char *arn = NULL;
  kn_error_t *err = efo->registration == KN_EFO_EAGER ? eager(kc, &arn)
                                                      : kn_efo_ensure(kc, &arn);
  if (err) {
    if (kn_error_code(err) == KN_ERR__DESTROY) {
      kn_error_destroy(err); /* closed before it was ready */
      return;
    }
    kn_efo_fail(kc,
                kn_error_prefix(err,
                                "fan-out consumer \"%s\" (%s "
                                "registration)",
                                efo->name,
                                kn_efo_registration_name(efo->registration)));
    return;
  }
  pthread_mutex_lock(&kc->mu);
  free(efo->consumer_arn);
  efo->consumer_arn = arn;
  efo->generation++;
  pthread_mutex_unlock(&kc->mu);
  kn_info(&kc->log, "EFO", "reading through stream consumer \"%s\" (%s)",
          efo->name, arn);
}

void kn_efo_close(kn_consumer_t *kc) {
  kn_efo_t *efo = kc->efo;
  if (!efo || !efo->deregister_on_close || efo->registration == KN_EFO_NONE)
    return;
  pthread_mutex_lock(&kc->mu);
  int failed = kc->fatal != NULL;
  char *arn = kn_strdup0(efo->consumer_arn);
  size_t n = kc->n_shards;
  kn_cshard_t **v = malloc((n ? n : 1) * sizeof(*v));
  if (v) memcpy(v, kc->shards, n * sizeof(*v));
  pthread_mutex_unlock(&kc->mu);
  if (!failed && arn) {
    /* Subscriptions end first: deregistering under them fails them. */
    for (size_t i = 0; v && i < n; i++) kn_reader_stop(kc, v[i]);
    kn_error_t *err =
        kn_deregister_stream_consumer(kc->client, NULL, NULL, arn);
    if (err)
      kn_warn(&kc->log, "EFO", "deregistering stream consumer %s: %s", arn,
              kn_error_string(err));
    else
      kn_info(&kc->log, "EFO", "deregistered stream consumer %s", arn);
    kn_error_destroy(err);
  }
  free(v);
  free(arn);
}
