// Regenerates the SubscribeToShard fixtures from kinesis-local:
//   NODE_PATH=<lab>/node_modules node capture_subscribe.js <lab>/node_modules OUTDIR
// Starts the server on loopback, creates a one-shard stream with three
// records and a consumer, then saves raw HTTP/1.1 response bodies
// (application/vnd.amazon.eventstream) of SubscribeToShard calls.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const path = require('path');

const mods = path.resolve(process.argv[2]);
const outDir = path.resolve(process.argv[3] || '.');
const { KinesisClient, CreateStreamCommand, DescribeStreamSummaryCommand,
  PutRecordCommand, RegisterStreamConsumerCommand,
  DescribeStreamConsumerCommand } = require(path.join(mods, '@aws-sdk/client-kinesis'));
const { NodeHttpHandler } = require(path.join(mods, '@smithy/node-http-handler'));

function freePort() {
  return new Promise((res) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => res(p));
    });
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A SubscribeToShard POST; resolves with the body bytes received within ms.
function subscribe(port, body, ms) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const req = http.request({
      host: '127.0.0.1', port, method: 'POST', path: '/',
      headers: {
        'Content-Type': 'application/x-amz-json-1.1',
        'X-Amz-Target': 'Kinesis_20131202.SubscribeToShard',
        'X-Amz-Date': '20240101T000000Z',
        'Authorization': 'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/us-east-1/kinesis/aws4_request, SignedHeaders=host;x-amz-date, Signature=' + '0'.repeat(64),
        'Content-Length': data.length,
      },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      const done = () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) });
      res.on('end', done);
      setTimeout(() => { req.destroy(); done(); }, ms);
    });
    req.on('error', (e) => { if (e.code !== 'ECONNRESET') reject(e); });
    req.end(data);
  });
}

async function main() {
  const port = await freePort();
  const tls = await freePort();
  const srvDir = path.join(mods, 'kinesis-local');
  const srv = spawn(process.execPath, ['-r', path.join(mods, '..', 'loopback.js'), 'main.js'], {
    cwd: srvDir, stdio: ['ignore', 'inherit', 'inherit'],
    env: Object.assign({}, process.env, { KINESIS_MOCK_PLAIN_PORT: String(port),
      KINESIS_MOCK_TLS_PORT: String(tls), LOG_LEVEL: 'WARN' }),
  });
  try {
    const kc = new KinesisClient({ endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1',
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' },
      requestHandler: new NodeHttpHandler() });
    for (let i = 0; ; i++) {
      try { await kc.send(new CreateStreamCommand({ StreamName: 'evs', ShardCount: 1 })); break; }
      catch (e) { if (i > 100) throw e; await sleep(200); }
    }
    let arn;
    for (;;) {
      const d = await kc.send(new DescribeStreamSummaryCommand({ StreamName: 'evs' }));
      arn = d.StreamDescriptionSummary.StreamARN;
      if (d.StreamDescriptionSummary.StreamStatus === 'ACTIVE') break;
      await sleep(200);
    }
    const recs = [Buffer.from('hello'), Buffer.from([0, 1, 2, 0xfe, 0xff]), Buffer.from('{"k":"v"}')];
    for (let i = 0; i < recs.length; i++)
      await kc.send(new PutRecordCommand({ StreamName: 'evs', PartitionKey: `pk${i}`, Data: recs[i] }));
    const c = await kc.send(new RegisterStreamConsumerCommand({ StreamARN: arn, ConsumerName: 'cap' }));
    const carn = c.Consumer.ConsumerARN;
    for (;;) {
      const d = await kc.send(new DescribeStreamConsumerCommand({ ConsumerARN: carn }));
      if (d.ConsumerDescription.ConsumerStatus === 'ACTIVE') break;
      await sleep(200);
    }
    const req = { ConsumerARN: carn, ShardId: 'shardId-000000000000',
      StartingPosition: { Type: 'TRIM_HORIZON' } };
    const first = subscribe(port, req, 2500);
    await sleep(700);
    const inUse = await subscribe(port, req, 1500);
    const events = await first;
    const notFound = await subscribe(port, Object.assign({}, req,
      { ConsumerARN: carn.replace(/consumer\/cap:/, 'consumer/nope:') }), 1500);
    const out = { 'subscribe_events.bin': events, 'subscribe_in_use.bin': inUse,
      'subscribe_not_found.bin': notFound };
    for (const [name, r] of Object.entries(out)) {
      fs.writeFileSync(path.join(outDir, name), r.body);
      console.log(name, r.status, r.headers['content-type'], r.body.length, 'bytes');
    }
  } finally {
    srv.kill();
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
