"""A Python streaming data source that does no work: Spark's ceiling for any Python source.

``spark.readStream.format("sparklog_ceiling")`` serves N rows of the sparklog source's seven
columns (16-byte key, 100-byte value) from Arrow batches built once per Python worker, in the
same micro-batches and partitions as the sparklog run. Whatever this reaches is what pyspark's
Python DataSource path (runner process, Python workers, Arrow hand-off to the JVM) allows; the
gap between it and the sparklog source is sparklog's own cost (fetch + decode).

Options: ``rows`` (total), ``rowsPerBatch``, ``partitions``, ``chunkRows`` (rows per Arrow
batch handed to Spark).
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_BATCHES: dict[int, object] = {}


def _batch(n: int):  # noqa: ANN202 - pyarrow.RecordBatch, built once per worker
    if n not in _BATCHES:
        import numpy as np
        import pyarrow as pa

        rng = np.random.default_rng(7)

        def fixed(width: int) -> pa.Array:
            offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
            data = rng.integers(32, 127, n * width, dtype=np.uint8)
            return pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
            )

        _BATCHES[n] = pa.RecordBatch.from_arrays(
            [
                fixed(16),
                fixed(100),
                pa.array(["bench"] * n, pa.string()),
                pa.array(np.zeros(n, dtype=np.int32)),
                pa.array(np.arange(n, dtype=np.int64)),
                pa.array(np.full(n, 1_700_000_000_000_000, dtype=np.int64)).cast(
                    pa.timestamp("us", tz="UTC")
                ),
                pa.array(np.zeros(n, dtype=np.int32)),
            ],
            names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"],
        )
    return _BATCHES[n]


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self.rows = int(options["rows"])
        self.per_batch = int(options["rowsPerBatch"])
        self.parts = int(options.get("partitions", "2"))
        self.chunk = int(options.get("chunkRows", "30000"))

    def initialOffset(self) -> dict:
        return {"offset": 0}

    def getDefaultReadLimit(self) -> ReadMaxRows:
        return ReadMaxRows(self.per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict, limit: object) -> dict:
        return {"offset": min(self.rows, start["offset"] + self.per_batch)}

    def partitions(self, start: dict, end: dict) -> list[_Range]:
        s, e = start["offset"], end["offset"]
        step = -(-(e - s) // self.parts) if e > s else 0
        return [_Range(a, min(e, a + step)) for a in range(s, e, step)] if step else []

    def read(self, partition: _Range) -> Iterator[object]:
        batch = _batch(self.chunk)
        for a in range(partition.start, partition.end, self.chunk):
            yield batch.slice(0, min(self.chunk, partition.end - a))


class CeilingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "sparklog_ceiling"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: object) -> _Reader:
        return _Reader(self.options)
