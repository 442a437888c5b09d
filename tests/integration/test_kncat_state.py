#!/usr/bin/env python3
"""kncat consume --state FILE on both kinesalite and kinesis-local: runs
that stop early (-c, SIGINT, SIGKILL) and resume from FILE deliver every
record exactly once (at least once after SIGKILL), across a split and a
merge made between runs, parents before children; a FILE that is no state
exits 2 and is left as it was.

Environment: KNCAT (the binary), KN_SOURCE_DIR (the source tree).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
KNCAT = os.environ.get("KNCAT", str(SOURCE_DIR / "build" / "kncat"))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
import lab  # noqa: E402

TIMEOUT = 120
KEYS = [f"k{i}" for i in range(12)]


class State:
    """Mixed into one TestCase per server."""

    server_cls = None
    counter = 0

    @classmethod
    def setUpClass(cls):
        cls.server = cls.server_cls().start()
        cls.env = lab.env_for(kinesis=cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="kncat-state-")
        self.addCleanup(self.dir.cleanup)
        self.file = os.path.join(self.dir.name, "state")
        self.n = 0

    def kncat(self, *args, input=None, ok=True):
        p = subprocess.run([KNCAT, *args], input=input, capture_output=True,
                           env=self.env, timeout=TIMEOUT)
        if ok:
            self.assertEqual(p.returncode, 0,
                             f"kncat {' '.join(args)}: {p.stderr.decode(errors='replace')}")
        return p

    def create(self, shards):
        State.counter += 1
        s = f"kncat-state-{os.getpid()}-{State.counter}"
        self.kncat("create", s, "--shards", str(shards))
        return s

    def produce(self, s, count):
        lines = []
        for _ in range(count):
            lines.append(f"{KEYS[self.n % len(KEYS)]}:{self.n}".encode())
            self.n += 1
        self.kncat("produce", s, "-K", ":", input=b"\n".join(lines) + b"\n")

    def shards(self, s):
        p = self.kncat("list", s, "-J")
        return [json.loads(line) for line in p.stdout.decode().splitlines()]

    def consume(self, s, *extra):
        p = self.kncat("consume", s, "-J", "--state", self.file, *extra)
        return [json.loads(line) for line in p.stdout.decode().splitlines()]

    def check_order(self, s, runs):
        """Within each run, a parent's records come before its children's;
        across runs, every key's values rise."""
        graph = {x["shard"]: x for x in self.shards(s)}
        for recs in runs:
            first_at, last_at = {}, {}
            for i, r in enumerate(recs):
                first_at.setdefault(r["shard"], i)
                last_at[r["shard"]] = i
            for sid, x in graph.items():
                for parent in (x["parent"], x["adjacent_parent"]):
                    if parent in last_at and sid in first_at:
                        self.assertLess(last_at[parent], first_at[sid], (parent, sid))
        per_key = {}
        for recs in runs:
            for r in recs:
                per_key.setdefault(r["key"], []).append(int(r["data"]))
        for k, v in per_key.items():
            self.assertEqual(v, sorted(v), k)

    def test_resume_across_split_and_merge(self):
        s = self.create(2)
        self.produce(s, 100)
        runs = [self.consume(s, "-c", "30")]
        self.assertEqual(len(runs[-1]), 30)
        self.assertEqual(Path(self.file).read_bytes()[:4], b"KNRS")
        # -c ends in the middle of a batch: the next run starts after the
        # last record written, not after the last one polled
        runs.append(self.consume(s, "-c", "25"))
        self.assertEqual(len(runs[-1]), 25)
        self.kncat("split", s, "0")
        self.produce(s, 100)
        runs.append(self.consume(s, "-c", "90"))
        kids = [x["shard"] for x in self.shards(s)
                if x["parent"] == "shardId-000000000000"]
        self.assertEqual(len(kids), 2)
        self.kncat("merge", s, kids[0], kids[1])
        self.produce(s, 100)
        runs.append(self.consume(s, "-e"))
        values = [int(r["data"]) for recs in runs for r in recs]
        self.assertEqual(sorted(values), list(range(self.n)))  # exactly once
        self.check_order(s, runs)
        self.assertGreaterEqual(len({r["shard"] for recs in runs for r in recs}), 4)
        # Everything is read: nothing again, and finished shards stay so.
        self.assertEqual(self.consume(s, "-e"), [])
        self.produce(s, 10)
        last = self.consume(s, "-e")
        self.assertEqual(sorted(int(r["data"]) for r in last),
                         list(range(self.n - 10, self.n)))
        merged = [x["shard"] for x in self.shards(s) if x["adjacent_parent"]]
        self.assertTrue(all(r["shard"] in merged or r["shard"] == "shardId-000000000001"
                            for r in last), last)

    def test_periodic_save_and_kill(self):
        """checkpoint.interval.ms: FILE is replaced while reading; after
        SIGKILL the next run loses nothing (it may repeat what came after
        the last save).  SIGINT saves at exit: nothing repeats."""
        s = self.create(1)
        self.produce(s, 50)
        args = [KNCAT, "consume", s, "-J", "--state", self.file,
                "-X", "checkpoint.interval.ms=100"]
        with subprocess.Popen(args, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, bufsize=0) as proc:
            first = [proc.stdout.readline() for _ in range(50)]
            deadline = time.monotonic() + TIMEOUT
            # saved while running: wait until FILE holds the 50th record
            seq50 = json.loads(first[-1])["seq"]
            while seq50.encode() not in (Path(self.file).read_bytes()
                                         if os.path.exists(self.file) else b""):
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
            proc.kill()
            proc.communicate(timeout=30)
        self.produce(s, 20)
        again = self.consume(s, "-e")
        self.assertEqual([int(r["data"]) for r in again], list(range(50, 70)))
        # SIGINT: written, saved, exit 0; the next run starts after it
        self.produce(s, 5)
        with subprocess.Popen(args, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, bufsize=0) as proc:
            got = [proc.stdout.readline() for _ in range(5)]
            proc.send_signal(signal.SIGINT)
            rest, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(rest, b"")
        self.assertEqual([int(json.loads(x)["data"]) for x in got], list(range(70, 75)))
        self.assertEqual(self.consume(s, "-e"), [])
        # no temporary files left next to FILE
        self.assertEqual(os.listdir(self.dir.name), ["state"])

    def test_bad_state(self):
        s = self.create(1)
        self.produce(s, 3)
        self.consume(s, "-e")
        good = Path(self.file).read_bytes()
        cases = {
            "garbage": b"hello, this is not a state\n",
            "empty": b"",
            "truncated": good[:-1],
            "flipped": good[:8] + bytes([good[8] ^ 1]) + good[9:],
        }
        for what, data in cases.items():
            Path(self.file).write_bytes(data)
            p = self.kncat("consume", s, "-e", "--state", self.file, ok=False)
            self.assertEqual(p.returncode, 2, (what, p.stderr))
            self.assertEqual(p.stdout, b"", what)
            self.assertIn(b"not a kncat state file", p.stderr, what)
            self.assertEqual(Path(self.file).read_bytes(), data, what)
        # A directory where no file can be made: exit 2 too.
        p = self.kncat("consume", s, "-e", "--state",
                       os.path.join(self.dir.name, "no", "such", "dir", "f"), ok=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        # A missing FILE is a first run, -o applies; a shard still at
        # LATEST is saved at the run's start time, so records written
        # before the next run are read by it.  (Not resumed with nothing
        # newer: kinesalite never answers GetShardIterator AT_TIMESTAMP
        # past its last record.)
        os.unlink(self.file)
        self.assertEqual(len(self.consume(s, "-e", "-o", "latest")), 0)
        self.produce(s, 2)
        self.assertEqual([int(r["data"]) for r in self.consume(s, "-e")], [3, 4])
        self.assertEqual(self.consume(s, "-e"), [])


class Kinesalite(State, unittest.TestCase):
    server_cls = lab.Kinesalite


class KinesisLocal(State, unittest.TestCase):
    server_cls = lab.KinesisLocal


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    if len(sys.argv) > 1:
        suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:],
                                                              sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"{passed} passed, {failed} failed")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
