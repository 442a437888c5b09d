'use strict';
// Preload (`node -r ./loopback.js ...`) that makes every TCP server bind
// 127.0.0.1. The lab servers otherwise listen on all interfaces, which would
// expose unauthenticated mock AWS endpoints to the network while tests run.
// Unix-socket and handle listens are left alone.

const net = require('net');

const LOOPBACK = '127.0.0.1';
const originalListen = net.Server.prototype.listen;

function isPort(value) {
  return typeof value === 'number' ||
    (typeof value === 'string' && /^\d+$/.test(value));
}

net.Server.prototype.listen = function listen(...args) {
  const first = args[0];
  const callback = typeof args[args.length - 1] === 'function' ? args.pop() : undefined;
  const withCallback = (options) =>
    callback ? originalListen.call(this, options, callback) : originalListen.call(this, options);

  // listen() or listen(cb): an ephemeral port on every interface.
  if (args.length === 0) return withCallback({ port: 0, host: LOOPBACK });

  // listen(port[, host][, backlog][, cb])
  if (isPort(first)) {
    const options = { port: Number(first), host: LOOPBACK };
    const backlog = args.slice(1).find((a) => typeof a === 'number');
    if (backlog !== undefined) options.backlog = backlog;
    return withCallback(options);
  }

  // listen(options[, cb]) with a TCP port (not a path or handle).
  if (first && typeof first === 'object' && !first.path && !first.handle &&
      !first._handle && first.fd === undefined) {
    return withCallback(Object.assign({}, first, { host: LOOPBACK }));
  }

  if (callback) args.push(callback);
  return originalListen.apply(this, args);
};
