#!/usr/bin/env python3
"""Counts what DynamoDB calls would cost, from the requests and responses
seen on the wire (by a FaultProxy observer in front of dynalite).

For every action (Scan, Query, GetItem, PutItem, UpdateItem, DeleteItem,
Batch*, and the rest as bare requests) it counts requests, errors, items
read and written, the bytes of those items and the read and write
capacity units DynamoDB would bill for them:

  item size    attribute names plus values as DynamoDB sizes them: strings
               and binaries by their bytes, numbers about one byte per two
               significant digits plus one, booleans and nulls one byte,
               lists and maps 3 bytes plus one per element plus the
               elements, sets the sum of their elements
  reads        Scan and Query: the items evaluated (ScannedCount) summed
               per request and rounded up to 4 KB, one unit per 4 KB,
               half with eventually consistent reads (no ConsistentRead,
               and always on an index); at least one unit (half) a request.
               GetItem: the item's size rounded up to 4 KB, a miss costs
               one unit (half) too
  writes       PutItem, UpdateItem, DeleteItem: the larger of the item
               before and after, rounded up to 1 KB, at least one unit,
               failed conditions included; plus the writes the table's
               global secondary indexes get (an index entry put, deleted,
               or both when its key changes; rewritten when a projected
               attribute changes)

The item sizes before and after a write come from a shadow copy of each
table: every item a Scan, Query or GetItem returns is kept, and every
write is applied to it (SET/REMOVE/ADD/DELETE update expressions, Put,
Delete).  A write to an item the shadow has not seen yet counts its size
after the write only (`blind` says how many).  Index definitions are
learnt from CreateTable, UpdateTable and DescribeTable as they pass.

    counter = DynamoCounter()
    with FaultProxy(dynalite, observer=counter.observe, keep_log=False) as p:
        ... run clients against p.endpoint ...
    snap = counter.snapshot()          # {action: Tally}, may be diffed

With timeline=True the counter also keeps, per table and item key, the
write and read units billed to that item by tenths of a second, so the
hottest item (a partition DynamoDB caps at 1,000 WCU/s and 3,000 RCU/s)
can be found per window: item_windows(t0, t1, width).  Index writes are
left out (they land on the index's partitions); a Scan or Query is billed
to a pseudo-item named after the action, its reads spread over the
table's partitions.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import re
import threading
import time
from dataclasses import dataclass, fields
from decimal import Decimal, InvalidOperation

READ_UNIT = 4096
WRITE_UNIT = 1024
DEFAULT_KEY = ("leaseKey",)


# --------------------------------------------------------------------------
# Sizes


def _num_size(text: str) -> int:
    digits = text.lstrip("+-").replace(".", "")
    digits = re.split(r"[eE]", digits)[0].strip("0") or "0"
    return (len(digits) + 1) // 2 + 1 + (1 if text.startswith("-") else 0)


def value_size(v: dict) -> int:
    """Bytes of one AttributeValue (DynamoDB JSON) as DynamoDB counts them."""
    (t, x), = v.items()
    if t == "S":
        return len(x.encode())
    if t == "N":
        return _num_size(x)
    if t == "B":
        return len(base64.b64decode(x))
    if t in ("BOOL", "NULL"):
        return 1
    if t == "SS":
        return sum(len(s.encode()) for s in x)
    if t == "NS":
        return sum(_num_size(s) for s in x)
    if t == "BS":
        return sum(len(base64.b64decode(s)) for s in x)
    if t == "L":
        return 3 + sum(1 + value_size(e) for e in x)
    if t == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in x.items())
    return 0


def item_size(item: dict | None) -> int:
    if not item:
        return 0
    return sum(len(k.encode()) + value_size(v) for k, v in item.items())


def read_units(nbytes: int, consistent: bool) -> float:
    units = max(1, math.ceil(nbytes / READ_UNIT))
    return float(units) if consistent else units / 2.0


def write_units(nbytes: int) -> int:
    return max(1, math.ceil(nbytes / WRITE_UNIT))


# --------------------------------------------------------------------------
# Tallies


@dataclass
class Tally:
    requests: int = 0
    errors: int = 0          # answers other than 200 (failed conditions too)
    items_read: int = 0      # items evaluated: ScannedCount, GetItem hits
    items_returned: int = 0
    get_misses: int = 0
    bytes_read: int = 0
    rcu: float = 0.0
    items_written: int = 0   # successful writes
    failed_writes: int = 0   # failed conditions (billed all the same)
    bytes_written: int = 0
    wcu: int = 0             # table writes, failed conditions included
    index_wcu: int = 0       # global secondary index writes
    blind: int = 0           # writes to items the shadow had not seen

    def add(self, other: "Tally") -> "Tally":
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def minus(self, other: "Tally") -> "Tally":
        out = Tally()
        for f in fields(self):
            setattr(out, f.name, getattr(self, f.name) - getattr(other, f.name))
        return out

    @property
    def total_wcu(self) -> int:
        return self.wcu + self.index_wcu


def total(snap: dict) -> Tally:
    t = Tally()
    for v in snap.values():
        t.add(v)
    return t


def diff(after: dict, before: dict) -> dict:
    """after - before, per action (snapshots of one counter)."""
    return {a: t.minus(before.get(a, Tally())) for a, t in after.items()}


# --------------------------------------------------------------------------
# Update expressions, applied to the shadow item


_CLAUSE = re.compile(r"\b(SET|REMOVE|ADD|DELETE)\b", re.IGNORECASE)


def _split_top(text: str) -> list[str]:
    """Splits on commas outside parentheses."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _num(v: dict | None) -> Decimal:
    try:
        return Decimal(v["N"]) if v and "N" in v else Decimal(0)
    except InvalidOperation:
        return Decimal(0)


class _Expr:
    def __init__(self, names: dict, values: dict, item: dict):
        self.names, self.values, self.item = names or {}, values or {}, item

    def attr(self, path: str) -> str:
        top = re.split(r"[.\[]", path.strip(), maxsplit=1)[0]
        return self.names.get(top, top)

    def operand(self, text: str):
        text = text.strip()
        m = re.fullmatch(r"if_not_exists\s*\((.*)\)", text, re.S)
        if m:
            path, dflt = _split_top(m.group(1))
            cur = self.item.get(self.attr(path))
            return cur if cur is not None else self.operand(dflt)
        m = re.fullmatch(r"list_append\s*\((.*)\)", text, re.S)
        if m:
            a, b = (self.operand(x) for x in _split_top(m.group(1)))
            return {"L": (a or {}).get("L", []) + (b or {}).get("L", [])}
        for op in ("+", "-"):
            depth = 0
            for i, ch in enumerate(text):
                depth += ch == "("
                depth -= ch == ")"
                if ch == op and depth == 0 and i > 0:
                    a, b = self.operand(text[:i]), self.operand(text[i + 1:])
                    r = _num(a) + _num(b) if op == "+" else _num(a) - _num(b)
                    return {"N": str(r)}
        if text.startswith(":"):
            return self.values.get(text)
        return self.item.get(self.attr(text))


def apply_update(item: dict, req: dict) -> dict:
    """The item after UpdateItem req (a copy; item is left alone)."""
    new = copy.deepcopy(item)
    expr = req.get("UpdateExpression")
    if expr:
        e = _Expr(req.get("ExpressionAttributeNames"),
                  req.get("ExpressionAttributeValues"), item)
        parts = _CLAUSE.split(expr)
        for i in range(1, len(parts) - 1, 2):
            kind, body = parts[i].upper(), parts[i + 1]
            for clause in _split_top(body):
                if kind == "SET":
                    lhs, _, rhs = clause.partition("=")
                    v = e.operand(rhs)
                    if v is not None:
                        new[e.attr(lhs)] = v
                elif kind == "REMOVE":
                    new.pop(e.attr(clause), None)
                elif kind in ("ADD", "DELETE"):
                    path, _, val = clause.strip().partition(" ")
                    a, v = e.attr(path), e.operand(val)
                    if v is None:
                        continue
                    cur = new.get(a)
                    if "N" in v and kind == "ADD":
                        new[a] = {"N": str(_num(cur) + _num(v))}
                    else:
                        (t, xs), = v.items()
                        old = set((cur or {}).get(t, []))
                        old = old | set(xs) if kind == "ADD" else old - set(xs)
                        if old:
                            new[a] = {t: sorted(old)}
                        else:
                            new.pop(a, None)
    for a, upd in (req.get("AttributeUpdates") or {}).items():
        act = upd.get("Action", "PUT")
        if act == "DELETE" and "Value" not in upd:
            new.pop(a, None)
        elif act == "PUT":
            new[a] = upd["Value"]
        elif act == "ADD" and "N" in upd.get("Value", {}):
            new[a] = {"N": str(_num(new.get(a)) + _num(upd["Value"]))}
    for k, v in (req.get("Key") or {}).items():
        new[k] = v
    return new


# --------------------------------------------------------------------------
# The counter


@dataclass
class _Index:
    keys: tuple
    projection: str          # ALL, KEYS_ONLY, INCLUDE
    include: tuple = ()


class _Table:
    def __init__(self):
        self.key: tuple = DEFAULT_KEY
        self.items: dict = {}
        self.indexes: dict[str, _Index] = {}

    def key_of(self, item_or_key: dict) -> str:
        return json.dumps([item_or_key.get(k) for k in self.key], sort_keys=True)

    def learn(self, desc: dict):
        """From a CreateTable request or a TableDescription."""
        if desc.get("KeySchema"):
            self.key = tuple(k["AttributeName"] for k in desc["KeySchema"])
        for gsi in desc.get("GlobalSecondaryIndexes") or []:
            self._index(gsi)

    def _index(self, gsi: dict):
        proj = gsi.get("Projection") or {}
        self.indexes[gsi["IndexName"]] = _Index(
            tuple(k["AttributeName"] for k in gsi["KeySchema"]),
            proj.get("ProjectionType", "ALL"),
            tuple(proj.get("NonKeyAttributes") or ()))

    def projected(self, ix: _Index, item: dict) -> dict:
        if ix.projection == "ALL":
            return item
        keep = set(ix.keys) | set(self.key) | set(ix.include)
        return {k: v for k, v in item.items() if k in keep}

    def index_writes(self, before: dict | None, after: dict | None) -> int:
        n = 0
        for ix in self.indexes.values():
            had = bool(before) and all(k in before for k in ix.keys)
            has = bool(after) and all(k in after for k in ix.keys)
            if had and has:
                if any(before[k] != after[k] for k in ix.keys):
                    n += write_units(item_size(self.projected(ix, before)))
                    n += write_units(item_size(self.projected(ix, after)))
                elif self.projected(ix, before) != self.projected(ix, after):
                    n += write_units(max(item_size(self.projected(ix, before)),
                                         item_size(self.projected(ix, after))))
            elif had:
                n += write_units(item_size(self.projected(ix, before)))
            elif has:
                n += write_units(item_size(self.projected(ix, after)))
        return n


class DynamoCounter:
    """A FaultProxy observer; see the module comment.  tables: count only
    requests naming one of these tables (None: every table)."""

    def __init__(self, tables=None, timeline=False):
        self.only = set(tables) if tables else None
        # {(table, item key): {tenth of a second: [wcu, rcu]}}
        self._timeline: dict | None = {} if timeline else None
        self._lock = threading.Lock()
        self._tally: dict[str, Tally] = {}
        self._by_table: dict[str, Tally] = {}
        self._tables: dict[str, _Table] = {}

    def watch(self, table: str):
        with self._lock:
            if self.only is not None:
                self.only.add(table)

    def snapshot(self) -> dict:
        """{action: Tally} so far (a copy)."""
        with self._lock:
            return {a: copy.copy(t) for a, t in self._tally.items()}

    def by_table(self) -> dict:
        """{table name: Tally} so far (a copy); "-" for requests naming none."""
        with self._lock:
            return {a: copy.copy(t) for a, t in self._by_table.items()}

    def item_windows(self, t0: float, t1: float, width: float = 5.0) -> dict:
        """{(table, item key): [(wcu, rcu) per window]} for the items billed
        between monotonic times t0 and t1, in windows of width seconds from
        t0 (the last one may be shorter)."""
        n = max(1, math.ceil((t1 - t0) / width - 1e-9))
        b0, b1 = int(t0 * 10), int(t1 * 10)
        out = {}
        with self._lock:
            items = [(k, dict(v)) for k, v in (self._timeline or {}).items()]
        for k, buckets in items:
            w = [[0, 0.0] for _ in range(n)]
            hit = False
            for b, (wcu, rcu) in buckets.items():
                if b0 <= b < b1:   # to the tenth of a second
                    i = min(n - 1, int((b - b0) / 10.0 / width))
                    w[i][0] += wcu
                    w[i][1] += rcu
                    hit = True
            if hit:
                out[k] = [tuple(x) for x in w]
        return out

    def _mark(self, table: str, key: str, wcu: int = 0, rcu: float = 0.0):
        if self._timeline is None:
            return
        b = int(time.monotonic() * 10)
        per = self._timeline.setdefault((table, key), {})
        cur = per.setdefault(b, [0, 0.0])
        cur[0] += wcu
        cur[1] += rcu

    def table(self, name: str) -> _Table:
        t = self._tables.get(name)
        if t is None:
            t = self._tables[name] = _Table()
        return t

    # -- the observer

    def observe(self, action: str, request: bytes, status: int, response: bytes):
        try:
            req = json.loads(request or b"{}")
        except ValueError:
            req = {}
        try:
            resp = json.loads(response or b"{}")
        except ValueError:
            resp = {}
        name = req.get("TableName") if isinstance(req, dict) else None
        if not isinstance(req, dict):
            req = {}
        if not isinstance(resp, dict):
            resp = {}
        if name is None and action not in ("BatchGetItem", "BatchWriteItem",
                                           "TransactWriteItems", "TransactGetItems"):
            name = "-"
        with self._lock:
            if self.only is not None and name not in self.only and name is not None:
                return
            t = Tally(requests=1, errors=int(status != 200))
            handler = getattr(self, "_" + action, None)
            if handler is not None:
                handler(t, name, req, resp, status)
            self._tally.setdefault(action, Tally()).add(t)
            self._by_table.setdefault(name or "-", Tally()).add(t)

    # -- per action (called with the lock held)

    def _CreateTable(self, t, name, req, resp, status):
        self.table(name).learn(req)

    def _UpdateTable(self, t, name, req, resp, status):
        for u in req.get("GlobalSecondaryIndexUpdates") or []:
            if "Create" in u:
                self.table(name)._index(u["Create"])
            elif "Delete" in u:
                self.table(name).indexes.pop(u["Delete"]["IndexName"], None)

    def _DescribeTable(self, t, name, req, resp, status):
        if status == 200 and "Table" in resp:
            self.table(name).learn(resp["Table"])

    def _read_many(self, t, name, req, resp, status, consistent, action):
        if status != 200:
            return
        tab = self.table(name)
        items = resp.get("Items") or []
        returned = sum(item_size(i) for i in items)
        scanned = resp.get("ScannedCount", len(items))
        extra = max(0, scanned - len(items))
        nbytes = returned
        if extra:   # filtered out: sized from the shadow's average item
            known = [item_size(i) for i in tab.items.values()]
            nbytes += extra * (sum(known) // len(known) if known else 0)
        if "IndexName" not in req:
            for i in items:
                tab.items[tab.key_of(i)] = i
        t.items_read += scanned
        t.items_returned += len(items)
        t.bytes_read += nbytes
        t.rcu += read_units(nbytes, consistent)
        self._mark(name, f"({action})", rcu=read_units(nbytes, consistent))

    def _Scan(self, t, name, req, resp, status):
        self._read_many(t, name, req, resp, status,
                        bool(req.get("ConsistentRead")) and "IndexName" not in req,
                        "Scan")

    def _Query(self, t, name, req, resp, status):
        self._read_many(t, name, req, resp, status,
                        bool(req.get("ConsistentRead")) and "IndexName" not in req,
                        "Query")

    def _GetItem(self, t, name, req, resp, status):
        if status != 200:
            return
        item = resp.get("Item")
        consistent = bool(req.get("ConsistentRead"))
        tab = self.table(name)
        if item:
            tab.items[tab.key_of(item)] = item
            t.items_read += 1
            t.items_returned += 1
            t.bytes_read += item_size(item)
        else:
            t.get_misses += 1
        t.rcu += read_units(item_size(item), consistent)
        self._mark(name, tab.key_of(req.get("Key") or {}),
                   rcu=read_units(item_size(item), consistent))

    def _write(self, t, name, key, after_fn, status, resp):
        tab = self.table(name)
        k = tab.key_of(key)
        before = tab.items.get(k)
        if before is None:
            t.blind += 1
        failed = status != 200
        after = before if failed else after_fn(before or {})
        size = max(item_size(before), item_size(after))
        t.wcu += write_units(size)
        if failed:
            if "ConditionalCheckFailed" in str(resp.get("__type", "")):
                t.failed_writes += 1
                self._mark(name, k, wcu=write_units(size))
            else:
                t.wcu -= write_units(size)   # not written, not billed
            return
        self._mark(name, k, wcu=write_units(size))
        t.items_written += 1
        t.bytes_written += item_size(after)
        t.index_wcu += tab.index_writes(before, after)
        if after is None:
            tab.items.pop(k, None)
        else:
            tab.items[k] = after

    def _PutItem(self, t, name, req, resp, status):
        item = req.get("Item") or {}
        self._write(t, name, item, lambda _b: item, status, resp)

    def _UpdateItem(self, t, name, req, resp, status):
        def after(before):
            if req.get("ReturnValues") == "ALL_NEW" and "Attributes" in resp:
                return resp["Attributes"]
            return apply_update(before, req)
        self._write(t, name, req.get("Key") or {}, after, status, resp)

    def _DeleteItem(self, t, name, req, resp, status):
        self._write(t, name, req.get("Key") or {}, lambda _b: None, status, resp)

    def _BatchGetItem(self, t, name, req, resp, status):
        if status != 200:
            return
        for tname, items in (resp.get("Responses") or {}).items():
            if self.only is not None and tname not in self.only:
                continue
            consistent = bool((req.get("RequestItems") or {}).get(tname, {})
                              .get("ConsistentRead"))
            for item in items:
                t.items_read += 1
                t.items_returned += 1
                t.bytes_read += item_size(item)
                t.rcu += read_units(item_size(item), consistent)

    def _BatchWriteItem(self, t, name, req, resp, status):
        if status != 200:
            return
        unprocessed = resp.get("UnprocessedItems") or {}
        for tname, ops in (req.get("RequestItems") or {}).items():
            if self.only is not None and tname not in self.only:
                continue
            for op in ops:
                if op in unprocessed.get(tname, []):
                    continue
                if "PutRequest" in op:
                    item = op["PutRequest"]["Item"]
                    self._write(t, tname, item, lambda _b, i=item: i, 200, {})
                elif "DeleteRequest" in op:
                    self._write(t, tname, op["DeleteRequest"]["Key"],
                                lambda _b: None, 200, {})
