"""Kafka RecordBatch v2 with its records: building and parsing whole batches.

The producer, the consumer's small fetches, the log cleaner and the tests need each record
as an object; this is that codec. The header layout, the zero-copy ``BatchView`` and the
broker's stamping live in ``batch_header``: a broker validates, stamps and stores a client's
bytes without touching the records inside (only a compacted topic's key check and a
timestamp lookup decode them here). The vectorised Arrow decoder that reads whole fetches
without a Python object per record is ``record_arrow``.

Invariant: corrupt bytes never come back as records. ``decode_batch`` checks the CRC and the
header before parsing, and the record parser checks every length against the record's and
the section's end, so every failure is a CorruptRecordError / InvalidRecordError /
UnsupportedCompressionError.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from .batch_header import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    HEADER_FIELDS,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    BatchView,
    Buffer,
    Compression,
    HeaderFields,
    TimestampType,
    iter_batch_views,
    make_attributes,
    write_header,
)
from .errors import CorruptRecordError, InvalidRecordError, MalformedFrameError
from .primitives import decode_varint, encode_varint

__all__ = [
    "Record",
    "RecordBatch",
    "encode_batch",
    "encode_records",
    "decode_batch",
    "decode_batches",
    "decode_records",
    "records_section",
]

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


class RecordBatch(HeaderFields):
    """A decoded batch: its header as read, whose fields it shows as its own (``HeaderFields``:
    ``batch.base_offset`` is ``batch.header.base_offset``), and its records; ``decode_batch``
    checked that the header's recordCount is ``len(records)``."""

    __slots__ = ("header", "records")

    def __init__(self, header: BatchHeader, records: list[Record]) -> None:
        self.header = header
        self.records = records

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordBatch):
            return NotImplemented
        return self.header == other.header and self.records == other.records

    def __repr__(self) -> str:
        return f"RecordBatch({self.header!r}, records={self.records!r})"


for _name in HEADER_FIELDS:
    setattr(RecordBatch, _name, property(attrgetter("header." + _name)))


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
    attrs = make_attributes(
        compression, log_append_time=timestamp_type == TimestampType.LOG_APPEND_TIME,
        transactional=is_transactional, control=is_control,
        delete_horizon=delete_horizon_ms is not None,
    )
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        max_ts = int(time.time() * 1000) if log_append_time is None else log_append_time
    payload = body if attrs & COMPRESSION_MASK == 0 else _codecs.compress(
        attrs & COMPRESSION_MASK, body, compression_level
    )
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    write_header(
        out, 0, len(out), base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
        attributes=attrs, last_offset_delta=lod, base_timestamp=base_ts, max_timestamp=max_ts,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        record_count=len(records),
    )
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
    h = view.header()
    data = bytes(records_section(view))
    lat = h.max_timestamp if h.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    records = decode_records(data, h.record_count, h.base_offset, h.base_timestamp, lat)
    lod = h.last_offset_delta
    for r in records:
        if not 0 <= r.offset_delta <= lod:  # type: ignore[operator]
            raise InvalidRecordError(
                f"record offset delta {r.offset_delta} beyond lastOffsetDelta {lod}"
            )
    return RecordBatch(h, records)


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


