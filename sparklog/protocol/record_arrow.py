"""Vectorised RecordBatch v2 -> Arrow decoding: no Python object per record.

This is the path the Spark reader and the client's Arrow fast path use. A pure-Python record
loop costs ~4 us/record; Spark wants >= 1.5 M rows/s per core, so everything per record here
is a numpy operation over all records of all batches at once:

1. **Batch headers** (per batch, Python): CRC-32C, header checks, decompression.
2. **Record starts.** Records are length-prefixed, so record i+1's position depends on record
   i's length - a chain. We find it by *speculating runs*: if the record at ``p`` is ``S``
   bytes long, guess that the next ``w`` records are too (``p + k*S``), read all their length
   varints in one vectorised step and keep the prefix that matches. Fixed-size payloads (and
   payloads whose size only changes where offsetDelta/timestampDelta gain a varint byte)
   take a handful of numpy calls per batch. Where sizes keep changing, a tight Python loop
   walks the lengths only (~0.2 us/record), with the speculation retried at growing
   intervals. (``record_arrow_starts``)
3. **Fields**, vectorised. Records of an equal-size run almost always share one byte layout
   (varint widths, key and value lengths): the layout of each run's first record is read,
   runs are grouped by layout, each group's record heads are copied with one row gather and
   every field is read from fixed columns as one little-endian word: the lengths the layout
   fixes are compared byte for byte with the group's first record, the two deltas decoded
   with their continuation bits checked; rows that disagree fall through. Everything else
   (walked records, headers, odd layouts) goes through the general parser: each varint is
   read by gathering 8 bytes per record through an unaligned ``uint64`` view of the buffer
   and decoding the continuation bits with bit arithmetic; key/value/header slices become
   (position, length) pairs. (``record_arrow_fixed``, ``record_arrow_fields``; the buffer
   view and the varint reader are ``record_arrow_buffer``)
4. **Verification**, vectorised: the chain must close (each record ends where the next
   starts, the last one at the end of its batch), every field must end exactly at its
   record's end, lengths >= -1, offset deltas within lastOffsetDelta. Any violation raises
   CorruptRecordError/InvalidRecordError, so a wrong speculation can cost time but never
   produce wrong rows.
5. **Arrow**: keys/values/header values are built as ``binary_view`` arrays that point into
   the (decompressed) buffer - 16 bytes of view per row, no copy of the payload - and then
   cast to plain ``binary`` in Arrow's C++ (``binary_view=True`` skips the cast).

Fewer than ``SMALL_INPUT_ROWS`` records skip all this (the fixed cost of a few hundred
numpy calls) and use the per-record decoder.

Public API (this module; steps 1, 4 and 5 are here): ``decode_batches_to_arrow`` (a fetched
buffer / log slice of concatenated batches -> one ``pyarrow.RecordBatch``),
``decode_batch_to_arrow`` (one batch) and ``decode_sections_to_arrow`` (several partitions'
records of one Fetch response in one pass: steps 2-5 cost the same few hundred numpy calls
for one partition or a hundred, so a response holding many small partitions pays them once),
plus ``arrow_schema``. The ``record_arrow*`` modules
and ``record_arrow_encode`` (the reverse direction) are the only ones in
``sparklog.protocol`` that import numpy and pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cramjam
import numpy as np
import pyarrow as pa
from crc32c import crc32c

from .batch_header import (
    ATTRIBUTES_OFFSET,
    RECORDS_OFFSET,
    BatchView,
    Compression,
    TimestampType,
    iter_batch_views,
    read_header,
)
from .compression import decompress_into
from .errors import CorruptRecordError, InvalidRecordError
from .record_arrow_buffer import ONE, RecordsBuffer
from .record_arrow_fields import Fields, parse_fields
from .record_arrow_fixed import fixed_layout_rows
from .record_arrow_starts import find_starts
from .records import decode_records

__all__ = [
    "HEADERS_TYPE",
    "SMALL_INPUT_ROWS",
    "DecodedSections",
    "Section",
    "arrow_schema",
    "decode_batch_to_arrow",
    "decode_batches_to_arrow",
    "decode_sections_to_arrow",
]

HEADER_STRUCT_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_STRUCT_TYPE)


def arrow_schema(
    *, topic: bool = False, partition: bool = False, binary_view: bool = False
) -> pa.Schema:
    """Column layout of Spark's Kafka source: key, value, [topic, partition,] offset,
    timestamp (int64 ms), timestampType (int32), headers."""
    b = pa.binary_view() if binary_view else pa.binary()
    fields = [pa.field("key", b), pa.field("value", b)]
    if topic:
        fields.append(pa.field("topic", pa.string(), nullable=False))
    if partition:
        fields.append(pa.field("partition", pa.int32(), nullable=False))
    fields += [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("timestampType", pa.int32(), nullable=False),
        pa.field("headers", HEADERS_TYPE, nullable=False),
    ]
    return pa.schema(fields)



# ----------------------------------------------------------------------------- arrow


def _heads(buf: RecordsBuffer, pos: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """First min(len, 12) bytes of each value, zero padded, as an (n, 12) uint8 array."""
    n = len(pos)
    out = np.zeros((n, 2), dtype="<u8")
    ln = np.clip(lens, 0, 12).astype(np.uint64)
    lo_bits = np.minimum(ln, 8) * np.uint64(8)
    lo_mask = np.where(lo_bits >= 64, ~np.uint64(0), (ONE << (lo_bits & np.uint64(63))) - ONE)
    out[:, 0] = buf.words(pos) & lo_mask
    hi_bits = (np.maximum(ln, 8) - np.uint64(8)) * np.uint64(8)
    # bytes 8..11 matter only for values of 9..12 bytes (inline); longer ones keep a prefix
    long8 = np.flatnonzero((lens > 8) & (lens <= 12))
    if long8.size:
        out[long8, 1] = buf.words(pos[long8] + 8) & ((ONE << hi_bits[long8]) - ONE)
    return out.view(np.uint8).reshape(n, 16)[:, :12]


def _view_array(
    buf: RecordsBuffer, pos: np.ndarray, lens: np.ndarray, head: np.ndarray, *, nullable: bool,
    typ: pa.DataType,
) -> pa.Array:
    """binary_view rows: values up to 12 bytes inline, longer ones as (prefix, buffer 0,
    offset) pointing into the records buffer; then cast to ``typ`` in Arrow's C++."""
    n = len(pos)
    if n and buf.size >= 2**31:
        raise InvalidRecordError("records section larger than 2 GiB")
    ln = np.maximum(lens, 0)
    views = np.zeros((n, 4), dtype="<i4")
    views[:, 0] = ln
    h32 = np.ascontiguousarray(head).view("<i4")  # (n, 3)
    views[:, 1] = h32[:, 0]
    long_ = ln > 12
    views[:, 2] = np.where(long_, 0, h32[:, 1])
    views[:, 3] = np.where(long_, pos, h32[:, 2])
    validity = None
    null_count = 0
    if nullable:
        valid = lens >= 0
        null_count = n - int(np.count_nonzero(valid))
        if null_count:
            validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), buf.arrow], null_count=null_count
    )
    if typ == pa.binary_view():
        return arr
    arr = arr.cast(pa.binary())
    if typ == pa.string():
        try:  # binary -> string validates UTF-8
            arr = arr.cast(pa.string())
        except pa.ArrowInvalid as e:
            raise CorruptRecordError(f"header key is not UTF-8: {e}") from None
    return arr


# ----------------------------------------------------------------------------- API

# Below this many records the fixed cost of ~300 numpy calls exceeds the per-record
# decoder's; small fetches (low-latency consumers) take that path instead.
SMALL_INPUT_ROWS = 32


def _assemble_small(
    data: Any, metas: list[_BatchMeta], schema: pa.Schema, topic: str | None,
    partition: int | None,
) -> tuple[pa.RecordBatch, np.ndarray]:
    rows = []
    ts_types = []
    batch_of = []
    for i, m in enumerate(metas):
        recs = decode_records(bytes(data[m.start : m.end]), m.count, m.base_offset, m.base_ts,
                              m.max_ts if m.lat else None)
        for r in recs:
            if not 0 <= r.offset_delta <= m.lod:
                raise InvalidRecordError(
                    "record offset delta outside its batch's lastOffsetDelta"
                )
        rows.extend(recs)
        ts_types.extend([1 if m.lat else 0] * len(recs))
        batch_of.extend([i] * len(recs))
    cols: dict[str, Any] = {
        "key": [r.key for r in rows],
        "value": [r.value for r in rows],
    }
    if topic is not None:
        cols["topic"] = [topic] * len(rows)
    if partition is not None:
        cols["partition"] = [partition] * len(rows)
    cols["offset"] = [r.offset for r in rows]
    cols["timestamp"] = [r.timestamp for r in rows]
    cols["timestampType"] = ts_types
    cols["headers"] = [[{"key": k, "value": v} for k, v in r.headers] for r in rows]
    return pa.RecordBatch.from_pydict(cols, schema=schema), np.array(batch_of, dtype=np.int64)


class _BatchMeta:
    # lo <= offset < hi: the rows of the batch that are wanted; section: which input
    __slots__ = ("count", "base_offset", "base_ts", "max_ts", "lat", "lod", "start", "end",
                 "lo", "hi", "section")


_NO_END = 2**63 - 1


class _Batches:
    """The batches to decode from one or more record sections, indexed into ONE buffer.

    Sections that are slices of the same bytes object (the partitions of one Fetch response)
    are indexed in that buffer, nothing copied. Once a batch is compressed, or sections
    come from different buffers, every records section is decompressed (or copied) onto
    the end of one growing buffer instead, so the decoder still sees a single contiguous
    buffer."""

    __slots__ = ("metas", "joined", "base", "base_key", "verify_crc", "skip_control")

    def __init__(self, *, verify_crc: bool, skip_control: bool) -> None:
        self.metas: list[_BatchMeta] = []
        self.joined: cramjam.Buffer | None = None
        self.base: memoryview | None = None  # what metas index while nothing is joined
        self.base_key: object = None  # the buffer ``base`` views
        self.verify_crc = verify_crc
        self.skip_control = skip_control

    def add(
        self, mv: memoryview, pos: int, end: int | None, *, allow_partial_tail: bool,
        keep_batch: Callable[[BatchView], bool] | None, lo: int, hi: int, section: int,
    ) -> None:
        if self.joined is None:
            mv, pos, end, key = _in_whole_buffer(mv, pos, end)
            if self.base is None:
                self.base, self.base_key = mv, key
            elif key is not self.base_key:
                self._join()
        for view in iter_batch_views(mv, pos, end, allow_partial_tail=allow_partial_tail):
            at = view.position
            h = read_header(mv, at)
            count, lod = h.record_count, h.last_offset_delta
            if self.verify_crc and crc32c(mv[at + ATTRIBUTES_OFFSET : at + view.size]) != h.crc:
                view.ensure_valid()  # raises with the details
            if count < 0 or lod < 0 or (count and lod < count - 1):
                view.ensure_consistent()  # raises with the details
            if h.is_control and self.skip_control:
                continue
            if keep_batch is not None and not keep_batch(view):
                continue
            if count == 0:
                continue
            codec = h.compression
            m = _BatchMeta()
            if codec != Compression.NONE and self.joined is None:
                self._join()
            if self.joined is None:
                m.start, m.end = at + RECORDS_OFFSET, at + view.size
            else:
                m.start = self.joined.tell()
                m.end = m.start + decompress_into(codec, view.records_bytes(), self.joined)
            if count > (m.end - m.start) // 7:
                raise CorruptRecordError(
                    f"batch at offset {h.base_offset}: {count} records cannot fit in "
                    f"{m.end - m.start} bytes"
                )
            m.count, m.base_offset, m.lod = count, h.base_offset, lod
            m.base_ts, m.max_ts = h.base_timestamp, h.max_timestamp
            m.lat = h.timestamp_type == TimestampType.LOG_APPEND_TIME
            m.lo, m.hi, m.section = lo, hi, section
            self.metas.append(m)

    def _join(self) -> None:
        """From now on metas index ``joined``: copy the sections indexed so far there."""
        self.joined = joined = cramjam.Buffer()
        base = self.base
        for prev in self.metas:
            start = joined.tell()
            joined.write(base[prev.start : prev.end])
            prev.start, prev.end = start, joined.tell()

    def data(self) -> Any:
        return self.base if self.joined is None else memoryview(self.joined)


def _in_whole_buffer(
    mv: memoryview, pos: int, end: int | None
) -> tuple[memoryview, int, int | None, object]:
    """``mv[pos:end]`` as the same bytes of a view of the whole ``bytes``/``bytearray``
    ``mv`` slices (the partitions of one Fetch response then index one buffer; a bytearray
    cannot be resized while viewed), and that object; a view of anything else stays as it
    is and is its own key."""
    whole = mv.obj
    if not isinstance(whole, (bytes, bytearray)):
        return mv, pos, end, mv
    if mv.nbytes == len(whole):
        return mv, pos, end, whole
    base = memoryview(whole)
    shift = pa.py_buffer(mv).address - pa.py_buffer(base).address
    return base, pos + shift, (mv.nbytes if end is None else end) + shift, whole


def decode_batches_to_arrow(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    end: int | None = None,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = True,
    skip_control: bool = True,
    keep_batch: Callable[[BatchView], bool] | None = None,
    min_offset: int | None = None,
    topic: str | None = None,
    partition: int | None = None,
    binary_view: bool = False,
) -> pa.RecordBatch:
    """Decode concatenated RecordBatch v2 batches into ONE ``pyarrow.RecordBatch``.

    Columns: key, value (binary, nullable), [topic (string) if ``topic`` is given, partition
    (int32) if ``partition`` is given,] offset (int64), timestamp (int64 ms; the batch's
    maxTimestamp under LOG_APPEND_TIME), timestampType (int32: 0 create, 1 log-append),
    headers (list<struct<key: string, value: binary>>).

    - ``buf[pos:end]`` is a Fetch response's records field or a log slice. A trailing
      partial batch is dropped (``allow_partial_tail``), as Kafka consumers do.
    - Control batches (transaction markers) are skipped unless ``skip_control=False``.
    - ``keep_batch(view)`` can drop whole batches before decoding (aborted transactions:
      the consumer knows the aborted producer ids / offset ranges from the Fetch response).
    - ``min_offset`` drops records below it (a fetch may return the whole batch containing
      the requested offset).
    - ``binary_view=True`` returns key/value as ``binary_view`` arrays pointing into the
      buffer (keeps it alive) instead of copying them into ``binary``.

    Raises CorruptRecordError / InvalidRecordError (bad CRC, header or records) or
    UnsupportedCompressionError; never returns rows from a batch that failed a check.
    """
    found = _Batches(verify_crc=verify_crc, skip_control=skip_control)
    found.add(buf if isinstance(buf, memoryview) else memoryview(buf), pos, end,
              allow_partial_tail=allow_partial_tail, keep_batch=keep_batch,
              lo=-_NO_END if min_offset is None else min_offset, hi=_NO_END, section=0)
    rb, _batch_of, keep = _assemble(found, topic=topic, partition=partition,
                                    binary_view=binary_view)
    if keep is None:
        return rb
    if not keep.size or keep[-1] - keep[0] + 1 == keep.size:  # one run: the usual case
        return rb.slice(int(keep[0]) if keep.size else 0, keep.size)
    return rb.take(pa.array(keep))


@dataclass(frozen=True, slots=True)
class Section:
    """One partition's records in ``decode_sections_to_arrow``: the rows with
    ``min_offset <= offset < end_offset`` of the batches ``keep_batch`` keeps."""

    records: bytes | memoryview
    keep_batch: Callable[[BatchView], bool] | None = None
    min_offset: int | None = None
    end_offset: int | None = None


@dataclass(frozen=True, slots=True)
class DecodedSections:
    """``decode_sections_to_arrow``'s rows: ``batch`` holds section after section, ``rows[i]``
    of section i, and section i's wanted rows (within its bounds) are the ``count[i]`` from
    ``first[i]`` on. Rows outside a section's bounds stay in ``batch`` when that spares a
    copy of all of it: slicing the wanted rows out is free."""

    batch: pa.RecordBatch
    rows: np.ndarray
    first: np.ndarray
    count: np.ndarray

    def wanted(self, i: int) -> pa.RecordBatch:
        return self.batch.slice(int(self.first[i]), int(self.count[i]))


def decode_sections_to_arrow(
    sections: Sequence[Section], *, verify_crc: bool = True, skip_control: bool = True,
) -> DecodedSections:
    """Several partitions' records (a Fetch response's) decoded in ONE pass: the numpy and
    Arrow set-up costs the same for one partition or a hundred, so a many-partition fetch
    pays it once instead of once per partition. Partial last batches are dropped; the
    checks and errors are ``decode_batches_to_arrow``'s."""
    found = _Batches(verify_crc=verify_crc, skip_control=skip_control)
    for i, sec in enumerate(sections):
        rec = sec.records
        found.add(rec if isinstance(rec, memoryview) else memoryview(rec), 0, None,
                  allow_partial_tail=True, keep_batch=sec.keep_batch,
                  lo=-_NO_END if sec.min_offset is None else sec.min_offset,
                  hi=_NO_END if sec.end_offset is None else sec.end_offset, section=i)
    rb, batch_of, keep = _assemble(found, topic=None, partition=None, binary_view=False)
    k = len(sections)
    section_of = np.array([m.section for m in found.metas], dtype=np.int64)[batch_of]
    rows = np.bincount(section_of, minlength=k)
    if keep is None:
        return DecodedSections(rb, rows, np.cumsum(rows) - rows, rows)
    count = np.bincount(section_of[keep], minlength=k)
    ends = np.cumsum(count)
    has = np.flatnonzero(count)
    first = np.zeros(k, dtype=np.int64)
    first[has] = keep[ends[has] - count[has]]
    if (keep[ends[has] - 1] - first[has] + 1 == count[has]).all():  # each section one run
        return DecodedSections(rb, rows, first, count)
    return DecodedSections(rb.take(pa.array(keep)), count, ends - count, count)


def decode_batch_to_arrow(
    buf: bytes | bytearray | memoryview, pos: int = 0, **kwargs: Any
) -> pa.RecordBatch:
    """One batch at ``pos`` (same columns and options as ``decode_batches_to_arrow``)."""
    view = BatchView(buf, pos)
    kwargs.setdefault("allow_partial_tail", False)
    return decode_batches_to_arrow(buf, pos, pos + view.size, **kwargs)


def _assemble(
    found: _Batches, *, topic: str | None, partition: int | None, binary_view: bool,
) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray | None]:
    """Every record of ``found``'s batches, the batch index of each row, and the indices
    of the rows within their batch's bounds (None: all of them)."""
    schema = arrow_schema(
        topic=topic is not None, partition=partition is not None, binary_view=binary_view
    )
    metas = found.metas
    if not metas:
        return pa.RecordBatch.from_pylist([], schema=schema), np.zeros(0, dtype=np.int64), None
    data = found.data()
    if sum(m.count for m in metas) < SMALL_INPUT_ROWS:
        rb, batch_of = _assemble_small(data, metas, schema, topic, partition)
        return rb, batch_of, _in_bounds(metas, rb.column("offset").to_numpy(), batch_of)
    buf = RecordsBuffer(data, pa.py_buffer(data))
    counts = np.array([m.count for m in metas], dtype=np.int64)
    seg_start = np.array([m.start for m in metas], dtype=np.int64)
    seg_end = np.array([m.end for m in metas], dtype=np.int64)
    found = find_starts(buf, seg_start, seg_end, counts)
    n = found.n
    if found.walked_pos.size and int(found.walked_pos.min()) < 0:
        raise CorruptRecordError("record chain leaves its batch")
    f = Fields.empty(n)
    key_head = np.zeros((n, 12), dtype=np.uint8)
    val_head = np.zeros((n, 12), dtype=np.uint8)
    irregular = np.ones(n, dtype=bool)
    fixed_layout_rows(buf, found.runs, f, key_head, val_head, irregular)
    irr = np.flatnonzero(irregular)
    if irr.size:
        starts = found.all()
        last = np.cumsum(counts) - 1
        next_start = np.empty(n, dtype=np.int64)
        next_start[:-1] = starts[1:]
        next_start[last] = seg_end
        g = parse_fields(buf, starts[irr], next_start[irr])
        f.put(irr, g)
        key_head[irr] = _heads(buf, g.key_pos, g.key_len)
        val_head[irr] = _heads(buf, g.val_pos, g.val_len)

    batch_of = np.repeat(np.arange(len(metas)), counts)
    base_off = np.array([m.base_offset for m in metas], dtype=np.int64)
    lod = np.array([m.lod for m in metas], dtype=np.int64)
    if ((f.off_delta < 0) | (f.off_delta > lod[batch_of])).any():
        raise InvalidRecordError("record offset delta outside its batch's lastOffsetDelta")
    offsets = base_off[batch_of] + f.off_delta
    lat = np.array([m.lat for m in metas], dtype=bool)
    base_ts = np.array([m.base_ts for m in metas], dtype=np.int64)
    if lat.any():
        max_ts = np.array([m.max_ts for m in metas], dtype=np.int64)
        ts = np.where(lat[batch_of], max_ts[batch_of], base_ts[batch_of] + f.ts_delta)
    else:
        ts = base_ts[batch_of] + f.ts_delta
    ts_type = np.where(lat, TimestampType.LOG_APPEND_TIME, TimestampType.CREATE_TIME).astype(
        np.int32
    )[batch_of]

    btype = pa.binary_view() if binary_view else pa.binary()
    keys = _view_array(buf, f.key_pos, f.key_len, key_head, nullable=True, typ=btype)
    values = _view_array(buf, f.val_pos, f.val_len, val_head, nullable=True, typ=btype)
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(f.hcount, out=list_offsets[1:])
    hkeys = _view_array(buf, f.hk_pos, f.hk_len, _heads(buf, f.hk_pos, f.hk_len),
                        nullable=False, typ=pa.string())
    hvals = _view_array(buf, f.hv_pos, f.hv_len, _heads(buf, f.hv_pos, f.hv_len),
                        nullable=True, typ=pa.binary())
    structs = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADER_STRUCT_TYPE))
    headers = pa.ListArray.from_arrays(pa.array(list_offsets), structs, type=HEADERS_TYPE)

    cols: list[pa.Array] = [keys, values]
    if topic is not None:
        cols.append(pa.repeat(pa.scalar(topic, pa.string()), n))
    if partition is not None:
        cols.append(pa.array(np.full(n, partition, dtype=np.int32)))
    cols += [pa.array(offsets), pa.array(ts), pa.array(ts_type), headers]
    rb = pa.RecordBatch.from_arrays(cols, schema=schema)
    return rb, batch_of, _in_bounds(metas, offsets, batch_of)


def _in_bounds(metas: list[_BatchMeta], offsets: np.ndarray,
               batch_of: np.ndarray) -> np.ndarray | None:
    """Indices of the rows with lo <= offset < hi of their batch; None when that is all."""
    lo = np.array([m.lo for m in metas], dtype=np.int64)[batch_of]
    hi = np.array([m.hi for m in metas], dtype=np.int64)[batch_of]
    keep = np.flatnonzero((offsets >= lo) & (offsets < hi))
    return None if keep.size == len(offsets) else keep
