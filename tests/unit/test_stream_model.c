/* The stream-processor model as a whole, without I/O: a simulated stream
 * (records appended, splits, merges), the enumerator, stream readers'
 * bookkeeping, and a transactional sink into which each checkpoint
 * commits the readers' output together with every snapshot.  Random runs
 * crash the whole processor at any step (everything not committed is
 * lost) and restart it from the sink, with another number of readers at
 * times (rescaling).  In the end every record is in the sink exactly
 * once, and a child's records were read after all of its parents'.
 * Finished reports travel to the enumerator on their own time (they may
 * be lost in a crash), but arrive before the next checkpoint, as
 * kn_stream_reader_take_finished() asks.
 *
 * KT_SEED=N runs seed N only; KT_TRACE=1 tells actions, crashes and
 * records committed twice. */
#include <stdlib.h>

#include "kinesis/hashkey.h"
#include "kinesis/shard.h"
#include "kn/enumerator.h"
#include "kt.h"
#include "kt_stream.h"
#include "stream/reader_book.h"

#define MS 48     /* shards at most */
#define MR 4      /* readers at most */
#define MREC 4096 /* records at most */

typedef struct mshard {
  int parent, adj, open;
  kn_u128_t start, end;
  int n;   /* records written: numbered 1 .. n */
  int id0; /* global id of record 1 */
} mshard_t;

typedef struct mreader {
  kn_rbook_t book;
  int out[MREC]; /* uncommitted output: global record ids */
  long stamp[MREC];
  int n_out;
} mreader_t;

typedef struct model {
  mshard_t s[MS];
  int n_shards, n_records;
  /* the processor (lost in a crash) */
  kn_enumerator_t *en;
  mreader_t r[MR];
  int n_readers;
  int64_t ckpt;
  long clock;
  /* the sink (durable) */
  int committed[MREC]; /* copies of each record */
  long committed_at[MREC];
  unsigned char *state[1 + MR];
  size_t state_len[1 + MR];
  int state_readers;
  /* finished reports on their way to the enumerator (lost in a crash):
   * a checkpoint may catch the enumerator before they arrive */
  struct {
    int reader;
    char shard[32];
  } inflight[MS * 4];
  int n_inflight;
  uint64_t rnd;
  int bad;
} model_t;

#define sid kt_shard_id

static const char *rid(int i) {
  static const char *n[MR] = {"r0", "r1", "r2", "r3"};
  return n[i];
}

static int pick(model_t *m, int n) {
  return (int)(kt_rand(&m->rnd) % (uint64_t)n);
}

static int new_shard(model_t *m, int parent, int adj, kn_u128_t a,
                     kn_u128_t b) {
  if (m->n_shards == MS) return -1;
  mshard_t *x = &m->s[m->n_shards];
  memset(x, 0, sizeof(*x));
  x->parent = parent;
  x->adj = adj;
  x->open = 1;
  x->start = a;
  x->end = b;
  x->id0 = -1;
  return m->n_shards++;
}

static void write_records(model_t *m, int i, int k) {
  mshard_t *x = &m->s[i];
  if (!x->open || x->id0 >= 0 || m->n_records + 64 > MREC) return;
  /* Each shard's records get consecutive global ids when it closes;
   * until then they are counted only. */
  x->n += k;
}

static void close_shard(model_t *m, int i) {
  mshard_t *x = &m->s[i];
  if (!x->open) return;
  x->open = 0;
  if (m->n_records + x->n > MREC) x->n = MREC - m->n_records;
  x->id0 = m->n_records;
  m->n_records += x->n;
}

static kn_shard_list_t *listing(model_t *m) {
  kn_shard_list_t *l = kn_shard_list_new();
  for (int i = 0; l && i < m->n_shards; i++) {
    mshard_t *x = &m->s[i];
    kt_shard_add(l, i, x->parent, x->adj, x->start, x->end, x->open);
  }
  return l;
}

/* Records are read only from closed shards (their ids are fixed), which
 * keeps the model small; open shards are closed before the end. */
static int next_index(const kn_rb_shard_t *s) {
  if (s->pos.kind == KN_POSITION_AFTER) return atoi(s->pos.seq);
  return 0; /* TRIM_HORIZON */
}

static void reader_step(model_t *m, int r) {
  mreader_t *rd = &m->r[r];
  if (!rd->book.n) return;
  kn_rb_shard_t *s = &rd->book.v[pick(m, (int)rd->book.n)];
  if (!kn_rbook_active(s)) return;
  int i = atoi(s->id + 8);
  mshard_t *x = &m->s[i];
  if (x->open) return;
  int k = next_index(s), n = 1 + pick(m, 3);
  char seq[16];
  for (int j = 0; j < n && k < x->n && rd->n_out < MREC; j++, k++) {
    rd->out[rd->n_out] = x->id0 + k;
    rd->stamp[rd->n_out++] = ++m->clock;
    snprintf(seq, sizeof(seq), "%d", k + 1);
    kn_rbook_returned(&rd->book, s->id, seq, 0, k, 0);
  }
  if (k >= x->n && !s->finished && getenv("KT_TRACE"))
    fprintf(stderr, "reader %d finished %s\n", r, s->id + 18);
  if (k >= x->n) kn_rbook_finished(&rd->book, s->id);
}

static void take_actions(model_t *m) {
  kn_enum_action_t a;
  if (!m->en) return;
  while (kn_enumerator_next_action(m->en, &a)) {
    int r = atoi(a.reader_id + 1);
    if (r < 0 || r >= m->n_readers) {
      m->bad++;
      continue;
    }
    if (getenv("KT_TRACE")) {
      char pb[64];
      kn_position_format(&a.start, pb, sizeof(pb));
      fprintf(stderr, "ckpt %lld: %s %s %s %s\n", (long long)m->ckpt,
              a.kind == KN_ENUM_ASSIGN ? "ASSIGN" : "REVOKE", a.shard_id + 18,
              a.reader_id, pb);
    }
    if (a.kind == KN_ENUM_ASSIGN) {
      if (kn_rbook_add(&m->r[r].book, a.shard_id, &a.start, 0, 0)) m->bad++;
    } else {
      kn_position_t p;
      /* A finished shard is not handed back: its report answers. */
      if (!kn_rbook_remove(&m->r[r].book, a.shard_id, &p))
        kn_enumerator_shard_returned(m->en, a.shard_id, &p);
    }
  }
}

/* The application takes the finished reports; they travel to the
 * enumerator. */
static void take_finished(model_t *m) {
  for (int r = 0; r < m->n_readers; r++) {
    const char *id;
    while (m->n_inflight < MS * 4 &&
           (id = kn_rbook_take_finished(&m->r[r].book))) {
      m->inflight[m->n_inflight].reader = r;
      snprintf(m->inflight[m->n_inflight++].shard, 32, "%s", id);
    }
  }
}

/* The finished reports in flight arrive. */
static void deliver(model_t *m) {
  if (!m->en) return;
  for (int k = 0; k < m->n_inflight; k++)
    if (getenv("KT_TRACE"))
      fprintf(stderr, "report %s finished by %d arrives\n",
              m->inflight[k].shard + 18, m->inflight[k].reader);
  for (int k = 0; k < m->n_inflight; k++)
    kn_enumerator_finished(m->en, rid(m->inflight[k].reader),
                           m->inflight[k].shard, NULL);
  m->n_inflight = 0;
}

/* Output and every snapshot in one transaction; then confirmed.  The
 * reports taken so far reach the enumerator first (the contract of
 * kn_stream_reader_take_finished()). */
static void checkpoint(model_t *m) {
  unsigned char *st[1 + MR] = {0};
  size_t len[1 + MR] = {0};
  if (!m->en) return;
  deliver(m);
  m->ckpt++;
  kn_error_t *e = kn_enumerator_snapshot(m->en, (void **)&st[0], &len[0]);
  for (int r = 0; !e && r < m->n_readers; r++) {
    kn_snapshot_t *s = kn_snapshot_new();
    if (!s || kn_rbook_snapshot(&m->r[r].book, m->ckpt, s)) m->bad++;
    e = kn_snapshot_encode(s, (void **)&st[1 + r], &len[1 + r]);
    kn_snapshot_destroy(s);
  }
  if (e) {
    m->bad++;
    kn_error_destroy(e);
    for (int k = 0; k <= MR; k++) free(st[k]);
    return;
  }
  /* commit */
  for (int k = 0; k <= MR; k++) {
    free(m->state[k]);
    m->state[k] = st[k];
    m->state_len[k] = len[k];
  }
  m->state_readers = m->n_readers;
  for (int r = 0; r < m->n_readers; r++) {
    mreader_t *rd = &m->r[r];
    for (int j = 0; j < rd->n_out; j++) {
      if (getenv("KT_TRACE") && m->committed[rd->out[j]])
        fprintf(stderr, "ckpt %lld: reader %d commits %d again\n",
                (long long)m->ckpt, r, rd->out[j]);
      m->committed[rd->out[j]]++;
      m->committed_at[rd->out[j]] = rd->stamp[j];
    }
    rd->n_out = 0;
    kn_rbook_confirm(&rd->book, m->ckpt);
  }
}

static void stop(model_t *m) {
  m->n_inflight = 0;
  kn_enumerator_destroy(m->en);
  m->en = NULL;
  for (int r = 0; r < MR; r++) kn_rbook_free(&m->r[r].book);
  memset(m->r, 0, sizeof(m->r));
}

/* A restart from the sink with n readers. */
static void start(model_t *m, int n) {
  m->n_readers = n;
  for (int r = 0; r < MR; r++) kn_rbook_init(&m->r[r].book);
  if (!m->state[0]) {
    m->en = kn_enumerator_new(NULL, (kn_assigner_t)pick(m, 3));
  } else {
    kn_error_t *e = kn_enumerator_restore(m->state[0], m->state_len[0],
                                          (kn_assigner_t)pick(m, 3), &m->en);
    if (e) m->bad++;
    kn_error_destroy(e);
    if (!m->en) return; /* out of memory: the run ends here */
    for (int r = 0; r < m->state_readers; r++) {
      kn_snapshot_t *s = NULL;
      e = kn_snapshot_decode(m->state[1 + r], m->state_len[1 + r], &s);
      if (e) m->bad++;
      kn_error_destroy(e);
      for (size_t j = 0; s && j < kn_snapshot_count(s); j++) {
        const char *id = kn_snapshot_shard(s, j);
        const kn_position_t *p = kn_snapshot_position(s, j);
        if (r < n) {
          kn_position_t th;
          kn_position_trim_horizon(&th);
          kn_rbook_add(&m->r[r].book, id, p ? p : &th, 0, 0);
          if (!p) kn_rbook_finished(&m->r[r].book, id);
        } else if (p) {
          kn_enumerator_shard_returned(m->en, id, p);
        } else {
          kn_enumerator_finished(m->en, NULL, id, NULL);
        }
      }
      if (r >= n) kn_enumerator_reader_left(m->en, rid(r));
      kn_snapshot_destroy(s);
    }
  }
  if (!m->en) return;
  for (int r = 0; r < n; r++) kn_enumerator_reader_joined(m->en, rid(r));
  kn_enumerator_set_sync_interval(m->en, 1);
}

static void step(model_t *m) {
  int op = pick(m, 14), i = pick(m, m->n_shards);
  mshard_t *x = &m->s[i];
  switch (op) {
    case 0:
      write_records(m, i, 1 + pick(m, 20));
      break;
    case 1: { /* split */
      kn_u128_t mid;
      if (!x->open || m->n_shards + 2 > MS ||
          kn_u128_midpoint(x->start, x->end, &mid))
        break;
      close_shard(m, i);
      new_shard(m, i, -1, x->start, kn_u128_sub(mid, kn_u128_make(0, 1)));
      new_shard(m, i, -1, mid, x->end);
      break;
    }
    case 2: /* merge with the open shard above */
      if (!x->open || m->n_shards + 1 > MS) break;
      for (int j = 0; j < m->n_shards; j++) {
        mshard_t *y = &m->s[j];
        if (j != i && y->open &&
            kn_u128_eq(y->start, kn_u128_add(x->end, kn_u128_make(0, 1)))) {
          close_shard(m, i);
          close_shard(m, j);
          new_shard(m, i, j, x->start, y->end);
          break;
        }
      }
      break;
    case 3: {
      kn_shard_list_t *l = listing(m);
      if (l) kn_enumerator_shards(m->en, l, 0);
      kn_shard_list_destroy(l);
      break;
    }
    case 4:
      checkpoint(m);
      break;
    case 5: /* crash, and restart with 1 to 4 readers */
      if (pick(m, 3)) break;
      stop(m);
      start(m, 1 + pick(m, MR));
      if (getenv("KT_TRACE"))
        fprintf(stderr, "crash; restart from ckpt %lld with %d readers\n",
                (long long)m->ckpt, m->n_readers);
      break;
    case 6:
      kn_enumerator_rebalance(m->en);
      break;
    case 7:
      deliver(m);
      break;
    case 8:
      take_finished(m);
      break;
    default:
      reader_step(m, pick(m, m->n_readers));
      break;
  }
  take_actions(m);
}

static void test_random_processor(void) {
  long crashes = 0, copies = 0;
  for (uint64_t seed = 1; seed <= 150; seed++) {
    if (getenv("KT_SEED") && seed != (uint64_t)atoi(getenv("KT_SEED")))
      continue;
    model_t *m = calloc(1, sizeof(*m));
    if (!m) return;
    m->rnd = seed * 0x2545f4914f6cdd1dull;
    new_shard(m, -1, -1, kn_u128_make(0, 0),
              kn_u128_make(UINT64_MAX >> 1, UINT64_MAX));
    new_shard(m, -1, -1, kn_u128_make((UINT64_MAX >> 1) + 1, 0),
              kn_u128_make(UINT64_MAX, UINT64_MAX));
    start(m, 2);
    for (int k = 0; k < 400 && m->en; k++) {
      kn_enumerator_t *before = m->en;
      step(m);
      crashes += m->en != before;
    }
    /* The end: every shard closed, read to its end, committed. */
    for (int i = 0; i < m->n_shards; i++) close_shard(m, i);
    for (int round = 0; m->en && round < 4000; round++) {
      if (round % 50 == 0) {
        kn_shard_list_t *l = listing(m);
        if (l) kn_enumerator_shards(m->en, l, 0);
        kn_shard_list_destroy(l);
      }
      for (int r = 0; r < m->n_readers; r++) reader_step(m, r);
      take_actions(m);
      take_finished(m);
      if (round % 7 == 0) deliver(m);
      if (round % 20 == 0) checkpoint(m);
    }
    checkpoint(m);
    int missing = 0, twice = 0;
    for (int g = 0; g < m->n_records; g++) {
      missing += m->committed[g] == 0;
      twice += m->committed[g] > 1;
      copies += m->committed[g];
    }
    KT_CHECK_MSG(missing == 0 && twice == 0,
                 "seed %" PRIu64 ": %d of %d records missing, %d twice", seed,
                 missing, m->n_records, twice);
    /* Parents before children. */
    for (int i = 0; i < m->n_shards; i++) {
      mshard_t *c = &m->s[i];
      int ps[2] = {c->parent, c->adj};
      for (int k = 0; k < 2; k++) {
        if (ps[k] < 0 || !c->n) continue;
        mshard_t *p = &m->s[ps[k]];
        long last_parent = 0, first_child = 0;
        for (int j = 0; j < p->n; j++)
          if (m->committed_at[p->id0 + j] > last_parent)
            last_parent = m->committed_at[p->id0 + j];
        first_child = m->committed_at[c->id0];
        for (int j = 0; j < c->n; j++)
          if (m->committed_at[c->id0 + j] < first_child)
            first_child = m->committed_at[c->id0 + j];
        KT_CHECK_MSG(!p->n || last_parent < first_child,
                     "seed %" PRIu64 ": shard %d read before parent %d", seed,
                     i, ps[k]);
      }
    }
    KT_CHECK_MSG(m->bad == 0, "seed %" PRIu64 ": %d bad steps", seed, m->bad);
    stop(m);
    for (int k = 0; k <= MR; k++) free(m->state[k]);
    free(m);
  }
  /* The runs crashed and read something. */
  if (getenv("KT_VERBOSE"))
    fprintf(stderr, "%ld crashes, %ld records committed\n", crashes, copies);
  KT_CHECK(crashes > 150 * 5);
  KT_CHECK(copies > 150 * 50);
}

int main(void) {
  KT_RUN(test_random_processor);
  return KT_DONE();
}
