/* Shard operations of kn_client_t: list, split, merge, update count. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/client_int.h"
#include "kinesis/decode.h"
#include "kinesis/encode.h"
#include "kinesis/hashkey.h"
#include "kinesis/shard.h"
#include "util/pager.h"

#define NEED(cond, fn, what) \
  if (!(cond)) return kn_client_arg_error(fn, what)

kn_error_t *kn_list_shards(kn_client_t *kc, const char *stream,
                           kn_shard_filter_type_t filter,
                           const char *filter_shard_id,
                           int64_t filter_timestamp_ms, kn_shard_list_t **out) {
  NEED(out, "kn_list_shards", "no output");
  *out = NULL;
  NEED(kc && stream && *stream, "kn_list_shards", "no stream name");
  NEED(filter != KN_SHARD_FILTER_AFTER_SHARD_ID || filter_shard_id,
       "kn_list_shards", "AFTER_SHARD_ID needs a shard id");
  kn_shard_list_t *l = kn_shard_list_new();
  if (!l) return kn_error_new(KN_ERR__NOMEM, "ListShards: out of memory");
  kn_buf_t req = KN_BUF_INIT, resp = KN_BUF_INIT;
  char *token = NULL;
  kn_error_t *err = NULL;
  kn_pager_t pager = {0};
  for (;;) {
    int rc = kn_enc_list_shards(&req, stream, filter, filter_shard_id,
                                filter_timestamp_ms, token);
    err = kn_client_call(kc, "ListShards", rc, &req, &resp);
    if (err) break;
    char *next = NULL;
    err = kn_decode_list_shards(resp.p, resp.len, l, &next);
    kn_buf_free(&resp);
    if (err) break;
    /* Some servers ignore MaxResults and never page, handing the token
     * back: a token seen before ends the listing. */
    free(token);
    token = next;
    int pr = kn_pager_next_str(&pager, token);
    if ((err = kn_pager_error(&pager, pr, "ListShards"))) break;
    if (!token || pr == KN_PAGER_REPEAT) break;
  }
  kn_pager_free(&pager);
  free(token);
  kn_buf_free(&req);
  if (err) {
    kn_shard_list_destroy(l);
    return err;
  }
  *out = l;
  return NULL;
}

/* The middle of the shard's range, from a fresh shard list. */
static kn_error_t *default_split_key(kn_client_t *kc, const char *stream,
                                     const char *shard_id, char *key) {
  kn_shard_list_t *l;
  kn_error_t *err =
      kn_list_shards(kc, stream, KN_SHARD_FILTER_NONE, NULL, 0, &l);
  if (err) return err;
  const kn_shard_t *s = kn_shard_list_find(l, shard_id);
  kn_u128_t mid;
  if (!s)
    err =
        kn_error_new(KN_ERR_RESOURCE_NOT_FOUND,
                     "SplitShard: no shard %s in stream %s", shard_id, stream);
  else if (kn_u128_midpoint(s->start, s->end, &mid))
    err =
        kn_error_new(KN_ERR__INVALID_ARG,
                     "SplitShard: shard %s holds a single hash key", shard_id);
  else
    kn_u128_format(mid, key);
  kn_shard_list_destroy(l);
  return err;
}

kn_error_t *kn_split_shard(kn_client_t *kc, const char *stream,
                           const char *shard_id,
                           const char *new_starting_hash_key) {
  NEED(kc && stream && *stream, "kn_split_shard", "no stream name");
  NEED(shard_id && *shard_id, "kn_split_shard", "no shard id");
  char key[KN_U128_DEC_BUFSZ];
  if (new_starting_hash_key) {
    kn_u128_t v;
    NEED(kn_u128_parse(new_starting_hash_key, strlen(new_starting_hash_key),
                       &v) == 0,
         "kn_split_shard", "the hash key is not a 128-bit decimal number");
    kn_u128_format(v, key);
  } else {
    kn_error_t *err = default_split_key(kc, stream, shard_id, key);
    if (err) return err;
  }
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_split_shard(&req, stream, shard_id, key);
  kn_error_t *err = kn_client_call(kc, "SplitShard", rc, &req, &resp);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}

kn_error_t *kn_merge_shards(kn_client_t *kc, const char *stream,
                            const char *shard_id,
                            const char *adjacent_shard_id) {
  NEED(kc && stream && *stream, "kn_merge_shards", "no stream name");
  NEED(shard_id && adjacent_shard_id, "kn_merge_shards", "no shard ids");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_merge_shards(&req, stream, shard_id, adjacent_shard_id);
  kn_error_t *err = kn_client_call(kc, "MergeShards", rc, &req, &resp);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}

kn_error_t *kn_update_shard_count(kn_client_t *kc, const char *stream,
                                  int target_shard_count) {
  NEED(kc && stream && *stream, "kn_update_shard_count", "no stream name");
  NEED(target_shard_count > 0, "kn_update_shard_count",
       "the target must be positive");
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_update_shard_count(&req, stream, target_shard_count);
  kn_error_t *err = kn_client_call(kc, "UpdateShardCount", rc, &req, &resp);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}
