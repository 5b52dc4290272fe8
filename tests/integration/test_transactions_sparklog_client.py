"""sparklog's own transactional producer against the broker: commit and abort read back
read_committed by confluent-kafka, fencing of an older instance, offsets sent in the
transaction, calls out of order refused, and KIP-939's two-phase commit (prepare, a new
instance keeps and completes the prepared transaction, or aborts one it does not know)."""

from __future__ import annotations

from typing import Any

import pytest

from sparklog.client import PreparedTxnState, Producer, TopicPartition, TransactionStateError
from sparklog.cluster.embedded import EmbeddedCluster
from sparklog.protocol.errors import KafkaError
from tests.helpers.kafka_clients import (
    READ_COMMITTED,
    committed_offsets,
    create_topic,
    kcat_consume,
)

PARTS = 2


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return {"group.initial.rebalance.delay.ms": "0",
            "transaction.two.phase.commit.enable": "true"}


def producer(bs: str, txn_id: str, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 1,
                     **conf})


def write(p: Producer, topic: str, prefix: str, n: int) -> list[bytes]:
    values = [f"{prefix}{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % PARTS)
    return values


def committed_values(bs: str, topic: str) -> list[bytes]:
    """Everything a read_committed reader sees, up to the LSO (kcat -e)."""
    return sorted(m.value for m in kcat_consume(bs, topic, PARTS, 0, isolation=READ_COMMITTED))


def test_commit_abort_and_fencing(cluster: EmbeddedCluster) -> None:
    bs = cluster.bootstrap_servers
    topic = "sl-txn"
    create_topic(bs, topic, PARTS)
    p = producer(bs, "sl-1")
    try:
        with pytest.raises(TransactionStateError):
            p.begin_transaction()  # before init_transactions
        p.init_transactions(30)
        with pytest.raises(TransactionStateError):
            p.produce(topic, value=b"outside", partition=0)
        p.begin_transaction()
        kept = write(p, topic, "c", 10)
        p.commit_transaction(30)
        p.begin_transaction()
        write(p, topic, "a", 10)
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce_arrow(topic, [b"arrow0", b"arrow1"], partitions=[0, 1])
        p.commit_transaction(30)
        kept += [b"arrow0", b"arrow1"]
        assert committed_values(bs, topic) == sorted(kept)
        # a second instance fences the first; the first's open transaction is aborted
        p.begin_transaction()
        write(p, topic, "zombie", 4)
        p.flush(30)
        q = producer(bs, "sl-1")
        q.init_transactions(30)
        with pytest.raises(KafkaError):
            p.commit_transaction(30)
        q.begin_transaction()
        kept += write(q, topic, "q", 4)
        q.commit_transaction(30)
        q.close()
        assert committed_values(bs, topic) == sorted(kept)
    finally:
        p.close(5)


def test_offsets_sent_in_the_transaction_count_at_commit(cluster: EmbeddedCluster) -> None:
    bs = cluster.bootstrap_servers
    topic, group = "sl-txn-offsets", "sl-txn-group"
    create_topic(bs, topic, PARTS)
    p = producer(bs, "sl-offsets")
    try:
        p.init_transactions(30)
        p.begin_transaction()
        write(p, topic, "x", 2)
        p.send_offsets_to_transaction({TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 6},
                                      group, 30)
        assert committed_offsets(bs, group, topic, range(PARTS)) == {0: -1001, 1: -1001}
        p.commit_transaction(30)
        assert committed_offsets(bs, group, topic, range(PARTS)) == {0: 5, 1: 6}
        p.begin_transaction()
        p.send_offsets_to_transaction({TopicPartition(topic, 0): 9}, group, 30)
        p.abort_transaction(30)
        assert committed_offsets(bs, group, topic, range(PARTS)) == {0: 5, 1: 6}
    finally:
        p.close(5)


def test_two_phase_commit_prepared_transaction_completed_by_a_new_instance(
        cluster: EmbeddedCluster) -> None:
    bs = cluster.bootstrap_servers
    topic = "sl-2pc"
    create_topic(bs, topic, PARTS)
    conf = {"transaction.two.phase.commit.enable": True}
    # a writer prepares and "crashes" (it is never used again)
    w = producer(bs, "sl-2pc-task", **conf)
    w.init_transactions(30)
    w.begin_transaction()
    values = write(w, topic, "p", 6)
    prepared = w.prepare_transaction(30)
    assert committed_values(bs, topic) == []
    # the recovering driver: the recorded state matches, so the transaction commits
    r = producer(bs, "sl-2pc-task", **conf)
    try:
        r.init_transactions(30, keep_prepared_txn=True)
        assert r.complete_transaction(prepared, 30) is True
        assert committed_values(bs, topic) == sorted(values)
        # a prepared transaction nobody recorded is aborted
        r.begin_transaction()
        write(r, topic, "orphan", 4)
        r.prepare_transaction(30)
        s = producer(bs, "sl-2pc-task", **conf)
        s.init_transactions(30, keep_prepared_txn=True)
        assert s.complete_transaction(PreparedTxnState(-1, -1), 30) is False
        s.begin_transaction()
        more = write(s, topic, "s", 2)
        assert s.complete_transaction(s.prepare_transaction(30), 30) is True
        s.close(5)
        assert committed_values(bs, topic) == sorted(values + more)
    finally:
        r.close(1)
        w.close(1)
