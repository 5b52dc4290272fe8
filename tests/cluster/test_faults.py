"""Replication under faults with real processes: a controller and three broker processes,
a confluent-kafka load (acks=all, idempotence) on a replicated topic (RF 3,
min.insync.replicas 2) while brokers are killed, paused, stopped and the controller
restarts. Each test ends by reading the topic back with confluent-kafka and counting the
acknowledged records lost, duplicated and reordered per partition: each must be 0."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from sparklog.broker.group.records import partition_for_group
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS
from tests.cluster.conftest import LAG_MS, PATIENT_LAG_MS, SESSION_MS
from tests.helpers.cli import ok, run
from tests.helpers.cluster import ClusterProcesses, partition_states
from tests.helpers.groups import ConfluentMember, check_exactly_once, end_offsets, produce
from tests.helpers.kafka_clients import committed_offsets, create_topic
from tests.helpers.polling import wait_for
from tests.helpers.replication import AckedProducer, ProducerLoad, damage

pytestmark = pytest.mark.timeout(90)

TOPIC = "load"
PARTITIONS = 3
BROKERS = (1, 2, 3)
# a broker gone is fenced within its session, and its partitions get new leaders then
MOVE_S = SESSION_MS / 1000 + 10


def _create(cluster: ClusterProcesses, rf: int = 3) -> None:
    create_topic(cluster.bootstrap_servers, TOPIC, PARTITIONS, rf,
                 {"min.insync.replicas": "2"})
    wait_for(lambda: _all(cluster, lambda leader, isr: leader > 0 and len(isr) == rf), 20,
             f"every partition led, ISR of {rf}")


def _states(cluster: ClusterProcesses) -> dict[int, tuple[int, list[int]]]:
    return partition_states(cluster.bootstrap_servers, TOPIC)


def _all(cluster: ClusterProcesses, cond: Callable[[int, list[int]], bool]) -> bool:
    return all(cond(leader, isr) for leader, isr in _states(cluster).values())


def _acks_grow(load: AckedProducer, n: int = 300, timeout: float = 20) -> None:
    """Wait until ``n`` more records were acknowledged: the cluster takes writes."""
    mark = load.acked_count()
    wait_for(lambda: load.acked_count() >= mark + n, timeout, f"{n} more acks")


def _isr_back(cluster: ClusterProcesses) -> None:
    wait_for(lambda: _all(cluster, lambda leader, isr: leader > 0 and isr == list(BROKERS)),
             30, "every ISR back to 3")


def _kill_a_leader_and_restart_it(cluster: ClusterProcesses, load: AckedProducer) -> None:
    """SIGKILL partition 0's leader; its partitions move, writes go on; restarted, it
    rejoins every ISR."""
    leader = _states(cluster)[0][0]
    cluster.brokers[leader].kill()
    wait_for(lambda: _all(cluster, lambda ld, isr: ld not in (leader, -1)), MOVE_S,
             f"partitions led by others than {leader}")
    _acks_grow(load)
    cluster.brokers[leader].start()
    _isr_back(cluster)


def _intact(cluster: ClusterProcesses, *producers: AckedProducer) -> None:
    for producer in producers:
        assert producer.acked_count() > 0
        dmg, _ = damage(cluster.bootstrap_servers, TOPIC, PARTITIONS, producer)
        assert dmg.none, dmg


def test_leader_sigkill_under_load_then_restart_rejoins(fault_cluster: ClusterProcesses):
    _create(fault_cluster)
    with ProducerLoad(fault_cluster.bootstrap_servers, TOPIC, PARTITIONS) as load:
        _acks_grow(load)
        _kill_a_leader_and_restart_it(fault_cluster, load)
        _acks_grow(load)
    assert not load.errors, load.errors[:5]
    _intact(fault_cluster, load)


def test_paused_leader_is_fenced_and_never_acks_stale_writes(fault_cluster: ClusterProcesses):
    _create(fault_cluster)
    with ProducerLoad(fault_cluster.bootstrap_servers, TOPIC, PARTITIONS) as load:
        _acks_grow(load)
        zombie = _states(fault_cluster)[0][0]
        node = fault_cluster.brokers[zombie]
        assert node.proc is not None
        others = ",".join(fault_cluster.brokers[b].bootstrap_servers
                          for b in BROKERS if b != zombie)
        os.kill(node.proc.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: all(ld not in (zombie, -1) for ld, _ in
                                 partition_states(others, TOPIC).values()), MOVE_S,
                     f"partitions moved off the paused broker {zombie}")
            _acks_grow(load)
        finally:
            os.kill(node.proc.pid, signal.SIGCONT)
        # a client that only knows the zombie: whatever it acknowledges must survive
        with ProducerLoad(node.bootstrap_servers, TOPIC, PARTITIONS, prefix=b"z",
                          **{"message.timeout.ms": 10000}) as stale:
            _acks_grow(load)
        _isr_back(fault_cluster)
        _acks_grow(load)
    assert not load.errors, load.errors[:5]
    _intact(fault_cluster, load, stale)


def test_follower_kills_shrink_the_isr_then_not_enough_replicas(fault_cluster: ClusterProcesses):
    from confluent_kafka import KafkaError, Producer

    _create(fault_cluster)
    leader = _states(fault_cluster)[0][0]
    first, second = (b for b in BROKERS if b != leader)
    with ProducerLoad(fault_cluster.bootstrap_servers, TOPIC, PARTITIONS) as load:
        _acks_grow(load)
        fault_cluster.brokers[first].kill()
        wait_for(lambda: _states(fault_cluster)[0][1] == sorted([leader, second]),
                 LAG_MS / 1000 + MOVE_S, f"{first} out of partition 0's ISR")
        _acks_grow(load)  # min ISR 2: writes go on
    assert not load.errors, load.errors[:5]
    fault_cluster.brokers[second].kill()
    wait_for(lambda: _states(fault_cluster)[0] == (leader, [leader]),
             LAG_MS / 1000 + MOVE_S, f"partition 0's ISR down to its leader {leader}")
    errors: list[KafkaError] = []
    probe = Producer({"bootstrap.servers": fault_cluster.bootstrap_servers, "acks": "all",
                      "retries": 0, "enable.idempotence": False})
    probe.produce(TOPIC, b"refused", partition=0, on_delivery=lambda err, _: errors.append(err))
    assert probe.flush(30) == 0
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS], errors
    fault_cluster.brokers[first].start()
    fault_cluster.brokers[second].start()
    _isr_back(fault_cluster)
    _intact(fault_cluster, load)


def test_controller_restart_mid_load(fault_cluster: ClusterProcesses):
    _create(fault_cluster)
    with ProducerLoad(fault_cluster.bootstrap_servers, TOPIC, PARTITIONS) as load:
        _acks_grow(load)
        fault_cluster.controller.kill()
        _acks_grow(load)  # the data plane needs no controller while nothing changes
        fault_cluster.controller.start()
        _acks_grow(load)
        _kill_a_leader_and_restart_it(fault_cluster, load)  # the new controller moves them
    assert not load.errors, load.errors[:5]
    _intact(fault_cluster, load)


def test_controlled_shutdown_moves_leaders_without_errors(fault_cluster: ClusterProcesses):
    _create(fault_cluster)
    with ProducerLoad(fault_cluster.bootstrap_servers, TOPIC, PARTITIONS) as load:
        _acks_grow(load)
        leader = _states(fault_cluster)[0][0]
        assert fault_cluster.brokers[leader].stop() == 0
        assert _all(fault_cluster, lambda ld, isr: ld not in (leader, -1))  # moved at once
        _acks_grow(load)
        fault_cluster.brokers[leader].start()
        _isr_back(fault_cluster)
        _acks_grow(load)
    # retriable errors are retried by the client: any delivery error is a failure
    assert not load.errors, load.errors[:5]
    _intact(fault_cluster, load)


def test_a_leader_with_an_unreplicated_tail_comes_back_and_truncates(
        patient_fault_cluster: ClusterProcesses):
    """KIP-101: the leader takes records (acks=1) its paused followers never fetch, dies;
    one of them leads, takes other records at those offsets; the old leader comes back as a
    follower, truncates its tail and copies the new leader's records."""
    from confluent_kafka import Producer

    cluster = patient_fault_cluster
    _create(cluster)
    acked = AckedProducer(cluster.bootstrap_servers, TOPIC)
    acked.send([b"a%d" % i for i in range(200)])
    old, isr = _states(cluster)[0]
    assert isr == list(BROKERS)
    followers = [cluster.brokers[b] for b in BROKERS if b != old]
    pids = [f.proc.pid for f in followers if f.proc is not None]
    tail = Producer({"bootstrap.servers": cluster.brokers[old].bootstrap_servers,
                     "acks": 1})
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        # a paused follower's fetch still waiting at the leader is answered with this record
        # (it reads the answer once resumed): none is left to carry the tail to them
        tail.produce(TOPIC, b"connected", partition=0)  # and metadata, connection ready
        assert tail.flush(10) == 0
        # fewer than replica.lag.time.max.ms paused: they stay in the ISR, so one leads next
        for i in range(50):
            tail.produce(TOPIC, b"tail%d" % i, partition=0)
        assert tail.flush(PATIENT_LAG_MS / 3000) == 0
        cluster.brokers[old].kill()
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    wait_for(lambda: _states(cluster)[0][0] not in (old, -1), MOVE_S,
             "a follower leads partition 0")
    acked.send([b"b%d" % i for i in range(200)])  # at the offsets of the old leader's tail
    cluster.brokers[old].start()
    _isr_back(cluster)
    # only the old leader left: it leads and serves what it has; nothing of its tail
    for b in BROKERS:
        if b != old:
            cluster.brokers[b].kill()
    # every partition, not only 0: the two brokers are fenced one after the other, and a
    # partition still led by the later one has no leader to answer for its watermarks
    wait_for(lambda: _all(cluster, lambda leader, isr: leader == old), MOVE_S,
             f"{old} leads every partition again")
    dmg, got = damage(cluster.bootstrap_servers, TOPIC, PARTITIONS, acked)
    assert dmg.none, dmg
    assert not [m.value for m in got if m.value is not None and m.value.startswith(b"tail")]


def test_reassignment_under_load(fault_cluster: ClusterProcesses):
    """Partition 0 (RF 2) moves off its leader to the third broker while the load runs."""
    _create(fault_cluster, rf=2)
    leader, isr = _states(fault_cluster)[0]
    target = next(b for b in BROKERS if b not in isr)
    stays = next(b for b in isr if b != leader)
    with ProducerLoad(fault_cluster.bootstrap_servers, TOPIC, PARTITIONS) as load:
        _acks_grow(load)
        ok(run("topics", "reassign", "--topic", TOPIC, "--partition", "0", "--replicas",
               f"{target},{stays}", "--bootstrap-server", fault_cluster.bootstrap_servers))
        wait_for(lambda: _states(fault_cluster)[0] == (target, sorted([target, stays])), 30,
                 f"partition 0 on {target},{stays} led by {target}")
        _acks_grow(load)
    assert not load.errors, load.errors[:5]
    _intact(fault_cluster, load)


def test_a_group_keeps_exactly_once_per_commit_through_a_coordinator_move(
        fault_cluster: ClusterProcesses):
    """A confluent-kafka member committing as it goes while its coordinator's broker shuts
    down: the coordinator moves with the offsets partition's leadership, every record is
    consumed once, and the commits end at the end of every partition."""
    bs = fault_cluster.bootstrap_servers
    create_topic(bs, "eo", PARTITIONS, 3, {"min.insync.replicas": "2"})
    produced = produce(bs, "eo", 600)
    member = ConfluentMember("m1", bs, "eo-group", "eo")
    member.throttle.set()
    member.start()
    try:
        wait_for(lambda: len(member.records) >= 100, 30, "the member consuming")
        offsets = partition_states(bs, CONSUMER_OFFSETS)
        coordinator = offsets[partition_for_group("eo-group", len(offsets))][0]
        assert fault_cluster.brokers[coordinator].stop() == 0
        member.throttle.clear()
        bs = fault_cluster.bootstrap_servers
        produced.update(produce(bs, "eo", 600, start=600))
        wait_for(lambda: len(member.records) >= 1200, 45, "every record consumed")
    finally:
        member.stop()
    check_exactly_once(produced, [member])
    assert committed_offsets(bs, "eo-group", "eo", range(PARTITIONS)) == end_offsets(produced)
