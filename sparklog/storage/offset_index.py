"""Sparse offset index of one segment: ``<base offset>.index``.

File format (Kafka's, byte for byte): a flat array of 8-byte entries, no header::

    relative offset  u32 big endian   (offset - segment base offset)
    position         u32 big endian   (byte position of the batch in the .log file)

An entry is added when more than ``index.interval.bytes`` were appended since the previous one;
it names the *last* offset of a batch and that batch's start position, so "the largest entry
<= target" always points at or before the batch holding the target. Offsets strictly increase,
positions never decrease. The file is not checksummed: when it fails ``sanity_check`` or the
segment is recovered, it is rebuilt from the log (what Kafka does).

Entries live in memory (two ``array('I')``) and reach the file in bulk on ``flush()`` — at
segment roll, log flush and close — so an append costs no extra syscall. Kafka preallocates
and mmaps; we keep the file exactly ``8 * entries`` long, which Kafka also accepts on load.
This class is not thread-safe; the owning PartitionLog's lock guards it.
"""

from __future__ import annotations

import os
import sys
from array import array
from bisect import bisect_left, bisect_right

from .errors import CorruptIndexError

__all__ = ["OffsetIndex", "OFFSET_INDEX_ENTRY_SIZE"]

OFFSET_INDEX_ENTRY_SIZE = 8
_LITTLE = sys.byteorder == "little"


def _to_be(arr: array) -> bytes:
    if _LITTLE:
        arr = array(arr.typecode, arr)
        arr.byteswap()
    return arr.tobytes()


class OffsetIndex:
    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._offsets = array("I")  # relative offsets
        self._positions = array("I")
        self._persisted = 0  # entries already in the file
        self._dirty_file = False  # file content diverged (truncate) -> rewrite on flush

    # -- load / rebuild
    def load(self, log_size: int, next_base: int | None = None) -> None:
        """Read the file and check it; CorruptIndexError means 'rebuild me'."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError as exc:
            raise CorruptIndexError(f"index file {self.path} is missing") from exc
        if len(data) % OFFSET_INDEX_ENTRY_SIZE:
            raise CorruptIndexError(
                f"index file {self.path} has size {len(data)}, not a multiple of "
                f"{OFFSET_INDEX_ENTRY_SIZE}"
            )
        flat = array("I")
        flat.frombytes(data)
        if _LITTLE:
            flat.byteswap()
        offsets, positions = flat[0::2], flat[1::2]
        prev_o, prev_p = -1, 0
        limit = (next_base - self.base_offset) if next_base is not None else None
        for o, p in zip(offsets, positions, strict=True):
            if o <= prev_o or p < prev_p or p >= log_size or (limit is not None and o >= limit):
                raise CorruptIndexError(
                    f"corrupt index found, index file {self.path}: entry ({o}, {p}) after "
                    f"({prev_o}, {prev_p}), log size {log_size}"
                )
            prev_o, prev_p = o, p
        if len(offsets) > self.max_entries:
            self.max_entries = len(offsets)
        self._offsets, self._positions = offsets, positions
        self._persisted = len(offsets)
        self._dirty_file = False

    def reset(self) -> None:
        """Drop every entry (before a rebuild); the file is rewritten on the next flush."""
        self._offsets = array("I")
        self._positions = array("I")
        self._persisted = 0
        self._dirty_file = True

    # -- writes
    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._offsets and rel <= self._offsets[-1]:
            raise CorruptIndexError(
                f"attempt to append offset {offset} no larger than the last offset "
                f"{self.base_offset + self._offsets[-1]} to {self.path}"
            )
        self._offsets.append(rel)
        self._positions.append(position)

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._offsets[-1] if self._offsets else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= ``offset``."""
        rel = offset - self.base_offset
        i = bisect_left(self._offsets, rel) if rel > 0 else 0
        if i < len(self._offsets):
            del self._offsets[i:]
            del self._positions[i:]
            if i < self._persisted:
                self._persisted = i
                self._dirty_file = True

    def truncate_to_position(self, position: int) -> None:
        """Remove entries pointing at or past ``position`` (after a log truncation)."""
        i = bisect_left(self._positions, position) if position > 0 else 0
        if i < len(self._positions):
            del self._offsets[i:]
            del self._positions[i:]
            if i < self._persisted:
                self._persisted = i
                self._dirty_file = True

    def flush(self, fsync: bool = False) -> None:
        """Write the pending entries (all of them after a truncation) to the file."""
        if self._dirty_file:
            flat = array("I", bytes(8 * len(self._offsets)))
            flat[0::2] = self._offsets
            flat[1::2] = self._positions
            tmp = self.path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(_to_be(flat))
                if fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._persisted = len(self._offsets)
            self._dirty_file = False
            return
        n = len(self._offsets)
        if n == self._persisted and os.path.exists(self.path) and not fsync:
            return
        pending = array("I", bytes(8 * (n - self._persisted)))
        pending[0::2] = self._offsets[self._persisted :]
        pending[1::2] = self._positions[self._persisted :]
        with open(self.path, "ab") as f:
            if pending:
                f.write(_to_be(pending))
            if fsync:
                os.fsync(f.fileno())
        self._persisted = n

    # -- lookups
    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= target, or (base offset, 0)."""
        rel = target_offset - self.base_offset
        if rel < 0 or not self._offsets:
            return self.base_offset, 0
        i = bisect_right(self._offsets, rel) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 when none)."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def entry(self, i: int) -> tuple[int, int]:
        return self.base_offset + self._offsets[i], self._positions[i]

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete_file(self) -> None:
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
