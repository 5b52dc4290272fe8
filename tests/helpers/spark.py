"""Spark sessions and sparklog sources for the Spark tests, and producing their input.

``make_spark_session`` is also what ``tests/spark/spark_restart_child.py`` runs in its own
process, so the session a killed query restarts in is configured like the tests' one.
The tests' conftest points Spark at loopback and this interpreter before the JVM starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def make_spark_session(app: str = "sparklog-tests") -> SparkSession:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
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
