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
   intervals.
3. **Fields**, vectorised. Records of an equal-size run almost always share one byte layout
   (varint widths, key and value lengths): the layout of each run's first record is read,
   runs are grouped by layout, each group's record heads are copied with one row gather and
   every field is read from fixed columns as one little-endian word: the lengths the layout
   fixes are compared byte for byte with the group's first record, the two deltas decoded
   with their continuation bits checked; rows that disagree fall through. Everything else
   (walked records, headers, odd layouts) goes through the general parser: each varint is read by gathering 8 bytes per record through
   an unaligned ``uint64`` view of the buffer and decoding the continuation bits with bit
   arithmetic; key/value/header slices become (position, length) pairs.
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

Public API: ``decode_batches_to_arrow`` (a fetched buffer / log slice of concatenated batches
-> one ``pyarrow.RecordBatch``) and ``decode_batch_to_arrow`` (one batch), plus
``arrow_schema``. This module and ``record_arrow_encode`` (the reverse direction) are the only
ones in ``sparklog.protocol`` that import numpy and pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cramjam
import numpy as np
import pyarrow as pa
from crc32c import crc32c

from .compression import decompress_into
from .errors import CorruptRecordError, InvalidRecordError, MalformedFrameError
from .primitives import decode_varint
from .records import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    HEADER_STRUCT,
    TIMESTAMP_TYPE_MASK,
    BatchView,
    Compression,
    TimestampType,
    decode_records,
    iter_batch_views,
)

__all__ = [
    "HEADERS_TYPE",
    "SMALL_INPUT_ROWS",
    "arrow_schema",
    "decode_batch_to_arrow",
    "decode_batches_to_arrow",
]

HEADER_STRUCT_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_STRUCT_TYPE)

_PAD = 16  # zero bytes after the data so 8-byte gathers never leave the buffer
_HI = np.uint64(0x8080808080808080)
_U7 = np.uint64(0x7F)
_ONE = np.uint64(1)
_SPEC_MIN_RUN = 16  # a speculation that verifies fewer records than this counts as failed
_MAX_VECTOR_HEADERS = 32  # header slots decoded vectorised; deeper ones in Python
_FIXED_MIN_RUN = 8  # runs shorter than this go through the general field parser
_PY_LAYOUT_MAX_RUNS = 48  # up to this many runs, detect their layouts in Python


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


# ----------------------------------------------------------------------------- varints


class _Buf:
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


def _varints(
    buf: _Buf, pos: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Zigzag varints at ``pos`` -> (values int64, sizes int64, bad bool).

    One 8-byte gather per position; the terminator is the lowest byte without the
    continuation bit: isolate its high bit, and the bits below it select the varint's
    bytes (their popcount / 8 is the size); then fold the 7-bit groups together."""
    w = buf.words(pos)
    term = ~w & _HI
    keep = term ^ (term - _ONE)  # bits up to and including the terminator's high bit
    size = (np.bitwise_count(keep) >> np.uint8(3)).astype(np.int64)
    bad = term == 0
    top = int(size.max()) if size.size else 0
    w &= keep
    v = w & _U7
    for k in range(1, min(top, 8)):
        v |= (w >> np.uint64(k)) & np.uint64(0x7F << (7 * k))
    values = ((v >> _ONE) ^ (np.uint64(0) - (v & _ONE))).view(np.int64)
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


# ----------------------------------------------------------------------------- record starts


def _record_size_table() -> list[int]:
    """Total record size (length varint + length) for every 2-byte prefix whose varint fits
    in 2 bytes and is non-negative; 0 means "decode the slow way"."""
    table = [0] * 65536
    for b0 in range(256):
        for b1 in range(256):
            if b0 < 0x80:
                z, n = b0, 1
            elif b1 < 0x80:
                z, n = (b0 & 0x7F) | (b1 << 7), 2
            else:
                continue
            length = (z >> 1) ^ -(z & 1)
            if length >= 0:
                table[b0 | (b1 << 8)] = n + length
    return table


_SIZE_TABLE: list[int] = []


def _walk(raw: bytes | memoryview, p: int, count: int, out: list[int]) -> int:
    """Python walk over record lengths only; returns the position after the last one.

    One table lookup per record (records under 8 KiB). Garbage makes it produce garbage
    positions, which the vectorised checks reject."""
    if not _SIZE_TABLE:
        _SIZE_TABLE.extend(_record_size_table())
    table = _SIZE_TABLE
    base = len(out)
    out.extend([0] * count)
    try:
        for i in range(base, base + count):
            out[i] = p
            size = table[raw[p] | (raw[p + 1] << 8)]
            if size:
                p += size
                continue
            n, q = decode_varint(raw, p)
            if n < 0:
                raise CorruptRecordError("negative record length")
            p = q + n
    except (IndexError, MalformedFrameError):
        raise CorruptRecordError(f"record length chain leaves the batch at {p}") from None
    return p


class _Starts:
    """Record start positions, kept as equal-size runs plus walked positions; ``all()``
    materialises one position per record only when the general parser needs them."""

    __slots__ = ("n", "runs", "walked_rows", "walked_pos")

    def __init__(self, n: int, runs: tuple[np.ndarray, ...], walked_rows: np.ndarray,
                 walked_pos: np.ndarray) -> None:
        self.n, self.runs = n, runs
        self.walked_rows, self.walked_pos = walked_rows, walked_pos

    def all(self) -> np.ndarray:
        rec0, p0, size, count = self.runs
        out = np.empty(self.n, dtype=np.int64)
        before = np.cumsum(count) - count
        g = np.arange(int(count.sum()), dtype=np.int64)
        sizes = np.repeat(size, count)
        out[np.repeat(rec0 - before, count) + g] = np.repeat(p0 - before * size, count) + g * sizes
        out[self.walked_rows] = self.walked_pos
        return out


def _find_starts(
    buf: _Buf, seg_start: np.ndarray, seg_end: np.ndarray, counts: np.ndarray
) -> _Starts:
    """Record start positions of every batch (see the module docstring).

    Works on all batches at once, in rounds. Each unresolved batch has a cursor at a known
    record start; a round reads the record length under every cursor, guesses that all
    remaining records of that batch have the same size (and so the same length-varint
    bytes), checks every guess with one vectorised 8-byte read and compare, and advances
    each cursor past its verified prefix. Batches whose runs keep breaking early get a
    stretch walked in Python (doubling each time), so the worst case stays near the plain
    walk's cost."""
    total = int(counts.sum())
    runs: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    walked_rows: list[int] = []
    walked_pos: list[int] = []
    first = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    cur = seg_start.astype(np.int64).copy()  # cursor position per batch
    rec = first.copy()  # global index of the record under the cursor
    left = counts.astype(np.int64).copy()
    end = seg_end.astype(np.int64)
    walk_len = np.full(len(counts), 32, dtype=np.int64)
    window = left.copy()  # first guess: the whole batch is one run
    live = np.flatnonzero(left > 0)
    raw = buf.raw
    while live.size:
        c, lft, e = cur[live], left[live], end[live]
        if ((c < 0) | (c >= e)).any():
            raise CorruptRecordError("record chain leaves its batch")
        ln, sz, bad = _varints(buf, c, 5)
        size = ln + sz
        if (bad | (size < 7) | (size > e - c)).any():
            raise CorruptRecordError("record length outside its batch")
        # guess: every remaining record of the batch has this size, i.e. starts with the
        # same length-varint bytes; the guess at k holds if the bytes at c + k*size match
        fit = np.minimum(np.minimum(lft, window[live]), (e - c) // size)
        seg = np.repeat(np.arange(live.size), fit)
        k = np.arange(seg.size, dtype=np.int64) - np.repeat(np.cumsum(fit) - fit, fit)
        size_s = size[seg]
        cand = c[seg] + k * size_s
        mask = (_ONE << (sz.astype(np.uint64) * np.uint64(8))) - _ONE
        pattern = buf.words(c) & mask
        ok = (buf.words(cand) & mask[seg]) == pattern[seg]
        miss = np.flatnonzero(~ok)
        matched = fit.copy()
        if miss.size:
            seg_miss, first_miss = np.unique(seg[miss], return_index=True)
            matched[seg_miss] = k[miss[first_miss]]
        runs.append((rec[live], c, size, matched))
        # after a decent run, guess the rest of the batch again (sizes usually change only
        # where a delta gains a varint byte); after a short one guess small, and the walk
        # below takes over while sizes keep changing
        window[live] = np.where(
            matched >= _SPEC_MIN_RUN, lft - matched, np.maximum(64, 2 * matched)
        )
        cur[live] = c + matched * size
        rec[live] += matched
        left[live] = lft - matched
        # batches whose run broke early: walk a stretch in Python
        poor = live[(matched < _SPEC_MIN_RUN) & (left[live] > 0)]
        for bi in poor.tolist():
            n = int(min(walk_len[bi], left[bi]))
            r0 = int(rec[bi])
            walked_rows.extend(range(r0, r0 + n))
            cur[bi] = _walk(raw, int(cur[bi]), n, walked_pos)
            rec[bi] = r0 + n
            left[bi] -= n
            walk_len[bi] = min(int(walk_len[bi]) * 2, 1 << 16)
        live = live[left[live] > 0]
    if not np.array_equal(cur, end):
        raise CorruptRecordError("records do not fill their batch exactly")
    run_arrays = tuple(np.concatenate([r[i] for r in runs]) for i in range(4))
    return _Starts(total, run_arrays, np.array(walked_rows, dtype=np.int64),
                   np.array(walked_pos, dtype=np.int64))


# ----------------------------------------------------------------------------- fields


class _Fields:
    __slots__ = (
        "ts_delta", "off_delta", "key_pos", "key_len", "val_pos", "val_len",
        "hcount", "hk_pos", "hk_len", "hv_pos", "hv_len",
    )


def _parse_fields(buf: _Buf, starts: np.ndarray, next_start: np.ndarray) -> _Fields:
    """Vectorised parse of all records whose starts are given; ``next_start`` is where each
    record must end (the next record's start, or its batch's end)."""
    length, sz, bad = _varints(buf, starts, 5)
    p = starts + sz
    rec_end = p + length
    if bad.any() or not np.array_equal(rec_end, next_start):
        raise CorruptRecordError("record lengths do not tile the records section")
    p += 1  # attributes
    f = _Fields()
    f.ts_delta, sz, b = _varints(buf, p, 10)
    bad |= b
    p += sz
    f.off_delta, sz, b = _varints(buf, p, 5)
    bad |= b
    p += sz
    f.key_len, sz, b = _varints(buf, p, 5)
    p += sz
    bad |= b | (f.key_len < -1) | (f.key_len > rec_end - p)
    f.key_pos = p
    p = p + np.maximum(f.key_len, 0)
    f.val_len, sz, b = _varints(buf, p, 5)
    p += sz
    bad |= b | (f.val_len < -1) | (f.val_len > rec_end - p)
    f.val_pos = p
    p = p + np.maximum(f.val_len, 0)
    f.hcount, sz, b = _varints(buf, p, 5)
    p += sz
    bad |= b | (f.hcount < 0) | (f.hcount > (rec_end - p) // 2)
    if bad.any():
        raise CorruptRecordError(f"malformed record fields in {int(bad.sum())} record(s)")
    _parse_headers(buf, f, p, rec_end)
    return f


def _parse_headers(buf: _Buf, f: _Fields, p: np.ndarray, rec_end: np.ndarray) -> None:
    hcount = f.hcount
    total = int(hcount.sum())
    empty = np.empty(0, dtype=np.int64)
    if total == 0:
        f.hk_pos = f.hk_len = f.hv_pos = f.hv_len = empty
        if not np.array_equal(p, rec_end):
            raise CorruptRecordError("record fields do not end at the record's length")
        return
    first = np.zeros(len(hcount), dtype=np.int64)
    np.cumsum(hcount[:-1], out=first[1:])
    hk_pos = np.empty(total, dtype=np.int64)
    hk_len = np.empty(total, dtype=np.int64)
    hv_pos = np.empty(total, dtype=np.int64)
    hv_len = np.empty(total, dtype=np.int64)
    active = np.flatnonzero(hcount > 0)
    h = 0
    while active.size and h < _MAX_VECTOR_HEADERS:
        q = p[active]
        end = rec_end[active]
        kl, sz, bad = _varints(buf, q, 5)
        q = q + sz
        bad |= (kl < 0) | (kl > end - q)
        slot = first[active] + h
        hk_pos[slot] = q
        hk_len[slot] = kl
        q = q + np.maximum(kl, 0)
        vl, sz, b = _varints(buf, q, 5)
        q = q + sz
        bad |= b | (vl < -1) | (vl > end - q)
        hv_pos[slot] = q
        hv_len[slot] = vl
        if bad.any():
            raise CorruptRecordError("malformed record header")
        p[active] = q + np.maximum(vl, 0)
        h += 1
        active = active[hcount[active] > h]
    if active.size:  # records with very many headers: finish them in Python
        raw = buf.raw
        for r in active.tolist():
            q = int(p[r])
            end_r = int(rec_end[r])
            for hh in range(h, int(hcount[r])):
                try:
                    kl, q = decode_varint(raw, q)
                    if kl < 0 or kl > end_r - q:
                        raise CorruptRecordError("malformed record header")
                    slot = int(first[r]) + hh
                    hk_pos[slot], hk_len[slot] = q, kl
                    q += kl
                    vl, q = decode_varint(raw, q)
                    if vl < -1 or vl > end_r - q:
                        raise CorruptRecordError("malformed record header")
                    hv_pos[slot], hv_len[slot] = q, vl
                    q += max(vl, 0)
                except (MalformedFrameError, IndexError):
                    raise CorruptRecordError("malformed record header") from None
            p[r] = q
    if not np.array_equal(p, rec_end):
        raise CorruptRecordError("record fields do not end at the record's length")
    f.hk_pos, f.hk_len, f.hv_pos, f.hv_len = hk_pos, hk_len, hv_pos, hv_len


# ----------------------------------------------------------------------------- fixed layout


def _record_layout(raw: bytes | memoryview, p: int, size: int) -> tuple[int, ...] | None:
    """Layout of the header-less record at ``p`` (the same tuple the vectorised detection
    builds): (size, varint widths..., key length, value length); None if unsuitable."""
    try:
        ln, q = decode_varint(raw, p)
        a = q - p
        q += 1
        _ts, q2 = decode_varint(raw, q)
        t, q = q2 - q, q2
        _off, q2 = decode_varint(raw, q)
        o, q = q2 - q, q2
        klen, q2 = decode_varint(raw, q)
        kl, q = q2 - q, q2 + max(klen, 0)
        vlen, q2 = decode_varint(raw, q)
        vl, q = q2 - q, q2 + max(vlen, 0)
        hc, q2 = decode_varint(raw, q)
        h, q = q2 - q, q2
    except (MalformedFrameError, IndexError):
        return None
    if hc != 0 or h != 1 or q - p != size or a + ln != size or klen < -1 or vlen < -1:
        return None
    if a > 5 or t > 9 or o > 5 or kl > 5 or vl > 5:
        return None
    return (size, a, t, o, kl, klen, vl, vlen)


def _col_varint(hm: np.ndarray, off: int, width: int, ok: np.ndarray) -> np.ndarray:
    """Varints of a known width at a fixed column of the head matrix (zigzag-decoded);
    rows whose continuation bits disagree with ``width`` are cleared in ``ok``. Only for
    widths over 8 bytes (9-byte timestamp deltas); ``_word_varint`` does the rest."""
    v = np.zeros(hm.shape[0], dtype=np.uint64)
    for j in range(width):
        c = hm[:, off + j]
        if j < width - 1:
            ok &= c >= 0x80
        else:
            ok &= c < 0x80
        v |= (c & 0x7F).astype(np.uint64) << np.uint64(7 * j)
    return ((v >> _ONE) ^ (np.uint64(0) - (v & _ONE))).view(np.int64)


def _low_bytes(width: int) -> np.uint64:
    return np.uint64((1 << (8 * width)) - 1)


def _word_varint(word: np.ndarray, width: int, ok: np.ndarray) -> np.ndarray:
    """Varints of a known width (<= 8) at the low end of each little-endian word,
    zigzag-decoded; rows whose continuation bits disagree with ``width`` are cleared in
    ``ok`` (one compare for all of a row's continuation bits)."""
    m = word & _low_bytes(width)
    cont = _HI & _low_bytes(width)
    ok &= (m & cont) == (cont & _low_bytes(width - 1))
    v = m & _U7
    for k in range(1, width):
        v |= (m >> np.uint64(k)) & np.uint64(0x7F << (7 * k))
    return ((v >> _ONE) ^ (np.uint64(0) - (v & _ONE))).view(np.int64)


def _column(heads: np.ndarray, at: int, width: int, n: int, dtype: str = "<u8") -> np.ndarray:
    """Column ``at`` of ``n`` record heads of ``width`` bytes each, read as one unaligned
    little-endian word per head (``heads`` has 8 spare bytes after the last head)."""
    return np.ndarray(shape=(n,), dtype=dtype, buffer=heads, offset=at, strides=(width,))


def _same_low_bytes(word: np.ndarray, width: int) -> np.ndarray:
    """Rows whose low ``width`` bytes equal row 0's (a field every record of a layout
    group encodes identically, e.g. the record length: equal bytes, equal varint)."""
    m = word & _low_bytes(width)
    return m == m[0]


def _fixed_layout_rows(
    buf: _Buf, runs: tuple[np.ndarray, ...], f: _Fields, key_head: np.ndarray,
    val_head: np.ndarray, irregular: np.ndarray,
) -> None:
    """Decode the records of equal-size runs whose layout matches their run's first record
    with column reads on one gathered head matrix per layout (no per-field gathers)."""
    rec0, p0, size, count = runs
    sel = np.flatnonzero(count >= _FIXED_MIN_RUN)
    if not sel.size:
        return
    if sel.size <= _PY_LAYOUT_MAX_RUNS:  # few runs: Python beats ~90 numpy calls
        grouped: dict[tuple[int, ...], list[int]] = {}
        for i in sel.tolist():
            layout = _record_layout(buf.raw, int(p0[i]), int(size[i]))
            if layout is not None:
                grouped.setdefault(layout, []).append(i)
        _decode_layout_groups(buf, grouped, runs, f, key_head, val_head, irregular)
        return
    # layout of every run's first record, vectorised over the runs
    heads = p0[sel]
    ln, a, bad = _varints(buf, heads, 5)
    q = heads + a + 1
    _v, t, b = _varints(buf, q, 10)
    bad |= b
    q += t
    _v, o, b = _varints(buf, q, 5)
    bad |= b
    q += o
    kv, kl, b = _varints(buf, q, 5)
    bad |= b
    q += kl + np.maximum(kv, 0)
    vv, vl, b = _varints(buf, q, 5)
    bad |= b
    q += vl + np.maximum(vv, 0)
    hv, h, b = _varints(buf, q, 5)
    q += h
    sz = size[sel]
    good = ~(bad | b) & (hv == 0) & (h == 1) & (q - heads == sz) & (a + ln == sz)
    good &= (kv >= -1) & (vv >= -1) & (t <= 9)
    if not good.any():
        return
    table = np.stack([sz, a, t, o, kl, kv, vl, vv], axis=1)[good].tolist()
    grouped = {}
    for i, layout in zip(sel[good].tolist(), table, strict=True):
        grouped.setdefault(tuple(layout), []).append(i)
    _decode_layout_groups(buf, grouped, runs, f, key_head, val_head, irregular)


def _decode_layout_groups(
    buf: _Buf, grouped: dict[tuple[int, ...], list[int]], runs: tuple[np.ndarray, ...],
    f: _Fields, key_head: np.ndarray, val_head: np.ndarray, irregular: np.ndarray,
) -> None:
    """Row 0 of every group is the first record of a run whose layout was checked field by
    field; every other row is checked against it: the fields the layout fixes (record,
    key and value lengths) byte for byte, the two deltas by their continuation bits."""
    rec0, p0, _size, count = runs
    for layout, members in grouped.items():
        S, a, t, o, kl, K, vl, V = layout
        idx = np.array(members, dtype=np.int64)
        mm = count[idx]
        before = np.cumsum(mm) - mm
        g = np.arange(int(mm.sum()), dtype=np.int64)
        rows = np.repeat(rec0[idx] - before, mm) + g
        pos = np.repeat(p0[idx] - before * S, mm) + g * S
        kofs = a + 1 + t + o + kl
        kn = max(K, 0)
        vofs = kofs + kn + vl
        vn = max(V, 0)
        width = vofs + min(vn, 12)
        n = len(pos)
        # one gather of `width` bytes per record (a void-dtype row gather is a plain memcpy
        # per row, several times faster than 2-D fancy indexing), into a buffer with 8 spare
        # bytes so that any column can be read as an unaligned little-endian word
        rows_view = np.ndarray(
            shape=(buf.size - width + 1,), dtype=np.dtype((np.void, width)), buffer=buf.u8,
            strides=(1,),
        )
        heads = np.empty(n * width + 8, dtype=np.uint8)
        heads[n * width :] = 0
        hm = heads[: n * width].reshape(n, width)
        hm.view(np.dtype((np.void, width)))[:, 0] = rows_view[pos]
        ok = _same_low_bytes(_column(heads, 0, width, n), a)
        ok &= _same_low_bytes(_column(heads, kofs - kl, width, n), kl)
        ok &= _same_low_bytes(_column(heads, kofs + kn, width, n), vl)
        if t <= 8:
            ts = _word_varint(_column(heads, a + 1, width, n), t, ok)
        else:
            ts = _col_varint(hm, a + 1, t, ok)
        off = _word_varint(_column(heads, a + 1 + t, width, n), o, ok)
        ok &= buf.u8[pos + (vofs + vn)] == 0  # headerCount 0
        all_ok = bool(ok.all())
        if not all_ok:
            rows, pos, ts, off = rows[ok], pos[ok], ts[ok], off[ok]
        f.ts_delta[rows] = ts
        f.off_delta[rows] = off
        f.key_pos[rows] = pos + kofs
        f.key_len[rows] = K
        f.val_pos[rows] = pos + vofs
        f.val_len[rows] = V
        for head, start, nbytes in ((key_head, kofs, kn), (val_head, vofs, vn)):
            if nbytes > 12:  # a long value's view needs only its 4-byte prefix
                prefix = _column(heads, start, width, n, "<u4")
                head.view("<u4")[rows, 0] = prefix if all_ok else prefix[ok]
            elif nbytes:  # the whole value, zero padded (inline views)
                block = np.zeros((n, 12), dtype=np.uint8)
                block[:, :nbytes] = hm[:, start : start + nbytes]
                if not all_ok:
                    block = block[ok]
                head.view("V12")[rows, 0] = block.view("V12")[:, 0]
        irregular[rows] = False


# ----------------------------------------------------------------------------- arrow


def _heads(buf: _Buf, pos: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """First min(len, 12) bytes of each value, zero padded, as an (n, 12) uint8 array."""
    n = len(pos)
    out = np.zeros((n, 2), dtype="<u8")
    ln = np.clip(lens, 0, 12).astype(np.uint64)
    lo_bits = np.minimum(ln, 8) * np.uint64(8)
    lo_mask = np.where(lo_bits >= 64, ~np.uint64(0), (_ONE << (lo_bits & np.uint64(63))) - _ONE)
    out[:, 0] = buf.words(pos) & lo_mask
    hi_bits = (np.maximum(ln, 8) - np.uint64(8)) * np.uint64(8)
    # bytes 8..11 matter only for values of 9..12 bytes (inline); longer ones keep a prefix
    long8 = np.flatnonzero((lens > 8) & (lens <= 12))
    if long8.size:
        out[long8, 1] = buf.words(pos[long8] + 8) & ((_ONE << hi_bits[long8]) - _ONE)
    return out.view(np.uint8).reshape(n, 16)[:, :12]


def _view_array(
    buf: _Buf, pos: np.ndarray, lens: np.ndarray, head: np.ndarray, *, nullable: bool,
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
    data: Any, metas: list[Any], schema: pa.Schema, min_offset: int | None,
    topic: str | None, partition: int | None,
) -> pa.RecordBatch:
    rows = []
    ts_types = []
    for m in metas:
        recs = decode_records(bytes(data[m.start : m.end]), m.count, m.base_offset, m.base_ts,
                              m.max_ts if m.lat else None)
        for r in recs:
            if not 0 <= r.offset_delta <= m.lod:
                raise InvalidRecordError(
                    "record offset delta outside its batch's lastOffsetDelta"
                )
        rows.extend(recs)
        ts_types.extend([1 if m.lat else 0] * len(recs))
    if min_offset is not None:
        keep = [i for i, r in enumerate(rows) if r.offset >= min_offset]
        rows = [rows[i] for i in keep]
        ts_types = [ts_types[i] for i in keep]
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
    return pa.RecordBatch.from_pydict(cols, schema=schema)


class _BatchMeta:
    __slots__ = ("count", "base_offset", "base_ts", "max_ts", "lat", "lod", "start", "end")


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
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    metas: list[_BatchMeta] = []
    # Once a batch is compressed, every records section is decompressed (or copied) onto the
    # end of one buffer, so the decoder still sees a single contiguous buffer.
    joined: cramjam.Buffer | None = None
    for view in iter_batch_views(mv, pos, end, allow_partial_tail=allow_partial_tail):
        at = view.position
        (base_offset, _l, _ple, _m, crc, attrs, lod, base_ts, max_ts, _pid, _pe, _bs,
         count) = HEADER_STRUCT.unpack_from(mv, at)
        if verify_crc and crc32c(mv[at + 21 : at + view.size]) != crc:
            view.ensure_valid()  # raises with the details
        if count < 0 or lod < 0 or (count and lod < count - 1):
            view.ensure_consistent()  # raises with the details
        if attrs & CONTROL_MASK and skip_control:
            continue
        if keep_batch is not None and not keep_batch(view):
            continue
        if count == 0:
            continue
        codec = attrs & 0x07
        m = _BatchMeta()
        if codec != Compression.NONE and joined is None:
            joined = cramjam.Buffer()
            for prev in metas:  # the uncompressed sections before this batch
                start = joined.tell()
                joined.write(mv[prev.start : prev.end])
                prev.start, prev.end = start, joined.tell()
        if joined is None:
            m.start, m.end = at + BATCH_HEADER_SIZE, at + view.size
        else:
            m.start = joined.tell()
            m.end = m.start + decompress_into(codec, view.records_bytes(), joined)
        if count > (m.end - m.start) // 7:
            raise CorruptRecordError(
                f"batch at offset {base_offset}: {count} records cannot fit in "
                f"{m.end - m.start} bytes"
            )
        m.count, m.base_offset, m.base_ts, m.max_ts, m.lod = count, base_offset, base_ts, max_ts, lod
        m.lat = bool(attrs & TIMESTAMP_TYPE_MASK)
        metas.append(m)

    data: Any = mv if joined is None else memoryview(joined)
    arrow_buf = pa.py_buffer(data)
    return _assemble(
        data, arrow_buf, metas, min_offset=min_offset, topic=topic, partition=partition,
        binary_view=binary_view,
    )


def decode_batch_to_arrow(
    buf: bytes | bytearray | memoryview, pos: int = 0, **kwargs: Any
) -> pa.RecordBatch:
    """One batch at ``pos`` (same columns and options as ``decode_batches_to_arrow``)."""
    view = BatchView(buf, pos)
    kwargs.setdefault("allow_partial_tail", False)
    return decode_batches_to_arrow(buf, pos, pos + view.size, **kwargs)


def _assemble(
    data: Any, arrow_buf: pa.Buffer, metas: list[_BatchMeta], *, min_offset: int | None,
    topic: str | None, partition: int | None, binary_view: bool,
) -> pa.RecordBatch:
    schema = arrow_schema(
        topic=topic is not None, partition=partition is not None, binary_view=binary_view
    )
    if not metas:
        return pa.RecordBatch.from_pylist([], schema=schema)
    if sum(m.count for m in metas) < SMALL_INPUT_ROWS:
        return _assemble_small(data, metas, schema, min_offset, topic, partition)
    buf = _Buf(data, arrow_buf)
    counts = np.array([m.count for m in metas], dtype=np.int64)
    seg_start = np.array([m.start for m in metas], dtype=np.int64)
    seg_end = np.array([m.end for m in metas], dtype=np.int64)
    found = _find_starts(buf, seg_start, seg_end, counts)
    n = found.n
    if found.walked_pos.size and int(found.walked_pos.min()) < 0:
        raise CorruptRecordError("record chain leaves its batch")
    f = _Fields()
    f.ts_delta = np.empty(n, dtype=np.int64)
    f.off_delta = np.empty(n, dtype=np.int64)
    f.key_pos = np.empty(n, dtype=np.int64)
    f.key_len = np.empty(n, dtype=np.int64)
    f.val_pos = np.empty(n, dtype=np.int64)
    f.val_len = np.empty(n, dtype=np.int64)
    f.hcount = np.zeros(n, dtype=np.int64)
    key_head = np.zeros((n, 12), dtype=np.uint8)
    val_head = np.zeros((n, 12), dtype=np.uint8)
    irregular = np.ones(n, dtype=bool)
    _fixed_layout_rows(buf, found.runs, f, key_head, val_head, irregular)
    irr = np.flatnonzero(irregular)
    empty = np.empty(0, dtype=np.int64)
    f.hk_pos = f.hk_len = f.hv_pos = f.hv_len = empty
    if irr.size:
        starts = found.all()
        last = np.cumsum(counts) - 1
        next_start = np.empty(n, dtype=np.int64)
        next_start[:-1] = starts[1:]
        next_start[last] = seg_end
        g = _parse_fields(buf, starts[irr], next_start[irr])
        for name in ("ts_delta", "off_delta", "key_pos", "key_len", "val_pos", "val_len",
                     "hcount"):
            getattr(f, name)[irr] = getattr(g, name)
        key_head[irr] = _heads(buf, g.key_pos, g.key_len)
        val_head[irr] = _heads(buf, g.val_pos, g.val_len)
        f.hk_pos, f.hk_len, f.hv_pos, f.hv_len = g.hk_pos, g.hk_len, g.hv_pos, g.hv_len

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
    if min_offset is not None and n and offsets[0] < min_offset:
        below = offsets < min_offset
        k = int(np.argmin(below)) if not below.all() else n
        if below[:k].all() and not below[k:].any():
            rb = rb.slice(k)
        else:
            rb = rb.filter(pa.array(~below))
    return rb
