/* A scripted Kinesis on loopback (kt_httpd.h) for tests of the consumer:
 * the action a request names, JSON answers, records, a stream of one open
 * shard, and the configuration of a consumer in lease mode reading it. */
#ifndef KT_KINESIS_H
#define KT_KINESIS_H

#include <stdio.h>
#include <string.h>

#include "kn/conf.h"
#include "kt_aws.h"
#include "kt_httpd.h"

#define KT_MAX_KEY "340282366920938463463374607431768211455"

/* A record of sequence number seq (a string literal): data "hi", key k. */
#define KT_REC(seq)                              \
  "{\"SequenceNumber\":\"" seq                   \
  "\",\"Data\":\"aGk=\",\"PartitionKey\":\"k\"," \
  "\"ApproximateArrivalTimestamp\":1.5E9}"

/* The answer to ListShards: shardId-0, open, over every hash key. */
#define KT_ONE_SHARD                                           \
  "{\"Shards\":[{\"ShardId\":\"shardId-0\",\"HashKeyRange\":{" \
  "\"StartingHashKey\":\"0\",\"EndingHashKey\":\"" KT_MAX_KEY  \
  "\"},"                                                       \
  "\"SequenceNumberRange\":{\"StartingSequenceNumber\":\"1\"}}]}"

/* The Kinesis action of a request ("" if none), in a buffer of the
 * calling thread. */
static KT_UNUSED const char *kt_kinesis_action(const kt_httpd_req_t *req) {
  const char *t = strstr(req->head, "X-Amz-Target: Kinesis_20131202.");
  static __thread char action[64];
  action[0] = '\0';
  if (t) sscanf(t + 31, "%63[A-Za-z]", action);
  return action;
}

/* A JSON answer of the given status into out; its length. */
static KT_UNUSED size_t kt_kinesis_json(char *out, size_t size, int status,
                                        const char *body) {
  return kt_httpd_resp(out, size, status,
                       "Content-Type: application/x-amz-json-1.1\r\n", body);
}

/* The configuration of a consumer of stream "s" at the scripted server on
 * port, after kt_aws_reset(): static keys, quick lease and checkpoint
 * intervals, manual checkpoints; then the n extra properties (which may
 * set the same names again).  The caller destroys it. */
static KT_UNUSED kn_conf_t *kt_kinesis_consumer_conf(
    int port, const char *const (*extra)[2], size_t n) {
  kt_aws_reset();
  kn_conf_t *conf = kn_conf_new();
  char ep[64], err[256];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", port);
  const char *props[][2] = {{"endpoint", ep},
                            {"region", "us-east-1"},
                            {"aws.access.key.id", "AKID"},
                            {"aws.secret.access.key", "secret"},
                            {"stream", "s"},
                            {"lease.duration.ms", "20000"},
                            {"lease.renew.interval.ms", "300"},
                            {"lease.take.interval.ms", "200"},
                            {"checkpoint.auto", "false"},
                            {"checkpoint.interval.ms", "100"},
                            {"poll.idle.ms", "50"},
                            {"retry.backoff.ms", "10"},
                            {"log.level", "3"}};
  for (size_t i = 0; i < sizeof props / sizeof props[0]; i++)
    if (kn_conf_set(conf, props[i][0], props[i][1], err, sizeof err))
      fprintf(stderr, "%s: %s\n", props[i][0], err);
  for (size_t i = 0; i < n; i++)
    if (kn_conf_set(conf, extra[i][0], extra[i][1], err, sizeof err))
      fprintf(stderr, "%s: %s\n", extra[i][0], err);
  return conf;
}

#endif
