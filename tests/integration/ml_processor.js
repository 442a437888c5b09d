// A record processor for `kncat multilang` tests, written with the aws-kcl
// library (its jar bootstrap is not used).  Every record goes to a file as
// one JSON line; checkpoints every ML_EVERY records, and at shardEnded /
// shutdownRequested.
//
// ML_OUT: directory for the output files (one per process).
// ML_STYLE: "v2" (leaseLost/shardEnded, default) or "v1" (shutdown(reason)).
// ML_EVERY: checkpoint interval in records (default 25).
// ML_DIE_AFTER: exit abruptly in the middle of the N-th batch of the first
//   process that claims ML_OUT/die.flag (a child killed mid-batch).
'use strict';
const fs = require('fs');
const path = require('path');
const kcl = require(path.join(process.env.KN_LAB_DIR, 'node_modules', 'aws-kcl'));

const out = process.env.ML_OUT;
const every = parseInt(process.env.ML_EVERY || '25', 10);
const dieAfter = parseInt(process.env.ML_DIE_AFTER || '0', 10);
const file = path.join(out, `rec-${process.pid}.jsonl`);
const events = path.join(out, `events-${process.pid}.jsonl`);
let shard = null;
let since = 0;
let batches = 0;
let dying = false;

function note(what, extra) {
  fs.appendFileSync(events, JSON.stringify(Object.assign({ev: what, shard}, extra || {})) + '\n');
}

function claimDeath() {
  if (!dieAfter) return false;
  try {
    fs.writeFileSync(path.join(out, 'die.flag'), String(process.pid), {flag: 'wx'});
    return true;
  } catch (e) {
    return false;
  }
}

function finalCheckpoint(input, what, done) {
  input.checkpointer.checkpoint(function (err, seq) {
    note(what + '-checkpoint', {err: err || null});
    done();
  });
}

const base = {
  initialize: function (input, done) {
    shard = input.shardId;
    note('initialize', {seq: input.sequenceNumber, sub: input.subSequenceNumber});
    done();
  },
  processRecords: function (input, done) {
    batches++;
    const lines = [];
    for (const r of input.records) {
      lines.push(JSON.stringify({shard, seq: r.sequenceNumber, sub: r.subSequenceNumber,
                                 key: r.partitionKey, data: Buffer.from(r.data, 'base64').toString('utf8')}));
    }
    if (dieAfter && batches === dieAfter && !dying && claimDeath()) {
      // Half the batch written, no checkpoint: the rest must come again.
      fs.appendFileSync(file, lines.slice(0, lines.length >> 1).map(l => l + '\n').join(''));
      note('dying');
      process.exit(9);
    }
    if (lines.length) fs.appendFileSync(file, lines.map(l => l + '\n').join(''));
    since += input.records.length;
    if (since >= every && input.records.length) {
      const last = input.records[input.records.length - 1];
      since = 0;
      input.checkpointer.checkpoint(last.sequenceNumber, function (err) {
        if (err) note('checkpoint-error', {err});
        done();
      });
      return;
    }
    done();
  },
  shutdownRequested: function (input, done) {
    finalCheckpoint(input, 'shutdownRequested', done);
  },
};

let processor;
if (process.env.ML_STYLE === 'v1') {
  processor = Object.assign({}, base, {
    shutdown: function (input, done) {
      note('shutdown', {reason: input.reason});
      if (input.reason === 'TERMINATE') return finalCheckpoint(input, 'shardEnded', done);
      done();
    },
  });
} else {
  processor = Object.assign({}, base, {
    leaseLost: function (input, done) {
      note('leaseLost');
      done();
    },
    shardEnded: function (input, done) {
      finalCheckpoint(input, 'shardEnded', done);
    },
  });
}
kcl(processor).run();
