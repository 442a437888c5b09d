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
ratio roles / consumer.  Each round also drains a stream a tenth that
size, so that the cost of one more MB (the difference of the two runs
over the difference of their payloads) is told apart from the cost of
starting (clients, threads, first listings).  Target: the roles cost no
more CPU per MB.

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
        sizes = {STREAM: a.records, STREAM + "-small": a.records // 10}
        body = b"x" * 990
        for name, count in sizes.items():
            subprocess.run([kncat, "create", name, "--shards", "4"], env=env,
                           check=True)
            data = b"".join(b"k%d:%07d%s\n" % (i % 97, i, body)
                            for i in range(count))
            subprocess.run([kncat, "produce", name, "-K", ":", "-q"],
                           input=data, env=env, check=True)
        total = {"consumer": [], "reader": []}
        marginal = {"consumer": [], "reader": []}
        mb = None
        for _ in range(a.rounds):
            for mode in ("consumer", "reader"):
                got = {}
                for name, count in sizes.items():
                    s, n, nbytes = run([reader, mode, name, str(count)], env)
                    if n != count:
                        raise SystemExit(f"{mode}: {n} records, not {count}")
                    got[name] = (s, nbytes / 1e6)
                (s_big, mb), (s_small, mb_small) = got[STREAM], got[STREAM + "-small"]
                total[mode].append(s_big / mb)
                marginal[mode].append((s_big - s_small) / (mb - mb_small))

    def line(label, xs):
        return (f"  {label:<34}{statistics.median(xs):.5f}  rounds "
                + " ".join(f"{x:.5f}" for x in xs))

    print(f"payload {mb:.1f} MB (and {mb / 10:.1f} MB), {a.rounds} rounds, "
          "medians (CPU s/MB):")
    print("whole run")
    print(line("consumer (kncat consume's path)", total["consumer"]))
    print(line("enumerator + stream reader", total["reader"]))
    print("one more MB (start-up left out)")
    print(line("consumer (kncat consume's path)", marginal["consumer"]))
    print(line("enumerator + stream reader", marginal["reader"]))
    rt = statistics.median(total["reader"]) / statistics.median(total["consumer"])
    rm = (statistics.median(marginal["reader"])
          / statistics.median(marginal["consumer"]))
    print(f"ratio roles / consumer: whole run {rt:.2f}, per MB {rm:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
