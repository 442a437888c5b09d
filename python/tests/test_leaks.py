"""100,000 records through the producer and the consumer under tracemalloc:
what Python allocates (records, batches, reports, callbacks' references)
does not grow with the records."""

import gc
import tracemalloc

import libkinesis as kn
from conftest import drain

N = 100_000
WARM = 10_000


def traced():
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_no_growth_over_100000_records(kinesalite_stream):
    s = kinesalite_stream(2)
    delivered = [0]

    def on_delivery(err, rep):
        assert err is None
        delivered[0] += 1

    tracemalloc.start()
    try:
        with kn.Producer(s.conf(aggregation_enable=True, linger_ms=20)) as p:
            for i in range(N):
                if i == WARM:
                    assert p.flush(60) == 0
                    produce_base = traced()
                p.produce(b"payload-%06d" % i, partition_key="k%d" % (i % 64),
                          on_delivery=on_delivery)
                if i % 1000 == 999:
                    p.poll(0)
            assert p.flush(120) == 0
            produce_growth = traced() - produce_base
        assert delivered[0] == N

        seen = 0
        total = 0
        with kn.Consumer(s.conf()) as c:
            while seen < WARM:
                for r in c.poll(1) or ():
                    total += len(r.data)
                    seen += 1
            consume_base = traced()
            while seen < N:
                b = c.poll(1)
                for r in b or ():
                    total += len(bytes(r))
                    seen += 1
                del b
            consume_growth = traced() - consume_base
    finally:
        tracemalloc.stop()
    assert seen == N and total == 14 * N
    # A leaked Record or Batch costs 40+ bytes each: 90,000 records would
    # leak megabytes.  What remains is the interpreter's own caches.
    print("growth: producer %d B, consumer %d B" % (produce_growth, consume_growth))
    assert produce_growth < 256 * 1024, produce_growth
    assert consume_growth < 256 * 1024, consume_growth
