"""Ports for the servers tests start: always on 127.0.0.1, never a fixed number.

They are picked below the kernel's ephemeral range (``ip_local_port_range``, where every
outgoing connection on the machine gets its local port): a port from that range can be
taken by some client's connection between the check here and the server's bind, or while
a killed server is down before its restart on the same port, and the server then fails
with "address already in use" (seen under load: ``sparklog cluster start``'s broker).
"""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

__all__ = ["free_port", "free_port_run"]

_LOWEST = 10000
_rng = random.Random()  # its own: a test seeding the global generator changes nothing here


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


_TOP = _ephemeral_start()


def free_port() -> int:
    """A port nothing listens on right now, outside the ephemeral range. Only for a server
    that must know its port before it starts (a child process, a restart on the same port);
    a server in this process binds port 0 and reports the port it got."""
    return free_port_run(1)


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports nothing listens on right now (for a command
    that takes one base port and uses the next ones, ``sparklog cluster start``)."""
    if _TOP - count <= _LOWEST:
        raise RuntimeError(f"no ports below the ephemeral range (it starts at {_TOP})")
    for _ in range(100):
        base = _rng.randrange(_LOWEST, _TOP - count)
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + count):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no run of {count} free ports found")
