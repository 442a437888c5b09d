#!/usr/bin/env python3
"""Unit tests of kinesis_limits.py: the arithmetic of the emulated
per-shard limits, on an injected clock (fast, no servers).

  python3 tests/lab/test_kinesis_limits.py
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from limit_mode import _event_records, _EventSplitter, split_event  # noqa: E402
from kinesis_limits import (MIB, EventPacer, Limits, ReadMeter,  # noqa: E402
                            ShardMap, WriteMeter, base64_len, hash_key)


class ReadMeterTest(unittest.TestCase):
    def test_five_calls_in_any_second(self):
        m = ReadMeter(Limits())
        self.assertTrue(all(m.admit(t / 10) for t in range(5)))  # 0.0 .. 0.4
        self.assertFalse(m.admit(0.5))
        self.assertFalse(m.admit(0.99))
        self.assertTrue(m.admit(1.0))     # the call at 0.0 left the window
        self.assertFalse(m.admit(1.05))
        self.assertTrue(m.admit(1.1))

    def test_throttled_calls_do_not_count(self):
        m = ReadMeter(Limits())
        for t in range(5):
            m.admit(t * 0.01)
        for _ in range(100):
            self.assertFalse(m.admit(0.5))
        self.assertTrue(m.admit(1.0))

    def test_ten_mib_throttles_the_next_five_seconds(self):
        m = ReadMeter(Limits())
        self.assertTrue(m.admit(0.0))
        m.charge(10 * MIB, 0.0)
        for t in (0.2, 1.0, 2.5, 4.0, 4.99):
            self.assertFalse(m.admit(t), t)
        self.assertTrue(m.admit(5.0))

    def test_debt_counts_from_admission(self):
        # The response comes back late; the debt still starts when the call
        # was admitted, so a client pacing from its send time is not
        # throttled.
        m = ReadMeter(Limits())
        self.assertTrue(m.admit(0.0))
        m.charge(1 * MIB, 0.0)     # known at 0.3, counted from 0.0
        self.assertFalse(m.admit(0.49))
        self.assertTrue(m.admit(0.5))

    def test_two_mib_per_second_sustained(self):
        m = ReadMeter(Limits())
        t, read = 0.0, 0
        while t < 60.0:
            if m.admit(t):
                m.charge(512 * 1024, t)
                read += 512 * 1024
            t = round(t + 0.01, 2)
        self.assertAlmostEqual(read / 60.0 / MIB, 2.0, delta=0.02)

    def test_no_credit_saved_by_default(self):
        m = ReadMeter(Limits())
        self.assertTrue(m.admit(100.0))  # idle for 100 s first
        m.charge(4 * MIB, 100.0)
        self.assertFalse(m.admit(101.9))
        self.assertTrue(m.admit(102.0))

    def test_burst_saves_some_credit(self):
        m = ReadMeter(Limits(read_burst_s=1.0))
        self.assertTrue(m.admit(100.0))
        m.charge(4 * MIB, 100.0)   # 1 s of credit: paid at 101, not 102
        self.assertFalse(m.admit(100.99))
        self.assertTrue(m.admit(101.0))

    def test_scaled(self):
        lim = Limits().scaled(0.25)
        self.assertEqual(lim.read_bytes_per_s, MIB / 2)
        self.assertEqual(lim.write_records_per_s, 250)
        self.assertEqual(lim.read_calls_per_s, 5)
        self.assertEqual(lim.read_max_bytes, 10 * MIB)
        m = ReadMeter(lim)
        m.admit(0.0)
        m.charge(MIB, 0.0)
        self.assertFalse(m.admit(1.99))
        self.assertTrue(m.admit(2.0))

    def test_from_dict(self):
        lim = Limits.from_dict({"scale": 0.5, "read_calls_per_s": 10})
        self.assertEqual(lim.read_calls_per_s, 10)
        self.assertEqual(lim.efo_bytes_per_s, MIB)
        with self.assertRaises(ValueError):
            Limits.from_dict({"reads": 1})


class WriteMeterTest(unittest.TestCase):
    def test_bytes_per_second(self):
        m = WriteMeter(Limits(), 0.0)
        record = 100 * 1024
        accepted = sum(m.admit(record, 0.0) for _ in range(20))
        self.assertEqual(accepted, 10)           # 1 MiB of 100 KiB records
        self.assertFalse(m.admit(record, 0.05))  # 51 KiB back: not enough
        self.assertTrue(m.admit(record, 0.1))

    def test_records_per_second(self):
        m = WriteMeter(Limits(), 0.0)
        self.assertEqual(sum(m.admit(10, 0.0) for _ in range(1500)), 1000)
        self.assertEqual(sum(m.admit(10, 0.5) for _ in range(1000)), 500)

    def test_sustained_rate_is_the_limit(self):
        m = WriteMeter(Limits(), 0.0)
        accepted = 0
        for step in range(1, 6001):               # 60 s, 100 offers per 10 ms
            accepted += sum(m.admit(1000, step / 100) for _ in range(100))
        # 1 MiB/s of 1000-byte records is 1048 records/s, above the 1,000
        # records/s: the record count binds (plus the first second's bucket).
        self.assertAlmostEqual(accepted, 61000, delta=20)

    def test_refused_record_costs_nothing(self):
        m = WriteMeter(Limits(), 0.0)
        self.assertTrue(m.admit(MIB - 10, 0.0))
        self.assertFalse(m.admit(100, 0.0))
        self.assertTrue(m.admit(10, 0.0))

    def test_large_record_on_a_full_bucket_leaves_debt(self):
        m = WriteMeter(Limits(), 0.0)
        self.assertTrue(m.admit(3 * MIB, 0.0))   # over a second of rate
        self.assertFalse(m.admit(1, 1.0))        # 2 MiB of debt at 1 MiB/s
        self.assertFalse(m.admit(3 * MIB, 2.5))  # the bucket is not full
        self.assertTrue(m.admit(3 * MIB, 3.0))


class EventPacerTest(unittest.TestCase):
    def test_paces_to_the_rate(self):
        p = EventPacer(Limits())
        t = 0.0
        for _ in range(20):          # 20 events of 1 MiB, all waiting at 0
            t += p.delay(MIB, t)
        self.assertAlmostEqual(t, 9.5)   # the 20th leaves after 19 * 0.5 s

    def test_no_wait_below_the_rate(self):
        p = EventPacer(Limits())
        self.assertEqual(p.delay(MIB, 0.0), 0.0)
        self.assertEqual(p.delay(MIB, 0.5), 0.0)
        self.assertAlmostEqual(p.delay(MIB, 0.6), 0.4)


def event_message(event_type: bytes, payload: bytes) -> bytes:
    """An event-stream message (CRCs left zero: not checked here)."""
    headers = b""
    for name, value in ((b":message-type", b"event"), (b":event-type", event_type)):
        headers += bytes([len(name)]) + name + b"\x07" + len(value).to_bytes(2, "big") + value
    total = 12 + len(headers) + len(payload) + 4
    return (total.to_bytes(4, "big") + len(headers).to_bytes(4, "big") + b"\0" * 4
            + headers + payload + b"\0" * 4)


class EventStreamTest(unittest.TestCase):
    def test_split_and_records(self):
        import json
        event = event_message(b"SubscribeToShardEvent", json.dumps(
            {"Records": [{"Data": "AAAA"}, {"Data": "AAE="}]}).encode())
        other = event_message(b"initial-response", b"{}")
        stream = other + event + event
        splitter = _EventSplitter()
        messages = []
        for i in range(0, len(stream), 7):   # in awkward pieces
            messages += splitter.feed(stream[i:i + 7])
        self.assertEqual(messages, [other, event, event])
        self.assertIsNone(_event_records(other))
        self.assertEqual(len(_event_records(event)), 2)

    def test_backlog_split_into_events(self):
        import base64
        import json
        import zlib
        records = [{"SequenceNumber": str(i), "Data": base64.b64encode(b"abc").decode(),
                    "PartitionKey": "k"} for i in range(5)]
        original = {"Records": records, "ContinuationSequenceNumber": "9",
                    "MillisBehindLatest": 0, "ChildShards": [{"ShardId": "c"}]}
        event = event_message(b"SubscribeToShardEvent", json.dumps(original).encode())
        parts = split_event(event, 6)
        self.assertEqual([len(_event_records(p)) for p in parts], [2, 2, 1])
        bodies = [json.loads(p[12 + int.from_bytes(p[4:8], "big"):-4]) for p in parts]
        self.assertEqual([b["ContinuationSequenceNumber"] for b in bodies], ["1", "3", "9"])
        self.assertTrue(all(b["MillisBehindLatest"] >= 1000 for b in bodies[:-1]))
        self.assertEqual(bodies[-1]["MillisBehindLatest"], 0)
        self.assertNotIn("ChildShards", bodies[0])
        self.assertEqual(bodies[-1]["ChildShards"], [{"ShardId": "c"}])
        self.assertEqual([r for b in bodies for r in b["Records"]], records)
        for p in parts:   # valid messages: length and both CRCs
            self.assertEqual(int.from_bytes(p[:4], "big"), len(p))
            self.assertEqual(zlib.crc32(p[:8]), int.from_bytes(p[8:12], "big"))
            self.assertEqual(zlib.crc32(p[:-4]), int.from_bytes(p[-4:], "big"))
            self.assertEqual(p[12:12 + int.from_bytes(p[4:8], "big")],
                             event[12:12 + int.from_bytes(event[4:8], "big")])
        # One record larger than the cap still goes, alone.
        self.assertEqual(len(split_event(event, 1)), 5)

    def test_error_body_passes_through(self):
        splitter = _EventSplitter()
        self.assertEqual(splitter.feed(b'{"__type": "X"}'), [b'{"__type": "X"}'])


class HelpersTest(unittest.TestCase):
    def test_base64_len(self):
        import base64
        for n in range(0, 20):
            text = base64.b64encode(b"x" * n).decode()
            self.assertEqual(base64_len(text), n)
            self.assertEqual(base64_len(text.rstrip("=")), n)

    def test_shard_map(self):
        top = 2 ** 128 - 1
        half = top // 2
        shards = [
            {"ShardId": "s0", "HashKeyRange": {"StartingHashKey": "0",
                                               "EndingHashKey": str(half)}},
            {"ShardId": "s1", "HashKeyRange": {"StartingHashKey": str(half + 1),
                                               "EndingHashKey": str(top)}},
            {"ShardId": "old", "HashKeyRange": {"StartingHashKey": "0",
                                                "EndingHashKey": str(top)},
             "SequenceNumberRange": {"StartingSequenceNumber": "1",
                                     "EndingSequenceNumber": "2"}},
        ]
        m = ShardMap(shards)
        self.assertEqual(m.shard_of(0), "s0")
        self.assertEqual(m.shard_of(half), "s0")
        self.assertEqual(m.shard_of(half + 1), "s1")
        self.assertEqual(m.shard_of(top), "s1")
        self.assertEqual(m.shard_of(hash_key("x", str(top))), "s1")
        # MD5 of "a" is 0cc175b9...: the lower half.
        self.assertEqual(m.shard_of(hash_key("a")), "s0")


if __name__ == "__main__":
    unittest.main()
