/* The deterministic simulator of the coordination core (consumer/ccore.h):
 * workers running real cores against a simulated lease store, stream,
 * readers and application, on virtual time, with faults, and invariants
 * checked at every step.  Everything random comes from one PRNG seeded by
 * the run's seed, so a seed reproduces a run exactly.
 *
 * Ownership: the sim_t owns everything reachable from it; sim_free()
 * releases it.  Files: sim_util.c (PRNG, event queue, trace), sim_store.c
 * (lease table), sim_stream.c (shards and records), sim_worker.c (cores,
 * readers, application), sim_fault.c (random faults and resharding),
 * sim_check.c (invariants), scenarios.c (scripted runs), sim_main.c (CLI). */
#ifndef KN_SIM_H
#define KN_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/ccore.h"
#include "consumer/drive.h"
#include "kn/error.h"
#include "lease/lease.h"

#define SIM_MAX_WORKERS 1024
#define SIM_MAX_SHARDS 64
#ifndef SIM_TRACE
#define SIM_TRACE 256 /* -DSIM_TRACE=65536 for a long trace */
#endif

/* ---- PRNG (splitmix64) ---- */
typedef struct sim_rng {
  uint64_t s;
} sim_rng_t;
uint64_t sim_rand(sim_rng_t *r);
/* Uniform in [lo, hi]. */
int64_t sim_range(sim_rng_t *r, int64_t lo, int64_t hi);
/* True with probability permille / 1000. */
int sim_chance(sim_rng_t *r, int permille);

/* ---- events ---- */
typedef enum sim_ev_kind {
  EV_TICK,         /* worker w: kn_cc_tick (a: the scheduled time) */
  EV_STORE_APPLY,  /* call p lands on the table */
  EV_STORE_REPLY,  /* call p's answer reaches worker w */
  EV_SHARDS_REPLY, /* ListShards answer (a: id, b: failed) */
  EV_READER,       /* reader a of worker w reads a batch */
  EV_ENDED,        /* reader a of worker w reports the shard's end */
  EV_POLL,         /* worker w's application polls */
  EV_APPEND,       /* producer: records appended */
  EV_FAULT,        /* a random fault or reshard */
  EV_RESTART,      /* worker w comes back */
  EV_SCRIPT,       /* scenario step a */
  EV_CTL           /* a message to worker w's busy control thread (p) */
} sim_ev_kind_t;

typedef struct sim_ev {
  int64_t t;
  uint64_t seq; /* ties: in order of scheduling */
  int kind, w, inc;
  int64_t a, b;
  void *p;
} sim_ev_t;

/* ---- trace: the last SIM_TRACE steps, formatted only when printed ---- */
typedef struct sim_trace_ent {
  int64_t t;
  int w;
  const char *what;
  char key[28];
  int64_t a, b;
  char msg[96]; /* the core's LOG lines */
} sim_trace_ent_t;

/* ---- stream ---- */
typedef struct sim_rec {
  int64_t rid;  /* global record id */
  int64_t t;    /* appended at */
  char seq[32]; /* decimal, increasing per shard (and globally) */
  int required; /* must be delivered (not before a LATEST start) */
  int deliveries;
  int users;    /* user records in it: a KPL aggregate when > 1 (--roles) */
  int last_ten; /* index of the tenure that delivered it last, or -1 */
} sim_rec_t;

typedef struct sim_shard {
  char id[24];
  int parent, adjacent; /* shard indexes, or -1 */
  uint64_t hs, he;      /* hash range */
  char hs_s[24], he_s[24];
  int closed, idle, listed;
  int gone; /* past retention: unlisted and unreadable */
  int64_t closed_t;
  int children[2], n_children;
  sim_rec_t *rec;
  size_t n, cap;
  size_t n_delivered;    /* records delivered at least once */
  int64_t first_deliv_t; /* -1 until its first record is delivered */
  int lease_removed;     /* its lease was removed (cleanup) */
  int64_t removed_t;     /* when that landed */
  int lease_created;
  int64_t cur_tenure; /* counter written by the last take that landed */
  int64_t cur_take_t; /* when it landed */
  int cur_ten_w;      /* the worker of that take */
} sim_shard_t;

/* ---- store calls in flight ---- */
typedef enum sim_fate {
  FATE_OK,
  FATE_FAIL,       /* retriable error, not applied */
  FATE_LANDED_ERR, /* applied, but the caller gets a time-out */
  FATE_HANG        /* not applied, a time-out after a long wait */
} sim_fate_t;

typedef struct sim_call {
  int w, inc;
  uint64_t id;
  kn_cc_op_t op;
  int64_t tenure, counter, sent_ms; /* sent_ms: the worker's clock */
  int mark;                         /* RENEW: kn_cc_action_t.mark */
  int64_t sent_t;                   /* the simulation's clock */
  char *key, *old_owner, *owner;
  kn_lease_t lease; /* CREATE */
  char *ckpt, *pending;
  int64_t subseq, pending_subseq;
  void *state;
  size_t state_len;
  char **children;
  size_t n_children;
  sim_fate_t fate;
  kn_err_t rc; /* result when applied */
  int64_t new_counter;
  kn_lease_t *list; /* LIST_LEASES snapshot */
  size_t n_list;
  char *handoff_to;           /* RENEW, CHECKPOINT: a hand-off asked for */
  kn_lease_t got;             /* GET */
  int64_t beat, leases, bump; /* HEARTBEAT (children: the names forgotten) */
  int bucket, leave, publish_n, roster; /* HEARTBEAT (kn_cc_action_t) */
  int probe;                            /* HEARTBEAT: roster only */
  char *digest;                         /* HEARTBEAT: published (owned) */
  int *forget_bucket;                   /* HEARTBEAT: owned */
  kn_members_t members;                 /* HEARTBEAT: the answer */
  kn_members_t roster_m;                /* roster: every item's members */
  int has_roster;
} sim_call_t;

/* A row of the simulated membership: a worker's entry in one item. */
typedef struct sim_member {
  char worker[8];
  int64_t beat, leases;
  int bucket;
} sim_member_t;

/* Membership items the simulated table keeps. */
#define SIM_ITEMS 16

/* ---- tenures (one per START) ---- */
enum {
  TEN_KILLED = 1,
  TEN_FROZEN = 2,
  TEN_STORE_FAULT = 4,
  TEN_DONE = 8,
  TEN_ENDED = 16,
  TEN_STOPPED = 32,
  TEN_STALE = 64,     /* a later take had landed when it started */
  TEN_RELEASED = 128, /* its release or hand-off landed */
  TEN_DROPPED = 256   /* stopped for a lease lost or not renewed in time:
                         no longer the worker's to release */
};
typedef struct sim_ten {
  int shard, w, inc;
  int64_t tenure;
  int64_t start_t, end_t;
  int flags;
  int64_t delivered;
} sim_ten_t;

/* ---- workers ---- */
typedef struct sim_reader {
  int64_t serial;
  int shard, ten; /* shard index, tenure record index */
  char key[24];
  int64_t tenure, until_ms;
  size_t next;  /* next record index to deliver */
  int finished; /* reached the end of a closed shard */
  int last;     /* index of the last record delivered, or -1 */
  int ckpted;   /* manual: last record checkpointed index, or -1 */
} sim_reader_t;

typedef struct sim_proc {
  char key[24];
  int64_t tenure;
  char seq[32];
} sim_proc_t;

/* A YIELD the application answers at its next poll: seq is the last
 * record it was handed ("" for none). */
typedef sim_proc_t sim_yield_t;

typedef struct sim_worker {
  char id[8];
  int alive, inc;
  /* The consumer's own driver (consumer/drive.h) and the core in it; its
   * operations are carried out against the simulated world. */
  kn_drive_t *dr;
  struct sim_env {
    struct sim *s;
    int w;
  } env;
  int crashed;          /* killed between two actions: the rest are lost */
  int dying;            /* being torn down: operations do nothing */
  int64_t stall_until;  /* virtual time: the control thread is busy */
  int ctl_pending;      /* messages waiting for it (EV_CTL) */
  int64_t off;          /* its monotonic clock = virtual time + off */
  int64_t frozen_until; /* virtual time */
  int64_t tick_at;      /* virtual time of the scheduled tick, or -1 */
  int auto_ckpt;
  sim_reader_t *rd;
  size_t n_rd, cap_rd;
  sim_proc_t *proc; /* processed at the next poll */
  size_t n_proc, cap_proc;
  sim_yield_t *yields; /* answered at the next poll */
  size_t n_yields, cap_yields;
  int64_t partition_until;
  uint64_t reqs;
  int closing;        /* kn_cc_close called; CLOSED not yet seen */
  int closed;         /* CLOSED seen: the core goes after this drain */
  int close_fault;    /* a store call failed while closing */
  int64_t fault_t;    /* when a store call last failed, or -1 */
  int64_t hb_fault_t; /* when a heartbeat last failed or was slow, or -1 */
  int64_t close_t;    /* when kn_cc_close was called */
  char slow_take[24]; /* the last TAKE answered after more than 1 s */
  int ckpt_retry;     /* a manual checkpoint failed: again at the next poll */
} sim_worker_t;

typedef struct sim_opts {
  uint64_t seed;
  int workers, shards;
  int faults;      /* 0 none, 1 kills, 2 all */
  int topology;    /* SIM_TOPO_* */
  int64_t seconds; /* virtual seconds of activity (then quiet) */
  int trace_always;
  int verbose;
  const char *scenario;
} sim_opts_t;

enum {
  SIM_TOPO_STATIC,
  SIM_TOPO_SPLIT,
  SIM_TOPO_MERGE,
  SIM_TOPO_MIXED,
  SIM_TOPO_IDLE,
  SIM_TOPO_RANDOM
};

enum { DUP_KILL, DUP_FREEZE, DUP_STORE, DUP_MOVE, DUP_N };

typedef struct sim sim_t;
/* Scenario hooks (scenarios.c). */
typedef struct sim_scenario_ops {
  void (*step)(sim_t *s, int64_t step);
  /* Extra delay for a reader's end report; 0 for none. */
  int64_t (*ended_delay)(sim_t *s, int w, const char *key, int64_t tenure);
  /* Non-zero: this store call fails (not applied). */
  int (*fail_call)(sim_t *s, const sim_call_t *c);
  void (*check_end)(sim_t *s);
  /* Extra time before the call lands (a slow scan); 0 for none. */
  int64_t (*apply_delay)(sim_t *s, const sim_call_t *c);
} sim_scenario_ops_t;

struct sim {
  sim_opts_t o;
  sim_rng_t rng;
  int64_t now;
  uint64_t ev_seq;
  int64_t n_events;
  sim_ev_t *heap;
  size_t n_heap, cap_heap;
  /* store */
  kn_lease_t *table;
  size_t n_table, cap_table;
  int64_t outage_until;
  sim_member_t mb[2 * SIM_MAX_WORKERS]; /* sorted by worker, item */
  int n_mb;
  int64_t epoch; /* item 0's */
  int64_t item_epoch[SIM_ITEMS];
  char item_digest[SIM_ITEMS][96];
  /* stream */
  sim_shard_t sh[SIM_MAX_SHARDS];
  int n_sh;
  int64_t next_rid;
  int child_shards;     /* the server returns ChildShards at shard end */
  int64_t at_ts;        /* AT_TIMESTAMP's timestamp */
  int64_t retention_ms; /* closed shards go this long after closing; 0 never */
  /* workers */
  sim_worker_t wk[SIM_MAX_WORKERS];
  int n_wk;
  int64_t next_serial;
  kn_cc_cfg_t cfg;
  const char *initial;
  /* tenures */
  sim_ten_t *ten;
  size_t n_ten, cap_ten;
  /* phases */
  int64_t faults_end, end;
  int faults_on;
  /* results */
  int violated;
  char violation[512];
  int64_t dups[DUP_N];
  int64_t handoffs; /* HANDOFF_DONE that landed */
  int64_t deliveries, records;
  int64_t last_delivery_t; /* the quiet period runs on while readers catch up */
  int64_t last_end_t;      /* ... and while a lease finished lately may wait
                              for its cleanup (it must stand still first) */
  int extensions;
  /* conditional writes refused although no one else took the lease: the
   * core's counter fell behind one of its own writes (one that landed but
   * answered an error) */
  int64_t stale_counter;
  int64_t stale_lost; /* ... after which the worker gave the lease up */
  /* creates that landed after the lease's cleanup (a late create) */
  int64_t recreated;
  int had_fault; /* any kill, freeze or store fault happened */
  sim_trace_ent_t tr[SIM_TRACE];
  uint64_t n_tr;
  const sim_scenario_ops_t *sc;
  void *sc_state;
};

/* sim_util.c */
void sim_push(sim_t *s, int64_t t, int kind, int w, int inc, int64_t a,
              int64_t b, void *p);
int sim_pop(sim_t *s, sim_ev_t *ev);
void sim_trace(sim_t *s, int w, const char *what, const char *key, int64_t a,
               int64_t b);
void sim_trace_print(const sim_t *s, size_t last);
void sim_trace_msg(sim_t *s, int w, const char *msg);
void sim_violate(sim_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sim_free(sim_t *s);
/* Frees what an event owns (a store call, a message). */
void sim_ev_free(const sim_ev_t *ev);

/* sim_store.c: the table, with store.h's conditions.  Returns 0 or a
 * kn_err_t (KN_ERR_CONDITIONAL_CHECK_FAILED). */
int sim_store_find(const sim_t *s, const char *key);
kn_err_t sim_store_apply(sim_t *s, sim_call_t *c);
void sim_store_roster(const sim_t *s, kn_members_t *out);
void sim_call_free(sim_call_t *c);
int sim_store_put(sim_t *s, const kn_lease_t *l); /* setup: insert a copy */

/* sim_stream.c */
int sim_shard_add(sim_t *s, int parent, int adjacent, uint64_t hs, uint64_t he);
int sim_shard_find(const sim_t *s, const char *id);
void sim_append(sim_t *s, int shard, int n);
int sim_split(sim_t *s, int shard, int idle_child);
int sim_merge(sim_t *s, int a, int b);
void sim_retention(sim_t *s); /* closed shards past retention go */
/* The listing as the server gives it: *v (malloc'ed) of *n entries,
 * strings pointing into s. */
void sim_list_shards(const sim_t *s, kn_cc_shard_t **v, size_t *n);
void sim_shard_desc(const sim_t *s, int i, kn_cc_shard_t *d);
/* Index of the first record after checkpoint ckpt of shard i. */
size_t sim_start_index(const sim_t *s, int i, const char *ckpt);

/* sim_worker.c */
void sim_worker_start(sim_t *s, int w);
void sim_worker_kill(sim_t *s, int w);
void sim_worker_close(sim_t *s, int w); /* graceful: kn_cc_close */
/* After an event handed to w's drive: a crash between its actions, the
 * end of a close, the next tick. */
void sim_worker_after(sim_t *s, int w);
/* Destroys w's drive without carrying out anything more. */
void sim_worker_drop_drive(sim_t *s, int w);
void sim_worker_event(sim_t *s, const sim_ev_t *ev);
/* w stops for `ms`: the whole process (freeze: every event waits, its
 * clock jumps) or only its control thread (readers and the application
 * go on).  Its tenures count as cut short by it. */
void sim_worker_stall(sim_t *s, int w, int freeze, int64_t ms);
/* A store call of w on key failed or was slow (key NULL: a listing):
 * duplicates after it are the store's doing. */
void sim_flag_store_fault(sim_t *s, int w, const char *key);
/* The same for call c: a heartbeat's fault is every tenure's of w (the
 * worker may stop reading them all). */
void sim_flag_call_fault(sim_t *s, const sim_call_t *c);
int64_t sim_wnow(const sim_t *s, int w);

/* sim_fault.c */
void sim_fault_event(sim_t *s, const sim_ev_t *ev);
void sim_fault_store(sim_t *s, sim_call_t *c);
int64_t sim_latency(sim_t *s);

/* sim_cost.c: kn_sim --cost (one JSON line; 0, or 1 on failure). */
int sim_cost_main(int shards, int workers, int64_t seconds, uint64_t seed,
                  int members, int limits, int one_item, double max_hot);

/* sim_check.c */
void sim_check_delivery(sim_t *s, int w, const sim_reader_t *r, size_t idx);
void sim_check_reading(sim_t *s, int w, const sim_reader_t *r);
void sim_check_start(sim_t *s, int w, const kn_cc_action_t *a, int shard);
void sim_check_landed(sim_t *s, const sim_call_t *c, const char *old_ckpt);
void sim_check_end(sim_t *s);
/* A kill or freeze of w hits its tenures still running and those whose
 * lease it has not let go yet (handing over, closing). */
void sim_flag_tenures(sim_t *s, int w, int flag);

/* sim_run.c */
int sim_run(sim_t *s);
void sim_init(sim_t *s, const sim_opts_t *o);

/* scenarios.c */
int sim_scenario_setup(sim_t *s, const char *name);
const char *sim_scenario_names(void);

#endif
