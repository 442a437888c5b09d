#!/usr/bin/env python3
"""The HTTP loop and the AWS JSON service layer against the lab servers:
kinesalite and kinesis-local over HTTP/1.1, kinesis-local's TLS port over
HTTP/2 (certificate checks off), dynalite for JSON 1.0; many calls
multiplexed on one HTTP/2 connection; a fault proxy in front of kinesalite
for retries; an unreachable and a blackholed endpoint for transport errors
and timeouts.  Drives tests/tools/svc_tool (SVC_TOOL, or found under
KN_BUILD_DIR).  Only 127.0.0.1 is used.

KN_SVC_BENCH_CALLS=N (default 300) sets how many sequential calls the CPU
measurement makes; its figures are printed, not checked.  Exits 0 when
every case passes and prints "N passed, M failed"."""

import json
import os
import socket
import sys
import time
import traceback
import uuid

SOURCE_DIR = os.environ.get("KN_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "lab"))

import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runkit  # noqa: E402

TOOL = os.environ.get("SVC_TOOL") or os.path.join(
    os.environ.get("KN_BUILD_DIR", "build"), "tests", "tools", "svc_tool")
BENCH_CALLS = int(os.environ.get("KN_SVC_BENCH_CALLS", "300"))


class Run:
    """One svc_tool run: the per-call results, the summary line, timing."""

    def __init__(self, proc, elapsed):
        self.rc = proc.returncode
        self.stderr = proc.stderr
        self.elapsed = elapsed
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        self.summary = lines[-1] if lines else None  # None: setup failed (rc 2)
        self.results = lines[:-1]
        self.result = self.results[0] if self.results else None

    def __repr__(self):
        return "rc=%d result=%r summary=%r stderr=%r" % (
            self.rc, self.result, self.summary, self.stderr[-500:])


def svc(endpoint, action, body="{}", *, props=(), service="kinesis", attempts=None,
        timeout_ms=None, repeat=None, chain=None, concurrent=None):
    args = [TOOL, "--service", service]
    key = "dynamodb.endpoint" if service == "dynamodb" else "kinesis.endpoint"
    args += ["-X", "%s=%s" % (key, endpoint)]
    for p in props:
        args += ["-X", p]
    if attempts is not None:
        args += ["--attempts", str(attempts)]
    if timeout_ms is not None:
        args += ["--timeout-ms", str(timeout_ms)]
    if repeat is not None:
        args += ["--repeat", str(repeat)]
    if chain is not None:
        args += ["--chain", str(chain)]
    if concurrent is not None:
        args += ["--concurrent", str(concurrent)]
    args += [action, body]
    env = lab.env_for(kinesis=endpoint if service == "kinesis" else None,
                      dynamodb=endpoint if service == "dynamodb" else None)
    t0 = time.monotonic()
    proc = runkit.run(args, env=env, timeout=600, tail=3000)
    return Run(proc, time.monotonic() - t0)


def check(cond, what, run=None):
    if not cond:
        raise AssertionError(what + ("" if run is None else ": %r" % (run,)))


def expect_ok(run, what):
    check(run.rc == 0 and run.result and run.result["ok"], what + " succeeds", run)
    check(run.result["status"] == 200, what + " answers 200", run)


def expect_error(run, code, what, attempts=None):
    check(run.rc == 1 and run.result and not run.result["ok"], what + " fails", run)
    check(run.result["code"] == code, "%s gives %s" % (what, code), run)
    if attempts is not None:
        check(run.result["attempts"] == attempts, "%s makes %d attempt(s)" % (what, attempts), run)


# -- the servers, one protocol each

def basic_calls(endpoint, props, http2, label):
    """ListStreams, CreateStream, errors that must not be retried."""
    run = svc(endpoint, "ListStreams", props=props)
    expect_ok(run, label + " ListStreams")
    check(run.result["attempts"] == 1, label + " one attempt", run)
    check("StreamNames" in json.loads(run.result["body"]), label + " body", run)
    check(run.summary["http2"] == (1 if http2 else 0), label + " HTTP version", run)

    name = "it-%s" % uuid.uuid4().hex[:10]
    run = svc(endpoint, "CreateStream", json.dumps({"StreamName": name, "ShardCount": 1}),
              props=props)
    expect_ok(run, label + " CreateStream")
    run = svc(endpoint, "CreateStream", json.dumps({"StreamName": name, "ShardCount": 1}),
              props=props)
    expect_error(run, "RESOURCE_IN_USE", label + " CreateStream again", attempts=1)

    run = svc(endpoint, "DescribeStreamSummary", json.dumps({"StreamName": "no-such-" + name}),
              props=props)
    expect_error(run, "RESOURCE_NOT_FOUND", label + " missing stream", attempts=1)
    check(run.result["type"] == "ResourceNotFoundException", label + " error type", run)
    check(not run.result["retriable"], label + " not retriable", run)
    check("DescribeStreamSummary" in run.result["error"] and "HTTP 400" in run.result["error"]
          and "request id" in run.result["error"], label + " error message", run)

    run = svc(endpoint, "DescribeStreamSummary", "{}", props=props)
    check(run.rc == 1 and run.result["attempts"] == 1 and not run.result["retriable"],
          label + " invalid request not retried", run)


def test_kinesalite(servers):
    basic_calls(servers["kinesalite"].endpoint, (), False, "kinesalite")


def test_kinesis_local_plain(servers):
    basic_calls(servers["kinesis-local"].endpoint, ("http.version=1.1",), False,
                "kinesis-local plain")


def test_kinesis_local_tls_h2(servers):
    basic_calls(servers["kinesis-local"].tls_endpoint, ("ssl.verify=false",), True,
                "kinesis-local TLS")


def test_tls_h1(servers):
    run = svc(servers["kinesis-local"].tls_endpoint, "ListStreams",
              props=("ssl.verify=false", "http.version=1.1"))
    expect_ok(run, "TLS with http.version=1.1")
    check(run.summary["http2"] == 0, "HTTP/1.1 over TLS", run)


def test_tls_verify(servers):
    # A self-signed certificate: a transport error that retrying cannot fix.
    run = svc(servers["kinesis-local"].tls_endpoint, "ListStreams", attempts=3)
    expect_error(run, "_TRANSPORT", "certificate check", attempts=1)
    check("certificate" in run.result["error"].lower(), "names the certificate", run)


def test_dynamodb(servers):
    ep = servers["dynalite"].endpoint
    run = svc(ep, "ListTables", service="dynamodb")
    expect_ok(run, "dynalite ListTables")
    run = svc(ep, "DescribeTable", json.dumps({"TableName": "no-such-table"}),
              service="dynamodb")
    expect_error(run, "RESOURCE_NOT_FOUND", "dynalite missing table", attempts=1)
    check(run.result["type"] == "ResourceNotFoundException", "namespace stripped", run)


def test_multiplexing(servers):
    ep = servers["kinesis-local"].tls_endpoint
    run = svc(ep, "ListStreams", props=("ssl.verify=false",), concurrent=100)
    check(run.rc == 0 and run.summary["errors"] == 0, "100 concurrent calls succeed", run)
    check(run.summary["http2"] == 100, "all over HTTP/2", run)
    check(run.summary["connects"] == 1, "on one connection", run)
    # The same over HTTP/1.1 needs a connection per call in flight.
    run = svc(ep, "ListStreams", props=("ssl.verify=false", "http.version=1.1",
                                        "http.max.connections=8"), concurrent=40)
    check(run.rc == 0 and run.summary["http2"] == 0, "40 concurrent HTTP/1.1 calls", run)
    check(1 < run.summary["connects"] <= 8, "at most http.max.connections", run)


def test_prior_knowledge_refused_or_works(servers):
    run = svc(servers["kinesis-local"].endpoint, "ListStreams",
              props=("http.version=2-prior-knowledge",), repeat=5)
    if run.rc == 2:
        check("libcurl 8.0.0" in run.stderr, "says which libcurl is needed", run)
    else:
        check(run.rc == 0 and run.summary["http2"] == 5, "h2c prior knowledge", run)


# -- faults

FAST = ("retry.backoff.ms=5", "retry.backoff.max.ms=50")


def test_faults_then_success(servers, proxy):
    proxy.clear_rules()
    proxy.clear_log()
    # A reset first: curl itself re-sends once on a reused connection that
    # turns out dead, which would hide an attempt.
    proxy.add_rule("reset", "ListStreams", count=1)
    proxy.add_rule("status", "ListStreams", count=1, status=500)
    proxy.add_rule("status", "ListStreams", count=1,
                   error="ProvisionedThroughputExceededException")
    proxy.add_rule("status", "ListStreams", count=1, status=503, body="")
    proxy.add_rule("garbage", "ListStreams", count=1, status=502)
    proxy.add_rule("truncate", "ListStreams", count=1)
    run = svc(proxy.endpoint, "ListStreams", props=FAST, attempts=8)
    expect_ok(run, "faults then success")
    check(run.result["attempts"] == 7, "seven attempts", run)
    check(len(proxy.requests("ListStreams")) == 7, "seven requests reached the proxy", run)


def test_throttling_backs_off_more(servers, proxy):
    proxy.clear_rules()
    proxy.clear_log()
    proxy.add_rule("status", "ListStreams", count=2, error="LimitExceededException")
    run = svc(proxy.endpoint, "ListStreams", props=("retry.backoff.ms=100",
                                                     "retry.backoff.max.ms=5000"), attempts=3)
    expect_ok(run, "throttled twice")
    check(run.result["attempts"] == 3, "three attempts", run)


def test_attempts_exhausted(servers, proxy):
    proxy.clear_rules()
    proxy.clear_log()
    proxy.add_rule("status", "ListStreams", status=500)
    run = svc(proxy.endpoint, "ListStreams", props=FAST, attempts=3)
    expect_error(run, "INTERNAL_FAILURE", "always 500", attempts=3)
    check("failed after 3 attempts" in run.result["error"], "says how many attempts", run)
    check(len(proxy.requests("ListStreams")) == 3, "three requests", run)


def test_not_found_through_proxy(servers, proxy):
    proxy.clear_rules()
    proxy.clear_log()
    run = svc(proxy.endpoint, "DescribeStreamSummary",
              json.dumps({"StreamName": "no-such-stream"}), props=FAST, attempts=5)
    expect_error(run, "RESOURCE_NOT_FOUND", "not found through the proxy", attempts=1)
    check(len(proxy.requests()) == 1, "one request", run)


def test_budget(servers, proxy):
    proxy.clear_rules()
    proxy.clear_log()
    proxy.add_rule("status", "ListStreams", status=503)
    run = svc(proxy.endpoint, "ListStreams", props=FAST + ("retry.budget=12",), attempts=8)
    expect_error(run, "SERVICE_UNAVAILABLE", "budget of two retries", attempts=3)
    check("retry budget exhausted" in run.result["error"], "says the budget ran out", run)


def test_timeout_through_proxy(servers, proxy):
    proxy.clear_rules()
    proxy.clear_log()
    # Answers come after 20 s: two attempts waiting for them would take 40.
    proxy.add_rule("delay", "ListStreams", ms=20000)
    run = svc(proxy.endpoint, "ListStreams", props=FAST, attempts=2, timeout_ms=400)
    expect_error(run, "_TIMED_OUT", "slow answers", attempts=2)
    check(run.elapsed < 15.0, "within two request timeouts", run)


# -- endpoints that do not answer

def test_unreachable(servers):
    # Bound, never listening: refused, and no other process can take it.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    try:
        ep = "http://127.0.0.1:%d" % s.getsockname()[1]
        # Waiting for the connect time-out three times would take 90 s.
        run = svc(ep, "ListStreams", props=("http.connect.timeout.ms=30000",) + FAST,
                  attempts=3)
    finally:
        s.close()
    expect_error(run, "_TRANSPORT", "closed port", attempts=3)
    check(ep in run.result["error"], "names the URL", run)
    check(run.elapsed < 20.0, "fails fast", run)


def test_blackhole(servers):
    # Accepted by the kernel, never read or answered.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        ep = "http://127.0.0.1:%d" % s.getsockname()[1]
        run = svc(ep, "ListStreams", props=FAST, attempts=1, timeout_ms=1000)
        expect_error(run, "_TIMED_OUT", "blackhole", attempts=1)
        # Not before the time-out; the upper bound only tells a hang.
        check(0.9 < run.elapsed < 30.0, "after the request timeout", run)
        check("timed out" in run.result["error"].lower() and ep in run.result["error"],
              "says so and names the URL", run)
    finally:
        s.close()


# -- client CPU per call (printed)

def test_cpu_cost(servers):
    cases = [("kinesalite HTTP/1.1", servers["kinesalite"].endpoint, ()),
             ("kinesis-local TLS HTTP/1.1", servers["kinesis-local"].tls_endpoint,
              ("ssl.verify=false", "http.version=1.1")),
             ("kinesis-local TLS HTTP/2", servers["kinesis-local"].tls_endpoint,
              ("ssl.verify=false",))]
    for label, ep, props in cases:
        n = BENCH_CALLS if "kinesalite" in label else max(1, BENCH_CALLS // 5)
        # Blocking calls from another thread, then calls chained on the loop.
        for mode in ("repeat", "chain"):
            run = svc(ep, "ListStreams", props=props, **{mode: n})
            check(run.rc == 0 and run.summary["errors"] == 0, label + " sequential calls", run)
            s = run.summary
            cpu = s["cpu_user_s"] + s["cpu_sys_s"]
            print("  %-27s %-6s %5d calls: user %.3f s + sys %.3f s = %4.0f us CPU/call, "
                  "%d connection(s), wall %.2f s" % (label, mode, n, s["cpu_user_s"],
                                                     s["cpu_sys_s"], cpu / n * 1e6,
                                                     s["connects"], s["wall_s"]))
            check(s["connects"] == 1, label + " reuses one connection", run)


def main():
    if not os.path.exists(TOOL):
        print("svc_tool not found at %s" % TOOL)
        return 1
    passed = failed = 0
    with lab.Kinesalite() as kinesalite, lab.KinesisLocal() as kl, lab.Dynalite() as dyn:
        servers = {"kinesalite": kinesalite, "kinesis-local": kl, "dynalite": dyn}
        with FaultProxy(kinesalite) as proxy:
            tests = [(name, fn) for name, fn in sorted(globals().items())
                     if name.startswith("test_") and callable(fn)]
            for name, fn in tests:
                t0 = time.monotonic()
                try:
                    if fn.__code__.co_argcount == 2:
                        fn(servers, proxy)
                    else:
                        fn(servers)
                    passed += 1
                    print("ok   %s (%.1f s)" % (name, time.monotonic() - t0))
                except Exception:
                    failed += 1
                    print("FAIL %s" % name)
                    traceback.print_exc()
                sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
