"""Sparse time index of one segment: ``<base offset>.timeindex``.

File format (Kafka's): a flat array of 12-byte entries, no header::

    timestamp        i64 big endian   (largest batch max-timestamp seen so far)
    relative offset  u32 big endian   (last offset of the batch holding that timestamp - base)

Entries are added at the same moments as offset-index entries, and only when the timestamp
grew, so timestamps strictly increase. When a segment becomes inactive the final
(max timestamp, offset) is appended, which makes the last entry the segment's largest
timestamp — retention by time and ``offset_for_timestamp`` read it from there.
Like the offset index it is kept in memory, written in bulk, rebuilt (never trusted) after
an unclean shutdown. Not thread-safe; guarded by the PartitionLog lock.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left, bisect_right

from .errors import CorruptIndexError

__all__ = ["TimeIndex", "TIME_INDEX_ENTRY_SIZE"]

TIME_INDEX_ENTRY_SIZE = 12
_ENTRY = struct.Struct(">qI")


class TimeIndex:
    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._timestamps: list[int] = []
        self._offsets: list[int] = []  # relative
        self._persisted = 0
        self._dirty_file = False

    def load(self, next_base: int | None = None) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError as exc:
            raise CorruptIndexError(f"time index file {self.path} is missing") from exc
        if len(data) % TIME_INDEX_ENTRY_SIZE:
            raise CorruptIndexError(
                f"time index file {self.path} has size {len(data)}, not a multiple of "
                f"{TIME_INDEX_ENTRY_SIZE}"
            )
        ts_list: list[int] = []
        off_list: list[int] = []
        prev_t, prev_o = -(2**63), -1
        limit = (next_base - self.base_offset) if next_base is not None else None
        for t, o in _ENTRY.iter_unpack(data):
            if t <= prev_t or o < prev_o or (limit is not None and o >= limit):
                raise CorruptIndexError(
                    f"corrupt time index {self.path}: entry ({t}, {o}) after ({prev_t}, {prev_o})"
                )
            ts_list.append(t)
            off_list.append(o)
            prev_t, prev_o = t, o
        self.max_entries = max(self.max_entries, len(ts_list))
        self._timestamps, self._offsets = ts_list, off_list
        self._persisted = len(ts_list)
        self._dirty_file = False

    def reset(self) -> None:
        self._timestamps = []
        self._offsets = []
        self._persisted = 0
        self._dirty_file = True

    @property
    def entries(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset)."""
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        rel = offset - self.base_offset
        if self._offsets and rel < self._offsets[-1]:
            raise CorruptIndexError(
                f"attempt to append offset {offset} smaller than the last one to {self.path}"
            )
        self._timestamps.append(timestamp)
        self._offsets.append(rel)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= ``offset``."""
        rel = offset - self.base_offset
        i = bisect_left(self._offsets, rel) if rel > 0 else 0
        if i < len(self._offsets):
            del self._timestamps[i:]
            del self._offsets[i:]
            if i < self._persisted:
                self._persisted = i
                self._dirty_file = True

    def lookup(self, target_ts: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, or (-1, base)."""
        i = bisect_right(self._timestamps, target_ts) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def flush(self, fsync: bool = False) -> None:
        if self._dirty_file:
            data = b"".join(_ENTRY.pack(t, o) for t, o in zip(self._timestamps, self._offsets, strict=True))
            tmp = self.path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                if fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._persisted = len(self._timestamps)
            self._dirty_file = False
            return
        n = len(self._timestamps)
        if n == self._persisted and os.path.exists(self.path) and not fsync:
            return
        data = b"".join(
            _ENTRY.pack(t, o)
            for t, o in zip(self._timestamps[self._persisted :], self._offsets[self._persisted :], strict=True)
        )
        with open(self.path, "ab") as f:
            if data:
                f.write(data)
            if fsync:
                os.fsync(f.fileno())
        self._persisted = n

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete_file(self) -> None:
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
