"""Idempotent-producer state of one partition (KIP-98) and its ``.snapshot`` files.

Per producer id the log remembers the producer epoch and the sequence ranges and offsets of
the last 5 batches (a producer has at most 5 requests in flight). That is enough to answer a
retried batch with its ORIGINAL offsets and to reject a gap in the sequence.

Snapshot file ``<offset:020d>.snapshot`` (Kafka's format, version 1, big endian); ``offset``
is the log end offset the state covers, so recovery replays batches from there::

    version                   i16 (1)
    crc                       u32  CRC-32C of every byte after this field
    entry count               i32
    entries, each 46 bytes:
      producer id             i64
      producer epoch          i16
      last sequence           i32
      last offset             i64
      offset delta            i32  (last offset - first offset of the last batch)
      timestamp               i64  (max timestamp of the last batch)
      coordinator epoch       i32
      current txn first offset i64 (-1: none)

Like Kafka, a snapshot keeps only each producer's last batch, so after a restart a retry of
that last batch is still recognised; older in-flight retries are treated by sequence rules.

Transactions (KIP-98): a producer's first transactional batch after none (or after a marker)
opens its transaction at that offset (``current_txn_first_offset``); the COMMIT or ABORT
control batch (the marker) closes it and is reported as a ``CompletedTxn`` so the log can
index an aborted one. ``first_unstable_offset`` is the least first offset of the open
transactions: the log's last stable offset never passes it. Invariant: ``ongoing`` maps
exactly the producers whose entry has ``current_txn_first_offset >= 0`` to that offset.
A marker carries no sequence: it moves only the epoch (a newer epoch, from a fenced or
timed-out transaction, starts the producer's sequences over).
Not thread-safe; the PartitionLog lock guards it.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from sparklog.protocol.batch_header import BatchHeader, increment_sequence
from sparklog.protocol.control_records import ControlRecordType
from sparklog.protocol.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)

__all__ = [
    "BatchMetadata",
    "CompletedTxn",
    "ProducerStateEntry",
    "ProducerStateManager",
    "ProducerBatch",
    "SNAPSHOT_SUFFIX",
    "parse_snapshot",
]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = 0x7FFFFFFF
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_VERSION = 1


def _decrement_sequence(seq: int, dec: int) -> int:
    if seq < dec:
        return _INT32_MAX - (dec - seq) + 1
    return seq - dec


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp,
        )

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def add_batch(self, epoch: int, first_seq: int, last_seq: int, first_offset: int,
                  last_offset: int, timestamp: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        self.last_timestamp = timestamp


class CompletedTxn(NamedTuple):
    """A transaction a marker closed: its first data offset and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The header fields producer-state bookkeeping needs from one batch; for a control
    batch, also its record type (``ControlRecordType``; -1 when unread) and coordinator
    epoch."""

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool = False
    is_control: bool = False
    control_type: int = -1
    coordinator_epoch: int = -1

    @classmethod
    def from_header(cls, header: BatchHeader, first_offset: int, max_timestamp: int,
                    marker: tuple[int, int] = (-1, -1)) -> ProducerBatch:
        """The batch ``header`` describes, stored at ``first_offset`` (its base offset once
        assigned) with ``max_timestamp`` (the log-append time under LogAppendTime);
        ``marker`` is a control batch's (record type, coordinator epoch)."""
        h = header
        last_seq = increment_sequence(h.base_sequence, h.last_offset_delta) if h.base_sequence >= 0 else -1
        return cls(h.producer_id, h.producer_epoch, h.base_sequence, last_seq, first_offset,
                   first_offset + h.last_offset_delta, max_timestamp, h.is_transactional,
                   h.is_control, marker[0], marker[1])

    @property
    def is_marker(self) -> bool:
        return self.control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT)


def _apply_data(entry: ProducerStateEntry, b: ProducerBatch) -> None:
    entry.add_batch(b.producer_epoch, b.first_seq, b.last_seq, b.first_offset, b.last_offset,
                    b.max_timestamp)
    if b.is_transactional and entry.current_txn_first_offset < 0:
        entry.current_txn_first_offset = b.first_offset


def _apply_control(entry: ProducerStateEntry, b: ProducerBatch) -> CompletedTxn | None:
    """A marker closes the producer's open transaction (if any) and may bump its epoch."""
    if not b.is_marker:
        return None
    if b.producer_epoch != entry.producer_epoch:
        entry.batches.clear()
        entry.producer_epoch = b.producer_epoch
    entry.coordinator_epoch = b.coordinator_epoch
    entry.last_timestamp = b.max_timestamp
    first = entry.current_txn_first_offset
    if first < 0:
        return None
    entry.current_txn_first_offset = -1
    return CompletedTxn(b.producer_id, first, b.first_offset,
                        b.control_type == ControlRecordType.ABORT)


def parse_snapshot(data: bytes) -> dict[int, ProducerStateEntry]:
    """The producers a snapshot's bytes hold (the file's, or an uploaded copy's);
    raises CorruptRecordError when they do not parse."""
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptRecordError("snapshot too short")
    version, crc = _HEAD.unpack_from(data, 0)
    if version != _VERSION:
        raise CorruptRecordError(f"snapshot version {version}")
    body = memoryview(data)[_HEAD.size :]
    if crc32c(body) != crc:
        raise CorruptRecordError("snapshot CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise CorruptRecordError("snapshot length mismatch")
    out: dict[int, ProducerStateEntry] = {}
    for pid, epoch, last_seq, last_off, delta, ts, coord, txn in _ENTRY.iter_unpack(body[_COUNT.size :]):
        e = ProducerStateEntry(pid, epoch, coordinator_epoch=coord,
                               current_txn_first_offset=txn, last_timestamp=ts)
        if last_off >= 0:
            first_seq = _decrement_sequence(last_seq, delta) if last_seq >= 0 else -1
            e.batches.append(BatchMetadata(first_seq, last_seq, last_off - delta, last_off, ts))
        out[pid] = e
    return out


class ProducerStateManager:
    def __init__(self, log_dir: str, producer_id_expiration_ms: int = 86400000) -> None:
        self.log_dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn
        self.map_end_offset = 0  # state reflects every batch below this offset

    # -- validation (no mutation)
    def prepare(
        self, batches: list[ProducerBatch], origin: str
    ) -> tuple[dict[int, ProducerStateEntry], BatchMetadata | None, list[CompletedTxn]]:
        """Check ``batches`` in order against the current state.

        Returns (updated entries to commit after the write, duplicate, transactions the
        batches' markers close). When a client batch is a retry of one of the last 5, the
        duplicate's metadata is returned and nothing must be written. Raises
        InvalidProducerEpochError / OutOfOrderSequenceError."""
        updated: dict[int, ProducerStateEntry] = {}
        completed: list[CompletedTxn] = []
        client = origin == "client"
        for b in batches:
            pid = b.producer_id
            if pid < 0:
                continue
            current = self.producers.get(pid)
            if client and current is not None and pid not in updated:
                dup = current.find_duplicate(b.producer_epoch, b.first_seq, b.last_seq)
                if dup is not None:
                    return {}, dup, []
            entry = updated.get(pid)
            if entry is None:
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                updated[pid] = entry
            if b.is_control:
                if b.producer_epoch < entry.producer_epoch and origin != "replication":
                    raise InvalidProducerEpochError(
                        f"marker epoch {b.producer_epoch} of producer {pid} is older than "
                        f"the current epoch {entry.producer_epoch}")
                done = _apply_control(entry, b)
                if done is not None:
                    completed.append(done)
                continue
            self._check(entry, current, b, origin)
            _apply_data(entry, b)
        return updated, None, completed

    @staticmethod
    def _check(entry: ProducerStateEntry, current: ProducerStateEntry | None,
               b: ProducerBatch, origin: str) -> None:
        if b.producer_epoch < entry.producer_epoch:
            msg = (
                f"epoch {b.producer_epoch} of producer {b.producer_id} at offset "
                f"{b.first_offset} is older than the current epoch {entry.producer_epoch}"
            )
            if origin == "replication":
                log.warning("%s (accepted from the leader)", msg)
                return
            raise InvalidProducerEpochError(msg)
        if origin != "client":
            return
        if b.producer_epoch != entry.producer_epoch:
            if b.first_seq != 0 and entry.producer_epoch != -1:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {b.producer_id}: "
                    f"{b.producer_epoch} (request epoch), {b.first_seq} (seq. number), "
                    f"{entry.producer_epoch} (current producer epoch)"
                )
            return
        last_seq = entry.last_seq
        # no known epoch: state was expired or deleted with the data -> accept any sequence
        if entry.producer_epoch == -1 or not entry.batches:
            return
        if not _in_sequence(last_seq, b.first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {b.producer_id} at offset "
                f"{b.first_offset}: {b.first_seq} (incoming seq. number), {last_seq} "
                "(current end sequence number)"
            )

    def commit(self, updated: dict[int, ProducerStateEntry], end_offset: int) -> None:
        self.producers.update(updated)
        for pid, e in updated.items():
            self._track(pid, e)
        self.map_end_offset = end_offset

    def _track(self, pid: int, entry: ProducerStateEntry) -> None:
        if entry.current_txn_first_offset >= 0:
            self.ongoing[pid] = entry.current_txn_first_offset
        else:
            self.ongoing.pop(pid, None)

    def replay(self, b: ProducerBatch) -> CompletedTxn | None:
        """Apply a batch already in the log (recovery, follower): no checks. Returns the
        transaction its marker closed, if any."""
        done = None
        if b.producer_id >= 0:
            entry = self.producers.get(b.producer_id)
            if entry is None:
                entry = self.producers[b.producer_id] = ProducerStateEntry(b.producer_id)
            if b.is_control:
                done = _apply_control(entry, b)
            elif b.producer_epoch >= entry.producer_epoch:
                _apply_data(entry, b)
            self._track(b.producer_id, entry)
        self.map_end_offset = max(self.map_end_offset, b.last_offset + 1)
        return done

    @property
    def first_unstable_offset(self) -> int | None:
        """The least first offset of the open transactions (None: none is open)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO once ``txn`` completed (the value its ``.txnindex`` entry records)."""
        first = self.first_unstable_offset
        return txn.last_offset + 1 if first is None else min(first, txn.last_offset + 1)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # -- maintenance
    def remove_expired(self, now_ms: int) -> int:
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0
            and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch was deleted, and snapshots below the start."""
        gone = [pid for pid, e in self.producers.items() if 0 <= e.last_offset < log_start_offset]
        for pid in gone:
            del self.producers[pid]
            self.ongoing.pop(pid, None)
        for off in self.snapshot_offsets():
            if off < log_start_offset and off != self.latest_snapshot_offset():
                self._remove_snapshot(off)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int | None:
        """Drop snapshots past ``log_end_offset`` and load the latest remaining one.

        Returns the offset replay must start from (the snapshot's), or None when no snapshot
        exists (replay from the log start)."""
        for off in self.snapshot_offsets():
            if off > log_end_offset:
                self._remove_snapshot(off)
        self.reset(log_start_offset)
        for off in reversed(self.snapshot_offsets()):
            try:
                self.producers = self._read_snapshot(off)
            except (CorruptRecordError, OSError, struct.error) as exc:
                log.warning("dropping unreadable producer snapshot %s: %s", self._path(off), exc)
                self._remove_snapshot(off)
                continue
            self.ongoing = {pid: e.current_txn_first_offset for pid, e in self.producers.items()
                            if e.current_txn_first_offset >= 0}
            self.map_end_offset = off
            return off
        return None

    def load_snapshot(self, offset: int, data: bytes) -> bool:
        """Take the state at ``offset`` from a snapshot's bytes (a tiered log's follower
        starting there from the bucket); False, and no state, when they do not parse."""
        from .checkpoints import atomic_write

        atomic_write(self._path(offset), data)
        if self.truncate_and_reload(offset, offset) == offset:
            return True
        log.warning("%s: unreadable producer snapshot at %d; idempotent producers start over",
                    self.log_dir, offset)
        return False

    def reset(self, offset: int) -> None:
        """Forget every producer: the state of an empty log starting at ``offset``."""
        self.producers = {}
        self.ongoing = {}
        self.map_end_offset = offset

    # -- snapshots
    def _path(self, offset: int) -> str:
        return os.path.join(self.log_dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self) -> list[int]:
        out = []
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX) and name[:-len(SNAPSHOT_SUFFIX)].isdigit():
                out.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
        return sorted(out)

    def latest_snapshot_offset(self) -> int | None:
        offs = self.snapshot_offsets()
        return offs[-1] if offs else None

    def take_snapshot(self, offset: int | None = None) -> str:
        """Write the state at ``offset`` (default: map end offset), atomically."""
        from .checkpoints import atomic_write

        off = self.map_end_offset if offset is None else offset
        body = bytearray(_COUNT.pack(len(self.producers)))
        for e in self.producers.values():
            b = e.batches[-1] if e.batches else None
            last_seq = b.last_seq if b else -1
            last_off = b.last_offset if b else -1
            delta = (b.last_offset - b.first_offset) if b else 0
            body += _ENTRY.pack(e.producer_id, e.producer_epoch, last_seq, last_off, delta,
                                e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset)
        data = _HEAD.pack(_VERSION, crc32c(body)) + body
        path = self._path(off)
        atomic_write(path, bytes(data))
        return path

    def _read_snapshot(self, offset: int) -> dict[int, ProducerStateEntry]:
        with open(self._path(offset), "rb") as f:
            return parse_snapshot(f.read())

    def _remove_snapshot(self, offset: int) -> None:
        try:
            os.remove(self._path(offset))
        except FileNotFoundError:
            pass

    def delete_snapshots_through(self, offset: int) -> None:
        """Drop the snapshots at or below ``offset`` (compaction removed a transaction
        marker there: an older snapshot may name its transaction open)."""
        for off in self.snapshot_offsets():
            if off <= offset:
                self._remove_snapshot(off)

    def delete_snapshots_from(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off >= offset:
                self._remove_snapshot(off)

    def delete_all_snapshots(self) -> None:
        for off in self.snapshot_offsets():
            self._remove_snapshot(off)
