#!/usr/bin/env python3
"""Slow (about six minutes): enhanced fan-out across the server's own end
of a subscription.  kinesis-local, like AWS, ends every subscription after
five minutes; records keep coming before, during and after that moment,
and two consumers (HTTP/2 on the TLS port, HTTP/1.1 on the plain port)
must renew their subscriptions from the continuation with every record
delivered once, in order, and no help from the watchdog."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from efo_common import (Consumer, Producer, Stream, Suite, check_key_order,  # noqa: E402
                        check_once, lab)

RUN_S = 330


SERVER = None


def across_the_five_minute_end():
    server = SERVER
    c = lab.boto3_client("kinesis", server)
    s = Stream(c, "efo-slow", 1)
    cons = [Consumer(server.tls_endpoint, s.name, ["efo.consumer.name=slow-h2"],
                     ["-T", str((RUN_S + 120) * 1000)], tls=True, name="h2"),
            Consumer(server.endpoint, s.name, ["efo.consumer.name=slow-h1"],
                     ["-T", str((RUN_S + 120) * 1000)], name="http1.1")]
    prod = Producer(s, 5, 2.0)
    try:
        prod.start()
        time.sleep(RUN_S)
        prod.stop()
        for con in cons:
            con.wait_count(len(s.sent), 60)
        time.sleep(2)
        for con in cons:
            assert con.stop() == 0, con.stderr_tail()
            recs = con.records()
            check_once([r["data"] for r in recs], s.sent, con.name)
            check_key_order(recs)
            efo = [e for e in con.shard_efo().values() if e]
            assert efo and efo[0]["resubscribes"] >= 1, (con.name, efo)
            assert efo[0]["watchdog_renewals"] == 0 and efo[0]["errors"] == 0, (con.name, efo)
            print("%s: %d records, %s" % (con.name, len(recs), efo[0]), flush=True)
    finally:
        prod.halt.set()
        for con in cons:
            con.cleanup()


def main():
    global SERVER
    suite = Suite()
    with lab.KinesisLocal() as SERVER:
        suite.case(across_the_five_minute_end)
    return suite.done()


if __name__ == "__main__":
    sys.exit(main())
