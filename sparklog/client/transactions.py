"""A transactional producer's side of KIP-98 (and KIP-939's two-phase commit): the
requests to the transaction coordinator and the state they move through.

``TransactionManager`` is driven by ``Producer`` (``transactional.id`` set): InitProducerId
at ``init_transactions`` (bumping the epoch fences older instances), AddPartitionsToTxn
before the first batch of each partition in a transaction (the sender awaits it, so a
batch never reaches a partition the coordinator does not know), AddOffsetsToTxn plus
TxnOffsetCommit (to the group coordinator) for ``send_offsets_to_transaction``, EndTxn for
commit and abort. Coordinator errors that mean "not now" (CONCURRENT_TRANSACTIONS, loading,
moved) are retried until the call's deadline; a fenced producer gets its error raised and
must be closed, as in Kafka.

Two-phase commit (KIP-939): ``prepare`` is the client's step (everything flushed, the
transaction left open) and returns the ``PreparedTxnState`` to record elsewhere; after a
crash a new instance calls ``init(keep_prepared=True)``, which keeps the open transaction
and names it, and ``complete(prepared)`` commits it when it is the recorded one, else
aborts it.

State (one producer, one transaction at a time): ``ready`` after init; ``in_transaction``
between begin and commit/abort; ``partitions`` the partitions added to the current one.
Methods run on the producer's event-loop thread, which serialises them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparklog.client.connection import BrokerConnection
from sparklog.client.core import AsyncClient
from sparklog.client.group_rpc import find_coordinator
from sparklog.protocol.errors import ErrorCode, SparklogError, error_for_code
from sparklog.protocol.messages.groups import KEY_TYPE_TRANSACTION
from sparklog.protocol.messages.transactions import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from sparklog.protocol.topic_partition import TopicPartition

__all__ = ["PreparedTxnState", "TransactionManager", "TransactionStateError", "recover_prepared"]

# answers that mean "try again shortly" (the coordinator is busy, loading or moved)
_RETRY = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


class TransactionStateError(SparklogError):
    """A transactional call out of order (produce outside a transaction, commit without
    begin, ...): Kafka's IllegalStateException."""


@dataclass(frozen=True)
class PreparedTxnState:
    """What identifies a prepared transaction (KIP-939): the producer id and epoch it was
    written under."""

    producer_id: int
    producer_epoch: int


class TransactionManager:
    def __init__(self, client: AsyncClient, transactional_id: str, timeout_ms: int,
                 two_phase_commit: bool) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.two_phase_commit = two_phase_commit
        self.producer_id = -1
        self.producer_epoch = -1
        self.ready = False
        self.in_transaction = False
        self.partitions: set[TopicPartition] = set()
        self.ongoing: PreparedTxnState | None = None  # kept open by init(keep_prepared=True)
        self._coordinator: BrokerConnection | None = None
        self._add_lock = asyncio.Lock()

    # ------------------------------------------------------------------ coordinator calls

    async def _call(self, make: Callable[[BrokerConnection], Awaitable[ErrorCode]],
                    what: str, deadline: float) -> None:
        """Run ``make(coordinator connection)`` until it answers NONE or an error that is
        not ``_RETRY``; raise that error (or a timeout at ``deadline``)."""
        delay = self.client.config.retry_backoff_ms / 1000
        while True:
            if self._coordinator is None:
                self._coordinator = await find_coordinator(self.client, self.transactional_id,
                                                            KEY_TYPE_TRANSACTION)
            code = await make(self._coordinator)
            if code == ErrorCode.NONE:
                return
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._coordinator = None
            if code not in _RETRY or time.monotonic() + delay > deadline:
                raise error_for_code(code, f"{what} for transactional id "
                                           f"{self.transactional_id!r}: {code.name}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def init(self, deadline: float, keep_prepared: bool = False) -> None:
        if self.in_transaction:
            raise TransactionStateError("init_transactions inside a transaction")

        async def go(conn: BrokerConnection) -> ErrorCode:
            resp = await self.client.send(conn, InitProducerIdRequest(
                transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
                enable_2pc=self.two_phase_commit, keep_prepared_txn=keep_prepared))
            code = ErrorCode.for_code(resp.error_code)
            if code == ErrorCode.NONE:
                self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                ongoing = resp.ongoing_txn_producer_id
                self.ongoing = None if ongoing < 0 else PreparedTxnState(
                    ongoing, resp.ongoing_txn_producer_epoch)
            return code

        if keep_prepared and not self.two_phase_commit:
            raise TransactionStateError(
                "keep_prepared_txn needs transaction.two.phase.commit.enable=true")
        await self._call(go, "InitProducerId", deadline)
        self.ready = True
        self.in_transaction = self.ongoing is not None

    def begin(self) -> None:
        if not self.ready:
            raise TransactionStateError("call init_transactions() first")
        if self.in_transaction:
            raise TransactionStateError("a transaction is already in progress")
        self.in_transaction = True
        self.partitions = set()

    def check_can_produce(self) -> None:
        if not self.in_transaction:
            raise TransactionStateError("produce outside a transaction: call "
                                        "begin_transaction() first")

    async def add_partitions(self, tps: Iterable[TopicPartition], deadline: float) -> None:
        """AddPartitionsToTxn for those of ``tps`` not yet in the transaction."""
        async with self._add_lock:
            new = sorted(set(tps) - self.partitions)
            if not new:
                return
            by_topic: dict[str, list[int]] = {}
            for tp in new:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            req = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch,
                v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                    name=t, partitions=ps) for t, ps in by_topic.items()])

            async def go(conn: BrokerConnection) -> ErrorCode:
                resp = await self.client.send(conn, req, version=min(
                    3, self.client.pick_version(conn, req.API_KEY)))
                codes = [ErrorCode.for_code(p.partition_error_code)
                         for t in resp.results_by_topic_v3_and_below
                         for p in t.results_by_partition]
                return next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)

            await self._call(go, "AddPartitionsToTxn", deadline)
            self.partitions.update(new)

    async def send_offsets(self, offsets: Mapping[TopicPartition, int], group_id: str,
                           deadline: float) -> None:
        """The group's offsets become part of the transaction (visible at commit)."""
        self.check_can_produce()

        async def add(conn: BrokerConnection) -> ErrorCode:
            resp = await self.client.send(conn, AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, group_id=group_id))
            return ErrorCode.for_code(resp.error_code)

        await self._call(add, "AddOffsetsToTxn", deadline)
        topics: dict[str, list[Any]] = {}
        for tp, off in offsets.items():
            topics.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=off, committed_metadata=""))
        req = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group_id,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch, member_id="",
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in topics.items()])
        conn = await find_coordinator(self.client, group_id)
        resp = await self.client.send(conn, req)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for_code(p.error_code, f"TxnOffsetCommit {t.name}-"
                                                       f"{p.partition_index} for {group_id!r}")

    async def end(self, commit: bool, deadline: float) -> None:
        if not self.in_transaction:
            raise TransactionStateError("no transaction in progress")
        if self.partitions or self.ongoing is not None:
            epoch = self.producer_epoch

            async def go(conn: BrokerConnection) -> ErrorCode:
                resp = await self.client.send(conn, EndTxnRequest(
                    transactional_id=self.transactional_id, producer_id=self.producer_id,
                    producer_epoch=epoch, committed=commit))
                return ErrorCode.for_code(resp.error_code)

            await self._call(go, "EndTxn", deadline)
        self.in_transaction = False
        self.partitions = set()
        self.ongoing = None

    def prepared(self) -> PreparedTxnState:
        self.check_can_produce()
        return PreparedTxnState(self.producer_id, self.producer_epoch)

    async def complete(self, prepared: PreparedTxnState, deadline: float) -> bool:
        """End the open transaction (this instance's, or the one ``init(keep_prepared=True)``
        kept): commit when it is ``prepared``, else abort. True when it committed."""
        current = self.ongoing
        if current is None and self.in_transaction:
            current = PreparedTxnState(self.producer_id, self.producer_epoch)
        if current is None:
            return False
        commit = current == prepared
        await self.end(commit, deadline)
        return commit



async def recover_prepared(client: AsyncClient, transactional_id: str,
                           recorded: PreparedTxnState | None, deadline: float) -> bool:
    """Take ``transactional_id`` over (KIP-939's InitProducerId with keep_prepared_txn, which
    fences its old producer) and end the transaction it left open: commit it when
    ``recorded`` names it, else (``recorded`` None, or another transaction) abort it. True
    when it committed; False too when nothing was open (already completed).

    A transaction names ``recorded`` when the same producer id wrote it at the recorded
    epoch or a later one: a takeover whose EndTxn never happened (its recoverer died too)
    leaves the transaction open under its bumped epoch, and the next takeover reports that.
    """
    txn = TransactionManager(client, transactional_id, 0x7FFFFFFF, two_phase_commit=True)
    await txn.init(deadline, keep_prepared=True)
    ongoing = txn.ongoing
    if ongoing is None:
        return False
    commit = (recorded is not None and ongoing.producer_id == recorded.producer_id
              and ongoing.producer_epoch >= recorded.producer_epoch)
    await txn.end(commit, deadline)
    return commit
