"""The "sparklog" Python data source: Spark's entry point into reads and writes.

Spark instantiates this class when a DataFrame is defined (``load()``, ``save()``,
``start()``), so the option checks that hold for any use run in ``__init__`` and fail the
definition, not the first micro-batch. Role-specific checks (a read needs a subscription, a
write needs a topic) run when Spark asks for the reader or writer, still before any task.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from sparklog.spark.options import (
    OptionError,
    check_common_options,
    parse_sink_options,
    parse_source_options,
)
from sparklog.spark.reader import SparklogBatchReader, stream_reader
from sparklog.spark.schema import source_schema
from sparklog.spark.sink_txn import resolve_exactly_once
from sparklog.spark.writer import SparklogBatchWriter, SparklogStreamWriter, check_sink_schema

__all__ = ["SparklogDataSource"]

_READ_ONLY = ("subscribe", "subscribepattern", "assign")


class SparklogDataSource(DataSource):
    """``format("sparklog")``: a Kafka-protocol log as a Spark source and sink."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        check_common_options(self.options)
        if any(k in self.options for k in _READ_ONLY):
            # Looks like a read: check the whole read config now (batch rules are the
            # stricter subset for starting offsets; streaming-only rules run in streamReader).
            parse_source_options(self._without_ending(), streaming=True)

    def _without_ending(self) -> dict[str, str]:
        drop = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
        return {k: v for k, v in self.options.items() if k.lower() not in drop}

    @classmethod
    def name(cls) -> str:
        return "sparklog"

    def schema(self) -> StructType:
        opts = {str(k).lower(): str(v) for k, v in self.options.items()}
        include = opts.get("includeheaders", "false").strip().lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return SparklogBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return stream_reader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("A sparklog topic cannot be overwritten. Fix: use .mode('append').")
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        return SparklogBatchWriter(options, resolve_exactly_once(options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite=True is Spark's Complete output mode: like Spark's Kafka sink, every
        # trigger appends the whole result table (a log cannot be truncated).
        del overwrite
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        return SparklogStreamWriter(options, resolve_exactly_once(options))  # type: ignore[return-value]
