"""Delayed operations: requests that wait for a partition to change (Kafka's purgatory).

A long-poll Fetch waits until enough bytes arrived or ``max_wait_ms`` passed; an acks=all
Produce waits until the high watermark passed its offsets. Both wait on ``Waiters`` of the
partitions involved, which appends (and HW moves, role changes, deletions) wake. Waking is
cheap and coarse on purpose: the woken request re-checks its own condition, so no state
needs to be kept per waiter beyond a future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

__all__ = ["Waiters", "wait_any"]


class Waiters:
    """Futures waiting for one partition to change."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    def __len__(self) -> int:
        return len(self._futures)

    def future(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futures.append(fut)
        return fut

    def wake(self) -> None:
        if not self._futures:
            return
        futures, self._futures = self._futures, []
        for fut in futures:
            if not fut.done():
                fut.set_result(None)

    def discard(self, fut: asyncio.Future[None]) -> None:
        try:
            self._futures.remove(fut)
        except ValueError:
            pass

    async def wait(self, timeout_s: float) -> bool:
        """True when woken, False on timeout."""
        fut = self.future()
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self.discard(fut)


async def wait_any(waiters: Iterable[Waiters], timeout_s: float) -> bool:
    """Wait until any of ``waiters`` is woken or ``timeout_s`` passes; True if woken."""
    if timeout_s <= 0:
        return False
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    regs = []
    for w in waiters:
        fut = w.future()
        regs.append((w, fut))
        fut.add_done_callback(lambda _f: done.done() or done.set_result(None))
    timer = loop.call_later(timeout_s, lambda: done.done() or done.set_result(None))
    try:
        await done
    finally:
        timer.cancel()
    woken = any(f.done() for _, f in regs)
    for w, fut in regs:
        w.discard(fut)
        if not fut.done():
            fut.cancel()
    return woken
