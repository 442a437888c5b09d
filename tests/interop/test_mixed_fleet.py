#!/usr/bin/env python3
"""KCL 2.x workers (the real Java library, tests/lab/java) and `kncat
group` workers in one DynamoDB lease table on dynalite: a rolling
migration from the KCL to kncat and back while records flow, with a split
and a merge on the way and a SIGKILL on each side.

    KCL-1, KCL-2 read the stream (4 shards)
    kn-1 joins; KCL-1 stops (SIGTERM)
    shard 0 splits
    kn-2 joins; KCL-2 is killed (SIGKILL): kncat holds every lease
    the split's children merge
    KCL-3 joins and kn-1 is killed (SIGKILL)
    KCL-4 joins; kn-2 stops (SIGTERM): the KCL holds every lease
    the producer stops; KCL-3 and KCL-4 stop once every record is read

Checked: every record produced is delivered; each delivery of a record
after its first follows one by a killed worker, or by a worker that the
lease was taken from while it ran (balancing: the KCL 2.x steals at once,
and kncat steals from the KCL 2.x, which cannot hand a lease over, so the
loser's records since its last checkpoint come again, and those it reads
until its next renewal fails; counted and printed), never one around a
graceful stop (SIGTERM: both kinds checkpoint what they delivered); within a
shard, each worker's deliveries follow the stream's order; no record of a
child before the last of its parents; every lease item keeps the KCL's
attribute types; the final checkpoints are the shards' last records
(SHARD_END for closed ones).  On kinesis-local, and on kinesalite without
the split and the merge (the KCL 2.x cannot finish a closed shard there).

Run with `make interop` (needs `make peers`), or
`python3 -m pytest -q tests/interop`.  KNCAT overrides build/kncat.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
import unittest
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE_DIR = HERE.parents[1]
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "integration"))
sys.path.insert(0, str(HERE))
import lab  # noqa: E402
from groupkit import (KCL_TYPES, LabServers, Producer, Worker, list_shards,  # noqa: E402
                      is_open, payload, read_stream, run_kncat, scan_table,
                      spread_keys, unique, wait_for)
from peers import KclWorker, create_kcl3_table  # noqa: E402

KNCAT = os.environ.get("KNCAT", str(SOURCE_DIR / "build" / "kncat"))
LEASE_MS = 6000
KN_PROPS = {
    "lease.duration.ms": LEASE_MS,
    "lease.renew.interval.ms": 1500,
    "lease.take.interval.ms": 1000,
    "checkpoint.interval.ms": 500,
    "poll.idle.ms": 200,
    "shard.sync.interval.ms": 2000,
}
KCL_OPTS = {
    "failover-ms": LEASE_MS,
    "checkpoint-ms": 0,          # after every batch
    "idle-ms": 200,
    "shard-sync-ms": 2000,
    "parent-poll-ms": 1000,
}
STEP_TIMEOUT = 120

TMP = Path(tempfile.mkdtemp(prefix="kn-interop-"))
SERVERS = LabServers(TMP)


def setUpModule():
    SERVERS.start("dynalite")


def tearDownModule():
    SERVERS.stop()


# What a worker logs when it finds that a lease it held was taken by
# another while it ran, with the time (time.monotonic()'s clock): the Java
# harness (tests/lab/java) prints CLOCK_MONOTONIC; kncat prints the time of
# day.  A KCL worker's "lease lost" after its "shutdown requested" for the
# same shard is its own graceful stop (the KCL 2.x drops the lease), not a
# loss.
KCL_LINE = re.compile(r"consume: (lease lost|shutdown requested|checkpoint \(.*?\) of) "
                      r"(\S+) at ([0-9.]+)(.*)")
KN_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) WARN consumer \[COORD\] "
                     r"(?:lost the lease of shard ([^ :]+)|shard ([^ :]+): \w+ refused: "
                     r"lease taken by another worker)")


def lease_losses(w) -> list[tuple[float, str]]:
    """(time, shard) of each lease w found taken from it while it ran."""
    out, asked = [], set()
    if isinstance(w, KclWorker):
        for line in w.stderr().splitlines():
            m = KCL_LINE.search(line)
            if not m:
                continue
            what, shard, t = m.group(1), m.group(2), float(m.group(3))
            if what == "shutdown requested":
                asked.add(shard)
            elif what == "lease lost" and shard not in asked:
                out.append((t, shard))
            elif what.startswith("checkpoint") and "doesn't hold the lease" in m.group(4):
                out.append((t, shard))
        return out
    # time of day -> monotonic (the test runs within one day)
    midnight = time.mktime(time.localtime()[:3] + (0, 0, 0, 0, 0, -1))
    offset = time.time() - time.monotonic()
    for line in w.stderr().splitlines():
        m = KN_LINE.search(line)
        if m:
            wall = midnight + int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
            out.append((wall - offset, m.group(4) or m.group(5)))
    return out


class MixedFleetBase:
    server_name = ""
    reshard = True

    @classmethod
    def setUpClass(cls):
        SERVERS.attach(cls, cls.server_name)

    def setUp(self):
        self.failed = True      # until the test's end is reached
        self.stopped: dict[str, float] = {}   # worker id -> time signalled
        self.workers: list[Worker] = []
        self.dir = TMP / self.server_name / self._testMethodName
        self.dir.mkdir(parents=True, exist_ok=True)
        self.env = lab.env_for(kinesis=self.server, dynamodb=self.dynalite)

    def tearDown(self):
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.kill()
            w.wait(10)
        if self.failed:
            for w in self.workers:
                tail = "\n".join(w.stderr().splitlines()[-30:])
                print(f"--- worker {w.wid} exit {w.proc.returncode} stderr "
                      f"tail ({w.err_path}):\n{tail}", file=sys.stderr)

    # -- workers --

    def kcl(self, wid: str, module: str = "kcl2", opts=None) -> KclWorker:
        w = KclWorker(module, self.env, self.stream, self.app, wid,
                      self.server.endpoint, self.dynalite.endpoint,
                      opts={**KCL_OPTS, **(opts or {})}, log_dir=self.dir)
        self.workers.append(w)
        return w

    def kn(self, wid: str, props=None) -> Worker:
        w = Worker(KNCAT, self.env, self.stream, self.app,
                   f"dynamodb:{self.app}", wid, props=props or KN_PROPS,
                   log_dir=self.dir, extra=("-o", "trim_horizon"))
        self.workers.append(w)
        return w

    def owners(self) -> dict[str, str]:
        """Open shard -> lease owner ("" when free)."""
        try:
            table = scan_table(self.ddb, self.app)
        except self.ddb.exceptions.ResourceNotFoundException:
            return {}   # not created yet
        out = {}
        for s in list_shards(self.boto, self.stream):
            if is_open(s):
                it = table.get(s["ShardId"], {})
                out[s["ShardId"]] = it.get("leaseOwner", {}).get("S", "")
        return out

    def delivered_by(self, w: Worker, shard: str, after: float) -> bool:
        return any(r["shard"] == shard and t > after for t, r in w.records())

    def wait_owned(self, what: str, prefix: str, since: float):
        """Every open shard leased by a worker whose id starts with prefix
        and delivering (one of its records read after since)."""
        by = {w.wid: w for w in self.workers}

        def ok():
            o = self.owners()
            return o and all(v.startswith(prefix) and v in by
                             and self.delivered_by(by[v], s, since)
                             for s, v in o.items())
        wait_for(what, ok, STEP_TIMEOUT, lambda: f"owners {self.owners()}")

    def now(self) -> float:
        return time.monotonic()

    def stop(self, w: Worker, sig) -> None:
        """Signals w, keeps the time, waits for its exit: 0 after a SIGTERM
        (3 from a KCL worker: its shutdown future never completed, after
        every processor checkpointed, as seen on kinesis-local)."""
        self.stopped[w.wid] = w.signal(sig)
        rc = w.wait(90)
        if sig == signal.SIGTERM:
            ok = (0, 3) if isinstance(w, KclWorker) else (0,)
            self.assertIn(rc, ok, w.stderr()[-3000:])


    def finish(self, produced, last, killed, steals_ok=True):
        """Waits until every record produced was delivered, stops the last
        workers (SIGTERM) and checks the deliveries."""
        want = {r["i"] for r in produced}

        def missing():
            got = {payload(r)["i"] for w in self.workers for _, r in w.records()}
            return want - got
        wait_for("every record delivered", lambda: not missing(), STEP_TIMEOUT,
                 lambda: f"{len(missing())} of {len(want)} missing")
        for w in last:
            self.stop(w, signal.SIGTERM)
        self.check(want, killed, steals_ok)
        self.failed = False

    def check(self, want: set[int], killed: set[str], steals_ok=True):
        deliveries = defaultdict(list)     # i -> [(time, worker id, shard)]
        reads = defaultdict(list)          # shard -> [(time, worker id)]
        # Kept with the workers' logs (KN_KEEP_LOGS=1): every delivery and
        # every signal, on the test's clock.
        with open(self.dir / "deliveries.tsv", "w") as f:
            for wid, t in self.stopped.items():
                print(f"{t:.3f}\t{wid}\tSIGNAL", file=f)
            for w in self.workers:
                for t, r in w.records():
                    deliveries[payload(r)["i"]].append((t, w.wid, r["shard"]))
                    reads[r["shard"]].append((t, w.wid))
                    print(f"{t:.3f}\t{w.wid}\t{r['shard']}\t{payload(r)['i']}", file=f)

        first = {}                         # (worker id, shard) -> first read
        for s, v in reads.items():
            for t, o in v:
                first[(o, s)] = min(t, first.get((o, s), t))
        lease_s = LEASE_MS / 1000

        losses = {w.wid: lease_losses(w) for w in self.workers}

        def stolen(wid: str, shard: str, t0: float) -> bool:
            """The lease of shard was taken from wid while it ran
            (balancing), not handed over at a stop.  Either wid says so
            itself: it found the lease gone (lease_losses) within a lease
            duration after delivering at t0 -- a loser reads on until its
            next renewal or checkpoint fails, and whether the thief's
            first read comes before or after a SIGTERM that followed is
            chance.  Or the reads show it: before wid was signalled,
            another worker read shard after t0, or before t0 but after wid
            had started on it and less than a lease duration before."""
            if any(s == shard and t0 - 0.5 <= t <= t0 + lease_s
                   for t, s in losses[wid]):
                return True
            end = self.stopped.get(wid, float("inf"))
            start = first.get((wid, shard), float("inf"))
            return any(o != wid and t < end
                       and (t > t0 or (t > t0 - lease_s and t > start))
                       for t, o in reads[shard])

        # Each delivery after a record's first must be explained by the one
        # before it: that reader was killed, or the lease was taken from it
        # while it ran.  (A record can meet both: three deliveries.)
        dups = {i: sorted(d) for i, d in deliveries.items() if len(d) > 1}
        by_kill, by_steal, other, pairs = set(), set(), {}, set()
        for i, d in dups.items():
            for (t, w, shard), (_, w2, _) in zip(d, d[1:]):
                if w in killed:
                    by_kill.add(i)
                elif w != w2 and stolen(w, shard, t):
                    by_steal.add(i)
                    pairs.add((w, w2))
                else:
                    other[i] = [x for _, x, _ in d]
        total = sum(len(d) for d in deliveries.values())
        print(f"\n  {self.server_name}: {len(want)} records produced, {total} "
              f"deliveries; {len(dups)} delivered more than once (most "
              f"{max((len(d) for d in dups.values()), default=1)} times): "
              f"{len(by_kill)} after a SIGKILL, {len(by_steal)} after a lease "
              f"was taken from a live worker (from, to: {sorted(pairs)}), "
              f"{len(other)} otherwise", file=sys.stderr)
        self.assertEqual(set(deliveries), want)

        # within a shard, each worker's deliveries follow the stream's order
        stored = read_stream(self.boto, self.stream)
        pos = {s: {r["SequenceNumber"]: n for n, r in enumerate(v)}
               for s, v in stored.items()}
        for w in self.workers:
            last = {}
            for _, r in w.records():
                n = pos[r["shard"]][r["seq"]]
                self.assertGreater(n, last.get(r["shard"], -1) if w.wid not in killed
                                   else -1, f"{w.wid} went back on {r['shard']}")
                last[r["shard"]] = n
        # no child before the last record of its parents (first deliveries)
        shards = {s["ShardId"]: s for s in list_shards(self.boto, self.stream)}
        first_t = {}
        for w in self.workers:
            for t, r in w.records():
                key = (r["shard"], r["seq"])
                first_t[key] = min(t, first_t.get(key, t))
        per_shard = defaultdict(list)
        for (sid, _), t in first_t.items():
            per_shard[sid].append(t)
        for sid, s in shards.items():
            for p in (s.get("ParentShardId"), s.get("AdjacentParentShardId")):
                if p and per_shard.get(sid) and per_shard.get(p):
                    self.assertLessEqual(max(per_shard[p]), min(per_shard[sid]),
                                         f"{sid} read before its parent {p} ended")
        # the lease items keep the KCL's types; final checkpoints exact
        table = scan_table(self.ddb, self.app)
        for key, item in table.items():
            for name, val in item.items():
                if name in KCL_TYPES:
                    self.assertEqual(list(val), [KCL_TYPES[name]], f"{key}.{name}")
        for sid, s in shards.items():
            if sid not in table:
                continue   # a finished parent's lease, cleaned up
            cp = table[sid]["checkpoint"]["S"]
            if is_open(s):
                self.assertEqual(cp, stored[sid][-1]["SequenceNumber"] if stored[sid]
                                 else cp, sid)
            else:
                self.assertEqual(cp, "SHARD_END", sid)
        self.assertEqual(other, {}, "records delivered twice at a graceful stop")
        if not steals_ok:
            self.assertEqual(sorted(by_steal), [], "delivered twice at a hand-off")


class Rolling:
    """The rolling migration KCL 2.x -> kncat -> KCL 2.x."""

    def test_rolling_migration(self):
        self.stream = unique("mix", "s")
        self.app = unique("mix", "app")
        run_kncat(KNCAT, self.env, "create", self.stream, "--shards", 4)
        prod = Producer(self.boto, self.stream, spread_keys(8, "k"),
                        interval=0.2)
        prod.start()
        killed: set[str] = set()
        try:
            t = self.now()
            k1, k2 = self.kcl("kcl-1"), self.kcl("kcl-2")
            self.wait_owned("the KCL holding every shard", "kcl-", t)

            kn1 = self.kn("kn-1")
            wait_for("kn-1 delivering", lambda: kn1.count() > 0, STEP_TIMEOUT,
                     lambda: f"owners {self.owners()}")
            self.stop(k1, signal.SIGTERM)

            if self.reshard:
                shards = list_shards(self.boto, self.stream)
                s0 = min(s["ShardId"] for s in shards if is_open(s))
                t = self.now()
                run_kncat(KNCAT, self.env, "split", self.stream, s0)
                kids = sorted((s for s in list_shards(self.boto, self.stream)
                               if s.get("ParentShardId") == s0),
                              key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
                self.assertEqual(len(kids), 2)
                wait_for("the split's children read", lambda: all(
                    any(self.delivered_by(w, k["ShardId"], t) for w in self.workers)
                    for k in kids), STEP_TIMEOUT, lambda: f"owners {self.owners()}")

            kn2 = self.kn("kn-2")
            t = self.now()
            self.stop(k2, signal.SIGKILL)
            killed.add(k2.wid)
            self.wait_owned("kncat holding every shard", "kn-", t)

            if self.reshard:
                t = self.now()
                run_kncat(KNCAT, self.env, "merge", self.stream,
                          kids[0]["ShardId"], kids[1]["ShardId"])
                merged = [s["ShardId"] for s in list_shards(self.boto, self.stream)
                          if s.get("ParentShardId") in (kids[0]["ShardId"],
                                                        kids[1]["ShardId"])
                          and s.get("AdjacentParentShardId")]
                self.assertEqual(len(merged), 1)
                wait_for("the merged shard read", lambda: any(
                    self.delivered_by(w, merged[0], t) for w in self.workers),
                    STEP_TIMEOUT, lambda: f"owners {self.owners()}")

            # The KCL 2.x steals only from a worker above its target
            # (ceil(leases / workers)): joining two kncat workers that hold
            # two leases each, it would wait forever.  kn-1 dies instead.
            k3 = self.kcl("kcl-3")
            self.stop(kn1, signal.SIGKILL)
            killed.add(kn1.wid)
            wait_for("kcl-3 delivering", lambda: k3.count() > 0, STEP_TIMEOUT,
                     lambda: f"owners {self.owners()}")
            k4 = self.kcl("kcl-4")
            wait_for("kcl-4 delivering", lambda: k4.count() > 0, STEP_TIMEOUT,
                     lambda: f"owners {self.owners()}")
            t = self.now()
            self.stop(kn2, signal.SIGTERM)
            self.wait_owned("the KCL holding every shard again", "kcl-", t)
        finally:
            produced = prod.finish()

        self.finish(produced, (k3, k4), killed)

class Kcl3Handoffs:
    """The KCL 3.x (3.x mode) and kncat in one table: kncat joins a KCL
    3.x worker and asks for leases (checkpointOwner: the KCL 3.x
    checkpoints and hands them over), a second KCL 3.x worker joins, kncat
    stops (SIGTERM, its leases released) and the KCL 3.x's leader assigns
    them.  Nothing is killed: nothing may be delivered twice."""

    def test_kcl3_handoffs(self):
        self.stream = unique("mix3", "s")
        self.app = unique("mix3", "app")
        run_kncat(KNCAT, self.env, "create", self.stream, "--shards", 4)
        create_kcl3_table(self.ddb, self.app)
        prod = Producer(self.boto, self.stream, spread_keys(8, "k"),
                        interval=0.2)
        prod.start()
        v3 = {"client-version": "3x"}
        try:
            t = self.now()
            a = self.kcl("kcl3-1", "kcl3", v3)
            self.wait_owned("the KCL 3.x holding every shard", "kcl3-", t)
            kn1 = self.kn("kn-1", props=KN_PROPS)
            wait_for("kn-1 delivering", lambda: kn1.count() > 0, STEP_TIMEOUT,
                     lambda: f"owners {self.owners()}")
            # (Whether the KCL 3.x's leader moves a lease to the second
            # KCL worker before kn-1 stops depends on its throughput
            # figures: not waited for.)
            b = self.kcl("kcl3-2", "kcl3", v3)
            t = self.now()
            self.stop(kn1, signal.SIGTERM)
            self.wait_owned("the KCL 3.x holding every shard again", "kcl3-", t)
        finally:
            produced = prod.finish()
        self.finish(produced, (a, b), set(), steals_ok=False)


class StealFromKcl2:
    """kncat (its default hand-off) joins a KCL 2.x worker holding every
    lease.  The KCL 2.x knows nothing of checkpointOwner and would never
    pass a lease on: kncat steals its share, as the KCL 2.x steals,
    instead of asking for it and leaving the shard unread for
    lease.handoff.timeout.ms (30 s).  The time from kncat's start to its
    first record is printed."""

    def test_steal_from_kcl2(self):
        self.stream = unique("steal", "s")
        self.app = unique("steal", "app")
        run_kncat(KNCAT, self.env, "create", self.stream, "--shards", 4)
        prod = Producer(self.boto, self.stream, spread_keys(8, "k"),
                        interval=0.2)
        prod.start()
        try:
            t = self.now()
            k1 = self.kcl("kcl-1")
            self.wait_owned("the KCL holding every shard", "kcl-", t)
            kn1 = self.kn("kn-1", props=KN_PROPS)
            wait_for("kn-1 delivering", lambda: kn1.count() > 0, STEP_TIMEOUT,
                     lambda: f"owners {self.owners()}")
            first = kn1.records()[0][0] - kn1.started
        finally:
            produced = prod.finish()
        err = kn1.stderr()
        print(f"\n  {self.server_name}: kn-1's first record {first:.1f} s after "
              f"it started; {err.count('stole shard')} leases stolen from the "
              f"KCL 2.x", file=sys.stderr)
        self.assertIn("stole shard", err)
        self.assertNotIn("asked kcl-1 for shard", err)
        self.assertNotIn("did not hand it over", err)
        self.finish(produced, (k1, kn1), set())


class OnKinesalite(Rolling, MixedFleetBase, unittest.TestCase):
    """No split or merge: the KCL 2.x never finishes a closed shard on
    kinesalite (its GetRecords end has no ChildShards; the KCL's polling
    stalls and the shard is never checkpointed SHARD_END), so the
    children would never be read by anyone (tests/lab/README.md)."""
    server_name = "kinesalite"
    reshard = False


class OnKinesisLocal(Rolling, MixedFleetBase, unittest.TestCase):
    server_name = "kinesis-local"


class Kcl3OnKinesalite(Kcl3Handoffs, MixedFleetBase, unittest.TestCase):
    server_name = "kinesalite"


class StealFromKcl2OnKinesalite(StealFromKcl2, MixedFleetBase, unittest.TestCase):
    server_name = "kinesalite"


if __name__ == "__main__":
    unittest.main()
