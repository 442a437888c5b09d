/* The coordination core's closing, gracefully (kn_cc_close) or on a
 * verdict (FATAL): stop reading, final writes, CLOSED (cc_int.h). */
#include "consumer/cc_int.h"

void kn_cc_maybe_closed(kn_cc_t *c) {
  if (!(c->closing || c->fatal) || c->closed_sent) return;
  for (size_t i = 0; i < c->wr.n_ls; i++)
    if (c->wr.ls[i]->held) return;
  if (kn_cc_writes_in_flight(c)) return;
  if (c->mb.on && c->mb.ok && !c->mb.close_beat &&
      (c->mb.bump_pending > 0 || c->mb.nb > 1)) {
    /* The others look at the leases let go now, not in a lease duration;
     * spread over items, the worker leaves its item, so that a leader
     * that stops is followed at once, not a lease duration later. */
    c->mb.close_beat = 1;
    kn_cc_mb_send(c, c->mb.hb_at);
    if (c->mb.hb_busy) return;
  }
  c->closed_sent = 1;
  kn_cc_q_push(&c->q, KN_CC_CLOSED);
}

static void wind_down(kn_cc_t *c, kn_err_t reason, int64_t now) {
  for (size_t i = 0; i < c->wr.n_ls; i++)
    kn_cc_wr_stop_reading(c, c->wr.ls[i], reason);
  kn_cc_wr_pump_all(c, now);
  kn_cc_maybe_closed(c);
}

/* The core cannot go on: FATAL, then it winds down as when closing. */
void kn_cc_go_fatal(kn_cc_t *c, kn_err_t code, const char *msg, int64_t now) {
  if (c->fatal || c->closing) return;
  c->fatal = 1;
  cc_act_t *x = kn_cc_q_push(&c->q, KN_CC_FATAL);
  if (x) {
    x->a.reason = code;
    kn_cc_q_own(x, &x->a.err_msg, msg);
  }
  wind_down(c, KN_ERR__FAIL, now);
}

void kn_cc_close(kn_cc_t *c, int64_t now_ms) {
  kn_cc_q_retire(&c->q);
  if (c->closing) {
    if (c->closed_sent) kn_cc_q_push(&c->q, KN_CC_CLOSED);
    return;
  }
  c->closing = 1;
  if (c->fatal && c->closed_sent) {
    kn_cc_q_push(&c->q, KN_CC_CLOSED);
    return;
  }
  wind_down(c, KN_ERR__DESTROY, now_ms);
}
