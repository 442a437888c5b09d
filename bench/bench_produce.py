#!/usr/bin/env python3
"""Produce cost: client CPU seconds (user + sys of the client process only,
from wait4) per MB of payload sent to kinesalite with PutRecords, for

  kncat produce --aggregate   (the library's producer, KPL aggregation)
  kncat produce               (the same, one Kinesis record per line)
  the AWS SDK for JavaScript v3 (bench/produce_node.js, NodeHttpHandler)

on the same input file (1 KB records, random partition keys, 4 shards), in
interleaved rounds in one run, with the ratios.  The target is kncat
--aggregate at most 1/10 of the JS SDK's CPU per MB.

  python3 bench/bench_produce.py [--build DIR] [--mb 16] [--rounds 2]

The local server does not throttle, so the per-shard rate limits are
lifted (-X shard.rate.percent=10000) to keep the run CPU-bound; the cost
per MB does not depend on them."""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402


def run_measured(cmd, env, stdin=None):
    """Runs cmd; returns (exit code, CPU seconds, wall seconds, stdout)."""
    t = time.time()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, env=env, stdin=stdin, stdout=out,
                             stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if p.returncode:
        sys.stderr.write(err.decode()[-3000:])
    return p.returncode, ru.ru_utime + ru.ru_stime, time.time() - t, text


def make_input(path, mb, size=1000):
    rnd = random.Random(42)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    n = int(mb * 1e6 / size)
    with open(path, "wb") as f:
        for i in range(n):
            key = b"%016x" % rnd.getrandbits(64)
            base = bytes(rnd.choice(alphabet) for _ in range(64))
            payload = (base * (size // 64 + 1))[:size]
            f.write(key + b"\t" + payload + b"\n")
    return n, n * size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--mb", type=float, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shards", type=int, default=4)
    a = ap.parse_args()
    kncat = os.environ.get("KNCAT") or os.path.join(a.build, "kncat")
    if not os.path.exists(kncat):
        print("kncat not found at %s" % kncat)
        return 1
    node_script = os.path.join(SRC, "bench", "produce_node.js")
    tmp = tempfile.mkdtemp(prefix="bench_produce.")
    data = os.path.join(tmp, "input.txt")
    n, payload = make_input(data, a.mb)
    mb = payload / 1e6
    print("input: %d records of 1000 bytes (%.1f MB), %d shards, %d rounds"
          % (n, mb, a.shards, a.rounds))

    runs = {"kncat --aggregate": [], "kncat": [], "JS SDK v3": []}
    with lab.Kinesalite() as k:
        env = lab.env_for(kinesis=k)
        env["KN_SOURCE_DIR"] = SRC
        client = lab.boto3_client("kinesis", k)
        count = 0

        def stream():
            nonlocal count
            count += 1
            name = "bench-%d" % count
            client.create_stream(StreamName=name, ShardCount=a.shards)
            client.get_waiter("stream_exists").wait(
                StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
            return name

        for r in range(a.rounds):
            for label in runs:
                s = stream()
                if label == "JS SDK v3":
                    cmd = ["node", node_script, k.endpoint, s, data]
                else:
                    cmd = [kncat, "-q", "produce", s, data, "-K", "\\t",
                           "-X", "shard.rate.percent=10000"]
                    if label == "kncat --aggregate":
                        cmd.insert(5, "--aggregate")
                rc, cpu, wall, _ = run_measured(cmd, env)
                if rc:
                    print("%s failed (exit %d)" % (label, rc))
                    return 1
                runs[label].append((cpu, wall))
                print("  round %d  %-18s cpu %6.3f s  wall %6.2f s  %.4f CPU s/MB"
                      % (r + 1, label, cpu, wall, cpu / mb), flush=True)
                client.delete_stream(StreamName=s)

    best = {label: min(c for c, _ in v) / mb for label, v in runs.items()}
    print()
    print("%-18s %14s" % ("client", "CPU s per MB"))
    for label, v in best.items():
        print("%-18s %14.4f" % (label, v))
    js = best["JS SDK v3"]
    print()
    for label in ("kncat --aggregate", "kncat"):
        ratio = best[label] / js
        print("%-18s / JS SDK v3 = %.3f (1/%.1f)%s" % (
            label, ratio, 1 / ratio if ratio else float("inf"),
            "  target <= 0.1: %s" % ("met" if ratio <= 0.1 else "NOT met")
            if label == "kncat --aggregate" else ""))
    os.unlink(data)
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
