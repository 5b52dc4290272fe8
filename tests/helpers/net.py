"""Ports for the servers tests start: always on 127.0.0.1, never a fixed number."""

from __future__ import annotations

import contextlib
import socket

__all__ = ["free_port", "free_port_run"]


def free_port() -> int:
    """A port nothing listens on right now, picked by the OS. Only for a server that must
    know its port before it starts (a child process, a restart on the same port); a server
    in this process binds port 0 and reports the port it got."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports nothing listens on right now (for a command
    that takes one base port and uses the next ones, ``sparklog cluster start``)."""
    for _ in range(100):
        base = free_port()
        if base + count > 65535:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + count):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no run of {count} free ports found")
