#!/usr/bin/env python3
"""The stream-processor roles end to end on kinesalite and kinesis-local:
an enumerator and several stream readers (tests/tools/stream_tool.c) read
a stream across a split and a merge, with restarts from their snapshots,
rescales from 2 to 3 readers and back, and a SIGKILL; the output file,
committed with the snapshots, holds every record exactly once, parents
before children.  A reader restored at a position older than the trim
horizon (tests/tools/trim_tool.c) starts at TRIM_HORIZON and says so.

Environment: STREAM_TOOL, TRIM_TOOL, KNCAT (to produce and reshard),
KN_SOURCE_DIR.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import runkit
from reshardkit import TIMEOUT, Reshard, lab, main

TOOL = runkit.tool("stream_tool")
TRIM_TOOL = runkit.tool("trim_tool")


class Roles(Reshard):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="stream-roles-")
        self.addCleanup(self.dir.cleanup)
        self.state = os.path.join(self.dir.name, "state")
        self.out = os.path.join(self.dir.name, "out")

    def tool(self, s, readers, max_records=0):
        p = runkit.run([TOOL, s, readers, self.state, self.out, max_records],
                       env=self.env, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)

    def check(self, s):
        rows = [line.split(" ", 3) for line in Path(self.out).read_text().splitlines()]
        values = [int(r[3]) for r in rows]
        self.assertEqual(sorted(values), list(range(self.n)))  # exactly once
        self.check_parents_first(s, [r[0] for r in rows])
        return rows

    def test_rescale_and_reshard(self):
        s = self.create(2)
        self.produce(s, 200)
        self.tool(s, 2, 80)
        self.assertGreaterEqual(len(Path(self.out).read_text().splitlines()), 80)
        self.kncat("split", s, "0")
        self.produce(s, 100)
        self.tool(s, 3, 120)  # rescale 2 -> 3
        kids = self.children(s, "shardId-000000000000")
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
            _, err = proc.communicate(timeout=30)
        runkit.check_clean(err, "stream_tool killed")
        self.kncat("split", s, "1")
        self.produce(s, 50)
        self.tool(s, 2)
        self.check(s)

    def trim_tool(self, s, where):
        p = runkit.run([TRIM_TOOL, s, "shardId-000000000000", where],
                       env=self.env, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.splitlines()

    def test_restore_before_trim_horizon(self):
        """A restored position older than the oldest record the shard keeps
        (as one that aged out of retention is) starts the shard at
        TRIM_HORIZON, and the reader's log says so; a position the shard
        keeps resumes right after it, and nothing is said."""
        s = self.create(1)
        self.produce(s, 20)
        out = self.trim_tool(s, "start")
        self.assertEqual(out[-1], "records 20 first 0", out)
        warned = [line for line in out if "older than the trim horizon" in line]
        self.assertEqual(len(warned), 1, out)
        self.assertIn("reading from TRIM_HORIZON", warned[0])
        out = self.trim_tool(s, "5")
        self.assertEqual(out, ["records 15 first 5"])


class Kinesalite(Roles, unittest.TestCase):
    server_cls = lab.Kinesalite


class KinesisLocal(Roles, unittest.TestCase):
    server_cls = lab.KinesisLocal


if __name__ == "__main__":
    sys.exit(main(sys.modules[__name__]))
