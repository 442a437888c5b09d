#include "kinesis/decode.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "util/json.h"
#include "util/str.h"

#define BAD(what, ...) \
  kn_error_new(KN_ERR__BAD_MSG, "malformed " what ": " __VA_ARGS__)
#define NOMEM(what) kn_error_new(KN_ERR__NOMEM, what ": out of memory")

/* NextToken as a malloc'ed copy, or NULL; -1 on out-of-memory. */
static int take_token(const json_t *doc, char **next_token) {
  const char *t = kn_json_str(doc, "NextToken");
  *next_token = NULL;
  if (!t || !*t) return 0;
  *next_token = strdup(t);
  return *next_token ? 0 : -1;
}

/* ---- ListShards ---- */

#define LS "ListShards response"

kn_error_t *kn_decode_list_shards(const char *body, size_t len,
                                  kn_shard_list_t *l, char **next_token) {
  json_t *doc;
  kn_error_t *err = kn_json_parse_object(body, len, LS, &doc);
  *next_token = NULL;
  if (err) return err;
  json_t *shards = json_object_get(doc, "Shards");
  if (shards && !json_is_array(shards) && !json_is_null(shards)) {
    err = BAD(LS, "Shards is not an array");
    goto out;
  }
  size_t i;
  json_t *s;
  json_array_foreach(shards, i, s) {
    json_t *hk = kn_json_obj(s, "HashKeyRange");
    json_t *sq = kn_json_obj(s, "SequenceNumberRange");
    kn_shard_desc_t d = {
        kn_json_str(s, "ShardId"),
        kn_json_str(s, "ParentShardId"),
        kn_json_str(s, "AdjacentParentShardId"),
        kn_json_str(hk, "StartingHashKey"),
        kn_json_str(hk, "EndingHashKey"),
        kn_json_str(sq, "StartingSequenceNumber"),
        kn_json_str(sq, "EndingSequenceNumber"),
    };
    int rc = json_is_object(s) ? kn_shard_list_add(l, &d) : -1;
    if (rc == -2) {
      err = NOMEM(LS);
      goto out;
    }
    if (rc) {
      err = BAD(LS, "shard %zu lacks ShardId or a valid HashKeyRange", i);
      goto out;
    }
  }
  if (take_token(doc, next_token)) err = NOMEM(LS);
out:
  json_decref(doc);
  return err;
}

/* ---- ListStreams ---- */

#define LST "ListStreams response"

kn_error_t *kn_decode_list_streams(const char *body, size_t len,
                                   kn_strlist_t *l, char **next_token,
                                   int *has_more) {
  json_t *doc;
  kn_error_t *err = kn_json_parse_object(body, len, LST, &doc);
  *next_token = NULL;
  *has_more = 0;
  if (err) return err;
  json_t *names = json_object_get(doc, "StreamNames");
  if (names && !json_is_array(names) && !json_is_null(names)) {
    err = BAD(LST, "StreamNames is not an array");
    goto out;
  }
  size_t i;
  json_t *n;
  json_array_foreach(names, i, n) {
    if (!json_is_string(n)) {
      err = BAD(LST, "stream name %zu is not a string", i);
      goto out;
    }
    if (kn_strlist_add(l, json_string_value(n), json_string_length(n))) {
      err = NOMEM(LST);
      goto out;
    }
  }
  if (kn_json_bool(doc, "HasMoreStreams", has_more) < 0) {
    err = BAD(LST, "HasMoreStreams is not a boolean");
    goto out;
  }
  if (take_token(doc, next_token)) err = NOMEM(LST);
out:
  json_decref(doc);
  return err;
}

/* ---- DescribeStreamSummary ---- */

#define DSS "DescribeStreamSummary response"

static int int_member(const json_t *o, const char *key, int def, int *out) {
  int64_t v;
  int rc = kn_json_i64(o, key, &v);
  if (rc > 0) {
    *out = def;
    return 0;
  }
  if (rc < 0 || v < -1 || v > 0x7fffffff) return -1;
  *out = (int)v;
  return 0;
}

kn_error_t *kn_decode_stream_summary(const char *body, size_t len,
                                     kn_stream_summary_t **out) {
  json_t *doc;
  kn_error_t *err = kn_json_parse_object(body, len, DSS, &doc);
  *out = NULL;
  if (err) return err;
  json_t *d = kn_json_obj(doc, "StreamDescriptionSummary");
  const char *name = kn_json_str(d, "StreamName");
  const char *status = kn_json_str(d, "StreamStatus");
  if (!name || !status) {
    err = BAD(DSS, "no StreamName or StreamStatus");
    goto out;
  }
  kn_stream_summary_t *s = calloc(1, sizeof(*s));
  if (!s) {
    err = NOMEM(DSS);
    goto out;
  }
  s->name = strdup(name);
  s->status = strdup(status);
  s->arn = kn_strdup0(kn_json_str(d, "StreamARN"));
  s->mode = kn_strdup0(
      kn_json_str(kn_json_obj(d, "StreamModeDetails"), "StreamMode"));
  /* The reference names the request field of
   * UpdateStreamRecordDistributionStrategy so; the summary is taken to
   * answer under the same name. */
  const char *dist = kn_json_str(d, "RecordDistributionStrategy");
  s->distribution = kn_strdup0(dist);
  if (kn_json_epoch_ms(d, "StreamCreationTimestamp", &s->created_ms) < 0 ||
      int_member(d, "OpenShardCount", 0, &s->open_shards) ||
      int_member(d, "RetentionPeriodHours", 0, &s->retention_hours) ||
      int_member(d, "ConsumerCount", -1, &s->consumers) ||
      int_member(d, "MaxRecordSizeInKiB", 1024, &s->max_record_kib)) {
    kn_stream_summary_destroy(s);
    err = BAD(DSS, "a number member has the wrong type");
    goto out;
  }
  if (!s->name || !s->status || (kn_json_str(d, "StreamARN") && !s->arn) ||
      (dist && !s->distribution)) {
    kn_stream_summary_destroy(s);
    err = NOMEM(DSS);
    goto out;
  }
  *out = s;
out:
  json_decref(doc);
  return err;
}

/* ---- GetShardIterator, PutRecord ---- */

kn_error_t *kn_decode_shard_iterator(const char *body, size_t len,
                                     char **iterator) {
  json_t *doc;
  kn_error_t *err =
      kn_json_parse_object(body, len, "GetShardIterator response", &doc);
  *iterator = NULL;
  if (err) return err;
  const char *it = kn_json_str(doc, "ShardIterator");
  if (!it || !*it)
    err = BAD("GetShardIterator response", "no ShardIterator");
  else if (!(*iterator = strdup(it)))
    err = NOMEM("GetShardIterator response");
  json_decref(doc);
  return err;
}

kn_error_t *kn_decode_put_record(const char *body, size_t len, char **seq,
                                 char **shard_id) {
  json_t *doc;
  kn_error_t *err = kn_json_parse_object(body, len, "PutRecord response", &doc);
  if (seq) *seq = NULL;
  if (shard_id) *shard_id = NULL;
  if (err) return err;
  const char *sq = kn_json_str(doc, "SequenceNumber");
  const char *sh = kn_json_str(doc, "ShardId");
  if (!sq || !sh) {
    err = BAD("PutRecord response", "no SequenceNumber or ShardId");
  } else if ((seq && !(*seq = strdup(sq))) ||
             (shard_id && !(*shard_id = strdup(sh)))) {
    if (seq) {
      free(*seq);
      *seq = NULL;
    }
    err = NOMEM("PutRecord response");
  }
  json_decref(doc);
  return err;
}

/* ---- Stream consumers ---- */

/* Fills *c from a Consumer or ConsumerDescription object: 0, -1 when
 * required members lack, -2 on out-of-memory. */
static int consumer_from(const json_t *o, kn_stream_consumer_t *c) {
  memset(c, 0, sizeof(*c));
  const char *name = kn_json_str(o, "ConsumerName");
  const char *arn = kn_json_str(o, "ConsumerARN");
  const char *status = kn_json_str(o, "ConsumerStatus");
  if (!name || !arn || !status) return -1;
  if (kn_json_epoch_ms(o, "ConsumerCreationTimestamp", &c->created_ms) < 0)
    return -1;
  c->name = strdup(name);
  c->arn = strdup(arn);
  c->status = strdup(status);
  const char *sa = kn_json_str(o, "StreamARN");
  c->stream_arn = kn_strdup0(sa);
  if (!c->name || !c->arn || !c->status || (sa && !c->stream_arn)) {
    kn_stream_consumer_clear(c);
    return -2;
  }
  return 0;
}

#define SC "stream consumer response"

kn_error_t *kn_decode_stream_consumer(const char *body, size_t len,
                                      kn_stream_consumer_t **out) {
  json_t *doc;
  kn_error_t *err = kn_json_parse_object(body, len, SC, &doc);
  *out = NULL;
  if (err) return err;
  json_t *o = kn_json_obj(doc, "Consumer");
  if (!o) o = kn_json_obj(doc, "ConsumerDescription");
  kn_stream_consumer_t *c = calloc(1, sizeof(*c));
  int rc = c ? consumer_from(o, c) : -2;
  if (rc) {
    free(c);
    err = rc == -2 ? NOMEM(SC)
                   : BAD(SC, "no ConsumerName, ConsumerARN or ConsumerStatus");
  } else {
    *out = c;
  }
  json_decref(doc);
  return err;
}

#define LSC "ListStreamConsumers response"

kn_error_t *kn_decode_list_stream_consumers(const char *body, size_t len,
                                            kn_stream_consumer_list_t *l,
                                            char **next_token) {
  json_t *doc;
  kn_error_t *err = kn_json_parse_object(body, len, LSC, &doc);
  *next_token = NULL;
  if (err) return err;
  json_t *arr = json_object_get(doc, "Consumers");
  if (arr && !json_is_array(arr) && !json_is_null(arr)) {
    err = BAD(LSC, "Consumers is not an array");
    goto out;
  }
  size_t i;
  json_t *o;
  json_array_foreach(arr, i, o) {
    kn_stream_consumer_t c;
    int rc = consumer_from(o, &c);
    if (rc == 0 && kn_stream_consumer_list_take(l, &c)) {
      kn_stream_consumer_clear(&c);
      rc = -2;
    }
    if (rc) {
      err = rc == -2 ? NOMEM(LSC) : BAD(LSC, "consumer %zu is incomplete", i);
      goto out;
    }
  }
  if (take_token(doc, next_token)) err = NOMEM(LSC);
out:
  json_decref(doc);
  return err;
}
