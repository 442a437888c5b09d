"""Shared by the enhanced fan-out tests (test_efo.py, test_efo_slow.py):
streams on kinesis-local, numbered records, the consumer tool, and the
checks (every record once, per-key order, parents before children)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

SRC = os.environ.get("KN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runkit  # noqa: E402

BUILD = os.environ.get("KN_BUILD_DIR", os.path.join(SRC, "build"))
TOOL = os.environ.get("EFO_TOOL") or os.path.join(BUILD, "tests", "tools", "efo_tool")
KEYS = 13


class Stream:
    """A stream on the server, with numbered records "kN:I" (I counts up
    across the stream, so per-key order is checkable)."""

    def __init__(self, client, name, shards):
        self.c = client
        self.name = name
        self.sent = []
        self.lock = threading.Lock()
        client.create_stream(StreamName=name, ShardCount=shards)
        self.wait_active()
        self.arn = client.describe_stream_summary(
            StreamName=name)["StreamDescriptionSummary"]["StreamARN"]

    def wait_active(self):
        for _ in range(300):
            st = self.c.describe_stream_summary(
                StreamName=self.name)["StreamDescriptionSummary"]["StreamStatus"]
            if st == "ACTIVE":
                return
            time.sleep(0.1)
        raise AssertionError("stream %s not ACTIVE" % self.name)

    def put(self, n):
        with self.lock:
            while n > 0:
                k = min(n, 250)
                recs = []
                for _ in range(k):
                    i = len(self.sent) + len(recs)
                    key = "k%d" % (i % KEYS)
                    recs.append({"Data": ("%s:%d" % (key, i)).encode(), "PartitionKey": key})
                out = self.c.put_records(StreamName=self.name, Records=recs)
                assert out.get("FailedRecordCount", 0) == 0, out
                self.sent.extend(r["Data"].decode() for r in recs)
                n -= k

    def shards(self):
        return self.c.list_shards(StreamName=self.name)["Shards"]

    def open_shards(self):
        return sorted((s for s in self.shards()
                       if "EndingSequenceNumber" not in s["SequenceNumberRange"]),
                      key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))

    def split_first(self):
        s = self.open_shards()[0]
        lo = int(s["HashKeyRange"]["StartingHashKey"])
        hi = int(s["HashKeyRange"]["EndingHashKey"])
        self.c.split_shard(StreamName=self.name, ShardToSplit=s["ShardId"],
                           NewStartingHashKey=str((lo + hi) // 2))
        self.wait_active()

    def merge_first_two(self):
        a, b = self.open_shards()[:2]
        self.c.merge_shards(StreamName=self.name, ShardToMerge=a["ShardId"],
                            AdjacentShardToMerge=b["ShardId"])
        self.wait_active()

    def consumers(self, name=None):
        out = self.c.list_stream_consumers(StreamARN=self.arn)["Consumers"]
        return [c for c in out if name is None or c["ConsumerName"] == name]


class Producer(threading.Thread):
    """Puts `per_round` records every `every` seconds until stopped."""

    def __init__(self, stream, per_round, every):
        super().__init__(daemon=True)
        self.stream, self.per_round, self.every = stream, per_round, every
        self.halt = threading.Event()
        self.error = None

    def run(self):
        try:
            while not self.halt.is_set():
                self.stream.put(self.per_round)
                self.halt.wait(self.every)
        except Exception as e:  # reported by stop()
            self.error = e

    def stop(self):
        self.halt.set()
        self.join(60)
        if self.error:
            raise self.error


class Consumer:
    """efo_tool in the background; output collected by threads."""

    def __init__(self, server_url, stream, props=(), args=(), tls=False, dynamodb=None,
                 name="consumer"):
        self.stats_path = tempfile.mktemp(prefix="efo-stats-", suffix=".json")
        cmd = [TOOL]
        for p in props:
            cmd += ["-X", p]
        if tls:
            cmd += ["-X", "ssl.verify=false"]
        if os.environ.get("KN_TEST_LOG_LEVEL"):  # more detail when hunting a failure
            cmd += ["-X", "log.level=" + os.environ["KN_TEST_LOG_LEVEL"]]
        cmd += [stream, "-s", self.stats_path] + list(args)
        self.cmd = cmd
        self.name = name
        env = lab.env_for(kinesis=server_url, dynamodb=dynamodb)
        self.p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.lines, self.err_lines = [], []
        self.t_out = threading.Thread(target=self._pump, args=(self.p.stdout, self.lines),
                                      daemon=True)
        self.t_err = threading.Thread(target=self._pump, args=(self.p.stderr, self.err_lines),
                                      daemon=True)
        self.t_out.start()
        self.t_err.start()

    @staticmethod
    def _pump(f, into):
        for line in f:
            into.append(line.rstrip("\n"))

    def records(self):
        return [json.loads(l) for l in list(self.lines)]

    def data(self):
        return [r["data"] for r in self.records()]

    def stats(self):
        try:
            with open(self.stats_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def shard_efo(self):
        st = self.stats() or {"shards": []}
        return {s["shard"]: s.get("efo") for s in st["shards"]}

    def wait_for(self, pred, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            if pred():
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.2)
        if pred():
            return
        raise AssertionError("%s: timed out waiting for %s (exit %s)\n%s" % (
            self.name, what, self.p.poll(), self.stderr_tail()))

    def wait_count(self, n, timeout):
        self.wait_for(lambda: len(self.lines) >= n, timeout, "%d records (have %d)" % (
            n, len(self.lines)))

    def signal(self, sig):
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def finish(self, timeout=120):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("%s did not exit\n%s" % (self.name, self.stderr_tail()))
        self.t_out.join(10)
        self.t_err.join(10)
        runkit.check_clean("\n".join(self.err_lines), self.name, tail=6000)
        return rc

    def stop(self):
        self.signal(signal.SIGTERM)
        return self.finish()

    def stderr_tail(self, n=60):
        return "\n".join(self.err_lines[-n:])

    def summary(self):
        for l in self.err_lines:
            if l.startswith("SUMMARY "):
                return json.loads(l[8:])
        return None

    def cleanup(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        try:
            os.unlink(self.stats_path)
        except OSError:
            pass


def check_once(got, expected, what="records"):
    missing = set(expected) - set(got)
    dups = len(got) - len(set(got))
    extra = set(got) - set(expected)
    assert not missing and not extra and dups == 0, (
        "%s: %d missing (e.g. %s), %d unexpected, %d duplicates" % (
            what, len(missing), sorted(missing)[:5], len(extra), dups))


def check_complete(got, expected, what="records"):
    """At-least-once: nothing lost."""
    missing = set(expected) - set(got)
    assert not missing, "%s: %d lost (e.g. %s)" % (what, len(missing), sorted(missing)[:5])


def check_key_order(records):
    last = {}
    for r in records:
        k, i = r["data"].split(":")
        i = int(i)
        assert last.get(k, -1) < i, "key %s: %d after %d" % (k, i, last[k])
        last[k] = i


def check_parents_first(records, shards):
    """Every record of a child comes after every record of its parents."""
    first, last = {}, {}
    for n, r in enumerate(records):
        first.setdefault(r["shard"], n)
        last[r["shard"]] = n
    for s in shards:
        for p in (s.get("ParentShardId"), s.get("AdjacentParentShardId")):
            if p and p in last and s["ShardId"] in first:
                assert last[p] < first[s["ShardId"]], (
                    "shard %s delivered before its parent %s ended" % (s["ShardId"], p))


class Suite:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def case(self, fn, *args):
        label = fn.__name__ + ("(%s)" % ", ".join(map(str, args)) if args else "")
        # KN_CASES=name,name runs only the cases whose label contains one.
        only = [c for c in os.environ.get("KN_CASES", "").split(",") if c]
        if only and not any(c in label for c in only):
            return
        start = time.time()
        try:
            fn(*args)
            self.passed += 1
            print("ok   %s (%.1fs)" % (label, time.time() - start), flush=True)
        except Exception:
            self.failed += 1
            print("FAIL %s (%.1fs)" % (label, time.time() - start), flush=True)
            traceback.print_exc()
            sys.stdout.flush()

    def done(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0
