"""Offset JSON, range planning and admission control: pure functions, exact expectations."""

import json

import pyarrow as pa
import pytest

from sparklog.spark.admission import MinOffsetsGate, admit_bytes, backlog, rate_limit
from sparklog.spark.dataloss import DataLossError, report_data_loss
from sparklog.spark.offsets import from_json_dict, to_json_dict
from sparklog.spark.options import SourceOptions, Subscription
from sparklog.spark.planning import (
    OffsetRange,
    RangeGroup,
    group_ranges,
    plan_ranges,
    plan_tasks,
    split_range,
)
from sparklog.spark.schema import arrow_schema, source_schema


def test_offset_json_round_trip_and_canonical_order():
    offs = {("b", 1): 7, ("a", 10): 3, ("a", 2): 42}
    d = to_json_dict(offs)
    assert json.dumps(d) == '{"a": {"2": 42, "10": 3}, "b": {"1": 7}}'
    assert from_json_dict(json.loads(json.dumps(d))) == offs
    assert from_json_dict({}) == {} and from_json_dict(None) == {}
    with pytest.raises(ValueError):
        from_json_dict({"a": {"0": "x"}})
    with pytest.raises(ValueError):
        from_json_dict({"a": 5})


def test_plan_one_range_per_partition_and_drops_empty():
    start = {("t", 0): 0, ("t", 1): 5, ("t", 2): 9}
    end = {("t", 0): 10, ("t", 1): 5, ("t", 2): 3, ("u", 0): 4}
    assert plan_ranges(start, end) == [OffsetRange("t", 0, 0, 10)]


def test_plan_max_records_per_partition():
    ranges = plan_ranges(
        {("t", 0): 0, ("t", 1): 0}, {("t", 0): 25, ("t", 1): 10}, max_records_per_partition=10
    )
    assert [(r.partition, r.start, r.end) for r in ranges] == [
        (0, 0, 9),
        (0, 9, 17),
        (0, 17, 25),
        (1, 0, 10),
    ]
    assert all(r.size <= 10 for r in ranges)


def test_plan_min_partitions_splits_in_proportion():
    ranges = plan_ranges(
        {("t", 0): 0, ("t", 1): 100}, {("t", 0): 300, ("t", 1): 200}, min_partitions=8
    )
    by_part = {}
    for r in ranges:
        by_part.setdefault(r.partition, []).append(r)
    assert len(by_part[0]) == 6 and len(by_part[1]) == 2
    # contiguous, complete, deterministic
    for part, rs in by_part.items():
        assert rs[0].start == (0 if part == 0 else 100)
        assert all(a.end == b.start for a, b in zip(rs, rs[1:], strict=False))
    assert sum(r.size for r in ranges) == 400
    assert ranges == plan_ranges(
        {("t", 0): 0, ("t", 1): 100}, {("t", 0): 300, ("t", 1): 200}, min_partitions=8
    )
    # already enough ranges: untouched
    assert len(plan_ranges({("t", 0): 0}, {("t", 0): 5}, min_partitions=1)) == 1


def test_split_range_never_makes_empty_pieces():
    assert split_range(OffsetRange("t", 0, 0, 3), 10) == [
        OffsetRange("t", 0, 0, 1),
        OffsetRange("t", 0, 1, 2),
        OffsetRange("t", 0, 2, 3),
    ]


def _ranges_of(tasks):
    return [r for t in tasks for r in (t.ranges if isinstance(t, RangeGroup) else (t,))]


def test_group_ranges_packs_small_ranges_in_order():
    ranges = [OffsetRange("t", p, 0, 10) for p in range(7)]
    tasks = group_ranges(ranges, min_records=25)
    assert [t.size for t in tasks] == [30, 30, 10]
    assert tasks[0] == RangeGroup(tuple(ranges[:3]))
    assert tasks[2] == ranges[6]  # a one-range task stays a plain range
    assert _ranges_of(tasks) == ranges  # every range once, in order
    # min_records 1: one task per range, as Spark's connector plans
    assert group_ranges(ranges, min_records=1) == ranges
    assert group_ranges([], min_records=10) == []


def test_group_ranges_big_ranges_stay_alone_and_max_records_bounds_groups():
    ranges = [
        OffsetRange("t", 0, 0, 5),
        OffsetRange("t", 1, 0, 100),
        OffsetRange("t", 2, 0, 5),
        OffsetRange("t", 3, 0, 5),
    ]
    tasks = group_ranges(ranges, min_records=50)
    assert tasks == [RangeGroup(tuple(ranges[:2])), RangeGroup(tuple(ranges[2:]))]
    # maxRecordsPerPartition: a group never grows past it
    tasks = group_ranges(ranges, min_records=50, max_records=100)
    assert tasks == [ranges[0], ranges[1], RangeGroup(tuple(ranges[2:]))]
    assert all(t.size <= 100 for t in tasks)


def test_group_ranges_keeps_min_partitions():
    ranges = [OffsetRange("t", p, 0, 10) for p in range(8)]
    tasks = group_ranges(ranges, min_records=1000, min_tasks=4)
    assert len(tasks) == 4 and all(t.size == 20 for t in tasks)


def _read(**planning: int) -> SourceOptions:
    """A read's options with only the planning knobs given."""
    return SourceOptions("127.0.0.1:9092", Subscription("subscribe", ("t",)), None, None,
                         **planning)


def test_plan_tasks_500_partitions_follow_the_data():
    start = {("t", p): 0 for p in range(500)}
    end = {("t", p): 1000 for p in range(500)}
    tasks = plan_tasks(start, end, _read(min_records_per_partition=250_000))
    assert len(tasks) == 2 and [t.size for t in tasks] == [250_000, 250_000]
    assert _ranges_of(tasks) == plan_ranges(start, end)
    # big partitions keep one task each; maxRecordsPerPartition still splits them
    big = {("t", p): 300_000 for p in range(2)}
    two = {("t", p): 0 for p in range(2)}
    assert plan_tasks(two, big, _read(min_records_per_partition=250_000)) == plan_ranges(two, big)
    split = plan_tasks(two, big, _read(max_records_per_partition=100_000,
                                       min_records_per_partition=250_000))
    assert len(split) == 6 and all(isinstance(t, OffsetRange) for t in split)
    # minPartitions: at least that many tasks, every offset once
    tasks = plan_tasks(start, end, _read(min_partitions=10, min_records_per_partition=250_000))
    assert len(tasks) >= 10 and sum(t.size for t in tasks) == 500_000
    assert sorted((r.partition, r.start) for r in _ranges_of(tasks)) == [
        (p, 0) for p in range(500)
    ]


def test_plan_tasks_group_by_leader_host():
    start = {("t", p): 0 for p in range(6)}
    end = {("t", p): 10 for p in range(6)}
    leaders = {("t", p): ("b" if p % 2 else "a") for p in range(6)}
    tasks = plan_tasks(start, end, _read(min_records_per_partition=100), leaders)
    # ordered by host, never mixing hosts in a task; each task knows where to run
    assert [(t.host, [r.partition for r in t.ranges]) for t in tasks] == [
        ("a", [0, 2, 4]),
        ("b", [1, 3, 5]),
    ]
    pieces = plan_tasks(
        start, end, _read(max_records_per_partition=5, min_records_per_partition=1), leaders
    )
    assert len(pieces) == 12 and all(p.host == leaders[(p.topic, p.partition)] for p in pieces)
    # unknown leaders: one host-less group
    assert plan_tasks(start, end, _read(min_records_per_partition=100))[0].host is None


def test_rate_limit_is_proportional_like_spark():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    latest = {("t", 0): 1000, ("t", 1): 100, ("t", 2): 50}
    end = rate_limit(start, latest, 110)
    assert end == {("t", 0): 100, ("t", 1): 10, ("t", 2): 50}
    # a tiny partition is not starved (share < 1 rounds up)
    end = rate_limit({("a", 0): 0, ("b", 0): 0}, {("a", 0): 10_000, ("b", 0): 1}, 100)
    assert end[("b", 0)] == 1 and end[("a", 0)] == 99
    # nothing to read: latest as is
    assert rate_limit(start, start, 10) == start
    # the rounding remainder is handed out: exactly the limit, no 1-offset stragglers
    two = {("t", 0): 0, ("t", 1): 0}
    end = rate_limit(two, {("t", 0): 500_001, ("t", 1): 499_999}, 250_000)
    assert sum(end.values()) == 250_000
    end = rate_limit(two, {("t", 0): 3, ("t", 1): 3}, 5)
    assert sorted(end.values()) == [2, 3]


def _measure_from(sizes):
    """A log whose batches are given as {tp: [(next_offset, bytes), ...]}."""

    def measure(tp, start, end, budget, force):
        pos, used = start, 0
        for next_off, size in sizes[tp]:
            if next_off <= pos:
                continue
            if used + size > budget and not (force and used == 0):
                break
            pos, used = min(next_off, end), used + size
            if pos >= end:
                break
        return pos, used

    return measure


def test_admit_bytes_exact_whole_batches():
    # t0: 10 batches of 10 offsets x 1000 B; t1: 10 batches of 10 offsets x 1000 B
    sizes = {("t", p): [(10 * (i + 1), 1000) for i in range(10)] for p in (0, 1)}
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 100, ("t", 1): 100}
    end = admit_bytes(start, latest, 4500, _measure_from(sizes))
    assert end == {("t", 0): 20, ("t", 1): 20}  # 2 + 2 batches = 4000 B <= 4500
    end = admit_bytes(start, latest, 5000, _measure_from(sizes))
    assert sum(v // 10 for v in end.values()) == 5  # the left-over budget is used
    # a batch larger than the whole budget is admitted alone (progress)
    end = admit_bytes(start, latest, 300, _measure_from(sizes))
    assert end == {("t", 0): 10, ("t", 1): 0}
    # untouched partitions keep their latest offset
    assert admit_bytes({("t", 0): 100}, {("t", 0): 100}, 10, _measure_from(sizes)) == {
        ("t", 0): 100
    }


def test_min_offsets_gate():
    gate = MinOffsetsGate(min_offsets=100, max_delay_ms=1000, now_ms=0)
    assert not gate.should_run(50, 10)
    assert gate.should_run(100, 20)  # enough data
    assert not gate.should_run(10, 500)
    assert gate.should_run(10, 1020)  # delay since the last batch passed
    assert not gate.should_run(0, 5000)  # never an empty batch
    assert backlog({("t", 0): 5}, {("t", 0): 8, ("t", 1): 2}) == 5


def test_data_loss_policy(caplog):
    with pytest.raises(DataLossError, match="set the source option 'failOnDataLoss' to 'false'"):
        report_data_loss(True, "gone.")
    report_data_loss(False, "gone.")
    assert "'failOnDataLoss' to 'true'" in caplog.text


def test_arrow_schema_matches_spark_kafka_layout():
    s = arrow_schema(source_schema(True))
    assert s.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert s.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert s.field("partition").type == pa.int32()
