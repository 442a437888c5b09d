/* The processes of kn_sim --roles and the database they share: readers
 * (the real reader bookkeeping and snapshot bytes around simulated reads)
 * and the enumerator (the real kn_enumerator_t), each committing its state
 * with its effects in one transaction, as examples/exactly-once/ does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinesis/seqnum.h"
#include "kinesis/shard.h"
#include "kn/snapshot.h"
#include "kn/stream_reader.h"
#include "sim_roles.h"

/* Room for one more element of a growing array. */
#define RS_GROW(p, n, cap)                           \
  do {                                               \
    if ((n) == (cap)) {                              \
      (cap) = (cap) ? (cap)*2 : 16;                  \
      void *v_ = realloc((p), (cap) * sizeof(*(p))); \
      if (!v_) abort();                              \
      (p) = v_;                                      \
    }                                                \
  } while (0)

static int64_t jitter(rsim_t *r, int64_t ms) {
  return sim_range(&r->s.rng, ms / 2, ms + ms / 2);
}

int rs_reader_index(const rsim_t *r, const char *id) {
  for (int i = 0; i < r->n_rd; i++)
    if (strcmp(r->rd[i].id, id) == 0) return i;
  return -1;
}

/* ---- readers ---- */

void rs_reader_start(rsim_t *r, int i) {
  rs_reader_t *d = &r->rd[i];
  d->alive = 1;
  d->inc++;
  d->retiring = 0;
  kn_rbook_init(&d->book);
  d->n_rows = d->n_ret = d->n_unacked = 0;
  d->applied = 0;
  d->ckpt = d->state_ckpt;
  if (d->state) {
    kn_snapshot_t *snap = NULL;
    kn_error_t *e = kn_snapshot_decode(d->state, d->state_len, &snap);
    if (e) {
      sim_violate(&r->s, "%s: its committed snapshot does not decode: %s",
                  d->id, kn_error_string(e));
      kn_error_destroy(e);
      return;
    }
    kn_err_t err = kn_rbook_restore(&d->book, snap, r->s.now, r->s.now);
    if (err) sim_violate(&r->s, "%s: restore: %s", d->id, kn_err2str(err));
    sim_trace(&r->s, i, "restore", NULL, (int64_t)kn_snapshot_count(snap),
              d->ckpt);
    kn_snapshot_destroy(snap);
    r->restores_r++;
  }
  sim_push(&r->s, r->s.now + jitter(r, r->read_ms), RV_READ, i, d->inc, 0, 0,
           NULL);
  sim_push(&r->s, r->s.now + jitter(r, r->commit_ms), RV_COMMIT, i, d->inc, 0,
           0, NULL);
}

void rs_reader_kill(rsim_t *r, int i) {
  rs_reader_t *d = &r->rd[i];
  if (!d->alive) return;
  d->alive = 0;
  kn_rbook_free(&d->book);
  d->n_rows = d->n_ret = d->n_unacked = 0;
  sim_trace(&r->s, i, "kill", NULL, d->ckpt, 0);
}

/* Takes in the enumerator's assignments not taken in yet, in order. */
static void take_assignments(rsim_t *r, int i) {
  rs_reader_t *d = &r->rd[i];
  for (size_t k = 0; k < r->n_as && d->alive; k++) {
    rs_assign_t *a = &r->as[k];
    if (a->reader != i || a->done || a->id <= d->applied) continue;
    const char *id = r->s.sh[a->shard].id;
    if (a->kind == RS_ASSIGN) {
      kn_err_t e = kn_rbook_add(&d->book, id, &a->start, r->s.now, r->s.now);
      if (e)
        sim_violate(&r->s, "%s: assigned %s, which it reads already (%s)",
                    d->id, id, kn_err2str(e));
      sim_trace(&r->s, i, "assign", id, a->id, 0);
    } else {
      kn_position_t at;
      /* A finished shard is not handed back: its report answers. */
      if (kn_rbook_remove(&d->book, id, &at) == KN_ERR_NO_ERROR) {
        RS_GROW(d->ret, d->n_ret, d->cap_ret);
        d->ret[d->n_ret++] = (rs_pos_t){a->shard, at, 0, 0};
      }
      sim_trace(&r->s, i, "revoke", id, a->id, 0);
    }
    d->applied = a->id;
  }
}

/* Where the simulated read of shard h resumes for position p: record *k,
 * user record *sub inside it (after user record p->subseq, the next one
 * of the same aggregate, if any). */
static void start_at(const sim_shard_t *h, const kn_position_t *p, size_t *k,
                     uint64_t *sub) {
  size_t i = 0;
  *sub = 0;
  switch (p->kind) {
    case KN_POSITION_TRIM_HORIZON:
      break;
    case KN_POSITION_LATEST:
      i = h->n;
      break;
    case KN_POSITION_AT_TIMESTAMP:
      while (i < h->n && h->rec[i].t < p->timestamp_ms) i++;
      break;
    case KN_POSITION_AT_SEQUENCE:
      while (i < h->n && kn_seqnum_cmp(h->rec[i].seq, p->seq) < 0) i++;
      break;
    case KN_POSITION_AFTER:
      while (i < h->n && kn_seqnum_cmp(h->rec[i].seq, p->seq) < 0) i++;
      if (i < h->n && kn_seqnum_cmp(h->rec[i].seq, p->seq) == 0) {
        if (p->subseq < (uint64_t)h->rec[i].users - 1)
          *sub = p->subseq + 1;
        else
          i++;
      }
      break;
  }
  *k = i;
}

/* One poll: a batch of one or two active shards, as the consumer under
 * the reader would return them (de-aggregated: a batch may end inside an
 * aggregate), and the ends it would report. */
void rs_reader_read(rsim_t *r, int i) {
  rs_reader_t *d = &r->rd[i];
  take_assignments(r, i);
  for (int n = 0; n < 2 && d->alive && d->book.n; n++) {
    kn_rb_shard_t *b =
        &d->book.v[sim_range(&r->s.rng, 0, (int64_t)d->book.n - 1)];
    if (!kn_rbook_active(b)) continue;
    int si = sim_shard_find(&r->s, b->id);
    sim_shard_t *h = &r->s.sh[si];
    if (h->gone) {
      /* The listing before a start no longer shows it: aged out. */
      kn_rbook_finished(&d->book, b->id);
      sim_trace(&r->s, i, "gone", b->id, 0, 0);
      continue;
    }
    size_t k, k0, last = 0;
    uint64_t sub, last_sub = 0;
    start_at(h, &b->pos, &k, &sub);
    k0 = k;
    int64_t arrival = KN_WATERMARK_NONE;
    for (int64_t quota = sim_range(&r->s.rng, 1, 12); quota > 0 && k < h->n;
         quota--) {
      RS_GROW(d->rows, d->n_rows, d->cap_rows);
      d->rows[d->n_rows++] = (rs_row_t){si, k, sub};
      if (h->rec[k].t > arrival) arrival = h->rec[k].t;
      last = k;
      last_sub = sub;
      if (++sub >= (uint64_t)h->rec[k].users) {
        k++;
        sub = 0;
      }
    }
    if (arrival != KN_WATERMARK_NONE) {
      kn_rbook_returned(&d->book, b->id, h->rec[last].seq, last_sub, arrival,
                        r->s.now);
      sim_trace(&r->s, i, "poll", b->id, (int64_t)k0, (int64_t)k);
    }
    if (h->closed && k == h->n) {
      kn_rbook_finished(&d->book, b->id);
      sim_trace(&r->s, i, "end", b->id, (int64_t)k, 0);
    }
  }
  if (d->alive)
    sim_push(&r->s, r->s.now + jitter(r, r->read_ms), RV_READ, i, d->inc, 0, 0,
             NULL);
}

static void add_event(rsim_t *r, int kind, int reader, int shard,
                      const kn_position_t *pos) {
  RS_GROW(r->ev, r->n_ev, r->cap_ev);
  rs_event_t *e = &r->ev[r->n_ev++];
  memset(e, 0, sizeof(*e));
  e->kind = kind;
  e->reader = reader;
  e->shard = shard;
  if (pos) e->pos = *pos;
}

/* rpc: sends a finished report (lost now and then, and whenever either
 * end restarts meanwhile). */
static void send_report(rsim_t *r, int i, rs_pos_t *u) {
  u->sent_t = r->s.now;
  if (sim_chance(&r->s.rng, 50)) {
    r->lost_msgs++;
    return;
  }
  sim_push(&r->s, r->s.now + sim_range(&r->s.rng, 1, 800), RV_REPORT, i, 0,
           u->shard, r->en_inc, NULL);
}

/* rpc: the checkpoint to confirm: committed, and later than none of the
 * reports not acknowledged yet (their shards stay in snapshots). */
static int64_t confirmable(const rs_reader_t *d) {
  int64_t c = d->ckpt;
  for (size_t k = 0; k < d->n_unacked; k++)
    if (d->unacked[k].ck - 1 < c) c = d->unacked[k].ck - 1;
  return c;
}

/* One transaction: the rows polled, the reports, the shards handed back,
 * the assignments taken in and the snapshot; then the confirmation. */
void rs_reader_commit(rsim_t *r, int i) {
  rs_reader_t *d = &r->rd[i];
  take_assignments(r, i);
  if (!d->alive) return;
  for (size_t k = 0; k < d->n_rows; k++)
    rs_check_commit(r, i, d->rows[k].shard, d->rows[k].rec, d->rows[k].sub);
  size_t n_sent = d->n_unacked;
  const char *id;
  while ((id = kn_rbook_take_finished(&d->book))) {
    int si = sim_shard_find(&r->s, id);
    if (!r->rpc) {
      add_event(r, RS_FINISHED, i, si, NULL);
    } else {
      RS_GROW(d->unacked, d->n_unacked, d->cap_unacked);
      d->unacked[d->n_unacked++] = (rs_pos_t){si, {0}, d->ckpt + 1, -1};
    }
  }
  for (size_t k = 0; k < d->n_ret; k++)
    add_event(r, RS_RETURNED, i, d->ret[k].shard, &d->ret[k].pos);
  for (size_t k = 0; k < r->n_as; k++)
    if (r->as[k].reader == i && r->as[k].id <= d->applied) r->as[k].done = 1;
  kn_snapshot_t *snap = kn_snapshot_new();
  if (!snap) abort();
  kn_err_t err = kn_rbook_snapshot(&d->book, d->ckpt + 1, snap);
  void *bytes = NULL;
  size_t len = 0;
  kn_error_t *e = err ? NULL : kn_snapshot_encode(snap, &bytes, &len);
  kn_snapshot_destroy(snap);
  if (err || e) {
    sim_violate(&r->s, "%s: snapshot: %s", d->id,
                e ? kn_error_string(e) : kn_err2str(err));
    kn_error_destroy(e);
    return;
  }
  free(d->state);
  d->state = bytes;
  d->state_len = len;
  d->state_ckpt = ++d->ckpt;
  d->n_rows = d->n_ret = 0;
  r->commits++;
  sim_trace(&r->s, i, "commit", NULL, d->ckpt, (int64_t)d->book.n);
  if (d->retiring) {
    add_event(r, RS_LEFT, i, -1, NULL);
    d->retired = 1;
    rs_reader_kill(r, i);
    r->leaves++;
    return;
  }
  /* Killed between the commit and what follows it. */
  if (r->s.faults_on && r->s.o.faults && sim_chance(&r->s.rng, 20)) {
    r->kills_r++;
    rs_reader_kill(r, i);
    sim_push(&r->s, r->s.now + sim_range(&r->s.rng, 100, 5000), RV_RESTART, i,
             0, 0, 0, NULL);
    return;
  }
  if (!r->rpc) {
    kn_rbook_confirm(&d->book, d->ckpt);
  } else {
    /* Reports go out once the rows that end their shards are durable;
     * those not acknowledged in a while go again. */
    for (size_t k = 0; k < d->n_unacked; k++)
      if (k >= n_sent || r->s.now - d->unacked[k].sent_t > 2000)
        send_report(r, i, &d->unacked[k]);
    kn_rbook_confirm(&d->book, confirmable(d));
  }
  sim_push(&r->s, r->s.now + jitter(r, r->commit_ms), RV_COMMIT, i, d->inc, 0,
           0, NULL);
}

void rs_reader_ack(rsim_t *r, int i, int shard) {
  rs_reader_t *d = &r->rd[i];
  size_t keep = 0;
  for (size_t k = 0; k < d->n_unacked; k++)
    if (d->unacked[k].shard != shard) d->unacked[keep++] = d->unacked[k];
  d->n_unacked = keep;
}

/* ---- the enumerator ---- */

void rs_enum_start(rsim_t *r) {
  r->en_alive = 1;
  r->en_inc++;
  r->n_acks = 0;
  if (r->en_state) {
    kn_error_t *e = kn_enumerator_restore(r->en_state, r->en_state_len,
                                          r->assigner, &r->en);
    if (e) {
      sim_violate(&r->s, "enumerator: restore: %s", kn_error_string(e));
      kn_error_destroy(e);
      r->en_alive = 0;
      return;
    }
    r->restores_e++;
    sim_trace(&r->s, -1, "enum restore", NULL,
              (int64_t)kn_enumerator_shard_count(r->en), 0);
  } else if (!(r->en = kn_enumerator_new(&r->initial, r->assigner))) {
    abort();
  }
  kn_enumerator_set_sync_interval(r->en, r->sync_ms);
  sim_push(&r->s, r->s.now + jitter(r, r->round_ms), RV_ENUM, -1, r->en_inc, 0,
           0, NULL);
}

void rs_enum_kill(rsim_t *r) {
  if (!r->en_alive) return;
  r->en_alive = 0;
  kn_enumerator_destroy(r->en);
  r->en = NULL;
  r->n_acks = 0;
  sim_trace(&r->s, -1, "enum kill", NULL, 0, 0);
}

/* The children of shard si as ChildShards gives them, or NULL. */
static kn_shard_list_t *children_of(rsim_t *r, int si) {
  const sim_shard_t *h = &r->s.sh[si];
  if (!r->s.child_shards || !h->n_children) return NULL;
  kn_shard_list_t *l = kn_shard_list_new();
  if (!l) abort();
  for (int c = 0; c < h->n_children; c++) {
    kn_cc_shard_t x;
    sim_shard_desc(&r->s, h->children[c], &x);
    kn_shard_desc_t sd = {x.id,       x.parent, x.adjacent, x.hash_start,
                          x.hash_end, NULL,     NULL};
    if (kn_shard_list_add(l, &sd)) abort();
  }
  return l;
}

static void finished(rsim_t *r, int reader, int si) {
  kn_shard_list_t *ch = children_of(r, si);
  kn_err_t e =
      kn_enumerator_finished(r->en, r->rd[reader].id, r->s.sh[si].id, ch);
  kn_shard_list_destroy(ch);
  /* A report about a shard the graph dropped (aged out) is harmless. */
  if (e && e != KN_ERR__NOT_FOUND)
    sim_violate(&r->s, "enumerator: finished %s: %s", r->s.sh[si].id,
                kn_err2str(e));
  sim_trace(&r->s, reader, "enum finished", r->s.sh[si].id, e, 0);
}

static void returned(rsim_t *r, int si, const kn_position_t *p) {
  kn_err_t e = kn_enumerator_shard_returned(r->en, r->s.sh[si].id, p);
  if (e)
    sim_violate(&r->s, "enumerator: %s handed back: %s", r->s.sh[si].id,
                kn_err2str(e));
}

/* Reader i left: its shards come back from its last committed snapshot. */
static void left(rsim_t *r, int i) {
  rs_reader_t *d = &r->rd[i];
  kn_enumerator_reader_left(r->en, d->id);
  kn_snapshot_t *snap = NULL;
  kn_error_t *e =
      d->state ? kn_snapshot_decode(d->state, d->state_len, &snap) : NULL;
  if (e) {
    sim_violate(&r->s, "%s: its snapshot does not decode: %s", d->id,
                kn_error_string(e));
    kn_error_destroy(e);
    return;
  }
  for (size_t k = 0; k < kn_snapshot_count(snap); k++) {
    int si = sim_shard_find(&r->s, kn_snapshot_shard(snap, k));
    const kn_position_t *p = kn_snapshot_position(snap, k);
    if (p)
      returned(r, si, p);
    else
      finished(r, i, si);
  }
  kn_snapshot_destroy(snap);
  sim_trace(&r->s, i, "enum left", NULL, 0, 0);
}

static void list_shards(rsim_t *r) {
  kn_cc_shard_t *v;
  size_t n;
  sim_retention(&r->s);
  sim_list_shards(&r->s, &v, &n);
  kn_shard_list_t *l = kn_shard_list_new();
  if (!l) abort();
  for (size_t k = 0; k < n; k++) {
    kn_shard_desc_t sd = {
        v[k].id,       v[k].parent, v[k].adjacent,           v[k].hash_start,
        v[k].hash_end, "1",         v[k].closed ? "9" : NULL};
    if (kn_shard_list_add(l, &sd)) abort();
  }
  free(v);
  if (kn_enumerator_shards(r->en, l, r->s.now)) abort();
  kn_shard_list_destroy(l);
  if (r->assigner == KN_ASSIGN_THROUGHPUT)
    for (int k = 0; k < r->s.n_sh; k++)
      if (r->s.sh[k].listed && !r->s.sh[k].closed)
        kn_enumerator_shard_load(r->en, r->s.sh[k].id, r->s.sh[k].n + 1);
  sim_trace(&r->s, -1, "enum list", NULL, (int64_t)n, 0);
}

/* rpc: a report reaches the enumerator (applied now, acknowledged once
 * committed). */
void rs_enum_report(rsim_t *r, int reader, int si) {
  finished(r, reader, si);
  RS_GROW(r->acks, r->n_acks, r->cap_acks);
  r->acks[r->n_acks++] = (rs_pos_t){si, {0}, reader, 0};
}

/* One round, one transaction: readers taken in, reports consumed, the
 * listing when due, the actions written, the snapshot stored. */
void rs_enum_round(rsim_t *r) {
  int joins = 0;
  for (int i = 0; i < r->n_rd; i++) {
    rs_reader_t *d = &r->rd[i];
    if (!d->exists || d->joined || d->retired) continue;
    if (kn_enumerator_reader_joined(r->en, d->id)) abort();
    d->joined = 1;
    joins++;
    r->joins++;
    sim_trace(&r->s, i, "enum joined", NULL, 0, 0);
  }
  /* Now and then without a join too, while the activity lasts (the
   * quiet period lets the last moves settle). */
  int again = sim_chance(&r->s.rng, 20) && r->s.faults_on;
  if ((joins || again) && kn_enumerator_rebalance(r->en)) abort();
  for (size_t k = 0; k < r->n_ev; k++) {
    rs_event_t *e = &r->ev[k];
    if (e->consumed) continue;
    e->consumed = 1;
    if (e->kind == RS_FINISHED)
      finished(r, e->reader, e->shard);
    else if (e->kind == RS_RETURNED)
      returned(r, e->shard, &e->pos);
    else
      left(r, e->reader);
  }
  if (kn_enumerator_due_ms(r->en, r->s.now) <= r->s.now &&
      !sim_chance(&r->s.rng, 50))
    list_shards(r);
  kn_enum_action_t a;
  while (kn_enumerator_next_action(r->en, &a)) {
    int ri = rs_reader_index(r, a.reader_id),
        si = sim_shard_find(&r->s, a.shard_id);
    if (ri < 0 || si < 0 || r->rd[ri].retired) {
      sim_violate(&r->s, "enumerator: %s of %s to %s, no such reader or shard",
                  a.kind == KN_ENUM_ASSIGN ? "ASSIGN" : "REVOKE", a.shard_id,
                  a.reader_id);
      return;
    }
    RS_GROW(r->as, r->n_as, r->cap_as);
    rs_assign_t *x = &r->as[r->n_as];
    x->id = (int64_t)++r->n_as;
    x->reader = ri;
    x->shard = si;
    x->kind = a.kind == KN_ENUM_ASSIGN ? RS_ASSIGN : RS_REVOKE;
    x->done = 0;
    x->start = a.start;
    sim_trace(&r->s, ri,
              a.kind == KN_ENUM_ASSIGN ? "enum ASSIGN" : "enum REVOKE",
              a.shard_id, x->id, 0);
  }
  void *bytes;
  size_t len;
  kn_error_t *e = kn_enumerator_snapshot(r->en, &bytes, &len);
  if (e) {
    sim_violate(&r->s, "enumerator: snapshot: %s", kn_error_string(e));
    kn_error_destroy(e);
    return;
  }
  free(r->en_state);
  r->en_state = bytes;
  r->en_state_len = len;
  /* The acknowledgements of the reports this commit made durable. */
  for (size_t k = 0; k < r->n_acks; k++) {
    int ri = (int)r->acks[k].ck;
    if (sim_chance(&r->s.rng, 50)) {
      r->lost_msgs++;
      continue;
    }
    sim_push(&r->s, r->s.now + sim_range(&r->s.rng, 1, 800), RV_ACK, ri,
             r->rd[ri].inc, r->acks[k].shard, 0, NULL);
  }
  r->n_acks = 0;
  sim_push(&r->s, r->s.now + jitter(r, r->round_ms), RV_ENUM, -1, r->en_inc, 0,
           0, NULL);
}

void rs_free(rsim_t *r) {
  for (int i = 0; i < r->n_rd; i++) {
    rs_reader_t *d = &r->rd[i];
    if (d->alive) kn_rbook_free(&d->book);
    free(d->rows);
    free(d->ret);
    free(d->unacked);
    free(d->state);
  }
  kn_enumerator_destroy(r->en);
  free(r->acks);
  free(r->en_state);
  free(r->as);
  free(r->ev);
  sim_free(&r->s);
  memset(r, 0, sizeof(*r));
}
