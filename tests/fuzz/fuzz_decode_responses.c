/* Fuzzes the decoders of the other Kinesis responses: the first byte picks
 * the decoder (PutRecords in place, the rest through jansson), the rest is
 * the body.  Any input must decode or fail with KN_ERR__BAD_MSG. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kinesis/decode.h"
#include "kinesis/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

static void check(kn_error_t *e) {
  if (e && kn_error_code(e) != KN_ERR__BAD_MSG &&
      kn_error_code(e) != KN_ERR__NOMEM)
    abort();
  kn_error_destroy(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned which = data[0] % 7;
  const char *body = (const char *)data + 1;
  size_t len = size - 1;
  char *tok = NULL;
  switch (which) {
    case 0: {
      char *copy = malloc(len + 1);
      if (!copy) return 0;
      memcpy(copy, body, len);
      copy[len] = '\0';
      kn_put_results_t *r = NULL;
      size_t n_sent = len % 4; /* the answer must match what was sent */
      check(kn_decode_put_records(copy, len, n_sent, &r));
      for (size_t i = 0; i < kn_put_results_count(r); i++) {
        const char *s = kn_put_results_error_code(r, i);
        sink += s ? strlen(s) + strlen(kn_put_results_error_message(r, i))
                  : strlen(kn_put_results_sequence_number(r, i)) +
                        strlen(kn_put_results_shard_id(r, i));
      }
      kn_put_results_destroy(r);
      break;
    }
    case 1: {
      kn_shard_list_t *l = kn_shard_list_new();
      check(kn_decode_list_shards(body, len, l, &tok));
      for (size_t i = 0; i < kn_shard_list_count(l); i++)
        sink += strlen(kn_shard_id(kn_shard_list_get(l, i)));
      kn_shard_list_destroy(l);
      break;
    }
    case 2: {
      kn_strlist_t *l = kn_strlist_new();
      int more;
      check(kn_decode_list_streams(body, len, l, &tok, &more));
      kn_strlist_destroy(l);
      break;
    }
    case 3: {
      kn_stream_summary_t *s = NULL;
      check(kn_decode_stream_summary(body, len, &s));
      kn_stream_summary_destroy(s);
      break;
    }
    case 4: {
      char *seq = NULL, *sh = NULL;
      check(kn_decode_put_record(body, len, &seq, &sh));
      free(seq);
      free(sh);
      check(kn_decode_shard_iterator(body, len, &tok));
      break;
    }
    case 5: {
      kn_stream_consumer_t *c = NULL;
      check(kn_decode_stream_consumer(body, len, &c));
      kn_stream_consumer_destroy(c);
      break;
    }
    default: {
      kn_stream_consumer_list_t *l = kn_stream_consumer_list_new();
      check(kn_decode_list_stream_consumers(body, len, l, &tok));
      kn_stream_consumer_list_destroy(l);
      break;
    }
  }
  free(tok);
  return 0;
}
