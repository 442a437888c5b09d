#!/usr/bin/env python3
"""A record processor speaking the MultiLangDaemon protocol directly, for
the error cases of test_multilang.py.  Each process takes a number from
ML_OUT/counter; children 1..3 misbehave (ML_MODES, comma-separated, in
that order: "wrong", "exit", "silent", "garbage", "flood", "nockpt": never
checkpoints, takes 0.3 s over each batch; "ckptexit": asks for a
checkpoint and exits at once), the others behave.
Every good child probes the checkpoint errors on its first batch and logs
the daemon's answers; every record goes to ML_OUT/rec-PID.jsonl."""
import base64
import fcntl
import json
import os
import sys
import time

OUT = os.environ["ML_OUT"]
MODES = [m for m in os.environ.get("ML_MODES", "").split(",") if m]


def take_number():
    with open(os.path.join(OUT, "counter"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = len(f.read()) + 1
        f.write("x")
        return n


N = take_number()
MODE = MODES[N - 1] if N <= len(MODES) else "good"
LOG = open(os.path.join(OUT, f"log-{os.getpid()}.jsonl"), "a")
RECS = open(os.path.join(OUT, f"rec-{os.getpid()}.jsonl"), "a")


def log(**kw):
    kw["pid"] = os.getpid()
    kw["mode"] = MODE
    LOG.write(json.dumps(kw) + "\n")
    LOG.flush()


def send(obj):
    sys.stdout.write("\n" + json.dumps(obj) + "\n")
    sys.stdout.flush()


def read():
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        if line.strip():
            return json.loads(line)


def checkpoint(seq=None, sub=None, with_sub=True):
    msg = {"action": "checkpoint", "sequenceNumber": seq}
    if with_sub:
        msg["subSequenceNumber"] = sub
    send(msg)
    reply = read()
    assert reply["action"] == "checkpoint", reply
    return reply


shard = None
batches = 0
probed = False
while True:
    msg = read()
    act = msg["action"]
    if act == "initialize":
        shard = msg["shardId"]
        log(ev="initialize", shard=shard, seq=msg["sequenceNumber"],
            sub=msg["subSequenceNumber"])
        # Not allowed during initialize.
        log(ev="probe", case="initialize", reply=checkpoint("1", 0))
        send({"action": "status", "responseFor": "initialize"})
        continue
    if act == "processRecords":
        batches += 1
        recs = msg["records"]
        if MODE == "garbage":
            # (with terminal escapes, which must not reach kncat's stderr)
            sys.stdout.write("this is not JSON \x1b[2J\n\n{\"no\":\"action\"}\n")
            sys.stdout.flush()
            sys.stderr.write("\x1b]0;title\x07 \x1b[31mred\x9b \u202ehidden\n")
            sys.stderr.flush()
        if MODE == "wrong":
            send({"action": "status", "responseFor": "initialize"})
            time.sleep(30)
        if MODE == "silent":
            time.sleep(30)
        if MODE == "flood" and recs:
            # Checkpoints without reading a single answer (the daemon
            # fails the child once its answers pile up).
            last = recs[-1]
            line = "\n" + json.dumps({"action": "checkpoint",
                                      "sequenceNumber": last["sequenceNumber"],
                                      "subSequenceNumber": last["subSequenceNumber"]})
            log(ev="flooding")
            try:
                for _ in range(200):
                    sys.stdout.write(line * 1000)
                    sys.stdout.flush()
            except BrokenPipeError:
                pass
            log(ev="flooded")
            time.sleep(60)
        if MODE == "slow" and recs and batches == 1:
            # The test takes the lease away meanwhile.
            open(os.path.join(OUT, "slow.flag"), "w").write(shard)
            while not os.path.exists(os.path.join(OUT, "stolen.flag")):
                time.sleep(0.1)
            time.sleep(float(os.environ.get("ML_SLOW", "8")))
            last = recs[-1]
            log(ev="probe", case="after-loss",
                reply=checkpoint(last["sequenceNumber"], last["subSequenceNumber"]))
        if MODE == "nockpt":
            time.sleep(0.3)  # slower than a checkpoint answer is read
        for i, r in enumerate(recs):
            if MODE == "exit" and i == len(recs) // 2:
                RECS.flush()
                os._exit(3)
            RECS.write(json.dumps({"shard": shard, "seq": r["sequenceNumber"],
                                   "sub": r["subSequenceNumber"], "key": r["partitionKey"],
                                   "data": base64.b64decode(r["data"]).decode(),
                                   "ts": r["approximateArrivalTimestamp"]}) + "\n")
        RECS.flush()
        if recs and not probed and MODE == "good" and not os.environ.get("ML_NO_PROBE"):
            probed = True
            last, first = recs[-1], recs[0]
            big = str(int(last["sequenceNumber"]) + 1)
            log(ev="probe", case="beyond", reply=checkpoint(big, 0))
            log(ev="probe", case="malformed", reply=checkpoint("12x", 0))
            log(ev="probe", case="bad-sub", reply=checkpoint(last["sequenceNumber"], -4))
            log(ev="probe", case="at-last", reply=checkpoint(last["sequenceNumber"],
                                                              last["subSequenceNumber"]))
            if first is not last:
                log(ev="probe", case="before-checkpoint",
                    reply=checkpoint(first["sequenceNumber"], first["subSequenceNumber"]))
        elif recs and MODE == "ckptexit":
            # Asks for a checkpoint and goes without waiting for the answer.
            last = recs[-1]
            log(ev="ckpt-ask")
            send({"action": "checkpoint", "sequenceNumber": last["sequenceNumber"],
                  "subSequenceNumber": last["subSequenceNumber"]})
            RECS.flush()
            os._exit(0)
        elif recs and MODE not in ("slow", "nockpt"):
            last = recs[-1]
            log(ev="ckpt-ask")
            log(ev="ckpt", reply=checkpoint(last["sequenceNumber"], last["subSequenceNumber"]))
        send({"action": "status", "responseFor": "processRecords"})
        continue
    if act in ("shardEnded", "shutdownRequested"):
        log(ev=act, reply=checkpoint(None, with_sub=False))
        send({"action": "status", "responseFor": act})
        if MODE == "linger":  # does not exit when its stdin closes
            log(ev="lingering")
            while True:
                time.sleep(1)
        continue
    if act == "leaseLost":
        log(ev="leaseLost", reply=checkpoint(None))
        send({"action": "status", "responseFor": act})
        continue
    log(ev="unexpected", msg=msg)
