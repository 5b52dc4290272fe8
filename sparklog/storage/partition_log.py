"""One partition's log: a sequence of ``LogSegment`` s in ``<log dir>/<topic>-<partition>/``.

Layer below: ``LogSegment`` (one .log + indexes). Layer above: the broker's replica manager
(which decides who leads, moves the high watermark and answers fetches) and ``LogManager``
(which opens logs, runs retention/compaction/flush and writes checkpoints).

Files in the partition directory: ``<base>.log`` / ``.index`` / ``.timeindex`` (see
``segment``, ``offset_index``, ``time_index``), ``<offset>.snapshot`` (``producer_state``),
``leader-epoch-checkpoint`` (``leader_epoch``), ``partition.metadata`` (``checkpoints``).
Transient names: ``.cleaned`` (compaction output being written), ``.swap`` (compaction output
complete, replacing segments), ``.deleted`` (waiting ``file.delete.delay.ms``).

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset`` (LEO, the next
offset to assign). Readers see [log start, LEO); the broker limits consumers to the HW by
passing ``max_offset``. The HW is kept here but moved only by ``update_high_watermark``: a
single-replica broker calls it with ``info.last_offset + 1`` after each append, replication
moves it once followers caught up.

Thread-safety: every public method is thread-safe; one re-entrant lock per log guards state.
``fsync`` in ``flush`` runs outside the lock so appends are not stalled by the disk. Append
listeners (``add_append_listener``) run on the appending thread, after the lock is released,
whenever the LEO or the HW moves: keep them cheap (e.g. ``loop.call_soon_threadsafe``).

Durability policy (Kafka's): no fsync per append; ``flush.messages`` / ``flush.ms`` or a
segment roll flushes, and the *recovery point* records how far the log is known durable.
After an unclean shutdown everything from the recovery point is re-validated: a torn or
corrupt tail of the last segment is truncated at the last valid batch; a bad batch inside a
*sealed* segment is never silently dropped (later segments may hold acknowledged data): the
range is marked corrupt, reads of it raise ``KafkaStorageError`` and ``corrupt_ranges``
reports it so the broker can re-fetch it from a replica.
"""

from __future__ import annotations

import logging
import operator
import os
import random
import shutil
import struct
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

from crc32c import crc32c

from sparklog.protocol.batch_header import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchView,
)
from sparklog.protocol.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)

from .backend import FileSlice, RemoteSegmentStore
from .checkpoints import read_partition_metadata, topic_id_to_str, write_partition_metadata
from .errors import LogClosedError, SegmentCorruptError, UnexpectedAppendOffsetError
from .leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from .log_config import LogConfig
from .producer_state import ProducerBatch, ProducerStateManager
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    parse_segment_name,
)

__all__ = [
    "PartitionLog",
    "AppendInfo",
    "FetchDataInfo",
    "TimestampAndOffset",
    "parse_topic_partition",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
]

log = logging.getLogger(__name__)

_BASE = operator.attrgetter("base_offset")  # bisect key: segments are sorted by base offset

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
PARTITION_METADATA = "partition.metadata"

_HEADER = struct.Struct(">qiibIhiqqqhii")
_STAMP = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_NO_TS = -1


@dataclass(slots=True)
class AppendInfo:
    """Result of one append. For a retried (duplicate) idempotent batch the offsets are
    those of the original append and ``duplicate`` is True; nothing was written."""

    first_offset: int
    last_offset: int
    log_append_time: int = -1
    log_start_offset: int = 0
    record_count: int = 0
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    valid_bytes: int = 0
    duplicate: bool = False


@dataclass(slots=True)
class FetchDataInfo:
    """What ``read`` found: whole batches as file slices, in offset order.

    ``first_offset`` is the requested fetch offset; ``next_offset`` is where the next fetch
    continues (after the last returned batch)."""

    first_offset: int
    next_offset: int
    slices: list[FileSlice] = field(default_factory=list)
    size: int = 0
    high_watermark: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    last_stable_offset: int = 0

    def read_bytes(self) -> bytes:
        return b"".join(s.read_bytes() for s in self.slices)


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int = -1


def parse_topic_partition(dirname: str) -> tuple[str, int]:
    """``orders-3`` -> ("orders", 3): topics may contain '-', partitions never do."""
    topic, sep, part = os.path.basename(dirname.rstrip("/")).rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"not a partition directory name: {dirname!r}")
    return topic, int(part)


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
        remote: RemoteSegmentStore | None = None,
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
        self.remote = remote
        self._lock = threading.RLock()
        self._listeners: list[Callable[[PartitionLog], None]] = []
        self._closed = False
        self._segments: list[LogSegment] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._unflushed_messages = 0
        self._last_flush_ms = self._time_ms()
        jitter = self.config.segment_jitter_ms
        self._roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        self.cleaning = False  # set by the cleaner while it works on this log
        self.cleaner_checkpoint = 0  # first offset not yet compacted (cleaner-offset-checkpoint)
        os.makedirs(directory, exist_ok=True)

        meta_path = os.path.join(directory, PARTITION_METADATA)
        existing = read_partition_metadata(meta_path)
        if topic_id is not None:
            if existing is not None and topic_id_to_str(existing) != topic_id_to_str(topic_id):
                raise KafkaStorageError(
                    f"topic id {topic_id_to_str(topic_id)} does not match "
                    f"{topic_id_to_str(existing)} recorded in {meta_path}"
                )
            if existing is None:
                write_partition_metadata(meta_path, topic_id)
        self.topic_id = existing if topic_id is None else topic_id

        self._epochs = LeaderEpochCache(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
        self._producers = ProducerStateManager(directory, self.config.producer_id_expiration_ms)
        self._log_start_offset = 0
        self._leo = 0
        self._hw = 0
        self._recovery_point = 0
        self._load(recovery_point, log_start_offset, clean_shutdown)
        hw = 0 if high_watermark is None else high_watermark
        self._hw = min(max(hw, self._log_start_offset), self._leo)

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

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.update_high_watermark(offset)

    @property
    def last_stable_offset(self) -> int:
        """Equal to the HW until transactions exist."""
        return self._hw

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
            out = []
            for i, s in enumerate(self._segments):
                if s.corrupt_position is not None and s.corrupt_offset is not None:
                    end = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else self._leo
                    out.append((s.corrupt_offset, end))
            return out

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
        with self._lock:
            try:
                self._listeners.remove(callback)
            except ValueError:
                pass

    def _notify(self) -> None:
        for cb in list(self._listeners):
            try:
                cb(self)
            except Exception:  # a listener must never fail an append
                log.exception("append listener failed")

    # ================================================================== loading
    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_entries=self.config.max_index_entries,
            suffix=suffix,
            created_ms=self._time_ms(),
        )

    def _load(self, recovery_point: int, log_start_offset: int | None, clean: bool) -> None:
        names = sorted(os.listdir(self.directory))
        swaps: list[int] = []
        bases: set[int] = set()
        for name in names:
            parsed = parse_segment_name(name)
            path = os.path.join(self.directory, name)
            if name.endswith(".tmp"):
                os.remove(path)
                continue
            if parsed is None:
                continue
            base, suffix = parsed
            if suffix.endswith(CLEANED_SUFFIX) or suffix.endswith(DELETED_SUFFIX):
                os.remove(path)
            elif suffix == LOG_SUFFIX + SWAP_SUFFIX:
                swaps.append(base)
            elif suffix.endswith(SWAP_SUFFIX):
                os.remove(path)  # index swaps: indexes of swapped segments are rebuilt
            elif suffix == LOG_SUFFIX:
                bases.add(base)
        for base in sorted(swaps):
            self._complete_swap(base, bases)
        # orphan indexes (their .log is gone) would confuse a later segment with that base
        for name in os.listdir(self.directory):
            parsed = parse_segment_name(name)
            if parsed and parsed[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and parsed[0] not in bases:
                os.remove(os.path.join(self.directory, name))

        ordered = sorted(bases)
        self._segments = [self._new_segment(b) for b in ordered]
        if not self._segments:
            start = log_start_offset or 0
            self._segments = [self._new_segment(start)]

        # which segments need recovery: the one holding the recovery point and later ones
        if clean:
            first_unflushed = len(self._segments)
        else:
            first_unflushed = max(0, bisect_right(self._segments, recovery_point, key=_BASE) - 1)
        for i in range(first_unflushed):
            nxt = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None
            self._segments[i].load(nxt)
        if first_unflushed < len(self._segments):
            self._recover_segments(first_unflushed)
        else:
            last = self._segments[-1]
            # a clean log still gets the cheap check that its tail is whole
            if last.size and last.next_offset == last.base_offset:
                self._recover_segments(len(self._segments) - 1)

        self._leo = self._segments[-1].next_offset
        start = self._segments[0].base_offset if log_start_offset is None else log_start_offset
        start = max(start, self._segments[0].base_offset)
        self._log_start_offset = min(start, self._leo)
        self._recovery_point = min(recovery_point, self._leo)
        self._epochs.truncate_from_end(self._leo)
        self._epochs.truncate_from_start(self._log_start_offset)
        self._rebuild_producer_state()

    def _complete_swap(self, base: int, bases: set[int]) -> None:
        """A crash after compaction renamed its output to ``.swap``: the swap file is whole
        (it was fsynced before the rename), so finish replacing the segments it covers."""
        seg = self._new_segment(base, SWAP_SUFFIX)
        res = seg.recover(truncate=False)
        if seg.size == 0 or res.error is not None:
            # not a whole swap file after all: the segments it would replace are intact
            log.warning("discarding unusable swap file %s (%s)", seg.log_path, res.error)
            seg.delete_files()
            return
        end = seg.next_offset
        replaced = sorted(b for b in bases if base <= b < end)
        for b in replaced:
            prefix = os.path.join(self.directory, f"{b:020d}")
            for suf in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                try:
                    os.remove(prefix + suf)
                except FileNotFoundError:
                    pass
            bases.discard(b)
        seg.offset_index.delete_file()
        seg.time_index.delete_file()
        seg.close_fd_only()
        prefix = os.path.join(self.directory, f"{base:020d}")
        os.replace(prefix + LOG_SUFFIX + SWAP_SUFFIX, prefix + LOG_SUFFIX)
        for suf in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            try:
                os.remove(prefix + suf)  # rebuilt on load
            except FileNotFoundError:
                pass
        bases.add(base)
        log.info("completed interrupted segment swap at %s (replaced %s)", prefix, replaced)

    def _recover_segments(self, first: int) -> None:
        segs = self._segments
        expected = segs[first - 1].next_offset if first > 0 else None
        i = first
        while i < len(segs):
            seg = segs[i]
            later_empty = all(os.fstat(s.fd).st_size == 0 for s in segs[i + 1 :])
            is_tail = later_empty
            res = seg.recover(self._on_recovered_batch, truncate=is_tail, min_offset=expected)
            if res.error is not None and is_tail:
                log.warning("%s-%d: recovery dropped %d bytes from %s", self.topic,
                            self.partition, res.dropped_bytes, seg.log_path)
                for s in segs[i + 1 :]:
                    s.delete_files()
                del segs[i + 1 :]
                break
            if res.error is not None:
                log.error("%s-%d: sealed segment %s corrupt from offset %d; later segments kept",
                          self.topic, self.partition, seg.log_path, seg.next_offset)
            expected = seg.next_offset if seg.size else (expected or seg.base_offset)
            if not seg.size:
                seg.next_offset = seg.base_offset
            i += 1
        # drop empty non-last segments left by a crash between roll and first append
        keep = [s for s in segs[:-1] if s.size] + [segs[-1]]
        for s in segs[:-1]:
            if not s.size:
                s.delete_files()
        self._segments[:] = keep
        last = self._segments[-1]
        if last.size == 0 and len(self._segments) > 1:
            prev = self._segments[-2]
            if prev.next_offset > last.base_offset:
                last.next_offset = last.base_offset
        if last.size == 0:
            last.next_offset = last.base_offset
        for s in self._segments:
            s.offset_index.flush()
            s.time_index.flush()

    def _on_recovered_batch(self, view: BatchView) -> None:
        ple = view.partition_leader_epoch
        if ple >= 0 and ple > self._epochs.latest_epoch:
            self._epochs.assign(ple, view.base_offset)

    def _rebuild_producer_state(self) -> None:
        start = self._producers.truncate_and_reload(self._log_start_offset, self._leo)
        from_offset = self._log_start_offset if start is None else max(start, self._log_start_offset)
        if from_offset >= self._leo:
            self._producers.map_end_offset = self._leo
            return
        for seg in self._segments:
            if seg.next_offset <= from_offset:
                continue
            b = seg.find_batch(from_offset)
            if b is None:
                continue
            for pos, hdr in _iter_full_headers(seg, b.position):
                base, _l, _ple, _m, _c, attrs, lod, _bt, max_ts, pid, pepoch, bseq, _n = hdr
                del pos
                if pid < 0:
                    continue
                last_seq = _add_seq(bseq, lod) if bseq >= 0 else -1
                self._producers.replay(ProducerBatch(
                    pid, pepoch, bseq, last_seq, base, base + lod, max_ts,
                    bool(attrs & TRANSACTIONAL_MASK), bool(attrs & CONTROL_MASK)))
        self._producers.map_end_offset = self._leo

    # ================================================================== append
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int, *,
                         origin: str = "client") -> AppendInfo:
        """Validate and append the Produce ``records`` field (one or more v2 batches).

        Only base offset and partition leader epoch are rewritten (plus attributes, max
        timestamp and CRC under LogAppendTime), in a copy of each 61-byte header; the record
        bytes are written as received, with one ``pwritev``."""
        mv = records if type(records) is memoryview else memoryview(records)
        if mv.itemsize != 1 or mv.ndim != 1:
            mv = mv.cast("B")
        cfg = self.config
        now = self._time_ms()
        client = origin == "client"
        lat = cfg.message_timestamp_type == "LogAppendTime"
        check_ts = client and not lat
        batches = _parse_and_validate(
            mv, cfg.max_message_bytes if client else None, client, now,
            cfg.message_timestamp_before_max_ms if check_ts else -1,
            cfg.message_timestamp_after_max_ms if check_ts else -1)
        if not batches:
            return AppendInfo(-1, -1, -1, self._log_start_offset)
        if client and "compact" in cfg.cleanup_policy:
            _check_keys(mv, batches)
        total = len(mv)
        with self._lock:
            if self._closed:
                self._check_open()
            epochs = self._epochs
            if leader_epoch >= 0 and leader_epoch != epochs.latest_epoch and \
                    leader_epoch < epochs.latest_epoch:
                raise FencedLeaderEpochError(
                    f"append with leader epoch {leader_epoch} below the latest epoch "
                    f"{epochs.latest_epoch} of {self.topic}-{self.partition}")
            first = nxt = self._leo
            pbatches: list[ProducerBatch] | None = None
            metas: list[tuple[int, int, int, int]] = []
            iov: list = []
            max_ts, off_max, count = -1, -1, 0
            for pos, size, lod, bmax, pid, pepoch, bseq, attrs, n in batches:
                last = nxt + lod
                ts = now if lat else bmax
                metas.append((nxt, last, size, ts))
                if ts > max_ts:
                    max_ts, off_max = ts, last
                if pid >= 0:
                    if pbatches is None:
                        pbatches = []
                    pbatches.append(ProducerBatch(
                        pid, pepoch, bseq, _add_seq(bseq, lod) if bseq >= 0 else -1, nxt, last,
                        ts, bool(attrs & TRANSACTIONAL_MASK), bool(attrs & CONTROL_MASK)))
                # stamp baseOffset, batchLength (unchanged) and partitionLeaderEpoch at once
                hdr = bytearray(mv[pos : pos + BATCH_HEADER_SIZE])
                _STAMP.pack_into(hdr, 0, nxt, size - LOG_OVERHEAD, leader_epoch)
                iov.append(hdr)
                if size > BATCH_HEADER_SIZE:
                    iov.append(mv[pos + BATCH_HEADER_SIZE : pos + size])
                if lat:
                    _stamp_log_append_time(hdr, iov[-1] if size > BATCH_HEADER_SIZE else b"", now)
                count += n
                nxt = last + 1
            updated = None
            if pbatches is not None:
                updated, dup = self._producers.prepare(pbatches, origin)
                if dup is not None:
                    return AppendInfo(dup.first_offset, dup.last_offset,
                                      dup.timestamp if lat else -1, self._log_start_offset,
                                      record_count=dup.last_offset - dup.first_offset + 1,
                                      max_timestamp=dup.timestamp, duplicate=True)
            self._maybe_roll(total, max_ts, nxt - 1, now)
            self._write(iov, total, metas)
            if updated:
                self._producers.commit(updated, nxt)
            else:
                self._producers.map_end_offset = nxt
            if leader_epoch >= 0 and leader_epoch != epochs.latest_epoch:
                epochs.assign(leader_epoch, first)
            self._leo = nxt
            info = AppendInfo(first, nxt - 1, now if lat else -1, self._log_start_offset,
                              count, max_ts, off_max, total)
            self._after_append(count)
        if self._listeners:
            self._notify()
        return info

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches replicated from the leader with their offsets as given.

        Batches must start at or after the LEO (a gap is allowed: the leader compacted or
        moved its start); epochs and producer state follow the batches."""
        mv = records if isinstance(records, memoryview) else memoryview(records)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        batches = _parse_and_validate(mv, None, False)
        if not batches:
            return AppendInfo(-1, -1, -1, self._log_start_offset)
        now = self._time_ms()
        with self._lock:
            self._check_open()
            expected = self._leo
            metas: list[tuple[int, int, int, int]] = []
            epochs: list[tuple[int, int]] = []
            pbatches: list[ProducerBatch] = []
            max_ts, off_max, count = -1, -1, 0
            for pos, size, lod, bmax, pid, pepoch, bseq, attrs, n in batches:
                base, ple = _I64.unpack_from(mv, pos)[0], struct.unpack_from(">i", mv, pos + 12)[0]
                if base < expected:
                    raise UnexpectedAppendOffsetError(
                        f"{self.topic}-{self.partition}: batch at offset {base} is below the "
                        f"expected offset {expected}")
                last = base + lod
                metas.append((base, last, size, bmax))
                if bmax > max_ts:
                    max_ts, off_max = bmax, last
                if ple >= 0:
                    epochs.append((ple, base))
                if pid >= 0:
                    pbatches.append(ProducerBatch(
                        pid, pepoch, bseq, _add_seq(bseq, lod) if bseq >= 0 else -1, base, last,
                        bmax, bool(attrs & TRANSACTIONAL_MASK), bool(attrs & CONTROL_MASK)))
                count += n
                expected = last + 1
            first = metas[0][0]
            if self._segments[-1].size == 0 and first > self._leo:
                # nothing written yet where the leader's data starts: start the segment there
                self._replace_empty_active(first)
            self._maybe_roll(len(mv), max_ts, expected - 1, now, base_offset=first)
            self._write([mv], len(mv), metas)
            for b in pbatches:
                self._producers.replay(b)
            self._producers.map_end_offset = expected
            for ple, base in epochs:
                if ple > self._epochs.latest_epoch:
                    self._epochs.assign(ple, base)
            self._leo = expected
            info = AppendInfo(first, expected - 1, -1, self._log_start_offset, count, max_ts,
                              off_max, len(mv))
            self._after_append(count)
        self._notify()
        return info

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
            try:
                os.ftruncate(seg.fd, before)
                seg.size = before
            except OSError:
                pass
            raise KafkaStorageError(f"write to {seg.log_path} failed: {exc}") from exc

    def _after_append(self, count: int) -> None:
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, incoming: int, max_ts: int, last_offset: int, now: int, *,
                    base_offset: int | None = None) -> None:
        seg = self._segments[-1]
        cfg = self.config
        if seg.should_roll(segment_bytes=cfg.segment_bytes, segment_ms=cfg.segment_ms,
                           jitter_ms=self._roll_jitter_ms, incoming_bytes=incoming,
                           incoming_max_ts=max_ts if max_ts >= 0 else now,
                           incoming_last_offset=last_offset, now_ms=now):
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

        Below the log start or above the LEO raises OffsetOutOfRangeError; == LEO is empty."""
        with self._lock:
            self._check_open()
            leo = self._leo
            info = FetchDataInfo(start_offset, start_offset, [], 0, self._hw,
                                 self._log_start_offset, leo, self._hw)
            if start_offset < self._log_start_offset or start_offset > leo:
                raise OffsetOutOfRangeError(
                    f"offset {start_offset} out of range [{self._log_start_offset}, {leo}] "
                    f"for {self.topic}-{self.partition}")
            limit_offset = leo if max_offset is None else min(max_offset, leo)
            if start_offset >= limit_offset:
                return info
            remaining = max_bytes
            i = max(0, bisect_right(self._segments, start_offset, key=_BASE) - 1)
            offset = start_offset
            while i < len(self._segments) and offset < limit_offset:
                seg = self._segments[i]
                i += 1
                readable_end = seg.size if seg.corrupt_position is None else seg.corrupt_position
                if seg.corrupt_offset is not None and offset >= seg.corrupt_offset and (
                        i >= len(self._segments) or offset < self._segments[i].base_offset):
                    raise SegmentCorruptError(
                        f"offset {offset} of {self.topic}-{self.partition} lies in a corrupt "
                        f"range of {seg.log_path}")
                first = seg.find_batch(offset, 0, readable_end)
                if first is None:
                    continue
                if first.base_offset >= limit_offset:
                    break
                start_pos = first.position
                end_pos, next_off = readable_end, seg.next_offset
                if limit_offset < seg.next_offset:
                    stop = seg.find_batch(limit_offset, start_pos, readable_end)
                    if stop is not None:  # a batch holding the limit is not returned
                        end_pos, next_off = stop.position, stop.base_offset
                want_end = start_pos + remaining
                if want_end < end_pos:
                    if first.size > remaining:  # not even the first batch fits: no scan
                        cut_pos, cut_off = start_pos, first.base_offset
                    else:
                        cut_pos, cut_off = self._cut(seg, start_pos, want_end, end_pos)
                    if cut_pos == start_pos:
                        if info.slices or not min_one_message:
                            break
                        cut_pos, cut_off = start_pos + first.size, first.last_offset + 1
                        if cut_pos > end_pos:
                            break
                    end_pos, next_off = cut_pos, cut_off
                if end_pos <= start_pos:
                    break
                size = end_pos - start_pos
                info.slices.append(FileSlice(seg.log_path, start_pos, size, seg.fd))
                info.size += size
                remaining -= size
                offset = next_off
                info.next_offset = next_off
                if remaining <= 0 or end_pos < readable_end:
                    break
                if seg.corrupt_position is not None:
                    break
            return info

    @staticmethod
    def _cut(seg: LogSegment, start_pos: int, want_end: int, end_pos: int) -> tuple[int, int]:
        """The last batch boundary <= ``want_end`` (and the offset after it), scanning from
        the nearest index entry, so the scan is bounded by ~index.interval.bytes."""
        scan_from = max(start_pos, seg.offset_index.floor_position(want_end))
        cut_pos, cut_off = scan_from, -1
        for b in seg.iter_headers(scan_from, end_pos):
            if b.position + b.size > want_end:
                cut_off = b.base_offset
                break
            cut_pos = b.position + b.size
            cut_off = b.last_offset + 1
        if cut_off < 0:
            cut_off = seg.next_offset
        return cut_pos, cut_off

    # ================================================================== time lookups
    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: earliest offset whose record timestamp >= ``timestamp``; the
        special values -1 (latest = LEO; the broker clamps to HW/LSO), -2 (earliest),
        -3 (max timestamp), -4 (earliest local), -5 (latest tiered: None until a remote tier
        exists). None when no record qualifies."""
        with self._lock:
            self._check_open()
            if timestamp == EARLIEST_TIMESTAMP:
                o = self._log_start_offset
                return TimestampAndOffset(_NO_TS, o, self._epochs.epoch_for_offset(o))
            if timestamp == EARLIEST_LOCAL_TIMESTAMP:
                o = max(self._log_start_offset, self.local_log_start_offset)
                return TimestampAndOffset(_NO_TS, o, self._epochs.epoch_for_offset(o))
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(_NO_TS, self._leo, self._epochs.latest_epoch)
            if timestamp == LATEST_TIERED_TIMESTAMP:
                return None  # KIP-1005: no offset while tiered storage is off
            if timestamp == MAX_TIMESTAMP:
                best = None
                for seg in self._segments:
                    if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                        best = seg
                if best is None:
                    return None
                b = best.find_batch(best.offset_of_max_timestamp)
                if b is None:
                    return None
                return self._record_at_or_after(best, b.position, best.max_timestamp, exact=True)
            if timestamp < 0:
                return None
            for seg in self._segments:
                if seg.max_timestamp < timestamp or seg.next_offset <= self._log_start_offset:
                    continue
                _ts, toff = seg.time_index.lookup(timestamp)
                _o, pos = seg.offset_index.lookup(max(toff, self._log_start_offset))
                found = self._record_at_or_after(seg, pos, timestamp)
                if found is not None:
                    return found
            return None

    def _record_at_or_after(self, seg: LogSegment, pos: int, timestamp: int,
                            exact: bool = False) -> TimestampAndOffset | None:
        from sparklog.protocol.records import decode_batch

        for b in seg.iter_headers(pos):
            if b.max_timestamp < timestamp or b.last_offset < self._log_start_offset:
                continue
            batch = decode_batch(seg.read_batch_bytes(b.position, b.size))
            for r in batch.records:
                ts = r.timestamp if r.timestamp is not None else -1
                if (ts == timestamp if exact else ts >= timestamp) and r.offset >= self._log_start_offset:
                    return TimestampAndOffset(ts, r.offset, self._epochs.epoch_for_offset(r.offset))
        return None

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

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        with self._lock:
            if offset <= self._hw:
                return False
        self.update_high_watermark(offset)
        return True

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
            if leader_epoch < 0 or leader_end_offset < 0:
                return self._hw  # leader knows no epochs: the pre-KIP-101 fallback
            if leader_epoch == self._epochs.latest_epoch:
                return min(leader_end_offset, self._leo)
            epoch, end = self._epochs.end_offset_for(leader_epoch, self._leo)
            if epoch != leader_epoch or end < 0:
                # we do not have the leader's epoch: fall back to our end of the largest
                # epoch below it, bounded by the leader's end
                return min(leader_end_offset, self._leo if end < 0 else end)
            return min(leader_end_offset, end)

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: remove every offset >= ``offset``. True when data went."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            if offset >= self._leo:
                return False
            if offset < self._log_start_offset:
                self._truncate_fully_locked(offset)
                return True
            log.info("%s-%d: truncating from %d to %d", self.topic, self.partition,
                     self._leo, offset)
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                seg = self._segments.pop()
                seg.delete_files()
            seg = self._segments[-1]
            seg.truncate_to(offset)
            self._leo = seg.next_offset if seg.size else max(seg.base_offset, 0)
            if seg.size == 0:
                self._leo = seg.base_offset
            self._hw = min(self._hw, self._leo)
            self._recovery_point = min(self._recovery_point, self._leo)
            self._epochs.truncate_from_end(self._leo)
            self._producers.delete_snapshots_from(self._leo + 1)
            self._rebuild_producer_state()
        self._notify()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and restart the log empty at ``offset`` (follower far behind)."""
        with self._lock:
            self._check_open()
            self._truncate_fully_locked(offset)
        self._notify()

    def _truncate_fully_locked(self, offset: int) -> None:
        for seg in self._segments:
            seg.delete_files()
        self._segments = [self._new_segment(offset)]
        self._leo = self._hw = self._log_start_offset = self._recovery_point = offset
        self._epochs.clear()
        self._producers.delete_all_snapshots()
        self._producers.producers = {}
        self._producers.map_end_offset = offset

    # ================================================================== retention
    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention (``retention.ms``, ``retention.bytes``, log start offset): delete
        whole sealed segments wholly below the HW, oldest first. Returns how many went."""
        now = self._time_ms() if now_ms is None else now_ms
        cfg = self.config
        with self._lock:
            self._check_open()
            segs = self._segments
            doomed = 0
            total = sum(s.size for s in segs)
            excess = total - cfg.retention_bytes if cfg.delete and cfg.retention_bytes >= 0 else 0
            while doomed < len(segs) - 1:
                seg, nxt = segs[doomed], segs[doomed + 1]
                if nxt.base_offset > self._hw:
                    break
                below_start = nxt.base_offset <= self._log_start_offset
                by_time = (cfg.delete and cfg.retention_ms >= 0
                           and now - self._segment_timestamp(seg) > cfg.retention_ms)
                by_size = excess > 0 and excess - seg.size >= 0
                if not (below_start or by_time or by_size):
                    break
                excess -= seg.size
                doomed += 1
            if doomed:
                self._delete_segments_locked(doomed, "retention")
            return doomed

    def _segment_timestamp(self, seg: LogSegment) -> int:
        if seg.max_timestamp >= 0:
            return seg.max_timestamp
        try:
            return int(os.stat(seg.log_path).st_mtime * 1000)
        except OSError:
            return self._time_ms()

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
            doomed = 0
            while doomed < len(self._segments) - 1 and \
                    self._segments[doomed + 1].base_offset <= self._log_start_offset:
                doomed += 1
            if doomed:
                self._delete_segments_locked(doomed, "log start offset")
            return self._log_start_offset

    def _delete_segments_locked(self, n: int, reason: str) -> None:
        doomed = self._segments[:n]
        del self._segments[:n]
        new_start = self._segments[0].base_offset
        if new_start > self._log_start_offset:
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
            self._pending_deletes.append((deadline, seg))
        if self.config.file_delete_delay_ms == 0:
            self.delete_pending_files(force=True)

    def delete_pending_files(self, now_ms: int | None = None, force: bool = False) -> int:
        """Remove ``.deleted`` segments whose ``file.delete.delay.ms`` passed."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            due = [(d, s) for d, s in self._pending_deletes if force or d <= now]
            self._pending_deletes = [(d, s) for d, s in self._pending_deletes
                                     if not (force or d <= now)]
        for _d, seg in due:
            seg.delete_files()
        return len(due)

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

    def _replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap ``old`` (consecutive sealed segments) for ``new`` (named ``.cleaned``),
        crash-safely: .cleaned -> .swap, old -> .deleted, .swap -> live."""
        idx = self._segments.index(old[0])
        if self._segments[idx : idx + len(old)] != old or idx + len(old) >= len(self._segments):
            raise KafkaStorageError("segments changed under the cleaner")
        new.rename_suffix(SWAP_SUFFIX)
        for seg in old:
            seg.close_fd_only()
            if seg.base_offset == new.base_offset:
                # same name as the swap's target: remove now, the swap replaces it
                for p in (seg.log_path, seg.offset_index.path, seg.time_index.path):
                    try:
                        os.remove(p)
                    except FileNotFoundError:
                        pass
            else:
                seg.rename_suffix(DELETED_SUFFIX)
                seg.delete_files()
        new.rename_suffix("")
        self._segments[idx : idx + len(old)] = [new]


# ====================================================================== helpers
_INT32_MAX = 0x7FFFFFFF


def _add_seq(seq: int, inc: int) -> int:
    if seq > _INT32_MAX - inc:
        return inc - (_INT32_MAX - seq) - 1
    return seq + inc


def _iter_full_headers(seg: LogSegment, start_pos: int):
    """(position, full header tuple) for each batch from ``start_pos``."""
    for b in seg.iter_headers(start_pos):
        yield b.position, _HEADER.unpack(os.pread(seg.fd, BATCH_HEADER_SIZE, b.position))


def _stamp_log_append_time(hdr: bytearray, body, now: int) -> None:
    """LogAppendTime: set the timestamp-type bit and maxTimestamp, then the CRC (both fields
    are inside the CRC range); the records themselves are untouched."""
    _I16.pack_into(hdr, 21, _I16.unpack_from(hdr, 21)[0] | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(hdr, 35, now)
    _U32.pack_into(hdr, 17, crc32c(body, crc32c(memoryview(hdr)[21:])))


def _parse_and_validate(mv: memoryview, max_message_bytes: int | None, client: bool,
                        now: int = 0, ts_before: int = -1, ts_after: int = -1) -> list[tuple]:
    """Per batch: (pos, size, lastOffsetDelta, maxTimestamp, producerId, producerEpoch,
    baseSequence, attributes, recordCount) after CRC and header checks (and, when
    ``ts_before``/``ts_after`` >= 0, the message.timestamp.before/after.max.ms checks).

    The common case is one combined condition per batch; only a failing batch goes through
    ``_raise_invalid`` to find which rule it broke."""
    out = []
    n = len(mv)
    pos = 0
    unpack = _HEADER.unpack_from
    limit = 0x7FFFFFFF if max_message_bytes is None else max_message_bytes
    check_ts = ts_before >= 0
    while pos < n:
        if n - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated batch at position {pos}: {n - pos} bytes, header needs {BATCH_HEADER_SIZE}")
        hdr = unpack(mv, pos)
        _b, length, _e, magic, crc, attrs, lod, _bt, max_ts, pid, pepoch, bseq, count = hdr
        size = LOG_OVERHEAD + length
        ok = (length >= 49 and pos + size <= n and magic == 2 and size <= limit
              and attrs & 0x07 <= 4 and lod >= 0 and count >= 0)
        if ok and client:
            ok = (count > 0 and lod + 1 == count and not attrs & CONTROL_MASK
                  and (pid < 0 or bseq >= 0))
            if ok and check_ts and max_ts >= 0:
                ok = max_ts - now <= ts_after and now - max_ts <= ts_before
        if not ok:
            _raise_invalid(hdr, pos, n, limit, client, now, ts_before, ts_after)
        if crc32c(mv[pos + 21 : pos + size]) != crc:
            raise CorruptRecordError(f"batch at position {pos}: CRC mismatch")
        out.append((pos, size, lod, max_ts, pid, pepoch, bseq, attrs, count))
        pos += size
    return out


def _raise_invalid(hdr: tuple, pos: int, n: int, limit: int, client: bool, now: int,
                   before: int, after: int) -> None:
    _b, length, _e, magic, _c, attrs, lod, _bt, max_ts, pid, _pe, bseq, count = hdr
    size = LOG_OVERHEAD + length
    if length < 49 or pos + size > n:
        raise CorruptRecordError(f"batch at position {pos} declares {size} bytes, {n - pos} present")
    if magic != 2:
        raise InvalidRecordError(f"batch at position {pos} has magic {magic}; only 2 is supported")
    if size > limit:
        raise RecordTooLargeError(f"batch of {size} bytes exceeds max.message.bytes {limit}")
    if attrs & 0x07 > 4:
        raise UnsupportedCompressionError(f"compression id {attrs & 0x07}")
    if lod < 0 or count < 0:
        raise InvalidRecordError(f"batch at position {pos}: invalid offset delta/count")
    if client:
        if count <= 0:
            raise InvalidRecordError("Invalid reported count for record batch: 0")
        if lod + 1 != count:
            raise InvalidRecordError("Inconsistent batch offset range and record count")
        if attrs & CONTROL_MASK:
            raise InvalidRecordError("Clients are not allowed to write control records")
        if pid >= 0 and bseq < 0:
            raise InvalidRecordError("Invalid sequence number")
        if max_ts - now > after:
            raise InvalidTimestampError(
                f"timestamp {max_ts} is more than message.timestamp.after.max.ms={after} ahead")
        raise InvalidTimestampError(
            f"timestamp {max_ts} is more than message.timestamp.before.max.ms={before} old")
    raise InvalidRecordError(f"invalid batch at position {pos}")


def _check_keys(mv: memoryview, batches: list[tuple]) -> None:
    """Compacted topics need a key on every record (this decodes: compacted topics only)."""
    from sparklog.protocol.records import decode_batch

    for pos, *_ in batches:
        for r in decode_batch(mv, pos, verify_crc=False).records:
            if r.key is None:
                raise InvalidRecordError("Compacted topic cannot accept message without key")
