"""Leader-epoch cache of one partition (KIP-101), persisted as ``leader-epoch-checkpoint``.

Each entry says "leader epoch E started writing at offset S". Entries strictly increase in
both epoch and start offset. The cache answers OffsetsForLeaderEpoch: the end offset of epoch
E is the start offset of the first epoch after E (or the log end offset for the latest epoch).
A follower truncates to that answer instead of its high watermark, which is what prevents
the two KIP-101 failure modes (losing acknowledged data after a fast leader change, and
replicas diverging after both restart). File format: see ``checkpoints``.
Not thread-safe on its own; the PartitionLog lock guards it. Every change is written through
atomically, as Kafka does (epoch changes are rare).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Iterable

from sparklog.protocol.errors import KafkaStorageError

from .checkpoints import read_epoch_checkpoint, write_epoch_checkpoint

__all__ = ["LeaderEpochCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, path: str | None) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        # the checkpoint was missing or unreadable: the log loader rebuilds the cache from
        # the batches' partition leader epochs
        self.needs_rebuild = False
        if path is None:
            return
        try:
            entries = read_epoch_checkpoint(path)
        except KafkaStorageError as exc:
            log.error("%s; the leader-epoch cache is rebuilt from the log", exc)
            self.needs_rebuild = True
            return
        self.needs_rebuild = not entries and not os.path.exists(path)
        starts_before = -1
        for epoch, start in entries:
            if (self._epochs and epoch <= self._epochs[-1]) or start <= starts_before:
                log.error("leader-epoch checkpoint %s is not monotonic at (%d, %d); the "
                          "leader-epoch cache is rebuilt from the log", path, epoch, start)
                self._epochs, self._starts = [], []
                self.needs_rebuild = True
                return
            self._epochs.append(epoch)
            self._starts.append(start)
            starts_before = start

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True when the cache changed.

        Entries that would break monotonicity (epoch >= new epoch or start >= new start)
        are dropped first, like Kafka's ``maybeTruncateNonMonotonicEntries``."""
        if epoch < 0:
            return False
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        keep = [
            i
            for i in range(len(self._epochs))
            if self._epochs[i] < epoch and self._starts[i] < start_offset
        ]
        if len(keep) != len(self._epochs):
            removed = [(self._epochs[i], self._starts[i]) for i in range(len(self._epochs)) if i not in keep]
            log.info("leader epoch %d at %d removed non-monotonic entries %s", epoch, start_offset, removed)
        self._epochs = [self._epochs[i] for i in keep] + [epoch]
        self._starts = [self._starts[i] for i in keep] + [start_offset]
        self._persist()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) per KIP-101/KIP-279: the largest epoch <= requested and the
        start offset of the epoch after it; the latest epoch ends at the log end offset.
        Unknown (larger than all, or -1) gives (-1, -1)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        hi = bisect_right(self._epochs, requested_epoch)  # first epoch > requested
        if hi >= len(self._epochs):
            if requested_epoch > self._epochs[-1]:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            return requested_epoch, log_end_offset
        if hi == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[hi - 1], self._starts[hi]

    def truncation_offset(self, leader_epoch: int, leader_end_offset: int,
                          high_watermark: int, log_end_offset: int) -> int:
        """Where a follower must truncate given the leader's OffsetsForLeaderEpoch answer
        (``leader_epoch``, ``leader_end_offset``) for the follower's latest epoch (KIP-101 /
        KIP-279): never by the HW alone."""
        if leader_epoch < 0 or leader_end_offset < 0:
            return high_watermark  # leader knows no epochs: the pre-KIP-101 fallback
        if leader_epoch == self.latest_epoch:
            return min(leader_end_offset, log_end_offset)
        epoch, end = self.end_offset_for(leader_epoch, log_end_offset)
        if epoch != leader_epoch or end < 0:
            # we do not have the leader's epoch: fall back to our end of the largest
            # epoch below it, bounded by the leader's end
            return min(leader_end_offset, log_end_offset if end < 0 else end)
        return min(leader_end_offset, end)

    def epoch_for_offset(self, offset: int) -> int:
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (log truncated to it)."""
        n = len(self._starts)
        while self._starts and self._starts[-1] >= end_offset:
            self._starts.pop()
            self._epochs.pop()
        if len(self._starts) != n:
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: earlier epochs collapse into one entry there."""
        i = bisect_right(self._starts, start_offset) - 1
        if i < 0:
            return
        if i == 0 and self._starts[0] == start_offset:
            return
        epoch = self._epochs[i]
        self._epochs = [epoch] + self._epochs[i + 1 :]
        self._starts = [start_offset] + self._starts[i + 1 :]
        self._persist()

    def prepend(self, older: Iterable[tuple[int, int]], start_offset: int,
                log_end_offset: int) -> None:
        """A tiered log's cache takes the (epoch, start) entries of ``older`` (the remote
        tier's) that begin before its own first epoch (before ``log_end_offset`` while it has
        none), then starts at ``start_offset``."""
        local = self.entries()
        first_start = self._starts[0] if self._starts else log_end_offset
        merged = [(e, o) for e, o in older if o < first_start]
        for e, o in local:
            if not merged or e > merged[-1][0]:
                merged.append((e, o))
        if merged != local:
            self.replace(merged)
            self.truncate_from_start(start_offset)

    def replace(self, entries: Iterable[tuple[int, int]], end_offset: int | None = None) -> None:
        """Hold exactly the (epoch, start) ``entries`` that start before ``end_offset``."""
        self._epochs, self._starts = [], []
        for e, o in entries:
            if end_offset is None or o < end_offset:
                self.assign(e, o)
        self._persist()

    def clear(self) -> None:
        self.replace(())

    def _persist(self) -> None:
        if self.path is not None:
            write_epoch_checkpoint(self.path, self.entries())
