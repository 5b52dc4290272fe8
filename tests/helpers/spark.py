"""Spark sessions and sparklog sources for the Spark tests, and producing their input.

``make_spark_session`` is also what ``tests/spark/spark_restart_child.py`` runs in its own
process, so the session a killed query restarts in is configured like the tests' one.
The tests' conftest points Spark at loopback and this interpreter before the JVM starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def make_spark_session(app: str = "sparklog-tests", master: str = "local[2]") -> SparkSession:
    """``master`` "local[2,2]" gives each task a second attempt (local mode's default is
    none)."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    *,
    partition: int | None = None,
    keys: list[bytes] | None = None,
    timestamps: list[int] | None = None,
    chunk: int | None = None,
) -> None:
    """Produce through sparklog's Arrow producer; ``chunk`` rows per call (batch size)."""
    import pyarrow as pa

    from sparklog.client import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": "0"})
    try:
        step = chunk or len(values) or 1
        for i in range(0, len(values), step):
            n = len(values[i : i + step])
            p.produce_arrow(
                topic,
                pa.array(values[i : i + step], pa.binary()),
                keys=None if keys is None else pa.array(keys[i : i + step], pa.binary()),
                partitions=None if partition is None else pa.array([partition] * n, pa.int32()),
                timestamps=None
                if timestamps is None
                else pa.array(timestamps[i : i + step], pa.int64()),
            )
            if chunk:
                assert p.flush(30) == 0
        assert p.flush(30) == 0
    finally:
        p.close()


def source(spark: SparkSession, bootstrap: str, *, stream: bool = True,
           **options: object) -> DataFrame:
    """``format("sparklog")`` on ``bootstrap`` with ``options`` (values passed as strings)."""
    reader = spark.readStream if stream else spark.read
    r = reader.format("sparklog").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def eos_copy_query(spark: SparkSession, bootstrap: str, in_topic: str, out_topic: str,
                   ckpt: str, marker: str, *, available_now: bool = False,
                   max_offsets: int = 20) -> StreamingQuery:
    """The exactly-once copy ``in_topic`` -> ``out_topic`` of the sink test (and its child
    process): the sparklog source and sink, keys and values as they are, through a Python
    UDF that fails partition 0's first task attempt once, the first time (``marker``, a
    file, says it did)."""
    import os

    from pyspark import TaskContext
    from pyspark.sql.functions import col, udf

    def fail_once(v: bytes) -> bytes:
        ctx = TaskContext.get()
        if (ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0
                and not os.path.exists(marker)):
            open(marker, "w").close()
            raise RuntimeError("deliberate failure of a first task attempt")
        return v

    df = source(spark, bootstrap, subscribe=in_topic, startingOffsets="earliest",
                maxOffsetsPerTrigger=max_offsets)
    w = (
        df.select(col("key"), udf(fail_once, "binary")(col("value")).alias("value"))
        .writeStream.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", out_topic)
        .option("checkpointLocation", ckpt)
    )
    w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime="0 seconds")
    return w.start()


def report_until_killed(q: StreamingQuery) -> None:
    """A child driver's main loop: print each finished batch id until the parent SIGKILLs
    the process group."""
    import time

    print("started", flush=True)
    while True:
        time.sleep(0.5)
        p = q.lastProgress
        if p is not None:
            print("batch", p["batchId"], flush=True)
