#!/usr/bin/env python3
"""`kncat produce` on the library's producer, against kinesalite and
kinesis-local: --aggregate read back by `kncat consume -J` (every record
once, keys, sub-sequence numbers), a record whose time-to-live runs out
behind a failing proxy (exit 5), --rate, --linger and the progress line.

Environment: KNCAT, KN_SOURCE_DIR.  Prints "N passed, M failed"."""

import collections
import json
import os
import sys
import tempfile
import time
import traceback

SRC = os.environ.get("KN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runkit  # noqa: E402

KNCAT = os.environ.get("KNCAT") or os.path.join(SRC, "build", "kncat")


def kncat(env, *args, input=None, rc=0, timeout=300):
    p = runkit.kncat(*args, kncat=KNCAT, env=env, input=input, text=False, timeout=timeout)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == rc, "kncat %s: exit %d (want %d)\n%s" % (
        " ".join(map(str, args[:4])), p.returncode, rc, err[-2000:])
    return p


class Suite:
    def __init__(self, kind, server, small):
        self.kind, self.server, self.small = kind, server, small
        self.env = lab.env_for(kinesis=server)
        self.passed = self.failed = 0
        self.n = 0

    def stream(self, shards):
        self.n += 1
        s = "kp-%d" % self.n
        kncat(self.env, "create", s, "--shards", shards)
        return s

    def consume(self, s):
        p = kncat(self.env, "consume", s, "-e", "-J")
        return [json.loads(x) for x in p.stdout.decode().splitlines()]

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

    def aggregate_roundtrip(self):
        s = self.stream(3)
        n = 400 if self.small else 5000
        lines = ["key%d\t%d %s" % (i % 37, i, "x" * (i % 50)) for i in range(n)]
        p = kncat(self.env, "produce", s, "--aggregate", "-K", "\\t",
                  "-X", "aggregation.max.bytes=2048",
                  input=("\n".join(lines) + "\n").encode())
        assert ("%d records sent, 0 failed" % n) in p.stderr.decode(), p.stderr
        recs = self.consume(s)
        assert len(recs) == n, (len(recs), n)
        want = {l.split("\t", 1)[1]: l.split("\t", 1)[0] for l in lines}
        seen = collections.Counter(r["data"] for r in recs)
        assert set(seen) == set(want) and max(seen.values()) == 1
        for r in recs:
            assert r["key"] == want[r["data"]], r
        # Aggregates: sub-sequence numbers 0..k-1 under one sequence number,
        # most records inside one.
        by_seq = collections.defaultdict(list)
        for r in recs:
            by_seq[(r["shard"], r["seq"])].append(r["subseq"])
        assert all(v == list(range(len(v))) for v in by_seq.values()), by_seq
        assert len(by_seq) < n // 5, len(by_seq)
        # a key's records in input order
        last = {}
        for r in recs:
            i = int(r["data"].split(" ")[0])
            assert last.get(r["key"], -1) < i
            last[r["key"]] = i

    def ttl_exit_5(self):
        s = self.stream(1)
        with FaultProxy(self.server) as proxy:
            proxy.add_rule("status", "PutRecords", status=500)
            env = lab.env_for(kinesis=proxy.endpoint)
            p = kncat(env, "produce", s, "-X", "message.timeout.ms=1000",
                      "-X", "retry.backoff.ms=20", input=b"a\nb\nc\n", rc=5)
            err = p.stderr.decode()
            assert "0 records sent, 3 failed" in err, err
            assert "not delivered" in err and "message.timeout.ms" in err, err
            assert len(proxy.requests("PutRecords")) >= 2
        assert self.consume(s) == []

    def input_faster_than_the_stream(self):
        """A file bigger than the stream takes within a record's
        time-to-live: the input is held back, not expired in the queue."""
        if self.kind != "kinesalite":
            return
        from kinesis_limits import Limits
        s = self.stream(1)
        n, size = 8192, 1000   # 8 MB at about 0.5 MB/s: about 16 s
        data = b"".join(b"k%d\t%s\n" % (i, b"x" * size) for i in range(n))
        fd, path = tempfile.mkstemp(prefix="kp-big-", suffix=".txt")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            with FaultProxy(self.server, limits=Limits().scaled(0.5)) as proxy:
                env = lab.env_for(kinesis=proxy.endpoint)
                p = kncat(env, "produce", s, path, "-K", "\\t",
                          "-X", "message.timeout.ms=6000",
                          "-X", "shard.bytes.per.second=524288",
                          "-X", "shard.records.per.second=500")
                err = p.stderr.decode()
                assert ("%d records sent, 0 failed" % n) in err, err[-2000:]
        finally:
            os.unlink(path)
        assert len(self.consume(s)) == n

    def rate_and_progress(self):
        s = self.stream(1)
        t = time.time()
        p = kncat(self.env, "produce", s, "--rate", 25, "--linger", 10,
                  input=b"".join(b"%d\n" % i for i in range(60)))
        took = time.time() - t
        assert took >= 2.2, took
        err = p.stderr.decode()
        assert "records in" in err and "in flight" in err, err
        assert "60 records sent, 0 failed" in err, err
        assert len(self.consume(s)) == 60

    def usage(self):
        for args in (["--linger", "x"], ["--rate", "0"], ["--rate-bytes", "-1"]):
            p = kncat(self.env, "produce", "s", *args, rc=2)
            assert p.stderr, args

    def run(self):
        for fn in (self.aggregate_roundtrip, self.ttl_exit_5,
                   self.input_faster_than_the_stream,
                   self.rate_and_progress, self.usage):
            self.case(fn)


def main():
    if not os.path.exists(KNCAT):
        print("kncat not found at %s" % KNCAT)
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
