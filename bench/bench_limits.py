#!/usr/bin/env python3
"""Reading and writing at Kinesis's per-shard limits: the lab servers behind
tests/lab/faultproxy.py's limit mode (the service's limits enforced as AWS
does), and for each case the rate achieved as a fraction of the limit,
throttles per minute and client CPU per MB, for

  kncat       kncat consume -e / kncat produce (the library)
  kncat group --clients ...,kncat-group: reads as one `kncat group -e`
              worker (a SQLite lease file), the coordinated consumer
  JS SDK v3   bench/consume_js.js (a plain GetRecords loop per shard) and
              bench/produce_node.js (a PutRecords loop re-sending failed
              entries), the SDK's default retries
  KPL         put cases only (--clients kncat,kpl): the KPL 1.1.1
              (tests/lab/java, `make peers`) fed the same lines on stdin,
              aggregating in put-agg; it speaks only HTTPS, so it reaches
              the proxy through tests/lab/tlsfront.py (certificate checks
              off); told nothing of the scaled limits (its rate limit is
              150% of the real ones); its CPU and RSS include its native
              daemon's; the stream is then read back with `kncat consume`
              and every line must come out

with the ratios kncat / JS.  Cases (names for --cases):

  poll-S-SIZE    drain a backlog of S shards (1, 4, 64) of SIZE records:
                 100 (bytes), 1k, 50k-kpl (KPL aggregates of 50 KB)
  poll-share     poll-1-1k read by two kncat at once, each with
                 poll.share=50: together at most the limit (kncat only)
  efo-1, efo-4   the same with enhanced fan-out, 1 or 4 shards of 1 KB
                 records, on kinesis-local (kncat only; polling kncat next
                 to it); kinesis-local sends a backlog in one event, the
                 proxy in events of 1/5 s of the rate, as the service
  put-1-bytes, put-1-count, put-64-bytes, put-64-count
                 the same on 1 and 64 shards
  put-bytes      4 shards, 10 KB records: bound by 1 MiB/s
  put-count      4 shards, 100 B records: bound by 1,000 records/s
  put-agg        put-count with --aggregate (JS: the same, unaggregated)
  put-agg-1      the same on 1 shard at the full limits (the KPL, told
                 nothing, knows them)
  put-hot        4 shards, 1 KB records, one partition key: one shard
                 saturated, the others idle

  python3 bench/bench_limits.py [--build DIR] [--quick] [--cases a,b]
                                [--seconds S] [--rounds R] [--clients kncat,js]
                                [--baseline DIR]

--baseline DIR adds "kncat before", the kncat of another build (an earlier
version: `git worktree add /tmp/old REV && cmake -S /tmp/old -B /tmp/old/b
&& cmake --build /tmp/old/b --target kncat`), to every kncat case, with the
same commands and properties, and reports kncat / kncat before.

How a fraction is measured.  The proxy records, per shard, the data it let
through (record data blobs; for writes data plus partition key) and when
the first and the last data moved.  Reads: the service's read limit is a
debt paid at 2 MiB/s from each call, so the data of every response but
the last must fit rate x (last - first): fraction = (bytes - last
response) / (rate x (last - first)).  Writes: a one-second bucket,
fraction = admitted / (rate x (last - first) + one second of rate), the
larger of the bytes and the records fractions (a writer at exactly the
rate from the first second scores W/(W+1) over W seconds: run minutes for
figures near 1).  Start-up and the caught-up tail are outside the window.

Scale.  A 2-core machine cannot move 64 x 2 MiB/s through a Python proxy
(about 6,000 records/s of 100 B over 64 shards here, under load), nor can
kinesis-local serve 2 MiB/s: each case runs at a fraction f
of every byte and record rate (calls per second stay), and kncat is told
the same rates (poll.bytes.per.second, shard.bytes.per.second,
shard.records.per.second) and buffer.max.bytes x f (at least 64 KiB: below
that the lab's own cost per call, not the client, sets the rate), so each
call has about the shape it has at full scale; the JS loops are told
nothing.

CPU per MB is user + sys of the client process (wait4) per 10^6 bytes of
data through the proxy: the machine is shared, so compare within one run
(the clients alternate round by round)."""

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
sys.path.insert(0, os.path.join(SRC, "bench"))
import lab  # noqa: E402
from bench_consume import run_measured  # noqa: E402
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
sys.path.insert(0, os.path.join(SRC, "tests", "interop"))
from peers import java_cmd  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from kinesis_limits import Limits  # noqa: E402
from tlsfront import TlsFront  # noqa: E402

MIB = 1 << 20
LABELS = {"kncat": "kncat", "js": "JS SDK v3", "kpl": "KPL", "kncat-poll": "kncat poll",
          "kncat-before": "kncat before", "kncat-group": "kncat group"}

# name -> (kind, shards, record size, scale, options)
CASES = {
    "poll-1-100": ("poll", 1, 100, 0.25, {}),
    "poll-1-1k": ("poll", 1, 1000, 1.0, {}),
    "poll-1-50k-kpl": ("poll", 1, 500, 1.0, {"kpl": True}),
    "poll-4-100": ("poll", 4, 100, 1 / 16, {}),
    "poll-4-1k": ("poll", 4, 1000, 0.5, {}),
    "poll-4-50k-kpl": ("poll", 4, 500, 0.5, {"kpl": True}),
    "poll-64-1k": ("poll", 64, 1000, 1 / 64, {}),
    "poll-64-50k-kpl": ("poll", 64, 500, 1 / 16, {"kpl": True}),
    "poll-64-100": ("poll", 64, 100, 1 / 256, {}),
    "poll-share": ("share", 1, 1000, 1.0, {}),
    "efo-1": ("efo", 1, 1000, 1 / 16, {}),
    "efo-4": ("efo", 4, 1000, 1 / 16, {}),
    "put-1-bytes": ("put", 1, 10000, 1.0, {}),
    "put-1-count": ("put", 1, 100, 0.5, {}),
    "put-bytes": ("put", 4, 10000, 0.25, {}),
    "put-64-bytes": ("put", 64, 10000, 1 / 32, {}),
    "put-64-count": ("put", 64, 100, 1 / 32, {}),
    "put-count": ("put", 4, 100, 0.25, {}),
    "put-agg": ("put", 4, 100, 0.25, {"kpl": True}),
    "put-agg-1": ("put", 1, 100, 1.0, {"kpl": True}),
    "put-hot": ("put", 4, 1000, 1.0, {"hot": True}),
}
QUICK = ["poll-1-1k", "poll-4-100", "poll-64-1k", "poll-1-50k-kpl", "put-bytes",
         "put-count", "put-hot"]


def tree_rss_mb(pid):
    """Resident MB of pid and its descendants (the KPL's JVM and its native
    daemon), or None once pid is gone."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            if p == pid:
                return None
    return total / 1024.0


def run_tree_measured(cmd, stdin_path):
    """run_measured for a client that starts processes of its own: stdin
    from a file, CPU from wait4 (with the children it reaped), peak RSS
    the largest sum over its process tree (sampled every 50 ms)."""
    t = time.time()
    with open(stdin_path, "rb") as inp, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdin=inp, stdout=out, stderr=err)
        peak = 0.0
        while True:
            # (waitid without reaping: the tree can still be read)
            st = os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if st is not None:
                break
            peak = max(peak, tree_rss_mb(p.pid) or 0.0)
            time.sleep(0.05)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"rc": p.returncode, "cpu": ru.ru_utime + ru.ru_stime,
                "wall": time.time() - t, "rss": peak,
                "out": out.read().decode(errors="replace"),
                "err": err.read().decode(errors="replace")[-3000:]}


def make_input(path, n, size, hot=False):
    """n lines KEY<TAB>PAYLOAD (text payloads that need no escaping)."""
    rnd = random.Random(7)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
    bases = [bytes(rnd.choice(alphabet) for _ in range(97)) for _ in range(64)]
    with open(path, "wb") as f:
        for i in range(n):
            base = bases[i % 64]
            payload = (base * (size // len(base) + 1))[:size]
            key = b"hot-key-00000000" if hot else b"%016x" % rnd.getrandbits(64)
            f.write(key + b"\t" + payload + b"\n")


def create_stream(client, name, shards):
    client.create_stream(StreamName=name, ShardCount=shards)
    client.get_waiter("stream_exists").wait(
        StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 300})


def read_fraction(stats, rate):
    """(fraction of the read limit, MB/s, records/s) from the proxy's
    per-shard counts, and the number of shards that had a window."""
    num = den = 0.0
    total_b = total_r = 0
    first = last = None
    for s in stats.get("shards", []):
        if s["action"] not in ("GetRecords", "SubscribeToShard") or s["first"] is None:
            continue
        # As for the fraction: the last response's data came after the span.
        total_b += s["bytes"] - s["last_bytes"]
        total_r += s["records"] - s["last_records"]
        first = s["first"] if first is None else min(first, s["first"])
        last = s["last"] if last is None else max(last, s["last"])
        window = s["last"] - s["first"]
        if window > 0:
            num += s["bytes"] - s["last_bytes"]
            den += rate * window
    span = (last - first) if first is not None and last > first else None
    return (num / den if den else None,
            total_b / span / 1e6 if span else None,
            total_r / span if span else None)


def write_fraction(stats, limits):
    num_b = num_r = den_b = den_r = 0.0
    total_b = total_r = 0
    first = last = None
    for s in stats.get("shards", []):
        if s["action"] != "PutRecords" or s["first"] is None:
            continue
        window = s["last"] - s["first"]
        total_b += s["bytes"]
        total_r += s["records"]
        first = s["first"] if first is None else min(first, s["first"])
        last = s["last"] if last is None else max(last, s["last"])
        num_b += s["bytes"]
        num_r += s["records"]
        den_b += limits.write_bytes_per_s * (window + 1)
        den_r += limits.write_records_per_s * (window + 1)
    if not den_b:
        return None, None, None
    span = last - first if last > first else None
    return (max(num_b / den_b, num_r / den_r),
            total_b / span / 1e6 if span else None,
            total_r / span if span else None)


EXTRA_PROPS = []


def kncat_props(kind, limits, scale, opts):
    props = []
    if kind in ("poll", "efo"):
        props += ["poll.bytes.per.second=%d" % limits.read_bytes_per_s]
        if scale < 1:
            # Not below 64 KiB: the lab (a Python proxy and kinesalite on a
            # shared machine) cannot take the hundreds of small calls a
            # second that 64 shards of tiny buffers would make.
            props += ["buffer.max.bytes=%d" % max(64 * 1024, 2 * MIB * scale)]
    else:
        props += ["shard.bytes.per.second=%d" % limits.write_bytes_per_s,
                  "shard.records.per.second=%d" % max(1, limits.write_records_per_s)]
    return props + EXTRA_PROPS   # later ones win


class Bench:
    def __init__(self, a):
        self.a = a
        self.kncat = os.environ.get("KNCAT") or os.path.join(a.build, "kncat")
        self.before = os.path.join(a.baseline, "kncat") if a.baseline else None
        self.tmp = tempfile.mkdtemp(prefix="bench_limits.")
        self.results = []
        self.failed = False

    def binary(self, client):
        return self.before if client == "kncat-before" else self.kncat

    def add_before(self, cmds):
        """The kncat commands again with the baseline's kncat."""
        if self.before and "kncat" in cmds:
            cmds["kncat-before"] = [self.before] + cmds["kncat"][1:]

    def fill(self, server, stream, shards, n, size, kpl, props=()):
        client = lab.boto3_client("kinesis", server)
        create_stream(client, stream, shards)
        data = os.path.join(self.tmp, "fill.txt")
        make_input(data, n, size)
        t = time.time()
        cmd = [self.kncat, "-q", "produce", stream, data, "-K", "\\t",
               "-X", "shard.rate.percent=10000",
               "-X", "message.timeout.ms=900000"] + list(props)
        if kpl:
            cmd.append("--aggregate")
        env = lab.env_for(kinesis=server)
        r = run_measured(cmd, env, None)
        os.unlink(data)
        if r["rc"]:
            sys.stderr.write(r["err"])
            raise SystemExit("filling %s failed" % stream)
        print("  filled %d records of %d B%s on %d shards in %.1f s"
              % (n, size, " (KPL aggregated)" if kpl else "", shards,
                 time.time() - t), flush=True)

    def report(self, case, client, r, fraction, mbps, rps, data_bytes, throttled,
               sent=None):
        minutes = r["wall"] / 60
        row = {"case": case, "client": client, "fraction": fraction, "mbps": mbps,
               "rps": rps, "throttles_min": throttled / minutes if minutes else 0,
               "cpu_mb": r["cpu"] / (data_bytes / 1e6) if data_bytes else None,
               "wall": r["wall"], "cpu": r["cpu"], "throttled": throttled,
               "throttled_pct": 100.0 * throttled / sent if sent else None}
        row["rss"] = r.get("rss")
        self.results.append(row)
        print("  %-10s %s of limit  %s MB/s  %s rec/s  %6.1f throttles/min%s  "
              "%s CPU s/MB  RSS %s MB  wall %.1f s"
              % (LABELS.get(client, client), fmt(fraction, "%5.3f"), fmt(mbps, "%6.2f"),
                 fmt(rps, "%7.0f"), row["throttles_min"],
                 "" if sent is None else " (%.2f%% of entries)" % row["throttled_pct"],
                 fmt(row["cpu_mb"], "%.4f"), fmt(row["rss"], "%.1f"), r["wall"]),
              flush=True)

    # -- cases

    def poll_case(self, name, shards, size, scale, opts, server):
        limits = Limits().scaled(scale)
        seconds = self.a.seconds
        n = int(limits.read_bytes_per_s * shards * seconds / size)
        stream = "lim-" + name
        print("%s: %d shards, %s records, limits x %g (%.0f KiB/s per shard), "
              "%d s at the limit" % (name, shards,
                                     "50 KB KPL" if opts.get("kpl") else "%d B" % size,
                                     scale, limits.read_bytes_per_s / 1024, seconds),
              flush=True)
        self.fill(server, stream, shards, n, size, opts.get("kpl"))
        props = kncat_props("poll", limits, scale, opts)
        cmds = {
            "kncat": [self.kncat, "-q", "consume", stream, "-e", "-J"]
                     + [x for p in props for x in ("-X", p)],
            "js": ["node", os.path.join(SRC, "bench", "consume_js.js"), "ENDPOINT", stream],
            # One worker of a coordinated consumer, a new application each
            # run (its own lease file): the same reader behind the leases.
            "kncat-group": [self.kncat, "-q", "group", stream, "--app", "lim",
                            "--leases", "LEASES", "-e", "-J"]
                           + [x for p in props for x in ("-X", p)],
        }
        self.add_before(cmds)
        for rnd in range(self.a.rounds):
            for c in self.clients:
                cmd = list(cmds[c])
                leases = os.path.join(self.tmp, "leases-%s-%d.db" % (name, rnd))
                cmd = ["sqlite:" + leases if x == "LEASES" else x for x in cmd]
                with FaultProxy(server, limits=limits) as proxy:
                    cmd = [proxy.endpoint if x == "ENDPOINT" else x for x in cmd]
                    env = lab.env_for(kinesis=proxy)
                    env["KN_SOURCE_DIR"] = SRC
                    with open(os.devnull, "wb") as devnull:
                        r = run_measured(cmd, env, devnull if c != "js" else None)
                    stats = proxy.limit_stats()
                for f in (leases, leases + "-wal", leases + "-shm"):
                    if os.path.exists(f):
                        os.unlink(f)
                if r["rc"]:
                    sys.stderr.write(r["err"])
                    print("  %s failed (exit %d)" % (LABELS[c], r["rc"]))
                    self.failed = True
                    continue
                g = stats.get("GetRecords", {})
                fraction, mbps, rps = read_fraction(stats, limits.read_bytes_per_s)
                self.report(name, c, r, fraction, mbps, rps, g.get("bytes", 0),
                            g.get("throttled", 0))

    def share_case(self, name, shards, size, scale, opts, server):
        """Two applications at poll.share=50 on the same shards: the proxy
        meters the shard for both, as the service does."""
        limits = Limits().scaled(scale)
        seconds = self.a.seconds
        n = int(limits.read_bytes_per_s * shards * seconds / size / 2)
        stream = "lim-" + name
        print("%s: two kncat at poll.share=50, %d shard(s), %d B records, %d s at "
              "the limit together" % (name, shards, size, seconds), flush=True)
        self.fill(server, stream, shards, n, size, False)
        props = kncat_props("poll", limits, scale, opts) + ["poll.share=50"]
        cmd = [self.kncat, "-q", "consume", stream, "-e", "-J"] + \
            [x for p in props for x in ("-X", p)]
        import threading
        for rnd in range(self.a.rounds):
            with FaultProxy(server, limits=limits) as proxy:
                env = lab.env_for(kinesis=proxy)
                runs = [None, None]

                def one(i):
                    with open(os.devnull, "wb") as devnull:
                        runs[i] = run_measured(cmd, env, devnull)
                threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                stats = proxy.limit_stats()
            if any(r["rc"] for r in runs):
                for r in runs:
                    sys.stderr.write(r["err"])
                print("  kncat failed")
                self.failed = True
                continue
            g = stats.get("GetRecords", {})
            fraction, mbps, rps = read_fraction(stats, limits.read_bytes_per_s)
            both = dict(runs[0], cpu=runs[0]["cpu"] + runs[1]["cpu"],
                        wall=max(r["wall"] for r in runs))
            self.report(name, "kncat", both, fraction, mbps, rps, g.get("bytes", 0),
                        g.get("throttled", 0))

    def efo_case(self, name, shards, size, scale, opts, server):
        limits = Limits().scaled(scale)
        seconds = self.a.seconds
        n = int(limits.efo_bytes_per_s * shards * seconds / size)
        stream = "lim-" + name
        print("%s: fan-out on kinesis-local, %d shard(s), %d B records, limits x %g "
              "(%.0f KiB/s per shard), %d s at the limit"
              % (name, shards, size, scale, limits.efo_bytes_per_s / 1024, seconds),
              flush=True)
        self.fill(server, stream, shards, n, size, False)
        props = kncat_props("efo", limits, scale, opts)
        base = [self.kncat, "-q", "consume", stream, "-e", "-J"] + \
            [x for p in props for x in ("-X", p)]
        cmds = {"kncat": base + ["--efo", "bench-limits"], "kncat-poll": base}
        self.add_before(cmds)
        for rnd in range(self.a.rounds):
            for c in cmds:
                with FaultProxy(server, limits=limits) as proxy:
                    env = lab.env_for(kinesis=proxy)
                    with open(os.devnull, "wb") as devnull:
                        r = run_measured(cmds[c], env, devnull)
                    stats = proxy.limit_stats()
                if r["rc"]:
                    sys.stderr.write(r["err"])
                    print("  %s failed (exit %d)" % (LABELS[c], r["rc"]))
                    self.failed = True
                    continue
                efo = c != "kncat-poll"
                action = "SubscribeToShard" if efo else "GetRecords"
                g = stats.get(action, {})
                rate = limits.efo_bytes_per_s if efo else limits.read_bytes_per_s
                fraction, mbps, rps = read_fraction(
                    {"shards": [s for s in stats.get("shards", [])
                                if s["action"] == action]}, rate)
                self.report(name, c, r, fraction, mbps, rps, g.get("bytes", 0),
                            g.get("throttled", 0))

    def put_case(self, name, shards, size, scale, opts, server):
        limits = Limits().scaled(scale)
        seconds = self.a.seconds
        used = 1 if opts.get("hot") else shards
        # Enough records for `seconds` at whichever limit binds.
        per_s = min(limits.write_bytes_per_s / (size + 16), limits.write_records_per_s)
        if opts.get("kpl"):
            per_s = limits.write_bytes_per_s / (size + 4)
        n = int(per_s * used * seconds)
        print("%s: %d shards%s, %d B records%s, limits x %g (%.0f KiB/s, %.0f rec/s "
              "per shard), %d records" % (
                  name, shards, " (one hot key)" if opts.get("hot") else "", size,
                  " aggregated" if opts.get("kpl") else "", scale,
                  limits.write_bytes_per_s / 1024, limits.write_records_per_s, n),
              flush=True)
        data = os.path.join(self.tmp, "put-%s.txt" % name)
        make_input(data, n, size, hot=opts.get("hot"))
        client = lab.boto3_client("kinesis", server)
        props = kncat_props("put", limits, scale, opts)
        for rnd in range(self.a.rounds):
            for c in self.clients:
                if c == "kncat-group":
                    continue   # a reader
                stream = "lim-%s-%s-%d" % (name, c, rnd)
                create_stream(client, stream, shards)
                if c == "kpl":
                    cmd = java_cmd("kpl", "dev.libkinesis.lab.Produce") + [
                        "--stream", stream, "--kinesis", "TLS",
                        "--aggregate", "true" if opts.get("kpl") else "false"]
                elif c != "js":
                    cmd = [self.binary(c), "-q", "produce", stream, data, "-K", "\\t"] + \
                        [x for p in props for x in ("-X", p)]
                    if opts.get("kpl"):
                        cmd.append("--aggregate")
                else:
                    cmd = ["node", os.path.join(SRC, "bench", "produce_node.js"),
                           "ENDPOINT", stream, data]
                with FaultProxy(server, limits=limits) as proxy, TlsFront(proxy) as tls:
                    cmd = [proxy.endpoint if x == "ENDPOINT" else
                           tls.endpoint if x == "TLS" else x for x in cmd]
                    env = lab.env_for(kinesis=proxy)
                    env["KN_SOURCE_DIR"] = SRC
                    r = run_tree_measured(cmd, data) if c == "kpl" else \
                        run_measured(cmd, env, None)
                    stats = proxy.limit_stats()
                if c == "kpl" and r["rc"] == 0:
                    self.read_back(server, stream, n)
                client.delete_stream(StreamName=stream)
                if r["rc"]:
                    sys.stderr.write(r["err"])
                    print("  %s failed (exit %d)" % (LABELS[c], r["rc"]))
                    self.failed = True
                    continue
                p = stats.get("PutRecords", {})
                admitted = p.get("records", 0)
                if not opts.get("kpl") or c == "js":  # (aggregates: records stored)
                    if admitted != n:
                        print("  %s: %d records stored, %d sent: MISMATCH"
                              % (LABELS[c], admitted, n))
                        self.failed = True
                fraction, mbps, rps = write_fraction(stats, limits)
                self.report(name, c, r, fraction, mbps, rps, p.get("bytes", 0),
                            p.get("throttled", 0),
                            sent=admitted + p.get("throttled", 0))
        os.unlink(data)

    def read_back(self, server, stream, n):
        """Every line the KPL was fed comes out of the stream (kncat
        consume de-aggregates)."""
        r = subprocess.run([self.kncat, "-q", "consume", stream, "-e"],
                           env=lab.env_for(kinesis=server), capture_output=True,
                           timeout=600)
        got = r.stdout.count(b"\n")
        print("  read back with kncat consume: %d of %d records%s"
              % (got, n, "" if got == n and r.returncode == 0 else ": MISMATCH"),
              flush=True)
        if got != n or r.returncode:
            self.failed = True

    def run(self, cases):
        self.clients = [c for c in self.a.clients.split(",") if c]
        if self.before and "kncat" in self.clients:
            self.clients.append("kncat-before")
        polls = [c for c in cases if CASES[c][0] in ("poll", "put", "share")]
        efos = [c for c in cases if CASES[c][0] == "efo"]
        if polls:
            with lab.Kinesalite() as k:
                for name in polls:
                    kind, shards, size, scale, opts = CASES[name]
                    getattr(self, kind + "_case")(name, shards, size, scale, opts, k)
        if efos:
            with lab.KinesisLocal() as kl:
                for name in efos:
                    kind, shards, size, scale, opts = CASES[name]
                    self.efo_case(name, shards, size, scale, opts, kl)
        os.rmdir(self.tmp)

    def summary(self):
        print()
        print("medians over %d round(s); fraction of the limit, CPU s per MB, "
              "throttles per minute" % self.a.rounds)
        print("%-16s %-10s %8s %9s %9s %10s %10s" % (
            "case", "client", "fraction", "MB/s", "rec/s", "thr/min", "CPU s/MB"))
        by = {}
        for row in self.results:
            by.setdefault((row["case"], row["client"]), []).append(row)
        med = {}
        for key, rows in by.items():
            m = {k: median([r.get(k) for r in rows]) for k in
                 ("fraction", "mbps", "rps", "throttles_min", "cpu_mb", "rss")}
            med[key] = m
            print("%-16s %-10s %8s %9s %9s %10s %10s" % (
                key[0], LABELS.get(key[1], key[1]), fmt(m["fraction"], "%.3f"),
                fmt(m["mbps"], "%.2f"), fmt(m["rps"], "%.0f"),
                fmt(m["throttles_min"], "%.1f"), fmt(m["cpu_mb"], "%.4f")))
        print()
        print("kncat / peer: fraction of the limit, CPU per MB")
        for (case, client), m in med.items():
            if client != "kncat":
                continue
            for peer in ("js", "kpl", "kncat-poll", "kncat-before", "kncat-group"):
                if (case, peer) not in med:
                    continue
                p = med[(case, peer)]
                print("%-16s vs %-12s fraction %s   CPU/MB %s   RSS %s" % (
                    case, LABELS[peer], ratio(m["fraction"], p["fraction"]),
                    ratio(m["cpu_mb"], p["cpu_mb"]), ratio(m["rss"], p["rss"])))
        print()
        short = [(c, m["fraction"]) for (c, cl), m in med.items()
                 if cl == "kncat" and m["fraction"] is not None and m["fraction"] < 0.95]
        print("kncat at >= 0.95 of the limit: %s" % (
            "every case" if not short else "NOT in " + ", ".join(
                "%s (%.3f)" % s for s in short)))


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, f):
    return "-" if v is None else f % v


def ratio(a, b):
    if a is None or not b:
        return "-"
    return "%.3f" % (a / b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--cases", default=None, help="comma list of: " + ", ".join(CASES))
    ap.add_argument("--seconds", type=float, default=30,
                    help="backlog / run length at the limit (default 30)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", default="kncat,js")
    ap.add_argument("--baseline", default=None,
                    help="build directory of an earlier kncat, run next to this one")
    ap.add_argument("-X", dest="props", action="append", default=[],
                    help="extra kncat property (experiments)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: a few cases, 8 s each, one round")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.rounds = min(a.seconds, 8), 1
    cases = a.cases.split(",") if a.cases else (QUICK if a.quick else list(CASES))
    for c in cases:
        if c not in CASES:
            ap.error("unknown case %r" % c)
    EXTRA_PROPS.extend(a.props)
    b = Bench(a)
    for k in (b.kncat, b.before):
        if k and not os.path.exists(k):
            print("kncat not found at %s" % k)
            return 1
    b.run(cases)
    b.summary()
    return 1 if b.failed else 0


if __name__ == "__main__":
    sys.exit(main())
