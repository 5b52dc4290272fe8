"""The records of ``__transaction_state``: keys, values, and which partition a
transactional id lives in (Kafka's formats, so Kafka tools read them).

    key    version INT16 (0), transactional_id STRING
    value  TransactionLogValue v1 (flexible; v0, its non-flexible form without tagged
           fields, is read too):
           version INT16, producer_id INT64, producer_epoch INT16,
           transaction_timeout_ms INT32, transaction_status INT8,
           transaction_partitions COMPACT_NULLABLE_ARRAY(topic COMPACT_STRING,
               partition_ids COMPACT_ARRAY(INT32), tagged fields),
           transaction_last_update_timestamp_ms INT64, transaction_start_timestamp_ms INT64,
           tagged fields: 0 PreviousProducerId INT64 (default -1), 1 NextProducerId INT64
           (-1), 2 ClientTransactionVersion INT16 (0) -- Kafka's (KIP-890) -- and
           ``LAST_PRODUCER_EPOCH_TAG`` LastProducerEpoch INT16 (-1), sparklog's own.

Kafka keeps the epoch before the last bump only in memory, so an InitProducerId retried
after the coordinator moved is fenced there; sparklog logs it (in a tag Kafka's readers
skip as unknown) so the retry gets the same answer after a restart. A tagged field at its
default is not written, as Kafka's generated code does.

A ``None`` value is a tombstone (the transactional id expired). A transactional id lives
in partition ``abs(javaHashCode(id)) % transaction.state.log.num.partitions``, as a group
does in ``__consumer_offsets``.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from sparklog.broker.group.records import partition_for_group
from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.primitives import Reader, Writer

__all__ = [
    "TxnState",
    "TxnLogValue",
    "encode_txn_key",
    "decode_txn_key",
    "encode_txn_value",
    "decode_txn_value",
    "partition_for_txn",
]

KEY_VERSION = 0
VALUE_VERSION = 1
PREVIOUS_PRODUCER_ID_TAG = 0
NEXT_PRODUCER_ID_TAG = 1
CLIENT_TRANSACTION_VERSION_TAG = 2
LAST_PRODUCER_EPOCH_TAG = 1000  # sparklog's: far above the tags Kafka assigns in order
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids (the value's status byte) and names (what
    DescribeTransactions/ListTransactions report)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))

    @classmethod
    def by_kafka_name(cls, name: str) -> TxnState | None:
        for s in cls:
            if s.kafka_name.lower() == name.lower():
                return s
        return None


@dataclass(frozen=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    last_producer_epoch: int = -1


def partition_for_txn(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % n``."""
    return partition_for_group(transactional_id, num_partitions)


def encode_txn_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    w.string(transactional_id)
    return w.getvalue()


def decode_txn_key(key: bytes) -> str:
    r = Reader(key)
    version = r.int16()
    if version != KEY_VERSION:
        raise MalformedFrameError(f"unknown {__name__} key version {version}")
    return r.string()


def encode_txn_value(v: TxnLogValue) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    w.int64(v.producer_id)
    w.int16(v.producer_epoch)
    w.int32(v.timeout_ms)
    w.int8(int(v.state))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)

    def topic_entry(wr: Writer, item: tuple[str, list[int]]) -> None:
        wr.compact_string(item[0])
        wr.compact_array(item[1], Writer.int32)
        wr.tagged_fields(None)

    w.compact_nullable_array(list(by_topic.items()), topic_entry)
    w.int64(v.last_update_ms)
    w.int64(v.start_ms)
    tags: dict[int, bytes] = {}
    if v.previous_producer_id != -1:
        tags[PREVIOUS_PRODUCER_ID_TAG] = _I64.pack(v.previous_producer_id)
    if v.next_producer_id != -1:
        tags[NEXT_PRODUCER_ID_TAG] = _I64.pack(v.next_producer_id)
    if v.client_transaction_version != 0:
        tags[CLIENT_TRANSACTION_VERSION_TAG] = _I16.pack(v.client_transaction_version)
    if v.last_producer_epoch != -1:
        tags[LAST_PRODUCER_EPOCH_TAG] = _I16.pack(v.last_producer_epoch)
    w.tagged_fields(tags)
    return w.getvalue()


def decode_txn_value(value: bytes) -> TxnLogValue:
    r = Reader(value)
    version = r.int16()
    if version not in (0, 1):
        raise MalformedFrameError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    pid = r.int64()
    epoch = r.int16()
    timeout = r.int32()
    state = TxnState(r.int8())

    def topic_entry(rd: Reader) -> list[TopicPartition]:
        topic = rd.compact_string() if flexible else rd.string()
        parts = rd.compact_array(Reader.int32) if flexible else rd.array(Reader.int32)
        if flexible:
            rd.tagged_fields()
        return [(topic, p) for p in parts]

    topics = r.compact_nullable_array(topic_entry) if flexible else r.nullable_array(topic_entry)
    last_update = r.int64()
    start = r.int64()
    partitions = frozenset(tp for entry in topics or () for tp in entry)
    tags = r.tagged_fields() if flexible else {}

    def tag(number: int, fmt: struct.Struct, default: int) -> int:
        raw = tags.get(number)
        if raw is None:
            return default
        if len(raw) != fmt.size:
            raise MalformedFrameError(f"tagged field {number} holds {len(raw)} bytes")
        return int(fmt.unpack(raw)[0])

    return TxnLogValue(pid, epoch, timeout, state, partitions, last_update, start,
                       tag(PREVIOUS_PRODUCER_ID_TAG, _I64, -1),
                       tag(NEXT_PRODUCER_ID_TAG, _I64, -1),
                       tag(CLIENT_TRANSACTION_VERSION_TAG, _I16, 0),
                       tag(LAST_PRODUCER_EPOCH_TAG, _I16, -1))
