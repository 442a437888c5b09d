#!/usr/bin/env python3
"""A peer for bench_consume.py: boto3 draining every shard of a stream
with a plain GetRecords loop, one thread per shard, from TRIM_HORIZON
until a shard answers with no records.  Credentials and region come from
the environment (bench_consume.py gives it the lab's).

  python3 bench/consume_boto3.py ENDPOINT STREAM

Prints one JSON line: {"records": N, "bytes": B, "seq_chars": S,
"calls": C}."""

import json
import sys
import threading

import boto3
import botocore.config


def main():
    endpoint, stream = sys.argv[1:3]
    client = boto3.client(
        "kinesis", endpoint_url=endpoint,
        config=botocore.config.Config(
            retries={"total_max_attempts": 3, "mode": "standard"},
            max_pool_connections=32))
    shards = []
    args = {"StreamName": stream}
    while True:
        out = client.list_shards(**args)
        shards += out["Shards"]
        if not out.get("NextToken"):
            break
        args = {"NextToken": out["NextToken"]}

    totals = {"records": 0, "bytes": 0, "seq_chars": 0, "calls": 0}
    lock = threading.Lock()
    errors = []

    def drain(shard_id):
        try:
            it = client.get_shard_iterator(
                StreamName=stream, ShardId=shard_id,
                ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            records = nbytes = seq_chars = calls = 0
            while it:
                out = client.get_records(ShardIterator=it)
                calls += 1
                for r in out["Records"]:
                    records += 1
                    nbytes += len(r["Data"])
                    seq_chars += len(r["SequenceNumber"])
                if not out["Records"]:
                    break  # caught up
                it = out.get("NextShardIterator")
            with lock:
                totals["records"] += records
                totals["bytes"] += nbytes
                totals["seq_chars"] += seq_chars
                totals["calls"] += calls
        except Exception as e:  # reported after the join
            errors.append(e)

    threads = [threading.Thread(target=drain, args=(s["ShardId"],))
               for s in shards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    print(json.dumps(totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
