"""faultproxy.py's limit mode, continued: two stream settings the local
servers do not know, emulated in front of them.

Large records (MaxRecordSizeInKiB, 1,024 to 10,240):
  CreateStream           the field is remembered (out of range:
                         ValidationException) and passed on
  UpdateMaxRecordSize    ValidationException out of range; passed on to
                         the server (kinesis-local knows it and raises its
                         own limit), answered here when the server does
                         not know the operation (kinesalite); HTTP 200 with
                         an empty body, as the reference documents
  DescribeStreamSummary  StreamDescriptionSummary.MaxRecordSizeInKiB
  PutRecord(s)           a record whose data and partition key exceed the
                         limit is refused with InvalidArgumentException
                         (PutRecord: HTTP 400; PutRecords: in its place);
                         a PutRecords request over 10 MiB (5 MiB on a
                         stream of 1 MiB records) with ValidationException.
                         Records under the limit go to the server:
                         kinesis-local stores up to its own limit;
                         kinesalite refuses any data over 1 MiB with its
                         ValidationException, which is passed on as is,
                         so large records are tested on kinesis-local.

Service-managed record distribution (RecordDistributionStrategy AUTO):
  UpdateStreamRecordDistributionStrategy  answered here: StreamARN and a
                         strategy (AUTO or USER_PARTITION_KEY) required
                         (ValidationException), AUTO on a stream not
                         ON_DEMAND refused (InvalidArgumentException)
  DescribeStreamSummary  StreamDescriptionSummary.RecordDistributionStrategy
                         (assumed to be the request's field name; the
                         reference does not show the response yet)
  PutRecord(s)           PartitionKey optional and ignored, ExplicitHashKey
                         ignored: the shard is picked here, round robin
                         over the open shards, and the record goes to the
                         server with that shard's starting hash key;
                         SequenceNumberForOrdering refused
                         (InvalidArgumentException).  A record without a
                         key is stored under NO_KEY, which
  GetRecords, SubscribeToShard  take out again: the reader sees a record
                         without PartitionKey, as the service answers.

The stream mode comes from the server's StreamModeDetails, else from
what CreateStream asked for (kinesalite knows no modes: an ON_DEMAND
stream is created there with ON_DEMAND_SHARDS shards).
"""

from __future__ import annotations

import json

from kinesis_limits import MIB, base64_len

NO_KEY = "lab-no-partition-key-5b8e0c"
KIB_MIN, KIB_MAX, KIB_DEFAULT = 1024, 10240, 1024
ON_DEMAND_SHARDS = 4


def record_size(r: dict) -> int:
    """What the record limit counts: data blob and partition key."""
    return base64_len(r.get("Data") or "") + len((r.get("PartitionKey") or "").encode())


def request_limit(kib: int) -> int:
    return 10 * MIB if kib > KIB_DEFAULT else 5 * MIB


class StreamSettings:
    """The emulated settings of each stream, by name."""

    def __init__(self):
        self.max_kib: dict = {}
        self.strategy: dict = {}
        self.mode: dict = {}      # asked at creation
        self.next_shard: dict = {}

    def kib(self, stream) -> int:
        return self.max_kib.get(stream, KIB_DEFAULT)

    def auto(self, stream) -> bool:
        return self.strategy.get(stream) == "AUTO"

    def pick(self, stream, smap) -> tuple:
        """AUTO: the next open shard, round robin (id, starting hash key)."""
        ranges = smap.ranges
        i = self.next_shard.get(stream, 0) % len(ranges)
        self.next_shard[stream] = i + 1
        return ranges[i][2], ranges[i][0]


def error_body(kind: str, message: str) -> bytes:
    return json.dumps({"__type": kind, "message": message}).encode()


def check_put(settings: StreamSettings, stream: str, action: str, data: dict,
              records: list):
    """Refusals of a whole PutRecord(s) call: (error type, message) or None;
    and the indices of PutRecords entries refused in place, with their
    error."""
    kib = settings.kib(stream)
    if action == "PutRecord":
        if settings.auto(stream) and "SequenceNumberForOrdering" in data:
            return ("InvalidArgumentException", "SequenceNumberForOrdering is not "
                    "supported on a stream with RecordDistributionStrategy AUTO."), {}
        if record_size(data) > kib * 1024:
            return ("InvalidArgumentException", f"Record size {record_size(data)} "
                    f"exceeds the stream's MaxRecordSizeInKiB of {kib}."), {}
        return None, {}
    total = sum(record_size(r) for r in records if isinstance(r, dict))
    if total > request_limit(kib):
        return ("ValidationException", f"Request size {total} exceeds the limit of "
                f"{request_limit(kib)} bytes."), {}
    refused = {}
    for i, r in enumerate(records):
        if isinstance(r, dict) and record_size(r) > kib * 1024:
            refused[i] = ("InvalidArgumentException", f"Record size {record_size(r)} "
                          f"exceeds the stream's MaxRecordSizeInKiB of {kib}.")
    return None, refused


def place(settings: StreamSettings, stream: str, smap, r: dict) -> None:
    """AUTO: the record goes where the emulated service puts it."""
    _, start = settings.pick(stream, smap)
    r["ExplicitHashKey"] = str(start)
    if not r.get("PartitionKey"):
        r["PartitionKey"] = NO_KEY


def strip_no_key(records: list) -> bool:
    """Takes NO_KEY out of records read back; whether any was."""
    changed = False
    for r in records:
        if isinstance(r, dict) and r.get("PartitionKey") == NO_KEY:
            del r["PartitionKey"]
            changed = True
    return changed


def describe_summary(settings: StreamSettings, stream: str, raw: bytes) -> bytes:
    try:
        value = json.loads(raw)
        summary = value["StreamDescriptionSummary"]
    except (ValueError, KeyError, TypeError):
        return raw
    if stream in settings.max_kib or summary.get("MaxRecordSizeInKiB") is None:
        summary["MaxRecordSizeInKiB"] = settings.kib(stream)
    summary["RecordDistributionStrategy"] = settings.strategy.get(stream,
                                                                  "USER_PARTITION_KEY")
    if "StreamModeDetails" not in summary:
        summary["StreamModeDetails"] = {"StreamMode": settings.mode.get(stream,
                                                                        "PROVISIONED")}
    return json.dumps(value).encode()


def stream_mode(settings: StreamSettings, stream: str, summary_raw: bytes) -> str:
    try:
        summary = json.loads(summary_raw)["StreamDescriptionSummary"]
        return summary["StreamModeDetails"]["StreamMode"]
    except (ValueError, KeyError, TypeError):
        return settings.mode.get(stream, "PROVISIONED")
