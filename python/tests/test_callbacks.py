"""Callbacks that raise: the exception comes out of the call that ran
them, and no record or report is lost."""

import os
import tempfile

import pytest

import libkinesis as kn
from conftest import drain


class Boom(Exception):
    pass


def test_delivery_callback_raising_loses_no_report(kinesalite_stream):
    s = kinesalite_stream(2)
    seen = []

    def on_delivery(err, rep):
        seen.append(rep.partition_key)
        if rep.partition_key == "k7":
            raise Boom("from on_delivery")

    p = kn.Producer(s.conf(linger_ms=5))
    for i in range(50):
        p.produce(b"%d" % i, partition_key="k%d" % i, on_delivery=on_delivery)
    with pytest.raises(Boom):
        p.flush(30)
    assert p.flush(30) == 0
    p.close()
    assert sorted(seen) == sorted("k%d" % i for i in range(50))


def test_lease_callback_raising_keeps_the_batch(kinesalite_stream, tmp_path,
                                                monkeypatch):
    # Two callbacks may run in one poll: the first exception is raised, a
    # later one of the same poll goes to sys.unraisablehook.
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: unraisable.append(u))
    s = kinesalite_stream(2)
    s.put([("k%d" % i, b"%d" % i) for i in range(300)])
    acquired = []

    def on_lease_acquired(shard_id, token, state):
        acquired.append((shard_id, token, state))
        raise Boom(shard_id)

    conf = s.conf(lease_store="sqlite:%s" % (tmp_path / "leases.db"),
                  lease_take_interval_ms=200, worker_id="w1")
    raised = 0
    got = []
    with kn.Consumer(conf, on_lease_acquired=on_lease_acquired) as c:
        while len(got) < 300:
            try:
                got += drain(c, 300 - len(got), timeout=30)
            except Boom:
                raised += 1
                assert raised <= 2
        assert c.fencing_token("shardId-000000000000") is not None
    assert raised + len(unraisable) == 2 and raised >= 1
    assert all(isinstance(u.exc_value, Boom) for u in unraisable)
    assert sorted(a[0] for a in acquired) == ["shardId-000000000000",
                                              "shardId-000000000001"]
    assert all(state is None and token >= 1 for _, token, state in acquired)
    assert sorted(int(d) for _, d, *_ in got) == list(range(300))


def test_shard_ended_runs_inside_poll(kinesalite_stream, tmp_path):
    s = kinesalite_stream(1)
    s.put([("k%d" % i, b"a%d" % i) for i in range(20)])
    parent = s.split_first()
    s.put([("k%d" % i, b"b%d" % i) for i in range(20)])
    ended, lost = [], []
    conf = s.conf(lease_store="sqlite:%s" % (tmp_path / "l.db"),
                  lease_take_interval_ms=200, worker_id="w1")
    conf["on_shard_ended"] = lambda sid: ended.append(sid)
    c = kn.Consumer(conf, on_lease_lost=lambda sid, why: lost.append((sid, why)))
    got = drain(c, 40)
    c.close()
    assert ended == [parent]
    assert lost == []  # alone: nobody took a lease
    assert sorted(d for _, d, *_ in got) == sorted(
        [b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(20)])
    # parents first, per key
    for i in range(20):
        mine = [d for k, d, *_ in got if k == "k%d" % i]
        assert mine == [b"a%d" % i, b"b%d" % i]
