#!/usr/bin/env python3
"""Runs every benchmark of bench/ that exists, one after the other, and
prints their outputs (`make bench`).

  python3 bench/run.py [--build DIR] [--quick] [NAME...]

NAME picks some of them (default: all, in the order of BENCHES).  --quick
is a smoke run: smaller inputs, one round.  Exit status: the number of
benchmarks that failed."""

import argparse
import os
import subprocess
import sys
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# (name, command, extra arguments for --quick).  "{build}" is the build
# directory; an entry whose script or program is missing is skipped.
BENCHES = [
    ("consume", [sys.executable, "bench/bench_consume.py", "--build", "{build}"],
     ["--quick"]),
    ("produce", [sys.executable, "bench/bench_produce.py", "--build", "{build}"],
     ["--mb", "4", "--rounds", "1"]),
    ("agg", ["{build}/bench/bench_agg"], ["-t", "0.2", "-r", "1"]),
    ("failover", [sys.executable, "bench/bench_failover.py", "--build", "{build}"],
     ["--runs", "1", "--mb", "8", "--rounds", "1"]),
    ("efo", [sys.executable, "bench/bench_efo.py", "--build", "{build}"],
     ["--records", "1000", "--rounds", "1", "--latency", "30"]),
    ("lease_cost", [sys.executable, "bench/bench_lease_cost.py", "--build", "{build}"],
     ["--quick"]),
    ("scale", [sys.executable, "bench/bench_lease_cost.py", "--build", "{build}",
               "--scale"], ["--scale-shards", "200", "--mb", "4", "--rounds", "1"]),
    ("fleet", [sys.executable, "bench/bench_lease_cost.py", "--build", "{build}",
               "--fleet"], ["--fleet", "20", "--quick"]),
    ("efo_decode", ["{build}/bench/bench_efo_decode"], ["50"]),
    ("limits", [sys.executable, "bench/bench_limits.py", "--build", "{build}"],
     ["--quick"]),
    ("multilang", [sys.executable, "bench/bench_multilang.py", "--build", "{build}"],
     ["--quick"]),
    ("roles", [sys.executable, "bench/bench_roles.py", "--build", "{build}"],
     ["--quick"]),
    ("python", [sys.executable, "bench/bench_python.py", "--build", "{build}"],
     ["--quick"]),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    known = [b[0] for b in BENCHES]
    for n in a.names:
        if n not in known:
            ap.error("unknown benchmark %r (known: %s)" % (n, ", ".join(known)))
    failed = []
    for name, cmd, quick in BENCHES:
        if a.names and name not in a.names:
            continue
        cmd = [c.format(build=build) for c in cmd] + (quick if a.quick else [])
        prog = cmd[1] if cmd[0] == sys.executable else cmd[0]
        if not os.path.exists(os.path.join(SRC, prog)):
            print("== %s: skipped (%s not found)\n" % (name, prog), flush=True)
            continue
        print("== %s: %s" % (name, " ".join(cmd)), flush=True)
        t = time.time()
        rc = subprocess.run(cmd, cwd=SRC).returncode
        print("== %s: %s in %.0f s\n" % (name, "ok" if rc == 0 else
                                         "FAILED (exit %d)" % rc,
                                         time.time() - t), flush=True)
        if rc:
            failed.append(name)
    if failed:
        print("failed: %s" % ", ".join(failed))
    return len(failed)


if __name__ == "__main__":
    sys.exit(main())
