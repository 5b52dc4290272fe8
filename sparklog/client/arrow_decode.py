"""A Fetch response's records for one partition -> the rows a consumer may see, as Arrow.

The per-record work is ``sparklog.protocol.record_arrow`` (vectorised decode, no Python
object per record); this module adds what a consumer needs around it, in the same single
pass over the batch headers: the offset range, control batches and aborted transactions
(read_committed) dropped, and how far the fetched batches reached (``next_offset``), so a
caller can move past ranges that hold only markers or aborted data.

The rows keep the decoder's layout (``record_arrow.arrow_schema()``: key, value, offset,
timestamp as int64 ms, timestampType, headers); the per-record consumer reads them as they
are and ``arrow_fetch`` turns them into the Spark layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from sparklog.protocol.record_arrow import decode_batches_to_arrow

if TYPE_CHECKING:
    from sparklog.protocol.batch_header import BatchView

__all__ = ["DecodedFetch", "decode_fetched"]

_OFFSET = 2  # the offset column of record_arrow.arrow_schema()


@dataclass(slots=True)
class DecodedFetch:
    batch: pa.RecordBatch  # record_arrow.arrow_schema() rows
    next_offset: int  # first offset not covered by the scanned batches


def decode_fetched(
    records: bytes | bytearray | memoryview | None,
    *,
    start_offset: int,
    end_offset: int | None = None,
    read_committed: bool = False,
    aborted: list[tuple[int, int]] | None = None,
    verify_crc: bool = True,
) -> DecodedFetch:
    """Decode a Fetch response's ``records`` for one partition into the rows with
    start_offset <= offset < end_offset; control batches and (read_committed) aborted
    transactions are dropped, batches from ``end_offset`` on are not decoded. A partial
    last batch is ignored."""
    scan = _BatchScan(start_offset, end_offset, aborted if read_committed else None)
    batch = decode_batches_to_arrow(records if records is not None else b"",
                                    verify_crc=verify_crc, allow_partial_tail=True,
                                    skip_control=False, keep_batch=scan, min_offset=start_offset)
    if end_offset is not None and batch.num_rows:
        offsets = batch.column(_OFFSET).to_numpy()
        cut = int(np.searchsorted(offsets, end_offset, side="left"))
        if cut < batch.num_rows:
            batch = batch.slice(0, cut)
    next_offset = scan.next_offset
    if end_offset is not None and next_offset > end_offset:
        next_offset = end_offset
    return DecodedFetch(batch, next_offset)


class _BatchScan:
    """The decoder's ``keep_batch``: sees every complete batch header once, in order.

    Keeps track of how far the batches before ``end_offset`` reach, and keeps the data
    batches a consumer may see. read_committed (``aborted`` given) also drops the batches
    of aborted transactions: the Fetch response lists (producer id, first offset) of every
    aborted transaction in range, and a producer's transaction is aborted from that offset
    up to its ABORT marker (Kafka's consumer logic)."""

    __slots__ = ("end", "next_offset", "read_committed", "pending", "active")

    def __init__(self, start: int, end: int | None,
                 aborted: list[tuple[int, int]] | None) -> None:
        self.end = end
        self.next_offset = start
        self.read_committed = aborted is not None
        self.pending = sorted(aborted or [], key=lambda a: a[1])
        self.active: set[int] = set()

    def __call__(self, view: BatchView) -> bool:
        if self.end is not None and view.base_offset >= self.end:
            return False
        last = view.last_offset
        if last >= self.next_offset:
            self.next_offset = last + 1
        if not self.read_committed:
            return not view.is_control
        while self.pending and self.pending[0][1] <= last:
            self.active.add(self.pending.pop(0)[0])
        if view.is_control:
            self.active.discard(view.producer_id)
            return False
        return not (view.is_transactional and view.producer_id in self.active)
