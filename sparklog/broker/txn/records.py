"""The records of ``__transaction_state``: keys, values, and which partition a
transactional id lives in (Kafka's formats, so Kafka tools read them).

    key    version INT16 (0), transactional_id STRING
    value  TransactionLogValue v0 (we write v0; v1 is v0 in flexible encoding plus tagged
           fields, read too):
           version INT16, producer_id INT64, producer_epoch INT16,
           transaction_timeout_ms INT32, transaction_status INT8,
           transaction_partitions NULLABLE ARRAY(topic STRING, partition_ids ARRAY(INT32)),
           transaction_last_update_timestamp_ms INT64, transaction_start_timestamp_ms INT64

A ``None`` value is a tombstone (the transactional id expired). A transactional id lives
in partition ``abs(javaHashCode(id)) % transaction.state.log.num.partitions``, as a group
does in ``__consumer_offsets``.
"""

from __future__ import annotations

import enum
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
VALUE_VERSION = 0

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
        wr.string(item[0])
        wr.array(item[1], Writer.int32)

    w.nullable_array(list(by_topic.items()), topic_entry)
    w.int64(v.last_update_ms)
    w.int64(v.start_ms)
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
    return TxnLogValue(pid, epoch, timeout, state, partitions, last_update, start)
