#!/usr/bin/env python3
"""Every kn_client_t operation against both kinesalite and kinesis-local,
through tests/tools/client_tool (CLIENT_TOOL, or found under KN_BUILD_DIR).

Streams, shards (split with the default midpoint, merge, hash ranges and
parents), every iterator type, binary payloads with all 256 byte values,
a 1 MiB record, PutRecords, routing by partition key and explicit hash
key, reading across a reshard (ChildShards from kinesis-local, none from
kinesalite), consumers and UpdateShardCount where the server has them and
KN_ERR__UNSUPPORTED where it does not, and error mapping.  Exits 0 when
every case passes and prints "N passed, M failed"."""

import hashlib
import json
import os
import sys
import tempfile
import time
import traceback

SRC = os.environ.get("KN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lab"))
import lab  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runkit  # noqa: E402

TOOL = os.environ.get("CLIENT_TOOL") or os.path.join(
    os.environ.get("KN_BUILD_DIR", "build"), "tests", "tools", "client_tool")

MAX_KEY = 2**128 - 1
MIB = 1024 * 1024


class ToolError(Exception):
    def __init__(self, out):
        super().__init__(out.get("message"))
        self.out = out
        self.name = out.get("error")


class Tool:
    """Runs client_tool against one server."""

    def __init__(self, server, extra=()):
        self.env = lab.env_for(kinesis=server)
        self.extra = list(extra)

    def __call__(self, *args, check=True):
        cmd = [TOOL] + self.extra + [str(a) for a in args]
        p = runkit.run(cmd, env=self.env, timeout=300)
        if p.returncode == 2 or not p.stdout.strip():
            raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd[:6]), p.returncode,
                                                     p.stdout[-2000:], p.stderr[-2000:]))
        out = json.loads(p.stdout)
        if "error" in out and check:
            raise ToolError(out)
        return out

    def fails(self, *args):
        """The error name of a call that must fail."""
        out = self(*args, check=False)
        if "error" not in out:
            raise AssertionError("%s succeeded: %s" % (args, out))
        return out["error"]


def md5_key(pk):
    return int.from_bytes(hashlib.md5(pk.encode()).digest(), "big")


def shard_for(shards, key):
    hits = [s for s in shards if s["open"] and int(s["start"]) <= key <= int(s["end"])]
    assert len(hits) == 1, (key, hits)
    return hits[0]["id"]


def check_tiling(shards):
    """The open shards cover the hash key space exactly once."""
    ranges = sorted((int(s["start"]), int(s["end"])) for s in shards if s["open"])
    nxt = 0
    for a, b in ranges:
        assert a == nxt, ("gap or overlap", a, nxt, ranges)
        nxt = b + 1
    assert nxt == MAX_KEY + 1, ("not covered to the top", ranges)


def put_file(t, stream, key, data, fails=False):
    """put with the payload in a file (too large for the command line)."""
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
        path = f.name
    try:
        if fails:
            return t.fails("put", stream, key, "@" + path)
        return t("put", stream, key, "@" + path)
    finally:
        os.unlink(path)


def wait_active(t, stream):
    t("wait", stream, "active", 60000)


class Suite:
    def __init__(self, name, server, kind):
        self.name = name
        self.kind = kind          # "kinesalite" or "kinesis-local"
        self.t = Tool(server)
        self.passed = 0
        self.failed = 0
        self.stream = "ops-" + kind.replace("-", "")

    def case(self, fn):
        label = "%s: %s" % (self.kind, fn.__name__)
        start = time.time()
        try:
            fn()
            self.passed += 1
            print("ok   %s (%.1fs)" % (label, time.time() - start), flush=True)
        except Exception:
            self.failed += 1
            print("FAIL %s" % label, flush=True)
            traceback.print_exc()

    # ---- cases ----

    def streams(self):
        t, s = self.t, self.stream
        assert t("create", s, 2) == {}
        wait_active(t, s)
        d = t("describe", s)
        assert d["name"] == s and d["status"] == "ACTIVE", d
        assert d["open_shards"] == 2 and d["retention_hours"] == 24, d
        assert d["arn"].endswith(":stream/" + s), d
        for i in range(3):
            t("create", "%s-extra-%d" % (s, i), 1)
        for i in range(3):
            wait_active(t, "%s-extra-%d" % (s, i))
        names = t("list-streams")["streams"]
        for n in [s] + ["%s-extra-%d" % (s, i) for i in range(3)]:
            assert n in names, (n, names)
        assert len(names) == len(set(names)), names
        assert t.fails("create", s, 2) == "RESOURCE_IN_USE"
        assert t.fails("describe", "no-such-stream") == "RESOURCE_NOT_FOUND"
        # By ARN where the server takes StreamARN parameters.
        if self.kind == "kinesis-local":
            assert t("describe", d["arn"])["name"] == s

    def shards_and_hashing(self):
        t, s = self.t, self.stream
        shards = t("list-shards", s)["shards"]
        assert [x["id"] for x in shards] == ["shardId-000000000000", "shardId-000000000001"]
        assert all(x["open"] and x["parent"] is None and x["seq_start"] for x in shards)
        check_tiling(shards)
        for pk in ["a", "b", "user-42", "h\u00e9llo", "\u65e5\u672c", "x" * 256]:
            h = t("hash", pk)["hash"]
            assert int(h) == md5_key(pk), (pk, h)
            got = t("put", s, pk, "00")
            assert got["shard"] == shard_for(shards, md5_key(pk)), (pk, got, shards)
        # The explicit hash key wins over the partition key.
        for sh in shards:
            got = t("put", s, "a", "01", sh["start"])
            assert got["shard"] == sh["id"], (got, sh)
            got = t("put", s, "a", "01", sh["end"])
            assert got["shard"] == sh["id"], (got, sh)
        # Filters (ignored by kinesalite, which returns every shard).
        after = t("list-shards", s, "after_shard_id", "shardId-000000000000")["shards"]
        assert "shardId-000000000001" in [x["id"] for x in after]
        assert len(t("list-shards", s, "at_trim_horizon")["shards"]) >= 2
        assert t("seqcmp", "9", "10")["cmp"] == -1

    def binary_payloads(self):
        t, s = self.t, self.stream + "-bin"
        t("create", s, 1)
        wait_active(t, s)
        every = bytes(range(256))
        p1 = t("put", s, "k\u00e9y/\"1\"", every.hex())
        recs = t("put-records", s, "a=" + every[::-1].hex(), "b=", "c=00")
        assert recs["failed"] == 0 and len(recs["results"]) == 3, recs
        big = os.urandom(MIB - 1)              # payload + key = 1 MiB
        p2 = put_file(t, s, "k", big)
        # One byte more is refused by the server.
        assert put_file(t, s, "k", big + b"xy", fails=True) in (
            "VALIDATION", "INVALID_ARGUMENT"), "oversized record accepted"
        got = t("read", s, "shardId-000000000000", "trim_horizon")
        r = got["records"]
        assert len(r) == 5, [x["len"] for x in r]
        assert r[0]["seq"] == p1["seq"] and r[0]["key"] == "k\u00e9y/\"1\""
        assert r[0]["hex"] == every.hex()
        assert r[1]["hex"] == every[::-1].hex() and r[2]["len"] == 0 and r[3]["hex"] == "00"
        assert r[4]["seq"] == p2["seq"] and r[4]["len"] == len(big)
        assert r[4]["md5"] == hashlib.md5(big).hexdigest()
        seqs = [x["seq"] for x in r]
        assert all(t("seqcmp", a, b)["cmp"] == -1 for a, b in zip(seqs, seqs[1:]))
        assert all(x["arrival_ms"] > 1_500_000_000_000 for x in r)

    def iterators(self):
        t, s = self.t, self.stream + "-it"
        t("create", s, 1)
        wait_active(t, s)
        shard = "shardId-000000000000"
        latest = t("iterator", s, shard, "latest")["iterator"]
        before_ms = int(time.time() * 1000) - 1000
        puts = [t("put", s, "k%d" % i, "%02x" % i) for i in range(5)]
        g = t("get", latest)
        assert [x["seq"] for x in g["records"]] == [p["seq"] for p in puts], g
        assert g["next"] and not g["shard_end"]
        at = t("read", s, shard, "at_sequence_number", puts[2]["seq"])
        assert [x["hex"] for x in at["records"]] == ["02", "03", "04"], at
        after = t("read", s, shard, "after_sequence_number", puts[2]["seq"])
        assert [x["hex"] for x in after["records"]] == ["03", "04"], after
        ts = t("read", s, shard, "at_timestamp", before_ms)
        assert len(ts["records"]) == 5, ts
        # A timestamp in the future is refused, as on AWS.
        assert t.fails("iterator", s, shard, "at_timestamp",
                       int(time.time() * 1000) + 3_600_000) == "INVALID_ARGUMENT"
        first = t("iterator", s, shard, "trim_horizon")["iterator"]
        g = t("get", first, 2)
        assert len(g["records"]) == 2, g
        g2 = t("get", g["next"], 2)
        assert [x["hex"] for x in g2["records"]] == ["02", "03"], g2
        assert t.fails("iterator", s, "shardId-000000000009", "trim_horizon") == \
            "RESOURCE_NOT_FOUND"
        assert t.fails("iterator", s, shard, "at_sequence_number", "12a") == "_INVALID_ARG"

    def many_records(self):
        t, s = self.t, self.stream + "-many"
        t("create", s, 2)
        wait_active(t, s)
        n = 500 if self.kind == "kinesalite" else 200
        r = t("put-many", s, n, 1000)
        assert r["failed"] == 0 and len(r["results"]) == n, r["failed"]
        assert all(x["seq"] and x["shard"] and x["error"] is None for x in r["results"])
        total = 0
        for sh in ("shardId-000000000000", "shardId-000000000001"):
            got = t("read", s, sh, "trim_horizon")
            for rec in got["records"]:
                i = int(rec["key"].split("-")[1])
                want = bytes((i * 31 + j) & 255 for j in range(1000))
                assert rec["hex"] == want.hex(), rec["key"]
            total += got["count"]
        assert total == n, total

    def resharding(self):
        t, s = self.t, self.stream
        before = t("put", s, "first", "aa", "0")          # shard 0
        assert before["shard"] == "shardId-000000000000"
        shards = {x["id"]: x for x in t("list-shards", s)["shards"]}
        s0 = shards["shardId-000000000000"]
        lo, hi = int(s0["start"]), int(s0["end"])
        t("split", s, "shardId-000000000000")
        wait_active(t, s)
        after = {x["id"]: x for x in t("list-shards", s)["shards"]}
        assert not after["shardId-000000000000"]["open"], after
        kids = [x for x in after.values() if x["parent"] == "shardId-000000000000"]
        kids.sort(key=lambda x: int(x["start"]))
        assert len(kids) == 2, after
        mid = lo + (hi - lo + 1) // 2
        assert int(kids[0]["start"]) == lo and int(kids[0]["end"]) == mid - 1, kids
        assert int(kids[1]["start"]) == mid and int(kids[1]["end"]) == hi, kids
        assert all(k["open"] and k["adjacent_parent"] is None for k in kids)
        check_tiling(after.values())
        # The parent reads to its end; then its children come from
        # ChildShards (kinesis-local) or from ListShards only (kinesalite).
        end = t("read", s, "shardId-000000000000", "trim_horizon")
        assert end["ended"] and end["next"] is None, end
        assert before["seq"] in [x["seq"] for x in end["records"]]
        if self.kind == "kinesis-local":
            ids = sorted(c["id"] for c in end["children"])
            assert ids == sorted(k["id"] for k in kids), end["children"]
            assert all(c["parent"] == "shardId-000000000000" for c in end["children"])
        else:
            assert end["children"] is None, end
        # New records go to the children.
        p = t("put", s, "later", "bb", str(mid))
        assert p["shard"] == kids[1]["id"], p
        got = t("read", s, kids[1]["id"], "trim_horizon")
        assert [x["hex"] for x in got["records"]] == ["bb"], got
        # Merge the two children back.
        t("merge", s, kids[0]["id"], kids[1]["id"])
        wait_active(t, s)
        merged = {x["id"]: x for x in t("list-shards", s)["shards"]}
        child = [x for x in merged.values()
                 if x["parent"] == kids[0]["id"] and x["adjacent_parent"] == kids[1]["id"]]
        assert len(child) == 1, merged
        assert int(child[0]["start"]) == lo and int(child[0]["end"]) == hi, child
        assert not merged[kids[0]["id"]]["open"] and not merged[kids[1]["id"]]["open"]
        check_tiling(merged.values())
        end = t("read", s, kids[1]["id"], "trim_horizon")
        assert end["ended"] and end["count"] == 1, end
        if self.kind == "kinesis-local":
            assert [c["id"] for c in end["children"]] == [child[0]["id"]], end
            assert sorted([end["children"][0]["parent"],
                           end["children"][0]["adjacent_parent"]]) == \
                sorted([kids[0]["id"], kids[1]["id"]]), end["children"]
        p = t("put", s, "merged", "cc", str(lo))
        assert p["shard"] == child[0]["id"], p
        assert t.fails("split", s, "shardId-000000000077") == "RESOURCE_NOT_FOUND"

    def update_shard_count(self):
        t, s = self.t, self.stream + "-usc"
        t("create", s, 1)
        wait_active(t, s)
        if self.kind == "kinesalite":
            assert t.fails("update-shard-count", s, 2) == "_UNSUPPORTED"
            return
        t("update-shard-count", s, 2)
        wait_active(t, s)
        shards = t("list-shards", s)["shards"]
        assert len([x for x in shards if x["open"]]) == 2, shards
        check_tiling(shards)

    def consumers(self):
        t, s = self.t, self.stream
        arn = t("describe", s)["arn"]
        if self.kind == "kinesalite":
            assert t.fails("register", arn, "c1") == "_UNSUPPORTED"
            assert t.fails("list-consumers", arn) == "_UNSUPPORTED"
            assert t.fails("describe-consumer", arn, "c1") == "_UNSUPPORTED"
            return
        c1 = t("register", arn, "c1")["consumer"]
        assert c1["name"] == "c1" and c1["arn"] and c1["status"] in ("CREATING", "ACTIVE")
        c2 = t("register", arn, "c2")["consumer"]
        assert t.fails("register", arn, "c1") == "RESOURCE_IN_USE"
        d = t("describe-consumer", arn, "c1")["consumer"]
        assert d["arn"] == c1["arn"] and d["created_ms"] > 0, d
        assert t("describe-consumer-arn", c2["arn"])["consumer"]["name"] == "c2"
        names = sorted(c["name"] for c in t("list-consumers", arn)["consumers"])
        assert names == ["c1", "c2"], names
        assert t("describe", s)["consumers"] in (-1, 2)
        deadline = time.time() + 30
        while t("describe-consumer", arn, "c1")["consumer"]["status"] != "ACTIVE":
            assert time.time() < deadline, "c1 never became ACTIVE"
            time.sleep(0.5)
        t("deregister", arn, "c1")
        t("deregister-arn", c2["arn"])
        deadline = time.time() + 30
        while t("list-consumers", arn)["consumers"]:
            assert time.time() < deadline, "consumers never went away"
            time.sleep(0.5)
        assert t.fails("describe-consumer", arn, "c1") == "RESOURCE_NOT_FOUND"

    def errors(self):
        t = self.t
        assert t.fails("get", "not-an-iterator") in (
            "INVALID_ARGUMENT", "INTERNAL_FAILURE", "HTTP", "VALIDATION")
        assert t.fails("list-shards", "no-such-stream") == "RESOURCE_NOT_FOUND"
        assert t.fails("put", "no-such-stream", "k", "00") == "RESOURCE_NOT_FOUND"
        assert t.fails("delete", "no-such-stream") == "RESOURCE_NOT_FOUND"
        assert t.fails("create", "bad name!", 1) in ("VALIDATION", "INVALID_ARGUMENT")

    def deletion(self):
        t, s = self.t, self.stream
        for i in range(3):
            t("delete", "%s-extra-%d" % (s, i))
        t("delete", s, "enforce")
        t("wait", s, "deleted", 60000)
        assert s not in t("list-streams")["streams"]
        assert t.fails("describe", s) == "RESOURCE_NOT_FOUND"

    def run(self):
        for fn in (self.streams, self.shards_and_hashing, self.binary_payloads,
                   self.iterators, self.many_records, self.resharding,
                   self.update_shard_count, self.consumers, self.errors,
                   self.deletion):
            self.case(fn)


def main():
    if not os.path.exists(TOOL):
        print("client_tool not found at %s" % TOOL)
        return 1
    passed = failed = 0
    for kind, cls in (("kinesalite", lab.Kinesalite), ("kinesis-local", lab.KinesisLocal)):
        with cls() as server:
            suite = Suite(kind, server, kind)
            # A bad iterator gets an empty HTTP 500 from kinesis-local:
            # keep its retries short.
            suite.t.extra = ["-X", "retry.max.attempts=3", "-X", "retry.backoff.ms=20"]
            suite.run()
            passed += suite.passed
            failed += suite.failed
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
