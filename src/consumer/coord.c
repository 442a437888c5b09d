/* Lease mode: this worker's side of the lease table.
 *
 * The control thread syncs shards into leases, takes leases (expired or
 * free first, then by bounded stealing), flushes checkpoints, writes
 * SHARD_END and cleans up finished parents; the renewer thread keeps held
 * leases alive.  Every write is conditional on the lease counter, so a
 * worker that lost a lease can never move its checkpoint.
 *
 * Locking: lease_mu guards the lease fields of shards and serializes this
 * worker's writes to its leases; take it before mu, never while holding
 * mu. */
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_int.h"
#include "consumer/shard_table.h"
#include "core/error.h"
#include "kinesis/seqnum.h"
#include "lease/store.h"
#include "lease/taker.h"
#include "util/clock.h"
#include "util/str.h"

#define ST(kc) ((kc)->ls->ops)

static int is_conditional(const kn_error_t *err) {
  return kn_error_code(err) == KN_ERR_CONDITIONAL_CHECK_FAILED;
}

static int is_seq(const char *s) { return s && *s >= '0' && *s <= '9'; }

kn_error_t *kn_coord_open(kn_consumer_t *kc) {
  const char *spec = kn_conf_str(kc->conf, "lease.store");
  kn_error_t *err = NULL;
  kc->ls = kn_lease_store_open(spec, kc->client, &err);
  if (!kc->ls) return kn_error_prefix(err, "lease store \"%s\"", spec);
  err = ST(kc)->ensure_table(kc->ls);
  if (err) return kn_error_prefix(err, "lease store %s", kc->ls->name);
  return NULL;
}

/* ---- shard sync: a lease for every shard that needs one ---- */

static const char *initial_checkpoint(const kn_consumer_t *kc) {
  switch (kc->cfg.initial.type) {
    case KN_ITER_LATEST: return KN_CKPT_LATEST;
    case KN_ITER_AT_TIMESTAMP: return KN_CKPT_AT_TIMESTAMP;
    default: return KN_CKPT_TRIM_HORIZON;
  }
}

static const kn_lease_t *find_lease(const kn_lease_t *v, size_t n,
                                    const char *key) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].key, key) == 0) return &v[i];
  return NULL;
}

static kn_error_t *create_lease(kn_consumer_t *kc, const kn_shard_t *s,
                                const char *checkpoint) {
  kn_lease_t l;
  memset(&l, 0, sizeof(l));
  char *parents[2];
  l.key = (char *)kn_shard_id(s);
  l.checkpoint = (char *)checkpoint;
  if (kn_shard_parent_id(s)) parents[l.n_parents++] = (char *)kn_shard_parent_id(s);
  if (kn_shard_adjacent_parent_id(s))
    parents[l.n_parents++] = (char *)kn_shard_adjacent_parent_id(s);
  l.parents = l.n_parents ? parents : NULL;
  l.hash_start = (char *)kn_shard_hash_key_start(s);
  l.hash_end = (char *)kn_shard_hash_key_end(s);
  kn_error_t *err = ST(kc)->create(kc->ls, &l);
  if (err && is_conditional(err)) { /* another worker was first */
    kn_error_destroy(err);
    return NULL;
  }
  if (!err)
    kn_info(&kc->log, "COORD", "lease created for shard %s at %s", l.key,
            checkpoint);
  return err;
}

kn_error_t *kn_coord_sync(kn_consumer_t *kc, int first) {
  kn_lease_t *leases = NULL;
  size_t n = 0;
  kn_error_t *err = ST(kc)->list(kc->ls, &leases, &n);
  if (err) return kn_error_prefix(err, "lease store %s", kc->ls->name);
  int empty = n == 0;
  kn_shard_list_t *shards = NULL;
  if (empty) {
    /* A new application: list only the shards the initial position
     * needs (servers that ignore the filter return them all). */
    kn_shard_filter_type_t f = KN_SHARD_FILTER_AT_TRIM_HORIZON;
    if (kc->cfg.initial.type == KN_ITER_LATEST) f = KN_SHARD_FILTER_AT_LATEST;
    if (kc->cfg.initial.type == KN_ITER_AT_TIMESTAMP)
      f = KN_SHARD_FILTER_AT_TIMESTAMP;
    err = kn_list_shards(kc->client, kc->stream, f, NULL,
                         kc->cfg.initial.timestamp_ms, &shards);
  } else {
    err = kn_list_shards(kc->client, kc->stream, KN_SHARD_FILTER_NONE, NULL,
                         0, &shards);
  }
  if (err) {
    kn_lease_array_free(leases, n);
    return kn_error_prefix(err, "stream \"%s\": ListShards", kc->stream);
  }
  for (size_t i = 0; i < kn_shard_list_count(shards) && !err; i++) {
    const kn_shard_t *s = kn_shard_list_get(shards, i);
    if (find_lease(leases, n, kn_shard_id(s))) continue;
    const char *p = kn_shard_parent_id(s), *a = kn_shard_adjacent_parent_id(s);
    int parent_leased = (p && find_lease(leases, n, p)) ||
                        (a && find_lease(leases, n, a));
    int parent_listed = (p && kn_shard_list_find(shards, p)) ||
                        (a && kn_shard_list_find(shards, a));
    if (empty) {
      /* Nothing new arrives in a closed shard: LATEST skips them. */
      if (kc->cfg.initial.type == KN_ITER_LATEST && !kn_shard_is_open(s))
        continue;
      err = create_lease(kc, s, parent_listed && !first
                                    ? KN_CKPT_TRIM_HORIZON
                                    : initial_checkpoint(kc));
    } else if (parent_leased) {
      /* A child of a shard we read: from its beginning. */
      err = create_lease(kc, s, KN_CKPT_TRIM_HORIZON);
    } else if (!parent_listed && kn_shard_is_open(s)) {
      /* An open shard with no known ancestry (parents past retention). */
      err = create_lease(kc, s, initial_checkpoint(kc));
    }
  }
  /* Remember which shards are closed: an empty read of a closed shard is
   * not "caught up" until its end is seen. */
  pthread_mutex_lock(&kc->mu);
  for (size_t i = 0; i < kc->n_shards; i++) {
    const kn_shard_t *s = kn_shard_list_find(shards, kc->shards[i]->id);
    if (s && !kn_shard_is_open(s)) kc->shards[i]->closed_at_sync = 1;
  }
  pthread_mutex_unlock(&kc->mu);
  kn_shard_list_destroy(kc->last_shards);
  kc->last_shards = shards;
  kn_lease_array_free(leases, n);
  if (!err) {
    pthread_mutex_lock(&kc->mu);
    kc->synced = 1;
    pthread_mutex_unlock(&kc->mu);
  }
  return err;
}

/* ---- taking ---- */

static kn_cshard_t *shard_for_lease(kn_consumer_t *kc, const kn_lease_t *l) {
  const kn_shard_t *s =
      kc->last_shards ? kn_shard_list_find(kc->last_shards, l->key) : NULL;
  pthread_mutex_lock(&kc->mu);
  kn_cshard_t *cs = kn_shard_table_find(kc, l->key);
  if (!cs)
    cs = kn_shard_table_add_raw(kc, l->key,
                                l->n_parents > 0 ? l->parents[0] : NULL,
                                l->n_parents > 1 ? l->parents[1] : NULL,
                                l->hash_start, l->hash_end,
                                s && !kn_shard_is_open(s));
  pthread_mutex_unlock(&kc->mu);
  return cs;
}

/* Where reading starts for a lease's checkpoint. */
static void start_of(const kn_consumer_t *kc, const kn_lease_t *l,
                     kn_pos_t *p) {
  memset(p, 0, sizeof(*p));
  const char *c = l->checkpoint ? l->checkpoint : KN_CKPT_TRIM_HORIZON;
  if (is_seq(c) &&
      kn_pos_set_seq(p, KN_ITER_AT_SEQUENCE_NUMBER, c,
                     (uint64_t)(l->checkpoint_subseq > 0 ? l->checkpoint_subseq : 0),
                     1) == 0)
    return; /* AT the checkpoint, dropping records at or below it */
  if (strcmp(c, KN_CKPT_LATEST) == 0) {
    p->type = KN_ITER_LATEST;
  } else if (strcmp(c, KN_CKPT_AT_TIMESTAMP) == 0) {
    p->type = KN_ITER_AT_TIMESTAMP;
    p->timestamp_ms = kc->cfg.initial.timestamp_ms;
  } else {
    p->type = KN_ITER_TRIM_HORIZON;
  }
}

static void acquire(kn_consumer_t *kc, const kn_lease_t *l, int64_t counter) {
  kn_cshard_t *cs = shard_for_lease(kc, l);
  if (!cs) {
    kn_err_log(&kc->log, "COORD", "out of memory taking shard %s", l->key);
    return;
  }
  void *state = NULL;
  if (l->pending_state && l->pending_state_len) {
    state = malloc(l->pending_state_len);
    if (state) memcpy(state, l->pending_state, l->pending_state_len);
  }
  pthread_mutex_lock(&kc->lease_mu);
  cs->held = 1;
  cs->counter = counter;
  cs->last_renew_ms = kn_mono_ms();
  cs->shard_end_written = 0;
  cs->ckpt[0] = '\0';
  cs->ckpt_subseq = 0;
  if (l->checkpoint && strlen(l->checkpoint) < sizeof(cs->ckpt)) {
    strcpy(cs->ckpt, l->checkpoint);
    cs->ckpt_subseq = (uint64_t)(l->checkpoint_subseq > 0 ? l->checkpoint_subseq : 0);
  }
  kc->lstats.taken++;
  start_of(kc, l, &cs->start);
  pthread_mutex_lock(&kc->mu);
  cs->fencing_token = counter;
  cs->has_delivered = cs->has_processed = 0;
  cs->end_popped = 0;
  cs->caught_up = 0;
  cs->state = KN_CS_WAITING;
  kn_app_event_locked(kc, KN_APP_EV_ACQUIRED, cs->id, counter, KN_ERR_NO_ERROR,
                      state, state ? l->pending_state_len : 0);
  pthread_mutex_unlock(&kc->mu);
  /* Started under lease_mu so a renewal failing meanwhile cannot stop a
   * reader that is not running yet. */
  int rc = kn_reader_start(kc, cs);
  pthread_mutex_unlock(&kc->lease_mu);
  kn_info(&kc->log, "COORD", "took shard %s (counter %lld, from %s)", cs->id,
          (long long)counter, cs->ckpt[0] ? cs->ckpt : "the start");
  if (rc) kn_coord_lost(kc, cs, KN_ERR__NOMEM);
}

void kn_coord_take(kn_consumer_t *kc) {
  kn_lease_t *v = NULL;
  size_t n = 0;
  kn_error_t *err = ST(kc)->list(kc->ls, &v, &n);
  if (err) {
    kn_warn(&kc->log, "COORD", "lease store %s: %s", kc->ls->name,
            kn_error_string(err));
    kn_error_destroy(err);
    return;
  }
  int64_t now = kn_mono_ms();
  if (kn_lease_observer_update(&kc->observer, v, n, now)) {
    kn_lease_array_free(v, n);
    return;
  }
  /* A held lease now owned by someone else was taken from us. */
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&kc->mu);
    kn_cshard_t *cs = kn_shard_table_find(kc, v[i].key);
    pthread_mutex_unlock(&kc->mu);
    if (!cs) continue;
    pthread_mutex_lock(&kc->lease_mu);
    int stolen = cs->held && v[i].counter >= cs->counter &&
                 (!v[i].owner || strcmp(v[i].owner, kc->worker_id) != 0);
    pthread_mutex_unlock(&kc->lease_mu);
    if (stolen) kn_coord_lost(kc, cs, KN_ERR__LEASE_LOST);
  }

  kn_take_params_t p = {kc->worker_id, now, kc->lease.duration_ms,
                        kc->lease.max_leases, kc->lease.max_steal};
  kn_take_plan_t plan;
  if (kn_take_plan(v, n, &kc->observer, &p, &plan)) {
    kn_lease_array_free(v, n);
    return;
  }
  size_t took = 0;
  for (int pass = 0; pass < 2; pass++) {
    size_t cnt = pass ? plan.n_steal : plan.n_take;
    size_t *idx = pass ? plan.steal : plan.take;
    for (size_t k = 0; k < cnt; k++) {
      const kn_lease_t *l = &v[idx[k]];
      if (l->owner && strcmp(l->owner, kc->worker_id) == 0) {
        /* Ours already (the renewer keeps it); nothing to take. */
        pthread_mutex_lock(&kc->mu);
        kn_cshard_t *cs = kn_shard_table_find(kc, l->key);
        pthread_mutex_unlock(&kc->mu);
        if (cs) {
          pthread_mutex_lock(&kc->lease_mu);
          int held = cs->held;
          pthread_mutex_unlock(&kc->lease_mu);
          if (held) continue;
        }
      }
      int64_t counter = 0;
      err = ST(kc)->take(kc->ls, l->key, l->counter, l->owner, kc->worker_id,
                         &counter);
      if (err) {
        /* Lost the race to another taker, or the store hiccuped: the next
         * round looks again. */
        kn_dbg(&kc->log, "COORD", "take %s: %s", l->key, kn_error_string(err));
        kn_error_destroy(err);
        continue;
      }
      if (pass)
        kn_info(&kc->log, "COORD", "stole shard %s from %s to balance",
                l->key, l->owner);
      acquire(kc, l, counter);
      took++;
    }
  }
  pthread_mutex_lock(&kc->mu);
  kc->taker_idle = plan.n_take == 0 && plan.n_steal == 0;
  pthread_mutex_unlock(&kc->mu);
  kn_take_plan_free(&plan);
  kn_lease_array_free(v, n);
  (void)took;
}

/* ---- losing ---- */

void kn_coord_lost(kn_consumer_t *kc, kn_cshard_t *cs, kn_err_t reason) {
  pthread_mutex_lock(&kc->lease_mu);
  if (!cs->held) {
    pthread_mutex_unlock(&kc->lease_mu);
    return;
  }
  cs->held = 0;
  kc->lstats.lost += reason == KN_ERR__LEASE_LOST;
  kn_reader_stop(kc, cs);
  pthread_mutex_lock(&kc->mu);
  kn_delivery_purge(kc, cs);
  cs->state = KN_CS_STOPPED;
  cs->fencing_token = -1;
  cs->caught_up = 0;
  kn_app_event_locked(kc, KN_APP_EV_LOST, cs->id, 0, reason, NULL, 0);
  pthread_mutex_unlock(&kc->mu);
  pthread_mutex_unlock(&kc->lease_mu);
  if (reason == KN_ERR__LEASE_LOST)
    kn_warn(&kc->log, "COORD", "lost the lease of shard %s: stopped reading it",
            cs->id);
}

/* ---- checkpoints ---- */

/* p is past the checkpoint held in the table. */
static int after_ckpt(const kn_cshard_t *cs, const kn_pos_t *p) {
  if (!is_seq(cs->ckpt)) return 1;
  return kn_seqpos_cmp(p->seq, p->subseq, cs->ckpt, cs->ckpt_subseq) > 0;
}

/* With lease_mu held: one conditional write of cs's lease. */
static kn_error_t *write_ckpt_locked(kn_consumer_t *kc, kn_cshard_t *cs,
                                     const char *ckpt, uint64_t subseq,
                                     const char *pending,
                                     uint64_t pending_subseq,
                                     const void *state, size_t state_len) {
  int64_t counter = 0;
  kn_error_t *err = ST(kc)->checkpoint(
      kc->ls, cs->id, cs->counter, kc->worker_id, ckpt, (int64_t)subseq,
      pending, (int64_t)pending_subseq, state, state_len, &counter);
  if (err) return err;
  cs->counter = counter;
  cs->last_renew_ms = kn_mono_ms();
  if (ckpt && strlen(ckpt) < sizeof(cs->ckpt)) {
    strcpy(cs->ckpt, ckpt);
    cs->ckpt_subseq = subseq;
  }
  return NULL;
}

kn_error_t *kn_coord_checkpoint(kn_consumer_t *kc, kn_cshard_t *cs,
                                const kn_pos_t *p, const void *state,
                                size_t state_len, int prepare) {
  pthread_mutex_lock(&kc->lease_mu);
  if (!cs->held) {
    pthread_mutex_unlock(&kc->lease_mu);
    return kn_error_new(KN_ERR__LEASE_LOST,
                        "shard %s: this worker does not hold its lease",
                        cs->id);
  }
  kn_error_t *err = NULL;
  if (prepare)
    err = write_ckpt_locked(kc, cs, NULL, 0, p->seq, p->subseq, state,
                            state_len);
  else if (after_ckpt(cs, p) && !cs->shard_end_written)
    err = write_ckpt_locked(kc, cs, p->seq, p->subseq, NULL, 0, NULL, 0);
  pthread_mutex_unlock(&kc->lease_mu);
  if (err && is_conditional(err)) {
    kn_error_destroy(err);
    kn_coord_lost(kc, cs, KN_ERR__LEASE_LOST);
    return kn_error_new(KN_ERR__LEASE_LOST,
                        "shard %s: lease taken by another worker; checkpoint "
                        "not written", cs->id);
  }
  return err ? kn_error_prefix(err, "shard %s: checkpoint", cs->id) : NULL;
}

/* Shards held now (pointers stay valid: shards are freed at destroy). */
static size_t held_shards(kn_consumer_t *kc, kn_cshard_t ***out) {
  pthread_mutex_lock(&kc->mu);
  kn_cshard_t **v = malloc((kc->n_shards ? kc->n_shards : 1) * sizeof(*v));
  size_t n = 0;
  if (v)
    for (size_t i = 0; i < kc->n_shards; i++) v[n++] = kc->shards[i];
  pthread_mutex_unlock(&kc->mu);
  *out = v;
  return v ? n : 0;
}

void kn_coord_flush(kn_consumer_t *kc) {
  kn_cshard_t **v;
  size_t n = held_shards(kc, &v);
  for (size_t i = 0; i < n; i++) {
    kn_cshard_t *cs = v[i];
    pthread_mutex_lock(&kc->mu);
    kn_pos_t p = cs->processed;
    int has = cs->has_processed && kc->cfg.auto_checkpoint;
    int end = cs->end_popped;
    pthread_mutex_unlock(&kc->mu);
    if (has) {
      kn_error_t *err = kn_coord_checkpoint(kc, cs, &p, NULL, 0, 0);
      if (err && kn_error_code(err) != KN_ERR__LEASE_LOST)
        kn_warn(&kc->log, "COORD", "%s", kn_error_string(err));
      kn_error_destroy(err);
    }
    if (end) kn_coord_shard_done(kc, cs);
  }
  free(v);
}

/* ---- the end of a shard ---- */

static void set_children(kn_consumer_t *kc, kn_cshard_t *cs,
                         const kn_shard_list_t *children) {
  size_t n = kn_shard_list_count(children);
  if (!n) return;
  char **ids = calloc(n, sizeof(char *));
  if (!ids) return;
  for (size_t i = 0; i < n; i++)
    ids[i] = (char *)kn_shard_id(kn_shard_list_get(children, i));
  kn_error_t *err = ST(kc)->set_children(kc->ls, cs->id, ids, n);
  if (err) kn_dbg(&kc->log, "COORD", "%s", kn_error_string(err));
  kn_error_destroy(err);
  free(ids);
}

void kn_coord_shard_ended(kn_consumer_t *kc, kn_cshard_t *cs,
                          const kn_shard_list_t *children) {
  kn_reader_stop(kc, cs);
  /* Leases for the children now, so other workers can take them as soon
   * as this shard's SHARD_END is written. */
  if (children) {
    for (size_t i = 0; i < kn_shard_list_count(children); i++) {
      kn_error_t *err =
          create_lease(kc, kn_shard_list_get(children, i), KN_CKPT_TRIM_HORIZON);
      if (err) {
        kn_warn(&kc->log, "COORD", "%s", kn_error_string(err));
        kn_error_destroy(err);
      }
    }
    set_children(kc, cs, children);
  }
  kn_error_t *err = kn_coord_sync(kc, 0); /* servers without ChildShards */
  if (err) {
    kn_warn(&kc->log, "COORD", "%s", kn_error_string(err));
    kn_error_destroy(err);
  }
}

void kn_coord_shard_done(kn_consumer_t *kc, kn_cshard_t *cs) {
  pthread_mutex_lock(&kc->mu);
  int ready = cs->end_popped;
  /* With manual checkpoints the application must have checkpointed the
   * last record it was given before the shard counts as finished. */
  kn_pos_t last = cs->delivered;
  int has_last = cs->has_delivered;
  pthread_mutex_unlock(&kc->mu);
  if (!ready) return;
  pthread_mutex_lock(&kc->lease_mu);
  if (!cs->held || cs->shard_end_written) {
    pthread_mutex_unlock(&kc->lease_mu);
    return;
  }
  if (!kc->cfg.auto_checkpoint && has_last && after_ckpt(cs, &last)) {
    pthread_mutex_unlock(&kc->lease_mu);
    return; /* kn_consumer_checkpoint() calls us again */
  }
  kn_error_t *err =
      write_ckpt_locked(kc, cs, KN_CKPT_SHARD_END, 0, NULL, 0, NULL, 0);
  if (!err) {
    cs->shard_end_written = 1;
    int64_t counter = 0;
    err = ST(kc)->release(kc->ls, cs->id, cs->counter, kc->worker_id, &counter);
    cs->held = 0;
  }
  pthread_mutex_unlock(&kc->lease_mu);
  if (err) {
    int cond = is_conditional(err);
    kn_warn(&kc->log, "COORD", "shard %s: SHARD_END: %s", cs->id,
            kn_error_string(err));
    kn_error_destroy(err);
    if (cond) kn_coord_lost(kc, cs, KN_ERR__LEASE_LOST);
    return;
  }
  kn_info(&kc->log, "COORD", "shard %s finished: SHARD_END checkpointed",
          cs->id);
  pthread_mutex_lock(&kc->mu);
  cs->state = KN_CS_DONE;
  cs->fencing_token = -1;
  pthread_mutex_unlock(&kc->mu);
}

/* ---- cleanup ---- */

static int started(const kn_lease_t *l) {
  return l && l->checkpoint &&
         (is_seq(l->checkpoint) || strcmp(l->checkpoint, KN_CKPT_SHARD_END) == 0);
}

void kn_coord_cleanup(kn_consumer_t *kc) {
  kn_lease_t *v = NULL;
  size_t n = 0;
  kn_error_t *err = ST(kc)->list(kc->ls, &v, &n);
  if (err) {
    kn_error_destroy(err);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    const kn_lease_t *l = &v[i];
    if (!kn_lease_is_shard_end(l) || l->n_children == 0) continue;
    int all = 1;
    for (size_t c = 0; c < l->n_children && all; c++)
      all = started(find_lease(v, n, l->children[c]));
    if (!all) continue;
    /* Every child has moved past its start: the parent's lease is no
     * longer needed to order them. */
    err = ST(kc)->remove(kc->ls, l->key, l->counter);
    if (!err)
      kn_info(&kc->log, "COORD", "removed the finished lease of shard %s",
              l->key);
    kn_error_destroy(err);
  }
  kn_lease_array_free(v, n);
}

void kn_coord_release_all(kn_consumer_t *kc) {
  kn_cshard_t **v;
  size_t n = held_shards(kc, &v);
  for (size_t i = 0; i < n; i++) kn_reader_stop(kc, v[i]);
  for (size_t i = 0; i < n; i++) {
    kn_cshard_t *cs = v[i];
    pthread_mutex_lock(&kc->mu);
    kn_pos_t p = cs->processed;
    int has = cs->has_processed && kc->cfg.auto_checkpoint;
    int end = cs->end_popped;
    pthread_mutex_unlock(&kc->mu);
    if (end) {
      kn_coord_shard_done(kc, cs);
    } else if (has) {
      kn_error_t *err = kn_coord_checkpoint(kc, cs, &p, NULL, 0, 0);
      if (err) kn_warn(&kc->log, "COORD", "%s", kn_error_string(err));
      kn_error_destroy(err);
    }
    pthread_mutex_lock(&kc->lease_mu);
    if (cs->held) {
      int64_t counter = 0;
      kn_error_t *err = ST(kc)->release(kc->ls, cs->id, cs->counter,
                                        kc->worker_id, &counter);
      if (err)
        kn_warn(&kc->log, "COORD", "shard %s: release: %s", cs->id,
                kn_error_string(err));
      else
        kn_info(&kc->log, "COORD", "released shard %s", cs->id);
      kn_error_destroy(err);
      cs->held = 0;
    }
    pthread_mutex_unlock(&kc->lease_mu);
    pthread_mutex_lock(&kc->mu);
    if (cs->state != KN_CS_DONE) {
      kn_app_event_locked(kc, KN_APP_EV_LOST, cs->id, 0, KN_ERR__DESTROY,
                          NULL, 0);
      cs->fencing_token = -1;
    }
    pthread_mutex_unlock(&kc->mu);
  }
  free(v);
}
