/* The simulated lease table: one array of leases with exactly the
 * conditional semantics of lease/store.h (take, renew, release and
 * checkpoint add one to the counter and are conditional on counter and
 * owner; create fails if the key exists; remove is conditional on the
 * counter; set_children is unconditional but needs the lease).
 *
 * Built with -DKN_SIM_MUTANT=1 the checkpoint ignores its condition, and
 * with 2 a take ignores the counter: the invariants must catch both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "util/str.h"

#ifndef KN_SIM_MUTANT
#define KN_SIM_MUTANT 0
#endif

#define CCF KN_ERR_CONDITIONAL_CHECK_FAILED

int sim_store_find(const sim_t *s, const char *key) {
  for (size_t i = 0; i < s->n_table; i++)
    if (strcmp(s->table[i].key, key) == 0) return (int)i;
  return -1;
}

static int same_owner(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

/* The lease if the counter matches and owner is its actual owner (the
 * checkpoint owner during a hand-off). */
static kn_lease_t *find_actual(sim_t *s, const char *key, int64_t counter,
                               const char *owner) {
  int i = sim_store_find(s, key);
  if (i < 0 || s->table[i].counter != counter) return NULL;
  const char *a = kn_lease_actual_owner(&s->table[i]);
  return a && owner && strcmp(a, owner) == 0 ? &s->table[i] : NULL;
}

/* The lease if counter (and owner, when check_owner) match. */
static kn_lease_t *find_if(sim_t *s, const char *key, int64_t counter,
                           int check_owner, const char *owner) {
  int i = sim_store_find(s, key);
  if (i < 0) return NULL;
  kn_lease_t *l = &s->table[i];
  if (l->counter != counter) return NULL;
  if (check_owner && !same_owner(l->owner, owner)) return NULL;
  return l;
}

int sim_store_put(sim_t *s, const kn_lease_t *l) {
  if (sim_store_find(s, l->key) >= 0) return -1;
  if (s->n_table == s->cap_table) {
    s->cap_table = s->cap_table ? s->cap_table * 2 : 16;
    s->table = realloc(s->table, s->cap_table * sizeof(*s->table));
    if (!s->table) abort();
  }
  if (kn_lease_copy(&s->table[s->n_table], l)) abort();
  s->n_table++;
  return 0;
}

static void set_str(char **dst, const char *src) {
  free(*dst);
  *dst = kn_strdup0(src);
}

/* The membership: a row per worker and item, sorted by id then item;
 * each item has its epoch and digest (store.h heartbeat, publish). */
static int row_cmp(const sim_member_t *r, const char *w, int b) {
  int c = strcmp(r->worker, w);
  return c ? c : (r->bucket > b) - (r->bucket < b);
}

static void row_remove(sim_t *s, const char *w, int b) {
  for (int i = 0; i < s->n_mb; i++)
    if (row_cmp(&s->mb[i], w, b) == 0) {
      memmove(&s->mb[i], &s->mb[i + 1],
              (size_t)(s->n_mb - i - 1) * sizeof(s->mb[0]));
      s->n_mb--;
      return;
    }
}

/* Forgets c's names that go to item b (all in c's own item without
 * forget_bucket), never c's worker. */
static void forget_names(sim_t *s, const sim_call_t *c, int b) {
  for (size_t f = 0; f < c->n_children; f++) {
    int fb = c->forget_bucket ? c->forget_bucket[f] : c->bucket;
    if (fb == b && strcmp(c->children[f], c->owner) != 0)
      row_remove(s, c->children[f], b);
  }
}

static void members_of(const sim_t *s, int b, kn_members_t *out) {
  kn_members_clear(out);
  out->v = calloc((size_t)s->n_mb + 1, sizeof(*out->v));
  if (!out->v) abort();
  for (int k = 0; k < s->n_mb; k++) {
    if (b >= 0 && s->mb[k].bucket != b) continue;
    kn_member_t *m = &out->v[out->n++];
    m->worker = kn_strdup0(s->mb[k].worker);
    m->beat = s->mb[k].beat;
    m->leases = s->mb[k].leases;
    m->bucket = s->mb[k].bucket;
  }
  int from = b >= 0 ? b : 0;
  for (int i = b >= 0 ? b : 0; i < (b >= 0 ? b + 1 : SIM_ITEMS); i++)
    out->epoch += s->item_epoch[i];
  if (s->item_digest[from][0]) out->digest = kn_strdup0(s->item_digest[from]);
}

/* Every row of every item (store.h members). */
void sim_store_roster(const sim_t *s, kn_members_t *out) {
  members_of(s, -1, out);
}

static void heartbeat(sim_t *s, sim_call_t *c) {
  int b = c->bucket;
  if (c->probe) { /* read, not written */
    sim_store_roster(s, &c->roster_m);
    c->has_roster = 1;
    return;
  }
  if (!(c->digest && c->forget_bucket)) forget_names(s, c, b);
  int i = 0;
  while (i < s->n_mb && row_cmp(&s->mb[i], c->owner, b) < 0) i++;
  if (i == s->n_mb || row_cmp(&s->mb[i], c->owner, b) != 0) {
    if (s->n_mb == 2 * SIM_MAX_WORKERS) abort();
    memmove(&s->mb[i + 1], &s->mb[i], (size_t)(s->n_mb - i) * sizeof(s->mb[0]));
    s->n_mb++;
    memset(&s->mb[i], 0, sizeof(s->mb[i]));
    snprintf(s->mb[i].worker, sizeof(s->mb[i].worker), "%s", c->owner);
    s->mb[i].bucket = b;
  }
  s->mb[i].beat = c->beat;
  s->mb[i].leases = c->leases;
  s->item_epoch[b] += c->bump;
  s->epoch = s->item_epoch[0];
  members_of(s, b, &c->members);
  if (c->leave >= 0 && c->leave < SIM_ITEMS) row_remove(s, c->owner, c->leave);
  for (int k = 0; c->digest && k < c->publish_n && k < SIM_ITEMS; k++) {
    snprintf(s->item_digest[k], sizeof(s->item_digest[k]), "%s", c->digest);
    forget_names(s, c, k);
  }
  if (c->roster) {
    sim_store_roster(s, &c->roster_m);
    c->has_roster = 1;
  }
}

/* Non-zero: arguments the SQLite and DynamoDB stores refuse with
 * KN_ERR__INVALID_ARG before they look at any condition (a lease without
 * a key, a change without an owner).  A heartbeat's worker id must also
 * fit in sim_member_t. */
static int bad_args(const sim_t *s, const sim_call_t *c) {
  switch (c->op) {
    case KN_CC_CREATE:
      return !c->lease.key || !*c->lease.key;
    case KN_CC_TAKE:
    case KN_CC_RENEW:
    case KN_CC_RELEASE:
    case KN_CC_CHECKPOINT:
    case KN_CC_HANDOFF_DONE:
      return !c->owner;
    case KN_CC_HANDOFF:
      return !c->owner || !c->old_owner;
    case KN_CC_HEARTBEAT:
      return !c->owner || !*c->owner ||
             strlen(c->owner) >= sizeof(s->mb[0].worker) || c->bucket < 0 ||
             c->bucket >= SIM_ITEMS;
    default:
      return 0;
  }
}

kn_err_t sim_store_apply(sim_t *s, sim_call_t *c) {
  kn_lease_t *l = NULL;
  int i;
  if (bad_args(s, c)) return KN_ERR__INVALID_ARG;
  switch (c->op) {
    case KN_CC_LIST_LEASES:
      c->n_list = s->n_table;
      c->list = s->n_table ? calloc(s->n_table, sizeof(*c->list)) : NULL;
      for (size_t k = 0; k < s->n_table; k++)
        if (kn_lease_copy(&c->list[k], &s->table[k])) abort();
      if (c->roster) {
        sim_store_roster(s, &c->roster_m);
        c->has_roster = 1;
      }
      return 0;
    case KN_CC_CREATE:
      return sim_store_put(s, &c->lease) ? CCF : 0;
    case KN_CC_TAKE:
      l = find_if(s, c->key, c->counter, 1, c->old_owner);
#if KN_SIM_MUTANT == 2
      if (!l && (i = sim_store_find(s, c->key)) >= 0 &&
          same_owner(s->table[i].owner, c->old_owner))
        l = &s->table[i];
#endif
      if (!l) return CCF;
      if (l->owner && strcmp(l->owner, c->owner) != 0) l->owner_switches++;
      set_str(&l->owner, c->owner);
      set_str(&l->checkpoint_owner, NULL);
      l->beat_failing = 0;
      c->new_counter = ++l->counter;
      return 0;
    case KN_CC_RENEW:
      if (!(l = find_actual(s, c->key, c->counter, c->owner))) return CCF;
      c->new_counter = ++l->counter;
      if (c->mark) {
        l->beat_failing = c->mark == 1; /* store.h, mark: no hand-off news */
        return 0;
      }
      if (l->checkpoint_owner && l->owner) c->handoff_to = kn_strdup0(l->owner);
      return 0;
    case KN_CC_RELEASE:
      if (!(l = find_actual(s, c->key, c->counter, c->owner))) return CCF;
      set_str(&l->owner, NULL);
      set_str(&l->checkpoint_owner, NULL);
      l->beat_failing = 0;
      c->new_counter = ++l->counter;
      return 0;
    case KN_CC_GET:
      if ((i = sim_store_find(s, c->key)) < 0) return KN_ERR__NOT_FOUND;
      if (kn_lease_copy(&c->got, &s->table[i])) abort();
      return 0;
    case KN_CC_HANDOFF:
      l = find_if(s, c->key, c->counter, 1, c->old_owner);
      if (!l || l->checkpoint_owner) return CCF;
      set_str(&l->owner, c->owner);
      set_str(&l->checkpoint_owner, c->old_owner);
      return 0;
    case KN_CC_HANDOFF_DONE:
      l = find_if(s, c->key, c->counter, 0, NULL);
      if (!l || !l->checkpoint_owner || strcmp(l->checkpoint_owner, c->owner))
        return CCF;
      set_str(&l->checkpoint_owner, NULL);
      l->owner_switches++;
      l->beat_failing = 0;
      c->new_counter = ++l->counter;
      s->handoffs++;
      return 0;
    case KN_CC_CHECKPOINT:
      l = find_actual(s, c->key, c->counter, c->owner);
#if KN_SIM_MUTANT == 1
      if (!l && (i = sim_store_find(s, c->key)) >= 0) l = &s->table[i];
#endif
      if (!l) return CCF;
      if (l->checkpoint_owner && l->owner) c->handoff_to = kn_strdup0(l->owner);
      if (c->ckpt) {
        set_str(&l->checkpoint, c->ckpt);
        l->checkpoint_subseq = c->subseq;
        l->owner_switches = 0;
      }
      set_str(&l->pending, c->pending);
      l->pending_subseq = c->pending ? c->pending_subseq : 0;
      free(l->pending_state);
      l->pending_state = NULL;
      l->pending_state_len = 0;
      if (c->pending && c->state) {
        l->pending_state = malloc(c->state_len + 1);
        memcpy(l->pending_state, c->state, c->state_len);
        l->pending_state_len = c->state_len;
      }
      c->new_counter = ++l->counter;
      return 0;
    case KN_CC_SET_CHILDREN: {
      if ((i = sim_store_find(s, c->key)) < 0) return CCF;
      kn_lease_t tmp = {.children = c->children, .n_children = c->n_children},
                 copy;
      if (kn_lease_copy(&copy, &tmp)) abort();
      l = &s->table[i];
      for (size_t k = 0; k < l->n_children; k++) free(l->children[k]);
      free(l->children);
      l->children = copy.children;
      l->n_children = copy.n_children;
      return 0;
    }
    case KN_CC_HEARTBEAT:
      heartbeat(s, c);
      return 0;
    case KN_CC_REMOVE:
      if (!(l = find_if(s, c->key, c->counter, 0, NULL))) return CCF;
      i = (int)(l - s->table);
      kn_lease_clear(l);
      memmove(&s->table[i], &s->table[i + 1],
              (s->n_table - (size_t)i - 1) * sizeof(*s->table));
      s->n_table--;
      return 0;
    default:
      return KN_ERR__INVALID_ARG;
  }
}

void sim_call_free(sim_call_t *c) {
  if (!c) return;
  free(c->key);
  free(c->old_owner);
  free(c->owner);
  kn_lease_clear(&c->lease);
  free(c->ckpt);
  free(c->pending);
  free(c->state);
  for (size_t i = 0; i < c->n_children; i++) free(c->children[i]);
  free(c->children);
  kn_lease_array_free(c->list, c->n_list);
  free(c->handoff_to);
  kn_lease_clear(&c->got);
  kn_members_clear(&c->members);
  kn_members_clear(&c->roster_m);
  free(c->digest);
  free(c->forget_bucket);
  free(c);
}
