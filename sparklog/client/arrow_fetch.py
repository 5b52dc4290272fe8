"""The Arrow read path: one partition's offset range -> the rows of Spark's Kafka source.

``ArrowFetcher`` is what the Spark source reads with (executor tasks, and the driver when it
reads a small micro-batch itself or measures a byte budget). It is stateless: no positions,
no group, no buffered records; every call says which partition and offsets it wants, sends
ONE Fetch to the partition's leader (``fetch_many``: one multi-partition Fetch to each
leader of the partitions asked for) and returns what came back, decoded: all partitions
that got records in one decoder pass (``decode_fetched_parts``), each partition's rows a
zero-copy slice of the result. The caller loops on ``next_offset``.

The rows come out in ``RECORD_SCHEMA``, exactly the Arrow form of Spark's Kafka source
schema (``timestamp[us, UTC]`` timestamps, ``element`` list items), so a Spark reader yields
them as they are. The column list itself is the protocol decoder's
(``record_arrow.arrow_schema``); this module adds topic and partition and gives two columns
Spark's types, once per fetch: the int64 millisecond timestamps become microseconds in one checked multiply,
the headers list is relabelled without a copy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from sparklog.client.arrow_decode import FetchedPart, decode_fetched_parts
from sparklog.client.connection import EventLoopThread, with_retries
from sparklog.client.core import conf_bool, conf_int, parse_isolation
from sparklog.client.sync_client import SyncClient
from sparklog.protocol.batch_header import BATCH_HEADER_SIZE, batch_size, read_header
from sparklog.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    OffsetOutOfRangeError,
    error_for_code,
)
from sparklog.protocol.messages.fetch import FetchRequest
from sparklog.protocol.record_arrow import HEADERS_TYPE, arrow_schema
from sparklog.protocol.topic_partition import TopicPartition

__all__ = [
    "RECORD_SCHEMA", "ArrowFetcher", "FetchAhead", "FetchRange", "FetchedRows", "batch_sizes", "record_rows", "record_schema",
]

_TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
_HEADERS_TYPE = pa.list_(pa.field("element", HEADERS_TYPE.value_type))
_SPARK_TYPES = {"timestamp": _TIMESTAMP_TYPE, "headers": _HEADERS_TYPE}

# Spark's Kafka source columns: key, value, topic, partition, offset, timestamp,
# timestampType, headers (Spark declares every column nullable)
RECORD_SCHEMA = pa.schema([
    pa.field(f.name, _SPARK_TYPES.get(f.name, f.type))
    for f in arrow_schema(topic=True, partition=True)
])
_WITHOUT_HEADERS = RECORD_SCHEMA.remove(RECORD_SCHEMA.get_field_index("headers"))


def record_schema(include_headers: bool) -> pa.Schema:
    """``RECORD_SCHEMA``, or all of it but the headers column."""
    return RECORD_SCHEMA if include_headers else _WITHOUT_HEADERS


_EMPTY = {h: pa.RecordBatch.from_pylist([], schema=record_schema(h)) for h in (True, False)}


@dataclass(frozen=True, slots=True)
class FetchedRows:
    """What one Fetch of one partition returned."""

    batch: pa.RecordBatch  # record_schema(include_headers) rows, offsets in [start, end)
    next_offset: int  # how far the fetched batches reached (past markers / aborted data)
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class FetchRange:
    """One partition's part of a fetch: offsets ``[start, end)``; ``end`` None reads up to
    the high watermark (the last stable offset under read_committed). ``max_bytes``: what
    the broker may return for this partition (None: the fetch's ``max_bytes``). A Fetch
    cannot say where to stop, so the broker sends data past ``end`` up to this limit, and
    that data takes budget from the partitions after it: a caller that knows about how
    many bytes are left before ``end`` asks for about that much."""

    tp: TopicPartition
    start: int
    end: int | None = None
    max_bytes: int | None = None


class FetchAhead:
    """A ``fetch_many`` in flight; ``result()`` waits for it (and raises what it raised)."""

    __slots__ = ("_future", "_timeout_s")

    def __init__(self, future: concurrent.futures.Future[
                     dict[TopicPartition, FetchedRows | OffsetOutOfRangeError]],
                 timeout_s: float) -> None:
        self._future = future
        self._timeout_s = timeout_s

    def result(self) -> dict[TopicPartition, FetchedRows | OffsetOutOfRangeError]:
        return EventLoopThread.wait(self._future, self._timeout_s)


class ArrowFetcher(SyncClient):
    """Reads offset ranges of partitions as Arrow rows (Kafka config names).

    ``fetch_many`` reads several partitions at once: ONE multi-partition Fetch per leader
    broker, the brokers' requests in flight together, so a task holding many small
    partitions pays one round trip per broker instead of one per partition. Uses
    ``check.crcs`` and ``fetch.max.wait.ms`` from the config, plus the connection settings
    every client takes."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config, "sparklog-fetcher")
        self.check_crcs = conf_bool(config, "check.crcs", True)
        self.fetch_max_wait_ms = conf_int(config, "fetch.max.wait.ms", 500)

    def fetch(self, tp: TopicPartition | tuple[str, int], start_offset: int,
              end_offset: int | None = None, *, max_bytes: int = 50 * 2**20,
              isolation_level: str = "read_uncommitted", timeout_ms: int = 30000,
              include_headers: bool = True) -> FetchedRows:
        """Records start_offset <= offset < end_offset (None: up to the high watermark, or
        the last stable offset under read_committed) from ONE Fetch of at most
        ``max_bytes``. May return fewer rows than asked: loop on the last offset + 1, or on
        ``next_offset`` when no rows came back. A start below the log start raises
        OffsetOutOfRangeError carrying ``log_start_offset`` and ``high_watermark``."""
        r = FetchRange(TopicPartition(tp[0], tp[1]), start_offset, end_offset)
        got = self.fetch_many([r], max_bytes=max_bytes, isolation_level=isolation_level,
                              timeout_ms=timeout_ms, include_headers=include_headers)[r.tp]
        if isinstance(got, OffsetOutOfRangeError):
            raise got
        return got

    def fetch_many(self, ranges: Sequence[FetchRange], *, max_bytes: int = 50 * 2**20,
                   isolation_level: str = "read_uncommitted", timeout_ms: int = 30000,
                   include_headers: bool = True,
                   ) -> dict[TopicPartition, FetchedRows | OffsetOutOfRangeError]:
        """``fetch`` for several distinct partitions: one Fetch per leader broker, each
        asking up to ``max_bytes`` per partition and in all (the broker fills partitions in
        the order given and always returns a first batch, so put starved partitions first
        next time). A partition whose start is below its log start maps to its
        OffsetOutOfRangeError instead of rows; other errors raise."""
        return self.fetch_ahead(ranges, max_bytes=max_bytes, isolation_level=isolation_level,
                                timeout_ms=timeout_ms, include_headers=include_headers).result()

    def fetch_ahead(self, ranges: Sequence[FetchRange], *, max_bytes: int = 50 * 2**20,
                    isolation_level: str = "read_uncommitted", timeout_ms: int = 30000,
                    include_headers: bool = True) -> FetchAhead:
        """``fetch_many`` started now and collected later: the caller works on the last
        round's rows while the loop thread fetches and decodes the next round's."""
        isolation = parse_isolation(isolation_level)

        async def go() -> dict[TopicPartition, FetchedRows | OffsetOutOfRangeError]:
            raw = await self._fetch_raw(
                [(r.tp, r.start, max_bytes if r.max_bytes is None else r.max_bytes)
                 for r in ranges], max_bytes,
                                        isolation, timeout_ms,
                                        min(self.fetch_max_wait_ms, timeout_ms))
            return self._rows(ranges, raw, isolation, include_headers)

        return FetchAhead(self._start(go()), timeout_ms / 1000 + 5)

    def _rows(self, ranges: Sequence[FetchRange], raw: dict[TopicPartition, Any],
              isolation: int, include_headers: bool,
              ) -> dict[TopicPartition, FetchedRows | OffsetOutOfRangeError]:
        """Each range's rows from its partition's part of the Fetch responses, all
        partitions that got records decoded in one pass."""
        out: dict[TopicPartition, FetchedRows | OffsetOutOfRangeError] = {}
        with_records: list[FetchRange] = []
        parts: list[FetchedPart] = []
        for r in ranges:
            p = raw[r.tp]
            if isinstance(p, OffsetOutOfRangeError):
                out[r.tp] = p
            elif not p.records:  # common in many-partition fetches: the budget went elsewhere
                out[r.tp] = FetchedRows(_EMPTY[include_headers], r.start, p.high_watermark,
                                        p.log_start_offset, p.last_stable_offset)
            else:
                end = r.end
                limit = p.last_stable_offset if isolation == 1 and p.last_stable_offset >= 0 \
                    else p.high_watermark
                if end is None or (limit >= 0 and end > limit):
                    end = limit if limit >= 0 else end
                aborted = [(a.producer_id, a.first_offset)
                           for a in (p.aborted_transactions or [])]
                with_records.append(r)
                parts.append(FetchedPart(p.records, r.start, end, isolation == 1, aborted))
        if parts:
            dec, next_offsets = decode_fetched_parts(parts, verify_crc=self.check_crcs)
            rows = record_rows(dec.batch, [r.tp for r in with_records], dec.rows.tolist(),
                               include_headers)
            for r, first, n, nxt in zip(with_records, dec.first.tolist(), dec.count.tolist(),
                                        next_offsets, strict=True):
                p = raw[r.tp]
                out[r.tp] = FetchedRows(rows.slice(first, n), nxt, p.high_watermark,
                                        p.log_start_offset, p.last_stable_offset)
        return {r.tp: out[r.tp] for r in ranges}

    def batch_sizes(self, tp: TopicPartition | tuple[str, int], start_offset: int, *,
                    max_bytes: int = 50 * 2**20, timeout_ms: int = 30000,
                    isolation_level: str = "read_uncommitted") -> list[tuple[int, int]]:
        """(next_offset, size in bytes) of the whole batches one Fetch returns from
        ``start_offset`` (batch headers only, nothing decoded)."""
        tp = TopicPartition(tp[0], tp[1])

        async def go() -> list[tuple[int, int]]:
            p = (await self._fetch_raw([(tp, start_offset, max_bytes)], max_bytes,
                                       parse_isolation(isolation_level), timeout_ms, 0))[tp]
            if isinstance(p, OffsetOutOfRangeError):
                raise p
            return [(nxt, size) for _base, nxt, size in batch_sizes(p.records or b"")
                    if nxt > start_offset]

        return self._run(go(), timeout_ms / 1000 + 5)

    async def _fetch_raw(self, wants: list[tuple[TopicPartition, int, int]], max_bytes: int,
                         isolation: int, timeout_ms: int, max_wait_ms: int,
                         ) -> dict[TopicPartition, Any]:
        """Each partition's part of the Fetch responses (FetchResponse.PartitionData), or
        its OffsetOutOfRangeError, for ``wants`` = (partition, offset, its max bytes): one
        request per leader broker, sent together. Retriable
        errors (and a moved leader) are retried for the partitions that had them, until
        ``timeout_ms``."""
        client = self._client
        pending = {tp: offset for tp, offset, _ in wants}
        assert len(pending) == len(wants), "one range per partition"
        limits = {tp: limit for tp, _, limit in wants}
        out: dict[TopicPartition, Any] = {}

        async def from_leader(node: int, tps: list[TopicPartition]) -> Any:
            topics: dict[str, list[Any]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(FetchRequest.FetchPartition(
                    partition=tp.partition, fetch_offset=pending[tp],
                    partition_max_bytes=limits[tp]))
            req = FetchRequest(
                replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                isolation_level=isolation, session_id=0, session_epoch=-1,
                topics=[FetchRequest.FetchTopic(topic=t, partitions=ps)
                        for t, ps in topics.items()])
            return await client.send_node(node, req, timeout_ms=timeout_ms + max_wait_ms)

        async def once() -> dict[TopicPartition, Any]:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                by_leader.setdefault(await client.leader_id(tp, fresh=True), []).append(tp)
            responses = await asyncio.gather(
                *(from_leader(node, tps) for node, tps in by_leader.items()))
            retry: BaseException | None = None
            for resp in responses:
                for t in resp.responses:
                    for p in t.partitions:
                        tp = TopicPartition(t.topic, p.partition_index)
                        start = pending.get(tp)
                        if start is None:
                            continue
                        if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                            err = OffsetOutOfRangeError(
                                f"{tp.topic}-{tp.partition}: offset {start} is out of range "
                                f"[{p.log_start_offset}, {p.high_watermark})")
                            err.log_start_offset = p.log_start_offset
                            err.high_watermark = p.high_watermark
                            out[tp] = err
                        elif p.error_code:
                            err = error_for_code(p.error_code, f"fetch {tp.topic}-{tp.partition}: "
                                                 f"{ErrorCode.for_code(p.error_code).name}")
                            if not err.retriable:
                                raise err
                            retry = err
                            continue
                        else:
                            out[tp] = p
                        del pending[tp]
            if retry is not None:
                raise retry
            return out

        async def invalidate(_err: BaseException) -> None:
            client.invalidate()

        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        return await with_retries(once, retries=2**31, deadline=deadline,
                                  backoff_ms=client.config.retry_backoff_ms,
                                  on_retry=invalidate)


def record_rows(batch: pa.RecordBatch, tps: Sequence[TopicPartition], counts: Sequence[int],
                include_headers: bool) -> pa.RecordBatch:
    """Decoder rows (record_arrow.arrow_schema()) of the partitions ``tps``, ``counts[i]``
    rows of ``tps[i]`` after each other -> record_schema(include_headers) rows.

    Key, value, offset, timestampType and headers are the decoder's arrays; topic,
    partition and the microsecond timestamps are built from numpy buffers (several times
    faster than Arrow's repeat and multiply kernels on fetch-sized arrays)."""
    key, value, offset, timestamp, timestamp_type, headers = batch.columns
    n = batch.num_rows
    names = [tp.topic.encode() for tp in tps]
    ends = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.repeat(np.array([len(t) for t in names], dtype=np.int32), counts),
              out=ends[1:])
    topics = pa.Array.from_buffers(pa.string(), n, [
        None, pa.py_buffer(ends), pa.py_buffer(b"".join(t * c for t, c in zip(names, counts,
                                                                            strict=True)))])
    partitions = np.repeat(np.array([tp.partition for tp in tps], dtype=np.int32), counts)
    cols = [key, value, topics, pa.array(partitions), offset, _micros(timestamp),
            timestamp_type]
    if include_headers:
        cols.append(headers.view(_HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(cols, schema=record_schema(include_headers))


_MAX_MS = (2**63 - 1) // 1000  # larger millisecond values overflow int64 microseconds


def _micros(ms: pa.Array) -> pa.Array:
    """int64 milliseconds (no nulls) -> timestamp[us, UTC], in one multiply."""
    a = ms.to_numpy()
    if a.size and (int(a.max()) > _MAX_MS or int(a.min()) < -_MAX_MS):
        raise InvalidRecordError("record timestamp out of range for microseconds")
    return pa.Array.from_buffers(_TIMESTAMP_TYPE, len(a), [None, pa.py_buffer(a * 1000)])


def batch_sizes(buf: bytes | memoryview) -> list[tuple[int, int, int]]:
    """(base_offset, next_offset, size) of every complete batch in a records field."""
    out = []
    mv = memoryview(buf)
    pos, end = 0, len(mv)
    while end - pos >= BATCH_HEADER_SIZE:
        size = batch_size(mv, pos)
        if size < BATCH_HEADER_SIZE or pos + size > end:
            break
        h = read_header(mv, pos)
        out.append((h.base_offset, h.next_offset, size))
        pos += size
    return out
