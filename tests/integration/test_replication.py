"""Replication on a 3-broker in-process cluster (``InProcessCluster``: real listeners, real
replica fetchers over sockets, one shared controller) with confluent-kafka: RF3 acks=all,
followers' logs byte-identical to the leader's, ISR shrink and rejoin, min.insync.replicas,
a leadership move over a divergent, unreplicated tail (KIP-101) losing nothing acked, and
the group coordinator moving with its ``__consumer_offsets`` partition, whose commits are
acknowledged only once replicated."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparklog.broker.broker import Broker
from sparklog.broker.group.records import partition_for_group
from sparklog.cluster import InProcessCluster
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS
from sparklog.protocol.messages import API_BY_KEY
from sparklog.protocol.messages import groups as grp
from tests.helpers.batches import make_batch
from tests.helpers.groups import (
    GROUP_BROKER_CONFIG,
    ConfluentMember,
    check_exactly_once,
    end_offsets,
    produce,
)
from tests.helpers.kafka_clients import (
    ck_consume,
    ck_produce,
    commit_offsets,
    committed_offsets,
    create_topic,
    make_messages,
)
from tests.helpers.polling import wait_for
from tests.helpers.replication import AckedProducer, damage
from tests.helpers.requests import produce_request
from tests.helpers.wire import KafkaWire

LAG_MS = 1500  # replica.lag.time.max.ms: a stopped follower leaves the ISR within ~2 s


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    with InProcessCluster(tmp_path, brokers=3, config={
            "replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.backoff.ms": "100",
            "replica.fetch.wait.max.ms": "200", "offsets.topic.num.partitions": "3"}) as c:
        yield c


def _isr(c: InProcessCluster, topic: str, partition: int = 0) -> list[int]:
    return c.controller.image.topics[topic].partitions[partition].isr


def _log_bytes(b: Broker, topic: str, partition: int) -> bytes:
    plog = b.replica_manager.get(topic, partition).log
    return plog.read(plog.log_start_offset, 1 << 30).read_bytes()


def _in_step(c: InProcessCluster, topic: str, partition: int) -> bool:
    """Every replica has the leader's LEO and HW = LEO."""
    ends = set()
    for b in c.brokers.values():
        p = b.replica_manager.get(topic, partition)
        if p is not None:
            ends.add((p.log.log_end_offset, p.log.high_watermark))
    return len(ends) == 1 and len({e for pair in ends for e in pair}) == 1


def _stop_fetchers(c: InProcessCluster, *nodes: int) -> None:
    for n in nodes:
        c.call(c.brokers[n].replica_fetchers.stop)


def _start_fetchers(c: InProcessCluster, *nodes: int) -> None:
    for n in nodes:
        c.call(c.brokers[n].replica_fetchers.start)


def _wire_produce(c: InProcessCluster, leader: int, topic: str, acks: int,
                  timeout_ms: int = 5000) -> int:
    req = produce_request(topic, 0, make_batch(2), acks=acks)
    req.timeout_ms = timeout_ms
    wire = KafkaWire(f"127.0.0.1:{c.brokers[leader].port}", timeout=timeout_ms / 1000 + 10)
    try:
        wire.request(ApiKey.PRODUCE, 9, req)
        resp = wire.response(ApiKey.PRODUCE, 9)
    finally:
        wire.close()
    return resp.responses[0].partition_responses[0].error_code


def test_rf3_acks_all_followers_hold_the_leaders_bytes(cluster: InProcessCluster) -> None:
    c = cluster
    bs = c.bootstrap_servers
    create_topic(bs, "rep", 3, 3, {"min.insync.replicas": "2"})
    leaders = {p.leader for p in c.controller.image.topics["rep"].partitions.values()}
    assert leaders == {1, 2, 3}  # every broker leads one partition
    msgs = make_messages(600, 3, headers=True)
    ck_produce(bs, "rep", msgs)
    for part in range(3):
        wait_for(lambda part=part: _in_step(c, "rep", part), 20, f"rep-{part} in step")
        copies = {n: _log_bytes(b, "rep", part) for n, b in c.brokers.items()}
        assert len(copies[1]) > 0 and len(set(copies.values())) == 1, part
        epochs = {n: b.replica_manager.get("rep", part).log.leader_epoch_cache.entries()
                  for n, b in c.brokers.items()}
        assert len({tuple(e) for e in epochs.values()}) == 1
        assert _isr(c, "rep", part) == c.controller.image.topics["rep"].partitions[part].replicas
    # consumers read each partition from its leader
    got = ck_consume(bs, "rep", 3, 600)
    assert sorted((m.partition, m.value) for m in got) == sorted(
        (m.partition, m.value) for m in msgs)


def test_isr_shrinks_rejoins_and_min_insync_replicas(cluster: InProcessCluster) -> None:
    c = cluster
    create_topic(c.bootstrap_servers, "isr", 1, 3, {"min.insync.replicas": "2"})
    leader = c.controller.image.topics["isr"].partitions[0].leader
    f1, f2 = [n for n in (1, 2, 3) if n != leader]
    assert _wire_produce(c, leader, "isr", -1) == ErrorCode.NONE
    _stop_fetchers(c, f2)
    wait_for(lambda: sorted(_isr(c, "isr")) == sorted([leader, f1]), 10, "ISR without f2")
    assert _wire_produce(c, leader, "isr", -1) == ErrorCode.NONE  # 2 >= min.insync.replicas
    # the ISR shrinks below min.insync.replicas while an acks=all produce waits
    _stop_fetchers(c, f1)
    assert _wire_produce(c, leader, "isr", -1, timeout_ms=20_000) == \
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert _isr(c, "isr") == [leader]
    assert _wire_produce(c, leader, "isr", -1) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert _wire_produce(c, leader, "isr", 1) == ErrorCode.NONE  # acks=1 needs no ISR
    # caught-up followers rejoin, and their logs are the leader's
    _start_fetchers(c, f1, f2)
    wait_for(lambda: sorted(_isr(c, "isr")) == [1, 2, 3], 10, "ISR back to 3")
    assert _wire_produce(c, leader, "isr", -1) == ErrorCode.NONE
    wait_for(lambda: _in_step(c, "isr", 0), 10, "isr-0 in step")
    assert len({_log_bytes(b, "isr", 0) for b in c.brokers.values()}) == 1
    assert c.brokers[leader].replica_manager.get("isr", 0).log.log_end_offset == 10


def test_a_new_leader_makes_the_old_one_truncate_its_unreplicated_tail(
        cluster: InProcessCluster) -> None:
    """KIP-101: the leader takes writes its followers never fetched (acks=1), then loses the
    leadership; as a follower it asks the new leader where its epoch ended and truncates
    there. Every acks=all record survives, once, in order; idempotence holds across the
    move (the new leader's producer state was rebuilt from the replicated log)."""
    c = cluster
    bs = c.bootstrap_servers
    create_topic(bs, "div", 1, 3, {"min.insync.replicas": "2"})
    old = c.controller.image.topics["div"].partitions[0].leader
    new, other = [n for n in (1, 2, 3) if n != old]
    producer = AckedProducer(bs, "div")
    producer.send([b"a-%d" % i for i in range(100)])
    wait_for(lambda: _in_step(c, "div", 0), 10, "div-0 in step")
    _stop_fetchers(c, new, other)
    unreplicated = make_messages(30, 1, tag="tail")
    ck_produce(bs, "div", unreplicated, acks="1", **{"enable.idempotence": False})
    assert c.brokers[old].replica_manager.get("div", 0).log.log_end_offset == 130
    c.call(c.controller.change_leader, "div", 0, new, [new, other])
    _start_fetchers(c, new, other)
    producer.send([b"b-%d" % i for i in range(100)])
    assert producer.errors == []
    wait_for(lambda: _in_step(c, "div", 0), 20, "div-0 in step after the move")
    copies = {n: _log_bytes(b, "div", 0) for n, b in c.brokers.items()}
    assert len(set(copies.values())) == 1
    assert b"tail-value" not in copies[old]
    assert c.brokers[old].replica_manager.get("div", 0).log.leader_epoch_cache.entries() == \
        [(0, 0), (1, 100)]
    wait_for(lambda: sorted(_isr(c, "div")) == [1, 2, 3], 10, "the old leader rejoins")
    dmg, got = damage(bs, "div", 1, producer, 200)
    assert dmg.none, dmg
    assert len(got) == 200


def test_the_group_coordinator_moves_with_its_offsets_partition(
        cluster: InProcessCluster) -> None:
    c = cluster
    bs = c.bootstrap_servers
    create_topic(bs, "grp-in", 1, 3)
    commit_offsets(bs, "grp", "grp-in", {0: 7})  # creates __consumer_offsets, RF 3
    offsets = c.controller.image.topics[CONSUMER_OFFSETS]
    part = partition_for_group("grp", len(offsets.partitions))
    old = offsets.partitions[part].leader
    assert [n for n, b in c.brokers.items() if b.group_coordinator.serves("grp")] == [old]
    wait_for(lambda: _in_step(c, CONSUMER_OFFSETS, part), 10, "offsets partition in step")
    new = next(n for n in (1, 2, 3) if n != old)
    c.call(c.controller.change_leader, CONSUMER_OFFSETS, part, new,
           offsets.partitions[part].isr)
    # the old leader gave the group up, the new one replayed it from its replica
    assert not c.brokers[old].group_coordinator.serves("grp")
    assert c.brokers[new].group_coordinator.serves("grp")
    assert committed_offsets(bs, "grp", "grp-in", [0]) == {0: 7}
    commit_offsets(bs, "grp", "grp-in", {0: 9})
    assert committed_offsets(bs, "grp", "grp-in", [0]) == {0: 9}


def test_a_restarted_follower_catches_up_and_rejoins_the_isr(cluster: InProcessCluster) -> None:
    c = cluster
    bs = c.bootstrap_servers
    create_topic(bs, "rs", 1, 3, {"min.insync.replicas": "2"})
    leader = c.controller.image.topics["rs"].partitions[0].leader
    follower = next(n for n in (1, 2, 3) if n != leader)
    producer = AckedProducer(bs, "rs")
    producer.send([b"a-%d" % i for i in range(100)])
    c.call(c.stop_broker, follower)
    wait_for(lambda: follower not in _isr(c, "rs"), 10, "the stopped follower leaves the ISR")
    producer.send([b"b-%d" % i for i in range(100)])  # two in sync: acks=all goes on
    c.call(c.start_broker, follower)
    wait_for(lambda: sorted(_isr(c, "rs")) == [1, 2, 3], 15, "the follower rejoins")
    wait_for(lambda: _in_step(c, "rs", 0), 10, "rs-0 in step")
    assert len({_log_bytes(b, "rs", 0) for b in c.brokers.values()}) == 1
    assert producer.errors == []
    dmg, got = damage(bs, "rs", 1, producer, 200)
    assert dmg.none and len(got) == 200, dmg


@contextlib.contextmanager
def _offsets_leader(tmp_path: Path, topic: str
                    ) -> Iterator[tuple[InProcessCluster, list[int], KafkaWire]]:
    """A 3-broker cluster whose one ``__consumer_offsets`` partition exists (a first commit
    to ``topic`` creates it): the cluster, the partition's followers (to stop fetching:
    they stay in the ISR for 30 s) and a raw connection to its leader, the coordinator,
    whose group writes time out after 500 ms."""
    with InProcessCluster(tmp_path, brokers=3, config={
            "replica.lag.time.max.ms": "30000", "replica.fetch.backoff.ms": "100",
            "offsets.topic.num.partitions": "1", "offsets.commit.timeout.ms": "500",
            "group.initial.rebalance.delay.ms": "0"}) as c:
        create_topic(c.bootstrap_servers, topic, 1, 1)
        commit_offsets(c.bootstrap_servers, "g", topic, {0: 1})  # creates the offsets topic
        leader = c.controller.image.topics[CONSUMER_OFFSETS].partitions[0].leader
        wire = KafkaWire(f"127.0.0.1:{c.brokers[leader].port}")
        try:
            yield c, [n for n in (1, 2, 3) if n != leader], wire
        finally:
            wire.close()


def _join(wire: KafkaWire, group: str, member_id: str, instance_id: str | None = None
          ) -> grp.JoinGroupResponse:
    return wire.call(ApiKey.JOIN_GROUP, 5, grp.JoinGroupRequest(
        group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
        member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
        protocols=[grp.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")]))


def _sync(wire: KafkaWire, group: str, joined: grp.JoinGroupResponse, assignment: bytes,
          instance_id: str | None = None) -> grp.SyncGroupResponse:
    """The SyncGroup of a member alone in its group, which therefore leads it."""
    return wire.call(ApiKey.SYNC_GROUP, 3, grp.SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        group_instance_id=instance_id, assignments=[
            grp.SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                            assignment=assignment)]))


def test_an_offset_commit_is_acknowledged_only_once_the_isr_has_it(tmp_path: Path) -> None:
    """The coordinator writes commits with acks=all: with the offsets partition's followers
    not fetching (and still in the ISR), a commit is refused when offsets.commit.timeout.ms
    runs out, and succeeds once they fetch again."""
    with _offsets_leader(tmp_path, "oc") as (c, followers, wire):
        _stop_fetchers(c, *followers)
        cls = API_BY_KEY[ApiKey.OFFSET_COMMIT].request
        commit = cls(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                     group_instance_id=None, topics=[cls.OffsetCommitRequestTopic(
                         name="oc", partitions=[cls.OffsetCommitRequestPartition(
                             partition_index=0, committed_offset=5)])])
        wire.request(ApiKey.OFFSET_COMMIT, 8, commit)
        resp = wire.response(ApiKey.OFFSET_COMMIT, 8)
        assert resp.topics[0].partitions[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        _start_fetchers(c, *followers)
        wire.request(ApiKey.OFFSET_COMMIT, 8, commit)
        resp = wire.response(ApiKey.OFFSET_COMMIT, 8)
        assert resp.topics[0].partitions[0].error_code == ErrorCode.NONE
        assert committed_offsets(c.bootstrap_servers, "g", "oc", [0]) == {0: 5}


def test_a_sync_group_hands_out_assignments_only_once_the_isr_has_the_group(
        tmp_path: Path) -> None:
    """The group's metadata record, written when the leader's SyncGroup arrives, is on the
    whole ISR before SyncGroup answers (Kafka's storeGroup): with the offsets partition's
    followers not fetching (and still in the ISR), SyncGroup answers COORDINATOR_NOT_AVAILABLE
    and no assignment once offsets.commit.timeout.ms runs out; the member rejoins once they
    fetch again and gets its assignment."""
    with _offsets_leader(tmp_path, "sg") as (c, followers, wire):
        member = _join(wire, "sync-g", "").member_id  # MEMBER_ID_REQUIRED hands out the id
        _stop_fetchers(c, *followers)
        joined = _join(wire, "sync-g", member)
        assert (joined.error_code, joined.leader) == (ErrorCode.NONE, member)
        synced = _sync(wire, "sync-g", joined, b"first")
        assert synced.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert synced.assignment == b""
        _start_fetchers(c, *followers)
        joined = _join(wire, "sync-g", member)
        assert joined.error_code == ErrorCode.NONE
        synced = _sync(wire, "sync-g", joined, b"second")
        assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"second")


def test_a_static_member_is_told_its_new_id_only_once_the_isr_has_it(tmp_path: Path) -> None:
    """A static member (group.instance.id) rejoining a stable group with a new member id has
    the group stored with that id (Kafka's updateStaticMember); JoinGroup answers once the
    record is on the offsets partition's whole ISR: COORDINATOR_NOT_AVAILABLE while the
    followers do not fetch, the new id once they do."""
    with _offsets_leader(tmp_path, "st") as (c, followers, wire):
        # a static member starting up joins with no member id
        first = _join(wire, "static-g", "", "instance-1")
        assert first.error_code == ErrorCode.NONE
        synced = _sync(wire, "static-g", first, b"a", "instance-1")
        assert synced.error_code == ErrorCode.NONE  # stable
        _stop_fetchers(c, *followers)
        assert _join(wire, "static-g", "", "instance-1").error_code == \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        _start_fetchers(c, *followers)
        again = _join(wire, "static-g", "", "instance-1")
        assert again.error_code == ErrorCode.NONE
        assert again.member_id != first.member_id
        assert again.generation_id == first.generation_id  # no rebalance


def test_a_follower_behind_the_leaders_log_start_starts_over_there(
        cluster: InProcessCluster) -> None:
    """OFFSET_OUT_OF_RANGE below the leader's log start (DeleteRecords moved it past the
    follower's LEO while the follower was away): the follower empties its log, starts at the
    leader's start offset, catches up and rejoins the ISR."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    c = cluster
    bs = c.bootstrap_servers
    create_topic(bs, "lso", 1, 3)
    leader = c.controller.image.topics["lso"].partitions[0].leader
    away = next(n for n in (1, 2, 3) if n != leader)
    ck_produce(bs, "lso", make_messages(20, 1, tag="old"))
    wait_for(lambda: _in_step(c, "lso", 0), 10, "lso-0 in step")
    _stop_fetchers(c, away)
    wait_for(lambda: away not in _isr(c, "lso"), 10, "the stopped follower leaves the ISR")
    ck_produce(bs, "lso", make_messages(30, 1, tag="new"))
    admin = AdminClient({"bootstrap.servers": bs})  # kept: its futures die with it
    out = admin.delete_records([TopicPartition("lso", 0, 45)])
    assert list(out.values())[0].result(20).low_watermark == 45
    _start_fetchers(c, away)
    wait_for(lambda: sorted(_isr(c, "lso")) == [1, 2, 3], 15, "the follower rejoins")
    wait_for(lambda: _in_step(c, "lso", 0), 10, "lso-0 in step")
    follower_log = c.brokers[away].replica_manager.get("lso", 0).log
    assert (follower_log.log_start_offset, follower_log.log_end_offset) == (45, 50)
    assert _log_bytes(c.brokers[away], "lso", 0) == _log_bytes(c.brokers[leader], "lso", 0)


def test_a_consumer_group_keeps_exactly_once_through_a_coordinator_move(tmp_path: Path) -> None:
    """A confluent-kafka group member committing as it goes, while the leadership of its
    group's offsets partition moves to another broker: it rediscovers the coordinator, which
    replayed the group from its replica, and every record is consumed exactly once."""
    with InProcessCluster(tmp_path, brokers=3, config={
            **GROUP_BROKER_CONFIG, "replica.fetch.backoff.ms": "100"}) as c:
        bs = c.bootstrap_servers
        create_topic(bs, "eo", 3, 3)
        produced = produce(bs, "eo", 600)
        member = ConfluentMember("m1", bs, "eo-group", "eo")
        member.throttle.set()
        member.start()
        try:
            wait_for(lambda: len(member.records) >= 100, 30, "the member consuming")
            offsets = c.controller.image.topics[CONSUMER_OFFSETS]
            part = partition_for_group("eo-group", len(offsets.partitions))
            old = offsets.partitions[part].leader
            wait_for(lambda: _in_step(c, CONSUMER_OFFSETS, part), 10, "offsets in step")
            new = next(n for n in (1, 2, 3) if n != old)
            c.call(c.controller.change_leader, CONSUMER_OFFSETS, part, new,
                   offsets.partitions[part].isr)
            assert c.brokers[new].group_coordinator.serves("eo-group")
            member.throttle.clear()
            produced.update(produce(bs, "eo", 600, start=600))
            wait_for(lambda: len(member.records) >= 1200, 45, "every record consumed")
        finally:
            member.stop()
        check_exactly_once(produced, [member])
        assert committed_offsets(bs, "eo-group", "eo", range(3)) == end_offsets(produced)
