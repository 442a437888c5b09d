#include "creds_hooks.h"

#include "aws/creds_provider.h"
#include "util/clock.h"

void kn_creds_provider_advance(kn_creds_provider_t *p, int64_t ms) {
  pthread_mutex_lock(&p->lock);
  p->mono_ahead_ms += ms;
  pthread_mutex_unlock(&p->lock);
}

void kn_creds_provider_freeze_clock(kn_creds_provider_t *p) {
  pthread_mutex_lock(&p->lock);
  if (!p->mono_frozen) p->mono_frozen_ms = kn_mono_ms();
  p->mono_frozen = 1;
  pthread_mutex_unlock(&p->lock);
}

uint64_t kn_creds_provider_fetches(kn_creds_provider_t *p) {
  pthread_mutex_lock(&p->lock);
  uint64_t n = p->done;
  pthread_mutex_unlock(&p->lock);
  return n;
}
