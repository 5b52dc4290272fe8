"""The sink: Spark writes, confluent-kafka (librdkafka) reads back."""

import uuid

import pytest

from tests.helpers.polling import collect
from tests.helpers.spark import produce, source


def _consume_all(bootstrap, topic, n, timeout=30.0):
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rt-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
        }
    )
    c.subscribe([topic])

    def poll_one():  # noqa: ANN202
        m = c.poll(0.5)
        return [] if m is None or m.error() else [m]

    try:
        return collect(poll_one, n, timeout)
    finally:
        c.close()


def test_batch_write_round_trip_through_confluent_kafka(spark, bootstrap, topic_factory):
    t = topic_factory(partitions=3)
    df = spark.range(100).selectExpr(
        "CAST(id AS STRING) AS key",
        "CONCAT('value-', CAST(id AS STRING)) AS value",
        "CAST(id % 3 AS INT) AS partition",
        "array(named_struct('key', 'src', 'value', CAST('spark' AS BINARY))) AS headers",
    )
    df.write.format("sparklog").option("bootstrap.servers", bootstrap).option("topic", t).mode(
        "append"
    ).save()
    msgs = _consume_all(bootstrap, t, 100)
    assert len(msgs) == 100
    by_key = {m.key().decode(): m for m in msgs}
    assert sorted(by_key) == sorted(str(i) for i in range(100))
    for k, m in by_key.items():
        assert m.value() == f"value-{k}".encode()
        assert m.partition() == int(k) % 3
        assert m.headers() == [("src", b"spark")]


def test_stream_write_with_topic_column(spark, bootstrap, topic_factory, tmp_path):
    src_t, out_a, out_b = topic_factory(), topic_factory(), topic_factory()
    produce(bootstrap, src_t, [b"%d" % i for i in range(40)])
    df = source(spark, bootstrap, subscribe=src_t, startingOffsets="earliest").selectExpr(
        "value",
        f"IF(CAST(CAST(value AS STRING) AS INT) % 2 = 0, '{out_a}', '{out_b}') AS topic",
    )
    q = (
        df.writeStream.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(300) and q.exception() is None
    even = sorted(int(m.value()) for m in _consume_all(bootstrap, out_a, 20))
    odd = sorted(int(m.value()) for m in _consume_all(bootstrap, out_b, 20))
    assert even == list(range(0, 40, 2)) and odd == list(range(1, 40, 2))


def test_writer_rejects_bad_columns(spark, bootstrap):
    w = (
        spark.range(3)
        .selectExpr("id AS value")
        .write.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", "x")
        .mode("append")
    )
    with pytest.raises(Exception, match="Column 'value' has type bigint"):
        w.save()
    w = (
        spark.range(3)
        .selectExpr("CAST(id AS STRING) AS v")
        .write.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", "x")
        .mode("append")
    )
    with pytest.raises(Exception, match="has no 'value' column"):
        w.save()
    w = (
        spark.range(3)
        .selectExpr("CAST(id AS STRING) AS value")
        .write.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .mode("append")
    )
    with pytest.raises(Exception, match="No target topic"):
        w.save()
