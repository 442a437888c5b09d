"""The real peers (tests/lab/java, built by `make peers`) as processes the
interoperability tests and benchmarks drive next to `kncat`:

- `KclWorker`: a KCL 2.x or 3.x consumer (dev.libkinesis.lab.Consume),
  with the interface of groupkit.Worker (records(), count(), signal(),
  stop(), wait(), stderr()), its JSON lines in the shape of
  `kncat group -J`;
- `java_cmd(module, main)`: the command line of one harness class;
- `create_kcl3_table(ddb, table)`: a lease table the KCL 3.x can use on
  dynalite.

Needs tests/integration on sys.path (groupkit).
"""

from __future__ import annotations

import os
from pathlib import Path

from groupkit import Worker

SOURCE_DIR = Path(__file__).resolve().parents[2]
JAVA_DIR = SOURCE_DIR / "tests" / "lab" / "java"
MODULES = ("kcl2", "kcl3", "kpl", "multilang")


def classpath(module: str) -> str:
    d = JAVA_DIR / module / "target"
    return f"{d / 'classes'}:{d / 'lib'}/*"


def installed(module: str) -> bool:
    return (JAVA_DIR / module / "target" / "lib").is_dir()


def java_cmd(module: str, main: str, jvm=()) -> list[str]:
    if not installed(module):
        raise RuntimeError(f"tests/lab/java/{module} is not built: run make peers")
    return ["java", *jvm, "-cp", classpath(module), main]


class KclWorker(Worker):
    """One KCL consumer process (module "kcl2" or "kcl3").  opts are the
    harness's options without the leading dashes (failover-ms,
    checkpoint-ms, idle-ms, shard-sync-ms, client-version, ...)."""

    def __init__(self, module: str, env: dict, stream: str, app: str,
                 wid: str, kinesis: str, dynamodb: str, opts: dict | None = None,
                 log_dir: str | os.PathLike = ".", jvm=()):
        args = java_cmd(module, "dev.libkinesis.lab.Consume", jvm)
        args += ["--stream", stream, "--app", app, "--worker", wid,
                 "--kinesis", kinesis, "--dynamodb", dynamodb]
        for k, v in (opts or {}).items():
            args += [f"--{k}", str(v)]
        self._spawn(args, env, wid, log_dir)


def create_kcl3_table(ddb, table: str):
    """The lease table as the KCL 3.x wants it, with its lease-owner index
    made at creation: dynalite cannot add an index to a table (UpdateTable
    with GlobalSecondaryIndexUpdates: refused on an on-demand table,
    ignored on a provisioned one), which the KCL 3.x does at start."""
    ddb.create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"},
                              {"AttributeName": "leaseOwner", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[{
            "IndexName": "LeaseOwnerToLeaseKeyIndex",
            "KeySchema": [{"AttributeName": "leaseOwner", "KeyType": "HASH"},
                          {"AttributeName": "leaseKey", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    ddb.get_waiter("table_exists").wait(
        TableName=table, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
