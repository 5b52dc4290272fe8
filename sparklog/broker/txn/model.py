"""One transactional id's state: its producer id and epoch, the transaction's state and
the partitions it wrote (Kafka's ``TransactionMetadata``).

States and transitions are Kafka's::

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit | PrepareAbort
    PrepareCommit --markers written--> CompleteCommit      (PrepareAbort -> CompleteAbort)
    Empty/Complete* --AddPartitions--> Ongoing;  Empty/Complete* --InitProducerId--> Empty
    Ongoing --InitProducerId of a new producer, or the timeout--> PrepareAbort (epoch bumped)

Metadata is replaced, never changed in place: a transition builds the next value
(``moved``), the store writes it, and only then does the coordinator keep it, so a failed
write leaves the previous state in force.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sparklog.broker.txn.records import TopicPartition, TxnLogValue, TxnState

__all__ = ["TxnMetadata", "MAX_EPOCH"]

# Kafka rotates the producer id before its epoch reaches Short.MAX_VALUE
MAX_EPOCH = 32767


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = -1  # the epoch before the last bump (a retried init)

    def moved(self, now_ms: int, **changes: object) -> TxnMetadata:
        return dataclasses.replace(self, last_update_ms=now_ms, **changes)

    @property
    def is_prepared(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    def to_log(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                           self.partitions, self.last_update_ms, self.start_ms)

    @classmethod
    def from_log(cls, transactional_id: str, v: TxnLogValue) -> TxnMetadata:
        return cls(transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms, v.state,
                   v.partitions, v.start_ms, v.last_update_ms)
