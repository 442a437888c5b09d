#!/usr/bin/env python3
"""The local demonstration behind `make demo`.

Starts kinesis-local on free loopback ports.

Part 1: creates a 4-shard stream, produces 5,000 records while one shard is
split and two others are merged, reads everything back with `kncat consume
-e`, prints what arrived (produced, consumed, missing, duplicated, per-key
order, the shard tree).

Part 2: two `kncat group` workers share another 4-shard stream through a
lease table (a SQLite file) while records are produced and shards split
and merged; half-way one worker is killed with SIGKILL and started again.
The summary shows that nothing is missing, how many records the kill made
arrive twice, how long the other worker took to carry on with the killed
worker's shards, and the lease table.

Then it stops the server.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lab"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import lab  # noqa: E402
from groupkit import Worker, leases_json  # noqa: E402

STREAM = "kn-demo"
RECORDS = 5000
KEYS = 50
CHUNKS = 10

GROUP_STREAM = "kn-demo-group"
GROUP_APP = "kn-demo"
GROUP_RECORDS = 3200
GROUP_CHUNKS = 16


class Demo:
    def __init__(self, kncat, env):
        self.kncat = kncat
        self.env = env

    def run(self, *args, stdin=None, check=True):
        p = subprocess.run([self.kncat, *args], input=stdin, env=self.env,
                           capture_output=True, timeout=600)
        if check and p.returncode != 0:
            sys.stderr.write(p.stderr.decode(errors="replace"))
            raise SystemExit(f"demo: kncat {' '.join(args)} exited {p.returncode}")
        return p

    def shards(self, stream=STREAM):
        out = self.run("list", stream, "-J").stdout.decode()
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def open_shards(self, stream=STREAM):
        return sorted((s for s in self.shards(stream) if s.get("open")),
                      key=lambda s: int(s["hash_key_start"]))

    def produce_chunk(self, stream, first, count, seq):
        """Records first .. first+count-1, round-robin over KEYS keys, each
        payload {"key", "n" (per-key counter), "i"}."""
        lines = []
        for i in range(first, first + count):
            key = f"key-{i % KEYS:03d}"
            seq[key] = seq.get(key, -1) + 1
            lines.append(f"{key}:" + json.dumps({"key": key, "n": seq[key], "i": i}))
        self.run("produce", stream, "-K", ":",
                 stdin=("\n".join(lines) + "\n").encode())


def parents_of(s):
    return [p for p in (s.get("parent"), s.get("adjacent_parent")) if p]


def print_tree(shards, count):
    """The shard tree: children under their first parent; count(shard id)
    gives the records to show next to each shard."""
    by_id = {s["shard"]: s for s in shards}
    children = {}
    for s in shards:
        ps = parents_of(s)
        if ps:
            children.setdefault(ps[0], []).append(s["shard"])

    def show(sid, depth):
        s = by_id[sid]
        state = "open" if s.get("open") else "closed"
        ps = parents_of(s)
        merged = f"  (merge of {ps[0]} and {ps[1]})" if len(ps) > 1 else ""
        print(f"    {'  ' * depth}{sid}  {state:6}  {count(sid):5} records{merged}")
        for c in sorted(children.get(sid, [])):
            show(c, depth + 1)

    for s in shards:
        if not parents_of(s) or not any(p in by_id for p in parents_of(s)):
            show(s["shard"], 0)


def step(msg):
    print(f"demo: {msg}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    kncat = os.path.join(ROOT, args.build, "kncat")
    if not os.access(kncat, os.X_OK):
        raise SystemExit(f"demo: {kncat} not found; run `make build` first")

    step("starting kinesis-local on a free loopback port")
    with lab.KinesisLocal() as server:
        demo = Demo(kncat, lab.env_for(kinesis=server))
        step(f"creating stream {STREAM} with 4 shards at {server.endpoint}")
        demo.run("create", STREAM, "--shards", "4")

        per_chunk = RECORDS // CHUNKS
        seq = {}
        t0 = time.time()
        for c in range(CHUNKS):
            lines = []
            for i in range(c * per_chunk, (c + 1) * per_chunk):
                key = f"key-{i % KEYS:03d}"
                seq[key] = seq.get(key, -1) + 1
                lines.append(f"{key}:" + json.dumps({"key": key, "n": seq[key], "i": i}))
            demo.run("produce", STREAM, "-K", ":",
                     stdin=("\n".join(lines) + "\n").encode())
            if c == 3:
                first = demo.open_shards()[0]["shard"]
                step(f"splitting {first} while producing")
                demo.run("split", STREAM, first)
            if c == 6:
                opens = demo.open_shards()
                a, b = opens[-2]["shard"], opens[-1]["shard"]
                step(f"merging {a} and {b} while producing")
                demo.run("merge", STREAM, a, b)
        step(f"produced {RECORDS} records in {time.time() - t0:.1f} s")

        step("consuming everything back with `kncat consume -e -J`")
        t0 = time.time()
        out = demo.run("consume", STREAM, "-e", "-J").stdout.decode()
        took = time.time() - t0
        recs = [json.loads(line) for line in out.splitlines() if line.strip()]
        seen = {}
        last = {}
        order_ok = True
        for r in recs:
            d = json.loads(r["data"])
            seen[d["i"]] = seen.get(d["i"], 0) + 1
            if d["n"] <= last.get(d["key"], -1):
                order_ok = False
            last[d["key"]] = d["n"]
        missing = [i for i in range(RECORDS) if i not in seen]
        dups = sum(c - 1 for c in seen.values())

        print()
        print("summary")
        print(f"  produced            {RECORDS}")
        print(f"  consumed            {len(recs)} in {took:.1f} s")
        print(f"  missing             {len(missing)}")
        print(f"  duplicated          {dups}")
        print(f"  per-key order kept  {'yes' if order_ok else 'NO'}")
        print("  shard tree")
        print_tree(demo.shards(), lambda sid: sum(1 for r in recs if r["shard"] == sid))
        ok = not missing and order_ok
        print()
        with tempfile.TemporaryDirectory(prefix="kn-demo-") as tmp:
            ok = group_part(demo, kncat, lab.env_for(kinesis=server), tmp) and ok
        print()
        step("stopping kinesis-local")
    return 0 if ok else 1


def group_part(demo, kncat, env, tmp):
    """Two workers, a split, a merge, a SIGKILL half-way and a restart."""
    leases = f"sqlite:{os.path.join(tmp, GROUP_APP + '.leases.db')}"
    print()
    step(f"part 2: two `kncat group` workers share stream {GROUP_STREAM} "
         f"through the lease table {leases}")
    demo.run("create", GROUP_STREAM, "--shards", "4")
    runs = []   # every worker process, the killed one included

    def start(wid):
        w = Worker(kncat, env, GROUP_STREAM, GROUP_APP, leases, wid,
                   log_dir=tmp, verbose=False, extra=["-q"])
        runs.append(w)
        return w

    a, b = start("worker-a"), start("worker-b")
    t0 = time.time()
    while time.time() - t0 < 60:
        try:
            owners = {r["owner"] for r in leases_json(kncat, env, GROUP_APP, leases)}
        except RuntimeError:
            owners = set()
        if owners == {"worker-a", "worker-b"}:
            break
        time.sleep(0.5)
    step("both workers hold leases (default settings: lease.duration.ms 10000, "
         "lease.take.interval.ms 2000)")

    per_chunk = GROUP_RECORDS // GROUP_CHUNKS
    seq = {}
    killed = None
    t_kill = None
    killed_shards = []

    def taken_over():
        """Every shard of the killed worker delivered by another since."""
        return all(any(t > t_kill and r["shard"] == sid
                       for w in runs if w is not killed for t, r in w.records())
                   for sid in killed_shards)

    for c in range(GROUP_CHUNKS):
        demo.produce_chunk(GROUP_STREAM, c * per_chunk, per_chunk, seq)
        if c == 2:
            first = demo.open_shards(GROUP_STREAM)[0]["shard"]
            step(f"splitting {first} while the workers read")
            demo.run("split", GROUP_STREAM, first)
        if c == 6:
            open_ids = {s["shard"] for s in demo.shards(GROUP_STREAM) if s["open"]}
            killed_shards = [r["shard"] for r in leases_json(kncat, env, GROUP_APP, leases)
                             if r["owner"] == "worker-a" and r["shard"] in open_ids]
            step(f"half-way: kill -9 worker-a (it holds {', '.join(killed_shards) or 'nothing open'})")
            t_kill = a.signal(signal.SIGKILL)
            a.wait()
            killed = a
        if c == 8:
            opens = demo.open_shards(GROUP_STREAM)
            x, y = opens[-2]["shard"], opens[-1]["shard"]
            step(f"merging {x} and {y} while the workers read")
            demo.run("merge", GROUP_STREAM, x, y)
        if killed and a is killed and taken_over():
            step("worker-b has taken over the killed worker's shards; starting "
                 "worker-a again")
            a = start("worker-a")
        time.sleep(1)
    t0 = time.time()
    while a is killed and not taken_over() and time.time() - t0 < 60:
        time.sleep(0.2)
    if a is killed:
        step("starting worker-a again")
        a = start("worker-a")
    step(f"produced {GROUP_RECORDS} records; waiting until the group has read them all")

    def delivered():
        got = {}
        for w in runs:
            for t, r in w.records():
                got.setdefault(json.loads(r["data"])["i"], []).append((t, w))
        return got

    t0 = time.time()
    while time.time() - t0 < 120 and len(delivered()) < GROUP_RECORDS:
        time.sleep(0.5)
    time.sleep(2)
    got = delivered()
    for w in runs:
        if w is not killed:
            w.stop()
    table = demo.run("leases", GROUP_APP, "--leases", leases).stdout.decode()

    missing = [i for i in range(GROUP_RECORDS) if i not in got]
    dups = {i: v for i, v in got.items() if len(v) > 1}
    by_kill = sum(1 for v in dups.values() if min(v, key=lambda x: x[0])[1] is killed)
    order_ok = True
    for w in runs:
        last = {}
        for _, r in w.records():
            d = json.loads(r["data"])
            if d["n"] <= last.get(d["key"], -1):
                order_ok = False
            last[d["key"]] = d["n"]
    failover = []
    for sid in killed_shards:
        ts = [t for w in runs if w is not killed for t, r in w.records()
              if r["shard"] == sid and t > t_kill]
        if ts:
            failover.append(min(ts) - t_kill)

    print()
    print("summary (part 2)")
    print(f"  produced            {GROUP_RECORDS}")
    print(f"  delivered           {sum(len(v) for v in got.values())} lines by "
          f"{len(runs)} worker processes")
    print(f"  missing             {len(missing)}")
    print(f"  duplicated          {len(dups)}: {by_kill} read again after the kill "
          f"(the killed worker had delivered them after its last checkpoint),")
    print(f"                      {len(dups) - by_kill} when the restarted worker "
          f"took its share back (a lease moved from a live")
    print("                      worker is handed over at the last record it "
          "wrote: lease.handoff.timeout.ms)")
    print(f"  per-key order kept  {'yes' if order_ok else 'NO'} (within every worker)")
    if failover:
        print(f"  failover            {max(failover):.1f} s from the kill until worker-b read "
              f"its shards (10 s without a heartbeat, seen on the next one)")
    print("  shard tree")
    print_tree(demo.shards(GROUP_STREAM),
               lambda sid: sum(1 for w in runs for _, r in w.records() if r["shard"] == sid))
    print("  lease table (kncat leases)")
    for line in table.splitlines():
        print(f"    {line}")
    return not missing and order_ok


if __name__ == "__main__":
    sys.exit(main())
