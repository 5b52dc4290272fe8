"""Embedded single-node cluster: controller + broker on a background asyncio thread.

For laptops, tests and the Spark quickstart: ``with EmbeddedCluster(tmpdir) as c:`` gives a
real broker on ``c.bootstrap_servers`` that any Kafka client can use, and ``stop()`` shuts it
down gracefully (the same path as SIGTERM on ``sparklog server``), so a later cluster on
the same directory recovers exactly what was acknowledged. Like the server, it holds the
directory's lock while it runs: a second cluster or server on it fails to start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from sparklog.broker.broker import Broker
from sparklog.broker.config import BrokerConfig
from sparklog.cluster.single_node import build_single_node
from sparklog.controller import Controller

log = logging.getLogger(__name__)

__all__ = ["EmbeddedCluster"]


class EmbeddedCluster:
    def __init__(self, data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0,
                 config: dict[str, str] | None = None) -> None:
        self.data_dir = os.fspath(data_dir)
        self.host = host
        self.port = port
        props = {"log.dirs": self.data_dir, "listeners": f"PLAINTEXT://{host}:{port}"}
        props.update(config or {})
        self.config = BrokerConfig(props)
        self.broker: Broker | None = None
        self.controller: Controller | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> EmbeddedCluster:
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
        node = build_single_node(self.config)
        broker = self.broker = node.broker
        self.controller = node.controller
        try:
            await broker.start()
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            try:
                await broker.shutdown()
            except Exception:
                log.exception("cleanup after failed start")
            return
        self.port = broker.port
        ready.set()
        await self._stopped.wait()
        await broker.shutdown()

    def call(self, fn: Any, *args: Any, timeout: float = 30.0) -> Any:
        """Run ``fn(*args)`` on the broker's loop (coroutine functions are awaited)."""
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

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
