"""Fetch responses -> the client's Arrow rows: the columns of Spark's Kafka source.

The per-record work is ``sparklog.protocol.record_arrow`` (vectorised decode, no Python
object per record); this module adds what a consumer needs around it: the offset range,
control batches and aborted transactions (read_committed) dropped, the ``timestamp[ms]``
type, and how far the fetched batches reached (``next_offset``), so a caller can move past
ranges that hold only markers or aborted data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

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



@dataclass(slots=True)
class DecodedFetch:
    batch: pa.RecordBatch
    next_offset: int  # first offset not covered by the scanned batches


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
    transactions are dropped. A partial last batch is ignored. The decoding itself is
    ``sparklog.protocol.record_arrow`` (vectorised, no Python object per record)."""
    from sparklog.protocol.record_arrow import decode_batches_to_arrow

    raw = records if records is not None else b""
    next_offset = start_offset
    for _base, nxt, _size in batch_sizes(raw):
        if end_offset is not None and _base >= end_offset:
            break
        next_offset = max(next_offset, nxt)
    if end_offset is not None and next_offset > end_offset:
        next_offset = end_offset
    keep = _AbortFilter(aborted) if read_committed else _drop_control
    batch = decode_batches_to_arrow(raw, verify_crc=verify_crc, allow_partial_tail=True,
                                    skip_control=False, keep_batch=keep,
                                    min_offset=start_offset, topic=topic, partition=partition)
    if end_offset is not None and batch.num_rows:
        offs = batch.column(4).to_numpy()
        cut = int(np.searchsorted(offs, end_offset, side="left"))
        if cut < batch.num_rows:
            batch = batch.slice(0, cut)
    cols = list(batch.columns)
    cols[5] = cols[5].cast(pa.timestamp("ms"))
    schema = FETCH_SCHEMA
    if not include_headers:
        cols = cols[:7]
        schema = FETCH_SCHEMA_NO_HEADERS
    return DecodedFetch(pa.RecordBatch.from_arrays(cols, schema=schema), next_offset)


def _drop_control(view: Any) -> bool:
    return not view.is_control


class _AbortFilter:
    """read_committed: drop the batches of aborted transactions. The Fetch response lists
    (producer id, first offset) of every aborted transaction in range; a producer's
    transaction is aborted from that offset up to its ABORT marker (Kafka's consumer logic)."""

    def __init__(self, aborted: list[tuple[int, int]] | None) -> None:
        self.pending = sorted(aborted or [], key=lambda a: a[1])
        self.active: set[int] = set()

    def __call__(self, view: Any) -> bool:
        last = view.last_offset
        while self.pending and self.pending[0][1] <= last:
            self.active.add(self.pending.pop(0)[0])
        if view.is_control:
            self.active.discard(view.producer_id)
            return False
        return not (view.is_transactional and view.producer_id in self.active)
