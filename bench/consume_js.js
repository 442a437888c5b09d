#!/usr/bin/env node
// A peer for bench_consume.py: the AWS SDK for JavaScript v3 draining
// every shard of a stream with a plain GetRecords loop, one loop per shard
// running concurrently, from TRIM_HORIZON until a shard answers with no
// records.  Plain HTTP/1.1 through NodeHttpHandler.  Each record's Data is
// touched (its length summed) so nothing is skipped lazily.
//
//   node bench/consume_js.js ENDPOINT STREAM
//
// A call still throttled after the SDK's own retries (its default retry
// strategy) is made again at once, as a plain loop would.
//
// Prints one JSON line: {"records": N, "bytes": B, "seq_chars": S,
// "calls": C, "throttled": T}; seq_chars (the length of every sequence number added up)
// lets the caller tell the exact size of kncat's JSON output.
'use strict';

const lab = require('./lab_require');

const {
  KinesisClient, ListShardsCommand, GetShardIteratorCommand, GetRecordsCommand,
} = lab('@aws-sdk/client-kinesis');
const { NodeHttpHandler } = lab('@smithy/node-http-handler');

async function main() {
  const [endpoint, stream] = process.argv.slice(2);
  const client = new KinesisClient({
    endpoint, region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    requestHandler: new NodeHttpHandler(),
  });
  const shards = [];
  let token;
  do {
    const out = await client.send(new ListShardsCommand(
      token ? { NextToken: token } : { StreamName: stream }));
    shards.push(...out.Shards);
    token = out.NextToken;
  } while (token);

  let records = 0, bytes = 0, seqChars = 0, calls = 0, throttled = 0;
  const drain = async (shard) => {
    const it = await client.send(new GetShardIteratorCommand({
      StreamName: stream, ShardId: shard.ShardId, ShardIteratorType: 'TRIM_HORIZON',
    }));
    let iterator = it.ShardIterator;
    while (iterator) {
      let out;
      try {
        out = await client.send(new GetRecordsCommand({ ShardIterator: iterator }));
      } catch (e) {
        if (e.name !== 'ProvisionedThroughputExceededException') throw e;
        throttled++;
        continue;
      }
      calls++;
      for (const r of out.Records) {
        records++;
        bytes += r.Data.length;
        seqChars += r.SequenceNumber.length;
      }
      if (out.Records.length === 0) break; // caught up
      iterator = out.NextShardIterator;
    }
  };
  await Promise.all(shards.map(drain));
  console.log(JSON.stringify({ records, bytes, seq_chars: seqChars, calls, throttled }));
}

main().catch((e) => { console.error(e); process.exit(1); });
