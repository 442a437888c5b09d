/* The producer's metrics (docs/METRICS.md) and liveness. */
#include <string.h>

#include "core/metrics.h"
#include "producer/producer_int.h"

size_t kn_producer_metrics(kn_producer_t *kp, char *buf, size_t size) {
  if (!kp) return 0;
  uint64_t c[KN_PC__COUNT], throttled;
  size_t q_records, q_bytes;
  kn_hist_t h;
  pthread_mutex_lock(&kp->mu);
  memcpy(c, kp->counters, sizeof(c));
  throttled = kp->throttled;
  q_records = kp->outq_records;
  q_bytes = kp->outq_bytes;
  h = kp->put_hist;
  pthread_mutex_unlock(&kp->mu);

  kn_buf_t b = KN_BUF_INIT;
  const char *base[] = {"stream", kp->stream, NULL};
  kn_mw_t w;
  kn_mw_init(&w, &b, base);
  const struct {
    kn_metric_id_t id;
    uint64_t v;
  } plain[] = {
      {KN_M_P_SENT, c[KN_PC_SENT]},
      {KN_M_P_DELIVERED, c[KN_PC_DELIVERED]},
      {KN_M_P_FAILED, c[KN_PC_FAILED]},
      {KN_M_P_RETRIED, c[KN_PC_RETRIES]},
      {KN_M_P_THROTTLED, throttled},
      {KN_M_P_BYTES, c[KN_PC_BYTES]},
      {KN_M_P_CALLS, c[KN_PC_CALLS]},
      {KN_M_P_QUEUE_RECORDS, q_records},
      {KN_M_P_QUEUE_BYTES, q_bytes},
      {KN_M_P_IN_FLIGHT, c[KN_PC_IN_FLIGHT]},
      {KN_M_P_MAP_REFRESHES, c[KN_PC_MAP_REFRESHES]},
  };
  for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
    kn_mw_family(&w, plain[i].id);
    kn_mw_u64(&w, NULL, NULL, plain[i].v);
  }
  kn_mw_family(&w, KN_M_P_PUT_DURATION);
  kn_mw_hist(&w, NULL, NULL, &h);
  size_t n = w.rc ? 0 : kn_metrics_copy_out(&b, buf, size);
  if (!n && size) buf[0] = '\0';
  kn_mw_free(&w);
  kn_buf_free(&b);
  return n;
}

int kn_producer_alive(kn_producer_t *kp, int *ready) {
  if (!kp) return 0;
  pthread_mutex_lock(&kp->mu);
  int alive = !kp->closed && !kp->closing;
  if (ready) *ready = alive && kp->map_loaded;
  pthread_mutex_unlock(&kp->mu);
  return alive;
}
