"""The producer's record accumulator: per-partition batches, and how a batch becomes bytes.

``produce()`` appends a record to its partition's open ``ProducerBatch`` (a few list
appends, no encoding, on the caller's thread); the sender closes batches into the
partition's ``PartitionQueue`` and encodes each one only when it is about to be sent, in
one pass: record by record for small batches, vectorised (lists -> Arrow -> RecordBatch v2,
``sparklog.protocol.record_arrow_encode``) for the rest. ``produce_arrow()`` encodes whole
columns up front and queues batches that already hold their bytes.

``BatchFormat`` is what every encoded batch of one producer shares: compression and, once
InitProducerId answered, the producer id/epoch (-1 without idempotence).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from sparklog.client.connection import retry_delay_s
from sparklog.protocol.record_arrow import HEADERS_TYPE
from sparklog.protocol.record_arrow_encode import EncodedBatch, encode_batches
from sparklog.protocol.records import Record, encode_batch
from sparklog.protocol.topic_partition import TopicPartition

__all__ = ["BatchFormat", "PartitionQueue", "ProducerBatch"]

# Up to this many records a batch is encoded record by record (~2 us each): the vectorised
# encoder's fixed cost (~30 numpy/Arrow calls) only pays off for bigger batches.
SMALL_BATCH_RECORDS = 32


@dataclass(frozen=True, slots=True)
class BatchFormat:
    compression: int
    compression_level: int | None
    producer_id: int = -1
    producer_epoch: int = -1
    is_transactional: bool = False

    def encode_columns(self, values: pa.Array | None, keys: pa.Array | None, timestamps: Any,
                       headers: pa.Array | None, *, now_ms: int, base_sequence: int,
                       max_batch_bytes: int) -> list[EncodedBatch]:
        """Columns -> RecordBatch v2 batches of at most ``max_batch_bytes`` each."""
        return encode_batches(
            values, keys, timestamps, headers, now_ms=now_ms, compression=self.compression,
            compression_level=self.compression_level, max_batch_bytes=max_batch_bytes,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            base_sequence=base_sequence, is_transactional=self.is_transactional)


class ProducerBatch:
    """Records bound for one partition, sent in one RecordBatch. ``encoded`` holds the
    bytes once known (at once for ``produce_arrow``); ``base_sequence`` is fixed when the
    batch is closed (idempotence), ``attempts`` counts retries and ``retry_at`` (monotonic
    seconds) is when a retried batch may go out again."""

    __slots__ = ("tp", "values", "keys", "timestamps", "headers", "callbacks", "has_key",
                 "count", "size", "created", "created_ms", "encoded", "base_sequence",
                 "attempts", "retry_at")

    def __init__(self, tp: TopicPartition, now: float) -> None:
        self.tp = tp
        self.values: list = []
        self.keys: list = []
        self.timestamps: list = []
        self.headers: list | None = None
        self.callbacks: list | None = None
        self.has_key = False
        self.count = 0
        self.size = 61
        self.created = now
        self.created_ms = int(time.time() * 1000)
        self.encoded: EncodedBatch | None = None
        self.base_sequence = -1
        self.attempts = 0
        self.retry_at = 0.0

    def back_off(self, backoff_ms: int) -> None:
        """Count one more attempt and hold the batch back for that attempt's backoff."""
        self.attempts += 1
        self.retry_at = time.monotonic() + retry_delay_s(self.attempts, backoff_ms)

    def append(self, key: Any, value: Any, timestamp: int | None, headers: Any,
               cb: Callable | None) -> None:
        """Timestamps, headers and callbacks stay unallocated until a record has one; then
        the records before it get None."""
        i = self.count
        self.values.append(value)
        self.keys.append(key)
        if key is not None:
            self.has_key = True
        if timestamp is not None or self.timestamps:
            if not self.timestamps:
                self.timestamps = [None] * i
            self.timestamps.append(timestamp)
        if headers or self.headers is not None:
            if self.headers is None:
                self.headers = [None] * i
            self.headers.append(headers or None)
        if cb is not None or self.callbacks is not None:
            if self.callbacks is None:
                self.callbacks = [None] * i
            self.callbacks.append(cb)
        self.count = i + 1

    def encode(self, fmt: BatchFormat) -> EncodedBatch:
        """The batch's bytes (encoded once, kept for retries). Records without a timestamp
        get the batch's creation time."""
        if self.encoded is None:
            if self.count <= SMALL_BATCH_RECORDS:
                self.encoded = self._encode_records(fmt)
            else:
                self.encoded = self._encode_columns(fmt)
        return self.encoded

    def _encode_columns(self, fmt: BatchFormat) -> EncodedBatch:
        headers = None
        if self.headers is not None:
            headers = pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                                for h in self.headers], HEADERS_TYPE)
        ts = None
        if self.timestamps:
            ts = np.array([self.created_ms if t is None else t for t in self.timestamps],
                          dtype=np.int64)
        return fmt.encode_columns(
            pa.array(self.values, pa.binary()),
            pa.array(self.keys, pa.binary()) if self.has_key else None, ts, headers,
            now_ms=self.created_ms, base_sequence=self.base_sequence,
            max_batch_bytes=1 << 62)[0]

    def _encode_records(self, fmt: BatchFormat) -> EncodedBatch:
        now = self.created_ms
        ts = [now if t is None else t for t in self.timestamps] if self.timestamps \
            else [now] * self.count
        headers = self.headers or [None] * self.count
        records = [
            Record(key=self.keys[i] if self.has_key else None, value=self.values[i],
                   headers=list(headers[i] or ()), timestamp=ts[i])
            for i in range(self.count)
        ]
        data = encode_batch(
            records, compression=fmt.compression, compression_level=fmt.compression_level,
            producer_id=fmt.producer_id, producer_epoch=fmt.producer_epoch,
            base_sequence=self.base_sequence, is_transactional=fmt.is_transactional, now_ms=now)
        return EncodedBatch(data, self.count, 0, max(ts))


class PartitionQueue:
    """One partition's batches: the open one ``produce()`` appends to, the closed ones
    waiting to be sent (in sequence order), and the sequence the next closed batch gets."""

    __slots__ = ("open", "ready", "next_sequence", "in_flight")

    def __init__(self) -> None:
        self.open: ProducerBatch | None = None
        self.ready: deque[ProducerBatch] = deque()
        self.next_sequence = 0
        self.in_flight = 0
