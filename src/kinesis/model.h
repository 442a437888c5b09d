/* Internal layout of the result objects of include/kn/client.h (stream
 * summaries, string lists, stream consumers, PutRecords results) and
 * their constructors.  Every object owns the strings it points at. */
#ifndef KN_KINESIS_MODEL_H
#define KN_KINESIS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kn/client.h"

struct kn_strlist_s {
  char **v;
  size_t n, cap;
};

/* NULL on out-of-memory. */
kn_strlist_t *kn_strlist_new(void);
/* Appends a copy of s[0..n); 0, or -1 on out-of-memory. */
int kn_strlist_add(kn_strlist_t *l, const char *s, size_t n);

struct kn_stream_summary_s {
  char *name, *arn, *status;
  char *mode; /* NULL when the server does not say */
  int open_shards;
  int retention_hours;
  int consumers;      /* -1 unknown */
  int max_record_kib; /* 1024 when not said */
  char *distribution; /* NULL when not said */
  int64_t created_ms; /* 0 unknown */
};

struct kn_stream_consumer_s {
  char *name, *arn, *status;
  char *stream_arn; /* NULL when not reported */
  int64_t created_ms;
};

/* Frees the strings of an embedded consumer (not the struct). */
void kn_stream_consumer_clear(kn_stream_consumer_t *c);

struct kn_stream_consumer_list_s {
  kn_stream_consumer_t *v;
  size_t n, cap;
};

kn_stream_consumer_list_t *kn_stream_consumer_list_new(void);
/* Moves *c (its strings) into the list; 0, or -1 on out-of-memory (then
 * *c is left to the caller). */
int kn_stream_consumer_list_take(kn_stream_consumer_list_t *l,
                                 kn_stream_consumer_t *c);

/* One entry of a PutRecords answer.  The strings point into the
 * response body the results own. */
typedef struct kn_put_result {
  const char *shard_id, *seq;             /* NULL when the entry failed */
  const char *error_code, *error_message; /* NULL when it succeeded */
} kn_put_result_t;

struct kn_put_results_s {
  kn_put_result_t *v;
  size_t n;
  size_t failed;
  char *body; /* owned: the decoded response */
};

/* The API names of the enums ("TRIM_HORIZON", "AT_TIMESTAMP", ...), or
 * NULL for a value out of range (encode.c). */
const char *kn_iterator_type_name(kn_iterator_type_t type);
const char *kn_shard_filter_name(kn_shard_filter_type_t type);

#endif
