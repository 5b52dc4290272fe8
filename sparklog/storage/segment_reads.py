"""Read-only queries over a log's local segment list (Kafka's ``LocalLog`` reads): fetch reads
across segments, the aborted transactions a ``read_committed`` fetch reports, and ListOffsets by
timestamp (``UnifiedLog.fetchOffsetByTimestamp``).

Kept apart from ``partition_log`` because none of them changes the log: the ``PartitionLog``
checks the offsets, holds its lock and hands over its segment list (oldest first, the last one
active); the remote tier's reads stay with the log (they run outside the lock).

Invariants: a read returns whole batches in offset order, never past ``limit_offset`` and never
from a range found corrupt; a timestamp answer's offset lies in [log start, LEO] (the
LATEST_TIERED answer excepted: the tier's last offset), its epoch from the leader-epoch cache.
"""

from __future__ import annotations

from bisect import bisect_right

from .backend import FileSlice
from .errors import SegmentCorruptError
from .leader_epoch import LeaderEpochCache
from .log_info import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_TIMESTAMP_FOUND,
    FetchDataInfo,
    TimestampAndOffset,
)
from .segment import BY_BASE_OFFSET, LogSegment
from .txn_index import AbortedTxn

__all__ = ["aborted_transactions", "local_offset_for_timestamp", "read_segments"]


def read_segments(segments: list[LogSegment], info: FetchDataInfo, max_bytes: int,
                  limit_offset: int, min_one_message: bool, name: str) -> FetchDataInfo:
    """Fill ``info`` (empty, at its ``first_offset``) with whole batches from the segment
    holding that offset on: at most ``max_bytes`` (except the first batch when
    ``min_one_message``), none at or after ``limit_offset``. ``name``: the partition, for
    the SegmentCorruptError a corrupt range raises."""
    remaining = max_bytes
    offset = info.first_offset
    i = max(0, bisect_right(segments, offset, key=BY_BASE_OFFSET) - 1)
    while i < len(segments) and offset < limit_offset:
        seg = segments[i]
        i += 1
        if seg.corrupt_offset is not None and offset >= seg.corrupt_offset and (
                i >= len(segments) or offset < segments[i].base_offset):
            raise SegmentCorruptError(
                f"offset {offset} of {name} lies in a corrupt range of {seg.log_path}")
        got = seg.read(offset, remaining, limit_offset, min_one_message and not info.slices)
        if got is None:
            continue
        if got.size == 0:
            break
        info.slices.append(FileSlice(seg.log_path, got.position, got.size, seg.fd))
        info.size += got.size
        remaining -= got.size
        offset = info.next_offset = got.next_offset
        if remaining <= 0 or not got.to_end or seg.corrupt_position is not None:
            break
    return info


def aborted_transactions(segments: list[LogSegment], fetch_offset: int, upper_bound: int,
                         tiered: list[AbortedTxn] | None = None) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_bound) (Kafka's
    ``collectAbortedTransactions``), from the segment holding ``fetch_offset`` on, after
    ``tiered`` (what the bucket's segments below these listed; an entry both list, of a
    segment still local once uploaded, counts once)."""
    i = max(0, bisect_right(segments, fetch_offset, key=BY_BASE_OFFSET) - 1)
    out: list[AbortedTxn] = list(tiered or ())
    seen = {t.last_offset for t in out}
    for seg in segments[i:]:
        if not seg.txn_index.entries:
            continue
        found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
        out += [t for t in found if t.last_offset not in seen]
        if complete:
            break
    return out


def local_offset_for_timestamp(segments: list[LogSegment], timestamp: int, *,
                               log_start_offset: int, log_end_offset: int,
                               epochs: LeaderEpochCache,
                               tiered_end_offset: int | None) -> TimestampAndOffset | None:
    """The earliest offset whose record timestamp >= ``timestamp`` in ``segments``, or the
    special values' answer (-1 latest, -2 earliest, -3 max timestamp, -4 earliest local,
    -5 latest tiered: ``tiered_end_offset`` - 1). None when no record qualifies."""
    def at(ts: int, offset: int) -> TimestampAndOffset:
        return TimestampAndOffset(ts, offset, epochs.epoch_for_offset(offset))

    def record_at_or_after(seg: LogSegment, pos: int, ts: int,
                           exact: bool = False) -> TimestampAndOffset | None:
        found = seg.find_record(pos, ts, log_start_offset, exact)
        return None if found is None else at(*found)

    if timestamp == EARLIEST_TIMESTAMP:
        return at(NO_TIMESTAMP_FOUND, log_start_offset)
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        local_start = segments[0].base_offset if segments else log_end_offset
        return at(NO_TIMESTAMP_FOUND, max(log_start_offset, local_start))
    if timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP_FOUND, log_end_offset, epochs.latest_epoch)
    if timestamp == LATEST_TIERED_TIMESTAMP:
        # KIP-1005: the highest uploaded offset; none while nothing is tiered
        return None if tiered_end_offset is None else at(NO_TIMESTAMP_FOUND,
                                                         tiered_end_offset - 1)
    if timestamp == MAX_TIMESTAMP:
        best = None
        for seg in segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        b = best.find_batch(best.offset_of_max_timestamp)
        if b is None:
            return None
        return record_at_or_after(best, b.position, best.max_timestamp, exact=True)
    if timestamp < 0:
        return None
    for seg in segments:
        if seg.max_timestamp < timestamp or seg.next_offset <= log_start_offset:
            continue
        _ts, toff = seg.time_index.lookup(timestamp)
        _o, pos = seg.offset_index.lookup(max(toff, log_start_offset))
        found = record_at_or_after(seg, pos, timestamp)
        if found is not None:
            return found
    return None
