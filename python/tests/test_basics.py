"""Producer to consumer on kinesalite; records, reports, configuration
errors, closed handles."""

import datetime
import gc
import weakref

import pytest

import libkinesis as kn
from conftest import drain


def test_produce_then_consume_every_field(kinesalite_stream):
    s = kinesalite_stream(2)
    reports = []
    with kn.Producer(s.conf(linger_ms=5)) as p:
        for i in range(200):
            p.produce(b"rec-%d" % i, partition_key="k%d" % (i % 7),
                      on_delivery=lambda err, rep: reports.append((err, rep)))
        p.produce("text is UTF-8", partition_key="t",
                  explicit_hash_key="0", on_delivery=lambda e, r: reports.append((e, r)))
        assert p.flush(30) == 0
        assert len(p) == 0
        assert p.counters()["delivered"] == 201
    assert len(reports) == 201
    assert all(err is None for err, _ in reports)
    stored = {(r.shard_id, r.sequence_number): r.partition_key for _, r in reports}
    assert len(stored) == 201
    (t,) = [r for _, r in reports if r.partition_key == "t"]
    assert t.explicit_hash_key == "0" and t.shard_id == "shardId-000000000000"

    with kn.Consumer(s.conf()) as c:
        got = drain(c, 201)
        assert c.health()["alive"]
        st = c.stats()
        assert st["stream"] == s.name
        assert "kn_consumer" in c.metrics()
    assert sorted(b for _, b, *_ in got) == sorted(
        [b"rec-%d" % i for i in range(200)] + [b"text is UTF-8"])
    for key, data, shard, seq, _ in got:
        assert stored[(shard, seq)] == key
    # per key, the order produced
    for k in range(7):
        mine = [d for key, d, *_ in got if key == "k%d" % k]
        assert mine == [b"rec-%d" % i for i in range(200) if i % 7 == k]


def test_record_is_a_zero_copy_view(kinesalite_stream):
    s = kinesalite_stream(1)
    s.put([("a", b"hello"), ("b", b"\x00\xffbinary")])
    with kn.Consumer(s.conf()) as c:
        batch = None
        while batch is None:
            batch = c.poll(10)
        recs = list(batch)
        assert len(batch) == len(recs) == 2
        assert batch.shard_id == "shardId-000000000000"
        assert batch.stream == s.name
        r = recs[1]
        view = r.data
        assert isinstance(view, memoryview) and view.readonly
        assert bytes(view) == bytes(r) == b"\x00\xffbinary" and len(r) == 8
        assert memoryview(r).tobytes() == b"\x00\xffbinary"
        # two views of one record share its bytes: no copy
        assert r.data.obj is r and r.data.obj is view.obj
        assert r.partition_key == "b" and r.shard_id == batch.shard_id
        assert r.sub_sequence_number == 0 and not r.aggregated
        assert r.explicit_hash_key is None
        assert int(r.sequence_number) > int(recs[0].sequence_number)
        when = r.approximate_arrival
        assert isinstance(when, datetime.datetime)
        assert when.tzinfo == datetime.timezone.utc
        assert abs(when - datetime.datetime.now(datetime.timezone.utc)) < \
            datetime.timedelta(hours=1)
        # the view keeps the batch alive after everything else is gone
        ref = weakref.ref(c)
        del batch, recs, r
        gc.collect()
        assert bytes(view) == b"\x00\xffbinary"
        assert ref() is c
        c.checkpoint(view.obj)


def test_unknown_and_bad_properties_are_named():
    with pytest.raises(kn.KinesisError) as e:
        kn.Consumer({"stream": "x", "no.such.property": "1"})
    assert "no.such.property" in str(e.value)
    assert e.value.code == kn.ERR__CONF and not e.value.retriable
    assert not e.value.fatal
    with pytest.raises(kn.KinesisError) as e:
        kn.Producer({"stream": "x", "linger.ms": "soon"})
    assert "linger.ms" in str(e.value) and e.value.code == kn.ERR__CONF
    with pytest.raises(kn.KinesisError) as e:
        kn.Consumer({"stream": "x", "lease.duration.ms": -5})
    assert "lease.duration.ms" in str(e.value)
    with pytest.raises(TypeError) as e:
        kn.Consumer({"stream": "x", "poll.idle.ms": [1]})
    assert "poll.idle.ms" in str(e.value)
    with pytest.raises(kn.KinesisError) as e:
        kn.Consumer({})  # no stream
    assert "stream" in str(e.value)
    with pytest.raises(TypeError):
        kn.Consumer({"stream": "x"}, on_lease_lost=42)
    with pytest.raises(TypeError):
        kn.Consumer({"stream": "x"}, on_no_such_event=print)


def test_closed_handles_refuse_work(kinesalite_stream):
    s = kinesalite_stream(1)
    c = kn.Consumer(s.conf())
    c.close()
    c.close()  # twice is fine
    assert c.closed and not c.health()["alive"]
    with pytest.raises(kn.KinesisError) as e:
        c.poll(0)
    assert e.value.code == kn.ERR__STATE
    assert list(c) == []
    p = kn.Producer(s.conf())
    p.close()
    with pytest.raises(kn.KinesisError) as e:
        p.produce(b"x", partition_key="k")
    assert e.value.code == kn.ERR__STATE


def test_bad_records_are_refused(kinesalite_stream):
    s = kinesalite_stream(1)
    with kn.Producer(s.conf()) as p:
        with pytest.raises(kn.KinesisError) as e:
            p.produce(b"x", partition_key="")
        assert e.value.code == kn.ERR__INVALID_ARG
        with pytest.raises(kn.KinesisError):
            p.produce(b"x" * (10 << 20), partition_key="k")   # no stream takes it
        with pytest.raises(TypeError):
            p.produce(b"x")
        with pytest.raises(TypeError):
            p.produce(12, partition_key="k")
        assert len(p) == 0
        # Over this stream's MaxRecordSizeInKiB (1024): refused at once when
        # the producer has described the stream already, else in the report.
        errs = []
        try:
            p.produce(b"x" * (1 << 20), partition_key="k",
                      on_delivery=lambda err, rep: errs.append(err))
            assert p.flush(30) == 0
            assert len(errs) == 1 and errs[0].code == kn.ERR__INVALID_ARG, errs
            assert "MaxRecordSizeInKiB" in str(errs[0])
        except kn.KinesisError as e:
            assert e.code == kn.ERR__INVALID_ARG


def test_stream_missing_is_fatal(kinesalite_stream):
    s = kinesalite_stream(1)
    conf = s.conf()
    conf["stream"] = "no-such-stream-here"
    with kn.Consumer(conf) as c:
        with pytest.raises(kn.KinesisError) as e:
            for _ in range(200):
                c.poll(0.5)
        assert e.value.fatal
        assert e.value.code == kn.ERR_RESOURCE_NOT_FOUND
