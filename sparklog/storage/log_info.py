"""What ``PartitionLog`` answers with: the result of an append, of a read, of a timestamp
lookup, and the special timestamps a ListOffsets lookup may ask for (Kafka's values).

Invariants: offsets in an ``AppendInfo`` are the ones the batches were stored at (for a
retried idempotent batch, those of the original append); a ``FetchDataInfo`` holds whole
batches only, in offset order, and ``next_offset`` is where the next read continues.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .backend import FileSlice

__all__ = [
    "AppendInfo",
    "FetchDataInfo",
    "TimestampAndOffset",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "NO_TIMESTAMP_FOUND",
]

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

NO_TIMESTAMP_FOUND = -1  # the timestamp of an answer that is an offset, not a record


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
