"""Executor side: read one task's offset range as Arrow batches.

Spark reuses Python workers between tasks, so consumers are cached per worker process, keyed
by their config: a micro-batch does not pay connection set-up and metadata again. Each fetch
comes back from the client as one Arrow RecordBatch; the only per-batch work here is a cast to
the exact Arrow schema Spark expects (no Python object per row).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pyarrow as pa

from sparklog.protocol.errors import OffsetOutOfRangeError
from sparklog.spark.dataloss import report_data_loss
from sparklog.spark.options import SourceOptions
from sparklog.spark.planning import OffsetRange

log = logging.getLogger(__name__)

__all__ = ["read_range", "cached_consumer"]

_CACHE_LOCK = threading.Lock()
_CONSUMERS: dict[tuple[tuple[str, str], ...], object] = {}


def cached_consumer(conf: dict[str, str]):  # noqa: ANN201 - sparklog.client.Consumer
    key = tuple(sorted(conf.items()))
    with _CACHE_LOCK:
        consumer = _CONSUMERS.get(key)
        if consumer is None:
            from sparklog.client import Consumer

            consumer = Consumer(dict(conf))
            _CONSUMERS[key] = consumer
        return consumer


def _drop_consumer(conf: dict[str, str]) -> None:
    key = tuple(sorted(conf.items()))
    with _CACHE_LOCK:
        consumer = _CONSUMERS.pop(key, None)
    if consumer is not None:
        try:
            consumer.close()  # type: ignore[attr-defined]
        except Exception:
            log.debug("error closing consumer", exc_info=True)


def _log_start(conf: dict[str, str], topic: str, partition: int, isolation: str) -> int:
    from sparklog.client import AdminClient, TopicPartition

    admin = AdminClient(dict(conf))
    try:
        tp = TopicPartition(topic, partition)
        return int(admin.list_offsets({tp: -2}, isolation_level=isolation)[tp][0])
    finally:
        admin.close()


def read_range(
    r: OffsetRange, options: SourceOptions, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``r`` (offsets ``[start, end)``) as batches of schema ``target``."""
    from sparklog.client import TopicPartition

    conf = options.client_conf()
    consumer = cached_consumer(conf)
    tp = TopicPartition(r.topic, r.partition)
    pos = r.start
    empty_fetches = 0
    while pos < r.end:
        try:
            batch = consumer.fetch_arrow(
                tp,
                pos,
                r.end,
                isolation_level=options.isolation_level,
                timeout_ms=options.poll_timeout_ms,
                include_headers=options.include_headers,
                max_bytes=options.fetch_bytes,
            )
        except OffsetOutOfRangeError as err:
            log_start = getattr(err, "log_start_offset", None)
            if log_start is None or log_start < 0:
                log_start = _log_start(conf, r.topic, r.partition, options.isolation_level)
            if log_start <= pos:
                raise
            report_data_loss(
                options.fail_on_data_loss,
                f"Cannot fetch offset {pos} of {r.topic}-{r.partition}: the log now starts at "
                f"{log_start}, so offsets [{pos}, {min(log_start, r.end)}) are gone.",
            )
            pos = log_start
            continue
        except Exception:
            _drop_consumer(conf)  # a broken connection must not poison the next task
            raise
        n = batch.num_rows
        if n:
            empty_fetches = 0
            last = batch.column("offset")[n - 1].as_py()
            yield batch.cast(target)
            pos = last + 1
            continue
        # No records: the rest of the range holds only control batches / aborted data /
        # compacted-away offsets, or the data is not readable yet (read_committed above the
        # last stable offset). The client says how far the log was scanned when it can.
        next_pos = _scanned_to(batch)
        if next_pos is not None and next_pos > pos:
            pos = next_pos
            continue
        empty_fetches += 1
        if empty_fetches >= 3:
            log.info(
                "no records in %s-%d [%d, %d) after %d fetches; range treated as done",
                r.topic,
                r.partition,
                pos,
                r.end,
                empty_fetches,
            )
            return


def _scanned_to(batch: pa.RecordBatch) -> int | None:
    meta = batch.schema.metadata or {}
    raw = meta.get(b"next_offset") or meta.get(b"sparklog.next_offset")
    return int(raw) if raw is not None else None
