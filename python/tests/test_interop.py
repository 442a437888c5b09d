"""The package against the C tools and fan-out: KPL aggregates produced
from Python and read back by `kncat consume`; enhanced fan-out on
kinesis-local."""

import json
import subprocess

import libkinesis as kn
from conftest import KNCAT, drain

import lab


def test_aggregated_records_read_back_by_kncat(kinesalite_stream):
    s = kinesalite_stream(2)
    reports = []
    conf = s.conf(aggregation_enable=True, linger_ms=20)
    with kn.Producer(conf) as p:
        for i in range(1000):
            p.produce(b"agg-%d" % i, partition_key="k%d" % (i % 10),
                      on_delivery=lambda e, r: reports.append((e, r)))
        assert p.flush(30) == 0
        calls = p.counters()["calls"]
    assert all(e is None for e, _ in reports) and len(reports) == 1000
    assert all(r.aggregated for _, r in reports)
    assert len({(r.shard_id, r.sequence_number) for _, r in reports}) < 100
    assert calls < 50
    stored = {(r.shard_id, r.sequence_number, r.sub_sequence_number):
              r.partition_key for _, r in reports}

    out = subprocess.run([KNCAT, "consume", s.name, "-e", "-J"],
                         env=lab.env_for(kinesis=s.endpoint), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    recs = [json.loads(l) for l in out.stdout.splitlines()]
    assert sorted(r["data"] for r in recs) == sorted("agg-%d" % i for i in range(1000))
    for r in recs:
        assert stored[(r["shard"], r["seq"], r.get("subseq", 0))] == r["key"]
    for k in range(10):
        mine = [r["data"] for r in recs if r["key"] == "k%d" % k]
        assert mine == ["agg-%d" % i for i in range(1000) if i % 10 == k]

    # and the package's consumer deaggregates them the same way
    with kn.Consumer(s.conf()) as c:
        got = drain(c, 1000)
    assert sorted((sh, seq, sub) for _, _, sh, seq, sub in got) == sorted(stored)


def test_enhanced_fan_out_on_kinesis_local(kinesis_local_stream):
    s = kinesis_local_stream(2)
    s.put([("k%d" % i, b"efo-%d" % i) for i in range(300)])
    # HTTP/2 over TLS (ALPN), the server's self-signed certificate
    conf = s.conf(efo_consumer_name="py-efo", endpoint=s.server.tls_endpoint,
                  ssl_verify=False)
    with kn.Consumer(conf) as c:
        got = drain(c, 300)
        efo = [sh.get("efo") for sh in c.stats()["shards"]]
    assert sorted(d for _, d, *_ in got) == sorted(b"efo-%d" % i for i in range(300))
    assert all(e and e["subscriptions"] >= 1 for e in efo), efo
    consumers = s.client.list_stream_consumers(
        StreamARN=s.client.describe_stream_summary(StreamName=s.name)
        ["StreamDescriptionSummary"]["StreamARN"])["Consumers"]
    assert [x["ConsumerName"] for x in consumers] == ["py-efo"]
