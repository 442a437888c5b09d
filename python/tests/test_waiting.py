"""Waiting calls: the GIL is released, Ctrl-C interrupts them, asyncio
waits without blocking its loop."""

import asyncio
import os
import signal
import threading

import pytest

import libkinesis as kn


def test_other_threads_run_while_poll_waits(kinesalite_stream):
    s = kinesalite_stream(1)
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    with kn.Consumer(s.conf()) as c:
        t.start()
        try:
            before = counter[0]
            assert c.poll(1.0) is None  # an empty stream: poll waits 1 s
            during = counter[0] - before
        finally:
            stop.set()
            t.join()
    # Holding the GIL for the second would leave the thread a handful of
    # increments at most (the interpreter's switch interval is 5 ms).
    assert during > 10000, during


def test_ctrl_c_interrupts_a_poll_waiting_for_ever(kinesalite_stream):
    s = kinesalite_stream(1)
    with kn.Consumer(s.conf()) as c:
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                c.poll(None)  # no timeout: only the signal ends it
        finally:
            timer.cancel()


def test_ctrl_c_interrupts_flush():
    # Nothing listens there: the record waits (retried) for a shard map.
    p = kn.Producer({"stream": "s", "endpoint": "http://127.0.0.1:9",
                     "message.timeout.ms": 600000, "log.level": 2})
    p.produce(b"x", partition_key="k")
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            p.flush(None)
    finally:
        timer.cancel()
    assert len(p) == 1
    del p  # destroy reports the record failed; no callback to run


def test_asyncio_poll_leaves_the_loop_free(kinesalite_stream):
    s = kinesalite_stream(2)

    async def main():
        ticks = 0
        got = []

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        with kn.Consumer(s.conf()) as c:
            assert await c.poll_async(0.3) is None
            t0 = ticks
            s.put([("k%d" % i, b"%d" % i) for i in range(100)])
            async for batch in c.batches(timeout=2.0):
                got += [bytes(r) for r in batch]
                if len(got) >= 100:
                    break
            idle = ticks - t0
        tick.cancel()
        return got, idle, ticks

    got, idle, ticks = asyncio.run(main())
    assert sorted(int(d) for d in got) == list(range(100))
    assert ticks > 10  # the loop ran during the empty poll_async


def test_asyncio_waits_on_one_thread_per_consumer(kinesalite_stream):
    s = kinesalite_stream(1)

    def waiters():
        return [t for t in threading.enumerate()
                if t.name.startswith("libkinesis-wait")]

    async def main():
        with kn.Consumer(s.conf()) as c:
            for _ in range(20):
                assert await c.poll_async(0.05) is None
            during = len(waiters())
        return during

    assert asyncio.run(main()) == 1
    for t in waiters():  # closing let it go
        t.join(5)
    assert waiters() == []
