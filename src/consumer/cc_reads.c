/* The coordination core's events from readers and the application
 * (cc_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/cc_int.h"
#include "kinesis/seqnum.h"

/* Moves a position (seq, *sub) forward to pos, never back. */
static void advance(char *seq, int64_t *sub, const kn_cc_pos_t *pos) {
  if (!pos || !pos->seq) return;
  if (seq[0] &&
      kn_seqpos_cmp(pos->seq, (uint64_t)pos->subseq, seq, (uint64_t)*sub) <= 0)
    return;
  cc_set_str(seq, pos->seq);
  *sub = pos->subseq;
}

static cc_lease_t *tenure_of(kn_cc_t *c, const char *key, int64_t tenure) {
  cc_lease_t *l = kn_cc_wr_find(c, key);
  if (!l || !l->reading || l->tenure != tenure) return NULL;
  return l;
}

void kn_cc_shard_ended(kn_cc_t *c, const char *key, int64_t tenure,
                       const kn_cc_shard_t *children, size_t n, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_lease_t *l = tenure_of(c, key, tenure);
  if (!l) {
    kn_cc_log(c, KN_CC_LOG_DEBUG,
              "shard %s: end reported for an ended tenure "
              "(%lld): ignored",
              key, (long long)tenure);
    return;
  }
  l->ended = 1;
  if (n > 0 && l->held) {
    cc_op_t *o = kn_cc_op_new(c, KN_CC_SET_CHILDREN, key, tenure, now);
    cc_act_t *x = o ? kn_cc_call(c, o) : NULL;
    if (x && (x->children = calloc(n, sizeof(char *)))) {
      for (size_t i = 0; i < n; i++)
        if ((x->children[x->n_children] = strdup(children[i].id)))
          x->n_children++;
      x->a.children = x->children;
      x->a.n_children = x->n_children;
    }
  }
  /* Leases for the children come from a sync now (ListShards also finds
   * them where the server sends no ChildShards). */
  kn_cc_sy_soon(c, now);
  kn_cc_wr_pump(c, l, now);
}

void kn_cc_shard_gone(kn_cc_t *c, const char *key, int64_t tenure,
                      int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_lease_t *l = tenure_of(c, key, tenure);
  if (!l) return;
  kn_cc_log(c, KN_CC_LOG_WARN,
            "shard %s: gone (past retention); treating it as "
            "read",
            key);
  l->ended = l->end_popped = 1;
  l->delivered[0] = '\0';
  kn_cc_sy_soon(c, now);
  kn_cc_wr_pump(c, l, now);
}

void kn_cc_shard_expired(kn_cc_t *c, const char *key, int64_t tenure,
                         int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_lease_t *l = tenure_of(c, key, tenure);
  if (!l) return;
  /* The reader judged the deadline (maybe one a renewal has moved since):
   * the tenure ends; a later take round takes the lease back. */
  kn_cc_wr_drop(c, l, KN_ERR__TIMED_OUT);
  kn_cc_maybe_closed(c);
  (void)now;
}

void kn_cc_delivered(kn_cc_t *c, const char *key, int64_t tenure,
                     const kn_cc_pos_t *pos, int end, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_lease_t *l = tenure_of(c, key, tenure);
  if (!l) return;
  advance(l->delivered, &l->delivered_sub, pos);
  if (end) l->end_popped = 1;
  kn_cc_wr_pump(c, l, now);
}

void kn_cc_processed(kn_cc_t *c, const char *key, int64_t tenure,
                     const kn_cc_pos_t *pos, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_lease_t *l = kn_cc_wr_find(c, key);
  if (!l || !l->held || l->tenure != tenure || !pos || !pos->seq) return;
  advance(l->processed, &l->processed_sub, pos);
  (void)now;
}

void kn_cc_checkpoint(kn_cc_t *c, const char *key, const kn_cc_pos_t *pos,
                      int prepare, const void *state, size_t state_len,
                      void *req, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_lease_t *l = kn_cc_wr_find(c, key);
  if (!l || !l->held) {
    char msg[256];
    snprintf(msg, sizeof(msg), "shard %s: this worker does not hold its lease",
             key);
    kn_cc_reply(c, req, KN_ERR__LEASE_LOST, msg);
    return;
  }
  cc_req_t *r = calloc(1, sizeof(*r));
  if (!r || !pos || !pos->seq || strlen(pos->seq) >= SEQ_CAP) {
    free(r);
    kn_cc_reply(c, req, r ? KN_ERR__INVALID_ARG : KN_ERR__NOMEM,
                r ? "bad sequence number" : "out of memory");
    return;
  }
  strcpy(r->seq, pos->seq);
  r->subseq = pos->subseq;
  r->prepare = prepare;
  r->req = req;
  if (state && state_len) {
    if (!(r->state = malloc(state_len))) {
      free(r);
      kn_cc_reply(c, req, KN_ERR__NOMEM, "out of memory");
      return;
    }
    memcpy(r->state, state, state_len);
    r->state_len = state_len;
  }
  if (l->reqs_tail)
    l->reqs_tail->next = r;
  else
    l->reqs = r;
  l->reqs_tail = r;
  kn_cc_wr_pump(c, l, now);
}

void kn_cc_yielded(kn_cc_t *c, const char *key, int64_t tenure,
                   const kn_cc_pos_t *pos, int64_t now) {
  kn_cc_q_retire(&c->q);
  cc_lease_t *l = kn_cc_wr_find(c, key);
  if (!l || !l->held || l->tenure != tenure || !l->handoff_to) return;
  advance(l->processed, &l->processed_sub, pos);
  l->yielded = 1;
  kn_cc_wr_pump(c, l, now);
}
