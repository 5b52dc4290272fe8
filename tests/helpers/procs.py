"""Processes by pid, read from /proc: who is alive, a process's parent, session and
command line, so tests can find what a launcher started (Spark JVMs, nodes) and check
that nothing of it is left."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Proc", "alive", "children", "session"]


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    sid: int
    cmdline: str


def _read(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name (field 2) may hold spaces: the fields after it follow its ')'
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None  # exited, not yet reaped
    return Proc(pid, int(fields[1]), int(fields[3]), cmd.replace(b"\0", b" ").decode(errors="replace"))


def _all() -> list[Proc]:
    return [p for name in os.listdir("/proc") if name.isdigit()
            if (p := _read(int(name))) is not None]


def alive(pid: int) -> bool:
    return _read(pid) is not None


def children(pid: int) -> list[Proc]:
    return [p for p in _all() if p.ppid == pid]


def session(sid: int) -> list[Proc]:
    """Every live process of session ``sid``."""
    return [p for p in _all() if p.sid == sid]
