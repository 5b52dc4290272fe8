"""Helpers shared by the Spark tests (imported as a plain module; tests/spark is on sys.path)."""

from __future__ import annotations

import time


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


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.2, what: str = "") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def source(spark, bootstrap: str, *, stream: bool = True, **options: str):  # noqa: ANN001, ANN201
    reader = spark.readStream if stream else spark.read
    r = reader.format("sparklog").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()
