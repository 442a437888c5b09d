#!/usr/bin/env python3
"""`kncat multilang` end to end, with real record processors.

- Chaos (kinesalite with polling, kinesis-local with fan-out): a processor
  written with aws-kcl (npm; both of its styles: leaseLost/shardEnded and
  shutdown(reason)), two workers sharing a DynamoDB (dynalite) lease table,
  records produced throughout (plain and KPL-aggregated), a split and a
  merge, a child killed mid-batch, one worker SIGKILLed and replaced,
  SIGTERM at the end: every record reaches a processor, SHARD_END is
  written on the closed shards, every lease is released, exit 0.
- Protocol (both servers): a processor speaking the protocol by hand gets
  InvalidStateException during initialize, IllegalArgumentException for a
  checkpoint past the last record, below the last checkpoint or
  malformed; a checkpoint inside an aggregated record is stored with its
  sub-sequence number; a wrong responseFor, garbage on stdout, an exit
  mid-batch and silence past timeoutInSeconds each cost a new child for
  that shard only, and nothing is lost; the children's terminal escapes
  do not reach kncat's stderr.
- A processor that checkpoints without reading the answers is failed once
  they pile up; a checkpoint the lease table is slow to take holds up no
  other shard.
- A processor that keeps failing makes the exit code 1; a bad properties
  file exits 2 naming the key and line.

Environment: KNCAT, KN_SOURCE_DIR.  Prints "N passed, M failed".
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
KNCAT = os.environ.get("KNCAT", str(SOURCE_DIR / "build" / "kncat"))
HERE = Path(__file__).resolve().parent
LAB_DIR = SOURCE_DIR / "tests" / "lab"
sys.path.insert(0, str(LAB_DIR))
sys.path.insert(0, str(HERE))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from groupkit import LabServers, spread_keys, test_failed, unique, wait_for  # noqa: E402
import runkit  # noqa: E402

TMP = Path(tempfile.mkdtemp(prefix="kn-multilang-"))
SERVERS = LabServers(TMP)
TOP = (1 << 128) - 1
# Library settings for quick take-overs (global -X options).
XPROPS = {"lease.take.interval.ms": 1000, "lease.renew.interval.ms": 1000,
          "poll.idle.ms": 200}
TIMEOUT = 90


def setUpModule():
    SERVERS.start("dynalite")


def tearDownModule():
    SERVERS.stop()


def read_jsonl(pattern: str) -> list[dict]:
    out = []
    for f in sorted(glob.glob(pattern)):
        with open(f) as fh:
            for line in fh:
                if line.strip():
                    out.append(json.loads(line))
    return out


class Daemon:
    """One `kncat multilang` worker."""

    def __init__(self, env, props: dict, workdir: Path, name: str, xprops=None):
        self.name = name
        self.path = workdir / f"{name}.properties"
        self.path.write_text("# written by test_multilang.py\n" + "".join(
            f"{k} = {v}\n" for k, v in props.items()))
        self.err_path = workdir / f"{name}.stderr"
        args = [KNCAT]
        for k, v in {**XPROPS, **(xprops or {})}.items():
            args += ["-X", f"{k}={v}"]
        args += ["multilang", "--properties-file", str(self.path)]
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                     stderr=self.err)

    def stop(self, sig=signal.SIGTERM, timeout=60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        if not self.err.closed:
            self.err.flush()
        return self.err_path.read_text(errors="replace")


class Producer(threading.Thread):
    """put_records rounds (every key once per round), until stopped; every
    third round through `kncat produce --aggregate` (KPL format)."""

    def __init__(self, boto, env, stream: str, keys: list[str]):
        super().__init__(daemon=True)
        self.boto, self.env, self.stream, self.keys = boto, env, stream, keys
        self.sent: set[str] = set()
        self.stop_ev = threading.Event()
        self.round = 0
        self.error = None

    def put_round(self):
        self.round += 1
        r = self.round
        data = {f"{k}:{r}": k for k in self.keys}
        if r % 3 == 0:
            text = "".join(f"{k}\t{d}\n" for d, k in data.items())
            p = runkit.kncat("produce", self.stream, "-K", "\t", "--aggregate",
                             kncat=KNCAT, env=self.env, input=text.encode(),
                             text=False, timeout=60)
            if p.returncode != 0:
                raise RuntimeError(p.stderr.decode())
        else:
            recs = [{"Data": d.encode(), "PartitionKey": k} for d, k in data.items()]
            for _ in range(5):
                resp = self.boto.put_records(StreamName=self.stream, Records=recs)
                if not resp.get("FailedRecordCount"):
                    break
                recs = [rec for rec, res in zip(recs, resp["Records"])
                        if "ErrorCode" in res]
                time.sleep(0.5)
            else:
                raise RuntimeError("put_records kept failing")
        self.sent.update(data)

    def run(self):
        try:
            while not self.stop_ev.wait(0.3):
                self.put_round()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def finish(self):
        self.stop_ev.set()
        self.join(60)
        if self.error:
            raise self.error


class Base:
    server_name = ""
    retrieval = "POLLING"

    @classmethod
    def setUpClass(cls):
        SERVERS.attach(cls, cls.server_name)

    def setUp(self):
        self.daemons: list[Daemon] = []
        self.dir = TMP / type(self).__name__ / self._testMethodName
        self.dir.mkdir(parents=True, exist_ok=True)

    def tearDown(self):
        for d in self.daemons:
            if d.proc.poll() is None:
                d.proc.kill()
            d.proc.wait(10)
            d.err.close()
        if test_failed(self):
            for d in self.daemons:
                tail = "\n".join(d.stderr().splitlines()[-40:])
                print(f"--- {d.name} exit {d.proc.returncode} ({d.err_path}):\n"
                      f"{tail}", file=sys.stderr)
        else:
            for d in self.daemons:
                runkit.check_clean(d.stderr(), d.name)

    def env(self, **extra):
        env = lab.env_for(kinesis=self.server, dynamodb=self.dynalite)
        env["KN_LAB_DIR"] = str(LAB_DIR)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def create(self, shards: int) -> str:
        name = unique("ml", self.server_name)
        self.boto.create_stream(StreamName=name, ShardCount=shards)
        wait_for("stream active", lambda: self.boto.describe_stream_summary(
            StreamName=name)["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE", 30)
        return name

    def wait_active(self, stream):
        wait_for("stream active", lambda: self.boto.describe_stream_summary(
            StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE", 30)

    def shards(self, stream) -> dict[str, dict]:
        out, token = {}, None
        while True:
            kw = {"NextToken": token} if token else {"StreamName": stream}
            resp = self.boto.list_shards(**kw)
            for s in resp["Shards"]:
                out[s["ShardId"]] = s
            token = resp.get("NextToken")
            if not token:
                return out

    def leases(self, table) -> dict[str, dict]:
        items = self.ddb.scan(TableName=table, ConsistentRead=True)["Items"]
        return {i["leaseKey"]["S"]: i for i in items}

    def props(self, stream, app, exe, **extra):
        p = {"executableName": exe, "streamName": stream,
             "applicationName": app, "initialPositionInStream": "TRIM_HORIZON",
             "retrievalMode": self.retrieval, "failoverTimeMillis": 4000,
             "shardSyncIntervalMillis": 2000, "shutdownGraceMillis": 15000,
             "metricsLevel": "NONE"}
        if self.retrieval == "POLLING":
            p["idleTimeBetweenReadsInMillis"] = 200
        p.update(extra)
        return p

    def start(self, env, props, name, xprops=None) -> Daemon:
        d = Daemon(env, props, self.dir, name, xprops)
        self.daemons.append(d)
        return d

    # ------------------------------------------------------------------

    def test_chaos(self):
        stream = self.create(2)
        app = unique("mlapp", self.server_name)
        out = self.dir / "out"
        out.mkdir()
        node = f"node {HERE / 'ml_processor.js'}"
        keys = spread_keys(8, "k")
        env = self.env()
        prod = Producer(self.boto, env, stream, keys)
        prod.start()
        # Worker 1: the leaseLost/shardEnded style; worker 2: the
        # shutdown(reason) style; one child of either dies mid-batch.
        w1 = self.start(self.env(ML_OUT=out, ML_STYLE="v2", ML_EVERY=10,
                                 ML_DIE_AFTER=2), self.props(stream, app, node), "w1")
        w2 = self.start(self.env(ML_OUT=out, ML_STYLE="v1", ML_EVERY=10,
                                 ML_DIE_AFTER=2), self.props(stream, app, node), "w2")
        try:
            wait_for("records flowing", lambda: len(read_jsonl(f"{out}/rec-*")) > 50,
                     TIMEOUT)
            wait_for("a child killed mid-batch", lambda: any(
                e["ev"] == "dying" for e in read_jsonl(f"{out}/events-*")), TIMEOUT)
            shards = self.shards(stream)
            s0, s1 = sorted(shards)
            r0 = shards[s0]["HashKeyRange"]
            lo, hi = int(r0["StartingHashKey"]), int(r0["EndingHashKey"])
            self.boto.split_shard(StreamName=stream, ShardToSplit=s0,
                                  NewStartingHashKey=str((lo + hi) // 2 + 1))
            self.wait_active(stream)
            time.sleep(2)
            # Merge the upper child of the split with its neighbour.
            new = [s for s, d in self.shards(stream).items()
                   if d.get("ParentShardId") == s0]
            upper = max(new, key=lambda s: int(
                self.shards(stream)[s]["HashKeyRange"]["StartingHashKey"]))
            self.boto.merge_shards(StreamName=stream, ShardToMerge=upper,
                                   AdjacentShardToMerge=s1)
            self.wait_active(stream)
            time.sleep(2)
            w2.stop(signal.SIGKILL)
            w3 = self.start(self.env(ML_OUT=out, ML_STYLE="v1", ML_EVERY=10),
                            self.props(stream, app, node), "w3")
            time.sleep(3)
        finally:
            prod.finish()
        closed = [s for s, d in self.shards(stream).items()
                  if "EndingSequenceNumber" in d["SequenceNumberRange"]]
        self.assertEqual(len(closed), 3)

        def all_seen():
            got = {r["data"] for r in read_jsonl(f"{out}/rec-*")}
            return prod.sent <= got

        wait_for("every record processed", all_seen, TIMEOUT,
                 lambda: f"{len(prod.sent - {r['data'] for r in read_jsonl(f'{out}/rec-*')})} missing")

        # SHARD_END, or the lease already cleaned up once the children
        # started.
        def ended():
            ls = self.leases(app)
            return all(s not in ls or ls[s].get("checkpoint", {}).get("S") == "SHARD_END"
                       for s in closed)

        wait_for("SHARD_END on the closed shards", ended, TIMEOUT,
                 lambda: {s: l.get("checkpoint") for s, l in self.leases(app).items()})
        self.assertEqual(w1.stop(), 0, w1.stderr())
        self.assertEqual(w3.stop(), 0, w3.stderr())
        for sid, item in self.leases(app).items():
            self.assertNotIn("leaseOwner", item, f"{sid} still owned")
        events = read_jsonl(f"{out}/events-*")
        kinds = {e["ev"] for e in events}
        self.assertIn("dying", kinds)
        self.assertTrue({"shardEnded-checkpoint", "shutdown"} & kinds, kinds)
        self.assertIn("shutdownRequested-checkpoint", kinds)
        # A lease moved to the other worker answers ShutdownException.
        self.assertFalse([e for e in events if e["ev"] == "checkpoint-error"
                          and e["err"] != "ShutdownException"])
        recs = read_jsonl(f"{out}/rec-*")
        self.assertTrue(any(r["sub"] > 0 for r in recs), "no aggregated records")
        self.assertIn("record processor failed", w1.stderr() + w2.stderr())

    def test_protocol(self):
        stream = self.create(3)
        app = unique("mlproto", self.server_name)
        out = self.dir / "out"
        out.mkdir()
        keys = spread_keys(6, "p")
        env = self.env()
        prod = Producer(self.boto, env, stream, keys)
        for _ in range(3):
            prod.put_round()  # the third round is aggregated
        exe = f"{sys.executable} {HERE / 'ml_raw.py'}"
        d = self.start(self.env(ML_OUT=out, ML_MODES="wrong,exit,silent,garbage"),
                       self.props(stream, app, exe, timeoutInSeconds=3), "proto")
        try:
            def all_seen():
                return prod.sent <= {r["data"] for r in read_jsonl(f"{out}/rec-*")}
            wait_for("every record processed", all_seen, TIMEOUT)
            prod.put_round()
            prod.put_round()
            wait_for("every record processed", all_seen, TIMEOUT)
            logs = read_jsonl(f"{out}/log-*")
            wait_for("checkpoints", lambda: len(
                [1 for x in read_jsonl(f"{out}/log-*") if x["ev"] == "ckpt"]) >= 1, TIMEOUT)
        finally:
            prod.stop_ev.set()
        self.assertEqual(d.stop(), 0, d.stderr())
        logs = read_jsonl(f"{out}/log-*")
        probes = {}
        for x in logs:
            if x["ev"] == "probe":
                probes.setdefault(x["case"], []).append(x["reply"]["error"])
        self.assertEqual(set(probes["initialize"]), {"InvalidStateException"})
        for case in ("beyond", "malformed", "bad-sub", "before-checkpoint"):
            self.assertEqual(set(probes.get(case, [])), {"IllegalArgumentException"},
                             (case, probes))
        self.assertEqual(set(probes["at-last"]), {None})
        self.assertFalse([x for x in logs if x["ev"] == "ckpt" and x["reply"]["error"]])
        shut = [x for x in logs if x["ev"] == "shutdownRequested"]
        self.assertTrue(shut and all(x["reply"]["error"] is None for x in shut))
        err = d.stderr()
        self.assertIn('status for "initialize" while waiting for "processRecords"', err)
        self.assertIn("exited", err)
        self.assertIn("within timeoutInSeconds", err)
        self.assertIn("skipped a line from the record processor (not a JSON object)", err)
        # The children's lines reach stderr without terminal controls.
        for c in ("\x1b", "\x07", "\x9b", "\u202e"):
            self.assertNotIn(c, err)
        self.assertIn("\\x1b[31mred", err)
        self.assertIn("this is not JSON \\x1b[2J", err)
        # Aggregated records, and checkpoints inside them.
        recs = read_jsonl(f"{out}/rec-*")
        self.assertTrue(any(r["sub"] > 0 for r in recs))
        self.assertTrue([x for x in logs if x["ev"] in ("ckpt", "probe")
                         and (x["reply"]["subSequenceNumber"] or 0) > 0
                         and x["reply"]["error"] is None])
        ls = self.leases(app)
        self.assertEqual(len(ls), 3)
        for item in ls.values():
            self.assertNotIn("leaseOwner", item)
            self.assertRegex(item["checkpoint"]["S"], r"^\d+$")


def raw_call(endpoint: str, action: str, body: dict):
    """A Kinesis call boto3 cannot make (a record without a key, the record
    distribution strategy): the decoded answer, or None."""
    import urllib.request
    req = urllib.request.Request(endpoint + "/", data=json.dumps(body).encode(), headers={
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "Kinesis_20131202." + action,
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDLAB/20260101/us-east-1/"
                         "kinesis/aws4_request, SignedHeaders=host, Signature=00",
        "X-Amz-Date": "20260101T000000Z"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


class Kinesalite(Base, unittest.TestCase):
    server_name = "kinesalite"
    retrieval = "POLLING"

    def test_records_without_a_key(self):
        """A stream whose service places records (AUTO, as the lab's limit
        proxy emulates it): a record written without a key reaches the
        child with "partitionKey": null."""
        import base64
        out = self.dir / "out"
        out.mkdir()
        with FaultProxy(self.server, limits={"scale": 1000}) as proxy:
            stream = unique("mlauto", self.server_name)
            raw_call(proxy.endpoint, "CreateStream", {
                "StreamName": stream, "StreamModeDetails": {"StreamMode": "ON_DEMAND"}})
            wait_for("stream active", lambda: raw_call(
                proxy.endpoint, "DescribeStreamSummary", {"StreamName": stream})[
                    "StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE", 30)
            raw_call(proxy.endpoint, "UpdateStreamRecordDistributionStrategy", {
                "StreamARN": "arn:aws:kinesis:us-east-1:000000000000:stream/" + stream,
                "RecordDistributionStrategy": "AUTO"})
            sent = ["n%d" % i for i in range(8)] + ["keyed"]
            raw_call(proxy.endpoint, "PutRecords", {"StreamName": stream, "Records": [
                dict({"Data": base64.b64encode(d.encode()).decode()},
                     **({"PartitionKey": "k"} if d == "keyed" else {})) for d in sent]})
            env = self.env(ML_OUT=out)
            env["AWS_ENDPOINT_URL_KINESIS"] = proxy.endpoint
            exe = f"{sys.executable} {HERE / 'ml_raw.py'}"
            d = self.start(env, self.props(stream, unique("mlauto", "app"), exe), "auto")
            wait_for("every record processed", lambda: set(sent) <= {
                r["data"] for r in read_jsonl(f"{out}/rec-*")}, TIMEOUT)
            self.assertEqual(d.stop(), 0, d.stderr())
        keys = {r["data"]: r["key"] for r in read_jsonl(f"{out}/rec-*")}
        self.assertEqual(keys, dict({"n%d" % i: None for i in range(8)}, keyed="k"))

    def test_failing_processor_and_bad_file(self):
        stream = self.create(1)
        app = unique("mlfail", self.server_name)
        d = self.start(self.env(), self.props(stream, app, "false"), "failing")
        wait_for("three failures", lambda: d.stderr().count("record processor failed") >= 3,
                 TIMEOUT)
        self.assertEqual(d.stop(), 1, d.stderr())
        self.assertIn("kept failing", d.stderr())
        # A processor that does not exit after its last message is killed
        # once the grace period is over; the stop is still clean.
        out = self.dir / "out"
        out.mkdir()
        exe = f"{sys.executable} {HERE / 'ml_raw.py'}"
        d = self.start(self.env(ML_OUT=out, ML_MODES="linger", ML_NO_PROBE=1),
                       self.props(stream, app + "-l", exe, shutdownGraceMillis=2000),
                       "linger")
        wait_for("the processor", lambda: read_jsonl(f"{out}/log-*"), TIMEOUT)
        self.assertEqual(d.stop(), 0, d.stderr())
        log = read_jsonl(f"{out}/log-*")
        self.assertIn("lingering", [x["ev"] for x in log])
        self.assertIn("still running after shutdownGraceMillis; killed", d.stderr())
        with self.assertRaises(ProcessLookupError):
            os.kill(log[0]["pid"], 0)
        bad = self.dir / "bad.properties"
        bad.write_text("executableName = x\napplicationName = a\nstreamName = s\n"
                       "failoverTimeMillis = soon\n")
        p = runkit.kncat("multilang", str(bad), kncat=KNCAT, env=self.env(),
                         text=False, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"line 4: failoverTimeMillis", p.stderr)


    def test_unread_answers(self):
        """A processor that checkpoints without reading its answers is
        failed once they pile up, and replaced; the daemon's memory does
        not grow with them."""
        stream = self.create(1)
        app = unique("mlflood", self.server_name)
        out = self.dir / "out"
        out.mkdir()
        prod = Producer(self.boto, self.env(), stream, spread_keys(2, "f"))
        prod.put_round()
        exe = f"{sys.executable} {HERE / 'ml_raw.py'}"
        d = self.start(self.env(ML_OUT=out, ML_MODES="flood", ML_NO_PROBE=1),
                       self.props(stream, app, exe), "flood")
        wait_for("the flooding processor failed",
                 lambda: "does not read its standard input" in d.stderr(), TIMEOUT)
        # Its first checkpoint was stored: its replacement gets what follows.
        done = set(prod.sent)
        prod.put_round()
        wait_for("the next records processed by its replacement",
                 lambda: prod.sent - done <= {
                     r["data"] for r in read_jsonl(f"{out}/rec-*")}, TIMEOUT)
        self.assertEqual(d.stop(), 0, d.stderr())
        self.assertIn("flooding", [x["ev"] for x in read_jsonl(f"{out}/log-*")])

    def test_slow_table_holds_up_no_other_shard(self):
        """A checkpoint the lease table is slow to take holds up its own
        child only: the other shard's records are delivered meanwhile (the
        table here: a SQLite file another connection holds locked)."""
        stream = self.create(2)
        app = unique("mlslow", self.server_name)
        out = self.dir / "out"
        out.mkdir()
        db = self.dir / "leases.db"
        exe = f"{sys.executable} {HERE / 'ml_raw.py'}"
        d = self.start(self.env(ML_OUT=out, ML_MODES="good,nockpt", ML_NO_PROBE=1),
                       self.props(stream, app, exe, failoverTimeMillis=60000), "slow",
                       xprops={"lease.store": f"sqlite:{db}"})

        def inits():
            got = {x["mode"]: x["shard"] for x in read_jsonl(f"{out}/log-*")
                   if x["ev"] == "initialize"}
            return got if len(got) == 2 else None
        shard_of = wait_for("both processors", inits, TIMEOUT)
        keys = dict(zip(sorted(self.shards(stream)), spread_keys(2, "t")))
        import sqlite3
        lock = sqlite3.connect(str(db), timeout=30, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        try:
            self.boto.put_record(StreamName=stream, Data=b"to-good",
                                 PartitionKey=keys[shard_of["good"]])
            wait_for("the checkpoint asked for", lambda: [
                x for x in read_jsonl(f"{out}/log-*") if x["ev"] == "ckpt-ask"], TIMEOUT)
            self.boto.put_record(StreamName=stream, Data=b"to-other",
                                 PartitionKey=keys[shard_of["nockpt"]])
            wait_for("the other shard's record", lambda: "to-other" in {
                r["data"] for r in read_jsonl(f"{out}/rec-*")}, TIMEOUT)
            # ... while the first checkpoint still waits for the table
            self.assertFalse([x for x in read_jsonl(f"{out}/log-*") if x["ev"] == "ckpt"])
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        wait_for("the checkpoint answered", lambda: [
            x for x in read_jsonl(f"{out}/log-*") if x["ev"] == "ckpt"], TIMEOUT)
        self.assertEqual(d.stop(), 0, d.stderr())

    def test_replaced_child_checkpoint_answered(self):
        """A child that goes while its checkpoint is being written is
        replaced; what the new child asks for meanwhile is answered once
        that write is done."""
        stream = self.create(1)
        app = unique("mlrepl", self.server_name)
        out = self.dir / "out"
        out.mkdir()
        db = self.dir / "leases.db"
        exe = f"{sys.executable} {HERE / 'ml_raw.py'}"
        d = self.start(self.env(ML_OUT=out, ML_MODES="ckptexit", ML_NO_PROBE=1),
                       self.props(stream, app, exe, failoverTimeMillis=60000), "repl",
                       xprops={"lease.store": f"sqlite:{db}"})
        wait_for("the processor", lambda: [x for x in read_jsonl(f"{out}/log-*")
                                           if x["ev"] == "initialize"], TIMEOUT)
        import sqlite3
        lock = sqlite3.connect(str(db), timeout=30, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        try:
            self.boto.put_record(StreamName=stream, Data=b"r1", PartitionKey="k")
            # the first asks and goes; the second (same records) asks too
            wait_for("two processors asking", lambda: len({
                x["pid"] for x in read_jsonl(f"{out}/log-*") if x["ev"] == "ckpt-ask"}) == 2,
                TIMEOUT)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        wait_for("the second one answered", lambda: [
            x for x in read_jsonl(f"{out}/log-*")
            if x["ev"] == "ckpt" and x["mode"] == "good"], TIMEOUT)
        self.assertEqual(d.stop(), 0, d.stderr())

    def test_store_errors_and_lost_lease(self):
        """ThrottlingException and KinesisClientLibDependencyException from
        a failing lease table; ShutdownException once the lease is gone,
        InvalidStateException during leaseLost."""
        stream = self.create(1)
        app = unique("mlstore", self.server_name)
        out = self.dir / "out"
        out.mkdir()
        prod = Producer(self.boto, self.env(), stream, spread_keys(4, "q"))
        exe = f"{sys.executable} {HERE / 'ml_raw.py'}"
        with FaultProxy(self.dynalite) as proxy:
            env = lab.env_for(kinesis=self.server, dynamodb=proxy.endpoint)
            env.update(KN_LAB_DIR=str(LAB_DIR), ML_OUT=str(out), ML_MODES="slow",
                       ML_NO_PROBE="1", ML_SLOW="7")
            d = self.start(env, self.props(stream, app, exe), "store",
                           {"retry.max.attempts": 1})
            prod.put_round()
            # The first child sleeps in its first batch while the lease is
            # taken away under it.
            wait_for("the slow child", lambda: (out / "slow.flag").exists(), TIMEOUT)
            item = self.leases(app)[(out / "slow.flag").read_text()]
            self.ddb.update_item(
                TableName=app, Key={"leaseKey": item["leaseKey"]},
                UpdateExpression="SET leaseOwner = :o, leaseCounter = :c",
                ExpressionAttributeValues={
                    ":o": {"S": "another-worker"},
                    ":c": {"N": str(int(item["leaseCounter"]["N"]) + 100)}})
            (out / "stolen.flag").write_text("1")

            def probe(case):
                return [x["reply"]["error"] for x in read_jsonl(f"{out}/log-*")
                        if x.get("case") == case]
            wait_for("the checkpoint after the loss", lambda: probe("after-loss"), TIMEOUT)
            self.assertEqual(probe("after-loss"), ["ShutdownException"])
            lost = wait_for("leaseLost", lambda: [
                x for x in read_jsonl(f"{out}/log-*") if x["ev"] == "leaseLost"], TIMEOUT)
            self.assertEqual(lost[0]["reply"]["error"], "InvalidStateException")
            # The stolen lease expires (nobody renews it) and comes back.
            def ckpts():
                return [x["reply"]["error"] for x in read_jsonl(f"{out}/log-*")
                        if x["ev"] == "ckpt"]
            prod.put_round()
            wait_for("a checkpoint of the new child", lambda: None in ckpts(), TIMEOUT)
            for error, rule in (("ThrottlingException",
                                 dict(error="ProvisionedThroughputExceededException")),
                                ("KinesisClientLibDependencyException",
                                 dict(status=500, error="InternalServerError"))):
                r = proxy.add_rule("status", "UpdateItem", count=1000, **rule)
                prod.put_round()
                wait_for(error, lambda: error in ckpts(), TIMEOUT)
                proxy.remove_rule(r)
            n = len(ckpts())
            prod.put_round()
            wait_for("checkpoints again", lambda: None in ckpts()[n:], TIMEOUT)
            wait_for("every record", lambda: prod.sent <= {
                r["data"] for r in read_jsonl(f"{out}/rec-*")}, TIMEOUT)
            self.assertEqual(d.stop(), 0, d.stderr())


class KinesisLocal(Base, unittest.TestCase):
    server_name = "kinesis-local"
    retrieval = "FANOUT"


def main():
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
