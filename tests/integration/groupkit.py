"""Helpers for driving `kncat group` workers as separate processes:
workers whose output lines are time-stamped as they arrive, a producer
with per-key counters, keys spread evenly over the hash key space, lease
table snapshots and a read-back of a whole stream with boto3.

Used by tests/integration/test_group.py, bench/bench_failover.py and
scripts/demo.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path


def spread_keys(n: int, prefix: str) -> list[str]:
    """n partition keys, one in each n-th of the hash key space, so every
    shard of an evenly split stream (and every child of a split) gets
    some."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < n:
        k = f"{prefix}{i}"
        h = int.from_bytes(hashlib.md5(k.encode()).digest(), "big")
        found.setdefault(h * n >> 128, k)
        i += 1
    return [found[b] for b in sorted(found)]


class Worker:
    """One `kncat group -J` process.  Every stdout line is parsed and kept
    with the monotonic time it was read; stderr goes to a file."""

    def __init__(self, kncat: str, env: dict, stream: str, app: str,
                 leases: str, wid: str, props: dict | None = None,
                 log_dir: str | os.PathLike = ".", extra=(),
                 verbose: bool = True):
        self.wid = wid
        self.lines: list[tuple[float, dict]] = []
        self.lock = threading.Lock()
        args = [kncat] + (["-v"] if verbose else [])
        for k, v in (props or {}).items():
            args += ["-X", f"{k}={v}"]
        args += ["group", stream, "--app", app, "--leases", leases,
                 "--worker", wid, "-J", *extra]
        self.args = args
        self.err_path = Path(log_dir) / f"worker-{wid}.err"
        self.err_file = open(self.err_path, "ab")
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                     stderr=self.err_file)
        self.started = time.monotonic()
        self.bad_lines = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            t = time.monotonic()
            try:
                rec = json.loads(raw)
            except ValueError:
                self.bad_lines += 1
                continue
            with self.lock:
                self.lines.append((t, rec))

    def records(self) -> list[tuple[float, dict]]:
        with self.lock:
            return list(self.lines)

    def count(self) -> int:
        with self.lock:
            return len(self.lines)

    def signal(self, sig) -> float:
        """Sends sig; returns the monotonic time just before."""
        t = time.monotonic()
        self.proc.send_signal(sig)
        return t

    def wait(self, timeout=60) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.thread.join(timeout=10)
        self.err_file.close()
        return rc

    def stop(self, timeout=60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def stderr(self) -> str:
        try:
            return self.err_path.read_text(errors="replace")
        except OSError:
            return ""


class Producer(threading.Thread):
    """Puts rounds of records with boto3 until stopped: each round is one
    PutRecords call holding one record of every key, payload
    {"k": key, "n": per-key counter, "i": global number}.  A round is sent
    again (only its failed entries) until all of it is stored, and the
    next round starts only then, so every key's records are stored in the
    order of n."""

    def __init__(self, kinesis, stream: str, keys: list[str],
                 interval: float = 0.1, start: int = 0):
        super().__init__(daemon=True)
        self.kinesis = kinesis
        self.stream = stream
        self.keys = keys
        self.interval = interval
        self.n = {k: 0 for k in keys}
        self.i = start
        self.produced: list[dict] = []   # payloads stored, in order
        self.stored_at: list[float] = []  # monotonic time each round stored
        self.stop_ev = threading.Event()
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    def put_round(self):
        recs = []
        for k in self.keys:
            recs.append({"k": k, "n": self.n[k], "i": self.i})
            self.n[k] += 1
            self.i += 1
        pending = [{"Data": json.dumps(r).encode(), "PartitionKey": r["k"]}
                   for r in recs]
        for attempt in range(200):
            try:
                res = self.kinesis.put_records(StreamName=self.stream,
                                               Records=pending)
            except Exception:  # noqa: BLE001 - retried below
                if attempt >= 199:
                    raise
                time.sleep(0.2)
                continue
            pending = [e for e, r in zip(pending, res["Records"])
                       if "ErrorCode" in r]
            if not pending:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("a round of records could not be stored")
        with self.lock:
            self.produced += recs
            self.stored_at.append(time.monotonic())

    def run(self):
        try:
            while not self.stop_ev.is_set():
                self.put_round()
                self.stop_ev.wait(self.interval)
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def finish(self):
        self.stop_ev.set()
        self.join(timeout=120)
        if self.error:
            raise self.error
        return list(self.produced)


def read_stream(kinesis, stream: str) -> dict[str, list[dict]]:
    """Every record of every shard, read with boto3: {shard: [record]},
    records as boto3 returns them, in shard order."""
    out = {}
    shards = []
    kw = {"StreamName": stream}
    while True:
        r = kinesis.list_shards(**kw)
        shards += r["Shards"]
        if not r.get("NextToken"):
            break
        kw = {"NextToken": r["NextToken"]}
    for s in shards:
        sid = s["ShardId"]
        it = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=sid,
            ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        recs = []
        empty = 0
        closed = "EndingSequenceNumber" in s.get("SequenceNumberRange", {})
        # a closed shard is read to its end; an open one has no end, so a
        # few empty reads at the tip do
        while it and empty < (100 if closed else 3):
            r = kinesis.get_records(ShardIterator=it, Limit=10000)
            recs += r["Records"]
            it = r.get("NextShardIterator")
            if not r["Records"]:
                empty += 1
        out[sid] = recs
    return out


def list_shards(kinesis, stream: str) -> list[dict]:
    shards, kw = [], {"StreamName": stream}
    while True:
        r = kinesis.list_shards(**kw)
        shards += r["Shards"]
        if not r.get("NextToken"):
            return shards
        kw = {"NextToken": r["NextToken"]}


def is_open(shard: dict) -> bool:
    return "EndingSequenceNumber" not in shard.get("SequenceNumberRange", {})


def leases_json(kncat: str, env: dict, app: str, store: str) -> list[dict]:
    p = subprocess.run([kncat, "leases", app, "--leases", store, "-J"],
                       env=env, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"kncat leases: exit {p.returncode}: "
                           f"{p.stderr.decode(errors='replace')}")
    return [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]


def payload(rec: dict) -> dict:
    return json.loads(rec["data"])


# The attributes of a KCL 2.x lease item and their types.
KCL_TYPES = {
    "leaseKey": "S", "leaseOwner": "S", "leaseCounter": "N",
    "ownerSwitchesSinceCheckpoint": "N", "checkpoint": "S",
    "checkpointSubSequenceNumber": "N", "pendingCheckpoint": "S",
    "pendingCheckpointSubSequenceNumber": "N", "pendingCheckpointState": "B",
    "parentShardId": "SS", "childShardIds": "SS", "startingHashKey": "S",
    "endingHashKey": "S",
}
