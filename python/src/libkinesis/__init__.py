"""libkinesis: Amazon Kinesis Data Streams for Python, on the libkinesis C
library.

    from libkinesis import Consumer

    with Consumer({"stream": "orders", "lease.store": "dynamodb:orders-app"}) as c:
        for batch in c:
            for record in batch:
                handle(record.partition_key, bytes(record))

Configuration keys are the library's property names (``kncat -X list``,
docs/CONFIGURATION.md); values may be str, int, float or bool.  Waiting
calls release the GIL; Ctrl-C interrupts them.
"""

from __future__ import annotations

from . import _libkinesis
from ._libkinesis import (  # noqa: F401
    Batch,
    DeliveryReport,
    KinesisError,
    Record,
    err2str,
    properties,
)

__all__ = [
    "Batch",
    "Consumer",
    "DeliveryReport",
    "KinesisError",
    "Producer",
    "Record",
    "err2str",
    "properties",
    "version",
]

__version__ = "0.1.0"

# Imports for type checkers only: typing and json cost more to import than
# the extension itself.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Mapping, Optional

    from ._libkinesis import *  # noqa: F401,F403

# ERR_* codes (KinesisError.code), as in kn/error.h.
for _name in dir(_libkinesis):
    if _name.startswith("ERR_"):
        globals()[_name] = getattr(_libkinesis, _name)
        __all__.append(_name)
del _name

_CONSUMER_CALLBACKS = ("on_lease_acquired", "on_lease_lost", "on_shard_ended",
                       "on_stats")


def version() -> str:
    """The C library's version."""
    return _libkinesis.version()


def _split_conf(conf: Optional[Mapping[str, Any]], names, kwargs):
    props = dict(conf or {})
    for name in names:
        if name in props and callable(props[name]):
            kwargs.setdefault(name, props.pop(name))
    return props


class Consumer(_libkinesis.Consumer):
    """Reads a stream, alone or with other workers through a lease table.

    ``Consumer(conf, on_lease_acquired=None, on_lease_lost=None,
    on_shard_ended=None, on_stats=None)``.  The callbacks (also accepted
    as callables in ``conf`` under the same names) run inside :meth:`poll`
    on the polling thread:

    - ``on_lease_acquired(shard_id, fencing_token, pending_state)``;
      ``pending_state`` is the bytes of a prepared checkpoint or None;
    - ``on_lease_lost(shard_id, reason)``: reason is ``ERR__LEASE_LOST``
      (taken or expired), ``ERR__HANDOFF`` (asked for by another worker:
      checkpoints made in the callback are what it continues from) or
      ``ERR__DESTROY``;
    - ``on_shard_ended(shard_id)``;
    - ``on_stats(json_text)`` every ``statistics.interval.ms``.
    """

    def __init__(self, conf: Optional[Mapping[str, Any]] = None,
                 **callbacks: Callable[..., Any]) -> None:
        props = _split_conf(conf, _CONSUMER_CALLBACKS, callbacks)
        super().__init__(props, **callbacks)

    def close(self) -> None:
        """Stops reading, writes the final checkpoints and releases every
        lease (batches not yet polled are read again by the next owner)."""
        try:
            super().close()
        finally:
            if "_aio_waiter" in self.__dict__:  # asyncio helpers were used
                from .aio import _close_waiter
                _close_waiter(self)

    def stats(self) -> dict:
        """The statistics document (docs/STATISTICS.md) as of now."""
        import json
        return json.loads(self._stats_json())

    def __iter__(self) -> Iterator[Batch]:
        """Batches for ever (poll() in a loop) until the consumer is
        closed; a failed consumer raises KinesisError(fatal=True)."""
        while not self.closed:
            batch = self.poll(1.0)
            if batch is not None:
                yield batch

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def poll_async(self, timeout: Optional[float] = None) -> Optional[Batch]:
        """poll() for asyncio: see :mod:`libkinesis.aio`."""
        from .aio import poll_async
        return await poll_async(self, timeout)

    def batches(self, timeout: Optional[float] = None):
        """An async iterator of batches: ``async for batch in
        consumer.batches():`` (see :mod:`libkinesis.aio`)."""
        from .aio import batches
        return batches(self, timeout)


class Producer(_libkinesis.Producer):
    """Writes records to a stream asynchronously, with KPL aggregation
    when ``aggregation.enable`` is set.

    ``produce()`` queues a record and returns; ``on_delivery(err, report)``
    runs inside a later :meth:`poll`, :meth:`flush` or :meth:`close`.
    ``len(producer)`` is the number of records not yet reported.
    """

    def __init__(self, conf: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(dict(conf or {}))

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
