/* kn_sim --roles: the stream-processor model (docs/STREAM_PROCESSING.md)
 * under the simulator.  One enumerator process (the real kn_enumerator_t)
 * and 2 to 4 reader processes (the real reader bookkeeping,
 * stream/reader_book.h, and the real snapshot bytes) against the
 * simulated stream of sim_stream.c and a simulated transactional
 * database that is both the sink and the processes' mailbox, as in
 * examples/exactly-once/.  Processes are killed at any step and restart
 * from what they committed.  The world (PRNG, clock, event queue, trace,
 * stream) is a sim_t; everything else is here.
 *
 * Ownership: the rsim_t owns everything reachable from it; rs_free()
 * releases it.  Files: sim_roles.c (the run, the command line),
 * sim_roles_proc.c (the processes and the database), sim_roles_check.c
 * (the invariants). */
#ifndef KN_SIM_ROLES_H
#define KN_SIM_ROLES_H

#include <stddef.h>
#include <stdint.h>

#include "kn/enumerator.h"
#include "kn/position.h"
#include "sim.h"
#include "stream/reader_book.h"

#define RS_MAX_READERS 8

/* Event kinds (sim_ev_t.kind), past the lease mode's. */
enum {
  RV_READ = 100, /* reader w (incarnation inc) polls a batch */
  RV_COMMIT,     /* reader w commits */
  RV_RESTART,    /* reader w comes back */
  RV_ENUM,       /* the enumerator's round (inc) */
  RV_ENUM_RESTART,
  RV_REPORT, /* a finished report of reader w about shard a reaches the
                enumerator of incarnation b */
  RV_ACK,    /* the enumerator's ack of shard a reaches reader w (inc) */
  RV_APPEND, /* the producer */
  RV_RESHARD,
  RV_KILL,
  RV_SCALE /* a reader joins or leaves */
};

/* Rows of the database. */
enum { RS_ASSIGN = 1, RS_REVOKE = 2 };
typedef struct rs_assign {
  int64_t id;
  int reader, kind, shard, done;
  kn_position_t start;
} rs_assign_t;

enum { RS_FINISHED = 1, RS_RETURNED = 2, RS_LEFT = 3 };
typedef struct rs_event {
  int kind, reader, shard, consumed;
  kn_position_t pos;
} rs_event_t;

typedef struct rs_row {
  int shard;
  size_t rec;
  uint64_t sub; /* the user record inside it */
} rs_row_t;

typedef struct rs_pos {
  int shard;
  kn_position_t pos;
  int64_t ck, sent_t; /* rpc reports: first checkpoint after the take */
} rs_pos_t;

typedef struct rs_reader {
  char id[8];
  int exists;  /* registered (durable) */
  int joined;  /* the enumerator took it in (durable) */
  int retired; /* left for good (durable) */
  int alive, inc, retiring;
  /* the process (lost in a kill) */
  kn_rbook_t book;
  rs_row_t *rows; /* polled, not committed */
  size_t n_rows, cap_rows;
  rs_pos_t *ret; /* shards handed back, not committed */
  size_t n_ret, cap_ret;
  rs_pos_t *unacked; /* rpc: reports sent, not acknowledged */
  size_t n_unacked, cap_unacked;
  int64_t applied; /* highest assignment taken in */
  int64_t ckpt;    /* last checkpoint committed */
  /* durable */
  unsigned char *state;
  size_t state_len;
  int64_t state_ckpt;
} rs_reader_t;

typedef struct rsim {
  sim_t s;
  int rpc;        /* finished reports travel as messages, not in the commit */
  int aggregated; /* records are KPL aggregates of 1 to 4 user records */
  sim_rng_t agg_rng;
  int64_t read_ms, commit_ms, round_ms, sync_ms;
  kn_assigner_t assigner;
  kn_position_t initial;
  rs_reader_t rd[RS_MAX_READERS];
  int n_rd;
  /* the enumerator */
  kn_enumerator_t *en;
  int en_alive, en_inc;
  rs_pos_t *acks; /* rpc: reports applied (ck: the reader), acked at the
                     next commit */
  size_t n_acks, cap_acks;
  unsigned char *en_state; /* durable */
  size_t en_state_len;
  /* the database */
  rs_assign_t *as;
  size_t n_as, cap_as;
  rs_event_t *ev;
  size_t n_ev, cap_ev;
  /* sink: the last user record committed of each shard (record, or -1;
   * user record inside it) */
  int last_idx[SIM_MAX_SHARDS];
  uint64_t last_sub[SIM_MAX_SHARDS];
  /* figures */
  int64_t commits, kills_r, kills_e, restores_r, restores_e, joins, leaves,
      reshards, committed, lost_msgs;
} rsim_t;

/* sim_roles_proc.c */
void rs_reader_start(rsim_t *r, int i);
void rs_reader_kill(rsim_t *r, int i);
void rs_reader_read(rsim_t *r, int i);
void rs_reader_commit(rsim_t *r, int i);
void rs_reader_ack(rsim_t *r, int i, int shard);
void rs_enum_start(rsim_t *r);
void rs_enum_kill(rsim_t *r);
void rs_enum_round(rsim_t *r);
void rs_enum_report(rsim_t *r, int reader, int shard);
int rs_reader_index(const rsim_t *r, const char *id);
void rs_free(rsim_t *r);

/* sim_roles_check.c */
/* User record sub of record rec committed to the sink by reader i. */
void rs_check_commit(rsim_t *r, int i, int shard, size_t rec, uint64_t sub);
/* After every step: no shard read by two live readers. */
void rs_check_step(rsim_t *r);
/* At the end of the quiet period. */
void rs_check_end(rsim_t *r);

/* sim_roles.c: kn_sim --roles, seeds o->seed .. + runs - 1; readers 0
 * and rpc -1 are drawn from each seed.  0, or 1 when a run violated an
 * invariant. */
int sim_roles_main(const sim_opts_t *o, int readers, int rpc, long long runs,
                   int first);

#endif
