#!/usr/bin/env python3
"""kn_producer_t end to end, on kinesalite and on kinesis-local, through
tests/tools/producer_tool (PRODUCER_TOOL, or found under KN_BUILD_DIR):

- every record stored once, read back (deaggregated) where its delivery
  report says (shard, sequence and sub-sequence numbers), in key order;
- producing while the stream's only shard is split: every record stored,
  reports naming the shard each record is read from;
- through tests/lab/faultproxy.py failing entries (putrecords_partial with
  drop) and whole calls (HTTP 500): every record stored once, and only the
  failed entries sent again (from the proxy's request log);
- a proxy failing every call for longer than message.timeout.ms: error
  reports (MSG_TIMED_OUT) and exit 5.

Prints "N passed, M failed"."""

import base64
import collections
import json
import os
import subprocess
import sys
import time
import traceback

SRC = os.environ.get("KN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runkit  # noqa: E402

BUILD = os.environ.get("KN_BUILD_DIR", os.path.join(SRC, "build"))
TOOL = os.environ.get("PRODUCER_TOOL") or os.path.join(BUILD, "tests", "tools", "producer_tool")

# Fast retries: the proxy's faults are not real throttling.
FAST = ["-X", "retry.backoff.ms=20", "-X", "retry.backoff.max.ms=200"]


def run_tool(env, *args, timeout=300):
    p = runkit.run([TOOL, *args], env=env, timeout=timeout)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    return p.returncode, lines, p.stderr


def produce(env, stream, n, *opts, expect_rc=0):
    rc, lines, err = run_tool(env, "produce", stream, n, *opts)
    assert rc == expect_rc, "produce exit %d (want %d): %s" % (rc, expect_rc, err[-2000:])
    summary = lines[-1]["summary"]
    reports = lines[:-1]
    assert len(reports) == n, (len(reports), n)
    assert sorted(r["i"] for r in reports) == list(range(n))
    return reports, summary


def read(env, stream):
    rc, lines, err = run_tool(env, "read", stream)
    assert rc == 0, err[-2000:]
    return lines


def check_read_back(reports, records):
    """Every report names where its record was read, each read once."""
    by_data = collections.defaultdict(list)
    for r in records:
        by_data[r["data"].split(".")[0]].append(r)
    for rep in reports:
        got = by_data.get(str(rep["i"]), [])
        assert len(got) == 1, "record %d read %d times" % (rep["i"], len(got))
        rec = got[0]
        assert rec["key"] == rep["key"]
        assert (rec["shard"], rec["seq"], rec["subseq"]) == \
            (rep["shard"], rep["seq"], rep["subseq"]), (rec, rep)
    assert len(records) == len(reports), (len(records), len(reports))


def check_key_order(records):
    """Records of a key are stored in the order they were sent."""
    last = {}
    for r in records:  # per shard in order, parents first
        i = int(r["data"].split(".")[0])
        assert last.get(r["key"], -1) < i, "key %s: %d after %d" % (r["key"], i, last[r["key"]])
        last[r["key"]] = i


class Suite:
    def __init__(self, kind, server, small):
        self.kind = kind
        self.server = server
        self.small = small  # kinesis-local is slow: fewer records
        self.env = lab.env_for(kinesis=server)
        self.kinesis = lab.boto3_client("kinesis", server)
        self.passed = self.failed = 0
        self.n = 0

    def stream(self, shards):
        self.n += 1
        name = "producer-%d" % self.n
        self.kinesis.create_stream(StreamName=name, ShardCount=shards)
        self.kinesis.get_waiter("stream_exists").wait(
            StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 150})
        return name

    def case(self, fn):
        name = "%s %s" % (self.kind, fn.__name__)
        t = time.time()
        try:
            fn()
            self.passed += 1
            print("ok   %s (%.1f s)" % (name, time.time() - t), flush=True)
        except Exception:
            self.failed += 1
            print("FAIL %s" % name, flush=True)
            traceback.print_exc()

    # ---- cases ----

    def roundtrip_plain(self):
        s = self.stream(3)
        n = 200 if self.small else 2000
        reports, summary = produce(self.env, s, n, "--keys", 20)
        assert summary["delivered"] == n and summary["failed"] == 0
        assert not any(r["agg"] for r in reports)
        records = read(self.env, s)
        check_read_back(reports, records)
        check_key_order(records)

    def roundtrip_aggregated(self):
        s = self.stream(3)
        n = 300 if self.small else 5000
        reports, summary = produce(self.env, s, n, "--keys", 30, "--size", 100,
                                   "-X", "aggregation.enable=true",
                                   "-X", "aggregation.max.bytes=4096")
        assert summary["delivered"] == n
        assert sum(r["agg"] for r in reports) > n // 2
        # Sub-sequence numbers count from 0 within each aggregate.
        by_seq = collections.defaultdict(list)
        for r in reports:
            by_seq[(r["shard"], r["seq"])].append(r["subseq"])
        for subs in by_seq.values():
            assert sorted(subs) == list(range(len(subs))), subs
        records = read(self.env, s)
        check_read_back(reports, records)
        check_key_order(records)

    def split_while_producing(self, aggregate):
        s = self.stream(1)
        n, rate = (240, 80) if self.small else (1500, 500)
        # The first half delivered, the producer waits while the shard is
        # split; the rest goes to the children.
        args = [TOOL, "produce", s, n, "--keys", 40, "--rate", rate,
                "--pause-at", n // 2] + FAST
        if aggregate:
            args += ["-X", "aggregation.enable=true", "-X", "linger.ms=50"]
        p = subprocess.Popen([str(a) for a in args], env=self.env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        head = []
        for line in iter(p.stdout.readline, ""):
            if '"paused"' in line:
                break
            head.append(line)
        shard = self.kinesis.list_shards(StreamName=s)["Shards"][0]
        mid = (int(shard["HashKeyRange"]["StartingHashKey"]) +
               int(shard["HashKeyRange"]["EndingHashKey"]) + 1) // 2
        self.kinesis.split_shard(StreamName=s, ShardToSplit=shard["ShardId"],
                                 NewStartingHashKey=str(mid))
        self.kinesis.get_waiter("stream_exists").wait(
            StreamName=s, WaiterConfig={"Delay": 0.2, "MaxAttempts": 300})
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=300)
        runkit.check_clean(err, "producer_tool produce")
        assert p.returncode == 0, err[-3000:]
        lines = [json.loads(x) for x in head + out.splitlines()]
        reports, summary = lines[:-1], lines[-1]["summary"]
        assert summary["delivered"] == n, summary
        shards = {r["shard"] for r in reports}
        assert len(shards) >= 2, "no record went to a child shard: %s" % shards
        assert summary["refreshes"] >= 2, summary
        self.kinesis.get_waiter("stream_exists").wait(StreamName=s)
        records = read(self.env, s)
        check_read_back(reports, records)

    def split_plain(self):
        self.split_while_producing(False)

    def split_aggregated(self):
        self.split_while_producing(True)

    def faults(self):
        s = self.stream(2)
        n = 300 if self.small else 1500
        with FaultProxy(self.server) as proxy:
            proxy.add_rule("status", "PutRecords", count=2, status=500)
            proxy.add_rule("putrecords_partial", count=6, every=3, drop=True)
            env = lab.env_for(kinesis=proxy.endpoint)
            reports, summary = produce(env, s, n, "--keys", 25,
                                       "-X", "batch.max.records=50", *FAST)
            assert summary["delivered"] == n and summary["retries"] > 0, summary
            sent = collections.Counter()
            resent_needed = collections.Counter()
            statuses = collections.Counter()
            for req in proxy.requests("PutRecords"):
                statuses[req.status] += 1
                datas = [base64.b64decode(e["Data"]).decode()
                         for e in req.json()["Records"]]
                sent.update(datas)
                if req.status != 200:
                    resent_needed.update(datas)
                else:
                    resent_needed.update(datas[i] for i in req.failed_indices)
            assert statuses[500] == 2, statuses
            assert sum(1 for r in proxy.requests("PutRecords") if r.failed_indices) == 6
            # Each record went once, plus once per failure it had: only
            # failed entries were sent again.
            for i in range(n):
                d = str(i)
                assert sent[d] == 1 + resent_needed[d], (d, sent[d], resent_needed[d])
            attempts = {r["i"]: r["attempts"] for r in reports}
            assert all(attempts[i] == sent[str(i)] for i in range(n))
        records = read(self.env, s)
        check_read_back(reports, records)

    def faults_aggregated(self):
        s = self.stream(2)
        n = 300 if self.small else 1500
        with FaultProxy(self.server) as proxy:
            proxy.add_rule("status", "PutRecords", count=1, status=500)
            proxy.add_rule("putrecords_partial", count=3, every=2, drop=True)
            env = lab.env_for(kinesis=proxy.endpoint)
            reports, summary = produce(env, s, n, "--keys", 25, "--size", 50,
                                       "-X", "aggregation.enable=true",
                                       "-X", "aggregation.max.bytes=1024", *FAST)
            assert summary["delivered"] == n and summary["retries"] > 0, summary
        records = read(self.env, s)
        check_read_back(reports, records)

    def ttl_runs_out(self):
        s = self.stream(1)
        with FaultProxy(self.server) as proxy:
            proxy.add_rule("status", "PutRecords", status=500)
            env = lab.env_for(kinesis=proxy.endpoint)
            t = time.time()
            reports, summary = produce(env, s, 10, "-X", "message.timeout.ms=1500",
                                       *FAST, expect_rc=5)
            took = time.time() - t
            assert summary["failed"] == 10 and summary["delivered"] == 0
            assert all(r.get("error") == "_MSG_TIMED_OUT" for r in reports), reports[0]
            assert "InternalFailure" in reports[0]["message"] or "500" in reports[0]["message"]
            assert all(r["attempts"] >= 2 for r in reports)
            assert took < 60, took  # the time-out, not endless retries
        assert read(self.env, s) == []

    def run(self):
        for fn in (self.roundtrip_plain, self.roundtrip_aggregated,
                   self.split_plain, self.split_aggregated, self.faults,
                   self.faults_aggregated, self.ttl_runs_out):
            self.case(fn)


def main():
    if not os.path.exists(TOOL):
        print("producer_tool not found at %s" % TOOL)
        return 1
    passed = failed = 0
    for kind, cls, small in (("kinesalite", lab.Kinesalite, False),
                             ("kinesis-local", lab.KinesisLocal, True)):
        with cls() as server:
            suite = Suite(kind, server, small)
            suite.run()
            passed += suite.passed
            failed += suite.failed
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
