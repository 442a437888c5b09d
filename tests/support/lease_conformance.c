#include "lease_conformance.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "lease/lease.h"

/* ---- helpers ---- */

static const char *msg_of(const kn_error_t *e) {
  return e ? kn_error_string(e) : "success";
}

static kn_err_t code_of(const kn_error_t *e) {
  return e ? kn_error_code(e) : KN_ERR_NO_ERROR;
}

#define OK(expr)                                          \
  do {                                                    \
    kn_error_t *ok_e_ = (expr);                           \
    KT_CHECK_MSG(!ok_e_, "%s: %s", label, msg_of(ok_e_)); \
    kn_error_destroy(ok_e_);                              \
  } while (0)

#define FAILS(expr, code)                                               \
  do {                                                                  \
    kn_error_t *f_e_ = (expr);                                          \
    KT_CHECK_MSG(code_of(f_e_) == (code), "%s: want %s, got %s", label, \
                 kn_err2name(code), msg_of(f_e_));                      \
    kn_error_destroy(f_e_);                                             \
  } while (0)

#define CCF KN_ERR_CONDITIONAL_CHECK_FAILED

static const char *label = "";

static int streq0(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* A free lease at TRIM_HORIZON with two parents and a hash range. */
static void base_lease(kn_lease_t *l, char *key) {
  static char *parents[] = {"shardId-000000000001", "shardId-000000000002"};
  memset(l, 0, sizeof(*l));
  l->key = key;
  l->checkpoint = KN_CKPT_TRIM_HORIZON;
  l->parents = parents;
  l->n_parents = 2;
  l->hash_start = "0";
  l->hash_end = "340282366920938463463374607431768211455";
}

/* Fresh lease named prefix-suffix (stored in key), created free. */
static int make(kn_lease_store_t *ls, const char *prefix, const char *suffix,
                char *key, size_t size) {
  kn_lease_t l;
  snprintf(key, size, "%s-%s", prefix, suffix);
  base_lease(&l, key);
  kn_error_t *e = ls->ops->create(ls, &l);
  KT_CHECK_MSG(!e, "%s: create %s: %s", label, key, msg_of(e));
  kn_error_destroy(e);
  return e ? -1 : 0;
}

/* Reads key; 0 or -1 (a failed check recorded). */
static int get(kn_lease_store_t *ls, const char *key, kn_lease_t *l) {
  kn_error_t *e = ls->ops->get(ls, key, l);
  KT_CHECK_MSG(!e, "%s: get %s: %s", label, key, msg_of(e));
  kn_error_destroy(e);
  return e ? -1 : 0;
}

/* A renewal that expects no hand-off to be asked for. */
static kn_error_t *renew_(kn_lease_store_t *ls, const char *key,
                          int64_t counter, const char *owner, int64_t *c) {
  char *to = NULL;
  kn_error_t *e = ls->ops->renew(ls, key, counter, owner, c, &to);
  KT_CHECK_MSG(!to, "%s: renew %s: hand-off to %s", label, key, to);
  free(to);
  return e;
}

/* Where a store's answer must set a hand-off to NULL: not a string any
 * store could return. */
static char unset[] = "unset";

/* A checkpoint that expects no hand-off to be asked for (NULL set even on
 * error). */
static kn_error_t *checkpoint_(kn_lease_store_t *ls, const char *key,
                               int64_t counter, const char *owner,
                               const char *checkpoint, int64_t subseq,
                               const char *pending, int64_t pending_subseq,
                               const void *state, size_t state_len,
                               int64_t *c) {
  char *to = unset;
  kn_error_t *e =
      ls->ops->checkpoint(ls, key, counter, owner, checkpoint, subseq, pending,
                          pending_subseq, state, state_len, c, &to);
  KT_CHECK_MSG(!to, "%s: checkpoint %s: hand-off to %s", label, key, to);
  if (to != unset) free(to);
  return e;
}

/* ---- cases ---- */

static const char extra_json[] =
    "{\"throughputKBps\":{\"N\":\"12.5\"},\"workerZone\":{\"S\":\"w9\"}}";

static void case_create(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t l, got;
  snprintf(key, sizeof(key), "%s-create", prefix);
  base_lease(&l, key);
  l.counter = 7;
  l.owner_switches = 2;
  l.checkpoint = "49590338271490256608559692538361571095921575989136588898";
  l.checkpoint_subseq = 3;
  l.extra = (char *)extra_json;
  OK(ls->ops->create(ls, &l));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.key, key);
    KT_CHECK(got.owner == NULL);
    KT_CHECK_INT(got.counter, 7);
    KT_CHECK_INT(got.owner_switches, 2);
    KT_CHECK_STR(got.checkpoint, l.checkpoint);
    KT_CHECK_INT(got.checkpoint_subseq, 3);
    KT_CHECK(got.pending == NULL && got.pending_state == NULL);
    KT_CHECK_INT(got.n_parents, 2);
    if (got.n_parents == 2) {
      /* A set has no order. */
      int a = strcmp(got.parents[0], "shardId-000000000001") == 0;
      KT_CHECK_STR(got.parents[a ? 0 : 1], "shardId-000000000001");
      KT_CHECK_STR(got.parents[a ? 1 : 0], "shardId-000000000002");
    }
    KT_CHECK_INT(got.n_children, 0);
    KT_CHECK_STR(got.hash_start, "0");
    KT_CHECK_STR(got.hash_end, l.hash_end);
    KT_CHECK_STR(got.extra, extra_json);
    kn_lease_clear(&got);
  }
  /* Second create: the first one stands. */
  l.counter = 99;
  l.owner = "intruder";
  FAILS(ls->ops->create(ls, &l), CCF);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_INT(got.counter, 7);
    KT_CHECK(got.owner == NULL);
    kn_lease_clear(&got);
  }
  char missing[256];
  snprintf(missing, sizeof(missing), "%s-missing", prefix);
  FAILS(ls->ops->get(ls, missing, &got), KN_ERR__NOT_FOUND);
  KT_CHECK(got.key == NULL);
}

static void case_take(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c = -1;
  if (make(ls, prefix, "take", key, sizeof(key))) return;
  /* A stale counter loses, even for a free lease. */
  FAILS(ls->ops->take(ls, key, 5, NULL, "w1", &c), CCF);
  /* Free: taken, counter + 1, not a switch. */
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  KT_CHECK_INT(c, 1);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w1");
    KT_CHECK_INT(got.counter, 1);
    KT_CHECK_INT(got.owner_switches, 0);
    kn_lease_clear(&got);
  }
  /* No longer free. */
  FAILS(ls->ops->take(ls, key, 1, NULL, "w2", &c), CCF);
  /* Steal names the current owner; a wrong one loses. */
  FAILS(ls->ops->take(ls, key, 1, "w3", "w2", &c), CCF);
  OK(ls->ops->take(ls, key, 1, "w1", "w2", &c));
  KT_CHECK_INT(c, 2);
  OK(ls->ops->take(ls, key, 2, "w2", "w3", &c));
  KT_CHECK_INT(c, 3);
  /* Taking one's own lease again is no switch. */
  OK(ls->ops->take(ls, key, 3, "w3", "w3", &c));
  KT_CHECK_INT(c, 4);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w3");
    KT_CHECK_INT(got.counter, 4);
    KT_CHECK_INT(got.owner_switches, 2);
    kn_lease_clear(&got);
  }
  FAILS(ls->ops->take(ls, key, 4, "w3", NULL, &c), KN_ERR__INVALID_ARG);
  char missing[256];
  snprintf(missing, sizeof(missing), "%s-take-missing", prefix);
  FAILS(ls->ops->take(ls, missing, 0, NULL, "w1", &c), CCF);
}

static void case_renew(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c = -1;
  if (make(ls, prefix, "renew", key, sizeof(key))) return;
  FAILS(renew_(ls, key, 0, "w1", &c), CCF); /* free */
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  OK(renew_(ls, key, 1, "w1", &c));
  KT_CHECK_INT(c, 2);
  OK(renew_(ls, key, 2, "w1", &c));
  KT_CHECK_INT(c, 3);
  /* Stale.  (Not the counter just before: a DynamoDB store takes a
   * failed renew that finds its own result in place for a retry of a call
   * that succeeded, see store.h.) */
  FAILS(renew_(ls, key, 1, "w1", &c), CCF);
  FAILS(renew_(ls, key, 3, "w2", &c), CCF); /* not the owner */
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w1");
    KT_CHECK_INT(got.counter, 3);
    KT_CHECK_INT(got.owner_switches, 0);
    kn_lease_clear(&got);
  }
}

/* The mark of an owner whose heartbeats fail (store.h, mark): a renewal
 * that sets or removes ownerBeatFailing; a take or release removes it.
 * Stores without it (NULL) are not held to it. */
static void case_mark(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c = -1;
  if (!ls->ops->mark) return;
  if (make(ls, prefix, "mark", key, sizeof(key))) return;
  FAILS(ls->ops->mark(ls, key, 0, "w1", 1, &c), CCF); /* free */
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  FAILS(ls->ops->mark(ls, key, 1, "w2", 1, &c), CCF); /* not the owner */
  OK(ls->ops->mark(ls, key, 1, "w1", 1, &c));
  KT_CHECK_INT(c, 2);
  if (get(ls, key, &got) == 0) {
    KT_CHECK(got.beat_failing == 1);
    KT_CHECK_STR(got.owner, "w1");
    kn_lease_clear(&got);
  }
  OK(renew_(ls, key, 2, "w1", &c)); /* a renewal keeps it */
  if (get(ls, key, &got) == 0) {
    KT_CHECK(got.beat_failing == 1);
    kn_lease_clear(&got);
  }
  OK(ls->ops->mark(ls, key, 3, "w1", 0, &c));
  KT_CHECK_INT(c, 4);
  if (get(ls, key, &got) == 0) {
    KT_CHECK(got.beat_failing == 0);
    kn_lease_clear(&got);
  }
  /* Another owner's take, and a release, remove it. */
  OK(ls->ops->mark(ls, key, 4, "w1", 1, &c));
  OK(ls->ops->take(ls, key, 5, "w1", "w2", &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK(got.beat_failing == 0);
    kn_lease_clear(&got);
  }
  OK(ls->ops->mark(ls, key, 6, "w2", 1, &c));
  OK(ls->ops->release(ls, key, 7, "w2", &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK(got.beat_failing == 0 && got.owner == NULL);
    kn_lease_clear(&got);
  }
}

static void case_release(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c = -1;
  if (make(ls, prefix, "release", key, sizeof(key))) return;
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  FAILS(ls->ops->release(ls, key, 1, "w2", &c), CCF);
  FAILS(ls->ops->release(ls, key, 0, "w1", &c), CCF);
  OK(ls->ops->release(ls, key, 1, "w1", &c));
  KT_CHECK_INT(c, 2);
  if (get(ls, key, &got) == 0) {
    KT_CHECK(got.owner == NULL);
    KT_CHECK_INT(got.counter, 2);
    kn_lease_clear(&got);
  }
  FAILS(ls->ops->release(ls, key, 2, "w1", &c), CCF);
  /* Free again: a peer takes it at once. */
  OK(ls->ops->take(ls, key, 2, NULL, "w2", &c));
  KT_CHECK_INT(c, 3);
}

static void case_checkpoint(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c1 = -1, c2 = -1, c = -1;
  if (make(ls, prefix, "checkpoint", key, sizeof(key))) return;
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c1));
  OK(ls->ops->take(ls, key, c1, "w1", "w2", &c2));
  /* w1 lost the lease: its counter is stale and it is not the owner. */
  FAILS(checkpoint_(ls, key, c1, "w1", "100", 0, NULL, 0, NULL, 0, &c), CCF);
  FAILS(checkpoint_(ls, key, c2, "w1", "100", 0, NULL, 0, NULL, 0, &c), CCF);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.checkpoint, KN_CKPT_TRIM_HORIZON);
    KT_CHECK_INT(got.owner_switches, 1);
    kn_lease_clear(&got);
  }
  OK(checkpoint_(ls, key, c2, "w2", "100", 3, NULL, 0, NULL, 0, &c));
  KT_CHECK_INT(c, c2 + 1);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.checkpoint, "100");
    KT_CHECK_INT(got.checkpoint_subseq, 3);
    KT_CHECK_INT(got.owner_switches, 0);
    KT_CHECK_STR(got.owner, "w2");
    KT_CHECK_INT(got.counter, c2 + 1);
    kn_lease_clear(&got);
  }
  /* SHARD_END is a checkpoint like any other. */
  OK(checkpoint_(ls, key, c, "w2", KN_CKPT_SHARD_END, 0, NULL, 0, NULL, 0, &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK(kn_lease_is_shard_end(&got));
    KT_CHECK_INT(got.checkpoint_subseq, 0);
    kn_lease_clear(&got);
  }
}

static void case_pending(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c = -1;
  static const unsigned char state[] = {0, 1, 2, 0xfe, 0xff, '"', '\\', 0};
  if (make(ls, prefix, "pending", key, sizeof(key))) return;
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  OK(ls->ops->take(ls, key, c, "w1", "w2", &c)); /* one switch */
  OK(checkpoint_(ls, key, c, "w2", "150", 0, NULL, 0, NULL, 0, &c));
  /* Prepare: pending with state, checkpoint kept. */
  OK(checkpoint_(ls, key, c, "w2", NULL, 0, "200", 4, state, sizeof(state),
                 &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.checkpoint, "150");
    KT_CHECK_STR(got.pending, "200");
    KT_CHECK_INT(got.pending_subseq, 4);
    KT_CHECK_INT(got.pending_state_len, sizeof(state));
    KT_CHECK(got.pending_state &&
             memcmp(got.pending_state, state, sizeof(state)) == 0);
    KT_CHECK_INT(got.counter, c);
    kn_lease_clear(&got);
  }
  /* A new pending checkpoint without state drops the old state. */
  OK(checkpoint_(ls, key, c, "w2", NULL, 0, "210", 0, NULL, 0, &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.pending, "210");
    KT_CHECK(got.pending_state == NULL);
    kn_lease_clear(&got);
  }
  /* A stale worker cannot prepare either. */
  FAILS(checkpoint_(ls, key, c - 1, "w2", NULL, 0, "999", 0, NULL, 0, &c), CCF);
  /* Commit: checkpoint moves, pending and state cleared. */
  OK(checkpoint_(ls, key, c, "w2", "210", 0, NULL, 0, NULL, 0, &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.checkpoint, "210");
    KT_CHECK(got.pending == NULL);
    KT_CHECK_INT(got.pending_subseq, 0);
    KT_CHECK(got.pending_state == NULL);
    KT_CHECK_INT(got.pending_state_len, 0);
    kn_lease_clear(&got);
  }
}

static void case_children(kn_lease_store_t *ls, const char *prefix) {
  char key[256], missing[256];
  kn_lease_t got;
  int64_t c = -1;
  char *children[] = {"shardId-000000000007", "shardId-000000000008"};
  if (make(ls, prefix, "children", key, sizeof(key))) return;
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  OK(ls->ops->set_children(ls, key, children, 2));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_INT(got.n_children, 2);
    if (got.n_children == 2) {
      int a = strcmp(got.children[0], children[0]) == 0;
      KT_CHECK_STR(got.children[a ? 0 : 1], children[0]);
      KT_CHECK_STR(got.children[a ? 1 : 0], children[1]);
    }
    KT_CHECK_INT(got.counter, 1); /* not a fenced change */
    KT_CHECK_STR(got.owner, "w1");
    kn_lease_clear(&got);
  }
  OK(ls->ops->set_children(ls, key, children, 1));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_INT(got.n_children, 1);
    if (got.n_children == 1) KT_CHECK_STR(got.children[0], children[0]);
    kn_lease_clear(&got);
  }
  OK(ls->ops->set_children(ls, key, NULL, 0));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_INT(got.n_children, 0);
    KT_CHECK(got.children == NULL);
    kn_lease_clear(&got);
  }
  snprintf(missing, sizeof(missing), "%s-children-missing", prefix);
  FAILS(ls->ops->set_children(ls, missing, children, 2), CCF);
  FAILS(ls->ops->get(ls, missing, &got), KN_ERR__NOT_FOUND);
}

static void case_remove(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c = -1;
  if (make(ls, prefix, "remove", key, sizeof(key))) return;
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  FAILS(ls->ops->remove(ls, key, 0), CCF);
  if (get(ls, key, &got) == 0) kn_lease_clear(&got);
  OK(ls->ops->remove(ls, key, 1));
  FAILS(ls->ops->get(ls, key, &got), KN_ERR__NOT_FOUND);
  FAILS(ls->ops->remove(ls, key, 1), CCF);
  /* The key can be created again. */
  if (make(ls, prefix, "remove", key, sizeof(key)) == 0)
    OK(ls->ops->remove(ls, key, 0));
}

/* The KCL 3.x's graceful hand-off: asked for without moving the counter,
 * renewals and checkpoints of the checkpoint owner go on and say so, the
 * owner passes the lease on; a take or a release ends it. */
static void case_handoff(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c = -1;
  char *to = NULL;
  if (make(ls, prefix, "handoff", key, sizeof(key))) return;
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  FAILS(ls->ops->handoff(ls, key, 0, "w1", "w2"), CCF); /* stale */
  FAILS(ls->ops->handoff(ls, key, 1, "w3", "w2"), CCF); /* not the owner */
  OK(ls->ops->handoff(ls, key, 1, "w1", "w2"));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w2");
    KT_CHECK_STR(got.checkpoint_owner, "w1");
    KT_CHECK_INT(got.counter, 1);
    kn_lease_clear(&got);
  }
  FAILS(ls->ops->handoff(ls, key, 1, "w2", "w3"), CCF); /* under way */
  OK(ls->ops->renew(ls, key, 1, "w1", &c, &to));
  KT_CHECK_INT(c, 2);
  KT_CHECK_STR(to, "w2");
  free(to);
  to = NULL;
  FAILS(ls->ops->renew(ls, key, 2, "w2", &c, &to), CCF); /* not yet its */
  KT_CHECK(to == NULL);
  OK(ls->ops->checkpoint(ls, key, 2, "w1", "7", 1, NULL, 0, NULL, 0, &c, &to));
  KT_CHECK_INT(c, 3);
  KT_CHECK_STR(to, "w2");
  free(to);
  to = NULL;
  FAILS(ls->ops->handoff_done(ls, key, 3, "w2", &c), CCF);
  FAILS(ls->ops->handoff_done(ls, key, 2, "w1", &c), CCF);
  OK(ls->ops->handoff_done(ls, key, 3, "w1", &c));
  KT_CHECK_INT(c, 4);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w2");
    KT_CHECK(got.checkpoint_owner == NULL);
    KT_CHECK_STR(got.checkpoint, "7");
    KT_CHECK_INT(got.checkpoint_subseq, 1);
    KT_CHECK_INT(got.owner_switches, 1);
    kn_lease_clear(&got);
  }
  FAILS(renew_(ls, key, 4, "w1", &c), CCF);
  OK(ls->ops->take(ls, key, 4, "w2", "w2", &c));
  KT_CHECK_INT(c, 5);
  OK(renew_(ls, key, 5, "w2", &c));
  /* A take ends a hand-off under way (the asked worker gave no answer). */
  OK(ls->ops->handoff(ls, key, 6, "w2", "w3"));
  OK(ls->ops->take(ls, key, 6, "w3", "w3", &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w3");
    KT_CHECK(got.checkpoint_owner == NULL);
    kn_lease_clear(&got);
  }
  /* So does a release by the checkpoint owner. */
  OK(ls->ops->handoff(ls, key, 7, "w3", "w4"));
  OK(ls->ops->release(ls, key, 7, "w3", &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK(got.owner == NULL);
    KT_CHECK(got.checkpoint_owner == NULL);
    KT_CHECK_INT(got.counter, 8);
    kn_lease_clear(&got);
  }
}

/* A busy lease checkpoints instead of renewing, so a checkpoint of the
 * actual owner tells of a hand-off asked for as a renewal does. */
static void case_checkpoint_handoff(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t got;
  int64_t c = -1;
  char *to = NULL;
  if (make(ls, prefix, "ckpt-handoff", key, sizeof(key))) return;
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  /* No hand-off: NULL. */
  OK(checkpoint_(ls, key, c, "w1", "10", 0, NULL, 0, NULL, 0, &c));
  KT_CHECK_INT(c, 2);
  OK(ls->ops->handoff(ls, key, c, "w1", "w2"));
  /* During the hand-off: the checkpoint owner's checkpoints succeed and
   * name the asking worker, a plain one and a prepared one alike. */
  to = unset;
  OK(ls->ops->checkpoint(ls, key, c, "w1", "20", 2, NULL, 0, NULL, 0, &c, &to));
  KT_CHECK_INT(c, 3);
  KT_CHECK_STR(to, "w2");
  if (to != unset) free(to);
  to = unset;
  OK(ls->ops->checkpoint(ls, key, c, "w1", NULL, 0, "30", 0, "st", 2, &c, &to));
  KT_CHECK_INT(c, 4);
  KT_CHECK_STR(to, "w2");
  if (to != unset) free(to);
  /* The asking worker may not write yet. */
  FAILS(checkpoint_(ls, key, c, "w2", "25", 0, NULL, 0, NULL, 0, &c), CCF);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w2");
    KT_CHECK_STR(got.checkpoint_owner, "w1");
    KT_CHECK_STR(got.checkpoint, "20");
    KT_CHECK_INT(got.checkpoint_subseq, 2);
    KT_CHECK_STR(got.pending, "30");
    KT_CHECK_INT(got.counter, 4);
    kn_lease_clear(&got);
  }
  OK(ls->ops->handoff_done(ls, key, c, "w1", &c));
  KT_CHECK_INT(c, 5);
  /* Passed on: the old owner's checkpoint fails its condition, with the
   * counter it had and with the new one. */
  FAILS(checkpoint_(ls, key, 4, "w1", "40", 0, NULL, 0, NULL, 0, &c), CCF);
  FAILS(checkpoint_(ls, key, 5, "w1", "40", 0, NULL, 0, NULL, 0, &c), CCF);
  /* The new owner's checkpoints go on, with no hand-off to tell of. */
  OK(checkpoint_(ls, key, 5, "w2", "40", 0, NULL, 0, NULL, 0, &c));
  KT_CHECK_INT(c, 6);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w2");
    KT_CHECK(got.checkpoint_owner == NULL);
    KT_CHECK_STR(got.checkpoint, "40");
    KT_CHECK(got.pending == NULL);
    KT_CHECK_INT(got.counter, 6);
    kn_lease_clear(&got);
  }
}

/* What every store refuses before it looks at the table: a lease without
 * a key, a change without an owner, a hand-off without either owner.
 * Nothing changes. */
static void case_bad_args(kn_lease_store_t *ls, const char *prefix) {
  char key[256], empty[] = "";
  kn_lease_t l, got;
  int64_t c = -1;
  char *to = unset;
  base_lease(&l, empty);
  FAILS(ls->ops->create(ls, &l), KN_ERR__INVALID_ARG);
  if (make(ls, prefix, "bad-args", key, sizeof(key))) return;
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  FAILS(ls->ops->renew(ls, key, 1, NULL, &c, &to), KN_ERR__INVALID_ARG);
  KT_CHECK(to == NULL);
  to = unset;
  FAILS(
      ls->ops->checkpoint(ls, key, 1, NULL, "5", 0, NULL, 0, NULL, 0, &c, &to),
      KN_ERR__INVALID_ARG);
  KT_CHECK(to == NULL);
  FAILS(ls->ops->release(ls, key, 1, NULL, &c), KN_ERR__INVALID_ARG);
  FAILS(ls->ops->handoff(ls, key, 1, NULL, "w2"), KN_ERR__INVALID_ARG);
  FAILS(ls->ops->handoff(ls, key, 1, "w1", NULL), KN_ERR__INVALID_ARG);
  FAILS(ls->ops->handoff_done(ls, key, 1, NULL, &c), KN_ERR__INVALID_ARG);
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.owner, "w1");
    KT_CHECK(got.checkpoint_owner == NULL);
    KT_CHECK_STR(got.checkpoint, KN_CKPT_TRIM_HORIZON);
    KT_CHECK_INT(got.counter, 1);
    kn_lease_clear(&got);
  }
}

/* Attributes other KCL versions wrote survive every change. */
static void case_extra_kept(kn_lease_store_t *ls, const char *prefix) {
  char key[256];
  kn_lease_t l, got;
  int64_t c = -1;
  static char *kids[] = {"shardId-000000000009"};
  snprintf(key, sizeof(key), "%s-extra", prefix);
  base_lease(&l, key);
  l.extra = (char *)extra_json;
  OK(ls->ops->create(ls, &l));
  OK(ls->ops->take(ls, key, 0, NULL, "w1", &c));
  OK(renew_(ls, key, c, "w1", &c));
  OK(checkpoint_(ls, key, c, "w1", NULL, 0, "5", 0, "s", 1, &c));
  OK(checkpoint_(ls, key, c, "w1", "5", 0, NULL, 0, NULL, 0, &c));
  OK(ls->ops->set_children(ls, key, kids, 1));
  OK(ls->ops->take(ls, key, c, "w1", "w2", &c));
  OK(ls->ops->release(ls, key, c, "w2", &c));
  if (get(ls, key, &got) == 0) {
    KT_CHECK_STR(got.extra, extra_json);
    KT_CHECK_INT(got.counter, 6);
    kn_lease_clear(&got);
  }
}

static int has_prefix(const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}

static void case_list(kn_lease_store_t *ls, const char *prefix, int many) {
  char key[300], lp[256];
  int made = 0;
  snprintf(lp, sizeof(lp), "%s-list-", prefix);
  for (int i = 0; i < many; i++) {
    kn_lease_t l;
    snprintf(key, sizeof(key), "%s%05d", lp, i);
    base_lease(&l, key);
    l.counter = i;
    l.owner = (i % 3) ? "w1" : NULL;
    kn_error_t *e = ls->ops->create(ls, &l);
    if (!e)
      made++;
    else if (made == i)
      KT_CHECK_MSG(!e, "%s: create %s: %s", label, key, msg_of(e));
    kn_error_destroy(e);
  }
  KT_CHECK_INT(made, many);
  kn_lease_t *v = NULL;
  size_t n = 0;
  kn_error_t *e = ls->ops->list(ls, &v, &n);
  KT_CHECK_MSG(!e, "%s: list: %s", label, msg_of(e));
  kn_error_destroy(e);
  int found = 0, right = 0;
  char *seen = calloc((size_t)many + 1, 1);
  for (size_t i = 0; i < n; i++) {
    if (!has_prefix(v[i].key, lp)) continue;
    int idx = atoi(v[i].key + strlen(lp));
    found++;
    if (idx >= 0 && idx < many && seen && !seen[idx] && v[i].counter == idx &&
        streq0(v[i].owner, (idx % 3) ? "w1" : NULL) &&
        streq0(v[i].checkpoint, KN_CKPT_TRIM_HORIZON) && v[i].n_parents == 2) {
      seen[idx] = 1;
      right++;
    }
  }
  free(seen);
  KT_CHECK_INT(found, many);
  KT_CHECK_INT(right, many);
  kn_lease_array_free(v, n);
}

/* ---- membership ---- */

/* The member named worker in m, or NULL. */
static const kn_member_t *member(const kn_members_t *m, const char *worker) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->v[i].worker, worker) == 0) return &m->v[i];
  return NULL;
}

/* A heartbeat that must succeed; 0 or -1 (a failed check recorded, m
 * zeroed). */
static int beat_(kn_lease_store_t *ls, const char *worker, int64_t beat,
                 int64_t leases, int64_t bump, char *const *forget,
                 size_t n_forget, kn_members_t *m) {
  m->n = 99; /* zeroed by the call */
  kn_error_t *e = ls->ops->heartbeat(ls, worker, 0, beat, leases, bump, forget,
                                     n_forget, m);
  KT_CHECK_MSG(!e, "%s: heartbeat %s: %s", label, worker, msg_of(e));
  kn_error_destroy(e);
  if (e) {
    KT_CHECK(m->n == 0 && m->v == NULL);
    return -1;
  }
  /* Sorted by worker id, each once. */
  for (size_t i = 1; i < m->n; i++)
    KT_CHECK_MSG(strcmp(m->v[i - 1].worker, m->v[i].worker) < 0,
                 "%s: members out of order: %s, %s", label, m->v[i - 1].worker,
                 m->v[i].worker);
  return 0;
}

/* Checks that worker is a member with beat and leases. */
static void is_member(const kn_members_t *m, const char *worker, int64_t beat,
                      int64_t leases) {
  const kn_member_t *x = member(m, worker);
  KT_CHECK_MSG(x != NULL, "%s: %s is not a member", label, worker);
  if (!x) return;
  KT_CHECK_INT(x->beat, beat);
  KT_CHECK_INT(x->leases, leases);
}

static void case_members(const kn_lc_target_t *t, kn_lease_store_t *ls,
                         const char *prefix) {
  if (!ls->ops->heartbeat) {
    KT_CHECK_MSG(0, "%s: no heartbeat", label);
    return;
  }
  /* Worker ids that sort in another order than they join in. */
  char wa[256], wb[256], wc[256];
  snprintf(wa, sizeof(wa), "%s-worker-b", prefix);
  snprintf(wb, sizeof(wb), "%s-worker-a", prefix);
  snprintf(wc, sizeof(wc), "%s-worker-c", prefix);
  kn_error_t *e = NULL;
  kn_lease_store_t *other = t->open(t->opaque, &e);
  KT_CHECK_MSG(other, "%s: open: %s", label, msg_of(e));
  kn_error_destroy(e);
  if (!other) return;
  kn_members_t m, m2;
  /* The first heartbeat makes the member. */
  if (beat_(ls, wa, 1, 0, 0, NULL, 0, &m)) goto out;
  is_member(&m, wa, 1, 0);
  int64_t epoch = m.epoch;
  kn_members_clear(&m);
  /* Two workers (two handles) see each other. */
  if (beat_(other, wb, 5, 2, 0, NULL, 0, &m)) goto out;
  is_member(&m, wa, 1, 0);
  is_member(&m, wb, 5, 2);
  KT_CHECK_INT(m.epoch, epoch);
  kn_members_clear(&m);
  /* Beat and leases change; bump adds to the epoch, 0 leaves it. */
  if (beat_(ls, wa, 2, 3, 1, NULL, 0, &m)) goto out;
  is_member(&m, wa, 2, 3);
  is_member(&m, wb, 5, 2);
  KT_CHECK_INT(m.epoch, epoch + 1);
  kn_members_clear(&m);
  if (beat_(other, wb, 6, 1, 3, NULL, 0, &m)) goto out;
  is_member(&m, wb, 6, 1);
  KT_CHECK_INT(m.epoch, epoch + 4);
  kn_members_clear(&m);
  if (beat_(other, wb, 7, 1, 0, NULL, 0, &m)) goto out;
  KT_CHECK_INT(m.epoch, epoch + 4);
  kn_members_clear(&m);
  /* Forgetting another worker removes it; forgetting oneself, or a worker
   * that is no member, or one named twice, does nothing more. */
  char *forget[] = {wa, wc, "no-such-worker", wa};
  if (beat_(ls, wc, 1, 0, 0, forget, 4, &m)) goto out;
  KT_CHECK(member(&m, wa) == NULL);
  is_member(&m, wb, 7, 1);
  is_member(&m, wc, 1, 0);
  KT_CHECK_INT(m.epoch, epoch + 4);
  /* A copy is deep and equal; clearing zeroes. */
  KT_CHECK(kn_members_copy(&m2, &m) == 0);
  KT_CHECK_INT(m2.n, m.n);
  KT_CHECK_INT(m2.epoch, m.epoch);
  for (size_t i = 0; i < m.n && i < m2.n; i++) {
    KT_CHECK_STR(m2.v[i].worker, m.v[i].worker);
    KT_CHECK(m2.v[i].worker != m.v[i].worker);
    KT_CHECK_INT(m2.v[i].beat, m.v[i].beat);
    KT_CHECK_INT(m2.v[i].leases, m.v[i].leases);
  }
  kn_members_clear(&m);
  KT_CHECK(m.v == NULL && m.n == 0 && m.epoch == 0);
  kn_members_clear(&m2);
  kn_members_clear(NULL);
  /* The forgotten worker comes back with its next heartbeat. */
  if (beat_(ls, wa, 9, 0, 0, NULL, 0, &m)) goto out;
  is_member(&m, wa, 9, 0);
  KT_CHECK_INT(m.n >= 3, 1);
  kn_members_clear(&m);
  /* No worker id: refused. */
  e = ls->ops->heartbeat(ls, "", 0, 1, 0, 0, NULL, 0, &m);
  KT_CHECK_INT(code_of(e), KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
  /* Leave one member of this run behind, not three. */
  char *gone[] = {wa, wb};
  if (beat_(other, wc, 2, 0, 0, gone, 2, &m)) goto out;
  KT_CHECK(member(&m, wa) == NULL && member(&m, wb) == NULL);
  /* The read returns what the last heartbeat left, and writes nothing. */
  if (ls->ops->members) {
    for (int i = 0; i < 2; i++) {
      e = ls->ops->members(ls, &m2);
      KT_CHECK_MSG(!e, "%s: members: %s", label, msg_of(e));
      kn_error_destroy(e);
      KT_CHECK_INT(m2.n, m.n);
      KT_CHECK_INT(m2.epoch, m.epoch);
      for (size_t k = 0; k < m.n && k < m2.n; k++) {
        KT_CHECK_STR(m2.v[k].worker, m.v[k].worker);
        KT_CHECK_INT(m2.v[k].beat, m.v[k].beat);
        KT_CHECK_INT(m2.v[k].leases, m.v[k].leases);
      }
      kn_members_clear(&m2);
    }
  }
  kn_members_clear(&m);
out:
  kn_lease_store_destroy(other);
}

/* ---- concurrent takers ---- */

typedef struct race {
  const kn_lc_target_t *t;
  const char *key;
  pthread_barrier_t start, done;
  int64_t counter;    /* the counter every taker uses this round */
  char old_owner[32]; /* "" when free */
  int wins, losses, errors;
  int winner;
  int64_t new_counter;
  pthread_mutex_t lock;
} race_t;

typedef struct taker {
  race_t *r;
  int id;
  kn_lease_store_t *ls;
} taker_t;

static void *taker_main(void *arg) {
  taker_t *tk = arg;
  race_t *r = tk->r;
  char me[32];
  snprintf(me, sizeof(me), "taker-%d", tk->id);
  for (int round = 0; round < r->t->rounds; round++) {
    pthread_barrier_wait(&r->start);
    int64_t c = -1;
    kn_error_t *e =
        tk->ls->ops->take(tk->ls, r->key, r->counter,
                          r->old_owner[0] ? r->old_owner : NULL, me, &c);
    pthread_mutex_lock(&r->lock);
    if (!e) {
      r->wins++;
      r->winner = tk->id;
      r->new_counter = c;
    } else if (kn_error_code(e) == CCF) {
      r->losses++;
    } else {
      r->errors++;
      fprintf(stderr, "%s: taker %d: %s\n", label, tk->id, msg_of(e));
    }
    pthread_mutex_unlock(&r->lock);
    kn_error_destroy(e);
    pthread_barrier_wait(&r->done);
    /* The main thread sets up the next round between the barriers. */
    pthread_barrier_wait(&r->done);
  }
  return NULL;
}

/* Membership items (stores with publish): a heartbeat answers its own
 * item; publish writes the digest and forgets there; leave removes one
 * entry; members merges every item, each entry with its item. */
static void case_items(kn_lease_store_t *ls, const char *prefix) {
  if (!ls->ops->publish) return;
  KT_CHECK_MSG(ls->ops->leave != NULL, "%s: publish without leave", label);
  if (!ls->ops->leave) return;
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = prefix; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  int b = 1 + (int)(h % (KN_MEMBERS_BUCKETS_MAX - 2));
  char wa[256], wb[256];
  snprintf(wa, sizeof(wa), "%s-item-a", prefix);
  snprintf(wb, sizeof(wb), "%s-item-b", prefix);
  kn_members_t m;
  kn_error_t *e = ls->ops->heartbeat(ls, wa, b, 5, 2, 0, NULL, 0, &m);
  KT_CHECK_MSG(!e, "%s: heartbeat in item %d: %s", label, b, msg_of(e));
  kn_error_destroy(e);
  for (size_t i = 0; i < m.n; i++) KT_CHECK_INT(m.v[i].bucket, b);
  KT_CHECK(member(&m, wa) != NULL);
  int64_t epoch = m.epoch;
  kn_members_clear(&m);
  e = ls->ops->heartbeat(ls, wb, b, 7, 1, 0, NULL, 0, &m);
  kn_error_destroy(e);
  kn_members_clear(&m);
  char *forget[1] = {wb};
  e = ls->ops->publish(ls, b, "nb=2 epoch=1 seq=3 max=2", forget, 1);
  KT_CHECK_MSG(!e, "%s: publish: %s", label, msg_of(e));
  kn_error_destroy(e);
  e = ls->ops->heartbeat(ls, wa, b, 6, 2, 0, NULL, 0, &m);
  KT_CHECK_MSG(!e, "%s: heartbeat: %s", label, msg_of(e));
  kn_error_destroy(e);
  KT_CHECK_STR(m.digest ? m.digest : "", "nb=2 epoch=1 seq=3 max=2");
  KT_CHECK(member(&m, wb) == NULL);
  is_member(&m, wa, 6, 2);
  KT_CHECK_INT(m.epoch, epoch);
  kn_members_clear(&m);
  /* A publish into an item nobody beats in yet makes it, with an epoch. */
  int empty = b + 1;
  e = ls->ops->publish(ls, empty, "nb=2 epoch=1 seq=4 max=2", NULL, 0);
  KT_CHECK_MSG(!e, "%s: publish into a new item: %s", label, msg_of(e));
  kn_error_destroy(e);
  e = ls->ops->heartbeat(ls, wb, empty, 1, 0, 0, NULL, 0, &m);
  KT_CHECK_MSG(!e, "%s: heartbeat after publish: %s", label, msg_of(e));
  kn_error_destroy(e);
  KT_CHECK_STR(m.digest ? m.digest : "", "nb=2 epoch=1 seq=4 max=2");
  kn_members_clear(&m);
  /* Every item merged: wa in b, wb in b + 1, each once. */
  e = ls->ops->members(ls, &m);
  KT_CHECK_MSG(!e, "%s: members: %s", label, msg_of(e));
  kn_error_destroy(e);
  const kn_member_t *x = member(&m, wa), *y = member(&m, wb);
  KT_CHECK(x && x->bucket == b);
  KT_CHECK(y && y->bucket == empty);
  kn_members_clear(&m);
  /* wa leaves its item. */
  e = ls->ops->leave(ls, wa, b);
  KT_CHECK_MSG(!e, "%s: leave: %s", label, msg_of(e));
  kn_error_destroy(e);
  e = ls->ops->members(ls, &m);
  kn_error_destroy(e);
  KT_CHECK(member(&m, wa) == NULL);
  kn_members_clear(&m);
  /* An item number out of range is refused before any call. */
  e = ls->ops->heartbeat(ls, wa, KN_MEMBERS_BUCKETS_MAX, 1, 0, 0, NULL, 0, &m);
  KT_CHECK_INT(kn_error_code(e), KN_ERR__INVALID_ARG);
  kn_error_destroy(e);
  kn_members_clear(&m);
}

static void case_race(const kn_lc_target_t *t, kn_lease_store_t *ls,
                      const char *prefix) {
  char key[256];
  int n = t->threads;
  if (n < 2 || t->rounds < 1) return;
  if (make(ls, prefix, "race", key, sizeof(key))) return;
  race_t r;
  memset(&r, 0, sizeof(r));
  r.t = t;
  r.key = key;
  pthread_mutex_init(&r.lock, NULL);
  pthread_barrier_init(&r.start, NULL, (unsigned)n + 1);
  pthread_barrier_init(&r.done, NULL, (unsigned)n + 1);
  taker_t *tk = calloc((size_t)n, sizeof(*tk));
  pthread_t *th = calloc((size_t)n, sizeof(*th));
  int opened = 0;
  for (int i = 0; tk && th && i < n; i++) {
    kn_error_t *e = NULL;
    tk[i].r = &r;
    tk[i].id = i;
    tk[i].ls = t->open(t->opaque, &e);
    KT_CHECK_MSG(tk[i].ls, "%s: open: %s", label, msg_of(e));
    kn_error_destroy(e);
    if (!tk[i].ls) break;
    opened++;
  }
  if (opened == n) {
    for (int i = 0; i < n; i++)
      pthread_create(&th[i], NULL, taker_main, &tk[i]);
    int bad_rounds = 0;
    for (int round = 0; round < t->rounds; round++) {
      r.wins = r.losses = r.errors = 0;
      pthread_barrier_wait(&r.start);
      pthread_barrier_wait(&r.done);
      if (r.wins != 1 || r.losses != n - 1 || r.errors) {
        if (bad_rounds++ < 5)
          fprintf(stderr, "%s: round %d: %d wins, %d losses, %d errors\n",
                  label, round, r.wins, r.losses, r.errors);
      }
      /* The store must agree with the one winner; the next round starts
       * from what it holds, everyone stealing from the owner. */
      kn_lease_t got;
      if (get(ls, key, &got) == 0) {
        char want[32];
        snprintf(want, sizeof(want), "taker-%d", r.winner);
        if (r.wins == 1 &&
            (!streq0(got.owner, want) || got.counter != r.counter + 1 ||
             r.new_counter != r.counter + 1))
          bad_rounds++;
        r.counter = got.counter;
        snprintf(r.old_owner, sizeof(r.old_owner), "%s",
                 got.owner ? got.owner : "");
        kn_lease_clear(&got);
      }
      pthread_barrier_wait(&r.done);
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    KT_CHECK_MSG(bad_rounds == 0,
                 "%s: %d of %d rounds without exactly one "
                 "winner",
                 label, bad_rounds, t->rounds);
  }
  for (int i = 0; i < opened; i++) kn_lease_store_destroy(tk[i].ls);
  free(tk);
  free(th);
  pthread_barrier_destroy(&r.start);
  pthread_barrier_destroy(&r.done);
  pthread_mutex_destroy(&r.lock);
}

/* ---- running ---- */

int kn_lc_run_race(const kn_lc_target_t *t, const char *prefix, int *checks) {
  int f0 = kt_failures, c0 = kt_checks;
  kn_error_t *e = NULL;
  label = t->label;
  kn_lease_store_t *ls = t->open(t->opaque, &e);
  KT_CHECK_MSG(ls, "%s: open: %s", label, msg_of(e));
  kn_error_destroy(e);
  if (ls) {
    case_race(t, ls, prefix);
    kn_lease_store_destroy(ls);
  }
  *checks += kt_checks - c0;
  return kt_failures - f0;
}

int kn_lc_run(const kn_lc_target_t *t, const char *prefix, int *checks) {
  int f0 = kt_failures, c0 = kt_checks;
  kn_error_t *e = NULL;
  label = t->label;
  kn_lease_store_t *ls = t->open(t->opaque, &e);
  KT_CHECK_MSG(ls, "%s: open: %s", label, msg_of(e));
  kn_error_destroy(e);
  if (ls) {
    OK(ls->ops->ensure_table(ls));
    OK(ls->ops->ensure_table(ls)); /* idempotent */
#define RUN(call)                                                           \
  do {                                                                      \
    int before_ = kt_failures;                                              \
    call;                                                                   \
    fprintf(stderr, "%s %s %s\n", kt_failures == before_ ? "ok  " : "FAIL", \
            label, #call);                                                  \
  } while (0)
    RUN(case_create(ls, prefix));
    RUN(case_take(ls, prefix));
    RUN(case_renew(ls, prefix));
    RUN(case_release(ls, prefix));
    RUN(case_mark(ls, prefix));
    RUN(case_checkpoint(ls, prefix));
    RUN(case_pending(ls, prefix));
    RUN(case_children(ls, prefix));
    RUN(case_remove(ls, prefix));
    RUN(case_handoff(ls, prefix));
    RUN(case_checkpoint_handoff(ls, prefix));
    RUN(case_extra_kept(ls, prefix));
    RUN(case_bad_args(ls, prefix));
    RUN(case_list(ls, prefix, t->many));
    RUN(case_members(t, ls, prefix));
    RUN(case_items(ls, prefix));
    RUN(case_race(t, ls, prefix));
#undef RUN
    kn_lease_store_destroy(ls);
  }
  *checks += kt_checks - c0;
  return kt_failures - f0;
}
