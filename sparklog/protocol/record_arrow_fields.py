"""The general vectorised record parser: every field of every record, any layout.

Part of ``record_arrow`` (step 3 of its plan, for the records ``record_arrow_fixed`` did not
take: walked records, records with headers, odd layouts). Each field is one ``varints``
call over all records; key, value and header slices become (position, length) pairs into
the records buffer, nothing is copied. Headers are decoded slot by slot (all records' first
header, then their second, ...) up to ``_MAX_VECTOR_HEADERS``; records with more finish in
Python.

Invariant: every record's fields end exactly where the record's length says (the next
record's start), every length is >= -1 and inside its record; anything else raises
CorruptRecordError before a row is built.
"""

from __future__ import annotations

import numpy as np

from .errors import CorruptRecordError, MalformedFrameError
from .primitives import decode_varint
from .record_arrow_buffer import RecordsBuffer, varints

__all__ = ["Fields", "parse_fields"]

_MAX_VECTOR_HEADERS = 32  # header slots decoded vectorised; deeper ones in Python


class Fields:
    """Per record: the two deltas, key and value as (position, length) in the records
    buffer (length -1: null) and the header count; per header (records' headers
    concatenated in order): key and value as (position, length)."""

    __slots__ = (
        "ts_delta", "off_delta", "key_pos", "key_len", "val_pos", "val_len",
        "hcount", "hk_pos", "hk_len", "hv_pos", "hv_len",
    )

    @classmethod
    def empty(cls, n: int) -> Fields:
        """Room for ``n`` records (header count 0) and no headers."""
        f = cls()
        f.ts_delta, f.off_delta = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        f.key_pos, f.key_len = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        f.val_pos, f.val_len = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        f.hcount = np.zeros(n, dtype=np.int64)
        f.hk_pos = f.hk_len = f.hv_pos = f.hv_len = np.empty(0, dtype=np.int64)
        return f

    def put(self, rows: np.ndarray, other: Fields) -> None:
        """Take the records ``other`` parsed for ``rows``, and all its headers (``rows``
        are the only records that may have any)."""
        self.ts_delta[rows], self.off_delta[rows] = other.ts_delta, other.off_delta
        self.key_pos[rows], self.key_len[rows] = other.key_pos, other.key_len
        self.val_pos[rows], self.val_len[rows] = other.val_pos, other.val_len
        self.hcount[rows] = other.hcount
        self.hk_pos, self.hk_len = other.hk_pos, other.hk_len
        self.hv_pos, self.hv_len = other.hv_pos, other.hv_len


def parse_fields(buf: RecordsBuffer, starts: np.ndarray, next_start: np.ndarray) -> Fields:
    """Vectorised parse of all records whose starts are given; ``next_start`` is where each
    record must end (the next record's start, or its batch's end)."""
    length, sz, bad = varints(buf, starts, 5)
    p = starts + sz
    rec_end = p + length
    if bad.any() or not np.array_equal(rec_end, next_start):
        raise CorruptRecordError("record lengths do not tile the records section")
    p += 1  # attributes
    f = Fields()
    f.ts_delta, sz, b = varints(buf, p, 10)
    bad |= b
    p += sz
    f.off_delta, sz, b = varints(buf, p, 5)
    bad |= b
    p += sz
    f.key_len, sz, b = varints(buf, p, 5)
    p += sz
    bad |= b | (f.key_len < -1) | (f.key_len > rec_end - p)
    f.key_pos = p
    p = p + np.maximum(f.key_len, 0)
    f.val_len, sz, b = varints(buf, p, 5)
    p += sz
    bad |= b | (f.val_len < -1) | (f.val_len > rec_end - p)
    f.val_pos = p
    p = p + np.maximum(f.val_len, 0)
    f.hcount, sz, b = varints(buf, p, 5)
    p += sz
    bad |= b | (f.hcount < 0) | (f.hcount > (rec_end - p) // 2)
    if bad.any():
        raise CorruptRecordError(f"malformed record fields in {int(bad.sum())} record(s)")
    _parse_headers(buf, f, p, rec_end)
    return f


def _parse_headers(buf: RecordsBuffer, f: Fields, p: np.ndarray, rec_end: np.ndarray) -> None:
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
        kl, sz, bad = varints(buf, q, 5)
        q = q + sz
        bad |= (kl < 0) | (kl > end - q)
        slot = first[active] + h
        hk_pos[slot] = q
        hk_len[slot] = kl
        q = q + np.maximum(kl, 0)
        vl, sz, b = varints(buf, q, 5)
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
