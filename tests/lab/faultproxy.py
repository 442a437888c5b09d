#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 reverse proxy for AWS JSON APIs.

The local servers never throttle, fail or drop a connection, so retry and
recovery paths need something in between that does. FaultProxy forwards
requests to a plain-http target (kinesalite, kinesis-local's plain port,
dynalite) and applies rules to the requests whose X-Amz-Target action
matches:

  status              answer an HTTP error with an AWS JSON error body
  putrecords_partial  make chosen PutRecords entries fail
  garbage             answer with a body that is not JSON
  truncate            declare a Content-Length and send fewer bytes
  reset               drop the connection (TCP RST) without answering
  delay               wait before forwarding
  cut_stream_after    close a (streaming) response after N bytes or N
                      event-stream messages

With `limits` (FaultProxy(target, limits={}) or --limits '{}') the proxy
also enforces Kinesis's per-shard limits as the service does (see
kinesis_limits.py for the model): GetRecords calls and data per shard,
throttled with HTTP 400 ProvisionedThroughputExceededException; responses
cut to 10 MiB; PutRecords entries refused one by one with per-record
ProvisionedThroughputExceededException beyond 1 MiB/s and 1,000 records/s
per shard (the refused entries are not stored); SubscribeToShard events
delivered at most 2 MiB/s per shard per consumer. A matching rule still
applies first. Limits.scaled() rates (`{"scale": 0.1}`) let a small
machine emulate many shards. limit_stats() (or GET /__faultproxy/limits)
counts calls, throttles, records and data bytes by action.

Responses are relayed as they arrive, so event streams (SubscribeToShard)
pass through incrementally. Every request is logged (see LoggedRequest) so a
test can check, for example, which entries a client sent again; a long run
that only counts passes keep_log=False and an observer, which sees every
request passed through with its whole response (wirecount.py counts the
DynamoDB reads and writes of a lease table that way).

In a Python test:

    with FaultProxy(kinesalite.endpoint) as proxy:
        proxy.add_rule("status", "GetRecords", count=2,
                       error="ProvisionedThroughputExceededException")
        client = lab.boto3_client("kinesis", proxy.endpoint)
        ...
        assert [r.status for r in proxy.requests("GetRecords")][:2] == [400, 400]

From the shell (rules as JSON, see Rule.from_dict):

    python3 tests/lab/faultproxy.py --target http://127.0.0.1:4567 \\
        --rule '{"kind": "status", "action": "PutRecords", "count": 1, "status": 500}'

The proxy also answers a small control API on paths below /__faultproxy/
(AWS requests always use "/"), so programs that are not Python can change
rules at runtime: POST /__faultproxy/rules (a JSON rule or list of rules),
DELETE /__faultproxy/rules, GET /__faultproxy/rules, GET /__faultproxy/log,
DELETE /__faultproxy/log.

Only the target is trusted to speak HTTP/1.1 correctly; requests with a
changed body keep their original signature, which the local servers do not
check.
"""

from __future__ import annotations

import argparse
import asyncio
import http
import json
import random
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"
CONTROL_PREFIX = "/__faultproxy/"
STREAM_LIMIT = 1 << 20   # longest header line accepted

# Parameters of each rule kind, with their defaults.
KINDS = {
    "status": {"status": None, "error": None, "message": None, "body": None,
               "forward": False},
    "putrecords_partial": {"every": None, "fraction": None, "indices": None,
                           "error_code": "ProvisionedThroughputExceededException",
                           "error_message": "Rate exceeded for shard.",
                           "drop": False},
    "garbage": {"status": 200, "body": "<html><body>Bad Gateway</body></html>",
                "forward": False},
    "truncate": {"declared": None, "send": None},
    "reset": {"forward": False},
    "delay": {"ms": 1000},
    "cut_stream_after": {"bytes": None, "messages": None},
}

# Error types whose HTTP status is not 400.
ERROR_STATUS = {"InternalFailure": 500, "InternalServerError": 500,
                "ServiceUnavailable": 503}
STATUS_ERROR = {500: "InternalFailure", 503: "ServiceUnavailable"}
DYNAMODB_ERROR_PREFIX = "com.amazonaws.dynamodb.v20120810#"

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
              "transfer-encoding", "upgrade", "expect", "content-length"}


# --------------------------------------------------------------------------
# Rules and the request log


@dataclass
class Rule:
    """When and how to inject one kind of fault.

    action       X-Amz-Target action suffix ("GetRecords", "UpdateItem")
                 or "*" for every request; putrecords_partial defaults to
                 "PutRecords", the others to "*".
    count        apply to the next `count` matching requests only.
    probability  apply to a matching request with this probability, drawn
                 from the proxy's seeded RNG (with count: at most count
                 times). Neither: apply to every matching request.
    params       the kind's parameters (see KINDS for names and defaults).
    applied      how many times the rule has fired so far.
    """

    kind: str
    action: str = "*"
    count: int | None = None
    probability: float | None = None
    params: dict = field(default_factory=dict)
    applied: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown rule kind {self.kind!r}; "
                             f"known: {', '.join(KINDS)}")
        unknown = set(self.params) - set(KINDS[self.kind])
        if unknown:
            raise ValueError(f"{self.kind}: unknown parameters {sorted(unknown)}; "
                             f"known: {sorted(KINDS[self.kind])}")
        self.params = {**KINDS[self.kind], **self.params}
        p = self.params
        if self.kind == "cut_stream_after" and (p["bytes"] is None) == (p["messages"] is None):
            raise ValueError("cut_stream_after needs exactly one of bytes, messages")
        if self.kind == "putrecords_partial" and sum(
                p[k] is not None for k in ("every", "fraction", "indices")) > 1:
            raise ValueError("putrecords_partial takes one of every, fraction, indices")

    @classmethod
    def from_dict(cls, spec: dict) -> "Rule":
        """Build a rule from its JSON form, e.g.
        {"kind": "status", "action": "GetRecords", "count": 2, "status": 500}:
        kind, action, count and probability as in the class, every other key
        a parameter of the kind."""
        spec = dict(spec)
        kind = spec.pop("kind")
        action = spec.pop("action", None) or _default_action(kind)
        return cls(kind, action, spec.pop("count", None),
                   spec.pop("probability", None), spec)

    def to_dict(self) -> dict:
        spec = {"kind": self.kind, "action": self.action, "count": self.count,
                "probability": self.probability, "applied": self.applied}
        spec.update({k: v for k, v in self.params.items()
                     if isinstance(v, (str, int, float, bool, list, dict, type(None)))})
        return spec

    def matches(self, action: str) -> bool:
        return self.action == "*" or self.action == action


def _default_action(kind: str) -> str:
    return "PutRecords" if kind == "putrecords_partial" else "*"


@dataclass
class LoggedRequest:
    """One request the proxy received, and what became of it.

    body            the request body as the client sent it.
    forwarded_body  the body sent to the target, or None if not forwarded
                    (differs from `body` when putrecords_partial drops).
    status          the status line the client got, None if none (reset).
    fault           kind of the rule applied, None if passed through.
    failed_indices  putrecords_partial: entries reported as failed.
    """

    action: str
    body: bytes
    forwarded_body: bytes | None = None
    status: int | None = None
    fault: str | None = None
    failed_indices: list = field(default_factory=list)
    time: float = field(default_factory=time.time)

    def json(self):
        """The request body decoded as JSON."""
        return json.loads(self.body)

    def to_dict(self) -> dict:
        def text(data):
            return None if data is None else data.decode("utf-8", "replace")
        return {"action": self.action, "status": self.status, "fault": self.fault,
                "failed_indices": self.failed_indices, "time": self.time,
                "body": text(self.body), "forwarded_body": text(self.forwarded_body)}


# --------------------------------------------------------------------------
# HTTP/1.1 plumbing


class _Closed(Exception):
    """The peer closed the connection between messages."""


class _TargetDown(Exception):
    """The target refused or failed the connection."""


@dataclass
class _Message:
    """A request or response head, and for requests the whole body."""

    start: str
    headers: list
    body: bytes = b""

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    def wants_close(self) -> bool:
        return "close" in (self.header("connection") or "").lower()


async def _read_head(reader: asyncio.StreamReader) -> _Message:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if not error.partial.strip():
            raise _Closed() from None
        raise
    lines = raw.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    return _Message(lines[0], headers)


async def _body_pieces(reader: asyncio.StreamReader, framing: str, length: int = 0):
    """Yield a message body piece by piece as it arrives, decoding chunks."""
    if framing == "length":
        while length > 0:
            piece = await reader.read(min(length, 65536))
            if not piece:
                raise asyncio.IncompleteReadError(b"", length)
            length -= len(piece)
            yield piece
    elif framing == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)
    elif framing == "close":
        while piece := await reader.read(65536):
            yield piece


def _framing(message: _Message, has_body: bool = True) -> tuple[str, int]:
    if not has_body:
        return "none", 0
    if "chunked" in (message.header("transfer-encoding") or "").lower():
        return "chunked", 0
    length = message.header("content-length")
    if length is not None:
        return "length", int(length)
    return "close", 0


async def _read_request(reader, writer) -> _Message:
    request = await _read_head(reader)
    framing, length = _framing(request)
    if framing == "close":   # a request without a body
        framing, length = "length", 0
    if (request.header("expect") or "").lower() == "100-continue" and (
            framing == "chunked" or length):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.body = b"".join([p async for p in _body_pieces(reader, framing, length)])
    return request


def _head_bytes(start: str, headers: list) -> bytes:
    lines = [start] + [f"{k}: {v}" for k, v in headers] + ["", ""]
    return "\r\n".join(lines).encode("latin-1")


def _response_head(status: int, headers: list) -> bytes:
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    return _head_bytes(f"HTTP/1.1 {status} {reason}", headers)


def _action_of(request: _Message) -> tuple[str, str]:
    """(service prefix, action) from X-Amz-Target, e.g.
    ("Kinesis_20131202", "PutRecords"); ("", "") without the header."""
    target = request.header("x-amz-target") or ""
    prefix, _, action = target.rpartition(".")
    return prefix, action


class _Upstream:
    """The keep-alive connection to the target used by one client connection."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None
        self.reusable = False

    async def exchange(self, request: _Message, body: bytes):
        """Send a request; return the response head and a body iterator."""
        method = request.start.split(" ", 1)[0]
        headers = [(k, v) for k, v in request.headers if k.lower() not in HOP_BY_HOP]
        headers.append(("Content-Length", str(len(body))))
        data = _head_bytes(request.start, headers) + body
        for attempt in (1, 2):
            fresh = self.writer is None
            if fresh:
                try:
                    self.reader, self.writer = await asyncio.open_connection(
                        self.host, self.port, limit=STREAM_LIMIT)
                except OSError as error:
                    raise _TargetDown(error) from error
            try:
                self.writer.write(data)
                await self.writer.drain()
                response = await _read_head(self.reader)
                while response.start.split(" ")[1].startswith("1"):
                    response = await _read_head(self.reader)   # interim 1xx
                break
            except (_Closed, ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if fresh or attempt == 2:   # only a stale idle connection is retried
                    raise
        status = int(response.start.split(" ")[1])
        has_body = method != "HEAD" and status not in (204, 304)
        framing, length = _framing(response, has_body)
        self.reusable = framing != "close" and not response.wants_close()
        return status, response, framing, _body_pieces(self.reader, framing, length)

    def done(self):
        """Call after a response body was read completely."""
        if not self.reusable:
            self.close()

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class _StreamCut:
    """Counts response body bytes or event-stream messages up to a limit.

    An event-stream message starts with its total length as a 4-byte big
    endian integer, which is all that is needed to find message boundaries.
    """

    def __init__(self, nbytes: int | None, messages: int | None):
        self.bytes_left = nbytes
        self.messages_left = messages
        self.prelude = b""
        self.message_left = None   # bytes left in the current message

    def take(self, data: bytes) -> tuple[bytes, bool]:
        """The part of `data` to pass on, and whether to cut after it."""
        if self.bytes_left is not None:
            data = data[:self.bytes_left]
            self.bytes_left -= len(data)
            return data, self.bytes_left == 0
        i = 0
        while i < len(data) and self.messages_left > 0:
            if self.message_left is None:   # reading the length prelude
                piece = data[i:i + 4 - len(self.prelude)]
                self.prelude += piece
                i += len(piece)
                if len(self.prelude) < 4:
                    break
                self.message_left = int.from_bytes(self.prelude, "big") - 4
                self.prelude = b""
            step = min(self.message_left, len(data) - i)
            i += step
            self.message_left -= step
            if self.message_left == 0:
                self.message_left = None
                self.messages_left -= 1
        return data[:i], self.messages_left == 0

    def done_before_body(self) -> bool:
        return self.bytes_left == 0 or self.messages_left == 0


# --------------------------------------------------------------------------
# The proxy


class FaultProxy:
    """Reverse proxy to `target` on a free 127.0.0.1 port, injecting faults.

    start() (or `with`) runs it on its own thread and event loop; `endpoint`
    is then its URL. Rules and the log may be used from any thread.
    """

    def __init__(self, target, *, rules=(), seed: int = 0, port: int = 0,
                 verbose: bool = False, observer=None, keep_log: bool = True,
                 limits=None, clock=time.monotonic):
        """observer(action, request_body, status, response_body), if given,
        is called on the proxy's thread after each request that passed
        through without a fault, once its response was relayed whole; it
        must be quick.  keep_log=False keeps the log empty."""
        url = urllib.parse.urlsplit(getattr(target, "endpoint", target))
        if url.scheme != "http" or not url.hostname or not url.port:
            raise ValueError(f"target must be http://HOST:PORT, not {target!r}")
        self.target = (url.hostname, url.port)
        self.port = port
        self.verbose = verbose
        self.observer = observer
        self.keep_log = keep_log
        self._rules: list[Rule] = []
        self._log: list[LoggedRequest] = []
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._loop = self._thread = self._server = None
        self._connections: set = set()
        self._limits = None
        if limits is not None:
            import limit_mode   # it uses this module's HTTP plumbing
            self._limits = limit_mode.LimitEnforcer(self.target, limits, clock,
                                                    sys.modules[__name__])
        for rule in rules:
            self.add_rule(rule)

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    # -- rules

    def add_rule(self, kind, action: str | None = None, *, count: int | None = None,
                 probability: float | None = None, **params) -> Rule:
        """Add a rule; `kind` may also be a Rule or its JSON dict form.

        Rules are tried in the order added; the first that matches and is
        not used up applies (one fault per request).
        """
        if isinstance(kind, dict):
            rule = Rule.from_dict(kind)
        elif isinstance(kind, Rule):
            rule = kind
        else:
            rule = Rule(kind, action or _default_action(kind), count, probability, params)
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove_rule(self, rule: Rule) -> None:
        with self._lock:
            self._rules.remove(rule)

    def clear_rules(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def seed(self, seed: int) -> None:
        """Restart the RNG used by probability and fraction."""
        with self._lock:
            self._rng.seed(seed)

    # -- log

    @property
    def log(self) -> list[LoggedRequest]:
        """Every request so far, oldest first (a copy)."""
        with self._lock:
            return list(self._log)

    def requests(self, action: str | None = None) -> list[LoggedRequest]:
        """Logged requests, only those for `action` if given."""
        return [r for r in self.log if action is None or r.action == action]

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    # -- limits

    def limit_stats(self) -> dict:
        """Limit mode: per action, calls, throttled (calls or PutRecords
        entries), records and data bytes that went through; {} otherwise."""
        return self._limits.stats() if self._limits else {}

    def clear_limit_stats(self) -> None:
        if self._limits:
            self._limits.clear_stats()

    # -- lifetime

    def start(self) -> "FaultProxy":
        """Start serving on a thread of its own; returns once listening."""
        if self._thread is not None:
            return self
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure),
                                        name="faultproxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop serving and close every connection; idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        thread.join()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self, ready: threading.Event, failure: list) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(asyncio.start_server(
                self._serve_client, LOOPBACK, self.port, limit=STREAM_LIMIT))
            self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as error:
            failure.append(error)
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for writer in list(self._connections):
                writer.transport.abort()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    # -- serving

    def _pick_rule(self, action: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if not rule.matches(action):
                    continue
                if rule.count is not None and rule.applied >= rule.count:
                    continue
                if rule.probability is not None and self._rng.random() >= rule.probability:
                    continue
                rule.applied += 1
                return rule
        return None

    async def _serve_client(self, reader, writer) -> None:
        self._connections.add(writer)
        upstream = _Upstream(*self.target)
        try:
            while True:
                request = await _read_request(reader, writer)
                if not await self._handle(request, writer, upstream):
                    break
        except (_Closed, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass   # stop(): end quietly, the loop is going away
        finally:
            upstream.close()
            self._connections.discard(writer)
            writer.close()

    async def _handle(self, request: _Message, writer, upstream: _Upstream) -> bool:
        """Answer one request; False if the client connection must close."""
        path = request.start.split(" ")[1] if " " in request.start else "/"
        if path.startswith(CONTROL_PREFIX):
            return await self._control(request, path, writer)
        prefix, action = _action_of(request)
        entry = LoggedRequest(action, request.body)
        if self.keep_log:
            with self._lock:
                self._log.append(entry)
        rule = self._pick_rule(action)
        entry.fault = rule.kind if rule else None
        try:
            keep = await self._apply(rule, request, prefix, entry, writer, upstream)
        except _TargetDown as error:
            # Say so plainly rather than drop the connection, which would
            # look like an injected fault.
            keep = await _send(writer, entry, 502, [("Content-Type", "application/json")],
                               json.dumps({"__type": "BadGateway",
                                           "message": f"faultproxy: target down: {error}"}
                                          ).encode())
        finally:
            if self.verbose:
                print(f"faultproxy: {action or path} -> {entry.status} "
                      f"fault={entry.fault}", file=sys.stderr, flush=True)
        return keep and not request.wants_close()

    async def _apply(self, rule, request, prefix, entry, writer, upstream) -> bool:
        p = rule.params if rule else {}
        kind = rule.kind if rule else None
        if kind == "delay":
            await asyncio.sleep(p["ms"] / 1000)
        if kind in ("status", "garbage", "reset") and p["forward"]:
            await self._forward_buffered(request, request.body, entry, upstream)
        if kind == "reset":
            _reset(writer)
            return False
        if kind == "status":
            status, headers, body = _error_response(p, prefix, request)
            return await _send(writer, entry, status, headers, body)
        if kind == "garbage":
            body = _as_bytes(p["body"])
            return await _send(writer, entry, p["status"],
                               [("Content-Type", _json_type(request))], body)
        if kind == "putrecords_partial":
            return await self._partial(p, request, entry, writer, upstream)
        if kind == "truncate":
            status, response, body = await self._forward_buffered(
                request, request.body, entry, upstream)
            declared = len(body) if p["declared"] is None else p["declared"]
            send = declared // 2 if p["send"] is None else p["send"]
            declared = max(declared, send + 1)
            entry.status = status
            headers = _end_to_end(response) + [("Content-Length", str(declared))]
            writer.write(_response_head(status, headers) + body[:send])
            await writer.drain()
            writer.close()
            return False
        if kind is None and self._limits is not None:
            handled = await self._limits.handle(request, prefix, entry, writer, upstream,
                                                self._relay)
            if handled is not None:
                return handled
        cut = _StreamCut(p["bytes"], p["messages"]) if kind == "cut_stream_after" else None
        return await self._relay(request, entry, writer, upstream, cut)

    async def _forward_buffered(self, request, body, entry, upstream):
        """Forward and read the whole response: (status, head, body)."""
        entry.forwarded_body = body
        status, response, _, pieces = await upstream.exchange(request, body)
        data = b"".join([piece async for piece in pieces])
        upstream.done()
        return status, response, data

    async def _relay(self, request, entry, writer, upstream, cut, pace=None) -> bool:
        """Forward, passing the response on piece by piece as it arrives;
        `await pace(piece, emit)` (limit mode) passes each piece on itself,
        through `await emit(data)`, when it sees fit."""
        entry.forwarded_body = request.body
        status, response, framing, pieces = await upstream.exchange(request, request.body)
        entry.status = status
        headers = _end_to_end(response)
        if framing == "length":
            headers.append(("Content-Length", response.header("content-length")))
        elif framing == "chunked":
            headers.append(("Transfer-Encoding", "chunked"))
        elif framing == "close":
            headers.append(("Connection", "close"))
        writer.write(_response_head(status, headers))
        if cut is not None and cut.done_before_body():
            return await _cut(writer, upstream)
        seen = [] if self.observer is not None and cut is None else None

        async def emit(data: bytes) -> None:
            if data:
                writer.write(b"%x\r\n%s\r\n" % (len(data), data)
                             if framing == "chunked" else data)
                await writer.drain()

        async for piece in pieces:
            if seen is not None:
                seen.append(piece)
            finished = False
            if cut is not None:
                piece, finished = cut.take(piece)
            if pace is not None:
                await pace(piece, emit)
            else:
                await emit(piece)
            if finished:
                return await _cut(writer, upstream)
        if framing == "chunked":
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        upstream.done()
        if seen is not None:
            try:
                self.observer(entry.action, request.body, status, b"".join(seen))
            except Exception as error:  # noqa: BLE001 - the traffic goes on
                print(f"faultproxy: observer: {error!r}", file=sys.stderr, flush=True)
        return framing != "close"

    async def _partial(self, p, request, entry, writer, upstream) -> bool:
        """putrecords_partial: report chosen entries as failed.

        Without `drop` every entry is forwarded and really written, and the
        response then lies about the chosen ones, so a client that re-sends
        them creates duplicates (as can happen on AWS after a timeout). With
        `drop` the chosen entries are removed from the forwarded request, so
        the target only ever stores what the client was told succeeded.
        """
        try:
            data = json.loads(request.body)
            records = data["Records"]
        except (ValueError, KeyError, TypeError):
            entry.fault = None   # not a JSON PutRecords: pass through
            return await self._relay(request, entry, writer, upstream, None)
        chosen = self._choose(p, len(records))
        entry.failed_indices = sorted(chosen)
        failure = {"ErrorCode": p["error_code"], "ErrorMessage": p["error_message"]}
        kept = [r for i, r in enumerate(records) if i not in chosen or not p["drop"]]
        result = {"FailedRecordCount": 0, "Records": []}
        if kept:
            body = (json.dumps(dict(data, Records=kept)).encode()
                    if p["drop"] else request.body)
            status, response, raw = await self._forward_buffered(
                request, body, entry, upstream)
            if status != 200:
                return await _send(writer, entry, status, _end_to_end(response), raw)
            result = json.loads(raw)
        answers = iter(result["Records"])
        merged = []
        for i in range(len(records)):
            if i in chosen:
                merged.append(dict(failure))
                if not p["drop"]:
                    next(answers)
            else:
                merged.append(next(answers))
        result["Records"] = merged
        result["FailedRecordCount"] = sum("ErrorCode" in r for r in merged)
        return await _send(writer, entry, 200, [("Content-Type", _json_type(request))],
                           json.dumps(result).encode())

    def _choose(self, p, n: int) -> set:
        if p["indices"] is not None:
            return {i for i in p["indices"] if 0 <= i < n}
        if p["fraction"] is not None:
            with self._lock:
                return {i for i in range(n) if self._rng.random() < p["fraction"]}
        every = p["every"] or 2
        return {i for i in range(n) if (i + 1) % every == 0}

    async def _control(self, request, path, writer) -> bool:
        """The /__faultproxy/ API: rules and log over HTTP, as JSON."""
        method = request.start.split(" ")[0]
        what = path[len(CONTROL_PREFIX):].split("?")[0].strip("/")
        try:
            if what == "rules" and method == "POST":
                spec = json.loads(request.body or b"[]")
                for item in spec if isinstance(spec, list) else [spec]:
                    self.add_rule(item)
                answer = [r.to_dict() for r in self.rules]
            elif what == "rules" and method == "GET":
                answer = [r.to_dict() for r in self.rules]
            elif what == "rules" and method == "DELETE":
                self.clear_rules()
                answer = []
            elif what == "log" and method == "GET":
                answer = [r.to_dict() for r in self.log]
            elif what == "log" and method == "DELETE":
                self.clear_log()
                answer = []
            elif what == "limits" and method == "GET":
                answer = self.limit_stats()
            elif what == "limits" and method == "DELETE":
                self.clear_limit_stats()
                answer = {}
            else:
                answer, status = {"error": f"no {method} {path}"}, 404
                return await _send_json(writer, status, answer)
        except (ValueError, KeyError, TypeError) as error:
            return await _send_json(writer, 400, {"error": str(error)})
        return await _send_json(writer, 200, answer)


# --------------------------------------------------------------------------
# Responses


def _as_bytes(body) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


def _json_type(request: _Message) -> str:
    kind = request.header("content-type") or ""
    return kind if kind.startswith("application/x-amz-json") else "application/x-amz-json-1.1"


def _error_response(p: dict, prefix: str, request: _Message):
    """Status, headers and body of a `status` rule's answer."""
    status, error = p["status"], p["error"]
    if error is None:
        error = STATUS_ERROR.get(status, "ProvisionedThroughputExceededException")
    if status is None:
        status = ERROR_STATUS.get(error, 400)
    if p["body"] is not None:
        body = _as_bytes(p["body"])
    else:
        if prefix.startswith("DynamoDB_") and "#" not in error:
            error = DYNAMODB_ERROR_PREFIX + error   # as DynamoDB sends them
        message = p["message"] or f"{error.split('#')[-1]} (injected fault)"
        body = json.dumps({"__type": error, "message": message}).encode()
    headers = [("Content-Type", _json_type(request))] if body else []
    return status, headers, body


def _end_to_end(response: _Message) -> list:
    return [(k, v) for k, v in response.headers if k.lower() not in HOP_BY_HOP]


async def _send(writer, entry, status: int, headers: list, body: bytes) -> bool:
    entry.status = status
    headers = list(headers) + [("x-amzn-RequestId", str(uuid.uuid4())),
                               ("Content-Length", str(len(body)))]
    writer.write(_response_head(status, headers) + body)
    await writer.drain()
    return True


async def _send_json(writer, status: int, answer) -> bool:
    body = json.dumps(answer).encode()
    writer.write(_response_head(status, [("Content-Type", "application/json"),
                                         ("Content-Length", str(len(body)))]) + body)
    await writer.drain()
    return True


def _reset(writer) -> None:
    """Close with a TCP RST (SO_LINGER 0) rather than an orderly FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _cut(writer, upstream: _Upstream) -> bool:
    """End a response midway; drop the target connection too, as a network
    failure would (kinesis-local then ends the subscription)."""
    await writer.drain()
    writer.close()
    upstream.close()
    return False


# --------------------------------------------------------------------------
# Command line


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Fault-injecting reverse proxy for AWS JSON APIs.")
    parser.add_argument("--target", required=True, help="http://HOST:PORT to forward to")
    parser.add_argument("--rule", action="append", default=[], type=json.loads,
                        help='a rule as JSON, e.g. \'{"kind": "status", '
                             '"action": "GetRecords", "count": 1, "status": 500}\'')
    parser.add_argument("--port", type=int, default=0, help="listen port (default: any)")
    parser.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    parser.add_argument("--limits", type=json.loads, default=None,
                        help='enforce the per-shard limits, e.g. \'{}\' (as AWS) or '
                             '\'{"scale": 0.1}\' (see kinesis_limits.Limits)')
    args = parser.parse_args(argv)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        proxy = FaultProxy(args.target, rules=args.rule, seed=args.seed,
                           port=args.port, verbose=args.verbose, limits=args.limits)
    except ValueError as error:
        parser.error(str(error))
    with proxy:
        print(f"ENDPOINT={proxy.endpoint}", flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
