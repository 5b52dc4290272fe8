"""Exclusive ownership of log directories: ``<log dir>/.lock``, held with ``flock`` for as
long as the process uses the directory (Kafka's ``FileLock`` on the same file name).

Two servers on one data directory corrupt it quietly: the second one's shutdown writes the
clean-shutdown marker and checkpoints under the first, whose next start then trusts files it
never finished. So a log directory is locked before anything in it is read or written, and a
second process (or a second broker in this process: ``flock`` locks belong to the open file,
not the process) fails at once with the holder's pid, which the holder writes into the file.

The lock disappears with the process that holds it (the kernel drops ``flock`` locks when the
descriptor closes), so a crashed server never leaves a stale lock; the file stays behind,
harmlessly.
"""

from __future__ import annotations

import fcntl
import os

from sparklog.protocol.errors import KafkaStorageError

__all__ = ["LOCK_FILE", "LogDirInUseError", "LogDirLocks"]

LOCK_FILE = ".lock"


class LogDirInUseError(KafkaStorageError):
    """Another process (or another owner in this one) holds the directory's lock."""


class LogDirLocks:
    """The locks of ``dirs``, all taken in the constructor (none kept when one fails) and
    released by ``release()`` (idempotent). Each directory is created if absent."""

    def __init__(self, dirs: list[str]) -> None:
        self.dirs = [os.path.abspath(d) for d in dirs]
        self._fds: list[int] = []
        try:
            for d in self.dirs:
                self._fds.append(_lock(d))
        except BaseException:
            self.release()
            raise

    @property
    def held(self) -> bool:
        return bool(self._fds)

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)  # closing the descriptor drops its flock


def _lock(directory: str) -> int:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise LogDirInUseError(
            f"data directory {directory} is in use by another sparklog process "
            f"(pid {holder})") from None
    except BaseException:
        os.close(fd)
        raise
    pid = f"{os.getpid()}\n".encode("ascii")
    os.ftruncate(fd, 0)
    os.pwrite(fd, pid, 0)
    return fd
