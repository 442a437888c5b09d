/* The simulated lease table (sim_store.c) behind the lease store
 * interface (lease/store.h), so that what passes for a store in the
 * simulator can be held to the same conformance suite as the real ones
 * (tests/support/lease_conformance.c).
 *
 * Every call is built into a sim_call_t and applied at once with
 * sim_store_apply, under the table's mutex: no delay, no faults.  Several
 * handles may share one table and be used from several threads.
 *
 * Worker ids: the simulated membership keeps ids in sim_member_t's 8
 * bytes.  The table gives each worker id a short alias ("m0", "m1", ...)
 * on its first heartbeat and translates both ways, so ids of any length
 * work; the membership is answered sorted by the ids themselves.
 *
 * Ownership: a sim_store_table_t owns its sim_t (of which only the
 * store's fields are used) and its aliases; handles borrow the table,
 * which must outlive them. */
#ifndef KN_SIM_STORE_OPS_H
#define KN_SIM_STORE_OPS_H

#include "lease/store.h"
#include "sim.h"

typedef struct sim_store_table sim_store_table_t;

/* An empty table; NULL when memory runs out. */
sim_store_table_t *sim_store_table_new(void);
/* Frees the table with every lease and member in it.  Accepts NULL. */
void sim_store_table_free(sim_store_table_t *t);

/* A store handle on t, named "sim"; NULL with *errp set when memory runs
 * out.  Freed with kn_lease_store_destroy. */
kn_lease_store_t *sim_store_open(sim_store_table_t *t, kn_error_t **errp);

#endif
