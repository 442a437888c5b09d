/* The simulated lease table (sim_store.c, through sim_store_ops.c) held to
 * the conformance suite the memory, SQLite and DynamoDB stores pass
 * (tests/support/lease_conformance.c): what the simulator's workers call
 * a store must behave as the shipped stores do.  Built once per store
 * mutant as well (KN_SIM_MUTANT, sim_store.c), which the suite must
 * catch. */
#include <stdio.h>

#include "kt.h"
#include "lease_conformance.h"
#include "sim_store_ops.h"

static int total_checks;

static kn_lease_store_t *open_sim(void *opaque, kn_error_t **errp) {
  return sim_store_open(opaque, errp);
}

static void test_sim_conformance(void) {
  sim_store_table_t *t = sim_store_table_new();
  KT_CHECK(t != NULL);
  if (!t) return;
  /* 8 racing takers, 200 races, 300 leases listed: as the memory store. */
  kn_lc_target_t target = {"sim", open_sim, t, 8, 200, 300};
  int failures = kn_lc_run(&target, "shardId-sim", &total_checks);
  kt_checks++;
  if (failures) kt_failures++;
  sim_store_table_free(t);
}

int main(void) {
  KT_RUN(test_sim_conformance);
  fprintf(stderr, "conformance: %d checks\n", total_checks);
  return KT_DONE();
}
