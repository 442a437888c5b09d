#!/usr/bin/env python3
"""Enhanced fan-out next to polling, on kinesis-local, both with default
settings, through tests/tools/efo_tool:

1. propagation latency: a record is put every 100-300 ms (the put time in
   its payload) while polling and fan-out consumers, over HTTP/2 and over
   HTTP/1.1, read the same shard at once; latency = when poll() returned
   it - when put was called.  Median and p99.
2. client CPU per MB: draining the same stream of 1 KiB records, in
   alternating rounds; the CPU of a run on an empty stream (start-up,
   TLS, registration) is subtracted.  Over HTTP/2 and HTTP/1.1.
3. peak memory (VmHWM) of a worker holding 32 subscriptions for 20 s,
   next to a polling worker on the same 32 shards.

kinesis-local pushes subscription events once a second and polling waits
poll.idle.ms (1 s) when caught up, so both latencies here are bounded by
those cadences, not by the client (AWS: about 70 ms for fan-out).  Over
HTTP/2 kinesis-local hands each event over about a second late (its Node
HTTP/2 client sees the same), so latency is measured over HTTP/1.1 too.

Usage: bench_efo.py [--build DIR] [--records N] [--rounds R] [--latency N]
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402

MODES = {"polling": [], "efo": ["efo.consumer.name=bench"]}


def tool_cmd(build, stream, mode, args):
    cmd = [os.path.join(build, "tests", "tools", "efo_tool"), "-X", "ssl.verify=false"]
    for p in MODES[mode]:
        cmd += ["-X", p]
    return cmd + [stream] + args


def summary(stderr):
    for line in stderr.splitlines():
        if line.startswith("SUMMARY "):
            return json.loads(line[8:])
    raise RuntimeError("no summary:\n" + stderr[-3000:])


def create(c, name, shards):
    c.create_stream(StreamName=name, ShardCount=shards)
    while c.describe_stream_summary(
            StreamName=name)["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        time.sleep(0.1)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def latency(server, c, build, n):
    """Four consumers read one shard at once: polling and fan-out, over
    HTTP/2 and over HTTP/1.1 (two consumer names: one subscription each)."""
    create(c, "lat", 1)
    runs = [("polling h2", "polling", server.tls_endpoint, []),
            ("efo h2", "efo", server.tls_endpoint, ["efo.consumer.name=bench-h2"]),
            ("polling 1.1", "polling", server.endpoint, []),
            ("efo 1.1", "efo", server.endpoint, ["efo.consumer.name=bench-h1"])]
    procs, outs = {}, {}
    for label, mode, url, props in runs:
        cmd = tool_cmd(build, "lat", "polling", ["-c", str(n + 1)])
        for p in props:
            cmd[1:1] = ["-X", p]
        procs[label] = subprocess.Popen(cmd, env=lab.env_for(kinesis=url),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)

    def drain(label):
        outs[label] = procs[label].communicate()
    threads = [threading.Thread(target=drain, args=(label,)) for label in procs]
    for t in threads:
        t.start()
    c.put_record(StreamName="lat", Data=b"warmup", PartitionKey="w")
    time.sleep(8)  # every consumer reading (registration, first events)
    for _ in range(n):
        t = int(time.time() * 1000)
        c.put_record(StreamName="lat", Data=("lat:%d" % t).encode(), PartitionKey="k")
        time.sleep(random.uniform(0.1, 0.3))
    for t in threads:
        t.join(120)
    res = {}
    for label in procs:
        out, err = outs[label]
        lat = []
        for line in out.splitlines():
            r = json.loads(line)
            if r["data"].startswith("lat:"):
                lat.append(r["recv_ms"] - int(r["data"][4:]))
        assert len(lat) == n, (label, len(lat), err[-2000:])
        res[label] = (statistics.median(lat), pct(lat, 99), min(lat), max(lat))
    return res


CPU_RUNS = (("polling h2", "polling", True), ("efo h2", "efo", True),
            ("polling 1.1", "polling", False), ("efo 1.1", "efo", False))


def cpu(server, c, build, records, rounds):
    create(c, "cpu", 2)
    create(c, "empty", 2)
    payload = os.urandom(384).hex()[:1000]
    sent = 0
    while sent < records:
        k = min(500, records - sent)
        c.put_records(StreamName="cpu", Records=[
            {"Data": ("%06d" % (sent + i) + payload[:1018]).encode(),
             "PartitionKey": "p%d" % (sent + i)} for i in range(k)])
        sent += k
    runs = {label: [] for label, _, _ in CPU_RUNS}
    base = {label: [] for label, _, _ in CPU_RUNS}
    for _ in range(rounds):
        for label, mode, tls in CPU_RUNS:
            env = lab.env_for(kinesis=server.tls_endpoint if tls else server.endpoint)
            p = subprocess.run(tool_cmd(build, "cpu", mode, ["-q", "-c", str(records)]), env=env,
                               capture_output=True, text=True, timeout=600)
            s = summary(p.stderr)
            assert s["records"] == records, s
            runs[label].append(s)
            p = subprocess.run(tool_cmd(build, "empty", mode, ["-q", "-e"]), env=env,
                               capture_output=True, text=True, timeout=600)
            base[label].append(summary(p.stderr)["cpu_s"])
            time.sleep(6)  # let the server release the subscriptions
    res = {}
    for label in runs:
        mb = runs[label][0]["bytes"] / 1e6
        raw = statistics.median(r["cpu_s"] for r in runs[label])
        net = raw - statistics.median(base[label])
        res[label] = (raw / mb, net / mb, statistics.median(r["maxrss_kb"] for r in runs[label]),
                      mb)
    return res


def memory(server, c, build):
    create(c, "mem", 32)
    for _ in range(4):
        c.put_records(StreamName="mem", Records=[
            {"Data": os.urandom(512), "PartitionKey": "m%d" % i} for i in range(160)])
    res = {}
    for m, url in (("efo", server.tls_endpoint), ("polling", server.tls_endpoint),
                   ("efo-http1.1", server.endpoint)):
        mode = "efo" if m.startswith("efo") else "polling"
        p = subprocess.Popen(tool_cmd(build, "mem", mode, ["-q", "-s", "/tmp/bench-efo-stats.json"]),
                             env=lab.env_for(kinesis=url), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(20)
        with open("/tmp/bench-efo-stats.json") as f:
            st = json.load(f)
        subs = sum(1 for s in st["shards"] if s.get("efo") and s["efo"]["subscriptions"])
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(60)
        s = summary(err)
        res[m] = (s["maxrss_kb"], subs, s["records"])
        time.sleep(8)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--records", type=int, default=8000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency", type=int, default=150)
    a = ap.parse_args()
    with lab.KinesisLocal() as server:
        c = lab.boto3_client("kinesis", server)
        lat = latency(server, c, a.build, a.latency)
        print("propagation latency, put -> poll (ms), %d records:" % a.latency)
        for m, (med, p99, lo, hi) in lat.items():
            print("  %-12s median %6.0f  p99 %6.0f  (min %d, max %d)" % (m, med, p99, lo, hi))
        for t in ("h2", "1.1"):
            e, p = lat["efo " + t], lat["polling " + t]
            print("  ratio efo/polling over %s: median %.2f, p99 %.2f" % (
                t, e[0] / p[0], e[1] / p[1]))
        cp = cpu(server, c, a.build, a.records, a.rounds)
        print("client CPU per MB, %.1f MB of 1 KiB records, median of %d rounds:" % (
            cp["efo h2"][3], a.rounds))
        for m, (raw, net, rss, _) in cp.items():
            print("  %-12s %.4f s/MB (%.4f without start-up), peak RSS %d KB" % (
                m, raw, net, rss))
        for t in ("h2", "1.1"):
            e, p = cp["efo " + t], cp["polling " + t]
            print("  ratio efo/polling over %s: %.2f (%.2f without start-up)" % (
                t, e[0] / p[0], e[1] / p[1]))
        mem = memory(server, c, a.build)
        print("peak memory with 32 shards, 20 s:")
        for m, (rss, subs, recs) in mem.items():
            print("  %-12s %6d KB  (%d subscriptions, %d records)" % (m, rss, subs, recs))


if __name__ == "__main__":
    main()
