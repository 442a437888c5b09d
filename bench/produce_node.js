#!/usr/bin/env node
// The peer for bench_produce.py: the AWS SDK for JavaScript v3 sending the
// records of an input file (one record per line, the partition key before
// the first tab) with PutRecords, 500 records per call, one call at a time,
// failed entries sent again.  Plain HTTP/1.1 through NodeHttpHandler.
//
//   node bench/produce_node.js ENDPOINT STREAM FILE
//
// Prints one JSON line: {"records": N, "bytes": B, "calls": C}.
'use strict';
const fs = require('fs');

const lab = require('./lab_require');

const { KinesisClient, PutRecordsCommand } = lab('@aws-sdk/client-kinesis');
const { NodeHttpHandler } = lab('@smithy/node-http-handler');

async function main() {
  const [endpoint, stream, file] = process.argv.slice(2);
  const client = new KinesisClient({
    endpoint, region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    requestHandler: new NodeHttpHandler(),
  });
  const lines = fs.readFileSync(file).toString('latin1').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  let records = 0, bytes = 0, calls = 0;
  let batch = [], batchBytes = 0;
  const flush = async () => {
    let entries = batch;
    while (entries.length) {
      calls++;
      const out = await client.send(new PutRecordsCommand({ StreamName: stream, Records: entries }));
      if (!out.FailedRecordCount) break;
      entries = entries.filter((_, i) => out.Records[i].ErrorCode);
    }
    batch = [];
    batchBytes = 0;
  };
  for (const line of lines) {
    const tab = line.indexOf('\t');
    const key = line.slice(0, tab);
    const data = Buffer.from(line.slice(tab + 1), 'latin1');
    if (batch.length === 500 || batchBytes + data.length + key.length > 5 * 1024 * 1024) await flush();
    batch.push({ PartitionKey: key, Data: data });
    batchBytes += data.length + key.length;
    records++;
    bytes += data.length;
  }
  if (batch.length) await flush();
  console.log(JSON.stringify({ records, bytes, calls }));
}

main().catch((e) => { console.error(e); process.exit(1); });
