"""Batch and streaming writers of the "sparklog" sink.

Rows arrive as Arrow batches and leave through ``Producer.produce_arrow``: a whole column of
values per call, grouped by target topic, never one Python call per row.

Exactly-once (option ``exactlyOnce``, on by default when the brokers serve two-phase-commit
transactions): each task writes in a transaction of its own and prepares it
(``sink_txn``); the driver's ``commit`` records the batch's transactions and commits them,
``abort`` aborts them, and both abort orphans (``sink_commits``). A read_committed reader
sees each micro-batch once, whatever was retried, replayed or killed.

At-least-once (``exactlyOnce=false``, or brokers without it): each task produces with the
idempotent producer of its Python worker and flushes before reporting success, so a retried
task or a replayed micro-batch can write rows twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from sparklog.protocol.errors import SparklogError
from sparklog.spark.client_cache import ClientCache
from sparklog.spark.options import OptionError, SinkOptions
from sparklog.spark.sink_commits import end_batch, end_write
from sparklog.spark.sink_txn import WriteStats, write_transaction

if TYPE_CHECKING:
    from sparklog.client import Producer

log = logging.getLogger(__name__)

__all__ = ["SparklogBatchWriter", "SparklogStreamWriter", "check_sink_schema", "WriteError"]


class WriteError(SparklogError):
    """Rows could not be written (delivery failed, or a row has no target topic)."""


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Fail before any task runs when the DataFrame does not fit the sink (Spark's checks)."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    value = types.get("value")
    if value is None:
        raise OptionError(
            "The DataFrame written to sparklog has no 'value' column. Fix: select or alias one, "
            'e.g. df.selectExpr("CAST(v AS STRING) AS value").'
        )
    for name in ("value", "key"):
        t = types.get(name)
        if t is not None and not isinstance(t, (StringType, BinaryType)):
            raise OptionError(
                f"Column '{name}' has type {t.simpleString()}, but must be string or binary. "
                f"Fix: CAST({name} AS STRING) or CAST({name} AS BINARY)."
            )
    topic = types.get("topic")
    if topic is not None and not isinstance(topic, StringType):
        raise OptionError(
            f"Column 'topic' has type {topic.simpleString()}, but must be string. "
            "Fix: CAST(topic AS STRING), or set the option 'topic'."
        )
    if topic is None and options.topic is None:
        raise OptionError(
            "No target topic: the DataFrame has no 'topic' column and the option 'topic' is "
            "not set. Fix: .option('topic', 'name') or add a 'topic' column."
        )
    part = types.get("partition")
    if part is not None and not isinstance(part, IntegerType):
        raise OptionError(
            f"Column 'partition' has type {part.simpleString()}, but must be int. "
            "Fix: CAST(partition AS INT)."
        )
    headers = types.get("headers")
    if headers is not None:
        ok = (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]
            and isinstance(headers.elementType.fields[0].dataType, StringType)
            and isinstance(headers.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise OptionError(
                f"Column 'headers' has type {headers.simpleString()}, but must be "
                "array<struct<key:string,value:binary>>. Fix: build it with "
                "array(struct(lit('k') AS key, CAST(v AS BINARY) AS value))."
            )


# A task must not report success before its rows are acknowledged; past this, it fails.
FLUSH_TIMEOUT_S = 300.0


def _new_producer(conf: dict[str, str]) -> Producer:
    from sparklog.client import Producer

    return Producer(conf)


_PRODUCERS: ClientCache[Producer] = ClientCache(_new_producer)


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    idx = next((i for i, n in enumerate(batch.schema.names) if n.lower() == name), None)
    return None if idx is None else batch.column(idx)


def _as_binary(arr: pa.Array | None) -> pa.Array | None:
    if arr is None:
        return None
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr.cast(pa.binary())
    return arr


# Rows a task hands to the producer at once. Spark passes Arrow batches of at most 10 000
# rows; split over a 200-partition topic, each would make 200 record batches of ~50 rows
# (a fixed cost per batch in the producer, the broker and every later reader). Buffered to
# this size first, each partition gets one batch of thousands of rows per call.
SINK_BUFFER_BYTES = 8 * 2**20


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WriteStats:
    """At-least-once: produce every row of ``batches`` with the worker's idempotent
    producer; returns once all are acknowledged."""
    return produce_all(_PRODUCERS.get(options.client_conf()), options, batches)


def produce_all(producer: Producer, options: SinkOptions,
                batches: Iterator[pa.RecordBatch]) -> WriteStats:
    """Produce every row of ``batches`` (in order, ``SINK_BUFFER_BYTES`` at a time);
    returns once all are acknowledged."""
    stats = WriteStats()
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        size += batch.nbytes
        if size >= SINK_BUFFER_BYTES:
            _produce(producer, options, pending, stats)
            pending, size = [], 0
    if pending:
        _produce(producer, options, pending, stats)
    left = producer.flush(FLUSH_TIMEOUT_S)
    if left:
        raise WriteError(f"{left} records were not acknowledged by the brokers in time.")
    return stats


def _produce(
    producer: Producer, options: SinkOptions, pending: list[pa.RecordBatch], stats: WriteStats
) -> None:
    """Queue the rows of ``pending`` (batches of one schema), one producer call per topic."""
    batch = pending[0] if len(pending) == 1 else pa.concat_batches(pending)
    values = _as_binary(_column(batch, "value"))
    keys = _as_binary(_column(batch, "key"))
    partitions = _column(batch, "partition")
    headers = _column(batch, "headers")
    if options.topic is not None:
        groups = [(options.topic, None)]
    else:
        topics = _column(batch, "topic")
        assert topics is not None
        if topics.null_count:
            raise WriteError(
                "A row has a null 'topic' and the option 'topic' is not set. Fix: fill the "
                "topic column or set .option('topic', ...)."
            )
        uniques = pc.unique(topics).to_pylist()
        groups = [(t, None if len(uniques) == 1 else pc.equal(topics, t)) for t in uniques]
    for topic, mask in groups:

        def pick(arr: pa.Array | None, mask: pa.Array | None = mask) -> pa.Array | None:
            return arr if arr is None or mask is None else arr.filter(mask)

        vals = pick(values)
        assert vals is not None
        producer.produce_arrow(
            topic,
            vals,
            keys=pick(keys),
            partitions=pick(partitions),
            headers=pick(headers),
        )
        stats.rows += len(vals)
        stats.per_topic[topic] = stats.per_topic.get(topic, 0) + len(vals)


def _rows(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.rows for m in messages if isinstance(m, WriteStats))


class SparklogBatchWriter(DataSourceArrowWriter):
    """``df.write.format("sparklog")`` (append only); ``exactly_once``: one prepared
    transaction per task, all committed by the driver's ``commit``."""

    def __init__(self, options: SinkOptions, exactly_once: bool) -> None:
        self.options = options
        # names this write's transactional ids (the object is pickled to every task)
        self.write_id = uuid.uuid4().hex if exactly_once else None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteStats:
        if self.write_id is None:
            return write_batches(self.options, iterator)
        return write_transaction(self.options, iterator, self.write_id, produce_all)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        end_write(self.options, messages, commit=True)
        log.info("sparklog write committed: %d rows", _rows(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        end_write(self.options, messages, commit=False)
        if self.write_id is None:
            log.warning("sparklog write aborted; %d rows were already produced "
                        "(at-least-once)", _rows(messages))


class SparklogStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("sparklog")``: exactly-once per micro-batch when
    ``exactly_once``, else at-least-once (see the module doc)."""

    def __init__(self, options: SinkOptions, exactly_once: bool) -> None:
        self.options = options
        self.exactly_once = exactly_once

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteStats:
        if not self.exactly_once:
            return write_batches(self.options, iterator)
        return write_transaction(self.options, iterator, None, produce_all)

    # commit and abort go by the messages (a task's prepared transaction or not), not by
    # ``exactly_once``: Spark makes a new writer for them, after the tasks' one
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows = end_batch(self.options, messages, batchId, commit=True)
        log.info("sparklog micro-batch %d committed: %d rows", batchId, rows or _rows(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        end_batch(self.options, messages, batchId, commit=False)
        log.warning("sparklog micro-batch %d aborted (%d rows)", batchId, _rows(messages))
