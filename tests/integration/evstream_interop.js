// The JS SDK's event stream codec (@smithy/eventstream-codec) side of
// test_eventstream_interop.py.  Messages travel as the dump format of
// tests/tools/evstream_tool.c:
//   message N_HEADERS PAYLOAD_LEN / header NAME_HEX TYPE VALUE / payload HEX
//
//   node evstream_interop.js gen SEED COUNT > spec      random messages
//   node evstream_interop.js encode < spec > frames     encode with the SDK
//   node evstream_interop.js decode < frames > dump     decode with the SDK
//   node evstream_interop.js decode-many < streams      for each stream
//       (a u32 BE length, then the bytes) print "MESSAGES ok|error"
// The codec is found through NODE_PATH.
'use strict';
const fs = require('fs');
const { EventStreamCodec, Int64 } = require('@smithy/eventstream-codec');

const utf8 = {
  to: (b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8'),
  from: (s) => new Uint8Array(Buffer.from(s, 'utf8')),
};
const codec = new EventStreamCodec(utf8.to, utf8.from);
const hex = (b) => (b.length ? Buffer.from(b).toString('hex') : '-');
const unhex = (s) => Buffer.from(s === '-' ? '' : s, 'hex');

// ---- random messages ----
let state = 1;
function seed(s) { state = (Number(s) * 2654435761 + 1) >>> 0 || 1; }
function rand32() {
  // xorshift32, reproducible from the seed
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state;
}
const below = (n) => (n <= 1 ? 0 : rand32() % n);
function bytes(n) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = rand32() & 255;
  return b;
}
// Valid UTF-8 of about n bytes mixing 1- to 4-byte characters.
function text(n) {
  const ranges = [[0x20, 0x7e], [0x00, 0x1f], [0x80, 0x7ff], [0x800, 0xd7ff], [0xe000, 0xfffd],
    [0x10000, 0x10ffff]];
  const chars = [];
  let len = 0;
  for (;;) {
    const [lo, hi] = ranges[below(ranges.length)];
    const c = String.fromCodePoint(lo + below(hi - lo + 1));
    const k = Buffer.byteLength(c);
    if (len + k > n) break;
    chars.push(c);
    len += k;
  }
  return chars.join('');
}
function size(small, big) {
  const r = below(10);
  return r < 3 ? 0 : r < 9 ? below(small) : below(big);
}

// One random header value in the dump's terms: [type, value text, SDK value].
function randomHeader() {
  switch (below(9)) {
    case 0: { const v = below(2) === 1; return ['bool', v ? '1' : '0', { type: 'boolean', value: v }]; }
    case 1: { const v = below(256) - 128; return ['byte', String(v), { type: 'byte', value: v }]; }
    case 2: { const v = below(65536) - 32768; return ['short', String(v), { type: 'short', value: v }]; }
    case 3: { const v = rand32() | 0; return ['int', String(v), { type: 'integer', value: v }]; }
    case 4: {
      const b = bytes(8);
      if (below(4) === 0) b.fill(below(2) ? 0xff : 0); // -1 and 0
      if (below(8) === 0) { b.fill(0); b[0] = 0x80; } // INT64_MIN
      return ['long', BigInt.asIntN(64, BigInt('0x' + b.toString('hex'))).toString(),
        { type: 'long', value: new Int64(new Uint8Array(b)) }];
    }
    case 5: { const b = bytes(size(64, 32768)); return ['bytes', hex(b), { type: 'binary', value: new Uint8Array(b) }]; }
    case 6: {
      const s = text(size(64, 32760));
      return ['string', hex(Buffer.from(s, 'utf8')), { type: 'string', value: s }];
    }
    case 7: {
      // Dates reach +-8.64e15 ms.
      const v = (rand32() * 2 ** 21 + below(2 ** 21)) * (below(2) ? 1 : -1) % 8.64e15;
      return ['timestamp', String(v), { type: 'timestamp', value: new Date(v) }];
    }
    default: {
      const h = bytes(16).toString('hex');
      const u = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
      return ['uuid', h, { type: 'uuid', value: u }];
    }
  }
}

function gen(seedArg, count) {
  seed(seedArg);
  const out = [];
  for (let m = 0; m < count; m++) {
    const n = below(6) === 0 ? below(40) : below(6);
    const names = new Set();
    const lines = [];
    while (names.size < n) {
      // A letter first keeps the key order of a JS object (no integer keys).
      const r = below(10);
      const name = r === 0 ? 'x' + text(below(254)) : r === 1 ? ':event-type' : 'h' + text(below(20));
      if (names.has(name) || Buffer.byteLength(name) > 255) continue;
      names.add(name);
      const [type, value] = randomHeader();
      lines.push(`header ${hex(Buffer.from(name, 'utf8'))} ${type} ${value}`);
    }
    const big = below(25) === 0;
    const p = bytes(big ? 1 + below(3 << 20) : size(200, 70000));
    out.push(`message ${n} ${p.length}`, ...lines, `payload ${hex(p)}`);
  }
  return out.join('\n') + '\n';
}

// ---- dump <-> SDK messages ----
function parseDump(textIn) {
  const msgs = [];
  let cur = null;
  for (const line of textIn.split('\n')) {
    if (!line) continue;
    const f = line.split(' ');
    if (f[0] === 'message') cur = { headers: {} };
    else if (f[0] === 'header') {
      const name = unhex(f[1]).toString('utf8');
      const v = f[3];
      let h;
      switch (f[2]) {
        case 'bool': h = { type: 'boolean', value: v === '1' }; break;
        case 'byte': h = { type: 'byte', value: Number(v) }; break;
        case 'short': h = { type: 'short', value: Number(v) }; break;
        case 'int': h = { type: 'integer', value: Number(v) }; break;
        case 'long': {
          const b = Buffer.alloc(8);
          b.writeBigInt64BE(BigInt(v));
          h = { type: 'long', value: new Int64(new Uint8Array(b)) };
          break;
        }
        case 'bytes': h = { type: 'binary', value: new Uint8Array(unhex(v)) }; break;
        case 'string': h = { type: 'string', value: unhex(v).toString('utf8') }; break;
        case 'timestamp': h = { type: 'timestamp', value: new Date(Number(v)) }; break;
        case 'uuid': h = { type: 'uuid', value: v.replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-') }; break;
        default: throw new Error('bad type ' + f[2]);
      }
      cur.headers[name] = h;
    } else if (f[0] === 'payload') {
      cur.body = new Uint8Array(unhex(f[1]));
      msgs.push(cur);
    }
  }
  return msgs;
}

function dumpMessage(m) {
  const names = Object.keys(m.headers);
  const lines = [`message ${names.length} ${m.body.length}`];
  for (const name of names) {
    const h = m.headers[name];
    let type, v;
    switch (h.type) {
      case 'boolean': type = 'bool'; v = h.value ? '1' : '0'; break;
      case 'byte': type = 'byte'; v = String(h.value); break;
      case 'short': type = 'short'; v = String(h.value); break;
      case 'integer': type = 'int'; v = String(h.value); break;
      case 'long': type = 'long'; v = BigInt.asIntN(64, BigInt('0x' + Buffer.from(h.value.bytes).toString('hex'))).toString(); break;
      case 'binary': type = 'bytes'; v = hex(h.value); break;
      case 'string': type = 'string'; v = hex(Buffer.from(h.value, 'utf8')); break;
      case 'timestamp': type = 'timestamp'; v = String(h.value.getTime()); break;
      case 'uuid': type = 'uuid'; v = h.value.replace(/-/g, ''); break;
      default: throw new Error('unexpected type ' + h.type);
    }
    lines.push(`header ${hex(Buffer.from(name, 'utf8'))} ${type} ${v}`);
  }
  lines.push(`payload ${hex(m.body)}`);
  return lines.join('\n') + '\n';
}

// Splits at the length prefixes and lets the codec check each message.
function decode(buf) {
  const out = [];
  let off = 0;
  try {
    while (off < buf.length) {
      if (buf.length - off < 4) throw new Error('truncated');
      const n = buf.readUInt32BE(off);
      if (n < 16 || n > buf.length - off) throw new Error('bad length');
      out.push(dumpMessage(codec.decode(new Uint8Array(buf.buffer, buf.byteOffset + off, n))));
      off += n;
    }
  } catch (e) {
    return { out, error: e.message };
  }
  return { out, error: null };
}

function main() {
  const [cmd, a, b] = process.argv.slice(2);
  if (cmd === 'gen') {
    process.stdout.write(gen(Number(a), Number(b)));
  } else if (cmd === 'encode') {
    const frames = parseDump(fs.readFileSync(0, 'utf8')).map((m) => Buffer.from(codec.encode(m)));
    fs.writeSync(1, Buffer.concat(frames));
  } else if (cmd === 'decode') {
    const r = decode(fs.readFileSync(0));
    fs.writeSync(1, r.out.join('') + (r.error ? `error ${r.error}\n` : ''));
  } else if (cmd === 'decode-many') {
    const buf = fs.readFileSync(0);
    const lines = [];
    for (let off = 0; off < buf.length;) {
      const n = buf.readUInt32BE(off);
      const r = decode(buf.subarray(off + 4, off + 4 + n));
      lines.push(`${r.out.length} ${r.error ? 'error' : 'ok'}\n`);
      off += 4 + n;
    }
    fs.writeSync(1, lines.join(''));
  } else {
    console.error('usage: evstream_interop.js gen SEED COUNT | encode | decode | decode-many');
    process.exit(2);
  }
}
main();
