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

import struct
from bisect import bisect_right

from .errors import CorruptIndexError
from .sparse_index import SparseIndex

__all__ = ["TimeIndex", "TIME_INDEX_ENTRY_SIZE"]

TIME_INDEX_ENTRY_SIZE = 12
_ENTRY = struct.Struct(">qI")


class TimeIndex(SparseIndex):
    _KIND = "time index"
    _ENTRY_SIZE = TIME_INDEX_ENTRY_SIZE

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        super().__init__(path, base_offset, max_entries)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []  # relative

    def _columns(self) -> tuple[list[int], list[int]]:
        return self._timestamps, self._offsets

    def _encode(self, start: int) -> bytes:
        return b"".join(
            _ENTRY.pack(t, o)
            for t, o in zip(self._timestamps[start:], self._offsets[start:], strict=True)
        )

    def load(self, next_base: int | None = None) -> None:
        data = self._read_file()
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
        self._timestamps, self._offsets = ts_list, off_list
        self._loaded()

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

    def lookup(self, target_ts: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, or (-1, base)."""
        i = bisect_right(self._timestamps, target_ts) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]
