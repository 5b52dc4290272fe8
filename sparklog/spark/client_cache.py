"""Client objects kept per Python worker process, one per distinct client config.

Spark reuses Python workers between tasks, so a task finds the fetcher or producer an
earlier task of the same query opened: a micro-batch does not pay connection set-up and
metadata again. Clients are created on first use (the ``sparklog.client`` import with them)
and live until the worker exits, unless a task drops a broken one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

__all__ = ["ClientCache"]


class _Closeable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closeable)


class ClientCache(Generic[C]):
    """``get(conf)`` returns the one client made by ``factory`` for ``conf``."""

    def __init__(self, factory: Callable[[dict[str, str]], C]) -> None:
        self._factory = factory
        self._clients: dict[tuple[tuple[str, str], ...], C] = {}
        self._lock = threading.Lock()

    def get(self, conf: dict[str, str]) -> C:
        key = tuple(sorted(conf.items()))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = self._factory(dict(conf))
            return client

    def drop(self, conf: dict[str, str]) -> None:
        """Close and forget the client of ``conf`` (a broken connection must not poison
        the next task)."""
        with self._lock:
            client = self._clients.pop(tuple(sorted(conf.items())), None)
        if client is not None:
            try:
                client.close()
            except Exception:
                log.debug("error closing client", exc_info=True)
