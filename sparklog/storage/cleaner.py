"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

One pass over a log:

1. Under the log lock, pick the *cleanable* range: sealed segments from the log start whose
   next segment starts at or below the last stable offset (never the active segment, never
   data a consumer could not read yet, never an open transaction) and whose newest
   timestamp is older than ``min.compaction.lag.ms``.
2. Without the lock (sealed segments are immutable), map every key to its last offset in that
   range. Records of aborted transactions (the range's ``.txnindex`` entries) count for
   nothing and are dropped in step 3, as Kafka does; transaction markers are kept, and so
   are the ``.txnindex`` entries (carried into the output segment).
3. Rewrite the range in groups of segments that fit ``segment.bytes``: a batch whose records
   all survive is copied byte for byte; otherwise its surviving records are re-encoded with
   their original offsets, producer fields and the original offset span (so idempotent
   producers' sequence ranges stay intact). A batch left empty is dropped, unless it is its
   producer's last batch (kept empty, as Kafka does, so producer state survives).
   Tombstones (null value) get a delete horizon of now + ``delete.retention.ms`` stored in the
   batch (KIP-534) the first time they are cleaned, and are dropped by a later pass after it.
4. Swap crash-safely. The output is written as ``<base>.log.cleaned`` (+ indexes) and fsynced,
   renamed to ``.swap``, the replaced segments are renamed ``.deleted`` (deleted after
   ``file.delete.delay.ms``; open readers keep their descriptors) and the ``.swap`` becomes the
   live ``.log``. On open, ``log_loader`` deletes ``.cleaned`` leftovers and completes a swap
   whose ``.log.swap`` exists (see ``LogLoader._complete_swap``).

Offsets never change; the log start offset is untouched; the active segment is never read.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from sparklog.protocol.batch_header import BatchView
from sparklog.protocol.records import Record, decode_batch, encode_batch

from .partition_log import PartitionLog
from .segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, TXN_INDEX_SUFFIX, LogSegment
from .txn_index import AbortedTxn

__all__ = ["clean_log", "CleanResult", "cleanable_range"]

log = logging.getLogger(__name__)


class SimulatedCrash(Exception):
    """Raised by the ``crash_at`` test hook to stop a pass at a chosen step."""


@dataclass(frozen=True, slots=True)
class CleanResult:
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    end_offset: int  # first offset not cleaned (the new cleaner checkpoint)


def cleanable_range(plog: PartitionLog, now_ms: int) -> list[LogSegment]:
    """Sealed segments eligible for this pass (oldest first). Call with the log lock held."""
    segs = plog._segments
    cfg = plog.config
    out: list[LogSegment] = []
    for i in range(len(segs) - 1):
        seg, nxt = segs[i], segs[i + 1]
        if nxt.base_offset > plog.last_stable_offset or seg.corrupt_position is not None:
            break
        if cfg.min_compaction_lag_ms > 0 and seg.max_timestamp >= 0 and \
                now_ms - seg.max_timestamp < cfg.min_compaction_lag_ms:
            break
        out.append(seg)
    return out


def _dirty_ratio(segs: list[LogSegment], first_dirty: int) -> float:
    total = sum(s.size for s in segs)
    if total == 0:
        return 0.0
    dirty = sum(s.size for i, s in enumerate(segs)
                if (segs[i + 1].base_offset if i + 1 < len(segs) else 2**63) > first_dirty)
    return dirty / total


def _iter_batches(seg: LogSegment):
    for b in seg.iter_headers(0):
        yield b, seg.read_batch_bytes(b.position, b.size)


def clean_log(plog: PartitionLog, now_ms: int | None = None, *, force: bool = False,
              crash_at: str | None = None) -> CleanResult | None:
    """Run one compaction pass; None when there was nothing (dirty enough) to clean.

    ``crash_at`` ("cleaned", "swap", "deleted") stops the pass with SimulatedCrash right after
    that step, leaving the files as a crash would (tests of the recovery path)."""
    now = plog._time_ms() if now_ms is None else now_ms
    cfg = plog.config
    if not cfg.compact:
        return None
    with plog.lock():
        if plog.closed or plog.cleaning:
            return None
        segs = cleanable_range(plog, now)
        if not segs:
            return None
        first_dirty = getattr(plog, "cleaner_checkpoint", 0)
        if not force and _dirty_ratio(segs, first_dirty) < cfg.min_cleanable_dirty_ratio:
            return None
        end_offset = plog._segments[len(segs)].base_offset
        producer_last = {pid: e.last_offset for pid, e in plog.producer_state.producers.items()}
        plog.cleaning = True
    try:
        return _clean(plog, segs, end_offset, producer_last, now, crash_at)
    finally:
        plog.cleaning = False


def _clean(plog: PartitionLog, segs: list[LogSegment], end_offset: int,
           producer_last: dict[int, int], now: int, crash_at: str | None) -> CleanResult | None:
    cfg = plog.config
    # 1. key -> last offset over the cleanable range
    aborted = _AbortedRanges([e for seg in segs for e in seg.txn_index.entries])
    offset_map: dict[bytes, int] = {}
    for seg in segs:
        for _b, raw in _iter_batches(seg):
            view = BatchView(raw)
            if view.is_control or aborted.holds(view):
                continue
            for r in decode_batch(raw, verify_crc=False).records:
                if r.key is not None:
                    offset_map[bytes(r.key)] = r.offset
    # 2. group segments so each output fits one segment
    groups: list[list[LogSegment]] = []
    cur: list[LogSegment] = []
    cur_size = 0
    for seg in segs:
        if cur and (cur_size + seg.size > cfg.segment_bytes
                    or seg.next_offset - cur[0].base_offset > 0x7FFFFFFF):
            groups.append(cur)
            cur, cur_size = [], 0
        cur.append(seg)
        cur_size += seg.size
    if cur:
        groups.append(cur)

    removed = 0
    bytes_before = sum(s.size for s in segs)
    bytes_after = 0
    for group in groups:
        cleaned, n_removed = _write_cleaned(plog, group, offset_map, producer_last, now,
                                            aborted)
        removed += n_removed
        bytes_after += cleaned.size
        if crash_at == "cleaned":
            raise SimulatedCrash("after writing .cleaned")
        with plog.lock():
            if plog.closed or any(s not in plog._segments for s in group):
                log.info("log changed during cleaning of %s; abandoning", plog)
                cleaned.delete_files()
                return None
            _swap(plog, group, cleaned, crash_at)
    with plog.lock():
        plog.cleaner_checkpoint = end_offset
        after = len(plog._segments)
    log.info("cleaned %s-%d up to %d: %d -> %d bytes, %d records removed", plog.topic,
             plog.partition, end_offset, bytes_before, bytes_after, removed)
    return CleanResult(len(segs), after, bytes_before, bytes_after, removed, end_offset)


class _AbortedRanges:
    """Which transactional batches belong to an aborted transaction: per producer, the
    [first offset, marker offset] spans of its aborted transactions."""

    def __init__(self, entries: list[AbortedTxn]) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for e in entries:
            self._by_producer.setdefault(e.producer_id, []).append((e.first_offset,
                                                                    e.last_offset))

    def holds(self, view: BatchView) -> bool:
        if not self._by_producer or not view.is_transactional:
            return False
        spans = self._by_producer.get(view.producer_id, ())
        return any(first <= view.base_offset < last for first, last in spans)


def _write_cleaned(plog: PartitionLog, group: list[LogSegment], offset_map: dict[bytes, int],
                   producer_last: dict[int, int], now: int,
                   aborted: _AbortedRanges) -> tuple[LogSegment, int]:
    cfg = plog.config
    base = group[0].base_offset
    stale = os.path.join(plog.directory, f"{base:020d}.log{CLEANED_SUFFIX}")
    if os.path.exists(stale):
        os.remove(stale)
    out = LogSegment(plog.directory, base, index_interval_bytes=cfg.index_interval_bytes,
                     max_index_entries=cfg.max_index_entries, suffix=CLEANED_SUFFIX,
                     created_ms=now)
    out.offset_index.reset()
    out.time_index.reset()
    out.txn_index.truncate_to(-1)
    removed = 0
    group_end = group[-1].next_offset
    for seg in group:
        for e in seg.txn_index.entries:
            out.txn_index.append(e)
        for _b, raw in _iter_batches(seg):
            view = BatchView(raw)
            if view.is_control:
                _append(out, raw)
                continue
            batch = decode_batch(raw, verify_crc=False)
            # an aborted transaction's records: none survives (the emptied batch may stay
            # below, for producer state or the group's offset range)
            was_aborted = aborted.holds(view)
            horizon = batch.delete_horizon_ms
            drop_tombstones = batch.has_delete_horizon and now >= horizon
            keep: list[Record] = []
            has_tombstone = False
            for r in batch.records:
                if was_aborted or r.key is None or offset_map.get(bytes(r.key), -1) > r.offset:
                    continue
                if r.value is None:
                    if drop_tombstones:
                        continue
                    has_tombstone = True
                keep.append(r)
            removed += len(batch.records) - len(keep)
            set_horizon = has_tombstone and not batch.has_delete_horizon
            if len(keep) == len(batch.records) and not set_horizon:
                _append(out, raw)
                continue
            last_of_producer = batch.producer_id >= 0 and \
                producer_last.get(batch.producer_id) == batch.last_offset
            # the group's last batch stays (maybe empty) so a half-done swap's offset range
            # covers every segment it replaces
            last_of_group = batch.last_offset == group_end - 1
            if not keep and not (last_of_producer or last_of_group):
                continue
            new_horizon = (now + cfg.delete_retention_ms) if set_horizon else (
                horizon if batch.has_delete_horizon and keep else None)
            if new_horizon is not None and not any(r.value is None for r in keep):
                new_horizon = None
            recs = [Record(r.key, r.value, r.headers, r.timestamp, offset_delta=r.offset - batch.base_offset)
                    for r in keep]
            data = encode_batch(
                recs, base_offset=batch.base_offset, compression=batch.compression,
                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence, is_transactional=batch.is_transactional,
                partition_leader_epoch=batch.partition_leader_epoch,
                timestamp_type=batch.timestamp_type,
                log_append_time=batch.max_timestamp if batch.timestamp_type == 1 else None,
                delete_horizon_ms=new_horizon, last_offset_delta=batch.last_offset_delta,
                now_ms=now)
            _append(out, data)
    out.on_become_inactive()
    out.flush(fsync=True)
    return out, removed


def _append(out: LogSegment, raw: bytes) -> None:
    v = BatchView(raw)
    out.append([raw], len(raw), [(v.base_offset, v.last_offset, v.size, v.max_timestamp)])


def _swap(plog: PartitionLog, group: list[LogSegment], cleaned: LogSegment,
          crash_at: str | None) -> None:
    """.cleaned -> .swap, replaced segments -> .deleted, .swap -> live (log lock held)."""
    idx = plog._segments.index(group[0])
    # indexes first, the .log last: a .log.swap only exists once the whole swap set does
    prefix = os.path.join(plog.directory, f"{cleaned.base_offset:020d}")
    cleaned.offset_index.rename(prefix + ".index" + SWAP_SUFFIX)
    cleaned.time_index.rename(prefix + ".timeindex" + SWAP_SUFFIX)
    cleaned.txn_index.rename(prefix + TXN_INDEX_SUFFIX + SWAP_SUFFIX)
    os.replace(cleaned.log_path, prefix + ".log" + SWAP_SUFFIX)
    cleaned.log_path = prefix + ".log" + SWAP_SUFFIX
    cleaned.suffix = SWAP_SUFFIX
    if crash_at == "swap":
        raise SimulatedCrash("after renaming to .swap")
    deadline = plog._time_ms() + plog.config.file_delete_delay_ms
    for i, seg in enumerate(group):
        seg.rename_suffix(DELETED_SUFFIX)
        plog._pending_deletes.add(seg, deadline)
        if crash_at == "deleted" and i == 0 and len(group) > 1:
            raise SimulatedCrash("while renaming replaced segments")
    cleaned.rename_suffix("")
    plog._segments[idx : idx + len(group)] = [cleaned]
    if plog.config.file_delete_delay_ms == 0:
        plog.delete_pending_files(force=True)
