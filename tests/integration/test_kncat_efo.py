#!/usr/bin/env python3
"""kncat with enhanced fan-out, against kinesis-local: `kncat efo`
register/list/deregister; `consume --efo` across a split and a merge over
HTTP/2 (the TLS port) and HTTP/1.1; `--efo-arn` and eager registration;
`group --efo` with three workers, one killed: nothing lost.

Environment: KNCAT (the binary), KN_SOURCE_DIR.  Prints "N passed, M
failed"; exits 1 if any case failed."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from efo_common import (SRC, Producer, Stream, Suite, check_complete,  # noqa: E402
                        check_key_order, check_once, check_parents_first, lab)
import runkit  # noqa: E402

KNCAT = os.environ.get("KNCAT") or os.path.join(
    os.environ.get("KN_BUILD_DIR", os.path.join(SRC, "build")), "kncat")
FAST = ["-X", "shard.sync.interval.ms=2000"]
# KN_GROUP_LOG_LEVEL=7 raises the group workers' log level; on a failure
# their whole stderr is then kept in the case's temporary folder.
GROUP_LOG = os.environ.get("KN_GROUP_LOG_LEVEL", "")


class Kncat:
    """kncat in the background, output collected."""

    def __init__(self, url, *args, tls=False):
        cmd = [KNCAT] + (["--no-verify-ssl"] if tls else []) + list(args)
        self.args = list(args)
        self.p = subprocess.Popen(cmd, env=lab.env_for(kinesis=url),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines, self.err = [], []
        self.pumps = []
        for f, into in ((self.p.stdout, self.lines), (self.p.stderr, self.err)):
            t = threading.Thread(target=lambda f=f, into=into: [into.append(l.rstrip("\n"))
                                                              for l in f], daemon=True)
            t.start()
            self.pumps.append(t)

    def records(self):
        return [json.loads(l) for l in list(self.lines)]

    def finish(self, timeout=180):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("kncat did not exit:\n" + "\n".join(self.err[-40:]))
        for t in self.pumps:  # read to the end of its output
            t.join(30)
        runkit.check_clean("\n".join(self.err), "kncat " + " ".join(self.args[:3]))
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def kncat(url, *args, tls=False, timeout=180):
    cmd = [KNCAT] + (["--no-verify-ssl"] if tls else []) + list(args)
    return runkit.run(cmd, env=lab.env_for(kinesis=url), timeout=timeout)


class Cases:
    def __init__(self, server):
        self.server = server
        self.c = lab.boto3_client("kinesis", server)
        self.n = 0

    def stream(self, shards):
        self.n += 1
        return Stream(self.c, "kefo-%d" % self.n, shards)

    def efo_command(self):
        s = self.stream(1)
        url = self.server.endpoint
        p = kncat(url, "efo", "register", s.name, "ops")
        assert p.returncode == 0, p.stderr
        name, status, arn = p.stdout.strip().split("\t")
        assert (name, status) == ("ops", "ACTIVE") and arn.startswith("arn:"), p.stdout
        p = kncat(url, "efo", "register", s.name, "ops", "-J")
        assert p.returncode == 0 and "registered already" in p.stderr, p
        assert json.loads(p.stdout)["arn"] == arn
        p = kncat(url, "efo", "list", s.name, "-J")
        assert p.returncode == 0, p.stderr
        got = [json.loads(l) for l in p.stdout.splitlines()]
        assert [(g["name"], g["status"]) for g in got] == [("ops", "ACTIVE")], got
        p = kncat(url, "efo", "deregister", s.name, "ops")
        assert p.returncode == 0 and p.stdout == "", p
        assert s.consumers("ops") == []
        p = kncat(url, "efo", "deregister", s.name, "ops")
        assert p.returncode == 3, p
        p = kncat(url, "efo", "list", "kefo-no-such-stream")
        assert p.returncode == 3 and "not found" in p.stderr, p

    def consume_reshard(self, transport):
        tls = transport == "h2"
        url = self.server.tls_endpoint if tls else self.server.endpoint
        s = self.stream(2)
        s.put(200)
        s.split_first()
        s.put(200)
        s.merge_first_two()
        s.put(200)
        p = kncat(url, "consume", s.name, "--efo", "cli-" + transport.replace(".", ""),
                  "-e", "-J", *FAST, tls=tls)
        assert p.returncode == 0, p.stderr
        recs = [json.loads(l) for l in p.stdout.splitlines()]
        check_once([r["data"] for r in recs], s.sent)
        check_key_order(recs)
        check_parents_first(recs, s.shards())

    def consume_arn_and_eager(self):
        s = self.stream(1)
        s.put(20)
        url = self.server.tls_endpoint
        p = kncat(url, "consume", s.name, "--efo", "eager", "--efo-registration", "eager",
                  "-c", "20", "-J", tls=True)
        assert p.returncode == 0, p.stderr
        check_once([json.loads(l)["data"] for l in p.stdout.splitlines()], s.sent)
        arn = s.consumers("eager")[0]["ConsumerARN"]
        time.sleep(6)  # the server holds the last subscription a few seconds
        p = kncat(url, "consume", s.name, "--efo-arn", arn, "-c", "20", "-J", tls=True)
        assert p.returncode == 0, p.stderr
        check_once([json.loads(l)["data"] for l in p.stdout.splitlines()], s.sent)
        # Another consumer's ARN: the last digit changed, to one it is not.
        wrong = arn[:-1] + ("8" if arn.endswith("9") else "9")
        p = kncat(url, "consume", s.name, "--efo-arn", wrong, "-J", tls=True)
        assert p.returncode != 0 and "no longer exists" in p.stderr, p

    def group_kill_one(self):
        s = self.stream(4)
        d = tempfile.mkdtemp(prefix="kefo-group-")
        store = "sqlite:" + os.path.join(d, "leases.db")
        url = self.server.tls_endpoint
        args = ["group", s.name, "--app", "g", "--leases", store, "--efo", "g", "-J", "-q",
                "-X", "lease.duration.ms=3000", "-X", "lease.take.interval.ms=500",
                "-X", "checkpoint.interval.ms=500"] + FAST
        if GROUP_LOG:
            args += ["-X", "log.level=" + GROUP_LOG]
        workers = [Kncat(url, *args, "--worker", "w%d" % i, tls=True) for i in range(3)]
        prod = Producer(s, 25, 0.5)
        try:
            prod.start()
            # Killed once it reads (a loaded machine may take a while to
            # register, take leases and subscribe), not after a fixed time
            # it may have spent getting there.
            deadline = time.time() + 90
            while not workers[1].lines and time.time() < deadline:
                time.sleep(0.2)
            assert workers[1].lines, "w1 never read a record"
            workers[1].p.send_signal(signal.SIGKILL)
            workers[1].p.wait()
            time.sleep(10)
            prod.stop()
            end = time.time() + 90
            while time.time() < end:
                if set(s.sent) <= set(r["data"] for w in workers for r in w.records()):
                    break
                time.sleep(0.5)
            for w in (workers[0], workers[2]):
                w.p.send_signal(signal.SIGTERM)
                assert w.finish() == 0, "\n".join(w.err[-30:])
            try:
                check_complete([r["data"] for w in workers for r in w.records()], s.sent)
            except AssertionError as e:
                if GROUP_LOG:
                    for i, w in enumerate(workers):
                        with open(os.path.join(d, "w%d.log" % i), "w") as f:
                            f.write("\n".join(w.err) + "\n")
                    e = AssertionError("%s\nworker logs in %s" % (e, d))
                got = {}
                for i, w in enumerate(workers):
                    for r in w.records():
                        got.setdefault(r["shard"], set()).add(i)
                raise AssertionError("%s\nshards read by workers: %s\nleases:\n%s\n%s" % (
                    e, got, kncat(url, "leases", "g", "--leases", store, tls=True).stdout,
                    "\n".join("w%d:\n  %s" % (i, "\n  ".join(w.err[-25:]))
                              for i, w in enumerate(workers))))
            for w in workers:
                check_key_order(w.records())
        finally:
            prod.halt.set()
            for w in workers:
                w.kill()


def main():
    suite = Suite()
    with lab.KinesisLocal() as server:
        t = Cases(server)
        suite.case(t.efo_command)
        suite.case(t.consume_reshard, "h2")
        suite.case(t.consume_reshard, "http1.1")
        suite.case(t.consume_arn_and_eager)
        suite.case(t.group_kill_one)
    return suite.done()


if __name__ == "__main__":
    sys.exit(main())
