"""Where segment bytes live: the local-file backend now, an object-storage tier later.

The log itself only ever *appends to* and *truncates* the active segment, which must be a local
file (``os.pwritev`` + ``os.sendfile``). Everything else a segment goes through once sealed —
listed, read in ranges, copied, deleted — is expressed by ``SegmentStore``, so a tier that
uploads sealed segments (``.log`` + ``.index`` + ``.timeindex`` + ``.snapshot``) to any fsspec
URL (KIP-405 style) implements ``RemoteSegmentStore`` and is handed to ``PartitionLog(remote=...)``.
Reads below the local log start offset are then answered from it (``FileSlice`` with a URL
``path`` and no local fd); without one they raise OffsetOutOfRange. The tier is not built yet.

``FileSlice`` is the read unit given to the fetch path. Its ``size`` attribute is what the
protocol encoder looks for to treat it as an external chunk it can ``sendfile``.
"""

from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass

__all__ = [
    "FileSlice",
    "SegmentStore",
    "LocalSegmentStore",
    "RemoteSegmentStore",
    "RemoteSegmentMetadata",
]


class FileSlice:
    """``size`` bytes of a file starting at ``position``, not yet read.

    ``fileno()`` gives the segment's open descriptor when the bytes are local (valid while
    the segment lives; deleted segments keep theirs for ``file.delete.delay.ms``), so the
    broker can ``os.sendfile(sock, slice.fileno(), slice.position, slice.size)``.
    """

    __slots__ = ("path", "position", "size", "_fd", "_store")

    def __init__(self, path: str, position: int, size: int, fd: int | None = None,
                 store: SegmentStore | None = None) -> None:
        self.path = path
        self.position = position
        self.size = size
        self._fd = fd
        self._store = store

    def fileno(self) -> int | None:
        return self._fd

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


class SegmentStore(ABC):
    """Operations on sealed segment files, by path or URL."""

    @abstractmethod
    def read_range(self, path: str, position: int, size: int) -> bytes: ...

    @abstractmethod
    def list_dir(self, path: str) -> list[str]: ...

    @abstractmethod
    def delete(self, path: str) -> None: ...

    @abstractmethod
    def rename(self, src: str, dst: str) -> None: ...

    @abstractmethod
    def size(self, path: str) -> int: ...


class LocalSegmentStore(SegmentStore):
    """Plain local files (the default)."""

    def read_range(self, path: str, position: int, size: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(position)
            return f.read(size)

    def list_dir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def delete(self, path: str) -> None:
        try:
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except FileNotFoundError:
            pass

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def size(self, path: str) -> int:
        return os.path.getsize(path)


@dataclass(frozen=True)
class RemoteSegmentMetadata:
    """What the (strongly consistent) metadata side knows of one uploaded segment."""

    base_offset: int
    end_offset: int  # last offset + 1
    max_timestamp: int
    size: int
    url: str  # the .log object; its indexes sit beside it with Kafka's suffixes
    leader_epochs: tuple[tuple[int, int], ...] = ()


class RemoteSegmentStore(SegmentStore):
    """The tiering plug-in point (data plane + segment listing). Implementations copy sealed
    local segments to a URL, list what is there, and serve byte ranges back."""

    @abstractmethod
    def copy_segment(self, topic: str, partition: int, files: dict[str, str],
                     meta: RemoteSegmentMetadata) -> None:
        """Upload ``files`` (suffix -> local path); visible once ``meta`` is recorded."""

    @abstractmethod
    def segments(self, topic: str, partition: int) -> list[RemoteSegmentMetadata]: ...

    @abstractmethod
    def delete_segment(self, meta: RemoteSegmentMetadata) -> None: ...
