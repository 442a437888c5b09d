"""The fleet case of bench_lease_cost.py (--fleet N): N `kncat group`
workers on one kinesalite stream, dynalite behind the wire counter
(tests/lab/wirecount.py, timeline=True), and what the hottest item of
each table costs per 5-s window.

  python3 bench/bench_lease_cost.py --fleet 200 [--fleet-shards 20]
          [--fleet-steady 60] [--fleet-kill 60] [--fleet-batch 0.1]
          [--fleet-gap 10] [--fleet-tail 30] [--fleet-interval 2]
          [--id-len 40]

Worker stderr goes to a temporary directory, kept with KN_KEEP_LOGS=1
(the workers then log with -v instead of -q).
Workers are named like hosts with a process id, --id-len characters
(ip-10-0-000-017.compute.internal-0004711: 40); a redeploy gives every
worker a new name.  Records: one a shard every --fleet-interval seconds
(0: none), so a worker that stops reading shows as a late delivery.

Phases, each counted apart:
  settle     the workers start (in batches of 10) until every shard is
             held by a live worker and none holds more than its share,
             and at least --fleet-tail seconds after the last start
  steady     --fleet-steady seconds
  kill       SIGKILL of a worker holding a lease; --fleet-kill seconds
             from the kill.  The time until none of its leases names it
             (polled on the table, outside the count) is its failover
  redeploy   every worker replaced by a new process with a new name,
             --fleet-batch of the fleet at a time (new ones started, old
             ones sent SIGTERM), a batch every --fleet-gap seconds, then
             until the group settles again (at most 120 s) and at least
             --fleet-tail seconds (default 30) after the last batch

Per phase: the hottest item (the most write units in one 5-s window) with
its WCU/s in that window and its series of 5-s windows; the hottest
read item likewise; per table read units per shard per minute and write
units per lease per minute; records delivered and the longest wait from
put to delivery.  DynamoDB serves at most 1,000 WCU/s and 3,000 RCU/s an
item (a partition), and dynalite throttles nothing: a figure above those
is a group DynamoDB would throttle.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import lab
from faultproxy import FaultProxy
from groupkit import Producer, Worker, leases_json, spread_keys
from wirecount import DynamoCounter

PARTITION_WCU, PARTITION_RCU = 1000, 3000
WINDOW = 5.0


def worker_id(i: int, pid: int, length: int) -> str:
    """A host name and a process id, padded or cut to length."""
    host = f"ip-10-0-{i // 250:03d}-{i % 250:03d}.compute.internal"
    tail = f"-{pid:07d}"
    room = max(1, length - len(tail))
    return host[:room].ljust(room, "x") + tail


def key_label(key: str) -> str:
    try:
        vals = json.loads(key)
    except ValueError:
        return key
    return ",".join(next(iter(v.values())) if isinstance(v, dict) else str(v)
                    for v in vals)


def owners(kncat, env, app, store):
    """{shard: owner} of the open shards, or None if the table could not
    be listed."""
    try:
        rows = leases_json(kncat, env, app, store)
    except (RuntimeError, OSError):
        return None
    return {r["shard"]: r.get("owner") for r in rows
            if r.get("checkpoint") != "SHARD_END"}


def settled(own, live, S):
    if own is None or len(own) < S:
        return False
    share = math.ceil(S / max(1, len(live)))
    count = {}
    for o in own.values():
        if o not in live:
            return False
        count[o] = count.get(o, 0) + 1
    return max(count.values()) <= share


class Fleet:
    def __init__(self, a, kncat, k, proxy, direct, stream, app, store, tmp):
        self.a, self.kncat, self.direct = a, kncat, direct
        self.stream, self.app, self.store, self.tmp = stream, app, store, tmp
        self.wenv = lab.env_for(kinesis=k, dynamodb=proxy.endpoint)
        self.props = {"dynamodb.endpoint": proxy.endpoint}
        self.live: dict[str, Worker] = {}
        self.gone: list[Worker] = []
        self.every: list[Worker] = []
        self.n = 0
        self.rnd = random.Random(os.getpid())

    def start(self, count):
        for _ in range(count):
            wid = worker_id(self.n, self.rnd.randrange(1000, 4194304),
                            self.a.id_len)
            self.n += 1
            w = Worker(self.kncat, self.wenv, self.stream, self.app,
                       self.store, wid, props=self.props, log_dir=self.tmp,
                       verbose=False,
                       extra=["-v"] if os.environ.get("KN_KEEP_LOGS") == "1"
                       else ["-q"])
            self.live[wid] = w
            self.every.append(w)

    def stop(self, wids, sig=signal.SIGTERM):
        for wid in wids:
            w = self.live.pop(wid)
            w.signal(sig)
            self.gone.append(w)

    def reap(self, timeout=30):
        for w in self.gone:
            w.wait(timeout)
        self.gone = []

    def owners(self):
        return owners(self.kncat, self.direct, self.app, self.store)

    def wait_settled(self, S, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if settled(self.owners(), set(self.live), S):
                return True
            time.sleep(1.0)
        return False


def delivery(prod, workers, t0, t1):
    """(records delivered in [t0, t1), longest put-to-delivery wait of
    those, in seconds)."""
    if prod is None:
        return 0, None
    with prod.lock:
        stored = list(prod.stored_at)
    K = len(prod.keys)
    n, worst = 0, 0.0
    for w in workers:
        for t, rec in w.records():
            if not t0 <= t < t1:
                continue
            try:
                i = json.loads(rec["data"])["i"]
            except (KeyError, ValueError, TypeError):
                continue
            r = i // K
            if r < len(stored):
                n += 1
                worst = max(worst, t - stored[r])
    return n, worst


def report(name, note, counter, before, t0, t1, S, prod, workers):
    el = t1 - t0
    after = counter.by_table()
    # whole windows only, and a last one of at least half a window
    t1w = t0 + WINDOW * max(1, round(el / WINDOW))
    wins = counter.item_windows(t0, min(t1, t1w), WINDOW)
    n = len(next(iter(wins.values()), []))
    widths = [min(WINDOW, t1 - t0 - i * WINDOW) for i in range(n)]
    print(f"\n  {name} ({el:.0f} s{note})")
    out = {"phase": name, "seconds": round(el, 1)}
    for kind, idx, cap in (("WCU", 0, PARTITION_WCU), ("RCU", 1, PARTITION_RCU)):
        best, best_k = -1.0, None
        for k, series in wins.items():
            peak = max(s[idx] / max(widths[i], 1.0) for i, s in enumerate(series))
            if peak > best:
                best, best_k = peak, k
        if best_k is None or best <= 0:
            print(f"    hottest item, {kind}: none")
            continue
        series = [s[idx] / max(widths[i], 1.0) for i, s in enumerate(wins[best_k])]
        mean = sum(s[idx] for s in wins[best_k]) / el
        tab, key = best_k
        flag = "  OVER a partition's limit" if best > cap else ""
        print(f"    hottest item, {kind}: {tab}/{key_label(key)}: {best:.0f} "
              f"{kind}/s in its hottest 5-s window, {mean:.0f} {kind}/s on "
              f"average{flag}")
        print(f"      per 5-s window: {' '.join(f'{x:.0f}' for x in series)}")
        out[f"hot_{kind.lower()}_per_s"] = round(best, 1)
        out[f"hot_{kind.lower()}_item"] = f"{tab}/{key_label(key)}"
        out[f"hot_{kind.lower()}_series"] = [round(x, 1) for x in series]
    m = el / 60.0
    for tab in sorted(after):
        if tab == "-":
            continue
        t = after[tab]
        b = before.get(tab)
        d = t.minus(b) if b else t
        if not d.requests:
            continue
        print(f"    table {tab}: {d.rcu / S / m:.3f} RCU/shard/min, "
              f"{d.total_wcu / S / m:.1f} WCU/lease/min, "
              f"{d.total_wcu / el:.0f} WCU/s "
              f"({d.items_written / S / m:.1f} items written/lease/min, "
              f"{d.requests / el:.1f} requests/s"
              + (f", {d.failed_writes} failed conditions" if d.failed_writes else "")
              + (f", {d.errors - d.failed_writes} errors"
                 if d.errors > d.failed_writes else "") + ")")
        out.setdefault("tables", {})[tab] = {
            "rcu_per_shard_min": round(d.rcu / S / m, 4),
            "wcu_per_lease_min": round(d.total_wcu / S / m, 2)}
    n, worst = delivery(prod, workers, t0, t1)
    if prod is not None:
        print(f"    records delivered: {n}, longest put-to-delivery wait "
              f"{worst:.1f} s")
        out["delivered"], out["longest_wait_s"] = n, round(worst, 1)
    print("    " + json.dumps(out), flush=True)
    return out


def fleet_main(a, kncat):
    N = a.fleet
    S = a.fleet_shards or max(2, N // 10)
    tmp = tempfile.mkdtemp(prefix="bench_fleet.")
    results = []
    with lab.Kinesalite() as k, lab.Dynalite() as d:
        counter = DynamoCounter(timeline=True)
        with FaultProxy(d, observer=counter.observe, keep_log=False) as proxy:
            direct = lab.env_for(kinesis=k, dynamodb=d)
            tag = f"{os.getpid()}"
            stream, app = f"fleet-stream-{tag}", f"fleet-app-{tag}"
            store = f"dynamodb:fleet-leases-{tag}"
            p = subprocess.run([kncat, "create", stream, "--shards", str(S)],
                               env=direct, capture_output=True, timeout=300)
            if p.returncode:
                raise SystemExit(f"kncat create: {p.stderr.decode(errors='replace')}")
            prod = None
            if a.fleet_interval > 0:
                boto = lab.boto3_client("kinesis", k, attempts=5)
                prod = Producer(boto, stream, spread_keys(S, "k"),
                                interval=a.fleet_interval)
                prod.start()
            fleet = Fleet(a, kncat, k, proxy, direct, stream, app, store, tmp)
            print(f"fleet: {N} workers (ids of {a.id_len} characters) on {S} "
                  f"shards, kinesalite, dynalite behind the wire counter, "
                  + (f"a record a shard every {a.fleet_interval:g} s"
                     if prod else "no records"), flush=True)

            def phase(name, body):
                before, t0 = counter.by_table(), time.monotonic()
                note = body() or ""
                t1 = time.monotonic()
                results.append(report(name, note, counter, before, t0, t1, S,
                                      prod, fleet.every))

            try:
                def settle():
                    t = time.monotonic()
                    for i in range(0, N, 10):
                        fleet.start(min(10, N - i))
                        time.sleep(0.5)
                    started = time.monotonic() - t
                    ok = fleet.wait_settled(S, a.settle)
                    took = time.monotonic() - t
                    # every worker joined the membership: a few renewals
                    time.sleep(max(0.0, t + started + a.fleet_tail - time.monotonic()))
                    return (f", all started in {started:.0f} s, "
                            + (f"settled after {took:.0f} s" if ok
                               else f"NOT settled after {a.settle:.0f} s more")
                            + f", counted {a.fleet_tail:g} s after the last start or more")
                phase("settle", settle)
                died = [w.wid for w in fleet.live.values() if w.proc.poll() is not None]
                if died:
                    print(f"  {len(died)} workers exited: "
                          f"{fleet.live[died[0]].stderr()[-400:]}", flush=True)

                def steady():
                    time.sleep(a.fleet_steady)
                phase("steady", steady)

                def kill():
                    own = fleet.owners() or {}
                    holders = sorted({o for o in own.values() if o in fleet.live})
                    victim = holders[0] if holders else sorted(fleet.live)[0]
                    mine = {s for s, o in own.items() if o == victim}
                    t = time.monotonic()
                    fleet.stop([victim], signal.SIGKILL)
                    held = None
                    deadline = t + a.fleet_kill
                    while time.monotonic() < deadline:
                        cur = fleet.owners()
                        if held is None and cur is not None and all(
                                cur.get(s) in fleet.live for s in mine):
                            held = time.monotonic() - t
                        time.sleep(0.5)
                    fleet.reap()
                    return (f", SIGKILL of {victim} holding {len(mine)} "
                            f"lease(s); held again after "
                            + (f"{held:.1f} s" if held is not None else
                               f"more than {a.fleet_kill:.0f} s"))
                phase("kill", kill)

                def redeploy():
                    t = time.monotonic()
                    old = sorted(fleet.live)
                    batch = max(1, round(len(old) * a.fleet_batch))
                    for i in range(0, len(old), batch):
                        fleet.start(len(old[i:i + batch]))
                        fleet.stop(old[i:i + batch])
                        time.sleep(a.fleet_gap)
                    rolled = time.monotonic() - t
                    ok = fleet.wait_settled(S, 120)
                    took = time.monotonic() - t - rolled
                    fleet.reap()
                    # the forgetting of the old ids comes after the settling
                    time.sleep(max(0.0, a.fleet_tail - (time.monotonic() - t - rolled)))
                    return (f", {len(old)} workers replaced {batch} at a time "
                            f"every {a.fleet_gap:g} s in {rolled:.0f} s, "
                            + (f"settled {took:.0f} s after the last batch"
                               if ok else "NOT settled 120 s after the last batch")
                            + f", counted {a.fleet_tail:g} s after it or more")
                phase("redeploy", redeploy)
            finally:
                if prod:
                    prod.stop_ev.set()
                exited = [w for w in fleet.live.values() if w.proc.poll() is not None]
                for w in exited[:3]:
                    print(f"  worker {w.wid} exited early ({w.proc.returncode}): "
                          f"{w.stderr()[-400:]}", flush=True)
                fleet.stop(sorted(fleet.live))
                stoppers = [threading.Thread(target=w.wait, args=(30,))
                            for w in fleet.gone]
                for th in stoppers:
                    th.start()
                for th in stoppers:
                    th.join()
                fleet.gone = []
                if os.environ.get("KN_KEEP_LOGS") != "1":
                    shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nfleet: {N} workers, {S} shards: hottest item per phase "
          f"(WCU/s in its hottest 5-s window; DynamoDB caps an item at "
          f"{PARTITION_WCU})")
    for r in results:
        print(f"  {r['phase']:<9} {r.get('hot_wcu_per_s', 0):8.0f} WCU/s  "
              f"{r.get('hot_wcu_item', '-')}")
    return 0
