#!/usr/bin/env python3
"""The exactly-once example (examples/exactly-once/) under chaos: an
enumerator and 2 to 3 reader processes commit into PostgreSQL (a server
of its own on a free loopback port) while records flow, readers are
killed with SIGKILL every few seconds and restarted, the enumerator is
killed once, a shard splits, two shards merge, and a third reader joins
(a rescale from 2 to 3).  The table then holds every record put exactly
once, and a parent's rows all come before its children's.  The same for
the example without a database (eo_file_sink), killed once.

Environment: KN_BUILD_DIR (the examples' binaries), KNCAT, KN_SOURCE_DIR.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import pgkit
import runkit
from reshardkit import Reshard, lab, main

BIN = Path(runkit.BUILD) / "examples" / "exactly-once"
ROUNDS = 80       # of producing 40 records, about 30 s in all
KILL_EVERY = 8    # rounds between two readers killed, about 3 s
DRAIN_S = 90      # bound on reading what is left once the chaos ends


class Procs:
    """The example's processes by name, each restartable."""

    def __init__(self, env, logdir):
        self.env, self.logdir, self.procs, self.logs = env, logdir, {}, {}
        self.argv = {}

    def start(self, name, argv):
        self.argv[name] = argv
        log = open(os.path.join(self.logdir, name + ".log"), "ab")
        self.logs.setdefault(name, []).append(log)
        self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=log,
                                            stderr=log)

    def kill(self, name):
        p = self.procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait()
        self.start(name, self.argv[name])

    def check_alive(self, test):
        for name, p in self.procs.items():
            test.assertIsNone(p.poll(), f"{name} exited: {self.text(name)[-3000:]}")

    def text(self, name):
        return Path(self.logdir, name + ".log").read_text(errors="replace")

    def stop(self, test):
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        for name, p in self.procs.items():
            rc = p.wait(timeout=60)
            test.assertEqual(rc, 0, f"{name}: {self.text(name)[-3000:]}")
            runkit.check_clean(self.text(name), name)

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        for logs in self.logs.values():
            for f in logs:
                f.close()


class ExactlyOnce(Reshard):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="exactly-once-")
        self.addCleanup(self.dir.cleanup)

    def test_postgres_chaos(self):
        pg = pgkit.Postgres(self.dir.name).start()
        self.addCleanup(pg.stop)
        s = self.create(2)
        procs = Procs(self.env, self.dir.name)
        self.addCleanup(procs.close)
        procs.start("enumerator", [str(BIN / "eo_enumerator"), pg.conninfo, s])
        readers = ["r0", "r1"]
        for r in readers:
            procs.start(r, [str(BIN / "eo_reader"), pg.conninfo, s, r])

        # The schedule counts rounds (40 records, then 0.3 s), not time, so
        # that a slow machine sees the same run.
        rng = random.Random(23)
        kills, reshards, log = 0, 0, []
        t0 = time.monotonic()
        for rnd in range(ROUNDS):
            self.produce(s, 40)
            t = time.monotonic() - t0
            if rnd == 16:
                self.kncat("split", s, "0")
                reshards += 1
                log.append(f"round {rnd} ({t:4.1f}s): split shardId-000000000000")
            if rnd == 30:
                readers.append("r2")
                procs.start("r2", [str(BIN / "eo_reader"), pg.conninfo, s, "r2"])
                log.append(f"round {rnd} ({t:4.1f}s): reader r2 joins (2 -> 3 readers)")
            if rnd == 43:
                procs.kill("enumerator")
                kills += 1
                log.append(f"round {rnd} ({t:4.1f}s): kill -9 enumerator")
            if rnd == 53:
                kids = self.children(s, "shardId-000000000000")
                self.kncat("merge", s, kids[0], kids[1])
                reshards += 1
                log.append(f"round {rnd} ({t:4.1f}s): merge {kids[0]} {kids[1]}")
            if rnd % KILL_EVERY == KILL_EVERY - 1:
                victim = rng.choice(readers)
                procs.kill(victim)
                kills += 1
                log.append(f"round {rnd} ({t:4.1f}s): kill -9 {victim}")
            procs.check_alive(self)
            time.sleep(0.3)  # why: paces the producer and the schedule

        # Everything put must arrive; a duplicate would add rows past it.
        deadline = time.monotonic() + DRAIN_S
        while int(pg.query("SELECT count(DISTINCT data) FROM eo_records")[0][0]) < self.n:
            procs.check_alive(self)
            self.assertLess(time.monotonic(), deadline, "records missing after the drain")
            time.sleep(0.5)  # why: polling the table while the readers drain
        # why: two more commit rounds of every reader, so that a record
        # read again late would be in the table.
        time.sleep(1.5)
        procs.stop(self)

        rows = pg.query("SELECT data, count(*) FROM eo_records GROUP BY data")
        counts = {int(d): int(c) for d, c in rows}
        lost = [v for v in range(self.n) if v not in counts]
        dups = sum(c - 1 for c in counts.values())
        extra = [v for v in counts if not 0 <= v < self.n]
        total = int(pg.query("SELECT count(*) FROM eo_records")[0][0])
        by_reader = dict(pg.query(
            "SELECT reader, count(*) FROM eo_records GROUP BY reader ORDER BY reader"))
        shards = pg.query(
            "SELECT shard, min(id), max(id) FROM eo_records GROUP BY shard ORDER BY shard")
        finished = pg.query("SELECT count(*) FROM eo_events WHERE kind = 'finished'")[0][0]
        returned = pg.query("SELECT count(*) FROM eo_events WHERE kind = 'returned'")[0][0]
        moves = self.check_handoffs(pg)
        print("\n".join(log))
        print(f"exactly-once chaos on {self.server_cls.__name__}: kills {kills}, "
              f"reshards {reshards}, readers 2 -> 3, records put {self.n}, "
              f"rows {total}, lost {len(lost)}, duplicated {dups}; rows by reader "
              f"{by_reader}; shards {len(shards)}; finished reports {finished}, "
              f"shards handed back {returned}, shards that changed reader {moves}")
        self.assertEqual(lost, [])
        self.assertEqual(dups, 0)
        self.assertEqual(extra, [])
        self.assertEqual(total, self.n)
        self.assertEqual(len(shards), 5)  # 2, the split's 2, the merge's 1
        self.assertEqual(kills, ROUNDS // KILL_EVERY + 1)
        self.assertEqual(set(by_reader), {"r0", "r1", "r2"})
        # Parents before children: a child is assigned only after the
        # transaction that reported its parent finished, so its rows have
        # the greater ids.
        span = {sid: (int(lo), int(hi)) for sid, lo, hi in shards}
        for x in self.shards(s):
            for parent in (x["parent"], x["adjacent_parent"]):
                if parent in span and x["shard"] in span:
                    self.assertLess(span[parent][1], span[x["shard"]][0],
                                    (parent, x["shard"]))

    def check_handoffs(self, pg):
        """A shard changes readers only through a hand-back its reader
        committed: in commit order, its rows change reader at most as
        often as it was handed back."""
        owners = {}
        for shard, reader in pg.query("SELECT shard, reader FROM eo_records ORDER BY id"):
            runs = owners.setdefault(shard, [])
            if not runs or runs[-1] != reader:
                runs.append(reader)
        back = dict(pg.query("SELECT shard, count(*) FROM eo_events"
                             " WHERE kind = 'returned' GROUP BY shard"))
        for shard, runs in owners.items():
            self.assertLessEqual(len(runs) - 1, int(back.get(shard, 0)), (shard, runs))
        return sum(len(runs) - 1 for runs in owners.values())

    def test_file_sink(self):
        """The example without a database, killed between checkpoints."""
        s = self.create(2)
        self.produce(s, 300)
        out = os.path.join(self.dir.name, "out")
        os.mkdir(out)
        argv = [str(BIN / "eo_file_sink"), s, out]
        with subprocess.Popen(argv, env=self.env, stderr=subprocess.PIPE) as p:
            deadline = time.monotonic() + 60
            while not os.path.exists(os.path.join(out, "state")):
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)  # why: waiting for the first checkpoint
            p.kill()
            _, err = p.communicate(timeout=30)
        runkit.check_clean(err, "eo_file_sink killed")
        self.kncat("split", s, "1")
        self.produce(s, 100)
        p = runkit.run(argv, env=self.env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        values = []
        for part in sorted(Path(out).glob("part-*")):
            values += [int(line) for line in part.read_text().splitlines()]
        self.assertEqual(sorted(values), list(range(self.n)))
        self.assertFalse(list(Path(out).glob("*.tmp")))


class Kinesalite(ExactlyOnce, unittest.TestCase):
    server_cls = lab.Kinesalite


class KinesisLocal(ExactlyOnce, unittest.TestCase):
    server_cls = lab.KinesisLocal


if __name__ == "__main__":
    sys.exit(main(sys.modules[__name__]))
