"""Kafka RecordBatch v2 (magic 2): zero-copy header view, in-place stamping, full codec.

Two levels, because the broker and the reader need different things:

* ``BatchView`` reads header fields straight out of the buffer at fixed offsets and checks the
  CRC over a memoryview. A broker validates, stamps (base offset, leader epoch, log-append
  time) and stores a client's bytes without ever touching the records inside.
* ``encode_batch`` / ``decode_batch`` build and parse whole batches with their records
  (producer, consumer, tests). The vectorised Arrow path lives in ``record_arrow``.

Batch header (61 bytes, big endian)::

     0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 |
    17 crc u32 (CRC-32C of bytes 21..end) | 21 attributes i16 | 23 lastOffsetDelta i32 |
    27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16 |
    53 baseSequence i32 | 57 recordCount i32 | 61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum

from crc32c import crc32c

from .errors import CorruptRecordError, InvalidRecordError

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "COMPRESSION_MASK",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "CONTROL_MASK",
    "DELETE_HORIZON_MASK",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "Compression",
    "TimestampType",
    "BatchView",
    "iter_batch_views",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_max_timestamp_and_type",
    "refresh_crc",
]

# ----------------------------------------------------------------------------- constants

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MAGIC_V2 = 2
# smallest legal batchLength: a header with no records
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

# field offsets inside a batch
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORD_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
# the whole header in one call, for decode_batch
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
assert HEADER_STRUCT.size == BATCH_HEADER_SIZE

_INT32_MAX = 0x7FFFFFFF


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1  # records API only; never stored in a v2 batch
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


Buffer = bytes | bytearray | memoryview


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's sequence numbers wrap from INT32_MAX to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


# ----------------------------------------------------------------------------- BatchView


class BatchView:
    """Read-only view of ONE batch inside a larger buffer; nothing is copied.

    Fields are read lazily from the buffer, so a view stays correct after the in-place
    stamping helpers below rewrite the header of a ``bytearray``. The constructor checks only
    what every later access relies on: the whole batch is present and magic is 2. Call
    ``ensure_valid()`` for the CRC and the header-consistency checks.
    """

    __slots__ = ("_buf", "_pos", "_size")

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        avail = len(mv) - pos
        if pos < 0 or avail < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated batch header at {pos}: {max(avail, 0)} of {BATCH_HEADER_SIZE} bytes"
            )
        batch_length = _I32.unpack_from(mv, pos + BATCH_LENGTH_OFFSET)[0]
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch at {pos}: batchLength {batch_length} < 49")
        size = LOG_OVERHEAD + batch_length
        if avail < size:
            raise CorruptRecordError(f"truncated batch at {pos}: {avail} of {size} bytes")
        magic = mv[pos + MAGIC_OFFSET]
        if magic != MAGIC_V2:
            raise InvalidRecordError(f"batch at {pos}: magic {magic}, only magic 2 is supported")
        self._buf = mv
        self._pos = pos
        self._size = size

    # -- raw access
    @property
    def buffer(self) -> memoryview:
        return self._buf

    @property
    def position(self) -> int:
        return self._pos

    def raw(self) -> memoryview:
        """The batch's bytes (a slice of the underlying buffer, not a copy)."""
        return self._buf[self._pos : self._pos + self._size]

    def records_bytes(self) -> memoryview:
        """The (possibly compressed) records section."""
        return self._buf[self._pos + RECORDS_OFFSET : self._pos + self._size]

    # -- header fields
    @property
    def base_offset(self) -> int:
        return _I64.unpack_from(self._buf, self._pos)[0]

    @property
    def batch_length(self) -> int:
        return self._size - LOG_OVERHEAD

    @property
    def size(self) -> int:
        return self._size

    @property
    def partition_leader_epoch(self) -> int:
        return _I32.unpack_from(self._buf, self._pos + PARTITION_LEADER_EPOCH_OFFSET)[0]

    @property
    def magic(self) -> int:
        return self._buf[self._pos + MAGIC_OFFSET]

    @property
    def crc(self) -> int:
        return _U32.unpack_from(self._buf, self._pos + CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return _I16.unpack_from(self._buf, self._pos + ATTRIBUTES_OFFSET)[0]

    @property
    def compression(self) -> int:
        """The codec id (0..7). Returned as a plain int because ids 5..7 are not
        ``Compression`` members; ``Compression(view.compression)`` raises for them."""
        return self._buf[self._pos + ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self._buf[self._pos + ATTRIBUTES_OFFSET + 1] & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self._buf[self._pos + ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self._buf[self._pos + ATTRIBUTES_OFFSET + 1] & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self._buf[self._pos + ATTRIBUTES_OFFSET + 1] & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """With the delete-horizon bit set, baseTimestamp holds the horizon (KIP-534)."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_offset_delta(self) -> int:
        return _I32.unpack_from(self._buf, self._pos + LAST_OFFSET_DELTA_OFFSET)[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return _I64.unpack_from(self._buf, self._pos + BASE_TIMESTAMP_OFFSET)[0]

    @property
    def max_timestamp(self) -> int:
        return _I64.unpack_from(self._buf, self._pos + MAX_TIMESTAMP_OFFSET)[0]

    @property
    def producer_id(self) -> int:
        return _I64.unpack_from(self._buf, self._pos + PRODUCER_ID_OFFSET)[0]

    @property
    def producer_epoch(self) -> int:
        return _I16.unpack_from(self._buf, self._pos + PRODUCER_EPOCH_OFFSET)[0]

    @property
    def base_sequence(self) -> int:
        return _I32.unpack_from(self._buf, self._pos + BASE_SEQUENCE_OFFSET)[0]

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(base, self.last_offset_delta)

    @property
    def record_count(self) -> int:
        return _I32.unpack_from(self._buf, self._pos + RECORD_COUNT_OFFSET)[0]

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    # -- validation
    def compute_crc(self) -> int:
        return crc32c(self._buf[self._pos + ATTRIBUTES_OFFSET : self._pos + self._size])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def ensure_valid(self) -> None:
        """CRC first (a flipped bit anywhere in attributes..end is a CorruptRecordError),
        then the header rules a well-behaved producer always satisfies."""
        stored, computed = self.crc, self.compute_crc()
        if stored != computed:
            raise CorruptRecordError(
                f"batch at offset {self.base_offset}: CRC mismatch "
                f"(stored {stored:#010x}, computed {computed:#010x})"
            )
        self.ensure_consistent()

    def ensure_consistent(self) -> None:
        """Header-only consistency checks (no CRC)."""
        count = self.record_count
        if count < 0:
            raise InvalidRecordError(f"batch at offset {self.base_offset}: recordCount {count}")
        delta = self.last_offset_delta
        if delta < 0 or (count > 0 and delta < count - 1):
            raise InvalidRecordError(
                f"batch at offset {self.base_offset}: lastOffsetDelta {delta} "
                f"inconsistent with recordCount {count}"
            )
        if self.compression == Compression.NONE and count > 0:
            # each record needs at least 7 bytes (length + attrs + 3 deltas + 2 lengths + count)
            if count > (self._size - RECORDS_OFFSET) // 7:
                raise InvalidRecordError(
                    f"batch at offset {self.base_offset}: {count} records cannot fit in "
                    f"{self._size - RECORDS_OFFSET} bytes"
                )

    def __repr__(self) -> str:
        return (
            f"BatchView(base_offset={self.base_offset}, last_offset_delta="
            f"{self.last_offset_delta}, count={self.record_count}, size={self._size}, "
            f"compression={self.compression}, attrs={self.attributes:#x})"
        )


def iter_batch_views(
    buf: Buffer, pos: int = 0, end: int | None = None, *, allow_partial_tail: bool = False
) -> Iterator[BatchView]:
    """Walk concatenated batches in ``buf[pos:end]``.

    A truncated or garbled batch raises CorruptRecordError (magic != 2 raises
    InvalidRecordError). ``allow_partial_tail=True`` stops silently at an incomplete LAST
    batch instead: Fetch responses are allowed to end mid-batch (the broker cuts at
    max.partition.fetch.bytes), and consumers just drop that tail.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if end is None:
        end = len(mv)
    elif end > len(mv):
        raise CorruptRecordError(f"end {end} beyond buffer of {len(mv)} bytes")
    if end != len(mv):
        mv = mv[:end]
    while pos < end:
        if allow_partial_tail:
            remaining = end - pos
            if remaining < LOG_OVERHEAD:
                return
            length = _I32.unpack_from(mv, pos + BATCH_LENGTH_OFFSET)[0]
            if length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(f"batch at {pos}: batchLength {length} < 49")
            if remaining < LOG_OVERHEAD + length:
                return
        view = BatchView(mv, pos)
        yield view
        pos += view.size


# ----------------------------------------------------------------------------- stamping


def _check_stamp_target(buf: bytearray | memoryview, pos: int) -> None:
    if isinstance(buf, bytes):
        raise TypeError("in-place stamping needs a writable buffer (bytearray/memoryview)")
    if pos < 0 or len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"no batch header at {pos}")


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """baseOffset is outside the CRC range, so no CRC update is needed."""
    _check_stamp_target(buf, pos)
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """partitionLeaderEpoch is outside the CRC range too."""
    _check_stamp_target(buf, pos)
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def refresh_crc(buf: bytearray | memoryview, pos: int) -> int:
    """Recompute and store the CRC of the batch at ``pos``; returns it."""
    _check_stamp_target(buf, pos)
    size = LOG_OVERHEAD + _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0]
    if size < BATCH_HEADER_SIZE or len(buf) - pos < size:
        raise CorruptRecordError(f"truncated batch at {pos}")
    mv = memoryview(buf)
    crc = crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size])
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc


def set_max_timestamp_and_type(
    buf: bytearray | memoryview, pos: int, ts: int, timestamp_type: TimestampType | int
) -> None:
    """Stamp maxTimestamp and the timestamp-type bit (log-append time), then fix the CRC.

    Both live inside the CRC range; when nothing changes the CRC pass is skipped (what Kafka's
    ``setMaxTimestamp`` does too)."""
    _check_stamp_target(buf, pos)
    attrs = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        new_attrs = attrs | TIMESTAMP_TYPE_MASK
    elif timestamp_type == TimestampType.CREATE_TIME:
        new_attrs = attrs & ~TIMESTAMP_TYPE_MASK
    else:
        raise ValueError(f"cannot stamp timestamp type {timestamp_type!r}")
    old_ts = _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
    if new_attrs == attrs and old_ts == ts:
        return
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, new_attrs)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts)
    refresh_crc(buf, pos)
