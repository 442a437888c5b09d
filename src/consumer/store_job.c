/* Lease-store jobs (store_job.h). */
#include "consumer/store_job.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static int dup_opt(char **dst, const char *src) {
  *dst = NULL;
  if (!src) return 0;
  *dst = strdup(src);
  return *dst ? 0 : -1;
}

kn_store_job_t *kn_store_job_new(const kn_cc_action_t *a) {
  kn_store_job_t *j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->op = a->op;
  j->id = a->id;
  j->tenure = a->tenure;
  j->counter = a->counter;
  j->steal = a->steal;
  j->mark = a->mark;
  j->subseq = a->subseq;
  j->pending_subseq = a->pending_subseq;
  j->beat = a->beat;
  j->n_held = a->leases;
  j->bump = a->bump;
  j->bucket = a->bucket;
  j->leave = a->op == KN_CC_HEARTBEAT ? a->leave : -1;
  j->publish_n = a->publish_n;
  j->roster = a->roster;
  j->probe = a->probe;
  int rc = dup_opt(&j->key, a->key);
  rc |= dup_opt(&j->old_owner, a->old_owner);
  if (a->op == KN_CC_CREATE && a->lease)
    rc |= kn_lease_copy(&j->lease, a->lease);
  if (a->op == KN_CC_CHECKPOINT) {
    rc |= dup_opt(&j->checkpoint, a->checkpoint);
    rc |= dup_opt(&j->pending, a->pending);
    if (a->state && a->state_len) {
      j->state = malloc(a->state_len);
      if (j->state) {
        memcpy(j->state, a->state, a->state_len);
        j->state_len = a->state_len;
      } else {
        rc = -1;
      }
    }
  }
  char *const *names = a->op == KN_CC_HEARTBEAT ? a->forget : a->children;
  size_t n_names = a->op == KN_CC_HEARTBEAT ? a->n_forget : a->n_children;
  if (a->op == KN_CC_HEARTBEAT) rc |= dup_opt(&j->digest, a->digest);
  if (a->op == KN_CC_HEARTBEAT && a->forget_bucket && n_names) {
    if ((j->forget_bucket = malloc(n_names * sizeof(int))))
      memcpy(j->forget_bucket, a->forget_bucket, n_names * sizeof(int));
    else
      rc = -1;
  }
  if ((a->op == KN_CC_SET_CHILDREN || a->op == KN_CC_HEARTBEAT) && n_names) {
    j->children = calloc(n_names, sizeof(char *));
    if (!j->children) rc = -1;
    for (size_t i = 0; j->children && i < n_names; i++) {
      rc |= dup_opt(&j->children[i], names[i]);
      j->n_children++;
    }
  }
  if (rc) {
    kn_store_job_free(j);
    return NULL;
  }
  return j;
}

kn_store_job_t *kn_store_job_stream_check(struct kn_cshard *cs,
                                          int64_t tenure) {
  kn_store_job_t *j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->stream_check = 1;
  j->op = KN_CC_LOG;
  j->cs = cs;
  j->tenure = tenure;
  return j;
}

kn_store_job_t *kn_store_job_efo_check(struct kn_cshard *cs, int64_t tenure,
                                       kn_error_t *why) {
  kn_store_job_t *j = calloc(1, sizeof(*j));
  if (!j) {
    kn_error_destroy(why);
    return NULL;
  }
  j->efo_check = 1;
  j->op = KN_CC_LOG;
  j->cs = cs;
  j->tenure = tenure;
  j->why = why;
  return j;
}

void kn_store_job_free(kn_store_job_t *j) {
  if (!j) return;
  kn_error_destroy(j->why);
  free(j->key);
  free(j->old_owner);
  kn_lease_clear(&j->lease);
  free(j->checkpoint);
  free(j->pending);
  free(j->state);
  for (size_t i = 0; i < j->n_children; i++) free(j->children[i]);
  free(j->children);
  kn_error_destroy(j->err);
  free(j->handoff_to);
  kn_members_clear(&j->members);
  kn_members_clear(&j->roster_m);
  free(j->digest);
  free(j->forget_bucket);
  kn_lease_clear(&j->got);
  kn_lease_array_free(j->leases, j->n_leases);
  kn_shard_list_destroy(j->list);
  free(j->shards);
  free(j);
}

kn_drive_result_t kn_store_job_result(const kn_store_job_t *j) {
  return (kn_drive_result_t){
      .id = j->id,
      .op = j->op,
      .err = j->err,
      .leases = j->leases,
      .n_leases = j->n_leases,
      .shards = j->shards,
      .n_shards = j->n_shards,
      .got = &j->got,
      .members = &j->members,
      .roster = j->has_roster ? &j->roster_m : NULL,
      .roster_refused = j->roster_refused,
      .new_counter = j->new_counter,
      .handoff_to = j->handoff_to,
      .sent_ms = j->sent_ms,
  };
}

int kn_store_job_view_shards(kn_store_job_t *j) {
  size_t n = kn_shard_list_count(j->list);
  j->shards = calloc(n ? n : 1, sizeof(*j->shards));
  if (!j->shards) return -1;
  for (size_t i = 0; i < n; i++) {
    const kn_shard_t *s = kn_shard_list_get(j->list, i);
    kn_cc_shard_t *c = &j->shards[i];
    c->id = kn_shard_id(s);
    c->parent = kn_shard_parent_id(s);
    c->adjacent = kn_shard_adjacent_parent_id(s);
    c->hash_start = kn_shard_hash_key_start(s);
    c->hash_end = kn_shard_hash_key_end(s);
    c->closed = !kn_shard_is_open(s);
  }
  j->n_shards = n;
  return 0;
}

/* The names to forget in item b (all of them without forget_bucket);
 * *n set.  NULL when none (or out of memory: they wait for the next). */
static char **forget_in(const kn_store_job_t *j, int b, size_t *n) {
  *n = 0;
  if (!j->n_children) return NULL;
  if (!j->forget_bucket)
    return b == j->bucket ? (*n = j->n_children, j->children) : NULL;
  char **v = calloc(j->n_children, sizeof(char *));
  for (size_t i = 0; v && i < j->n_children; i++)
    if (j->forget_bucket[i] == b) v[(*n)++] = j->children[i];
  if (!*n) {
    free(v);
    return NULL;
  }
  return v;
}

/* A heartbeat: the write, the item left, the digest published (its
 * failures wait for the next beat), the roster read. */
static kn_error_t *heartbeat(kn_lease_store_t *ls, const char *w,
                             kn_store_job_t *j) {
  const kn_lease_store_ops_t *o = ls->ops;
  if (!o->heartbeat)
    return kn_error_new(KN_ERR__UNSUPPORTED,
                        "this lease store keeps no membership");
  if (j->probe) { /* read, not written: the roster or the error */
    kn_error_t *e = o->members ? o->members(ls, &j->roster_m)
                               : kn_error_new(KN_ERR__UNSUPPORTED,
                                              "this lease store keeps no "
                                              "membership items");
    j->has_roster = e == NULL;
    j->roster_refused = e && !kn_error_is_retriable(e);
    kn_error_destroy(e);
    return NULL;
  }
  size_t n = 0;
  char **f = j->digest && j->forget_bucket ? NULL : forget_in(j, j->bucket, &n);
  kn_error_t *err = o->heartbeat(ls, w, j->bucket, j->beat, j->n_held, j->bump,
                                 f, n, &j->members);
  if (f != j->children) free(f);
  if (!err && j->leave >= 0 && o->leave) err = o->leave(ls, w, j->leave);
  for (int b = 0; !err && j->digest && o->publish && b < j->publish_n; b++) {
    f = forget_in(j, b, &n);
    kn_error_destroy(o->publish(ls, b, j->digest, f, n));
    if (f != j->children) free(f);
  }
  if (!err && j->roster && o->members) {
    kn_error_t *e = o->members(ls, &j->roster_m);
    j->has_roster = e == NULL;
    j->roster_refused = e && !kn_error_is_retriable(e);
    kn_error_destroy(e);
  }
  return err;
}

void kn_store_job_apply(kn_lease_store_t *ls, const char *w,
                        kn_store_job_t *j) {
  const kn_lease_store_ops_t *o = ls->ops;
  kn_error_t *err = NULL;
  switch (j->op) {
    case KN_CC_LIST_LEASES:
      err = o->list(ls, &j->leases, &j->n_leases);
      if (!err && j->roster && o->members) {
        kn_error_t *e = o->members(ls, &j->roster_m);
        j->has_roster = e == NULL;
        j->roster_refused = e && !kn_error_is_retriable(e);
        kn_error_destroy(e);
      }
      break;
    case KN_CC_CREATE:
      err = o->create(ls, &j->lease);
      break;
    case KN_CC_TAKE:
      err = o->take(ls, j->key, j->counter, j->old_owner, w, &j->new_counter);
      break;
    case KN_CC_RENEW:
      if (!j->mark)
        err = o->renew(ls, j->key, j->counter, w, &j->new_counter,
                       &j->handoff_to);
      else if (o->mark)
        err = o->mark(ls, j->key, j->counter, w, j->mark == 1, &j->new_counter);
      else
        err = kn_error_new(KN_ERR__UNSUPPORTED,
                           "this lease store keeps no ownerBeatFailing");
      break;
    case KN_CC_GET:
      err = o->get(ls, j->key, &j->got);
      break;
    case KN_CC_HANDOFF:
      err = o->handoff(ls, j->key, j->counter, j->old_owner, w);
      break;
    case KN_CC_HANDOFF_DONE:
      err = o->handoff_done(ls, j->key, j->counter, w, &j->new_counter);
      break;
    case KN_CC_CHECKPOINT:
      err = o->checkpoint(ls, j->key, j->counter, w, j->checkpoint, j->subseq,
                          j->pending, j->pending_subseq, j->state, j->state_len,
                          &j->new_counter, &j->handoff_to);
      break;
    case KN_CC_RELEASE:
      err = o->release(ls, j->key, j->counter, w, &j->new_counter);
      break;
    case KN_CC_REMOVE:
      err = o->remove(ls, j->key, j->counter);
      break;
    case KN_CC_SET_CHILDREN:
      err = o->set_children(ls, j->key, j->children, j->n_children);
      break;
    case KN_CC_HEARTBEAT:
      err = heartbeat(ls, w, j);
      break;
    default:
      err = kn_error_new(KN_ERR__FAIL, "not a store call: %s",
                         kn_cc_op_name(j->op));
      break;
  }
  /* The store's name once (most stores name themselves already); the
   * core says which call on which shard. */
  if (err && strncmp(kn_error_string(err), "lease store ", 12) != 0)
    err = kn_error_prefix(err, "lease store %s", ls->name);
  j->err = err;
}
