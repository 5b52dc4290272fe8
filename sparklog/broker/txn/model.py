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

InitProducerId (KIP-360, Kafka's ``prepareIncrementProducerEpoch`` /
``prepareProducerIdRotation``): a producer presenting its current id and epoch gets the
next epoch (a new producer id at epoch 0 once the epochs run out); one presenting the
epoch (and id) from before the last bump, with no transaction open, is retrying that
bump and gets the same answer; anyone else is fenced. ``last_producer_epoch`` and
``previous_producer_id`` are logged with the state, so the retry is recognised after a
coordinator restart too. An InitProducerId presenting no epoch (a new producer instance)
leaves ``last_producer_epoch`` at -1: the instance it replaces cannot claim the new epoch.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass

from sparklog.broker.txn.records import TopicPartition, TxnLogValue, TxnState

__all__ = ["InitKind", "TxnMetadata", "MAX_EPOCH"]

# Kafka rotates the producer id before its epoch reaches Short.MAX_VALUE
MAX_EPOCH = 32767


class InitKind(enum.Enum):
    """What an InitProducerId presenting a producer id and epoch is."""

    BUMP = "bump"  # the current producer goes on under a new epoch
    RETRY = "retry"  # the bump that made the current epoch, again: the same answer
    FENCED = "fenced"  # an older producer instance


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
    previous_producer_id: int = -1  # the producer id before the last init

    def moved(self, now_ms: int, **changes: object) -> TxnMetadata:
        return dataclasses.replace(self, last_update_ms=now_ms, **changes)

    @property
    def is_prepared(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    def init_kind(self, producer_id: int, producer_epoch: int) -> InitKind:
        """What an InitProducerId presenting ``producer_id`` and ``producer_epoch`` is.
        The epoch before the last bump is a retry while no transaction is open (Kafka
        answers it the same way whatever completed since); with one open, it is treated
        as the current producer (whose open transaction the coordinator then aborts)."""
        if producer_id == self.producer_id and producer_epoch == self.producer_epoch:
            return InitKind.BUMP
        if (producer_epoch < 0 or producer_epoch != self.last_producer_epoch
                or producer_id not in (self.producer_id, self.previous_producer_id)):
            return InitKind.FENCED
        return InitKind.RETRY if self.is_complete else InitKind.BUMP

    def initialized(self, now_ms: int, timeout_ms: int, presented_epoch: bool,
                    new_producer_id: Callable[[], int]) -> TxnMetadata:
        """The Empty state InitProducerId moves to, under the next epoch (or a new producer
        id at epoch 0 when this one's epochs are exhausted); ``presented_epoch``: whether
        the request named the current epoch (a retry of it is recognised)."""
        if self.producer_epoch + 1 >= MAX_EPOCH - 1:
            pid, epoch = new_producer_id(), 0
        else:
            pid, epoch = self.producer_id, self.producer_epoch + 1
        return self.moved(now_ms, producer_id=pid, producer_epoch=epoch,
                          previous_producer_id=self.producer_id,
                          last_producer_epoch=self.producer_epoch if presented_epoch else -1,
                          timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(),
                          start_ms=-1)

    def to_log(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                           self.partitions, self.last_update_ms, self.start_ms,
                           previous_producer_id=self.previous_producer_id,
                           last_producer_epoch=self.last_producer_epoch)

    @classmethod
    def from_log(cls, transactional_id: str, v: TxnLogValue) -> TxnMetadata:
        return cls(transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms, v.state,
                   v.partitions, v.start_ms, v.last_update_ms, v.last_producer_epoch,
                   v.previous_producer_id)
