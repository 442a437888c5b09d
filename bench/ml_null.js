// A do-nothing MultiLangDaemon record processor (aws-kcl) for
// bench_multilang.py: it checkpoints each batch, as a typical processor
// does, and writes its running record count to ML_OUT/count-PID.
'use strict';
const fs = require('fs');
const path = require('path');
const kcl = require(path.join(process.env.KN_LAB_DIR, 'node_modules', 'aws-kcl'));

const file = path.join(process.env.ML_OUT, `count-${process.pid}`);
let n = 0;

kcl({
  initialize: (input, done) => done(),
  processRecords: (input, done) => {
    n += input.records.length;
    fs.writeFileSync(file, String(n));
    const last = input.records[input.records.length - 1];
    if (!last) return done();
    input.checkpointer.checkpoint(last.sequenceNumber, () => done());
  },
  leaseLost: (input, done) => done(),
  shardEnded: (input, done) => input.checkpointer.checkpoint(() => done()),
  shutdownRequested: (input, done) => input.checkpointer.checkpoint(() => done()),
}).run();
