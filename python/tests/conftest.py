"""Fixtures: the lab's servers (tests/lab/lab.py) on loopback ports, started
once per session, and streams on them."""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("KN_BUILD_DIR", SOURCE_DIR / "build"))
KNCAT = os.environ.get("KNCAT") or str(BUILD_DIR / "kncat")
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
import lab  # noqa: E402

_names = itertools.count()


@pytest.fixture(scope="session")
def servers():
    """kinesalite, kinesis-local and dynalite; the process environment gets
    dummy credentials and kinesalite/dynalite as the default endpoints."""
    started = {}
    try:
        started["kinesalite"] = lab.Kinesalite().start()
        started["kinesis-local"] = lab.KinesisLocal().start()
        started["dynalite"] = lab.Dynalite().start()
        os.environ.update(lab.env_for(kinesis=started["kinesalite"],
                                      dynamodb=started["dynalite"]))
        yield started
    finally:
        for s in started.values():
            s.stop()


class Stream:
    """A stream on one Kinesis server, with a boto3 client."""

    def __init__(self, server, shards: int):
        self.server = server
        self.endpoint = server.endpoint
        self.client = lab.boto3_client("kinesis", server)
        self.name = "py-%d-%d" % (os.getpid(), next(_names))
        self.client.create_stream(StreamName=self.name, ShardCount=shards)
        self.wait_active()

    def wait_active(self):
        for _ in range(600):
            s = self.client.describe_stream_summary(StreamName=self.name)
            if s["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
                return
            time.sleep(0.05)
        raise AssertionError("stream %s never ACTIVE" % self.name)

    def conf(self, **more) -> dict:
        c = {"stream": self.name, "endpoint": self.endpoint,
             "poll.idle.ms": 50, "shard.sync.interval.ms": 2000}
        c.update({k.replace("_", "."): v for k, v in more.items()})
        return c

    def put(self, records):
        """records: [(key, bytes)], with boto3 in calls of 500."""
        for i in range(0, len(records), 500):
            chunk = records[i:i + 500]
            r = self.client.put_records(StreamName=self.name, Records=[
                {"PartitionKey": k, "Data": d} for k, d in chunk])
            assert r["FailedRecordCount"] == 0, r

    def shards(self):
        return self.client.list_shards(StreamName=self.name)["Shards"]

    def split_first(self):
        """Splits the first open shard in the middle of its hash range."""
        s = [s for s in self.shards()
             if "EndingSequenceNumber" not in s["SequenceNumberRange"]][0]
        lo = int(s["HashKeyRange"]["StartingHashKey"])
        hi = int(s["HashKeyRange"]["EndingHashKey"])
        self.client.split_shard(StreamName=self.name, ShardToSplit=s["ShardId"],
                                NewStartingHashKey=str((lo + hi) // 2))
        self.wait_active()
        return s["ShardId"]


@pytest.fixture
def kinesalite_stream(servers):
    return lambda shards=1: Stream(servers["kinesalite"], shards)


@pytest.fixture
def kinesis_local_stream(servers):
    return lambda shards=1: Stream(servers["kinesis-local"], shards)


def drain(consumer, want: int, timeout: float = 60.0, on_batch=None):
    """Polls until want records came (or timeout); returns [(key, bytes,
    shard, seq, subseq)]."""
    got = []
    end = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < end:
        b = consumer.poll(0.5)
        if b is None:
            continue
        if on_batch:
            on_batch(b)
        for r in b:
            got.append((r.partition_key, bytes(r), r.shard_id,
                        r.sequence_number, r.sub_sequence_number))
    return got
