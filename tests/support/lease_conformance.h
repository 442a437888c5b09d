/* The lease store conformance suite: one set of cases, run against every
 * store (memory and SQLite from the unit tests, SQLite and DynamoDB from
 * tests/tools/lease_tool). */
#ifndef KN_TESTS_LEASE_CONFORMANCE_H
#define KN_TESTS_LEASE_CONFORMANCE_H

#include "lease/store.h"

typedef struct kn_lc_target {
  const char *label; /* for messages */
  /* Opens another handle on the same table (a second worker); NULL with
   * *errp set on failure. */
  kn_lease_store_t *(*open)(void *opaque, kn_error_t **errp);
  void *opaque;
  int threads; /* concurrent takers */
  int rounds;  /* races they run */
  int many;    /* leases in the list case */
} kn_lc_target_t;

/* Runs every case on leases whose keys start with prefix (so a shared
 * table can be reused).  Returns the number of failed checks and adds the
 * number made to *checks. */
int kn_lc_run(const kn_lc_target_t *t, const char *prefix, int *checks);

/* Only the concurrent-takers case (also used alone by the tool). */
int kn_lc_run_race(const kn_lc_target_t *t, const char *prefix, int *checks);

#endif
