"""Helpers for driving `kncat group` workers as separate processes:
workers whose output lines are time-stamped as they arrive, a producer
with per-key counters, keys spread evenly over the hash key space, lease
table snapshots and a read-back of a whole stream with boto3.

Used by tests/integration/test_group.py, test_group_resharding.py,
bench/bench_failover.py and scripts/demo.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import runkit


_counter = 0


class LabServers(dict):
    """The lab servers a test module shares, by name (lab.start's names):
    started on first use, stopped together at the module's end with its
    temporary directory (kept when KN_KEEP_LOGS=1).  Needs tests/lab on
    sys.path."""

    def __init__(self, tmp: str | os.PathLike):
        super().__init__()
        self.tmp = Path(tmp)

    def start(self, *names: str) -> "LabServers":
        import lab
        for name in names:
            if name not in self:
                self[name] = lab.start(name)
        return self

    def stop(self):
        for server in self.values():
            server.stop()
        self.clear()
        if os.environ.get("KN_KEEP_LOGS") != "1":
            shutil.rmtree(self.tmp, ignore_errors=True)

    def attach(self, cls, server_name: str):
        """Gives a TestCase class its Kinesis server (started if need be),
        dynalite, and boto3 clients of both: cls.server, cls.dynalite,
        cls.boto, cls.ddb."""
        import lab
        self.start(server_name, "dynalite")
        cls.server = self[server_name]
        cls.dynalite = self["dynalite"]
        cls.boto = lab.boto3_client("kinesis", cls.server, attempts=5)
        cls.ddb = lab.boto3_client("dynamodb", cls.dynalite, attempts=5)


def unique(prefix: str, what: str) -> str:
    """A stream or application name no other test of this run uses."""
    global _counter
    _counter += 1
    return f"{prefix}-{what}-{os.getpid()}-{_counter}"


def run_kncat(kncat: str, env: dict, *args, ok: bool = True, timeout=120,
              input=None) -> subprocess.CompletedProcess:
    """Runs kncat to its end (runkit.kncat: a sanitizer report raises
    AssertionError); with ok, so does a non-zero exit, with its stderr."""
    p = runkit.kncat(*args, kncat=kncat, env=env, input=input, text=False,
                     timeout=timeout)
    if ok and p.returncode != 0:
        raise AssertionError(f"kncat {' '.join(map(str, args))}: exit "
                             f"{p.returncode}: {p.stderr.decode(errors='replace')}")
    return p


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


def hash_of(key: str) -> int:
    """The hash key Kinesis gives a partition key: its MD5 as a number."""
    return int.from_bytes(hashlib.md5(key.encode()).digest(), "big")


def keys_in(lo: int, hi: int, n: int, prefix: str) -> list[str]:
    """n partition keys whose hash key is in [lo, hi]."""
    out, i = [], 0
    while len(out) < n:
        k = f"{prefix}{i}"
        if lo <= hash_of(k) <= hi:
            out.append(k)
        i += 1
    return out


def keys_for(shard: dict, n: int, prefix: str) -> list[str]:
    """n partition keys that hash into shard's range (a ListShards entry)."""
    return keys_in(int(shard["HashKeyRange"]["StartingHashKey"]),
                   int(shard["HashKeyRange"]["EndingHashKey"]), n, prefix)


def wait_for(what: str, cond, timeout: float, detail=None):
    """Polls cond until it returns something true, and returns that; on
    time-out raises AssertionError, with detail() (why cond was last
    false) when given."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            why = f": {detail()}" if detail else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{why}")
        time.sleep(0.25)


class Worker:
    """One `kncat group -J` process.  Every stdout line is parsed and kept
    with the monotonic time it was read; stderr goes to a file."""

    def __init__(self, kncat: str, env: dict, stream: str, app: str,
                 leases: str, wid: str, props: dict | None = None,
                 log_dir: str | os.PathLike = ".", extra=(),
                 verbose: bool = True):
        args = [kncat] + (["-v"] if verbose else [])
        for k, v in (props or {}).items():
            args += ["-X", f"{k}={v}"]
        args += ["group", stream, "--app", app, "--leases", leases,
                 "--worker", wid, "-J", *extra]
        self._spawn(args, env, wid, log_dir)

    def _spawn(self, args, env, wid, log_dir):
        """Starts args (a process printing JSON lines) as this worker."""
        self.wid = wid
        self.lines: list[tuple[float, dict]] = []
        self.lock = threading.Lock()
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

    def check_clean(self):
        """Raises AssertionError if the worker's stderr holds a sanitizer
        report (runkit.check_clean)."""
        runkit.check_clean(self.stderr(), f"worker {self.wid}")


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
    p = runkit.kncat("leases", app, "--leases", store, "-J", kncat=kncat,
                     env=env, text=False, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"kncat leases: exit {p.returncode}: "
                           f"{p.stderr.decode(errors='replace')}")
    # the workers of the membership, if any, follow the leases
    rows = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
    return [r for r in rows if "shard" in r]


def create_kcl_table(ddb, table: str):
    """A lease table as the KCL 2.x creates it (boto3 DynamoDB client)."""
    ddb.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "leaseKey",
                               "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST")
    ddb.get_waiter("table_exists").wait(
        TableName=table, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})


def scan_table(ddb, table: str) -> dict[str, dict]:
    """Every item of a lease table, by leaseKey, as boto3 returns them."""
    items, kw = {}, {"TableName": table, "ConsistentRead": True}
    while True:
        r = ddb.scan(**kw)
        for it in r["Items"]:
            items[it["leaseKey"]["S"]] = it
        if "LastEvaluatedKey" not in r:
            return items
        kw["ExclusiveStartKey"] = r["LastEvaluatedKey"]


def test_failed(case) -> bool:
    """In tearDown: whether this unittest test failed so far.  (The
    outcome's success flag is not set before tearDown on Python 3.11; the
    result's lists are.)"""
    r = getattr(case._outcome, "result", None)
    if r is None:
        return not getattr(case._outcome, "success", True)
    return any(t is case for t, _ in r.failures + r.errors)


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
