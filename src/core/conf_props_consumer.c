/* Properties of kn_consumer_t. */
#include "core/conf.h"

#define MS_MAX 86400000LL

const kn_prop_t kn_props_consumer[] = {
    {"stream", "consumer", KN_PROP_STR, NULL, 0, 0, NULL,
     "Name or ARN (arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME) of the "
     "stream to read or write (required by the consumer and the producer). "
     "With an ARN every call names the stream by its ARN (StreamARN: a "
     "stream of another account, shared with a resource policy) and the "
     "region is the ARN's."},
    {"shards", "consumer", KN_PROP_STR, NULL, 0, 0, NULL,
     "Comma-separated shard ids to read, without a lease store only; "
     "children of these shards are not followed. Default: every shard, "
     "following splits and merges."},
    {"initial.position", "consumer", KN_PROP_ENUM, "trim_horizon", 0, 0,
     "trim_horizon,latest,at_timestamp,at_sequence,after_sequence",
     "Where to start reading a shard that has no checkpoint. at_sequence "
     "and after_sequence (with initial.sequence.number) need exactly one "
     "shard in `shards`."},
    {"initial.timestamp.ms", "consumer", KN_PROP_INT, "0", 0, 1LL << 50, NULL,
     "Epoch milliseconds for initial.position=at_timestamp."},
    {"initial.sequence.number", "consumer", KN_PROP_STR, NULL, 0, 0, NULL,
     "Sequence number for initial.position=at_sequence or after_sequence."},
    {"start.positions", "consumer", KN_PROP_STR, NULL, 0, 0, NULL,
     "Without a lease store: where each shard starts, as a reader snapshot "
     "(include/kn/snapshot.h) in base64; set it with "
     "kn_conf_set_start_snapshot(). Shards finished in it are not read, "
     "shards with a position resume there, shards absent from it start at "
     "trim_horizon (they were born after it); an empty snapshot leaves "
     "initial.position in force."},
    {"deaggregate", "consumer", KN_PROP_BOOL, "true", 0, 0, NULL,
     "Split KPL-aggregated records into their user records."},
    {"checkpoint.auto", "consumer", KN_PROP_BOOL, "true", 0, 0, NULL,
     "Checkpoint, every checkpoint.interval.ms, the records returned by "
     "earlier polls (at-least-once: a record is checkpointed only after the "
     "application asked for the next batch)."},
    {"checkpoint.interval.ms", "consumer", KN_PROP_INT, "5000", 10, MS_MAX,
     NULL,
     "Interval of automatic checkpoints and of flushing asynchronous "
     "ones. With a lease store the checkpoint is written with the lease's "
     "next renewal after it (and renews it), so a lease costs one write per "
     "renewal interval."},
    {"buffer.max.records", "consumer", KN_PROP_INT, "20000", 1, 10000000, NULL,
     "Records buffered per shard before its retrieval pauses."},
    {"buffer.max.bytes", "consumer", KN_PROP_INT, "2097152", 1024, 1LL << 40,
     NULL,
     "Bytes (of GetRecords responses) buffered per shard before its "
     "retrieval pauses; also the largest response asked for. A shard "
     "cannot be read faster than 2 MB/s, so more rarely helps."},
    {"buffer.max.total.bytes", "consumer", KN_PROP_INT, "8388608", 65536,
     1LL << 42, NULL,
     "Bytes buffered and in flight for all shards together; bounds memory "
     "whatever the number of shards (a batch the application holds comes "
     "on top)."},
    {"poll.max.records", "consumer", KN_PROP_INT, "10000", 1, 10000, NULL,
     "Largest Limit of one GetRecords call (it is lowered to fit the "
     "buffers)."},
    {"poll.idle.ms", "consumer", KN_PROP_INT, "1000", 0, MS_MAX, NULL,
     "Wait before the next GetRecords when a shard is caught up."},
    {"poll.calls.per.second", "consumer", KN_PROP_INT, "5", 1, 1000, NULL,
     "GetRecords calls per second per shard allowed by the service."},
    {"poll.bytes.per.second", "consumer", KN_PROP_INT, "2097152", 1024,
     1LL << 40, NULL,
     "Bytes of record data per second per shard allowed by the service (it "
     "counts the data, not the response around it)."},
    {"poll.share", "consumer", KN_PROP_INT, "100", 1, 100, NULL,
     "Percentage of the per-shard read limits this application may use "
     "(lower it when several applications poll the same stream)."},
    {"shard.sync.interval.ms", "consumer", KN_PROP_INT, "30000", 100, MS_MAX,
     NULL, "Interval of ListShards to discover new shards."},
    {"efo.consumer.name", "consumer", KN_PROP_STR, NULL, 0, 0, NULL,
     "Enhanced fan-out: read every shard with SubscribeToShard (records "
     "pushed over HTTP/2, a dedicated 2 MB/s per shard) through the stream "
     "consumer of this name, registered as efo.registration says. Default: "
     "poll with GetRecords."},
    {"efo.consumer.arn", "consumer", KN_PROP_STR, NULL, 0, 0, NULL,
     "Enhanced fan-out through this existing consumer (its ARN); implies "
     "efo.registration=none unless that is set."},
    {"efo.registration", "consumer", KN_PROP_ENUM, "lazy", 0, 0,
     "lazy,eager,none",
     "How the fan-out consumer comes to exist. lazy: describe it, register "
     "it if missing (jittered back-off within the service's rate limits), "
     "wait until it is ACTIVE, and register it again if it is deleted while "
     "reading. eager: register it at start; any failure, or its deletion "
     "later, stops the consumer. none: use efo.consumer.arn as it is."},
    {"efo.deregister.on.close", "consumer", KN_PROP_BOOL, "false", 0, 0, NULL,
     "Deregister the fan-out consumer when this consumer closes cleanly "
     "(never after a failure, never with efo.registration=none). Other "
     "workers sharing it lose their subscriptions."},
    {"efo.watchdog.ms", "consumer", KN_PROP_INT, "30000", 1000, MS_MAX, NULL,
     "A subscription that delivers no event for this long (its shard's "
     "buffer not being full) is dropped and renewed from its last "
     "continuation."},
    {"efo.in.use.poll.ms", "consumer", KN_PROP_INT, "30000", 1000, MS_MAX, NULL,
     "Lease mode: a shard whose subscriptions meet nothing but "
     "ResourceInUse for this long (the service holds a subscription that "
     "nobody reads: kinesis-local keeps the one of a client that died for "
     "minutes) is read with GetRecords instead while this worker holds its "
     "lease."},
    {"efo.register.timeout.ms", "consumer", KN_PROP_INT, "120000", 1000, MS_MAX,
     NULL,
     "How long registration may take (until the consumer is ACTIVE) before "
     "the consumer fails."},
    {"lease.store", "lease", KN_PROP_STR, "none", 0, 0, NULL,
     "Where workers share the shards: none (this consumer reads every "
     "shard alone, positions in memory), sqlite:PATH (a lease table in a "
     "SQLite file shared by the workers of one host), dynamodb:TABLE (a "
     "DynamoDB table compatible with the KCL 2.x, created if missing), "
     "memory[:NAME] (one process, for tests)."},
    {"app.name", "lease", KN_PROP_STR, NULL, 0, 0, NULL,
     "Name of the application reading the stream (shown in statistics)."},
    {"worker.id", "lease", KN_PROP_STR, NULL, 0, 0, NULL,
     "This worker's name in the lease table; must be unique among the "
     "workers. Default: host name, process id and a random suffix."},
    {"lease.duration.ms", "lease", KN_PROP_INT, "10000", 1000, MS_MAX, NULL,
     "A lease whose counter has not moved for this long, as observed by "
     "another worker, is expired and may be taken."},
    {"lease.renew.interval.ms", "lease", KN_PROP_INT, "0", 0, MS_MAX, NULL,
     "Interval of lease renewals (and of heartbeats); 0: 2/5 of "
     "lease.duration.ms (a third without lease.members). Must be "
     "less than 2/3 of lease.duration.ms: a worker reads a shard until "
     "lease.duration.ms less half this interval after its last good "
     "renewal, and that must outlast the wait for the next one."},
    {"lease.take.interval.ms", "lease", KN_PROP_INT, "2000", 100, MS_MAX, NULL,
     "Interval of looking for leases to take (expired, free, or to "
     "balance the load)."},
    {"lease.max.per.worker", "lease", KN_PROP_INT, "0", 0, 100000, NULL,
     "Most leases this worker holds; 0: no limit."},
    {"lease.max.steal", "lease", KN_PROP_INT, "1", 0, 100000, NULL,
     "Most leases taken per round from the busiest worker to balance the "
     "load; 0 never steals."},
    {"lease.handoff.timeout.ms", "lease", KN_PROP_INT, "30000", 0, MS_MAX, NULL,
     "A lease taken from a live worker to balance the load is asked for "
     "(the KCL 3.x's checkpointOwner) when its owner can answer: a member "
     "(lease.members) or a KCL 3.x worker (its worker-metrics item in the "
     "lease table); from others (a KCL 2.x worker) it is taken at once, as "
     "the KCL 2.x steals. Asked, the owner stops reading, lets the "
     "application finish what it was handed, checkpoints exactly that and "
     "passes the lease on, so nothing is delivered twice. The owner gives "
     "its application this long from the renewal that told it of the ask, "
     "then passes on what was processed; an owner that has not passed the "
     "lease on a lease duration later (or has stopped renewing for a "
     "lease duration) loses the lease the ordinary way. 0: take it at "
     "once (read again from its last checkpoint)."},
    {"lease.members", "lease", KN_PROP_BOOL, "true", 0, 0, NULL,
     "Workers write a heartbeat every renewal interval to a membership "
     "item (DynamoDB: the table TABLE-members) whose answer tells each "
     "worker who is alive, what they hold and whether leases changed; past "
     "16 workers they spread over more items (members#1, ...), each seeing "
     "its own item's members, and the lowest worker id of the first item "
     "reads them all and tells the others through a digest in each item, "
     "so that no item is written by every worker; the "
     "lease table is then read only when that calls for it, instead of "
     "every lease.take.interval.ms. A worker that stopped beating for "
     "lease.duration.ms is dead and its leases are taken at once. A worker "
     "whose heartbeats fail while its lease writes succeed marks its leases "
     "(ownerBeatFailing, DynamoDB) and reads on: the others judge those "
     "by their renewals, as a KCL table's. Membership that cannot be had "
     "(no table, no access) leaves the lease table alone to decide. false: "
     "every worker reads the whole table every take interval."},
    {"lease.scan.interval.ms", "lease", KN_PROP_INT, "600000", 1000, MS_MAX,
     NULL,
     "With lease.members, how often the leader (the live worker of lowest "
     "id) reads the whole lease table when nothing announced a change."},
    {NULL, NULL, 0, NULL, 0, 0, NULL, NULL}};
