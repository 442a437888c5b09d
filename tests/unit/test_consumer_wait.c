/* kn_consumer_wait(): a waiter on another thread is woken when the
 * consumer closes, and a closed consumer never makes it wait. */
#include <pthread.h>
#include <string.h>

#include "kn/conf.h"
#include "kn/consumer.h"
#include "kt.h"

static kn_consumer_t *new_consumer(void) {
  kn_conf_t *c = kn_conf_new();
  if (!c) return NULL;
  /* Nothing listens on port 9: the consumer only ever retries. */
  const char *props[][2] = {{"stream", "s"},
                            {"endpoint", "http://127.0.0.1:9"},
                            {"region", "us-east-1"},
                            {"aws.access.key.id", "test"},
                            {"aws.secret.access.key", "test"},
                            {"retry.backoff.max.ms", "10"},
                            {"log.level", "0"}};
  char err[256];
  for (size_t i = 0; i < sizeof(props) / sizeof(props[0]); i++)
    if (kn_conf_set(c, props[i][0], props[i][1], err, sizeof(err)) !=
        KN_CONF_OK) {
      kn_conf_destroy(c);
      return NULL;
    }
  kn_consumer_t *kc = kn_consumer_new(c, err, sizeof(err));
  kn_conf_destroy(c);
  return kc;
}

static void *wait_forever(void *arg) {
  static int r;
  r = kn_consumer_wait(arg, -1);
  return &r;
}

static void test_close_wakes_a_waiter(void) {
  kn_consumer_t *kc = new_consumer();
  KT_REQUIRE(kc != NULL);
  pthread_t t;
  KT_REQUIRE(pthread_create(&t, NULL, wait_forever, kc) == 0,
             kn_consumer_destroy(kc));
  kn_error_destroy(kn_consumer_close(kc));
  void *r = NULL;
  pthread_join(t, &r);
  KT_ALWAYS(*(int *)r == 1);
  /* Closed: nothing to wait for, whatever the timeout. */
  KT_ALWAYS(kn_consumer_wait(kc, 0) == 1);
  KT_ALWAYS(kn_consumer_wait(kc, -1) == 1);
  KT_CHECK(kn_consumer_poll(kc, 0) == NULL);
  kn_consumer_destroy(kc);
}

int main(void) {
  KT_RUN(test_close_wakes_a_waiter);
  return KT_DONE();
}
