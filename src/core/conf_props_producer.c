/* Properties of kn_producer_t.  Defaults follow the KPL where it has the
 * same setting (AggregationMaxSize, CollectionMaxCount/Size,
 * RecordMaxBufferedTime, RecordTtl). */
#include "core/conf.h"

#define MS_MAX 86400000LL

const kn_prop_t kn_props_producer[] = {
    {"aggregation.enable", "producer", KN_PROP_BOOL, "false", 0, 0, NULL,
     "Pack the records of a shard into KPL aggregated records (consumers "
     "must deaggregate: kn_consumer_t and the KCL do)."},
    {"aggregation.max.bytes", "producer", KN_PROP_INT, "51200", 64, 1048576,
     NULL,
     "Largest aggregated record, magic number and checksum included (a "
     "record larger than this is sent alone)."},
    {"aggregation.max.records", "producer", KN_PROP_INT, "0", 0, 1000000000,
     NULL, "Most user records in one aggregated record; 0: no limit."},
    {"batch.max.records", "producer", KN_PROP_INT, "500", 1, 500, NULL,
     "Most Kinesis records (aggregates count as one) in one PutRecords "
     "call."},
    {"batch.max.bytes", "producer", KN_PROP_INT, "5242880", 1024, 5242880, NULL,
     "Most bytes (data and partition keys) in one PutRecords call; on a "
     "stream of larger records (MaxRecordSizeInKiB) raised to the stream's "
     "largest record when below it (a call there takes up to 10 MiB)."},
    {"linger.ms", "producer", KN_PROP_INT, "100", 0, MS_MAX, NULL,
     "Longest time a record waits for a PutRecords call to fill before it "
     "is sent; a full call goes at once."},
    {"message.timeout.ms", "producer", KN_PROP_INT, "30000", 1, MS_MAX, NULL,
     "Time-to-live of a record: if it is not stored this long after "
     "kn_producer_send (retries included), its delivery report carries "
     "KN_ERR__MSG_TIMED_OUT."},
    {"queue.max.records", "producer", KN_PROP_INT, "100000", 1, 100000000, NULL,
     "Records sent and not yet reported before kn_producer_send returns "
     "KN_ERR__QUEUE_FULL."},
    {"queue.max.bytes", "producer", KN_PROP_INT, "67108864", 1048576, 1LL << 40,
     NULL,
     "Bytes (data and partition keys) of the records sent and not yet "
     "reported before kn_producer_send returns KN_ERR__QUEUE_FULL."},
    {"max.in.flight", "producer", KN_PROP_INT, "16", 1, 1000, NULL,
     "PutRecords calls in flight at once."},
    {"shard.max.in.flight", "producer", KN_PROP_INT, "1", 1, 100, NULL,
     "PutRecords calls in flight at once carrying records of one shard. "
     "With 1 a shard's records are stored in the order they were sent "
     "unless the service rejects some (see ordering.strict); above 1, calls "
     "can overtake each other and records of a key can be stored out of "
     "order."},
    {"ordering.strict", "producer", KN_PROP_BOOL, "false", 0, 0, NULL,
     "At most one PutRecords call in flight per shard, and no call carrying "
     "two records of one partition key for a shard (with aggregation: one "
     "aggregate per shard per call), so that a retried record is never "
     "overtaken by a later one of its key. Costs throughput."},
    {"shard.records.per.second", "producer", KN_PROP_INT, "1000", 1, 1000000000,
     NULL,
     "Records per second one shard takes (the service's write limit); an "
     "aggregate counts as one."},
    {"shard.bytes.per.second", "producer", KN_PROP_INT, "1048576", 1024,
     1LL << 40, NULL,
     "Bytes per second one shard takes (the service's write limit)."},
    {"shard.rate.percent", "producer", KN_PROP_INT, "100", 1, 10000, NULL,
     "Percentage of the per-shard limits this producer may use; lower it "
     "when several producers write to one stream, raise it to let the "
     "service do the throttling (the KPL's RateLimit is 150)."},
    {NULL, NULL, 0, NULL, 0, 0, NULL, NULL}};
