"""Turning offset maps into Spark tasks: pure, deterministic, no I/O.

First like Spark's ``KafkaOffsetRangeCalculator``: one range per partition's ``[start, end)``,
then big ranges are split so that no task holds more than ``maxRecordsPerPartition`` offsets,
and so that there are at least ``minPartitions`` tasks (a hint: ranges are divided in
proportion to their size, so a skewed partition gets more tasks). Empty ranges are dropped.

Then, unlike Spark's connector, small ranges are grouped (``group_ranges``): a Python source
task costs tens of milliseconds before it reads a row, so one task per topic-partition makes
a 200-partition topic read many times slower than a 2-partition one. Ranges are packed, in
order, into ``RangeGroup`` tasks of at least ``minRecordsPerPartition`` offsets, never past
``maxRecordsPerPartition`` and never into fewer than ``minPartitions`` tasks; a range that is
big enough alone stays an ``OffsetRange`` task. The task count thus follows the data, not
the partition count. Ranges are ordered by their leader's host and a group never mixes
hosts, so a task's partitions live on one host and the task records the host it should run
next to (``host``). pyspark 4.2 cannot pass that on yet: its JVM ``PythonInputPartition``
keeps only the pickled partition and inherits ``preferredLocations`` = none. Sizes are
offset counts and therefore estimates of record counts: compaction and transaction markers
leave gaps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import InputPartition

from sparklog.spark.offsets import TopicPartitionKey

if TYPE_CHECKING:
    from sparklog.spark.options import SourceOptions

__all__ = ["OffsetRange", "RangeGroup", "group_ranges", "plan_ranges", "plan_tasks", "split_range"]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One task: read ``topic``-``partition`` offsets ``[start, end)``. ``host``: the
    partition leader's host when the plan knew it (where the task should run)."""

    topic: str
    partition: int
    start: int
    end: int
    host: str | None = None

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True)
class RangeGroup(InputPartition):
    """One task reading several ranges (distinct topic-partitions, or several pieces of
    one): small ranges grouped by ``group_ranges``, or a whole small micro-batch that the
    driver reads and hands to Spark with the plan (executors read that one only if Spark
    lost the copy)."""

    ranges: tuple[OffsetRange, ...]

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)

    @property
    def host(self) -> str | None:
        """The leaders' host when all ranges share it (``group_ranges`` keeps them so)."""
        hosts = {r.host for r in self.ranges}
        return hosts.pop() if len(hosts) == 1 else None


def split_range(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """Split into ``parts`` contiguous ranges whose sizes differ by at most one."""
    parts = max(1, min(parts, r.size))
    base, extra = divmod(r.size, parts)
    out: list[OffsetRange] = []
    pos = r.start
    for i in range(parts):
        n = base + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, pos, pos + n, r.host))
        pos += n
    return out


def plan_ranges(
    start: Mapping[TopicPartitionKey, int],
    end: Mapping[TopicPartitionKey, int],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
    leaders: Mapping[TopicPartitionKey, str] | None = None,
) -> list[OffsetRange]:
    """Ranges for every partition in ``end`` that has data after its ``start`` offset, in
    (leader host, topic, partition) order; ``leaders`` gives the hosts, when known.

    Partitions missing from ``start`` are not read (the caller resolves new partitions to
    concrete start offsets before planning).
    """
    hosts = leaders or {}
    ranges = sorted(
        (
            OffsetRange(tp[0], tp[1], start[tp], end[tp], hosts.get(tp))
            for tp in end
            if tp in start and end[tp] > start[tp]
        ),
        key=lambda r: (r.host or "", r.topic, r.partition),
    )
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


def group_ranges(
    ranges: list[OffsetRange],
    *,
    min_records: int,
    max_records: int | None = None,
    min_tasks: int | None = None,
) -> list[OffsetRange | RangeGroup]:
    """Pack consecutive ``ranges`` into tasks of at least ``min_records`` offsets.

    A task is closed as soon as it holds ``min_records`` offsets (so it holds fewer than
    twice that, unless a single range is bigger), when the next range would take it past
    ``max_records``, or when the next range has another leader host (a task's partitions
    are fetched from one broker, and it can run next to it). ``min_records`` is first lowered so that ``min_tasks`` tasks can be
    made. One-range tasks stay plain ``OffsetRange``s; every range appears exactly once, in
    the order given.
    """
    if min_tasks is not None and ranges:
        total = sum(r.size for r in ranges)
        min_records = min(min_records, max(1, total // min_tasks))
    tasks: list[OffsetRange | RangeGroup] = []
    group: list[OffsetRange] = []
    size = 0

    def close() -> None:
        if group:
            tasks.append(group[0] if len(group) == 1 else RangeGroup(tuple(group)))
            group.clear()

    for r in ranges:
        if group and (
            group[-1].host != r.host or (max_records is not None and size + r.size > max_records)
        ):
            close()
            size = 0
        group.append(r)
        size += r.size
        if size >= min_records:
            close()
            size = 0
    close()
    return tasks


def plan_tasks(
    start: Mapping[TopicPartitionKey, int],
    end: Mapping[TopicPartitionKey, int],
    options: SourceOptions,
    leaders: Mapping[TopicPartitionKey, str] | None = None,
    route: Callable[[OffsetRange], list[OffsetRange]] | None = None,
) -> list[OffsetRange | RangeGroup]:
    """The input partitions of one read: ``plan_ranges``, then ``group_ranges``, as the
    read's minPartitions, maxRecordsPerPartition and minRecordsPerPartition say. ``route``
    splits each planned range, in offset order, into the pieces read from different places
    (``segment_reads``: the bucket, then brokers) before they are grouped."""
    ranges = plan_ranges(
        start,
        end,
        min_partitions=options.min_partitions,
        max_records_per_partition=options.max_records_per_partition,
        leaders=leaders,
    )
    if route is not None:
        ranges = [piece for r in ranges for piece in route(r)]
    return group_ranges(
        ranges,
        min_records=options.min_records_per_partition,
        max_records=options.max_records_per_partition,
        min_tasks=options.min_partitions,
    )
