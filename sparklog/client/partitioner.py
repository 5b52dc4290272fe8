"""Choosing a partition for a record, bit-for-bit like the Java client.

Keyed records must land where the Java producer (and librdkafka's ``murmur2_random``)
would put them, otherwise two producers written in different languages split one key's
history across partitions and break per-key ordering. The hash is Kafka's
``Utils.murmur2`` (seed 0x9747b28c) followed by ``toPositive`` (``& 0x7fffffff``) and a
modulo. Null keys use sticky partitioning (KIP-480): stay on one partition until its
batch is sent, so null-key traffic still forms large batches.
"""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any

import numpy as np

__all__ = [
    "murmur2",
    "murmur2_array",
    "to_positive",
    "partition_for_key",
    "partitions_for_keys",
    "Partitioner",
    "PARTITIONERS",
]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 as an unsigned 32-bit value (Java's int reinterpreted)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length >> 2
    if n4:
        for k in struct.unpack_from(f"<{n4}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    rem = length & 3
    if rem:
        base = length & ~3
        if rem == 3:
            h ^= data[base + 2] << 16
        if rem >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def to_positive(h: int) -> int:
    return h & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def murmur2_array(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """murmur2 of every value of a binary column given as Arrow-style ``offsets`` (n+1,
    int) and ``data`` (uint8), vectorised: one numpy pass per 4-byte word position, so the
    cost is per column, not per key."""
    offsets = np.asarray(offsets, dtype=np.int64)
    data = np.asarray(data, dtype=np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    n = len(lengths)
    m = np.uint32(_M)
    h = (np.uint32(_SEED) ^ lengths.astype(np.uint32)).astype(np.uint32)
    if n == 0:
        return h
    nwords = lengths >> 2
    max_words = int(nwords.max())
    padded = np.concatenate([data, np.zeros(4, dtype=np.uint8)])
    for i in range(max_words):
        sel = np.nonzero(nwords > i)[0]
        p = starts[sel] + 4 * i
        k = (
            padded[p].astype(np.uint32)
            | (padded[p + 1].astype(np.uint32) << np.uint32(8))
            | (padded[p + 2].astype(np.uint32) << np.uint32(16))
            | (padded[p + 3].astype(np.uint32) << np.uint32(24))
        )
        k = k * m
        k ^= k >> np.uint32(24)
        k = k * m
        h[sel] = (h[sel] * m) ^ k
    rem = lengths & 3
    base = starts + (lengths & ~3)
    sel3 = rem == 3
    h[sel3] ^= padded[base[sel3] + 2].astype(np.uint32) << np.uint32(16)
    sel2 = rem >= 2
    h[sel2] ^= padded[base[sel2] + 1].astype(np.uint32) << np.uint32(8)
    sel1 = rem >= 1
    h[sel1] ^= padded[base[sel1]].astype(np.uint32)
    h[sel1] = h[sel1] * m
    h ^= h >> np.uint32(13)
    h = h * m
    h ^= h >> np.uint32(15)
    return h


def partitions_for_keys(offsets: np.ndarray, data: np.ndarray, num_partitions: int) -> np.ndarray:
    h = murmur2_array(offsets, data)
    return ((h & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)


def _crc32(key: bytes) -> int:
    return zlib.crc32(key) & _MASK


class Partitioner:
    """The ``partitioner`` config: librdkafka's names (``murmur2_random`` is the default,
    matching the Java client), plus ``sticky`` null-key handling for the random variants."""

    def __init__(self, name: str = "murmur2_random", rng: random.Random | None = None) -> None:
        if name not in PARTITIONERS:
            raise ValueError(f"unknown partitioner {name!r} (one of {', '.join(PARTITIONERS)})")
        self.name = name
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}
        self._hash = _crc32 if name.startswith("consistent") else murmur2
        # murmur2 / consistent hash null keys as the empty key (librdkafka semantics)
        self._null_hashed = name in ("murmur2", "consistent")

    def partition(self, topic: str, key: Any, num_partitions: int) -> int:
        if key is None:
            if self._null_hashed:
                return (self._hash(b"") & 0x7FFFFFFF) % num_partitions
            return self.sticky_partition(topic, num_partitions)
        if self.name == "random":
            return self.sticky_partition(topic, num_partitions)
        return (self._hash(key) & 0x7FFFFFFF) % num_partitions

    def sticky_partition(self, topic: str, num_partitions: int) -> int:
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self._rng.randrange(num_partitions)
            self._sticky[topic] = p
        return p

    def on_new_batch(self, topic: str, num_partitions: int, prev_partition: int) -> None:
        """A null-key batch for ``prev_partition`` filled up: move to another partition so
        null-key load spreads (KIP-480)."""
        if self._sticky.get(topic) != prev_partition or num_partitions <= 1:
            return
        p = self._rng.randrange(num_partitions - 1)
        self._sticky[topic] = p if p < prev_partition else p + 1

    def partition_array(
        self, topic: str, offsets: np.ndarray | None, data: np.ndarray | None,
        valid: np.ndarray | None, n: int, num_partitions: int
    ) -> np.ndarray:
        """Partitions for n records whose keys are a binary column (None = all null keys);
        ``valid`` marks non-null keys."""
        sticky = self.sticky_partition(topic, num_partitions)
        if offsets is None:
            if self._null_hashed:
                return np.full(n, (self._hash(b"") & 0x7FFFFFFF) % num_partitions, np.int32)
            return np.full(n, sticky, dtype=np.int32)
        if self._hash is murmur2 and self.name != "random":
            parts = partitions_for_keys(offsets, data, num_partitions)
        elif self.name == "random":
            parts = np.full(n, sticky, dtype=np.int32)
        else:
            buf = bytes(data)
            parts = np.array(
                [(_crc32(buf[offsets[i]:offsets[i + 1]]) & 0x7FFFFFFF) % num_partitions
                 for i in range(n)], dtype=np.int32)
        if valid is not None and not valid.all() and not self._null_hashed:
            parts[~valid] = sticky
        return parts


PARTITIONERS = ("murmur2_random", "murmur2", "random", "consistent", "consistent_random")
