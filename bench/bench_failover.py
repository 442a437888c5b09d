#!/usr/bin/env python3
"""The coordinated consumer's targets (DESIGN.md section 7), on kinesalite
with `kncat group` at its default settings (lease.duration.ms 10000,
lease.take.interval.ms 2000, checkpoint.interval.ms 5000; lease table in a
SQLite file):

  failover       SIGKILL of a worker -> the first record of each of its
                 shards delivered by another worker (the figure is the
                 last of its shards to get there)
  hand-over      SIGTERM of a worker -> the same
  hand-off       a worker joins and balances: for each shard moved to it
                 from a live worker, the gap between the old owner's last
                 record and the new owner's first, and the records both
                 delivered (a planned move should deliver none twice)
  memory         peak RSS (wait4) of one worker reading 64 shards to
                 their end (-e)
  CPU per MB     `kncat group -e` next to `kncat consume -e` on the same
                 1 KB records of 4 shards (user + sys from wait4)

Failover and hand-over: each run starts two workers on a fresh 4-shard
stream with records produced throughout (about 160/s), waits until each
holds two shards, kills one at a random moment, starts a third, waits
until it holds its share, stops one with SIGTERM at a random moment.  The times are read off the workers' -J
output, each line stamped as it arrives.  Printed next to the KCL's
(lease 10 s + a take cycle of 20 s for failover; about 20 s for hand-over,
as it does not release leases), with the ratios.

  python3 bench/bench_failover.py [--build DIR] [--runs 5] [--mb 48] [--rounds 5]
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import lab  # noqa: E402
from groupkit import (Producer, Worker, is_open, leases_json,  # noqa: E402
                      list_shards, payload, spread_keys)

KCL_FAILOVER_S = 30.0   # lease 10 s + take cycle 20 s
KCL_HANDOVER_S = 20.0   # no release: the next take cycle after expiry
TARGET_FAILOVER_S = 15.0
TARGET_HANDOVER_S = 5.0
# A hand-off: the owner's next renewal (lease.renew.interval.ms, 3.3 s by
# default) plus the application's poll and two writes.
TARGET_HANDOFF_S = 3.3 + 1.0
TARGET_RSS_MB = 48.0
TARGET_CPU_RATIO = 1.10

_n = 0


def unique(what):
    global _n
    _n += 1
    return f"bench-{what}-{os.getpid()}-{_n}"


def kncat_ok(kncat, env, *args, stdin=None):
    p = subprocess.run([kncat, *map(str, args)], env=env, input=stdin,
                       capture_output=True, timeout=600)
    if p.returncode:
        sys.stderr.write(p.stderr.decode(errors="replace"))
        raise SystemExit(f"kncat {' '.join(map(str, args))}: exit {p.returncode}")
    return p


def owners_of(kncat, env, app, store, stream, boto):
    try:
        rows = leases_json(kncat, env, app, store)
    except RuntimeError:
        return {}
    open_ids = {s["ShardId"] for s in list_shards(boto, stream) if is_open(s)}
    return {r["shard"]: r["owner"] for r in rows if r["shard"] in open_ids}


def wait_held(kncat, env, app, store, stream, boto, want, timeout=90):
    """Until every worker in `want` holds exactly `want[w]` shards."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owners = owners_of(kncat, env, app, store, stream, boto)
        count = {}
        for o in owners.values():
            count[o] = count.get(o, 0) + 1
        if count == want:
            return owners
        time.sleep(0.5)
    raise SystemExit(f"bench: the group did not settle to {want}: {owners}")


def first_elsewhere(shards, workers, t0, timeout=60):
    """Seconds from t0 until every shard had a record delivered by one of
    workers after t0."""
    deadline = t0 + timeout
    first = {}
    while time.monotonic() < deadline and len(first) < len(shards):
        for w in workers:
            for t, r in w.records():
                if t > t0 and r["shard"] in shards:
                    first[r["shard"]] = min(first.get(r["shard"], 1e9), t - t0)
        time.sleep(0.05)
    if len(first) < len(shards):
        raise SystemExit(f"bench: shards {set(shards) - set(first)} not taken over")
    return max(first.values())


def handoff_gaps(moved, old, new):
    """For each shard moved from worker old to worker new: seconds from
    old's last record of it to new's first, and records both delivered."""
    gaps, twice = [], 0
    for sid in moved:
        o = [(t, payload(r)["i"]) for t, r in old.records() if r["shard"] == sid]
        n = [(t, payload(r)["i"]) for t, r in new.records() if r["shard"] == sid]
        if not o or not n:
            raise SystemExit(f"bench: no records of {sid} on both sides")
        gaps.append(min(t for t, _ in n) - max(t for t, _ in o))
        twice += len({i for _, i in o} & {i for _, i in n})
    return max(gaps), twice


def one_run(kncat, k, tmp, boto, rnd):
    stream, app = unique("fo"), unique("app")
    env = lab.env_for(kinesis=k)
    store = f"sqlite:{os.path.join(tmp, app + '.db')}"
    kncat_ok(kncat, env, "create", stream, "--shards", 4)
    prod = Producer(boto, stream, spread_keys(16, "k"), interval=0.1)
    workers = []

    def start(wid):
        w = Worker(kncat, env, stream, app, store, wid, props={},
                   log_dir=tmp, verbose=False, extra=["-q"])
        workers.append(w)
        return w

    try:
        a, b = start("a"), start("b")
        wait_held(kncat, env, app, store, stream, boto, {"a": 2, "b": 2})
        prod.start()
        # The signals land at a random phase of the renewal and take
        # timers (seeing the group settle is in step with them).
        time.sleep(5 + rnd.uniform(0, 3.4))
        owners = wait_held(kncat, env, app, store, stream, boto, {"a": 2, "b": 2})
        mine = {s for s, o in owners.items() if o == "a"}
        t = a.signal(signal.SIGKILL)
        a.wait()
        failover = first_elsewhere(mine, [b], t)
        c = start("c")
        owners = wait_held(kncat, env, app, store, stream, boto, {"b": 2, "c": 2})
        # The table names c as soon as it asks; the shards move once b has
        # let go (its next renewal): wait for c's first records of them.
        moved = {s for s, o in owners.items() if o == "c"}
        first_elsewhere(moved, [c], time.monotonic() - 60, timeout=120)
        time.sleep(1)
        handoff = handoff_gaps(moved, b, c)
        time.sleep(3 + rnd.uniform(0, 2.0))
        mine = {s for s, o in owners.items() if o == "b"}
        t = b.signal(signal.SIGTERM)
        handover = first_elsewhere(mine, [c], t)
        if b.wait(30) != 0:
            raise SystemExit("bench: the worker stopped with SIGTERM failed")
    finally:
        prod.stop_ev.set()
        for w in workers:
            w.stop(30)
    if prod.ident:
        prod.finish()
    return failover, handover, handoff


TIME = "/usr/bin/time"


def run_measured(cmd, env):
    """Runs cmd with stdout to /dev/null; returns (CPU seconds, peak RSS MB).

    The peak RSS comes from /usr/bin/time when there is one: wait4's
    ru_maxrss also counts the memory of this (large) Python process that
    the child shares between fork and exec."""
    with tempfile.NamedTemporaryFile("r") as tf, open(os.devnull, "wb") as null:
        full = cmd
        if os.access(TIME, os.X_OK):
            full = [TIME, "-o", tf.name, "-f", "%M", *cmd]
        p = subprocess.Popen(full, env=env, stdout=null, stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        if rc:
            sys.stderr.write(err.decode(errors="replace")[-3000:])
            raise SystemExit(f"bench: {' '.join(cmd)}: exit {rc}")
        rss = ru.ru_maxrss / 1024.0
        if full is not cmd:
            rss = int(tf.read().strip().splitlines()[-1]) / 1024.0
    return ru.ru_utime + ru.ru_stime, rss


def make_input(path, n, size=1000):
    rnd = random.Random(7)
    with open(path, "wb") as f:
        for _ in range(n):
            key = b"%016x" % rnd.getrandbits(64)
            body = bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(50))
            f.write(key + b"\t" + (body * (size // 50 + 1))[:size] + b"\n")


def fmt_s(v):
    return f"{v:.1f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mb", type=float, default=48,
                    help="MB of 1 KB records for the CPU comparison")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    kncat = os.environ.get("KNCAT") or os.path.join(a.build, "kncat")
    if not os.access(kncat, os.X_OK):
        raise SystemExit(f"bench: {kncat} not found")
    tmp = tempfile.mkdtemp(prefix="bench_failover.")
    with lab.Kinesalite() as k:
        env = lab.env_for(kinesis=k)
        boto = lab.boto3_client("kinesis", k, attempts=5)

        fo, ho, hf, dup = [], [], [], 0
        rnd = random.Random(1)
        for i in range(a.runs):
            f, h, (g, d) = one_run(kncat, k, tmp, boto, rnd)
            fo.append(f)
            ho.append(h)
            hf.append(g)
            dup += d
            print(f"run {i + 1}/{a.runs}: failover {f:.1f} s, hand-over {h:.1f} s, "
                  f"hand-off {g:.1f} s ({d} records twice)", flush=True)

        # Memory: one worker, 64 shards, read to their end.
        s64 = unique("rss")
        kncat_ok(kncat, env, "create", s64, "--shards", 64)
        data = os.path.join(tmp, "rss.txt")
        make_input(data, 64 * 150)
        with open(data, "rb") as f:
            kncat_ok(kncat, env, "produce", s64, "-K", "\\t", stdin=f.read())
        _, rss = run_measured(
            [kncat, "-q", "group", s64, "--app", unique("rssapp"), "--leases",
             f"sqlite:{os.path.join(tmp, 'rss.db')}", "-e"], env)
        _, rss_consume = run_measured([kncat, "-q", "consume", s64, "-e"], env)
        print(f"peak RSS reading 64 shards (9.6 MB): group {rss:.1f} MB, "
              f"consume {rss_consume:.1f} MB", flush=True)

        # CPU per MB: group and consume on the same data.
        s4 = unique("cpu")
        kncat_ok(kncat, env, "create", s4, "--shards", 4)
        n = int(a.mb * 1e6 / 1000)
        data = os.path.join(tmp, "cpu.txt")
        make_input(data, n)
        with open(data, "rb") as f:
            kncat_ok(kncat, env, "produce", s4, "-K", "\\t", stdin=f.read())
        mb = n * 1000 / 1e6
        cpu = {"consume": [], "group": []}
        for r in range(a.rounds):
            c, _ = run_measured([kncat, "-q", "consume", s4, "-e"], env)
            cpu["consume"].append(c / mb)
            g, _ = run_measured(
                [kncat, "-q", "group", s4, "--app", unique("cpuapp"), "--leases",
                 f"sqlite:{os.path.join(tmp, f'cpu{r}.db')}", "-e"], env)
            cpu["group"].append(g / mb)
            print(f"round {r + 1}/{a.rounds}: CPU s/MB consume "
                  f"{cpu['consume'][-1]:.5f}, group {cpu['group'][-1]:.5f}",
                  flush=True)

    fmed, fmax = statistics.median(fo), max(fo)
    hmed, hmax = statistics.median(ho), max(ho)
    gmed_ho, gmax_ho = statistics.median(hf), max(hf)
    cmed, gmed = statistics.median(cpu["consume"]), statistics.median(cpu["group"])
    ratio = gmed / cmed
    rows = [
        ("failover (SIGKILL), median", fmt_s(fmed), "30 s (10 s lease + 20 s take cycle)",
         f"{fmed / KCL_FAILOVER_S:.2f}", f"<= {TARGET_FAILOVER_S:.0f} s",
         fmed <= TARGET_FAILOVER_S),
        ("failover (SIGKILL), max", fmt_s(fmax), "30 s",
         f"{fmax / KCL_FAILOVER_S:.2f}", f"<= {TARGET_FAILOVER_S:.0f} s",
         fmax <= TARGET_FAILOVER_S),
        ("hand-over (SIGTERM), median", fmt_s(hmed), "~20 s (no release)",
         f"{hmed / KCL_HANDOVER_S:.2f}", f"<= {TARGET_HANDOVER_S:.0f} s",
         hmed <= TARGET_HANDOVER_S),
        ("hand-over (SIGTERM), max", fmt_s(hmax), "~20 s",
         f"{hmax / KCL_HANDOVER_S:.2f}", f"<= {TARGET_HANDOVER_S:.0f} s",
         hmax <= TARGET_HANDOVER_S),
        ("hand-off (a worker joins), median", fmt_s(gmed_ho),
         "up to 30 s (KCL 3.x graceful hand-off)", f"{gmed_ho / 30.0:.2f}",
         f"<= {TARGET_HANDOFF_S:.1f} s", gmed_ho <= TARGET_HANDOFF_S),
        ("hand-off (a worker joins), max", fmt_s(gmax_ho), "up to 30 s",
         f"{gmax_ho / 30.0:.2f}", f"<= {TARGET_HANDOFF_S:.1f} s",
         gmax_ho <= TARGET_HANDOFF_S),
        ("records twice in hand-offs", str(dup), "-", "-", "0", dup == 0),
        ("peak RSS, 64 shards", f"{rss:.1f} MB", "-",
         f"{rss / rss_consume:.2f} of consume ({rss_consume:.1f} MB)",
         f"< {TARGET_RSS_MB:.0f} MB", rss < TARGET_RSS_MB),
        ("CPU s/MB, kncat consume", f"{cmed:.5f}", "-", "-", "", True),
        ("CPU s/MB, kncat group", f"{gmed:.5f}", "-", f"{ratio:.2f} of consume",
         f"< {TARGET_CPU_RATIO:.2f}x consume", ratio < TARGET_CPU_RATIO),
    ]
    print()
    print(f"kinesalite, default settings, {a.runs} runs; CPU: {mb:.1f} MB of 1 KB "
          f"records, 4 shards, median of {a.rounds}")
    head = ("", "kncat group", "KCL (DESIGN 7)", "ratio", "target", "")
    w = [max(len(str(r[i])) for r in rows + [head]) for i in range(5)]
    print("  ".join(str(head[i]).ljust(w[i]) for i in range(5)))
    for r in rows:
        print("  ".join(str(r[i]).ljust(w[i]) for i in range(5)) + "  " +
              ("ok" if r[5] else "MISSED"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
