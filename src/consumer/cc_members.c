/* The coordination core's membership: heartbeats and the view of the
 * members they return (cc_int.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/cc_int.h"

/* The leader is the lowest live id of item 0: every worker there sees the
 * others beat, so it follows a death there as the members' view does. */
int kn_cc_mb_leader(const kn_cc_t *c) {
  if (c->mb.bucket != 0) return 0;
  const char *w = kn_mview_leader(&c->mb.view, 0);
  return w && strcmp(w, c->worker) == 0;
}

static int spread_ok(const kn_cc_t *c) {
  return c->cfg.member_items > 1 && c->mb.roster_fails < 3;
}

static int item_size(const kn_cc_t *c) {
  return c->cfg.member_item_size > 0 ? c->cfg.member_item_size : 16;
}

/* The item of worker w with nb items. */
int kn_cc_mb_home(const char *w, int nb) { return kn_members_home(w, nb); }

/* Where this worker beats next. */
static int want_bucket(const kn_cc_t *c) {
  if (c->mb.nb <= 1 || c->mb.home0 || kn_cc_mb_leader(c)) return 0;
  return kn_cc_mb_home(c->worker, c->mb.nb);
}

/* Items half full for `live` members: a group that grows fast (a fleet
 * started at once) fills them again only after it has doubled. */
static int half_full_nb(const kn_cc_t *c, size_t live) {
  int want = 1, size = item_size(c);
  while ((size_t)want * (size_t)size / 2 < live && want < c->cfg.member_items)
    want *= 2;
  return want;
}

/* The item count the leader wants for live members: powers of two,
 * changed when items would hold more than member_item_size members or
 * fewer than an eighth of that. */
static int want_nb(const kn_cc_t *c, size_t live) {
  int nb = c->mb.nb, size = item_size(c);
  if (!spread_ok(c)) return 1;
  if (live <= (size_t)nb * (size_t)size && live * 4 >= (size_t)nb * size / 2)
    return nb;
  return half_full_nb(c, live);
}

/* One item, never spread, holding more than `count` says an item should. */
static int one_item_over(const kn_cc_t *c, size_t count) {
  return spread_ok(c) && c->mb.nb <= 1 && c->mb.published_nb <= 1 &&
         !c->mb.was_spread && count > (size_t)item_size(c);
}

/* The leader of one item that holds more entries than an item should: it
 * reads every item before it spreads them, since workers that found item
 * 0 full beat in items of their own guess (heard, probe). */
static int crowded(const kn_cc_t *c) { return one_item_over(c, c->mb.view.n); }

/* No take round: beating in an item of its own guess other than item 0
 * (the members of item 0 may not know of it, so it holds nothing until a
 * digest says how many items there are, or the guess is over); or in a
 * group outgrowing one item, before the leader spreads it (its members
 * would take every lease before those beating elsewhere could), for two
 * lease durations at most. */
int kn_cc_mb_hold(const kn_cc_t *c, int64_t now) {
  if (c->mb.guess_until && want_bucket(c) != 0) return 1;
  return c->mb.crowd_since && now - c->mb.crowd_since < 2 * c->cfg.duration_ms;
}

/* ... by a leader whose item count is still a guess (heard, probe): as
 * if it spread one item. */
static int lead_nb(const kn_cc_t *c, size_t live) {
  if (!spread_ok(c) || !c->mb.guess_until) return want_nb(c, live);
  return live <= (size_t)item_size(c) ? 1 : half_full_nb(c, live);
}

int kn_cc_is_leader(const kn_cc_t *c) {
  return c->mb.on && c->mb.ok && kn_cc_mb_leader(c);
}

size_t kn_cc_members(const kn_cc_t *c) {
  return c->mb.on && c->mb.ok ? kn_mview_live(&c->mb.view) : 0;
}

/* Names forgotten by one heartbeat at most: with ids of up to 128
 * characters the expression stays far under 4 KB (placeholders). */
#define KN_CC_FORGET_MAX 32

/* The leader's digest into every item (and those it used to have): the
 * item count, the summed epoch, and a sequence that says it is alive. */
static void publish(kn_cc_t *c, cc_act_t *x, int spread) {
  /* A new leader, or one whose roster failed, sees its own item only: it
   * tells what it last knew (the item count, the summed epoch, the
   * leases held), so that the digest stays fresh, and changes nothing. */
  int full = c->mb.view_full;
  int nb = full ? lead_nb(c, kn_mview_live(&c->mb.view)) : c->mb.nb;
  int n = nb > c->mb.nb ? nb : c->mb.nb;
  if (c->mb.published_nb > n) n = c->mb.published_nb;
  /* ... and every item a member beats in (one that guessed the count
   * learns it there). */
  for (size_t i = 0; c->mb.has_roster && i < c->mb.roster.n; i++)
    if (c->mb.roster.v[i].bucket >= n &&
        c->mb.roster.v[i].bucket < c->cfg.member_items)
      n = c->mb.roster.v[i].bucket + 1;
  if (!spread && nb <= 1 && c->mb.published_nb <= 1) return;
  if (full) {
    /* The most and fewest leases held, how many hold the fewest, and how
     * many are held past one more than that: the workers holding the
     * fewest look at the lease table for balance, as many of them as
     * there are leases to move (cc_take.c). */
    int64_t most = 0, least = INT64_MAX, n_least = 0, over = 0;
    for (size_t i = 0; i < c->mb.view.n; i++) {
      const kn_mview_ent_t *e = &c->mb.view.v[i];
      if (e->dead) continue;
      if (e->leases > most) most = e->leases;
      if (e->leases < least) least = e->leases;
    }
    for (size_t i = 0; i < c->mb.view.n; i++) {
      const kn_mview_ent_t *e = &c->mb.view.v[i];
      if (e->dead) continue;
      n_least += e->leases == least;
      if (e->leases > least + 1) over += e->leases - least - 1;
    }
    c->mb.d_max = most;
    c->mb.d_min = least == INT64_MAX ? 0 : least;
    c->mb.d_nmin = n_least;
    c->mb.d_over = over;
    c->mb.d_epoch = c->mb.view.epoch;
  }
  snprintf(c->mb.digest_out, sizeof(c->mb.digest_out),
           "nb=%d epoch=%" PRId64 " seq=%" PRId64 " max=%" PRId64
           " min=%" PRId64 " nmin=%" PRId64 " over=%" PRId64,
           nb, c->mb.d_epoch, x->a.beat, c->mb.d_max, c->mb.d_min, c->mb.d_nmin,
           c->mb.d_over);
  x->a.digest = c->mb.digest_out;
  x->a.publish_n = n;
  c->mb.published_nb = nb;
  if (nb != c->mb.nb)
    kn_cc_log(c, KN_CC_LOG_INFO, "membership spread over %d items (leader)",
              nb);
  /* A group growing fast (a fleet started at once) outgrows its items
   * between two beats: the leader looks again soon while they change. */
  c->mb.regrow = nb != c->mb.nb;
  c->mb.nb = nb;
}

void kn_cc_mb_send(kn_cc_t *c, int64_t now) {
  if (c->mb.hb_busy) return;
  cc_op_t *o = kn_cc_op_new(c, KN_CC_HEARTBEAT, NULL, -1, now);
  cc_act_t *x = o ? kn_cc_call(c, o) : NULL;
  if (!x) {
    if (o) kn_cc_op_free(kn_cc_op_take(c, o->id));
    c->mb.hb_at = now + 100;
    return;
  }
  c->mb.hb_busy = o->id;
  if (spread_ok(c) && !c->mb.probed && !c->mb.ok) {
    /* First, the item count, read: a fleet started at once would write
     * its first beats into item 0 otherwise. */
    o->probe = x->a.probe = 1;
    o->roster = x->a.roster = 1;
    o->leave = x->a.leave = -1;
    return;
  }
  o->bump = c->mb.bump_pending;
  x->a.beat = ++c->mb.beat;
  x->a.leases = (int64_t)kn_cc_held(c);
  x->a.bump = o->bump;
  int to = want_bucket(c);
  o->bucket = to;
  x->a.bucket = to;
  /* The item left: none before a first beat unless the probe found a
   * copy of this worker (a run before this one: the others would judge
   * it dead there); a remove of an entry never written costs a write of
   * that item all the same. */
  x->a.leave = !c->mb.beat_sent     ? -1
               : c->mb.bucket != to ? c->mb.bucket
                                    : c->mb.leave;
  if (x->a.leave == to) x->a.leave = -1;
  c->mb.beat_sent = 1;
  /* The last beat of a worker closing, spread over items: written (its
   * bump counts), then its entry removed -- unless a lease may still be
   * in its name (cc_writes_t.unsure): the others take those once they
   * count it dead, and a member that left is not dead. */
  if (c->mb.close_beat && c->mb.nb > 1 && !c->wr.unsure) x->a.leave = to;
  o->leave = x->a.leave;
  int spread = c->mb.nb > 1 || c->mb.published_nb > 1 || c->mb.was_spread;
  int lead = kn_cc_mb_leader(c);
  int crowd = lead && crowded(c);
  x->a.roster = o->roster = lead && (spread || crowd);
  /* Crowded, the leader spreads the members once it has seen them all. */
  if (lead && (spread_ok(c) || c->mb.published_nb > 1) &&
      (!crowd || c->mb.view_roster) && !(c->mb.guess_until && !c->mb.view_full))
    publish(c, x, spread);
  /* The leader forgets members long dead, and entries that are no
   * members and stay unchanged: the item stays small.  A few at a time:
   * each is a REMOVE in the heartbeat's expression, which DynamoDB caps
   * at 4 KB (after a redeploy hundreds may be due at once). */
  if (!lead) return;
  if (!(x->children = calloc(KN_CC_FORGET_MAX, sizeof(char *)))) return;
  free(c->mb.forget_bucket);
  c->mb.forget_bucket =
      x->a.digest ? calloc(KN_CC_FORGET_MAX, sizeof(int)) : NULL;
  if (x->a.digest && !c->mb.forget_bucket) return;
  /* Copies a worker left behind in an item it moved out of (its leave
   * failed), then members long dead. */
  for (size_t i = 0; c->mb.has_roster && i < c->mb.roster.n &&
                     x->n_children < KN_CC_FORGET_MAX;
       i++) {
    const kn_member_t *r = &c->mb.roster.v[i];
    const kn_mview_ent_t *e = kn_mview_get(&c->mb.view, r->worker);
    if (!c->mb.forget_bucket || !e || e->bucket == r->bucket) continue;
    if (!(x->children[x->n_children] = strdup(r->worker))) break;
    c->mb.forget_bucket[x->n_children++] = r->bucket;
  }
  const kn_mview_ent_t *lists[2] = {c->mb.view.v, c->mb.view.bad};
  size_t ns[2] = {c->mb.view.n, c->mb.view.n_bad};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < ns[k] && x->n_children < KN_CC_FORGET_MAX; i++)
      if (lists[k][i].dead && !lists[k][i].remote &&
          now - lists[k][i].changed_ms >= 6 * c->cfg.duration_ms &&
          (x->children[x->n_children] = strdup(lists[k][i].worker))) {
        if (c->mb.forget_bucket)
          c->mb.forget_bucket[x->n_children] = lists[k][i].bucket;
        x->n_children++;
      }
  x->a.forget = x->children;
  x->a.n_forget = x->n_children;
  x->a.forget_bucket = c->mb.forget_bucket;
}

/* The interval to the next heartbeat: a renewal interval, or a quarter of
 * it while a member has not beaten for longer than usual, so that its
 * death is seen soon after a lease duration. */
static int64_t next_beat_ms(const kn_cc_t *c, int64_t now) {
  int64_t late = c->cfg.renew_ms + c->cfg.renew_ms / 2;
  for (size_t i = 0; i < c->mb.view.n; i++) {
    const kn_mview_ent_t *e = &c->mb.view.v[i];
    if (!e->dead && !e->remote && now - e->changed_ms > late &&
        !cc_is_me(c, e->worker))
      return c->cfg.renew_ms / 4 > 100 ? c->cfg.renew_ms / 4 : 100;
  }
  return c->cfg.renew_ms;
}

/* Readers judge the heartbeat deadline themselves (FENCE), so that a
 * driver busy elsewhere cannot keep them going past it. */
void kn_cc_mb_fence(kn_cc_t *c) {
  int64_t t = cc_beat_fenced(c) ? c->mb.until : INT64_MAX;
  if (t == c->mb.fence_told) return;
  cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_FENCE);
  if (!x) return;
  x->a.tenure = -1;
  x->a.until_ms = t;
  c->mb.fence_told = t;
}

void kn_cc_mb_watch_asker(kn_cc_t *c, const char *worker, int64_t now) {
  struct cc_asker *a = realloc(c->mb.askers, (c->mb.n_askers + 1) * sizeof(*a));
  if (!a) return; /* the leader's scan finds the lease in time */
  c->mb.askers = a;
  if (!(a[c->mb.n_askers].worker = strdup(worker))) return;
  /* Counted dead within a lease duration of its last beat, which is
   * older than now: two durations cover it. */
  a[c->mb.n_askers++].until = now + 2 * c->cfg.duration_ms;
}

void kn_cc_mb_relift(kn_cc_t *c, int64_t now) {
  int failing = cc_beat_failing(c, now);
  /* Lifted only before the deadline (the others count this worker dead a
   * lease duration after its last beat, and by then every lease says to
   * judge it by its renewals); it stays lifted while heartbeats fail. */
  int lift = failing && (c->mb.lifted || now < c->mb.until);
  /* (A lease whose reader waits for its mark is not read.) */
  for (size_t i = 0; lift && i < c->wr.n_ls; i++)
    if (c->wr.ls[i]->held && !c->wr.ls[i]->marked && !c->wr.ls[i]->await)
      lift = 0;
  if (lift == c->mb.lifted) return;
  c->mb.lifted = lift;
  kn_cc_log(c, lift ? KN_CC_LOG_WARN : KN_CC_LOG_INFO,
            lift ? "heartbeats failing: every lease held says so; reading "
                   "on by the leases' deadlines"
                 : "heartbeat's deadline back in force");
  kn_cc_mb_fence(c);
  /* The heartbeat's deadline bounds every reader again: those waiting
   * for a mark may start. */
  for (size_t i = 0; !lift && i < c->wr.n_ls; i++)
    if (c->wr.ls[i]->await) kn_cc_tk_start_awaited(c, c->wr.ls[i]);
}

/* Askers now dead (or forgotten): the others look at their leases. */
static void check_askers(kn_cc_t *c, int64_t now) {
  size_t k = 0;
  for (size_t i = 0; i < c->mb.n_askers; i++) {
    struct cc_asker *a = &c->mb.askers[i];
    const kn_mview_ent_t *e = kn_mview_get(&c->mb.view, a->worker);
    /* Spread over items, an asker of another item is followed by its own
     * item's members, who take its leases when it dies. */
    int dead = c->mb.nb > 1 ? e && !e->remote && e->dead : !e || e->dead;
    if (dead) {
      kn_cc_log(c, KN_CC_LOG_INFO,
                "%s, handed a lease, stopped beating: telling the others",
                a->worker);
      cc_bump(c, now);
    }
    if (dead || now >= a->until)
      free(a->worker);
    else
      c->mb.askers[k++] = *a;
  }
  c->mb.n_askers = k;
}

/* The digest of this worker's item: the item count and summed epoch the
 * leader last wrote, and whether it still writes. */
static void digest_read(kn_cc_t *c, const char *d, int64_t now) {
  int nb = 0;
  long long ep = 0, seq = 0, most = 0, least = 0, n_least = 0, over = 0;
  if (!spread_ok(c)) return;
  if (!d ||
      sscanf(d,
             "nb=%d epoch=%lld seq=%lld max=%lld min=%lld nmin=%lld over=%lld",
             &nb, &ep, &seq, &most, &least, &n_least, &over) != 7 ||
      nb < 1 || nb > c->cfg.member_items) {
    /* An item no leader wrote: back to item 0, once a guess is over. */
    if (c->mb.nb > 1 && !d && now >= c->mb.guess_until &&
        !(kn_cc_mb_leader(c) && c->mb.published_nb > 1)) {
      if (c->mb.guess_until)
        kn_cc_log(c, KN_CC_LOG_INFO,
                  "no leader spread the membership: beating in item 0");
      c->mb.nb = 1;
      c->mb.guess_until = 0;
    }
    return;
  }
  c->mb.guess_until = 0;
  if (seq != c->mb.d_seq || !c->mb.d_changed_ms) {
    c->mb.d_seq = seq;
    c->mb.d_changed_ms = now;
    c->mb.home0 = 0;
  }
  /* The leader's own word is newer than its item's (the digest in an
   * answer is the one before) -- once it has written one: a worker that
   * starts as the leader learns the item count from its predecessor's. */
  if (kn_cc_mb_leader(c) && c->mb.published_nb > 0) return;
  if (nb != c->mb.nb)
    kn_cc_log(c, KN_CC_LOG_INFO, "membership spread over %d items", nb);
  c->mb.nb = nb;
  c->mb.d_epoch = ep;
  c->mb.d_max = most;
  c->mb.d_min = least;
  c->mb.d_nmin = n_least;
  c->mb.d_over = over;
  /* No leader has written for six lease durations (item 0 is empty, or
   * its members all died): the lowest live id of each item beats in item
   * 0, where one of them leads; the others stay where they are. */
  const char *low = kn_mview_leader(&c->mb.view, c->mb.bucket);
  if (nb > 1 && !kn_cc_mb_leader(c) && low && cc_is_me(c, low) &&
      !c->mb.home0 && now - c->mb.d_changed_ms > 6 * c->cfg.duration_ms) {
    kn_cc_log(c, KN_CC_LOG_WARN,
              "no leader has written the membership digest for %lld s: "
              "beating in item 0",
              (long long)((now - c->mb.d_changed_ms) / 1000));
    c->mb.home0 = 1;
  }
}

/* Whether copy m's beat moved since the roster before (or is new). */
static int copy_moved(const kn_cc_t *c, const kn_member_t *m) {
  const kn_members_t *p = &c->mb.prev_roster;
  for (size_t i = 0; i < p->n; i++)
    if (p->v[i].bucket == m->bucket && strcmp(p->v[i].worker, m->worker) == 0)
      return p->v[i].beat != m->beat;
  return 1;
}

/* r with each worker once (a worker that moved or restarted may show in
 * two items until its leave lands or the leader forgets the copy).  0 or
 * -1 (out of memory). */
static int one_each(const kn_cc_t *c, const kn_members_t *r,
                    kn_members_t *out) {
  memset(out, 0, sizeof(*out));
  out->epoch = r->epoch;
  if (!r->n) return 0;
  if (!(out->v = calloc(r->n, sizeof(*out->v)))) return -1;
  for (size_t i = 0; i < r->n; i++) {
    const kn_member_t *m = &r->v[i];
    const kn_member_t *prev = out->n ? &out->v[out->n - 1] : NULL;
    if (prev && strcmp(prev->worker, m->worker) == 0) {
      /* Two copies (a former run's, or one it moved out of, which the
       * leader forgets): the one that beat since the last roster; else
       * the one this view follows; else the one in its own item. */
      int mc = copy_moved(c, m), pc = copy_moved(c, prev);
      const kn_mview_ent_t *e = kn_mview_get(&c->mb.view, m->worker);
      int item = cc_is_me(c, m->worker) ? c->mb.bucket
                                        : kn_cc_mb_home(m->worker, c->mb.nb);
      int keep_prev = mc != pc                     ? pc
                      : e && e->beat == prev->beat ? 1
                      : e && e->beat == m->beat    ? 0
                                                   : m->bucket != item;
      if (keep_prev) continue;
      out->n--;
      free(out->v[out->n].worker);
    }
    out->v[out->n] = *m;
    if (!(out->v[out->n].worker = strdup(m->worker))) {
      kn_members_clear(out);
      return -1;
    }
    out->n++;
  }
  return 0;
}

void kn_cc_mb_roster(kn_cc_t *c, uint64_t id, const kn_members_t *r,
                     int64_t now) {
  (void)now;
  kn_members_clear(&c->mb.prev_roster);
  c->mb.prev_roster = c->mb.roster;
  memset(&c->mb.roster, 0, sizeof(c->mb.roster));
  c->mb.has_roster = kn_members_copy(&c->mb.roster, r) == 0;
  c->mb.roster_id = id;
}

/* A number drawn from this worker's id and the digest's sequence: the
 * same until the leader writes again. */
uint64_t kn_cc_mb_draw(const kn_cc_t *c) {
  uint64_t h = 1469598103934665603ULL ^ (uint64_t)c->mb.d_seq;
  for (const char *p = c->worker; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  return h ^ (h >> 29);
}

void kn_cc_mb_roster_refused(kn_cc_t *c, uint64_t id) {
  c->mb.roster_refused = id;
}

int kn_cc_mb_roster_read(const kn_cc_t *c, uint64_t id) {
  return c->mb.has_roster && c->mb.roster_id == id;
}

void kn_cc_mb_roster_listed(kn_cc_t *c, uint64_t id, int64_t now) {
  if (!c->mb.has_roster || c->mb.roster_id != id) return;
  kn_members_t one;
  if (one_each(c, &c->mb.roster, &one)) return;
  kn_mview_set_remote(&c->mb.view, &one, now);
  /* A copy seen dead here while the worker beats in another item (a
   * former run's, or one it moved out of): its own item judges it. */
  for (size_t i = 0; i < c->mb.view.n; i++) {
    kn_mview_ent_t *e = &c->mb.view.v[i];
    if (!e->dead || e->remote) continue;
    for (size_t k = 0; k < c->mb.roster.n; k++) {
      const kn_member_t *r = &c->mb.roster.v[k];
      if (r->bucket != e->bucket && strcmp(r->worker, e->worker) == 0) {
        e->remote = 1;
        e->dead = 0;
        e->bucket = r->bucket;
        e->beat = r->beat;
        e->leases = r->leases;
        break;
      }
    }
  }
  kn_members_clear(&one);
}

/* After the probe: more members than an item holds and no digest (a
 * fleet starting at once, item 0 full before its leader spreads it).
 * This worker beats in its item of a count it guesses from the roster,
 * not in item 0, until a digest tells it the count -- or, for two lease
 * durations without one, back in item 0. */
static void guess(kn_cc_t *c, int64_t now, int me) {
  const kn_members_t *r = &c->mb.roster;
  size_t n = 0;
  if (c->mb.d_changed_ms) return; /* a digest was read */
  for (size_t i = 0; i < r->n; i++)
    n += !i || strcmp(r->v[i - 1].worker, r->v[i].worker) != 0;
  /* A copy of its own (me: a run before this one) is where the others
   * judge this worker: it beats there, in item 0. */
  if (me || n <= (size_t)item_size(c)) return;
  n++;
  c->mb.nb = half_full_nb(c, n);
  c->mb.guess_until = now + 2 * c->cfg.duration_ms;
  kn_cc_log(c, KN_CC_LOG_INFO,
            "%zu members in one membership item: beating in item %d of %d "
            "until the leader spreads them",
            n, kn_cc_mb_home(c->worker, c->mb.nb), c->mb.nb);
}

static int heard(kn_cc_t *c, const cc_op_t *o, const kn_error_t *err,
                 const kn_members_t *m, int64_t sent, int64_t now) {
  int64_t bumped = o->bump;
  c->mb.hb_busy = 0;
  int roster = c->mb.has_roster && c->mb.roster_id == o->id;
  if (o->probe) {
    /* What the roster says of the item count; the first beat goes to
     * this worker's item at once (a store that cannot tell: item 0). */
    c->mb.probed = 1;
    c->mb.beat_sent = 1;
    if (!err && roster) {
      /* A copy of this worker (a run before): its first beat leaves it. */
      const kn_members_t *r = &c->mb.roster;
      int bad = 0;
      c->mb.beat_sent = 0;
      for (size_t i = 0; i < r->n && !c->mb.beat_sent; i++)
        if (cc_is_me(c, r->v[i].worker)) {
          c->mb.bucket = r->v[i].bucket;
          c->mb.beat_sent = 1;
        }
      for (size_t i = 0; i < r->n_bad; i++)
        bad |= cc_is_me(c, r->bad[i].worker);
      digest_read(c, c->mb.roster.digest, now);
      guess(c, now, c->mb.beat_sent || bad);
    }
    c->mb.hb_at = now;
    return 0;
  }
  /* The leader that may not read every item (no right to Scan: refused
   * for good, three times in a row) gathers the members back into one
   * item, which needs no Scan; a roster that failed for a while (a
   * time-out, throttling) only waits for the next beat. */
  if (!err && o->roster && !roster && c->mb.roster_refused == o->id &&
      ++c->mb.roster_fails == 3)
    kn_cc_log(c, KN_CC_LOG_WARN,
              "membership items cannot be read: back to one item");
  else if (!err && o->roster && roster)
    c->mb.roster_fails = 0;
  if (err && kn_error_code(err) == KN_ERR__BAD_MSG)
    c->mb.bad_answers++;
  else if (!err)
    c->mb.bad_answers = 0;
  /* Not to be had (no table, no access, an item refused or unreadable
   * again and again): the lease table alone decides, as with the KCL. */
  if (err && (kn_error_code(err) == KN_ERR__UNSUPPORTED ||
              !kn_error_is_retriable(err) || c->mb.bad_answers >= 3)) {
    int mid_run = c->mb.ok;
    kn_cc_log(c, mid_run ? KN_CC_LOG_WARN : KN_CC_LOG_INFO,
              "heartbeat: %s: listing the lease table every take round "
              "instead%s",
              kn_error_string(err),
              mid_run ? " (once the others have forgotten this worker; "
                        "until then it reads nothing)"
                      : "");
    if (mid_run) c->mb.stale_until = c->mb.ok_sent_ms + 7 * c->cfg.duration_ms;
    c->mb.on = 0;
    c->mb.ok = 0;
    c->tk.idle = 0;
    return 0;
  }
  if (err) {
    kn_cc_log(c, KN_CC_LOG_WARN, "heartbeat: %s", kn_error_string(err));
    int64_t again = c->cfg.renew_ms / 3 < 1000 ? c->cfg.renew_ms / 3 : 1000;
    c->mb.hb_at = now + again;
    return 0;
  }
  c->mb.bucket = o->bucket;
  c->mb.leave = -1;
  digest_read(c, m->digest, now);
  uint64_t deaths = c->mb.view.deaths;
  /* The leader observes every item; the others their own.  A leader
   * whose roster was not read this time keeps the view it has (its own
   * item alone would drop the others), not claiming it newer. */
  int keep = o->roster && !roster && c->mb.view_full &&
             (c->mb.nb > 1 || c->mb.was_spread);
  /* Spread once, until a roster shows everyone back in item 0: one item's
   * answer is not everyone. */
  if (c->mb.nb > 1) c->mb.was_spread = 1;
  if (roster) {
    int out = 0;
    for (size_t i = 0; i < c->mb.roster.n && !out; i++)
      out = c->mb.roster.v[i].bucket != 0;
    c->mb.was_spread = c->mb.nb > 1 || out;
  }
  if (o->roster && !roster)
    kn_cc_log(c, KN_CC_LOG_INFO, "membership items not read this time");
  kn_members_t one = {0};
  const kn_members_t *in = m;
  if (roster && kn_cc_mb_leader(c) && !one_each(c, &c->mb.roster, &one)) {
    /* Every member is in the roster: nothing remote is left. */
    kn_members_t none = {0};
    kn_mview_set_remote(&c->mb.view, &none, now);
    in = &one;
  }
  int updated = 1;
  if (!keep) {
    /* The view holds every member: one item, or the leader's roster. */
    c->mb.view_full = in == &one || (c->mb.nb <= 1 && !c->mb.was_spread);
    c->mb.view_roster = in == &one;
    updated = kn_mview_update(&c->mb.view, in, now, c->cfg.duration_ms) == 0;
  }
  /* Spread over items, a bump reaches the bumper's item and the leader
   * (the sum of every item's epoch): a whole fleet listing the table on
   * each would cost more than the membership saves.  Free leases nobody
   * near takes go to the leader (cc_take.c, heirs). */
  if (in == &one) c->mb.view.epoch = c->mb.roster.epoch;
  kn_members_clear(&one);
  if (updated) {
    c->mb.ok = 1;
    if (!keep && sent > c->mb.view_sent_ms) c->mb.view_sent_ms = sent;
    if (sent > c->mb.ok_sent_ms) c->mb.ok_sent_ms = sent;
    if (sent + c->grace_ms > c->mb.until) c->mb.until = sent + c->grace_ms;
    c->mb.bump_pending -= bumped;
    if (c->mb.view.deaths != deaths)
      kn_cc_log(c, KN_CC_LOG_INFO,
                "a worker stopped beating: looking for its leases");
    check_askers(c, now);
  }
  /* Moving to its own item, the next beat goes there now. */
  c->mb.hb_at = c->mb.bump_pending > 0 || want_bucket(c) != c->mb.bucket
                    ? now
                    : sent + next_beat_ms(c, now);
  /* A group outgrowing one item, not spread yet (kn_cc_mb_hold). */
  if (!one_item_over(c, kn_mview_live(&c->mb.view)))
    c->mb.crowd_since = 0;
  else if (!c->mb.crowd_since)
    c->mb.crowd_since = now;
  /* ... and so while the group outgrows one item: it reads every item,
   * then spreads them. */
  int lead = kn_cc_mb_leader(c);
  int crowd = lead && crowded(c) && !c->mb.view_roster;
  int outgrown = lead && spread_ok(c) && c->mb.view_roster &&
                 (lead_nb(c, kn_mview_live(&c->mb.view)) != c->mb.nb ||
                  (c->mb.nb > 1 && c->mb.published_nb != c->mb.nb));
  if ((c->mb.regrow || crowd || outgrown) &&
      c->mb.hb_at > now + c->cfg.renew_ms / 4)
    c->mb.hb_at = now + c->cfg.renew_ms / 4;
  return 1;
}

int kn_cc_mb_done(kn_cc_t *c, const cc_op_t *o, const kn_error_t *err,
                  const kn_members_t *m, int64_t sent, int64_t now) {
  int r = heard(c, o, err, m, sent, now);
  if (c->closing || c->fatal) c->mb.hb_at = sent + c->cfg.renew_ms;
  return r;
}

/* Whether a take round is worth a listing of the lease table. */
uint64_t kn_cc_mb_counts_sig(const kn_cc_t *c) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < c->mb.view.n; i++) {
    const kn_mview_ent_t *e = &c->mb.view.v[i];
    if (e->dead) continue;
    for (const char *p = e->worker; *p; p++)
      h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ (uint64_t)e->leases) * 1099511628211ULL;
  }
  return h;
}

/* Heartbeats failing: what it took now it might soon have to drop. */
int kn_cc_mb_fresh(const kn_cc_t *c, int64_t now) {
  /* Spread over items, nothing is taken before a beat in this worker's
   * own item: the others there may hold a copy of its former run, dead
   * in their eyes, until its beat there moves. */
  if (c->mb.bucket != want_bucket(c)) return 0;
  return now - c->mb.ok_sent_ms <= c->cfg.renew_ms + c->cfg.renew_ms / 2;
}

/* When the next heartbeat is due.  While closing, none is asked for: the
 * closing heartbeat goes with kn_cc_maybe_closed, and one due meanwhile
 * goes with the next tick that something else asked for. */
int64_t kn_cc_mb_next_ms(const kn_cc_t *c) {
  if (c->mb.on && !c->mb.hb_busy && !c->closing && !c->fatal)
    return c->mb.hb_at;
  return INT64_MAX;
}

void kn_cc_mb_tick(kn_cc_t *c, int64_t now) {
  if (c->mb.on && !c->mb.hb_busy && !c->closed_sent && now >= c->mb.hb_at)
    kn_cc_mb_send(c, now);
}

/* The next heartbeat goes now. */
void kn_cc_mb_beat_now(kn_cc_t *c, int64_t now) {
  if (c->mb.hb_at > now) c->mb.hb_at = now;
}

void kn_cc_mb_free(kn_cc_t *c) {
  kn_mview_free(&c->mb.view);
  kn_members_clear(&c->mb.roster);
  kn_members_clear(&c->mb.prev_roster);
  free(c->mb.forget_bucket);
  for (size_t i = 0; i < c->mb.n_askers; i++) free(c->mb.askers[i].worker);
  free(c->mb.askers);
}
