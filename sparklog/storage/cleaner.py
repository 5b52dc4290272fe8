"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

One pass over a log:

1. Under the log lock, pick the *cleanable* range: sealed segments from the log start whose
   next segment starts at or below the last stable offset (never the active segment, never
   data a consumer could not read yet, never an open transaction) and whose newest
   timestamp is older than ``min.compaction.lag.ms``.
2. Without the lock (sealed segments are immutable), map every key to its last offset in that
   range. Records of aborted transactions (the ``.txnindex`` entries overlapping the range,
   whose markers may lie past it) count for nothing and are dropped in step 3, as Kafka does.
3. Rewrite the range in groups of segments that fit ``segment.bytes``: a batch whose records
   all survive is copied byte for byte; otherwise its surviving records are re-encoded with
   their original offsets, producer fields and the original offset span (so idempotent
   producers' sequence ranges stay intact). A batch left empty is dropped, unless it is its
   producer's last batch (kept empty, as Kafka does, so producer state survives).
   Tombstones (null value) get a delete horizon of now + ``delete.retention.ms`` stored in the
   batch (KIP-534) the first time they are cleaned, and are dropped by a later pass after it.
   Transaction markers follow ``cleaned_txns``: kept while a batch of their transaction is
   left, then given a delete horizon the same way and dropped after it (a marker that is
   its producer's last entry stays, for the epoch). The output ``.txnindex`` holds the
   entries of the ABORT markers kept; when a marker goes, older producer snapshots go too
   (one could name its transaction open, and nothing after it would close it).
   A pass is due when the range is dirty enough, or when a delete horizon written by an
   earlier pass has passed (``PartitionLog.cleaner_next_horizon_ms``, in memory).
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
from sparklog.protocol.control_records import parse_control_record_key
from sparklog.protocol.records import Record, RecordBatch, decode_batch, encode_batch

from .cleaned_txns import CleanedTxns
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


def _dirty_ratio(segs: list[LogSegment], end_offset: int, first_dirty: int) -> float:
    """The share of the range's bytes in segments holding offsets at or past
    ``first_dirty`` (``end_offset``: where the range ends)."""
    total = sum(s.size for s in segs)
    if total == 0:
        return 0.0
    ends = [s.base_offset for s in segs[1:]] + [end_offset]
    dirty = sum(s.size for s, end in zip(segs, ends, strict=True) if end > first_dirty)
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
        end_offset = plog._segments[len(segs)].base_offset
        horizon = plog.cleaner_next_horizon_ms
        if not (force or (horizon is not None and now >= horizon)
                or _dirty_ratio(segs, end_offset, plog.cleaner_checkpoint)
                >= cfg.min_cleanable_dirty_ratio):
            return None
        aborted = plog.aborted_transactions(segs[0].base_offset, end_offset)
        producer_last = {pid: (e.last_offset, e.producer_epoch)
                         for pid, e in plog.producer_state.producers.items()}
        plog.cleaning = True
    try:
        return _clean(plog, segs, end_offset, aborted, producer_last, now, crash_at)
    finally:
        plog.cleaning = False


def _control_type(raw: bytes) -> int:
    """The record type of a control batch (-1 for one left empty)."""
    records = decode_batch(raw, verify_crc=False).records
    return parse_control_record_key(records[0].key)[1] if records else -1


def _clean(plog: PartitionLog, segs: list[LogSegment], end_offset: int,
           aborted: list[AbortedTxn], producer_last: dict[int, tuple[int, int]], now: int,
           crash_at: str | None) -> CleanResult | None:
    cfg = plog.config
    # 1. key -> last offset over the cleanable range
    txns = CleanedTxns(aborted)
    offset_map: dict[bytes, int] = {}
    for seg in segs:
        for _b, raw in _iter_batches(seg):
            view = BatchView(raw)
            if view.is_control:
                txns.on_marker(view, _control_type(raw))
                continue
            if txns.on_data_batch(view):
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
    txns = CleanedTxns(aborted)
    horizons: list[int] = []
    for group in groups:
        w = _GroupWriter(plog, group, offset_map, producer_last, now, txns, horizons)
        cleaned = w.write()
        removed += w.removed
        bytes_after += cleaned.size
        if crash_at == "cleaned":
            raise SimulatedCrash("after writing .cleaned")
        with plog.lock():
            if plog.closed or any(s not in plog._segments for s in group):
                log.info("log changed during cleaning of %s; abandoning", plog)
                cleaned.delete_files()
                return None
            if w.last_marker_removed >= 0:  # before the swap: a crash then finds none
                plog.producer_state.delete_snapshots_through(w.last_marker_removed)
            _swap(plog, group, cleaned, crash_at)
    with plog.lock():
        plog.cleaner_checkpoint = end_offset
        plog.cleaner_next_horizon_ms = min(horizons, default=None)
        after = len(plog._segments)
    log.info("cleaned %s-%d up to %d: %d -> %d bytes, %d records removed", plog.topic,
             plog.partition, end_offset, bytes_before, bytes_after, removed)
    return CleanResult(len(segs), after, bytes_before, bytes_after, removed, end_offset)


class _GroupWriter:
    """Writes the ``.cleaned`` segment replacing one group (step 3): what it removed, the
    offset of the last marker it removed, and (into ``horizons``) the delete horizons still
    ahead of ``now`` in what it wrote."""

    def __init__(self, plog: PartitionLog, group: list[LogSegment],
                 offset_map: dict[bytes, int], producer_last: dict[int, tuple[int, int]],
                 now: int, txns: CleanedTxns, horizons: list[int]) -> None:
        self.plog, self.group, self.offset_map = plog, group, offset_map
        self.producer_last, self.now, self.txns, self.horizons = producer_last, now, txns, horizons
        self.removed = 0
        self.last_marker_removed = -1
        # the group's last batch stays (maybe empty) so a half-done swap's offset range
        # covers every segment it replaces
        self.group_last = group[-1].next_offset - 1
        cfg = plog.config
        base = group[0].base_offset
        stale = os.path.join(plog.directory, f"{base:020d}.log{CLEANED_SUFFIX}")
        if os.path.exists(stale):
            os.remove(stale)
        self.out = LogSegment(plog.directory, base, index_interval_bytes=cfg.index_interval_bytes,
                              max_index_entries=cfg.max_index_entries, suffix=CLEANED_SUFFIX,
                              created_ms=now)
        self.out.offset_index.reset()
        self.out.time_index.reset()
        self.out.txn_index.truncate_to(-1)

    def write(self) -> LogSegment:
        for seg in self.group:
            for _b, raw in _iter_batches(seg):
                view = BatchView(raw)
                if view.is_control:
                    self._marker(view, raw)
                else:
                    self._data(view, raw)
        self.out.on_become_inactive()
        self.out.flush(fsync=True)
        return self.out

    def _append(self, raw: bytes) -> None:
        v = BatchView(raw)
        if v.has_delete_horizon and v.delete_horizon_ms > self.now:
            self.horizons.append(v.delete_horizon_ms)
        self.out.append([raw], len(raw), [(v.base_offset, v.last_offset, v.size, v.max_timestamp)])

    def _marker(self, view: BatchView, raw: bytes) -> None:
        discardable, entry = self.txns.on_marker(view, _control_type(raw))
        if entry is not None:
            self.out.txn_index.append(entry)
        last_data, epoch = self.producer_last.get(view.producer_id, (0, -1))
        # a producer whose last entry is a marker keeps it: it carries the current epoch
        keep = (last_data < 0 and view.producer_epoch == epoch) or view.last_offset == self.group_last
        if not discardable:
            self._append(raw)
        elif not view.has_delete_horizon:
            batch = decode_batch(raw, verify_crc=False)
            self._append(_reencode(batch, batch.records, self.now + self.plog.config.delete_retention_ms,
                                   self.now))
        elif keep or self.now < view.delete_horizon_ms:
            self._append(raw)
        else:
            self.removed += view.record_count
            self.last_marker_removed = view.last_offset

    def _data(self, view: BatchView, raw: bytes) -> None:
        now = self.now
        batch = decode_batch(raw, verify_crc=False)
        # an aborted transaction's records: none survives (the emptied batch may stay
        # below, for producer state or the group's offset range)
        was_aborted = self.txns.on_data_batch(view)
        horizon = batch.delete_horizon_ms
        drop_tombstones = batch.has_delete_horizon and now >= horizon
        keep: list[Record] = []
        has_tombstone = False
        for r in batch.records:
            if was_aborted or r.key is None or self.offset_map.get(bytes(r.key), -1) > r.offset:
                continue
            if r.value is None:
                if drop_tombstones:
                    continue
                has_tombstone = True
            keep.append(r)
        self.removed += len(batch.records) - len(keep)
        set_horizon = has_tombstone and not batch.has_delete_horizon
        if len(keep) == len(batch.records) and not set_horizon:
            self._append(raw)
            return
        last_of_producer = batch.producer_id >= 0 and \
            self.producer_last.get(batch.producer_id, (-1, -1))[0] == batch.last_offset
        if not keep and not (last_of_producer or batch.last_offset == self.group_last):
            return
        new_horizon = (now + self.plog.config.delete_retention_ms) if set_horizon else (
            horizon if batch.has_delete_horizon and keep else None)
        if new_horizon is not None and not any(r.value is None for r in keep):
            new_horizon = None
        self._append(_reencode(batch, keep, new_horizon, now))


def _reencode(batch: RecordBatch, keep: list[Record], horizon: int | None, now: int) -> bytes:
    """``batch`` holding only ``keep``, with its offsets, producer fields, offset span and
    kind, and the delete horizon ``horizon`` (KIP-534) when not None."""
    recs = [Record(r.key, r.value, r.headers, r.timestamp,
                   offset_delta=r.offset - batch.base_offset) for r in keep]
    return encode_batch(
        recs, base_offset=batch.base_offset, compression=batch.compression,
        producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, is_transactional=batch.is_transactional,
        is_control=batch.is_control, partition_leader_epoch=batch.partition_leader_epoch,
        timestamp_type=batch.timestamp_type,
        log_append_time=batch.max_timestamp if batch.timestamp_type == 1 else None,
        delete_horizon_ms=horizon, last_offset_delta=batch.last_offset_delta, now_ms=now)


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
