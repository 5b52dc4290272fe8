"""Ports for the servers tests start: always on 127.0.0.1, never a fixed number."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A port nothing listens on right now, picked by the OS. Only for a server that must
    know its port before it starts (a child process, a restart on the same port); a server
    in this process binds port 0 and reports the port it got."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
