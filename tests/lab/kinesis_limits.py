#!/usr/bin/env python3
"""The per-shard limits of Kinesis Data Streams, as arithmetic on an
injected clock (no I/O, no threads): used by faultproxy.py's limit mode
and unit-tested by test_kinesis_limits.py.

What AWS documents, and how it is modelled here (MiB = 2**20 bytes):

  GetRecords     5 calls per second per shard: at most `read_calls_per_s`
                 admitted calls in any window of one second (a sliding
                 window; throttled calls do not count).
                 2 MiB/s of data per shard, where one call may return up
                 to 10 MiB and calls made within the next 5 s are then
                 throttled: the data returned is a debt paid off at
                 `read_bytes_per_s`, counted from the moment the call was
                 admitted; a call is admitted only when no debt is left
                 (10 MiB / 2 MiB/s = the 5 s of the documentation).
                 `read_burst_s` seconds of unused rate may be saved up
                 (0 by default: the strict reading).
                 "Data" is the record data blobs (decoded), as the
                 service counts its read throughput.
  PutRecord(s)   1 MiB/s and 1,000 records/s per shard, a record counting
                 its data blob plus its partition key (the size the
                 record limit applies to): two token buckets holding one
                 second of rate; a record that does not fit both is
                 refused with a per-record
                 ProvisionedThroughputExceededException and costs nothing.
                 A record larger than the byte bucket (a large record)
                 is taken on a full bucket and leaves it in debt (the
                 reference says only that per-shard limits are
                 unchanged).
  SubscribeToShard  2 MiB/s per shard per consumer: events are delivered
                 no faster, each event's data a debt as for GetRecords.

Limits.scaled(f) multiplies every byte and record rate by f (calls per
second and the 10 MiB cap stay), so a 2-core machine can emulate many
shards at a fraction of the real rates; the client is then told the
matching rates through its properties.
"""

from __future__ import annotations

import bisect
import collections
import hashlib
from dataclasses import dataclass, replace

MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    read_calls_per_s: float = 5
    read_bytes_per_s: float = 2 * MIB
    read_max_bytes: int = 10 * MIB
    read_burst_s: float = 0.0
    write_bytes_per_s: float = 1 * MIB
    write_records_per_s: float = 1000
    efo_bytes_per_s: float = 2 * MIB

    def scaled(self, factor: float) -> "Limits":
        """Byte and record rates times `factor`."""
        return replace(self, read_bytes_per_s=self.read_bytes_per_s * factor,
                       write_bytes_per_s=self.write_bytes_per_s * factor,
                       write_records_per_s=self.write_records_per_s * factor,
                       efo_bytes_per_s=self.efo_bytes_per_s * factor)

    @classmethod
    def from_dict(cls, spec: dict) -> "Limits":
        """{"scale": 0.25, "read_calls_per_s": 5, ...}: fields by name,
        then scaled by `scale` (default 1)."""
        spec = dict(spec)
        scale = spec.pop("scale", 1)
        unknown = set(spec) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"limits: unknown fields {sorted(unknown)}")
        return cls(**spec).scaled(scale)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class Debt:
    """Bytes delivered beyond the rate, paid off at `rate` per second.

    busy_until is when the debt is paid; credit (at most burst_s seconds
    of rate) is unused time before now."""

    def __init__(self, rate: float, burst_s: float = 0.0):
        self.rate = rate
        self.burst_s = burst_s
        self.busy_until = float("-inf")

    def clear_at(self, now: float) -> bool:
        return now >= self.busy_until

    def charge(self, nbytes: float, since: float) -> None:
        """Add nbytes of debt, counted from `since` (when the call was
        admitted or the event delivered)."""
        start = max(self.busy_until, since - self.burst_s)
        self.busy_until = start + nbytes / self.rate

    def wait(self, now: float) -> float:
        """Seconds until the debt is paid (0 if it is)."""
        return max(0.0, self.busy_until - now)


class ReadMeter:
    """One shard's GetRecords limits."""

    def __init__(self, limits: Limits):
        self.calls_per_s = limits.read_calls_per_s
        self.calls: collections.deque = collections.deque()
        self.debt = Debt(limits.read_bytes_per_s, limits.read_burst_s)

    def admit(self, now: float) -> bool:
        """Whether a call at `now` goes through; if so it counts as a call
        (charge() adds its data once known)."""
        while self.calls and self.calls[0] <= now - 1.0:
            self.calls.popleft()
        if len(self.calls) >= self.calls_per_s or not self.debt.clear_at(now):
            return False
        self.calls.append(now)
        return True

    def charge(self, nbytes: int, admitted_at: float) -> None:
        self.debt.charge(nbytes, admitted_at)


class TokenBucket:
    """`rate` tokens per second, holding at most `capacity`, full at start."""

    def __init__(self, rate: float, capacity: float, now: float):
        self.rate, self.capacity = rate, capacity
        self.tokens, self.last = capacity, now

    def refill(self, now: float) -> None:
        if now > self.last:
            self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
            self.last = now


class WriteMeter:
    """One shard's write limits: bytes and records per second."""

    def __init__(self, limits: Limits, now: float):
        self.bytes = TokenBucket(limits.write_bytes_per_s, limits.write_bytes_per_s, now)
        self.records = TokenBucket(limits.write_records_per_s,
                                   limits.write_records_per_s, now)

    def admit(self, nbytes: int, now: float) -> bool:
        """Whether a record of nbytes (data + partition key) is accepted
        at `now`; if so its cost is taken."""
        self.bytes.refill(now)
        self.records.refill(now)
        # A record larger than a second of rate (a large record, up to
        # 10 MiB) goes through on a full bucket and leaves it in debt: the
        # shard's rate holds over time, and such a record is not refused
        # for ever.
        if self.bytes.tokens < min(nbytes, self.bytes.capacity) or self.records.tokens < 1:
            return False
        self.bytes.tokens -= nbytes
        self.records.tokens -= 1
        return True


class EventPacer:
    """Delivery of one subscription's events at most `rate` bytes/s."""

    def __init__(self, limits: Limits):
        self.debt = Debt(limits.efo_bytes_per_s)

    def delay(self, nbytes: int, now: float) -> float:
        """Seconds to hold an event of nbytes of data arriving at `now`;
        the event is then taken as delivered at now + delay."""
        wait = self.debt.wait(now)
        self.debt.charge(nbytes, now + wait)
        return wait


def base64_len(text: str) -> int:
    """Decoded length of a base64 string (with or without padding)."""
    n = len(text)
    pad = len(text) - len(text.rstrip("="))
    return n * 3 // 4 - pad if n % 4 == 0 else n * 3 // 4


def hash_key(partition_key: str, explicit: str | None = None) -> int:
    """Where a record lands: ExplicitHashKey, else MD5 of the key."""
    if explicit is not None:
        return int(explicit)
    return int.from_bytes(hashlib.md5(partition_key.encode()).digest(), "big")


class ShardMap:
    """Open shards of a stream by hash-key range (from ListShards)."""

    def __init__(self, shards: list):
        ranges = []
        for s in shards:
            if (s.get("SequenceNumberRange") or {}).get("EndingSequenceNumber"):
                continue   # closed
            r = s["HashKeyRange"]
            ranges.append((int(r["StartingHashKey"]), int(r["EndingHashKey"]),
                           s["ShardId"]))
        ranges.sort()
        self.starts = [r[0] for r in ranges]
        self.ranges = ranges

    def shard_of(self, key: int) -> str | None:
        i = bisect.bisect_right(self.starts, key) - 1
        if i >= 0 and self.ranges[i][0] <= key <= self.ranges[i][1]:
            return self.ranges[i][2]
        return None
