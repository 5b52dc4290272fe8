"""A storage manager's background thread: started once, stopped by an event it waits on.

The log manager's scheduler and the remote log manager's task are both one daemon thread
that loops until told to stop. The thread body waits on ``stopping`` (never sleeps), so
``stop`` ends it within one wait, not one interval. Invariant: at most one thread per
``BackgroundThread`` runs at a time; ``thread`` is the running one, or None.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["BackgroundThread"]


class BackgroundThread:
    def __init__(self, name: str, body: Callable[[], None]) -> None:
        self.name = name
        self._body = body
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread; a no-op while it runs."""
        if self.thread is not None:
            return
        self.stopping.clear()
        self.thread = threading.Thread(target=self._body, name=self.name, daemon=True)
        self.thread.start()

    def stop(self, timeout_s: float) -> bool:
        """Ask the thread to stop and wait up to ``timeout_s`` for it; False if it is still
        running then (it is forgotten either way: a later ``start`` starts a new one)."""
        self.stopping.set()
        thread, self.thread = self.thread, None
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()
