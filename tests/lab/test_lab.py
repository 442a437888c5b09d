#!/usr/bin/env python3
"""Self-test of the test lab: servers, environment, cleanup, fault proxy.

Run with `python3 tests/lab/test_lab.py` (exit code 0 on success). Needs
tests/lab/node_modules (`npm ci --prefix tests/lab`).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

import botocore.exceptions  # noqa: E402

import faultproxy  # noqa: E402
import lab  # noqa: E402
import wirecount  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

LAB_PY = Path(lab.__file__).resolve()
KINESIS_JSON = "application/x-amz-json-1.1"
FAKE_AUTH = ("AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/kinesis/"
             "aws4_request, SignedHeaders=host, Signature=00")


def process_gone(pid: int) -> bool:
    """True if `pid` no longer runs (a zombie awaiting its reaper counts)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_until(predicate, timeout=10.0, interval=0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def wait_stream_active(client, name: str) -> None:
    assert wait_until(lambda: client.describe_stream_summary(StreamName=name)
                      ["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE")


def read_shard(client, stream: str, shard: str = "shardId-000000000000") -> list:
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    return client.get_records(ShardIterator=iterator)["Records"]


def raw_request(endpoint: str, action: str, body: dict | bytes, **kwargs):
    """A hand-made Kinesis request, for faults that boto3 would hide."""
    host, port = endpoint.rsplit("/", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    conn.request("POST", "/", data, {
        "X-Amz-Target": f"Kinesis_20131202.{action}", "Content-Type": KINESIS_JSON,
        "Authorization": FAKE_AUTH, "X-Amz-Date": "20240101T000000Z"}, **kwargs)
    return conn, conn.getresponse()


def run_python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(LAB_PY.parent)))


class KinesisRoundTrip:
    """Shared by the two Kinesis servers: everything must work on both."""

    server_class: type

    @classmethod
    def setUpClass(cls):
        cls.server = cls.server_class().start()
        cls.client = lab.boto3_client("kinesis", cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_create_put_get(self):
        self.client.create_stream(StreamName="round-trip", ShardCount=1)
        wait_stream_active(self.client, "round-trip")
        self.client.put_record(StreamName="round-trip", Data=b"hello", PartitionKey="k")
        records = read_shard(self.client, "round-trip")
        self.assertEqual([r["Data"] for r in records], [b"hello"])

    def test_listens_on_loopback_only(self):
        addresses = self.server.listening_addresses()
        self.assertTrue(addresses)
        self.assertEqual({ip for ip, _ in addresses}, {"127.0.0.1"})


class KinesaliteTest(KinesisRoundTrip, unittest.TestCase):
    server_class = lab.Kinesalite


class KinesisLocalTest(KinesisRoundTrip, unittest.TestCase):
    server_class = lab.KinesisLocal

    def test_tls_endpoint(self):
        self.assertTrue(self.server.tls_endpoint.startswith("https://127.0.0.1:"))
        tls = lab.boto3_client("kinesis", self.server.tls_endpoint)
        self.assertIn("StreamNames", tls.list_streams())
        ports = {port for _, port in self.server.listening_addresses()}
        self.assertEqual(ports, {self.server.port, self.server.tls_port})


class DynaliteTest(unittest.TestCase):
    def test_create_put_get(self):
        with lab.Dynalite() as server:
            self.assertEqual({ip for ip, _ in server.listening_addresses()}, {"127.0.0.1"})
            client = lab.boto3_client("dynamodb", server)
            client.create_table(
                TableName="leases", BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}])
            self.assertTrue(wait_until(lambda: client.describe_table(
                TableName="leases")["Table"]["TableStatus"] == "ACTIVE"))
            client.put_item(TableName="leases", Item={"key": {"S": "shard-0"}})
            item = client.get_item(TableName="leases", Key={"key": {"S": "shard-0"}})
            self.assertEqual(item["Item"], {"key": {"S": "shard-0"}})


class LifetimeTest(unittest.TestCase):
    """No server may outlive its owner, however the owner ends."""

    def test_stop_leaves_no_process(self):
        server = lab.Kinesalite().start()
        pid = server.process.pid
        server.stop()
        server.stop()   # idempotent
        self.assertTrue(process_gone(pid))
        with self.assertRaises(ProcessLookupError):
            os.killpg(pid, 0)

    def test_context_manager_stops(self):
        with lab.Dynalite() as server:
            pid = server.process.pid
        self.assertTrue(process_gone(pid))
        self.assertFalse(server.running)

    def _servers_of_child(self, code: str, end) -> None:
        child = run_python("import lab, time\n" + code + "\n"
                           "print(*[s.process.pid for s in servers], flush=True)\n"
                           "time.sleep(60)\n")
        pids = [int(p) for p in child.stdout.readline().split()]
        self.assertTrue(pids)
        end(child)
        child.wait(10)
        child.stdout.close()
        for pid in pids:
            self.assertTrue(wait_until(lambda: process_gone(pid)), f"server {pid} survived")

    def test_sigterm_stops_servers(self):
        self._servers_of_child(
            "servers = [lab.start('kinesalite'), lab.start('kinesis-local')]",
            lambda child: child.send_signal(signal.SIGTERM))

    def test_sigkill_of_owner_stops_servers(self):
        self._servers_of_child("servers = [lab.start('dynalite')]",
                               lambda child: child.kill())

    def test_interpreter_exit_stops_servers(self):
        child = run_python("import lab\nprint(lab.start('kinesalite').process.pid)")
        pid = int(child.stdout.read())
        child.stdout.close()
        self.assertEqual(child.wait(10), 0)
        self.assertTrue(wait_until(lambda: process_gone(pid)))

    def test_port_collision_is_retried(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            ports = iter([port])
            real = lab.free_port
            with mock.patch.object(lab, "free_port", lambda: next(ports, None) or real()):
                with lab.Kinesalite() as server:
                    self.assertNotEqual(server.port, port)
                    lab.boto3_client("kinesis", server).list_streams()

    def test_missing_node_modules_is_explained(self):
        with tempfile.TemporaryDirectory() as empty:
            with mock.patch.object(lab, "NODE_MODULES", Path(empty)):
                with self.assertRaisesRegex(lab.LabError, "npm ci"):
                    lab.Kinesalite().start()


class EnvironmentTest(unittest.TestCase):
    def test_env_for_hides_developer_setup(self):
        base = {"PATH": "/bin", "AWS_PROFILE": "prod", "AWS_SESSION_TOKEN": "x"}
        env = lab.env_for(kinesis="http://127.0.0.1:1", dynamodb="http://127.0.0.1:2",
                          base=base)
        self.assertNotIn("AWS_PROFILE", env)
        self.assertNotIn("AWS_SESSION_TOKEN", env)
        self.assertEqual(env["PATH"], "/bin")
        self.assertEqual(env["AWS_ENDPOINT_URL_KINESIS"], "http://127.0.0.1:1")
        self.assertEqual(env["AWS_ENDPOINT_URL_DYNAMODB"], "http://127.0.0.1:2")
        self.assertEqual((env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"],
                          env["AWS_REGION"]), ("test", "test", "us-east-1"))
        for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
            self.assertEqual(Path(env[name]).read_bytes(), b"")

    def test_boto3_client_ignores_profile(self):
        with mock.patch.dict(os.environ, {"AWS_PROFILE": "no-such-profile"}):
            client = lab.boto3_client("kinesis", "http://127.0.0.1:1")
        self.assertEqual(client.meta.region_name, "us-east-1")

    def test_cli_run(self):
        check = ("import os, sys, lab\n"
                 "url = os.environ['KN_LAB_KINESALITE']\n"
                 "assert os.environ['AWS_ENDPOINT_URL_KINESIS'] == url\n"
                 "assert os.environ['AWS_ACCESS_KEY_ID'] == 'test'\n"
                 "lab.boto3_client('kinesis', url).list_streams()\n"
                 "print(url.rsplit(':', 1)[1])\n"
                 "sys.exit(3)\n")
        result = subprocess.run(
            [sys.executable, str(LAB_PY), "run", "--kinesalite", "--",
             sys.executable, "-c", check],
            capture_output=True, text=True, timeout=60,
            env=dict(os.environ, PYTHONPATH=str(LAB_PY.parent)))
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertRefused(int(result.stdout.strip()))

    def test_cli_serve_until_interrupted(self):
        serve = subprocess.Popen([sys.executable, str(LAB_PY), "serve", "--dynalite"],
                                 stdout=subprocess.PIPE, text=True)
        name, url = serve.stdout.readline().strip().split("=", 1)
        self.assertEqual(name, "KN_LAB_DYNALITE")
        lab.boto3_client("dynamodb", url).list_tables()
        serve.send_signal(signal.SIGINT)
        self.assertEqual(serve.wait(10), 0)
        serve.stdout.close()
        self.assertRefused(int(url.rsplit(":", 1)[1]))

    def assertRefused(self, port: int) -> None:
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class LimitModeTest(unittest.TestCase):
    """The proxy's limit mode against kinesalite, on a clock of the test's
    own (so nothing depends on how fast the machine is)."""

    @classmethod
    def setUpClass(cls):
        cls.kinesalite = lab.Kinesalite().start()
        setup = lab.boto3_client("kinesis", cls.kinesalite)
        setup.create_stream(StreamName="limited", ShardCount=2)
        wait_stream_active(setup, "limited")

    @classmethod
    def tearDownClass(cls):
        cls.kinesalite.stop()

    def start(self, limits):
        self.clock = FakeClock()
        self.proxy = FaultProxy(self.kinesalite, limits=limits, clock=self.clock).start()
        self.addCleanup(self.proxy.stop)
        self.client = lab.boto3_client("kinesis", self.proxy, attempts=1)

    def iterator(self, shard="shardId-000000000000"):
        return self.client.get_shard_iterator(
            StreamName="limited", ShardId=shard,
            ShardIteratorType="TRIM_HORIZON")["ShardIterator"]

    def throttled(self, call, **kwargs) -> bool:
        try:
            call(**kwargs)
            return False
        except botocore.exceptions.ClientError as error:
            self.assertEqual(error.response["Error"]["Code"],
                             "ProvisionedThroughputExceededException")
            self.assertEqual(error.response["ResponseMetadata"]["HTTPStatusCode"], 400)
            return True

    def test_put_records_refused_per_record_beyond_the_shard_rate(self):
        self.start({"scale": 0.01})   # 10 records/s, 10 KiB/s per shard
        before = len(read_shard(lab.boto3_client("kinesis", self.kinesalite), "limited"))
        # One partition key: every record goes to the same shard.
        records = [{"Data": b"w%02d" % i, "PartitionKey": "a"} for i in range(15)]
        result = self.client.put_records(StreamName="limited", Records=records)
        self.assertEqual(result["FailedRecordCount"], 5)
        codes = [r.get("ErrorCode") for r in result["Records"]]
        self.assertEqual(codes, [None] * 10 + ["ProvisionedThroughputExceededException"] * 5)
        self.assertIn("Rate exceeded for shard", result["Records"][14]["ErrorMessage"])
        stored = read_shard(lab.boto3_client("kinesis", self.kinesalite), "limited")
        self.assertEqual([r["Data"] for r in stored[before:]],
                         [b"w%02d" % i for i in range(10)])   # refused: not stored
        self.assertTrue(self.throttled(self.client.put_record, StreamName="limited",
                                       Data=b"x", PartitionKey="a"))
        self.clock.now += 0.5   # half a second: 5 records
        result = self.client.put_records(StreamName="limited", Records=records[:6])
        self.assertEqual(result["FailedRecordCount"], 1)
        stats = self.proxy.limit_stats()
        self.assertEqual(stats["PutRecords"]["records"], 15)
        self.assertEqual(stats["PutRecords"]["throttled"], 6)

    def test_put_records_bytes_per_second(self):
        self.start({"write_bytes_per_s": 1000})
        records = [{"Data": b"x" * 299, "PartitionKey": "b"} for _ in range(4)]
        result = self.client.put_records(StreamName="limited", Records=records)
        self.assertEqual(result["FailedRecordCount"], 1)   # 3 x (299 + 1) fit

    def test_get_records_data_debt(self):
        self.start({})
        self.client.put_records(StreamName="limited", Records=[
            {"Data": b"d" * 1000, "PartitionKey": "c", "ExplicitHashKey": "0"}
            for _ in range(3)])
        iterator = self.iterator()
        out = self.client.get_records(ShardIterator=iterator)
        self.assertGreaterEqual(len(out["Records"]), 3)
        # Its data is a debt paid off at 2 MiB/s, counted from the call: on a
        # clock that stands still, the next call is throttled.
        self.assertTrue(self.throttled(self.client.get_records,
                                       ShardIterator=out["NextShardIterator"]))
        self.clock.now += 0.01
        self.client.get_records(ShardIterator=out["NextShardIterator"])
        stats = self.proxy.limit_stats()["GetRecords"]
        self.assertEqual((stats["calls"], stats["throttled"]), (3, 1))
        self.assertGreaterEqual(stats["bytes"], 3000)

    def test_get_records_five_calls_per_second(self):
        self.start({"read_bytes_per_s": 1e15})
        iterator = self.iterator("shardId-000000000001")
        for _ in range(5):
            self.client.get_records(ShardIterator=iterator)
        self.assertTrue(self.throttled(self.client.get_records, ShardIterator=iterator))
        self.clock.now += 1.0
        self.client.get_records(ShardIterator=iterator)

    def test_get_records_cut_to_the_largest_response(self):
        self.start({"read_max_bytes": 2500, "read_bytes_per_s": 1e15})
        self.client.put_records(StreamName="limited", Records=[
            {"Data": b"e" * 1000, "PartitionKey": "c", "ExplicitHashKey": "0"}
            for _ in range(3)])
        out = self.client.get_records(ShardIterator=self.iterator(), Limit=10000)
        self.assertEqual(len(out["Records"]), 2)
        self.assertEqual(self.proxy.limit_stats()["GetRecords"]["capped"], 1)

    def test_control_api(self):
        self.start({"scale": 0.5})
        self.client.list_streams()
        with urllib.request.urlopen(self.proxy.endpoint + "/__faultproxy/limits") as r:
            stats = json.loads(r.read())
        self.assertEqual(stats["limits"]["read_bytes_per_s"], 1 << 20)


class FaultProxyTest(unittest.TestCase):
    """Each rule does what it claims, seen through boto3 without retries."""

    @classmethod
    def setUpClass(cls):
        cls.kinesalite = lab.Kinesalite().start()
        setup = lab.boto3_client("kinesis", cls.kinesalite)
        setup.create_stream(StreamName="proxied", ShardCount=1)
        wait_stream_active(setup, "proxied")

    @classmethod
    def tearDownClass(cls):
        cls.kinesalite.stop()

    def setUp(self):
        self.proxy = FaultProxy(self.kinesalite).start()
        self.addCleanup(self.proxy.stop)
        self.client = lab.boto3_client("kinesis", self.proxy, attempts=1)

    def error_code(self, call, **kwargs) -> str:
        with self.assertRaises(botocore.exceptions.ClientError) as caught:
            call(**kwargs)
        return caught.exception.response["Error"]["Code"]

    def test_passes_through_and_logs(self):
        self.client.list_streams()
        entry, = self.proxy.log
        self.assertEqual((entry.action, entry.status, entry.fault),
                         ("ListStreams", 200, None))
        self.assertEqual(entry.forwarded_body, entry.body)

    def test_status_errors(self):
        for error, status in [("ProvisionedThroughputExceededException", 400),
                              ("LimitExceededException", 400),
                              ("ThrottlingException", 400), ("InternalFailure", 500)]:
            self.proxy.add_rule("status", "ListStreams", count=1, error=error)
            self.assertEqual(self.error_code(self.client.list_streams), error)
            self.assertEqual(self.proxy.log[-1].status, status)
        self.client.list_streams()   # counts used up

    def test_status_empty_body(self):
        self.proxy.add_rule("status", "GetRecords", count=1, status=500, body="")
        self.assertEqual(self.error_code(self.client.get_records, ShardIterator="x"), "500")

    def test_status_only_matching_action(self):
        self.proxy.add_rule("status", "GetRecords", error="ThrottlingException")
        self.client.list_streams()
        self.assertEqual([r.fault for r in self.proxy.log], [None])

    def test_probability_is_seeded(self):
        def pattern():
            with FaultProxy(self.kinesalite, seed=7) as proxy:
                proxy.add_rule("status", probability=0.3, status=500)
                client = lab.boto3_client("kinesis", proxy, attempts=1)
                for _ in range(40):
                    try:
                        client.list_streams()
                    except botocore.exceptions.ClientError:
                        pass
                return [r.fault is not None for r in proxy.log]
        first = pattern()
        self.assertEqual(first, pattern())
        self.assertTrue(4 <= sum(first) <= 24, first)

    def put_five(self):
        return self.client.put_records(StreamName="proxied", Records=[
            {"Data": b"r%d" % i, "PartitionKey": str(i)} for i in range(5)])

    def stored(self) -> list:
        return read_shard(lab.boto3_client("kinesis", self.kinesalite), "proxied")

    def test_putrecords_partial_rewrite(self):
        before = len(self.stored())
        self.proxy.add_rule("putrecords_partial", count=1, every=2)
        result = self.put_five()
        self.assertEqual(result["FailedRecordCount"], 2)
        failed = [i for i, r in enumerate(result["Records"]) if "ErrorCode" in r]
        self.assertEqual(failed, [1, 3])
        self.assertNotIn("SequenceNumber", result["Records"][1])
        self.assertEqual(result["Records"][1]["ErrorCode"],
                         "ProvisionedThroughputExceededException")
        self.assertEqual(self.proxy.log[-1].failed_indices, [1, 3])
        self.assertEqual(len(self.stored()) - before, 5)   # all really written

    def test_putrecords_partial_drop(self):
        before = len(self.stored())
        self.proxy.add_rule("putrecords_partial", count=1, indices=[0, 4], drop=True,
                            error_code="InternalFailure")
        result = self.put_five()
        self.assertEqual(result["FailedRecordCount"], 2)
        self.assertEqual([r.get("ErrorCode") for r in result["Records"]],
                         ["InternalFailure", None, None, None, "InternalFailure"])
        entry = self.proxy.requests("PutRecords")[-1]
        sent = json.loads(entry.forwarded_body)["Records"]
        self.assertEqual([r["PartitionKey"] for r in sent], ["1", "2", "3"])
        data = [r["Data"] for r in self.stored()[before:]]
        self.assertEqual(data, [b"r1", b"r2", b"r3"])

    def test_putrecords_partial_drop_all(self):
        self.proxy.add_rule("putrecords_partial", count=1, every=1, drop=True)
        result = self.put_five()
        self.assertEqual(result["FailedRecordCount"], 5)
        self.assertIsNone(self.proxy.log[-1].forwarded_body)

    def test_putrecords_partial_fraction(self):
        self.proxy.add_rule("putrecords_partial", fraction=0.5)
        counts = [self.put_five()["FailedRecordCount"] for _ in range(4)]
        self.assertTrue(0 < sum(counts) < 20, counts)

    def test_garbage(self):
        self.proxy.add_rule("garbage", "DescribeStreamSummary", count=1)
        conn, response = raw_request(self.proxy.endpoint, "DescribeStreamSummary",
                                     {"StreamName": "proxied"})
        body = response.read()
        conn.close()
        self.assertEqual(response.status, 200)
        with self.assertRaises(ValueError):
            json.loads(body)

    def test_truncate(self):
        self.proxy.add_rule("truncate", "DescribeStream", count=1, send=10)
        with self.assertRaises(botocore.exceptions.ConnectionClosedError):
            self.client.describe_stream(StreamName="proxied")
        self.proxy.add_rule("truncate", "DescribeStream", count=1, declared=500, send=3)
        conn, response = raw_request(self.proxy.endpoint, "DescribeStream",
                                     {"StreamName": "proxied"})
        self.assertEqual(response.getheader("Content-Length"), "500")
        with self.assertRaises(http.client.IncompleteRead) as caught:
            response.read()
        conn.close()
        self.assertEqual(len(caught.exception.partial), 3)

    def test_reset(self):
        self.proxy.add_rule("reset", "ListStreams", count=1)
        with self.assertRaises(botocore.exceptions.ConnectionClosedError):
            self.client.list_streams()
        self.assertIsNone(self.proxy.log[-1].status)
        self.client.list_streams()

    def test_reset_after_forwarding(self):
        before = len(self.stored())
        self.proxy.add_rule("reset", "PutRecords", count=1, forward=True)
        with self.assertRaises(botocore.exceptions.ConnectionClosedError):
            self.put_five()
        self.assertEqual(len(self.stored()) - before, 5)

    def test_delay(self):
        self.proxy.add_rule("delay", "ListStreams", count=1, ms=300)
        started = time.monotonic()
        self.client.list_streams()
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        self.assertEqual(self.proxy.log[-1].fault, "delay")

    def test_cut_stream_after_bytes(self):
        self.proxy.add_rule("cut_stream_after", "DescribeStream", count=1, bytes=7)
        conn, response = raw_request(self.proxy.endpoint, "DescribeStream",
                                     {"StreamName": "proxied"})
        with self.assertRaises(http.client.IncompleteRead) as caught:
            response.read()
        conn.close()
        self.assertEqual(len(caught.exception.partial), 7)

    def test_chunked_request_body(self):
        body = json.dumps({"StreamName": "proxied"}).encode()
        conn, response = raw_request(self.proxy.endpoint, "DescribeStreamSummary",
                                     iter([body[:5], body[5:]]), encode_chunked=True)
        summary = json.loads(response.read())["StreamDescriptionSummary"]
        conn.close()
        self.assertEqual(summary["StreamName"], "proxied")

    def test_control_api(self):
        rules = f"{self.proxy.endpoint}/__faultproxy/rules"
        rule = {"kind": "status", "action": "ListStreams", "count": 1,
                "error": "LimitExceededException"}
        urllib.request.urlopen(urllib.request.Request(
            rules, data=json.dumps(rule).encode(), method="POST")).close()
        self.assertEqual(self.error_code(self.client.list_streams),
                         "LimitExceededException")
        with urllib.request.urlopen(f"{self.proxy.endpoint}/__faultproxy/log") as f:
            log = json.load(f)
        self.assertEqual([(r["action"], r["status"], r["fault"]) for r in log],
                         [("ListStreams", 400, "status")])
        urllib.request.urlopen(urllib.request.Request(rules, method="DELETE")).close()
        self.assertEqual(self.proxy.rules, [])

    def test_target_down_is_502(self):
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            target = f"http://127.0.0.1:{closed.getsockname()[1]}"
        with FaultProxy(target) as proxy:
            client = lab.boto3_client("kinesis", proxy, attempts=1)
            self.assertEqual(self.error_code(client.list_streams), "BadGateway")

    def test_rule_validation(self):
        with self.assertRaises(ValueError):
            self.proxy.add_rule("status", colour="red")
        with self.assertRaises(ValueError):
            self.proxy.add_rule("cut_stream_after")
        with self.assertRaises(ValueError):
            self.proxy.add_rule("nonsense")


class DynamoDBFaultTest(unittest.TestCase):
    def test_errors_are_namespaced_like_dynamodb(self):
        with lab.Dynalite() as server, FaultProxy(server) as proxy:
            proxy.add_rule("status", "ListTables", count=1)
            raw = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
            raw.request("POST", "/", b"{}", {"X-Amz-Target": "DynamoDB_20120810.ListTables",
                                             "Content-Type": "application/x-amz-json-1.0"})
            body = json.loads(raw.getresponse().read())
            raw.close()
            self.assertEqual(body["__type"], "com.amazonaws.dynamodb.v20120810#"
                                             "ProvisionedThroughputExceededException")
            client = lab.boto3_client("dynamodb", proxy, attempts=1)
            proxy.add_rule("status", "UpdateItem", count=1, error="ThrottlingException")
            with self.assertRaises(botocore.exceptions.ClientError) as caught:
                client.update_item(TableName="t", Key={"k": {"S": "x"}})
            self.assertEqual(caught.exception.response["Error"]["Code"], "ThrottlingException")


class EventStreamCutTest(unittest.TestCase):
    """cut_stream_after on a real SubscribeToShard event stream (kinesis-local).

    Uses a raw HTTP/1.1 client: boto3 refuses kinesis-local's streams because
    they lack the initial-response event.
    """

    def test_cut_after_messages(self):
        with lab.KinesisLocal() as server, FaultProxy(server) as proxy:
            client = lab.boto3_client("kinesis", server)
            client.create_stream(StreamName="efo", ShardCount=1)
            wait_stream_active(client, "efo")
            arn = client.describe_stream_summary(
                StreamName="efo")["StreamDescriptionSummary"]["StreamARN"]
            consumer = client.register_stream_consumer(
                StreamARN=arn, ConsumerName="cut")["Consumer"]["ConsumerARN"]
            self.assertTrue(wait_until(lambda: client.describe_stream_consumer(
                ConsumerARN=consumer)["ConsumerDescription"]["ConsumerStatus"] == "ACTIVE"))
            client.put_record(StreamName="efo", Data=b"event", PartitionKey="k")

            proxy.add_rule("cut_stream_after", "SubscribeToShard", count=1, messages=2)
            conn, response = raw_request(proxy.endpoint, "SubscribeToShard", {
                "ConsumerARN": consumer, "ShardId": "shardId-000000000000",
                "StartingPosition": {"Type": "TRIM_HORIZON"}})
            self.assertEqual(response.getheader("Content-Type"),
                             "application/vnd.amazon.eventstream")
            received = b""
            try:
                while chunk := response.read1(65536):
                    received += chunk
            except http.client.IncompleteRead as error:
                received += error.partial
            conn.close()
            lengths = []
            while received:
                lengths.append(int.from_bytes(received[:4], "big"))
                received = received[lengths[-1]:]
            self.assertEqual(len(lengths), 2)
            self.assertTrue(all(n > 16 for n in lengths))
            pid = server.process.pid
        # kinesis-local still holds the subscription and ignores SIGTERM
        # for a while: stop() must have resorted to SIGKILL.
        self.assertTrue(process_gone(pid))


class StreamCutUnitTest(unittest.TestCase):
    """Message counting must survive arbitrary chunk boundaries."""

    def test_boundaries(self):
        messages = [len_prefixed(b"a" * n) for n in (20, 5, 40)]
        stream = b"".join(messages)
        for split in range(1, len(stream)):
            cut = faultproxy._StreamCut(None, 2)
            first, done_first = cut.take(stream[:split])
            second, done = (b"", True) if done_first else cut.take(stream[split:])
            self.assertTrue(done)
            self.assertEqual(first + second, messages[0] + messages[1])


class WireCountTest(unittest.TestCase):
    """wirecount.DynamoCounter as a FaultProxy observer in front of dynalite."""

    def test_sizes_and_units(self):
        self.assertEqual(wirecount.item_size(
            {"leaseKey": {"S": "abc"}, "n": {"N": "12345"}, "b": {"BOOL": True}}),
            8 + 3 + 1 + 4 + 1 + 1)
        self.assertEqual(wirecount.read_units(4097, True), 2)
        self.assertEqual(wirecount.read_units(10, False), 0.5)
        self.assertEqual(wirecount.write_units(1025), 2)
        item = {"k": {"S": "x"}, "c": {"N": "1"}, "o": {"S": "a"}}
        new = wirecount.apply_update(item, {
            "UpdateExpression": "SET #o = :o REMOVE #x ADD #c :one",
            "ExpressionAttributeNames": {"#o": "o", "#x": "gone", "#c": "c"},
            "ExpressionAttributeValues": {":o": {"S": "bb"}, ":one": {"N": "1"}}})
        self.assertEqual(new, {"k": {"S": "x"}, "c": {"N": "2"}, "o": {"S": "bb"}})
        self.assertEqual(item["o"], {"S": "a"})

    def test_counts_on_the_wire(self):
        counter = wirecount.DynamoCounter(tables=["counted"])
        with lab.Dynalite() as server, FaultProxy(
                server, observer=counter.observe, keep_log=False) as proxy:
            ddb = lab.boto3_client("dynamodb", proxy)
            ddb.create_table(
                TableName="counted", BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"},
                                      {"AttributeName": "leaseOwner", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
                GlobalSecondaryIndexes=[{
                    "IndexName": "byOwner",
                    "KeySchema": [{"AttributeName": "leaseOwner", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"}}])
            ddb.get_waiter("table_exists").wait(
                TableName="counted", WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
            for i in range(20):
                ddb.put_item(TableName="counted", Item={
                    "leaseKey": {"S": f"shard-{i}"}, "leaseCounter": {"N": "1"}})
            upd = dict(TableName="counted", Key={"leaseKey": {"S": "shard-1"}},
                       UpdateExpression="SET #o = :o ADD #c :one",
                       ConditionExpression="#c = :c",
                       ExpressionAttributeNames={"#o": "leaseOwner", "#c": "leaseCounter"},
                       ExpressionAttributeValues={":o": {"S": "w"}, ":one": {"N": "1"},
                                                  ":c": {"N": "1"}})
            ddb.update_item(**upd)
            with self.assertRaises(botocore.exceptions.ClientError):
                ddb.update_item(**upd)   # the counter moved: condition fails
            ddb.scan(TableName="counted", ConsistentRead=True)
            ddb.scan(TableName="counted")
            ddb.get_item(TableName="counted", Key={"leaseKey": {"S": "none"}})
            ddb.list_tables()   # names no table: not counted
            self.assertEqual(proxy.log, [])
        snap = counter.snapshot()
        self.assertNotIn("ListTables", snap)
        self.assertEqual(snap["PutItem"].items_written, 20)
        self.assertEqual(snap["PutItem"].wcu, 20)
        self.assertEqual(snap["PutItem"].index_wcu, 0)
        u = snap["UpdateItem"]
        self.assertEqual((u.requests, u.items_written, u.failed_writes, u.wcu),
                         (2, 1, 1, 2))
        self.assertEqual(u.index_wcu, 1)   # the owner appeared in the index
        sc = snap["Scan"]
        self.assertEqual((sc.requests, sc.items_read), (2, 40))
        self.assertEqual(sc.rcu, 1.5)   # under 4 KB: 1 unit, then half a unit
        g = snap["GetItem"]
        self.assertEqual((g.get_misses, g.rcu), (1, 0.5))
        self.assertEqual(counter.table("counted").items['[{"S": "shard-1"}]']
                         ["leaseCounter"], {"N": "2"})

    def test_timeline_per_item(self):
        """Units billed per item key, by window: writes by the larger of
        the item before and after, failed conditions included; a Scan on
        a pseudo-item of its own."""
        c = wirecount.DynamoCounter(timeline=True)

        def obs(action, req, status=200, resp=None):
            c.observe(action, json.dumps(req).encode(), status,
                      json.dumps(resp or {}).encode())

        obs("CreateTable", {"TableName": "m", "KeySchema": [
            {"AttributeName": "id", "KeyType": "HASH"}]})
        t0 = time.monotonic()
        big = {"id": {"S": "members"}, "pad": {"S": "x" * 2000}}
        for _ in range(3):   # 2 + 3 + 2000 bytes: 2 units each
            obs("UpdateItem", {"TableName": "m", "Key": {"id": {"S": "members"}},
                               "UpdateExpression": "SET #a = :v",
                               "ExpressionAttributeNames": {"#a": "pad"},
                               "ExpressionAttributeValues": {":v": {"S": "x" * 2000}},
                               "ReturnValues": "ALL_NEW"}, resp={"Attributes": big})
        obs("GetItem", {"TableName": "m", "Key": {"id": {"S": "members"}},
                        "ConsistentRead": True}, resp={"Item": big})
        obs("PutItem", {"TableName": "m", "Item": {"id": {"S": "w1"}}})
        obs("DeleteItem", {"TableName": "m", "Key": {"id": {"S": "w1"}},
                           "ConditionExpression": "attribute_not_exists(id)"},
            status=400, resp={"__type": "com.amazonaws.dynamodb.v20120810#"
                                        "ConditionalCheckFailedException"})
        obs("Scan", {"TableName": "m"}, resp={"Items": [big], "ScannedCount": 1})
        w = c.item_windows(t0, time.monotonic() + 0.2, 5.0)
        self.assertEqual(w[("m", '[{"S": "members"}]')], [(6, 1.0)])
        self.assertEqual(w[("m", '[{"S": "w1"}]')], [(2, 0.0)])
        self.assertEqual(w[("m", "(Scan)")], [(0, 0.5)])
        self.assertEqual(c.item_windows(t0 - 10, t0 - 5, 5.0), {})
        # a membership entry: name, then a list of two numbers (3 bytes,
        # and one an element), trailing zeros trimmed
        self.assertEqual(wirecount.item_size(
            {"w:a": {"L": [{"N": "1700000000000"}, {"N": "2"}]}}),
            3 + 3 + (1 + 2) + (1 + 2))


def len_prefixed(payload: bytes) -> bytes:
    """A fake event-stream message: only the total-length prelude matters."""
    return (len(payload) + 4).to_bytes(4, "big") + payload


if __name__ == "__main__":
    unittest.main()
