/* The coordination core's internals shared by its files: the action queue
 * and the calls in flight. */
#ifndef KN_CONSUMER_CCORE_INT_H
#define KN_CONSUMER_CCORE_INT_H

#include "consumer/ccore.h"

/* A queued action and the copies its pointers refer to (owned). */
typedef struct cc_act {
  struct cc_act *next;
  struct cc_queue *q; /* told when a copy fails */
  kn_cc_action_t a;
  char *str[4];
  kn_lease_t lease;
  char **children;
  size_t n_children;
  void *state;
} cc_act_t;

typedef struct cc_queue {
  cc_act_t *head, *tail;
  cc_act_t *retired; /* handed out by the last kn_cc_next */
  /* An action could not be queued, or queued without one of its copies:
   * the core cannot trust what it waits for (kn_cc_next). */
  int lost;
  uint64_t pushed; /* actions queued so far (the tick's self-check) */
} cc_queue_t;

/* A new action at the tail (tenure -1); NULL on out-of-memory (and
 * q->lost set). */
cc_act_t *kn_cc_q_push(cc_queue_t *q, kn_cc_op_t op);
/* A copy of s owned by the action (NULL stays NULL); -1 on
 * out-of-memory (and the queue's lost set). */
int kn_cc_q_own(cc_act_t *x, const char **dst, const char *s);
int kn_cc_q_own_lease(cc_act_t *x, const kn_lease_t *l);
int kn_cc_q_pop(cc_queue_t *q, kn_cc_action_t *a);
void kn_cc_q_retire(cc_queue_t *q);
void kn_cc_q_free(cc_queue_t *q);

#endif
