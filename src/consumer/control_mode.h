/* The two ways the control thread decides which shards to read: alone
 * (solo.c: every shard is ours) or with a lease store (driver.c: the
 * coordination core).  control.c runs one message loop for both; a mode
 * supplies what differs.  Every function runs on the control thread. */
#ifndef KN_CONSUMER_CONTROL_MODE_H
#define KN_CONSUMER_CONTROL_MODE_H

#include <stdint.h>

#include "consumer/consumer_int.h"

typedef struct kn_ctl_mode {
  /* The mode's state; NULL when it cannot start (kc->fatal is then set;
   * the loop still calls the others with NULL, which they accept). */
  void *(*start)(kn_consumer_t *kc);
  /* Every message, after the loop has handled FATAL and EFO_CHECK. */
  void (*handle)(void *st, kn_ctl_msg_t *m);
  /* When tick wants to run next (INT64_MAX: only on a message). */
  int64_t (*due)(void *st);
  void (*tick)(void *st);
  /* CLOSE came (also handed to handle); done: the loop may end. */
  void (*close)(void *st);
  int (*done)(void *st);
  /* After the loop: answers what is left and frees the state. */
  void (*finish)(void *st);
} kn_ctl_mode_t;

extern const kn_ctl_mode_t kn_solo_mode;  /* solo.c */
extern const kn_ctl_mode_t kn_lease_mode; /* driver.c */

#endif
