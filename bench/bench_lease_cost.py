#!/usr/bin/env python3
"""What the lease table costs on DynamoDB: reads and writes counted at the
wire with real `kncat group` workers and, in the same run, groups of as
many real KCL 2.x and KCL 3.x workers (tests/lab/java, `make peers`),
next to formulas for the KCL and today's libkinesis design, at the
measured size and at 1,000 shards x 50 workers and 10,000 x 200.

  python3 bench/bench_lease_cost.py [--quick] [--shards 64] [--workers 8]
          [--steady 180] [--window 60] [--idle] [--no-events]
          [--kcl kcl2,kcl3|none] [--jvm-heap 160m] [--settle-kcl 420]
  python3 bench/bench_lease_cost.py --formulas-only [--shards S --workers W]
          [--item-bytes 250] [--ckpt-separate]
  python3 bench/bench_lease_cost.py --scale [--scale-shards 1000] [--mb 32]
          [--rounds 3] [--idle-seconds 60] [--scale-leases sqlite|dynamodb]
  python3 bench/bench_lease_cost.py --fleet [N] [--fleet-shards S] ...
          (N workers, default 200: the hottest item per 5-s window while
          settling, steady, after a kill and during a rolling redeploy;
          bench/lease_fleet.py says how)

Wire counts.  kinesalite serves the stream; dynalite the lease table,
behind a FaultProxy (tests/lab/faultproxy.py) whose observer,
DynamoCounter (tests/lab/wirecount.py), reads every request and response
of the workers (the lease table's, and those of any other table they
use, listed apart): per action (Scan, Query, GetItem, PutItem,
UpdateItem, DeleteItem, ...) requests, items read (ScannedCount for Scan
and Query, one per GetItem hit), items written, the items' bytes, and the
read and write capacity units DynamoDB would bill (reads in 4 KB units
per request, half for eventually consistent reads; writes in 1 KB units
per item, the larger of before and after, failed conditions included,
plus index writes).  The workers are pointed at the proxy with
AWS_ENDPOINT_URL_DYNAMODB and `-X dynamodb.endpoint=` (both, so the
DynamoDB endpoint never comes from the Kinesis one); the lease table is
watched with `kncat leases` straight on dynalite, outside the count.

Phases (records are produced on every shard once a second unless --idle,
so checkpoints are written as in a busy application):
  steady     the group balanced, for --steady seconds (default 180;
             --quick: 16 shards x 4 workers, 60 s)
  kill       SIGKILL of one worker, counted for --window seconds
             (default 60) from the kill: expiry, takes, balancing
  join       a new worker joins, counted for --window seconds: steals
(--no-events: steady only.)  Per phase: items read and RCU per shard per
minute, items written and WCU per lease per minute.

The KCL (--kcl; default: the modules `make peers` built): after kncat's
phases, W KCL 2.x workers, then W KCL 3.x workers (3.x mode), each kind on
a stream and lease table of its own behind the same counter, through the
lab's harness dev.libkinesis.lab.Consume, one JVM each (-Xmx --jvm-heap,
serial GC): polling, metrics off, failoverTimeMillis = --duration-ms,
shardSyncIntervalMillis 60000 (the KCL's default), a checkpoint every
--ckpt-ms while records flow.  The KCL 3.x's table is made beforehand
with its lease-owner index (dynalite cannot add it) and its first worker
starts alone until it has written its migration state (workers started
together race for it and the losers stop, tests/lab/README.md).  Counted:
the steady phase, once every lease has a live owner, every worker holds
some and the owners have not changed for 40 s (the KCL 3.x balances on
throughput, not counts), every table the workers name included.  Printed
next to kncat's steady phase with their ratios, and the goal: read units
per shard per minute at most 1/20 of the KCL 3.x's.

Formulas (per minute, S shards, W workers, b bytes a lease item, taken
from the wire run; reads of a Scan are rounded to 4 KB per 1 MB page):
  libkinesis         lease.members (the default): the leader's full shard
                     sync, two Scans, every lease.scan.interval.ms
                     (600000) when nothing announced a change: 0.2 items
                     per shard; a renewal every 2/5 of the lease duration
                     (15 writes per lease) and a heartbeat per worker as
                     often, one write of the membership item (about 60
                     bytes a worker, W * 15 writes in 1 KB units / S).
  libkinesis, lease.members=false (the design before the membership):
                     every worker scans the table (strongly consistent) on
                     every take round, lease.take.interval.ms = 2000, and
                     twice on every shard sync, shard.sync.interval.ms =
                     30000: W * (60/2 + 2*60/30) = 34 W items per shard.
                     A lease is renewed lease.renew.interval.ms (0: a
                     third of lease.duration.ms 10000) after its last
                     write, the checkpoint riding on the renewal: 18
                     writes per lease.  (--ckpt-separate: the design
                     before commit a803a72, a checkpoint written every
                     checkpoint.interval.ms 5000 on its own while records
                     flowed, renewing the lease: 24 writes busy.)
  KCL 2.x (v2.7.3)   LeaseManagementConfig: failoverTimeMillis 10000,
                     epsilonMillis 25, consistentReads false;
                     DynamoDBLeaseCoordinator: takerIntervalMillis =
                     (failover + epsilon) * 2 = 20050, every worker scans
                     (eventually consistent) each take; renewerInterval =
                     failover / 3 - epsilon = 3308 ms (18.1 writes per
                     lease); DeterministicShuffleShardSyncLeaderDecider:
                     every worker scans every 5 min
                     (ELECTION_SCHEDULING_INTERVAL_MILLIS); the leader's
                     PeriodicShardSyncManager scans every 2 min
                     (DEFAULT_PERIODIC_SHARD_SYNC_INTERVAL_MILLIS).
                     Checkpoints are the application's: a last row adds
                     them at kncat's rate (every checkpoint.interval.ms),
                     on top of renewals.
  KCL 3.x (v3.5.1)   LeaseManagementConfig: leaseAssignmentIntervalMillis
                     = 2 * failoverTimeMillis = 20000: only the leader's
                     LeaseAssignmentManager scans the lease table
                     (eventually consistent) and the WorkerMetricStats
                     table; every worker's DynamoDBLeaseDiscoverer queries
                     LeaseOwnerToLeaseKeyIndex (KEYS_ONLY, eventually
                     consistent) every leaseAssignmentInterval / 2 -
                     epsilon = 9975 ms for its own lease keys (a GetItem
                     only for a lease new to it); renewals as in 2.x;
                     each worker writes its WorkerMetricStats item every
                     workerMetricsReporterFreqInMillis = 30000 and checks
                     the leader lock (DynamoDBLockBasedLeaderDecider,
                     dynamoDbLockBasedLeaderHeartbeatPeriodInMillis 30000)
                     with a GetItem; the leader heartbeats it.
  (Sources: github.com/awslabs/amazon-kinesis-client, files
  leases/LeaseManagementConfig.java, leases/dynamodb/
  DynamoDBLeaseCoordinator.java, DynamoDBLeaseRefresher.java,
  DynamoDBLeaseDiscoverer.java, coordinator/assignment/
  LeaseAssignmentManager.java, leader/DynamoDBLockBasedLeaderDecider.java,
  common/CommonCalculations.java.)

Note that "items read" and "read units" differ by a factor of up to 16 to
32: a 4 KB unit reads about 16 lease items of 250 bytes, 32 eventually
consistent.  The KCL figures of DESIGN.md section 7 at 1,000 x 50 (about
8 reads per shard per minute for the 2.x, 0.4 for the 3.x) are read
units (the 8 as if strongly consistent); in items the KCL 2.x reads about
160 per shard per minute and the 3.x about 10 (3 from the leader's scans,
6 from each owner's index queries).

Simulator.  If `build/tests/sim/kn_sim --help` mentions --cost, the rows
"simulator" at 1,000 x 50 and 10,000 x 200 come from
  kn_sim --cost --shards S --workers W --seconds T   (T: --sim-seconds)
which prints one JSON line with at least {"seconds": T, "items_read": n,
"rcu": x, "items_written": n, "wcu": x} (counts over the whole run for S
shards) or the per-minute figures themselves ("items_read_per_shard_min",
"rcu_per_shard_min", "items_written_per_lease_min",
"wcu_per_lease_min").  Otherwise those rows say "simulator: not
available".

Scale (--scale).  One `kncat group` worker on a stream of --scale-shards
shards (default 1,000; kinesalite's shard limit raised to fit) with --mb
MB of 1 KB records spread over every shard, read to the end (-e), next to
`kncat consume -e` on the same data, interleaved for --rounds rounds:
peak RSS (target < 128 MB) and CPU seconds per MB (target within 10% of
consume).  The machine is shared by several people and has 2 cores: CPU
figures are noisy, so runs are interleaved and the medians compared.
Then both run --idle-seconds (default 60) at the tip of the stream (-o
latest, no records): the CPU a minute each spends just keeping up with
1,000 shards (for the group: taking, renewing and scanning 1,000 leases),
which is what the CPU per MB of a short drain is mostly made of.
"""

import argparse
import json
import math
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
sys.path.insert(0, os.path.join(SRC, "bench"))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from groupkit import Producer, Worker, leases_json, spread_keys  # noqa: E402
sys.path.insert(0, os.path.join(SRC, "tests", "interop"))
from peers import KclWorker, create_kcl3_table, installed  # noqa: E402
from wirecount import (READ_UNIT, DynamoCounter, Tally, diff,  # noqa: E402
                       item_size, total, write_units)

TARGET_RSS_MB = 128.0
TARGET_CPU_RATIO = 1.10
DEFAULT_ITEM_BYTES = 250
SIZES = [(1000, 50), (10000, 200)]

_n = 0


def unique(what):
    global _n
    _n += 1
    return f"cost-{what}-{os.getpid()}-{_n}"


def kncat_ok(kncat, env, *args, stdin=None, timeout=900):
    p = subprocess.run([kncat, *map(str, args)], env=env, input=stdin,
                       capture_output=True, timeout=timeout)
    if p.returncode:
        sys.stderr.write(p.stderr.decode(errors="replace"))
        raise SystemExit(f"kncat {' '.join(map(str, args))}: exit {p.returncode}")
    return p


# --------------------------------------------------------------------------
# Formulas


def scan_rcu(items, item_bytes, consistent):
    """Units of one whole-table Scan: 4 KB units per 1 MB page."""
    total_bytes = items * item_bytes
    pages = max(1, math.ceil(total_bytes / (1 << 20)))
    units = 0
    left = total_bytes
    for _ in range(pages):
        page = min(left, 1 << 20)
        left -= page
        units += max(1, math.ceil(page / READ_UNIT))
    return units if consistent else units / 2.0


def libkn_writes_per_min(renew_ms, ckpt_ms, busy, separate=False):
    """Writes of one lease a minute: a renewal renew_ms after the last
    write, carrying the checkpoint if one is due.  separate: the design
    before checkpoints rode on renewals (commit a803a72), when a
    checkpoint was written every ckpt_ms on its own while records flowed,
    and counted as a renewal."""
    if not separate:
        return 60000.0 / renew_ms
    t, last, n = 0.0, 0.0, 0
    next_ck = ckpt_ms if busy else float("inf")
    horizon = 600000.0
    while True:
        t = min(last + renew_ms, next_ck)
        if t > horizon:
            break
        if t == next_ck:
            next_ck += ckpt_ms
        last = t
        n += 1
    return n * 60000.0 / horizon


def libkn_members(S, W, b, p):
    """With lease.members (the default): a settled group lists nothing but
    the leader's two listings (a full shard sync) every
    lease.scan.interval.ms; each lease is renewed every renew interval (2/5
    of the duration) and each worker writes its heartbeat as often, one
    write of the membership item (about 60 bytes a worker), whose answer
    costs no read."""
    scans = 2 * 60000.0 / p["scan_ms"]
    writes = 60000.0 / p["members_renew_ms"]
    item = 20 + 60 * W
    heart = W * 60000.0 / p["members_renew_ms"]
    return {"items_read": scans, "rcu": scans * scan_rcu(S, b, True) / S,
            "items_written": writes + heart / S,
            "wcu": writes * write_units(b) + heart * write_units(item) / S}


def libkn_today(S, W, b, p):
    scans = W * (60000.0 / p["take_ms"] + 2 * 60000.0 / p["sync_ms"])
    writes = libkn_writes_per_min(p["renew_ms"], p["ckpt_ms"], p["busy"],
                                  p["separate"])
    return {"items_read": scans, "rcu": scans * scan_rcu(S, b, True) / S,
            "items_written": writes, "wcu": writes * write_units(b)}


KCL_FAILOVER_MS, KCL_EPSILON_MS = 10000, 25
KCL_RENEW_MS = KCL_FAILOVER_MS / 3 - KCL_EPSILON_MS            # 3308.3
KCL2_TAKE_MS = (KCL_FAILOVER_MS + KCL_EPSILON_MS) * 2           # 20050
KCL2_ELECTION_MS = 5 * 60 * 1000
KCL_AUDITOR_MS = 2 * 60 * 1000
KCL3_ASSIGN_MS = 2 * KCL_FAILOVER_MS                            # 20000
KCL3_DISCOVER_MS = KCL3_ASSIGN_MS / 2 - KCL_EPSILON_MS          # 9975
KCL3_METRICS_MS = 30000
KCL3_LOCK_MS = 30000
KCL3_INDEX_ENTRY = len("leaseKey") + 20 + len("leaseOwner") + 36
KCL3_METRICS_ITEM = 400
KCL3_LOCK_ITEM = 200


def kcl2(S, W, b, ckpt_per_min):
    scans = (W * 60000.0 / KCL2_TAKE_MS + W * 60000.0 / KCL2_ELECTION_MS
             + 60000.0 / KCL_AUDITOR_MS)
    writes = 60000.0 / KCL_RENEW_MS + ckpt_per_min
    return {"items_read": scans, "rcu": scans * scan_rcu(S, b, False) / S,
            "items_written": writes, "wcu": writes * write_units(b)}


def kcl3(S, W, b, ckpt_per_min):
    lease_scans = 60000.0 / KCL3_ASSIGN_MS + 60000.0 / KCL_AUDITOR_MS
    queries = W * 60000.0 / KCL3_DISCOVER_MS
    per_worker = S / W
    metric_scans = 60000.0 / KCL3_ASSIGN_MS
    lock_reads = W * 60000.0 / KCL3_LOCK_MS
    items = (lease_scans * S + queries * per_worker + metric_scans * W
             + lock_reads)
    rcu = (lease_scans * scan_rcu(S, b, False)
           + queries * scan_rcu(per_worker, KCL3_INDEX_ENTRY, False)
           + metric_scans * scan_rcu(W, KCL3_METRICS_ITEM, False)
           + lock_reads * 1.0)
    other_writes = W * 60000.0 / KCL3_METRICS_MS + 60000.0 / KCL3_LOCK_MS
    writes = 60000.0 / KCL_RENEW_MS + ckpt_per_min + other_writes / S
    return {"items_read": items / S, "rcu": rcu / S, "items_written": writes,
            "wcu": writes * write_units(b)}


# --------------------------------------------------------------------------
# The simulator's figures (if it counts them)


def sim_figures(build, S, W, seconds):
    sim = os.path.join(build, "tests", "sim", "kn_sim")
    if not os.access(sim, os.X_OK):
        return None, "simulator: not available (no kn_sim)"
    h = subprocess.run([sim, "--help"], capture_output=True, text=True)
    if "--cost" not in h.stdout + h.stderr:
        return None, "simulator: not available (kn_sim has no --cost)"
    p = subprocess.run([sim, "--cost", "--shards", str(S), "--workers", str(W),
                        "--seconds", str(seconds)], capture_output=True,
                       text=True, timeout=3600)
    line = next((x for x in reversed(p.stdout.splitlines())
                 if x.strip().startswith("{")), None)
    if p.returncode or line is None:
        return None, f"simulator: kn_sim --cost failed (exit {p.returncode})"
    j = json.loads(line)
    if "items_read_per_shard_min" in j:
        return {"items_read": j["items_read_per_shard_min"],
                "rcu": j.get("rcu_per_shard_min", float("nan")),
                "items_written": j["items_written_per_lease_min"],
                "wcu": j.get("wcu_per_lease_min", float("nan"))}, None
    mins = j["seconds"] / 60.0
    return {"items_read": j["items_read"] / S / mins,
            "rcu": j.get("rcu", float("nan")) / S / mins,
            "items_written": j["items_written"] / S / mins,
            "wcu": j.get("wcu", float("nan")) / S / mins}, None


# --------------------------------------------------------------------------
# Wire counts


def owners_of(kncat, env, app, store):
    try:
        rows = leases_json(kncat, env, app, store)
    except RuntimeError:
        return {}
    return {r["shard"]: r.get("owner") for r in rows
            if r.get("checkpoint") != "SHARD_END"}


def balanced(owners, live, S):
    count = {}
    for o in owners.values():
        if o is not None:
            count[o] = count.get(o, 0) + 1
    if set(count) != set(live) or sum(count.values()) != S:
        return False
    lo, hi = S // len(live), -(-S // len(live))
    return all(lo <= c <= hi for c in count.values())


def wait_balanced(kncat, env, app, store, live, S, timeout):
    deadline = time.monotonic() + timeout
    owners = {}
    while time.monotonic() < deadline:
        owners = owners_of(kncat, env, app, store)
        if balanced(owners, live, S):
            return True
        time.sleep(1.0)
    print(f"  (not balanced over {sorted(live)} after {timeout:.0f} s)", flush=True)
    return False


def rates(t: Tally, S, seconds):
    m = seconds / 60.0
    return {"items_read": t.items_read / S / m, "rcu": t.rcu / S / m,
            "items_written": t.items_written / S / m,
            "wcu": t.total_wcu / S / m}


def per_action(snap, S, seconds):
    m = seconds / 60.0
    out = []
    for a, t in sorted(snap.items()):
        if not t.requests:
            continue
        out.append(f"    {a:<14} {t.requests / m:8.1f} req/min  "
                   f"{t.items_read / S / m:8.2f} read/shard/min  "
                   f"{t.rcu / S / m:7.3f} RCU/shard/min  "
                   f"{t.items_written / S / m:6.2f} written/lease/min  "
                   f"{t.total_wcu / S / m:6.2f} WCU/lease/min  "
                   f"{(t.bytes_read + t.bytes_written) / m / 1024:7.1f} KB/min"
                   + (f"  ({t.failed_writes} failed conditions)"
                      if t.failed_writes else "")
                   + (f"  ({t.errors} errors)" if t.errors - t.failed_writes > 0
                      else ""))
    return "\n".join(out)


KINDS = {"kncat": "libkinesis", "kcl2": "KCL 2.x", "kcl3": "KCL 3.x"}


def kcl_opts(a, kind):
    """The harness's options at the KCL's own defaults where the lease
    table is concerned (failoverTimeMillis 10000, shardSyncIntervalMillis
    60000, parentShardPollIntervalMillis 10000), checkpoints at kncat's
    rate."""
    o = {"failover-ms": int(a.duration_ms), "shard-sync-ms": 60000,
         "parent-poll-ms": 10000, "checkpoint-ms": int(a.ckpt_ms),
         "idle-ms": 1000}
    if kind == "kcl3":
        o["client-version"] = "3x"
    return o


def settle(kncat, env, app, store, live, S, timeout, strict):
    """Waits until the group is balanced (strict: every worker within one
    lease of S/W, what kncat reaches) or, for the KCL, until every lease
    has a live owner, every worker holds some and the owners have not
    changed for 40 s (the KCL 3.x balances on throughput, not on counts).
    Returns the owners."""
    deadline = time.monotonic() + timeout
    owners, since, last = {}, time.monotonic(), None
    while time.monotonic() < deadline:
        owners = owners_of(kncat, env, app, store)
        if balanced(owners, live, S):
            return owners
        full = len(owners) == S and set(owners.values()) == set(live)
        if owners != last:
            last, since = owners, time.monotonic()
        elif not strict and full and time.monotonic() - since >= 40:
            return owners
        time.sleep(2.0)
    print(f"  (not settled over {len(live)} workers after {timeout:.0f} s)", flush=True)
    return owners


def spread(owners):
    count = {}
    for o in owners.values():
        count[o] = count.get(o, 0) + 1
    return "/".join(str(c) for c in sorted(count.values(), reverse=True))


def wait_migration(ddb, table, timeout):
    """Waits until the KCL 3.x has written its migration state item."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = ddb.get_item(TableName=table, Key={"leaseKey": {"S": "Migration3.0"}},
                         ConsistentRead=True)
        if "Item" in r:
            return
        time.sleep(1.0)
    print(f"  (no migration state item after {timeout:.0f} s)", flush=True)


def wire_run(a, kncat, kind="kncat"):
    """One wire run of W workers of kind (kncat, kcl2, kcl3); returns the
    phases [(name, seconds, {action: Tally}, note)], the average lease
    item size and {table: Tally} of the steady phase."""
    S, W = a.shards, a.workers
    phases, steady_tables = [], {}
    with lab.Kinesalite() as k, lab.Dynalite() as d:
        table = unique("leases")
        # Only the workers talk through the proxy: everything is counted,
        # tables of their own besides the lease table included.
        counter = DynamoCounter()
        with FaultProxy(d, observer=counter.observe, keep_log=False) as proxy:
            direct = lab.env_for(kinesis=k, dynamodb=d)
            wenv = lab.env_for(kinesis=k, dynamodb=proxy.endpoint)
            stream, app = unique("stream"), unique("app")
            store = f"dynamodb:{table}"
            kncat_ok(kncat, direct, "create", stream, "--shards", S)
            if kind == "kcl3":
                # its lease-owner index, which dynalite cannot add later
                create_kcl3_table(lab.boto3_client("dynamodb", d), table)
            boto = lab.boto3_client("kinesis", k, attempts=5)
            prod = None
            if not a.idle:
                prod = Producer(boto, stream, spread_keys(S, "k"), interval=1.0)
            tmp = tempfile.mkdtemp(prefix="bench_lease_cost.")
            workers = {}
            jvm = [f"-Xmx{a.jvm_heap}", "-XX:+UseSerialGC", "-Xss512k",
                   "-XX:TieredStopAtLevel=1"]

            def start(wid):
                if kind == "kncat":
                    workers[wid] = Worker(
                        kncat, wenv, stream, app, store, wid,
                        props={"dynamodb.endpoint": proxy.endpoint},
                        log_dir=tmp, verbose=False, extra=["-q"])
                else:
                    opts = dict(kcl_opts(a, kind), table=table)
                    workers[wid] = KclWorker(
                        kind, wenv, stream, app, wid, k.endpoint,
                        proxy.endpoint, opts, log_dir=tmp, jvm=jvm)

            try:
                if prod:
                    prod.start()
                start("w0")
                if kind == "kcl3":
                    # KCL 3.x workers started at once on a new table race to
                    # write its migration state; the losers never initialize
                    # ("Failed to create migration state for
                    # CLIENT_VERSION_3X", then "AssignmentMode is not
                    # initialized" 20 times) and stop: the first goes alone
                    wait_migration(lab.boto3_client("dynamodb", d), table, 120)
                for i in range(1, W):
                    start(f"w{i}")
                print(f"wire ({KINDS[kind]}): {S} shards x {W} workers on dynalite, "
                      f"{'idle' if a.idle else 'a record a second on every shard'}",
                      flush=True)
                t0 = time.monotonic()
                owners = settle(kncat, direct, app, store, set(workers), S,
                                a.settle if kind == "kncat" else a.settle_kcl,
                                kind == "kncat")
                print(f"  settled after {time.monotonic() - t0:.0f} s "
                      f"(leases per worker {spread(owners)})", flush=True)
                time.sleep(5)

                def phase(name, seconds, event=None):
                    s0, t = counter.snapshot(), time.monotonic()
                    b0 = counter.by_table()
                    note = event() if event else ""
                    time.sleep(seconds)
                    s1, el = counter.snapshot(), time.monotonic() - t
                    d_ = diff(s1, s0)
                    phases.append((name, el, d_, note))
                    if name == "steady":
                        steady_tables.update(
                            {n: (t1.minus(b0.get(n, Tally())), el)
                             for n, t1 in counter.by_table().items()})
                    r = rates(total(d_), S, el)
                    print(f"  {name}: {el:.0f} s{note}: "
                          f"{r['items_read']:.1f} items read/shard/min, "
                          f"{r['rcu']:.3f} RCU/shard/min, "
                          f"{r['items_written']:.1f} written/lease/min, "
                          f"{r['wcu']:.1f} WCU/lease/min", flush=True)
                    return d_

                dead = [w.wid for w in workers.values() if w.proc.poll() is not None]
                if dead:
                    print(f"  workers that stopped on their own: {dead}", flush=True)
                phase("steady", a.steady)
                print(f"  after steady: leases per worker "
                      f"{spread(owners_of(kncat, direct, app, store))}", flush=True)
                if not a.no_events and kind == "kncat":
                    victim = sorted(workers)[0]

                    def kill():
                        workers[victim].signal(signal.SIGKILL)
                        workers[victim].wait(10)
                        del workers[victim]
                        return f" (SIGKILL of {victim})"

                    phase("kill", a.window, kill)
                    wait_balanced(kncat, direct, app, store, set(workers), S, 60)

                    def join():
                        start("joined")
                        return " (worker 'joined' started)"

                    phase("join", a.window, join)
            finally:
                if prod:
                    prod.stop_ev.set()
                for w in workers.values():
                    if w.proc.poll() is not None:
                        print(f"  worker {w.wid} exited early ({w.proc.returncode}): "
                              f"{w.stderr()[-500:]}", flush=True)
                for w in workers.values():   # all at once: JVMs stop slowly
                    if w.proc.poll() is None:
                        w.proc.send_signal(signal.SIGTERM if kind == "kncat"
                                           else signal.SIGKILL)
                for w in workers.values():
                    w.wait(30)
            shadow = counter.table(table).items.values()
            sizes = [item_size(i) for i in shadow
                     if i.get("entityType", {}).get("S", "LEASE") == "LEASE"
                     and "checkpoint" in i]
            b = round(sum(sizes) / len(sizes)) if sizes else DEFAULT_ITEM_BYTES
            tables = {n: t for n, t in steady_tables.items() if n != "-"}
            if tables:
                print(f"  tables the workers used ({KINDS[kind]}, steady phase, per minute):")
                for n, (t, el) in sorted(tables.items()):
                    m = el / 60.0
                    whole = counter.by_table().get(n, Tally()).requests
                    print(f"    {n}{' (leases)' if n == table else ''}: "
                          f"{t.requests / m:.1f} requests ({whole} in the whole run), "
                          f"{t.items_read / m:.1f} items read, {t.rcu / m:.2f} RCU, "
                          f"{t.items_written / m:.1f} written, {t.total_wcu / m:.1f} WCU")
    return phases, b


# --------------------------------------------------------------------------
# The tables


def fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 0.1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def ratio(v, ref):
    if v is None or ref is None or not ref or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v / ref:.2f}x"


COLS = [("items_read", "items read/shard/min"), ("rcu", "RCU/shard/min"),
        ("items_written", "items written/lease/min"), ("wcu", "WCU/lease/min")]


def print_block(title, rows):
    """rows: (name, figures or None, note); ratios against the rows named
    KCL 2.x and KCL 3.x."""
    ref2 = next((f for n, f, _ in rows if n.startswith("KCL 2.x")), None)
    ref3 = next((f for n, f, _ in rows if n.startswith("KCL 3.x")), None)
    head = ["", *[c[1] for c in COLS], "reads/KCL2", "reads/KCL3", "RCU/KCL3",
            "WCU/KCL3"]
    table = [head]
    for name, f, _ in rows:
        if f is not None:
            table.append([name, *[fmt(f[c]) for c, _ in COLS],
                          ratio(f["items_read"], ref2 and ref2["items_read"]),
                          ratio(f["items_read"], ref3 and ref3["items_read"]),
                          ratio(f["rcu"], ref3 and ref3["rcu"]),
                          ratio(f["wcu"], ref3 and ref3["wcu"])])
    w = [max(len(r[i]) for r in table) for i in range(len(head))]
    w[0] = max([w[0]] + [len(n) for n, _, _ in rows])
    print(f"\n{title}")
    print("  " + "  ".join(c.rjust(w[i]) if i else c.ljust(w[i])
                           for i, c in enumerate(head)))
    it = iter(table[1:])
    for name, f, note in rows:
        if f is None:
            print("  " + name.ljust(w[0]) + "  " + (note or "-"))
        else:
            r = next(it)
            print("  " + "  ".join(c.rjust(w[i]) if i else c.ljust(w[i])
                                   for i, c in enumerate(r)))


def params_of(a):
    renew = a.renew_ms or a.duration_ms / 3.0
    return {"take_ms": a.take_ms, "sync_ms": a.sync_ms, "renew_ms": renew,
            "members_renew_ms": a.renew_ms or a.duration_ms * 2 / 5.0,
            "scan_ms": a.scan_ms,
            "ckpt_ms": a.ckpt_ms, "busy": not a.idle,
            "separate": a.ckpt_separate}


def kcl_rows(S, W, b, ckpt):
    rows = [("KCL 2.x (formula, renewals only)", kcl2(S, W, b, 0.0), None),
            ("KCL 3.x (formula, renewals only)", kcl3(S, W, b, 0.0), None)]
    if ckpt:
        rows.append((f"KCL 3.x (formula) + {ckpt:.0f} checkpoints/min",
                     kcl3(S, W, b, ckpt), None))
    return rows


def goal_line(rows):
    """The goal of DESIGN.md: lease-table read units per shard per minute
    at most 1/20 of the KCL 3.x's, measured in the same run."""
    kn = next((f for n, f, _ in rows if n == "libkinesis wire: steady"), None)
    k3 = next((f for n, f, _ in rows if n == "KCL 3.x wire: steady"), None)
    k2 = next((f for n, f, _ in rows if n == "KCL 2.x wire: steady"), None)
    if kn is None:
        return
    print("\nsteady state, measured in this run, kncat group / KCL:")
    for name, k in (("KCL 2.x", k2), ("KCL 3.x", k3)):
        if k is None:
            continue
        print(f"  kncat / {name}: items read {ratio(kn['items_read'], k['items_read'])}, "
              f"read units {ratio(kn['rcu'], k['rcu'])}, "
              f"items written {ratio(kn['items_written'], k['items_written'])}, "
              f"write units {ratio(kn['wcu'], k['wcu'])}")
    if k3 is not None and k3["rcu"]:
        r = kn["rcu"] / k3["rcu"]
        print(f"  lease-table read units per shard per minute, kncat / KCL 3.x: "
              f"{r:.4f} (1/{1 / r if r else float('inf'):.0f}); goal <= 1/20: "
              f"{'met' if r <= 0.05 else 'MISSED'}")


def cost_main(a, kncat):
    p = params_of(a)
    ckpt = 0.0 if a.idle else 60000.0 / a.ckpt_ms
    phases, b = [], a.item_bytes or DEFAULT_ITEM_BYTES
    measured = []
    if not a.formulas_only:
        phases, b = wire_run(a, kncat)
        b = a.item_bytes or b
        for kind in a.kcl:
            kp, _ = wire_run(a, kncat, kind)
            measured += [(KINDS[kind], *x) for x in kp]
        print("\nper action (wire):")
        for name, el, d_, note in phases:
            print(f"  libkinesis {name} ({el:.0f} s{note}):")
            print(per_action(d_, a.shards, el))
        for who, name, el, d_, note in measured:
            print(f"  {who} {name} ({el:.0f} s{note}):")
            print(per_action(d_, a.shards, el))
    print(f"\nlease item: {b} bytes (average on the wire).  The KCL formula rows "
          f"count renewals; its checkpoints are the application's (the last row "
          f"adds one every {a.ckpt_ms / 1000:g} s, kncat's rate, which kncat "
          f"writes with its renewals); the KCL wire rows checkpoint every "
          f"{a.ckpt_ms / 1000:g} s while records flow" if ckpt else
          f"\nlease item: {b} bytes (average on the wire); no records: no "
          f"checkpoints")
    S, W = a.shards, a.workers
    rows = [("libkinesis, lease.members=false (formula)",
             libkn_today(S, W, b, p), None),
            ("libkinesis (formula)", libkn_members(S, W, b, p), None)]
    for name, el, d_, _ in phases:
        rows.append((f"libkinesis wire: {name}", rates(total(d_), S, el), None))
    for who, name, el, d_, _ in measured:
        rows.append((f"{who} wire: {name}", rates(total(d_), S, el), None))
    print_block(f"{S} shards x {W} workers", rows + kcl_rows(S, W, b, ckpt))
    for S2, W2 in SIZES:
        sim, why = sim_figures(a.build, S2, W2, a.sim_seconds)
        rows2 = [("libkinesis, lease.members=false (formula)",
                  libkn_today(S2, W2, b, p), None),
                 ("libkinesis (formula)", libkn_members(S2, W2, b, p), None),
                 ("libkinesis (simulator)", sim, why)]
        print_block(f"{S2} shards x {W2} workers", rows2 + kcl_rows(S2, W2, b, ckpt))
    print("\nratios: items read against the KCL 2.x and 3.x; read and write "
          "units against the KCL 3.x (the first row of each: measured where "
          "there is a wire row, else the formula).  Reads are items evaluated "
          "(a Scan's ScannedCount); RCU in 4 KB units, halved for eventually "
          "consistent reads (the KCL's); WCU in 1 KB units, index writes "
          "included.  Everything counted on every table the workers used.")
    goal_line(rows)
    print(f"\n(figures from a shared 2-core machine; JVMs with -Xmx{a.jvm_heap})"
          if a.kcl and not a.formulas_only else "")
    return 0


# --------------------------------------------------------------------------
# One worker on 1,000 shards


TIME = "/usr/bin/time"


def run_measured(cmd, env):
    """(CPU seconds, peak RSS MB, wall seconds) of cmd, stdout discarded."""
    with tempfile.NamedTemporaryFile("r") as tf, open(os.devnull, "wb") as null:
        full = cmd
        if os.access(TIME, os.X_OK):
            full = [TIME, "-o", tf.name, "-f", "%M", *cmd]
        t = time.monotonic()
        p = subprocess.Popen(full, env=env, stdout=null, stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t
        rc = os.waitstatus_to_exitcode(status)
        if rc:
            sys.stderr.write(err.decode(errors="replace")[-3000:])
            raise SystemExit(f"bench: {' '.join(cmd)}: exit {rc}")
        rss = ru.ru_maxrss / 1024.0
        if full is not cmd:
            rss = int(tf.read().strip().splitlines()[-1]) / 1024.0
    return ru.ru_utime + ru.ru_stime, rss, wall


def run_for(cmd, env, seconds):
    """(CPU seconds, peak RSS MB) of cmd run for seconds, then SIGTERM."""
    with tempfile.NamedTemporaryFile("r") as tf, open(os.devnull, "wb") as null:
        full = [TIME, "-o", tf.name, "-f", "%M", *cmd] if os.access(TIME, os.X_OK) else cmd
        p = subprocess.Popen(full, env=env, stdout=null, stderr=subprocess.DEVNULL)
        time.sleep(seconds)
        if full is cmd:
            p.send_signal(signal.SIGTERM)
        else:   # /usr/bin/time passes nothing on: signal its child
            for c in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split():
                os.kill(int(c), signal.SIGTERM)
        _, status, ru = os.wait4(p.pid, 0)
        rss = ru.ru_maxrss / 1024.0
        if full is not cmd:
            try:
                rss = int(tf.read().strip().splitlines()[-1]) / 1024.0
            except (ValueError, IndexError):
                pass
    return ru.ru_utime + ru.ru_stime, rss


def put_spread(kinesis, stream, keys, n, size=1000):
    """n records of size bytes, key i % len(keys), with PutRecords (500 a
    call, failed entries sent again)."""
    rnd = random.Random(7)
    batch = []
    for i in range(n):
        body = bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(50))
        batch.append({"PartitionKey": keys[i % len(keys)],
                      "Data": (body * (size // 50 + 1))[:size]})
        if len(batch) == 500 or i == n - 1:
            for _ in range(100):
                r = kinesis.put_records(StreamName=stream, Records=batch)
                batch = [e for e, x in zip(batch, r["Records"]) if "ErrorCode" in x]
                if not batch:
                    break
                time.sleep(0.2)
            else:
                raise SystemExit("bench: records could not be stored")


def scale_main(a, kncat):
    S = a.scale_shards
    n = int(a.mb * 1e6 / 1000)
    mb = n * 1000 / 1e6
    tmp = tempfile.mkdtemp(prefix="bench_scale.")
    with lab.Kinesalite(shard_limit=S + 100) as k, lab.Dynalite() as d:
        env = lab.env_for(kinesis=k, dynamodb=d)
        stream = unique("scale")
        t = time.monotonic()
        kncat_ok(kncat, env, "create", stream, "--shards", S)
        print(f"scale: stream of {S} shards created in {time.monotonic() - t:.0f} s",
              flush=True)
        t = time.monotonic()
        put_spread(lab.boto3_client("kinesis", k, attempts=5), stream,
                   spread_keys(S, "k"), n)
        print(f"scale: {mb:.1f} MB of 1 KB records ({n // S} or more on every "
              f"shard) produced in {time.monotonic() - t:.0f} s", flush=True)
        res = {"consume": [], "group": []}
        for r in range(a.rounds):
            for what in ("consume", "group") if r % 2 == 0 else ("group", "consume"):
                if what == "consume":
                    cmd = [kncat, "-q", "consume", stream, "-e"]
                else:
                    app = unique("scaleapp")
                    store = (f"dynamodb:{app}" if a.scale_leases == "dynamodb"
                             else f"sqlite:{os.path.join(tmp, app + '.db')}")
                    cmd = [kncat, "-q", "group", stream, "--app", app,
                           "--leases", store, "-e"]
                cpu, rss, wall = run_measured(cmd, env)
                res[what].append((cpu / mb, rss, wall))
                print(f"round {r + 1}/{a.rounds}: {what:<7} CPU {cpu / mb:.4f} s/MB, "
                      f"peak RSS {rss:.1f} MB, {wall:.0f} s", flush=True)
        idle = {"consume": [], "group": []}
        if a.idle_seconds > 0:
            for what in ("consume", "group"):
                if what == "consume":
                    cmd = [kncat, "-q", "consume", stream, "-o", "latest"]
                else:
                    app = unique("idleapp")
                    cmd = [kncat, "-q", "group", stream, "--app", app, "--leases",
                           f"sqlite:{os.path.join(tmp, app + '.db')}", "-o", "latest"]
                cpu, rss = run_for(cmd, env, a.idle_seconds)
                idle[what] = (cpu * 60.0 / a.idle_seconds, rss)
                print(f"at the tip, no records, {a.idle_seconds:.0f} s: {what:<7} "
                      f"CPU {idle[what][0]:.1f} s/min, peak RSS {rss:.1f} MB",
                      flush=True)
    cc = statistics.median(x[0] for x in res["consume"])
    gc = statistics.median(x[0] for x in res["group"])
    cr = max(x[1] for x in res["consume"])
    gr = max(x[1] for x in res["group"])
    print(f"\none worker, {S} shards, {mb:.1f} MB of 1 KB records, lease table "
          f"{a.scale_leases}, medians of {a.rounds} interleaved rounds "
          f"(shared 2-core machine: CPU figures are noisy)")
    rows = [("peak RSS, kncat group", f"{gr:.1f} MB", f"< {TARGET_RSS_MB:.0f} MB",
             gr < TARGET_RSS_MB),
            ("peak RSS, kncat consume", f"{cr:.1f} MB", "-", True),
            ("CPU s/MB, kncat consume", f"{cc:.4f}", "-", True),
            ("CPU s/MB, kncat group", f"{gc:.4f} ({gc / cc:.2f} of consume)",
             f"< {TARGET_CPU_RATIO:.2f}x consume", gc / cc < TARGET_CPU_RATIO)]
    if idle["group"]:
        rows += [("CPU s/min at the tip, consume", f"{idle['consume'][0]:.1f}", "-", True),
                 ("CPU s/min at the tip, group", f"{idle['group'][0]:.1f} "
                  f"({idle['group'][0] / idle['consume'][0]:.2f} of consume)", "-", True)]
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  " + "  ".join(r[i].ljust(w[i]) for i in range(3)) + "  "
              + ("" if r[2] == "-" else "ok" if r[3] else "MISSED"))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--quick", action="store_true",
                    help="16 shards x 4 workers, 60 s steady, 30 s windows; "
                         "--fleet: phases of 10 to 25 s, 2 redeploy batches")
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--steady", type=float, default=180)
    ap.add_argument("--window", type=float, default=60)
    ap.add_argument("--settle", type=float, default=240,
                    help="longest wait for the group to balance")
    ap.add_argument("--idle", action="store_true", help="no records produced")
    ap.add_argument("--no-events", action="store_true", help="steady state only")
    ap.add_argument("--formulas-only", action="store_true")
    ap.add_argument("--kcl", default="auto",
                    help="real KCL workers measured after kncat's: kcl2,kcl3 "
                         "(default: those `make peers` built), none")
    ap.add_argument("--jvm-heap", default="160m", help="-Xmx of each KCL JVM")
    ap.add_argument("--settle-kcl", type=float, default=420,
                    help="longest wait for the KCL workers to take every lease")
    ap.add_argument("--item-bytes", type=int, default=0,
                    help="lease item size for the formulas (default: the "
                         "average on the wire, 250 without a wire run)")
    ap.add_argument("--sim-seconds", type=int, default=600)
    # the design's defaults, for the formula
    ap.add_argument("--take-ms", type=float, default=2000)
    ap.add_argument("--sync-ms", type=float, default=30000)
    ap.add_argument("--duration-ms", type=float, default=10000)
    ap.add_argument("--renew-ms", type=float, default=0)
    ap.add_argument("--scan-ms", type=float, default=600000)
    ap.add_argument("--ckpt-ms", type=float, default=5000)
    ap.add_argument("--ckpt-separate", action="store_true",
                    help="formula: checkpoints written on their own timer "
                         "(the design before a803a72)")
    ap.add_argument("--scale", action="store_true",
                    help="one worker on --scale-shards shards: RSS and CPU/MB")
    ap.add_argument("--scale-shards", type=int, default=1000)
    ap.add_argument("--mb", type=float, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=60,
                    help="--scale: also run group and consume at the tip of "
                         "the stream for this long (0: not)")
    ap.add_argument("--scale-leases", choices=("sqlite", "dynamodb"), default="sqlite")
    ap.add_argument("--fleet", type=int, nargs="?", const=200, default=0,
                    metavar="N", help="N workers (default 200): the hottest "
                    "item per 5-s window (bench/lease_fleet.py)")
    ap.add_argument("--fleet-shards", type=int, default=0,
                    help="--fleet: shards (default N/10)")
    ap.add_argument("--fleet-steady", type=float, default=60)
    ap.add_argument("--fleet-kill", type=float, default=60,
                    help="--fleet: seconds counted from the SIGKILL")
    ap.add_argument("--fleet-batch", type=float, default=0.1,
                    help="--fleet: share of the workers replaced at a time")
    ap.add_argument("--fleet-gap", type=float, default=10,
                    help="--fleet: seconds between redeploy batches")
    ap.add_argument("--fleet-tail", type=float, default=30,
                    help="--fleet: redeploy counted at least this long "
                         "after the last batch")
    ap.add_argument("--fleet-interval", type=float, default=2,
                    help="--fleet: a record a shard every this many seconds "
                         "(0: none)")
    ap.add_argument("--id-len", type=int, default=40,
                    help="--fleet: characters of a worker id")
    a = ap.parse_args()
    if a.quick:   # smaller defaults; what is given explicitly stays
        for name, v in (("fleet_steady", 10), ("fleet_kill", 15),
                        ("fleet_batch", 0.5), ("fleet_gap", 5), ("fleet_tail", 10),
                        ("shards", 16), ("workers", 4), ("steady", 60),
                        ("window", 30), ("mb", 8), ("rounds", 1),
                        ("idle_seconds", 20)):
            if getattr(a, name) == ap.get_default(name):
                setattr(a, name, v)
    if a.kcl == "auto":
        a.kcl = [k for k in ("kcl2", "kcl3") if installed(k)]
    else:
        a.kcl = [k for k in a.kcl.split(",") if k and k != "none"]
    kncat = os.environ.get("KNCAT") or os.path.join(a.build, "kncat")
    if not os.access(kncat, os.X_OK):
        raise SystemExit(f"bench: {kncat} not found")
    if a.fleet:
        from lease_fleet import fleet_main
        return fleet_main(a, kncat)
    return scale_main(a, kncat) if a.scale else cost_main(a, kncat)


if __name__ == "__main__":
    sys.exit(main())
