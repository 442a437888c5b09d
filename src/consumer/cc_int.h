/* The coordination core's internals, shared by its files (ccore.h says
 * what the core decides).  One file per concern, each with its part of
 * struct kn_cc below; the timed ones have their "when next" (*_next_ms,
 * a share of kn_cc_wake_ms) and "on tick" (*_tick, a share of
 * kn_cc_tick), which ccore.c runs as one list so that the two cannot
 * drift apart:
 *
 *   ccore.c       construction, the answers to calls, wake-up and tick
 *   cc_reads.c    what readers and the application report
 *   cc_take.c     take rounds: classify the listing, plan, issue (timed)
 *   cc_sync.c     shard sync: listings, creates, cleanup (timed)
 *   cc_close.c    closing and the FATAL verdict
 *   cc_members.c  heartbeats and the view of the members (timed)
 *   cc_handoff.c  hand-offs this worker asked for, watched until passed
 *                 on, then taken (timed)
 *   cc_writes.c   per-lease writes: renewals, checkpoints, releases, the
 *                 owner's side of a hand-off; reading deadlines and
 *                 checkpoint flushes (timed)
 *   cc_ops.c      calls in flight, log lines, replies
 *   ccore_queue.c the queue of actions; ccore_plan.c the pure planners
 *
 * A file calls only files below it in this list.  Each concern writes its
 * own state, with these exceptions: ccore.c sets the initial values and
 * clears the flags of the calls it answers (sync.syncing, take.taking);
 * a concern that learns something a take round should look at clears
 * take.idle (and may move take.at to now); cc_bump asks the next
 * heartbeat to tell the others to look. */
#ifndef KN_CONSUMER_CC_INT_H
#define KN_CONSUMER_CC_INT_H

#include <stdint.h>
#include <string.h>

#include "consumer/ccore.h"
#include "consumer/ccore_queue.h"
#include "lease/members.h"
#include "lease/taker.h"
#include "util/strmap.h"

#define SEQ_CAP 136 /* a sequence number, a sentinel or "" */

/* A checkpoint write the application waits for. */
typedef struct cc_req {
  struct cc_req *next;
  char seq[SEQ_CAP];
  int64_t subseq;
  int prepare;
  void *state;
  size_t state_len;
  void *req;
} cc_req_t;

/* A lease this worker holds, or held. */
typedef struct cc_lease {
  char *key;
  int held;    /* ours in the table: writes may go on */
  int reading; /* a reader runs (START sent, no STOP yet) */
  int64_t tenure;
  int64_t counter;  /* after our last good write */
  int64_t since_ms; /* when the take was answered */
  int64_t until_ms; /* reading deadline */
  int64_t next_renew_ms;
  uint64_t busy; /* id of our write in flight, 0: none */
  int flush_due;
  int failed_write;   /* the last write failed: the next waits a while */
  char ckpt[SEQ_CAP]; /* in the table */
  int64_t ckpt_sub;
  char processed[SEQ_CAP];
  int64_t processed_sub;
  char delivered[SEQ_CAP];
  int64_t delivered_sub;
  int ended, end_popped, shard_end_written;
  int marked; /* ownerBeatFailing is set in the table (acknowledged) */
  /* Taken while heartbeats fail and reading goes by the leases' deadlines
   * (mb.lifted): the others judge this lease by the membership until its
   * mark lands, so its reader starts only then.  The lease as taken
   * (owned), and whether it is read from its start. */
  kn_lease_t *await;
  int await_from_start;
  cc_req_t *reqs, *reqs_tail;
  /* Handing off: to whom, since when; yielded: the application is done
   * with what it was handed. */
  char *handoff_to;
  int64_t handoff_since;
  int yielded;
} cc_lease_t;

/* A lease asked for from its owner (HANDOFF), watched until passed on. */
typedef struct cc_in {
  char *key;
  int64_t counter;    /* as last seen */
  int64_t since_ms;   /* asked at */
  int64_t changed_ms; /* the counter last changed (observed) */
  int64_t next_ms;    /* next look */
  uint64_t busy;      /* GET in flight */
  int from_start;     /* its family is read here (kn_cc_family_read of the
                         listing it was asked from): read from the start
                         if it is still at the initial position */
} cc_in_t;

/* What a listing is for.  A sync lists the leases, the shards, then the
 * leases again, and plans on both lease listings: one older than the
 * shard listing (a shard open in the listing and leaseless before it was
 * never finished) and one newer (a closed shard's family as it is now). */
enum {
  P_NONE,
  P_SYNC_LEASES1,
  P_SYNC_SHARDS,
  P_SYNC_LEASES2,
  P_TAKE,
  P_PROBE, /* the leader's ListShards: a sync only if something changed */
  P_VERIFY /* GET of a held lease: did a write that failed land? */
};
/* What a TAKE is: a free or expired lease, a steal, the end of a
 * hand-off. */
enum { T_TAKE, T_STEAL, T_HANDED };

/* A call in flight. */
typedef struct cc_op {
  uint64_t id;
  kn_cc_op_t op;
  int purpose;
  char *key;
  int64_t tenure;
  int64_t emit_ms;
  kn_lease_t lease;   /* TAKE: the lease as listed */
  int from_start;     /* TAKE: read from the start (kn_cc_family_read) */
  int finished;       /* TAKE: finished by lineage (kn_cc_done_has): closed,
                         not read */
  char ckpt[SEQ_CAP]; /* CHECKPOINT: what it writes ("" for none) */
  int64_t ckpt_sub;
  int wave;          /* CREATE */
  int mark;          /* RENEW: kn_cc_action_t.mark */
  int64_t bump;      /* HEARTBEAT: added to the epoch */
  int bucket, leave; /* HEARTBEAT: the item written, the item left */
  int roster;        /* LIST_LEASES: asked for the roster too */
  int probe;         /* HEARTBEAT: the roster only (kn_cc_action_t) */
  int64_t epoch;     /* LIST_LEASES, P_PROBE: the epoch when sent */
  uint64_t deaths;   /* LIST_LEASES: deaths counted when sent */
  cc_req_t *req;     /* CHECKPOINT for the application */
} cc_op_t;

/* Membership (cfg.members), cc_members.c: this worker's heartbeats and
 * the view of everyone's they return (lease/members.h). */
typedef struct cc_members {
  int on;           /* heartbeats are written */
  int ok;           /* one was answered */
  uint64_t hb_busy; /* HEARTBEAT in flight */
  int64_t hb_at, beat;
  int64_t bump_pending; /* epoch bumps not yet written */
  int64_t until;        /* reading stops then without a heartbeat */
  int64_t fence_told;   /* the last FENCE (INT64_MAX: none) */
  int close_beat;       /* the closing heartbeat was sent */
  kn_mview_t view;
  int64_t view_sent_ms; /* the heartbeat behind the view was sent then */
  int64_t ok_sent_ms;   /* the last good heartbeat was sent then */
  /* Membership lost after heartbeats had been answered (access denied,
   * a table gone, an item DynamoDB refuses): the others still judge this
   * worker by its last beat.  Until then (0: not so) its readers stop at
   * the heartbeat's deadline as before, and it takes nothing: after a
   * lease duration the others count it dead and take its leases at once,
   * and only once its entry is forgotten (six durations) may it hold a
   * lease they would not take from it at once. */
  int64_t stale_until;
  int bad_answers; /* heartbeats answered with a malformed item, in a row */
  /* Heartbeats failing (none answered for a renewal interval and a half)
   * while the lease table answers: each held lease is marked
   * (ownerBeatFailing) so that the others judge it by its renewals, and
   * once all are, the heartbeat's deadline is lifted (lifted): reading
   * goes on by the leases' deadlines alone.  no_mark: the store keeps no
   * such mark. */
  int lifted, no_mark;
  /* Workers a lease was passed on to while alive in the view: if one is
   * counted dead soon after, the others are told (a bump), since their
   * own look at its death may have come before the lease was its.
   * Owned strings, until their time is up. */
  struct cc_asker {
    char *worker;
    int64_t until;
  } * askers;
  size_t n_askers;
  /* Spread over items (cfg.member_items): nb items as the digest says
   * (1 before any), this worker's item, the one it left last (-1: none
   * pending), the digest's epoch, sequence and most leases held, when the
   * sequence last changed; home0: no leader publishes, so it beats in item 0
   * where one can be found. */
  int nb, bucket, leave, home0;
  int64_t d_epoch, d_seq, d_changed_ms;
  /* The most and fewest leases a member holds, how many hold the
   * fewest, the leases held past one more than that: as the leader saw */
  int64_t d_max, d_min, d_nmin, d_over;
  int published_nb; /* the leader's last digest said this many */
  int regrow;       /* ... and changed the count */
  int view_full;    /* the view holds every member (one item, or the
                       leader's roster) */
  int probed;       /* the first call read the item count (probe) */
  /* The probe found more members than an item holds and no digest (a
   * fleet starting at once, before the leader spreads it): nb is this
   * worker's guess until then, kept while items answer without a digest
   * (else back to item 0). */
  int64_t guess_until;
  int64_t crowd_since; /* one item, more live members than it holds */
  int view_roster;     /* the view was built from a roster (the leader's) */
  int beat_sent;       /* a beat was sent: an item may hold this worker */
  int was_spread;      /* spread over items until a roster shows every member
                         back in item 0 */
  int roster_fails;    /* rosters refused for good, in a row (3: no more
                          items than one) */
  uint64_t roster_refused; /* the call whose roster was refused so */
  /* The roster the call in flight (roster_id) read: every item's members
   * (owned). */
  uint64_t roster_id;
  kn_members_t roster, prev_roster; /* and the one before (owned) */
  int has_roster;
  /* The last heartbeat's digest and forget items (borrowed by its
   * action until the next heartbeat). */
  char digest_out[160];
  int *forget_bucket;
} cc_members_t;

/* Shard sync, cc_sync.c: the shard listing, the lease listings around it
 * and the creates they call for. */
typedef struct cc_sync {
  int synced, syncing, resync;
  int64_t at;
  int failures;
  kn_cc_shard_t *shards; /* the last listing, owned strings */
  size_t n_shards;
  kn_lease_t *snap; /* the sync's first lease listing (owned) */
  size_t n_snap;
  int64_t emit_ms;      /* when that listing was asked for */
  kn_cc_create_t *plan; /* creates of the sync in progress */
  size_t n_plan, plan_next;
  int wave_left, create_failed;
  int asked;       /* a sync was asked for (a shard ended) */
  int64_t epoch;   /* the epoch of the last full sync */
  int64_t full_ms; /* when it ended */
  int more;        /* it left a cleanup to do */
} cc_sync_t;

/* Taking, cc_take.c: the take rounds over a listing of the lease table. */
typedef struct cc_take {
  int taking, idle;
  int64_t at;
  int scanned;          /* a take round since the first heartbeat */
  int64_t scan_epoch;   /* the epoch of the last take round */
  uint64_t scan_deaths; /* deaths counted by then */
  uint64_t idle_sig;    /* the lease counts it found balanced */
  int64_t idle_sig_ms;  /* when */
  size_t foreign;       /* leases of non-members it had to watch */
  int64_t leftover_bump_ms;
  /* A listing with leases of dead members, kept for the round that takes
   * them: it runs on the first heartbeat sent after it was answered.  A
   * member seen dead in a view older than the listing may have come back
   * (a restart under the same id) and taken them meanwhile; one that is
   * back beat before it took anything, so that heartbeat tells. */
  kn_lease_t *pend;
  size_t n_pend;
  int64_t pend_ms, pend_emit_ms, pend_epoch;
  uint64_t pend_deaths;
} cc_take_t;

/* An owner of leases seen in no view (kn_cc_ho_foreign). */
typedef struct cc_foreign {
  char *worker;
  int64_t since; /* first seen so (this worker's clock) */
} cc_foreign_t;

/* Hand-offs this worker asked for, cc_handoff.c (the owner's side is
 * per lease, in cc_lease_t), and the owners that cannot answer one. */
typedef struct cc_handoffs {
  cc_in_t *in;
  size_t n_in, cap_in;
  cc_foreign_t *fg;
  size_t n_fg, cap_fg;
  int64_t watch_ms; /* how often a lease asked for is looked at */
} cc_handoffs_t;

/* Per-lease writes, cc_writes.c: the leases held (renewals, checkpoints,
 * releases). */
typedef struct cc_writes {
  cc_lease_t **ls;
  size_t n_ls, cap_ls;
  kn_strmap_t lmap; /* key -> ls entry (a worker may hold thousands) */
  int64_t flush_at; /* the next checkpoint flush */
  /* A lease was given up on a deadline, not by a write: it may still be
   * in this worker's name in the table (a closing worker then does not
   * leave its membership item, so that the others count it dead and take
   * what it left). */
  int unsure;
} cc_writes_t;

/* The core: all of it is owned by the core and touched only by the
 * thread that calls into it (the driver's). */
struct kn_cc {
  kn_cc_cfg_t cfg;
  char *worker, *initial;
  int64_t grace_ms;
  uint64_t next_id;
  cc_queue_t q;
  cc_op_t **ops; /* calls in flight */
  size_t n_ops, cap_ops;
  kn_lease_observer_t obs;
  int closing, fatal, closed_sent;
  /* Out of memory for an action: FATAL and CLOSED, allocated up front. */
  int broken;
  cc_act_t *spare_fatal, *spare_closed;
  uint64_t idle_ticks; /* kn_cc_idle_ticks */
  cc_members_t mb;
  cc_sync_t sy;
  cc_take_t tk;
  cc_handoffs_t ho;
  cc_writes_t wr;
};

static inline int64_t cc_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int cc_is_seq(const char *s) {
  return s && *s >= '0' && *s <= '9';
}
/* At the initial position: not started, nor finished. */
static inline int cc_at_initial(const kn_lease_t *t) {
  return t->checkpoint && (strcmp(t->checkpoint, KN_CKPT_LATEST) == 0 ||
                           strcmp(t->checkpoint, KN_CKPT_AT_TIMESTAMP) == 0);
}
static inline void cc_set_str(char *dst, const char *s) {
  dst[0] = '\0';
  if (s && strlen(s) < SEQ_CAP) strcpy(dst, s);
}
static inline int cc_is_me(const kn_cc_t *c, const char *who) {
  return who && strcmp(who, c->worker) == 0;
}
static inline int cc_is_cond(const kn_error_t *err) {
  return err && kn_error_code(err) == KN_ERR_CONDITIONAL_CHECK_FAILED;
}
/* Whether the heartbeat's deadline bounds reading (mb.until). */
static inline int cc_beat_fenced(const kn_cc_t *c) {
  return ((c->mb.on && c->mb.ok) || c->mb.stale_until) && !c->mb.lifted;
}
/* Heartbeats failing while membership is on: leases are to be marked. */
static inline int cc_beat_failing(const kn_cc_t *c, int64_t now) {
  return c->mb.on && c->mb.ok && !c->mb.no_mark && !c->closing && !c->fatal &&
         now > c->mb.ok_sent_ms + c->cfg.renew_ms + c->cfg.renew_ms / 2;
}
/* Something the others should look at: the next heartbeat says so, now. */
static inline void cc_bump(kn_cc_t *c, int64_t now) {
  if (!c->mb.on) return;
  c->mb.bump_pending++;
  if (c->mb.hb_at > now) c->mb.hb_at = now;
}

/* ---- cc_ops.c: calls in flight, log lines, replies ---- */

void kn_cc_log(kn_cc_t *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A call in flight, in the table; NULL on out-of-memory. */
cc_op_t *kn_cc_op_new(kn_cc_t *c, kn_cc_op_t op, const char *key,
                      int64_t tenure, int64_t now);
/* Removes the op with id from the table and returns it (the caller frees
 * it with kn_cc_op_free), or NULL. */
cc_op_t *kn_cc_op_take(kn_cc_t *c, uint64_t id);
void kn_cc_op_free(cc_op_t *o);
void kn_cc_req_free(cc_req_t *r);
/* The action of store call o (it carries o's id); NULL on out-of-memory. */
cc_act_t *kn_cc_call(kn_cc_t *c, cc_op_t *o);
void kn_cc_reply(kn_cc_t *c, void *req, kn_err_t code, const char *msg);
int kn_cc_in_flight(const kn_cc_t *c, kn_cc_op_t op, const char *key);
int kn_cc_take_in_flight(const kn_cc_t *c, const char *key);
int kn_cc_writes_in_flight(const kn_cc_t *c);

/* ---- cc_writes.c: per-lease writes ---- */

cc_lease_t *kn_cc_wr_find(kn_cc_t *c, const char *key);
/* A tenure begins: the entry of key as the take (counter, sent at sent)
 * left lease t; not reading yet.  NULL on out-of-memory. */
cc_lease_t *kn_cc_wr_begin(kn_cc_t *c, const char *key, const kn_lease_t *t,
                           int64_t counter, int64_t sent, int64_t now);
void kn_cc_wr_stop_reading(kn_cc_t *c, cc_lease_t *l, kn_err_t reason);
/* Forgets a reader held back (cc_lease_t.await). */
void kn_cc_wr_unawait(cc_lease_t *l);
void kn_cc_wr_drop(kn_cc_t *c, cc_lease_t *l, kn_err_t reason);
void kn_cc_wr_begin_handoff(kn_cc_t *c, cc_lease_t *l, const char *to,
                            int64_t now);
void kn_cc_wr_pump(kn_cc_t *c, cc_lease_t *l, int64_t now);
void kn_cc_wr_pump_all(kn_cc_t *c, int64_t now);
/* The answer to a write of a held lease (RENEW, CHECKPOINT, RELEASE,
 * HANDOFF_DONE). */
void kn_cc_wr_done(kn_cc_t *c, cc_op_t *o, const kn_error_t *err,
                   int64_t counter, const char *handoff_to, int64_t sent,
                   int64_t now);
/* The answer to the GET of a held lease (P_VERIFY, cc_writes.c). */
void kn_cc_wr_verified(kn_cc_t *c, const cc_op_t *o, const kn_error_t *err,
                       const kn_lease_t *t, int64_t now);
int64_t kn_cc_wr_next_ms(const kn_cc_t *c);
void kn_cc_wr_tick(kn_cc_t *c, int64_t now);
void kn_cc_wr_free(kn_cc_t *c);

/* ---- cc_members.c: heartbeats ---- */

int kn_cc_mb_leader(const kn_cc_t *c);
int kn_cc_mb_hold(const kn_cc_t *c, int64_t now);
void kn_cc_mb_send(kn_cc_t *c, int64_t now);
/* The answer to HEARTBEAT o: 1 when it brought a view (the take round
 * may have news), else 0. */
int kn_cc_mb_done(kn_cc_t *c, const cc_op_t *o, const kn_error_t *err,
                  const kn_members_t *m, int64_t sent, int64_t now);
/* Readers judge the heartbeat deadline themselves: FENCE when it moved. */
void kn_cc_mb_fence(kn_cc_t *c);
uint64_t kn_cc_mb_counts_sig(const kn_cc_t *c);
int kn_cc_mb_fresh(const kn_cc_t *c, int64_t now);
void kn_cc_mb_beat_now(kn_cc_t *c, int64_t now);
int64_t kn_cc_mb_next_ms(const kn_cc_t *c);
void kn_cc_mb_tick(kn_cc_t *c, int64_t now);
void kn_cc_mb_free(kn_cc_t *c);
int kn_cc_mb_home(const char *w, int nb);
void kn_cc_mb_roster(kn_cc_t *c, uint64_t id, const kn_members_t *r,
                     int64_t now);
/* Spread over items, the roster a take round's listing read: its members
 * join the view as remote ones. */
void kn_cc_mb_roster_listed(kn_cc_t *c, uint64_t id, int64_t now);
int kn_cc_mb_roster_read(const kn_cc_t *c, uint64_t id);
void kn_cc_mb_roster_refused(kn_cc_t *c, uint64_t id);
uint64_t kn_cc_mb_draw(const kn_cc_t *c);
/* Whether the heartbeat's deadline is lifted now (cc_members_t.lifted);
 * a FENCE goes out when that changes. */
void kn_cc_mb_relift(kn_cc_t *c, int64_t now);
/* A lease was passed on to worker (alive in the view): watched. */
void kn_cc_mb_watch_asker(kn_cc_t *c, const char *worker, int64_t now);

/* ---- cc_handoff.c: hand-offs asked for ---- */

int kn_cc_ho_answers(const kn_cc_t *c, const kn_lease_t *t);
int kn_cc_ho_foreign(kn_cc_t *c, const char *owner, int64_t now);
void kn_cc_ho_seen(kn_cc_t *c);
cc_in_t *kn_cc_ho_find(kn_cc_t *c, const char *key);
void kn_cc_ho_remove(kn_cc_t *c, const char *key);
void kn_cc_ho_add(kn_cc_t *c, const char *key, int64_t counter, int from_start,
                  int64_t now);
/* The answer to GET o: 1 when the core may now be done closing. */
int kn_cc_ho_got(kn_cc_t *c, uint64_t id, const char *key,
                 const kn_error_t *err, const kn_lease_t *t, int64_t now);
int64_t kn_cc_ho_next_ms(const kn_cc_t *c);
void kn_cc_ho_tick(kn_cc_t *c, int64_t now);
void kn_cc_ho_free(kn_cc_t *c);

/* ---- cc_take.c: take rounds ---- */

/* A take round over listing v (answered at answered_ms, sent as seen
 * says: time, epoch, deaths). */
void kn_cc_tk_round(kn_cc_t *c, const kn_lease_t *v, size_t n,
                    const cc_op_t *seen, int64_t answered_ms, int64_t now);
void kn_cc_tk_run_pending(kn_cc_t *c, int64_t now);
/* A heartbeat brought a view: news of a death or a change, look now. */
void kn_cc_tk_news(kn_cc_t *c, int64_t now);
/* The answer to TAKE or HANDOFF o, or to a write for a lease an earlier
 * run held (tenure -1: RELEASE, HANDOFF_DONE). */
void kn_cc_tk_done(kn_cc_t *c, cc_op_t *o, const kn_error_t *err,
                   int64_t counter, int64_t sent, int64_t now);
/* Starts the reader held back for l (cc_lease_t.await), if l is still
 * held. */
void kn_cc_tk_start_awaited(kn_cc_t *c, cc_lease_t *l);
int64_t kn_cc_tk_next_ms(const kn_cc_t *c);
void kn_cc_tk_tick(kn_cc_t *c, int64_t now);
void kn_cc_tk_free(kn_cc_t *c);

/* ---- cc_sync.c: shard sync ---- */

/* A listing for the sync failed: 1 when the error is a verdict (the core
 * cannot go on: msg says why), else 0 (retried). */
int kn_cc_sy_failed(kn_cc_t *c, const kn_error_t *err, const char *what,
                    char *msg, size_t cap, int64_t now);
void kn_cc_sy_shards(kn_cc_t *c, int probe, const kn_cc_shard_t *v, size_t n,
                     int64_t now);
/* A lease listing of the sync (purpose P_SYNC_LEASES1 or 2). */
void kn_cc_sy_leases(kn_cc_t *c, int purpose, const kn_lease_t *v, size_t n,
                     int64_t now);
void kn_cc_sy_created(kn_cc_t *c, const cc_op_t *o, const kn_error_t *err,
                      int64_t now);
void kn_cc_sy_soon(kn_cc_t *c, int64_t now);
int64_t kn_cc_sy_next_ms(const kn_cc_t *c);
void kn_cc_sy_tick(kn_cc_t *c, int64_t now);
void kn_cc_sy_free(kn_cc_t *c);

/* ---- cc_close.c: closing ---- */

/* CLOSED once closing (or fatal) is done. */
void kn_cc_maybe_closed(kn_cc_t *c);
void kn_cc_go_fatal(kn_cc_t *c, kn_err_t code, const char *msg, int64_t now);

#endif
