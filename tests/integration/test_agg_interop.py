#!/usr/bin/env python3
"""KPL aggregation interoperability between libkinesis and aws-kinesis-agg.

Random cases of user records (binary and text payloads, empty ones, Unicode
partition keys, explicit hash keys) go both ways:

  A. aws-kinesis-agg aggregates, libkinesis (tests/tools/agg_tool)
     deaggregates: the same user records come out, in order;
  B. libkinesis aggregates, aws-kinesis-agg deaggregates (MD5 checked):
     the same user records come out, in order, and every Kinesis record
     goes with the partition key and explicit hash key the KPL would use.

Plus: a record without the magic number is plain, a damaged aggregate is
corrupt.  Prints "N passed, M failed" and exits 0 only when nothing failed.

Environment: AGG_TOOL (else KN_BUILD_DIR/tests/tools/agg_tool),
KN_SOURCE_DIR (the package in tests/lab/node_modules, else
/tmp/lab/node_modules), AGG_INTEROP_SEED and AGG_INTEROP_CASES.
"""
import base64
import hashlib
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runkit  # noqa: E402
SOURCE_DIR = os.environ.get("KN_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BUILD_DIR = os.environ.get("KN_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
AGG_TOOL = os.environ.get("AGG_TOOL", os.path.join(BUILD_DIR, "tests", "tools", "agg_tool"))
MAX_HASH_KEY = (1 << 128) - 1


def node_modules():
    for d in (os.path.join(SOURCE_DIR, "tests", "lab", "node_modules"), "/tmp/lab/node_modules"):
        if os.path.isdir(os.path.join(d, "aws-kinesis-agg")):
            return d
    sys.exit("aws-kinesis-agg not found in tests/lab/node_modules or /tmp/lab/node_modules")


def b64(b):
    return base64.b64encode(b).decode()


def token(b):
    return "b:" + b64(b)


def untoken(t):
    if t == "-":
        return None
    assert t.startswith("b:"), t
    return base64.b64decode(t[2:])


# ---- Random cases -----------------------------------------------------------

ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz0123456789-_",
    " !\"#$%&'()*+,./:;<=>?@[\\]^`{|}~",
    "àéîõüßçñøåÆŒ",
    "日本語中文한국어",
    "\U0001F600\U0001F680\U0001F9EA\U00010348",  # outside the BMP
    "\u200b\u00a0\t\n",
]


def is_array_index(s):
    # aws-kinesis-agg keeps its key tables as plain JavaScript objects, whose
    # keys list integer-like names first: such keys come out in the wrong
    # order from its aggregator.  They are kept out of direction A.
    return s.isdigit() and str(int(s)) == s and int(s) < 2**32 - 1


def rand_key(rng):
    n = rng.choice([1, 1, 2, 5, 16, 36, 64, rng.randint(1, 256)])
    while True:
        k = "".join(rng.choice(rng.choice(ALPHABETS)) for _ in range(n))
        if not is_array_index(k) and k != "__proto__":
            return k


def rand_ehk(rng):
    return str(rng.choice([rng.getrandbits(128), rng.getrandbits(128), MAX_HASH_KEY,
                           (1 << 64) + rng.getrandbits(40)]))


def rand_data(rng):
    n = rng.choice([0, 1, 3, 50, 1000, 1024, rng.randint(0, 4096)])
    if rng.random() < 0.3:
        return "".join(rng.choice(rng.choice(ALPHABETS)) for _ in range(n)).encode()
    return rng.randbytes(n)


def rand_case(rng):
    n = rng.choice([1, 2, 3, 10, 100, rng.randint(1, 300)])
    keys = [rand_key(rng) for _ in range(rng.choice([1, 2, 5, n]))]
    ehks = [rand_ehk(rng) for _ in range(rng.choice([1, 3, n]))]
    ehk_share = rng.choice([0.0, 0.3, 1.0])
    return [{"pk": rng.choice(keys),
             "ehk": rng.choice(ehks) if rng.random() < ehk_share else None,
             "data": rand_data(rng)} for _ in range(n)]


def hash_key(u):
    if u["ehk"] is not None:
        return int(u["ehk"])
    return int.from_bytes(hashlib.md5(u["pk"].encode()).digest(), "big")


# ---- The two sides -----------------------------------------------------------

def run_node(job):
    out = subprocess.run(["node", os.path.join(HERE, "agg_interop.js"), node_modules()],
                         input=json.dumps(job).encode(), capture_output=True, check=True)
    return json.loads(out.stdout)["cases"]


def tool_deaggregate(datas):
    """Each Kinesis record's data -> ("ok", [user records]) / ("plain",) / ("corrupt", msg)."""
    inp = "".join(token(d) + "\n" for d in datas).encode()
    out = runkit.run([AGG_TOOL, "deaggregate"], input=inp, text=False, check=True)
    lines = out.stdout.decode().split("\n")
    answers, i = [], 0
    while len(answers) < len(datas):
        head = lines[i]
        i += 1
        if head.startswith("ok "):
            recs = []
            for _ in range(int(head[3:])):
                subseq, pk, ehk, data = lines[i].split(" ")
                i += 1
                recs.append({"subseq": int(subseq), "pk": untoken(pk).decode(),
                             "ehk": None if ehk == "-" else untoken(ehk).decode(),
                             "data": untoken(data)})
            answers.append(("ok", recs))
        elif head == "plain":
            answers.append(("plain",))
        else:
            answers.append(("corrupt", head))
    return answers


def tool_aggregate(cases, max_bytes):
    """Each case -> its Kinesis records: dicts pk, ehk, data, count, aggregated."""
    inp = []
    for case in cases:
        for u in case:
            inp.append("%s %s %s\n" % (token(u["pk"].encode()),
                                       "-" if u["ehk"] is None else token(u["ehk"].encode()),
                                       token(u["data"])))
        inp.append("\n")
    out = runkit.run([AGG_TOOL, "aggregate", str(max_bytes)], input="".join(inp).encode(),
                     text=False, check=True)
    result, current = [], []
    for line in out.stdout.decode().split("\n")[:-1]:
        if not line:
            result.append(current)
            current = []
            continue
        pk, ehk, data, count, aggregated = line.split(" ")
        current.append({"pk": untoken(pk).decode(),
                        "ehk": None if ehk == "-" else untoken(ehk).decode(),
                        "data": untoken(data), "count": int(count),
                        "aggregated": aggregated == "1"})
    return result


# ---- Checks -------------------------------------------------------------------

class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            if self.failed <= 20:
                print("FAIL:", what, file=sys.stderr)


def same_records(got, want):
    """got: user records (data bytes); want: the case.  Returns a reason or None."""
    if len(got) != len(want):
        return "%d user records, want %d" % (len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        for f in ("pk", "ehk", "data"):
            if g[f] != w[f]:
                return "record %d: %s %.80r, want %.80r" % (i, f, g[f], w[f])
    return None


def direction_a(cases, t):
    """aws-kinesis-agg aggregates, libkinesis deaggregates."""
    job = [[{"pk": u["pk"], "ehk": u["ehk"], "data": b64(u["data"])} for u in c] for c in cases]
    encoded = run_node({"op": "aggregate", "cases": job})
    flat = [base64.b64decode(k["data"]) for ks in encoded for k in ks]
    answers = iter(tool_deaggregate(flat))
    for n, (case, ks) in enumerate(zip(cases, encoded)):
        got, why = [], None
        for k in ks:
            a = next(answers)
            if a[0] != "ok":
                why = why or "Kinesis record not read as an aggregate: %s" % (a,)
                continue
            if [r["subseq"] for r in a[1]] != list(range(len(a[1]))):
                why = why or "subsequence numbers %r" % [r["subseq"] for r in a[1]]
            got.extend(a[1])
        why = why or same_records(got, case)
        t.check(why is None, "A case %d (%d records, %d aggregates): %s" % (n, len(case), len(ks), why))


def direction_b(cases, t, rng):
    """libkinesis aggregates, aws-kinesis-agg deaggregates."""
    caps = [100, 4096, 51200, 1048575]
    by_cap = {c: [] for c in caps}
    for n, case in enumerate(cases):
        by_cap[rng.choice(caps)].append(n)
    for cap, idx in by_cap.items():
        if not idx:
            continue
        mine = [cases[n] for n in idx]
        kinesis = tool_aggregate(mine, cap)
        job = [[{"pk": k["pk"], "ehk": k["ehk"], "data": b64(k["data"])} for k in ks] for ks in kinesis]
        theirs = run_node({"op": "deaggregate", "cases": job})
        for n, case, ks, answers in zip(idx, mine, kinesis, theirs):
            why, got, pos = None, [], 0
            for k, a in zip(ks, answers):
                users = case[pos:pos + k["count"]]
                pos += k["count"]
                first = users[0]
                # Where the KPL sends it: an aggregate with partition key "a"
                # and the first user record's hash key; a lone record as
                # itself (its explicit hash key written in decimal).
                if k["aggregated"]:
                    route = ("a", str(hash_key(first)))
                    if len(k["data"]) > cap:
                        why = why or "aggregate of %d bytes over the cap %d" % (len(k["data"]), cap)
                else:
                    route = (first["pk"], None if first["ehk"] is None else str(int(first["ehk"])))
                    if k["count"] != 1:
                        why = why or "%d records sent plain" % k["count"]
                if (k["pk"], k["ehk"]) != route:
                    why = why or "sent with %r, want %r" % ((k["pk"], k["ehk"]), route)
                if "error" in a:
                    why = why or "aws-kinesis-agg: " + a["error"]
                    continue
                for j, r in enumerate(a["records"]):
                    if k["aggregated"]:
                        if r["subseq"] != j:
                            why = why or "subsequence number %r at %d" % (r["subseq"], j)
                        # aws-kinesis-agg reports the first table entry as the
                        # explicit hash key of a record that has none (it
                        # reads the absent index as 0): compare only the
                        # records that have one.
                        ehk = r["ehk"] if users[j]["ehk"] is not None else None
                    else:
                        ehk = None if users[j]["ehk"] is None else r["ehk"]
                    got.append({"pk": r["pk"], "ehk": ehk, "data": base64.b64decode(r["data"])})
            if pos != len(case):
                why = why or "Kinesis records hold %d user records, want %d" % (pos, len(case))
            want = [dict(u, ehk=None if u["ehk"] is None else str(int(u["ehk"]))) for u in case]
            why = why or same_records(got, want)
            t.check(why is None, "B case %d (%d records, cap %d, %d Kinesis records): %s"
                    % (n, len(case), cap, len(ks), why))


def envelope(t, rng):
    """No magic: plain.  Damaged aggregate: corrupt, naming the MD5."""
    case = [{"pk": "k%d" % i, "ehk": None, "data": rng.randbytes(20)} for i in range(5)]
    agg = base64.b64decode(run_node({"op": "aggregate", "cases": [[
        {"pk": u["pk"], "ehk": None, "data": b64(u["data"])} for u in case]]})[0][0]["data"])
    bad = bytearray(agg)
    bad[len(bad) // 2] ^= 0x20
    answers = tool_deaggregate([b"plain text", b"", agg[:3], bytes(bad), agg])
    t.check(answers[0] == ("plain",) and answers[1] == ("plain",) and answers[2] == ("plain",),
            "records without the magic number: %r" % (answers[:3],))
    t.check(answers[3][0] == "corrupt" and "MD5" in answers[3][1], "damaged: %r" % (answers[3],))
    t.check(answers[4][0] == "ok" and len(answers[4][1]) == 5, "intact: %r" % (answers[4][0],))


def main():
    seed = int(os.environ.get("AGG_INTEROP_SEED", "20240611"))
    n_cases = int(os.environ.get("AGG_INTEROP_CASES", "300"))
    rng = random.Random(seed)
    print("seed %d, %d random cases each way" % (seed, n_cases))
    cases = [rand_case(rng) for _ in range(n_cases)]
    # Fixed shapes: one record, one empty record, many tiny records with one
    # key, and more than aws-kinesis-agg's 1 MB in one case.
    cases.append([{"pk": "solo", "ehk": None, "data": b"x"}])
    cases.append([{"pk": "empty", "ehk": "0", "data": b""}])
    cases.append([{"pk": "same", "ehk": None, "data": bytes([i % 256])} for i in range(3000)])
    cases.append([{"pk": "big%d" % i, "ehk": None, "data": rng.randbytes(200000)} for i in range(7)])
    t = Tally()
    envelope(t, rng)
    direction_a(cases, t)
    direction_b(cases, t, rng)
    print("%d passed, %d failed" % (t.passed, t.failed))
    return 0 if t.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
