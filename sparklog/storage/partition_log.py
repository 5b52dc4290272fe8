"""One partition's log: a sequence of ``LogSegment`` s in ``<log dir>/<topic>-<partition>/``
(Kafka's ``UnifiedLog``): append, read, roll, truncate, retention, flush.

Beside it, as in Kafka: ``log_loader`` opens the directory (crash leftovers, recovery,
producer-state rebuild), ``log_validator`` checks and stamps what an append brings,
``segment_reads`` answers reads, aborted transactions and timestamp lookups over the segment
list, ``retention`` picks the segments retention drops and holds their ``.deleted`` files,
``log_info`` holds what the calls answer. Layer below: ``LogSegment`` (one .log + indexes).
Layer above: the broker's replica manager (who leads, HW moves, fetches) and ``LogManager``
(opens logs, runs retention/compaction/flush, writes checkpoints).

Files in the partition directory: ``<base>.log`` / ``.index`` / ``.timeindex`` /
``.txnindex`` (see ``segment``, ``offset_index``, ``time_index``, ``txn_index``),
``<offset>.snapshot`` (``producer_state``),
``leader-epoch-checkpoint`` (``leader_epoch``), ``partition.metadata`` (``checkpoints``).
Transient names: ``.cleaned`` (compaction output being written), ``.swap`` (compaction output
complete, replacing segments), ``.deleted`` (waiting ``file.delete.delay.ms``).

Invariants:

* Offsets: ``log_start_offset`` <= ``last_stable_offset`` <= ``high_watermark`` <=
  ``log_end_offset`` (LEO, the next offset to assign); recovery point <= LEO. The LSO is
  the HW unless a transaction that began below it is still open. Readers see
  [log start, LEO); the broker limits consumers to the HW (the LSO for read_committed)
  by passing ``max_offset``. The HW is moved only by
  ``update_high_watermark`` (after each append on a single replica, once followers caught
  up under replication).
* Only the last (active) segment is written; segments before it are sealed and change only
  by being deleted whole (retention, DeleteRecords) or replaced whole (compaction).
* A read never returns bytes of a range recovery or a scrub found corrupt: it raises
  ``KafkaStorageError`` and ``corrupt_ranges`` reports the range for re-fetching.

Thread-safety: every public method is thread-safe; one re-entrant lock per log guards state.
``fsync`` in ``flush`` runs outside the lock so appends are not stalled by the disk. Append
listeners (``add_append_listener``) run on the appending thread, after the lock is released,
whenever the LEO or the HW moves: keep them cheap (e.g. ``loop.call_soon_threadsafe``).

Durability policy (Kafka's): no fsync per append; ``flush.messages`` / ``flush.ms`` or a
segment roll flushes, and the *recovery point* records how far the log is known durable;
after an unclean shutdown ``log_loader`` re-validates everything from it, and the active
segment after any shutdown.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import threading
import time
from bisect import bisect_right
from collections.abc import Callable

from sparklog.protocol.batch_header import Buffer, byte_view, validate_batches
from sparklog.protocol.errors import (
    FencedLeaderEpochError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)

from .errors import LogClosedError
from .leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from .log_config import LogConfig
from .log_info import AppendInfo, FetchDataInfo, TimestampAndOffset
from .log_loader import LogLoader, check_topic_id, parse_topic_partition, rebuild_producer_state
from .log_validator import assign_offsets, replicated_batches, validate_leader_append
from .producer_state import CompletedTxn, ProducerStateManager
from .remote.remote_log import RemoteLog
from .retention import PendingDeletes, segments_past_retention
from .segment import BY_BASE_OFFSET, DELETED_SUFFIX, LogSegment
from .segment_reads import aborted_transactions, local_offset_for_timestamp, read_segments
from .txn_index import AbortedTxn

__all__ = ["PartitionLog"]

log = logging.getLogger(__name__)

class PartitionLog:
    def __init__(
        self,
        directory: str,
        config: LogConfig | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        topic_id: bytes | str | None = None,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        clean_shutdown: bool = False,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        """Open (creating if absent) and, unless ``clean_shutdown``, recover the log from
        ``recovery_point``. The defaults (recovery point 0, not clean) re-validate everything,
        which is always safe; the LogManager passes its checkpoints to skip that work."""
        self.directory = directory
        self.config = config or LogConfig()
        if topic is None or partition is None:
            topic, partition = parse_topic_partition(directory)
        self.topic, self.partition = topic, partition
        self._time_ms = time_ms or (lambda: int(time.time() * 1000))
        # the object-storage tier of this log, once ``attach_remote`` tiers it
        self.remote: RemoteLog | None = None
        self._lock = threading.RLock()
        self._listeners: list[Callable[[PartitionLog], None]] = []
        self._closed = False
        self._segments: list[LogSegment] = []
        self._pending_deletes = PendingDeletes()
        self._unflushed_messages = 0
        self._last_flush_ms = self._time_ms()
        jitter = self.config.segment_jitter_ms
        self._roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        self.cleaning = False  # set by the cleaner while it works on this log
        self.cleaner_checkpoint = 0  # first offset not yet compacted (cleaner-offset-checkpoint)
        self.cleaner_next_horizon_ms: int | None = None  # a delete horizon the cleaner awaits
        os.makedirs(directory, exist_ok=True)

        self.topic_id = check_topic_id(directory, topic_id)
        self._epochs = LeaderEpochCache(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
        self._producers = ProducerStateManager(directory, self.config.producer_id_expiration_ms)
        loaded = LogLoader(directory, self._new_segment, self._epochs, self._producers,
                           f"{topic}-{partition}").load(recovery_point, log_start_offset,
                                                        clean_shutdown)
        self._segments = loaded.segments
        self._log_start_offset = loaded.log_start_offset
        self._leo = loaded.log_end_offset
        self._recovery_point = loaded.recovery_point
        hw = 0 if high_watermark is None else high_watermark
        self._hw = min(max(hw, self._log_start_offset), self._leo)
        # whether any segment may hold an aborted transaction: read_committed fetches of a
        # log that never had one skip the .txnindex walk
        self._has_aborted = any(s.txn_index.entries for s in self._segments)

    # ================================================================== properties
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        return self._segments[0].base_offset if self._segments else self._leo

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the HW, or the first offset of the oldest open transaction when that is
        lower (``read_committed`` readers stop there), never below the log start (retention
        or DeleteRecords may remove an open transaction's first records, as in Kafka)."""
        first = self._producers.first_unstable_offset
        if first is None or first >= self._hw:
            return self._hw
        return max(first, self._log_start_offset)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound), which a
        ``read_committed`` fetch reports: below a tiered log's local start from the
        bucket's ``.txnindex`` objects first (outside the lock), then the local ones."""
        remote, tiered = self.remote, None
        if remote is not None and fetch_offset < self.local_log_start_offset:
            tiered, complete = remote.aborted_transactions(fetch_offset, upper_bound)
            if complete or not self._has_aborted:
                return tiered
        elif not self._has_aborted:
            return []
        with self._lock:
            return aborted_transactions(self._segments, fetch_offset, upper_bound, tiered)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epochs

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producers

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        """A copy of the segment list (oldest first); the last one is active."""
        with self._lock:
            return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def corrupt_ranges(self) -> list[tuple[int, int]]:
        """[start, end) offset ranges recovery found corrupt in sealed segments."""
        with self._lock:
            ends = [s.base_offset for s in self._segments[1:]] + [self._leo]
            return [(s.corrupt_offset, end) for s, end in zip(self._segments, ends, strict=True)
                    if s.corrupt_position is not None and s.corrupt_offset is not None]

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
                f"hw={self._hw}, leo={self._leo}, segments={len(self._segments)})")

    # ================================================================== listeners
    def add_append_listener(self, callback: Callable[[PartitionLog], None]) -> None:
        """``callback(log)`` runs after every append and HW move (long-poll fetch wake-up)."""
        with self._lock:
            self._listeners.append(callback)

    def remove_append_listener(self, callback: Callable[[PartitionLog], None]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(callback)

    def _notify(self) -> None:
        for cb in list(self._listeners):
            try:
                cb(self)
            except Exception:  # a listener must never fail an append
                log.exception("append listener failed")

    # ================================================================== segments
    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment(self.directory, base_offset, suffix=suffix, created_ms=self._time_ms(),
                          index_interval_bytes=self.config.index_interval_bytes,
                          max_index_entries=self.config.max_index_entries)

    # ================================================================== append
    def append_as_leader(self, records: Buffer, leader_epoch: int, *,
                         origin: str = "client") -> AppendInfo:
        """Validate and append the Produce ``records`` field (one or more v2 batches).

        Only base offset and partition leader epoch are rewritten (plus attributes, max
        timestamp and CRC under LogAppendTime), in a copy of each 61-byte header; the record
        bytes are written as received, with one ``pwritev`` (``log_validator``)."""
        mv = byte_view(records)
        now = self._time_ms()
        batches = validate_leader_append(mv, self.config, from_client=origin == "client",
                                         now_ms=now)
        if not batches:
            return AppendInfo(-1, -1, -1, self._log_start_offset)
        lat = self.config.message_timestamp_type == "LogAppendTime"
        with self._lock:
            if self._closed:
                self._check_open()
            epochs = self._epochs
            latest_epoch = epochs.latest_epoch
            if 0 <= leader_epoch < latest_epoch:
                raise FencedLeaderEpochError(
                    f"append with leader epoch {leader_epoch} below the latest epoch "
                    f"{latest_epoch} of {self.topic}-{self.partition}")
            first = self._leo
            a = assign_offsets(mv, batches, first, leader_epoch, now if lat else None)
            updated = None
            completed: list[CompletedTxn] = []
            if a.producer_batches:
                updated, dup, completed = self._producers.prepare(a.producer_batches, origin)
                if dup is not None:
                    return AppendInfo(dup.first_offset, dup.last_offset,
                                      dup.timestamp if lat else -1, self._log_start_offset,
                                      record_count=dup.last_offset - dup.first_offset + 1,
                                      max_timestamp=dup.timestamp, duplicate=True)
            self._maybe_roll(a.size, a.max_timestamp, a.next_offset - 1, now)
            self._write(a.buffers, a.size, a.metas)
            if updated:
                self._producers.commit(updated, a.next_offset)
                self._index_aborted(completed)
            else:
                self._producers.map_end_offset = a.next_offset
            if leader_epoch >= 0 and leader_epoch != latest_epoch:
                epochs.assign(leader_epoch, first)
            self._leo = a.next_offset
            info = AppendInfo(first, a.next_offset - 1, now if lat else -1,
                              self._log_start_offset, a.record_count, a.max_timestamp,
                              a.offset_of_max_timestamp, a.size)
            self._after_append(a.record_count)
        if self._listeners:
            self._notify()
        return info

    def append_as_follower(self, records: Buffer) -> AppendInfo:
        """Append batches replicated from the leader with their offsets as given.

        Batches must start at or after the LEO (a gap is allowed: the leader compacted or
        moved its start); epochs and producer state follow the batches. One exception, as
        in Kafka: an empty log whose start lies inside the first batch (the leader's
        DeleteRecords moved its start into a batch) starts over at that batch's base."""
        mv = byte_view(records)
        batches = validate_batches(mv)
        if not batches:
            return AppendInfo(-1, -1, -1, self._log_start_offset)
        now = self._time_ms()
        with self._lock:
            self._check_open()
            head = batches[0][1]
            if self._leo == self._log_start_offset and \
                    head.base_offset < self._leo <= head.base_offset + head.last_offset_delta:
                log.info("%s-%d: the first replicated batch starts at %d, before the log start "
                         "%d: the log starts over there", self.topic, self.partition,
                         head.base_offset, self._leo)
                self._truncate_fully_locked(head.base_offset)
            a = replicated_batches(mv, batches, self._leo, f"{self.topic}-{self.partition}")
            first = a.first_offset
            if self._segments[-1].size == 0 and first > self._leo:
                # nothing written yet where the leader's data starts: start the segment there
                self._replace_empty_active(first)
            self._maybe_roll(a.size, a.max_timestamp, a.next_offset - 1, now, base_offset=first)
            self._write(a.buffers, a.size, a.metas)
            self._index_aborted([done for b in a.producer_batches
                                 if (done := self._producers.replay(b)) is not None])
            self._producers.map_end_offset = a.next_offset
            for ple, base in a.leader_epochs:
                if ple > self._epochs.latest_epoch:
                    self._epochs.assign(ple, base)
            self._leo = a.next_offset
            info = AppendInfo(first, a.next_offset - 1, -1, self._log_start_offset,
                              a.record_count, a.max_timestamp, a.offset_of_max_timestamp, a.size)
            self._after_append(a.record_count)
        self._notify()
        return info

    def _index_aborted(self, completed: list[CompletedTxn]) -> None:
        """Record the aborted transactions among ``completed`` in the active segment's
        ``.txnindex`` (their markers were just written there)."""
        for txn in completed:
            if txn.is_aborted:
                self._segments[-1].txn_index.append(AbortedTxn(
                    txn.producer_id, txn.first_offset, txn.last_offset,
                    self._producers.stable_offset_after(txn)))
                self._has_aborted = True

    def _replace_empty_active(self, base: int) -> None:
        old = self._segments.pop()
        old.delete_files()
        seg = self._new_segment(base)
        self._segments.append(seg)
        if len(self._segments) == 1:
            self._log_start_offset = max(self._log_start_offset, base)

    def _write(self, iov: list, total: int, metas: list[tuple[int, int, int, int]]) -> None:
        seg = self._segments[-1]
        before = seg.size
        try:
            seg.append(iov, total, metas)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(seg.fd, before)
                seg.size = before
            raise KafkaStorageError(f"write to {seg.log_path} failed: {exc}") from exc

    def _after_append(self, count: int) -> None:
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, incoming: int, max_ts: int, last_offset: int, now: int, *,
                    base_offset: int | None = None) -> None:
        seg = self._segments[-1]
        cfg = self.config
        if seg.should_roll(cfg.segment_bytes, cfg.segment_ms, self._roll_jitter_ms, incoming,
                           max_ts if max_ts >= 0 else now, last_offset, now):
            self._roll_locked(base_offset)

    def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the LEO (no-op when empty)."""
        with self._lock:
            self._check_open()
            if self._segments[-1].size == 0:
                return self._segments[-1]
            return self._roll_locked()

    def _roll_locked(self, base_offset: int | None = None) -> LogSegment:
        new_base = self._leo if base_offset is None else max(base_offset, self._leo)
        old = self._segments[-1]
        if old.size == 0:
            return old
        old.on_become_inactive()
        seg = self._new_segment(new_base)
        self._segments.append(seg)
        self._producers.map_end_offset = self._leo
        self._producers.take_snapshot(self._leo)
        log.debug("%s-%d: rolled new segment at %d", self.topic, self.partition, new_base)
        return seg

    # ================================================================== read
    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes`` (except
        the first batch when ``min_one_message``), none at or after ``max_offset``.

        Below the log start or above the LEO raises OffsetOutOfRangeError; == LEO is empty.
        Below the local log start of a tiered log the remote tier answers (``RemoteLog``)."""
        remote = self.remote
        if remote is not None and start_offset < self.local_log_start_offset:
            with self._lock:
                info, limit_offset = self._start_read(start_offset, max_offset)
            if start_offset >= limit_offset:
                return info
            # outside the lock: the store may be slow, appends must not wait for it
            return remote.read(info, start_offset, max_bytes, limit_offset, min_one_message)
        with self._lock:
            info, limit_offset = self._start_read(start_offset, max_offset)
            if start_offset >= limit_offset:
                return info
            return read_segments(self._segments, info, max_bytes, limit_offset,
                                 min_one_message, f"{self.topic}-{self.partition}")

    def _start_read(self, start_offset: int, max_offset: int | None) -> tuple[FetchDataInfo, int]:
        """An empty answer for a read at ``start_offset`` and the offset it stops before;
        OffsetOutOfRangeError outside [log start, LEO]. Called with the lock held."""
        self._check_open()
        leo = self._leo
        info = FetchDataInfo(start_offset, start_offset, [], 0, self._hw,
                             self._log_start_offset, leo, self._hw)
        if start_offset < self._log_start_offset or start_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} out of range [{self._log_start_offset}, {leo}] "
                f"for {self.topic}-{self.partition}")
        return info, leo if max_offset is None else min(max_offset, leo)

    # ================================================================== time lookups
    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: earliest offset whose record timestamp >= ``timestamp``; the
        special values -1 (latest = LEO; the broker clamps to HW/LSO), -2 (earliest),
        -3 (max timestamp), -4 (earliest local), -5 (latest tiered: None until a remote tier
        exists). None when no record qualifies. A tiered log looks in the bucket first
        (outside the lock: the store may be slow)."""
        remote = self.remote
        if (remote is not None and timestamp >= 0
                and self._log_start_offset < self.local_log_start_offset):
            found = remote.offset_for_timestamp(timestamp, self._log_start_offset)
            if found is not None:
                with self._lock:
                    return TimestampAndOffset(found[0], found[1],
                                              self._epochs.epoch_for_offset(found[1]))
        with self._lock:
            self._check_open()
            return local_offset_for_timestamp(
                self._segments, timestamp, log_start_offset=self._log_start_offset,
                log_end_offset=self._leo, epochs=self._epochs,
                tiered_end_offset=None if self.remote is None else self.remote.manifest.end_offset)

    # ================================================================== high watermark
    def update_high_watermark(self, offset: int) -> int:
        """Set the HW (clamped to [log start, LEO]); returns the value kept."""
        with self._lock:
            hw = min(max(offset, self._log_start_offset), self._leo)
            changed = hw != self._hw
            self._hw = hw
        if changed:
            self._notify()
        return hw

    # ================================================================== epochs / truncation
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch answer: (largest epoch <= ``epoch``, its end offset)."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._leo)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """A new leader records where its epoch begins (its LEO) before accepting writes."""
        with self._lock:
            self._epochs.assign(epoch, start_offset)

    def truncation_offset_for(self, leader_epoch: int, leader_end_offset: int) -> int:
        """Where a follower must truncate given the leader's OffsetsForLeaderEpoch answer
        (``leader_epoch``, ``leader_end_offset``) for the follower's latest epoch (KIP-101 /
        KIP-279): never by the HW alone."""
        with self._lock:
            return self._epochs.truncation_offset(leader_epoch, leader_end_offset,
                                                  self._hw, self._leo)

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: remove every offset >= ``offset``. True when data went."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            if offset >= self._leo:
                return False
            if offset < self._log_start_offset or (self.remote is not None
                                                   and offset < self.local_log_start_offset):
                # a tiered log's bucket keeps serving what is below ``offset``
                self._truncate_fully_locked(offset, self._log_start_offset, self._epochs.entries())
                return True
            log.info("%s-%d: truncating from %d to %d", self.topic, self.partition,
                     self._leo, offset)
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                seg = self._segments.pop()
                seg.delete_files()
            seg = self._segments[-1]
            seg.truncate_to(offset)
            self._leo = seg.next_offset if seg.size else seg.base_offset
            self._hw = min(self._hw, self._leo)
            self._recovery_point = min(self._recovery_point, self._leo)
            self._epochs.truncate_from_end(self._leo)
            self._producers.delete_snapshots_from(self._leo + 1)
            rebuild_producer_state(self._producers, self._segments, self._log_start_offset,
                                   self._leo)
            self._has_aborted = any(s.txn_index.entries for s in self._segments)
        self._notify()
        return True

    def truncate_fully_and_start_at(self, offset: int, log_start_offset: int | None = None,
                                    epochs: list[tuple[int, int]] | None = None,
                                    producer_snapshot: bytes | None = None) -> None:
        """Drop everything and restart the log empty at ``offset`` (follower far behind); a
        tiered log's follower (KIP-405) keeps the bucket's log start, epochs, producer state."""
        with self._lock:
            self._check_open()
            self._truncate_fully_locked(offset, log_start_offset, epochs or [])
            if producer_snapshot is not None:
                self._producers.load_snapshot(offset, producer_snapshot)
        self._notify()

    def _truncate_fully_locked(self, offset: int, log_start_offset: int | None = None,
                               epochs: list[tuple[int, int]] | None = None) -> None:
        for seg in self._segments:
            seg.delete_files()
        self._segments = [self._new_segment(offset)]
        self._leo = self._hw = self._recovery_point = offset
        self._log_start_offset = min(offset, offset if log_start_offset is None else log_start_offset)
        self._epochs.replace(epochs or (), offset)
        self._producers.delete_all_snapshots()
        self._producers.reset(offset)

    # ================================================================== retention
    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention (``retention.ms``, ``retention.bytes``, log start offset): delete
        whole sealed segments wholly below the HW, oldest first. Returns how many went."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            doomed = segments_past_retention(
                self._segments, self.config, high_watermark=self._hw,
                log_start_offset=self._log_start_offset, now_ms=now, time_ms=self._time_ms)
            if doomed:
                self._delete_segments_locked(doomed, "retention")
            return doomed

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (<= HW; -1 means the HW) and
        delete segments wholly below it. Returns the new log start offset."""
        with self._lock:
            self._check_open()
            if offset == -1:
                offset = self._hw
            if offset > self._hw or offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot delete records of {self.topic}-{self.partition} up to {offset}: "
                    f"high watermark is {self._hw}")
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self._epochs.truncate_from_start(offset)
                self._producers.truncate_head(offset)
            # every segment followed by one starting at or below the new log start
            doomed = max(0, bisect_right(self._segments, self._log_start_offset,
                                         key=BY_BASE_OFFSET) - 1)
            if doomed:
                self._delete_segments_locked(doomed, "log start offset")
            return self._log_start_offset

    def _delete_segments_locked(self, n: int, reason: str, move_log_start: bool = True) -> None:
        doomed = self._segments[:n]
        del self._segments[:n]
        new_start = self._segments[0].base_offset
        if move_log_start and new_start > self._log_start_offset:
            self._log_start_offset = new_start
            self._epochs.truncate_from_start(new_start)
            self._producers.truncate_head(new_start)
        deadline = self._time_ms() + self.config.file_delete_delay_ms
        for seg in doomed:
            log.info("%s-%d: deleting segment %s (%s)", self.topic, self.partition,
                     seg.log_path, reason)
            try:
                seg.rename_suffix(DELETED_SUFFIX)
            except OSError as exc:
                log.warning("could not rename %s for deletion: %s", seg.log_path, exc)
            self._pending_deletes.add(seg, deadline)
        if self.config.file_delete_delay_ms == 0:
            self.delete_pending_files(force=True)

    def delete_pending_files(self, now_ms: int | None = None, force: bool = False) -> int:
        """Remove ``.deleted`` segments whose ``file.delete.delay.ms`` passed."""
        return self._pending_deletes.delete_due(
            self._time_ms() if now_ms is None else now_ms, force)

    def verify_segments(self, include_active: bool = False) -> list[tuple[int, int]]:
        """Scrub sealed segments (CRC of every batch); newly found damage is marked so reads
        of it raise KafkaStorageError. Returns ``corrupt_ranges``. The segments are checked
        without holding the lock (sealed segments do not change)."""
        with self._lock:
            segs = list(self._segments if include_active else self._segments[:-1])
        for seg in segs:
            if seg.corrupt_position is None and not seg.closed:
                try:
                    seg.verify()
                except OSError as exc:
                    log.warning("could not verify %s: %s", seg.log_path, exc)
        return self.corrupt_ranges

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        with self._lock:
            return self._producers.remove_expired(self._time_ms() if now_ms is None else now_ms)

    # ================================================================== remote tier
    def attach_remote(self, remote: RemoteLog, log_start_offset: int | None = None) -> None:
        """Tier this log (``storage.remote``): reads below the local log start go to
        ``remote``, and the log start and leader epochs cover the segments its manifest
        lists (the loader saw only local segments). ``log_start_offset``: the checkpointed
        start, which a manifest written before a DeleteRecords may lag."""
        m = remote.manifest
        with self._lock:
            self.remote = remote
            end = m.end_offset
            if end is None:
                return
            first_local = self.local_log_start_offset
            if end < first_local:
                log.error("%s-%d: the bucket ends at %d, below the local log start %d; "
                          "offsets between are not served", self.topic, self.partition, end,
                          first_local)
                return
            start = max(m.log_start_offset, log_start_offset or 0)
            if start >= self._log_start_offset:
                return
            self._log_start_offset = start
            self._epochs.prepend(m.segments[-1].leader_epochs, start, self._leo)

    def delete_local_segments_below(self, offset: int) -> int:
        """A tiered log drops local sealed segments wholly below ``offset`` (uploaded and
        past local retention); the log start stays (the tier serves those offsets)."""
        with self._lock:
            self._check_open()
            doomed = max(0, min(bisect_right(self._segments, offset, key=BY_BASE_OFFSET) - 1,
                                len(self._segments) - 1))
            if doomed:
                self._delete_segments_locked(doomed, "local retention of a tiered log",
                                             move_log_start=False)
            return doomed

    # ================================================================== flush / close
    def flush(self, offset: int | None = None) -> None:
        """fsync segments holding offsets below ``offset`` (default LEO) and advance the
        recovery point. The log's fsync runs outside the lock."""
        with self._lock:
            if self._closed:
                return
            target = self._leo if offset is None else min(offset, self._leo)
            if target <= self._recovery_point:
                return
            segs = [s for i, s in enumerate(self._segments)
                    if (i + 1 >= len(self._segments) or self._segments[i + 1].base_offset > self._recovery_point)
                    and s.base_offset < target]
            for s in segs:
                s.offset_index.flush(fsync=True)
                s.time_index.flush(fsync=True)
            self._unflushed_messages = 0
        for s in segs:
            if not s.closed:
                try:
                    os.fsync(s.fd)
                except OSError as exc:
                    if not s.closed:
                        raise KafkaStorageError(f"fsync of {s.log_path} failed: {exc}") from exc
        with self._lock:
            self._recovery_point = max(self._recovery_point, target)
            self._last_flush_ms = self._time_ms()

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """``flush.ms`` policy, plus flushing segments sealed by a roll (Kafka does that
        right after the roll; the scheduler calls this)."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            if self._closed:
                return False
            active_base = self._segments[-1].base_offset
            due_time = (self._leo > self._recovery_point
                        and now - self._last_flush_ms >= self.config.flush_ms)
            sealed = self._recovery_point < active_base
        if due_time:
            self.flush()
            return True
        if sealed:
            self.flush(active_base)
            return True
        return False

    def take_producer_snapshot(self) -> None:
        with self._lock:
            self._producers.map_end_offset = self._leo
            self._producers.take_snapshot(self._leo)

    def close(self) -> None:
        """Write indexes and a producer snapshot at the LEO (so a clean restart needs no
        replay) and close the files. No fsync: call ``flush()`` first for durability."""
        with self._lock:
            if self._closed:
                return
            try:
                self.take_producer_snapshot()
            except KafkaStorageError:
                log.exception("producer snapshot at close failed")
            for seg in self._segments:
                seg.close()
            self._closed = True
        self.delete_pending_files(force=True)

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        with self._lock:
            if not self._closed:
                for seg in self._segments:
                    seg.close_fd_only()
                self._closed = True
        self.delete_pending_files(force=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.topic}-{self.partition} is closed")

    # ================================================================== cleaner hooks
    def lock(self) -> threading.RLock:
        return self._lock
