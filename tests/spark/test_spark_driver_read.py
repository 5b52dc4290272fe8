"""Small micro-batches are read on the driver and shipped with the plan (driverReadMaxOffsets).

The first tests drive the stream reader exactly as pyspark's streaming runner does
(latestOffset -> partitions -> getCache) against a real broker; the last ones run real
queries on both paths and compare what they deliver.
"""

import uuid

from sparklog.spark.options import parse_source_options
from sparklog.spark.planning import OffsetRange, RangeGroup
from sparklog.spark.reader import stream_reader
from sparklog.spark.schema import source_schema
from tests.helpers.polling import wait_for
from tests.helpers.spark import produce, source


def _reader(bootstrap, **opts):  # noqa: ANN001, ANN202
    o = parse_source_options(
        {"bootstrap.servers": bootstrap, "startingOffsets": "earliest", **opts}, streaming=True
    )
    return stream_reader(o, source_schema(o.include_headers))


def _runner_is_told_to_ship(reader) -> bool:  # noqa: ANN001
    # the check pyspark's python_streaming_source_runner makes before calling getCache
    from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper

    return isinstance(reader, _SimpleStreamReaderWrapper)


def test_small_batch_is_one_partition_whose_rows_come_with_the_plan(bootstrap, topic_factory):
    t = topic_factory(partitions=2)
    produce(bootstrap, t, [b"a%d" % i for i in range(30)], partition=0)
    produce(bootstrap, t, [b"b%d" % i for i in range(20)], partition=1)
    r = _reader(bootstrap, subscribe=t)
    try:
        assert _runner_is_told_to_ship(r)
        start = r.initialOffset()
        end = r.latestOffset(start, r.getDefaultReadLimit())
        parts = r.partitions(start, end)
        assert len(parts) == 1 and isinstance(parts[0], RangeGroup)
        assert parts[0].size == 50
        batches = list(r.getCache(start, end))
        got = sorted(
            (row["partition"], row["offset"], row["value"])
            for b in batches
            for row in b.to_pylist()
        )
        want = sorted(
            [(0, i, b"a%d" % i) for i in range(30)] + [(1, i, b"b%d" % i) for i in range(20)]
        )
        assert got == want
        assert all(b.schema == r.target for b in batches)
        # asked again for the same batch (pyspark only asks once): nothing cached twice
        assert r.getCache(start, end) is None
        # an executor handed the same partition reads the same rows
        again = sorted(
            (row["partition"], row["offset"], row["value"])
            for b in r.read(parts[0])
            for row in b.to_pylist()
        )
        assert again == want
    finally:
        r.stop()


def test_big_batch_goes_to_executors(bootstrap, topic_factory):
    t = topic_factory(partitions=2)
    produce(bootstrap, t, [b"x"] * 40, partition=0)
    produce(bootstrap, t, [b"y"] * 40, partition=1)
    for min_records, planned in (("1", [OffsetRange, OffsetRange]), (None, [RangeGroup])):
        opts = {} if min_records is None else {"minRecordsPerPartition": min_records}
        r = _reader(bootstrap, subscribe=t, driverReadMaxOffsets="79", **opts)
        try:
            start = r.initialOffset()
            end = r.latestOffset(start, r.getDefaultReadLimit())
            parts = r.partitions(start, end)
            # one task per partition, or (by default) both small ranges in one task
            assert [type(p) for p in parts] == planned
            assert all(p.host for p in parts)  # the leader's host, where the task belongs
            assert r.getCache(start, end) is None  # the runner sends "no rows"; tasks read
        finally:
            r.stop()


def test_zero_turns_driver_reads_off(bootstrap, topic_factory):
    t = topic_factory(partitions=1)
    produce(bootstrap, t, [b"z"] * 5, partition=0)
    r = _reader(bootstrap, subscribe=t, driverReadMaxOffsets="0")
    try:
        assert not _runner_is_told_to_ship(r)
        start = r.initialOffset()
        end = r.latestOffset(start, r.getDefaultReadLimit())
        assert [type(p) for p in r.partitions(start, end)] == [OffsetRange]
        assert r.reportLatestOffset() == end
    finally:
        r.stop()


def _stream(spark, bootstrap, topic, *, rounds, n, expect, **opts):  # noqa: ANN001, ANN202
    """Run a query; produce ``rounds`` x ``n`` records while it runs; stop at ``expect`` rows."""
    name = f"q_{uuid.uuid4().hex[:8]}"
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest", **opts)
    q = (
        df.writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="50 milliseconds")
        .start()
    )

    def count() -> int:
        return spark.sql(f"select count(*) c from {name}").first().c

    try:
        for i in range(rounds):  # small batches arriving while the query runs
            produce(bootstrap, topic, [b"%d-%d" % (i, k) for k in range(n)], partition=0)
            wait_for(lambda i=i: count() >= (i + 1) * n, what=f"round {i}", interval=0.2)
        wait_for(lambda: count() >= expect, what=f"{expect} rows", interval=0.2)
        assert q.exception() is None
    finally:
        q.stop()
    rows = spark.sql(f"select offset, value, timestamp from {name}").collect()
    assert all(r.timestamp is not None for r in rows)
    return sorted((r.offset, bytes(r.value)) for r in rows)


def test_both_paths_deliver_the_same_rows_exactly_once(spark, bootstrap, topic_factory):
    t = topic_factory(partitions=1)
    shipped = _stream(spark, bootstrap, t, rounds=3, n=25, expect=75)
    want = [(25 * i + k, b"%d-%d" % (i, k)) for i in range(3) for k in range(25)]
    assert shipped == want
    # the same topic again, every batch read by executor tasks
    by_tasks = _stream(
        spark, bootstrap, t, rounds=0, n=0, expect=75, driverReadMaxOffsets="0"
    )
    assert by_tasks == want
