"""Turning offset maps into Spark tasks: pure, deterministic, no I/O.

Like Spark's ``KafkaOffsetRangeCalculator``: one task per partition's ``[start, end)`` range,
then big ranges are split so that no task holds more than ``maxRecordsPerPartition`` offsets,
and so that there are at least ``minPartitions`` tasks (a hint: ranges are divided in
proportion to their size, so a skewed partition gets more tasks). Empty ranges are dropped.
Sizes are offset counts and therefore estimates of record counts: compaction and transaction
markers leave gaps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from sparklog.spark.offsets import TopicPartitionKey

__all__ = ["OffsetRange", "RangeGroup", "plan_ranges", "split_range"]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One task: read ``topic``-``partition`` offsets ``[start, end)``."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True)
class RangeGroup(InputPartition):
    """A whole small micro-batch as one partition: the driver reads it and hands the rows to
    Spark with the plan. Executors read it themselves only if Spark lost that copy."""

    ranges: tuple[OffsetRange, ...]

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


def split_range(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """Split into ``parts`` contiguous ranges whose sizes differ by at most one."""
    parts = max(1, min(parts, r.size))
    base, extra = divmod(r.size, parts)
    out: list[OffsetRange] = []
    pos = r.start
    for i in range(parts):
        n = base + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, pos, pos + n))
        pos += n
    return out


def plan_ranges(
    start: Mapping[TopicPartitionKey, int],
    end: Mapping[TopicPartitionKey, int],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Ranges for every partition in ``end`` that has data after its ``start`` offset.

    Partitions missing from ``start`` are not read (the caller resolves new partitions to
    concrete start offsets before planning).
    """
    ranges = [
        OffsetRange(tp[0], tp[1], start[tp], end[tp])
        for tp in sorted(end)
        if tp in start and end[tp] > start[tp]
    ]
    if max_records_per_partition is not None:
        ranges = [
            piece
            for r in ranges
            for piece in split_range(r, math.ceil(r.size / max_records_per_partition))
        ]
    if min_partitions is not None and 0 < len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)
        split: list[OffsetRange] = []
        for r in ranges:
            parts = max(round(r.size / total * min_partitions), 1)
            split.extend(split_range(r, parts))
        ranges = split
    return ranges
