// A MultiLangDaemon record processor written with aws-kcl (npm), run by
// `kncat multilang` as it is by the Java daemon.  Every record is logged to
// stderr (copied by kncat with the shard id); checkpoints every 100
// records, at the end of a shard and when asked to stop.
'use strict';
const kcl = require('aws-kcl');

let pending = 0;

const processor = {
  initialize: function (input, done) {
    console.error(`shard ${input.shardId} starting after ${input.sequenceNumber}`);
    done();
  },
  processRecords: function (input, done) {
    for (const r of input.records) {
      const data = Buffer.from(r.data, 'base64').toString('utf8');
      console.error(`${r.partitionKey} ${r.sequenceNumber}: ${data.slice(0, 60)}`);
    }
    pending += input.records.length;
    if (pending < 100 || !input.records.length) return done();
    pending = 0;
    const last = input.records[input.records.length - 1];
    input.checkpointer.checkpoint(last.sequenceNumber, function (err) {
      if (err) console.error(`checkpoint failed: ${err}`);
      done();
    });
  },
  leaseLost: function (input, done) {
    done(); // another worker has the shard
  },
  shardEnded: function (input, done) {
    // Checkpoint everything so that the shard's children are read.
    input.checkpointer.checkpoint(function (err) {
      if (err) console.error(`final checkpoint failed: ${err}`);
      done();
    });
  },
  shutdownRequested: function (input, done) {
    input.checkpointer.checkpoint(function (err) {
      if (err) console.error(`checkpoint at shutdown failed: ${err}`);
      done();
    });
  },
};

kcl(processor).run();
