"""Shared by the tests that read a stream across resharding with positions
kept by the application (test_kncat_state.py, test_stream_roles.py): one
local server per TestCase, kncat to create, produce into and reshard a
stream, records "KEY:N" with N counting up, and the unittest runner."""

from __future__ import annotations

import json
import os
import sys
import unittest
from pathlib import Path

import runkit

SOURCE_DIR = Path(runkit.SRC)
KNCAT = runkit.KNCAT
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
import lab  # noqa: E402

TIMEOUT = 180
KEYS = [f"k{i}" for i in range(12)]


class Reshard:
    """Mixed into one TestCase per server (server_cls)."""

    server_cls = None
    counter = 0

    @classmethod
    def setUpClass(cls):
        cls.server = cls.server_cls().start()
        cls.env = lab.env_for(kinesis=cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def kncat(self, *args, input=None, ok=True):
        # runkit fails the test on a sanitizer report in stderr.
        p = runkit.kncat(*args, input=input, env=self.env, timeout=TIMEOUT,
                         text=False)
        if ok:
            self.assertEqual(p.returncode, 0,
                             f"kncat {' '.join(args)}: {p.stderr.decode(errors='replace')}")
        return p

    def create(self, shards):
        """A new stream; self.n counts the records produced into it."""
        Reshard.counter += 1
        s = f"reshard-{os.getpid()}-{Reshard.counter}"
        self.kncat("create", s, "--shards", str(shards))
        self.n = 0
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

    def children(self, s, parent):
        return [x["shard"] for x in self.shards(s) if x["parent"] == parent]

    def check_parents_first(self, s, shard_of_each):
        """In one run's output (the shard of each record, in order), a
        parent's records all come before its children's."""
        first_at, last_at = {}, {}
        for i, sid in enumerate(shard_of_each):
            first_at.setdefault(sid, i)
            last_at[sid] = i
        for x in self.shards(s):
            for parent in (x["parent"], x["adjacent_parent"]):
                if parent in last_at and x["shard"] in first_at:
                    self.assertLess(last_at[parent], first_at[x["shard"]],
                                    (parent, x["shard"]))


def main(module):
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    if len(sys.argv) > 1:
        suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:], module)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"{passed} passed, {failed} failed")
    return 0 if result.wasSuccessful() else 1
