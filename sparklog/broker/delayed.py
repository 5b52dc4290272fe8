"""Delayed operations: requests parked until something changes or their time runs out
(Kafka's purgatory), tied to the lifetime of the connection that sent them.

A long-poll Fetch parks until enough bytes arrived or ``max_wait_ms`` passed; an acks=all
Produce until the high watermark passed its offsets; follower fetches and transactional
waits park the same way. A handler parks with ``Purgatory.park(owner, waiters, timeout_s)``
on the ``Waiters`` of the partitions involved, which appends, HW moves, role changes and
deletions wake. Waking is cheap and coarse on purpose: the woken handler re-checks its own
condition, so the purgatory keeps nothing per operation beyond a future and a timer.

Invariants:

- A parked operation is referenced only by the purgatory, its owner, the ``Waiters`` it
  waits on and its timer; the handler awaiting it unregisters it from all four when it
  resumes, whichever way it ended. So a parked request holds memory (its connection, frame,
  decoded request, read slices, response parts) only while it is parked.
- The owner (the connection) going away cancels its operations: the handler gets
  ``CancelledError`` where it awaits and unwinds, dropping all of the above at once, not when
  ``max_wait_ms`` runs out. The owner expiring them (its client stopped sending) or the
  purgatory closing (broker shutdown) ends them instead as if their time had run out: they
  are answered now with what they have, and the owner parks nothing more.
- At most ``max_parked`` operations are parked at once, broker-wide
  (``purgatory.max.requests``). When that many are, ``park`` returns at once as if the wait
  had timed out: the request is answered with what it has and its client polls again. A
  full purgatory costs latency, never memory; the log says when it fills.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection

log = logging.getLogger(__name__)

__all__ = ["Waiters", "ParkedOperations", "Purgatory"]

# a full purgatory is reported at most this often (with the count refused meanwhile)
_FULL_LOG_INTERVAL_S = 60.0


class _Operation:
    """One parked request: the future its handler awaits (True: woken, False: expired)."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[bool]) -> None:
        self.future = future

    def wake(self) -> None:
        if not self.future.done():
            self.future.set_result(True)

    def expire(self) -> None:
        if not self.future.done():
            self.future.set_result(False)


class Waiters:
    """The operations parked on one thing that changes (a partition); ``wake`` releases
    them all."""

    __slots__ = ("_ops",)

    def __init__(self) -> None:
        self._ops: dict[_Operation, None] = {}

    def __len__(self) -> int:
        return len(self._ops)

    def wake(self) -> None:
        if not self._ops:
            return
        ops, self._ops = self._ops, {}
        for op in ops:
            op.wake()


class ParkedOperations:
    """The operations one owner (a connection) has parked; at most one today, since a
    connection processes its requests one at a time."""

    __slots__ = ("_ops", "expired")

    def __init__(self) -> None:
        self._ops: dict[_Operation, None] = {}
        self.expired = False

    def __len__(self) -> int:
        return len(self._ops)

    def cancel(self) -> None:
        """The owner is gone: its parked handlers get ``CancelledError`` and unwind."""
        for op in list(self._ops):
            op.future.cancel()

    def expire(self) -> None:
        """Answer the parked operations now, and let the owner park nothing more."""
        self.expired = True
        for op in list(self._ops):
            op.expire()


class Purgatory:
    """Every parked operation of the broker, at most ``max_parked`` of them.

    ``max_parked`` is ``purgatory.max.requests``, sparklog's own key: Kafka's purgatories
    hold whatever its handlers put in them. The bound gives the memory parked requests
    hold a ceiling whatever clients do. Its default, 10 000, leaves room for ten thousand
    consumers (a consumer parks one fetch per broker connection) while capping them near
    80 MiB: a parked fetch with its connection costs about 8 KiB (3000 measured at 22 MiB
    of broker RSS).
    """

    def __init__(self, max_parked: int) -> None:
        self.max_parked = max_parked
        self._ops: dict[_Operation, None] = {}
        self._closed = False
        self._refused = 0
        self._full_logged_at = -_FULL_LOG_INTERVAL_S

    def __len__(self) -> int:
        return len(self._ops)

    async def park(self, owner: ParkedOperations | None, waiters: Collection[Waiters],
                   timeout_s: float) -> bool:
        """Wait until one of ``waiters`` wakes (True) or ``timeout_s`` passes (False).

        Also False at once when there is nothing to wait for, the owner expired, the
        purgatory is closed or full. Raises ``CancelledError`` when the owner is cancelled.
        """
        if timeout_s <= 0 or not waiters or self._closed or (owner is not None and owner.expired):
            return False
        if len(self._ops) >= self.max_parked:
            self._refuse()
            return False
        loop = asyncio.get_running_loop()
        op = _Operation(loop.create_future())
        timer = loop.call_later(timeout_s, op.expire)
        self._ops[op] = None
        if owner is not None:
            owner._ops[op] = None
        for w in waiters:
            w._ops[op] = None
        try:
            return await op.future
        finally:
            timer.cancel()
            del self._ops[op]
            if owner is not None:
                del owner._ops[op]
            for w in waiters:
                w._ops.pop(op, None)  # absent once this Waiters woke it

    def close(self) -> None:
        """Broker shutdown: answer every parked operation now and park nothing more."""
        self._closed = True
        for op in list(self._ops):
            op.expire()

    def _refuse(self) -> None:
        self._refused += 1
        now = time.monotonic()
        if now - self._full_logged_at >= _FULL_LOG_INTERVAL_S:
            log.warning("%d requests are parked, the limit (purgatory.max.requests): requests "
                        "that would wait are answered at once until some finish "
                        "(%d answered so since the last report)", len(self._ops), self._refused)
            self._full_logged_at = now
            self._refused = 0
