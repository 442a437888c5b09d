#!/usr/bin/env python3
"""The Python package's consume cost: client CPU seconds (user + sys of the
client process and all its threads, from wait4), peak RSS and records per
second of draining one kinesalite stream into a do-nothing handler, for

  libkinesis   bench/consume_python.py: the package's Consumer, poll() in a
               loop, every record's data, sequence number and length looked
               at (python/, installed by `make python-check` or
               `pip install ./python`)
  boto3        bench/consume_boto3.py: a GetRecords loop per shard
  kncat        kncat consume -e > /dev/null: the C library's own consumer

on the same stream (200,000 records of 1000 bytes on 4 shards by default,
as bench_consume.py),
in interleaved rounds, with medians and ratios.  Targets: the package's
CPU per MB at most 1/10 of boto3's and at most 1.5 times kncat's.

  python3 bench/bench_python.py [--build DIR] [--python PATH]
                                [--records N] [--rounds R] [--quick]

--python is the interpreter that has the package.  By default a virtual
environment with nothing but the package, as a user would have it:
BUILD/python-bench-venv, made when missing (`pip install ./python`, the
extension's CMake build shared with `make python-check` in
BUILD/python-build).  MB is
10^6 bytes of payload; every client's record and byte counts are checked
(kncat's through the size of what it wrote).  The C consumers keep to
Kinesis's read limits (2 MB/s and 5 calls/s per shard), so their wall time
is bound by them; the boto3 loop reads as fast as kinesalite answers.

The line "python startup" is the package's interpreter importing the
package and exiting, measured the same way: the fixed cost inside the
libkinesis figure (its site-packages, e.g. a certifi .pth, count too)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_consume import SRC, STREAM, fill, lab, run_measured  # noqa: E402

CLIENTS = ("libkinesis", "boto3", "kncat")


def make_venv(build):
    """BUILD/python-bench-venv with the package installed; its python."""
    venv = os.path.join(build, "python-bench-venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    if subprocess.run([py, "-c", "import libkinesis"],
                      stderr=subprocess.DEVNULL).returncode:
        subprocess.run([py, "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", "-C",
                        "build-dir=" + os.path.join(build, "python-build"),
                        os.path.join(SRC, "python")], check=True)
    return py


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--python", default=None)
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 20,000 records, one round")
    a = ap.parse_args()
    if a.quick:
        a.records, a.rounds = min(a.records, 20000), 1
    kncat = os.environ.get("KNCAT") or os.path.join(a.build, "kncat")
    py = a.python or make_venv(os.path.abspath(a.build))
    for path, hint in ((kncat, "build it"), (py, "pip install ./python")):
        if not os.path.exists(path):
            print("%s not found (%s)" % (path, hint))
            return 1
    mb = a.records * a.size / 1e6
    print("python consume: %d records of %d bytes (%.1f MB) on %d kinesalite "
          "shards, %d round(s)" % (a.records, a.size, mb, a.shards, a.rounds),
          flush=True)

    runs = {c: [] for c in CLIENTS}
    failed = False
    tmp = tempfile.mkdtemp(prefix="bench_python.")
    with lab.Kinesalite() as k, open(os.devnull, "wb") as devnull:
        env = lab.env_for(kinesis=k)
        fill(kncat, env, lab.boto3_client("kinesis", k), a.records, a.size,
             a.shards, tmp)
        cmds = {
            "libkinesis": [py, os.path.join(SRC, "bench", "consume_python.py"),
                           k.endpoint, STREAM],
            "boto3": [sys.executable, os.path.join(SRC, "bench",
                                                   "consume_boto3.py"),
                      k.endpoint, STREAM],
            "kncat": [kncat, "-q", "consume", STREAM, "-e"],
        }
        startup = []
        for rnd in range(a.rounds):
            startup.append(run_measured([py, "-c", "import libkinesis"], env,
                                        None)["cpu"])
            for c in CLIENTS:
                r = run_measured(cmds[c], env, devnull if c == "kncat" else None)
                if r["rc"]:
                    sys.stderr.write(r["err"])
                    print("%s failed (exit %d)" % (c, r["rc"]))
                    return 1
                note = ""
                if c == "kncat":
                    # each payload and a newline
                    ok = r["wchar"] is None or \
                        r["wchar"] == a.records * (a.size + 1)
                else:
                    got = json.loads(r["out"].strip().splitlines()[-1])
                    ok = got["records"] == a.records and \
                        got["bytes"] == a.records * a.size
                if not ok:
                    note = "  MISMATCH"
                    failed = True
                runs[c].append(r)
                print("  round %d  %-10s cpu %7.3f s  wall %6.2f s  "
                      "%.4f CPU s/MB  peak RSS %6.1f MB  %8.0f rec/s%s"
                      % (rnd + 1, c, r["cpu"], r["wall"], r["cpu"] / mb,
                         r["rss"], a.records / r["wall"], note), flush=True)
    os.rmdir(tmp)

    med = {c: {"cpu": statistics.median(x["cpu"] for x in v),
               "rss": statistics.median(x["rss"] for x in v),
               "wall": statistics.median(x["wall"] for x in v)}
           for c, v in runs.items()}
    print()
    print("medians of %d round(s)" % a.rounds)
    print("%-11s %9s %11s %13s %10s %9s" % (
        "client", "CPU s", "CPU s/MB", "peak RSS MB", "records/s", "wall s"))
    for c, m in med.items():
        print("%-11s %9.3f %11.5f %13.1f %10.0f %9.2f" % (
            c, m["cpu"], m["cpu"] / mb, m["rss"], a.records / m["wall"],
            m["wall"]))
    st = statistics.median(startup)
    print("%-11s %9.3f   (inside the libkinesis figure)" % ("py startup", st))
    lk, b3, kc = med["libkinesis"], med["boto3"], med["kncat"]
    r_b3 = lk["cpu"] / b3["cpu"]
    r_kc = lk["cpu"] / kc["cpu"]
    print()
    print("libkinesis / boto3  CPU per MB %.3f (1/%.1f)   peak RSS %.2f   "
          "records/s %.1fx   target CPU <= 0.1: %s"
          % (r_b3, 1 / r_b3, lk["rss"] / b3["rss"], b3["wall"] / lk["wall"],
             "met" if r_b3 <= 0.1 else "NOT met"))
    print("libkinesis / kncat  CPU per MB %.3f   peak RSS %.2f   "
          "records/s %.2fx   target CPU <= 1.5: %s"
          % (r_kc, lk["rss"] / kc["rss"], kc["wall"] / lk["wall"],
             "met" if r_kc <= 1.5 else "NOT met"))
    print("libkinesis / kncat  CPU per MB without the interpreter's startup "
          "%.3f" % ((lk["cpu"] - st) / kc["cpu"]))
    if failed:
        print("some client did not read every record")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
