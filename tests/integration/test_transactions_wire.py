"""Transaction APIs on the wire at every version the broker advertises (clients use one
version each): a whole transaction per version, the KIP-890 verify form and the produce
check it backs, fencing codes per KIP-588, KIP-939's InitProducerId v6, WriteTxnMarkers,
Describe/ListTransactions, and the LSO as Fetch and ListOffsets report it."""

from __future__ import annotations

from typing import Any

import pytest

from sparklog.cluster.embedded import EmbeddedCluster
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode as E
from sparklog.protocol.messages import transactions as tx
from sparklog.protocol.messages.fetch import ListOffsetsRequest
from sparklog.protocol.messages.offsets import OffsetFetchRequest
from tests.helpers.kafka_clients import create_topic
from tests.helpers.requests import fetch_request
from tests.helpers.txn_wire import TOPIC, add_partitions, end, init, produce_txn

READ_COMMITTED = 1


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return {"transaction.two.phase.commit.enable": "true"}


@pytest.fixture(scope="module")
def wire_cluster(cluster: EmbeddedCluster) -> EmbeddedCluster:
    create_topic(cluster.bootstrap_servers, TOPIC, 3)
    return cluster


def verify(w: Any, version: int, txn_id: str, pid: int, epoch: int, partitions: list[int],
           verify_only: bool = True) -> list[int]:
    req = tx.AddPartitionsToTxnRequest
    r = w.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, req(transactions=[
        req.AddPartitionsToTxnTransaction(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
            verify_only=verify_only,
            topics=[req.AddPartitionsToTxnTopic(name=TOPIC, partitions=partitions)])]))
    assert r.error_code == E.NONE
    return [p.partition_error_code for res in r.results_by_transaction
            for t in res.topic_results for p in t.results_by_partition]


def stable_offsets(w: Any, partition: int) -> tuple[int, int, list[Any]]:
    """(high watermark, LSO, aborted transactions) of a read_committed fetch from 0."""
    r = w.call(ApiKey.FETCH, 11, fetch_request(TOPIC, [(partition, 0)],
                                               isolation_level=READ_COMMITTED))
    p = r.responses[0].partitions[0]
    return p.high_watermark, p.last_stable_offset, list(p.aborted_transactions or [])


def latest(w: Any, partition: int, isolation: int) -> int:
    req = ListOffsetsRequest
    r = w.call(ApiKey.LIST_OFFSETS, 5, req(replica_id=-1, isolation_level=isolation, topics=[
        req.ListOffsetsTopic(name=TOPIC, partitions=[
            req.ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
    return r.topics[0].partitions[0].offset


@pytest.mark.parametrize("version", range(5))
def test_a_transaction_at_each_version(wire_cluster: EmbeddedCluster, kafka_wire: Any,
                                       version: int) -> None:
    """InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn at
    ``version`` (capped at each API's highest): data and offsets appear at commit only."""
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn_id, group = f"wire-v{version}", f"wire-txn-group-v{version}"
    pid, epoch = init(w, txn_id, min(version, 4))
    assert add_partitions(w, min(version, 3), txn_id, pid, epoch, [0]) == [E.NONE]
    hw0, lso0, _ = stable_offsets(w, 0)
    res = produce_txn(w, txn_id, pid, epoch, 0, 0)
    assert res.error_code == E.NONE
    hw, lso, _ = stable_offsets(w, 0)
    assert (hw, lso) == (hw0 + 3, lso0) and lso0 == hw0
    assert latest(w, 0, READ_COMMITTED) == lso0 and latest(w, 0, 0) == hw
    r = w.call(ApiKey.ADD_OFFSETS_TO_TXN, version, tx.AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group))
    assert r.error_code == E.NONE
    toc = tx.TxnOffsetCommitRequest
    r = w.call(ApiKey.TXN_OFFSET_COMMIT, version, toc(
        transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
        member_id="", topics=[toc.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
            toc.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                                committed_metadata="m")])]))
    assert r.topics[0].partitions[0].error_code == E.NONE

    def committed() -> int:
        of = w.call(ApiKey.OFFSET_FETCH, 5, OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]))
        return of.topics[0].partitions[0].committed_offset

    assert committed() == -1  # not before the commit
    assert end(w, min(version, 4), txn_id, pid, epoch, commit=True) == E.NONE
    assert committed() == 42
    hw, lso, aborted = stable_offsets(w, 0)
    assert lso == hw == hw0 + 4 and aborted == []  # 3 records and the marker
    # a retried EndTxn is answered the same; the opposite outcome is refused
    assert end(w, min(version, 4), txn_id, pid, epoch, commit=True) == E.NONE
    assert end(w, min(version, 4), txn_id, pid, epoch, commit=False) == E.INVALID_TXN_STATE


def test_abort_reports_the_aborted_transaction(wire_cluster: EmbeddedCluster,
                                               kafka_wire: Any) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    pid, epoch = init(w, "wire-abort")
    assert add_partitions(w, 3, "wire-abort", pid, epoch, [1]) == [E.NONE]
    hw0, _, before = stable_offsets(w, 1)
    assert produce_txn(w, "wire-abort", pid, epoch, 1, 0).error_code == E.NONE
    assert end(w, 3, "wire-abort", pid, epoch, commit=False) == E.NONE
    hw, lso, aborted = stable_offsets(w, 1)
    assert lso == hw == hw0 + 4
    assert [(a.producer_id, a.first_offset) for a in aborted][len(before):] == [(pid, hw0)]


def test_txn_offset_commit_needs_the_group_in_the_transaction(
        wire_cluster: EmbeddedCluster, kafka_wire: Any) -> None:
    """KIP-890: TxnOffsetCommit without AddOffsetsToTxn first is refused (no marker would
    ever settle those offsets); a stale epoch is fenced."""
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn_id, group = "wire-offsets-check", "wire-offsets-check-group"
    pid, epoch = init(w, txn_id)
    toc = tx.TxnOffsetCommitRequest

    def commit(version: int, producer_epoch: int) -> int:
        r = w.call(ApiKey.TXN_OFFSET_COMMIT, version, toc(
            transactional_id=txn_id, group_id=group, producer_id=pid,
            producer_epoch=producer_epoch, member_id="",
            topics=[toc.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                toc.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                    committed_metadata="")])]))
        return r.topics[0].partitions[0].error_code

    assert commit(3, epoch) == E.INVALID_TXN_STATE
    r = w.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, tx.AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group))
    assert r.error_code == E.NONE
    assert commit(3, epoch + 7) == E.PRODUCER_FENCED
    assert commit(2, epoch + 7) == E.INVALID_PRODUCER_EPOCH
    assert commit(3, epoch) == E.NONE
    assert end(w, 3, txn_id, pid, epoch, commit=False) == E.NONE


def test_kip890_verify_and_the_produce_check(wire_cluster: EmbeddedCluster,
                                             kafka_wire: Any) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn_id = "wire-verify"
    pid, epoch = init(w, txn_id)
    assert add_partitions(w, 3, txn_id, pid, epoch, [0]) == [E.NONE]
    for version in (4, 5):
        assert verify(w, version, txn_id, pid, epoch, [0, 2]) == [E.NONE, E.INVALID_TXN_STATE]
    assert verify(w, 5, txn_id, pid, epoch - 1 if epoch else epoch + 5, [0]) == [E.PRODUCER_FENCED]
    # a transactional produce to a partition outside the transaction is refused
    hw0, _, _ = stable_offsets(w, 2)
    res = produce_txn(w, txn_id, pid, epoch, 2, 0)
    assert res.error_code == E.INVALID_TXN_STATE
    assert stable_offsets(w, 2)[0] == hw0
    # a transactional batch without the request's transactional id is refused (nothing
    # could ever end its transaction), as Kafka does
    assert produce_txn(w, None, pid, epoch, 0, 0).error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert stable_offsets(w, 0)[1] == stable_offsets(w, 0)[0]
    # verify_only=false adds it (the broker-to-broker form of the client request)
    assert verify(w, 4, txn_id, pid, epoch, [2], verify_only=False) == [E.NONE]
    assert produce_txn(w, txn_id, pid, epoch, 2, 0).error_code == E.NONE
    assert end(w, 4, txn_id, pid, epoch, commit=True) == E.NONE


def test_fencing_codes_follow_kip588(wire_cluster: EmbeddedCluster, kafka_wire: Any) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn_id = "wire-fence"
    pid, old = init(w, txn_id)
    pid2, new = init(w, txn_id)
    assert (pid2, new) == (pid, old + 1)
    assert add_partitions(w, 1, txn_id, pid, old, [0]) == [E.INVALID_PRODUCER_EPOCH]
    assert add_partitions(w, 2, txn_id, pid, old, [0]) == [E.PRODUCER_FENCED]
    assert end(w, 1, txn_id, pid, old, True) == E.INVALID_PRODUCER_EPOCH
    assert end(w, 2, txn_id, pid, old, True) == E.PRODUCER_FENCED
    assert add_partitions(w, 3, txn_id, pid + 1000, new, [0]) == [E.INVALID_PRODUCER_ID_MAPPING]
    # KIP-360: bumping with the current epoch works, with a stale one is fenced
    r = w.call(ApiKey.INIT_PRODUCER_ID, 4, tx.InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=pid,
        producer_epoch=old - 1 if old else 99))
    assert r.error_code == E.PRODUCER_FENCED
    r = w.call(ApiKey.INIT_PRODUCER_ID, 3, tx.InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=pid,
        producer_epoch=old - 1 if old else 99))
    assert r.error_code == E.INVALID_PRODUCER_EPOCH
    r = w.call(ApiKey.INIT_PRODUCER_ID, 4, tx.InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=pid,
        producer_epoch=new))
    assert (r.error_code, r.producer_epoch) == (E.NONE, new + 1)
    r = w.call(ApiKey.INIT_PRODUCER_ID, 4, tx.InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout_ms=900001))
    assert r.error_code == E.INVALID_TRANSACTION_TIMEOUT


@pytest.mark.parametrize("version", range(2))
def test_write_txn_markers_ends_a_producers_transaction(wire_cluster: EmbeddedCluster,
                                                        kafka_wire: Any, version: int) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn_id = f"wire-markers-{version}"
    pid, epoch = init(w, txn_id)
    assert add_partitions(w, 3, txn_id, pid, epoch, [1]) == [E.NONE]
    assert produce_txn(w, txn_id, pid, epoch, 1, 0).error_code == E.NONE
    hw, lso, _ = stable_offsets(w, 1)
    assert lso < hw
    req = tx.WriteTxnMarkersRequest
    r = w.call(ApiKey.WRITE_TXN_MARKERS, version, req(markers=[req.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
        topics=[req.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[1])])]))
    assert [(t.name, p.partition_index, p.error_code) for m in r.markers for t in m.topics
            for p in t.partitions] == [(TOPIC, 1, E.NONE)]
    hw2, lso2, _ = stable_offsets(w, 1)
    assert lso2 == hw2 == hw + 1
    assert end(w, 3, txn_id, pid, epoch, commit=False) == E.NONE


def test_write_txn_markers_of_a_deposed_coordinator_are_fenced(
        wire_cluster: EmbeddedCluster, kafka_wire: Any) -> None:
    """A marker carrying an older coordinator epoch than the last one that marked the
    producer in the partition gets TRANSACTION_COORDINATOR_FENCED and is not written."""
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn_id = "wire-fenced-coordinator"
    pid, epoch = init(w, txn_id)
    assert add_partitions(w, 3, txn_id, pid, epoch, [1]) == [E.NONE]
    req = tx.WriteTxnMarkersRequest

    def marker(coordinator_epoch: int) -> list[int]:
        r = w.call(ApiKey.WRITE_TXN_MARKERS, 1, req(markers=[req.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=False,
            coordinator_epoch=coordinator_epoch,
            topics=[req.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[1])])]))
        return [p.error_code for m in r.markers for t in m.topics for p in t.partitions]

    assert marker(5) == [E.NONE]
    hw, _lso, _ = stable_offsets(w, 1)
    assert marker(4) == [E.TRANSACTION_COORDINATOR_FENCED]
    assert marker(5) == [E.NONE]  # the same coordinator again: written
    assert stable_offsets(w, 1)[0] == hw + 1


def test_describe_and_list_transactions(wire_cluster: EmbeddedCluster, kafka_wire: Any) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn_id = "wire-describe"
    pid, epoch = init(w, txn_id, timeout_ms=30000)
    assert add_partitions(w, 3, txn_id, pid, epoch, [0, 2]) == [E.NONE, E.NONE]
    r = w.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, tx.DescribeTransactionsRequest(
        transactional_ids=[txn_id, "never-seen"]))
    d, missing = r.transaction_states
    assert (d.error_code, d.transaction_state, d.transaction_timeout_ms, d.producer_id,
            d.producer_epoch) == (E.NONE, "Ongoing", 30000, pid, epoch)
    assert d.transaction_start_time_ms > 0
    assert [(t.topic, t.partitions) for t in d.topics] == [(TOPIC, [0, 2])]
    assert missing.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    lt = tx.ListTransactionsRequest
    r = w.call(ApiKey.LIST_TRANSACTIONS, 0, lt(state_filters=["Ongoing", "Bogus"],
                                               producer_id_filters=[pid]))
    assert r.unknown_state_filters == ["Bogus"]
    assert [(t.transactional_id, t.producer_id, t.transaction_state)
            for t in r.transaction_states] == [(txn_id, pid, "Ongoing")]
    r = w.call(ApiKey.LIST_TRANSACTIONS, 1, lt(state_filters=[], producer_id_filters=[pid],
                                               duration_filter=3_600_000))
    assert r.transaction_states == []  # not running that long
    r = w.call(ApiKey.LIST_TRANSACTIONS, 1, lt(state_filters=[], producer_id_filters=[pid],
                                               duration_filter=0))
    assert [t.transactional_id for t in r.transaction_states] == [txn_id]
    # v2: a regular expression the whole id must match (how a Spark sink finds its ids)
    for pattern, found in (("wire-desc.*", [txn_id]), ("wire", []), (None, [txn_id])):
        r = w.call(ApiKey.LIST_TRANSACTIONS, 2, lt(state_filters=["Ongoing"],
                                                   producer_id_filters=[pid],
                                                   transactional_id_pattern=pattern))
        assert [t.transactional_id for t in r.transaction_states] == found, pattern
    r = w.call(ApiKey.LIST_TRANSACTIONS, 2, lt(state_filters=[], producer_id_filters=[],
                                               transactional_id_pattern="(unclosed"))
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION
    assert end(w, 3, txn_id, pid, epoch, commit=False) == E.NONE
    r = w.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, tx.DescribeTransactionsRequest(
        transactional_ids=[txn_id]))
    assert (r.transaction_states[0].transaction_state, r.transaction_states[0].topics) == (
        "CompleteAbort", [])


def test_kip939_prepared_transaction_completed_by_a_new_producer(
        wire_cluster: EmbeddedCluster, kafka_wire: Any) -> None:
    """InitProducerId v6: a 2PC producer writes and "prepares" (flushes, does not end); a
    new connection, as the recovering driver, keeps the transaction, learns its producer
    id and epoch, and commits it under the bumped epoch."""
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn_id = "wire-2pc"
    ip = tx.InitProducerIdRequest
    r = w.call(ApiKey.INIT_PRODUCER_ID, 6, ip(transactional_id=txn_id,
                                              transaction_timeout_ms=1, enable_2pc=True))
    assert r.error_code == E.NONE and r.ongoing_txn_producer_id == -1
    pid, epoch = r.producer_id, r.producer_epoch
    assert add_partitions(w, 3, txn_id, pid, epoch, [2]) == [E.NONE]
    hw0 = stable_offsets(w, 2)[0]
    assert produce_txn(w, txn_id, pid, epoch, 2, 0).error_code == E.NONE
    w2 = kafka_wire(wire_cluster.bootstrap_servers)
    r = w2.call(ApiKey.INIT_PRODUCER_ID, 6, ip(transactional_id=txn_id, transaction_timeout_ms=1,
                                               enable_2pc=True, keep_prepared_txn=True))
    assert (r.error_code, r.producer_id, r.producer_epoch, r.ongoing_txn_producer_id,
            r.ongoing_txn_producer_epoch) == (E.NONE, pid, epoch + 1, pid, epoch)
    assert stable_offsets(w2, 2)[1] == hw0  # still prepared: the LSO waits
    assert end(w2, 4, txn_id, pid, epoch + 1, commit=True) == E.NONE
    hw, lso, _ = stable_offsets(w2, 2)
    assert lso == hw == hw0 + 4
    # keep_prepared_txn without enable_2pc is a malformed request
    r = w2.call(ApiKey.INIT_PRODUCER_ID, 6, ip(transactional_id=txn_id,
                                               transaction_timeout_ms=1000,
                                               keep_prepared_txn=True))
    assert r.error_code == E.INVALID_REQUEST
