#!/usr/bin/env python3
"""libkinesis next to the real KCL (tests/lab/java, `make peers`), in one run:

consume   one worker of each kind drains the same backlog (RECORDS records of
          1000 bytes on SHARDS kinesalite shards) with its own DynamoDB lease
          table on dynalite, then idles at the tip for STEADY seconds:
          `kncat group -J`, the KCL 2.x and the KCL 3.x (3.x mode; its table
          made beforehand with its index, which dynalite cannot add).
          Client CPU s/MB (cold: the whole run from the start to the last
          record; warm: WARM more (10,000) put while the worker waits at the
          tip, from before the put to the last of them), peak RSS (VmHWM),
          and
          the lease table's traffic counted at the wire (tests/lab/wirecount.py
          behind a counting proxy): items read and read units per shard per
          minute, items written per lease per minute, at the tip.
failover  two workers of one kind on SHARDS shards with records every 0.2 s,
          the same lease duration (LEASE_MS): one is SIGKILLed; the time until
          each of its shards delivers on the other (max over its shards).
daemons   `kncat multilang` and the KCL's MultiLangDaemon (2.5.4) with one
          properties file and the same processor draining RECORDS records,
          for each of PROCESSORS: aws-kcl for Node (bench/ml_null.js) and
          amazon-kclpy 3.2.0 (bench/ml_kclpy.py, installed by `make
          peers` into tests/lab/kclpy), both checkpointing every batch: start-up to the first record, to the last,
          records/s from the first record on (the KCL fetches ahead: its
          backlog is read before it delivers anything), the
          daemon's own CPU s/MB (its children excluded) and peak RSS.

Ratios are kncat / peer (below 1 is better for kncat).  The KCL runs with
the JVM's defaults (heap up to 1/4 of RAM) and the harness's
`dev.libkinesis.lab.Consume` (prints JSON lines like kncat -J; checkpoints
every 5 s, as kncat does).  MB is 10^6 bytes of payload.

    python3 bench/bench_peers.py [--build DIR] [--records 40000] [--shards 4]
            [--warm 10000] [--steady 60] [--lease-ms 10000] [--kinds kncat,kcl2,kcl3]
            [--parts consume,failover,daemons] [--processors node,python] [--quick]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
sys.path.insert(0, os.path.join(SRC, "tests", "interop"))
sys.path.insert(0, os.path.join(SRC, "bench"))
import lab  # noqa: E402
import wirecount  # noqa: E402
from bench_consume import make_input, peak_rss_watch  # noqa: E402
from bench_multilang import counted, fill, own_cpu  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from groupkit import Producer, spread_keys  # noqa: E402
from peers import create_kcl3_table, java_cmd  # noqa: E402

SIZE = 1000
LABEL = {"kncat": "kncat group", "kcl2": "KCL 2.7.2", "kcl3": "KCL 3.5.1"}
_n = [0]


def unique(what):
    _n[0] += 1
    return f"peers-{what}-{os.getpid()}-{_n[0]}"


class Proc:
    """One consumer process: stdout lines counted (with the time of the
    first and the CPU at the first and at the N-th), stderr to a file,
    peak RSS sampled."""

    def __init__(self, cmd, env, err_path, want=None):
        self.err = open(err_path, "wb")
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=self.err)
        self.t0 = time.monotonic()
        self.want = want
        self.count = 0
        self.lines = []            # (time, shard) of every record
        self.first = None          # (time, cpu) at the first record
        self.done = None           # (time, cpu) at the want-th record
        self.stop_ev = threading.Event()
        self.peak = peak_rss_watch(self.p.pid, self.stop_ev)
        self.th = threading.Thread(target=self._read, daemon=True)
        self.th.start()

    def _read(self):
        for raw in iter(self.p.stdout.readline, b""):
            t = time.monotonic()
            self.count += 1
            i = raw.find(b'"shard":"')
            self.lines.append((t, raw[i + 9:raw.find(b'"', i + 9)].decode()))
            if self.count == 1:
                self.first = (t, self.cpu())
            if self.want and self.done is None and self.count >= self.want:
                self.done = (t, self.cpu())

    def cpu(self):
        try:
            return own_cpu(self.p.pid)
        except OSError:
            return float("nan")

    def finish(self, sig=signal.SIGTERM, timeout=60):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            os.waitid(os.P_PID, self.p.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        self.stop_ev.set()
        cpu = self.cpu()
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.th.join(10)
        self.err.close()
        return cpu


def consumer_cmd(kind, build, stream, app, wid, k_ep, d_ep, lease_ms):
    if kind == "kncat":
        return [os.path.join(build, "kncat"), "-q",
                "-X", f"lease.duration.ms={lease_ms}",
                "group", stream, "--app", app, "--leases", f"dynamodb:{app}",
                "--worker", wid, "-J", "-o", "trim_horizon"]
    cmd = java_cmd(kind, "dev.libkinesis.lab.Consume")
    cmd += ["--stream", stream, "--app", app, "--worker", wid,
            "--kinesis", k_ep, "--dynamodb", d_ep, "--failover-ms", str(lease_ms),
            "--checkpoint-ms", "5000", "--idle-ms", "1000"]
    if kind == "kcl3":
        cmd += ["--client-version", "3x"]
    return cmd


def put(a, env, stream, tmp, n):
    """n more records of SIZE bytes on stream (kncat produce)."""
    data = os.path.join(tmp, "more.txt")
    make_input(data, n, SIZE)
    p = subprocess.run([os.path.join(a.build, "kncat"), "-q", "produce", stream, data,
                        "-K", "\\t", "-X", "shard.rate.percent=10000"], env=env,
                       capture_output=True)
    os.unlink(data)
    if p.returncode:
        raise SystemExit("putting more records failed: " + p.stderr.decode())


def per_min(t: wirecount.Tally, shards, seconds):
    m = seconds / 60.0
    return {"items_read": t.items_read / shards / m, "rcu": t.rcu / shards / m,
            "items_written": t.items_written / shards / m,
            "wcu": t.total_wcu / shards / m, "requests": t.requests / shards / m}


def consume(a, kin, dyn, tmp):
    env = lab.env_for(kinesis=kin, dynamodb=dyn)
    ddb = lab.boto3_client("dynamodb", dyn)
    mb = a.records * SIZE / 1e6
    out = {}
    counter = wirecount.DynamoCounter()
    with FaultProxy(dyn, observer=counter.observe, keep_log=False) as proxy:
        penv = lab.env_for(kinesis=kin, dynamodb=proxy.endpoint)
        for kind in a.kinds:
            # a stream of its own: exactly RECORDS, then WARM, for each
            stream = unique("backlog")
            fill(os.path.join(a.build, "kncat"), env, stream, a.shards, a.records, SIZE, tmp)
            app = unique(kind)
            if kind == "kcl3":
                create_kcl3_table(ddb, app)
            cmd = consumer_cmd(kind, a.build, stream, app, "w1", kin.endpoint,
                               proxy.endpoint, a.lease_ms)
            pr = Proc(cmd, penv, os.path.join(tmp, f"consume-{kind}.err"), a.records)
            deadline = time.monotonic() + 600
            while pr.done is None and pr.p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if pr.done is None:
                pr.finish(signal.SIGKILL)
                with open(os.path.join(tmp, f"consume-{kind}.err"), errors="replace") as f:
                    tail = f.read()[-2000:]
                print(f"{LABEL[kind]}: {pr.count} of {a.records} records; stderr:\n{tail}")
                continue
            # warm: the same again, put while the worker waits at the tip
            time.sleep(5)
            cpu0 = pr.cpu()
            pr.want, pr.done, cold = a.records + a.warm, None, pr.done
            put(a, env, stream, tmp, a.warm)
            while pr.done is None and pr.p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            warm = (pr.done[1] - cpu0) / (a.warm * SIZE / 1e6) if pr.done else float("nan")
            if pr.done is None:
                print(f"  {LABEL[kind]}: warm: {pr.count - a.records} of {a.warm} records",
                      flush=True)
            time.sleep(10)           # settle: last checkpoints, balancing done
            before = counter.snapshot()
            time.sleep(a.steady)
            steady = wirecount.total(wirecount.diff(counter.snapshot(), before))
            cpu_end = pr.finish()
            r = {"drain_s": cold[0] - pr.t0,
                 "cpu_mb": cold[1] / mb,
                 "cpu_mb_warm": warm,
                 "start_s": pr.first[0] - pr.t0,
                 "rss": pr.peak[0], "cpu_total": cpu_end,
                 "tip": per_min(steady, a.shards, a.steady)}
            out[kind] = r
            print(f"  {LABEL[kind]}: drained {a.records} in {r['drain_s']:.1f} s, "
                  f"first record after {r['start_s']:.1f} s", flush=True)
    return out


def failover(a, kin, dyn, tmp, kind):
    """Two workers of kind; SIGKILL the one holding the most shards once both
    read; returns seconds until every one of its shards delivered on the
    other, and the shards it held."""
    env = lab.env_for(kinesis=kin, dynamodb=dyn)
    stream, app = unique("fo"), unique(f"fo{kind}")
    boto = lab.boto3_client("kinesis", kin)
    boto.create_stream(StreamName=stream, ShardCount=a.shards)
    boto.get_waiter("stream_exists").wait(StreamName=stream,
                                          WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
    if kind == "kcl3":
        create_kcl3_table(lab.boto3_client("dynamodb", dyn), app)
    prod = Producer(boto, stream, spread_keys(2 * a.shards, "f"), interval=0.2)
    prod.start()
    ws = [Proc(consumer_cmd(kind, a.build, stream, app, f"w{i}", kin.endpoint,
                            dyn.endpoint, a.lease_ms), env,
               os.path.join(tmp, f"fo-{kind}-{i}.err")) for i in (1, 2)]
    try:
        def held(p, since):
            return {s for t, s in p.lines if t > since}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            t = time.monotonic()
            time.sleep(3)
            h = [held(p, t) for p in ws]
            if all(h) and len(h[0] | h[1]) == a.shards and not h[0] & h[1]:
                break
        else:
            return None, f"never split between two workers: {[sorted(x) for x in h]}"
        victim, other = (ws[0], ws[1]) if len(h[0]) >= len(h[1]) else (ws[1], ws[0])
        theirs = h[ws.index(victim)]
        t_kill = time.monotonic()
        victim.finish(signal.SIGKILL)
        deadline = t_kill + 180
        while time.monotonic() < deadline:
            got = {s: min((t for t, x in other.lines if x == s and t > t_kill), default=None)
                   for s in theirs}
            if all(v is not None for v in got.values()):
                return max(v - t_kill for v in got.values()), sorted(theirs)
            time.sleep(0.2)
        return None, f"shards {sorted(theirs)} not taken over in 180 s"
    finally:
        prod.finish()
        for p in ws:
            p.finish(signal.SIGKILL)


KCLPY_DIR = os.path.join(SRC, "tests", "lab", "kclpy")
PROCESSORS = {
    "node": ("aws-kcl (Node)", f"node {os.path.join(SRC, 'bench', 'ml_null.js')}"),
    "python": ("amazon-kclpy", f"{sys.executable} {os.path.join(SRC, 'bench', 'ml_kclpy.py')}"),
}


def daemon(a, kin, dyn, tmp, kind, stream, proc="node"):
    """One MultiLangDaemon (kind "kncat": kncat multilang; "java": the KCL's
    MultiLangDaemon) with processor proc (PROCESSORS) on stream, from
    TRIM_HORIZON, until its processors counted every record.
    Returns start-up to the first record (s), records/s after it, the
    daemon's own CPU s/MB (children excluded) and peak RSS."""
    app = unique(f"ml{kind}{proc}")
    out = os.path.join(tmp, "ml-" + app)
    os.makedirs(out)
    props = os.path.join(tmp, app + ".properties")
    with open(props, "w") as f:
        f.write(f"executableName = {PROCESSORS[proc][1]}\n"
                f"streamName = {stream}\napplicationName = {app}\n"
                "initialPositionInStream = TRIM_HORIZON\nretrievalMode = POLLING\n"
                "idleTimeBetweenReadsInMillis = 200\nshutdownGraceMillis = 5000\n"
                f"failoverTimeMillis = {a.lease_ms}\nregionName = us-east-1\n"
                f"kinesisEndpoint = {kin.endpoint}\ndynamoDBEndpoint = {dyn.endpoint}\n"
                "metricsLevel = NONE\nAWSCredentialsProvider = DefaultAWSCredentialsProviderChain\n")
    env = dict(lab.env_for(kinesis=kin, dynamodb=dyn), ML_OUT=out,
               KN_LAB_DIR=os.path.join(SRC, "tests", "lab"), ML_CHECKPOINT="batch",
               PYTHONPATH=KCLPY_DIR)
    if kind == "kncat":
        cmd = [os.path.join(a.build, "kncat"), "-q", "multilang", props]
    else:
        cmd = java_cmd("multilang", "software.amazon.kinesis.multilang.MultiLangDaemon",
                       jvm=("-Daws.cborEnabled=false",
                            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"))
        cmd += [props]
    pr = Proc(cmd, env, os.path.join(tmp, f"ml-{kind}-{proc}.err"))
    first = done = None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and pr.p.poll() is None:
        n = counted(out)
        if n and first is None:
            first = time.monotonic()
        if n >= a.records:
            done = (time.monotonic(), pr.cpu())
            break
        time.sleep(0.05)
    pr.finish()
    if done is None:
        return None
    mb = a.records * SIZE / 1e6
    return {"start_s": first - pr.t0, "rate": a.records / (done[0] - first),
            "all_s": done[0] - pr.t0,
            "cpu_mb": done[1] / mb, "rss": pr.peak[0]}


def ratio(x, y):
    return f"{x / y:.3f}" if x is not None and y else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--records", type=int, default=40000)
    ap.add_argument("--warm", type=int, default=10000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--steady", type=int, default=60)
    ap.add_argument("--lease-ms", type=int, default=10000)
    ap.add_argument("--kinds", default="kncat,kcl2,kcl3")
    ap.add_argument("--parts", default="consume,failover,daemons")
    ap.add_argument("--processors", default="node,python",
                    help="daemons: record processors, node (aws-kcl), python (amazon-kclpy)")
    ap.add_argument("--quick", action="store_true",
                    help="10,000 records, 30 s at the tip")
    a = ap.parse_args()
    if a.quick:
        a.records, a.steady = 10000, 30
    a.kinds = a.kinds.split(",")
    a.processors = a.processors.split(",")
    parts = a.parts.split(",")
    tmp = tempfile.mkdtemp(prefix="kn-bench-peers-")
    with lab.Kinesalite() as kin, lab.Dynalite() as dyn:
        if "consume" in parts:
            print(f"consume: {a.records} records of {SIZE} B on {a.shards} kinesalite shards, "
                  f"lease table on dynalite, {a.steady} s at the tip", flush=True)
            res = consume(a, kin, dyn, tmp)
            ref = res.get("kncat")
            print()
            print(f"  {'':<14}{'CPU s/MB':>9}{'warm':>12}{'peak RSS MB':>12}"
                  f"{'1st rec s':>10}{'items read':>11}{'RCU':>8}{'items wr':>9}{'WCU':>7}")
            print(f"  {'':<14}{'':>9}{'':>12}{'':>12}{'':>10}{'/shard/min at the tip':>35}")
            for kind, r in res.items():
                tip = r["tip"]
                print(f"  {LABEL[kind]:<14}{r['cpu_mb']:>9.4f}{r['cpu_mb_warm']:>12.4f}"
                      f"{r['rss']:>12.1f}{r['start_s']:>10.2f}{tip['items_read']:>11.2f}"
                      f"{tip['rcu']:>8.3f}{tip['items_written']:>9.2f}{tip['wcu']:>7.2f}")
            if ref:
                for kind, r in res.items():
                    if kind == "kncat":
                        continue
                    print(f"  kncat / {LABEL[kind]}: CPU/MB {ratio(ref['cpu_mb'], r['cpu_mb'])}"
                          f" (warm {ratio(ref['cpu_mb_warm'], r['cpu_mb_warm'])}),"
                          f" RSS {ratio(ref['rss'], r['rss'])},"
                          f" items read at the tip {ratio(ref['tip']['items_read'], r['tip']['items_read'])},"
                          f" RCU {ratio(ref['tip']['rcu'], r['tip']['rcu'])},"
                          f" items written {ratio(ref['tip']['items_written'], r['tip']['items_written'])}")
        if "failover" in parts:
            print(f"\nfailover: 2 workers, {a.shards} shards, lease duration {a.lease_ms} ms, "
                  f"SIGKILL of one", flush=True)
            fo = {}
            for kind in a.kinds:
                secs, what = failover(a, kin, dyn, tmp, kind)
                fo[kind] = secs
                print(f"  {LABEL[kind]:<14}" + (f"{secs:6.1f} s (its shards {what})"
                                               if secs is not None else f"failed: {what}"),
                      flush=True)
            for kind in a.kinds:
                if kind != "kncat":
                    print(f"  kncat / {LABEL[kind]}: failover {ratio(fo.get('kncat'), fo.get(kind))}")
        if "daemons" in parts:
            env = lab.env_for(kinesis=kin, dynamodb=dyn)
            stream = unique("mlbacklog")
            fill(os.path.join(a.build, "kncat"), env, stream, a.shards, a.records, SIZE, tmp)
            names = {"kncat": "kncat multilang", "java": "MultiLangDaemon 2.5.4"}
            for proc in a.processors:
                if proc == "python" and not os.path.isdir(os.path.join(KCLPY_DIR, "amazon_kclpy")):
                    print("\ndaemons: amazon-kclpy not installed (make peers)")
                    continue
                print(f"\ndaemons: {a.records} records of {SIZE} B on {a.shards} kinesalite "
                      f"shards, {PROCESSORS[proc][0]} processor checkpointing every batch",
                      flush=True)
                res = {k: daemon(a, kin, dyn, tmp, k, stream, proc) for k in ("kncat", "java")}
                print(f"  {'':<22}{'1st record s':>13}{'all s':>8}{'records/s':>10}"
                      f"{'CPU s/MB':>9}{'peak RSS MB':>12}")
                for k, r in res.items():
                    print(f"  {names[k]:<22}" + (
                        f"{r['start_s']:>13.2f}{r['all_s']:>8.1f}{r['rate']:>10.0f}"
                        f"{r['cpu_mb']:>9.4f}{r['rss']:>12.1f}"
                        if r else "   failed (see the logs)"))
                k, j = res["kncat"], res["java"]
                if k and j:
                    print(f"  kncat / Java ({PROCESSORS[proc][0]}): start-up "
                          f"{ratio(k['start_s'], j['start_s'])}, "
                          f"all records {ratio(k['all_s'], j['all_s'])}, "
                          f"records/s {ratio(k['rate'], j['rate'])}, "
                          f"CPU/MB {ratio(k['cpu_mb'], j['cpu_mb'])}, "
                          f"RSS {ratio(k['rss'], j['rss'])}", flush=True)
    print(f"\nlogs in {tmp}")


if __name__ == "__main__":
    main()
