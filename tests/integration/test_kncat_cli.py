#!/usr/bin/env python3
"""kncat end to end: argument handling, help, and every command against
both kinesalite and kinesis-local, with boto3 as the independent client.

Environment: KNCAT (the binary), KN_SOURCE_DIR (the source tree; tests/lab
is imported from there).  Prints "N passed, M failed" and exits non-zero
when a test failed.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
KNCAT = os.environ.get("KNCAT", str(SOURCE_DIR / "build" / "kncat"))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import runkit  # noqa: E402

COMMANDS = ["create", "delete", "list", "split", "merge", "produce", "consume",
            "group", "leases", "efo"]
TIMEOUT = 120


def run(args, *, env=None, input=None, timeout=TIMEOUT, **kwargs):
    """Runs kncat (runkit: a sanitizer report fails the test); returns
    CompletedProcess with bytes stdout/stderr."""
    return runkit.kncat(*args, kncat=KNCAT, input=input, text=False,
                        env=env if env is not None else os.environ,
                        timeout=timeout, **kwargs)


def err_lines(p):
    return [line for line in p.stderr.decode(errors="replace").splitlines()
            if line.strip()]


class Args(unittest.TestCase):
    """Usage errors exit 2 with the usage on stderr; --help everywhere."""

    def usage_error(self, args, needle=None):
        p = run(args, env={"PATH": os.environ.get("PATH", "")})
        self.assertEqual(p.returncode, 2, (args, p.stderr))
        self.assertEqual(p.stdout, b"", args)
        text = p.stderr.decode()
        self.assertIn("usage:", text, args)
        self.assertTrue(text.startswith("kncat: "), text)
        if needle:
            self.assertIn(needle, text.splitlines()[0])

    def test_no_command(self):
        self.usage_error([], "no command")

    def test_unknown_command(self):
        self.usage_error(["frobnicate"], "unknown command")

    def test_global_help(self):
        for flag in ("-h", "--help"):
            p = run([flag])
            self.assertEqual(p.returncode, 0)
            out = p.stdout.decode()
            self.assertIn("usage: kncat", out)
            for cmd in COMMANDS:
                self.assertRegex(out, rf"\n  {cmd} +\S")
            self.assertIn("Exit codes", out)

    def test_command_help(self):
        for cmd in COMMANDS:
            for flag in ("-h", "--help"):
                p = run([cmd, flag])
                self.assertEqual(p.returncode, 0, cmd)
                self.assertTrue(p.stdout.decode().startswith(f"usage: kncat {cmd}"),
                                p.stdout[:80])
                self.assertEqual(p.stderr, b"")
            # --help also after the command's operands and options
            p = run([cmd, "x", "--help"])
            self.assertEqual(p.returncode, 0, cmd)

    def test_version(self):
        p = run(["--version"])
        self.assertEqual(p.returncode, 0)
        self.assertRegex(p.stdout.decode(), r"^kncat \d+\.\d+\.\d+ \(libkinesis \d+\.\d+\.\d+\)\n$")

    def test_properties(self):
        p = run(["-X", "list"])
        self.assertEqual(p.returncode, 0)
        self.assertIn("log.level", p.stdout.decode())
        p = run(["-X", "list-md"])
        self.assertEqual(p.returncode, 0)
        self.assertTrue(p.stdout.decode().startswith("# Configuration properties"))
        for bad in ("nosuch.property=1", "log.level=99", "novalue"):
            p = run(["-X", bad, "list"])
            self.assertEqual(p.returncode, 2, bad)
            self.assertEqual(len(err_lines(p)) >= 1, True)

    def test_bad_options(self):
        cases = [
            (["--nope"], "unknown option"),
            (["-X"], "needs a value"),
            (["create"], "missing"),
            (["create", "s", "--shards", "x"], "--shards"),
            (["create", "s", "--shards"], "needs a value"),
            (["create", "s", "t"], "unexpected argument"),
            (["delete"], "missing"),
            (["delete", "s", "-Z"], "unknown option -Z"),
            (["list", "a", "b"], "unexpected argument"),
            (["split", "s"], "missing"),
            (["split", "s", "0", "--at", "12x"], "--at"),
            (["split", "s", "0", "--at", "340282366920938463463374607431768211456"], "--at"),
            (["merge", "s", "0"], "missing"),
            (["produce"], "missing STREAM"),
            (["produce", "s", "-D", ""], "delimiter"),
            (["produce", "s", "-D", "\\q"], "delimiter"),
            (["produce", "s", "-K", "\\x"], "key delimiter"),
            (["produce", "s", "a", "b"], "unexpected argument"),
            (["produce", "s", "-k", ""], "partition key"),
            (["produce", "s", "-k", "k" * 257], "partition key"),
            (["consume"], "missing STREAM"),
            (["consume", "s", "-o", "yesterday"], "position"),
            (["consume", "s", "-o", "at:12"], "exactly one -p"),
            (["consume", "s", "-o", "after:12", "-p", "0", "-p", "1"], "exactly one -p"),
            (["consume", "s", "-o", "at:abc", "-p", "0"], "position"),
            (["consume", "s", "-o", "ts:"], "position"),
            (["consume", "s", "-c", "0"], "-c"),
            (["consume", "s", "-c", "-3"], "-c"),
            (["consume", "s", "-J", "-K", ":"], "-K"),
            (["consume", "s", "-p", "a,b"], "bad shard"),
            (["group", "s"], "missing --app"),
            (["group", "--app", "a"], "missing STREAM"),
            (["group", "s", "--app", "a", "-o", "at:12"], "position"),
            (["group", "s", "--app", "a", "-J", "-K", ":"], "-K"),
            (["leases"], "missing APP"),
            (["consume", "s", "--efo", ""], "--efo"),
            (["consume", "s", "--efo-registration", "soon"], "--efo-registration"),
            (["consume", "s", "--efo-registration", "eager"], "needs --efo"),
            (["consume", "s", "--efo-registration", "none", "--efo", "x"], "--efo-arn"),
            (["consume", "s", "--efo-arn", "x"], "--efo-arn"),
            (["consume", "s", "--efo", "x", "--efo-arn", "arn:aws:kinesis:r:1:stream/s/consumer/x:1"],
             "--efo-arn"),
            (["group", "s", "--app", "a", "--efo-registration", "lazy"], "needs --efo"),
            (["efo"], "missing"),
            (["efo", "frob", "s"], "unknown efo command"),
            (["efo", "list"], "missing STREAM"),
            (["efo", "list", "s", "x"], "unexpected argument"),
            (["efo", "register", "s"], "missing"),
            (["efo", "deregister", "s", "n", "--timeout", "0"], "--timeout"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                self.usage_error(args, needle)

    def test_leases_missing_sqlite_file(self):
        """`kncat leases` on a SQLite path that does not exist says so
        (exit 3) and creates nothing."""
        with tempfile.TemporaryDirectory() as d:
            for store, path in ((f"sqlite:{d}/x.db", f"{d}/x.db"),
                                (None, "app.leases.db")):
                args = ["leases", "app"] + (["--leases", store] if store else [])
                p = run(args, cwd=d, env={"PATH": os.environ.get("PATH", "")})
                self.assertEqual(p.returncode, 3, p.stderr)
                self.assertIn(f"no lease table at {path}", p.stderr.decode())
                self.assertEqual(os.listdir(d), [])

    def test_doc_matches_help(self):
        """Every option that a command's help shows is in docs/kncat.md,
        in that command's section."""
        doc = (SOURCE_DIR / "docs" / "kncat.md").read_text()
        sections = re.split(r"\n## ", doc)
        for cmd in COMMANDS:
            sec = [s for s in sections if s.startswith(f"`{cmd}`") or s.startswith(cmd)]
            self.assertTrue(sec, f"docs/kncat.md has no section for {cmd}")
            text = sec[0]
            helptext = run([cmd, "--help"]).stdout.decode()
            for opt in set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", helptext)):
                if opt in ("-X", "-h", "--help", "-q", "-v"):
                    continue
                with self.subTest(cmd=cmd, opt=opt):
                    self.assertIn(opt, text)
        glob = run(["--help"]).stdout.decode()
        for opt in set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", glob)):
            self.assertIn(opt, doc)


class E2E:
    """Mixed into one TestCase per server."""

    server_cls = None
    counter = 0

    @classmethod
    def setUpClass(cls):
        cls.server = cls.server_cls().start()
        cls.env = lab.env_for(kinesis=cls.server)
        cls.boto = lab.boto3_client("kinesis", cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    # -- helpers --

    def name(self, what):
        E2E.counter += 1
        return f"kncat-{what}-{os.getpid()}-{E2E.counter}"

    def kncat(self, *args, input=None, ok=True, timeout=TIMEOUT, env=None):
        p = run(list(args), env=env or self.env, input=input, timeout=timeout)
        if ok:
            self.assertEqual(p.returncode, 0,
                             f"kncat {' '.join(args)}: {p.stderr.decode(errors='replace')}")
        return p

    def create(self, shards=1):
        s = self.name(self._testMethodName.replace("test_", ""))
        self.kncat("create", s, "--shards", str(shards))
        return s

    def shards(self, stream):
        p = self.kncat("list", stream, "-J")
        return [json.loads(line) for line in p.stdout.decode().splitlines()]

    def wait_get_records(self, proc):
        """Waits until a kncat started with --metrics 127.0.0.1:0 counts a
        GetRecords call (the address read from its first stderr line)."""
        m, seen = None, []
        while not m and len(seen) < 50:
            seen.append(proc.stderr.readline().decode())
            m = re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", seen[-1])
        self.assertTrue(m, "".join(seen))
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(m.group(1), timeout=10) as r:
                    text = r.read().decode()
            except OSError:
                text = ""
            calls = re.findall(r"^kn_consumer_shard_get_records_calls_total\{.*\} (\d+)",
                               text, re.M)
            if any(int(c) > 0 for c in calls):
                return
            self.assertLess(time.monotonic(), deadline, "no GetRecords call")
            time.sleep(0.1)

    def consume_json(self, stream, *extra):
        p = self.kncat("consume", stream, "-e", "-J", *extra)
        return [json.loads(line) for line in p.stdout.decode().splitlines()]

    @staticmethod
    def payload(rec):
        if "data" in rec:
            return rec["data"].encode()
        return base64.b64decode(rec["data_b64"])

    # -- admin --

    def test_admin_lifecycle(self):
        s = self.create(2)
        p = self.kncat("list")
        self.assertIn(s, p.stdout.decode().splitlines())
        sh = self.shards(s)
        self.assertEqual(len(sh), 2)
        self.assertTrue(all(x["open"] for x in sh))
        self.assertEqual(sh[0]["hash_key_start"], "0")
        self.assertEqual(sh[-1]["hash_key_end"], str(2**128 - 1))
        table = self.kncat("list", s).stdout.decode().splitlines()
        self.assertTrue(table[0].startswith("SHARD"))
        self.assertEqual(len(table), 3)
        # split shard 0 (given as a bare number) at its midpoint
        first = sh[0]["shard"]
        self.kncat("split", s, "0")
        sh = self.shards(s)
        self.assertEqual(len(sh), 4)
        kids = [x for x in sh if x["parent"] == first]
        self.assertEqual(len(kids), 2)
        self.assertFalse([x for x in sh if x["shard"] == first][0]["open"])
        kids.sort(key=lambda x: int(x["hash_key_start"]))
        lo, hi = int(sh[0]["hash_key_start"]), int(sh[0]["hash_key_end"])
        self.assertEqual(int(kids[0]["hash_key_start"]), lo)
        self.assertEqual(int(kids[1]["hash_key_start"]), int(kids[0]["hash_key_end"]) + 1)
        # merge the two children back
        self.kncat("merge", s, kids[0]["shard"], kids[1]["shard"])
        sh = self.shards(s)
        self.assertEqual(len(sh), 5)
        merged = [x for x in sh if x["open"] and x["adjacent_parent"]]
        self.assertEqual(len(merged), 1)
        self.assertEqual({merged[0]["parent"], merged[0]["adjacent_parent"]},
                         {kids[0]["shard"], kids[1]["shard"]})
        table = self.kncat("list", s).stdout.decode()
        self.assertIn("closed", table)
        self.assertIn(f"{kids[0]['shard']},{kids[1]['shard']}", table)
        # a closed shard cannot be split; an unknown one is not found
        p = self.kncat("split", s, kids[0]["shard"], ok=False)
        self.assertEqual(p.returncode, 1)
        p = self.kncat("split", s, "999", ok=False)
        self.assertEqual(p.returncode, 3)
        self.assertEqual(len(err_lines(p)), 1, p.stderr)
        self.kncat("delete", s)
        self.assertNotIn(s, self.kncat("list").stdout.decode().splitlines())
        p = self.kncat("delete", s, ok=False)
        self.assertEqual(p.returncode, 3)

    def test_split_at(self):
        s = self.create(1)
        self.kncat("split", s, "shardId-000000000000", "--at", str(2**127 + 5))
        kids = sorted((x for x in self.shards(s) if x["parent"]),
                      key=lambda x: int(x["hash_key_start"]))
        self.assertEqual(kids[1]["hash_key_start"], str(2**127 + 5))

    def test_missing_stream(self):
        s = "kncat-no-such-stream"
        for args in (["consume", s, "-e"], ["list", s], ["delete", s],
                     ["produce", s], ["split", s, "0"]):
            with self.subTest(args=args):
                p = self.kncat(*args, input=b"x\n", ok=False)
                self.assertEqual(p.returncode, 3, p.stderr)
                lines = err_lines(p)
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertRegex(lines[0], rf'^kncat: {args[0]}: stream "{s}" not found')
                self.assertEqual(p.stdout, b"")

    # -- produce and consume --

    def test_roundtrip_keys(self):
        s = self.create(2)
        lines = [f"key{i % 7}:value {i} \u00e9\u4e2d\U0001f600".encode() for i in range(200)]
        p = self.kncat("produce", s, "-K", ":", input=b"\n".join(lines) + b"\n")
        self.assertIn("200 records sent, 0 failed", p.stderr.decode())
        recs = self.consume_json(s)
        self.assertEqual(len(recs), 200)
        got = {}
        for r in recs:
            self.assertEqual(r["stream"], s)
            self.assertEqual(r["subseq"], 0)
            self.assertIsInstance(r["ts"], int)
            self.assertGreater(r["ts"], 1_600_000_000_000)
            self.assertTrue(r["seq"].isdigit())
            got.setdefault(r["key"], []).append(r["data"])
        for k in range(7):
            want = [f"value {i} \u00e9\u4e2d\U0001f600" for i in range(200) if i % 7 == k]
            self.assertEqual(got[f"key{k}"], want)  # per-key order kept
        # raw output with the key: the input again, per shard order aside
        raw = self.kncat("consume", s, "-e", "-K", ":").stdout
        self.assertEqual(sorted(raw.split(b"\n")[:-1]), sorted(lines))
        # -q: no summary
        p = self.kncat("-q", "produce", s, input=b"a\n")
        self.assertEqual(p.stderr, b"")

    def test_random_keys_spread(self):
        s = self.create(4)
        self.kncat("produce", s, input=b"".join(b"r%d\n" % i for i in range(400)))
        recs = self.consume_json(s)
        self.assertEqual(sorted(r["data"] for r in recs), sorted(f"r{i}" for i in range(400)))
        per_shard = {}
        for r in recs:
            per_shard[r["shard"]] = per_shard.get(r["shard"], 0) + 1
            self.assertRegex(r["key"], r"^[0-9a-f]{16}$")
        self.assertEqual(len(per_shard), 4)
        self.assertGreater(min(per_shard.values()), 50)
        # -k: one key, so one shard, input order
        s2 = self.create(4)
        self.kncat("produce", s2, "-k", "fixed", input=b"".join(b"%d\n" % i for i in range(300)))
        recs = self.consume_json(s2)
        self.assertEqual(len({r["shard"] for r in recs}), 1)
        self.assertEqual([r["data"] for r in recs], [str(i) for i in range(300)])

    def test_delimiters(self):
        s = self.create(1)
        self.kncat("produce", s, "-k", "k", "-D", "\\x1e", input=b"a\nb\x1ec d\x1e\x1ee\x1e")
        self.assertEqual([r["data"] for r in self.consume_json(s)], ["a\nb", "c d", "", "e"])
        s = self.create(1)
        self.kncat("produce", s, "-k", "k", "-D", "--|", input=b"one--two--|three-|--|--four")
        out = self.kncat("consume", s, "-e", "-D", "\\0").stdout
        self.assertEqual(out, b"one--two\0three-|\0--four\0")
        s = self.create(1)
        self.kncat("produce", s, "-k", "k", "-D", "\\0", "-K", "\\t",
                   input=b"k1\tv1\0k2\tv\t2\0no key\0\tempty key\0")
        recs = self.consume_json(s)
        self.assertEqual([(r["key"], r["data"]) for r in recs],
                         [("k1", "v1"), ("k2", "v\t2"), ("k", "no key"), ("k", "empty key")])

    def test_binary(self):
        s = self.create(1)
        allbytes = bytes(range(256))
        delim = b"\xff\xfe\xfd\xfc"
        # (a permutation without the delimiter in it)
        payloads = [allbytes, bytes(i * 7 % 256 for i in range(256)), b"\x00", b"\xc0\x80", b"\xed\xa0\x80",
                    b"\xf4\x90\x80\x80", "valid \u00e9".encode(), b"tab\there \"q\" \\"]
        inp = delim.join(payloads) + delim
        with tempfile.NamedTemporaryFile() as f:
            f.write(inp)
            f.flush()
            self.kncat("produce", s, f.name, "-k", "bin", "-D", "\\xff\\xfe\\xfd\\xfc")
        recs = self.consume_json(s)
        self.assertEqual([self.payload(r) for r in recs], payloads)
        self.assertEqual(["data_b64" in r for r in recs],
                         [True, True, False, True, True, True, False, False])
        raw = self.kncat("consume", s, "-e", "-D", "\\xff\\xfe\\xfd\\xfc").stdout
        self.assertEqual(raw, inp)

    def test_file_input(self):
        # A regular file is read through a mapping (records sent without a
        # copy) up to its last delimiter, the rest as a stream: the records
        # are those of a pipe, whether the file is FILE or standard input,
        # read from its start or from where the shell left it.
        mib = 1024 * 1024
        inp = (b"k1:v1\n\nno key\n:empty key\n" + b"k2:" + b"x" * (mib + 5) + b"\n"
               + b"".join(b"k%d:%d-" % (i % 7, i) + b"r" * (i * 37 % 2000) + b"\n"
                          for i in range(300))
               + b"k3:no final delimiter")
        skip = inp.index(b"\n") + 1  # the shell read the first line itself

        def sent(stream):
            return [(r["key"], self.payload(r)) for r in self.consume_json(stream)]

        s = self.create(1)
        p = self.kncat("produce", s, "-K", ":", "-k", "dk", input=inp, ok=False)
        self.assertEqual(p.returncode, 5, p.stderr)  # the record over 1 MiB
        want = sent(s)
        self.assertEqual(len(want), 305)
        self.assertEqual(want[-1], ("k3", b"no final delimiter"))
        with tempfile.NamedTemporaryFile() as f:
            f.write(inp)
            f.flush()
            s = self.create(1)
            p = self.kncat("produce", s, f.name, "-K", ":", "-k", "dk", ok=False)
            self.assertEqual(p.returncode, 5, p.stderr)
            self.assertIn("record 5 not sent", p.stderr.decode())
            self.assertEqual(sent(s), want)
            s = self.create(1)
            with open(f.name, "rb", buffering=0) as stdin:
                stdin.seek(skip)
                p = run(["produce", s, "-K", ":", "-k", "dk"], stdin=stdin,
                        env=self.env)
            self.assertEqual(p.returncode, 5, p.stderr)
            self.assertEqual(sent(s), want[1:])

    def test_file_truncated(self):
        # A mapped file cut short while it is being sent ends kncat with
        # a message and exit 1, not a crash without one.
        s = self.create(1)
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"".join(b"%06d" % i + b"." * 200 + b"\n" for i in range(4000)))
            f.flush()
            # 40 s to send it all: a slow run still truncates it midway
            p = subprocess.Popen([KNCAT, "-q", "produce", s, f.name, "-k", "k",
                                  "--rate", "100"], env=self.env,
                                 stderr=subprocess.PIPE)
            # once it has the file mapped, and has sent a few records
            deadline = time.time() + 30
            while time.time() < deadline and p.poll() is None:
                with open(f"/proc/{p.pid}/maps") as maps:
                    if f.name in maps.read():
                        break
                time.sleep(0.05)
            time.sleep(0.3)
            os.truncate(f.name, 4096)
            _, err = p.communicate(timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn(b"was it truncated while being sent", err)

    def test_large_records(self):
        s = self.create(1)
        mib = 1024 * 1024
        key = b"big"
        exact = b"x" * (mib - len(key))
        over = b"y" * (mib - len(key) + 1)
        inp = b"small1\n" + exact + b"\n" + over + b"\n" + b"z" * (2 * mib) + b"\nsmall2\n"
        p = self.kncat("produce", s, "-k", "big", input=inp, ok=False)
        self.assertEqual(p.returncode, 5, p.stderr)
        text = p.stderr.decode()
        self.assertIn("record 3 not sent", text)
        self.assertIn("record 4 not sent", text)
        self.assertIn("over the stream's MaxRecordSizeInKiB of 1024 KiB", text)
        self.assertIn("3 records sent, 2 failed", text)
        recs = self.consume_json(s)
        self.assertEqual([len(self.payload(r)) for r in recs], [6, mib - 3, 6])
        self.assertEqual(self.payload(recs[1]), exact)

    def test_small_buffers(self):
        # Budgets smaller than a record, and a few records per shard: every
        # record still comes, each shard in order.
        s = self.create(3)
        inp = b"".join(b"%d-" % i + (b"r" * (i % 7) * 700) + b"\n"
                       for i in range(240))
        self.kncat("produce", s, input=inp)
        recs = self.consume_json(s, "-X", "buffer.max.bytes=1024",
                                 "-X", "buffer.max.total.bytes=65536",
                                 "-X", "buffer.max.records=5")
        self.assertEqual(sorted(self.payload(r) for r in recs),
                         sorted(inp.split(b"\n")[:-1]))
        last = {}
        for r in recs:
            seq = int(r["seq"])
            self.assertLess(last.get(r["shard"], -1), seq)
            last[r["shard"]] = seq

    def test_empty_input(self):
        s = self.create(1)
        for inp in (b"", ):
            p = self.kncat("produce", s, input=inp)
            self.assertIn("0 records sent, 0 failed", p.stderr.decode())
        p = self.kncat("produce", s, "-", input=b"\n")  # one empty record
        self.assertIn("1 record sent", p.stderr.decode())
        recs = self.consume_json(s)
        self.assertEqual([r["data"] for r in recs], [""])

    def test_count_and_sigpipe(self):
        s = self.create(2)
        self.kncat("produce", s, input=b"".join(b"%d\n" % i for i in range(50)))
        p = self.kncat("consume", s, "-c", "7")
        self.assertEqual(len(p.stdout.splitlines()), 7)
        p = self.kncat("consume", s, "-c", "7", "-e", "-J")
        self.assertEqual(len(p.stdout.splitlines()), 7)
        # the reader goes away: quiet exit 0
        sh = subprocess.run(f"'{KNCAT}' consume {s} | head -n 1", shell=True,
                            env=self.env, capture_output=True, timeout=TIMEOUT,
                            executable="/bin/bash")
        self.assertEqual(len(sh.stdout.splitlines()), 1)
        self.assertEqual(sh.stderr, b"")
        pipe = subprocess.run(
            f"set -o pipefail; '{KNCAT}' consume {s} | head -n 1 >/dev/null",
            shell=True, env=self.env, capture_output=True, timeout=TIMEOUT,
            executable="/bin/bash")
        self.assertEqual(pipe.returncode, 0, pipe.stderr)

    def test_signals(self):
        s = self.create(1)
        self.kncat("produce", s, "-k", "k", input=b"".join(b"%d\n" % i for i in range(20)))
        for sig in (signal.SIGINT, signal.SIGTERM):
            # unbuffered: communicate() reads the pipe itself, past any buffer
            with subprocess.Popen([KNCAT, "consume", s, "-J"], env=self.env, bufsize=0,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
                # signalled once it has written every record: it is then
                # waiting for more
                lines = [proc.stdout.readline() for _ in range(20)]
                self.assertTrue(lines[0].startswith(b"{"))
                proc.send_signal(sig)
                rest, err = proc.communicate(timeout=30)
            self.assertEqual(proc.returncode, 0, err)
            lines += rest.splitlines(keepends=True)
            self.assertEqual(len(lines), 20)
            self.assertTrue(all(line.endswith(b"}\n") for line in lines))
            self.assertEqual(err, b"")
        # produce: stops reading, sends what it read, exits 0
        with subprocess.Popen([KNCAT, "produce", s, "-k", "k"], env=self.env,
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            proc.stdin.write(b"x\ny\n")
            proc.stdin.flush()
            # signalled once both are stored (it waits for more input then)
            deadline = time.monotonic() + TIMEOUT
            while len(self.consume_json(s)) < 22 and time.monotonic() < deadline:
                time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            err = proc.stderr.read()
            proc.wait(timeout=30)
            proc.stdin.close()
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn(b"2 records sent, 0 failed", err)
        self.assertEqual(len(self.consume_json(s)), 22)

    def test_positions(self):
        s = self.create(1)
        self.kncat("produce", s, "-k", "k", input=b"a\nb\nc\n")
        recs = self.consume_json(s)
        seq = [r["seq"] for r in recs]
        self.assertEqual(len(seq), 3)
        at = self.consume_json(s, "-o", f"at:{seq[1]}", "-p", "0")
        self.assertEqual([r["data"] for r in at], ["b", "c"])
        after = self.consume_json(s, "-o", f"after:{seq[1]}", "-p", "shardId-000000000000")
        self.assertEqual([r["data"] for r in after], ["c"])
        latest = self.consume_json(s, "-o", "latest")
        self.assertEqual(latest, [])
        # latest: only what is written after the start
        with subprocess.Popen([KNCAT, "consume", s, "-o", "latest", "-c", "2", "-J",
                               "--metrics", "127.0.0.1:0"],
                              env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) as proc:
            # produced once it has answered a GetRecords, so its LATEST
            # iterator was taken before the records were written
            self.wait_get_records(proc)
            self.kncat("produce", s, "-k", "k", input=b"d\ne\n")
            out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual([json.loads(x)["data"] for x in out.splitlines()], ["d", "e"])
        # ts: records that arrived at or after the time
        time.sleep(1.5)
        self.kncat("produce", s, "-k", "k", input=b"f\ng\n")
        recs = self.consume_json(s)
        ts_e = [r["ts"] for r in recs if r["data"] == "e"][0]
        ts_f = [r["ts"] for r in recs if r["data"] == "f"][0]
        self.assertGreater(ts_f, ts_e)
        mid = (ts_e + ts_f) // 2 + 1
        late = self.consume_json(s, "-o", f"ts:{mid}")
        self.assertEqual([r["data"] for r in late], ["f", "g"])
        p = self.kncat("consume", s, "-p", "7", "-e", ok=False)
        self.assertEqual(p.returncode, 3)
        self.assertIn('shard "shardId-000000000007" not found', p.stderr.decode())

    def test_resharding_order(self):
        """Records written across a split and a merge are read exactly once,
        parents before children, in order per key."""
        s = self.create(2)
        keys = [f"k{i}" for i in range(12)]
        n = 0

        def produce(count):
            nonlocal n
            lines = []
            for _ in range(count):
                lines.append(f"{keys[n % len(keys)]}:{n}".encode())
                n += 1
            self.kncat("produce", s, "-K", ":", input=b"\n".join(lines) + b"\n")

        produce(120)
        self.kncat("split", s, "0")
        produce(120)
        kids = [x["shard"] for x in self.shards(s) if x["parent"] == "shardId-000000000000"]
        self.assertEqual(len(kids), 2)
        self.kncat("merge", s, kids[0], kids[1])
        produce(120)
        recs = self.consume_json(s)
        values = [int(r["data"]) for r in recs]
        self.assertEqual(sorted(values), list(range(n)))  # exactly once
        per_key = {}
        for r in recs:
            per_key.setdefault(r["key"], []).append(int(r["data"]))
        for k, v in per_key.items():
            self.assertEqual(v, sorted(v), k)
        graph = {x["shard"]: x for x in self.shards(s)}
        first_at, last_at = {}, {}
        for i, r in enumerate(recs):
            first_at.setdefault(r["shard"], i)
            last_at[r["shard"]] = i
        for sid, x in graph.items():
            for parent in (x["parent"], x["adjacent_parent"]):
                if parent and parent in last_at and sid in first_at:
                    self.assertLess(last_at[parent], first_at[sid], (parent, sid))
        self.assertGreaterEqual(len(first_at), 4)

    def test_unreachable(self):
        import socket
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))  # bound, never listening: refused
        self.addCleanup(sock.close)
        port = sock.getsockname()[1]
        env = lab.env_for(kinesis=f"http://127.0.0.1:{port}")
        # No hang: run()'s time-out of 60 s says so.
        p = run(["-X", "http.connect.timeout.ms=500", "-X", "retry.max.attempts=2",
                 "list"], env=env, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertNotEqual(p.returncode, 2)
        lines = [x for x in err_lines(p) if x.startswith("kncat: ")]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("list:", lines[0])
        p = run(["-X", "http.connect.timeout.ms=500", "-X", "retry.max.attempts=2",
                 "consume", "s", "-e"], env=env, timeout=60)
        self.assertNotIn(p.returncode, (0, 2))

    # -- retries --

    def test_retries(self):
        with FaultProxy(self.server) as proxy:
            env = lab.env_for(kinesis=proxy.endpoint)

            def check_calls():
                """A retried record never shares a call with a newer record of
                its key, and each call keeps every key's records in order."""
                for req in proxy.requests("PutRecords"):
                    seen = {}
                    for e in req.json()["Records"]:
                        v = int(base64.b64decode(e["Data"]))
                        self.assertLess(seen.get(e["PartitionKey"], -1), v)
                        seen[e["PartitionKey"]] = v

            def per_key(recs):
                keys = {}
                for r in recs:
                    keys.setdefault(r["key"], []).append(int(r["data"]))
                return keys

            # Rejections at the end of calls (as when a shard throttles from
            # some point on): retries must keep every key in order.
            s = self.create(2)
            proxy.add_rule("putrecords_partial", indices=list(range(300, 500)),
                           drop=True, count=3)
            lines = [f"k{i % 5}:{i}".encode() for i in range(1200)]
            p = run(["produce", s, "-K", ":", "-X", "retry.backoff.ms=1"], env=env,
                    input=b"\n".join(lines))
            self.assertEqual(p.returncode, 0, p.stderr)
            m = re.search(rb"1200 records sent, 0 failed, (\d+) retries", p.stderr)
            self.assertTrue(m, p.stderr)
            self.assertGreaterEqual(int(m.group(1)), 200)
            check_calls()
            recs = self.consume_json(s)
            self.assertEqual(sorted(int(r["data"]) for r in recs), list(range(1200)))
            for k, v in per_key(recs).items():
                self.assertEqual(v, sorted(v), k)

            # Scattered rejections: still every record exactly once.
            proxy.clear_rules()
            proxy.clear_log()
            s = self.create(2)
            proxy.add_rule("putrecords_partial", every=3, drop=True, count=4)
            lines = [f"k{i % 5}:{i}".encode() for i in range(300)]
            # strict order: a call never carries two records of a key for a
            # shard, so a rejected record is not overtaken by a later one
            p = run(["produce", s, "-K", ":", "-X", "retry.backoff.ms=1",
                     "-X", "ordering.strict=true"], env=env,
                    input=b"\n".join(lines))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(b"300 records sent, 0 failed", p.stderr)
            check_calls()
            recs = self.consume_json(s)
            self.assertEqual(sorted(int(r["data"]) for r in recs), list(range(300)))
            for k, v in per_key(recs).items():
                self.assertEqual(v, sorted(v), k)

            # Always rejected: retried until its time-to-live, exit 5.
            proxy.clear_rules()
            proxy.add_rule("putrecords_partial", indices=[0], drop=True)
            p = run(["produce", s, "-k", "k", "-X", "retry.backoff.ms=1",
                     "-X", "message.timeout.ms=500"], env=env, input=b"only\n")
            self.assertEqual(p.returncode, 5, p.stderr)
            self.assertRegex(p.stderr.decode(), r"0 records sent, 1 failed, [1-9]\d* retr")
            self.assertIn("ProvisionedThroughputExceededException", p.stderr.decode())

    # -- long names --

    def test_json_long_names(self):
        """-J with a 128-character stream name and a 128-character shard id
        (a server's choice) prints valid JSON lines naming both."""
        s = ("kncat-long-%d-" % os.getpid()).ljust(128, "x")
        self.kncat("create", s, "--shards", "1")
        shard = "shardId-" + "7" * 120
        data = [base64.b64encode(b"r%d" % i).decode() for i in range(3)]
        with FaultProxy(self.server) as proxy:
            env = lab.env_for(kinesis=proxy.endpoint)
            answers = {
                "ListShards": {"Shards": [{
                    "ShardId": shard,
                    "HashKeyRange": {"StartingHashKey": "0",
                                     "EndingHashKey": str(2**128 - 1)},
                    "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]},
                "GetShardIterator": {"ShardIterator": "it-1"},
                "GetRecords": {"Records": [
                    {"Data": d, "PartitionKey": "k", "SequenceNumber": str(10 + i),
                     "ApproximateArrivalTimestamp": 1.7e9}
                    for i, d in enumerate(data)],
                    "NextShardIterator": "it-2", "MillisBehindLatest": 0},
            }
            for action, body in answers.items():
                proxy.add_rule("status", action, status=200,
                               body=json.dumps(body).encode())
            for cmd in (["consume", s, "-J", "-c", "3"],
                        ["group", s, "--app", self.name("longapp"), "-J", "-c", "3",
                         "--leases", "memory:x"]):
                p = run(cmd, env=env)
                self.assertEqual(p.returncode, 0, (cmd, p.stderr))
                lines = p.stdout.decode().splitlines()
                self.assertEqual(len(lines), 3, (cmd, p.stdout))
                for i, line in enumerate(lines):
                    rec = json.loads(line)
                    self.assertEqual((rec["stream"], rec["shard"], rec["seq"]),
                                     (s, shard, str(10 + i)), cmd)

    # -- text from a hostile server --

    def assert_terminal_safe(self, data: bytes, what):
        """No byte a terminal acts on: C0 but the line ends, DEL, C1,
        direction overrides, no invalid UTF-8."""
        text = data.decode("utf-8")  # raises on invalid UTF-8
        for ch in text:
            o = ord(ch)
            self.assertFalse(o < 0x20 and ch != "\n" or 0x7f <= o < 0xa0
                             or 0x202a <= o <= 0x202e or 0x2066 <= o <= 0x2069,
                             f"{what}: U+{o:04X} in {text!r}")

    def test_hostile_text(self):
        evil = "\u001b]0;owned\u0007\u001b[31mred\u009b2J\r\nfake line\u202e"
        with FaultProxy(self.server) as proxy:
            env = lab.env_for(kinesis=proxy.endpoint)
            # An error type and message full of escapes.
            proxy.add_rule("status", "ListStreams", status=400,
                           error="Bad\u001b[2JException", message=evil)
            p = run(["list"], env=env)
            self.assertNotIn(p.returncode, (0, 2), p.stderr)
            self.assertEqual(len(err_lines(p)), 1, p.stderr)
            self.assertIn("fake line", p.stderr.decode())
            self.assert_terminal_safe(p.stderr, "list error")
            # A raw body, not even UTF-8.
            proxy.clear_rules()
            proxy.add_rule("status", "ListStreams", status=400,
                           body=b"\x1b[2J\xc2\x9b\xff oops\n<html>")
            p = run(["list"], env=env)
            self.assertEqual(len(err_lines(p)), 1, p.stderr)
            self.assert_terminal_safe(p.stderr, "list error body")
            # Names in an answer: a shard listing, as text and as JSON.
            proxy.clear_rules()
            shard = {"ShardId": "shardId-0\u001b[31m\u009b",
                     "HashKeyRange": {"StartingHashKey": "0",
                                      "EndingHashKey": "1"},
                     "SequenceNumberRange": {"StartingSequenceNumber": "1" + evil}}
            proxy.add_rule("status", "ListShards", status=200,
                           body=json.dumps({"Shards": [shard]}).encode())
            p = run(["list", "s"], env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assert_terminal_safe(p.stdout, "list s")
            self.assertEqual(len(p.stdout.decode().splitlines()), 2, p.stdout)
            p = run(["list", "s", "-J"], env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assert_terminal_safe(p.stdout, "list s -J")
            self.assertEqual(json.loads(p.stdout)["shard"], shard["ShardId"])
            # Per-record errors of PutRecords.
            proxy.clear_rules()
            s = self.create(1)
            proxy.add_rule("putrecords_partial", indices=[0], drop=True,
                           error_code="Evil\u001b[2J", error_message=evil)
            p = run(["produce", s, "-k", "k", "-X", "retry.backoff.ms=1",
                     "-X", "message.timeout.ms=500"], env=env, input=b"only\n")
            self.assertEqual(p.returncode, 5, p.stderr)
            self.assertIn("not delivered", p.stderr.decode())
            self.assert_terminal_safe(p.stderr, "produce")

    # -- interoperability --

    def test_boto3_interop(self):
        s = self.create(2)
        datas = [bytes(range(256)), b"", "caf\u00e9".encode(), b"\x00\x01\xff" * 1000,
                 b"line\nbreak"]
        self.boto.put_records(StreamName=s, Records=[
            {"Data": d, "PartitionKey": f"pk-\u00e9-{i}"} for i, d in enumerate(datas)])
        recs = self.consume_json(s)
        got = sorted((r["key"], self.payload(r)) for r in recs)
        self.assertEqual(got, sorted((f"pk-\u00e9-{i}", d) for i, d in enumerate(datas)))
        # and the other way round
        s2 = self.create(2)
        lines = [f"pk{i}\t{'v' * i}".encode() for i in range(50)] + [b"bin\t\x00\xfe\x01"]
        self.kncat("produce", s2, "-K", "\\t", input=b"\n".join(lines))
        got = []
        for sh in self.boto.list_shards(StreamName=s2)["Shards"]:
            it = self.boto.get_shard_iterator(StreamName=s2, ShardId=sh["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            for _ in range(5):
                r = self.boto.get_records(ShardIterator=it)
                got += [(x["PartitionKey"], x["Data"]) for x in r["Records"]]
                it = r.get("NextShardIterator")
                if not r["Records"] or not it:
                    break
        want = [tuple(line.split(b"\t", 1)) for line in lines]
        self.assertEqual(sorted(got), sorted((k.decode(), v) for k, v in want))


class Kinesalite(E2E, unittest.TestCase):
    server_cls = lab.Kinesalite


class KinesisLocal(E2E, unittest.TestCase):
    server_cls = lab.KinesisLocal

    def test_stream_arn(self):
        """A stream named by its ARN (StreamARN on every call; kinesalite
        knows no StreamARN): every command takes it, its region is used
        over the environment's, and a region given that differs is an
        error before any call."""
        s = self.create(2)
        arn = self.boto.describe_stream_summary(
            StreamName=s)["StreamDescriptionSummary"]["StreamARN"]
        region = arn.split(":")[3]
        env = dict(self.env, AWS_REGION="eu-west-1" if region != "eu-west-1" else "us-west-2")
        lines = b"".join(b"k%d\t%d\n" % (i, i) for i in range(20))
        self.kncat("produce", arn, "-K", "\t", input=lines, env=env)
        got = self.kncat("consume", arn, "-e", "-J", "-o", "trim_horizon", env=env)
        self.assertEqual(sorted(json.loads(x)["data"] for x in got.stdout.decode().splitlines()),
                         sorted(str(i) for i in range(20)))
        self.assertEqual(len(self.kncat("list", arn, "-J", env=env).stdout.splitlines()), 2)
        store = f"sqlite:{tempfile.mkdtemp(prefix='kn-arn-')}/l.db"
        p = self.kncat("group", arn, "--app", "arn-app", "--leases", store, "-e", "-J",
                       env=env)
        self.assertEqual(len(p.stdout.splitlines()), 20)
        for args in (["list", arn], ["consume", arn, "-e"]):
            p = self.kncat("--region", "ap-south-1", *args, ok=False, env=env)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"is in region {region}, but the region property is ap-south-1",
                          p.stderr.decode())
        p = self.kncat("create", arn, ok=False, env=env)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("a stream is created by name", p.stderr.decode())


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    if len(sys.argv) > 1:
        suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:],
                                                              sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"{passed} passed, {failed} failed")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
