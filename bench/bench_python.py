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
  kclpy        (with --kclpy) amazon-kclpy's processor under `kncat
               multilang`: bench/ml_kclpy.py, one Python process per shard,
               a lease table on dynalite; CPU and RSS of the whole process
               tree (RSS: the largest sum over the tree seen), ended by
               SIGTERM once the processors have counted every record.
               amazon-kclpy's Python sources are fetched with `pip
               download` (its wheel build would fetch the Java daemon's jars,
               which kncat multilang replaces)

on the same stream (200,000 records of 1000 bytes on 4 shards by default,
as bench_consume.py),
in interleaved rounds, with medians and ratios.  Targets: the package's
CPU per MB at most 1/10 of boto3's and at most 1.5 times kncat's.

  python3 bench/bench_python.py [--build DIR] [--python PATH]
                                [--records N] [--rounds R] [--quick] [--kclpy]

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
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_consume import SRC, STREAM, fill, lab, run_measured  # noqa: E402

CLIENTS = ("libkinesis", "boto3", "kncat")
KCLPY = "amazon_kclpy==3.2.0"


def kclpy_path(build):
    """A directory holding amazon-kclpy's Python package (sources only)."""
    root = os.path.join(build, "kclpy")
    if not os.path.isdir(os.path.join(root, "amazon_kclpy")):
        os.makedirs(root, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q",
                        "--no-deps", "--no-binary", ":all:", "-d", root, KCLPY],
                       check=True)
        import tarfile
        (sdist,) = [f for f in os.listdir(root) if f.endswith(".tar.gz")]
        with tarfile.open(os.path.join(root, sdist)) as t:
            top = t.getnames()[0].split("/")[0]
            members = [m for m in t.getmembers()
                       if m.name.startswith(top + "/amazon_kclpy/")
                       and m.name.endswith(".py")]
            t.extractall(root, members)
        os.rename(os.path.join(root, top, "amazon_kclpy"),
                  os.path.join(root, "amazon_kclpy"))
    return root


def tree_rss(pid):
    """Sum of VmRSS (MB) of pid and its descendants."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024.0
                        break
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return total


def run_until(cmd, env, done, timeout=900):
    """Runs cmd until done(), then SIGTERM; CPU of the process and the
    children it reaped (wait4), peak RSS of the tree, wall until done."""
    t = time.time()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err)
        peak = 0.0
        while not done() and p.poll() is None and time.time() - t < timeout:
            peak = max(peak, tree_rss(p.pid))
            time.sleep(0.05)
        wall = time.time() - t
        ok = done()
        p.send_signal(signal.SIGTERM)
        _, status, ru = os.wait4(p.pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return {"rc": rc if ok else rc or 1, "cpu": ru.ru_utime + ru.ru_stime,
                "wall": wall, "rss": peak, "wchar": None, "out": "",
                "err": err.read().decode(errors="replace")[-3000:]}


def counted(out):
    total = 0
    for name in os.listdir(out):
        try:
            with open(os.path.join(out, name)) as f:
                total += int(f.read() or 0)
        except (OSError, ValueError):
            pass
    return total


def make_venv(build):
    """BUILD/python-bench-venv with the package installed; its python."""
    venv = os.path.join(build, "python-bench-venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    if subprocess.run([py, "-c", "import libkinesis"],
                      stderr=subprocess.DEVNULL).returncode:
        subprocess.run([py, "-m", "pip", "install", "-q",
                        "--disable-pip-version-check",
                        "--config-settings=build-dir="
                        + os.path.join(build, "python-build"),
                        os.path.join(SRC, "python")], check=True)
    return py


def run_kclpy(kncat, env, kinesis, kcl_dir, n, tmp, rnd):
    out = os.path.join(tmp, "kclpy-%d" % rnd)
    os.makedirs(out)
    props = os.path.join(tmp, "kclpy-%d.properties" % rnd)
    with open(props, "w") as f:
        f.write("executableName = %s %s\nstreamName = %s\n"
                "applicationName = bench-kclpy-%d\n"
                "initialPositionInStream = TRIM_HORIZON\n"
                "retrievalMode = POLLING\nshutdownGraceMillis = 5000\n"
                % (sys.executable, os.path.join(SRC, "bench", "ml_kclpy.py"),
                   STREAM, rnd))
    e = dict(env, ML_OUT=out, PYTHONPATH=kcl_dir)
    return run_until([kncat, "-q", "multilang", props], e,
                     lambda: counted(out) >= n)


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
    ap.add_argument("--kclpy", action="store_true",
                    help="also amazon-kclpy under kncat multilang")
    a = ap.parse_args()
    clients = CLIENTS + (("kclpy",) if a.kclpy else ())
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

    kcl_dir = kclpy_path(os.path.abspath(a.build)) if a.kclpy else None
    runs = {c: [] for c in clients}
    failed = False
    tmp = tempfile.mkdtemp(prefix="bench_python.")
    with lab.Kinesalite() as k, lab.Dynalite() as ddb, \
            open(os.devnull, "wb") as devnull:
        env = lab.env_for(kinesis=k, dynamodb=ddb)
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
            for c in clients:
                if c == "kclpy":
                    r = run_kclpy(kncat, env, k, kcl_dir, a.records, tmp, rnd)
                else:
                    r = run_measured(cmds[c], env,
                                     devnull if c == "kncat" else None)
                if r["rc"]:
                    sys.stderr.write(r["err"])
                    print("%s failed (exit %d)" % (c, r["rc"]))
                    return 1
                note = ""
                if c == "kclpy":
                    ok = True  # run_until fails unless every record came
                elif c == "kncat":
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
    shutil.rmtree(tmp)

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
    if "kclpy" in med:
        kp = med["kclpy"]
        print("libkinesis / kclpy under kncat multilang  CPU per MB %.3f "
              "(1/%.1f)   peak RSS %.2f   records/s %.2fx"
              % (lk["cpu"] / kp["cpu"], kp["cpu"] / lk["cpu"],
                 lk["rss"] / kp["rss"], kp["wall"] / lk["wall"]))
    if failed:
        print("some client did not read every record")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
