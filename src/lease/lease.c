#include "lease/lease.h"

#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

static void free_strv(char **v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

void kn_lease_clear(kn_lease_t *l) {
  if (!l) return;
  free(l->key);
  free(l->owner);
  free(l->checkpoint);
  free(l->pending);
  free(l->pending_state);
  free_strv(l->parents, l->n_parents);
  free_strv(l->children, l->n_children);
  free(l->hash_start);
  free(l->hash_end);
  free(l->checkpoint_owner);
  free(l->extra);
  memset(l, 0, sizeof(*l));
}

/* Copies a string, reporting failure only when src was non-NULL. */
static int dup0(char **dst, const char *src) {
  *dst = kn_strdup0(src);
  return src && !*dst ? -1 : 0;
}

static int dup_strv(char ***dst, char *const *src, size_t n) {
  *dst = NULL;
  if (!n) return 0;
  char **v = calloc(n, sizeof(*v));
  if (!v) return -1;
  for (size_t i = 0; i < n; i++) {
    if (dup0(&v[i], src[i])) {
      free_strv(v, i);
      return -1;
    }
  }
  *dst = v;
  return 0;
}

int kn_lease_copy(kn_lease_t *dst, const kn_lease_t *src) {
  memset(dst, 0, sizeof(*dst));
  dst->counter = src->counter;
  dst->owner_switches = src->owner_switches;
  dst->checkpoint_subseq = src->checkpoint_subseq;
  dst->pending_subseq = src->pending_subseq;
  dst->beat_failing = src->beat_failing;
  dst->owner_hands_over = src->owner_hands_over;
  int rc = dup0(&dst->key, src->key) | dup0(&dst->owner, src->owner) |
           dup0(&dst->checkpoint, src->checkpoint) |
           dup0(&dst->pending, src->pending) |
           dup0(&dst->hash_start, src->hash_start) |
           dup0(&dst->hash_end, src->hash_end) |
           dup0(&dst->checkpoint_owner, src->checkpoint_owner) |
           dup0(&dst->extra, src->extra);
  if (!rc && src->pending_state) {
    /* One spare byte so that a zero-length state still allocates. */
    dst->pending_state = malloc(src->pending_state_len + 1);
    if (dst->pending_state) {
      memcpy(dst->pending_state, src->pending_state, src->pending_state_len);
      dst->pending_state_len = src->pending_state_len;
    } else {
      rc = -1;
    }
  }
  if (!rc && !dup_strv(&dst->parents, src->parents, src->n_parents))
    dst->n_parents = src->n_parents;
  else
    rc = -1;
  if (!rc && !dup_strv(&dst->children, src->children, src->n_children))
    dst->n_children = src->n_children;
  else
    rc = -1;
  if (rc) kn_lease_clear(dst);
  return rc ? -1 : 0;
}

void kn_lease_array_free(kn_lease_t *v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) kn_lease_clear(&v[i]);
  free(v);
}

int kn_lease_is_shard_end(const kn_lease_t *l) {
  return l && l->checkpoint && strcmp(l->checkpoint, KN_CKPT_SHARD_END) == 0;
}

const char *kn_lease_actual_owner(const kn_lease_t *l) {
  return l->checkpoint_owner ? l->checkpoint_owner : l->owner;
}

void kn_members_clear(kn_members_t *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) free(m->v[i].worker);
  free(m->v);
  for (size_t i = 0; i < m->n_bad; i++) free(m->bad[i].worker);
  free(m->bad);
  free(m->digest);
  memset(m, 0, sizeof(*m));
}

static int copy_list(kn_member_t **dst, size_t *dn, const kn_member_t *src,
                     size_t n) {
  if (!n) return 0;
  if (!(*dst = calloc(n, sizeof(**dst)))) return -1;
  for (size_t i = 0; i < n; i++, (*dn)++) {
    (*dst)[i] = src[i];
    if (!((*dst)[i].worker = strdup(src[i].worker))) return -1;
  }
  return 0;
}

int kn_members_copy(kn_members_t *dst, const kn_members_t *src) {
  memset(dst, 0, sizeof(*dst));
  dst->epoch = src->epoch;
  if ((src->digest && !(dst->digest = strdup(src->digest))) ||
      copy_list(&dst->v, &dst->n, src->v, src->n) ||
      copy_list(&dst->bad, &dst->n_bad, src->bad, src->n_bad)) {
    kn_members_clear(dst);
    return -1;
  }
  return 0;
}

static int by_member(const void *a, const void *b) {
  const kn_member_t *x = a, *y = b;
  int c = strcmp(x->worker, y->worker);
  return c ? c : (x->bucket > y->bucket) - (x->bucket < y->bucket);
}

int kn_members_home(const char *worker, int nb) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (const char *p = worker; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  return nb > 1 ? (int)(h % (uint64_t)nb) : 0;
}

void kn_members_one_each(kn_members_t *m) {
  int nb = 1;
  if (m->digest && sscanf(m->digest, "nb=%d", &nb) != 1) nb = 1;
  size_t k = 0;
  for (size_t i = 0; i < m->n;) {
    size_t j = i + 1; /* copies of one worker: i .. j-1 */
    while (j < m->n && strcmp(m->v[j].worker, m->v[i].worker) == 0) j++;
    size_t best = i;
    int home = kn_members_home(m->v[i].worker, nb);
    for (size_t c = i + 1; c < j; c++) {
      int at_home = m->v[c].bucket == home,
          best_home = m->v[best].bucket == home;
      if ((at_home && !best_home) ||
          (at_home == best_home && m->v[c].beat > m->v[best].beat))
        best = c;
    }
    for (size_t c = i; c < j; c++)
      if (c != best) free(m->v[c].worker);
    m->v[k++] = m->v[best];
    i = j;
  }
  m->n = k;
}

int kn_members_merge(kn_members_t *out, const kn_members_t *items, size_t n) {
  memset(out, 0, sizeof(*out));
  size_t total = 0, total_bad = 0;
  for (size_t b = 0; b < n; b++) {
    total += items[b].n;
    total_bad += items[b].n_bad;
    out->epoch += items[b].epoch;
  }
  if ((total && !(out->v = calloc(total, sizeof(*out->v)))) ||
      (total_bad && !(out->bad = calloc(total_bad, sizeof(*out->bad)))) ||
      (n && items[0].digest && !(out->digest = strdup(items[0].digest))))
    goto oom;
  for (size_t b = 0; b < n; b++) {
    for (size_t i = 0; i < items[b].n; i++, out->n++) {
      out->v[out->n] = items[b].v[i];
      if (!(out->v[out->n].worker = strdup(items[b].v[i].worker))) goto oom;
    }
    for (size_t i = 0; i < items[b].n_bad; i++, out->n_bad++) {
      out->bad[out->n_bad] = items[b].bad[i];
      if (!(out->bad[out->n_bad].worker = strdup(items[b].bad[i].worker)))
        goto oom;
    }
  }
  if (out->n) qsort(out->v, out->n, sizeof(*out->v), by_member);
  if (out->n_bad) qsort(out->bad, out->n_bad, sizeof(*out->bad), by_member);
  return 0;
oom:
  kn_members_clear(out);
  return -1;
}
