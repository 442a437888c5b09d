/* The coordination core's calls in flight, log lines and replies
 * (cc_int.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/cc_int.h"

const char *kn_cc_op_name(kn_cc_op_t op) {
  static const char *names[] = {
      "LIST_LEASES", "LIST_SHARDS",  "CREATE",    "TAKE",         "RENEW",
      "CHECKPOINT",  "RELEASE",      "REMOVE",    "SET_CHILDREN", "GET",
      "HANDOFF",     "HANDOFF_DONE", "HEARTBEAT", "START",        "STOP",
      "EXTEND",      "FENCE",        "DONE",      "YIELD",        "REPLY",
      "FATAL",       "CLOSED",       "LOG"};
  return (unsigned)op < sizeof(names) / sizeof(names[0]) ? names[op] : "?";
}

void kn_cc_log(kn_cc_t *c, int level, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  /* A line lost to a failed allocation is only a line: the core goes on. */
  int lost = c->q.lost;
  cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_LOG);
  if (x) {
    x->a.level = level;
    kn_cc_q_own(x, &x->a.err_msg, line);
  }
  c->q.lost = lost;
}

cc_op_t *kn_cc_op_new(kn_cc_t *c, kn_cc_op_t op, const char *key,
                      int64_t tenure, int64_t now) {
  if (c->n_ops == c->cap_ops) {
    size_t cap = c->cap_ops ? c->cap_ops * 2 : 16;
    cc_op_t **v = realloc(c->ops, cap * sizeof(*v));
    if (!v) return NULL;
    c->ops = v;
    c->cap_ops = cap;
  }
  cc_op_t *o = calloc(1, sizeof(*o));
  if (!o || (key && !(o->key = strdup(key)))) {
    free(o);
    return NULL;
  }
  o->id = ++c->next_id;
  o->op = op;
  o->tenure = tenure;
  o->emit_ms = now;
  c->ops[c->n_ops++] = o;
  return o;
}

/* Removes the op with id from the table and returns it (the caller frees
 * it with op_free), or NULL. */
cc_op_t *kn_cc_op_take(kn_cc_t *c, uint64_t id) {
  for (size_t i = 0; i < c->n_ops; i++) {
    if (c->ops[i]->id != id) continue;
    cc_op_t *o = c->ops[i];
    c->ops[i] = c->ops[--c->n_ops];
    return o;
  }
  return NULL;
}

void kn_cc_req_free(cc_req_t *r) {
  if (!r) return;
  free(r->state);
  free(r);
}

void kn_cc_op_free(cc_op_t *o) {
  if (!o) return;
  free(o->key);
  kn_lease_clear(&o->lease);
  kn_cc_req_free(o->req);
  free(o);
}

/* A store call for op o: the action carries its id. */
cc_act_t *kn_cc_call(kn_cc_t *c, cc_op_t *o) {
  cc_act_t *x = kn_cc_q_push(&c->q, o->op);
  if (!x) return NULL;
  x->a.id = o->id;
  x->a.tenure = o->tenure;
  x->a.leave = -1;
  /* Spread over items, a listing brings the roster too: its owners'
   * membership is judged by it (the leader observes every item). */
  if (o->op == KN_CC_LIST_LEASES)
    o->roster = x->a.roster = c->mb.on && (c->mb.nb > 1 || c->mb.was_spread) &&
                              (!kn_cc_mb_leader(c) || !c->mb.view_full);
  if (kn_cc_q_own(x, &x->a.key, o->key)) return NULL;
  return x;
}

void kn_cc_reply(kn_cc_t *c, void *req, kn_err_t code, const char *msg) {
  cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_REPLY);
  if (!x) return;
  x->a.req = req;
  x->a.reason = code;
  kn_cc_q_own(x, &x->a.err_msg, msg);
}

int kn_cc_in_flight(const kn_cc_t *c, kn_cc_op_t op, const char *key) {
  for (size_t i = 0; i < c->n_ops; i++)
    if (c->ops[i]->op == op && strcmp(c->ops[i]->key, key) == 0) return 1;
  return 0;
}

int kn_cc_take_in_flight(const kn_cc_t *c, const char *key) {
  return kn_cc_in_flight(c, KN_CC_TAKE, key) ||
         kn_cc_in_flight(c, KN_CC_HANDOFF, key);
}

int kn_cc_writes_in_flight(const kn_cc_t *c) {
  for (size_t i = 0; i < c->n_ops; i++) {
    kn_cc_op_t op = c->ops[i]->op;
    if (op != KN_CC_LIST_LEASES && op != KN_CC_LIST_SHARDS && op != KN_CC_GET)
      return 1;
  }
  return 0;
}
