/* Decoders of the Kinesis responses other than records: pure functions
 * from a body to result objects.  Absent members, explicit nulls and
 * members the client does not know are all accepted; a missing required
 * member or a wrong type is KN_ERR__BAD_MSG naming the operation.
 * (GetRecords: decode_records.h; PutRecords: kn_decode_put_records.) */
#ifndef KN_KINESIS_DECODE_H
#define KN_KINESIS_DECODE_H

#include <stddef.h>

#include "kinesis/model.h"
#include "kinesis/shard.h"
#include "kn/error.h"

/* Appends the page's shards to l; *next_token gets NextToken (malloc'ed)
 * or NULL. */
kn_error_t *kn_decode_list_shards(const char *body, size_t len,
                                  kn_shard_list_t *l, char **next_token);

/* Appends the page's stream names to l; *next_token gets NextToken
 * (malloc'ed) or NULL; *has_more gets HasMoreStreams (0 when absent). */
kn_error_t *kn_decode_list_streams(const char *body, size_t len,
                                   kn_strlist_t *l, char **next_token,
                                   int *has_more);

kn_error_t *kn_decode_stream_summary(const char *body, size_t len,
                                     kn_stream_summary_t **out);

/* *iterator is malloc'ed. */
kn_error_t *kn_decode_shard_iterator(const char *body, size_t len,
                                     char **iterator);

/* PutRecord: either output may be NULL; the strings are malloc'ed. */
kn_error_t *kn_decode_put_record(const char *body, size_t len, char **seq,
                                 char **shard_id);

/* RegisterStreamConsumer (member Consumer) and DescribeStreamConsumer
 * (member ConsumerDescription). */
kn_error_t *kn_decode_stream_consumer(const char *body, size_t len,
                                      kn_stream_consumer_t **out);

/* Appends the page's consumers to l; *next_token as for ListShards. */
kn_error_t *kn_decode_list_stream_consumers(const char *body, size_t len,
                                            kn_stream_consumer_list_t *l,
                                            char **next_token);

/* PutRecords, decoded in place: takes body (malloc'ed, body[len] ==
 * '\0') whatever the outcome; on success *out owns it.  n_sent is the
 * number of entries sent: the answer must have as many. */
kn_error_t *kn_decode_put_records(char *body, size_t len, size_t n_sent,
                                  kn_put_results_t **out);

#endif
