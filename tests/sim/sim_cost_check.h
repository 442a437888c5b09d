/* The fleet checks of kn_sim --cost: with no records simulated, the
 * readers are the intervals the drives ask for (start, re-timed by
 * deadlines, until a stop, a kill or the deadline), and the store's
 * landed takes name the tenure that holds each lease.  Checked:
 * - two readers: a take lands while a reader of another tenure of the
 *   shard may still read (not stopped, its deadline not passed), the
 *   previous holder alive or not (a killed worker's readers are gone);
 * - a start for a tenure never written, or one already superseded whose
 *   deadline passes a lease duration after the later take (fencing);
 * - a renewal, checkpoint, release or hand-off end that lands for a
 *   tenure other than the one holding the lease (fencing).
 *
 * Ownership: the checker owns its arrays; sim_cost_check_free frees them. */
#ifndef KN_SIM_COST_CHECK_H
#define KN_SIM_COST_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/store_job.h"

typedef struct sim_cc_reader {
  int w;
  int64_t tenure, until;
  int stopped;
} sim_cc_reader_t;

typedef struct sim_cc_shard {
  sim_cc_reader_t *r; /* readers started, newest last */
  size_t n, cap;
  int64_t cur_tenure; /* the tenure holding the lease (-1: none yet) */
  int64_t take_t;
  int cur_w;
} sim_cc_shard_t;

typedef struct sim_cost_check {
  sim_cc_shard_t *sh;
  int shards;
  int64_t duration_ms;
  int64_t starts, takes, violations;
  char first[320]; /* the first violation */
} sim_cost_check_t;

int sim_cost_check_init(sim_cost_check_t *c, int shards, int64_t duration_ms);
void sim_cost_check_free(sim_cost_check_t *c);
/* Worker w starts reading shard `shard` (tenure, until). */
void sim_cost_check_start(sim_cost_check_t *c, int w, int shard, int64_t tenure,
                          int64_t until, int64_t now);
void sim_cost_check_deadline(sim_cost_check_t *c, int w, int shard,
                             int64_t tenure, int64_t until);
void sim_cost_check_stop(sim_cost_check_t *c, int w, int shard, int64_t tenure);
/* Worker w died: its readers are gone. */
void sim_cost_check_killed(sim_cost_check_t *c, int w);
/* A store call of worker w on shard `shard` was applied. */
void sim_cost_check_landed(sim_cost_check_t *c, int w, int shard,
                           const kn_store_job_t *j, int64_t now);

#endif
