"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex``.

The base offset is <= the least offset in this segment and > every offset in earlier
segments; files are named by it, zero-padded to 20 digits so ``ls`` sorts them numerically.
The ``.log`` file is concatenated RecordBatch v2 bytes exactly as a Kafka broker stores them
(the batch header layout is in ``sparklog.protocol.batch_header``): no framing of our own,
no padding. Only the active (last) segment is appended to, with one ``pwritev`` per append;
sealed segments are immutable until retention or compaction replaces them whole.

This class is not thread-safe; the owning ``PartitionLog`` holds its lock around every call
that changes state. Reads of bytes below ``size`` are safe without it, because appends never
rewrite bytes already written.
"""

from __future__ import annotations

import logging
import operator
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from sparklog.protocol.batch_header import (
    BATCH_HEADER_SIZE,
    HEADER,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    BatchView,
    batch_size,
    read_header,
)
from sparklog.protocol.errors import CorruptRecordError, InvalidRecordError

from .errors import CorruptIndexError
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .txn_index import TransactionIndex

__all__ = [
    "LogSegment",
    "BatchPosition",
    "BY_BASE_OFFSET",
    "SegmentRead",
    "RecoveryResult",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "DELETED_SUFFIX",
    "filename_prefix",
    "parse_segment_name",
]

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"

_INT32_MAX = 0x7FFFFFFF
_IOV_MAX = 1024
_SCAN_CHUNK = 65536
_SCAN_MIN = 512
_RECOVER_CHUNK = 4 << 20

BY_BASE_OFFSET = operator.attrgetter("base_offset")  # bisect key: segments sort by base offset


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """``00000000000000000042.log.swap`` -> (42, '.log.swap'); None for other files."""
    head, dot, rest = name.partition(".")
    if not dot or len(head) != 20 or not head.isdigit():
        return None
    return int(head), "." + rest


class BatchPosition(NamedTuple):
    """Where a batch lies in the segment file, and the header fields reads need."""

    position: int
    base_offset: int
    last_offset: int
    size: int
    max_timestamp: int


class SegmentRead(NamedTuple):
    """What ``LogSegment.read`` found: ``size`` bytes of whole batches from ``position``,
    ``next_offset`` being the offset after them. ``size`` 0: nothing to return here and
    nothing after it (the next batch is at or past the limit, or does not fit)."""

    position: int
    size: int
    next_offset: int
    to_end: bool  # the bytes reach the end of what the segment can serve


# NamedTuple(...) without its Python-level __new__: a BatchPosition per header scanned
_new_tuple = tuple.__new__


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_bytes: int
    dropped_bytes: int
    error: str | None


class _DamagedBatch(Exception):
    """``_checked_batches`` met a batch that is not whole or not valid at ``position``."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason


class LogSegment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_entries: int = 1310720,
        suffix: str = "",
        created_ms: int | None = None,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.suffix = suffix
        prefix = os.path.join(directory, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX + suffix
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX + suffix, base_offset, max_index_entries)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX + suffix, base_offset, max_index_entries)
        self.txn_index = TransactionIndex(prefix + TXN_INDEX_SUFFIX + suffix)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = -1
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self.bytes_since_last_index = 0
        # set when recovery found a bad batch in a sealed segment: bytes from here are never served
        self.corrupt_position: int | None = None
        self.corrupt_offset: int | None = None
        self.closed = False

    # ------------------------------------------------------------------ state
    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    def largest_timestamp(self) -> int:
        """The largest batch max-timestamp in this segment (-1 when unknown / empty)."""
        return self.max_timestamp

    def retention_timestamp(self, fallback_ms: int) -> int:
        """What ``retention.ms`` measures: the largest timestamp, else the file's mtime,
        else ``fallback_ms`` (the caller's clock: a segment whose file is gone is not old)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except OSError:
            return fallback_ms

    # ------------------------------------------------------------------ append
    def append(self, buffers: list, total: int, metas: list[tuple[int, int, int, int]]) -> int:
        """Write ``buffers`` (``total`` bytes) at the end; ``metas`` lists per batch
        (base offset, last offset, size, max timestamp). Returns the start position."""
        start = pos = self.size
        if len(buffers) > _IOV_MAX or os.pwritev(self.fd, buffers, start) != total:
            self._write_at(buffers, total, start)
        interval = self.index_interval_bytes
        oi, ti = self.offset_index, self.time_index
        # per batch, on locals (written back once): this loop runs on every append
        seg_max_ts, seg_max_ts_offset = self.max_timestamp, self.offset_of_max_timestamp
        unindexed = self.bytes_since_last_index
        if pos == 0 and self.first_batch_timestamp < 0:
            self.first_batch_timestamp = metas[0][3]
        for _base, last, size, max_ts in metas:
            if max_ts > seg_max_ts:
                seg_max_ts, seg_max_ts_offset = max_ts, last
            if unindexed > interval:
                oi.append(last, pos)
                ti.maybe_append(seg_max_ts, seg_max_ts_offset)
                unindexed = 0
            unindexed += size
            pos += size
        self.max_timestamp, self.offset_of_max_timestamp = seg_max_ts, seg_max_ts_offset
        self.bytes_since_last_index = unindexed
        self.size = pos
        self.next_offset = metas[-1][1] + 1
        return start

    def _write_at(self, buffers: list, total: int, position: int) -> None:
        """Slow path: many iovecs or a short write (rewrites from ``position``: pwrite is
        idempotent, so a partly written first attempt is simply overwritten)."""
        if len(buffers) <= _IOV_MAX:
            n = 0
        else:
            n = 0
            for i in range(0, len(buffers), _IOV_MAX):
                part = buffers[i : i + _IOV_MAX]
                want = sum(len(b) for b in part)
                got = os.pwritev(self.fd, part, position + n)
                n += got
                if got != want:
                    break
            if n == total:
                return
        # short write (rare): finish with plain writes of the remainder
        rest = memoryview(b"".join(bytes(b) for b in buffers))[n:]
        pos = position + n
        while rest:
            w = os.pwrite(self.fd, rest, pos)
            if w <= 0:
                raise OSError(f"short write to {self.log_path}")
            rest = rest[w:]
            pos += w

    def should_roll(self, segment_bytes: int, segment_ms: int, jitter_ms: int,
                    incoming_bytes: int, incoming_max_ts: int, incoming_last_offset: int,
                    now_ms: int) -> bool:
        if self.size == 0:
            return False
        if self.size > segment_bytes - incoming_bytes:
            return True
        if self.first_batch_timestamp >= 0:
            waited = incoming_max_ts - self.first_batch_timestamp
        else:
            waited = now_ms - self.created_ms
        if waited > segment_ms - jitter_ms:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return incoming_last_offset - self.base_offset > _INT32_MAX

    # ------------------------------------------------------------------ reads
    def iter_headers(self, start_pos: int = 0, end_pos: int | None = None) -> Iterator[BatchPosition]:
        """Batch headers from ``start_pos`` (a batch boundary) up to ``end_pos``; stops
        quietly at an incomplete tail (recovery, not reads, judges those).

        Reads start small (one header of a big batch costs one 512-byte pread) and double
        while batches turn out small, so scans stay cheap for both shapes."""
        end = self.size if end_pos is None else end_pos
        pos = start_pos
        fd = self.fd
        unpack = HEADER.unpack_from
        new = _new_tuple
        chunk_size = _SCAN_MIN
        while pos + BATCH_HEADER_SIZE <= end:
            chunk = os.pread(fd, min(chunk_size, end - pos), pos)
            i, n = 0, len(chunk)
            if n < BATCH_HEADER_SIZE:
                return
            while i + BATCH_HEADER_SIZE <= n:
                base, length, _ple, _m, _c, _a, lod, _bt, max_ts = unpack(chunk, i)[:9]
                size = LOG_OVERHEAD + length
                if length < MIN_BATCH_LENGTH or pos + i + size > end:
                    return
                yield new(BatchPosition, (pos + i, base, base + lod, size, max_ts))
                i += size
            if i <= n and chunk_size < _SCAN_CHUNK:
                chunk_size *= 2  # several headers per read paid off: read more next time
            pos += i

    def find_batch(self, offset: int, start_pos: int = 0, end_pos: int | None = None) -> BatchPosition | None:
        """The first batch whose last offset >= ``offset`` (None when there is none)."""
        _, ipos = self.offset_index.lookup(offset)
        for b in self.iter_headers(max(ipos, start_pos), end_pos):
            if b.last_offset >= offset:
                return b
        return None

    def read(self, offset: int, max_bytes: int, limit_offset: int,
             min_one_message: bool) -> SegmentRead | None:
        """Whole batches from the one holding ``offset``: at most ``max_bytes`` (more only
        when ``min_one_message`` and the first batch alone is larger), none holding
        ``limit_offset`` or later, none from a corrupt range. None when no batch here ends
        at or after ``offset``."""
        readable_end = self.size if self.corrupt_position is None else self.corrupt_position
        first = self.find_batch(offset, 0, readable_end)
        if first is None:
            return None
        start = first.position
        if first.base_offset >= limit_offset:
            return _new_tuple(SegmentRead, (start, 0, offset, False))
        end, next_offset = readable_end, self.next_offset
        if limit_offset < self.next_offset:
            stop = self.find_batch(limit_offset, start, readable_end)
            if stop is not None:  # a batch holding the limit is not returned
                end, next_offset = stop.position, stop.base_offset
        want_end = start + max_bytes
        if want_end < end:
            if first.size > max_bytes:  # not even the first batch fits: no scan
                cut, cut_offset = start, first.base_offset
            else:
                cut, cut_offset = self._last_boundary(start, want_end, end)
            if cut == start:
                if not min_one_message:
                    return _new_tuple(SegmentRead, (start, 0, offset, False))
                cut, cut_offset = start + first.size, first.last_offset + 1
                if cut > end:
                    return _new_tuple(SegmentRead, (start, 0, offset, False))
            end, next_offset = cut, cut_offset
        if end <= start:
            return _new_tuple(SegmentRead, (start, 0, offset, False))
        return _new_tuple(SegmentRead, (start, end - start, next_offset, end >= readable_end))

    def _last_boundary(self, start_pos: int, want_end: int, end_pos: int) -> tuple[int, int]:
        """The last batch boundary <= ``want_end`` (and the offset after it), scanning from
        the nearest index entry, so the scan is bounded by ~index.interval.bytes."""
        scan_from = max(start_pos, self.offset_index.floor_position(want_end))
        cut_pos, cut_off = scan_from, -1
        for b in self.iter_headers(scan_from, end_pos):
            if b.position + b.size > want_end:
                cut_off = b.base_offset
                break
            cut_pos = b.position + b.size
            cut_off = b.last_offset + 1
        if cut_off < 0:
            cut_off = self.next_offset
        return cut_pos, cut_off

    def find_record(self, position: int, timestamp: int, min_offset: int,
                    exact: bool = False) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record from ``position`` on, at or after
        ``min_offset``, whose timestamp is >= ``timestamp`` (== with ``exact``). Only
        batches whose max timestamp qualifies are decoded."""
        from sparklog.protocol.records import decode_batch

        for b in self.iter_headers(position):
            if b.max_timestamp < timestamp or b.last_offset < min_offset:
                continue
            for r in decode_batch(self.read_batch_bytes(b.position, b.size)).records:
                ts = r.timestamp if r.timestamp is not None else -1
                if (ts == timestamp if exact else ts >= timestamp) and r.offset >= min_offset:
                    return ts, r.offset
        return None

    def read_batch_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def read_header(self, position: int) -> BatchHeader | None:
        """The header of the batch at ``position`` (None past the end of the file)."""
        data = os.pread(self.fd, BATCH_HEADER_SIZE, position)
        return read_header(data) if len(data) == BATCH_HEADER_SIZE else None

    # ------------------------------------------------------------------ load / recover
    def load(self, next_base: int) -> None:
        """Open a sealed segment written before (trusted: below the recovery point; the
        next segment starts at ``next_base``). Indexes that fail their sanity check are
        rebuilt from the log."""
        try:
            self.offset_index.load(self.size, next_base)
            self.time_index.load(next_base)
        except CorruptIndexError as exc:
            log.warning("%s; rebuilding indexes of %s", exc, self.log_path)
            self.recover(truncate=False)
            return
        # the tail after the last index entry tells the next offset (and late max timestamp)
        n = self.offset_index.entries
        start = self.offset_index.entry(n - 1)[1] if n else 0
        ts, ts_off = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = (ts, ts_off) if ts >= 0 else (-1, -1)
        last_pos = start
        next_offset = self.base_offset
        end_seen = start
        for b in self.iter_headers(start):
            next_offset = b.last_offset + 1
            if b.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = b.max_timestamp, b.last_offset
            last_pos = b.position
            end_seen = b.position + b.size
        if n and not self._entry_is_batch_start(*self.offset_index.entry(n - 1)):
            log.warning("last index entry of %s does not match its log; rebuilding", self.log_path)
            self.recover(truncate=False)
            return
        if end_seen != self.size or (n and next_offset == self.base_offset):
            log.warning("index of %s does not match its log; rebuilding", self.log_path)
            self.recover(truncate=False)
            return
        self.next_offset = next_offset if self.size else self.base_offset
        self.bytes_since_last_index = self.size - (start if n else 0)
        del last_pos
        self._load_first_timestamp()

    def _entry_is_batch_start(self, offset: int, position: int) -> bool:
        h = self.read_header(position)
        return (h is not None and h.magic == MAGIC_V2 and h.batch_length >= MIN_BATCH_LENGTH
                and h.base_offset <= offset <= h.last_offset)

    def _load_first_timestamp(self) -> None:
        h = self.read_header(0) if self.size >= BATCH_HEADER_SIZE else None
        if h is not None:
            self.first_batch_timestamp = h.max_timestamp

    def _checked_batches(self, end: int) -> Iterator[tuple[int, BatchView]]:
        """(position, view) of each batch from position 0 to ``end``, CRC and header
        checked, read in chunks of at least 4 MiB (a larger batch gets a chunk of its own).
        Raises ``_DamagedBatch`` at the first batch that is not whole or not valid."""
        pos = 0
        want = _RECOVER_CHUNK
        expected_end = end
        while pos < end:
            data = os.pread(self.fd, min(want, end - pos), pos)
            if len(data) < min(want, end - pos):
                end = pos + len(data)  # the file is shorter than ``size`` says
            mv = memoryview(data)
            i, n = 0, len(data)
            want = _RECOVER_CHUNK
            while i < n:
                at = pos + i
                if n - i < LOG_OVERHEAD:
                    if pos + n >= end:
                        raise _DamagedBatch(at, f"truncated batch header at position {at}")
                    break
                size = batch_size(mv, i)
                if size < BATCH_HEADER_SIZE:
                    raise _DamagedBatch(at, f"batch length {size - LOG_OVERHEAD} at position {at}")
                if n - i < size:
                    if at + size > end:
                        raise _DamagedBatch(
                            at, f"torn batch at position {at}: {end - at} of {size} bytes")
                    want = max(_RECOVER_CHUNK, size)
                    break
                try:
                    view = BatchView(mv, i)
                    view.ensure_valid()
                except (CorruptRecordError, InvalidRecordError) as exc:
                    raise _DamagedBatch(at, f"invalid batch at position {at}: {exc}") from None
                yield at, view
                i += size
            pos += i
        if end < expected_end:
            raise _DamagedBatch(end, f"file ends at position {end}, before {expected_end}")

    def recover(self, on_batch: Callable[[BatchView], None] | None = None, *,
                truncate: bool = True, min_offset: int | None = None,
                contiguous: bool = False) -> RecoveryResult:
        """Validate every batch (CRC, lengths, magic, offsets increasing), rebuild both
        indexes, and either truncate at the first invalid batch (``truncate``) or mark the rest
        of the segment unservable. ``on_batch`` sees each valid batch (producer state, epochs)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = self.offset_of_max_timestamp = self.first_batch_timestamp = -1
        self.bytes_since_last_index = 0
        self.corrupt_position = self.corrupt_offset = None
        file_size = os.fstat(self.fd).st_size
        expected = self.base_offset if min_offset is None else max(min_offset, self.base_offset)
        pos = 0  # end of the valid prefix
        error: str | None = None
        interval = self.index_interval_bytes
        try:
            for p, view in self._checked_batches(file_size):
                base, last, max_ts = view.base_offset, view.last_offset, view.max_timestamp
                if (base < expected or (contiguous and base != expected)
                        or last - self.base_offset > _INT32_MAX):
                    error = (f"batch offsets {base}..{last} at position {p} do not follow "
                             f"offset {expected}")
                    break
                if max_ts > self.max_timestamp:
                    self.max_timestamp, self.offset_of_max_timestamp = max_ts, last
                if p == 0:
                    self.first_batch_timestamp = max_ts
                if self.bytes_since_last_index > interval:
                    self.offset_index.append(last, p)
                    self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                    self.bytes_since_last_index = 0
                self.bytes_since_last_index += view.size
                if on_batch is not None:
                    on_batch(view)
                expected = last + 1
                pos = p + view.size
        except _DamagedBatch as damage:
            error = damage.reason
        self.next_offset = expected if pos > 0 else self.base_offset
        dropped = file_size - pos
        if error is not None:
            if truncate:
                log.error("recovering %s: %s; truncating %d bytes at position %d "
                          "(offset %d)", self.log_path, error, dropped, pos, self.next_offset)
                os.ftruncate(self.fd, pos)
            else:
                log.error("segment %s is corrupt from position %d (offset %d): %s; that range "
                          "will not be served", self.log_path, pos, self.next_offset, error)
                self.corrupt_position = pos
                self.corrupt_offset = self.next_offset
        self.size = pos if (error is None or truncate) else file_size
        return RecoveryResult(pos, dropped if error is not None else 0, error)

    def verify(self) -> int | None:
        """Scrub: check every batch (CRC, lengths, offset order) without changing anything.

        Returns the position of the first bad batch and records it in ``corrupt_position``
        (reads stop there), or None when the segment is sound."""
        expected = self.base_offset
        try:
            for p, view in self._checked_batches(self.size):
                if view.base_offset < expected:
                    return self._mark_corrupt(p, expected, "offsets out of order")
                expected = view.next_offset
        except _DamagedBatch as damage:
            return self._mark_corrupt(damage.position, expected, damage.reason)
        return None

    def _mark_corrupt(self, position: int, offset: int, why: str) -> int:
        log.error("segment %s is corrupt at position %d (offset %d): %s; that range will not "
                  "be served", self.log_path, position, offset, why)
        self.corrupt_position = position
        self.corrupt_offset = offset
        return position

    # ------------------------------------------------------------------ truncate
    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset >= ``offset``; returns bytes dropped."""
        b = self.find_batch(offset)
        if b is None:
            return 0
        dropped = self.size - b.position
        os.ftruncate(self.fd, b.position)
        self.size = b.position
        self.offset_index.truncate_to_position(b.position)
        self.time_index.truncate_to(b.base_offset)
        self.txn_index.truncate_to(b.base_offset)
        self.next_offset = b.base_offset if b.position > 0 else self.base_offset
        if self.corrupt_position is not None and self.corrupt_position >= b.position:
            self.corrupt_position = self.corrupt_offset = None
        # recompute what depended on the dropped tail
        self.max_timestamp = self.offset_of_max_timestamp = -1
        for h in self.iter_headers(0):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
        if self.size == 0:
            self.first_batch_timestamp = -1
        self.bytes_since_last_index = self.size - self.offset_index.floor_position(self.size)
        return dropped

    # ------------------------------------------------------------------ lifecycle
    def on_become_inactive(self) -> None:
        """Sealing: record the final max timestamp and write the indexes out."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.flush()
        self.time_index.flush()

    def flush(self, fsync: bool = True) -> None:
        if self.closed:
            return
        if fsync:
            os.fsync(self.fd)
            self.txn_index.flush()
        self.offset_index.flush(fsync)
        self.time_index.flush(fsync)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.offset_index.flush()
            self.time_index.flush()
        finally:
            self.closed = True
            os.close(self.fd)

    def close_fd_only(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)

    def rename_suffix(self, new_suffix: str) -> None:
        """Rename .log/.index/.timeindex/.txnindex from the current suffix to ``new_suffix``."""
        prefix = os.path.join(self.directory, filename_prefix(self.base_offset))
        new_log = prefix + LOG_SUFFIX + new_suffix
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.offset_index.rename(prefix + INDEX_SUFFIX + new_suffix)
        self.time_index.rename(prefix + TIME_INDEX_SUFFIX + new_suffix)
        self.txn_index.rename(prefix + TXN_INDEX_SUFFIX + new_suffix)
        self.suffix = new_suffix

    def delete_files(self) -> None:
        self.close_fd_only()
        for p in (self.log_path, self.offset_index.path, self.time_index.path,
                  self.txn_index.path):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
