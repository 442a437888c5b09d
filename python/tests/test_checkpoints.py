"""Checkpoints with a lease table (SQLite): each variant moves the
checkpoint a restarted worker continues from; a prepared checkpoint's
state reaches the next owner."""

import libkinesis as kn
from conftest import drain


def test_checkpoint_variants(kinesalite_stream, tmp_path):
    s = kinesalite_stream(1)
    s.put([("k", b"%d" % i) for i in range(30)])
    shard = "shardId-000000000000"
    conf = s.conf(lease_store="sqlite:%s" % (tmp_path / "ck.db"),
                  checkpoint_auto=False, checkpoint_interval_ms=100,
                  lease_take_interval_ms=200,
                  worker_id="w1")
    records = []
    with kn.Consumer(conf) as c:
        while len(records) < 30:
            b = c.poll(1)
            if b is not None:
                records += list(b)
        by_data = {bytes(r): r for r in records}
        c.checkpoint(by_data[b"4"])
        assert c.lease_checkpoint(shard) == (by_data[b"4"].sequence_number, 0)
        c.checkpoint_sequence(shard, by_data[b"9"].sequence_number)
        assert c.lease_checkpoint(shard) == (by_data[b"9"].sequence_number, 0)
        c.checkpoint_async(by_data[b"14"])
        for _ in range(50):  # it goes out within checkpoint.interval.ms
            c.poll(0.1)
            if c.lease_checkpoint(shard)[0] == by_data[b"14"].sequence_number:
                break
        assert c.lease_checkpoint(shard) == (by_data[b"14"].sequence_number, 0)
        c.prepare_checkpoint(by_data[b"20"], b"app state")
        assert c.fencing_token(shard) >= 1
        assert c.fencing_token("shardId-000000000099") is None
        assert c.lease_checkpoint("shardId-000000000099") is None
    # The next owner continues after 14 and gets the prepared state.
    pending = []
    conf["worker.id"] = "w2"
    with kn.Consumer(conf, on_lease_acquired=lambda sid, tok, st:
                     pending.append(st)) as c:
        got = drain(c, 15, timeout=30)
        assert c.lease_checkpoint(shard)[0] == by_data[b"14"].sequence_number
    assert pending == [b"app state"]
    assert [d for _, d, *_ in got] == [b"%d" % i for i in range(15, 30)]


def test_checkpoint_takes_records_and_batches_only(kinesalite_stream):
    s = kinesalite_stream(1)
    with kn.Consumer(s.conf()) as c:
        for bad in (None, "x", b"x"):
            try:
                c.checkpoint(bad)
            except TypeError:
                continue
            raise AssertionError("checkpoint(%r) was accepted" % (bad,))
