"""Nodes served by one asyncio event loop on a background thread, for laptops and tests.

``EmbeddedCluster`` (a single node) and ``InProcessCluster`` (a controller and N brokers)
share this: ``start()`` runs the loop thread and returns once every node serves (or raises
what failed, after undoing what had started), ``call()`` runs a function on the loop, and
``stop()`` shuts the nodes down gracefully (the same path as SIGTERM on ``sparklog
server``) and ends the thread. All nodes share the loop, so metadata the controller
publishes reaches every broker on the thread that serves it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Self

log = logging.getLogger(__name__)

__all__ = ["BackgroundCluster"]


class BackgroundCluster:
    """Subclasses start their nodes in ``_start_nodes`` and stop them in ``_stop_nodes``
    (which must also undo a partial start)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    async def _start_nodes(self) -> None:
        raise NotImplementedError

    async def _stop_nodes(self) -> None:
        raise NotImplementedError

    def start(self, timeout: float = 60.0) -> Self:
        if self._thread is not None:
            raise RuntimeError("cluster already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._main(ready, failure))
            except BaseException as exc:  # surfaced to start()
                failure.append(exc)
                ready.set()
            finally:
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()

        self._thread = threading.Thread(target=run, name="sparklog-broker", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("embedded broker did not start in time")
        if failure:
            self._thread.join(5)
            self._thread = None
            raise RuntimeError("embedded broker failed to start") from failure[0]
        return self

    async def _main(self, ready: threading.Event, failure: list[BaseException]) -> None:
        self._stopped = asyncio.Event()
        try:
            await self._start_nodes()
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            try:
                await self._stop_nodes()
            except Exception:
                log.exception("cleanup after failed start")
            return
        ready.set()
        await self._stopped.wait()
        await self._stop_nodes()

    def call(self, fn: Any, *args: Any, timeout: float = 30.0) -> Any:
        """Run ``fn(*args)`` on the nodes' loop (coroutine functions are awaited)."""
        assert self.loop is not None

        async def wrapper() -> Any:
            res = fn(*args)
            if asyncio.iscoroutine(res):
                res = await res
            return res

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        thread, loop = self._thread, self.loop
        if thread is None or loop is None:
            return
        if self._stopped is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stopped.set)
        thread.join(timeout)
        if thread.is_alive():
            log.warning("embedded broker did not stop within %.0f s", timeout)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
