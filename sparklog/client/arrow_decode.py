"""Fetched record batches -> one pyarrow RecordBatch, without a Python object per record.

Work per batch: header fields with ``struct``, CRC, decompression, and locating record
starts. Record starts are a chain (each record's length prefix says where the next
begins); the chain is followed in runs: given a record of length L at p, the candidates
p + k*(L+s) are checked all at once by comparing their length prefixes with numpy, so a
run of equal-length records (fixed-size values: nearly every record) costs one numpy pass.
Irregular stretches fall back to a scalar walk for a while. Everything after that is
vectorised over all records of all batches: varint fields by masked gathers, keys and
values by strided 2-D copies per run of equal layout (or a per-byte index when irregular),
and the Arrow arrays are built straight from the numpy buffers.

(Belongs with the record codec; lives in the client until ``protocol`` has one.)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c
import numpy as np
import pyarrow as pa

from sparklog.protocol.compression import decompress
from sparklog.protocol.errors import CorruptRecordError

__all__ = ["FETCH_SCHEMA", "FETCH_SCHEMA_NO_HEADERS", "DecodedFetch", "decode_fetched",
           "batch_sizes"]

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
FETCH_SCHEMA_NO_HEADERS = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("ms")),
    pa.field("timestampType", pa.int32()),
])
FETCH_SCHEMA = FETCH_SCHEMA_NO_HEADERS.append(pa.field("headers", HEADER_TYPE))

_HDR = struct.Struct(">qiibIhiqqqhii")
_PAD = 16
_MIN_RUN = 8


@dataclass(slots=True)
class _Section:
    start: int  # position of the records section in the combined buffer
    end: int
    count: int
    base_offset: int
    last_offset: int
    base_ts: int
    max_ts: int
    ts_type: int


@dataclass(slots=True)
class DecodedFetch:
    batch: pa.RecordBatch
    next_offset: int  # first offset not covered by the scanned batches


class _Chain:
    """Record-start walker over one buffer (see module doc)."""

    def __init__(self, buf: bytes, arr: np.ndarray) -> None:
        self.buf = buf
        self.arr = arr

    def walk(self, p: int, end: int, count: int, starts: np.ndarray, sizes: np.ndarray,
             lens: np.ndarray, i0: int) -> None:
        buf, arr = self.buf, self.arr
        i = 0
        scalar_left = 0
        guess = 16
        while i < count:
            # scalar decode of the length prefix at p (zigzag varint)
            b = buf[p]
            if b < 0x80:
                z, s = b, 1
            else:
                z, shift, s = b & 0x7F, 7, 1
                while True:
                    if p + s >= end or s > 5:
                        raise CorruptRecordError("bad record length varint")
                    b = buf[p + s]
                    z |= (b & 0x7F) << shift
                    s += 1
                    if b < 0x80:
                        break
                    shift += 7
            length = (z >> 1) ^ -(z & 1)
            stride = s + length
            if length < 0 or p + stride > end:
                raise CorruptRecordError(f"record length {length} overruns its batch")
            maxk = min(count - i, (end - p) // stride, guess)
            if scalar_left <= 0 and maxk >= _MIN_RUN:
                cand = p + stride * np.arange(maxk, dtype=np.int64)
                ok = arr[cand] == b if s == 1 else np.all(
                    arr[cand[:, None] + np.arange(s)] == arr[p:p + s], axis=1)
                bad = np.flatnonzero(~ok)
                k = int(bad[0]) if len(bad) else maxk
                starts[i0 + i:i0 + i + k] = cand[:k]
                sizes[i0 + i:i0 + i + k] = s
                lens[i0 + i:i0 + i + k] = length
                i += k
                p += k * stride
                if k == maxk:
                    guess = min(guess * 4, 1 << 16)
                elif k < _MIN_RUN:
                    scalar_left, guess = 64, 16
                continue
            starts[i0 + i] = p
            sizes[i0 + i] = s
            lens[i0 + i] = length
            i += 1
            p += stride
            scalar_left -= 1
        if p != end:
            raise CorruptRecordError(f"records section has {end - p} trailing bytes")


def _varint(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at every position -> (values int64, sizes int64)."""
    b = arr[pos]
    val = (b & 0x7F).astype(np.int64)
    size = np.ones(len(pos), np.int64)
    cont = np.flatnonzero(b & 0x80)
    k = 1
    while len(cont):
        if k >= 10:
            raise CorruptRecordError("varint longer than 10 bytes")
        bk = arr[pos[cont] + k]
        val[cont] |= (bk & 0x7F).astype(np.int64) << (7 * k)
        size[cont] += 1
        cont = cont[(bk & 0x80) != 0]
        k += 1
    return (val >> 1) ^ -(val & 1), size


def _gather(arr: np.ndarray, pos: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Copy variable-length fields into one contiguous buffer -> (int32 offsets, data)."""
    n = len(pos)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    out = np.empty(total, np.uint8)
    if total == 0:
        return offsets.astype(np.int32), out
    if n >= 2:
        step = np.diff(pos)
        same = (lens[1:] == lens[:-1])
        same[1:] &= step[1:] == step[:-1]
        brk = np.flatnonzero(~same)
        if len(brk) * 8 < n:
            edges = [0, *(brk + 1).tolist(), n]
            for a, b in zip(edges[:-1], edges[1:], strict=True):
                ln = int(lens[a])
                if ln == 0:
                    continue
                cnt = b - a
                st = int(step[a]) if cnt > 1 else ln
                src = np.lib.stride_tricks.as_strided(arr[int(pos[a]):], shape=(cnt, ln),
                                                      strides=(st, 1))
                o = int(offsets[a])
                out[o:o + cnt * ln].reshape(cnt, ln)[...] = src
            return offsets.astype(np.int32), out
    it = np.int32 if arr.size < (1 << 31) else np.int64
    idx = np.repeat((pos - offsets[:-1]).astype(it), lens)
    idx += np.arange(total, dtype=it)
    out[:] = arr[idx]
    return offsets.astype(np.int32), out


def _binary(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None,
            type_: pa.DataType | None = None) -> pa.Array:
    n = len(offsets) - 1
    vbuf = None
    nulls = 0
    if valid is not None and not valid.all():
        vbuf = pa.py_buffer(np.packbits(valid, bitorder="little"))
        nulls = int(n - valid.sum())
    return pa.Array.from_buffers(type_ or pa.binary(), n, [vbuf, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _const_string(s: str, n: int) -> pa.Array:
    raw = s.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def batch_sizes(buf: bytes | memoryview) -> list[tuple[int, int, int]]:
    """(base_offset, next_offset, size) of every complete batch in a records field."""
    out = []
    mv = memoryview(buf)
    pos, end = 0, len(mv)
    while end - pos >= 61:
        base, blen = struct.unpack_from(">qi", mv, pos)
        size = 12 + blen
        if blen < 49 or pos + size > end:
            break
        lod = struct.unpack_from(">i", mv, pos + 23)[0]
        out.append((base, base + lod + 1, size))
        pos += size
    return out


def decode_fetched(
    records: bytes | bytearray | memoryview | None,
    *,
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int | None = None,
    read_committed: bool = False,
    aborted: list[tuple[int, int]] | None = None,
    include_headers: bool = True,
    verify_crc: bool = True,
) -> DecodedFetch:
    """Decode a Fetch response's ``records`` for one partition into FETCH_SCHEMA rows with
    start_offset <= offset < end_offset; control batches and (read_committed) aborted
    transactions are dropped. A partial last batch is ignored."""
    mv = memoryview(records if records is not None else b"")
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    sections: list[tuple] = []
    next_offset = start_offset
    aborted_by_pid: dict[int, list[int]] = {}
    for pid, first in aborted or ():
        aborted_by_pid.setdefault(pid, []).append(first)
    for lst in aborted_by_pid.values():
        lst.sort()
    active_aborts: set[int] = set()
    pos, end = 0, len(mv)
    while end - pos >= 61:
        (base, blen, _ple, magic, crc, attrs, lod, base_ts, max_ts, pid, _epoch, _seq,
         count) = _HDR.unpack_from(mv, pos)
        size = 12 + blen
        if blen < 49 or pos + size > end:
            break  # partial tail (cut at max bytes)
        if magic != 2:
            raise CorruptRecordError(f"batch at offset {base}: magic {magic}")
        batch = mv[pos:pos + size]
        pos += size
        last = base + lod
        if last < start_offset:
            continue
        if end_offset is not None and base >= end_offset:
            break
        if verify_crc and crc32c.crc32c(batch[21:]) != crc:
            raise CorruptRecordError(f"CRC mismatch in batch at offset {base} of "
                                     f"{topic}-{partition}")
        next_offset = max(next_offset, last + 1)
        is_txn = bool(attrs & 0x10)
        is_control = bool(attrs & 0x20)
        if read_committed and is_txn:
            firsts = aborted_by_pid.get(pid)
            if firsts and pid not in active_aborts and firsts[0] <= last:
                active_aborts.add(pid)
                firsts.pop(0)
            if is_control:
                # an ABORT marker ends that producer's aborted transaction
                if count and len(batch) > 61:
                    active_aborts.discard(pid)
                continue
            if pid in active_aborts:
                continue
        if is_control or count == 0:
            continue
        codec = attrs & 0x07
        if codec:
            body = decompress(codec, batch[61:])
            sections.append((body, 0, len(body), count, base, base_ts, max_ts, (attrs >> 3) & 1))
        else:  # positions into the response buffer itself: no copy
            sections.append((None, pos - size + 61, pos, count, base, base_ts, max_ts,
                             (attrs >> 3) & 1))
    if end_offset is not None:
        next_offset = min(next_offset, end_offset) if next_offset > start_offset else next_offset
    try:
        batch = _decode_sections(mv, sections, topic, partition, start_offset, end_offset,
                                 include_headers)
    except IndexError:  # a varint ran off the end of the buffer
        raise CorruptRecordError(f"truncated record in {topic}-{partition}") from None
    return DecodedFetch(batch, next_offset)


def _decode_sections(mv: memoryview, sections: list, topic: str, partition: int,
                     start_offset: int, end_offset: int | None,
                     include_headers: bool) -> pa.RecordBatch:
    schema = FETCH_SCHEMA if include_headers else FETCH_SCHEMA_NO_HEADERS
    total_n = sum(s[3] for s in sections)
    if total_n == 0:
        return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)
    if all(s[0] is None for s in sections):
        buf: bytes | memoryview = mv
        places = [(s[1], s[2]) for s in sections]
    else:  # some batches were decompressed: lay every records section end to end
        parts, places, p = [], [], 0
        for body, a, b, *_ in sections:
            chunk = mv[a:b] if body is None else body
            parts.append(chunk)
            places.append((p, p + len(chunk)))
            p += len(chunk)
        parts.append(bytes(_PAD))
        buf = b"".join(parts)
    arr = np.frombuffer(buf, np.uint8)
    chain = _Chain(buf, arr)
    starts = np.empty(total_n, np.int64)
    sizes = np.empty(total_n, np.int64)
    lens = np.empty(total_n, np.int64)
    sec_id = np.empty(total_n, np.int64)
    base_off = np.empty(len(sections), np.int64)
    base_ts = np.empty(len(sections), np.int64)
    max_ts = np.empty(len(sections), np.int64)
    ts_type = np.empty(len(sections), np.int32)
    i = 0
    for j, ((_b, _a, _e, count, base, bts, mts, tst), (p0, p1)) in enumerate(
            zip(sections, places, strict=True)):
        chain.walk(p0, p1, count, starts, sizes, lens, i)
        sec_id[i:i + count] = j
        base_off[j], base_ts[j], max_ts[j], ts_type[j] = base, bts, mts, tst
        i += count
    body = starts + sizes
    rec_end = body + lens
    q = body + 1  # skip attributes
    tsd, s1 = _varint(arr, q)
    q = q + s1
    od, s2 = _varint(arr, q)
    q = q + s2
    offsets = base_off[sec_id] + od
    keep = offsets >= start_offset
    if end_offset is not None:
        keep &= offsets < end_offset
    if not keep.all():
        sel = np.flatnonzero(keep)
        q, rec_end, tsd, offsets, sec_id = q[sel], rec_end[sel], tsd[sel], offsets[sel], sec_id[sel]
    n = len(q)
    klen, ks = _varint(arr, q)
    q = q + ks
    kpos = q
    q = q + np.maximum(klen, 0)
    vlen, vs = _varint(arr, q)
    q = q + vs
    vpos = q
    q = q + np.maximum(vlen, 0)
    hcount, hs = _varint(arr, q)
    q = q + hs
    if (klen < -1).any() or (vlen < -1).any() or (hcount < 0).any() or (q > rec_end).any():
        raise CorruptRecordError("record fields overrun their record")
    kvalid = klen >= 0
    vvalid = vlen >= 0
    ko, kd = _gather(arr, kpos, np.maximum(klen, 0))
    vo, vd = _gather(arr, vpos, np.maximum(vlen, 0))
    tst = ts_type[sec_id]
    ts = np.where(tst == 1, max_ts[sec_id], base_ts[sec_id] + tsd)
    cols = [
        _binary(ko, kd, kvalid),
        _binary(vo, vd, vvalid),
        _const_string(topic, n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(offsets),
        pa.array(ts.astype("datetime64[ms]"), pa.timestamp("ms")),
        pa.array(tst),
    ]
    if include_headers:
        cols.append(_headers(arr, q, hcount, rec_end))
    elif (hcount > 0).any():
        _headers(arr, q, hcount, rec_end)  # still validates the layout
    else:
        if (q != rec_end).any():
            raise CorruptRecordError("record length does not match its fields")
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _headers(arr: np.ndarray, q: np.ndarray, hcount: np.ndarray,
             rec_end: np.ndarray) -> pa.Array:
    n = len(q)
    list_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(hcount, out=list_offsets[1:])
    total = int(list_offsets[-1])
    if total == 0:
        if (q != rec_end).any():
            raise CorruptRecordError("record length does not match its fields")
        empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                           fields=list(HEADER_TYPE.value_type))
        return pa.ListArray.from_arrays(pa.array(list_offsets), empty)
    # walk header j of every record that has more than j headers, vectorised over records
    hk_pos = np.empty(total, np.int64)
    hk_len = np.empty(total, np.int64)
    hv_pos = np.empty(total, np.int64)
    hv_len = np.empty(total, np.int64)
    cur = q.copy()
    base = list_offsets[:-1].astype(np.int64)
    for j in range(int(hcount.max())):
        rows = np.flatnonzero(hcount > j)
        p = cur[rows]
        kl, s = _varint(arr, p)
        p = p + s
        dest = base[rows] + j
        hk_pos[dest], hk_len[dest] = p, kl
        p = p + np.maximum(kl, 0)
        vl, s = _varint(arr, p)
        p = p + s
        hv_pos[dest], hv_len[dest] = p, vl
        p = p + np.maximum(vl, 0)
        if (kl < 0).any() or (vl < -1).any():
            raise CorruptRecordError("bad header lengths")
        cur[rows] = p
    if (cur != rec_end).any():
        raise CorruptRecordError("record length does not match its fields")
    ko, kd = _gather(arr, hk_pos, hk_len)
    vo, vd = _gather(arr, hv_pos, np.maximum(hv_len, 0))
    keys = _binary(ko, kd, None, pa.string())
    vals = _binary(vo, vd, hv_len >= 0)
    structs = pa.StructArray.from_arrays([keys, vals], fields=list(HEADER_TYPE.value_type))
    return pa.ListArray.from_arrays(pa.array(list_offsets), structs)
