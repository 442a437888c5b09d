/* Scripted runs: fixed topologies, tables and faults for known defects. */
#include "sim.h"

const char *sim_scenario_names(void) { return ""; }

int sim_scenario_setup(sim_t *s, const char *name) { return -1; }
