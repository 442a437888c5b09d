#!/usr/bin/env python3
"""The stream-processor roles end to end on kinesalite and kinesis-local:
an enumerator and several stream readers (tests/tools/stream_tool.c) read
a stream across a split and a merge, with restarts from their snapshots,
rescales from 2 to 3 readers and back, and a SIGKILL; the output file,
committed with the snapshots, holds every record exactly once, parents
before children.

Environment: STREAM_TOOL, KNCAT (to produce and reshard), KN_SOURCE_DIR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
KNCAT = os.environ.get("KNCAT", str(SOURCE_DIR / "build" / "kncat"))
TOOL = os.environ.get("STREAM_TOOL", str(SOURCE_DIR / "build" / "tests" / "tools"
                                         / "stream_tool"))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
import lab  # noqa: E402

TIMEOUT = 180
KEYS = [f"k{i}" for i in range(12)]


class Roles:
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
        self.dir = tempfile.TemporaryDirectory(prefix="stream-roles-")
        self.addCleanup(self.dir.cleanup)
        self.state = os.path.join(self.dir.name, "state")
        self.out = os.path.join(self.dir.name, "out")
        self.n = 0

    def kncat(self, *args, input=None):
        p = subprocess.run([KNCAT, *args], input=input, capture_output=True,
                           env=self.env, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        return p

    def create(self, shards):
        Roles.counter += 1
        s = f"roles-{os.getpid()}-{Roles.counter}"
        self.kncat("create", s, "--shards", str(shards))
        return s

    def produce(self, s, count):
        lines = []
        for _ in range(count):
            lines.append(f"{KEYS[self.n % len(KEYS)]}:{self.n}".encode())
            self.n += 1
        self.kncat("produce", s, "-K", ":", input=b"\n".join(lines) + b"\n")

    def tool(self, s, readers, max_records=0):
        p = subprocess.run([TOOL, s, str(readers), self.state, self.out,
                            str(max_records)], capture_output=True, env=self.env,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))

    def shards(self, s):
        p = self.kncat("list", s, "-J")
        return [json.loads(line) for line in p.stdout.decode().splitlines()]

    def check(self, s):
        rows = [line.split(" ", 3) for line in Path(self.out).read_text().splitlines()]
        values = [int(r[3]) for r in rows]
        self.assertEqual(sorted(values), list(range(self.n)))  # exactly once
        first_at, last_at = {}, {}
        for i, r in enumerate(rows):
            first_at.setdefault(r[0], i)
            last_at[r[0]] = i
        for x in self.shards(s):
            for parent in (x["parent"], x["adjacent_parent"]):
                if parent in last_at and x["shard"] in first_at:
                    self.assertLess(last_at[parent], first_at[x["shard"]],
                                    (parent, x["shard"]))
        return rows

    def test_rescale_and_reshard(self):
        s = self.create(2)
        self.produce(s, 200)
        self.tool(s, 2, 80)
        self.assertGreaterEqual(len(Path(self.out).read_text().splitlines()), 80)
        self.kncat("split", s, "0")
        self.produce(s, 100)
        self.tool(s, 3, 120)  # rescale 2 -> 3
        kids = [x["shard"] for x in self.shards(s)
                if x["parent"] == "shardId-000000000000"]
        self.assertEqual(len(kids), 2)
        self.kncat("merge", s, kids[0], kids[1])
        self.produce(s, 100)
        self.tool(s, 2)  # rescale 3 -> 2, to the end
        rows = self.check(s)
        self.assertGreaterEqual(len({r[0] for r in rows}), 5)
        # Nothing more: a run reads nothing again.
        self.tool(s, 2)
        self.check(s)

    def test_kill(self):
        """SIGKILL between checkpoints: the restart reads again exactly
        what the output had not committed."""
        s = self.create(2)
        self.produce(s, 300)
        with subprocess.Popen([TOOL, s, "2", self.state, self.out, "0"],
                              env=self.env, stderr=subprocess.PIPE) as proc:
            deadline = time.monotonic() + TIMEOUT
            while not os.path.exists(self.state):
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.02)
            proc.kill()
            proc.communicate(timeout=30)
        self.kncat("split", s, "1")
        self.produce(s, 50)
        self.tool(s, 2)
        self.check(s)


class Kinesalite(Roles, unittest.TestCase):
    server_cls = lab.Kinesalite


class KinesisLocal(Roles, unittest.TestCase):
    server_cls = lab.KinesisLocal


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"{passed} passed, {failed} failed")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
