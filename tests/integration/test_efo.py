#!/usr/bin/env python3
"""Enhanced fan-out against kinesis-local, through tests/tools/efo_tool
(EFO_TOOL, or found under KN_BUILD_DIR), over HTTP/2 (the TLS port,
self-signed, ALPN) and HTTP/1.1 (the plain port, which also serves
subscriptions and lets the fault proxy cut them):

- a split and a merge while reading: every record once, per-key order,
  parents before children (kinesis-local never ends a subscription on a
  closed shard: the reader notices from ListShards and finishes by polling);
- a second subscriber to the same shard gets ResourceInUse and recovers;
- subscriptions cut early by the proxy resume from their continuation with
  no loss and no duplicate;
- a full buffer pauses the subscription, and reading goes on when the
  application catches up;
- lazy registration by ten workers at once registers one consumer; eager
  and none as documented; deregistration on close;
- a consumer deleted while reading: registered again under lazy (reading
  goes on; a restart resumes from the checkpoint), fatal under eager;
- three workers sharing the shards through leases, one killed: nothing lost;
- `-e` ends once every shard is caught up.

Prints "N passed, M failed"; exits 1 if any case failed."""

import json
import os
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from efo_common import (Consumer, FaultProxy, Producer, Stream, Suite,  # noqa: E402
                        check_complete, check_key_order, check_once,
                        check_parents_first, lab)

FAST = ["shard.sync.interval.ms=2000", "efo.watchdog.ms=15000"]


class Cases:
    def __init__(self, server):
        self.server = server
        self.c = lab.boto3_client("kinesis", server)
        self.n = 0

    def stream(self, shards):
        self.n += 1
        return Stream(self.c, "efo-%d" % self.n, shards)

    def url(self, tls):
        return self.server.tls_endpoint if tls else self.server.endpoint

    # ---- reading ----

    def reshard_while_reading(self, transport):
        tls = transport == "h2"
        s = self.stream(2)
        props = ["efo.consumer.name=reshard"] + FAST + (["log.level=7"] if tls else [])
        con = Consumer(self.url(tls), s.name, props, ["-c", "900", "-T", "120000"], tls=tls)
        try:
            s.put(300)
            con.wait_count(300, 60)
            s.split_first()
            s.put(300)
            con.wait_count(600, 60)
            s.merge_first_two()
            s.put(300)
            assert con.finish() == 0, con.stderr_tail()
            recs = con.records()
            check_once([r["data"] for r in recs], s.sent)
            check_key_order(recs)
            check_parents_first(recs, s.shards())
            if tls:  # everything over HTTP/2 (ALPN), subscriptions included
                http = [l for l in con.err_lines if "[http] POST" in l]
                assert http and all(" HTTP/2 " in l for l in http), http[:3]
            efo = con.shard_efo()
            assert all(e and e["subscriptions"] >= 1 for e in efo.values()
                       if e is not None), efo
        finally:
            con.cleanup()

    def second_subscriber(self):
        s = self.stream(1)
        s.put(100)
        props = ["efo.consumer.name=dup"] + FAST
        a = Consumer(self.url(True), s.name, props, tls=True, name="first")
        b = None
        try:
            a.wait_count(100, 60)
            b = Consumer(self.url(True), s.name, props, ["-c", "200", "-T", "120000"],
                         tls=True, name="second")
            b.wait_for(lambda: any(e and e["in_use"] >= 1 for e in b.shard_efo().values()),
                       60, "ResourceInUse")
            assert len(b.lines) == 0, "the second subscriber read while the first held the shard"
            assert a.stop() == 0, a.stderr_tail()
            s.put(100)
            assert b.finish() == 0, b.stderr_tail()
            check_once(b.data(), s.sent)
            check_key_order(b.records())
        finally:
            a.cleanup()
            if b:
                b.cleanup()

    def cut_and_resume(self):
        s = self.stream(2)
        with FaultProxy(self.server) as proxy:
            proxy.add_rule("cut_stream_after", "SubscribeToShard", messages=3)
            prod = Producer(s, 20, 0.4)
            con = Consumer(proxy.endpoint, s.name, ["efo.consumer.name=cut"] + FAST,
                           ["-T", "120000"])
            try:
                prod.start()
                time.sleep(15)
                prod.stop()
                con.wait_count(len(s.sent), 60)
                time.sleep(2)  # anything beyond would be a duplicate
                assert con.stop() == 0, con.stderr_tail()
                recs = con.records()
                check_once([r["data"] for r in recs], s.sent)
                check_key_order(recs)
                subs = [e["subscriptions"] for e in con.shard_efo().values() if e]
                assert subs and min(subs) >= 3, subs
                cuts = [r for r in proxy.requests("SubscribeToShard") if r.fault]
                assert len(cuts) >= 6, len(cuts)
            finally:
                con.cleanup()

    def backpressure(self, transport):
        tls = transport == "h2"
        s = self.stream(1)
        # Events keep coming (one a second on kinesis-local) while the
        # application takes two seconds a batch: the buffer fills and the
        # subscription must pause rather than queue without bound.
        con = Consumer(self.url(tls), s.name,
                       ["efo.consumer.name=slow", "buffer.max.records=100"] + FAST,
                       ["-w", "2000", "-T", "180000"], tls=tls)
        prod = Producer(s, 40, 0.5)
        try:
            seen = {"paused": False, "max": 0}

            def watch():
                while con.p.poll() is None:
                    st = con.stats()
                    for sh in (st or {"shards": []})["shards"]:
                        seen["paused"] |= sh["paused"]
                        seen["max"] = max(seen["max"], sh["buffered_records"])
                    time.sleep(0.1)
            w = threading.Thread(target=watch, daemon=True)
            w.start()
            prod.start()
            time.sleep(8)
            prod.stop()
            con.wait_count(len(s.sent), 120)
            assert con.stop() == 0, con.stderr_tail()
            w.join(5)
            check_once(con.data(), s.sent)
            check_key_order(con.records())
            assert seen["paused"], "the subscription never paused"
            # At most one event (about a second of records) past the limit.
            assert seen["max"] <= 100 + 200, seen
        finally:
            prod.halt.set()
            con.cleanup()

    def caught_up_exit(self):
        s = self.stream(3)
        s.put(200)
        con = Consumer(self.url(True), s.name, ["efo.consumer.name=tail"] + FAST,
                       ["-e", "-T", "60000"], tls=True)
        try:
            assert con.finish() == 0, con.stderr_tail()
            check_once(con.data(), s.sent)
        finally:
            con.cleanup()

    # ---- registration ----

    def lazy_ten_workers(self):
        # Ten workers start at once, each on its own shard (so that they do
        # not take turns on one subscription), all with the same consumer.
        s = self.stream(10)
        s.put(40)
        ids = [sh["ShardId"] for sh in s.shards()]
        workers = [Consumer(self.url(True), s.name,
                            ["efo.consumer.name=ten", "shards=" + ids[i]] + FAST,
                            ["-e", "-T", "90000"], tls=True, name="w%d" % i)
                   for i in range(10)]
        try:
            for w in workers:
                assert w.finish() == 0, w.stderr_tail()
            check_once([d for w in workers for d in w.data()], s.sent)
            got = s.consumers("ten")
            assert len(got) == 1 and got[0]["ConsumerStatus"] == "ACTIVE", got
        finally:
            for w in workers:
                w.cleanup()

    def eager(self):
        s = self.stream(1)
        s.put(5)
        props = ["efo.consumer.name=eager", "efo.registration=eager", "log.level=6"] + FAST
        for round_ in range(2):  # registers, then finds it registered
            con = Consumer(self.url(False), s.name, props, ["-c", "5", "-T", "60000"])
            try:
                assert con.finish() == 0, con.stderr_tail()
                check_once(con.data(), s.sent)
                said = any("registered stream consumer" in l for l in con.err_lines)
                assert said == (round_ == 0), con.stderr_tail()
            finally:
                con.cleanup()
        assert len(s.consumers("eager")) == 1
        # Fails fast where lazy would retry: no such stream (exit 1 on the
        # fatal error, where retrying until -T would exit 3).
        con = Consumer(self.url(False), "efo-no-such-stream", props, ["-T", "60000"])
        try:
            assert con.finish() == 1, con.stderr_tail()
            assert any(l.startswith("FATAL") and "eager" in l for l in con.err_lines), \
                con.stderr_tail()
        finally:
            con.cleanup()

    def none_and_deregister(self):
        s = self.stream(1)
        s.put(5)
        arn = self.c.register_stream_consumer(StreamARN=s.arn,
                                              ConsumerName="given")["Consumer"]["ConsumerARN"]
        deadline = time.time() + 60
        while True:
            st = self.c.describe_stream_consumer(
                ConsumerARN=arn)["ConsumerDescription"]["ConsumerStatus"]
            if st == "ACTIVE" or time.time() > deadline:
                break
            time.sleep(0.1)
        assert st == "ACTIVE", st
        # none: the ARN as given, no registration calls, never deregistered.
        con = Consumer(self.url(True), s.name,
                       ["efo.consumer.arn=" + arn, "efo.deregister.on.close=true"] + FAST,
                       ["-c", "5", "-T", "60000"], tls=True)
        try:
            assert con.finish() == 0, con.stderr_tail()
            check_once(con.data(), s.sent)
        finally:
            con.cleanup()
        assert len(s.consumers("given")) == 1
        # An ARN that does not exist: checked, then fatal.
        bogus = arn.rsplit(":", 1)[0] + ":1"
        con = Consumer(self.url(True), s.name, ["efo.consumer.arn=" + bogus] + FAST,
                       ["-T", "60000"], tls=True)
        try:
            assert con.finish() == 1, con.stderr_tail()
            assert any(l.startswith("FATAL") and "no longer exists" in l
                       for l in con.err_lines), con.stderr_tail()
        finally:
            con.cleanup()
        # lazy with deregistration on a clean close.
        con = Consumer(self.url(True), s.name,
                       ["efo.consumer.name=temp", "efo.deregister.on.close=true"] + FAST,
                       ["-c", "5", "-T", "60000"], tls=True)
        try:
            assert con.finish() == 0, con.stderr_tail()
        finally:
            con.cleanup()
        left = [c for c in s.consumers("temp") if c["ConsumerStatus"] != "DELETING"]
        assert not left, left
        # Bad combinations are refused up front.
        for props in (["efo.registration=none", "efo.consumer.name=x"],
                      ["efo.consumer.name=x", "efo.consumer.arn=" + arn],
                      ["efo.consumer.arn=not-an-arn"]):
            con = Consumer(self.url(True), s.name, props, tls=True)
            try:
                assert con.finish() == 1 and any(
                    l.startswith("FATAL") for l in con.err_lines), props
            finally:
                con.cleanup()

    def deleted_consumer(self, strategy):
        s = self.stream(2)
        db = tempfile.mktemp(prefix="efo-leases-", suffix=".db")
        props = ["efo.consumer.name=gone-" + strategy, "efo.registration=" + strategy,
                 "lease.store=sqlite:" + db, "app.name=gone", "worker.id=w1",
                 "checkpoint.interval.ms=500", "lease.take.interval.ms=500"] + FAST
        with FaultProxy(self.server) as proxy:
            # kinesis-local keeps a deleted consumer's open subscriptions
            # going (AWS ends them): cutting them makes the reader notice.
            proxy.add_rule("cut_stream_after", "SubscribeToShard", messages=4)
            con = Consumer(proxy.endpoint, s.name, props, ["-T", "120000"])
            try:
                s.put(100)
                con.wait_count(100, 60)
                before = s.consumers("gone-" + strategy)[0]["ConsumerARN"]
                self.c.deregister_stream_consumer(ConsumerARN=before)
                if strategy == "eager":
                    assert con.finish(60) == 1, con.stderr_tail()
                    assert any(l.startswith("FATAL") and "no longer exists" in l
                               for l in con.err_lines), con.stderr_tail()
                    return

                def registered_again():
                    return [c for c in s.consumers("gone-lazy")
                            if c["ConsumerStatus"] == "ACTIVE" and c["ConsumerARN"] != before]
                con.wait_for(registered_again, 60, "a new registration")
                s.put(100)
                con.wait_count(200, 90)
                assert con.stop() == 0, con.stderr_tail()
                check_once(con.data(), s.sent)
                check_key_order(con.records())
                after = [c for c in s.consumers("gone-lazy") if c["ConsumerStatus"] == "ACTIVE"]
                assert len(after) == 1 and after[0]["ConsumerARN"] != before, after
                # Deleted again while stopped: the restart registers it and
                # resumes from the checkpoints (nothing read twice).
                self.c.deregister_stream_consumer(ConsumerARN=after[0]["ConsumerARN"])
                s.put(50)
                proxy.clear_rules()
                again = Consumer(proxy.endpoint, s.name, props, ["-c", "50", "-T", "90000"],
                                 name="restart")
                try:
                    assert again.finish() == 0, again.stderr_tail()
                    check_once(again.data(), s.sent[200:])
                finally:
                    again.cleanup()
            finally:
                con.cleanup()
                for f in (db, db + "-wal", db + "-shm"):
                    try:
                        os.unlink(f)
                    except OSError:
                        pass

    # ---- workers ----

    def group_kill_one(self):
        s = self.stream(4)
        db = tempfile.mktemp(prefix="efo-group-", suffix=".db")
        props = ["efo.consumer.name=group", "lease.store=sqlite:" + db, "app.name=group",
                 "lease.duration.ms=3000", "lease.take.interval.ms=500",
                 "checkpoint.interval.ms=500"] + FAST
        workers = [Consumer(self.url(True), s.name, props + ["worker.id=w%d" % i],
                            ["-C", "-T", "180000"], tls=True, name="w%d" % i)
                   for i in range(3)]
        prod = Producer(s, 25, 0.5)
        try:
            prod.start()
            time.sleep(8)
            victim = workers[1]
            # A loaded machine may take longer to register, take leases and
            # subscribe: kill the victim once it reads a shard.
            deadline = time.time() + 40
            while True:
                held = [sh for sh in (victim.stats() or {"shards": []})["shards"]
                        if sh["state"] == "reading"]
                if held or time.time() > deadline:
                    break
                time.sleep(0.5)
            victim.signal(signal.SIGKILL)
            victim.p.wait()
            time.sleep(10)
            prod.stop()
            live = [workers[0], workers[2]]
            end = time.time() + 90
            while time.time() < end:
                got = set(d for w in workers for d in w.data())
                if set(s.sent) <= got:
                    break
                time.sleep(0.5)
            # Before they stop: what each live worker's readers were doing.
            states = {w.name: w.shard_efo() for w in live}
            for w in live:
                assert w.stop() == 0, w.stderr_tail()
            got = [d for w in workers for d in w.data()]
            try:
                check_complete(got, s.sent)
            except AssertionError as e:
                raise AssertionError("%s\nreaders: %s\n%s" % (
                    e, json.dumps(states, indent=1),
                    "\n".join("%s:\n%s" % (w.name, w.stderr_tail(25)) for w in workers)))
            for w in workers:
                check_key_order(w.records())
            assert held, "the killed worker held no shard"
        finally:
            prod.halt.set()
            for w in workers:
                w.cleanup()
            for f in (db, db + "-wal", db + "-shm"):
                try:
                    os.unlink(f)
                except OSError:
                    pass


def main():
    suite = Suite()
    with lab.KinesisLocal() as server:
        t = Cases(server)
        suite.case(t.reshard_while_reading, "h2")
        suite.case(t.reshard_while_reading, "http1.1")
        suite.case(t.second_subscriber)
        suite.case(t.cut_and_resume)
        suite.case(t.backpressure, "h2")
        suite.case(t.backpressure, "http1.1")
        suite.case(t.caught_up_exit)
        suite.case(t.lazy_ten_workers)
        suite.case(t.eager)
        suite.case(t.none_and_deregister)
        suite.case(t.deleted_consumer, "lazy")
        suite.case(t.deleted_consumer, "eager")
        suite.case(t.group_kill_one)
    return suite.done()


if __name__ == "__main__":
    sys.exit(main())
