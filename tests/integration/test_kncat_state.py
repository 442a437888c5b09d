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

import runkit
from reshardkit import KNCAT, TIMEOUT, Reshard, lab, main


class State(Reshard):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="kncat-state-")
        self.addCleanup(self.dir.cleanup)
        self.file = os.path.join(self.dir.name, "state")

    def consume(self, s, *extra):
        p = self.kncat("consume", s, "-J", "--state", self.file, *extra)
        return [json.loads(line) for line in p.stdout.decode().splitlines()]

    def check_order(self, s, runs):
        """Within each run, parents before children; across runs, every
        key's values rise."""
        for recs in runs:
            self.check_parents_first(s, [r["shard"] for r in recs])
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
        kids = self.children(s, "shardId-000000000000")
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
            _, err = proc.communicate(timeout=30)
        runkit.check_clean(err, "consume killed")
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
        runkit.check_clean(err, "consume interrupted")
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
        # The library's property, given bytes that are no snapshot: a
        # configuration error too.
        p = self.kncat("consume", s, "-e", "-X", "start.positions=aGVsbG8=",
                       ok=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(b"start.positions", p.stderr)
        # Usage errors found before FILE is read leave it alone too.
        for args in (["consume", "--state", self.file],
                     ["consume", s, "-o", "ts:", "--state", self.file]):
            p = self.kncat(*args, ok=False)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
        self.assertEqual(Path(self.file).read_bytes(), data)
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


if __name__ == "__main__":
    sys.exit(main(sys.modules[__name__]))
