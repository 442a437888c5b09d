"""Two workers sharing a stream through a lease table on dynalite: one is
SIGKILLed, a shard is split; the other takes everything over and nothing
is lost."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

WORKER = str(Path(__file__).with_name("group_worker.py"))


class Worker:
    def __init__(self, conf):
        self.p = subprocess.Popen([sys.executable, WORKER, json.dumps(conf)],
                                  stdout=subprocess.PIPE, text=True)
        self.lines = []
        self.t = threading.Thread(target=self._pump, daemon=True)
        self.t.start()

    def _pump(self):
        for line in self.p.stdout:
            self.lines.append(json.loads(line))

    def records(self):
        return [l for l in list(self.lines) if l["ev"] == "rec"]

    def events(self, ev):
        return [l["shard"] for l in list(self.lines) if l["ev"] == ev]


def wait_for(what, cond, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("never: " + what)


def test_group_survives_a_kill_and_a_split(kinesalite_stream):
    s = kinesalite_stream(2)
    table = "py-group-%d" % os.getpid()
    base = s.conf(lease_store="dynamodb:" + table, lease_duration_ms=3000,
                  lease_renew_interval_ms=1000, lease_take_interval_ms=300,
                  checkpoint_interval_ms=300, lease_handoff_timeout_ms=3000)
    sent = []

    def put(n):
        recs = []
        for _ in range(n):
            i = len(sent)
            recs.append(("k%d" % (i % 16), ("%d" % i).encode()))
            sent.append(i)
        s.put(recs)

    put(200)
    a = Worker(dict(base, **{"worker.id": "a"}))
    wait_for("a holds both shards", lambda: len(a.events("acquired")) == 2)
    b = Worker(dict(base, **{"worker.id": "b"}))
    # b asks for a share: a hands one shard over
    wait_for("b takes a shard", lambda: len(b.events("acquired")) >= 1)
    wait_for("a hands it over", lambda: len(a.events("lost")) >= 1)
    put(100)
    wait_for("a reads", lambda: len({r["d"] for r in a.records() + b.records()}) >= 300)
    a.p.send_signal(signal.SIGKILL)
    a.p.wait()
    s.split_first()
    put(200)
    try:
        wait_for("b reads everything",
                 lambda: {int(r["d"]) for r in a.records() + b.records()} >= set(sent),
                 timeout=90)
    finally:
        b.p.send_signal(signal.SIGTERM)
        assert b.p.wait(30) == 0
        b.t.join(10)
    assert b.lines[-1]["ev"] == "closed"
    # b took a's shards after the kill, then the children of the split
    assert len(set(b.events("acquired"))) >= 4
    assert len(b.events("ended")) >= 1
    # per key, each worker saw the records in the order they were written
    for w in (a, b):
        by_key = {}
        for r in w.records():
            by_key.setdefault(r["k"], []).append(int(r["d"]))
        for k, seq in by_key.items():
            assert seq == sorted(seq), (k, seq)
    # duplicates only of what a read before it died (at-least-once)
    seen_b = [int(r["d"]) for r in b.records()]
    assert len(seen_b) == len(set(seen_b))
