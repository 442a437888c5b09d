#!/usr/bin/env python3
"""The coordinated consumer across splits whose lease table is not the
simple case: one `kncat group` worker, on kinesis-local (which answers
GetRecords with ChildShards) and on kinesalite (which does not).

- A finished parent whose own parent keeps its lease: shard G splits into
  P and P2, P into C1 and C2; P2 never gets a record, so it never starts
  and G's lease stays.  Once C1 and C2 have started, P's lease may be
  cleaned up, but P must never be created again (and read again) while
  the worker runs on: every record is delivered exactly once, and P's
  lease, once gone, never comes back.  (Cleanup knows a parent's
  children from ChildShards, so on kinesalite P's lease is only removed
  when the children are learnt another way; the test runs there too.)
- A lease table with only some of the shards (as a KCL application whose
  stream was resharded might leave it): a KCL 2.x table written with
  boto3 holds only shard 1's lease; shard 0 is closed with children 3 and
  4.  A worker with -o trim_horizon reads every record of 0, 2, 3 and 4
  and those of 1 after its checkpoint, each once, parents before children.

Environment: KNCAT (the binary), KN_SOURCE_DIR (the source tree; tests/lab
is imported from there).  Prints "N passed, M failed" and exits non-zero
when a test failed.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import threading
import unittest
from collections import Counter, defaultdict
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
KNCAT = os.environ.get("KNCAT", str(SOURCE_DIR / "build" / "kncat"))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from groupkit import (LabServers, Producer, Worker, create_kcl_table, keys_for,  # noqa: E402
                      keys_in, leases_json, list_shards, payload, read_stream,
                      run_kncat, scan_table, test_failed, unique,
                      wait_for)

# Short intervals, so that many shard syncs, take rounds and cleanups
# happen while a test runs.
PROPS = {
    "lease.duration.ms": 4000,
    "lease.renew.interval.ms": 1000,
    "lease.take.interval.ms": 500,
    "checkpoint.interval.ms": 500,
    "poll.idle.ms": 200,
    "shard.sync.interval.ms": 1000,
}
# Shard syncs the first test lets pass after every record arrived.
SYNCS_AFTER = 6
# Generous: the machine is shared and the servers are slow.
DELIVERY_TIMEOUT = 60

TOP = (1 << 128) - 1
TMP = Path(tempfile.mkdtemp(prefix="kn-reshard-"))
SERVERS = LabServers(TMP)


def setUpModule():
    SERVERS.start("dynalite")


def tearDownModule():
    SERVERS.stop()


class LeaseWatch(threading.Thread):
    """Samples the lease keys of a SQLite lease table every 0.2 s and keeps
    each shard's history of present/absent changes."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path = path
        self.history: dict[str, list[bool]] = defaultdict(list)
        self.samples = 0
        self.stop_ev = threading.Event()

    def read(self) -> set[str]:
        with sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                             timeout=1) as c:
            return {k for (k,) in c.execute("SELECT leaseKey FROM leases")}

    def run(self):
        while not self.stop_ev.wait(0.2):
            try:
                keys = self.read()
            except sqlite3.Error:  # not made yet, or busy: sample later
                continue
            self.samples += 1
            for sid in keys | set(self.history):
                h = self.history[sid]
                if not h or h[-1] != (sid in keys):
                    h.append(sid in keys)

    def finish(self):
        self.stop_ev.set()
        self.join(10)

    def created_again(self, sid: str) -> bool:
        """sid's lease was seen, then gone, then seen again."""
        h = self.history.get(sid, [])
        first = h.index(True) if True in h else len(h)
        return h[first:].count(True) > 1


class ReshardBase:
    """Mixed into one TestCase per Kinesis server."""

    server_name = ""

    @classmethod
    def setUpClass(cls):
        SERVERS.attach(cls, cls.server_name)

    def setUp(self):
        self.workers: list[Worker] = []
        self.dir = TMP / self.id().rsplit(".", 2)[-2] / self._testMethodName
        self.dir.mkdir(parents=True, exist_ok=True)

    def tearDown(self):
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.kill()
            w.wait(10)
        if test_failed(self):
            for w in self.workers:
                tail = "\n".join(w.stderr().splitlines()[-40:])
                print(f"--- worker {w.wid} exit {w.proc.returncode} stderr "
                      f"tail ({w.err_path}):\n{tail}", file=sys.stderr)

    def env(self, kinesis=None):
        return lab.env_for(kinesis=kinesis or self.server, dynamodb=self.dynalite)

    def kncat(self, *args, **kw):
        return run_kncat(KNCAT, self.env(), *args, **kw)

    def start_worker(self, env, stream, app, store, extra=()):
        w = Worker(KNCAT, env, stream, app, store, "kn-1", props=PROPS,
                   log_dir=self.dir, extra=extra)
        self.workers.append(w)
        return w

    def shards(self, stream) -> dict[str, dict]:
        return {s["ShardId"]: s for s in list_shards(self.boto, stream)}

    def split(self, stream, sid, at) -> tuple[str, str]:
        """Splits sid at hash key `at`; returns (lower child, upper child)."""
        self.kncat("split", stream, sid, "--at", at)
        kids = [s for s in self.shards(stream).values()
                if s.get("ParentShardId") == sid]
        self.assertEqual(len(kids), 2, kids)
        kids.sort(key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
        return kids[0]["ShardId"], kids[1]["ShardId"]

    def check_order(self, w: Worker, parents: dict[str, set[str]]):
        """Within each key, records arrive in the order they were produced;
        no record of a shard arrives before the last one of its parents."""
        problems = []
        last = {}
        for _, r in w.records():
            d = payload(r)
            if d["n"] <= last.get(d["k"], -1):
                problems.append(f"key {d['k']}: n {d['n']} after {last[d['k']]}")
            last[d["k"]] = max(d["n"], last.get(d["k"], -1))
        order = [r["shard"] for _, r in w.records()]
        for sid, ps in parents.items():
            if sid not in order:
                continue
            first = order.index(sid)
            for p in ps:
                if p in order[first:]:
                    problems.append(f"{p} delivered after its child {sid} began")
        self.assertEqual(problems[:10], [], f"{len(problems)} order problems")

    # -- a finished parent under a parent that keeps its lease --

    def test_finished_parent_not_read_again(self):
        stream, app = unique("rsh", "reread"), unique("rsh", "rereadapp")
        self.kncat("create", stream, "--shards", 1)
        (g,) = self.shards(stream)
        half, quarter = 1 << 127, 1 << 126
        # keys of C1, of C2 (both also of P and G) and of P2 (G only)
        k1 = keys_in(0, quarter - 1, 2, "c1-")
        k2 = keys_in(quarter, half - 1, 2, "c2-")
        kz = keys_in(half, TOP, 2, "p2-")
        prod = Producer(self.boto, stream, k1 + k2 + kz)
        for _ in range(4):
            prod.put_round()
        p, p2 = self.split(stream, g, half)
        prod.keys = k1 + k2   # P2 gets nothing: it never starts
        for _ in range(4):
            prod.put_round()
        c1, c2 = self.split(stream, p, quarter)
        for _ in range(4):
            prod.put_round()
        stored = read_stream(self.boto, stream)
        self.assertEqual({s: len(v) for s, v in stored.items()},
                         {g: 24, p: 16, p2: 0, c1: 8, c2: 8})
        produced = {r["i"] for r in prod.produced}

        db = self.dir / "leases.db"
        with FaultProxy(self.server) as proxy:
            w = self.start_worker(self.env(proxy.endpoint), stream, app,
                                  f"sqlite:{db}")
            watch = LeaseWatch(db)
            watch.start()
            try:
                wait_for("every record", lambda: produced <= {
                    payload(r)["i"] for _, r in w.records()}, DELIVERY_TIMEOUT,
                    lambda: f"{len(produced - {payload(r)['i'] for _, r in w.records()})} "
                            f"of {len(produced)} missing")
                # Then several shard syncs with nothing new: a shard finished
                # before must not come back in any of them.
                base = len(proxy.requests("ListShards"))
                try:
                    wait_for(f"{SYNCS_AFTER} shard syncs", lambda: len(
                        proxy.requests("ListShards")) >= base + SYNCS_AFTER, 30)
                except AssertionError:
                    pass  # fewer syncs: nothing more to see, not a failure
                syncs = len(proxy.requests("ListShards")) - base
            finally:
                watch.finish()
            # stopped: the final checkpoints are made, the leases released
            self.assertEqual(w.stop(), 0, w.stderr())
        rows = {r["shard"]: r for r in leases_json(KNCAT, self.env(), app,
                                                   f"sqlite:{db}")}

        recs = [r for _, r in w.records()]
        dup_ids = Counter(payload(r)["i"] for r in recs)
        dups = Counter(r["shard"] for r in recs if dup_ids[payload(r)["i"]] > 1)
        log = w.stderr()
        created_p = log.count(f"lease created for shard {p} ")
        print(f"\n  {self.server_name}: {len(produced)} records produced, "
              f"{len(recs)} delivered; {syncs} shard syncs after the last "
              f"new record; P={p[-3:]}'s lease seen {watch.history.get(p)} "
              f"in {watch.samples} samples, created {created_p} times "
              f"(log)", file=sys.stderr)
        problems = []
        if watch.created_again(p):
            problems.append(f"the lease of {p} was removed and created again")
        if created_p > 1:
            lines = [x for x in log.splitlines()
                     if p in x and "[COORD]" in x][:12]
            problems.append(f"the log says the lease of {p} was created "
                            f"{created_p} times:\n" + "\n".join(lines))
        if dups:
            problems.append(f"{sum(dups.values())} deliveries of "
                            f"{sum(1 for n in dup_ids.values() if n > 1)} "
                            f"records delivered more than once, by shard: "
                            f"{dict(dups)}")
        if problems:
            self.fail("\n".join(problems))
        self.assertEqual(sorted(dup_ids), sorted(produced))
        self.check_order(w, {p: {g}, p2: {g}, c1: {p}, c2: {p}})
        # the table afterwards: G stays (P2 never started), P is finished
        # or gone, the open shards checkpointed at their last record
        self.assertEqual(rows[g]["checkpoint"], "SHARD_END")
        self.assertEqual(rows[p2]["checkpoint"], "TRIM_HORIZON")
        if p in rows:
            self.assertEqual(rows[p]["checkpoint"], "SHARD_END")
        for sid in (c1, c2):
            self.assertEqual(rows[sid]["checkpoint"], stored[sid][-1]["SequenceNumber"])

    # -- a lease table that holds some of the shards only --

    def test_partial_kcl_table(self):
        stream, app = unique("rsh", "partial"), unique("rsh", "partialapp")
        self.kncat("create", stream, "--shards", 3)
        shards = self.shards(stream)
        s0, s1, s2 = sorted(shards)
        r0 = shards[s0]["HashKeyRange"]
        mid = (int(r0["StartingHashKey"]) + int(r0["EndingHashKey"])) // 2 + 1
        # keys of shard 0 that go to either child after the split
        ka = keys_in(int(r0["StartingHashKey"]), mid - 1, 2, "a-")
        kb = keys_in(mid, int(r0["EndingHashKey"]), 2, "b-")
        k1 = keys_for(shards[s1], 2, "s1-")
        k2 = keys_for(shards[s2], 2, "s2-")
        prod = Producer(self.boto, stream, ka + kb + k1 + k2)
        for _ in range(10):
            prod.put_round()
        c3, c4 = self.split(stream, s0, mid)
        for _ in range(10):
            prod.put_round()
        stored = read_stream(self.boto, stream)
        seqs = {s: [r["SequenceNumber"] for r in v] for s, v in stored.items()}
        self.assertEqual({s: len(v) for s, v in seqs.items()},
                         {s0: 40, s1: 40, s2: 40, c3: 20, c4: 20})

        # Shard 1's lease only, checkpointed at its 10th record, held by a
        # KCL worker that is gone.
        create_kcl_table(self.ddb, app)
        h1 = shards[s1]["HashKeyRange"]
        self.ddb.put_item(TableName=app, Item={
            "leaseKey": {"S": s1}, "leaseOwner": {"S": "kcl-worker-gone"},
            "leaseCounter": {"N": "7"},
            "ownerSwitchesSinceCheckpoint": {"N": "0"},
            "checkpoint": {"S": seqs[s1][9]},
            "checkpointSubSequenceNumber": {"N": "0"},
            "startingHashKey": {"S": h1["StartingHashKey"]},
            "endingHashKey": {"S": h1["EndingHashKey"]}})

        want = {s0: seqs[s0], s1: seqs[s1][10:], s2: seqs[s2],
                c3: seqs[c3], c4: seqs[c4]}
        w = self.start_worker(self.env(), stream, app, f"dynamodb:{app}",
                              extra=("-o", "trim_horizon"))

        def got():
            out = defaultdict(list)
            for _, r in w.records():
                out[r["shard"]].append(r["seq"])
            return out

        def short():
            g = got()
            return ", ".join(f"{s}: {len(g[s])} of {len(v)}"
                             for s, v in sorted(want.items()))

        def done():
            g = got()
            return all(len(g[s]) >= len(v) for s, v in want.items())

        try:
            wait_for("every record after the table's checkpoints", done,
                     DELIVERY_TIMEOUT, short)
        finally:
            missing = sum(len(v) for v in want.values()) - sum(
                min(len(got()[s]), len(v)) for s, v in want.items())
            print(f"\n  {self.server_name}: {sum(len(v) for v in seqs.values())} "
                  f"records stored, {sum(len(v) for v in want.values())} wanted, "
                  f"{missing} not delivered ({short()})", file=sys.stderr)
        # Then until the open shards are checkpointed at their last
        # record: anything read twice would show by then.
        last = {s: seqs[s][-1] for s in (s1, s2, c3, c4)}
        wait_for("the final checkpoints", lambda: all(
            scan_table(self.ddb, app).get(s, {}).get("checkpoint") == {"S": q}
            for s, q in last.items()), DELIVERY_TIMEOUT,
            lambda: {s: it.get("checkpoint") for s, it in
                     scan_table(self.ddb, app).items()})
        self.assertEqual(w.stop(), 0, w.stderr())
        g = got()
        self.assertEqual(set(g) - set(want), set(), "shards not wanted were read")
        for s, v in want.items():
            self.assertEqual(g[s], v, f"{s}: not its records once each, in order")
        self.check_order(w, {c3: {s0}, c4: {s0}})


class KinesisLocal(ReshardBase, unittest.TestCase):
    server_name = "kinesis-local"


class Kinesalite(ReshardBase, unittest.TestCase):
    server_name = "kinesalite"


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
