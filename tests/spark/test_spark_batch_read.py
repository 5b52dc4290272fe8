"""spark.read.format("sparklog"): bounded reads against a real embedded broker."""

import json

from tests.helpers.spark import produce, source


def _rows(df):
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def _fill(bootstrap, t, keys=False):  # noqa: ANN001, ANN202
    """Partition 0: a0..a29 at timestamps 1000..1029 (keys k0..k29 if asked); partition 1:
    b0..b19 at 2000..2019, no keys."""
    produce(
        bootstrap,
        t,
        [b"a%d" % i for i in range(30)],
        partition=0,
        keys=[b"k%d" % i for i in range(30)] if keys else None,
        timestamps=[1_000 + i for i in range(30)],
    )
    produce(
        bootstrap,
        t,
        [b"b%d" % i for i in range(20)],
        partition=1,
        timestamps=[2_000 + i for i in range(20)],
    )


def test_batch_read_everything_with_kafka_schema(spark, bootstrap, topic_factory):
    t = topic_factory(partitions=2)
    _fill(bootstrap, t, keys=True)
    df = source(spark, bootstrap, stream=False, subscribe=t)
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]
    rows = df.orderBy("partition", "offset").collect()
    assert len(rows) == 50
    assert [(r.partition, r.offset) for r in rows[:30]] == [(0, i) for i in range(30)]
    assert [(r.partition, r.offset) for r in rows[30:]] == [(1, i) for i in range(20)]
    r0 = rows[0]
    assert (bytes(r0.key), bytes(r0.value), r0.topic, r0.timestampType) == (b"k0", b"a0", t, 0)
    assert int(r0.timestamp.timestamp() * 1000) == 1_000
    assert rows[30].key is None


def test_batch_read_offset_and_timestamp_bounds(spark, bootstrap, topic_factory):
    t = topic_factory(partitions=2)
    _fill(bootstrap, t)
    df = source(
        spark,
        bootstrap,
        stream=False,
        subscribe=t,
        startingOffsets=json.dumps({t: {"0": 5, "1": -2}}),
        endingOffsets=json.dumps({t: {"0": 10, "1": -1}}),
    )
    assert _rows(df) == [(0, i, b"a%d" % i) for i in range(5, 10)] + [
        (1, i, b"b%d" % i) for i in range(20)
    ]
    # timestamps: first offset with ts >= start; end exclusive at first ts >= end; a partition
    # with no record at/after the end timestamp reads to its end
    df = source(
        spark, bootstrap, stream=False, subscribe=t, startingTimestamp=1_010, endingTimestamp=2_005
    )
    assert _rows(df) == [(0, i, b"a%d" % i) for i in range(10, 30)] + [
        (1, i, b"b%d" % i) for i in range(5)
    ]
    df = source(
        spark,
        bootstrap,
        stream=False,
        assign=json.dumps({t: [1]}),
        startingOffsetsByTimestamp=json.dumps({t: {"1": 2_015}}),
    )
    assert _rows(df) == [(1, i, b"b%d" % i) for i in range(15, 20)]


def test_batch_read_splits_ranges_and_reads_headers(spark, bootstrap, topic_factory):
    from confluent_kafka import Producer

    t = topic_factory(partitions=1)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(40):
        p.produce(t, value=b"v%d" % i, headers=[("h", b"x%d" % i), ("n", None)])
    assert p.flush(30) == 0
    df = source(spark, bootstrap, stream=False, subscribe=t, minPartitions=4, includeHeaders="true")
    assert df.rdd.getNumPartitions() == 4
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(40))
    assert [(h.key, h.value) for h in rows[7].headers] == [("h", b"x7"), ("n", None)]
    df = source(spark, bootstrap, stream=False, subscribe=t, maxRecordsPerPartition=15)
    assert df.rdd.getNumPartitions() == 3 and df.count() == 40
