"""What the offset index and the time index have in common: two parallel columns of ints kept
in memory, one of them the relative offsets, written to a flat headerless file of fixed-size
entries — appended in bulk on ``flush()``, rewritten whole (via a temp file) once a truncation
or reset has made the file diverge. Keeping that bookkeeping in one place means the
persisted/dirty rules cannot drift apart between the two files. Subclasses own the entry
encoding and the load-time sanity check (which differ), this class owns everything else.
Not thread-safe; the owning PartitionLog's lock guards it.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import MutableSequence

from .errors import CorruptIndexError

__all__ = ["SparseIndex"]


class SparseIndex:
    _KIND = "index"  # names the file in error messages
    _ENTRY_SIZE = 0
    # the relative-offsets column; each subclass also holds one other column, always of the
    # same length (so ``len(self._offsets)`` counts the entries)
    _offsets: MutableSequence[int]

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._persisted = 0  # entries already in the file
        self._dirty_file = False  # file content diverged (truncate) -> rewrite on flush

    # -- subclass hooks
    def _columns(self) -> tuple[MutableSequence[int], MutableSequence[int]]:
        """Both columns."""
        raise NotImplementedError

    def _encode(self, start: int) -> bytes:
        """The file bytes of the entries from ``start`` on."""
        raise NotImplementedError

    # -- load / rebuild
    def _read_file(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError as exc:
            raise CorruptIndexError(f"{self._KIND} file {self.path} is missing") from exc
        if len(data) % self._ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self._KIND} file {self.path} has size {len(data)}, not a multiple of "
                f"{self._ENTRY_SIZE}"
            )
        return data

    def _loaded(self) -> None:
        """The columns now match the file exactly."""
        n = self.entries
        if n > self.max_entries:
            self.max_entries = n
        self._persisted = n
        self._dirty_file = False

    def reset(self) -> None:
        """Drop every entry (before a rebuild); the file is rewritten on the next flush."""
        for col in self._columns():
            del col[:]
        self._persisted = 0
        self._dirty_file = True

    # -- writes
    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:  # checked on every append: no nested property
        return len(self._offsets) >= self.max_entries

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= ``offset``."""
        rel = offset - self.base_offset
        self._cut_from(bisect_left(self._offsets, rel) if rel > 0 else 0)

    def _cut_from(self, i: int) -> None:
        """Drop entries ``i`` and after; the file must be rewritten if some were persisted."""
        cols = self._columns()
        if i < len(cols[0]):
            for col in cols:
                del col[i:]
            if i < self._persisted:
                self._persisted = i
                self._dirty_file = True

    def flush(self, fsync: bool = False) -> None:
        """Write the pending entries (all of them after a truncation) to the file."""
        if self._dirty_file:
            tmp = self.path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(self._encode(0))
                if fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._persisted = self.entries
            self._dirty_file = False
            return
        n = self.entries
        if n == self._persisted and os.path.exists(self.path) and not fsync:
            return
        data = self._encode(self._persisted)
        with open(self.path, "ab") as f:
            if data:
                f.write(data)
            if fsync:
                os.fsync(f.fileno())
        self._persisted = n

    # -- files
    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete_file(self) -> None:
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
