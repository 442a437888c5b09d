/* The coordination core's queue of actions (ccore_queue.h). */
#include "consumer/ccore_queue.h"

#include <stdlib.h>
#include <string.h>

cc_act_t *kn_cc_q_push(cc_queue_t *q, kn_cc_op_t op) {
  cc_act_t *x = calloc(1, sizeof(*x));
  if (!x) {
    q->lost = 1;
    return NULL;
  }
  q->pushed++;
  x->q = q;
  x->a.op = op;
  x->a.tenure = -1;
  if (q->tail)
    q->tail->next = x;
  else
    q->head = x;
  q->tail = x;
  return x;
}

int kn_cc_q_own(cc_act_t *x, const char **dst, const char *s) {
  *dst = NULL;
  if (!s) return 0;
  for (size_t i = 0; i < sizeof(x->str) / sizeof(x->str[0]); i++) {
    if (x->str[i]) continue;
    if (!(x->str[i] = strdup(s))) break;
    *dst = x->str[i];
    return 0;
  }
  x->q->lost = 1;
  return -1;
}

int kn_cc_q_own_lease(cc_act_t *x, const kn_lease_t *l) {
  if (kn_lease_copy(&x->lease, l)) {
    x->q->lost = 1;
    return -1;
  }
  x->a.lease = &x->lease;
  return 0;
}

static void act_free(cc_act_t *x) {
  for (size_t i = 0; i < sizeof(x->str) / sizeof(x->str[0]); i++)
    free(x->str[i]);
  kn_lease_clear(&x->lease);
  for (size_t i = 0; i < x->n_children; i++) free(x->children[i]);
  free(x->children);
  free(x->state);
  free(x);
}

void kn_cc_q_retire(cc_queue_t *q) {
  while (q->retired) {
    cc_act_t *x = q->retired;
    q->retired = x->next;
    act_free(x);
  }
}

int kn_cc_q_pop(cc_queue_t *q, kn_cc_action_t *a) {
  kn_cc_q_retire(q);
  cc_act_t *x = q->head;
  if (!x) return 0;
  q->head = x->next;
  if (!q->head) q->tail = NULL;
  x->next = NULL;
  q->retired = x;
  *a = x->a;
  return 1;
}

void kn_cc_q_free(cc_queue_t *q) {
  kn_cc_q_retire(q);
  q->retired = q->head;
  q->head = q->tail = NULL;
  kn_cc_q_retire(q);
}
