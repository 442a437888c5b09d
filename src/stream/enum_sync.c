/* The enumerator's only I/O: listing the stream's shards on the caller's
 * thread (kn_list_shards pages with NextToken alone after the first). */
#include "core/error.h"
#include "stream/enum_int.h"

kn_error_t *kn_enumerator_sync(kn_enumerator_t *en, kn_client_t *client,
                               const char *stream, int64_t now_ms) {
  kn_shard_list_t *list = NULL;
  kn_error_t *err =
      kn_list_shards(client, stream, KN_SHARD_FILTER_NONE, NULL, 0, &list);
  if (err) return kn_error_prefix(err, "stream \"%s\": ListShards", stream);
  kn_err_t e = kn_enumerator_shards(en, list, now_ms);
  kn_shard_list_destroy(list);
  return e ? kn_error_new(e, "out of memory") : NULL;
}
