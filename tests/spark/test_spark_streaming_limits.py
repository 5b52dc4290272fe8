"""spark.readStream.format("sparklog"): admission control and Trigger.AvailableNow."""

import time
import uuid

from tests.helpers.polling import wait_for
from tests.helpers.spark import produce, source


def _run_available_now(spark, df):
    name = f"q_{uuid.uuid4().hex[:8]}"
    q = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    assert q.awaitTermination(300)
    assert q.exception() is None
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    return name, sizes


def test_max_offsets_per_trigger_splits_across_partitions(spark, bootstrap, topic_factory):
    t = topic_factory(partitions=2)
    produce(bootstrap, t, [b"a"] * 60, partition=0)
    produce(bootstrap, t, [b"b"] * 40, partition=1)
    df = source(spark, bootstrap, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger=30)
    name, sizes = _run_available_now(spark, df)
    assert sizes == [30, 30, 30, 10]
    assert spark.sql(f"select count(distinct partition, offset) c from {name}").first().c == 100


def test_max_bytes_per_trigger_is_exact_in_batch_bytes(spark, bootstrap, topic_factory):
    t = topic_factory(partitions=1)
    # 40 records of ~1 KB, produced 4 per record batch
    produce(bootstrap, t, [b"%04d" % i + b"x" * 996 for i in range(40)], partition=0, chunk=4)
    df = source(
        spark, bootstrap, subscribe=t, startingOffsets="earliest", maxBytesPerTrigger=10_000
    )
    name, sizes = _run_available_now(spark, df)
    # every record costs > 1000 B in the log, so no micro-batch holds more than 9 records;
    # whole 4-record batches fit twice in 10 000 B
    assert sum(sizes) == 40 and max(sizes) <= 9 and len(sizes) >= 5
    assert all(s % 4 == 0 for s in sizes)
    got = sorted(bytes(r.value[:4]) for r in spark.sql(f"select value from {name}").collect())
    assert got == [b"%04d" % i for i in range(40)]


def test_min_offsets_per_trigger_waits_for_enough_data(spark, bootstrap, topic_factory):
    t = topic_factory(partitions=1)
    produce(bootstrap, t, [b"early"] * 5, partition=0)
    name = f"q_{uuid.uuid4().hex[:8]}"
    df = source(
        spark,
        bootstrap,
        subscribe=t,
        startingOffsets="earliest",
        minOffsetsPerTrigger=20,
        maxTriggerDelay="1h",
    )
    q = (
        df.writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        # the source is polled every 100 ms; 3 s of polling must not run a batch
        time.sleep(3.0)
        assert q.isActive and q.exception() is None
        assert spark.sql(f"select count(*) c from {name}").first().c == 0
        produce(bootstrap, t, [b"late"] * 20, partition=0)
        wait_for(
            lambda: spark.sql(f"select count(*) c from {name}").first().c == 25,
            240,
            what="the delayed batch",
            interval=0.2,
        )
        assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [25]
    finally:
        q.stop()


def test_available_now_drains_exactly_the_backlog(spark, bootstrap, topic_factory):
    t = topic_factory(partitions=2)
    produce(bootstrap, t, [b"old%d" % i for i in range(50)])
    name = f"q_{uuid.uuid4().hex[:8]}"
    df = source(spark, bootstrap, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger=8)
    q = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    # once the first batch ran, the target offsets are fixed: this data must not be read
    wait_for(
        lambda: q.lastProgress is not None or not q.isActive, 240, what="first batch", interval=0.2
    )
    produce(bootstrap, t, [b"new%d" % i for i in range(30)])
    assert q.awaitTermination(300) and q.exception() is None
    values = sorted(bytes(r.value) for r in spark.sql(f"select value from {name}").collect())
    assert values == sorted(b"old%d" % i for i in range(50))
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 8 and sum(sizes) == 50


def test_pattern_picks_up_new_topics_and_partitions(spark, bootstrap, admin, topic_factory):
    from sparklog.client import NewTopic

    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(f"{prefix}-a", num_partitions=1)])
    produce(bootstrap, f"{prefix}-a", [b"a0", b"a1"])
    name = f"q_{uuid.uuid4().hex[:8]}"
    df = source(spark, bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    q = (
        df.selectExpr("topic", "partition", "CAST(value AS STRING) v")
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def values():
        return sorted(r.v for r in spark.sql(f"select v from {name}").collect())

    try:
        wait_for(lambda: values() == ["a0", "a1"], 240, what="the first topic", interval=0.2)
        # a new matching topic and a new partition of the old one: read from their start
        admin.create_topics([NewTopic(f"{prefix}-b", num_partitions=1)])
        admin.create_partitions({f"{prefix}-a": 2})
        produce(bootstrap, f"{prefix}-b", [b"b0"])
        produce(bootstrap, f"{prefix}-a", [b"a2"], partition=1)
        wait_for(
            lambda: values() == ["a0", "a1", "a2", "b0"],
            240,
            what="new topic/partition",
            interval=0.2,
        )
        assert q.exception() is None
    finally:
        q.stop()
