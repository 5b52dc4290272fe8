"""The synchronous front end every client object shares: an AsyncClient on a private loop.

AdminClient, Consumer, Producer and ArrowFetcher are called from plain threads (the CLI, a
Spark task); each owns one ``AsyncClient`` (connections, versions, metadata) driven by its
own ``EventLoopThread``, and runs its requests there. This base holds that pair, its
config filtering and its shutdown, so each client only adds its own requests.

Invariant: once ``close()`` returned, the loop thread is stopped and every connection is
closed; ``close()`` is idempotent.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Coroutine
from typing import Any, Self, TypeVar

from sparklog.client.connection import EventLoopThread
from sparklog.client.core import AsyncClient

log = logging.getLogger(__name__)

__all__ = ["SyncClient"]

T = TypeVar("T")


class SyncClient:
    """An ``AsyncClient`` plus the loop thread that runs it, behind blocking methods."""

    def __init__(self, config: dict[str, Any], thread_name: str) -> None:
        # client objects also take Python values (callbacks, interceptors); the connection
        # settings are the scalar ones
        conf = {k: v for k, v in config.items() if isinstance(v, str | int | float | bool)}
        self._client = AsyncClient(conf)
        self._thread = EventLoopThread(thread_name)
        self._closed = False

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop thread and wait up to ``timeout`` seconds (None: until
        it ends; the requests inside carry their own timeouts)."""
        return self._thread.run(coro, timeout=timeout)

    def _start(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop thread without waiting (``EventLoopThread.wait``
        collects it)."""
        return self._thread.spawn(coro)

    def close(self) -> None:
        """Close the connections and stop the loop thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._thread.run(self._client.close(), timeout=5)
        except Exception:  # closing is best effort: the thread stops either way
            log.debug("error closing connections", exc_info=True)
        self._thread.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
