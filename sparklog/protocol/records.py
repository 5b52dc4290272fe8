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
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from crc32c import crc32c

from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    MalformedFrameError,
    UnsupportedCompressionError,
)
from .primitives import decode_varint, encode_varint

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
    "Record",
    "RecordBatch",
    "encode_batch",
    "encode_records",
    "decode_batch",
    "decode_batches",
    "decode_records",
    "records_section",
    "ControlRecordType",
    "control_record_key",
    "end_txn_marker_value",
    "parse_control_record_key",
    "parse_end_txn_marker",
    "encode_control_batch",
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


# ----------------------------------------------------------------------------- full codec
#
# Record layout inside the (decompressed) records section:
#   length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
#   keyLength varint | key | valueLength varint | value | headerCount varint |
#   headers: (headerKeyLength varint | headerKey utf8 | headerValueLength varint | value)*
# Lengths of -1 mean null (key, value, header value; a header key may not be null).


@dataclass(slots=True)
class Record:
    """One record. On encode ``offset_delta`` defaults to the record's index in the batch and
    ``timestamp`` to now; on decode ``offset`` is absolute and ``timestamp`` resolved (the
    batch's maxTimestamp under LOG_APPEND_TIME, as Kafka's clients report it)."""

    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None
    offset: int = -1
    offset_delta: int | None = None


@dataclass(slots=True)
class RecordBatch:
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]
    crc: int = 0
    size: int = 0

    @property
    def compression(self) -> int:
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
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def record_count(self) -> int:
        return len(self.records)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(self.base_sequence, self.last_offset_delta)


# zigzag varints of small values, precomputed: encoding is dominated by these calls
_ZZ_MIN, _ZZ_MAX = -1, 1 << 13
_ZZ_TABLE = [encode_varint(i) for i in range(_ZZ_MIN, _ZZ_MAX)]


def _zz(n: int, _t: list[bytes] = _ZZ_TABLE) -> bytes:
    if _ZZ_MIN <= n < _ZZ_MAX:
        return _t[n + 1]
    return encode_varint(n)


_NULL = b"\x01"  # zigzag(-1)


def _encode_record(
    out: bytearray, offset_delta: int, ts_delta: int, key: Buffer | None,
    value: Buffer | None, headers: list[tuple[str, bytes | None]] | None,
) -> None:
    body = bytearray(b"\x00")
    body += _zz(ts_delta)
    body += _zz(offset_delta)
    if key is None:
        body += _NULL
    else:
        body += _zz(len(key))
        body += key
    if value is None:
        body += _NULL
    else:
        body += _zz(len(value))
        body += value
    if not headers:
        body += b"\x00"
    else:
        body += _zz(len(headers))
        for hkey, hval in headers:
            hk = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
            body += _zz(len(hk))
            body += hk
            if hval is None:
                body += _NULL
            else:
                body += _zz(len(hval))
                body += hval
    out += _zz(len(body))
    out += body


def encode_records(
    records: Sequence[Record], base_timestamp: int
) -> tuple[bytearray, int, int]:
    """The uncompressed records section; returns (bytes, lastOffsetDelta, maxTimestamp).

    Records without a timestamp must have been filled in by the caller."""
    out = bytearray()
    last_delta = -1
    max_ts = NO_TIMESTAMP
    for i, r in enumerate(records):
        delta = i if r.offset_delta is None else r.offset_delta
        if delta <= last_delta:
            raise InvalidRecordError(f"offset deltas must increase: {delta} after {last_delta}")
        last_delta = delta
        ts = r.timestamp
        if ts > max_ts:  # type: ignore[operator]
            max_ts = ts  # type: ignore[assignment]
        _encode_record(out, delta, ts - base_timestamp, r.key, r.value, r.headers)  # type: ignore[operator]
    return out, max(last_delta, 0), max_ts


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: Compression | int = Compression.NONE,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    now_ms: int | None = None,
) -> bytes:
    """Encode one RecordBatch v2.

    Records lacking a timestamp get ``now_ms`` (default: the wall clock). baseTimestamp is
    the first record's timestamp, or the delete horizon when ``delete_horizon_ms`` is given
    (KIP-534: the horizon lives in baseTimestamp and record deltas are relative to it).
    With LOG_APPEND_TIME, maxTimestamp is ``log_append_time`` (default: now).
    ``last_offset_delta`` lets a compactor keep the original span of a batch whose records
    were removed (it may exceed the last record's delta)."""
    from . import compression as _codecs  # local: keeps `import records` free of cramjam

    if is_transactional and producer_id == NO_PRODUCER_ID:
        raise InvalidRecordError("a transactional batch needs a producer id")
    if any(r.timestamp is None for r in records):
        now = int(time.time() * 1000) if now_ms is None else now_ms
        records = [
            r if r.timestamp is not None
            else Record(r.key, r.value, r.headers, now, r.offset, r.offset_delta)
            for r in records
        ]
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    elif records:
        base_ts = records[0].timestamp  # type: ignore[assignment]
    else:
        base_ts = NO_TIMESTAMP
    try:
        body, lod, max_ts = encode_records(records, base_ts)
    except ValueError as e:  # a delta outside varlong range, e.g. timestamps 2**63 apart
        raise InvalidRecordError(f"cannot encode record: {e}") from None
    if last_offset_delta is not None:
        if last_offset_delta < lod:
            raise InvalidRecordError("last_offset_delta below the last record's offset delta")
        lod = last_offset_delta
    attrs = int(compression) & COMPRESSION_MASK
    if int(compression) != attrs:
        raise UnsupportedCompressionError(f"compression id {compression}")
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
        max_ts = int(time.time() * 1000) if log_append_time is None else log_append_time
    if is_transactional:
        attrs |= TRANSACTIONAL_MASK
    if is_control:
        attrs |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attrs |= DELETE_HORIZON_MASK
    payload = body if attrs & COMPRESSION_MASK == 0 else _codecs.compress(
        attrs & COMPRESSION_MASK, body, compression_level
    )
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    HEADER_STRUCT.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, MAGIC_V2, 0,
        attrs, lod, base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(records),
    )
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _read_varint_slow(data: bytes, p: int) -> tuple[int, int]:
    try:
        return decode_varint(data, p)
    except MalformedFrameError as e:
        raise CorruptRecordError(f"bad varint in record at {p}: {e}") from None


def decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int,
    log_append_time: int | None = None,
) -> list[Record]:
    """Parse ``count`` records filling all of ``data`` (an uncompressed records section).

    Pure Python, one object per record: the reference decoder and the path for small
    batches; ``record_arrow`` decodes whole batches without per-record objects."""
    end = len(data)
    p = 0
    out: list[Record] = []
    append = out.append
    slow = _read_varint_slow
    try:
        for _ in range(count):
            # length (zigzag varint)
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                length, p = slow(data, p)
            rec_end = p + length
            if length < 6 or rec_end > end:
                raise CorruptRecordError(f"record length {length} at {p} beyond {end}")
            p += 1  # attributes (unused in v2)
            b = data[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = slow(data, p)
            b = data[p]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                off_delta, p = slow(data, p)
            b = data[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                n, p = slow(data, p)
            if n < 0:
                if n != -1:
                    raise CorruptRecordError(f"key length {n}")
                key = None
            else:
                key = data[p : p + n]
                p += n
            b = data[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                n, p = slow(data, p)
            if n < 0:
                if n != -1:
                    raise CorruptRecordError(f"value length {n}")
                value = None
            else:
                value = data[p : p + n]
                p += n
            b = data[p]
            if b < 0x80:
                hcount = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                hcount, p = slow(data, p)
            headers: list[tuple[str, bytes | None]] = []
            if hcount:
                if hcount < 0 or hcount > (rec_end - p) // 2:
                    raise CorruptRecordError(f"header count {hcount}")
                for _h in range(hcount):
                    n, p = slow(data, p)
                    if n < 0 or p + n > rec_end:
                        raise CorruptRecordError(f"header key length {n}")
                    hkey = data[p : p + n].decode("utf-8")
                    p += n
                    n, p = slow(data, p)
                    if n < 0:
                        if n != -1:
                            raise CorruptRecordError(f"header value length {n}")
                        hval = None
                    else:
                        hval = data[p : p + n]
                        p += n
                    headers.append((hkey, hval))
            if p != rec_end:
                raise CorruptRecordError(
                    f"record at offset delta {off_delta}: fields end at {p}, length says {rec_end}"
                )
            append(
                Record(
                    key, value, headers,
                    base_timestamp + ts_delta if log_append_time is None else log_append_time,
                    base_offset + off_delta, off_delta,
                )
            )
    except IndexError:
        raise CorruptRecordError(f"records section truncated at {p} of {end}") from None
    except UnicodeDecodeError as e:
        raise CorruptRecordError(f"header key is not UTF-8: {e}") from None
    if p != end:
        raise CorruptRecordError(f"{end - p} bytes left after {count} records")
    return out


def records_section(view: BatchView) -> bytes | memoryview:
    """The batch's decompressed records section (validates nothing)."""
    from . import compression as _codecs

    codec = view.compression
    raw = view.records_bytes()
    if codec == Compression.NONE:
        return raw
    return _codecs.decompress(codec, raw)


def decode_batch(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> RecordBatch:
    """Validate (CRC, header) and fully decode the batch at ``pos``.

    Every failure is a CorruptRecordError / InvalidRecordError / UnsupportedCompressionError:
    corrupt bytes never come back as records."""
    view = BatchView(buf, pos)
    if verify_crc:
        view.ensure_valid()
    else:
        view.ensure_consistent()
    return _decode_view(view)


def _decode_view(view: BatchView) -> RecordBatch:
    (base_offset, _len, ple, _magic, crc, attrs, lod, base_ts, max_ts, pid, pepoch, bseq,
     count) = HEADER_STRUCT.unpack_from(view.buffer, view.position)
    data = records_section(view)
    data = bytes(data)
    lat = max_ts if attrs & TIMESTAMP_TYPE_MASK else None
    records = decode_records(data, count, base_offset, base_ts, lat)
    for r in records:
        if not 0 <= r.offset_delta <= lod:  # type: ignore[operator]
            raise InvalidRecordError(
                f"record offset delta {r.offset_delta} beyond lastOffsetDelta {lod}"
            )
    return RecordBatch(
        base_offset, ple, attrs, lod, base_ts, max_ts, pid, pepoch, bseq, records, crc,
        view.size,
    )


def decode_batches(
    buf: Buffer, pos: int = 0, end: int | None = None, *, verify_crc: bool = True,
    allow_partial_tail: bool = False,
) -> list[RecordBatch]:
    """Decode every batch of a log slice or fetch response's records field."""
    out = []
    for view in iter_batch_views(buf, pos, end, allow_partial_tail=allow_partial_tail):
        if verify_crc:
            view.ensure_valid()
        else:
            view.ensure_consistent()
        out.append(_decode_view(view))
    return out


# ----------------------------------------------------------------------------- control


class ControlRecordType(IntEnum):
    """Key ``type`` of a control record (ABORT/COMMIT are transaction markers; the others
    belong to KRaft's metadata log)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


def control_record_key(record_type: ControlRecordType | int) -> bytes:
    return _CONTROL_KEY.pack(CONTROL_KEY_VERSION, int(record_type))


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def parse_control_record_key(key: Buffer | None) -> tuple[int, int]:
    """(version, type); consumers must skip types they do not know."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    return _CONTROL_KEY.unpack_from(key, 0)


def parse_end_txn_marker(record: Record) -> tuple[bool, int]:
    """(is_commit, coordinator_epoch) of a transaction marker record."""
    _version, rtype = parse_control_record_key(record.key)
    if rtype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"control record type {rtype} is not a transaction marker")
    if record.value is None or len(record.value) < _END_TXN_VALUE.size:
        raise CorruptRecordError("end-transaction marker value shorter than 6 bytes")
    _vversion, coordinator_epoch = _END_TXN_VALUE.unpack_from(record.value, 0)
    return rtype == ControlRecordType.COMMIT, coordinator_epoch


def encode_control_batch(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp: int | None = None,
) -> bytes:
    """A transaction marker batch (what WriteTxnMarkers appends): transactional + control,
    one record whose key is (version 0, ABORT|COMMIT) and value (version 0, epoch)."""
    rtype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    rec = Record(
        control_record_key(rtype), end_txn_marker_value(coordinator_epoch), [], timestamp
    )
    return encode_batch(
        [rec], base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
        is_transactional=True, is_control=True, partition_leader_epoch=partition_leader_epoch,
    )
