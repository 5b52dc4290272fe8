"""Reads planned by size: small topic-partitions grouped into few tasks, read together.

Every layout must give the same rows in per-partition order, and streaming must leave the
same offsets in the checkpoint: 1, 2, 50 and 500 partitions, plans that only group, that
split and group, one task per partition, and a restart that replays a grouped micro-batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from sparklog.client import Producer
from tests.helpers.spark import source

PER_PARTITION = 4


def _fill(bootstrap: str, topic: str, partitions: int, tag: str = "v") -> list[tuple[int, int, bytes]]:
    """``PER_PARTITION`` records in every partition; (partition, offset, value) of each."""
    values, parts, expected = [], [], []
    for p in range(partitions):
        for i in range(PER_PARTITION):
            values.append(b"%s%d-%d" % (tag.encode(), p, i))
            parts.append(p)
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": "0"})
    try:
        prod.produce_arrow(topic, pa.array(values, pa.binary()), partitions=pa.array(parts, pa.int32()))
        assert prod.flush(60) == 0
    finally:
        prod.close()
    for p in range(partitions):
        expected.extend((p, i, b"%s%d-%d" % (tag.encode(), p, i)) for i in range(PER_PARTITION))
    return expected


def _check_order(rows: list[tuple[int, int, bytes]]) -> None:
    """Within the order Spark returned them, each partition's offsets only go up."""
    last: dict[int, int] = {}
    for p, off, _v in rows:
        assert off > last.get(p, -1), (p, off, last.get(p))
        last[p] = off


@pytest.mark.parametrize(
    ("partitions", "options", "tasks"),
    [
        (1, {}, 1),
        (2, {}, 1),
        (50, {}, 1),
        (500, {}, 1),
        (2, {"minRecordsPerPartition": 1}, 2),  # one task per partition, as before
        (50, {"minRecordsPerPartition": 1}, 50),
        (50, {"minRecordsPerPartition": 40}, 5),  # grouped
        (50, {"minRecordsPerPartition": 7, "maxRecordsPerPartition": 3}, 100),  # split
        (50, {"minRecordsPerPartition": 6, "maxRecordsPerPartition": 8}, 25),  # max bounds
        (500, {"minRecordsPerPartition": 600}, 4),
        (50, {"minPartitions": 10}, 10),
        # a fetch budget of about one batch: each round serves few partitions, none starve
        (50, {"kafka.max.partition.fetch.bytes": 200}, 1),
    ],
)
def test_batch_read_same_rows_for_any_plan(
    spark, bootstrap, topic_factory, partitions, options, tasks
):
    t = topic_factory(partitions=partitions)
    expected = _fill(bootstrap, t, partitions)
    df = source(spark, bootstrap, stream=False, subscribe=t, **options)
    assert df.rdd.getNumPartitions() == tasks
    rows = [(r.partition, r.offset, bytes(r.value)) for r in df.collect()]
    _check_order(rows)
    assert sorted(rows) == expected


def _start(spark, bootstrap, topic, out, ckpt):  # noqa: ANN001, ANN202
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=700,
        minRecordsPerPartition=100,
        driverReadMaxOffsets=0,  # executors read every micro-batch
    )
    return (
        df.selectExpr("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )


def _checkpoint_end(ckpt: str) -> dict:
    offsets = Path(ckpt) / "offsets"
    last = max(int(f.name) for f in offsets.iterdir() if f.name.isdigit())
    return json.loads((offsets / str(last)).read_text().splitlines()[-1])


def _output(spark, out):  # noqa: ANN001, ANN202
    return sorted((r.partition, r.offset, bytes(r.value)) for r in spark.read.parquet(out).collect())


def test_stream_grouped_plans_and_restart_mid_plan(spark, bootstrap, topic_factory, tmp_path):
    n = 500
    t = topic_factory(partitions=n)
    expected = _fill(bootstrap, t, n)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    q = _start(spark, bootstrap, t, out, ckpt)
    assert q.awaitTermination(300) and q.exception() is None
    assert _output(spark, out) == expected
    assert _checkpoint_end(ckpt) == {t: {str(p): PER_PARTITION for p in range(n)}}
    batches = sorted(int(f.name) for f in (Path(ckpt) / "commits").iterdir() if f.name.isdigit())
    assert len(batches) == 3  # 700 + 700 + 600 offsets, each a grouped plan

    # A crash after the last micro-batch was planned but before it committed: Spark replays
    # the same offsets, so the source plans and reads that grouped batch again.
    for log_dir in (Path(ckpt) / "commits", Path(out) / "_spark_metadata"):
        for name in (str(batches[-1]), f".{batches[-1]}.crc"):
            (log_dir / name).unlink(missing_ok=True)
    more = _fill(bootstrap, t, n, tag="w")
    q = _start(spark, bootstrap, t, out, ckpt)
    assert q.awaitTermination(300) and q.exception() is None
    got = _output(spark, out)
    want = sorted(expected + [(p, off + PER_PARTITION, v) for p, off, v in more])
    assert got == want  # every row exactly once
    assert _checkpoint_end(ckpt) == {t: {str(p): 2 * PER_PARTITION for p in range(n)}}
