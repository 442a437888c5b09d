"""A stream whose service places records (RecordDistributionStrategy AUTO)
and a stream of large records (MaxRecordSizeInKiB), as the lab's limit
proxy emulates them in front of kinesalite and kinesis-local: records
without a partition key both ways, aggregation turned off, large records
both ways."""

import json
import time
import urllib.request

import pytest

import libkinesis as kn
from conftest import drain

from faultproxy import FaultProxy


def call(endpoint, action, body):
    """(status, decoded body): raw, as boto3 knows none of these fields."""
    req = urllib.request.Request(endpoint + "/", data=json.dumps(body).encode(), headers={
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "Kinesis_20131202." + action,
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDLAB/20260101/us-east-1/"
                         "kinesis/aws4_request, SignedHeaders=host, Signature=00",
        "X-Amz-Date": "20260101T000000Z"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
        return r.status, json.loads(raw) if raw else None


@pytest.fixture
def proxied(servers):
    """(proxy, stream factory) for a server behind the limit proxy, its
    per-shard rates far above what is written here."""
    proxies = []

    def make(server_name, name, **create):
        proxy = FaultProxy(servers[server_name], limits={"scale": 1000}).start()
        proxies.append(proxy)
        call(proxy.endpoint, "CreateStream", dict({"StreamName": name}, **create))
        for _ in range(600):
            _, d = call(proxy.endpoint, "DescribeStreamSummary", {"StreamName": name})
            if d["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
                break
            time.sleep(0.05)   # the server makes the stream ACTIVE in a moment
        return proxy
    yield make
    for p in proxies:
        p.stop()


def conf(proxy, name, **more):
    c = {"stream": name, "endpoint": proxy.endpoint, "poll.idle.ms": 50}
    c.update({k.replace("_", "."): v for k, v in more.items()})
    return c


def test_auto_stream_records_without_a_key(proxied):
    name = "py-auto-%d" % id(proxied)
    proxy = proxied("kinesalite", name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    call(proxy.endpoint, "UpdateStreamRecordDistributionStrategy",
         {"StreamARN": "arn:aws:kinesis:us-east-1:000000000000:stream/" + name,
          "RecordDistributionStrategy": "AUTO"})
    reports = []
    with kn.Producer(conf(proxy, name, aggregation_enable="true", linger_ms=5)) as p:
        for i in range(40):
            p.produce(b"n%d" % i, partition_key=None,
                      on_delivery=lambda err, rep: reports.append((err, rep)))
            p.produce(b"k%d" % i, partition_key="same",
                      on_delivery=lambda err, rep: reports.append((err, rep)))
        assert p.flush(60) == 0
    assert [e for e, _ in reports if e] == []
    assert not any(r.aggregated for _, r in reports)   # aggregation is off
    assert sum(r.partition_key is None for _, r in reports) == 40
    assert len({r.shard_id for _, r in reports}) > 1   # one key, many shards
    with kn.Consumer(conf(proxy, name)) as c:
        got = drain(c, 80)
        assert c.stats()["dropped_records"] == 0
    assert sorted(k for k, *_ in got if k is not None) == ["same"] * 40
    assert sorted(b for k, b, *_ in got if k is None) == sorted(b"n%d" % i for i in range(40))


def test_no_key_refused_on_a_stream_of_user_keys(proxied):
    name = "py-user-%d" % id(proxied)
    proxy = proxied("kinesalite", name, ShardCount=1)
    errs = []
    with kn.Producer(conf(proxy, name)) as p:
        try:
            p.produce(b"x", partition_key=None, on_delivery=lambda e, r: errs.append(e))
            assert p.flush(30) == 0
            assert len(errs) == 1 and errs[0].code == kn.ERR__INVALID_ARG, errs
            assert "RecordDistributionStrategy" in str(errs[0])
        except kn.KinesisError as e:
            assert e.code == kn.ERR__INVALID_ARG


def test_large_records(proxied):
    name = "py-large-%d" % id(proxied)
    proxy = proxied("kinesis-local", name, ShardCount=1, MaxRecordSizeInKiB=4096)
    big = [bytes([65 + i]) * (3 << 20) for i in range(3)]
    reports = []
    with kn.Producer(conf(proxy, name, aggregation_enable="true")) as p:
        for b in big:
            p.produce(b, partition_key="big", on_delivery=lambda e, r: reports.append((e, r)))
        try:   # refused at once, or in its report (see test_basics)
            p.produce(b"y" * (5 << 20), partition_key="huge",
                      on_delivery=lambda e, r: reports.append((e, r)))
        except kn.KinesisError as e:
            reports.append((e, None))
        p.flush(120)
    errs = [e for e, _ in reports if e]
    assert len(reports) == 4 and len(errs) == 1, reports
    assert errs[0].code == kn.ERR__INVALID_ARG and "4096 KiB" in str(errs[0])
    with kn.Consumer(conf(proxy, name)) as c:
        got = drain(c, 3, timeout=120)
    assert [b for _, b, *_ in got] == big
