"""KIP-890 part 1 on the partition leader: a transactional batch is appended only if its
partition is in its producer's ongoing transaction, so a produce outside a transaction
(a late batch of an aborted one, a zombie's) is refused on every broker and no
transaction can hang; the group coordinator checks TxnOffsetCommit's offsets partition
the same way.

When this broker coordinates the batch's transactional id the coordinator answers at once.
Otherwise its coordinator (the leader of the id's ``__transaction_state`` partition) is
asked with AddPartitionsToTxn v4 ``verify_only``, as Kafka's
``AddPartitionsToTxnManager`` does, except when the partition's producer state already has
this producer's transaction open at this epoch: one of its batches was verified before it
got in, and the marker that closes it ends that (Kafka's verification state lives in the
same place), so one question per partition and transaction, no cache to keep. A batch
holds its partition's verification guard for its producer while the coordinator is asked
(``Partition.start_verification``); a marker for the producer ends the guard, and a batch
whose guard ended meanwhile is refused with INVALID_TXN_STATE (Kafka's VerificationGuard):
verified before the marker, appended after it, it would open a transaction that hangs.
While the coordinator cannot answer (unknown, unreachable, loading, busy), the batch gets
NOT_ENOUGH_REPLICAS, which producers retry, as Kafka answers them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparklog.broker.inter_broker import InterBrokerClients
from sparklog.broker.txn.coordinator import TransactionCoordinator
from sparklog.broker.txn.records import TopicPartition
from sparklog.client.connection import KafkaConnectionError, KafkaTimeoutError
from sparklog.protocol.batch_header import BATCH_HEADER_SIZE, read_header
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.messages.transactions import AddPartitionsToTxnRequest

if TYPE_CHECKING:
    from sparklog.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

__all__ = ["TxnVerifier"]

VERIFY_VERSION = 4
E = ErrorCode

# the coordinator could not answer now: the producer retries the batch
_RETRY = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.CONCURRENT_TRANSACTIONS,
                    E.COORDINATOR_LOAD_IN_PROGRESS, E.NETWORK_EXCEPTION, E.REQUEST_TIMED_OUT})


class TxnVerifier:
    """``coordinator()`` is this broker's transaction coordinator (None while stopped);
    ``locate(transactional_id)`` the broker coordinating an id (None: none now)."""

    def __init__(self, node_id: int, coordinator: Callable[[], TransactionCoordinator | None],
                 locate: Callable[[str], int | None], clients: InterBrokerClients,
                 replicas: ReplicaManager) -> None:
        self.node_id = node_id
        self._coordinator = coordinator
        self._locate = locate
        self._clients = clients
        self._replicas = replicas

    async def verify(self, transactional_id: str, tp: TopicPartition,
                     records: bytes | bytearray | memoryview) -> ErrorCode:
        """NONE when the transactional batch ``records`` may be appended to ``tp`` (a
        fenced producer gets INVALID_PRODUCER_EPOCH, as Produce answers it)."""
        if len(records) < BATCH_HEADER_SIZE:
            return E.NONE
        h = read_header(records)
        err = await self.verify_guarded(transactional_id, h.producer_id, h.producer_epoch, tp)
        return E.INVALID_PRODUCER_EPOCH if err == E.PRODUCER_FENCED else err

    async def verify_guarded(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """``verify_partition`` under the partition's verification guard: NONE only if no
        marker for the producer reached ``tp`` while the coordinator was asked, so what
        the caller writes next (it writes without awaiting) is still in the transaction."""
        p = self._replicas.get(*tp)
        guard = None if p is None else p.start_verification(producer_id)
        err = await self.verify_partition(transactional_id, producer_id, producer_epoch, tp)
        if p is not None:
            if err == E.NONE and not p.verification_holds(producer_id, guard):
                # Kafka's VerificationGuard: a marker ended the transaction while the
                # coordinator's answer was on its way; written now, the batch (or the
                # offsets) would open a transaction nobody ends
                log.info("%s-%d: a marker for producer %d came while its write was being "
                         "verified: refused", tp[0], tp[1], producer_id)
                return E.INVALID_TXN_STATE
            if err not in (E.NONE, E.NOT_ENOUGH_REPLICAS) \
                    and p.verification_holds(producer_id, guard):
                p.end_verification(producer_id)  # refused for good: keep no guard
        return err

    async def verify_partition(self, transactional_id: str, producer_id: int,
                               producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """NONE when ``tp`` is in the ongoing transaction of ``transactional_id``'s
        current producer (a Produce's partition, or TxnOffsetCommit's offsets partition);
        else the coordinator's answer, NOT_ENOUGH_REPLICAS while it cannot give one."""
        tc = self._coordinator()
        if tc is None:
            return E.NOT_ENOUGH_REPLICAS
        if tc.serves(transactional_id):
            return tc.verify_partitions(transactional_id, producer_id, producer_epoch,
                                        [tp])[tp]
        if self._in_open_transaction(tp, producer_id, producer_epoch):
            return E.NONE
        node = self._locate(transactional_id)
        if node is None or node == self.node_id:
            return E.NOT_ENOUGH_REPLICAS
        err = await self._ask(node, transactional_id, producer_id, producer_epoch, tp)
        return E.NOT_ENOUGH_REPLICAS if err in _RETRY else err

    def _in_open_transaction(self, tp: TopicPartition, producer_id: int,
                             producer_epoch: int) -> bool:
        p = self._replicas.get(*tp)
        entry = None if p is None else p.log.producer_state.last_entry(producer_id)
        return (entry is not None and entry.producer_epoch == producer_epoch
                and entry.current_txn_first_offset >= 0)

    async def _ask(self, node: int, transactional_id: str, producer_id: int,
                   producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        req = AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=transactional_id, producer_id=producer_id,
                producer_epoch=producer_epoch, verify_only=True,
                topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                    name=tp[0], partitions=[tp[1]])])])
        try:
            resp = await self._clients.send(node, req, VERIFY_VERSION)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
            log.info("verifying %r's produce to %s-%d with broker %d failed: %s",
                     transactional_id, tp[0], tp[1], node, exc)
            return E.NETWORK_EXCEPTION
        if resp.error_code:
            return E.for_code(resp.error_code)
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    if (t.name, p.partition_index) == tp:
                        return E.for_code(p.partition_error_code)
        return E.UNKNOWN_SERVER_ERROR
