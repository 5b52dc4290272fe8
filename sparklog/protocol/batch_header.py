"""The RecordBatch v2 header: its one definition, and what a broker does to it.

Every layer reads this header: the codecs (``records``, ``record_arrow``,
``record_arrow_encode``), the log (validation, stamping, recovery, index scans) and the
client's fetch path. This module declares it, so that none of them needs an offset or a
struct format of its own::

     0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 |
    17 crc u32 (CRC-32C of bytes 21..end) | 21 attributes i16 | 23 lastOffsetDelta i32 |
    27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16 |
    53 baseSequence i32 | 57 recordCount i32 | 61 records...

Attributes: bits 0-2 codec, 3 timestamp type (log-append time), 4 transactional, 5 control,
6 delete horizon set (KIP-534: baseTimestamp then holds the horizon).

What is here, by use:

* ``HeaderFields``: the thirteen fields' names, in wire order, and what they mean (attribute
  bits, last offset, last sequence); with ``HEADER``'s format, the one declaration of the
  layout: the field offsets and every class carrying a header follow from them.
* ``HEADER`` / ``read_header`` / ``BatchHeader``: all thirteen fields in one struct call,
  for loops that look at every batch (validation, scans, decoding).
* ``BatchView``: a read-only view of one batch inside a larger buffer; fields are read
  lazily, so a view follows the in-place stamping below.
* ``validate_batches``: the checks every batch a log stores must pass, one unpack and one
  combined comparison per batch (plus the caller's own rules); only a failing batch pays
  for finding out which rule it broke.
* ``write_header``, ``stamp_offset_and_epoch``, ``stamp_log_append_time``, ``stamp_crc``:
  building a header, and the broker's stamping of a client's batch (base offset, partition
  leader epoch, and under LogAppendTime the timestamp-type bit and maxTimestamp).

Invariants:

* baseOffset, batchLength and partitionLeaderEpoch lie before byte 21, outside the CRC;
  stamping them never needs a CRC pass. attributes and maxTimestamp lie inside it, so
  ``stamp_log_append_time`` recomputes the CRC.
* A header is trusted only after ``validate_batches`` or ``BatchView`` checked that its whole
  batch is present, its length >= 49 (``MIN_BATCH_LENGTH``) and its magic 2.
* Stamping works on a writable buffer holding the header at ``pos``; the records may be in
  another buffer (``records=``): the log stamps a 61-byte copy of each header and writes
  the client's record bytes untouched.
"""

from __future__ import annotations

import functools
import struct
from collections import namedtuple
from collections.abc import Callable, Iterator
from enum import IntEnum

from crc32c import crc32c

from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MIN_BATCH_LENGTH",
    "MAGIC_V2",
    "HEADER",
    "BASE_OFFSET_OFFSET",
    "BATCH_LENGTH_OFFSET",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "MAGIC_OFFSET",
    "CRC_OFFSET",
    "ATTRIBUTES_OFFSET",
    "LAST_OFFSET_DELTA_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "PRODUCER_ID_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "RECORD_COUNT_OFFSET",
    "RECORDS_OFFSET",
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
    "Buffer",
    "Compression",
    "TimestampType",
    "BatchHeader",
    "BatchView",
    "HEADER_FIELDS",
    "HeaderFields",
    "batch_size",
    "byte_view",
    "increment_sequence",
    "iter_batch_views",
    "make_attributes",
    "read_header",
    "stamp_crc",
    "stamp_log_append_time",
    "stamp_offset_and_epoch",
    "validate_batches",
    "write_header",
]

Buffer = bytes | bytearray | memoryview

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49: a header with no records
MAGIC_V2 = 2

# the whole header in one call; field order as in HeaderFields
HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == BATCH_HEADER_SIZE
_FIELD_CODES = HEADER.format[1:]
_FIELD_OFFSETS = tuple(struct.calcsize(">" + _FIELD_CODES[:i]) for i in range(len(_FIELD_CODES)))

# field offsets inside a batch (0, 8, 12, 16, 17, 21, ... as drawn above)
(BASE_OFFSET_OFFSET, BATCH_LENGTH_OFFSET, PARTITION_LEADER_EPOCH_OFFSET, MAGIC_OFFSET,
 CRC_OFFSET, ATTRIBUTES_OFFSET, LAST_OFFSET_DELTA_OFFSET, BASE_TIMESTAMP_OFFSET,
 MAX_TIMESTAMP_OFFSET, PRODUCER_ID_OFFSET, PRODUCER_EPOCH_OFFSET, BASE_SEQUENCE_OFFSET,
 RECORD_COUNT_OFFSET) = _FIELD_OFFSETS
# ATTRIBUTES_OFFSET is also where the CRC range starts
RECORDS_OFFSET = BATCH_HEADER_SIZE

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

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")  # the first 16 bytes: stamped together

_INT32_MAX = 0x7FFFFFFF
_MAX_KNOWN_CODEC = 4  # zstd


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


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's sequence numbers wrap from INT32_MAX to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def make_attributes(
    compression: Compression | int, *, log_append_time: bool = False,
    transactional: bool = False, control: bool = False, delete_horizon: bool = False,
) -> int:
    """The attributes field; a codec id that does not fit its three bits is refused."""
    attrs = int(compression) & COMPRESSION_MASK
    if int(compression) != attrs:
        raise UnsupportedCompressionError(f"compression id {compression}")
    if log_append_time:
        attrs |= TIMESTAMP_TYPE_MASK
    if transactional:
        attrs |= TRANSACTIONAL_MASK
    if control:
        attrs |= CONTROL_MASK
    if delete_horizon:
        attrs |= DELETE_HORIZON_MASK
    return attrs


# ----------------------------------------------------------------------------- snapshot


class HeaderFields:
    """The header's fields, in wire order (``HEADER`` packs them so), and what they mean:
    declared once for every class that carries a header. ``BatchHeader`` holds the fields
    in a tuple, ``BatchView`` reads each from the batch's bytes, and the decoded
    ``records.RecordBatch`` from its ``BatchHeader``."""

    __slots__ = ()
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> int:
        """The codec id (0..7). A plain int because ids 5..7 are not ``Compression``
        members; ``Compression(x.compression)`` raises for them."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """With the delete-horizon bit set, baseTimestamp holds the horizon (KIP-534)."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(base, self.last_offset_delta)


HEADER_FIELDS: tuple[str, ...] = tuple(HeaderFields.__annotations__)
assert len(HEADER_FIELDS) == len(_FIELD_CODES)


class BatchHeader(namedtuple("_HeaderTuple", HEADER_FIELDS), HeaderFields):
    """All header fields of one batch, as ``HEADER`` unpacks them (same order)."""

    __slots__ = ()


_make_header = functools.partial(tuple.__new__, BatchHeader)  # BatchHeader._make, minus a frame
_unpack_header = HEADER.unpack_from


def byte_view(buf: Buffer) -> memoryview:
    """``buf`` as a flat memoryview of bytes (no copy)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    return mv


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """The header at ``pos``, unchecked (``buf`` must hold 61 bytes there)."""
    return _make_header(_unpack_header(buf, pos))


def batch_size(buf: Buffer, pos: int = 0) -> int:
    """The size of the batch at ``pos`` as its header declares it (12 bytes must be there)."""
    return LOG_OVERHEAD + _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0]


# ----------------------------------------------------------------------------- view


def _field(fmt: struct.Struct, offset: int) -> property:
    """A ``BatchView`` property reading one header field (``fmt`` at ``offset``)."""
    unpack = fmt.unpack_from

    def read(view: BatchView) -> int:
        return unpack(view._buf, view._pos + offset)[0]

    return property(read)


class BatchView(HeaderFields):
    """Read-only view of ONE batch inside a larger buffer; nothing is copied.

    Fields are read lazily from the buffer, so a view stays correct after the stamping
    functions below rewrite the header of a ``bytearray``. The constructor checks only what
    every later access relies on: the whole batch is present and magic is 2. Call
    ``ensure_valid()`` for the CRC and the header-consistency checks.
    """

    __slots__ = ("_buf", "_pos", "_size")

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        mv = byte_view(buf)
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

    def header(self) -> BatchHeader:
        """Every header field at once (one struct call)."""
        return read_header(self._buf, self._pos)

    # -- header fields (HeaderFields'), read from the buffer on every access: set below

    @property
    def size(self) -> int:
        return self._size

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


for _name, _code, _offset in zip(HEADER_FIELDS, _FIELD_CODES, _FIELD_OFFSETS, strict=True):
    setattr(BatchView, _name, _field(struct.Struct(">" + _code), _offset))


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


# ----------------------------------------------------------------------------- validation


def validate_batches(
    mv: memoryview, max_batch_size: int = _INT32_MAX,
    check: Callable[[BatchHeader], None] | None = None,
) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch in ``mv``, which they must fill exactly.

    Checks, in this order, per batch: whole (length >= 49, inside ``mv``), magic 2, size
    <= ``max_batch_size`` (RecordTooLargeError), a known codec (UnsupportedCompressionError),
    lastOffsetDelta and recordCount >= 0, then ``check(header)`` when given (the log's
    producer rules), then the CRC. Nothing in the records section is read but by the CRC."""
    out: list[tuple[int, BatchHeader]] = []
    n = len(mv)
    pos = 0
    unpack = _unpack_header
    make = _make_header
    while pos < n:
        if n - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated batch at position {pos}: {n - pos} bytes, header needs "
                f"{BATCH_HEADER_SIZE}")
        hdr = make(unpack(mv, pos))
        _b, length, _e, magic, crc, attrs, lod, _bt, _mt, _pid, _pe, _bs, count = hdr
        size = LOG_OVERHEAD + length
        if not (length >= MIN_BATCH_LENGTH and pos + size <= n and magic == MAGIC_V2
                and size <= max_batch_size and attrs & COMPRESSION_MASK <= _MAX_KNOWN_CODEC
                and lod >= 0 and count >= 0):
            _raise_malformed(hdr, pos, n, max_batch_size)
        if check is not None:
            check(hdr)
        if crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]) != crc:
            raise CorruptRecordError(f"batch at position {pos}: CRC mismatch")
        out.append((pos, hdr))
        pos += size
    return out


def _raise_malformed(hdr: BatchHeader, pos: int, n: int, limit: int) -> None:
    size = hdr.size
    if hdr.batch_length < MIN_BATCH_LENGTH or pos + size > n:
        raise CorruptRecordError(
            f"batch at position {pos} declares {size} bytes, {n - pos} present")
    if hdr.magic != MAGIC_V2:
        raise InvalidRecordError(
            f"batch at position {pos} has magic {hdr.magic}; only 2 is supported")
    if size > limit:
        raise RecordTooLargeError(f"batch of {size} bytes exceeds max.message.bytes {limit}")
    if hdr.compression > _MAX_KNOWN_CODEC:
        raise UnsupportedCompressionError(f"compression id {hdr.compression}")
    raise InvalidRecordError(f"batch at position {pos}: invalid offset delta/count")


# ----------------------------------------------------------------------------- writing


def write_header(
    buf: bytearray | memoryview, pos: int, end: int, *, base_offset: int,
    partition_leader_epoch: int, attributes: int, last_offset_delta: int,
    base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
    base_sequence: int, record_count: int,
) -> None:
    """Write the header of the batch ``buf[pos:end]`` (records already in place after the
    61 header bytes), CRC included."""
    HEADER.pack_into(
        buf, pos, base_offset, end - pos - LOG_OVERHEAD, partition_leader_epoch, MAGIC_V2, 0,
        attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
        producer_epoch, base_sequence, record_count,
    )
    _U32.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]))


def _check_stamp_target(buf: bytearray | memoryview, pos: int) -> None:
    if isinstance(buf, bytes):
        raise TypeError("in-place stamping needs a writable buffer (bytearray/memoryview)")
    if pos < 0 or len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"no batch header at {pos}")


def stamp_offset_and_epoch(
    buf: bytearray | memoryview, pos: int, base_offset: int, partition_leader_epoch: int
) -> None:
    """Assign the batch its base offset and the leader's epoch (both outside the CRC), with
    its batchLength (between them) written back unchanged: one struct call."""
    _OFFSET_LENGTH_EPOCH.pack_into(buf, pos, base_offset, _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0],
                                   partition_leader_epoch)


def stamp_crc(buf: bytearray | memoryview, pos: int, records: Buffer | None = None) -> int:
    """Recompute and store the CRC of the batch whose header is at ``buf[pos:]``; returns it.

    The records are the batch's bytes after the header in ``buf``, or ``records`` when the
    header is a copy kept apart from them."""
    _check_stamp_target(buf, pos)
    if records is None:
        size = batch_size(buf, pos)
        if size < BATCH_HEADER_SIZE or len(buf) - pos < size:
            raise CorruptRecordError(f"truncated batch at {pos}")
        crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
    else:
        crc = crc32c(records, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + RECORDS_OFFSET]))
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc


def stamp_log_append_time(
    buf: bytearray | memoryview, pos: int, now_ms: int, records: Buffer | None = None
) -> None:
    """LogAppendTime: set the timestamp-type bit and maxTimestamp to ``now_ms``, then the
    CRC (both fields are inside its range); the records themselves are untouched. Like
    Kafka's ``setMaxTimestamp``, a header that already says so keeps its CRC."""
    _check_stamp_target(buf, pos)
    attrs = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    if attrs & TIMESTAMP_TYPE_MASK and _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0] == now_ms:
        return
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    stamp_crc(buf, pos, records)
