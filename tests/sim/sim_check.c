/* The invariants: fencing, order and duplicates at every delivery and
 * every write that lands; no loss, checkpoints, liveness and balance at
 * the end of a run. */
#include <stdlib.h>
#include <string.h>

#include "kinesis/seqnum.h"
#include "sim.h"

static int is_ckpt(const char *c, const char *what) {
  return c && strcmp(c, what) == 0;
}

static int ancestor_leased(const sim_t *s, int i) {
  const sim_shard_t *h = &s->sh[i];
  int ps[2] = {h->parent, h->adjacent};
  for (int j = 0; j < 2; j++)
    if (ps[j] >= 0 && (s->sh[ps[j]].lease_created || ancestor_leased(s, ps[j])))
      return 1;
  return 0;
}

/* With LATEST, a closed shard nobody ever leased, descending from no
 * leased shard, is not wanted: the application starts at the open ones. */
static int excused(const sim_t *s, int i) {
  return is_ckpt(s->initial, KN_CKPT_LATEST) && s->sh[i].closed &&
         !s->sh[i].lease_created && !ancestor_leased(s, i);
}

static const char *dup_names[DUP_N] = {"kill", "freeze", "store", "move"};

void sim_check_delivery(sim_t *s, int w, const sim_reader_t *r, size_t idx) {
  sim_shard_t *h = &s->sh[r->shard];
  sim_rec_t *rec = &h->rec[idx];
  sim_ten_t *t = &s->ten[r->ten];
  /* fencing: never past the reading deadline, and not long after a later
   * tenure took the lease */
  if (sim_wnow(s, w) >= r->until_ms)
    sim_violate(s, "w%d tenure %lld of %s delivered past its until_ms", w,
                (long long)r->tenure, h->id);
  /* (A tenure that started already superseded -- its take answered after
   * another worker's take landed -- is bounded by its own deadline, as
   * the check below says; the rest must have stopped by then.) */
  if (h->cur_tenure > r->tenure && h->cur_ten_w != w && !(t->flags & TEN_STALE))
    sim_violate(s,
                "two readers: w%d tenure %lld of %s delivers record %lld at "
                "%lld ms, after w%d's take (tenure %lld) landed at %lld ms",
                w, (long long)r->tenure, h->id, (long long)rec->rid,
                (long long)s->now, h->cur_ten_w, (long long)h->cur_tenure,
                (long long)h->cur_take_t);
  if (h->cur_tenure > r->tenure && s->now - h->cur_take_t > s->cfg.duration_ms)
    sim_violate(s,
                "fencing: w%d tenure %lld of %s delivers record %lld at %lld "
                "ms, but w%d took the lease (tenure %lld) at %lld ms",
                w, (long long)r->tenure, h->id, (long long)rec->rid,
                (long long)s->now, h->cur_ten_w, (long long)h->cur_tenure,
                (long long)h->cur_take_t);
  /* order: a child's first record only once its parents are read */
  if (h->first_deliv_t < 0) {
    int ps[2] = {h->parent, h->adjacent};
    for (int j = 0; j < 2; j++) {
      if (ps[j] < 0 || excused(s, ps[j])) continue;
      const sim_shard_t *p = &s->sh[ps[j]];
      for (size_t k = 0; k < p->n; k++)
        if (p->rec[k].required && !p->rec[k].deliveries) {
          sim_violate(s,
                      "order: w%d delivers %s record %lld before parent %s "
                      "record %lld (of %zu) was delivered",
                      w, h->id, (long long)rec->rid, p->id,
                      (long long)p->rec[k].rid, p->n);
          break;
        }
    }
    h->first_deliv_t = s->now;
  }
  if (rec->deliveries) {
    const sim_ten_t *prev = &s->ten[rec->last_ten];
    int cause = DUP_MOVE;
    if (rec->last_ten == r->ten)
      sim_violate(s, "w%d tenure %lld delivered %s record %lld twice", w,
                  (long long)r->tenure, h->id, (long long)rec->rid);
    else if ((prev->flags & TEN_DONE) && r->tenure > prev->tenure)
      sim_violate(s,
                  "w%d tenure %lld delivers %s record %lld again after "
                  "w%d tenure %lld finished the shard",
                  w, (long long)r->tenure, h->id, (long long)rec->rid, prev->w,
                  (long long)prev->tenure);
    else if (prev->flags & TEN_KILLED)
      cause = DUP_KILL;
    else if (prev->flags & TEN_FROZEN)
      cause = DUP_FREEZE;
    else if ((prev->flags | t->flags) & TEN_STORE_FAULT)
      cause = DUP_STORE;
    s->dups[cause]++;
    if (cause != DUP_MOVE && !s->had_fault)
      sim_violate(s, "duplicate by %s in a run without faults",
                  dup_names[cause]);
    /* Planned moves (balancing, joins, leaves) hand the lease over at
     * the last record delivered: only a kill, a freeze or a store fault
     * may cost a record twice. */
    if (cause == DUP_MOVE)
      sim_violate(s,
                  "duplicate without a fault: w%d tenure %lld delivers %s "
                  "record %lld, delivered before by w%d tenure %lld",
                  w, (long long)r->tenure, h->id, (long long)rec->rid, prev->w,
                  (long long)prev->tenure);
    sim_trace(s, w, "dup", h->id, rec->rid, cause);
  } else {
    h->n_delivered++;
  }
  rec->deliveries++;
  rec->last_ten = r->ten;
  t->delivered++;
  s->deliveries++;
  s->last_delivery_t = s->now;
}

/* A reader still running (its deadline not passed) while a later tenure
 * took the lease more than a lease duration ago: two holders. */
void sim_check_reading(sim_t *s, int w, const sim_reader_t *r) {
  const sim_shard_t *h = &s->sh[r->shard];
  if (h->cur_tenure > r->tenure && s->now - h->cur_take_t > s->cfg.duration_ms)
    sim_violate(s,
                "fencing: w%d tenure %lld of %s still reads at %lld ms, but "
                "w%d took the lease (tenure %lld) at %lld ms",
                w, (long long)r->tenure, h->id, (long long)s->now, h->cur_ten_w,
                (long long)h->cur_tenure, (long long)h->cur_take_t);
}

void sim_check_start(sim_t *s, int w, const kn_cc_action_t *a, int sh) {
  sim_shard_t *h = &s->sh[sh];
  const char *ck = a->lease ? a->lease->checkpoint : NULL;
  if (is_ckpt(ck, KN_CKPT_SHARD_END))
    sim_violate(s, "w%d starts %s at SHARD_END", w, h->id);
  /* The initial position is for shards of unknown ancestry: a child of a
   * shard read here starts at its beginning. */
  if (h->parent >= 0 &&
      (is_ckpt(ck, KN_CKPT_AT_TIMESTAMP) || is_ckpt(ck, KN_CKPT_LATEST)) &&
      ancestor_leased(s, sh))
    sim_violate(s, "w%d starts child %s at %s", w, h->id, ck);
  if (a->tenure > h->cur_tenure)
    sim_violate(s, "w%d starts %s with tenure %lld, never written (%lld)", w,
                h->id, (long long)a->tenure, (long long)h->cur_tenure);
  if (a->until_ms <= sim_wnow(s, w))
    sim_trace(s, w, "late_start", h->id, a->tenure,
              a->until_ms - sim_wnow(s, w));
  if (is_ckpt(ck, KN_CKPT_LATEST) || is_ckpt(ck, KN_CKPT_AT_TIMESTAMP)) {
    /* records before a LATEST start, or before the timestamp of a shard
     * of unknown ancestry, are not wanted (KCL semantics) */
    size_t n = sim_start_index(s, sh, ck);
    for (size_t k = 0; k < n; k++)
      if (!h->rec[k].deliveries) h->rec[k].required = 0;
  }
}

void sim_check_landed(sim_t *s, const sim_call_t *c, const char *old_ckpt) {
  int sh = sim_shard_find(s, c->key);
  if (sh < 0) return;
  sim_shard_t *h = &s->sh[sh];
  switch (c->op) {
    case KN_CC_CREATE:
      /* A create sent after the cleanup is a decision on stale facts.
       * One sent before that lands late (the store layer retries it for
       * minutes) may bring the lease back: then nobody may read the shard
       * again (the delivery checks) and the lease must be closed and
       * removed again (sim_check_end). */
      if (h->lease_removed && c->sent_t >= h->removed_t)
        sim_violate(s, "w%d created the lease of %s again after its cleanup",
                    c->w, h->id);
      if (h->lease_removed) {
        sim_trace(s, c->w, "recreated", h->id, 0, 0);
        s->recreated++;
      }
      h->lease_created = 1;
      break;
    case KN_CC_REMOVE:
      s->last_end_t = s->now; /* the next generation's cleanup follows */
      h->lease_removed = 1;
      h->removed_t = s->now;
      break;
    case KN_CC_TAKE:
      h->cur_tenure = c->new_counter;
      h->cur_take_t = s->now;
      h->cur_ten_w = c->w;
      break;
    case KN_CC_RENEW:
    case KN_CC_CHECKPOINT:
    case KN_CC_RELEASE:
    case KN_CC_HANDOFF_DONE:
      if ((c->op == KN_CC_RELEASE || c->op == KN_CC_HANDOFF_DONE) &&
          c->tenure >= 0)
        for (size_t i = 0; i < s->n_ten; i++)
          if (s->ten[i].shard == sh && s->ten[i].tenure == c->tenure &&
              s->ten[i].w == c->w)
            s->ten[i].flags |= TEN_RELEASED;
      if (c->tenure >= 0 && h->cur_tenure >= 0 && c->tenure != h->cur_tenure)
        sim_violate(s,
                    "fencing: w%d's %s of %s for tenure %lld landed while "
                    "tenure %lld (w%d) holds the lease",
                    c->w, kn_cc_op_name(c->op), h->id, (long long)c->tenure,
                    (long long)h->cur_tenure, h->cur_ten_w);
      if (c->op != KN_CC_CHECKPOINT || !c->ckpt) break;
      if (is_ckpt(c->ckpt, KN_CKPT_SHARD_END)) {
        s->last_end_t = s->now;
        /* That tenure read to the end, or an earlier one did (a lease
         * created again late is closed unread), or the shard is past
         * retention (its children may start: it counts as read). */
        int ok = h->gone;
        for (size_t i = 0; i < s->n_ten; i++)
          if (s->ten[i].shard == sh && (s->ten[i].flags & TEN_ENDED) &&
              (s->ten[i].tenure == c->tenure || h->lease_removed))
            ok = 1;
        if (!ok)
          sim_violate(s,
                      "w%d wrote SHARD_END of %s for tenure %lld before that "
                      "tenure's reader reported the shard's end",
                      c->w, h->id, (long long)c->tenure);
      } else if (old_ckpt && !is_ckpt(old_ckpt, KN_CKPT_TRIM_HORIZON) &&
                 !is_ckpt(old_ckpt, KN_CKPT_LATEST) &&
                 !is_ckpt(old_ckpt, KN_CKPT_AT_TIMESTAMP)) {
        if (is_ckpt(old_ckpt, KN_CKPT_SHARD_END) ||
            kn_seqnum_cmp(c->ckpt, old_ckpt) < 0)
          sim_violate(s, "w%d moved the checkpoint of %s back from %s to %s",
                      c->w, h->id, old_ckpt, c->ckpt);
      }
      break;
    default:
      break;
  }
}

void sim_flag_tenures(sim_t *s, int w, int flag) {
  const sim_worker_t *k = &s->wk[w];
  for (size_t i = 0; i < s->n_ten; i++) {
    sim_ten_t *t = &s->ten[i];
    if (t->w != w || t->inc != k->inc ||
        (t->end_t >= 0 && (t->flags & (TEN_RELEASED | TEN_DONE))))
      continue;
    t->flags |= flag;
    if (t->end_t < 0) t->end_t = s->now;
  }
}

static int lease_started(const sim_t *s, int i) {
  int li = sim_store_find(s, s->sh[i].id);
  if (li < 0) return s->sh[i].lease_removed;
  const char *c = s->table[li].checkpoint;
  return c && ((*c >= '0' && *c <= '9') || is_ckpt(c, KN_CKPT_SHARD_END));
}

/* Cleanup is live: a finished lease is gone once its children's leases
 * have moved past their start (or were removed in turn) and no parent's
 * lease is left. */
static void check_cleanup(sim_t *s, int i) {
  const sim_shard_t *h = &s->sh[i];
  int li = sim_store_find(s, h->id);
  if (li < 0 || !kn_lease_is_shard_end(&s->table[li]) || !h->n_children) return;
  int ps[2] = {h->parent, h->adjacent};
  for (int j = 0; j < 2; j++)
    if (ps[j] >= 0 && sim_store_find(s, s->sh[ps[j]].id) >= 0) return;
  for (int j = 0; j < h->n_children; j++)
    if (s->sh[h->children[j]].gone || !lease_started(s, h->children[j])) return;
  sim_violate(s,
              "cleanup: the finished lease of %s is left although its "
              "children started and no parent's lease is left",
              h->id);
}

void sim_check_end(sim_t *s) {
  size_t held_min = (size_t)-1, held_max = 0;
  int alive = 0;
  for (int i = 0; i < s->n_sh && !s->violated; i++) {
    const sim_shard_t *h = &s->sh[i];
    for (size_t k = 0; k < h->n && !excused(s, i); k++)
      if (h->rec[k].required && !h->rec[k].deliveries) {
        sim_violate(s, "lost: record %lld of %s (%zu of %zu) never delivered",
                    (long long)h->rec[k].rid, h->id, k, h->n);
        break;
      }
    int li = sim_store_find(s, h->id);
    const kn_lease_t *l = li >= 0 ? &s->table[li] : NULL;
    if (h->gone) continue; /* what becomes of its lease is not checked */
    if (h->closed) {
      check_cleanup(s, i);
      if (l && !kn_lease_is_shard_end(l) && h->lease_created)
        sim_violate(s,
                    "closed %s: lease left at %s (owner %s, counter %lld, "
                    "checkpoint owner %s%s)",
                    h->id, l->checkpoint ? l->checkpoint : "(none)",
                    l->owner ? l->owner : "none", (long long)l->counter,
                    l->checkpoint_owner ? l->checkpoint_owner : "none",
                    l->beat_failing ? ", marked: heartbeats failing" : "");
      continue;
    }
    if (!l) {
      sim_violate(s, "open %s has no lease", h->id);
      break;
    }
    int w = -1;
    for (int j = 0; j < s->n_wk; j++)
      if (s->wk[j].alive && l->owner && strcmp(l->owner, s->wk[j].id) == 0)
        w = j;
    if (w < 0) {
      sim_violate(s, "liveness: open %s is held by %s, not a live worker",
                  h->id, l->owner ? l->owner : "nobody");
      break;
    }
    const sim_reader_t *r = NULL;
    for (size_t j = 0; j < s->wk[w].n_rd; j++)
      if (strcmp(s->wk[w].rd[j].key, h->id) == 0) r = &s->wk[w].rd[j];
    if (!r)
      sim_violate(s, "liveness: %s owns %s but does not read it", s->wk[w].id,
                  h->id);
    /* a tenure that started at LATEST at the end has nothing to write */
    int latest_at_end = r && is_ckpt(l->checkpoint, KN_CKPT_LATEST) &&
                        r->last < 0 && r->next >= h->n;
    if (r && !latest_at_end && h->n && h->rec[h->n - 1].required &&
        (!l->checkpoint || strcmp(l->checkpoint, h->rec[h->n - 1].seq) != 0))
      sim_violate(s, "checkpoint of %s is %s, not its last record %s", h->id,
                  l->checkpoint ? l->checkpoint : "(none)",
                  h->rec[h->n - 1].seq);
  }
  for (int w = 0; w < s->n_wk; w++) {
    if (!s->wk[w].alive) continue;
    size_t n = kn_cc_held(kn_drive_core(s->wk[w].dr));
    alive++;
    if (n < held_min) held_min = n;
    if (n > held_max) held_max = n;
  }
  if (!s->violated && alive > 1 && held_max - held_min > 1)
    sim_violate(s, "balance: live workers hold between %zu and %zu leases",
                held_min, held_max);
  if (!s->violated && s->sc && s->sc->check_end) s->sc->check_end(s);
}
