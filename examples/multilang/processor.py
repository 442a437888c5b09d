#!/usr/bin/env python3
"""A MultiLangDaemon record processor with the Python standard library only.

It prints every record to its standard error (which `kncat multilang`
copies to its own, prefixed with the shard id) and checkpoints every
CHECKPOINT_EVERY records, at the end of a shard and when asked to stop.
The protocol is one JSON object per line on stdin and stdout; see
docs/multilang.md.
"""
import base64
import json
import sys

CHECKPOINT_EVERY = 100


class Daemon:
    """The line protocol: messages in, answers out."""

    def read(self):
        while True:
            line = sys.stdin.readline()
            if not line:  # stdin closed: nothing more will come
                sys.exit(0)
            if line.strip():
                return json.loads(line)

    def send(self, msg):
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    def checkpoint(self, seq=None, subseq=None):
        """Checkpoints at (seq, subseq), or everything delivered so far when
        seq is None.  Returns the error's name, or None."""
        self.send({"action": "checkpoint", "sequenceNumber": seq,
                   "subSequenceNumber": subseq})
        reply = self.read()
        return reply.get("error")


def main():
    d = Daemon()
    shard, pending = None, 0
    while True:
        msg = d.read()
        action = msg["action"]
        if action == "initialize":
            shard = msg["shardId"]
            print(f"starting after {msg['sequenceNumber']}", file=sys.stderr)
        elif action == "processRecords":
            for r in msg["records"]:
                data = base64.b64decode(r["data"])
                print(f"{r['partitionKey']} {r['sequenceNumber']}/"
                      f"{r['subSequenceNumber']}: {data[:60]!r}", file=sys.stderr)
            pending += len(msg["records"])
            if pending >= CHECKPOINT_EVERY and msg["records"]:
                last = msg["records"][-1]
                err = d.checkpoint(last["sequenceNumber"], last["subSequenceNumber"])
                if err:
                    print(f"checkpoint failed: {err}", file=sys.stderr)
                pending = 0
        elif action in ("shardEnded", "shutdownRequested"):
            # shardEnded: checkpoint everything, so the children are read.
            err = d.checkpoint()
            if err:
                print(f"final checkpoint of {shard} failed: {err}", file=sys.stderr)
        elif action == "leaseLost":
            pass  # another worker has the shard: no checkpoint possible
        d.send({"action": "status", "responseFor": action})


if __name__ == "__main__":
    main()
