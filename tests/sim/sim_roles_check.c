/* The invariants of kn_sim --roles: every record committed to the sink
 * once, in order within its shard, a child's records only after all its
 * parents' records, no shard read by two live readers, and at the end of
 * the quiet period every open shard read to its last record. */
#include <string.h>

#include "sim_roles.h"

/* Non-zero if shard c is a child of shard p. */
static int is_child(const sim_t *s, int p, int c) {
  return s->sh[c].parent == p || s->sh[c].adjacent == p;
}

void rs_check_commit(rsim_t *r, int i, int si, size_t k, uint64_t sub) {
  sim_t *s = &r->s;
  sim_shard_t *h = &s->sh[si];
  const char *who = r->rd[i].id;
  /* Commits of a shard go in order: a user record at or before the last
   * one is a repeat, one past its successor skips something wanted. */
  int last = r->last_idx[si];
  uint64_t lsub = r->last_sub[si];
  if ((long)k < last || ((long)k == last && sub <= lsub)) {
    sim_violate(s, "%s committed record %zu/%llu of %s twice", who, k,
                (unsigned long long)sub, h->id);
    return;
  }
  int skipped = 0;
  if ((long)k == last) {
    skipped = sub != lsub + 1;
  } else {
    if (last >= 0 && h->rec[last].required &&
        lsub + 1 < (uint64_t)h->rec[last].users)
      skipped = 1;
    for (size_t j = (size_t)(last + 1); j < k; j++)
      if (h->rec[j].required) skipped = 1;
    if (sub && h->rec[k].required) skipped = 1;
  }
  if (skipped) {
    sim_violate(s, "%s committed record %zu/%llu of %s after record %d/%llu",
                who, k, (unsigned long long)sub, h->id, last,
                (unsigned long long)lsub);
    return;
  }
  r->last_idx[si] = (int)k;
  r->last_sub[si] = sub;
  r->committed++;
  if (sub + 1 == (uint64_t)h->rec[k].users) h->rec[k].deliveries = 1;
  /* Parents first: every record of each parent is in, and no child has
   * any record in yet. */
  int ps[2] = {h->parent, h->adjacent};
  for (int p = 0; p < 2; p++) {
    if (ps[p] < 0) continue;
    const sim_shard_t *ph = &s->sh[ps[p]];
    for (size_t j = 0; j < ph->n; j++)
      if (ph->rec[j].required && !ph->rec[j].deliveries) {
        sim_violate(s,
                    "%s committed record %zu of %s before record %zu of its "
                    "parent %s",
                    who, k, h->id, j, ph->id);
        return;
      }
  }
  for (int c = 0; c < s->n_sh; c++)
    if (is_child(s, si, c) && r->last_idx[c] >= 0) {
      sim_violate(s,
                  "%s committed record %zu of %s after records of its child %s",
                  who, k, h->id, s->sh[c].id);
      return;
    }
}

void rs_check_step(rsim_t *r) {
  int holder[SIM_MAX_SHARDS];
  for (int k = 0; k < r->s.n_sh; k++) holder[k] = -1;
  for (int i = 0; i < r->n_rd; i++) {
    rs_reader_t *d = &r->rd[i];
    if (!d->alive) continue;
    for (size_t b = 0; b < d->book.n; b++) {
      if (!kn_rbook_active(&d->book.v[b])) continue;
      int si = sim_shard_find(&r->s, d->book.v[b].id);
      if (si < 0) {
        sim_violate(&r->s, "%s reads %s, which the stream never had", d->id,
                    d->book.v[b].id);
        return;
      }
      if (holder[si] >= 0) {
        sim_violate(&r->s, "two readers: %s and %s both read %s",
                    r->rd[holder[si]].id, d->id, r->s.sh[si].id);
        return;
      }
      holder[si] = i;
    }
  }
}

void rs_check_end(rsim_t *r) {
  sim_t *s = &r->s;
  for (int k = 0; k < s->n_sh && !s->violated; k++) {
    sim_shard_t *h = &s->sh[k];
    for (size_t j = 0; j < h->n; j++)
      if (h->rec[j].required && !h->rec[j].deliveries) {
        char who[KN_ENUM_ID_MAX] = "";
        kn_enum_shard_state_t st =
            r->en ? kn_enumerator_shard_state(r->en, h->id, who, sizeof(who))
                  : KN_ENUM_UNKNOWN;
        sim_violate(s,
                    "lost: record %zu of %s (%zu records, %s) never "
                    "committed; the enumerator has it %d (%s)",
                    j, h->id, h->n, h->closed ? "closed" : "open", (int)st,
                    who);
        break;
      }
    if (s->violated || h->closed) continue;
    /* An open shard is read by a live reader that the enumerator gave it
     * to. */
    char who[KN_ENUM_ID_MAX] = "";
    int ri = -1;
    if (r->en && kn_enumerator_shard_state(r->en, h->id, who, sizeof(who)) ==
                     KN_ENUM_ASSIGNED)
      ri = rs_reader_index(r, who);
    kn_rb_shard_t *b = ri >= 0 && r->rd[ri].alive
                           ? kn_rbook_find(&r->rd[ri].book, h->id)
                           : NULL;
    if (!b || !kn_rbook_active(b))
      sim_violate(s,
                  "open shard %s is not read (the enumerator gives it to "
                  "\"%s\")",
                  h->id, who);
  }
}
