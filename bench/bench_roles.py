#!/usr/bin/env python3
"""Reading cost of the stream-processor roles: client CPU seconds (user +
sys of the reading process, from wait4) per MB of payload drained from
one kinesalite stream by

  consumer  a kn_consumer_t without a lease store (what `kncat consume`
            runs), bench/bench_roles_read.c consumer
  roles     an enumerator and one kn_stream_reader_t, bench_roles_read
            reader

on the same stream (100,000 records of 1000 bytes on 4 shards by
default), in interleaved rounds in one run, with the medians and the
ratio roles / consumer.  Target: the roles cost no more CPU per MB.

  python3 bench/bench_roles.py [--build DIR] [--records N] [--rounds R]
                               [--quick]"""

import argparse
import os
import statistics
import subprocess
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402

STREAM = "roles"


def run(cmd, env):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[1]} failed: {err}")
    n, nbytes = (int(x) for x in out.split())
    return ru.ru_utime + ru.ru_stime, n, nbytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.records, a.rounds = 20000, 3
    reader = os.path.join(a.build, "bench", "bench_roles_read")
    kncat = os.path.join(a.build, "kncat")
    with lab.Kinesalite() as k:
        env = lab.env_for(kinesis=k)
        subprocess.run([kncat, "create", STREAM, "--shards", "4"], env=env,
                       check=True)
        body = b"x" * 990
        data = b"".join(b"k%d:%07d%s\n" % (i % 97, i, body)
                        for i in range(a.records))
        subprocess.run([kncat, "produce", STREAM, "-K", ":", "-q"], input=data,
                       env=env, check=True)
        cpu = {"consumer": [], "reader": []}
        mb = None
        for _ in range(a.rounds):
            for mode in ("consumer", "reader"):
                s, n, nbytes = run([reader, mode, STREAM, str(a.records)], env)
                if n != a.records:
                    raise SystemExit(f"{mode}: {n} records, not {a.records}")
                mb = nbytes / 1e6
                cpu[mode].append(s / mb)
    c = statistics.median(cpu["consumer"])
    r = statistics.median(cpu["reader"])
    print(f"payload {mb:.1f} MB, {a.rounds} rounds, medians (CPU s/MB):")
    print(f"  consumer (kncat consume's path)  {c:.5f}  rounds "
          + " ".join(f"{x:.5f}" for x in cpu["consumer"]))
    print(f"  enumerator + stream reader       {r:.5f}  rounds "
          + " ".join(f"{x:.5f}" for x in cpu["reader"]))
    print(f"  ratio roles / consumer           {r / c:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
