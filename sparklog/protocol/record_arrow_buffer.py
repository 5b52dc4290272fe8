"""The vectorised decoder's view of a records section, and its varint reader.

Part of ``record_arrow`` (the whole-fetch -> Arrow decoder; its docstring has the plan).
Everything here works on numpy arrays of positions at once: ``RecordsBuffer.words`` reads
8 bytes at every position with one gather, ``varints`` decodes a zigzag varint at every
position from those words with bit arithmetic.

Invariant: nothing reads outside the buffer. Positions past the end read zeros (the last
bytes are kept again in a zero-padded tail), so a garbled length makes a wrong value, which
the decoder's checks reject, never a crash or a read of foreign memory.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .errors import MalformedFrameError
from .primitives import decode_varint

__all__ = ["ONE", "CONTINUATION_BITS", "RecordsBuffer", "fold_groups", "unzigzag", "varints"]

_PAD = 16  # zero bytes after the data so 8-byte gathers never leave the buffer
CONTINUATION_BITS = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F)
ONE = np.uint64(1)


class RecordsBuffer:
    """The records bytes as: Python-indexable bytes (for the walk), a uint8 array and an
    unaligned little-endian uint64 view (8 bytes at any position, one gather), all over the
    caller's buffer without a copy. The last bytes are also kept in a small zero-padded
    tail so an 8-byte read near the end never leaves the buffer."""

    __slots__ = ("raw", "u8", "u64", "size", "arrow", "tail", "tail_start", "safe")

    def __init__(self, raw: bytes | memoryview, arrow: pa.Buffer) -> None:
        n = len(raw)
        u8 = np.frombuffer(raw, dtype=np.uint8)
        self.raw = raw
        self.u8 = u8
        self.size = n
        self.arrow = arrow
        self.safe = n - 8  # positions <= safe read 8 bytes from the buffer itself
        self.u64 = np.ndarray(shape=(max(n - 7, 0),), dtype="<u8", buffer=u8, strides=(1,))
        keep = min(n, 32)
        self.tail_start = n - keep
        tail = np.zeros(keep + _PAD, dtype=np.uint8)
        tail[:keep] = u8[n - keep :]
        self.tail = np.ndarray(shape=(keep + _PAD - 7,), dtype="<u8", buffer=tail, strides=(1,))

    def words(self, pos: np.ndarray) -> np.ndarray:
        """8 bytes at each position (positions are >= 0; past the end reads zeros)."""
        pos = np.minimum(pos, self.size)
        near_end = pos > self.safe
        if not near_end.any():
            return self.u64[pos]
        out = np.empty(len(pos), dtype=np.uint64)
        far = ~near_end
        out[far] = self.u64[pos[far]]
        out[near_end] = self.tail[pos[near_end] - self.tail_start]
        return out


def fold_groups(w: np.ndarray, nbytes: int) -> np.ndarray:
    """The 7-bit groups of the low ``nbytes`` bytes of each little-endian word, joined
    (the varint's unsigned value; continuation bits are dropped)."""
    v = w & _LOW7
    for k in range(1, nbytes):
        v |= (w >> np.uint64(k)) & np.uint64(0x7F << (7 * k))
    return v


def unzigzag(v: np.ndarray) -> np.ndarray:
    """Zigzag-decode unsigned values into int64."""
    return ((v >> ONE) ^ (np.uint64(0) - (v & ONE))).view(np.int64)


def varints(
    buf: RecordsBuffer, pos: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Zigzag varints at ``pos`` -> (values int64, sizes int64, bad bool).

    One 8-byte gather per position; the terminator is the lowest byte without the
    continuation bit: isolate its high bit, and the bits below it select the varint's
    bytes (their popcount / 8 is the size); then fold the 7-bit groups together."""
    w = buf.words(pos)
    term = ~w & CONTINUATION_BITS
    keep = term ^ (term - ONE)  # bits up to and including the terminator's high bit
    size = (np.bitwise_count(keep) >> np.uint8(3)).astype(np.int64)
    bad = term == 0
    top = int(size.max()) if size.size else 0
    w &= keep
    values = unzigzag(fold_groups(w, min(top, 8)))
    if bad.any():
        # more than 8 bytes: legal only for varlongs (9-10 bytes); decode those in Python
        for i in np.flatnonzero(bad).tolist():
            p = int(pos[i])
            if max_bytes <= 8 or not 0 <= p < buf.size:
                continue
            try:
                val, end = decode_varint(buf.raw, p)
            except MalformedFrameError:
                continue
            values[i] = val
            size[i] = end - p
            bad[i] = False
        size[bad] = 1
    if max_bytes < 8 and top > max_bytes:
        bad |= size > max_bytes
    return values, size, bad
