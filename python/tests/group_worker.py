"""A worker of the group test: reads with libkinesis.Consumer and writes
one JSON line per record and per lease event on stdout until SIGTERM.

    group_worker.py CONF_JSON
"""

import json
import signal
import sys

import libkinesis as kn

conf = json.loads(sys.argv[1])
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))


def out(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


c = kn.Consumer(
    conf,
    on_lease_acquired=lambda sid, tok, st: out(ev="acquired", shard=sid),
    on_lease_lost=lambda sid, why: out(ev="lost", shard=sid,
                                       why=kn.err2str(why)),
    on_shard_ended=lambda sid: out(ev="ended", shard=sid))
while not stop:
    b = c.poll(0.2)
    if b is None:
        continue
    for r in b:
        out(ev="rec", k=r.partition_key, d=bytes(r).decode(), shard=r.shard_id,
            seq=r.sequence_number)
c.close()
out(ev="closed")
