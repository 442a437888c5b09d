/* Settings kn_consumer_new refuses before it starts anything. */
#include <string.h>

#include "kn/conf.h"
#include "kn/consumer.h"
#include "kt.h"

static kn_conf_t *lease_conf(const char *duration, const char *renew) {
  kn_conf_t *c = kn_conf_new();
  char err[256];
  KT_CHECK(kn_conf_set(c, "stream", "s", err, sizeof(err)) == KN_CONF_OK);
  KT_CHECK(kn_conf_set(c, "lease.store", "memory", err, sizeof(err)) ==
           KN_CONF_OK);
  KT_CHECK(kn_conf_set(c, "lease.duration.ms", duration, err, sizeof(err)) ==
           KN_CONF_OK);
  KT_CHECK(kn_conf_set(c, "lease.renew.interval.ms", renew, err, sizeof(err)) ==
           KN_CONF_OK);
  return c;
}

/* A renewal interval of 2/3 of the lease or more: the grace period
 * (duration - renew / 2) would end before the next renewal. */
static void test_renew_interval_too_long(void) {
  const char *bad[][2] = {
      {"3000", "2000"}, {"3000", "2999"}, {"10000", "9000"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    kn_conf_t *c = lease_conf(bad[i][0], bad[i][1]);
    char err[512] = "";
    kn_consumer_t *kc = kn_consumer_new(c, err, sizeof(err));
    KT_CHECK(kc == NULL);
    KT_CHECK_MSG(strstr(err, "2/3 of lease.duration.ms") != NULL, "%s", err);
    KT_CHECK_MSG(strstr(err, "lease.renew.interval.ms") != NULL, "%s", err);
    kn_consumer_destroy(kc);
    kn_conf_destroy(c);
  }
}

int main(void) {
  KT_RUN(test_renew_interval_too_long);
  return KT_DONE();
}
