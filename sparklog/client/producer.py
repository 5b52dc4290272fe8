"""The producer: per-record ``produce`` and bulk ``produce_arrow`` over one accumulator.

Threading model: the caller's thread appends to per-partition batches under one lock (a
``produce`` call is a partition choice and a few list appends, no encoding); the private
event-loop thread runs the sender, which closes batches after ``linger.ms`` / at
``batch.size``, encodes each batch once, just before its first send (``producer_batch``),
and keeps up to ``max.in.flight.requests.per.connection`` Produce requests in flight per
broker. ``produce_arrow`` encodes its batches in the caller's thread straight from the Arrow
columns and only queues finished bytes.

Idempotence (``enable.idempotence``, Kafka's default): one InitProducerId at start, then
every batch carries producer id/epoch and a per-partition sequence assigned when the batch
is closed, so a retried batch is deduplicated by the broker and order is kept.

Transactions (``transactional.id``, KIP-98; ``transaction.two.phase.commit.enable``,
KIP-939): ``init_transactions``, ``begin_transaction``, ``send_offsets_to_transaction``,
``commit_transaction``/``abort_transaction`` and, for two-phase commit,
``prepare_transaction``/``complete_transaction``; the coordinator calls are in
``sparklog.client.transactions``. Records go out only inside a transaction (a new batch
checks it: outside one every queue is empty), and the sender adds a partition to the
transaction before its first batch is sent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from sparklog.client.connection import KafkaConnectionError, KafkaTimeoutError
from sparklog.client.core import STALE_METADATA, conf_bool, conf_int
from sparklog.client.delivery import DeliveryError, RecordMetadata
from sparklog.client.partitioner import Partitioner
from sparklog.client.producer_batch import BatchFormat, PartitionQueue, ProducerBatch
from sparklog.client.sync_client import SyncClient
from sparklog.client.transactions import PreparedTxnState, TransactionManager
from sparklog.protocol.compression import codec_for_name
from sparklog.protocol.errors import (
    ErrorCode,
    KafkaError,
    SparklogError,
    error_for_code,
)
from sparklog.protocol.messages.produce import ProduceRequest
from sparklog.protocol.messages.transactions import InitProducerIdRequest
from sparklog.protocol.record_arrow_encode import as_binary_array, binary_parts
from sparklog.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["Producer"]


def _acks(v: Any) -> int:
    s = str(v if v is not None else "all").strip().lower()
    if s in ("all", "-1"):
        return -1
    if s in ("0", "1"):
        return int(s)
    raise ValueError(f"config acks: expected all, -1, 0 or 1, got {v!r}")


class Producer(SyncClient):
    """Kafka producer with Kafka's config names (sync facade over an async sender)."""

    def __init__(self, config: dict[str, Any]) -> None:
        conf = dict(config)
        self.acks = _acks(conf.get("acks", conf.get("request.required.acks")))
        self.linger_ms = float(conf.get("linger.ms", conf.get("queue.buffering.max.ms", 5)))
        self.batch_size = conf_int(conf, "batch.size", 16384)
        self.max_request_size = conf_int(conf, "max.request.size", 1048576)
        self.compression = codec_for_name(str(conf.get("compression.type",
                                                       conf.get("compression.codec", "none"))))
        lvl = conf.get("compression.level")
        self.compression_level = int(lvl) if lvl is not None and int(lvl) >= 0 else None
        self.retries = conf_int(conf, "retries", 2147483647)
        self.delivery_timeout_ms = conf_int(conf, "delivery.timeout.ms", 120000)
        self.request_timeout_ms = conf_int(conf, "request.timeout.ms", 30000)
        self.max_in_flight = conf_int(conf, "max.in.flight.requests.per.connection", 5)
        self.max_block_ms = conf_int(conf, "max.block.ms", 60000)
        self.buffer_memory = conf_int(conf, "buffer.memory", 33554432)
        self.arrow_batch_bytes = conf_int(
            conf, "arrow.batch.size", min(max(self.batch_size, 1 << 20), self.max_request_size))
        explicit_idem = conf.get("enable.idempotence")
        idem = conf_bool(conf, "enable.idempotence", True)
        conflicts = self.acks != -1 or self.retries == 0 or self.max_in_flight > 5
        if idem and conflicts:
            if explicit_idem is not None and conf_bool(conf, "enable.idempotence", True):
                raise ValueError("enable.idempotence=true needs acks=all, retries > 0 and "
                                 "max.in.flight.requests.per.connection <= 5")
            idem = False
        txn_id = conf.get("transactional.id")
        if txn_id and not idem:
            raise ValueError("transactional.id needs idempotence (acks=all, retries > 0, "
                             "max.in.flight.requests.per.connection <= 5)")
        self.idempotent = idem
        self.partitioner = Partitioner(str(conf.get("partitioner", "murmur2_random")))
        self._null_sticky = self.partitioner.name in ("murmur2_random", "random",
                                                      "consistent_random")
        self.interceptors: list[Any] = list(conf.get("interceptors") or [])
        self._default_cb: Callable | None = conf.get("on_delivery") or conf.get("delivery.report.cb")
        super().__init__(conf, "sparklog-producer")
        self._format = BatchFormat(self.compression, self.compression_level)

        self._lock = threading.Lock()
        self._done_cv = threading.Condition(self._lock)
        self._queues: dict[TopicPartition, PartitionQueue] = {}
        self._partition_counts: dict[str, int] = {}
        self._pending = 0  # records produced and not yet acknowledged/failed
        self._queued_bytes = 0
        self._flushing = 0
        self._errors: list[BaseException] = []
        self.producer_id = -1
        self.producer_epoch = -1
        self._wake: asyncio.Event | None = None
        self._sender: concurrent.futures.Future | None = None
        self._metadata_task: asyncio.Task | None = None  # the one refresh under way
        self._in_flight: dict[int, int] = {}
        self._txn = None if not txn_id else TransactionManager(
            self._client, str(txn_id), conf_int(conf, "transaction.timeout.ms", 60000),
            conf_bool(conf, "transaction.two.phase.commit.enable", False))
        try:
            self._run(self._start(), self.max_block_ms / 1000 + 5)
        except BaseException:
            self._thread.stop()
            raise

    # ------------------------------------------------------------------ lifecycle

    async def _start(self) -> None:
        self._wake = asyncio.Event()
        await self._client.refresh_metadata([])
        if self.idempotent and self._txn is None:
            conn = await self._client.any_connection()
            if not self._client.supports(conn, 22):
                log.warning("broker does not support InitProducerId: idempotence disabled")
                self.idempotent = False
            else:
                resp = await self._client.send(conn, InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=2147483647))
                if resp.error_code:
                    raise error_for_code(resp.error_code, "InitProducerId failed")
                self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                self._format = BatchFormat(self.compression, self.compression_level,
                                           self.producer_id, self.producer_epoch)
        self._sender = asyncio.ensure_future(self._run_sender())

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout`` seconds), then release connections."""
        if self._closed:
            return
        try:
            self.flush(timeout if timeout is not None else self.delivery_timeout_ms / 1000,
                       raise_errors=False)
        finally:
            super().close()

    def __len__(self) -> int:
        return self._pending

    # ------------------------------------------------------------------ produce

    def _partition_count(self, topic: str) -> int:
        n = self._partition_counts.get(topic)
        if n is not None:
            return n
        if self._thread.in_loop_thread:
            raise SparklogError(f"metadata for {topic!r} unknown; cannot block in a callback")
        tm = self._run(self._client.topic_metadata(topic, max_wait_ms=self.max_block_ms),
                       self.max_block_ms / 1000 + 5)
        n = len(tm.partitions)
        self._partition_counts[topic] = n
        return n

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                headers: Any = None, timestamp: int | None = None,
                on_delivery: Callable | None = None, callback: Callable | None = None) -> None:
        """Queue one record. ``on_delivery(err, RecordMetadata)`` runs on the I/O thread once
        the broker acknowledged (or the record failed). Records without ``timestamp`` get
        their batch's creation time (at most ``linger.ms`` earlier than the call)."""
        # hot path: every statement here costs per record, keep it short
        if self._closed:
            raise SparklogError("producer is closed")
        if value.__class__ is str:
            value = value.encode()
        if key is not None and key.__class__ is str:
            key = key.encode()
        if headers is not None:
            headers = _norm_headers(headers)
        if self.interceptors:
            key, value, headers = self._intercept(topic, partition, key, value, headers)
        n = self._partition_counts.get(topic) or self._partition_count(topic)
        if partition is None or partition < 0:
            if key is None and self._null_sticky:
                partition = self.partitioner._sticky.get(topic)
                if partition is None or partition >= n:
                    partition = self.partitioner.sticky_partition(topic, n)
            else:
                partition = self.partitioner.partition(topic, key, n)
        elif partition >= n:
            raise error_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"partition {partition} of {topic!r} does not exist ({n} partitions)")
        cb = on_delivery or callback or self._default_cb
        size = 16 + (len(value) if value is not None else 0) + \
            (len(key) if key is not None else 0)
        if self._queued_bytes > self.buffer_memory:
            self._wait_for_space()
        wake = False
        with self._lock:
            q = self._queues.get((topic, partition))
            if q is None:
                q = self._queues[TopicPartition(topic, partition)] = PartitionQueue()
            b = q.open
            if b is not None and b.size + size > self.batch_size and b.count:
                self._close_batch(q, b)
                if key is None:
                    self.partitioner.on_new_batch(topic, n, partition)
                b = None
                wake = True
            if b is None:
                if self._txn is not None:
                    self._txn.check_can_produce()
                b = q.open = ProducerBatch(TopicPartition(topic, partition), time.monotonic())
                wake = True
            b.append(key, value, timestamp, headers, cb)
            b.size += size
            self._queued_bytes += size
            self._pending += 1
        if wake:
            self._wakeup()

    def _intercept(self, topic: str, partition: int | None, key: Any, value: Any,
                   headers: Any) -> tuple[Any, Any, Any]:
        for ic in self.interceptors:
            try:
                repl = ic.on_send(topic, partition, key, value, headers)
                if repl is not None:
                    key, value, headers = repl
            except Exception:  # interceptors must not break the producer
                log.exception("interceptor on_send failed")
        return key, value, headers

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             headers: Any = None, timestamp: int | None = None) -> concurrent.futures.Future:
        """Like ``produce`` but returns a future of the RecordMetadata (kafka-python style)."""
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def done(err: Exception | None, md: RecordMetadata) -> None:
            if err is not None:
                fut.set_exception(err)
            else:
                fut.set_result(md)

        self.produce(topic, value, key, partition, headers, timestamp, on_delivery=done)
        return fut

    def produce_arrow(self, topic: str, values: Any, keys: Any = None, partitions: Any = None,
                      headers: Any = None, timestamps: Any = None) -> int:
        """Queue a whole column of records; batches are encoded here, vectorised (no Python
        object per record). ``partitions`` (int array, null = partitioner) overrides the
        partitioner per row. Returns the number of records queued. Delivery is confirmed
        by ``flush()``, which raises DeliveryError if any record of this API failed."""
        if self._closed:
            raise SparklogError("producer is closed")
        if self._txn is not None:
            self._txn.check_can_produce()
        values = as_binary_array(values)
        keys = as_binary_array(keys)
        n = len(values) if values is not None else (len(keys) if keys is not None else 0)
        if n == 0:
            return 0
        if isinstance(headers, pa.ChunkedArray):
            headers = headers.combine_chunks()
        if headers is not None and not pa.types.is_list(headers.type):
            raise TypeError("headers must be list<struct<key string, value binary>>")
        if isinstance(timestamps, pa.ChunkedArray):
            timestamps = timestamps.combine_chunks()
        count = self._partition_count(topic)
        if keys is not None:
            ko, kd, kvalid = binary_parts(keys)
            parts = self.partitioner.partition_array(topic, ko, kd, kvalid, n, count)
        else:
            parts = self.partitioner.partition_array(topic, None, None, None, n, count)
        if partitions is not None:
            if isinstance(partitions, pa.ChunkedArray):
                partitions = partitions.combine_chunks()
            if isinstance(partitions, pa.Array):
                pvalid = partitions.is_valid().to_numpy(zero_copy_only=False)
                pvals = partitions.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)
            else:
                pvals = np.asarray(partitions, dtype=np.int32)
                pvalid = np.ones(n, bool)
            pvals = np.where(pvalid & (pvals >= 0), pvals, parts)
            if len(pvals) and int(pvals.max()) >= count:
                raise error_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"partition {int(pvals.max())} of {topic!r} does not exist "
                                     f"({count} partitions)")
            parts = pvals
        if keys is None or (kvalid is not None and not kvalid.all()):
            # the null-key share went to the sticky partition: move on for the next call
            sticky = self.partitioner.sticky_partition(topic, count)
            self.partitioner.on_new_batch(topic, count, sticky)
        uniq = np.unique(parts)
        if len(uniq) == 1:
            groups = [(int(uniq[0]), None)]
        else:
            order = np.argsort(parts, kind="stable")
            sorted_parts = parts[order]
            bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
            edges = [0, *bounds.tolist(), n]
            groups = [(int(sorted_parts[a]), pa.array(order[a:b]))
                      for a, b in zip(edges[:-1], edges[1:], strict=True)]
        now_ms = int(time.time() * 1000)
        for p, idx in groups:
            v = values if idx is None or values is None else values.take(idx)
            k = keys if idx is None or keys is None else keys.take(idx)
            h = headers if idx is None or headers is None else headers.take(idx)
            t = timestamps
            if t is not None and idx is not None:
                t = t.take(idx) if isinstance(t, pa.Array) else np.asarray(t)[idx.to_numpy()]
            self._queue_encoded(TopicPartition(topic, p), v, k, t, h, now_ms)
        return n

    def _queue_encoded(self, tp: TopicPartition, v: Any, k: Any, t: Any, h: Any,
                       now_ms: int) -> None:
        if self._queued_bytes > self.buffer_memory:
            self._wait_for_space()
        with self._lock:
            q = self._queues.get(tp)
            if q is None:
                q = self._queues[tp] = PartitionQueue()
            if q.open is not None:  # keep per-partition order with earlier produce() calls
                self._close_batch(q, q.open)
            seq = q.next_sequence if self.idempotent else -1
            encoded = self._format.encode_columns(v, k, t, h, now_ms=now_ms, base_sequence=seq,
                                                  max_batch_bytes=self.arrow_batch_bytes)
            now = time.monotonic()
            for eb in encoded:
                b = ProducerBatch(tp, now)
                b.encoded = eb
                b.count = eb.record_count
                b.size = len(eb.data)
                b.base_sequence = seq
                if self.idempotent:
                    seq = (seq + eb.record_count) & 0x7FFFFFFF
                q.ready.append(b)
                self._queued_bytes += b.size
                self._pending += b.count
            if self.idempotent:
                q.next_sequence = seq
        self._wakeup()

    def _close_batch(self, q: PartitionQueue, b: ProducerBatch) -> None:
        """Caller holds the lock. Sequences are fixed here, in close order."""
        if self.idempotent:
            b.base_sequence = q.next_sequence
            q.next_sequence = (q.next_sequence + b.count) & 0x7FFFFFFF
        q.ready.append(b)
        if q.open is b:
            q.open = None

    def _wakeup(self) -> None:
        if self._wake is not None:
            try:
                self._thread.loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # loop closed
                pass

    def _wait_for_space(self) -> None:
        deadline = time.monotonic() + self.max_block_ms / 1000
        with self._done_cv:
            while self._queued_bytes > self.buffer_memory:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KafkaTimeoutError(
                        f"buffer.memory ({self.buffer_memory} bytes) full for max.block.ms")
                self._done_cv.wait(min(left, 0.1))

    # ------------------------------------------------------------------ flush / poll

    def poll(self, timeout: float | None = None) -> int:
        """Delivery callbacks run on the I/O thread, so there is nothing to serve here;
        kept for confluent-kafka compatibility. Returns 0."""
        if timeout:
            time.sleep(min(timeout, 0.001))
        return 0

    def flush(self, timeout: float | None = None, *, raise_errors: bool = True) -> int:
        """Send everything queued now and wait for it; returns the records still pending.
        Raises DeliveryError when records without a delivery callback failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._flushing += 1
        try:
            self._wakeup()
            with self._done_cv:
                while self._pending:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    self._done_cv.wait(0.05 if left is None else min(left, 0.05))
                    if self._sender is not None and self._sender.done():
                        break
                left_n = self._pending
                errors, self._errors = self._errors, []
        finally:
            with self._lock:
                self._flushing -= 1
        if self._sender is not None and self._sender.done() and self._sender.exception():
            raise SparklogError(f"producer I/O thread died: {self._sender.exception()}")
        if errors and raise_errors:
            raise DeliveryError(f"{len(errors)} batch(es) failed: {errors[0]}") from errors[0]
        return left_n

    # ------------------------------------------------------------------ sender (loop thread)

    async def _run_sender(self) -> None:
        assert self._wake is not None
        pending_tasks: set[asyncio.Task] = set()
        timeout: float | None = None
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                requests, timeout = self._drain()
            except Exception:
                log.exception("producer drain failed")
                timeout = 0.1
                continue
            for node, batches in requests:
                t = asyncio.ensure_future(self._send_request(node, batches))
                pending_tasks.add(t)
                t.add_done_callback(pending_tasks.discard)

    def _drain(self) -> tuple[list[tuple[int, list[ProducerBatch]]], float | None]:
        """Pick sendable batches: full ones, lingered ones, everything while flushing.
        Returns (requests per node, seconds until the next linger deadline)."""
        now = time.monotonic()
        linger = self.linger_ms / 1000
        next_wake: float | None = None
        per_node: dict[int, list[ProducerBatch]] = {}
        md = self._client.metadata
        need_metadata = False
        with self._lock:
            flushing = self._flushing > 0 or self._closed
            for tp, q in self._queues.items():
                leader = md.leader_for(tp)
                b = q.open
                if b is not None and not q.ready:
                    due = b.created + linger
                    # an open batch keeps filling while its broker has no free request
                    # slot; a completing request wakes us to close it then
                    busy = leader is not None and \
                        self._in_flight.get(leader, 0) >= self.max_in_flight
                    if (flushing or due <= now) and not busy:
                        self._close_batch(q, b)
                    elif not busy:
                        w = due - now
                        next_wake = w if next_wake is None else min(next_wake, w)
                if not q.ready:
                    continue
                if self.idempotent and q.in_flight and q.ready[0].attempts:
                    continue  # a retry waits for its partition's requests to settle
                if q.ready[0].retry_at > now:  # a retry waits out its backoff
                    w = q.ready[0].retry_at - now
                    next_wake = w if next_wake is None else min(next_wake, w)
                    continue
                if leader is None:
                    need_metadata = True
                    continue
                per_node.setdefault(leader, []).append(q.ready[0])
            requests: list[tuple[int, list[ProducerBatch]]] = []
            for node, heads in per_node.items():
                # one batch per partition per request; up to max.in.flight requests per node
                slots = self.max_in_flight - self._in_flight.get(node, 0)
                while heads and slots > 0:
                    chosen: list[ProducerBatch] = []
                    size = 0
                    rest: list[ProducerBatch] = []
                    for b in heads:
                        q = self._queues[b.tp]
                        if chosen and size + b.size > self.max_request_size:
                            rest.append(b)
                            continue
                        q.ready.popleft()
                        q.in_flight += 1
                        chosen.append(b)
                        size += b.size
                        if q.ready and not (self.idempotent and q.ready[0].attempts) \
                                and q.ready[0].retry_at <= now:
                            rest.append(q.ready[0])
                    requests.append((node, chosen))
                    self._in_flight[node] = self._in_flight.get(node, 0) + 1
                    slots -= 1
                    heads = rest
        if need_metadata:
            self._request_metadata()
            next_wake = min(next_wake or 1.0, self._client.config.retry_backoff_ms / 1000)
        return requests, next_wake

    def _request_metadata(self) -> None:
        """Refresh the metadata on the loop unless a refresh is already under way."""
        if self._metadata_task is None or self._metadata_task.done():
            self._metadata_task = asyncio.ensure_future(self._refresh_metadata())

    async def _refresh_metadata(self) -> None:
        try:
            topics = {tp.topic for tp in self._queues}
            await self._client.refresh_metadata(topics)
            for t in topics:
                n = self._client.metadata.partition_count(t)
                if n:
                    self._partition_counts[t] = n
        except Exception as e:  # retried by the next drain
            log.debug("metadata refresh failed: %s", e)
        assert self._wake is not None
        self._wake.set()

    async def _send_request(self, node: int, batches: list[ProducerBatch]) -> None:
        by_topic: dict[str, list] = {}
        encoded_ok: list[ProducerBatch] = []
        for b in batches:
            try:
                enc = b.encode(self._format)
            except Exception as e:
                self._complete(b, -1, -1, e)
                continue
            encoded_ok.append(b)
            by_topic.setdefault(b.tp.topic, []).append(
                ProduceRequest.PartitionProduceData(index=b.tp.partition, records=enc.data))
        batches = encoded_ok
        try:
            if not batches:
                return
            txn_id = None
            if self._txn is not None:
                txn_id = self._txn.transactional_id
                try:
                    await self._txn.add_partitions(
                        [b.tp for b in batches],
                        time.monotonic() + self.request_timeout_ms / 1000)
                except (KafkaError, KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                    for b in batches:
                        self._retry_or_fail(b, e)
                    return
            req = ProduceRequest(
                transactional_id=txn_id, acks=self.acks, timeout_ms=self.request_timeout_ms,
                topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=pds)
                            for t, pds in by_topic.items()])
            try:
                conn = await self._client.connection(node)
                resp = await self._client.send(conn, req, expect_response=self.acks != 0,
                                               timeout_ms=self.request_timeout_ms + 5000)
            except (KafkaConnectionError, KafkaTimeoutError, KafkaError, OSError) as e:
                # the leader may be gone: where are its partitions now? (asked once)
                self._client.invalidate()
                self._request_metadata()
                for b in batches:
                    self._retry_or_fail(b, e)
                return
            if resp is None:  # acks=0
                for b in batches:
                    self._complete(b, -1, -1, None)
                return
            by_tp = {b.tp: b for b in batches}
            for tr in resp.responses:
                for pr in tr.partition_responses:
                    b = by_tp.pop(TopicPartition(tr.name, pr.index), None)
                    if b is None:
                        continue
                    code = pr.error_code
                    if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                        self._complete(b, pr.base_offset, pr.log_append_time_ms, None)
                        continue
                    msg = getattr(pr, "error_message", None)
                    self._retry_or_fail(b, error_for_code(code, msg or ErrorCode.for_code(code).name))
            for b in by_tp.values():
                self._retry_or_fail(b, KafkaError("partition missing from Produce response"))
        finally:
            with self._lock:
                self._in_flight[node] = max(0, self._in_flight.get(node, 0) - 1)
                for b in batches:
                    q = self._queues.get(b.tp)
                    if q is not None:
                        q.in_flight = max(0, q.in_flight - 1)
            assert self._wake is not None
            self._wake.set()

    def _retry_or_fail(self, b: ProducerBatch, err: BaseException) -> None:
        code = getattr(err, "error_code", None)
        retriable = bool(getattr(err, "retriable", False)) or \
            code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self.idempotent
        expired = (time.monotonic() - b.created) * 1000 >= self.delivery_timeout_ms
        if retriable and b.attempts < self.retries and not expired and not self._closed:
            b.back_off(self._client.config.retry_backoff_ms)
            if code is not None and code in _STALE:
                self._client.invalidate()
            log.debug("retrying batch for %s (attempt %d): %s", b.tp, b.attempts, err)
            with self._lock:
                q = self._queues[b.tp]
                # keep sequence order among waiting batches
                items = list(q.ready) + [b]
                items.sort(key=lambda x: (x.base_sequence if x.base_sequence >= 0 else 0))
                if not self.idempotent:
                    items = [b] + list(q.ready)
                q.ready = deque(items)
            if code is not None and code in _STALE:
                self._request_metadata()
            return
        self._complete(b, -1, -1, err)

    def _complete(self, b: ProducerBatch, base_offset: int, log_append_time: int,
                  err: BaseException | None) -> None:
        cbs = b.callbacks
        if err is not None:
            log.debug("delivery of %d records to %s failed: %s", b.count, b.tp, err)
        if cbs is not None or self.interceptors:
            topic, part = b.tp
            for i in range(b.count):
                cb = cbs[i] if cbs is not None else None
                if cb is None and not self.interceptors:
                    continue
                ts = log_append_time if log_append_time >= 0 else (
                    b.timestamps[i] if b.timestamps and b.timestamps[i] is not None
                    else b.created_ms)
                md = RecordMetadata(topic, part, base_offset + i if base_offset >= 0 else -1, ts,
                                    b.keys[i] if b.keys else None,
                                    b.values[i] if b.values else None)
                for ic in self.interceptors:
                    try:
                        ic.on_acknowledgement(md if err is None else None, err)  # type: ignore[arg-type]
                    except Exception:
                        log.exception("interceptor on_acknowledgement failed")
                if cb is not None:
                    try:
                        cb(err, md)
                    except Exception:
                        log.exception("delivery callback failed")
        with self._done_cv:
            if err is not None and (cbs is None or all(c is None for c in cbs)):
                self._errors.append(err)
            self._pending -= b.count
            self._queued_bytes -= b.size if b.encoded is None else max(b.size, 0)
            if self._queued_bytes < 0:
                self._queued_bytes = 0
            self._done_cv.notify_all()

    # ------------------------------------------------------------------ transactions

    def _txn_manager(self) -> TransactionManager:
        if self._txn is None:
            raise SparklogError("the producer has no transactional.id")
        return self._txn

    def _deadline(self, timeout: float | None) -> tuple[float, float]:
        """(monotonic deadline, seconds) of a transactional call."""
        secs = self.max_block_ms / 1000 if timeout is None else timeout
        return time.monotonic() + secs, secs + 5

    def init_transactions(self, timeout: float | None = None, *,
                          keep_prepared_txn: bool = False) -> None:
        """Register ``transactional.id`` (fencing older instances: their open transaction
        is aborted, unless ``keep_prepared_txn`` keeps it for ``complete_transaction``)."""
        txn = self._txn_manager()
        deadline, wait = self._deadline(timeout)
        self._run(txn.init(deadline, keep_prepared_txn), wait)
        with self._lock:
            self.producer_id, self.producer_epoch = txn.producer_id, txn.producer_epoch
            self._format = BatchFormat(self.compression, self.compression_level,
                                       self.producer_id, self.producer_epoch, True)
            for q in self._queues.values():
                q.next_sequence = 0  # a new epoch starts its sequences over

    def begin_transaction(self) -> None:
        self._txn_manager().begin()

    def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int], group_id: str,
                                    timeout: float | None = None) -> None:
        """Commit ``offsets`` (the next offsets to consume) for ``group_id`` as part of the
        transaction: the group sees them only if it commits."""
        txn = self._txn_manager()
        deadline, wait = self._deadline(timeout)
        self._run(txn.send_offsets(offsets, group_id, deadline), wait)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver everything produced in the transaction, then commit it. A delivery
        failure raises (the transaction must then be aborted)."""
        txn = self._txn_manager()
        deadline, wait = self._deadline(timeout)
        txn.check_can_produce()
        self.flush(wait)
        self._run(txn.end(True, deadline), wait)

    def abort_transaction(self, timeout: float | None = None) -> None:
        txn = self._txn_manager()
        deadline, wait = self._deadline(timeout)
        txn.check_can_produce()
        self.flush(wait, raise_errors=False)
        self._run(txn.end(False, deadline), wait)

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTxnState:
        """KIP-939's first phase: deliver everything and leave the transaction open; the
        returned state identifies it for ``complete_transaction`` (by this instance or,
        after ``init_transactions(keep_prepared_txn=True)``, by a later one)."""
        txn = self._txn_manager()
        txn.check_can_produce()
        self.flush(self._deadline(timeout)[1])
        return txn.prepared()

    def complete_transaction(self, prepared: PreparedTxnState,
                             timeout: float | None = None) -> bool:
        """Commit the transaction ``init_transactions(keep_prepared_txn=True)`` kept if it
        is ``prepared``, else abort it; True when it committed."""
        txn = self._txn_manager()
        deadline, wait = self._deadline(timeout)
        return self._run(txn.complete(prepared, deadline), wait)

    def list_topics(self, topic: str | None = None, timeout: float = 10.0) -> dict:
        topics = None if topic is None else [topic]
        return self._run(self._client.refresh_metadata(topics), timeout)

    def partitions_for(self, topic: str) -> list[int]:
        return list(range(self._partition_count(topic)))


# a Produce error after which the partition's leader is looked up again
_STALE = STALE_METADATA | {ErrorCode.NOT_ENOUGH_REPLICAS}


def _norm_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    for k, v in items:
        if isinstance(v, str):
            v = v.encode()
        out.append((k.decode() if isinstance(k, bytes) else str(k), v))
    return out

