#!/usr/bin/env python3
"""The local demonstration behind `make demo`.

Starts kinesis-local on free loopback ports, creates a 4-shard stream,
produces 5,000 records while one shard is split and two others are merged,
reads everything back with `kncat consume -e`, prints what arrived
(produced, consumed, missing, duplicated, per-key order, the shard tree)
and stops the server.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lab"))
import lab  # noqa: E402

STREAM = "kn-demo"
RECORDS = 5000
KEYS = 50
CHUNKS = 10


class Demo:
    def __init__(self, kncat, env):
        self.kncat = kncat
        self.env = env

    def run(self, *args, stdin=None, check=True):
        p = subprocess.run([self.kncat, *args], input=stdin, env=self.env,
                           capture_output=True, timeout=600)
        if check and p.returncode != 0:
            sys.stderr.write(p.stderr.decode(errors="replace"))
            raise SystemExit(f"demo: kncat {' '.join(args)} exited {p.returncode}")
        return p

    def shards(self):
        out = self.run("list", STREAM, "-J").stdout.decode()
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def open_shards(self):
        return sorted((s for s in self.shards() if s.get("open")),
                      key=lambda s: int(s["hash_key_start"]))


def step(msg):
    print(f"demo: {msg}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    kncat = os.path.join(ROOT, args.build, "kncat")
    if not os.access(kncat, os.X_OK):
        raise SystemExit(f"demo: {kncat} not found; run `make build` first")

    step("starting kinesis-local on a free loopback port")
    with lab.KinesisLocal() as server:
        demo = Demo(kncat, lab.env_for(kinesis=server))
        step(f"creating stream {STREAM} with 4 shards at {server.endpoint}")
        demo.run("create", STREAM, "--shards", "4")

        per_chunk = RECORDS // CHUNKS
        seq = {}
        t0 = time.time()
        for c in range(CHUNKS):
            lines = []
            for i in range(c * per_chunk, (c + 1) * per_chunk):
                key = f"key-{i % KEYS:03d}"
                seq[key] = seq.get(key, -1) + 1
                lines.append(f"{key}:" + json.dumps({"key": key, "n": seq[key], "i": i}))
            demo.run("produce", STREAM, "-K", ":",
                     stdin=("\n".join(lines) + "\n").encode())
            if c == 3:
                first = demo.open_shards()[0]["shard"]
                step(f"splitting {first} while producing")
                demo.run("split", STREAM, first)
            if c == 6:
                opens = demo.open_shards()
                a, b = opens[-2]["shard"], opens[-1]["shard"]
                step(f"merging {a} and {b} while producing")
                demo.run("merge", STREAM, a, b)
        step(f"produced {RECORDS} records in {time.time() - t0:.1f} s")

        step("consuming everything back with `kncat consume -e -J`")
        t0 = time.time()
        out = demo.run("consume", STREAM, "-e", "-J").stdout.decode()
        took = time.time() - t0
        recs = [json.loads(line) for line in out.splitlines() if line.strip()]
        seen = {}
        last = {}
        order_ok = True
        for r in recs:
            d = json.loads(r["data"])
            seen[d["i"]] = seen.get(d["i"], 0) + 1
            if d["n"] <= last.get(d["key"], -1):
                order_ok = False
            last[d["key"]] = d["n"]
        missing = [i for i in range(RECORDS) if i not in seen]
        dups = sum(c - 1 for c in seen.values())

        print()
        print("summary")
        print(f"  produced            {RECORDS}")
        print(f"  consumed            {len(recs)} in {took:.1f} s")
        print(f"  missing             {len(missing)}")
        print(f"  duplicated          {dups}")
        print(f"  per-key order kept  {'yes' if order_ok else 'NO'}")
        print("  shard tree")
        shards = demo.shards()
        by_id = {s["shard"]: s for s in shards}
        children = {}
        for s in shards:
            for p in s.get("parents", []):
                children.setdefault(p, []).append(s["shard"])

        def show(sid, depth):
            s = by_id[sid]
            n = sum(1 for r in recs if r["shard"] == sid)
            state = "open" if s.get("open") else "closed"
            print(f"    {'  ' * depth}{sid}  {state:6}  {n:5} records")
            for c in sorted(children.get(sid, [])):
                if by_id[c]["parents"][0] == sid:
                    show(c, depth + 1)

        for s in shards:
            if not s.get("parents"):
                show(s["shard"], 0)
        ok = not missing and order_ok
        print()
        step("stopping kinesis-local")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
