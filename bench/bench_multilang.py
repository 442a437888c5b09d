#!/usr/bin/env python3
"""kncat multilang: records per second and kncat's own CPU per MB through
the MultiLangDaemon protocol to a do-nothing Node.js processor (aws-kcl,
bench/ml_null.js, checkpointing every batch) on 4 kinesalite shards, next
to `kncat group -J -e > /dev/null` draining the same stream; then the
daemon's peak RSS with 16 shards (children excluded; target < 32 MB).

  python3 bench/bench_multilang.py [--build DIR] [--records N] [--size B]
                                   [--rounds R] [--quick]

CPU is the process's own user + system time (/proc/PID/stat of the
exited process: the children's time is not in it); MB is 10^6 bytes of
payload; both runs use a DynamoDB (dynalite) lease table and start at
TRIM_HORIZON.  The multilang run ends when the processors have counted
every record, then SIGTERM."""

import argparse
import glob
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
sys.path.insert(0, os.path.join(SRC, "bench"))
import lab  # noqa: E402
from bench_consume import make_input, peak_rss_watch  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def own_cpu(pid):
    """utime + stime of pid (a zombie not yet reaped), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def fill(kncat, env, stream, shards, n, size, tmp):
    client = lab.boto3_client("kinesis", env["AWS_ENDPOINT_URL_KINESIS"])
    client.create_stream(StreamName=stream, ShardCount=shards)
    client.get_waiter("stream_exists").wait(
        StreamName=stream, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
    data = os.path.join(tmp, "input.txt")
    make_input(data, n, size)
    p = subprocess.run([kncat, "-q", "produce", stream, data, "-K", "\\t",
                        "-X", "shard.rate.percent=10000"], env=env,
                       capture_output=True)
    os.unlink(data)
    if p.returncode:
        raise SystemExit("filling failed: " + p.stderr.decode())


def measure(cmd, env, done=None, timeout=600):
    """Runs cmd until it exits (or, with done, until done() and then
    SIGTERM); returns wall, own cpu, peak rss, rc."""
    t = time.time()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err)
        stop = threading.Event()
        peak = peak_rss_watch(p.pid, stop)
        wall = None
        if done:
            while not done():
                if p.poll() is not None or time.time() - t > timeout:
                    break
                time.sleep(0.05)
            wall = time.time() - t
            p.send_signal(signal.SIGTERM)
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        stop.set()
        cpu = own_cpu(p.pid)
        _, status, _ = os.wait4(p.pid, 0)
        if wall is None:
            wall = time.time() - t
        rc = os.waitstatus_to_exitcode(status)
        if rc:
            err.seek(0)
            sys.stderr.write(err.read().decode(errors="replace")[-3000:])
        return {"wall": wall, "cpu": cpu, "rss": peak[0], "rc": rc}


def counted(out):
    total = 0
    for f in glob.glob(os.path.join(out, "count-*")):
        try:
            with open(f) as fh:
                total += int(fh.read() or 0)
        except (OSError, ValueError):
            pass
    return total


def run_multilang(kncat, env, stream, app, n, tmp, tag):
    out = os.path.join(tmp, "out-" + tag)
    os.makedirs(out)
    props = os.path.join(tmp, tag + ".properties")
    with open(props, "w") as f:
        f.write("executableName = node %s\nstreamName = %s\napplicationName = %s\n"
                "initialPositionInStream = TRIM_HORIZON\nretrievalMode = POLLING\n"
                "idleTimeBetweenReadsInMillis = 200\nshutdownGraceMillis = 5000\n"
                % (os.path.join(SRC, "bench", "ml_null.js"), stream, app))
    e = dict(env, ML_OUT=out, KN_LAB_DIR=os.path.join(SRC, "tests", "lab"))
    return measure([kncat, "-q", "multilang", props], e,
                   done=lambda: counted(out) >= n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--records", type=int, default=40000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.records, a.rounds = 8000, 1
    kncat = os.path.join(os.path.abspath(a.build), "kncat")
    mb = a.records * a.size / 1e6
    with lab.start("kinesalite") as kin, lab.start("dynalite") as ddb, \
            tempfile.TemporaryDirectory() as tmp:
        env = lab.env_for(kinesis=kin, dynamodb=ddb)
        fill(kncat, env, "bench4", 4, a.records, a.size, tmp)
        print("filled: %d records of %d bytes on 4 shards" % (a.records, a.size),
              flush=True)
        res = {"multilang": [], "group": []}
        for r in range(a.rounds):
            app = "bench-ml-%d" % r
            m = run_multilang(kncat, env, "bench4", app, a.records, tmp, app)
            g = measure([kncat, "-q", "group", "bench4", "--app", "bench-group-%d" % r,
                         "--leases", "dynamodb:bench-group-%d" % r, "-J", "-e"], env)
            for k, v in (("multilang", m), ("group", g)):
                if v["rc"]:
                    raise SystemExit("%s failed (exit %d)" % (k, v["rc"]))
                res[k].append(v)
                print("round %d %-9s %6.1f s %8.0f rec/s  cpu %.3f s/MB  rss %.1f MB"
                      % (r + 1, k, v["wall"], a.records / v["wall"],
                         v["cpu"] / mb, v["rss"]), flush=True)

        def med(k, f):
            return statistics.median(f(v) for v in res[k])
        ml_cpu, g_cpu = med("multilang", lambda v: v["cpu"]) / mb, \
            med("group", lambda v: v["cpu"]) / mb
        ml_rate, g_rate = med("multilang", lambda v: a.records / v["wall"]), \
            med("group", lambda v: a.records / v["wall"])
        print("median: multilang %.0f records/s, %.4f CPU s/MB; group -J %.0f "
              "records/s, %.4f CPU s/MB; multilang/group CPU %.2f, speed %.2f"
              % (ml_rate, ml_cpu, g_rate, g_cpu, ml_cpu / g_cpu if g_cpu else 0,
                 ml_rate / g_rate if g_rate else 0))

        n16 = max(1600, a.records // 4)
        fill(kncat, env, "bench16", 16, n16, a.size, tmp)
        m = run_multilang(kncat, env, "bench16", "bench-ml16", n16, tmp, "ml16")
        ok = m["rss"] < 32
        print("16 shards: %d records, daemon peak RSS %.1f MB (target < 32 MB: %s)"
              % (n16, m["rss"], "met" if ok else "NOT met"))
        return 0 if ok and not m["rc"] else 1


if __name__ == "__main__":
    sys.exit(main())
