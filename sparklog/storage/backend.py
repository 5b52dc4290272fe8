"""Where the bytes of a read live: ``FileSlice``, the read unit given to the fetch path.

A slice of a local segment carries the segment's descriptor, so the broker can
``os.sendfile`` it; a slice of a remote segment (``storage.remote``, the object-storage
tier) carries the ``RangeReader`` its bytes come from (the tier's chunk cache) instead, and
is written from the cached chunks without joining them (``remote_parts``). An object of a
``file://`` tier is a local file: its slice carries neither and is sent by its path.
``size`` is what the protocol encoder looks for to treat a slice as an external chunk.
"""

from __future__ import annotations

import os
from typing import Protocol

__all__ = ["FileSlice", "RangeReader"]


class RangeReader(Protocol):
    """Reads byte ranges of objects that are not local files (the remote tier)."""

    def read_range(self, path: str, position: int, size: int) -> bytes: ...

    def read_parts(self, path: str, position: int, size: int) -> list[memoryview]:
        """The bytes of ``read_range`` in pieces, without joining them."""
        ...


class FileSlice:
    """``size`` bytes of a file starting at ``position``, not yet read.

    ``fileno()`` gives the segment's open descriptor when the bytes are local (valid while
    the segment lives; deleted segments keep theirs for ``file.delete.delay.ms``), so the
    broker can ``os.sendfile(sock, slice.fileno(), slice.position, slice.size)``.
    """

    __slots__ = ("path", "position", "size", "_fd", "_store")

    def __init__(self, path: str, position: int, size: int, fd: int | None = None,
                 store: RangeReader | None = None) -> None:
        self.path = path
        self.position = position
        self.size = size
        self._fd = fd
        self._store = store

    def fileno(self) -> int | None:
        return self._fd

    def remote_parts(self) -> list[memoryview] | None:
        """The bytes of a slice of a remote object, in pieces not joined (None for a slice
        of a local file, which is sent from the file)."""
        if self._store is None:
            return None
        return self._store.read_parts(self.path, self.position, self.size)

    def read_bytes(self) -> bytes:
        if self._fd is not None:
            try:
                data = os.pread(self._fd, self.size, self.position)
                if len(data) == self.size:
                    return data
            except OSError:
                pass
        if self._store is not None:
            return self._store.read_range(self.path, self.position, self.size)
        with open(self.path, "rb") as f:
            f.seek(self.position)
            return f.read(self.size)

    def read_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        """Copy the slice into ``buf[offset:]`` without allocating; returns bytes copied."""
        view = memoryview(buf)[offset : offset + self.size]
        if self._fd is not None:
            try:
                n = os.preadv(self._fd, [view], self.position)
                if n == self.size:
                    return n
            except OSError:
                pass
        data = self.read_bytes()
        view[: len(data)] = data
        return len(data)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice({self.path!r}, position={self.position}, size={self.size})"
