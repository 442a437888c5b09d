/* Starting a consumer without a lease store from a reader snapshot, and
 * taking one (kn_consumer_snapshot). */
#include "consumer/start_positions.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kn/base64.h"
#include "util/base64.h"

#define PROP "start.positions"

kn_error_t *kn_start_positions_load(kn_consumer_t *kc, kn_snapshot_t **out) {
  *out = NULL;
  const char *b64 = kn_conf_str(kc->conf, PROP);
  if (!b64 || !*b64) return NULL;
  size_t n = strlen(b64);
  unsigned char *bytes = malloc(kn_base64_decoded_max(n));
  if (!bytes) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  long len = kn_base64_decode(bytes, b64, n);
  kn_snapshot_t *s = NULL;
  kn_error_t *err = len < 0 ? kn_error_new(KN_ERR__CONF, "not base64")
                            : kn_snapshot_decode(bytes, (size_t)len, &s);
  free(bytes);
  if (err && kn_error_code(err) != KN_ERR__NOMEM) {
    /* Bad configuration, whatever is wrong with the bytes. */
    kn_error_t *conf = kn_error_new(KN_ERR__CONF, "property %s: %s", PROP,
                                    kn_error_string(err));
    kn_error_destroy(err);
    return conf;
  }
  if (err) return err;
  if (kn_snapshot_count(s) == 0) {
    kn_snapshot_destroy(s);
    s = NULL;
  }
  *out = s;
  return NULL;
}

void kn_start_position_to_pos(const kn_position_t *p, kn_pos_t *out) {
  memset(out, 0, sizeof(*out));
  switch (p->kind) {
    case KN_POSITION_LATEST:
      out->type = KN_ITER_LATEST;
      break;
    case KN_POSITION_AT_TIMESTAMP:
      out->type = KN_ITER_AT_TIMESTAMP;
      out->timestamp_ms = p->timestamp_ms;
      break;
    case KN_POSITION_AT_SEQUENCE:
      kn_pos_set_seq(out, KN_ITER_AT_SEQUENCE_NUMBER, p->seq, 0, 0);
      break;
    case KN_POSITION_AFTER:
      /* Every user record of seq at or below subseq is skipped; the
       * largest sub-sequence number means the whole record. */
      if (p->subseq == UINT64_MAX)
        kn_pos_set_seq(out, KN_ITER_AFTER_SEQUENCE_NUMBER, p->seq, 0, 0);
      else
        kn_pos_set_seq(out, KN_ITER_AT_SEQUENCE_NUMBER, p->seq, p->subseq, 1);
      break;
    default:
      out->type = KN_ITER_TRIM_HORIZON;
      break;
  }
}

void kn_start_pos_to_position(const kn_pos_t *p, kn_position_t *out) {
  switch (p->type) {
    case KN_ITER_LATEST:
      kn_position_latest(out);
      break;
    case KN_ITER_AT_TIMESTAMP:
      kn_position_at_timestamp(out, p->timestamp_ms);
      break;
    case KN_ITER_AT_SEQUENCE_NUMBER:
      if (p->has_subseq ? kn_position_after(out, p->seq, p->subseq)
                        : kn_position_at(out, p->seq))
        kn_position_trim_horizon(out); /* not a sequence number: never */
      break;
    case KN_ITER_AFTER_SEQUENCE_NUMBER:
      if (kn_position_after(out, p->seq, UINT64_MAX))
        kn_position_trim_horizon(out);
      break;
    default:
      kn_position_trim_horizon(out);
      break;
  }
}

void kn_start_positions_apply(const kn_snapshot_t *s, kn_cshard_t *cs) {
  if (!s) return;
  long i = kn_snapshot_find(s, cs->id);
  if (i < 0) {
    cs->start.type = KN_ITER_TRIM_HORIZON;
  } else if (kn_snapshot_is_finished(s, (size_t)i)) {
    cs->state = KN_CS_DONE;
  } else {
    kn_start_position_to_pos(kn_snapshot_position(s, (size_t)i), &cs->start);
  }
}

/* Children of cs among the shards the consumer knows (mu held). */
static kn_err_t set_finished(kn_consumer_t *kc, kn_snapshot_t *s,
                             const kn_cshard_t *cs) {
  const char **kids = calloc(kc->n_shards ? kc->n_shards : 1, sizeof(char *));
  if (!kids) return KN_ERR__NOMEM;
  size_t n = 0;
  for (size_t i = 0; i < kc->n_shards; i++) {
    const kn_cshard_t *c = kc->shards[i];
    if ((c->parent && strcmp(c->parent, cs->id) == 0) ||
        (c->adjacent_parent && strcmp(c->adjacent_parent, cs->id) == 0))
      kids[n++] = c->id;
  }
  kn_err_t err = kn_snapshot_set_finished(s, cs->id, kids, n);
  free(kids);
  return err;
}

kn_error_t *kn_consumer_snapshot(kn_consumer_t *kc, kn_snapshot_t **out) {
  *out = NULL;
  if (!kc) return kn_error_new(KN_ERR__INVALID_ARG, "no consumer");
  const char *store = kn_conf_str(kc->conf, "lease.store");
  if (store && strcmp(store, "none") != 0)
    return kn_error_new(KN_ERR__STATE,
                        "positions are in the lease store, not in snapshots");
  kn_snapshot_t *s = kn_snapshot_new();
  if (!s) return kn_error_new(KN_ERR__NOMEM, "out of memory");
  kn_err_t err = KN_ERR_NO_ERROR;
  pthread_mutex_lock(&kc->mu);
  for (size_t i = 0; i < kc->n_shards && !err; i++) {
    const kn_cshard_t *cs = kc->shards[i];
    if (cs->state == KN_CS_STOPPED) continue;
    if (cs->state == KN_CS_DONE) {
      err = set_finished(kc, s, cs);
      continue;
    }
    kn_position_t p;
    kn_start_pos_to_position(cs->has_delivered ? &cs->delivered : &cs->start,
                             &p);
    err = kn_snapshot_set_position(s, cs->id, &p);
  }
  pthread_mutex_unlock(&kc->mu);
  if (err) {
    kn_snapshot_destroy(s);
    return kn_error_new(err, "cannot take the snapshot: %s", kn_err2str(err));
  }
  *out = s;
  return NULL;
}

kn_err_t kn_conf_set_start_snapshot(kn_conf_t *conf, const kn_snapshot_t *s,
                                    char *errstr, size_t errstr_size) {
  void *bytes = NULL;
  size_t n = 0;
  kn_error_t *e = kn_snapshot_encode(s, &bytes, &n);
  if (e) {
    snprintf(errstr, errstr_size, "%s", kn_error_string(e));
    kn_err_t code = kn_error_code(e);
    kn_error_destroy(e);
    return code;
  }
  char *b64 = malloc(kn_base64_encoded_len(n) + 1);
  if (!b64) {
    free(bytes);
    snprintf(errstr, errstr_size, "out of memory");
    return KN_ERR__NOMEM;
  }
  b64[kn_base64_encode(b64, bytes, n)] = '\0';
  free(bytes);
  kn_conf_res_t r = kn_conf_set(conf, PROP, b64, errstr, errstr_size);
  free(b64);
  return r == KN_CONF_OK ? KN_ERR_NO_ERROR : KN_ERR__CONF;
}
