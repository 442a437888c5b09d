#!/usr/bin/env python3
"""Consume cost: client CPU seconds (user + sys of the client process only,
from wait4) and peak RSS of draining one stream of kinesalite, for

  kncat       kncat consume -e -J > /dev/null (the library's consumer)
  JS SDK v3   bench/consume_js.js, a GetRecords loop per shard
  boto3       bench/consume_boto3.py, a GetRecords loop per shard

on the same stream (200,000 records of 1000 bytes of text on 4 shards by
default), in interleaved rounds in one run, with the medians and the
ratios.  Targets: kncat at most 1/10 of the JS SDK's CPU per MB and under
32 MB peak RSS.  Then the in-process decode benchmark (bench_decode:
canned GetRecords bodies to records, next to a plain base64 decode of the
same bytes).

  python3 bench/bench_consume.py [--build DIR] [--records N] [--rounds R]
                                 [--quick] [--clients kncat,js,boto3]
                                 [--baseline DIR] [-X prop=value]...

--baseline DIR adds "before": the kncat of an earlier build (DIR/kncat)
with the same command, in the same rounds, and prints kncat / before.

MB here is 10^6 bytes of record payload; peak RSS is the client's own
high-water mark (VmHWM, sampled).  Every client's count is checked:
the peers report records, payload bytes and the total length of the
sequence numbers, from which the exact size of kncat's JSON output
follows (read from /proc/PID/io of the exited process)."""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402

STREAM = "bench"
KEY_LEN = 16
CLIENTS = ("kncat", "js", "boto3")
LABELS = {"kncat": "kncat", "js": "JS SDK v3", "boto3": "boto3",
          "before": "before"}


def peak_rss_watch(pid, stop):
    """Samples VmHWM of pid until stop is set; returns a list whose only
    element becomes the largest value seen, in MB.

    Not ru_maxrss: Linux carries the parent's high-water mark through the
    vfork and exec that start the child, so a client launched from this
    process (boto3 imported) would never show less than this process.
    VmHWM belongs to the client's own memory map and only grows, so a
    sample every 10 ms misses at most what its last moments add."""
    peak = [0.0]

    def watch():
        path = "/proc/%d/status" % pid
        while not stop.is_set():
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak[0] = max(peak[0], int(line.split()[1]) / 1024.0)
                            break
            except OSError:
                return
            stop.wait(0.01)

    threading.Thread(target=watch, daemon=True).start()
    return peak


def run_measured(cmd, env, stdout):
    """Runs cmd; returns a dict: rc, cpu (s), wall (s), rss (peak MB),
    wchar (bytes the process wrote with write(2)), out (its stdout when
    captured), err (the tail of its stderr)."""
    t = time.time()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                             stdout=stdout if stdout is not None else out,
                             stderr=err)
        stop = threading.Event()
        peak = peak_rss_watch(p.pid, stop)
        # Wait without reaping, so that /proc/PID/io is still readable.
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        stop.set()
        wchar = None
        try:
            with open("/proc/%d/io" % p.pid) as f:
                for line in f:
                    if line.startswith("wchar:"):
                        wchar = int(line.split()[1])
        except OSError:
            pass
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.time() - t
        out.seek(0)
        err.seek(0)
        return {"rc": p.returncode, "cpu": ru.ru_utime + ru.ru_stime,
                "wall": wall, "rss": peak[0], "wchar": wchar,
                "out": out.read().decode(errors="replace"),
                "err": err.read().decode(errors="replace")[-3000:]}


def make_input(path, n, size):
    """n lines "KEY<TAB>PAYLOAD": random 16-hex-digit keys, text payloads
    that need no JSON escaping."""
    rnd = random.Random(42)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
    bases = [bytes(rnd.choice(alphabet) for _ in range(97)) for _ in range(64)]
    with open(path, "wb") as f:
        for i in range(n):
            base = bases[i % 64]
            payload = (base * (size // len(base) + 1))[:size]
            f.write(b"%016x\t" % rnd.getrandbits(64) + payload + b"\n")


def fill(kncat, env, client, n, size, shards, tmp):
    client.create_stream(StreamName=STREAM, ShardCount=shards)
    client.get_waiter("stream_exists").wait(
        StreamName=STREAM, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
    data = os.path.join(tmp, "input.txt")
    make_input(data, n, size)
    t = time.time()
    r = run_measured([kncat, "-q", "produce", STREAM, data, "-K", "\\t",
                      "-X", "shard.rate.percent=10000"], env, None)
    os.unlink(data)
    if r["rc"]:
        sys.stderr.write(r["err"])
        raise SystemExit("filling the stream failed (exit %d)" % r["rc"])
    print("filled: %d records of %d bytes on %d shards in %.1f s"
          % (n, size, shards, time.time() - t), flush=True)


def kncat_json_size(n, size, seq_chars, shard_id_len=20):
    """Bytes of kncat -J output for n text records that need no escaping,
    subsequence 0, 13-digit timestamps and 16-character keys."""
    frame = ('{"stream":"%s","shard":"","seq":"","subseq":0,"key":"","ts":'
             ',"data":""}\n' % STREAM)
    return n * (len(frame) + shard_id_len + KEY_LEN + 13 + size) + seq_chars


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 20,000 records, one round")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="comma list of %s" % ", ".join(CLIENTS))
    ap.add_argument("-X", dest="props", action="append", default=[],
                    help="extra kncat property (experiments)")
    ap.add_argument("--baseline", metavar="DIR",
                    help="an earlier build whose kncat runs as \"before\"")
    ap.add_argument("--no-decode", action="store_true",
                    help="skip the in-process decode benchmark")
    a = ap.parse_args()
    if a.quick:
        a.records, a.rounds = min(a.records, 20000), 1
    clients = [c for c in a.clients.split(",") if c]
    for c in clients:
        if c not in CLIENTS:
            ap.error("unknown client %r" % c)
    if a.baseline:
        before = os.path.join(a.baseline, "kncat")
        if not os.path.exists(before):
            ap.error("no kncat in %s" % a.baseline)
        clients.insert(clients.index("kncat") + 1 if "kncat" in clients
                       else 0, "before")
    kncat = os.environ.get("KNCAT") or os.path.join(a.build, "kncat")
    if not os.path.exists(kncat):
        print("kncat not found at %s" % kncat)
        return 1
    mb = a.records * a.size / 1e6
    print("consume: %d records of %d bytes (%.1f MB) on %d kinesalite shards, "
          "%d round(s)" % (a.records, a.size, mb, a.shards, a.rounds),
          flush=True)

    runs = {c: [] for c in clients}
    seq_chars = None
    failed = False
    tmp = tempfile.mkdtemp(prefix="bench_consume.")
    with lab.Kinesalite() as k, open(os.devnull, "wb") as devnull:
        env = lab.env_for(kinesis=k)
        env["KN_SOURCE_DIR"] = SRC
        fill(kncat, env, lab.boto3_client("kinesis", k), a.records, a.size,
             a.shards, tmp)
        cmds = {
            "kncat": [kncat, "-q", "consume", STREAM, "-e", "-J"]
                     + [x for p in a.props for x in ("-X", p)],
            "before": [os.path.join(a.baseline or "", "kncat"), "-q",
                       "consume", STREAM, "-e", "-J"]
                      + [x for p in a.props for x in ("-X", p)],
            "js": ["node", os.path.join(SRC, "bench", "consume_js.js"),
                   k.endpoint, STREAM],
            "boto3": [sys.executable, os.path.join(SRC, "bench",
                                                   "consume_boto3.py"),
                      k.endpoint, STREAM],
        }
        pending = []  # kncat runs checked once a peer told seq_chars
        for rnd in range(a.rounds):
            for c in clients:
                mine = c in ("kncat", "before")
                r = run_measured(cmds[c], env, devnull if mine else None)
                note = ""
                if r["rc"]:
                    sys.stderr.write(r["err"])
                    print("%s failed (exit %d)" % (LABELS[c], r["rc"]))
                    return 1
                if mine:
                    pending.append(r)
                else:
                    got = json.loads(r["out"].strip().splitlines()[-1])
                    if got["records"] != a.records or \
                            got["bytes"] != a.records * a.size:
                        note = "  MISMATCH: %d records, %d bytes" % (
                            got["records"], got["bytes"])
                        failed = True
                    seq_chars = got["seq_chars"]
                    note += "  %d calls" % got["calls"]
                runs[c].append(r)
                print("  round %d  %-10s cpu %7.3f s  wall %6.2f s  "
                      "%.4f CPU s/MB  peak RSS %6.1f MB%s"
                      % (rnd + 1, LABELS[c], r["cpu"], r["wall"],
                         r["cpu"] / mb, r["rss"], note), flush=True)

    for r in pending:
        if r["wchar"] is None:
            continue
        if seq_chars is not None:
            want = kncat_json_size(a.records, a.size, seq_chars)
            if r["wchar"] != want:
                print("kncat output: %d bytes, expected %d: MISMATCH"
                      % (r["wchar"], want))
                failed = True
        elif r["wchar"] < a.records * a.size:
            print("kncat output: %d bytes, less than the payload: MISMATCH"
                  % r["wchar"])
            failed = True
    os.rmdir(tmp)

    med = {c: {"cpu": statistics.median(x["cpu"] for x in v),
               "rss": statistics.median(x["rss"] for x in v),
               "wall": statistics.median(x["wall"] for x in v)}
           for c, v in runs.items()}
    print()
    print("medians of %d round(s)" % a.rounds)
    print("%-10s %12s %14s %12s %13s %8s" % (
        "client", "CPU s", "CPU s/100k rec", "CPU s/MB", "peak RSS MB",
        "wall s"))
    for c, m in med.items():
        print("%-10s %12.3f %14.4f %12.5f %13.1f %8.2f" % (
            LABELS[c], m["cpu"], m["cpu"] * 1e5 / a.records, m["cpu"] / mb,
            m["rss"], m["wall"]))
    if "kncat" in med and "before" in med:
        kc, b = med["kncat"], med["before"]
        print()
        print("kncat / before     CPU per MB %.3f   peak RSS %.3f   wall %.3f"
              % (kc["cpu"] / b["cpu"], kc["rss"] / b["rss"],
                 kc["wall"] / b["wall"]))
    if "kncat" in med:
        kc = med["kncat"]
        print()
        for peer in ("js", "boto3"):
            if peer not in med:
                continue
            p = med[peer]
            ratio = kc["cpu"] / p["cpu"]
            print("kncat / %-9s CPU per MB %.3f (1/%.1f)   peak RSS %.3f (1/%.1f)%s"
                  % (LABELS[peer], ratio, 1 / ratio if ratio else float("inf"),
                     kc["rss"] / p["rss"], p["rss"] / kc["rss"],
                     "   target CPU <= 0.1: %s" % ("met" if ratio <= 0.1
                                                   else "NOT met")
                     if peer == "js" else ""))
        print("kncat peak RSS %.1f MB   target < 32 MB: %s" % (
            kc["rss"], "met" if kc["rss"] < 32 else "NOT met"))
    sys.stdout.flush()

    if not a.no_decode:
        dec = os.path.join(a.build, "bench", "bench_decode")
        if os.path.exists(dec):
            print()
            subprocess.run([dec, "50" if a.quick else "200"], check=False)
        else:
            print("\n(bench_decode not built at %s)" % dec)
    if failed:
        print("some client did not read every record")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
