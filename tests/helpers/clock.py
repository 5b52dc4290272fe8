"""A clock whose timers fire only when a test advances it (coordinators take a ``Clock``:
``now_ms`` and ``call_later``), ``settle`` to let started coroutines run first, and
``in_loop`` to write a test of coroutines as one."""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
from collections.abc import Callable, Coroutine

__all__ = ["FakeClock", "FakeTimer", "in_loop", "settle"]


class FakeTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Timers fire only when the test advances time."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms
        self._heap: list[tuple[int, int, FakeTimer, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self.now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> FakeTimer:
        t = FakeTimer()
        heapq.heappush(self._heap, (self.now + max(delay_ms, 0), next(self._seq), t, callback))
        return t

    async def advance(self, ms: int) -> None:
        await settle()  # let started requests register their timers first
        target = self.now + ms
        while self._heap and self._heap[0][0] <= target:
            when, _, t, cb = heapq.heappop(self._heap)
            self.now = max(self.now, when)
            if not t.cancelled:
                cb()
            await settle()
        self.now = target
        await settle()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def in_loop(test: Callable[..., Coroutine[object, object, None]]) -> Callable[..., None]:
    """Run the coroutine test function in a fresh event loop (its fixtures as given)."""

    @functools.wraps(test)
    def run(*args: object, **kwargs: object) -> None:
        asyncio.run(test(*args, **kwargs))

    return run
