/* kn_sim --cost: what the lease table costs on DynamoDB at scale, in the
 * simulator.  W real coordination cores run on virtual time against the
 * memory lease store (the same semantics as DynamoDB's, store.h) for S
 * open shards, without records (a checkpoint rides on a renewal, so a busy
 * application writes as often).  Every store call is counted as DynamoDB
 * would bill it: items and read units of Scans (strongly consistent: 4 KB
 * units) and GetItems, items and write units of writes (1 KB units of the
 * item, failed conditions included); a heartbeat is one write of the
 * membership item, its answer free (ReturnValues ALL_NEW).
 *
 * Phases: the workers start within 2 s and settle (every lease held, every
 * core idle); steady state is counted for --seconds; then one worker is
 * killed (no release) and a window of 60 s counted, with the time until
 * its leases are held again; then a worker joins and 60 s are counted,
 * with the time until it holds its share; a worker's control thread
 * stalls for 25 s (60 s counted); another's heartbeats land late for 60 s;
 * a rolling redeploy replaces every worker.  DynamoDB's size limits
 * refuse what it would refuse (400 KB items, 4 KB expressions), and a
 * Scan reads pages of 1 MB, each a round trip.  The fleet checks
 * (sim_cost_check.h) watch every phase.  One JSON line is printed; the
 * exit status is 1 on a violation or a lease left unheld at the end of a
 * phase. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/ccore.h"
#include "consumer/store_job.h"
#include "core/error.h"
#include "lease/store.h"
#include "sim.h"
#include "sim_cost_check.h"
#include "util/str.h"
#include "util/strmap.h"

enum { C_TICK, C_APPLY, C_REPLY, C_START, C_SAMPLE };

typedef struct cev {
  int64_t t;
  uint64_t seq;
  int kind, w;
  uint64_t gen;
  kn_store_job_t *job;
} cev_t;

typedef struct cworker {
  char id[64];
  kn_drive_t *dr; /* the consumer's driver, with the core inside */
  struct cenv {
    struct cost *s;
    int w;
  } env;
  char **yields; /* hand-offs the application answers next: key, tenure */
  size_t n_yields;
  int alive;
  uint64_t gen;      /* incarnation: events of an earlier one are dropped */
  uint64_t tick_gen; /* the tick scheduled last */
  int64_t tick_at;
  int64_t stall_until; /* the control thread is busy until then: its ticks
                          and answers wait (its readers read on) */
  int64_t late_until;  /* its heartbeats land 4-24 s late until then */
} cworker_t;

typedef struct counts {
  double items_read, rcu, items_written, wcu;
  int64_t scans, gets, writes, heartbeats;
  int64_t rosters, publishes; /* membership reads (Scans) and digests */
  int64_t throttled;          /* writes refused for the item's write rate */
  int64_t stops;     /* tenures a worker ended on its own (deadlines) */
  int64_t pages;     /* Scan pages (1 MB each) of the listings and rosters */
  int64_t too_large; /* writes refused: the item would pass 400 KB */
  int64_t long_expr; /* writes refused: an expression over 4 KB */
} counts_t;

/* Write units per item in the current second and 5-s window (DynamoDB
 * serves at most 1,000 WCU/s per partition, and an item never spans
 * partitions), and the hottest 5-s window of each phase. */
typedef struct hot {
  int64_t sec, win; /* the second and window counted */
  double *sec_wcu;  /* per item: the membership item, then leases */
  double *win_wcu;
  double phase_max[7]; /* WCU/s of the hottest item in a window */
  int phase;           /* 0 settle, 1 steady, 2 kill, 3 join, 4 stall, 5 late,
                          6 redeploy */
} hot_t;

typedef struct cost {
  sim_rng_t rng;
  int64_t now;
  uint64_t seq;
  cev_t *heap;
  size_t n_heap, cap_heap;
  cworker_t *w;
  int n_w;
  kn_lease_store_t *ls;
  int shards;
  kn_cc_shard_t *listing;
  char **ids, **hs, **he;
  kn_cc_cfg_t cfg;
  counts_t cnt;
  hot_t hot;
  int limits; /* --ddb-limits: writes over 1,000 WCU/s an item refused */
  sim_cost_check_t chk; /* the fleet checks */
  int no_deadline;      /* the checks' mutant (KN_SIM_COST_MUTANT) */
  int verbose; /* KN_SIM_COST_LOG set: the cores' log lines on stderr */
} cost_t;

static void push(cost_t *s, int64_t t, int kind, int w, uint64_t gen,
                 kn_store_job_t *job) {
  if (s->n_heap == s->cap_heap) {
    s->cap_heap = s->cap_heap ? 2 * s->cap_heap : 1024;
    s->heap = realloc(s->heap, s->cap_heap * sizeof(*s->heap));
    if (!s->heap) abort();
  }
  size_t i = s->n_heap++;
  cev_t e = {t, s->seq++, kind, w, gen, job};
  while (i > 0) {
    size_t p = (i - 1) / 2;
    cev_t *q = &s->heap[p];
    if (q->t < e.t || (q->t == e.t && q->seq < e.seq)) break;
    s->heap[i] = *q;
    i = p;
  }
  s->heap[i] = e;
}

static int pop(cost_t *s, cev_t *out) {
  if (!s->n_heap) return 0;
  *out = s->heap[0];
  cev_t last = s->heap[--s->n_heap];
  size_t i = 0, n = s->n_heap;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const cev_t *best = &last;
    if (l < n && (s->heap[l].t < best->t ||
                  (s->heap[l].t == best->t && s->heap[l].seq < best->seq))) {
      m = l;
      best = &s->heap[l];
    }
    if (r < n && (s->heap[r].t < best->t ||
                  (s->heap[r].t == best->t && s->heap[r].seq < best->seq)))
      m = r;
    if (m == i) break;
    s->heap[i] = s->heap[m];
    i = m;
  }
  if (n) s->heap[i] = last;
  return 1;
}

static int64_t latency(cost_t *s) { return sim_range(&s->rng, 3, 25); }

/* ---- DynamoDB's sizes ---- */

static double num_bytes(int64_t v) {
  int digits = 1;
  for (int64_t x = v < 0 ? -v : v; x >= 10; x /= 10) digits++;
  return 1 + (digits + 1) / 2;
}

static double str_attr(const char *name, const char *v) {
  return v ? (double)(strlen(name) + strlen(v)) : 0;
}

/* A lease item as the KCL writes it.  Without records the checkpoint is a
 * sentinel: it is counted as a sequence number (56 digits), as in a busy
 * application. */
static double item_bytes(const kn_lease_t *l) {
  double b = str_attr("leaseKey", l->key) + str_attr("leaseOwner", l->owner) +
             strlen("leaseCounter") + num_bytes(l->counter) +
             strlen("ownerSwitchesSinceCheckpoint") +
             num_bytes(l->owner_switches) + strlen("checkpoint") + 56 +
             strlen("checkpointSubSequenceNumber") +
             num_bytes(l->checkpoint_subseq) +
             str_attr("startingHashKey", l->hash_start) +
             str_attr("endingHashKey", l->hash_end) +
             str_attr("checkpointOwner", l->checkpoint_owner);
  if (l->pending)
    b += str_attr("pendingCheckpoint", l->pending) +
         strlen("pendingCheckpointSubSequenceNumber") + 2;
  for (size_t i = 0; i < l->n_parents; i++)
    b += strlen(l->parents[i]) + (i ? 0 : strlen("parentShardId"));
  return b;
}

#define ITEMS KN_MEMBERS_BUCKETS_MAX

/* The size of each membership item (sz[ITEMS]) from a roster; every
 * item is counted with item 0's digest (the leader writes the same into
 * each). */
static void items_bytes(const kn_members_t *m, double *sz) {
  for (int b = 0; b < ITEMS; b++) sz[b] = 0;
  for (size_t i = 0; i < m->n; i++) {
    int b = m->v[i].bucket;
    if (b < 0 || b >= ITEMS) continue;
    if (!sz[b])
      sz[b] = str_attr("key", "members#000") + strlen("epoch") + 8 +
              (m->digest ? str_attr("digest", m->digest) : 0);
    sz[b] += 2 + strlen(m->v[i].worker) + 3 + 1 + num_bytes(m->v[i].beat) + 1 +
             num_bytes(m->v[i].leases);
  }
}

static double members_bytes(const kn_members_t *m) {
  double sz[ITEMS], b = 0;
  items_bytes(m, sz);
  for (int i = 0; i < ITEMS; i++) b += sz[i];
  return b;
}

static double lease_size(cost_t *s, const char *key) {
  kn_lease_t l;
  memset(&l, 0, sizeof(l));
  kn_error_t *e = s->ls->ops->get(s->ls, key, &l);
  double b = e ? 0 : item_bytes(&l);
  kn_error_destroy(e);
  kn_lease_clear(&l);
  return b;
}

/* ---- the hottest item ---- */

/* Item index: B the membership item B, ITEMS + i shard i's lease. */
static size_t item_of(const cost_t *s, const kn_store_job_t *j) {
  if (j->op == KN_CC_HEARTBEAT || !j->key)
    return j->bucket >= 0 && j->bucket < ITEMS ? (size_t)j->bucket : 0;
  long i = strtol(j->key + strlen("shardId-"), NULL, 10);
  return i >= 0 && i < s->shards ? (size_t)i + ITEMS : 0;
}

static void hot_roll(cost_t *s) {
  hot_t *h = &s->hot;
  int64_t sec = s->now / 1000, win = s->now / 5000;
  size_t n = (size_t)s->shards + ITEMS;
  if (sec != h->sec) {
    memset(h->sec_wcu, 0, n * sizeof(double));
    h->sec = sec;
  }
  if (win != h->win) {
    double mx = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
      if (h->win_wcu[i] > mx) mx = h->win_wcu[i], at = i;
    if (mx / 5 > h->phase_max[h->phase]) h->phase_max[h->phase] = mx / 5;
    if (s->verbose)
      fprintf(stderr,
              "window %lld s (phase %d): hottest item %.1f WCU/s (%s %zu)\n",
              (long long)(h->win * 5), h->phase, mx / 5,
              at < ITEMS ? "membership item" : "lease",
              at < ITEMS ? at : at - ITEMS);
    memset(h->win_wcu, 0, n * sizeof(double));
    h->win = win;
  }
}

/* With --ddb-limits, a write that would take its item past 1,000 WCU in
 * this second is refused as DynamoDB refuses it. */
static int throttled(cost_t *s, kn_store_job_t *j, double wcu) {
  if (!s->limits || s->hot.sec_wcu[item_of(s, j)] + wcu <= 1000) return 0;
  j->err = kn_error_new(KN_ERR_PROVISIONED_THROUGHPUT_EXCEEDED,
                        "ProvisionedThroughputExceededException: the "
                        "item's partition is over 1,000 write units a second");
  s->cnt.throttled++;
  return 1;
}

static void hot_add_at(cost_t *s, size_t i, double wcu) {
  s->hot.sec_wcu[i] += wcu;
  s->hot.win_wcu[i] += wcu;
}

static void hot_add(cost_t *s, const kn_store_job_t *j, double wcu) {
  hot_add_at(s, item_of(s, j), wcu);
}

/* ---- DynamoDB's size limits ---- */

#define ITEM_MAX (400 * 1024)    /* bytes of an item */
#define EXPR_MAX 4096            /* bytes of an expression */
#define PAGE_BYTES (1024 * 1024) /* bytes a Scan page reads at most */

static int shard_of(const cost_t *s, const char *key) {
  if (!key || strncmp(key, "shardId-", 8) != 0) return -1;
  long i = strtol(key + 8, NULL, 10);
  return i >= 0 && i < s->shards ? (int)i : -1;
}

static int64_t pages_of(double bytes) {
  int64_t p = (int64_t)ceil(bytes / PAGE_BYTES);
  return p < 1 ? 1 : p;
}

/* A heartbeat DynamoDB would refuse as ValidationException: its
 * UpdateExpression (SET of the entry, ADD of the epoch, a REMOVE of a
 * placeholder per name forgotten) over 4 KB, or its item past 400 KB. */
static int refused_size(cost_t *s, kn_store_job_t *j, const char *worker,
                        const double *before) {
  size_t expr = 48;
  for (size_t i = 0; i < j->n_children; i++)
    expr += 4 + (size_t)snprintf(NULL, 0, "%zu", i);
  if (expr > EXPR_MAX) {
    j->err = kn_error_new(KN_ERR_VALIDATION,
                          "ValidationException: Invalid UpdateExpression: "
                          "Expression size has exceeded the maximum allowed "
                          "size");
    s->cnt.long_expr++;
    return 1;
  }
  int b = j->bucket >= 0 && j->bucket < ITEMS ? j->bucket : 0;
  double entry = 2 + strlen(worker) + 3 + 1 + num_bytes(j->beat) + 1 +
                 num_bytes(j->n_held);
  if (before[b] + entry > ITEM_MAX) {
    j->err = kn_error_new(KN_ERR_VALIDATION,
                          "ValidationException: Item size has exceeded the "
                          "maximum allowed size");
    s->cnt.too_large++;
    return 1;
  }
  return 0;
}

/* ---- the store calls, counted ---- */

static void members_now(cost_t *s, double *sz) {
  kn_members_t m = {0};
  kn_error_t *e = s->ls->ops->members(s->ls, &m);
  items_bytes(&m, sz);
  kn_error_destroy(e);
  kn_members_clear(&m);
}

/* A roster read: a Scan of the membership table (4 KB units of it all). */
static void bill_roster(cost_t *s, const kn_store_job_t *j) {
  if (!j->has_roster) return;
  double b = members_bytes(&j->roster_m);
  s->cnt.items_read += 1;
  s->cnt.rcu += ceil(b / 4096);
  s->cnt.rosters++;
  s->cnt.pages += pages_of(b);
}

/* A heartbeat: its item's write, the item left, the digests published. */
static void bill_heartbeat(cost_t *s, const kn_store_job_t *j,
                           const double *before) {
  double after[ITEMS];
  members_now(s, after);
  int items[2] = {j->bucket, j->leave};
  for (int k = 0; k < 2; k++) {
    int b = items[k];
    if (b < 0 || b >= ITEMS || (k && j->err)) continue;
    double w = ceil((before[b] > after[b] ? before[b] : after[b]) / 1024);
    if (w < 1) w = 1;
    s->cnt.items_written += 1;
    s->cnt.wcu += w;
    hot_add_at(s, (size_t)b, w);
  }
  for (int b = 0; !j->err && j->digest && b < j->publish_n && b < ITEMS; b++) {
    double w = ceil((after[b] ? after[b] : 100) / 1024);
    s->cnt.items_written += 1;
    s->cnt.wcu += w;
    s->cnt.publishes++;
    hot_add_at(s, (size_t)b, w);
  }
  bill_roster(s, j);
}

/* Applies j as worker's call; returns the time its further Scan pages
 * take (each a round trip). */
static int64_t apply(cost_t *s, kn_store_job_t *j, int w) {
  const char *worker = s->w[w].id;
  counts_t *c = &s->cnt;
  double before = 0;
  j->sent_ms = s->now;
  hot_roll(s);
  double items_before[ITEMS];
  if (j->op == KN_CC_HEARTBEAT && !j->probe) {
    members_now(s, items_before);
    double b = items_before[item_of(s, j)];
    if (s->limits && throttled(s, j, ceil((b ? b : 100) / 1024))) return 0;
    if (refused_size(s, j, worker, items_before)) return 0;
  }
  if (j->key && j->op != KN_CC_GET) before = lease_size(s, j->key);
  kn_store_job_apply(s->ls, worker, j); /* what the store threads run */
  sim_cost_check_landed(&s->chk, w, shard_of(s, j->key), j, s->now);
  switch (j->op) {
    case KN_CC_LIST_LEASES: {
      double b = 0;
      for (size_t i = 0; i < j->n_leases; i++) b += item_bytes(&j->leases[i]);
      c->items_read += (double)j->n_leases;
      c->rcu += ceil(b / 4096);
      c->scans++;
      c->pages += pages_of(b);
      bill_roster(s, j);
      return (pages_of(b) - 1) * latency(s);
    }
    case KN_CC_GET:
      c->items_read += 1;
      c->rcu += ceil((j->err ? 100 : item_bytes(&j->got)) / 4096);
      c->gets++;
      return 0;
    case KN_CC_HEARTBEAT:
      if (j->probe)
        bill_roster(s, j);
      else if (!j->err || j->leave >= 0)
        bill_heartbeat(s, j, items_before);
      c->heartbeats++;
      return 0;
    default:
      break;
  }
  double after = j->key ? lease_size(s, j->key) : 0;
  double wcu = ceil((before > after ? before : after) / 1024);
  c->items_written += 1;
  c->wcu += wcu;
  c->writes++;
  hot_add(s, j, wcu);
  return 0;
}

/* ---- workers: the drive's operations ---- */

static void after(cost_t *s, int w);

static int64_t op_now(void *env) { return ((struct cenv *)env)->s->now; }

static int op_submit(void *env, const kn_cc_action_t *a) {
  struct cenv *e = env;
  cost_t *s = e->s;
  kn_store_job_t *j = kn_store_job_new(a);
  if (!j) return -1;
  int64_t late = a->op == KN_CC_HEARTBEAT && s->now < s->w[e->w].late_until
                     ? sim_range(&s->rng, 4000, 24000)
                     : 0;
  push(s, s->now + latency(s) + late,
       a->op == KN_CC_LIST_SHARDS ? C_REPLY : C_APPLY, e->w, s->w[e->w].gen, j);
  return 0;
}

/* No records here: readers are not simulated. */
static int op_start(void *env, const kn_cc_action_t *a) {
  struct cenv *e = env;
  /* KN_SIM_COST_MUTANT=deadline: readers that ignore their deadlines,
   * which the checks must catch (a stalled worker's readers read on). */
  sim_cost_check_start(&e->s->chk, e->w, shard_of(e->s, a->key), a->tenure,
                       e->s->no_deadline ? INT64_MAX : a->until_ms, e->s->now);
  return 0;
}

static void op_stop(void *env, const char *key, int64_t tenure,
                    kn_drive_stop_t why, kn_err_t reason,
                    const char *next_owner) {
  struct cenv *e = env;
  cworker_t *k = &e->s->w[e->w];
  (void)next_owner;
  sim_cost_check_stop(&e->s->chk, e->w, shard_of(e->s, key), tenure);
  if (why == KN_DRIVE_LOST && reason == KN_ERR__TIMED_OUT) e->s->cnt.stops++;
  if (why != KN_DRIVE_YIELD) return;
  /* the application is done at once: answered once the drive returns */
  k->yields = realloc(k->yields, (k->n_yields + 2) * sizeof(*k->yields));
  if (!k->yields) abort();
  k->yields[k->n_yields++] = kn_strdup0(key);
  k->yields[k->n_yields++] = kn_asprintf("%lld", (long long)tenure);
}

static void op_deadline(void *env, const char *key, int64_t tenure,
                        int64_t until_ms) {
  struct cenv *e = env;
  if (e->s->no_deadline) return;
  sim_cost_check_deadline(&e->s->chk, e->w, shard_of(e->s, key), tenure,
                          until_ms);
}

static void op_reply(void *env, void *req, kn_err_t code, const char *msg) {
  (void)env, (void)req, (void)code, (void)msg;
}

static void op_fatal(void *env, kn_err_t code, const char *msg) {
  struct cenv *e = env;
  fprintf(stderr, "kn_sim --cost: %s: %s: %s\n", e->s->w[e->w].id,
          kn_err2name(code), msg);
  exit(1);
}

static void op_log(void *env, int level, const char *msg) {
  struct cenv *e = env;
  (void)level;
  if (e->s->verbose)
    fprintf(stderr, "%9.3f %s %s\n", (double)e->s->now / 1000, e->s->w[e->w].id,
            msg);
}

static const kn_drive_ops_t cost_ops = {
    .now = op_now,
    .submit = op_submit,
    .start = op_start,
    .stop = op_stop,
    .deadline = op_deadline,
    .reply = op_reply,
    .fatal = op_fatal,
    .log = op_log,
};

static void start_worker(cost_t *s, int w) {
  cworker_t *k = &s->w[w];
  kn_cc_cfg_t cfg = s->cfg;
  cfg.worker = k->id;
  cfg.beat_base = (int64_t)(sim_rand(&s->rng) >> 2);
  k->env.s = s;
  k->env.w = w;
  k->dr = kn_drive_new(&cfg, &cost_ops, &k->env);
  if (!k->dr) {
    fprintf(stderr, "kn_sim --cost: kn_drive_new failed\n");
    exit(1);
  }
  k->alive = 1;
  k->gen++;
  k->tick_at = -1;
  kn_drive_tick(k->dr);
  after(s, w);
}

static void kill_worker(cost_t *s, int w) {
  cworker_t *k = &s->w[w];
  kn_drive_destroy(k->dr);
  k->dr = NULL;
  k->alive = 0;
  k->gen++;
  sim_cost_check_killed(&s->chk, w);
}

/* After an event handed to w's drive: the hand-offs it asked for are
 * answered, then the next tick. */
static void after(cost_t *s, int w) {
  cworker_t *k = &s->w[w];
  while (k->n_yields) {
    char *tenure = k->yields[--k->n_yields];
    char *key = k->yields[--k->n_yields];
    kn_drive_yielded(k->dr, key, atoll(tenure), NULL);
    free(key);
    free(tenure);
  }
  if (kn_drive_closed(k->dr)) { /* a graceful stop is over */
    kill_worker(s, w);
    return;
  }
  int64_t wake = kn_drive_wake_ms(k->dr);
  if (wake == INT64_MAX || wake == k->tick_at) return;
  k->tick_at = wake < s->now ? s->now : wake;
  push(s, k->tick_at, C_TICK, w, ++k->tick_gen, NULL);
}

static void reply(cost_t *s, cworker_t *k, kn_store_job_t *j) {
  kn_drive_result_t r = kn_store_job_result(j);
  r.shards = s->listing; /* the stream, as ListShards would give it */
  r.n_shards = (size_t)s->shards;
  kn_drive_result(k->dr, &r);
}

/* ---- phases ---- */

/* Leases held by live workers, and by worker w. */
static int held_by_live(cost_t *s, int w, int *by_w) {
  kn_lease_t *v = NULL;
  size_t n = 0;
  kn_error_t *e = s->ls->ops->list(s->ls, &v, &n);
  kn_strmap_t live = KN_STRMAP_INIT; /* id -> slot + 1 */
  for (int k = 0; k < s->n_w; k++)
    if (s->w[k].alive &&
        kn_strmap_put(&live, s->w[k].id, (void *)(uintptr_t)(k + 1)))
      abort();
  int held = 0;
  *by_w = 0;
  for (size_t i = 0; !e && i < n; i++) {
    uintptr_t k = v[i].owner ? (uintptr_t)kn_strmap_get(&live, v[i].owner) : 0;
    if (!k) continue;
    held++;
    if ((int)k - 1 == w) (*by_w)++;
  }
  kn_strmap_free(&live);
  kn_error_destroy(e);
  kn_lease_array_free(v, n);
  return held;
}

static int all_idle(cost_t *s) {
  for (int k = 0; k < s->n_w; k++)
    if (s->w[k].alive && !kn_cc_idle(kn_drive_core(s->w[k].dr))) return 0;
  return 1;
}

static void run_until(cost_t *s, int64_t end, int (*stop)(cost_t *, int),
                      int arg) {
  cev_t e;
  while (s->now < end && pop(s, &e)) {
    s->now = e.t;
    cworker_t *k = e.w >= 0 ? &s->w[e.w] : NULL;
    switch (e.kind) {
      case C_TICK:
        if (k->alive && e.gen == k->tick_gen && s->now < k->stall_until) {
          k->tick_at = k->stall_until; /* after the stall */
          push(s, k->stall_until, C_TICK, e.w, e.gen, NULL);
        } else if (k->alive && e.gen == k->tick_gen) {
          k->tick_at = -1;
          kn_drive_tick(k->dr);
          after(s, e.w);
        }
        break;
      case C_APPLY: {
        int64_t pages = apply(s, e.job, e.w);
        push(s, s->now + latency(s) + pages, C_REPLY, e.w, e.gen, e.job);
        break;
      }
      case C_REPLY:
        if (k->alive && e.gen == k->gen && s->now < k->stall_until) {
          push(s, k->stall_until, C_REPLY, e.w, e.gen, e.job);
          break; /* answered after the stall */
        }
        if (k->alive && e.gen == k->gen) {
          reply(s, k, e.job);
          after(s, e.w);
        }
        kn_store_job_free(e.job);
        break;
      case C_START:
        start_worker(s, e.w);
        break;
      case C_SAMPLE:
        push(s, s->now + 100, C_SAMPLE, -1, 0, NULL);
        if (stop && stop(s, arg)) return;
        break;
    }
  }
}

static int settled(cost_t *s, int w) {
  int mine;
  (void)w;
  return held_by_live(s, -1, &mine) == s->shards && all_idle(s);
}

static int recovered(cost_t *s, int w) {
  int mine;
  (void)w;
  return held_by_live(s, -1, &mine) == s->shards;
}

static int has_share(cost_t *s, int w) {
  int mine, live = 0;
  for (int k = 0; k < s->n_w; k++) live += s->w[k].alive;
  held_by_live(s, w, &mine);
  return mine >= s->shards / live;
}

/* A live worker other than `not` (the first one). */
static int live_other(cost_t *s, int not ) {
  for (int k = 0; k < s->n_w; k++)
    if (s->w[k].alive && k != not ) return k;
  return not ;
}

/* Phase `phase`, 60 s: worker w's control thread stalls for stall_ms, or
 * its heartbeats land late for late_ms.  Whether every lease is held by a
 * live worker at its end. */
static int trouble(cost_t *s, int phase, int w, int64_t stall_ms,
                   int64_t late_ms) {
  s->hot.phase = phase;
  if (stall_ms) s->w[w].stall_until = s->now + stall_ms;
  if (late_ms) s->w[w].late_until = s->now + late_ms;
  run_until(s, s->now + 60000, NULL, 0);
  return recovered(s, 0);
}

static void print_counts(const char *name, const counts_t *a, const counts_t *b,
                         double seconds, int shards, double hot,
                         const char *extra) {
  double m = seconds / 60.0;
  printf(
      "%s\"%s\": {\"seconds\": %.1f, \"items_read_per_shard_min\": %.4f, "
      "\"rcu_per_shard_min\": %.4f, \"items_written_per_lease_min\": %.3f, "
      "\"wcu_per_lease_min\": %.3f, \"scans\": %lld, \"gets\": %lld, "
      "\"writes\": %lld, \"heartbeats\": %lld, \"rosters\": %lld, "
      "\"digests\": %lld, \"throttled\": %lld, "
      "\"stops\": %lld, \"pages\": %lld, \"too_large\": %lld, "
      "\"long_expr\": %lld, \"hot_item_wcu_s\": %.1f%s}",
      strcmp(name, "steady") ? ", " : "", name, seconds,
      (b->items_read - a->items_read) / shards / m,
      (b->rcu - a->rcu) / shards / m,
      (b->items_written - a->items_written) / shards / m,
      (b->wcu - a->wcu) / shards / m, (long long)(b->scans - a->scans),
      (long long)(b->gets - a->gets), (long long)(b->writes - a->writes),
      (long long)(b->heartbeats - a->heartbeats),
      (long long)(b->rosters - a->rosters),
      (long long)(b->publishes - a->publishes),
      (long long)(b->throttled - a->throttled),
      (long long)(b->stops - a->stops), (long long)(b->pages - a->pages),
      (long long)(b->too_large - a->too_large),
      (long long)(b->long_expr - a->long_expr), hot, extra);
}

int sim_cost_main(int shards, int workers, int64_t seconds, uint64_t seed,
                  int members, int limits, int one_item, double max_hot) {
  static cost_t s;
  memset(&s, 0, sizeof(s));
  s.rng.s = seed * 0x2545f4914f6cdd1dULL + 1;
  s.shards = shards;
  s.verbose = getenv("KN_SIM_COST_LOG") != NULL;
  const char *mutant = getenv("KN_SIM_COST_MUTANT");
  s.no_deadline = mutant && strcmp(mutant, "deadline") == 0;
  s.limits = limits;
  s.hot.sec_wcu = calloc((size_t)shards + ITEMS, sizeof(double));
  s.hot.win_wcu = calloc((size_t)shards + ITEMS, sizeof(double));
  if (!s.hot.sec_wcu || !s.hot.win_wcu) abort();
  if (sim_cost_check_init(&s.chk, shards, 10000)) abort();
  s.cfg = (kn_cc_cfg_t){.duration_ms = 10000,
                        .renew_ms = members ? 4000 : 3333,
                        .take_ms = 2000,
                        .sync_ms = 30000,
                        .checkpoint_ms = 5000,
                        .max_steal = 1,
                        .initial = KN_CKPT_TRIM_HORIZON,
                        .auto_checkpoint = 1,
                        .handoff_ms = 30000,
                        .members = members,
                        .member_items = one_item ? 1 : ITEMS,
                        .scan_ms = 600000};
  kn_error_t *err = NULL;
  s.ls = kn_lease_store_open("memory", NULL, &err);
  if (!s.ls) {
    fprintf(stderr, "kn_sim --cost: %s\n", kn_error_string(err));
    return 1;
  }
  s.n_w = workers;
  /* Slots: the workers, the one that joins, the redeploy's new ones. */
  s.w = calloc(2 * (size_t)workers + 2, sizeof(*s.w));
  for (int w = 0; w <= workers; w++)
    snprintf(s.w[w].id, sizeof(s.w[w].id), "ip-10-0-%d-%d.ec2.internal:%d:%08x",
             w / 200, w % 200, 1000 + w, (unsigned)(sim_rand(&s.rng) >> 32));
  /* The stream and its leases, as a running application has them: each
   * in the name of a worker, which takes its own back when it starts (a
   * restart of the whole application), so that settling is quick at
   * 10,000 leases too. */
  s.listing = calloc((size_t)shards, sizeof(*s.listing));
  s.ids = calloc((size_t)shards, sizeof(char *));
  s.hs = calloc((size_t)shards, sizeof(char *));
  s.he = calloc((size_t)shards, sizeof(char *));
  for (int i = 0; i < shards; i++) {
    s.ids[i] = kn_asprintf("shardId-%012d", i);
    s.hs[i] = kn_asprintf("%d%038d", 1 + i % 3, i);
    s.he[i] = kn_asprintf("%d%038d", 1 + i % 3, i + 1);
    s.listing[i] = (kn_cc_shard_t){s.ids[i], NULL, NULL, s.hs[i], s.he[i], 0};
    kn_lease_t l;
    memset(&l, 0, sizeof(l));
    l.key = s.ids[i];
    l.owner = s.w[i % workers].id;
    l.counter = 1;
    l.checkpoint = KN_CKPT_TRIM_HORIZON;
    l.hash_start = s.hs[i];
    l.hash_end = s.he[i];
    kn_error_destroy(s.ls->ops->create(s.ls, &l));
  }

  for (int w = 0; w < workers; w++)
    push(&s, sim_range(&s.rng, 0, 2000), C_START, w, 0, NULL);
  push(&s, 1000, C_SAMPLE, -1, 0, NULL);

  /* Every lease held, then settled (at most 20 virtual minutes), then
   * 30 s more. */
  run_until(&s, 1200000, recovered, 0);
  int64_t held_ms = s.now;
  run_until(&s, 1200000, settled, 0);
  int64_t settled_ms = s.now;
  run_until(&s, s.now + 30000, NULL, 0);
  counts_t c0 = s.cnt;
  int64_t t0 = s.now;
  s.hot.phase = 1;
  run_until(&s, t0 + seconds * 1000, NULL, 0);
  counts_t c1 = s.cnt;
  /* A worker dies. */
  int victim = workers > 1 ? workers / 2 : 0;
  kill_worker(&s, victim);
  int64_t tk = s.now;
  s.hot.phase = 2;
  run_until(&s, tk + 60000, recovered, 0);
  int64_t failover_ms = recovered(&s, 0) ? s.now - tk : -1;
  run_until(&s, tk + 60000, NULL, 0);
  counts_t c2 = s.cnt;
  /* A worker joins. */
  int joiner = workers;
  s.n_w = workers + 1;
  s.hot.phase = 3;
  start_worker(&s, joiner);
  int64_t tj = s.now;
  run_until(&s, tj + 60000, has_share, joiner);
  int64_t share_ms = has_share(&s, joiner) ? s.now - tj : -1;
  run_until(&s, tj + 60000, NULL, 0);
  counts_t c3 = s.cnt;
  /* A control thread busy for 25 s (a long pause, a swapped process): its
   * readers read on to their deadlines, its calls and ticks wait; then
   * 35 s more. */
  int stalled = live_other(&s, victim);
  int stall_held = trouble(&s, 4, stalled, 25000, 0);
  counts_t c4 = s.cnt;
  /* A late member: another worker's heartbeats land 4-24 s late for
   * 60 s (a slow path to the membership table). */
  int late_held = trouble(&s, 5, live_other(&s, stalled), 0, 60000);
  counts_t c5 = s.cnt;
  /* A rolling redeploy: every worker replaced by one of a new id, a tenth
   * every 10 s (new ones started, old ones closed gracefully: final
   * checkpoints and releases), then 30 s. */
  s.hot.phase = 6;
  int64_t tr = s.now;
  int n_old = s.n_w, batch = n_old / 10 > 0 ? n_old / 10 : 1;
  for (int from = 0; from < n_old; from += batch) {
    for (int w = from; w < from + batch && w < n_old; w++) {
      int nw = s.n_w++;
      char nid[sizeof(s.w[nw].id)];
      snprintf(nid, sizeof(nid), "%.60s-r", s.w[w].id);
      memcpy(s.w[nw].id, nid, sizeof(nid));
      start_worker(&s, nw);
      if (s.w[w].alive) {
        kn_drive_close(s.w[w].dr);
        after(&s, w);
      }
    }
    run_until(&s, s.now + 10000, NULL, 0);
  }
  run_until(&s, s.now + 30000, NULL, 0);
  int64_t redeploy_ms = s.now - tr;
  counts_t c6 = s.cnt;
  s.now += 5000;
  hot_roll(&s); /* the last window counts too */

  double m = (double)seconds / 60.0;
  printf(
      "{\"shards\": %d, \"workers\": %d, \"members\": %d, \"seconds\": %lld, "
      "\"held_s\": %.1f, \"settled_s\": %.1f, "
      "\"settle_hot_item_wcu_s\": %.1f, "
      "\"items_read_per_shard_min\": %.4f, "
      "\"rcu_per_shard_min\": %.4f, \"items_written_per_lease_min\": "
      "%.3f, \"wcu_per_lease_min\": %.3f, ",
      shards, workers, members, (long long)seconds, (double)held_ms / 1000,
      (double)settled_ms / 1000, s.hot.phase_max[0],
      (c1.items_read - c0.items_read) / shards / m,
      (c1.rcu - c0.rcu) / shards / m,
      (c1.items_written - c0.items_written) / shards / m,
      (c1.wcu - c0.wcu) / shards / m);
  char extra[96];
  print_counts("steady", &c0, &c1, (double)seconds, shards, s.hot.phase_max[1],
               "");
  snprintf(extra, sizeof(extra), ", \"failover_s\": %.1f",
           (double)failover_ms / 1000);
  print_counts("kill", &c1, &c2, 60, shards, s.hot.phase_max[2], extra);
  snprintf(extra, sizeof(extra), ", \"share_s\": %.1f",
           (double)share_ms / 1000);
  print_counts("join", &c2, &c3, 60, shards, s.hot.phase_max[3], extra);
  snprintf(extra, sizeof(extra), ", \"all_held\": %d", stall_held);
  print_counts("stall", &c3, &c4, 60, shards, s.hot.phase_max[4], extra);
  snprintf(extra, sizeof(extra), ", \"all_held\": %d", late_held);
  print_counts("late", &c4, &c5, 60, shards, s.hot.phase_max[5], extra);
  int all_held = recovered(&s, 0);
  snprintf(extra, sizeof(extra), ", \"all_held\": %d", all_held);
  print_counts("redeploy", &c5, &c6, (double)redeploy_ms / 1000, shards,
               s.hot.phase_max[6], extra);
  printf(", \"starts\": %lld, \"takes\": %lld, \"violations\": %lld",
         (long long)s.chk.starts, (long long)s.chk.takes,
         (long long)s.chk.violations);
  printf("}\n");
  /* --max-hot-wcu: the hottest item of every phase within it, the fleet
   * starting at once too, or exit 1 (a model check: virtual time, no
   * timing). */
  int over = 0;
  for (int p = 0; p < 7; p++)
    if (max_hot > 0 && s.hot.phase_max[p] > max_hot) over = 1;
  if (over)
    fprintf(stderr, "kn_sim --cost: an item took more than %.0f WCU/s\n",
            max_hot);
  /* The fleet checks: a violation, or a lease nobody holds at the end of
   * a phase (the group must settle within each). */
  if (s.chk.violations) {
    fprintf(stderr, "kn_sim --cost: %lld violations; the first: %s\n",
            (long long)s.chk.violations, s.chk.first);
    over = 1;
  }
  if (failover_ms < 0 || !stall_held || !late_held || !all_held) {
    fprintf(stderr,
            "kn_sim --cost: a lease was left unheld at the end of a "
            "phase\n");
    over = 1;
  }

  for (int w = 0; w < s.n_w; w++) {
    kn_drive_destroy(s.w[w].dr);
    free(s.w[w].yields);
  }
  cev_t e;
  while (pop(&s, &e)) kn_store_job_free(e.job);
  free(s.heap);
  free(s.w);
  free(s.hot.sec_wcu);
  free(s.hot.win_wcu);
  sim_cost_check_free(&s.chk);
  for (int i = 0; i < shards; i++) {
    free(s.ids[i]);
    free(s.hs[i]);
    free(s.he[i]);
  }
  free(s.ids);
  free(s.hs);
  free(s.he);
  free(s.listing);
  kn_lease_store_destroy(s.ls);
  return over;
}
