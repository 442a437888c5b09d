"""asyncio helpers for :class:`libkinesis.Consumer`.

``await consumer.poll_async(timeout)`` and ``async for batch in
consumer.batches():`` never block the event loop.  They wait on the
consumer's own wake-up (``kn_consumer_wait()``: the condition its reader
threads signal when a batch or a callback is queued), on one waiting
thread per consumer with the GIL released, and then poll with timeout 0 on
the loop's thread, so callbacks and checkpoints run on the loop's thread as
with a plain poll.  No thread is started per call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import AsyncIterator, Optional

# How long one wait lasts before the loop polls anyway (statistics and
# other timed work of poll run at least this often).
_SLICE = 0.5


def _waiter(consumer) -> concurrent.futures.ThreadPoolExecutor:
    ex = consumer.__dict__.get("_aio_waiter")
    if ex is None:
        ex = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="libkinesis-wait")
        consumer.__dict__["_aio_waiter"] = ex
    return ex


def _close_waiter(consumer) -> None:
    ex = consumer.__dict__.pop("_aio_waiter", None)
    if ex is not None:
        ex.shutdown(wait=False)


async def poll_async(consumer, timeout: Optional[float] = None):
    """Waits up to timeout seconds (None: forever) for the next batch
    without blocking the loop; returns it or None."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
    while True:
        batch = consumer.poll(0)
        if batch is not None:
            return batch
        left = _SLICE if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return None
        await loop.run_in_executor(_waiter(consumer), consumer._wait,
                                   min(left, _SLICE))


async def batches(consumer, timeout: Optional[float] = None) -> AsyncIterator:
    """Batches until the consumer is closed, or until none came within
    timeout seconds (None: no such end)."""
    try:
        while not consumer.closed:
            batch = await poll_async(consumer, timeout)
            if batch is None:
                if timeout is not None:
                    return
                continue
            yield batch
    finally:
        if consumer.closed:
            _close_waiter(consumer)
