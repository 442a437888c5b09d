// aws-kinesis-agg's side of test_agg_interop.py.  Reads one JSON job on
// stdin and writes the answer as JSON on stdout.
//
//   {"op": "aggregate", "cases": [[{"pk", "ehk" (or null), "data" (base64)}, ...], ...]}
//     -> {"cases": [[{"pk", "ehk", "data"}, ...] (Kinesis records), ...]}
//   {"op": "deaggregate", "cases": [[{"pk", "ehk", "data"} (Kinesis records), ...], ...]}
//     -> {"cases": [[{"error"} or {"records": [{"pk", "ehk", "data", "subseq"}]}, ...], ...]}
//
// The package is found through argv[2], a node_modules directory.
'use strict';
const path = require('path');

const agg = require(path.join(process.argv[2], 'aws-kinesis-agg'));

function aggregateCase(records) {
  const out = [];
  const a = new agg.RecordAggregator();
  const input = records.map((r) => {
    const rec = { partitionKey: r.pk, data: Buffer.from(r.data, 'base64') };
    if (r.ehk !== null) rec.explicitHashKey = r.ehk;
    return rec;
  });
  a.aggregateRecords(input, true, (err, enc) => {
    if (err) throw err;
    out.push({ pk: enc.partitionKey, ehk: enc.ExplicitHashKey || null, data: enc.data.toString('base64') });
  });
  return out;
}

function deaggregateCase(kinesisRecords) {
  return kinesisRecords.map((k, i) => {
    const rec = { partitionKey: k.pk, data: k.data, sequenceNumber: String(i + 1) };
    if (k.ehk !== null) rec.explicitPartitionKey = k.ehk;
    let answer = null;
    agg.deaggregateSync(rec, true, (err, urs) => {
      if (err) {
        answer = { error: String(err) };
        return;
      }
      answer = {
        records: urs.map((u) => ({
          pk: u.partitionKey,
          ehk: u.explicitPartitionKey === undefined ? null : u.explicitPartitionKey,
          data: u.data,
          subseq: u.subSequenceNumber === undefined ? null : u.subSequenceNumber,
        })),
      };
    });
    return answer;
  });
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const job = JSON.parse(input);
  const fn = job.op === 'aggregate' ? aggregateCase : deaggregateCase;
  process.stdout.write(JSON.stringify({ cases: job.cases.map(fn) }));
});
