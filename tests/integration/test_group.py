#!/usr/bin/env python3
"""The coordinated consumer end to end: `kncat group` workers as separate
processes sharing a stream through a lease table.

- Chaos, on kinesalite and kinesis-local, with a SQLite file and with a
  DynamoDB table (dynalite): three workers on a 4-shard stream, records
  produced throughout, a split and a merge mid-run (of a child of that
  split when it can: a shard closed soon after it opened), one worker killed
  (SIGKILL) and one stopped (SIGTERM).  Nothing is lost; every worker
  keeps each key's order, parents before children; the only duplicates
  are records the killed worker had delivered but not checkpointed; the
  shards of the stopped and of the killed worker are taken over (how
  soon is printed, and measured by bench/bench_failover.py: a test on a
  shared machine asserts no time); `kncat leases` (table and -J) shows every shard
  finished or held afterwards, SHARD_END on closed parents (or their
  lease cleaned up once the children started), children with their
  parents.
- KCL compatibility (dynalite): a table written with boto3 as KCL 2.x/3.x
  write it is continued from exactly its checkpoints (a SHARD_END parent
  is not read again, its children are, a pending checkpoint with state,
  KCL 3.x attributes kept); items written by the library have the KCL's
  attribute names and types; a checkpoint inside an aggregated record
  resumes after that sub-record.
- Faults: a throttling or failing DynamoDB (fault proxy) and a SQLite file
  locked by another process: held shards go on being read for a bounded
  grace period, no checkpoint is lost or moved back, nothing crashes (the
  DynamoDB case also with enhanced fan-out on kinesis-local); throttled
  GetRecords: back-off, nothing lost.
- A worker restarted under its id takes its leases back at once; consume
  -e and group -e finish after a stalled reader.

Environment: KNCAT (the binary), KN_SOURCE_DIR (the source tree; tests/lab
is imported from there).  Prints "N passed, M failed" and exits non-zero
when a test failed.
"""

from __future__ import annotations

import json
from collections import Counter
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from collections import defaultdict
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
KNCAT = os.environ.get("KNCAT", str(SOURCE_DIR / "build" / "kncat"))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from groupkit import (LabServers, KCL_TYPES, Producer, Worker, create_kcl_table,  # noqa: E402
                      is_open, keys_for, leases_json, list_shards, payload,
                      read_stream, run_kncat, scan_table, spread_keys,
                      test_failed, wait_for)
import groupkit  # noqa: E402
import runkit  # noqa: E402

# Short leases keep the suite quick; the take-over bounds below follow
# from them.
DURATION_MS = 4000
TAKE_MS = 1000
PROPS = {
    "lease.duration.ms": DURATION_MS,
    "lease.renew.interval.ms": 1000,
    "lease.take.interval.ms": TAKE_MS,
    "checkpoint.interval.ms": 1000,
    "poll.idle.ms": 200,
    "shard.sync.interval.ms": 5000,
}
# How long the chaos test waits for a take-over before it calls it never
# done.  What is expected (the lease duration and a take interval after a
# kill, a take interval after a stop) is printed, not asserted: the
# machine is shared, and bench/bench_failover.py measures the times.
KILL_EXPECTED = (DURATION_MS + TAKE_MS) / 1000
TERM_EXPECTED = TAKE_MS / 1000
TAKEOVER_WAIT = 60.0


TMP = Path(tempfile.mkdtemp(prefix="kn-group-"))
SERVERS = LabServers(TMP)


def setUpModule():
    SERVERS.start("dynalite")


def tearDownModule():
    SERVERS.stop()


def unique(what: str) -> str:
    return groupkit.unique("grp", what)


def kncat(env, *args, ok=True, timeout=120, input=None):
    return run_kncat(KNCAT, env, *args, ok=ok, timeout=timeout, input=input)


def seqkey(rec: dict) -> tuple[int, int]:
    return int(rec["seq"]), int(rec.get("subseq", 0))


class GroupBase:
    """Mixed into one TestCase per Kinesis server."""

    server_name = ""
    # the producer: keys per round, seconds between rounds
    keys = 32
    interval = 0.1
    warm_rounds = 10

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
                tail = "\n".join(w.stderr().splitlines()[-25:])
                print(f"--- worker {w.wid} exit {w.proc.returncode} stderr "
                      f"tail:\n{tail}", file=sys.stderr)
        else:
            for w in self.workers:
                w.check_clean()

    # -- helpers --

    def env(self, dynamodb=None):
        return lab.env_for(kinesis=self.server,
                           dynamodb=dynamodb or self.dynalite)

    def store(self, kind: str, app: str) -> str:
        if kind == "sqlite":
            return f"sqlite:{self.dir / (app + '.db')}"
        return f"dynamodb:{app}"

    def start_worker(self, env, stream, app, store, wid, props=None,
                     extra=()):
        w = Worker(KNCAT, env, stream, app, store, wid,
                   props=PROPS if props is None else props,
                   log_dir=self.dir, extra=extra)
        self.workers.append(w)
        return w

    def wait_for(self, what, cond, timeout, detail=None):
        return wait_for(what, cond, timeout, detail)

    def delivered_ids(self, workers) -> set:
        got = set()
        for w in workers:
            for _, r in w.records():
                got.add(payload(r)["i"])
        return got

    def wait_balanced(self, env, app, store, stream, workers, stable=3.0,
                      timeout=60):
        """Until every open shard's lease is held, every worker holds one,
        and nobody took a lease for `stable` seconds."""
        last, since = None, time.monotonic()
        deadline = time.monotonic() + timeout
        wids = {w.wid for w in workers}
        while True:
            open_ids = {s["ShardId"] for s in list_shards(self.boto, stream)
                        if is_open(s)}
            try:
                rows = leases_json(KNCAT, env, app, store)
            except RuntimeError:  # the first worker has not made it yet
                rows = []
            owners = {r["shard"]: r["owner"] for r in rows
                      if r["shard"] in open_ids}
            ok = (set(owners) == open_ids and wids == set(owners.values()))
            if ok and owners == last:
                if time.monotonic() - since >= stable:
                    return owners
            else:
                last, since = (owners if ok else None), time.monotonic()
            if time.monotonic() > deadline:
                self.fail(f"the group did not balance: {owners}")
            time.sleep(0.5)

    def wait_takeover(self, shards, others, t0, bound):
        """Seconds from t0 until each shard's first record delivered by one
        of `others` after t0 (None: never within bound + 10 s)."""
        took = {}
        deadline = t0 + bound + 10
        while True:
            for sid in shards:
                if sid in took:
                    continue
                for w in others:
                    for t, r in w.records():
                        if t > t0 and r["shard"] == sid:
                            took[sid] = min(took.get(sid, 1e9), t - t0)
                            break
            if len(took) == len(shards) or time.monotonic() > deadline:
                return {sid: took.get(sid) for sid in shards}
            time.sleep(0.1)

    def leases_table(self, env, app, store):
        """`kncat leases` without -J, parsed; checked against -J."""
        p = kncat(env, "leases", app, "--leases", store)
        lines = p.stdout.decode().splitlines()
        self.assertRegex(lines[0], r"^SHARD +OWNER +COUNTER +CHECKPOINT +SUBSEQ +PARENTS$")
        rows = {}
        for line in lines[1:]:
            if not line:  # the membership follows
                break
            f = line.split()
            self.assertEqual(len(f), 6, line)
            rows[f[0]] = f
        return rows

    def check_leases(self, env, app, store, stream, last_seq, owner):
        """The lease table after a run: every shard finished or held (by
        `owner`; None: free), SHARD_END on closed parents or their lease
        cleaned up, open shards checkpointed at their last record,
        children with their parents; table and -J agree."""
        shards = {s["ShardId"]: s for s in list_shards(self.boto, stream)}
        rows = {r["shard"]: r for r in leases_json(KNCAT, env, app, store)}
        table = self.leases_table(env, app, store)
        self.assertEqual(set(table), set(rows))
        for sid, r in rows.items():
            t = table[sid]
            self.assertEqual(t[1], r["owner"] or "-", sid)
            if owner is None:
                self.assertEqual(int(t[2]), r["counter"], sid)
            else:
                # a live owner renews between the two listings
                self.assertGreaterEqual(int(t[2]), r["counter"], sid)
            self.assertEqual(t[3], r["checkpoint"] or "-", sid)
            self.assertEqual(int(t[4]), r["subseq"], sid)
            self.assertEqual(t[5], ",".join(r["parents"]) or "-", sid)
        self.assertLessEqual(set(rows), set(shards), "leases of unknown shards")
        for sid, s in shards.items():
            parents = {s.get("ParentShardId"), s.get("AdjacentParentShardId")}
            parents.discard(None)
            if sid not in rows:
                # only a finished parent's lease may be cleaned up, once
                # its children have started; a child that is itself
                # closed may be gone too (a split child merged again),
                # and is checked in its own turn
                self.assertFalse(is_open(s), f"open shard {sid} has no lease")
                kids = [k for k, x in shards.items()
                        if sid in (x.get("ParentShardId"),
                                   x.get("AdjacentParentShardId"))]
                self.assertTrue(kids, sid)
                for k in kids:
                    if k not in rows:
                        self.assertFalse(is_open(shards[k]),
                                         f"{sid} cleaned up, open child {k} has no lease")
                        continue
                    self.assertNotEqual(rows[k]["checkpoint"], "TRIM_HORIZON", k)
                continue
            r = rows[sid]
            if parents:
                self.assertEqual(set(r["parents"]), parents, sid)
            if not is_open(s):
                self.assertEqual(r["checkpoint"], "SHARD_END", sid)
                self.assertIsNone(r["owner"], sid)
                continue
            self.assertEqual(r["owner"], owner, sid)
            if sid in last_seq:
                self.assertEqual(r["checkpoint"], last_seq[sid], sid)
                self.assertEqual(r["subseq"], 0, sid)
        return rows

    def leases_settled(self, env, app, store, stream, last_seq, owner):
        try:
            self.check_leases(env, app, store, stream, last_seq, owner)
            return True
        except AssertionError as e:
            self.unsettled = str(e)
            return False

    # -- chaos --

    def chaos(self, store_kind):
        stream, app = unique("chaos"), unique("app")
        env = self.env()
        store = self.store(store_kind, app)
        kncat(env, "create", stream, "--shards", 4)
        warm = Producer(self.boto, stream, spread_keys(8, "w"), start=0)
        for r in range(self.warm_rounds):
            warm.put_round()
            if r == self.warm_rounds // 2:
                # A first split before the group starts: 5 open shards, held
                # 2, 2 and 1 by 3 workers.  The run below then splits a
                # shard of a worker holding two and merges shards of two
                # workers holding two each, so no worker is ever left
                # without a lease: such a worker is invisible to the others
                # (as in the KCL 2.x) and gets work only by stealing, which
                # re-delivers records.
                kncat(env, "split", stream, "shardId-000000000003")
        workers = [self.start_worker(env, stream, app, store, f"w{k}")
                   for k in (1, 2, 3)]
        self.wait_balanced(env, app, store, stream, workers)
        want = {r["i"] for r in warm.produced}
        self.wait_for("the warm-up records", lambda: want <= self.delivered_ids(workers), 60)

        # The measured run.
        prod = Producer(self.boto, stream, spread_keys(self.keys, "m"),
                        interval=self.interval, start=1_000_000)
        prod.start()
        try:
            time.sleep(2)
            opens = self.open_by_hash(stream)
            owners = self.wait_balanced(env, app, store, stream, workers, stable=0)
            held = defaultdict(int)
            for o in owners.values():
                held[o] += 1
            busy = [x for x in opens if held[owners[x["ShardId"]]] >= 2]
            self.assertTrue(busy, owners)
            kncat(env, "split", stream, busy[0]["ShardId"])
            owners = self.wait_balanced(env, app, store, stream, workers, stable=2)
            # merge two neighbours of two workers that hold two or more
            opens = self.open_by_hash(stream)
            held = defaultdict(int)
            for o in owners.values():
                held[o] += 1
            pairs = [(a, b) for a, b in zip(opens, opens[1:])
                     if int(a["HashKeyRange"]["EndingHashKey"]) + 1 ==
                     int(b["HashKeyRange"]["StartingHashKey"])
                     and owners[a["ShardId"]] != owners[b["ShardId"]]
                     and held[owners[a["ShardId"]]] >= 2
                     and held[owners[b["ShardId"]]] >= 2]
            self.assertTrue(pairs, owners)
            # a pair with a child of the split when there is one: a shard
            # closed again soon after it opened, with a grandparent
            kids = {s["ShardId"] for s in opens if s.get("ParentShardId") ==
                    busy[0]["ShardId"]}
            a, b = next((p for p in pairs if {p[0]["ShardId"], p[1]["ShardId"]} & kids),
                        pairs[len(pairs) // 2])
            kncat(env, "merge", stream, a["ShardId"], b["ShardId"])
            merged = f"split {busy[0]['ShardId'][-3:]}, merged {a['ShardId'][-3:]}+{b['ShardId'][-3:]}"
            self.wait_balanced(env, app, store, stream, workers, stable=2)

            # SIGKILL the worker holding the most open shards.
            killed, kill_snap, killed_shards, t_kill = self.signal_busiest(
                env, app, store, stream, workers, signal.SIGKILL)
            self.assertEqual(killed.wait(30), -signal.SIGKILL)
            others = [w for w in workers if w is not killed]
            kill_takeover = self.wait_takeover(killed_shards, others, t_kill,
                                               TAKEOVER_WAIT)
            time.sleep(2)
            # SIGTERM another one.
            stopped, _, stopped_shards, t_term = self.signal_busiest(
                env, app, store, stream, others, signal.SIGTERM)
            rc = stopped.wait(30)
            self.assertEqual(rc, 0, stopped.stderr())
            survivor = [w for w in others if w is not stopped][0]
            term_takeover = self.wait_takeover(stopped_shards, [survivor],
                                               t_term, TAKEOVER_WAIT)
            time.sleep(2)
        finally:
            produced = prod.finish()
        print(f"\n  {self.server_name}/{store_kind}: {len(produced)} records, {merged}, "
              f"kill take-over {fmt(kill_takeover)} (expected about {KILL_EXPECTED:.0f} s), "
              f"stop hand-over {fmt(term_takeover)} (expected about {TERM_EXPECTED:.0f} s)",
              file=sys.stderr)
        for sid, dt in kill_takeover.items():
            self.assertIsNotNone(dt, f"{sid} of the killed worker never taken over")
        for sid, dt in term_takeover.items():
            self.assertIsNotNone(dt, f"{sid} of the stopped worker never taken over")

        # Everything arrives.
        want = {r["i"] for r in produced + warm.produced}
        self.wait_for("every record", lambda: want <= self.delivered_ids(workers), 120)
        stored = read_stream(self.boto, stream)
        last_seq = {sid: max((r["SequenceNumber"] for r in recs), key=int)
                    for sid, recs in stored.items() if recs}
        self.wait_for("the final lease table", lambda: self.leases_settled(
            env, app, store, stream, last_seq, survivor.wid), 30,
            lambda: self.unsettled)
        self.assertEqual(survivor.stop(), 0, survivor.stderr())
        self.check_leases(env, app, store, stream, last_seq, None)

        self.check_delivery(workers, stored, killed, kill_snap)
        for w in workers:
            self.assertEqual(w.bad_lines, 0, w.wid)
            self.assertNotRegex(w.stderr(), r"ERROR|assert", w.wid)
            w.check_clean()

    def open_by_hash(self, stream):
        return sorted((s for s in list_shards(self.boto, stream) if is_open(s)),
                      key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))

    def signal_busiest(self, env, app, store, stream, workers, sig):
        open_ids = {s["ShardId"] for s in list_shards(self.boto, stream) if is_open(s)}
        snap = leases_json(KNCAT, env, app, store)
        held = defaultdict(list)
        for r in snap:
            if r["shard"] in open_ids and r["owner"]:
                held[r["owner"]].append(r["shard"])
        w = max(workers, key=lambda w: len(held[w.wid]))
        self.assertTrue(held[w.wid], f"no worker holds an open shard: {snap}")
        t = w.signal(sig)
        return w, {r["shard"]: r for r in snap}, held[w.wid], t

    def check_delivery(self, workers, stored, killed, kill_snap):
        # every stored record delivered
        ids = {}
        for sid, recs in stored.items():
            for r in recs:
                ids[(sid, r["SequenceNumber"])] = json.loads(r["Data"])
        seen = defaultdict(list)   # (shard, seq) -> [(t, worker)]
        for w in workers:
            for t, r in w.records():
                self.assertEqual(r.get("subseq", 0), 0)
                k = (r["shard"], r["seq"])
                self.assertIn(k, ids, "delivered a record that is not stored")
                self.assertEqual(payload(r), ids[k])
                seen[k].append((t, w))
        missing = [k for k in ids if k not in seen]
        self.assertEqual(missing, [], f"{len(missing)} records lost")

        # duplicates: measured records only, first delivered by the killed
        # worker after its last checkpoint seen before the kill, then once
        # by another worker
        dups = 0
        for k, got in seen.items():
            if len(got) == 1 or ids[k]["k"].startswith("w"):
                continue
            dups += 1
            got.sort(key=lambda x: x[0])
            self.assertEqual(len(got), 2, (k, [w.wid for _, w in got]))
            self.assertIs(got[0][1], killed, (k, [w.wid for _, w in got]))
            self.assertIsNot(got[1][1], killed, k)
            ck = kill_snap.get(k[0], {}).get("checkpoint")
            if ck and ck.isdigit():
                self.assertGreater(int(k[1]), int(ck), f"{k}: at or below a checkpoint")
        print(f"  {dups} duplicates, all of the killed worker's", file=sys.stderr)

        # per-key order within every worker (parents before children there
        # too), and across workers by first arrival
        first = {}
        for w in workers:
            last = {}
            for t, r in w.records():
                d = payload(r)
                if d["k"].startswith("w"):
                    continue
                self.assertGreater(d["n"], last.get(d["k"], -1),
                                   f"worker {w.wid}: key {d['k']} out of order")
                last[d["k"]] = d["n"]
                first.setdefault((d["k"], d["n"]), t)
                first[(d["k"], d["n"])] = min(first[(d["k"], d["n"])], t)
        by_key = defaultdict(list)
        for (k, n), t in first.items():
            by_key[k].append((n, t))
        for k, v in by_key.items():
            v.sort()
            times = [t for _, t in v]
            self.assertEqual(times, sorted(times), f"key {k}: first deliveries out of order")

    def test_chaos_sqlite(self):
        self.chaos("sqlite")

    def test_chaos_dynamodb(self):
        self.chaos("dynamodb")


    # -- restart --

    def test_restart_same_worker_id(self):
        """A worker killed and started again under the same --worker id
        takes its leases back at once, not after they expire (a minute
        here, far from anything a slow run takes); nothing is lost."""
        stream, app = unique("restart"), unique("restartapp")
        env = self.env()
        store = self.store("sqlite", app)
        kncat(env, "create", stream, "--shards", 4)
        props = {k: v for k, v in PROPS.items() if not k.startswith("lease.")}
        # renewals (and so heartbeats, which call for a reading of the
        # table) as often as with the default duration
        props.update({"lease.duration.ms": 60000, "lease.renew.interval.ms": 4000})
        a = self.start_worker(env, stream, app, store, "A", props=props)
        b = self.start_worker(env, stream, app, store, "B", props=props)
        owners = self.wait_balanced(env, app, store, stream, [a, b], stable=2)
        prod = Producer(self.boto, stream, spread_keys(16, "m"), interval=self.interval)
        prod.start()
        time.sleep(2)
        mine = {s for s, o in owners.items() if o == "A"}
        t = a.signal(signal.SIGKILL)
        self.assertEqual(a.wait(30), -signal.SIGKILL)
        a2 = self.start_worker(env, stream, app, store, "A", props=props)
        # None: not within 30 s, so it waited for the lease to expire
        took = self.wait_takeover(mine, [a2], t, 20)
        produced = prod.finish()
        print(f"\n  restarted worker resumed {fmt(took)} after the kill", file=sys.stderr)
        for sid, dt in took.items():
            self.assertIsNotNone(dt, f"{sid}: waited for the lease to expire")
        want = {r["i"] for r in produced}
        self.wait_for("every record", lambda: want <= self.delivered_ids([a, b, a2]), 60)
        self.assertIn("taken back", a2.stderr())
        for w in (a2, b):
            self.assertEqual(w.stop(), 0, w.stderr())

    # -- planned moves --

    def joins_and_leaves(self, kind):
        """Workers join and leave one by one while records flow, nobody is
        killed: every lease moved from a live worker is handed over at the
        last record it wrote, so every record arrives exactly once."""
        stream, app = unique(f"handoff{kind}"), unique(f"handoffapp{kind}")
        env = self.env()
        store = self.store(kind, app)
        kncat(env, "create", stream, "--shards", 4)
        prod = Producer(self.boto, stream, spread_keys(self.keys, "h"),
                        interval=self.interval)
        prod.start()
        live = [self.start_worker(env, stream, app, store, "A")]
        self.wait_balanced(env, app, store, stream, live, stable=1)
        steps = [("join", "B"), ("join", "C"), ("leave", "A"), ("join", "D")]
        for what, wid in steps:
            if what == "join":
                live.append(self.start_worker(env, stream, app, store, wid))
            else:
                w = next(w for w in live if w.wid == wid)
                live.remove(w)
                self.assertEqual(w.stop(), 0, w.stderr())
            self.wait_balanced(env, app, store, stream, live, stable=1.5)
        produced = prod.finish()
        want = [r["i"] for r in produced]
        self.wait_for("every record",
                      lambda: set(want) <= self.delivered_ids(self.workers),
                      90)
        # Stopped (SIGTERM, exit waited for, output read to its end): what
        # any of them read twice is in what they wrote.
        for w in live:
            self.assertEqual(w.stop(), 0, w.stderr())
        seen = Counter(payload(r)["i"] for w in self.workers
                       for _, r in w.records())
        twice = sorted(i for i, n in seen.items() if n > 1)
        handed = sum(w.stderr().count("handed shard") for w in self.workers)
        print(f"\n  {len(want)} records, {len(steps)} joins and leaves, "
              f"{handed} hand-offs, {len(twice)} delivered twice",
              file=sys.stderr)
        self.assertEqual(twice, [], "records delivered twice")
        self.assertEqual(set(seen), set(want))
        self.assertGreater(handed, 0, "no lease was handed over")

    def test_joins_and_leaves_sqlite(self):
        self.joins_and_leaves("sqlite")

    def test_joins_and_leaves_dynamodb(self):
        self.joins_and_leaves("dynamodb")

    # -- backpressure --

    def test_slow_reader(self):
        """A reader that stalls while 16 shards fill a small memory budget:
        consume -e and group -e still read everything and exit (paused
        shards are woken when memory is released, not only by poll)."""
        stream = unique("slow")
        env = self.env()
        kncat(env, "create", stream, "--shards", 16)
        lines = b"".join(b"%016x\t" % (i * 7919) + b"x" * 1000 + b"\n"
                         for i in range(1600))
        kncat(env, "-q", "produce", stream, "-K", "\\t", input=lines)
        store = self.store("sqlite", unique("slowapp"))
        for args in (["consume", stream, "-e"],
                     ["group", stream, "--app", "slow", "--leases", store, "-e"]):
            with subprocess.Popen([KNCAT, "-q", "-X", "buffer.max.total.bytes=1000000",
                                   *args], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) as p:
                time.sleep(3)  # nobody reads: the pipe and the budget fill up
                try:
                    out, err = p.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, err = p.communicate()
                    self.fail(f"kncat {args[0]} hung after a stalled reader")
            runkit.check_clean(err, f"kncat {args[0]}")
            self.assertEqual(p.returncode, 0, err)
            self.assertEqual(len(out.splitlines()), 1600, args[0])

    # -- KCL compatibility (DynamoDB) --

    def put(self, stream, shard, count, tag):
        keys = keys_for(shard, 3, tag)
        recs = [{"Data": json.dumps({"k": keys[j % 3], "n": j, "t": tag}).encode(),
                 "PartitionKey": keys[j % 3]} for j in range(count)]
        r = self.boto.put_records(StreamName=stream, Records=recs)
        self.assertEqual(r["FailedRecordCount"], 0)
        self.assertTrue(all(x["ShardId"] == shard["ShardId"] for x in r["Records"]))

    def create_kcl_table(self, table):
        create_kcl_table(self.ddb, table)

    def scan(self, table):
        return scan_table(self.ddb, table)

    def run_until(self, env, stream, app, store, want, props, settle=2.0):
        """One worker until `want` records arrived, then `settle` seconds
        more (anything read twice or from the wrong place would show),
        then SIGTERM.  Returns its records."""
        w = self.start_worker(env, stream, app, store, "kn-1", props=props)
        self.wait_for(f"{want} records", lambda: w.count() >= want, 90)
        time.sleep(settle)
        self.assertEqual(w.stop(), 0, w.stderr())
        return [r for _, r in w.records()]

    def test_endpoint_option_is_kinesis_only(self):
        """`--endpoint` names the Kinesis server; the lease table's DynamoDB
        server comes from AWS_ENDPOINT_URL_DYNAMODB (as with the AWS CLI's
        --endpoint-url), even when --endpoint is given."""
        stream, app = unique("ep"), unique("epapp")
        env = self.env()
        kncat(env, "create", stream, "--shards", 1)
        kncat(env, "produce", stream, input=b"a\nb\nc\n")
        env = dict(env)
        del env["AWS_ENDPOINT_URL_KINESIS"]
        p = kncat(env, "--endpoint", self.server.endpoint, "group", stream,
                  "--app", app, "--leases", f"dynamodb:{app}", "-c", 3,
                  *[x for k, v in PROPS.items() for x in ("-X", f"{k}={v}")])
        self.assertEqual(p.stdout.split(), [b"a", b"b", b"c"])
        self.assertIn(app, self.ddb.list_tables()["TableNames"])

    def test_kcl_table_resumed(self):
        stream, app = unique("kcl"), unique("kclapp")
        env = self.env()
        kncat(env, "create", stream, "--shards", 3)
        shards = {s["ShardId"]: s for s in list_shards(self.boto, stream)}
        s0, s1, s2 = sorted(shards)
        for sid in (s0, s1, s2):
            self.put(stream, shards[sid], 15, f"a{sid[-1]}")
        kncat(env, "split", stream, s0)
        shards = {s["ShardId"]: s for s in list_shards(self.boto, stream)}
        c1, c2 = sorted(k for k, x in shards.items() if x.get("ParentShardId") == s0)
        for sid in (c1, c2):
            self.put(stream, shards[sid], 12, f"b{sid[-1]}")
        stored = read_stream(self.boto, stream)
        seqs = {sid: [r["SequenceNumber"] for r in recs] for sid, recs in stored.items()}
        self.assertEqual([len(seqs[x]) for x in (s0, s1, s2, c1, c2)], [15, 15, 15, 12, 12])

        def hk(sid):
            h = shards[sid]["HashKeyRange"]
            return {"startingHashKey": {"S": h["StartingHashKey"]},
                    "endingHashKey": {"S": h["EndingHashKey"]}}

        state = b"\x00\x01kcl-state\xff"
        items = [
            {   # the split parent, finished by a KCL worker
                "leaseKey": {"S": s0}, "leaseCounter": {"N": "17"},
                "ownerSwitchesSinceCheckpoint": {"N": "0"},
                "checkpoint": {"S": "SHARD_END"},
                "checkpointSubSequenceNumber": {"N": "0"},
                "childShardIds": {"SS": [c1, c2]}, **hk(s0)},
            {   # mid-shard, free
                "leaseKey": {"S": s1}, "leaseCounter": {"N": "42"},
                "ownerSwitchesSinceCheckpoint": {"N": "1"},
                "checkpoint": {"S": seqs[s1][9]},
                "checkpointSubSequenceNumber": {"N": "0"}, **hk(s1)},
            {   # a child not started, held by a KCL worker that is gone
                "leaseKey": {"S": c1}, "leaseOwner": {"S": "kcl-worker-gone"},
                "leaseCounter": {"N": "3"},
                "ownerSwitchesSinceCheckpoint": {"N": "0"},
                "checkpoint": {"S": "TRIM_HORIZON"},
                "checkpointSubSequenceNumber": {"N": "0"},
                "parentShardId": {"SS": [s0]}, **hk(c1)},
            {   # a child mid-shard with a prepared checkpoint, KCL 3.x extras
                "leaseKey": {"S": c2}, "leaseCounter": {"N": "12"},
                "ownerSwitchesSinceCheckpoint": {"N": "2"},
                "checkpoint": {"S": seqs[c2][4]},
                "checkpointSubSequenceNumber": {"N": "0"},
                "pendingCheckpoint": {"S": seqs[c2][7]},
                "pendingCheckpointSubSequenceNumber": {"N": "0"},
                "pendingCheckpointState": {"B": state},
                "parentShardId": {"SS": [s0]}, **hk(c2),
                "throughputKBps": {"N": "3.5"},
                "checkpointOwner": {"S": "kcl-worker-2"},
                "entityType": {"S": "LEASE"}},
            {   # KCL 3.x coordinator state: not a lease
                "leaseKey": {"S": "Leader"}, "entityType": {"S": "LEADER"},
                "leaderId": {"S": "kcl-worker-1"}},
        ]
        # s2 has no item: the worker creates it
        self.create_kcl_table(app)
        for it in items:
            self.ddb.put_item(TableName=app, Item=it)

        props = {**PROPS, "lease.duration.ms": 2000, "lease.renew.interval.ms": 500}
        want = {s1: seqs[s1][10:], s2: seqs[s2], c1: seqs[c1], c2: seqs[c2][5:]}
        recs = self.run_until(env, stream, app, f"dynamodb:{app}",
                              sum(map(len, want.values())), props)
        got = defaultdict(list)
        for r in recs:
            got[r["shard"]].append(r["seq"])
        self.assertNotIn(s0, got, "a SHARD_END parent was read again")
        for sid, w in want.items():
            self.assertEqual(got[sid], w, sid)  # from the checkpoint on, once

        after = self.scan(app)
        self.assertEqual(after["Leader"], items[-1], "a non-lease item was changed")
        for key, it in after.items():
            if key == "Leader":
                continue
            for name, v in it.items():
                if name in KCL_TYPES:
                    self.assertEqual(next(iter(v)), KCL_TYPES[name], (key, name))
            for name in ("leaseCounter", "ownerSwitchesSinceCheckpoint",
                         "checkpointSubSequenceNumber"):
                self.assertRegex(it[name]["N"], r"^\d+$", (key, name))
        # the KCL 3.x attributes survive take, renew, checkpoint, release;
        # the take ended the hand-off the KCL 3.x had begun
        x = after[c2]
        self.assertEqual(x["throughputKBps"], {"N": "3.5"})
        self.assertNotIn("checkpointOwner", x)
        self.assertEqual(x["entityType"], {"S": "LEASE"})
        # a checkpoint past the prepared one clears it
        for name in ("pendingCheckpoint", "pendingCheckpointSubSequenceNumber",
                     "pendingCheckpointState"):
            self.assertNotIn(name, x)
        self.assertEqual(x["parentShardId"], {"SS": [s0]})
        for sid in (s1, s2, c1, c2):
            self.assertEqual(after[sid]["checkpoint"], {"S": seqs[sid][-1]}, sid)
            self.assertEqual(after[sid]["checkpointSubSequenceNumber"], {"N": "0"})
            self.assertEqual(after[sid]["ownerSwitchesSinceCheckpoint"], {"N": "0"})
            self.assertNotIn("leaseOwner", after[sid], sid)
        self.assertGreater(int(after[s1]["leaseCounter"]["N"]), 42)
        # the item the library wrote, as the KCL writes one
        mine = after[s2]
        self.assertLessEqual(set(mine), set(KCL_TYPES))
        self.assertLessEqual({"leaseKey", "leaseCounter", "checkpoint",
                              "checkpointSubSequenceNumber",
                              "ownerSwitchesSinceCheckpoint", "startingHashKey",
                              "endingHashKey"}, set(mine))
        self.assertEqual({k: mine[k] for k in ("startingHashKey", "endingHashKey")}, hk(s2))
        if s0 in after:  # or cleaned up: both children have started
            self.assertEqual(after[s0]["checkpoint"], {"S": "SHARD_END"})
            self.assertEqual(after[s0]["childShardIds"], {"SS": [c1, c2]})
        # and kncat leases shows the leases only
        rows = leases_json(KNCAT, env, app, f"dynamodb:{app}")
        self.assertEqual({r["shard"] for r in rows}, set(after) - {"Leader"})

    def test_kcl3_handoffs_in_table(self):
        """A table in which KCL 3.x workers left hand-offs half done (as
        boto3 writes their items): one asked of a KCL worker that is gone
        for this worker (leaseOwner kn-1, checkpointOwner kcl-3), one asked
        of this worker's earlier run by a KCL worker that is gone too.  The
        worker takes both once nobody renews them, reads each from its
        checkpoint exactly once, and leaves no hand-off behind."""
        stream, app = unique("kcl3"), unique("kcl3app")
        env = self.env()
        kncat(env, "create", stream, "--shards", 2)
        shards = {s["ShardId"]: s for s in list_shards(self.boto, stream)}
        s0, s1 = sorted(shards)
        for sid in (s0, s1):
            self.put(stream, shards[sid], 12, f"h{sid[-1]}")
        seqs = {sid: [r["SequenceNumber"] for r in self.boto.get_records(
            ShardIterator=self.boto.get_shard_iterator(
                StreamName=stream, ShardId=sid,
                ShardIteratorType="TRIM_HORIZON")["ShardIterator"])["Records"]]
            for sid in (s0, s1)}
        hk = lambda sid: {
            "startingHashKey": {"S": shards[sid]["HashKeyRange"]["StartingHashKey"]},
            "endingHashKey": {"S": shards[sid]["HashKeyRange"]["EndingHashKey"]}}
        items = [
            {"leaseKey": {"S": s0}, "leaseOwner": {"S": "kn-1"},
             "checkpointOwner": {"S": "kcl-3"}, "leaseCounter": {"N": "9"},
             "ownerSwitchesSinceCheckpoint": {"N": "0"},
             "checkpoint": {"S": seqs[s0][3]},
             "checkpointSubSequenceNumber": {"N": "0"}, **hk(s0)},
            {"leaseKey": {"S": s1}, "leaseOwner": {"S": "kcl-4"},
             "checkpointOwner": {"S": "kn-1"}, "leaseCounter": {"N": "4"},
             "ownerSwitchesSinceCheckpoint": {"N": "0"},
             "checkpoint": {"S": seqs[s1][6]},
             "checkpointSubSequenceNumber": {"N": "0"}, **hk(s1)},
        ]
        self.create_kcl_table(app)
        for it in items:
            self.ddb.put_item(TableName=app, Item=it)
        props = {**PROPS, "lease.duration.ms": 2000,
                 "lease.renew.interval.ms": 500}
        want = {s0: seqs[s0][4:], s1: seqs[s1][7:]}
        recs = self.run_until(env, stream, app, f"dynamodb:{app}",
                              sum(map(len, want.values())), props)
        got = defaultdict(list)
        for r in recs:
            got[r["shard"]].append(r["seq"])
        for sid, w in want.items():
            self.assertEqual(got[sid], w, sid)  # from the checkpoint on, once
        after = self.scan(app)
        for sid in (s0, s1):
            self.assertNotIn("checkpointOwner", after[sid], sid)
            self.assertEqual(after[sid]["checkpoint"], {"S": seqs[sid][-1]}, sid)

    def test_kcl_aggregated_resume(self):
        stream, app = unique("kclagg"), unique("kclaggapp")
        env = self.env()
        kncat(env, "create", stream, "--shards", 1)
        for part in range(2):
            lines = "".join(f"{part}-{j}\n" for j in range(20)).encode()
            kncat(env, "produce", stream, "--aggregate", "-k", "agg", input=lines)
        p = kncat(env, "consume", stream, "-e", "-J")
        recs = [json.loads(x) for x in p.stdout.decode().splitlines()]
        self.assertEqual(len(recs), 40)
        by_seq = defaultdict(list)
        for r in recs:
            by_seq[r["seq"]].append(r["subseq"])
        big = [s for s, subs in by_seq.items() if len(subs) >= 10]
        self.assertTrue(big, f"no aggregate of 10 or more records: {dict(by_seq)}")
        seq = big[0]
        at = [i for i, r in enumerate(recs) if r["seq"] == seq][6]
        self.assertEqual(recs[at]["subseq"], 6)
        shard = recs[0]["shard"]
        self.create_kcl_table(app)
        self.ddb.put_item(TableName=app, Item={
            "leaseKey": {"S": shard}, "leaseCounter": {"N": "5"},
            "ownerSwitchesSinceCheckpoint": {"N": "0"},
            "checkpoint": {"S": seq}, "checkpointSubSequenceNumber": {"N": "6"}})
        want = recs[at + 1:]
        props = {**PROPS, "lease.duration.ms": 2000, "lease.renew.interval.ms": 500}
        got = self.run_until(env, stream, app, f"dynamodb:{app}", len(want), props)
        self.assertEqual([(r["seq"], r["subseq"], r["data"]) for r in got],
                         [(r["seq"], r["subseq"], r["data"]) for r in want])
        item = self.scan(app)[shard]
        self.assertEqual(item["checkpoint"], {"S": recs[-1]["seq"]})
        self.assertEqual(item["checkpointSubSequenceNumber"],
                         {"N": str(recs[-1]["subseq"])})

class CheckpointWatch(threading.Thread):
    """Samples the lease table's checkpoints every 0.3 s through `read`
    (a callable returning {shard: checkpoint}, or raising while the store
    cannot be read) and remembers every checkpoint that moved back."""

    def __init__(self, read):
        super().__init__(daemon=True)
        self.read = read
        self.last: dict[str, int] = {}
        self.backwards: list = []
        self.samples = 0
        self.stop_ev = threading.Event()

    @staticmethod
    def rank(c):
        if c is None or c in ("TRIM_HORIZON", "LATEST", "AT_TIMESTAMP"):
            return -1
        if c == "SHARD_END":
            return 1 << 200
        return int(c)

    def run(self):
        while not self.stop_ev.wait(0.3):
            try:
                now = self.read()
            except Exception:  # noqa: BLE001 - store busy: sample later
                continue
            self.samples += 1
            for sid, c in now.items():
                r = self.rank(c)
                if r < self.last.get(sid, -1):
                    self.backwards.append((sid, self.last[sid], r))
                self.last[sid] = max(r, self.last.get(sid, -1))

    def finish(self):
        self.stop_ev.set()
        self.join(10)


# Fault tests: longer leases than elsewhere, so a short outage stays well
# inside the grace period (duration - renew / 2 = 5.25 s), and short
# retry back-off, so calls go through soon after an outage ends.
FAULT_PROPS = {**PROPS, "lease.duration.ms": 6000, "lease.renew.interval.ms": 1500,
               "retry.backoff.max.ms": 500}
GRACE = (6000 - 1500 / 2) / 1000
SHORT_OUTAGE = 2.0
# A short outage goes on while a worker has yet to show that it reads on,
# but never this long: with a renewal interval before it, and a retry
# after, still inside the grace period.
SHORT_OUTAGE_MAX = 3.0
LONG_OUTAGE = 10.0


class Faults(GroupBase, unittest.TestCase):
    """Lease store and GetRecords faults, on kinesalite."""

    server_name = "kinesalite"

    # the chaos and KCL tests run in Kinesalite and KinesisLocal
    test_chaos_sqlite = test_chaos_dynamodb = test_slow_reader = None
    test_restart_same_worker_id = None
    test_kcl_table_resumed = test_kcl_aggregated_resume = None
    test_endpoint_option_is_kinesis_only = None

    worker_extra: tuple = ()
    takeover_extra = 0.0   # seconds the server may add to a take-over

    def setup_group(self, store, env_a, env_b, props=FAULT_PROPS):
        stream, app = unique("fault"), unique("faultapp")
        kncat(self.env(), "create", stream, "--shards", 4)
        store = store(app)
        a = self.start_worker(env_a, stream, app, store, "A", props=props,
                              extra=self.worker_extra)
        b = self.start_worker(env_b, stream, app, store, "B", props=props,
                              extra=self.worker_extra)
        owners = self.wait_balanced(self.env(), app, store, stream, [a, b])
        # records only now: the stealing while the group balances would
        # deliver some twice
        prod = Producer(self.boto, stream, spread_keys(16, "m"), interval=self.interval)
        prod.start()
        time.sleep(1)
        return stream, app, store, a, b, prod, owners

    def delivered_in(self, w, shards, t0, t1):
        """shard -> records w delivered in [t0, t1]."""
        got = defaultdict(int)
        for t, r in w.records():
            if t0 <= t <= t1 and r["shard"] in shards:
                got[r["shard"]] += 1
        return got

    def drain_and_check(self, prod, workers, first_dup_after=None):
        """Stops producing; waits until every record arrived; checks that
        no record was delivered a second time before first_dup_after."""
        produced = prod.finish()
        want = {r["i"] for r in produced}
        self.wait_for("every record", lambda: want <= self.delivered_ids(workers), 90)
        if first_dup_after is not None:
            seen = defaultdict(list)
            for w in workers:
                for t, r in w.records():
                    seen[(r["shard"], r["seq"])].append(t)
            early = [k for k, ts in seen.items()
                     if len(ts) > 1 and sorted(ts)[1] < first_dup_after]
            self.assertEqual(early, [], "records delivered twice before any lease moved")
        return produced

    def short_outage(self, start, end, workers, owners, app, store):
        """A store outage shorter than the grace period: every worker goes
        on reading its shards throughout, and no lease moves.  It lasts
        SHORT_OUTAGE, longer (up to SHORT_OUTAGE_MAX) while a worker has
        delivered nothing from one of its shards since its middle: a
        worker slowed down by a loaded machine gets the time, one that
        stopped reading still fails."""
        mine = {w.wid: {s for s, o in owners.items() if o == w.wid} for w in workers}
        t0 = time.monotonic()

        def got(w, until):
            return self.delivered_in(w, mine[w.wid], t0 + SHORT_OUTAGE / 2, until)

        start()
        time.sleep(SHORT_OUTAGE)
        while (time.monotonic() < t0 + SHORT_OUTAGE_MAX and
               any(set(got(w, time.monotonic())) != mine[w.wid] for w in workers)):
            time.sleep(0.1)
        end()
        t1 = time.monotonic()
        for w in workers:
            self.assertEqual(set(got(w, t1 + 0.2)), mine[w.wid],
                             f"{w.wid} stopped reading during a {t1 - t0:.1f} s "
                             f"outage: {dict(got(w, t1 + 0.2))}")
        time.sleep(2)
        now = {r["shard"]: r["owner"] for r in leases_json(KNCAT, self.env(), app, store)}
        self.assertEqual(now, owners, "a lease moved during a short outage")

    def test_fault_dynamodb(self):
        """Worker A reaches DynamoDB through a fault proxy, B directly:
        throttling and 500s for a while, then a long outage."""
        with FaultProxy(self.dynalite) as proxy:
            stream, app, store, a, b, prod, owners = self.setup_group(
                lambda app: f"dynamodb:{app}",
                lab.env_for(kinesis=self.server, dynamodb=proxy.endpoint),
                self.env())
            watch = CheckpointWatch(lambda: {
                it["leaseKey"]["S"]: it.get("checkpoint", {}).get("S")
                for it in self.scan(app).values()})
            watch.start()
            before = dict(watch.last)
            rules = []
            for fault in ({"error": "ThrottlingException"}, {"status": 500}):
                self.short_outage(
                    lambda: rules.append(proxy.add_rule("status", "*", **fault)),
                    lambda: proxy.remove_rule(rules.pop()),
                    [a, b], owners, app, store)
            t_long = time.monotonic()
            # A long outage: A stops reading its shards within the grace
            # period, B takes them over once A's leases expire.
            a_shards = {s for s, o in owners.items() if o == "A"}
            rule = proxy.add_rule("status", "*", status=500)
            time.sleep(LONG_OUTAGE)
            proxy.remove_rule(rule)
            t_end = time.monotonic()
            late = self.delivered_in(a, a_shards, t_long + GRACE + 1.5,
                                     min(t_end, t_long + LONG_OUTAGE))
            self.assertEqual(dict(late), {}, "A read on past the grace period")
            took = self.wait_takeover(a_shards, [b], t_long,
                                      TAKEOVER_WAIT + self.takeover_extra)
            for sid, dt in took.items():
                self.assertIsNotNone(dt, sid)
                a_last = max(t for t, r in a.records()
                             if r["shard"] == sid and t < t_end)
                self.assertGreater(t_long + dt, a_last,
                                   f"{sid}: B read it while A still did")
            self.wait_balanced(self.env(), app, store, stream, [a, b], stable=2)
            self.drain_and_check(prod, [a, b], first_dup_after=t_long)
            watch.finish()
            self.assertEqual(watch.backwards, [])
            self.assertGreater(watch.samples, 10)
            for sid, c in before.items():
                self.assertGreaterEqual(watch.last[sid], c, sid)
            print(f"\n  dynamodb faults: {sum(1 for x in proxy.log if x.fault)} "
                  f"faulty answers; A's shards taken over by B after "
                  f"{fmt(took)}", file=sys.stderr)
        for w in (a, b):
            self.assertEqual(w.stop(), 0, w.stderr())

    def test_fault_sqlite_locked(self):
        """Another process holds an exclusive transaction on the SQLite
        file: briefly, then for longer than a lease."""
        path = self.dir / "locked.db"
        stream, app, store, a, b, prod, owners = self.setup_group(
            lambda app: f"sqlite:{path}", self.env(), self.env())

        def read():
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as c:
                return dict(c.execute("SELECT leaseKey, checkpoint FROM leases"))

        watch = CheckpointWatch(read)
        watch.start()
        self.wait_for("a first sample of the checkpoints", lambda: watch.last, 30)
        before = dict(watch.last)
        locker = []

        def lock():
            # held until its stdin is closed
            p = subprocess.Popen(
                [sys.executable, "-c",
                 "import sqlite3, sys\n"
                 "c = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)\n"
                 "c.execute('BEGIN EXCLUSIVE')\n"
                 "c.execute('UPDATE leases SET leaseKey = leaseKey WHERE 0')\n"
                 "print('locked', flush=True)\n"
                 "sys.stdin.read()\n"
                 "c.execute('ROLLBACK')\n", str(path)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self.assertEqual(p.stdout.readline(), b"locked\n")
            locker.append(p)

        def unlock():
            p = locker.pop()
            p.stdin.close()
            self.assertEqual(p.wait(30), 0)

        self.short_outage(lock, unlock, [a, b], owners, app, store)
        # Longer than a lease: both workers stop within the grace period
        # (nobody can renew), and take their shards again afterwards.
        t_long = time.monotonic()
        lock()
        # The lock is held from before this point on, never after it; a
        # loaded machine may take a second or more to start the locker,
        # while which the workers still renew.
        t_locked = time.monotonic()
        time.sleep(LONG_OUTAGE)
        unlock()
        t_end = time.monotonic()
        # Up to the release only: once the lock is gone the workers read
        # again at once, and unlock() may return well after that.
        late = {w.wid: dict(self.delivered_in(w, set(owners), t_locked + GRACE + 1.5,
                                              min(t_end, t_long + LONG_OUTAGE)))
                for w in (a, b)}
        self.assertEqual(late, {"A": {}, "B": {}}, "read on past the grace period")
        self.wait_takeover(set(owners), [a, b], t_end, 30)
        self.wait_balanced(self.env(), app, store, stream, [a, b], stable=1)
        self.drain_and_check(prod, [a, b], first_dup_after=t_long)
        watch.finish()
        self.assertEqual(watch.backwards, [])
        self.assertGreater(watch.samples, 10)
        for sid, c in before.items():
            self.assertGreaterEqual(watch.last[sid], c, sid)
        for w in (a, b):
            self.assertEqual(w.stop(), 0, w.stderr())

    def test_fault_getrecords_throttled(self):
        """Every other GetRecords throttled for a while: back-off, nothing
        lost, nothing read twice, no lease lost."""
        with FaultProxy(self.server) as proxy:
            env = lab.env_for(kinesis=proxy.endpoint, dynamodb=self.dynalite)
            stream, app, store, a, b, prod, owners = self.setup_group(
                lambda app: f"dynamodb:{app}", env, env, props=PROPS)
            proxy.clear_log()
            lost_before = [w.stderr().count("lost the lease") for w in (a, b)]
            t0 = time.time()
            rule = proxy.add_rule("status", "GetRecords", probability=0.5,
                                  error="ProvisionedThroughputExceededException")
            time.sleep(6)
            proxy.remove_rule(rule)
            t1 = time.time()
            time.sleep(2)
            self.drain_and_check(prod, [a, b], first_dup_after=float("inf"))
            gets = [x for x in proxy.requests("GetRecords") if t0 <= x.time <= t1]
            throttled = [x for x in gets if x.fault]
            self.assertGreater(len(throttled), 10)
            # a throttled call is retried with the same iterator, later
            retried = 0
            for i, x in enumerate(gets):
                if x.fault:
                    it = x.json()["ShardIterator"]
                    nxt = [y for y in gets[i + 1:] if y.json()["ShardIterator"] == it]
                    retried += bool(nxt)
            self.assertGreater(retried, len(throttled) // 2)
            # and the per-shard call rate (5 per second) is kept
            self.assertLessEqual(len(gets), 4 * 5 * (t1 - t0) * 1.2 + 8)
            now = {r["shard"]: r["owner"] for r in leases_json(KNCAT, self.env(), app, store)}
            self.assertEqual(now, owners)
            self.assertEqual([w.stderr().count("lost the lease") for w in (a, b)],
                             lost_before)
            for w in (a, b):
                self.assertEqual(w.stop(), 0, w.stderr())
            print(f"\n  GetRecords: {len(throttled)} of {len(gets)} throttled",
                  file=sys.stderr)

    def test_slow_credential_refresh(self):
        """Worker A's credentials come from a credential_process whose
        refresh hangs (for longer than a lease lasts) while A reads with
        DynamoDB leases: A goes on renewing and delivering with the cached
        keys (the refresh runs off the I/O thread), loses no lease, and
        picks the new keys up once the process answers."""
        d = self.dir
        script = d / "creds.sh"
        # Expiring 302 s out: the refresh is due 2 s (plus jitter) after
        # each fetch, so the process runs every few seconds.
        script.write_text(f"""#!/bin/sh
cd '{d}' || exit 9
n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count
if [ -e slow ] && [ ! -e slow.done ]; then
  echo $n > slow.started
  i=0; while [ ! -e slow.go ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done
  touch slow.done
fi
exp=$(date -u -d '+302 seconds' +%Y-%m-%dT%H:%M:%SZ)
printf '{{"Version":1,"AccessKeyId":"AKIDSLOW%s","SecretAccessKey":"x","SessionToken":"t","Expiration":"%s"}}' $n "$exp"
""")
        script.chmod(0o755)
        cfg = d / "aws-config"
        cfg.write_text(f"[default]\ncredential_process = {script}\n")
        env_b = self.env()
        env_a = {k: v for k, v in env_b.items()
                 if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        env_a["AWS_CONFIG_FILE"] = str(cfg)
        stream, app, store, a, b, prod, owners = self.setup_group(
            lambda app: f"dynamodb:{app}", env_a, env_b)
        mine = {s for s, o in owners.items() if o == "A"}
        self.assertTrue(mine)
        lost_before = [w.stderr().count("lost the lease") for w in (a, b)]
        (d / "slow").touch()
        self.wait_for("the hanging refresh", (d / "slow.started").exists, 60)
        t0 = time.monotonic()
        # Twice the lease duration: a stalled worker would have lost its
        # leases to B by now.
        time.sleep(2 * FAULT_PROPS["lease.duration.ms"] / 1000)
        t1 = time.monotonic()
        self.assertFalse((d / "slow.done").exists())
        got = self.delivered_in(a, mine, t0 + 1, t1)
        self.assertEqual(set(got), mine, f"A stopped delivering while its "
                         f"credentials were refreshed: {dict(got)}")
        now = {r["shard"]: r["owner"] for r in leases_json(KNCAT, self.env(), app, store)}
        self.assertEqual(now, owners)
        self.assertEqual([w.stderr().count("lost the lease") for w in (a, b)],
                         lost_before)
        (d / "slow.go").touch()
        self.wait_for("the refresh to end", (d / "slow.done").exists, 30)
        slow_run = (d / "slow.started").read_text().strip()
        self.wait_for("the keys of the slow run in use",
                      lambda: f"key AKIDSLOW{slow_run}," in a.stderr(), 30)
        self.drain_and_check(prod, [a, b], first_dup_after=float("inf"))
        self.assertEqual([w.stderr().count("lost the lease") for w in (a, b)],
                         lost_before)
        for w in (a, b):
            self.assertEqual(w.stop(), 0, w.stderr())

class FaultsFanOut(Faults):
    """The DynamoDB faults with enhanced fan-out (kinesis-local): a worker
    whose lease runs out also ends its subscription, so the next owner can
    subscribe."""

    server_name = "kinesis-local"
    worker_extra = ("--efo", "faults")
    # kinesis-local keeps a dropped subscription for 2-7 s
    takeover_extra = 7.0
    interval = 0.3
    test_fault_sqlite_locked = test_fault_getrecords_throttled = None


def fmt(d):
    return "{" + ", ".join(f"{k[-3:]}: {'-' if v is None else f'{v:.1f}s'}"
                           for k, v in sorted(d.items())) + "}"


class Kinesalite(GroupBase, unittest.TestCase):
    server_name = "kinesalite"


class KinesisLocal(GroupBase, unittest.TestCase):
    server_name = "kinesis-local"
    keys = 16
    interval = 0.3
    warm_rounds = 4


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
