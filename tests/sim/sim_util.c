/* PRNG, the event queue (a binary heap ordered by time, then by order of
 * scheduling), the trace ring and the simulation's teardown. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

uint64_t sim_rand(sim_rng_t *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t sim_range(sim_rng_t *r, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  return lo + (int64_t)(sim_rand(r) % (uint64_t)(hi - lo + 1));
}

int sim_chance(sim_rng_t *r, int permille) {
  return (int)(sim_rand(r) % 1000) < permille;
}

static int ev_less(const sim_ev_t *a, const sim_ev_t *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void sim_push(sim_t *s, int64_t t, int kind, int w, int inc, int64_t a,
              int64_t b, void *p) {
  if (s->n_heap == s->cap_heap) {
    s->cap_heap = s->cap_heap ? s->cap_heap * 2 : 256;
    s->heap = realloc(s->heap, s->cap_heap * sizeof(*s->heap));
    if (!s->heap) abort();
  }
  if (t < s->now) t = s->now;
  sim_ev_t ev = {t, s->ev_seq++, kind, w, inc, a, b, p};
  size_t i = s->n_heap++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!ev_less(&ev, &s->heap[up])) break;
    s->heap[i] = s->heap[up];
    i = up;
  }
  s->heap[i] = ev;
}

int sim_pop(sim_t *s, sim_ev_t *ev) {
  if (!s->n_heap) return 0;
  *ev = s->heap[0];
  sim_ev_t last = s->heap[--s->n_heap];
  size_t i = 0, n = s->n_heap;
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    const sim_ev_t *best = &last;
    if (l < n && ev_less(&s->heap[l], best)) m = l, best = &s->heap[l];
    if (l + 1 < n && ev_less(&s->heap[l + 1], best)) m = l + 1;
    if (m == i) break;
    s->heap[i] = s->heap[m];
    i = m;
  }
  if (n) s->heap[i] = last;
  return 1;
}

void sim_trace(sim_t *s, int w, const char *what, const char *key, int64_t a,
               int64_t b) {
  sim_trace_ent_t *e = &s->tr[s->n_tr++ % SIM_TRACE];
  e->t = s->now;
  e->w = w;
  e->what = what;
  e->a = a;
  e->b = b;
  e->key[0] = 0;
  e->msg[0] = 0;
  if (key) {
    /* shard ids are long: keep their distinctive tail */
    size_t n = strlen(key);
    const char *k = n >= sizeof(e->key) ? key + n - (sizeof(e->key) - 1) : key;
    memcpy(e->key, k, strlen(k) + 1);
  }
  if (s->o.trace_always)
    printf("%9lld.%03lld w%-2d %-18s %-24s %lld %lld\n",
           (long long)(e->t / 1000), (long long)(e->t % 1000), w, what, e->key,
           (long long)a, (long long)b);
}

void sim_trace_msg(sim_t *s, int w, const char *msg) {
  sim_trace(s, w, "LOG", NULL, 0, 0);
  sim_trace_ent_t *e = &s->tr[(s->n_tr - 1) % SIM_TRACE];
  snprintf(e->msg, sizeof(e->msg), "%s", msg ? msg : "");
  if (s->o.trace_always) printf("            %s\n", e->msg);
}

void sim_trace_print(const sim_t *s, size_t last) {
  uint64_t from = s->n_tr > last ? s->n_tr - last : 0;
  if (s->n_tr > SIM_TRACE && from < s->n_tr - SIM_TRACE)
    from = s->n_tr - SIM_TRACE;
  printf("trace (time s, worker, step, shard, a, b):\n");
  for (uint64_t i = from; i < s->n_tr; i++) {
    const sim_trace_ent_t *e = &s->tr[i % SIM_TRACE];
    printf("%9lld.%03lld w%-2d %-18s %-24s %lld %lld\n",
           (long long)(e->t / 1000), (long long)(e->t % 1000), e->w, e->what,
           e->key, (long long)e->a, (long long)e->b);
    if (e->msg[0]) printf("            %s\n", e->msg);
  }
}

void sim_violate(sim_t *s, const char *fmt, ...) {
  if (s->violated) return;
  s->violated = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->violation, sizeof(s->violation), fmt, ap);
  va_end(ap);
  sim_trace(s, -1, "VIOLATION", NULL, 0, 0);
}

void sim_ev_free(const sim_ev_t *ev) {
  if (ev->kind == EV_STORE_APPLY || ev->kind == EV_STORE_REPLY)
    sim_call_free(ev->p);
  else if (ev->kind == EV_CTL)
    free(ev->p);
}

void sim_free(sim_t *s) {
  for (int w = 0; w < s->n_wk; w++) {
    sim_worker_t *k = &s->wk[w];
    sim_worker_drop_drive(s, w);
    free(k->rd);
    free(k->proc);
    free(k->yields);
  }
  sim_ev_t ev;
  while (sim_pop(s, &ev)) sim_ev_free(&ev);
  free(s->heap);
  kn_lease_array_free(s->table, s->n_table);
  for (int i = 0; i < s->n_sh; i++) free(s->sh[i].rec);
  free(s->ten);
  free(s->sc_state);
  memset(s, 0, sizeof(*s));
}
