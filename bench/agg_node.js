#!/usr/bin/env node
// The peer for bench_agg: aws-kinesis-agg (npm) aggregating and
// deaggregating the same shape of data, 1 KB user records with distinct
// partition keys.  Best pass within SECONDS, MB/s of user payload
// (1 MB = 10^6 bytes), as bench_agg prints it.
//
//   node bench/agg_node.js [-n RECORDS] [-s RECORD_SIZE] [-t SECONDS]
//
// The package is looked up in $KN_SOURCE_DIR/tests/lab/node_modules, then
// tests/lab/node_modules next to this file, then /tmp/lab/node_modules.
'use strict';
const crypto = require('crypto');

const agg = require('./lab_require')('aws-kinesis-agg');
const args = process.argv.slice(2);
const opt = (flag, dflt) => {
  const i = args.indexOf(flag);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const nRecs = opt('-n', 32768), recSize = opt('-s', 1024), seconds = opt('-t', 1.0);

const records = [];
for (let i = 0; i < nRecs; i++) {
  records.push({ partitionKey: crypto.randomBytes(8).toString('hex'), data: crypto.randomBytes(recSize) });
}
const payload = nRecs * recSize;

function best(pass) {
  let top = 0, passes = 0;
  const start = process.hrtime.bigint();
  do {
    const t0 = process.hrtime.bigint();
    pass();
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    top = Math.max(top, payload / dt / 1e6);
    passes++;
  } while (Number(process.hrtime.bigint() - start) / 1e9 < seconds || passes < 3);
  return top;
}

// Aggregation with the package's synchronous aggregator (1 MB aggregates,
// its only size).
let encoded = [];
function aggregatePass() {
  encoded = [];
  const a = new agg.RecordAggregator();
  a.aggregateRecords(records, true, (err, rec) => {
    if (err) throw err;
    encoded.push(rec);
  });
}

// Deaggregation, checksums checked.  The data goes in as a Buffer (the
// package then skips its base64 decoding); user records come out with
// base64 data, which is the package's interface.
function deaggregatePass() {
  let n = 0;
  for (const e of encoded) {
    agg.deaggregateSync({ data: e.data, partitionKey: e.partitionKey, sequenceNumber: '1' }, true,
      (err, urs) => {
        if (err) throw err;
        n += urs.length;
      });
  }
  if (n !== nRecs) throw new Error('deaggregated ' + n + ' of ' + nRecs);
}

function md5Pass() {
  for (const e of encoded) {
    crypto.createHash('md5').update(e.data.subarray(4, e.data.length - 16)).digest();
  }
}

aggregatePass();
const aggMBps = best(aggregatePass);
const deaggMBps = best(deaggregatePass);
const md5MBps = best(md5Pass);
console.log(`aws-kinesis-agg, node ${process.version}: ${nRecs} user records of ${recSize} bytes, ` +
  `distinct partition keys, ${encoded.length} aggregates; best pass of ${seconds} s; MB/s of user payload`);
console.log(`  node crypto MD5 of the same bytes   ${md5MBps.toFixed(0).padStart(8)} MB/s`);
console.log(`  aggregate                           ${aggMBps.toFixed(0).padStart(8)} MB/s`);
console.log(`  deaggregate (checksums checked)     ${deaggMBps.toFixed(0).padStart(8)} MB/s`);
console.log(JSON.stringify({ aggregate_mbps: aggMBps, deaggregate_mbps: deaggMBps, md5_mbps: md5MBps }));
