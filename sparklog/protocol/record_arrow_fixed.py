"""The fixed-layout record decoder: equal-size runs read as columns, not parsed.

Part of ``record_arrow`` (step 3 of its plan, the fast half). Records of an equal-size run
(``record_arrow_starts``) almost always share one byte layout: the same varint widths and
the same key and value lengths. The layout of each run's first record is read, runs are
grouped by layout, each group's record heads are copied with one row gather, and every
field is read from a fixed column as one little-endian word: the lengths the layout fixes
are compared byte for byte with the group's first record, the two deltas are decoded with
their continuation bits checked. Rows that disagree stay marked irregular and go through
the general parser (``record_arrow_fields``).

Invariant: a row is taken only when every byte that determines its layout matches the
group's first record, whose layout was checked field by field (lengths >= -1, fields
ending at the record's end, no headers); so this path never decodes a record differently
from the general parser.
"""

from __future__ import annotations

import numpy as np

from .errors import MalformedFrameError
from .primitives import decode_varint
from .record_arrow_buffer import CONTINUATION_BITS, RecordsBuffer, fold_groups, unzigzag, varints
from .record_arrow_fields import Fields

__all__ = ["PY_LAYOUT_MAX_RUNS", "fixed_layout_rows"]

_FIXED_MIN_RUN = 8  # runs shorter than this go through the general field parser
PY_LAYOUT_MAX_RUNS = 48  # up to this many runs, detect their layouts in Python


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
    return unzigzag(v)


def _low_bytes(width: int) -> np.uint64:
    return np.uint64((1 << (8 * width)) - 1)


def _word_varint(word: np.ndarray, width: int, ok: np.ndarray) -> np.ndarray:
    """Varints of a known width (<= 8) at the low end of each little-endian word,
    zigzag-decoded; rows whose continuation bits disagree with ``width`` are cleared in
    ``ok`` (one compare for all of a row's continuation bits)."""
    m = word & _low_bytes(width)
    cont = CONTINUATION_BITS & _low_bytes(width)
    ok &= (m & cont) == (cont & _low_bytes(width - 1))
    return unzigzag(fold_groups(m, width))


def _column(heads: np.ndarray, at: int, width: int, n: int, dtype: str = "<u8") -> np.ndarray:
    """Column ``at`` of ``n`` record heads of ``width`` bytes each, read as one unaligned
    little-endian word per head (``heads`` has 8 spare bytes after the last head)."""
    return np.ndarray(shape=(n,), dtype=dtype, buffer=heads, offset=at, strides=(width,))


def _same_low_bytes(word: np.ndarray, width: int) -> np.ndarray:
    """Rows whose low ``width`` bytes equal row 0's (a field every record of a layout
    group encodes identically, e.g. the record length: equal bytes, equal varint)."""
    m = word & _low_bytes(width)
    return m == m[0]


def fixed_layout_rows(
    buf: RecordsBuffer, runs: tuple[np.ndarray, ...], f: Fields, key_head: np.ndarray,
    val_head: np.ndarray, irregular: np.ndarray,
) -> None:
    """Decode the records of equal-size runs whose layout matches their run's first record
    with column reads on one gathered head matrix per layout (no per-field gathers)."""
    rec0, p0, size, count = runs
    sel = np.flatnonzero(count >= _FIXED_MIN_RUN)
    if not sel.size:
        return
    if sel.size <= PY_LAYOUT_MAX_RUNS:  # few runs: Python beats ~90 numpy calls
        grouped: dict[tuple[int, ...], list[int]] = {}
        for i in sel.tolist():
            layout = _record_layout(buf.raw, int(p0[i]), int(size[i]))
            if layout is not None:
                grouped.setdefault(layout, []).append(i)
        _decode_layout_groups(buf, grouped, runs, f, key_head, val_head, irregular)
        return
    # layout of every run's first record, vectorised over the runs
    heads = p0[sel]
    ln, a, bad = varints(buf, heads, 5)
    q = heads + a + 1
    _v, t, b = varints(buf, q, 10)
    bad |= b
    q += t
    _v, o, b = varints(buf, q, 5)
    bad |= b
    q += o
    kv, kl, b = varints(buf, q, 5)
    bad |= b
    q += kl + np.maximum(kv, 0)
    vv, vl, b = varints(buf, q, 5)
    bad |= b
    q += vl + np.maximum(vv, 0)
    hv, h, b = varints(buf, q, 5)
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
    buf: RecordsBuffer, grouped: dict[tuple[int, ...], list[int]], runs: tuple[np.ndarray, ...],
    f: Fields, key_head: np.ndarray, val_head: np.ndarray, irregular: np.ndarray,
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
