/* Enhanced fan-out consumer operations of kn_client_t. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kinesis/client_int.h"
#include "kinesis/decode.h"
#include "kinesis/encode.h"
#include "util/pager.h"

#define NEED(cond, fn, what) \
  if (!(cond)) return kn_client_arg_error(fn, what)

/* A consumer is named by stream ARN and name, or by its own ARN. */
static int named(const char *stream_arn, const char *name,
                 const char *consumer_arn) {
  return (consumer_arn && *consumer_arn) ||
         (stream_arn && *stream_arn && name && *name);
}

static kn_error_t *consumer_call(kn_client_t *kc, const char *action,
                                 const char *stream_arn, const char *name,
                                 const char *consumer_arn,
                                 kn_stream_consumer_t **out) {
  kn_buf_t req = KN_BUF_INIT, resp;
  int rc = kn_enc_stream_consumer(&req, consumer_arn ? NULL : stream_arn,
                                  consumer_arn ? NULL : name, consumer_arn);
  kn_error_t *err = kn_client_call(kc, action, rc, &req, &resp);
  if (!err && out) err = kn_decode_stream_consumer(resp.p, resp.len, out);
  kn_buf_free(&req);
  kn_buf_free(&resp);
  return err;
}

kn_error_t *kn_register_stream_consumer(kn_client_t *kc, const char *stream_arn,
                                        const char *name,
                                        kn_stream_consumer_t **out) {
  NEED(out, "kn_register_stream_consumer", "no output");
  *out = NULL;
  NEED(kc && stream_arn && *stream_arn && name && *name,
       "kn_register_stream_consumer", "no stream ARN or consumer name");
  return consumer_call(kc, "RegisterStreamConsumer", stream_arn, name, NULL,
                       out);
}

kn_error_t *kn_describe_stream_consumer(kn_client_t *kc, const char *stream_arn,
                                        const char *name,
                                        const char *consumer_arn,
                                        kn_stream_consumer_t **out) {
  NEED(out, "kn_describe_stream_consumer", "no output");
  *out = NULL;
  NEED(kc && named(stream_arn, name, consumer_arn),
       "kn_describe_stream_consumer",
       "needs a stream ARN and a name, or a consumer ARN");
  return consumer_call(kc, "DescribeStreamConsumer", stream_arn, name,
                       consumer_arn, out);
}

kn_error_t *kn_deregister_stream_consumer(kn_client_t *kc,
                                          const char *stream_arn,
                                          const char *name,
                                          const char *consumer_arn) {
  NEED(kc && named(stream_arn, name, consumer_arn),
       "kn_deregister_stream_consumer",
       "needs a stream ARN and a name, or a consumer ARN");
  return consumer_call(kc, "DeregisterStreamConsumer", stream_arn, name,
                       consumer_arn, NULL);
}

kn_error_t *kn_list_stream_consumers(kn_client_t *kc, const char *stream_arn,
                                     kn_stream_consumer_list_t **out) {
  NEED(out, "kn_list_stream_consumers", "no output");
  *out = NULL;
  NEED(kc && stream_arn && *stream_arn, "kn_list_stream_consumers",
       "no stream ARN");
  kn_stream_consumer_list_t *l = kn_stream_consumer_list_new();
  if (!l)
    return kn_error_new(KN_ERR__NOMEM, "ListStreamConsumers: out of memory");
  kn_buf_t req = KN_BUF_INIT, resp = KN_BUF_INIT;
  char *token = NULL;
  kn_error_t *err = NULL;
  kn_pager_t pager = {0};
  for (;;) {
    int rc = kn_enc_list_stream_consumers(&req, stream_arn, token);
    err = kn_client_call(kc, "ListStreamConsumers", rc, &req, &resp);
    if (err) break;
    size_t before = l->n;
    char *next = NULL;
    err = kn_decode_list_stream_consumers(resp.p, resp.len, l, &next);
    kn_buf_free(&resp);
    if (err) break;
    /* Some servers hand out a token even on the last page (then the next
     * page is empty) or repeat one: stop on either. */
    free(token);
    token = next;
    int pr = kn_pager_next_str(&pager, token);
    if ((err = kn_pager_error(&pager, pr, "ListStreamConsumers"))) break;
    if (!token || l->n == before || pr == KN_PAGER_REPEAT) break;
  }
  kn_pager_free(&pager);
  free(token);
  kn_buf_free(&req);
  if (err) {
    kn_stream_consumer_list_destroy(l);
    return err;
  }
  *out = l;
  return NULL;
}
