"""Vectorised RecordBatch v2 encoding from Arrow columns: no Python object per record.

A v2 record is ``length attributes tsDelta offsetDelta keyLen key valueLen value
headerCount headers`` with zigzag varints. Every field's size is computed for all records
at once with numpy, record positions come from one cumulative sum, each varint is written
with one masked numpy store per byte position, and key/value/header bytes are scattered
into place in bulk (a reshape when all records have the same layout, which is the common
fixed-size case). Records of many batches are written into ONE buffer with 61-byte gaps
for the batch headers, so an uncompressed batch is a slice of that buffer: no copy.

The counterpart of ``record_arrow`` (decoding); the producer's bulk path and benchmarks use it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .batch_header import (
    BATCH_HEADER_SIZE,
    NO_SEQUENCE,
    increment_sequence,
    make_attributes,
    write_header,
)
from .compression import compress

__all__ = ["EncodedBatch", "encode_batches", "binary_parts", "as_binary_array"]

_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


@dataclass(slots=True)
class EncodedBatch:
    data: memoryview | bytes  # the whole batch, base offset 0
    record_count: int
    first_index: int  # index of the batch's first record in the input columns
    max_timestamp: int


def as_binary_array(arr: pa.Array | pa.ChunkedArray | list | None) -> pa.Array | None:
    """Accept binary/large_binary/string columns (or a python list) as binary."""
    if arr is None:
        return None
    if isinstance(arr, list):
        arr = pa.array(arr, pa.binary())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_string(t):
        arr = arr.cast(pa.binary())
    elif pa.types.is_large_string(t):
        arr = arr.cast(pa.large_binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        if pa.types.is_null(t):
            return pa.nulls(len(arr), pa.binary())
        raise TypeError(f"expected a binary or string column, got {t}")
    return arr


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(offsets int64 n+1 rebased to data[0], data uint8, valid bool or None) of a
    binary array, honouring the array's slice offset; no copy of the data."""
    n = len(arr)
    bufs = arr.buffers()
    odt = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=odt, count=arr.offset + n + 1)[arr.offset:]
    data = (np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None
            else np.zeros(0, np.uint8))
    o = offsets.astype(np.int64)
    base = int(o[0]) if n else 0
    data = data[base:int(o[-1]) if n else base]
    o -= base
    valid = None
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
    return o, data, valid


def _zigzag(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.int64)
    r = v << 1
    r ^= v >> 63
    return r.view(np.uint64)


def _vsize(u: np.ndarray) -> np.ndarray:
    """Varint byte counts; the common all-small cases skip the general search."""
    if len(u) == 0:
        return np.zeros(0, np.int64)
    top = int(u.max())
    if top < 1 << 7:
        return np.ones(len(u), np.int64)
    if top < 1 << 14:
        return (u >= (1 << 7)).astype(np.int64) + 1
    return 1 + np.searchsorted(_VARINT_LIMITS, u, side="right").astype(np.int64)


def _put_varints(out: np.ndarray, pos: np.ndarray, u: np.ndarray, size: np.ndarray) -> None:
    """Write unsigned varint u[i] (size[i] bytes) at out[pos[i]] for all i."""
    if len(u) == 0:
        return
    maxs = int(size.max())
    if maxs == 1:
        out[pos] = u.astype(np.uint8)
        return
    for k in range(maxs):
        if k == 0:
            sel_pos, sel_u, sel_s = pos, u, size
        else:
            m = size > k
            sel_pos, sel_u, sel_s = pos[m], u[m], size[m]
        b = ((sel_u >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        b |= np.where(sel_s > k + 1, np.uint8(0x80), np.uint8(0))
        out[sel_pos + k] = b


def _scatter(out: np.ndarray, dest: np.ndarray, offsets: np.ndarray, data: np.ndarray,
             lengths: np.ndarray) -> None:
    """Copy variable-length fields (source rows offsets[i]..offsets[i]+lengths[i] of data)
    to out[dest[i]:]. Runs of records with one field length, contiguous source and evenly
    spaced destinations (fixed-size values: nearly every record) are copied as one strided
    2-D view each; only irregular data pays a per-byte index."""
    n = len(dest)
    if n == 0:
        return
    total = int(lengths.sum())
    if total == 0:
        return
    if n >= 2:
        dstep = np.diff(dest)
        ok = (lengths[1:] == lengths[:-1]) & (np.diff(offsets) == lengths[:-1])
        ok[1:] &= dstep[1:] == dstep[:-1]
        brk = np.flatnonzero(~ok)
        if len(brk) * 8 < n:
            starts = np.concatenate([[0], brk + 1])
            ends = np.concatenate([brk + 1, [n]])
            for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
                ln = int(lengths[a])
                if ln == 0:
                    continue
                cnt = b - a
                s0 = int(offsets[a])
                src = data[s0:s0 + ln * cnt].reshape(cnt, ln)
                stride = int(dstep[a]) if cnt > 1 else ln
                view = np.lib.stride_tricks.as_strided(out[int(dest[a]):], shape=(cnt, ln),
                                                       strides=(stride, 1))
                view[...] = src
            return
    # general case: one index per byte
    it = np.int32 if out.size < (1 << 31) and data.size < (1 << 31) else np.int64
    lead = np.cumsum(lengths) - lengths  # bytes of the field before row i
    idx = np.repeat((dest - lead).astype(it), lengths)
    ar = np.arange(total, dtype=it)
    idx += ar
    src0 = int(offsets[0])
    if bool((offsets - src0 == lead).all()):
        out[idx] = data[src0:src0 + total]
    else:
        src_idx = np.repeat((offsets - lead).astype(it), lengths)
        src_idx += ar
        out[idx] = data[src_idx]


def _uniform_runs(n: int, bid: np.ndarray, *arrs: np.ndarray) -> list[tuple[int, int]] | None:
    """Maximal runs of consecutive records with an identical byte layout (every field the
    same size) inside one batch, with contiguous key/value source bytes; None when there
    are too many runs for run-wise writing to pay off. The last two arrays are the key and
    value offsets (n+1)."""
    if n == 1:
        return [(0, 1)]
    *sizes, ko, vo = arrs
    change = np.diff(bid) != 0
    for a in sizes:
        change |= a[1:] != a[:-1]
    for o in (ko, vo):
        d = np.diff(o)
        change |= d[1:] != d[:-1]
    brk = np.flatnonzero(change)
    if len(brk) * 16 > n:
        return None
    edges = [0, *(brk + 1).tolist(), n]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _write_run(out: np.ndarray, start: int, a: int, b: int, reclen: int, fields: list) -> None:
    """Write records a..b (same layout, contiguous from ``start``) through one 2-D view.
    Consecutive varint fields are first assembled in a small contiguous matrix (cache
    friendly) and stored with one strided copy; keys/values are one block copy each."""
    cnt = b - a
    m = out[start:start + cnt * reclen].reshape(cnt, reclen)
    col = 0
    pending: list[tuple[int, np.ndarray | int, int]] = []  # (width, bytes or column, ...)

    def flush(col_end: int) -> None:
        if not pending:
            return
        width = sum(w for w, _v, _k in pending)
        tmp = np.empty((cnt, width), np.uint8)
        c = 0
        for w, v, kind in pending:
            if kind == 0:  # constant bytes, broadcast
                tmp[:, c:c + w] = v
            else:  # per-record varint bytes: one column per byte
                for k in range(w):
                    tmp[:, c + k] = v[k]  # type: ignore[index]
            c += w
        m[:, col_end - width:col_end] = tmp
        pending.clear()

    for u, size, src in fields:
        if src is not None:  # raw bytes: size is the per-record length array
            ln = int(size[a])
            if ln:
                flush(col)
                offs, data = src
                s0 = int(offs[a])
                m[:, col:col + ln] = data[s0:s0 + ln * cnt].reshape(cnt, ln)
            col += ln
            continue
        sz = int(size[a]) if isinstance(size, np.ndarray) else size
        if u is None:  # the attributes byte
            pending.append((1, np.zeros(1, np.uint8), 0))
            col += 1
            continue
        uu = u[a:b]
        first = int(uu[0])
        if cnt == 1 or bool((uu == first).all()):
            v, bs = first, bytearray()
            for k in range(sz):
                bs.append(((v >> (7 * k)) & 0x7F) | (0x80 if k + 1 < sz else 0))
            pending.append((sz, np.frombuffer(bytes(bs), np.uint8), 0))
        else:
            cols = []
            for k in range(sz):
                byte = ((uu >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
                if k + 1 < sz:
                    byte |= np.uint8(0x80)
                cols.append(byte)
            pending.append((sz, cols, 1))  # type: ignore[arg-type]
        col += sz
    flush(col)


def _header_parts(headers: pa.Array, lo: int, hi: int):
    """Flatten list<struct<key string, value binary>> rows lo..hi into per-header arrays."""
    lst = headers.slice(lo, hi - lo)
    n = hi - lo
    loffs = np.frombuffer(lst.buffers()[1], dtype=np.int32, count=lst.offset + n + 1)[lst.offset:]
    loffs = loffs.astype(np.int64)
    counts = np.diff(loffs)
    if lst.null_count:
        valid = lst.is_valid().to_numpy(zero_copy_only=False)
        counts = np.where(valid, counts, 0)
    structs = lst.values.slice(int(loffs[0]), int(loffs[-1] - loffs[0]))
    names = [f.name for f in structs.type]
    keys = as_binary_array(structs.field(names.index("key") if "key" in names else 0))
    vals = as_binary_array(structs.field(names.index("value") if "value" in names else 1))
    if structs.offset or keys.offset:
        pass  # binary_parts honours slice offsets
    ko, kd, _ = binary_parts(keys)
    vo, vd, vvalid = binary_parts(vals)
    klen = np.diff(ko)
    vlen = np.diff(vo)
    if vvalid is not None:
        vlen = np.where(vvalid, vlen, -1)
    # rows of a null list are skipped: only headers of valid rows count
    if lst.null_count:
        keep = np.repeat(valid, np.diff(loffs))
        ko_s, vo_s = ko[:-1][keep], vo[:-1][keep]
        klen, vlen = klen[keep], vlen[keep]
    else:
        ko_s, vo_s = ko[:-1], vo[:-1]
    return counts, ko_s, kd, klen, vo_s, vd, vlen


def _binary_lengths(
    arr: pa.Array | None, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, data, lengths, wire lengths) of a key or value column; a null (or a missing
    column) has length 0 in the data and -1 on the wire."""
    if arr is None:
        return (np.zeros(n + 1, np.int64), np.zeros(0, np.uint8), np.zeros(n, np.int64),
                np.full(n, -1, np.int64))
    offsets, data, valid = binary_parts(arr)
    length = np.diff(offsets)
    if valid is None:
        return offsets, data, length, length
    wire = np.where(valid, length, -1)
    return offsets, data, np.maximum(wire, 0), wire


def encode_batches(
    values: pa.Array | None,
    keys: pa.Array | None = None,
    timestamps: np.ndarray | pa.Array | None = None,
    headers: pa.Array | None = None,
    *,
    n: int | None = None,
    compression: int = 0,
    compression_level: int | None = None,
    max_batch_bytes: int = 1 << 20,
    max_batch_records: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    now_ms: int | None = None,
) -> list[EncodedBatch]:
    """Encode records (all for ONE partition, in order) into v2 batches of at most about
    ``max_batch_bytes`` each (a single record larger than that gets a batch of its own).

    ``values``/``keys``: binary arrays (None = all null). ``timestamps``: int64 ms per
    record (None = now). ``headers``: list<struct<key string, value binary>>.
    With ``producer_id >= 0`` batch k gets ``base_sequence`` + records before it.
    """
    values = as_binary_array(values)
    keys = as_binary_array(keys)
    if n is None:
        if values is not None:
            n = len(values)
        elif keys is not None:
            n = len(keys)
        else:
            raise ValueError("need values, keys or n")
    if n == 0:
        return []
    if values is not None and len(values) != n or keys is not None and len(keys) != n:
        raise ValueError("keys/values lengths differ")

    # ---- per-record lengths
    vo, vd, vlen, vlen_f = _binary_lengths(values, n)
    ko, kd, klen, klen_f = _binary_lengths(keys, n)

    if timestamps is None:
        ts = np.full(n, int(time.time() * 1000) if now_ms is None else now_ms, np.int64)
    else:
        if isinstance(timestamps, pa.ChunkedArray):
            timestamps = timestamps.combine_chunks()
        if isinstance(timestamps, pa.Array):
            if pa.types.is_timestamp(timestamps.type):
                timestamps = timestamps.cast(pa.timestamp("ms")).cast(pa.int64())
            timestamps = timestamps.fill_null(
                int(time.time() * 1000) if now_ms is None else now_ms).to_numpy()
        ts = np.asarray(timestamps, dtype=np.int64)
        if len(ts) != n:
            raise ValueError("timestamps length differs")

    if headers is not None:
        if isinstance(headers, pa.ChunkedArray):
            headers = headers.combine_chunks()
        hcount, hko, hkd, hklen, hvo, hvd, hvlen = _header_parts(headers, 0, n)
        hvlen_pos = np.maximum(hvlen, 0)
        hsz = (_vsize(_zigzag(hklen)) + hklen + _vsize(_zigzag(hvlen)) + hvlen_pos)
        hcum = np.concatenate([[0], np.cumsum(hsz)])
        hstart_rec = np.concatenate([[0], np.cumsum(hcount)])
        rec_hbytes = hcum[hstart_rec[1:]] - hcum[hstart_rec[:-1]]
    else:
        hcount = np.zeros(n, np.int64)
        rec_hbytes = np.zeros(n, np.int64)

    ku = _zigzag(klen_f)
    vu = _zigzag(vlen_f)
    ksz = _vsize(ku)
    vsz = _vsize(vu)
    hcu = _zigzag(hcount)
    hcsz = _vsize(hcu)
    fixed = ksz + klen + vsz + vlen + hcsz + rec_hbytes + 1  # + attributes byte

    # ---- split into batches by an upper-bound size estimate (deltas can only shrink)
    idx = np.arange(n, dtype=np.int64)
    est = fixed + 10 + _vsize(_zigzag(idx)) + 5
    if max_batch_records is None:
        max_batch_records = n
    starts = [0]
    if int(est.sum()) + BATCH_HEADER_SIZE > max_batch_bytes or n > max_batch_records:
        cum = np.cumsum(est)
        s = 0
        while True:
            base = cum[s - 1] if s else 0
            e = int(np.searchsorted(cum, base + max_batch_bytes - BATCH_HEADER_SIZE, side="right"))
            e = min(max(e, s + 1), s + max_batch_records, n)
            if e >= n:
                break
            starts.append(e)
            s = e
    bstart = np.array(starts, dtype=np.int64)
    nb = len(bstart)
    bid = np.zeros(n, np.int64)
    if nb > 1:
        bid[bstart[1:]] = 1
        bid = np.cumsum(bid)
    first_of = bstart[bid]
    od = idx - first_of
    tsd = ts - ts[first_of]
    odu = _zigzag(od)
    tsu = _zigzag(tsd)
    odsz = _vsize(odu)
    tssz = _vsize(tsu)
    body = fixed + odsz + tssz
    bu = _zigzag(body)
    bsz = _vsize(bu)
    rec = bsz + body
    # record start positions, leaving a 61-byte gap before each batch
    rstart = np.cumsum(rec) - rec + BATCH_HEADER_SIZE * (bid + 1)
    total = int(rstart[-1] + rec[-1])
    out = np.empty(total, dtype=np.uint8)

    runs = None
    if headers is None or not len(hsz):
        runs = _uniform_runs(n, bid, bsz, tssz, odsz, klen_f, vlen_f, hcsz, ko, vo)
    if runs is not None:
        fields = [(bu, bsz, None), (None, 1, None), (tsu, tssz, None), (odu, odsz, None),
                  (ku, ksz, None), (None, klen, (ko, kd)), (vu, vsz, None),
                  (None, vlen, (vo, vd)), (hcu, hcsz, None)]
        for ra, rb in runs:
            _write_run(out, int(rstart[ra]), ra, rb, int(rec[ra]), fields)
    else:
        p = rstart.copy()
        _put_varints(out, p, bu, bsz)
        p += bsz
        out[p] = 0  # attributes
        p += 1
        _put_varints(out, p, tsu, tssz)
        p += tssz
        _put_varints(out, p, odu, odsz)
        p += odsz
        _put_varints(out, p, ku, ksz)
        p += ksz
        if keys is not None:
            _scatter(out, p, ko[:-1], kd, klen)
        p += klen
        _put_varints(out, p, vu, vsz)
        p += vsz
        if values is not None:
            _scatter(out, p, vo[:-1], vd, vlen)
        p += vlen
        _put_varints(out, p, hcu, hcsz)
        p += hcsz
        if headers is not None and len(hsz):
            rec_of_h = np.repeat(np.arange(n, dtype=np.int64), hcount)
            hpos = p[rec_of_h] + (hcum[:-1] - hcum[hstart_rec[:-1]][rec_of_h])
            kz = _zigzag(hklen)
            kzs = _vsize(kz)
            _put_varints(out, hpos, kz, kzs)
            hpos = hpos + kzs
            _scatter(out, hpos, hko, hkd, hklen)
            hpos += hklen
            vz = _zigzag(hvlen)
            vzs = _vsize(vz)
            _put_varints(out, hpos, vz, vzs)
            hpos += vzs
            _scatter(out, hpos, hvo, hvd, np.maximum(hvlen, 0))
        p += rec_hbytes

    # ---- batch headers
    raw = memoryview(out)
    bends = np.append(bstart[1:], n)
    batch_max_ts = np.maximum.reduceat(ts, bstart)
    attrs = make_attributes(compression, transactional=is_transactional)
    result: list[EncodedBatch] = []
    seq = base_sequence
    for b in range(nb):
        s, e = int(bstart[b]), int(bends[b])
        count = e - s
        h0 = int(rstart[s]) - BATCH_HEADER_SIZE
        r_end = int(rstart[e - 1] + rec[e - 1])
        max_ts = int(batch_max_ts[b])
        if compression:
            comp = compress(compression, raw[h0 + BATCH_HEADER_SIZE:r_end], compression_level)
            buf = bytearray(BATCH_HEADER_SIZE + len(comp))
            buf[BATCH_HEADER_SIZE:] = comp
            target, at, end = memoryview(buf), 0, len(buf)
        else:
            target, at, end = raw, h0, r_end
        write_header(
            target, at, end, base_offset=0, partition_leader_epoch=-1, attributes=attrs,
            last_offset_delta=count - 1, base_timestamp=int(ts[s]), max_timestamp=max_ts,
            producer_id=producer_id, producer_epoch=producer_epoch,
            base_sequence=seq if producer_id >= 0 else NO_SEQUENCE, record_count=count,
        )
        result.append(EncodedBatch(target[at:end], count, s, max_ts))
        if producer_id >= 0:
            seq = increment_sequence(seq, count)
    return result
