"""Ports for the brokers a benchmark starts in a child process: 127.0.0.1, a port the OS
picks, and waiting until the broker accepts connections there.

Imported by the bench scripts as a sibling module (``python bench/<script>.py`` puts
``bench/`` first on ``sys.path``); bench/ never imports the tests.
"""

from __future__ import annotations

import socket
import time

__all__ = ["free_port", "wait_listening"]


def free_port() -> int:
    """A port nothing listens on right now (the child binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, timeout: float = 60.0) -> None:
    """Return once 127.0.0.1:``port`` accepts a connection; TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout:.0f} s")
