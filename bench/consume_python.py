#!/usr/bin/env python3
"""A client for bench_python.py: the libkinesis Python package draining
every shard of a stream into a do-nothing handler, one call per record,
until caught up.  For the check, records are counted per batch and the
payload bytes come from the consumer's metrics.  Run it with the interpreter the package
is installed in.

  consume_python.py ENDPOINT STREAM

Prints one JSON line: {"records": N, "bytes": B}."""

import sys

import libkinesis


def handle(record):
    """The do-nothing handler."""


def main():
    endpoint, stream = sys.argv[1:3]
    records = 0
    with libkinesis.Consumer({"stream": stream, "endpoint": endpoint}) as c:
        while True:
            batch = c.poll(0.5)
            if batch is None:
                if c.caught_up():
                    break
                continue
            records += len(batch)
            for r in batch:
                handle(r)
        # the payload bytes delivered, as the consumer counted them
        # (its metrics: text, no JSON parser to import)
        nbytes = next(int(float(line.rsplit(" ", 1)[1]))
                      for line in c.metrics().splitlines()
                      if line.startswith("kn_consumer_bytes_total"))
    print('{"records": %d, "bytes": %d}' % (records, nbytes))


if __name__ == "__main__":
    main()
