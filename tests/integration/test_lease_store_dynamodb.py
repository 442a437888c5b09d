#!/usr/bin/env python3
"""The lease stores against real servers and real processes.

- The conformance suite (tests/support/lease_conformance.c, through
  tests/tools/lease_tool) on a DynamoDB table in dynalite, created by the
  store opened through a client, and on a SQLite file.
- Concurrent takers as separate processes, on DynamoDB and on one SQLite
  file: every round exactly one wins.
- KCL compatibility: items written with boto3 exactly as KCL 2.x/3.x
  writes them read back exactly; take, renew and checkpoint leave the
  attributes the library does not know untouched; items the library
  writes have the KCL's attribute names and types.
- Scan pagination over more than 1 MB of items.
- The membership: the side table TABLE-members created with the lease
  table, its one item as the heartbeat writes it, and the heartbeat
  unsupported (not failing the worker) without that table or the rights
  to it; on SQLite, the tables members and meta.
- Faults: throttling and 5xx from a fault proxy in front of dynalite are
  retried; a change whose response is lost is recognised on retry; faults
  that last end in a retriable error and change nothing.  A SQLite file
  locked by another process gives a retriable error and changes nothing.

Environment: LEASE_TOOL (set by ctest), KN_SOURCE_DIR.
"""
import base64
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("KN_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from groupkit import KCL_TYPES  # noqa: E402
import runkit  # noqa: E402

TOOL = os.environ.get("LEASE_TOOL")
KNCAT = os.environ.get("KNCAT")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


def tool(env, *args, timeout=300):
    """Runs lease_tool; returns (exit code, stdout)."""
    r = runkit.run([TOOL, *args], env=env, timeout=timeout)
    if r.returncode not in (0, 1):
        print(r.stderr, file=sys.stderr)
    return r.returncode, r.stdout.strip()


def tool_ok(env, *args):
    rc, out = tool(env, *args)
    check(rc == 0 and out.startswith("ok"),
          f"lease_tool {' '.join(map(str, args))}: {rc} {out}")
    parts = out.split()
    return int(parts[1]) if len(parts) > 1 and parts[0] == "ok" else None


def tool_json(env, *args):
    rc, out = tool(env, *args)
    if not check(rc == 0, f"lease_tool {' '.join(map(str, args))}: {out}"):
        return None
    return json.loads(out)


# ---------------------------------------------------------------------------
# Conformance and races


def conformance(env, spec, *opts):
    t0 = time.monotonic()
    r = runkit.run([TOOL, *opts, "conformance", spec], env=env, timeout=600)
    check(r.returncode == 0,
          f"conformance {spec}: {r.stdout.strip()}\n{r.stderr[-3000:]}")
    print(f"conformance {spec}: {r.stdout.strip()} "
          f"({time.monotonic() - t0:.1f} s)")


def race(env, spec, takers, rounds, *opts):
    """takers racer processes take the same lease at the same counter,
    round after round, each stealing from the last winner."""
    key = f"race-{os.getpid()}-{time.monotonic_ns()}"
    tool_ok(env, *opts, "create", spec,
            json.dumps({"key": key, "checkpoint": "TRIM_HORIZON"}))
    procs = [subprocess.Popen([TOOL, *opts, "racer", spec, key, f"taker-{i}"],
                              env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, bufsize=1)
             for i in range(takers)]
    try:
        for p in procs:
            check(p.stdout.readline().strip() == "ready", "racer ready")
        counter, owner, bad = 0, "-", 0
        for rnd in range(rounds):
            line = f"{counter} {owner}\n"
            for p in procs:  # all lines out first, then read: a real race
                p.stdin.write(line)
                p.stdin.flush()
            answers = [p.stdout.readline().strip() for p in procs]
            won = [i for i, a in enumerate(answers) if a.startswith("won")]
            lost = [a for a in answers if a == "lost"]
            ok = (len(won) == 1 and len(lost) == takers - 1
                  and answers[won[0]] == f"won {counter + 1}")
            if not ok:
                bad += 1
                print(f"{spec} round {rnd}: {answers}", file=sys.stderr)
                break
            counter, owner = counter + 1, f"taker-{won[0]}"
        check(bad == 0, f"{spec}: {takers} racing processes, {rounds} rounds")
        got = tool_json(env, *opts, "get", spec, key)
        check(got and got["counter"] == counter and got["owner"] == owner,
              f"{spec}: race end state {got}")
        print(f"race {spec}: {takers} processes x {rounds} rounds, "
              f"{'one winner each' if not bad else 'FAILED'}")
    finally:
        for p in procs:
            p.stdin.close()
        for p in procs:
            p.wait(timeout=30)


# ---------------------------------------------------------------------------
# KCL compatibility

BIG_SEQ = "49590338271490256608559692538361571095921575989136588898"
PENDING_SEQ = "49590338271490256608559692538361571095921575989136589000"
STATE = b"\x00\x01kcl-state\xff"

# Items as the KCL's DynamoDBLeaseSerializer writes them.
KCL_ITEMS = [
    {   # owned, mid-shard, pending checkpoint with state, KCL 3.x extras
        "leaseKey": {"S": "shardId-000000000004"},
        "leaseOwner": {"S": "kcl-worker-1"},
        "leaseCounter": {"N": "42"},
        "ownerSwitchesSinceCheckpoint": {"N": "3"},
        "checkpoint": {"S": BIG_SEQ},
        "checkpointSubSequenceNumber": {"N": "5"},
        "pendingCheckpoint": {"S": PENDING_SEQ},
        "pendingCheckpointSubSequenceNumber": {"N": "2"},
        "pendingCheckpointState": {"B": STATE},
        "parentShardId": {"SS": ["shardId-000000000001"]},
        "startingHashKey": {"S": "0"},
        "endingHashKey": {"S": "170141183460469231731687303715884105727"},
        "throughputKBps": {"N": "12.5"},
        "checkpointOwner": {"S": "kcl-worker-2"},
        "entityType": {"S": "LEASE"},
    },
    {   # a closed parent, free, with its children (a split)
        "leaseKey": {"S": "shardId-000000000001"},
        "leaseCounter": {"N": "17"},
        "ownerSwitchesSinceCheckpoint": {"N": "0"},
        "checkpoint": {"S": "SHARD_END"},
        "checkpointSubSequenceNumber": {"N": "0"},
        "childShardIds": {"SS": ["shardId-000000000004",
                                 "shardId-000000000005"]},
        "startingHashKey": {"S": "0"},
        "endingHashKey": {"S": "340282366920938463463374607431768211455"},
    },
    {   # a new child of a merge, both parents, at TRIM_HORIZON
        "leaseKey": {"S": "shardId-000000000009"},
        "leaseOwner": {"S": "kcl-worker-2"},
        "leaseCounter": {"N": "0"},
        "ownerSwitchesSinceCheckpoint": {"N": "0"},
        "checkpoint": {"S": "TRIM_HORIZON"},
        "checkpointSubSequenceNumber": {"N": "0"},
        "parentShardId": {"SS": ["shardId-000000000005",
                                 "shardId-000000000006"]},
        "startingHashKey": {"S": "170141183460469231731687303715884105728"},
        "endingHashKey": {"S": "340282366920938463463374607431768211455"},
    },
    {   # KCL 3.x coordinator state in the lease table: not a lease
        "leaseKey": {"S": "Leader"},
        "entityType": {"S": "LEADER"},
        "leaderId": {"S": "kcl-worker-1"},
    },
]

EXPECTED_4 = {
    "key": "shardId-000000000004", "owner": "kcl-worker-1", "counter": 42,
    "owner_switches": 3, "checkpoint": BIG_SEQ, "checkpoint_subseq": 5,
    "pending": PENDING_SEQ, "pending_subseq": 2,
    "pending_state": STATE.hex(), "parents": ["shardId-000000000001"],
    "children": [], "hash_start": "0",
    "hash_end": "170141183460469231731687303715884105727",
    "checkpoint_owner": "kcl-worker-2",
    "extra": {"entityType": {"S": "LEASE"},
              "throughputKBps": {"N": "12.5"}},
}



def types_of(item):
    return {k: next(iter(v)) for k, v in item.items()}


def create_kcl_table(ddb, table):
    ddb.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "leaseKey",
                               "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST")
    ddb.get_waiter("table_exists").wait(
        TableName=table, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})


def kcl_compat(d, env):
    ddb = lab.boto3_client("dynamodb", d)
    table = "kcl_app"
    spec = f"dynamodb:{table}"
    create_kcl_table(ddb, table)
    for item in KCL_ITEMS:
        ddb.put_item(TableName=table, Item=item)

    # Read back exactly.
    got = tool_json(env, "get", spec, "shardId-000000000004")
    check(got == EXPECTED_4, f"KCL item read back: {got}")
    got = tool_json(env, "get", spec, "shardId-000000000001")
    check(got and got["owner"] is None and got["checkpoint"] == "SHARD_END"
          and sorted(got["children"]) == ["shardId-000000000004",
                                          "shardId-000000000005"]
          and got["counter"] == 17 and got["extra"] is None,
          f"closed KCL lease: {got}")
    rc, out = tool(env, "get", spec, "Leader")
    check(rc == 1 and out.startswith("error _NOT_FOUND"),
          f"coordinator state is not a lease: {out}")
    leases = tool_json(env, "list", spec) or []
    check(sorted(l["key"] for l in leases) ==
          ["shardId-000000000001", "shardId-000000000004",
           "shardId-000000000009"], f"list: {[l['key'] for l in leases]}")
    merged = [l for l in leases if l["key"] == "shardId-000000000009"]
    check(merged and sorted(merged[0]["parents"]) ==
          ["shardId-000000000005", "shardId-000000000006"], "merge parents")

    # take (steal), renew, prepare, checkpoint, children: KCL 3.x
    # attributes untouched (but the hand-off under way, which a take
    # ends, as the KCL 3.x's), counters as the KCL moves them.
    key = "shardId-000000000004"
    check(tool_ok(env, "take", spec, key, 42, "kcl-worker-1", "kn-w") == 43,
          "steal from a KCL worker")
    check(tool_ok(env, "renew", spec, key, 43, "kn-w") == 44, "renew")
    check(tool_ok(env, "checkpoint", spec, key, 44, "kn-w", "-", 0,
                  "49590338271490256608559692538361571095921575989136589100",
                  0, "0102") == 45, "prepare")
    item = ddb.get_item(TableName=table, Key={"leaseKey": {"S": key}},
                        ConsistentRead=True)["Item"]
    check(item["pendingCheckpointState"] == {"B": b"\x01\x02"},
          f"state as B: {item.get('pendingCheckpointState')}")
    check(item["checkpoint"] == {"S": BIG_SEQ}, "prepare keeps checkpoint")
    check(item["ownerSwitchesSinceCheckpoint"] == {"N": "4"},
          f"steal counted: {item['ownerSwitchesSinceCheckpoint']}")
    check(tool_ok(env, "checkpoint", spec, key, 45, "kn-w",
                  "49590338271490256608559692538361571095921575989136589100",
                  7) == 46, "checkpoint")
    tool_ok(env, "children", spec, key, "shardId-000000000010",
            "shardId-000000000011")
    item = ddb.get_item(TableName=table, Key={"leaseKey": {"S": key}},
                        ConsistentRead=True)["Item"]
    want = {
        "leaseKey": {"S": key}, "leaseOwner": {"S": "kn-w"},
        "leaseCounter": {"N": "46"},
        "ownerSwitchesSinceCheckpoint": {"N": "0"},
        "checkpoint": {"S": "49590338271490256608559692538361571095921575989136589100"},
        "checkpointSubSequenceNumber": {"N": "7"},
        "parentShardId": {"SS": ["shardId-000000000001"]},
        "childShardIds": {"SS": ["shardId-000000000010",
                                 "shardId-000000000011"]},
        "startingHashKey": {"S": "0"},
        "endingHashKey": {"S": "170141183460469231731687303715884105727"},
        "throughputKBps": {"N": "12.5"},
        "entityType": {"S": "LEASE"},
    }
    if "childShardIds" in item:
        item["childShardIds"]["SS"].sort()
    check(item == want, f"after take/renew/checkpoint:\n {item}\n {want}")

    # Release: leaseOwner gone, counter + 1, extras still there.
    check(tool_ok(env, "release", spec, key, 46, "kn-w") == 47, "release")
    item = ddb.get_item(TableName=table, Key={"leaseKey": {"S": key}},
                        ConsistentRead=True)["Item"]
    check("leaseOwner" not in item and item["leaseCounter"] == {"N": "47"}
          and item["throughputKBps"] == {"N": "12.5"},
          f"released: {item}")

    # What the library writes: the KCL's names and types, nothing else.
    full = {"key": "shardId-000000000020", "owner": "kn-w", "counter": 3,
            "owner_switches": 1, "checkpoint": BIG_SEQ,
            "checkpoint_subseq": 2, "pending": PENDING_SEQ,
            "pending_subseq": 1, "pending_state": "00ff",
            "parents": ["shardId-000000000004"],
            "children": ["shardId-000000000021"], "hash_start": "5",
            "hash_end": "10"}
    tool_ok(env, "create", spec, json.dumps(full))
    item = ddb.get_item(TableName=table,
                        Key={"leaseKey": {"S": full["key"]}},
                        ConsistentRead=True)["Item"]
    check(types_of(item) == KCL_TYPES, f"written types: {types_of(item)}")
    check(item["leaseCounter"] == {"N": "3"}
          and item["pendingCheckpointState"] == {"B": b"\x00\xff"}
          and item["checkpoint"] == {"S": BIG_SEQ}, f"written values: {item}")
    tool_ok(env, "create", spec, json.dumps(
        {"key": "shardId-000000000022", "checkpoint": "TRIM_HORIZON"}))
    item = ddb.get_item(TableName=table,
                        Key={"leaseKey": {"S": "shardId-000000000022"}},
                        ConsistentRead=True)["Item"]
    check(types_of(item) == {"leaseKey": "S", "leaseCounter": "N",
                             "ownerSwitchesSinceCheckpoint": "N",
                             "checkpoint": "S",
                             "checkpointSubSequenceNumber": "N"},
          f"a free lease has no leaseOwner: {types_of(item)}")
    print("KCL compatibility: checked")


def concurrent_ensure(d, env):
    """Workers starting together all create the missing table: every one
    succeeds (ResourceInUse from the losers is fine)."""
    spec = "dynamodb:ensure_race_app"
    procs = [subprocess.Popen([TOOL, "ensure", spec], env=env,
                              stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    check(all(p.returncode == 0 and o == "ok" for p, o in zip(procs, outs)),
          f"concurrent ensure_table: {outs}")
    ddb = lab.boto3_client("dynamodb", d)
    status = ddb.describe_table(TableName="ensure_race_app")["Table"]["TableStatus"]
    check(status == "ACTIVE", f"concurrent ensure_table: table {status}")
    status = ddb.describe_table(
        TableName="ensure_race_app-members")["Table"]["TableStatus"]
    check(status == "ACTIVE",
          f"concurrent ensure_table: membership table {status}")
    print(f"concurrent ensure_table: {outs}")


def table_created_by_store(d):
    ddb = lab.boto3_client("dynamodb", d)
    t = ddb.describe_table(TableName="conformance_app")["Table"]
    check(t["KeySchema"] == [{"AttributeName": "leaseKey", "KeyType": "HASH"}],
          f"key schema {t['KeySchema']}")
    check(t["AttributeDefinitions"] == [{"AttributeName": "leaseKey",
                                         "AttributeType": "S"}],
          f"attributes {t['AttributeDefinitions']}")
    mode = t.get("BillingModeSummary", {}).get("BillingMode")
    check(mode in (None, "PAY_PER_REQUEST"), f"billing mode {mode}")


def membership(d, env, db):
    """The heartbeat on DynamoDB (the side table, its item) and SQLite."""
    ddb = lab.boto3_client("dynamodb", d)
    t = ddb.describe_table(TableName="conformance_app-members")["Table"]
    check(t["KeySchema"] == [{"AttributeName": "key", "KeyType": "HASH"}]
          and t["AttributeDefinitions"] == [{"AttributeName": "key",
                                             "AttributeType": "S"}],
          f"membership table key {t['KeySchema']}")
    mode = t.get("BillingModeSummary", {}).get("BillingMode")
    check(mode in (None, "PAY_PER_REQUEST"), f"membership billing mode {mode}")
    spec = "dynamodb:conformance_app"
    got = tool_json(env, "heartbeat", spec, "it-w1", 3, 1, 2)
    e0 = got["epoch"] if got else 0
    got = tool_json(env, "heartbeat", spec, "it-w2", 8, 0, 0) or {}
    mine = [m for m in got.get("members", []) if m["worker"].startswith("it-")]
    check(mine == [{"worker": "it-w1", "beat": 3, "leases": 1},
                   {"worker": "it-w2", "beat": 8, "leases": 0}]
          and got.get("epoch") == e0, f"two members: {got}")
    item = ddb.get_item(TableName="conformance_app-members",
                        Key={"key": {"S": "members"}},
                        ConsistentRead=True)["Item"]
    check(item["w:it-w1"] == {"L": [{"N": "3"}, {"N": "1"}]}
          and item["epoch"] == {"N": str(e0)}
          and all(k in ("key", "epoch") or k.startswith("w:") for k in item),
          f"membership item: {item}")
    got = tool_json(env, "heartbeat", spec, "it-w2", 9, 0, 0, "it-w1") or {}
    check(not any(m["worker"] == "it-w1" for m in got.get("members", [])),
          f"forgotten: {got}")

    # A lease table made by other means, without the side table: the
    # heartbeat is unsupported, not an error to retry.
    create_kcl_table(ddb, "bare_app")
    rc, out = tool(env, "heartbeat", "dynamodb:bare_app", "w1", 1, 0, 0)
    check(rc == 1 and out.startswith("error _UNSUPPORTED 0")
          and "does not exist" in out, f"no membership table: {out}")
    with FaultProxy(d) as proxy:
        penv = dict(env, AWS_ENDPOINT_URL_DYNAMODB=proxy.endpoint)
        proxy.add_rule("status", "UpdateItem", count=1,
                       error="AccessDeniedException")
        rc, out = tool(penv, "heartbeat", spec, "it-w2", 10, 0, 0)
        check(rc == 1 and out.startswith("error _UNSUPPORTED 0"),
              f"membership access denied: {out}")
        proxy.clear_rules()
        proxy.add_rule("status", "UpdateItem",
                       error="ProvisionedThroughputExceededException")
        rc, out = tool(penv, "-X", "retry.max.attempts=2", "-X",
                       "retry.backoff.max.ms=100", "heartbeat", spec,
                       "it-w2", 11, 0, 0)
        check(rc == 1 and out.startswith(
            "error PROVISIONED_THROUGHPUT_EXCEEDED 1"),
            f"membership throttled: {out}")
        proxy.clear_rules()

    # kncat leases shows the members after the leases, and writes nothing
    if KNCAT:
        for store in (spec, f"sqlite:{db}"):
            tool_json(env, "heartbeat", store, "it-k1", 4, 2, 0)
            before = tool_json(env, "heartbeat", store, "it-k1", 5, 2, 0)
            r = runkit.kncat("leases", "app", "--leases", store, "-J",
                             kncat=KNCAT, env=env, timeout=60)
            rows = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
            members = [x for x in rows if "worker" in x]
            check(r.returncode == 0 and {"worker": "it-k1", "leases": 2,
                                         "beat": 5, "epoch": before["epoch"]}
                  in members and all("shard" in x for x in rows[:len(rows) -
                                                               len(members)]),
                  f"kncat leases -J {store}: {r.returncode} {r.stdout[-500:]}"
                  f" {r.stderr}")
            r = runkit.kncat("leases", "app", "--leases", store, kncat=KNCAT,
                             env=env, timeout=60)
            lines = r.stdout.splitlines()
            tail = lines[lines.index("") + 1:] if "" in lines else []
            check(r.returncode == 0 and tail
                  and tail[0].split() == ["WORKER", "LEASES", "BEAT"]
                  and ["it-k1", "2", "5"] in [x.split() for x in tail]
                  and tail[-1] == f"EPOCH {before['epoch']}",
                  f"kncat leases {store}: {r.stdout[-500:]} {r.stderr}")
            # the same heartbeat again: anything kncat wrote would show
            after = tool_json(env, "heartbeat", store, "it-k1", 5, 2, 0)
            check(after == before, f"kncat leases wrote: {before} {after}")
        r = runkit.kncat("leases", "bare_app", "--leases", "dynamodb:bare_app",
                         "-J", kncat=KNCAT, env=env, timeout=60)
        check(r.returncode == 0 and r.stdout == "",
              f"kncat leases without membership: {r.returncode} {r.stdout}"
              f" {r.stderr}")

    sspec = f"sqlite:{db}"
    tool_json(env, "heartbeat", sspec, "it-w1", 1, 4, 1)
    got = tool_json(env, "heartbeat", sspec, "it-w2", 2, 0, 0) or {}
    con = sqlite3.connect(db)
    rows = con.execute("SELECT worker, beat, leases FROM members "
                       "WHERE worker LIKE 'it-w%' ORDER BY worker").fetchall()
    epoch = con.execute("SELECT value FROM meta WHERE name = 'epoch'")
    epoch = epoch.fetchone()[0]
    con.close()
    check(rows == [("it-w1", 1, 4), ("it-w2", 2, 0)]
          and got.get("epoch") == epoch,
          f"sqlite membership: {rows} epoch {epoch}, {got}")
    print("membership: checked")


def big_scan(d, env):
    """More than 1 MB of items: list follows LastEvaluatedKey."""
    ddb = lab.boto3_client("dynamodb", d)
    table = "big_app"
    create_kcl_table(ddb, table)
    pad = "x" * 10000
    n = 160
    for start in range(0, n, 25):
        ddb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {
                "leaseKey": {"S": f"shardId-{i:012d}"},
                "leaseCounter": {"N": str(i)},
                "checkpoint": {"S": "LATEST"},
                "pad": {"S": pad}}}}
            for i in range(start, min(n, start + 25))]})
    with FaultProxy(d) as proxy:
        penv = dict(env, AWS_ENDPOINT_URL_DYNAMODB=proxy.endpoint)
        leases = tool_json(penv, "list", f"dynamodb:{table}") or []
        scans = len(proxy.requests("Scan"))
    check(len(leases) == n, f"big scan: {len(leases)} leases of {n}")
    check(all(l["extra"] == {"pad": {"S": pad}} for l in leases),
          "big scan: unknown attributes kept")
    check(sorted(l["counter"] for l in leases) == list(range(n)),
          "big scan: counters")
    check(scans >= 2, f"big scan: {scans} Scan pages for 1.6 MB")
    print(f"big scan: {n} leases of 10 KB in {scans} pages")


# ---------------------------------------------------------------------------
# Faults


def faults(d, env):
    spec = "dynamodb:fault_app"
    key = "shardId-000000000000"
    tool_ok(env, "ensure", spec)
    tool_ok(env, "create", spec, json.dumps({"key": key,
                                             "checkpoint": "TRIM_HORIZON"}))
    with FaultProxy(d) as proxy:
        penv = dict(env, AWS_ENDPOINT_URL_DYNAMODB=proxy.endpoint)
        counter = 0

        def step(rule, what, **params):
            nonlocal counter
            proxy.clear_rules()
            proxy.clear_log()
            proxy.add_rule(*rule, **params)
            if counter == 0:
                got = tool_ok(penv, "take", spec, key, 0, "-", "w1")
            else:
                got = tool_ok(penv, "renew", spec, key, counter, "w1")
            check(got == counter + 1, f"{what}: counter {got}")
            counter += 1
            return [r.status for r in proxy.requests("UpdateItem")]

        st = step(("status", "UpdateItem"), "throughput exceeded",
                  count=2, error="ProvisionedThroughputExceededException")
        check(st == [400, 400, 200], f"throughput exceeded retried: {st}")
        st = step(("status", "UpdateItem"), "throttling",
                  count=2, error="ThrottlingException")
        check(st == [400, 400, 200], f"throttling retried: {st}")
        st = step(("status", "UpdateItem"), "500", count=2, status=500)
        check(st == [500, 500, 200], f"500 retried: {st}")
        st = step(("status", "UpdateItem"), "503", count=1, status=503)
        check(st == [503, 200], f"503 retried: {st}")
        step(("reset", "UpdateItem"), "connection reset", count=1)
        # Applied, then answered 500: the retry fails its condition and
        # the store recognises its own change.
        st = step(("status", "UpdateItem"), "lost response", count=1,
                  status=500, forward=True)
        check(st[:1] == [500] and len(proxy.requests("GetItem")) >= 1,
              f"lost response: {st}")

        # Faults that outlast the retries: a retriable error, no change.
        for what, params in (("500", {"status": 500}),
                             ("throttling",
                              {"error": "ProvisionedThroughputExceededException"})):
            proxy.clear_rules()
            proxy.add_rule("status", "UpdateItem", **params)
            t0 = time.monotonic()
            rc, out = tool(penv, "-X", "retry.max.attempts=3", "-X",
                           "retry.backoff.max.ms=200", "renew", spec, key,
                           counter, "w1")
            check(rc == 1 and out.split()[:3] in (
                ["error", "INTERNAL_FAILURE", "1"],
                ["error", "PROVISIONED_THROUGHPUT_EXCEEDED", "1"]),
                f"lasting {what}: {out}")
            print(f"lasting {what}: gave up after {time.monotonic() - t0:.1f} s:"
                  f" {out[:120]}")
        proxy.clear_rules()
    got = tool_json(env, "get", spec, key)
    check(got and got["counter"] == counter and got["owner"] == "w1",
          f"nothing changed by failed calls: {got}")
    print("faults: checked")


def sqlite_locked(env, path):
    """Another process holds the write lock past the busy timeout."""
    spec = f"sqlite:{path}"
    key = "shardId-locked"
    tool_ok(env, "create", spec, json.dumps({"key": key}))
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    t0 = time.monotonic()
    rc, out = tool(env, "--busy-ms", 300, "take", spec, key, 0, "-", "w1")
    took = time.monotonic() - t0
    check(rc == 1 and out.startswith("error _IO 1") and "locked" in out,
          f"locked file: {out}")
    # Not before the busy time-out; the upper bound only tells a hang.
    check(0.3 <= took < 30, f"locked file: gave up after {took:.2f} s")
    got = tool_json(env, "--busy-ms", 300, "get", spec, key)  # WAL readers
    con.execute("ROLLBACK")
    con.close()
    check(got and got["owner"] is None and got["counter"] == 0,
          f"locked file: nothing changed: {got}")
    check(tool_ok(env, "take", spec, key, 0, "-", "w1") == 1,
          "unlocked: works again")
    print(f"sqlite locked: {out[:100]}")


def main():
    if not TOOL or not os.path.exists(TOOL):
        print("LEASE_TOOL not set or missing", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="kn-lease-it-") as tmp, \
            lab.Dynalite() as d:
        env = lab.env_for(dynamodb=d)
        conformance(env, "dynamodb:conformance_app", "--scan-limit", "7",
                    "--threads", "4", "--rounds", "15", "--many", "60")
        table_created_by_store(d)
        concurrent_ensure(d, env)
        # Through a kn_client_t (the default) above, with a service handle
        # of the store's own here.
        race(env, "dynamodb:conformance_app", 4, 40, "--via", "own")
        db = os.path.join(tmp, "leases.db")
        conformance(env, f"sqlite:{db}", "--threads", "6", "--rounds", "100")
        race(env, f"sqlite:{db}", 6, 150)
        membership(d, env, db)
        kcl_compat(d, env)
        big_scan(d, env)
        faults(d, env)
        sqlite_locked(env, db)
    print("OK" if not failures else f"{failures} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
