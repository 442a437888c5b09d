#!/usr/bin/env python3
"""Large records (MaxRecordSizeInKiB) and service-managed record
distribution (AUTO), which the local servers do not know: the lab's limit
proxy emulates them (tests/lab/stream_features.py) in front of
kinesis-local and kinesalite.  First the proxy's answers as the API
reference documents them, then the library and kncat on them.

Environment: KNCAT, KN_SOURCE_DIR.  Prints "N passed, M failed"."""

import base64
import json
import os
import sys
import time
import traceback
import urllib.error
import urllib.request

SRC = os.environ.get("KN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from stream_features import NO_KEY  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runkit  # noqa: E402

KNCAT = os.environ.get("KNCAT") or os.path.join(SRC, "build", "kncat")
MIB = 1 << 20
ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/"
# The proxy's per-shard rates far above what these tests write: only the
# emulated stream settings are under test here.
NO_RATES = {"scale": 1000}


def call(endpoint, action, body):
    """(status, decoded JSON or None): raw, as boto3 refuses a record
    without PartitionKey before sending it."""
    req = urllib.request.Request(endpoint + "/", data=json.dumps(body).encode(), headers={
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "Kinesis_20131202." + action,
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDLAB/20260101/us-east-1/"
                         "kinesis/aws4_request, SignedHeaders=host, Signature=00",
        "X-Amz-Date": "20260101T000000Z"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None


def ok(endpoint, action, body):
    status, value = call(endpoint, action, body)
    assert status == 200, (action, status, value)
    return value


def refused(endpoint, action, body, kind):
    status, value = call(endpoint, action, body)
    assert status == 400 and value["__type"] == kind, (action, status, value)
    return value


def b64(n, fill=b"x"):
    return base64.b64encode(fill * n).decode()


def wait_active(endpoint, stream):
    for _ in range(120):
        s = ok(endpoint, "DescribeStreamSummary", {"StreamName": stream})
        if s["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
            return s["StreamDescriptionSummary"]
        time.sleep(0.25)   # the servers take a moment to make a stream ACTIVE
    raise AssertionError("stream %s never ACTIVE" % stream)


def read_all(endpoint, stream):
    """Every record of every shard, by shard id."""
    shards = ok(endpoint, "ListShards", {"StreamName": stream})["Shards"]
    out = {}
    for s in shards:
        it = ok(endpoint, "GetShardIterator", {
            "StreamName": stream, "ShardId": s["ShardId"],
            "ShardIteratorType": "TRIM_HORIZON"})["ShardIterator"]
        recs = []
        while it:
            page = ok(endpoint, "GetRecords", {"ShardIterator": it})
            recs += page["Records"]
            if not page["Records"]:
                break
            it = page.get("NextShardIterator")
        out[s["ShardId"]] = recs
    return out


def kncat(env, *args, input=None, rc=0, timeout=300):
    p = runkit.kncat(*args, kncat=KNCAT, env=env, input=input, text=False, timeout=timeout)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == rc, "kncat %s: exit %d (want %d)\n%s" % (
        " ".join(map(str, args[:4])), p.returncode, rc, err[-2000:])
    return p


class Suite:
    def __init__(self, kind, server):
        self.kind, self.server = kind, server
        self.passed = self.failed = 0
        self.n = 0
        self.proxy = FaultProxy(server, limits=NO_RATES).start()
        self.ep = self.proxy.endpoint
        self.env = lab.env_for(kinesis=self.ep)

    def name(self):
        self.n += 1
        return "sf-%d" % self.n

    def case(self, fn):
        name = "%s %s" % (self.kind, fn.__name__)
        t = time.time()
        try:
            fn()
            self.passed += 1
            print("ok   %s (%.1f s)" % (name, time.time() - t), flush=True)
        except Exception:
            self.failed += 1
            print("FAIL %s" % name, flush=True)
            traceback.print_exc()

    # -- the proxy: large records

    def max_record_size_settings(self):
        s = self.name()
        refused(self.ep, "CreateStream", {"StreamName": s, "ShardCount": 1,
                                          "MaxRecordSizeInKiB": 1023}, "ValidationException")
        ok(self.ep, "CreateStream", {"StreamName": s, "ShardCount": 1,
                                     "MaxRecordSizeInKiB": 4096})
        assert wait_active(self.ep, s)["MaxRecordSizeInKiB"] == 4096
        for bad in (1023, 10241):
            refused(self.ep, "UpdateMaxRecordSize", {"StreamARN": ARN + s,
                                                     "MaxRecordSizeInKiB": bad},
                    "ValidationException")
        status, body = call(self.ep, "UpdateMaxRecordSize",
                            {"StreamARN": ARN + s, "MaxRecordSizeInKiB": 2048})
        assert (status, body) == (200, None), (status, body)
        assert wait_active(self.ep, s)["MaxRecordSizeInKiB"] == 2048
        refused(self.ep, "UpdateMaxRecordSize", {"StreamARN": ARN + "nosuch",
                                                 "MaxRecordSizeInKiB": 2048},
                "ResourceNotFoundException")
        # A stream never set reports the default.
        t = self.name()
        ok(self.ep, "CreateStream", {"StreamName": t, "ShardCount": 1})
        assert wait_active(self.ep, t)["MaxRecordSizeInKiB"] == 1024

    def records_over_the_limit_refused(self):
        s = self.name()
        ok(self.ep, "CreateStream", {"StreamName": s, "ShardCount": 1})
        wait_active(self.ep, s)
        # Data and key over 1 MiB by one byte.
        v = refused(self.ep, "PutRecord", {"StreamName": s, "PartitionKey": "k",
                                           "Data": b64(MIB)}, "InvalidArgumentException")
        assert "MaxRecordSizeInKiB" in v["message"], v
        res = ok(self.ep, "PutRecords", {"StreamName": s, "Records": [
            {"PartitionKey": "a", "Data": b64(10)},
            {"PartitionKey": "b", "Data": b64(MIB)},
            {"PartitionKey": "c", "Data": b64(MIB - 1)}]})
        assert res["FailedRecordCount"] == 1, res
        assert res["Records"][1]["ErrorCode"] == "InvalidArgumentException", res
        assert "SequenceNumber" in res["Records"][0] and "SequenceNumber" in res["Records"][2]
        got = [r["PartitionKey"] for rs in read_all(self.ep, s).values() for r in rs]
        assert got == ["a", "c"], got
        # Over 5 MiB in one request on a stream of 1 MiB records.
        refused(self.ep, "PutRecords", {"StreamName": s, "Records": [
            {"PartitionKey": "k", "Data": b64(MIB - 1)}] * 6}, "ValidationException")

    def large_records_stored(self):
        """kinesis-local stores them; kinesalite refuses data over 1 MiB
        itself, passed on as is."""
        s = self.name()
        ok(self.ep, "CreateStream", {"StreamName": s, "ShardCount": 1,
                                     "MaxRecordSizeInKiB": 10240})
        wait_active(self.ep, s)
        body = {"StreamName": s, "PartitionKey": "big", "Data": b64(3 * MIB, b"L")}
        if self.kind == "kinesalite":
            refused(self.ep, "PutRecord", body, "ValidationException")
            return
        ok(self.ep, "PutRecord", body)
        res = ok(self.ep, "PutRecords", {"StreamName": s, "Records": [
            {"PartitionKey": "p%d" % i, "Data": b64(3 * MIB, b"M")} for i in range(3)]})
        assert res["FailedRecordCount"] == 0, res
        recs = [r for rs in read_all(self.ep, s).values() for r in rs]
        assert [len(base64.b64decode(r["Data"])) for r in recs] == [3 * MIB] * 4
        refused(self.ep, "PutRecord", {"StreamName": s, "PartitionKey": "k",
                                       "Data": b64(10 * MIB)}, "InvalidArgumentException")

    # -- the proxy: AUTO

    def auto_settings(self):
        s = self.name()
        ok(self.ep, "CreateStream", {"StreamName": s, "ShardCount": 2})
        assert wait_active(self.ep, s)["RecordDistributionStrategy"] == "USER_PARTITION_KEY"
        refused(self.ep, "UpdateStreamRecordDistributionStrategy",
                {"StreamARN": ARN + s, "RecordDistributionStrategy": "AUTO"},
                "InvalidArgumentException")   # provisioned
        refused(self.ep, "UpdateStreamRecordDistributionStrategy",
                {"StreamARN": ARN + s, "RecordDistributionStrategy": "RANDOM"},
                "ValidationException")
        refused(self.ep, "UpdateStreamRecordDistributionStrategy",
                {"RecordDistributionStrategy": "AUTO"}, "ValidationException")
        t = self.auto_stream()
        assert wait_active(self.ep, t)["RecordDistributionStrategy"] == "AUTO"
        ok(self.ep, "UpdateStreamRecordDistributionStrategy",
           {"StreamARN": ARN + t, "RecordDistributionStrategy": "USER_PARTITION_KEY"})
        assert wait_active(self.ep, t)["RecordDistributionStrategy"] == "USER_PARTITION_KEY"

    def auto_stream(self):
        s = self.name()
        ok(self.ep, "CreateStream", {"StreamName": s,
                                     "StreamModeDetails": {"StreamMode": "ON_DEMAND"}})
        summary = wait_active(self.ep, s)
        assert summary["StreamModeDetails"]["StreamMode"] == "ON_DEMAND", summary
        ok(self.ep, "UpdateStreamRecordDistributionStrategy",
           {"StreamARN": ARN + s, "RecordDistributionStrategy": "AUTO"})
        return s

    def auto_puts(self):
        s = self.auto_stream()
        shards = ok(self.ep, "ListShards", {"StreamName": s})["Shards"]
        assert len(shards) >= 2, shards
        # One key and one explicit hash key for all: spread all the same.
        res = ok(self.ep, "PutRecords", {"StreamName": s, "Records": [
            {"PartitionKey": "same", "ExplicitHashKey": "0", "Data": b64(5)}
            for _ in range(2 * len(shards))]})
        assert res["FailedRecordCount"] == 0, res
        assert len({r["ShardId"] for r in res["Records"]}) == len(shards), res
        res = ok(self.ep, "PutRecords", {"StreamName": s, "Records": [
            {"Data": b64(3, b"n")} for _ in range(len(shards))]})
        assert res["FailedRecordCount"] == 0, res
        ok(self.ep, "PutRecord", {"StreamName": s, "Data": b64(4, b"o")})
        refused(self.ep, "PutRecord", {"StreamName": s, "PartitionKey": "k", "Data": b64(1),
                                       "SequenceNumberForOrdering": "1"},
                "InvalidArgumentException")
        recs = [r for rs in read_all(self.ep, s).values() for r in rs]
        assert len(recs) == 3 * len(shards) + 1, recs
        keyless = [r for r in recs if "PartitionKey" not in r]
        assert len(keyless) == len(shards) + 1, recs
        assert not any(NO_KEY in json.dumps(r) for r in recs)
        # On a stream of user keys, no key is the server's refusal.
        t = self.name()
        ok(self.ep, "CreateStream", {"StreamName": t, "ShardCount": 1})
        wait_active(self.ep, t)
        status, _ = call(self.ep, "PutRecord", {"StreamName": t, "Data": b64(1)})
        assert status == 400

    # -- kncat and the library

    def consume_json(self, s, *more):
        p = kncat(self.env, "consume", s, "-e", "-J", "-X", "shard.sync.interval.ms=2000",
                  *more)
        return [json.loads(x) for x in p.stdout.decode().splitlines()]

    def kncat_large_records(self):
        s = self.name()
        kncat(self.env, "create", s, "--max-record-size", "100", rc=2)
        kncat(self.env, "create", s, "--shards", "1", "--max-record-size", "4096")
        assert wait_active(self.ep, s)["MaxRecordSizeInKiB"] == 4096
        big, huge = b"a" * (3 * MIB), b"b" * (5 * MIB)
        if self.kind == "kinesalite":
            # The server refuses data over 1 MiB: reported, not lost.
            p = kncat(self.env, "produce", s, "-k", "k", input=big + b"\n", rc=5)
            assert "ValidationException" in p.stderr.decode(), p.stderr[-2000:]
            return
        p = kncat(self.env, "produce", s, "-k", "k", "--aggregate",
                  input=big + b"\n" + huge + b"\nsmall\n", rc=5)
        err = p.stderr.decode()
        assert "over the stream's MaxRecordSizeInKiB of 4096 KiB" in err, err[-2000:]
        assert "2 records sent, 1 failed" in err, err[-2000:]
        for more in ((), ("--efo", "large")):
            recs = self.consume_json(s, *more)
            assert [len(r["data"]) for r in recs] == [3 * MIB, 5], (more, len(recs))

    def kncat_auto(self):
        s = self.name()
        kncat(self.env, "create", s, "--shards", "0")
        ok(self.ep, "UpdateStreamRecordDistributionStrategy",
           {"StreamARN": ARN + s, "RecordDistributionStrategy": "AUTO"})
        lines = b"".join(b"n%d\n" % i for i in range(30)) + \
            b"".join(b"same\tk%d\n" % i for i in range(30))
        p = kncat(self.env, "produce", s, "--aggregate", "-K", "\\t", input=lines)
        err = p.stderr.decode()
        assert err.count("aggregation is off") == 1, err
        assert "60 records sent, 0 failed" in err, err
        recs = self.consume_json(s)
        assert sorted(r["data"] for r in recs if r["key"] is None) == \
            sorted("n%d" % i for i in range(30)), recs
        keyed = [r for r in recs if r["key"] is not None]
        assert {r["key"] for r in keyed} == {"same"} and len(keyed) == 30, keyed
        assert len({r["shard"] for r in keyed}) > 1   # the key is ignored
        # On a stream of user keys a record without one gets a random key.
        t = self.name()
        kncat(self.env, "create", t, "--shards", "1")
        kncat(self.env, "produce", t, input=b"x\ny\n")
        assert all(r["key"] for r in self.consume_json(t))

    def run(self):
        for fn in (self.max_record_size_settings, self.records_over_the_limit_refused,
                   self.large_records_stored, self.auto_settings, self.auto_puts,
                   self.kncat_large_records, self.kncat_auto):
            self.case(fn)

    def close(self):
        self.proxy.stop()


def main():
    passed = failed = 0
    for kind, cls in (("kinesis-local", lab.KinesisLocal), ("kinesalite", lab.Kinesalite)):
        with cls() as server:
            suite = Suite(kind, server)
            try:
                suite.run()
            finally:
                suite.close()
            passed += suite.passed
            failed += suite.failed
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
