"""Executor side (and the driver, for micro-batches it reads itself): read one offset range
as Arrow batches.

Fetchers are cached per worker process, keyed by their config (``ClientCache``): a
micro-batch does not pay connection set-up and metadata again. Each fetch comes back from
the client as one Arrow RecordBatch already in the exact Arrow schema Spark expects for the
source's own schema, so the rows pass through untouched (no Python object per row, no cast);
only a schema the user gave differently is cast.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from sparklog.protocol.errors import OffsetOutOfRangeError
from sparklog.spark.client_cache import ClientCache
from sparklog.spark.dataloss import report_data_loss
from sparklog.spark.options import SourceOptions
from sparklog.spark.planning import OffsetRange

if TYPE_CHECKING:
    from sparklog.client import ArrowFetcher

log = logging.getLogger(__name__)

__all__ = ["read_range"]


def _new_fetcher(conf: dict[str, str]) -> ArrowFetcher:
    from sparklog.client import ArrowFetcher

    return ArrowFetcher(conf)


_FETCHERS: ClientCache[ArrowFetcher] = ClientCache(_new_fetcher)


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
    fetcher = _FETCHERS.get(conf)
    tp = TopicPartition(r.topic, r.partition)
    pos = r.start
    empty_fetches = 0
    while pos < r.end:
        try:
            fetched = fetcher.fetch(
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
            _FETCHERS.drop(conf)  # a broken connection must not poison the next task
            raise
        batch = fetched.batch
        n = batch.num_rows
        if n:
            empty_fetches = 0
            last = batch.column("offset")[n - 1].as_py()
            yield batch if batch.schema == target else batch.cast(target)
            pos = last + 1
            continue
        # No records: the rest of the range holds only control batches / aborted data /
        # compacted-away offsets, or the data is not readable yet (read_committed above the
        # last stable offset). The client says how far the log was scanned.
        if fetched.next_offset > pos:
            pos = fetched.next_offset
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
