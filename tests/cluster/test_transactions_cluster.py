"""Kafka transactions on a replicated cluster (a controller and three broker processes):
``__transaction_state`` created with Kafka's defaults, transactions spanning partitions led
by different brokers read back by read_committed confluent-kafka and kcat readers, a
transactional produce (and TxnOffsetCommit) outside its transaction refused by brokers
that do not coordinate the id (KIP-890, asked of the coordinator broker to broker), and the
transaction coordinator's broker SIGKILLed with a transaction open and with its commit
logged but not all of its markers written. A new coordinator takes over and every
transaction comes out all-or-nothing on every partition: each test counts the committed
records lost, duplicated and reordered per partition, and each must be 0."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from sparklog.broker.group.records import partition_for_group
from sparklog.broker.txn.records import partition_for_txn
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode as E
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS, TRANSACTION_STATE
from sparklog.protocol.messages import transactions as tx
from tests.cluster.conftest import FAULT_CONFIG, cluster_of
from tests.helpers.cli import ok, run
from tests.helpers.cluster import ClusterProcesses, delivery_report, partition_states
from tests.helpers.kafka_clients import (
    DEADLINE_S,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Msg,
    ck_consume,
    ck_txn_producer,
    committed_offsets,
    create_topic,
    kcat_consume,
)
from tests.helpers.polling import wait_for
from tests.helpers.txn_wire import TOPIC as WIRE_TOPIC
from tests.helpers.txn_wire import add_partitions, end, init, produce_txn
from tests.helpers.wire import KafkaWire

pytestmark = pytest.mark.timeout(90)

TOPIC = "txn"
PARTS = 3
STATE_PARTITIONS = 50
SLOW_SESSION_MS = 8000

def _create(cluster: ClusterProcesses, topic: str = TOPIC) -> dict[int, int]:
    """The topic, RF 3 and min.insync.replicas 2; each partition's leader."""
    bs = cluster.bootstrap_servers
    create_topic(bs, topic, PARTS, 3, {"min.insync.replicas": "2"})
    wait_for(lambda: all(leader > 0 and len(isr) == 3
                         for leader, isr in partition_states(bs, topic).values()),
             20, "every partition led with 3 in sync")
    return {p: leader for p, (leader, _isr) in partition_states(bs, topic).items()}


def _values(tag: str, n: int) -> list[Msg]:
    return [Msg(i % PARTS, None, f"{tag}-{i}".encode(), 0) for i in range(n)]


def _txn(p: Any, msgs: list[Msg], *, commit: bool | None) -> None:
    """One transaction of ``msgs``: committed, aborted, or (None) left open, flushed."""
    p.begin_transaction()
    for m in msgs:
        p.produce(TOPIC, value=m.value, partition=m.partition)
    p.flush(DEADLINE_S)
    if commit is True:
        p.commit_transaction(DEADLINE_S)
    elif commit is False:
        p.abort_transaction(DEADLINE_S)


def _coordinator(bs: str, txn_id: str) -> tuple[int, str]:
    """(coordinator id, state) of ``txn_id`` as ``sparklog transactions describe`` sees it."""
    out = ok(run("transactions", "describe", "--transactional-id", txn_id,
                 "--bootstrap-server", bs)).splitlines()
    cells = out[1].split()
    return int(cells[0]), cells[4]


def _read_committed_exactly(bs: str, committed: list[Msg]) -> None:
    """A read_committed reader holds exactly ``committed``, in order, per partition."""
    got = ck_consume(bs, TOPIC, PARTS, len(committed), isolation=READ_COMMITTED)
    report = delivery_report(committed, got)
    assert all(d.lost == d.duplicated == d.reordered == 0 for d in report.values()), report
    assert len(got) == len(committed)


def test_transactions_across_partitions_led_by_different_brokers(
        local_cluster: ClusterProcesses) -> None:
    bs = local_cluster.bootstrap_servers
    leaders = _create(local_cluster)
    assert len(set(leaders.values())) == 3, leaders  # every broker leads one partition
    p = ck_txn_producer(bs, "across")
    first, aborted, last = _values("c", 30), _values("a", 30), _values("d", 30)
    _txn(p, first, commit=True)
    _txn(p, aborted, commit=False)
    _txn(p, last, commit=True)
    committed = first + last
    _read_committed_exactly(bs, committed)
    got = kcat_consume(bs, TOPIC, PARTS, len(committed), isolation=READ_COMMITTED)
    assert delivery_report(committed, got) == delivery_report(committed, committed)
    assert len(ck_consume(bs, TOPIC, PARTS, 90, isolation=READ_UNCOMMITTED)) == 90
    # __transaction_state: Kafka's 50 partitions, RF 3, min.insync.replicas 2; the id's
    # coordinator is the leader of its partition
    states = partition_states(bs, TRANSACTION_STATE)
    assert len(states) == STATE_PARTITIONS
    assert all(len(isr) == 3 for _leader, isr in states.values())
    out = ok(run("topics", "describe", "--topic", TRANSACTION_STATE, "--bootstrap-server", bs))
    assert "min.insync.replicas=2" in out, out
    leader = states[partition_for_txn("across", STATE_PARTITIONS)][0]
    assert _coordinator(bs, "across") == (leader, "CompleteCommit")


def test_a_produce_outside_the_transaction_is_refused_by_every_leader(
        local_cluster: ClusterProcesses) -> None:
    bs = local_cluster.bootstrap_servers
    leaders = _create(local_cluster, WIRE_TOPIC)
    ck_txn_producer(bs, "kip890")  # finds the coordinator (the state topic is created)
    coordinator, _state = _coordinator(bs, "kip890")
    added, outside = (p for p, leader in sorted(leaders.items()) if leader != coordinator)
    with ExitStack() as stack:
        def wire(node: int) -> KafkaWire:
            w = KafkaWire(local_cluster.brokers[node].bootstrap_servers)
            stack.callback(w.close)
            return w

        to_coordinator = wire(coordinator)
        pid, epoch = init(to_coordinator, "kip890")
        assert add_partitions(to_coordinator, 3, "kip890", pid, epoch, [added]) == [E.NONE]
        # the leaders do not coordinate "kip890": they ask the coordinator
        res = produce_txn(wire(leaders[outside]), "kip890", pid, epoch, outside, 0)
        assert res.error_code == E.INVALID_TXN_STATE
        to_leader = wire(leaders[added])
        assert produce_txn(to_leader, "kip890", pid, epoch, added, 0).error_code == E.NONE
        assert produce_txn(to_leader, "kip890", pid, epoch, added, 3).error_code == E.NONE
        # offsets of a group another broker coordinates: refused until AddOffsetsToTxn
        group, group_coordinator = _group_coordinated_elsewhere(bs, coordinator)
        to_group = wire(group_coordinator)
        assert _txn_offset_commit(to_group, group, pid, epoch) == E.INVALID_TXN_STATE
        r = to_coordinator.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, tx.AddOffsetsToTxnRequest(
            transactional_id="kip890", producer_id=pid, producer_epoch=epoch, group_id=group))
        assert r.error_code == E.NONE
        assert _txn_offset_commit(to_group, group, pid, epoch) == E.NONE
        assert end(to_coordinator, 3, "kip890", pid, epoch, commit=False) == E.NONE
        # the transaction is over: a late batch of it is refused too
        wait_for(lambda: _coordinator(bs, "kip890")[1] == "CompleteAbort", 10, "the abort")
        res = produce_txn(to_leader, "kip890", pid, epoch, added, 6)
        assert res.error_code == E.INVALID_TXN_STATE


def _group_coordinated_elsewhere(bs: str, txn_coordinator: int) -> tuple[str, int]:
    """A group whose offsets partition a broker other than ``txn_coordinator`` leads, and
    that broker (the offsets topic is created by asking for a group's offsets)."""
    committed_offsets(bs, "probe", WIRE_TOPIC, [0])
    wait_for(lambda: all(leader > 0 for leader, _isr
                         in partition_states(bs, CONSUMER_OFFSETS).values()),
             20, f"{CONSUMER_OFFSETS} led")
    states = partition_states(bs, CONSUMER_OFFSETS)
    leaders = {g: states[partition_for_group(g, len(states))][0]
               for g in (f"group-{i}" for i in range(100))}
    return next((g, n) for g, n in leaders.items() if n != txn_coordinator)


def _txn_offset_commit(w: KafkaWire, group: str, pid: int, epoch: int) -> int:
    toc = tx.TxnOffsetCommitRequest
    r = w.call(ApiKey.TXN_OFFSET_COMMIT, 3, toc(
        transactional_id="kip890", group_id=group, producer_id=pid, producer_epoch=epoch,
        member_id="", topics=[toc.TxnOffsetCommitRequestTopic(name=WIRE_TOPIC, partitions=[
            toc.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                committed_metadata="")])]))
    return r.topics[0].partitions[0].error_code


def test_coordinator_killed_with_a_transaction_open(fault_cluster: ClusterProcesses) -> None:
    """The open transaction is aborted by the next coordinator (a new producer instance
    fences the old one); the committed ones before and after it are read exactly once."""
    bs = fault_cluster.bootstrap_servers
    _create(fault_cluster)
    old = ck_txn_producer(bs, "victim")
    before, open_, after = _values("b", 30), _values("o", 30), _values("f", 30)
    _txn(old, before, commit=True)
    _txn(old, open_, commit=None)
    coordinator, state = _coordinator(bs, "victim")
    assert state == "Ongoing"
    fault_cluster.brokers[coordinator].kill()
    new = ck_txn_producer(bs, "victim")  # waits for the next coordinator
    _txn(new, after, commit=True)
    _read_committed_exactly(bs, before + after)
    moved, state = _coordinator(bs, "victim")
    assert moved != coordinator and state == "CompleteCommit"


@pytest.fixture
def slow_fence_cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    """Brokers fenced only after SLOW_SESSION_MS: a paused leader stays the leader (and
    its markers unwritten) for seconds after it left the ISRs."""
    yield from cluster_of(tmp_path, {**FAULT_CONFIG,
                                     "broker.session.timeout.ms": str(SLOW_SESSION_MS)})


def test_coordinator_killed_after_logging_the_commit(
        slow_fence_cluster: ClusterProcesses) -> None:
    """The commit is logged (PrepareCommit) while one partition's leader is paused: it has
    left the ISRs (the decision replicates without it) but is not fenced yet, so it is still
    the partition's leader and its marker is not written; the coordinator's broker is then
    SIGKILLed. The next coordinator loads the prepared transaction and writes every marker:
    all of it becomes visible, and the id goes on."""
    cluster = slow_fence_cluster
    bs = cluster.bootstrap_servers
    p, coordinator, paused, others = _a_leader_to_pause(cluster, "prepared")
    first, decided, last = _values("x", 30), _values("y", 30), _values("z", 30)
    _txn(p, first, commit=True)
    _txn(p, decided, commit=None)
    with _paused(cluster, paused):
        committing = threading.Thread(target=_commit_quietly, args=(p,), daemon=True)
        committing.start()
        wait_for(lambda: _coordinator(others, "prepared") == (coordinator, "PrepareCommit"),
                 20, "the commit logged, a marker missing")
        cluster.brokers[coordinator].kill()
    _read_committed_exactly(bs, first + decided)
    again = ck_txn_producer(bs, "prepared")  # the same id goes on
    _txn(again, last, commit=True)
    _read_committed_exactly(bs, first + decided + last)
    committing.join(DEADLINE_S)


def test_markers_for_a_paused_leader_go_to_its_partitions_next_leaders(
        fault_cluster: ClusterProcesses) -> None:
    """A partition's leader is paused as the transaction commits: the partition's marker
    is written by its next leader once the paused broker is fenced, well within
    ``request.timeout.ms`` (30 s), and the whole transaction becomes visible while the old
    leader is still paused."""
    p, _coordinator_id, paused, others = _a_leader_to_pause(fault_cluster, "moving")
    committed = _values("m", 30)
    _txn(p, committed, commit=None)
    with _paused(fault_cluster, paused):
        started = time.monotonic()
        p.commit_transaction(DEADLINE_S)
        wait_for(lambda: _coordinator(others, "moving")[1] == "CompleteCommit", 25,
                 "every marker written while the old leader is still paused")
        assert time.monotonic() - started < 25
        _read_committed_exactly(others, committed)


def _a_leader_to_pause(cluster: ClusterProcesses, txn_id: str) -> tuple[Any, int, int, str]:
    """The topic; a transactional producer of ``txn_id``, its coordinator, a broker that
    leads a partition and is not the coordinator, and the bootstrap servers without it."""
    bs = cluster.bootstrap_servers
    leaders = _create(cluster)
    p = ck_txn_producer(bs, txn_id)
    coordinator, _state = _coordinator(bs, txn_id)
    paused = next(b for b in leaders.values() if b != coordinator)
    others = ",".join(b.bootstrap_servers for n, b in cluster.brokers.items() if n != paused)
    return p, coordinator, paused, others


@contextmanager
def _paused(cluster: ClusterProcesses, node: int) -> Iterator[None]:
    """Broker ``node`` stopped (SIGSTOP) for the block, continued after it whatever
    happens."""
    pid = cluster.brokers[node].proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _commit_quietly(p: Any) -> None:
    """The old producer's commit: its coordinator dies under it, whatever it answers."""
    try:
        p.commit_transaction(DEADLINE_S)
    except Exception:  # noqa: BLE001 - the outcome is read from the topic
        pass
