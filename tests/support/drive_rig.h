/* A test world for the lease-mode driver (consumer/drive.h): workers, each
 * the real drive with the core inside, on a virtual clock, against a real
 * lease store (the memory store, which passes the lease-store conformance
 * suite), a fixed shard listing and injected store faults.
 *
 * A worker's operations record what the drive did (readers started and
 * stopped, deadlines, checkpoint replies, fatal errors) and queue its
 * store calls as jobs (consumer/store_job.h).  Nothing is answered inside
 * an operation (that would call into the drive while it runs):
 * kn_rig_run() answers the queued calls afterwards, one at a time in the
 * order they were sent, carrying them out with kn_store_job_apply() as the
 * store threads do and feeding each outcome back with kn_drive_result(),
 * until none is left.  The clock stands still meanwhile: every call is
 * answered at the time it was sent.
 *
 * KN_RIG_TRACE set in the environment: every call answered, hand-over
 * and line the core logs is told on stderr.
 *
 * Ownership: a rig owns its store and the leases kn_rig_lease() and
 * kn_rig_list() return; a worker owns its drive and its queued jobs.  The
 * listing, the faults and the ids are borrowed. */
#ifndef KN_TESTS_DRIVE_RIG_H
#define KN_TESTS_DRIVE_RIG_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/drive.h"
#include "consumer/store_job.h"
#include "lease/store.h"

#define KN_RIG_LOOKS 4

typedef struct kn_rig {
  kn_lease_store_t *ls; /* "memory", private to the rig */
  int64_t now;          /* the virtual clock (ms): what `now` returns */
  /* ListShards' answer (borrowed). */
  const kn_cc_shard_t *shards;
  size_t n_shards;
  /* Faults (borrowed; NULL: none): every listing of the lease table fails
   * with fail_list, every ListShards with fail_shards, every renewal with
   * fail_renew, and fail_beat_of's heartbeats with fail_beat.  A failed
   * call changes nothing in the store. */
  const kn_error_t *fail_list;
  const kn_error_t *fail_shards;
  const kn_error_t *fail_renew;
  const kn_error_t *fail_beat;
  const char *fail_beat_of;
  /* Every renewal is carried out, then answered with landed_renew (a
   * time-out after the write landed). */
  const kn_error_t *landed_renew;
  /* Every renewal that marks a lease (kn_cc_action_t.mark) fails so. */
  const kn_error_t *fail_mark;
  /* Non-zero: rosters (every membership item read) are refused for good,
   * as without the right to Scan. */
  int fail_roster;
  /* A worker that answers hand-offs without heartbeats (borrowed; NULL:
   * none): listings mark its leases owner_hands_over, as the DynamoDB
   * store marks those of a KCL 3.x worker. */
  const char *hands_over;
  /* Leases read for the test (kn_rig_lease, kn_rig_list). */
  kn_lease_t look[KN_RIG_LOOKS];
  unsigned n_look;
  kn_lease_t *all;
  size_t n_all;
} kn_rig_t;

/* What a worker's drive did. */
typedef struct kn_rig_seen {
  int start;          /* readers started */
  int stop;           /* stopped, the tenure ended (KN_DRIVE_LOST) */
  int yield;          /* stopped, handed over (KN_DRIVE_YIELD) */
  int done;           /* stopped, the shard finished (KN_DRIVE_DONE) */
  int deadline;       /* readers re-timed */
  int replies, fatal; /* checkpoint replies, fatal errors */
  int lists, beats;   /* LIST_LEASES and HEARTBEAT calls answered */
  int refused;        /* calls the store refused (a failed condition) */
  int failed;         /* calls that failed otherwise (faults included) */
  int64_t beat_ms;    /* when the last heartbeat written was sent */
  int64_t tenure;     /* the last reader started: its tenure ... */
  int64_t until;      /* ... and the last deadline any reader was given */
  kn_err_t stop_reason, reply_code, fatal_code;
  char started[64];    /* the last reader started: its shard ... */
  char start_ckpt[64]; /* ... and its lease's checkpoint */
  char next_owner[64]; /* the last hand-off's next owner */
} kn_rig_seen_t;

#define KN_RIG_YIELDS 16

typedef struct kn_rig_worker {
  kn_rig_t *rig;
  const char *id;              /* borrowed */
  kn_drive_t *d;               /* NULL: not started, refused or out of memory */
  kn_rig_seen_t s;             /* what the drive did */
  kn_store_job_t *head, *tail; /* calls sent and not yet answered */
  /* Set by the test: the application finishes at once what it was handed
   * of a lease it must hand over (kn_rig_run answers each YIELD with
   * kn_drive_yielded, pos NULL, once the calls in hand are answered).
   * Else YIELDs are left for the test to answer. */
  int answer_yields;
  struct {
    char key[64];
    int64_t tenure;
  } yields[KN_RIG_YIELDS]; /* YIELDs to answer */
  size_t n_yields;
} kn_rig_worker_t;

/* A rig on a new private memory store, at time 0.  Returns 0, or -1 when
 * the store cannot be opened (out of memory). */
int kn_rig_open(kn_rig_t *r);
/* Frees the store and the leases read. */
void kn_rig_close(kn_rig_t *r);

/* Starts worker w (zeroed by the call) with cfg, its id as cfg->worker
 * (borrowed), at r->now.  Returns 0, or -1 when kn_drive_new refused
 * (out of memory, or a configuration the core refuses). */
int kn_rig_start(kn_rig_t *r, kn_rig_worker_t *w, const kn_cc_cfg_t *cfg);
/* The worker dies without a word: its drive and the calls it sent are
 * dropped (what was written stays).  Accepts a worker never started. */
void kn_rig_kill(kn_rig_worker_t *w);

/* Answers w's queued calls (and YIELDs, with answer_yields), as said
 * above, until none is left.  Returns 0, or -1 when the drive went on
 * calling past a sane bound (it was then killed: kn_rig_kill). */
int kn_rig_run(kn_rig_worker_t *w);
/* Sets the clock to now (never back), ticks w's drive, then kn_rig_run. */
int kn_rig_tick(kn_rig_worker_t *w, int64_t now);

/* The lease of key as the store has it now; a zeroed lease (key NULL) when
 * there is none or it cannot be read.  Valid for the next KN_RIG_LOOKS - 1
 * calls of kn_rig_lease. */
const kn_lease_t *kn_rig_lease(kn_rig_t *r, const char *key);
/* Every lease as the store has it now, sorted by key (*v valid until the
 * next call; NULL, 0 when it cannot be read).  Returns the count. */
size_t kn_rig_list(kn_rig_t *r, const kn_lease_t **v);

#endif
