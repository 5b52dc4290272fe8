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

import sys
from array import array
from bisect import bisect_left, bisect_right

from .errors import CorruptIndexError
from .sparse_index import SparseIndex

__all__ = ["OffsetIndex", "OFFSET_INDEX_ENTRY_SIZE"]

OFFSET_INDEX_ENTRY_SIZE = 8
_LITTLE = sys.byteorder == "little"


def _to_be(arr: array) -> bytes:
    if _LITTLE:
        arr = array(arr.typecode, arr)
        arr.byteswap()
    return arr.tobytes()


class OffsetIndex(SparseIndex):
    _KIND = "index"
    _ENTRY_SIZE = OFFSET_INDEX_ENTRY_SIZE

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        super().__init__(path, base_offset, max_entries)
        self._offsets = array("I")  # relative offsets
        self._positions = array("I")

    def _columns(self) -> tuple[array, array]:
        return self._offsets, self._positions

    def _encode(self, start: int) -> bytes:
        flat = array("I", bytes(8 * (len(self._offsets) - start)))
        flat[0::2] = self._offsets[start:]
        flat[1::2] = self._positions[start:]
        return _to_be(flat)

    # -- load / rebuild
    def load(self, log_size: int, next_base: int | None = None) -> None:
        """Read the file and check it; CorruptIndexError means 'rebuild me'."""
        data = self._read_file()
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
        self._offsets, self._positions = offsets, positions
        self._loaded()

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
    def last_offset(self) -> int:
        return self.base_offset + self._offsets[-1] if self._offsets else self.base_offset

    def truncate_to_position(self, position: int) -> None:
        """Remove entries pointing at or past ``position`` (after a log truncation)."""
        self._cut_from(bisect_left(self._positions, position) if position > 0 else 0)

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
