"""faultproxy.py's limit mode: the I/O side of Kinesis's per-shard limits.

kinesis_limits.py holds the arithmetic; this module finds which shard a
request is for and answers as the service would:

  GetShardIterator  relayed; the iterator is remembered with its shard
  GetRecords        the iterator's shard: over its call rate or in data
                    debt, HTTP 400 ProvisionedThroughputExceededException;
                    otherwise forwarded, a response over read_max_bytes of
                    data asked again with a Limit that fits, and the data
                    returned charged to the shard (NextShardIterator is
                    remembered with the same shard)
  PutRecords        each entry routed by hash key (the stream's ListShards,
                    fetched from the target and cached) and admitted or
                    refused; only admitted entries are forwarded, refused
                    ones answered with a per-record error in place
  PutRecord         the same for one record, refused with HTTP 400
  SubscribeToShard  event-stream messages held so the data of
                    SubscribeToShardEvent events flows at most at
                    efo_bytes_per_s per (consumer, shard); an event with
                    more data than EVENT_SECONDS of that rate (a server
                    that sends a whole backlog at once, as kinesis-local
                    does) is sent as several, as the service pushes a
                    backlog: each continues after its last record and,
                    but for the last, is behind the tip

Stream settings the servers do not know (MaxRecordSizeInKiB, the AUTO
record distribution) are emulated too: see stream_features.py.

Requests that are not understood (no JSON, an unknown iterator) pass
through unlimited and are counted under "unmapped".
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import zlib

import stream_features as sf
from kinesis_limits import (EventPacer, Limits, ReadMeter, ShardMap,
                            WriteMeter, base64_len, hash_key)

PTE = "ProvisionedThroughputExceededException"
ITERATORS_KEPT = 200000
SHARD_MAP_REFRESH_S = 1.0
ACCOUNT = "000000000000"
# A backlog is pushed in events of at most this many seconds of the
# fan-out rate each (five a second, like a polling reader's calls; the
# service documents no event size, and a client must not depend on one).
EVENT_SECONDS = 0.2


def _stream_of(data: dict) -> str | None:
    if data.get("StreamName"):
        return data["StreamName"]
    arn = data.get("StreamARN") or ""
    return arn.rsplit("/", 1)[1] if "/" in arn else None


def _data_bytes(records: list) -> int:
    return sum(base64_len(r.get("Data") or "") for r in records)


class LimitEnforcer:
    def __init__(self, target: tuple, limits, clock, fp):
        self.target = target
        self.limits = limits if isinstance(limits, Limits) else Limits.from_dict(limits)
        self.clock = clock
        self.fp = fp   # faultproxy: HTTP plumbing
        self.iterators: collections.OrderedDict = collections.OrderedDict()
        self.read_meters: dict = {}
        self.write_meters: dict = {}
        self.pacers: dict = {}
        self.shard_maps: dict = {}   # stream -> (ShardMap, fetched at)
        self._lock = threading.Lock()
        self._stats: dict = {}
        self._shards: dict = {}   # (action, stream, shard) -> counts
        self.settings = sf.StreamSettings()

    # -- statistics

    def count(self, action: str, **add) -> None:
        with self._lock:
            s = self._stats.setdefault(action, {"calls": 0, "throttled": 0,
                                                "records": 0, "bytes": 0})
            for k, v in add.items():
                s[k] = s.get(k, 0) + v

    def count_shard(self, action: str, key: tuple, now: float, nbytes: int = 0,
                    records: int = 0, throttled: int = 0) -> None:
        """Per shard: data moved, and when the first and last data moved
        (so a benchmark can tell the rate a shard was read or written at,
        start-up and tail excluded)."""
        with self._lock:
            s = self._shards.get((action,) + key)
            if s is None:
                s = self._shards[(action,) + key] = {
                    "action": action, "stream": key[0], "shard": key[1],
                    "bytes": 0, "records": 0, "throttled": 0, "first": None,
                    "last": None, "last_bytes": 0, "last_records": 0}
            s["throttled"] += throttled
            if nbytes or records:
                s["bytes"] += nbytes
                s["records"] += records
                if s["first"] is None:
                    s["first"] = now
                if s["last"] is None or now > s["last"]:
                    s["last"], s["last_bytes"], s["last_records"] = now, 0, 0
                s["last_bytes"] += nbytes
                s["last_records"] += records

    def stats(self) -> dict:
        with self._lock:
            return {"limits": self.limits.to_dict(),
                    **{k: dict(v) for k, v in self._stats.items()},
                    "shards": [dict(v) for v in self._shards.values()]}

    def clear_stats(self) -> None:
        with self._lock:
            self._stats.clear()
            self._shards.clear()

    # -- dispatch

    async def handle(self, request, prefix, entry, writer, upstream, relay):
        """Answer a Kinesis request under the limits; None: not limited,
        the caller relays it."""
        if not prefix.startswith("Kinesis_"):
            return None
        action = entry.action
        try:
            data = json.loads(request.body) if request.body else {}
        except ValueError:
            data = None
        if not isinstance(data, dict):
            if action in ("GetRecords", "PutRecords", "PutRecord", "SubscribeToShard"):
                self.count("unmapped", calls=1)
            return None
        if action == "CreateStream":
            return await self._create_stream(data, request, entry, writer, upstream)
        if action == "UpdateMaxRecordSize":
            return await self._update_max_record_size(data, request, entry, writer,
                                                      upstream)
        if action == "UpdateStreamRecordDistributionStrategy":
            return await self._update_strategy(data, request, entry, writer, upstream)
        if action == "DescribeStreamSummary":
            status, response, raw = await self._forward(request, request.body, entry,
                                                        upstream)
            if status == 200:
                raw = sf.describe_summary(self.settings, _stream_of(data), raw)
            return await self._reply(writer, entry, status, response, raw)
        if action == "GetShardIterator":
            return await self._get_shard_iterator(data, request, entry, writer, upstream)
        if action == "GetRecords":
            return await self._get_records(data, request, entry, writer, upstream)
        if action in ("PutRecords", "PutRecord"):
            return await self._put(action, data, request, entry, writer, upstream)
        if action == "SubscribeToShard":
            return await self._subscribe(data, request, entry, writer, upstream, relay)
        return None

    async def _forward(self, request, body, entry, upstream):
        entry.forwarded_body = body
        status, response, _, pieces = await upstream.exchange(request, body)
        raw = b"".join([piece async for piece in pieces])
        upstream.done()
        return status, response, raw

    async def _reply(self, writer, entry, status, response, raw):
        return await self.fp._send(writer, entry, status, self.fp._end_to_end(response), raw)

    async def _refuse(self, request, entry, writer, kind: str, message: str):
        entry.fault = "limit"
        return await self.fp._send(writer, entry, 400,
                                   [("Content-Type", self.fp._json_type(request))],
                                   sf.error_body(kind, message))

    async def _call(self, request, action: str, body: dict):
        """Another Kinesis call to the target, on its own connection:
        (status, body)."""
        conn = self.fp._Upstream(*self.target)
        try:
            headers = [(k, v) for k, v in request.headers
                       if k.lower() not in ("x-amz-target", "content-length")]
            headers.append(("X-Amz-Target", "Kinesis_20131202." + action))
            message = self.fp._Message(request.start, headers)
            status, _, _, pieces = await conn.exchange(message, json.dumps(body).encode())
            raw = b"".join([p async for p in pieces])
            conn.done()
            return status, raw
        finally:
            conn.close()

    # -- stream settings (stream_features.py)

    async def _create_stream(self, data, request, entry, writer, upstream):
        stream = data.get("StreamName")
        kib = data.get("MaxRecordSizeInKiB")
        if kib is not None and not (isinstance(kib, int)
                                    and sf.KIB_MIN <= kib <= sf.KIB_MAX):
            return await self._refuse(request, entry, writer, "ValidationException",
                                      f"MaxRecordSizeInKiB {kib} is not between "
                                      f"{sf.KIB_MIN} and {sf.KIB_MAX}.")
        mode = (data.get("StreamModeDetails") or {}).get("StreamMode")
        status, response, raw = await self._forward(request, request.body, entry, upstream)
        if status != 200 and mode == "ON_DEMAND" and "ShardCount" not in data:
            # kinesalite knows no modes and wants a shard count.
            body = dict(data, ShardCount=sf.ON_DEMAND_SHARDS)
            body.pop("StreamModeDetails", None)
            status, response, raw = await self._forward(
                request, json.dumps(body).encode(), entry, upstream)
        if status == 200 and stream:
            if kib is not None:
                self.settings.max_kib[stream] = kib
            if mode:
                self.settings.mode[stream] = mode
        return await self._reply(writer, entry, status, response, raw)

    async def _update_max_record_size(self, data, request, entry, writer, upstream):
        stream = _stream_of(data)
        kib = data.get("MaxRecordSizeInKiB")
        if not (isinstance(kib, int) and sf.KIB_MIN <= kib <= sf.KIB_MAX):
            return await self._refuse(request, entry, writer, "ValidationException",
                                      f"MaxRecordSizeInKiB {kib} is not between "
                                      f"{sf.KIB_MIN} and {sf.KIB_MAX}.")
        status, response, raw = await self._forward(request, request.body, entry, upstream)
        if status != 200 and b"UnknownOperation" in raw and stream:
            # kinesalite: answered here once the stream is known to exist.
            status, raw = await self._call(request, "DescribeStreamSummary",
                                           {"StreamName": stream})
            if status != 200:
                return await self._reply(writer, entry, status, response, raw)
        if status != 200:
            return await self._reply(writer, entry, status, response, raw)
        self.settings.max_kib[stream] = kib
        return await self.fp._send(writer, entry, 200,
                                   [("Content-Type", self.fp._json_type(request))], b"")

    async def _update_strategy(self, data, request, entry, writer, upstream):
        arn = data.get("StreamARN")
        strategy = data.get("RecordDistributionStrategy")
        if not arn:
            return await self._refuse(request, entry, writer, "ValidationException",
                                      "StreamARN is required.")
        if strategy not in ("AUTO", "USER_PARTITION_KEY"):
            return await self._refuse(request, entry, writer, "ValidationException",
                                      f"RecordDistributionStrategy {strategy!r} is not "
                                      "one of AUTO, USER_PARTITION_KEY.")
        stream = _stream_of(data)
        status, raw = await self._call(request, "DescribeStreamSummary",
                                       {"StreamName": stream})
        if status != 200:
            entry.fault = "limit"
            return await self.fp._send(writer, entry, status,
                                       [("Content-Type", self.fp._json_type(request))], raw)
        if strategy == "AUTO" and sf.stream_mode(self.settings, stream, raw) != "ON_DEMAND":
            return await self._refuse(request, entry, writer, "InvalidArgumentException",
                                      "RecordDistributionStrategy AUTO requires a "
                                      "stream in ON_DEMAND capacity mode.")
        self.settings.strategy[stream] = strategy
        return await self.fp._send(writer, entry, 200,
                                   [("Content-Type", self.fp._json_type(request))], b"")

    async def _throttle(self, request, entry, writer, what: str):
        body = json.dumps({"__type": PTE, "message": f"Rate exceeded for {what} "
                           f"under account {ACCOUNT}."}).encode()
        entry.fault = "limit"
        return await self.fp._send(writer, entry, 400,
                                   [("Content-Type", self.fp._json_type(request))], body)

    def _remember(self, iterator, key) -> None:
        if not iterator:
            return
        self.iterators[iterator] = key
        self.iterators.move_to_end(iterator)
        while len(self.iterators) > ITERATORS_KEPT:
            self.iterators.popitem(last=False)

    # -- reads

    async def _get_shard_iterator(self, data, request, entry, writer, upstream):
        status, response, raw = await self._forward(request, request.body, entry, upstream)
        if status == 200:
            try:
                self._remember(json.loads(raw).get("ShardIterator"),
                               (_stream_of(data), data.get("ShardId")))
            except ValueError:
                pass
        return await self._reply(writer, entry, status, response, raw)

    async def _get_records(self, data, request, entry, writer, upstream):
        key = self.iterators.get(data.get("ShardIterator"))
        if key is None:
            self.count("unmapped", calls=1)
            return None
        meter = self.read_meters.get(key)
        if meter is None:
            meter = self.read_meters[key] = ReadMeter(self.limits)
        admitted = self.clock()
        self.count("GetRecords", calls=1)
        if not meter.admit(admitted):
            self.count("GetRecords", throttled=1)
            self.count_shard("GetRecords", key, admitted, throttled=1)
            return await self._throttle(request, entry, writer,
                                        f"Shard - {key[1]} in stream {key[0]}")
        body = request.body
        status, response, raw = await self._forward(request, body, entry, upstream)
        result = _json_or_none(raw) if status == 200 else None
        if result is not None:
            records = result.get("Records") or []
            nbytes = _data_bytes(records)
            if nbytes > self.limits.read_max_bytes:
                # As the service: no more than read_max_bytes in one call.
                fit, total = 0, 0
                for r in records:
                    total += base64_len(r.get("Data") or "")
                    if total > self.limits.read_max_bytes:
                        break
                    fit += 1
                body = json.dumps(dict(data, Limit=max(fit, 1))).encode()
                status, response, raw = await self._forward(request, body, entry, upstream)
                result = _json_or_none(raw) if status == 200 else None
                records = (result or {}).get("Records") or []
                nbytes = _data_bytes(records)
                self.count("GetRecords", capped=1)
            meter.charge(nbytes, admitted)
            self.count("GetRecords", records=len(records), bytes=nbytes)
            self.count_shard("GetRecords", key, admitted, nbytes, len(records))
            if result is not None:
                self._remember(result.get("NextShardIterator"), key)
                if sf.strip_no_key(records):
                    raw = json.dumps(result).encode()
        return await self._reply(writer, entry, status, response, raw)

    # -- writes

    async def _shard_map(self, stream, request, refresh: bool) -> ShardMap | None:
        cached = self.shard_maps.get(stream)
        now = self.clock()
        if cached and (not refresh or now - cached[1] < SHARD_MAP_REFRESH_S):
            return cached[0]
        shards, token = [], None
        conn = self.fp._Upstream(*self.target)
        try:
            while True:
                body = json.dumps({"NextToken": token} if token
                                  else {"StreamName": stream}).encode()
                headers = [(k, v) for k, v in request.headers
                           if k.lower() not in ("x-amz-target", "content-length")]
                headers.append(("X-Amz-Target", "Kinesis_20131202.ListShards"))
                message = self.fp._Message(request.start, headers)
                status, _, _, pieces = await conn.exchange(message, body)
                raw = b"".join([p async for p in pieces])
                conn.done()
                if status != 200:
                    return cached[0] if cached else None
                page = json.loads(raw)
                shards += page.get("Shards") or []
                token = page.get("NextToken")
                if not token:
                    break
        finally:
            conn.close()
        smap = ShardMap(shards)
        self.shard_maps[stream] = (smap, now)
        return smap

    async def _put(self, action, data, request, entry, writer, upstream):
        stream = _stream_of(data)
        records = data.get("Records") if action == "PutRecords" else [data]
        if not stream or not isinstance(records, list):
            self.count("unmapped", calls=1)
            return None
        whole, refused = sf.check_put(self.settings, stream, action, data, records)
        if whole:
            self.count(action, calls=1, refused=1)
            return await self._refuse(request, entry, writer, *whole)
        smap = await self._shard_map(stream, request, refresh=False)
        if smap is None:
            self.count("unmapped", calls=1)
            return None
        if self.settings.auto(stream) and smap.ranges:
            for r in records:
                if isinstance(r, dict):
                    sf.place(self.settings, stream, smap, r)
            request.body = json.dumps(data).encode()
        now = self.clock()
        admitted_bytes = 0
        for i, r in enumerate(records):
            if i in refused:
                continue
            try:
                where = hash_key(r["PartitionKey"], r.get("ExplicitHashKey"))
            except (KeyError, TypeError, ValueError):
                continue   # malformed: the target answers for it
            shard = smap.shard_of(where)
            if shard is None:
                smap = await self._shard_map(stream, request, refresh=True) or smap
                shard = smap.shard_of(where)
            if shard is None:
                continue
            size = base64_len(r.get("Data") or "") + len(r["PartitionKey"].encode())
            meter = self.write_meters.get((stream, shard))
            if meter is None:
                meter = self.write_meters[(stream, shard)] = WriteMeter(self.limits, now)
            if meter.admit(size, now):
                admitted_bytes += size
                self.count_shard("PutRecords", (stream, shard), now, size, 1)
            else:
                refused[i] = (PTE, f"Rate exceeded for shard {shard} in stream "
                              f"{stream} under account {ACCOUNT}.")
                self.count_shard("PutRecords", (stream, shard), now, throttled=1)
        self.count(action, calls=1, throttled=sum(v[0] == PTE for v in refused.values()),
                   records=len(records) - len(refused), bytes=admitted_bytes)
        if action == "PutRecord":
            if refused:
                entry.fault = "limit"
                return await self.fp._send(writer, entry, 400,
                                           [("Content-Type", self.fp._json_type(request))],
                                           sf.error_body(*refused[0]))
            return None
        if not refused:
            return None
        entry.fault = "limit"
        entry.failed_indices = sorted(refused)
        kept = [r for i, r in enumerate(records) if i not in refused]
        result = {"FailedRecordCount": 0, "Records": []}
        if kept:
            body = json.dumps(dict(data, Records=kept)).encode()
            status, response, raw = await self._forward(request, body, entry, upstream)
            if status != 200:
                return await self._reply(writer, entry, status, response, raw)
            result = json.loads(raw)
        answers = iter(result["Records"])
        merged = []
        for i in range(len(records)):
            if i in refused:
                merged.append({"ErrorCode": refused[i][0], "ErrorMessage": refused[i][1]})
            else:
                merged.append(next(answers))
        result["Records"] = merged
        result["FailedRecordCount"] = sum(bool(r.get("ErrorCode")) for r in merged)
        return await self.fp._send(writer, entry, 200,
                                   [("Content-Type", self.fp._json_type(request))],
                                   json.dumps(result).encode())

    # -- fan-out

    async def _subscribe(self, data, request, entry, writer, upstream, relay):
        key = (data.get("ConsumerARN"), data.get("ShardId"))
        pacer = self.pacers.get(key)
        if pacer is None:
            pacer = self.pacers[key] = EventPacer(self.limits)
        self.count("SubscribeToShard", calls=1)
        splitter = _EventSplitter()

        most = max(1, int(self.limits.efo_bytes_per_s * EVENT_SECONDS))

        def events(piece: bytes):
            for message in splitter.feed(piece):
                message = _strip_no_key(message)
                records = _event_records(message)
                if records is None or _data_bytes(records) <= most:
                    yield message
                else:
                    yield from split_event(message, most)

        async def pace(piece: bytes, emit) -> None:
            due = []
            for message in events(piece):
                records = _event_records(message)
                if records is not None:
                    nbytes = _data_bytes(records)
                    wait = pacer.delay(nbytes, self.clock())
                    if wait > 0:
                        await emit(b"".join(due))   # what is due goes now
                        due = []
                        self.count("SubscribeToShard", held_ms=int(wait * 1000))
                        await asyncio.sleep(wait)
                    self.count("SubscribeToShard", records=len(records), bytes=nbytes)
                    self.count_shard("SubscribeToShard", key, self.clock(), nbytes,
                                     len(records))
                due.append(message)
            await emit(b"".join(due))

        return await relay(request, entry, writer, upstream, None, pace)


def _event_message(headers: bytes, payload: bytes) -> bytes:
    """An event-stream message: prelude, headers, payload and both CRCs."""
    total = 12 + len(headers) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(headers).to_bytes(4, "big")
    body = prelude + zlib.crc32(prelude).to_bytes(4, "big") + headers + payload
    return body + zlib.crc32(body).to_bytes(4, "big")


def split_event(message: bytes, most: int) -> list:
    """A SubscribeToShardEvent as events of at most `most` bytes of record
    data each (one record at least).  Each but the last continues after
    its last record and is at least a second behind the tip; the last
    keeps the original's continuation, lag and child shards."""
    headers_len = int.from_bytes(message[4:8], "big")
    headers = message[12:12 + headers_len]
    payload = _json_or_none(message[12 + headers_len:-4]) or {}
    records = payload.get("Records") or []
    chunks, cur, size = [], [], 0
    for r in records:
        n = base64_len(r.get("Data") or "")
        if cur and size + n > most:
            chunks.append(cur)
            cur, size = [], 0
        cur.append(r)
        size += n
    chunks.append(cur)
    out = []
    for i, chunk in enumerate(chunks):
        if i == len(chunks) - 1:
            event = dict(payload, Records=chunk)
        else:
            event = {"Records": chunk,
                     "ContinuationSequenceNumber": chunk[-1].get("SequenceNumber"),
                     "MillisBehindLatest": max(1000, payload.get("MillisBehindLatest") or 0)}
        out.append(_event_message(headers, json.dumps(event).encode()))
    return out


def _strip_no_key(message: bytes) -> bytes:
    """An event whose records carry the placeholder of a missing partition
    key, rebuilt without it."""
    if sf.NO_KEY.encode() not in message or _event_records(message) is None:
        return message
    headers_len = int.from_bytes(message[4:8], "big")
    payload = _json_or_none(message[12 + headers_len:-4]) or {}
    sf.strip_no_key(payload.get("Records") or [])
    return _event_message(message[12:12 + headers_len], json.dumps(payload).encode())


def _json_or_none(raw: bytes):
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _EventSplitter:
    """Splits an event-stream byte stream into whole messages (each starts
    with its total length, 4 bytes big endian)."""

    def __init__(self):
        self.pending = b""
        self.passthrough = False   # not an event stream (an error body)

    def feed(self, data: bytes) -> list:
        if not self.pending and data[:1] in (b"{", b"<") or self.passthrough:
            self.passthrough = True
            return [data]
        self.pending += data
        out = []
        while len(self.pending) >= 4:
            total = int.from_bytes(self.pending[:4], "big")
            if total < 16 or len(self.pending) < total:
                break
            out.append(self.pending[:total])
            self.pending = self.pending[total:]
        return out


# Sizes of event-stream header values by type (-1: 2-byte length first).
_HEADER_SIZES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 6: -1, 7: -1, 8: 8, 9: 16}


def _event_records(message: bytes):
    """The Records of a SubscribeToShardEvent message, else None."""
    headers_len = int.from_bytes(message[4:8], "big")
    headers = message[12:12 + headers_len]
    event_type = None
    i = 0
    while i < len(headers):
        n = headers[i]
        name = headers[i + 1:i + 1 + n]
        kind = headers[i + 1 + n]
        i += 2 + n
        size = _HEADER_SIZES.get(kind)
        if size is None:
            return None
        if size < 0:
            size = int.from_bytes(headers[i:i + 2], "big")
            i += 2
        if name == b":event-type":
            event_type = headers[i:i + size]
        i += size
    if event_type != b"SubscribeToShardEvent":
        return None
    payload = _json_or_none(message[12 + headers_len:-4])
    return (payload or {}).get("Records") or []
