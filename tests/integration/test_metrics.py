#!/usr/bin/env python3
"""kncat --metrics end to end: the real Prometheus server scrapes a
`kncat group` worker on loopback; promtool checks what is served; the
health endpoints through a lease-store outage and a fatal error.

- Scrape (kinesalite, SQLite leases): worker A alone on a 2-shard stream,
  a split, worker B joins, B is killed (SIGKILL).  Prometheus (scraping
  every second) has a lag series for every shard A holds at each step, and
  A's lease gauges and counters follow: 2 held, 3 after the split,
  fewer while B holds some (handed over at B's request), 3 again once B's
  leases expired; taken, handed over and the table's size move with them.
- Outage (dynalite behind the fault proxy): /readyz turns 503 once the
  lease store has not answered for the grace period, /healthz stays 200;
  both 200 again after the outage; the store errors are counted.
- Fatal error: the stream deleted under a worker: /healthz and /readyz
  answer 503 with the reason while kncat lingers (--metrics-linger), and
  kn_consumer_failed is 1.
- multilang serves the same metrics as group.
- Fan-out (kinesis-local, HTTP/2): consume --efo has each shard's
  subscription state and counters.
- consume and produce serve their metrics too, consume also while
  scrapers hold every connection with half-sent requests; promtool check
  metrics passes on every document.

Environment: KNCAT (the binary), KN_SOURCE_DIR.  Needs prometheus and
promtool (Debian's prometheus package; scripts/install-deps.sh).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
KNCAT = os.environ.get("KNCAT", str(SOURCE_DIR / "build" / "kncat"))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from groupkit import (LabServers, Producer, leases_json, list_shards, run_kncat,  # noqa: E402
                      spread_keys, unique, wait_for)
import runkit  # noqa: E402

DURATION_MS = 4000
RENEW_MS = 1000
PROPS = {
    "lease.duration.ms": DURATION_MS,
    "lease.renew.interval.ms": RENEW_MS,
    "lease.take.interval.ms": 1000,
    "checkpoint.interval.ms": 1000,
    "poll.idle.ms": 200,
    "shard.sync.interval.ms": 2000,
}
TMP = Path(tempfile.mkdtemp(prefix="kn-metrics-"))
SERVERS = LabServers(TMP)


def setUpModule():
    SERVERS.start("kinesalite", "dynalite")


def tearDownModule():
    SERVERS.stop()


def kncat(env, *args, **kw):
    return run_kncat(KNCAT, env, *args, **kw)


class Served:
    """A kncat process started with --metrics 127.0.0.1:0: the port it
    printed, its stderr in a file, its stdout discarded."""

    def __init__(self, env, *args, stdin=None, name="kncat"):
        base = TMP / f"{name}-{os.getpid()}-{time.monotonic_ns()}"
        self.err_path = base.with_suffix(".err")
        self.out_path = base.with_suffix(".out")
        self.err = open(self.err_path, "wb")
        self.out = open(self.out_path, "wb")
        argv = [KNCAT, "--metrics", "127.0.0.1:0", *map(str, args)]
        self.proc = subprocess.Popen(argv, env=env, stdout=self.out,
                                     stderr=self.err,
                                     stdin=stdin if stdin is not None
                                     else subprocess.DEVNULL)
        m = wait_for("the metrics port on stderr",
                     lambda: re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics",
                                       self.stderr()), 30, self.stderr)
        self.port = int(m.group(1))

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def stdout_lines(self) -> int:
        return self.out_path.read_bytes().count(b"\n")

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}",
                                        timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout=60) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.err.close()
        self.out.close()
        runkit.check_clean(self.stderr(), "kncat --metrics")
        return rc

    def stop(self) -> int:
        self.signal(signal.SIGTERM)
        return self.wait()


def promtool_check(text: str):
    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("promtool check metrics: "
                             + (p.stdout + p.stderr).decode(errors="replace"))


def samples(text: str, name: str) -> dict[frozenset, float]:
    """{labels: value} of one metric in a text document."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out[labels] = float(m.group(4))
    return out


def value(text: str, name: str, **want) -> float | None:
    for labels, v in samples(text, name).items():
        d = dict(labels)
        if all(d.get(k) == str(x) for k, x in want.items()):
            return v
    return None


class Prometheus:
    """Debian's Prometheus server on a free loopback port, scraping the
    given targets every second."""

    def __init__(self, targets: list[str]):
        self.dir = Path(tempfile.mkdtemp(prefix="prom-", dir=TMP))
        self.port = lab.free_port()
        cfg = self.dir / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: kncat\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n")
        self.log = open(self.dir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}",
             f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        wait_for("prometheus to be ready", self._ready, 60, self.log_tail)

    def log_tail(self):
        return (self.dir / "prometheus.log").read_text(errors="replace")[-3000:]

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("prometheus exited: " + self.log_tail())
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready",
                                        timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, q: str) -> list[dict]:
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": q}))
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        if doc.get("status") != "success":
            raise AssertionError(f"query {q}: {doc}")
        return doc["data"]["result"]

    def scalar(self, q: str) -> float | None:
        res = self.query(q)
        return float(res[0]["value"][1]) if res else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Metrics(unittest.TestCase):
    def setUp(self):
        self.kin = SERVERS["kinesalite"]
        self.env = lab.env_for(kinesis=self.kin, dynamodb=SERVERS["dynalite"])
        self.kinesis = lab.boto3_client("kinesis", self.kin)
        self.cleanup: list = []

    def tearDown(self):
        for f in reversed(self.cleanup):
            try:
                f()
            except Exception:  # noqa: BLE001 - best effort
                pass

    def stream(self, shards: int) -> str:
        name = unique("met", "s")
        kncat(self.env, "create", name, "--shards", shards)
        return name

    def worker(self, stream, app, store, wid, env=None, extra=()):
        args = []
        for k, v in PROPS.items():
            args += ["-X", f"{k}={v}"]
        w = Served(env or self.env, *args, "group", stream, "--app", app,
                   "--leases", store, "--worker", wid, "-q", *extra,
                   name=f"worker-{wid}")
        self.cleanup.append(w.stop)
        return w

    def held_by(self, app, store, wid) -> set[str]:
        return {r["shard"] for r in leases_json(KNCAT, self.env, app, store)
                if r.get("owner") == wid}

    # ---- the Prometheus server ----

    def test_prometheus_scrape(self):
        stream = self.stream(2)
        app = unique("met", "app")
        store = f"sqlite:{TMP / (app + '.db')}"
        prod = Producer(self.kinesis, stream, spread_keys(8, "k"), 0.2)
        prod.start()
        self.cleanup.append(prod.finish)
        a = self.worker(stream, app, store, "A")
        prom = Prometheus([f"127.0.0.1:{a.port}"])
        self.cleanup.append(prom.stop)
        A = 'worker="A"'

        def lag_shards():
            return {r["metric"]["shard"] for r in
                    prom.query(f"kn_consumer_shard_lag_seconds{{{A}}}")}

        def held_gauge():
            return prom.scalar(f"kn_consumer_leases_held{{{A}}}")

        def lag_matches_held(n):
            """Prometheus's lag series are A's held shards, n of them."""
            def check():
                held = self.held_by(app, store, "A")
                return len(held) == n and lag_shards() == held and \
                    held_gauge() == n and held
            return check

        def seen(step):
            print(f"  prometheus, {step}: lag series {sorted(lag_shards())}, "
                  f"held {held_gauge()}, taken "
                  f"{prom.scalar(f'kn_consumer_leases_taken_total{{{A}}}')}, lost "
                  f"{prom.scalar(f'kn_consumer_leases_lost_total{{{A}}}')}, handed over "
                  f"{prom.scalar(f'kn_consumer_leases_handed_over_total{{{A}}}')}, table "
                  f"{prom.scalar(f'kn_consumer_lease_table_leases{{{A}}}')}",
                  flush=True)

        def why():
            return (f"lag series {sorted(lag_shards())}, held gauge "
                    f"{held_gauge()}, table {sorted(self.held_by(app, store, 'A'))}")

        first = wait_for("A's two shards in Prometheus", lag_matches_held(2), 60, why)
        seen("A alone")
        self.assertEqual(prom.scalar(f"kn_consumer_ready{{{A}}}"), 1)
        self.assertEqual(prom.scalar(f"kn_consumer_lease_table_leases{{{A}}}"), 2)
        wait_for("records counted", lambda: (prom.scalar(
            f"sum(kn_consumer_shard_records_total{{{A}}})") or 0) > 0, 30)

        # A split: the parent finishes, both children are taken and read.
        parent = sorted(first)[0]
        kncat(self.env, "split", stream, parent)
        children = {s["ShardId"] for s in list_shards(self.kinesis, stream)
                    if s.get("ParentShardId") == parent}
        self.assertEqual(len(children), 2)
        after_split = wait_for("A's three open shards in Prometheus",
                               lag_matches_held(3), 90, why)
        seen(f"after the split of {parent}")
        self.assertTrue(children <= after_split, after_split)
        self.assertGreaterEqual(prom.scalar(
            f"max_over_time(kn_consumer_lease_table_leases{{{A}}}[5m])"), 4)
        self.assertEqual(prom.scalar(
            f"kn_consumer_shard_lease_held{{{A},shard=\"{parent}\"}}"), 0)
        self.assertGreaterEqual(prom.scalar(
            f"kn_consumer_leases_released_total{{{A}}}"), 1)

        # B joins and takes its share from A.
        # (planned moves are hand-offs: A hands leases over, it does not
        # lose them)
        moved = (f"kn_consumer_leases_lost_total{{{A}}} + "
                 f"kn_consumer_leases_handed_over_total{{{A}}}")
        lost0 = prom.scalar(moved)
        b = self.worker(stream, app, store, "B")
        shared = wait_for("A at fewer leases with B running",
                          lambda: (len(self.held_by(app, store, "B")) >= 1
                                   and lag_matches_held(len(self.held_by(app, store, "A")))()),
                          90, why)
        seen("with B")
        self.assertLess(len(shared), 3)
        wait_for("the leases A gave up counted",
                 lambda: prom.scalar(moved) > lost0, 30)

        # B had none free to take: it stole from A
        _, btext = b.get("/metrics")
        promtool_check(btext)
        self.assertGreaterEqual(value(btext, "kn_consumer_leases_stolen_total"), 1)
        self.assertGreaterEqual(value(btext, "kn_consumer_leases_held"), 1)

        # SIGKILL of B: A takes its leases once they expire.
        taken0 = prom.scalar(f"kn_consumer_leases_taken_total{{{A}}}")
        b.signal(signal.SIGKILL)
        b.wait()
        final = wait_for("A holding all three again", lag_matches_held(3), 90, why)
        seen("after SIGKILL of B")
        self.assertEqual(final, after_split)
        self.assertGreater(prom.scalar(f"kn_consumer_leases_taken_total{{{A}}}"),
                           taken0)
        # The gauge went down and up again: Prometheus kept the history.
        self.assertEqual(prom.scalar(
            f"min_over_time(kn_consumer_leases_held{{{A}}}[5m])") < 3, True)
        self.assertEqual(prom.scalar(
            f"max_over_time(kn_consumer_leases_held{{{A}}}[5m])"), 3)
        self.assertEqual(prom.scalar(f"kn_consumer_failed{{{A}}}"), 0)
        # with records flowing the checkpoints keep the leases: no renewal
        self.assertGreater(prom.scalar(
            f"sum(kn_consumer_lease_store_call_duration_seconds_count{{{A}}})"), 0)
        status, text = a.get("/metrics")
        self.assertEqual(status, 200)
        promtool_check(text)
        # every Prometheus target was up the whole time
        self.assertEqual(prom.scalar("min_over_time(up[5m])"), 1)

    # ---- health through a lease-store outage ----

    def test_health_store_outage(self):
        stream = self.stream(2)
        app = unique("met", "ddb")
        with FaultProxy(SERVERS["dynalite"]) as proxy:
            env = lab.env_for(kinesis=self.kin, dynamodb=proxy.endpoint)
            a = self.worker(stream, app, f"dynamodb:{app}", "A", env=env)
            wait_for("ready", lambda: a.get("/readyz")[0] == 200, 60,
                     lambda: a.get("/readyz"))
            self.assertEqual(a.get("/healthz"), (200, "ok\n"))
            rule = proxy.add_rule("status", "*", status=500)
            t0 = time.monotonic()
            # (the shards are dropped at the same time: "taking leases" may
            # come first for a moment)
            code, body = wait_for("not ready for the lease store",
                                  lambda: (lambda r: r if "lease store" in r[1] else None)(
                                      a.get("/readyz")), 60,
                                  lambda: a.get("/readyz"))
            self.assertEqual(code, 503)
            # not before the grace period, counted from the last good call
            # sent (one at least every take interval)
            self.assertGreaterEqual(time.monotonic() - t0,
                                    (DURATION_MS - RENEW_MS / 2) / 1000 - 1.5)
            self.assertEqual(a.get("/healthz")[0], 200)
            _, text = a.get("/metrics")
            promtool_check(text)
            self.assertEqual(value(text, "kn_consumer_ready"), 0)
            self.assertGreater(value(text, "kn_consumer_lease_store_seconds_since_success"),
                               (DURATION_MS - RENEW_MS / 2) / 1000)

            def errors():
                _, t = a.get("/metrics")
                return sum(samples(t, "kn_consumer_lease_store_errors_total").values())
            wait_for("the store's errors counted", errors, 60)
            proxy.remove_rule(rule)
            wait_for("ready again", lambda: a.get("/readyz")[0] == 200, 60,
                     lambda: a.get("/readyz"))
            self.assertEqual(a.get("/healthz")[0], 200)
            self.assertEqual(a.stop(), 0)

    # ---- a fatal error ----

    def test_health_fatal(self):
        stream = self.stream(1)
        app = unique("met", "fatal")
        store = f"sqlite:{TMP / (app + '.db')}"
        a = self.worker(stream, app, store, "A", extra=["--metrics-linger", "60"])
        wait_for("ready", lambda: a.get("/readyz")[0] == 200, 60,
                 lambda: a.get("/readyz"))
        kncat(self.env, "delete", stream)
        code, body = wait_for("healthz 503 after the stream is gone",
                              lambda: (lambda r: r if r[0] == 503 else None)(
                                  a.get("/healthz")), 60, a.stderr)
        self.assertIn("failed", body)
        self.assertEqual(a.get("/readyz")[0], 503)
        _, text = a.get("/metrics")
        promtool_check(text)
        # the last document, rendered when the consumer stopped
        self.assertEqual(value(text, "kn_consumer_failed"), 1)
        self.assertIsNone(a.proc.poll(), "kncat lingers")
        self.assertEqual(a.stop(), 3)  # stream not found

    # ---- multilang ----

    def test_multilang(self):
        stream = self.stream(2)
        app = unique("met", "ml")
        kncat(self.env, "produce", stream, "-K", ":",
              input=b"".join(b"k%d:%d\n" % (i, i) for i in range(10)))
        props = TMP / f"{app}.properties"
        processor = SOURCE_DIR / "examples" / "multilang" / "processor.py"
        props.write_text(
            f"executableName = python3 {processor}\nstreamName = {stream}\n"
            f"applicationName = {app}\ninitialPositionInStream = TRIM_HORIZON\n"
            "retrievalMode = POLLING\nfailoverTimeMillis = 4000\n"
            "idleTimeBetweenReadsInMillis = 200\nmetricsLevel = NONE\n")
        m = Served(self.env, "-X", "lease.take.interval.ms=1000", "multilang",
                   "--properties-file", props, name="multilang")
        self.cleanup.append(m.stop)

        def done():
            _, t = m.get("/metrics")
            return t if (value(t, "kn_consumer_records_total") == 10 and
                         value(t, "kn_consumer_leases_held") == 2) else None
        text = wait_for("multilang's records and leases", done, 90,
                        lambda: m.stderr()[-2000:])
        promtool_check(text)
        self.assertEqual(value(text, "kn_consumer_ready", app=app), 1)
        self.assertEqual(m.get("/readyz")[0], 200)
        self.assertEqual(m.stop(), 0)

    # ---- consume and produce ----

    def test_consume_and_produce(self):
        stream = self.stream(2)
        lines = b"".join(b"k%d:%d\n" % (i, i) for i in range(50))
        p = Served(self.env, "--metrics-linger", "60", "produce", stream, "-K",
                   ":", stdin=subprocess.PIPE, name="produce")
        self.cleanup.append(p.stop)
        wait_for("producer ready", lambda: p.get("/readyz")[0] == 200, 30,
                 lambda: p.get("/readyz"))
        p.proc.stdin.write(lines)
        p.proc.stdin.close()
        # the command ends; the endpoint lingers with the last numbers
        wait_for("produce finished", lambda: p.get("/healthz")[0] == 503, 60,
                 p.stderr)
        _, text = p.get("/metrics")
        promtool_check(text)
        self.assertEqual(value(text, "kn_producer_records_delivered_total",
                               stream=stream), 50)
        self.assertEqual(value(text, "kn_producer_records_failed_total"), 0)
        self.assertGreaterEqual(value(text, "kn_producer_put_records_duration_seconds_count"), 1)
        self.assertEqual(p.stop(), 0)

        c = Served(self.env, "consume", stream, "-o", "trim_horizon",
                   name="consume")
        self.cleanup.append(c.stop)
        # Hostile scrapers: more connections than the server serves, each
        # sending half a request, and one that asks and never reads.  The
        # records are read and written all the same.
        socks = []

        def flood():
            for i in range(24):
                try:
                    so = socket.create_connection(("127.0.0.1", c.port), timeout=5)
                except OSError:
                    break
                so.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" if i else
                           b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 50)
                socks.append(so)
        self.cleanup.append(lambda: [so.close() for so in socks])
        flood()
        wait_for("consume's output with the scrapers stalled",
                 lambda: c.stdout_lines() == 50, 60,
                 lambda: f"{c.stdout_lines()} lines")
        # once they go, the endpoint serves again at once (more floods:
        # connections left waiting by the first are not stuck)
        for _ in range(3):
            for so in socks:
                so.close()
            socks.clear()
            self.assertEqual(c.get("/healthz")[0], 200)
            flood()
        for so in socks:
            so.close()

        def all_read():
            _, t = c.get("/metrics")
            return t if value(t, "kn_consumer_records_total") == 50 else None
        text = wait_for("consume's records counted", all_read, 60)
        promtool_check(text)
        self.assertEqual(len(samples(text, "kn_consumer_shard_lag_seconds")), 2)
        self.assertIsNone(value(text, "kn_consumer_leases_held"))
        self.assertEqual(c.get("/readyz")[0], 200)
        self.assertEqual(c.get("/nothing")[0], 404)
        self.assertEqual(c.stop(), 0)


class FanOut(unittest.TestCase):
    """consume --efo over HTTP/2 (kinesis-local's TLS port): the fan-out
    families of each shard."""

    def test_fanout(self):
        with lab.KinesisLocal() as server:
            url = server.tls_endpoint
            env = lab.env_for(kinesis=url)
            stream = unique("met", "efo")
            kncat(env, "--no-verify-ssl", "create", stream, "--shards", 1)
            kncat(env, "--no-verify-ssl", "produce", stream, "-K", ":",
                  input=b"".join(b"k%d:%d\n" % (i, i) for i in range(20)))
            c = Served(env, "--no-verify-ssl", "consume", stream, "-o",
                       "trim_horizon", "--efo", "met", name="efo")
            try:
                def streamed():
                    _, t = c.get("/metrics")
                    ok = value(t, "kn_consumer_records_total") == 20 and \
                        value(t, "kn_consumer_shard_fanout_state",
                              state="streaming") == 1
                    return t if ok else None
                text = wait_for("records read by subscription", streamed, 90,
                                lambda: c.get("/metrics")[1][-3000:])
                promtool_check(text)
                self.assertGreaterEqual(
                    value(text, "kn_consumer_shard_fanout_subscriptions_total"), 1)
                self.assertGreaterEqual(
                    value(text, "kn_consumer_shard_fanout_events_total"), 1)
                self.assertEqual(value(text, "kn_consumer_shard_fanout_state",
                                       state="polling"), 0)
                self.assertEqual(c.stop(), 0)
            finally:
                c.stop()


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    if len(sys.argv) > 1:
        suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:],
                                                              sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"{passed} passed, {failed} failed")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
