#include "lease/members.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

void kn_mview_init(kn_mview_t *m) { memset(m, 0, sizeof(*m)); }

static void ents_free(kn_mview_ent_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i].worker);
  free(v);
}

void kn_mview_free(kn_mview_t *m) {
  ents_free(m->v, m->n);
  ents_free(m->bad, m->n_bad);
  memset(m, 0, sizeof(*m));
}

const kn_mview_ent_t *kn_mview_get(const kn_mview_t *m, const char *worker) {
  int found;
  size_t i = kn_sorted_find(m->v, m->n, sizeof(*m->v),
                            offsetof(kn_mview_ent_t, worker), worker, &found);
  return found ? &m->v[i] : NULL;
}

static int by_worker(const void *a, const void *b) {
  return strcmp(((const kn_mview_ent_t *)a)->worker,
                ((const kn_mview_ent_t *)b)->worker);
}

static const kn_mview_ent_t *find(const kn_mview_ent_t *v, size_t n,
                                  const char *worker) {
  int found;
  size_t i = kn_sorted_find(v, n, sizeof(*v), offsetof(kn_mview_ent_t, worker),
                            worker, &found);
  return found ? &v[i] : NULL;
}

/* The entries of in (n) as seen at now, after old (n_old): fills *out
 * (sorted), counts deaths and joins.  0 or -1 on out-of-memory. */
static int track(const kn_mview_ent_t *old_v, size_t n_old,
                 const kn_member_t *in, size_t n, int64_t now,
                 int64_t duration_ms, kn_mview_ent_t **out, uint64_t *deaths,
                 uint64_t *joins) {
  kn_mview_ent_t *nv = calloc(n ? n : 1, sizeof(*nv));
  if (!nv) return -1;
  for (size_t i = 0; i < n; i++) {
    if (!(nv[i].worker = strdup(in[i].worker))) {
      ents_free(nv, i);
      return -1;
    }
    const kn_mview_ent_t *old = find(old_v, n_old, in[i].worker);
    nv[i].beat = in[i].beat;
    nv[i].leases = in[i].leases;
    nv[i].bucket = in[i].bucket;
    if (old && old->remote) old = NULL; /* first observed now */
    if (old && old->beat == in[i].beat) {
      nv[i].changed_ms = old->changed_ms;
      nv[i].dead = old->dead;
    } else {
      /* New, or beating again (a restarted worker of the same id). */
      nv[i].changed_ms = now;
      if (!old && old_v && !find(old_v, n_old, in[i].worker)) (*joins)++;
    }
    if (!nv[i].dead && now - nv[i].changed_ms >= duration_ms) {
      nv[i].dead = 1;
      (*deaths)++;
    }
  }
  /* Stores answer sorted; sorting again costs little and keeps lookups
   * right whatever the store did. */
  qsort(nv, n, sizeof(*nv), by_worker);
  *out = nv;
  return 0;
}

/* Appends to *v (n, sorted) the remote entries of old (n_old) that v
 * lacks, and sorts again; 0 or -1 on out-of-memory. */
static int keep_remote(kn_mview_ent_t **v, size_t *n, const kn_mview_ent_t *old,
                       size_t n_old) {
  size_t add = 0;
  for (size_t i = 0; i < n_old; i++)
    add += old[i].remote && !find(*v, *n, old[i].worker);
  if (!add) return 0;
  kn_mview_ent_t *nv = realloc(*v, (*n + add) * sizeof(*nv));
  if (!nv) return -1;
  *v = nv;
  size_t k = *n;
  for (size_t i = 0; i < n_old; i++) {
    if (!old[i].remote || find(nv, *n, old[i].worker)) continue;
    nv[k] = old[i];
    if (!(nv[k].worker = strdup(old[i].worker))) {
      for (size_t j = *n; j < k; j++) free(nv[j].worker);
      return -1; /* *v keeps its *n entries */
    }
    k++;
  }
  *n = k;
  qsort(nv, k, sizeof(*nv), by_worker);
  return 0;
}

int kn_mview_update(kn_mview_t *m, const kn_members_t *in, int64_t now,
                    int64_t duration_ms) {
  uint64_t deaths = 0, joins = 0, ignored = 0;
  kn_mview_ent_t *nv = NULL, *nb = NULL;
  size_t n = in->n;
  if (track(m->v, m->n, in->v, in->n, now, duration_ms, &nv, &deaths, &joins))
    return -1;
  if (keep_remote(&nv, &n, m->v, m->n)) {
    ents_free(nv, n);
    return -1;
  }
  if (track(m->bad, m->n_bad, in->bad, in->n_bad, now, duration_ms, &nb,
            &ignored, &ignored)) {
    ents_free(nv, n);
    return -1;
  }
  ents_free(m->v, m->n);
  ents_free(m->bad, m->n_bad);
  m->v = nv;
  m->n = n;
  m->bad = nb;
  m->n_bad = in->n_bad;
  m->epoch = in->epoch;
  m->deaths += deaths;
  m->joins += joins;
  return 0;
}

int kn_mview_is_dead(const kn_mview_t *m, const char *worker) {
  const kn_mview_ent_t *e = worker ? kn_mview_get(m, worker) : NULL;
  return e && e->dead;
}

size_t kn_mview_live(const kn_mview_t *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->n; i++) n += !m->v[i].dead;
  return n;
}

const char *kn_mview_leader(const kn_mview_t *m, int bucket) {
  for (size_t i = 0; i < m->n; i++)
    if (!m->v[i].dead && !m->v[i].remote && m->v[i].bucket == bucket)
      return m->v[i].worker;
  return NULL;
}

int kn_mview_set_remote(kn_mview_t *m, const kn_members_t *roster,
                        int64_t now) {
  size_t keep = 0;
  for (size_t i = 0; i < m->n; i++) keep += !m->v[i].remote;
  kn_mview_ent_t *nv = calloc(keep + roster->n + 1, sizeof(*nv));
  if (!nv) return -1;
  size_t k = 0;
  for (size_t i = 0; i < m->n; i++)
    if (!m->v[i].remote) nv[k++] = m->v[i];
  size_t observed = k;
  for (size_t i = 0; i < roster->n; i++) {
    const kn_member_t *r = &roster->v[i];
    if (find(nv, observed, r->worker) ||
        (k > observed && strcmp(nv[k - 1].worker, r->worker) == 0))
      continue; /* observed, or a second item's copy (roster is sorted) */
    if (!(nv[k].worker = strdup(r->worker))) {
      for (size_t j = observed; j < k; j++) free(nv[j].worker);
      free(nv);
      return -1;
    }
    nv[k].beat = r->beat;
    nv[k].leases = r->leases;
    nv[k].bucket = r->bucket;
    nv[k].changed_ms = now;
    nv[k++].remote = 1;
  }
  for (size_t i = 0; i < m->n; i++)
    if (m->v[i].remote) free(m->v[i].worker);
  free(m->v);
  qsort(nv, k, sizeof(*nv), by_worker);
  m->v = nv;
  m->n = k;
  return 0;
}
