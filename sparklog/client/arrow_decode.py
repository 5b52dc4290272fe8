"""A Fetch response's records (of one partition, or of several decoded in one pass) -> the
rows a consumer may see, as Arrow.

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from sparklog.protocol.record_arrow import DecodedSections, Section, decode_sections_to_arrow

if TYPE_CHECKING:
    from sparklog.protocol.batch_header import BatchView

__all__ = ["DecodedFetch", "FetchedPart", "decode_fetched", "decode_fetched_parts"]


@dataclass(slots=True)
class DecodedFetch:
    batch: pa.RecordBatch  # record_arrow.arrow_schema() rows
    next_offset: int  # first offset not covered by the scanned batches


@dataclass(frozen=True, slots=True)
class FetchedPart:
    """One partition's ``records`` from a Fetch response and the offsets wanted from it;
    ``read_committed`` drops the ``aborted`` (producer id, first offset) transactions."""

    records: bytes | bytearray | memoryview | None
    start_offset: int
    end_offset: int | None = None
    read_committed: bool = False
    aborted: list[tuple[int, int]] | None = None


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
    dec, next_offsets = decode_fetched_parts(
        [FetchedPart(records, start_offset, end_offset, read_committed, aborted)],
        verify_crc=verify_crc)
    return DecodedFetch(dec.wanted(0), next_offsets[0])


def decode_fetched_parts(
    parts: Sequence[FetchedPart], *, verify_crc: bool = True
) -> tuple[DecodedSections, list[int]]:
    """``decode_fetched`` for several partitions of one Fetch response in ONE decoder pass
    (its set-up is paid once, not per partition): every part's rows, part after part
    (``DecodedSections``), and each part's next offset."""
    scans = [_BatchScan(p.start_offset, p.end_offset, p.aborted if p.read_committed else None)
             for p in parts]
    dec = decode_sections_to_arrow(
        [Section(b"" if p.records is None else p.records, keep_batch=scan,
                 min_offset=p.start_offset, end_offset=p.end_offset)
         for p, scan in zip(parts, scans, strict=True)],
        verify_crc=verify_crc, skip_control=False)
    next_offsets = [scan.next_offset if p.end_offset is None else
                    min(scan.next_offset, p.end_offset) for p, scan in zip(parts, scans, strict=True)]
    return dec, next_offsets


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
