"""Consumer groups with sparklog's client: three members rebalance under each assignor, no
record is lost across rebalances, and commits show up for other clients."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer as CKConsumer

from sparklog.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from sparklog.client.assignors import Subscription, encode_subscription
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.messages import groups as grp
from tests.helpers.kafka_clients import committed_offsets
from tests.helpers.polling import collect, wait_for, wait_until


class Member(threading.Thread):
    def __init__(self, conf: dict, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(conf)
        self.topic = topic
        self.records: list = []
        self.assigned: set = set()
        self.revoked: list = []
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        def on_assign(c, tps):
            self.assigned = set(c.assignment())

        def on_revoke(c, tps):
            self.revoked.append(list(tps))
            self.assigned = set(c.assignment()) - set(tps)

        try:
            self.consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
            while not self.stop_flag.is_set():
                self.records.extend(self.consumer.consume(200, 0.2))
                self.assigned = set(self.consumer.assignment())
        except BaseException as e:  # surfaced by the test
            self.error = e
        finally:
            self.consumer.close()


def _wait(cond, timeout: float, what: str, members=()) -> None:
    """wait_for ``cond``, failing at once when a member thread has failed."""

    def ready() -> bool:
        if cond():
            return True
        errors = [m.error for m in members if m.error is not None]
        assert not errors, f"a member failed while waiting for {what}: {errors!r}"
        return False

    wait_for(ready, timeout, what, interval=0.1)


def _keyed_topic(bs, topic, n):  # noqa: ANN001, ANN202
    """Create ``topic`` with 6 partitions holding records k0/v0 .. k{n-1}/v{n-1}."""
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, 6)])
    with Producer({"bootstrap.servers": bs}) as p:
        p.produce_arrow(topic, pa.array([f"v{i}".encode() for i in range(n)]),
                        keys=pa.array([f"k{i}".encode() for i in range(n)]))
        assert p.flush(30) == 0


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_consumers_rebalance_without_losing_records(cluster, strategy):
    bs = cluster.bootstrap_servers
    topic = f"grp-{strategy}-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    _keyed_topic(bs, topic, 600)
    conf = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
            "partition.assignment.strategy": strategy, "heartbeat.interval.ms": 200,
            "session.timeout.ms": 6000, "auto.commit.interval.ms": 200}
    members = [Member(conf, topic) for _ in range(3)]
    for m in members:
        m.start()
        time.sleep(0.3)
    all_tps = {TopicPartition(topic, p) for p in range(6)}

    def balanced(ms):
        sets = [m.assigned for m in ms]
        union = set().union(*sets)
        return union == all_tps and sum(len(s) for s in sets) == len(all_tps) \
            and all(sets)

    try:
        _wait(lambda: balanced(members), 60, f"{strategy}: 3 balanced members", members)
        assert sorted(len(m.assigned) for m in members) == [2, 2, 2]
        _wait(lambda: len({(r.partition, r.offset) for m in members for r in m.records}) == 600,
              60, "all records consumed", members)
        if strategy == "cooperative-sticky":
            # incremental: nobody gave back everything it held
            assert all(len(rv) < 6 for m in members for rv in m.revoked)
        # one member leaves: the other two take over its partitions
        members[0].stop_flag.set()
        members[0].join(20)
        _wait(lambda: balanced(members[1:]), 60, f"{strategy}: 2 members after a leave",
              members[1:])
        assert sorted(len(m.assigned) for m in members[1:]) == [3, 3]
        with Producer({"bootstrap.servers": bs}) as p:
            p.produce_arrow(topic, pa.array([b"late"] * 60))
            assert p.flush(30) == 0
        _wait(lambda: len({(r.partition, r.offset) for m in members for r in m.records}) == 660,
              60, "records produced after the rebalance", members[1:])
    finally:
        for m in members:
            m.stop_flag.set()
        for m in members:
            m.join(20)
    assert all(m.error is None for m in members), [m.error for m in members]
    # the group's commits are what another client sees
    committed = committed_offsets(bs, group, topic, range(6))
    with AdminClient({"bootstrap.servers": bs}) as admin:
        ends = admin.list_offsets({TopicPartition(topic, p): -1 for p in range(6)})
    assert committed == {tp.partition: off for tp, (off, _) in ends.items()}


def test_manual_commit_seek_pause_and_committed(cluster):
    bs = cluster.bootstrap_servers
    topic = f"man-{uuid.uuid4().hex[:6]}"
    group = f"gm-{uuid.uuid4().hex[:6]}"
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with Producer({"bootstrap.servers": bs}) as p:
        for i in range(20):
            p.produce(topic, f"v{i}", partition=i % 2)
        assert p.flush(10) == 0
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([tp0, tp1])
    c.pause([tp1])
    got = collect(lambda: c.consume(100, 0.5), 10, 20)
    assert {r.partition for r in got} == {0} and len(got) == 10
    c.commit({tp0: 7})
    assert c.committed([tp0, tp1]) == {tp0: 7, tp1: -1}
    c.resume([tp1])
    c.seek(tp1, 8)
    rest = collect(lambda: c.consume(100, 0.5), 2, 20)
    assert [(r.partition, r.offset) for r in rest] == [(1, 8), (1, 9)]
    assert c.position(tp1) == 10
    assert c.get_watermark_offsets(tp1) == (0, 10)
    c.commit(asynchronous=False)
    assert c.committed([tp0, tp1]) == {tp0: 10, tp1: 10}
    c.close()


def test_mixed_group_with_confluent_kafka_member(cluster):
    """A sparklog consumer and a librdkafka consumer share one group: the subscription and
    assignment bytes are understood both ways, whoever is the leader."""
    bs = cluster.bootstrap_servers
    topic = f"mixed-{uuid.uuid4().hex[:6]}"
    group = f"gx-{uuid.uuid4().hex[:6]}"
    _keyed_topic(bs, topic, 300)
    mine = Member({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                   "partition.assignment.strategy": "range", "heartbeat.interval.ms": 200,
                   "session.timeout.ms": 6000}, topic)
    mine.start()
    ck = CKConsumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                     "partition.assignment.strategy": "range", "heartbeat.interval.ms": 200,
                     "session.timeout.ms": 6000, "enable.auto.commit": True})
    ck.subscribe([topic])
    ck_records: list = []
    ck_assigned: set = set()

    def settled() -> bool:  # drives the librdkafka member, which consumes only when polled
        nonlocal ck_assigned
        for m in ck.consume(100, 0.2):
            if m.error() is None:
                ck_records.append((m.partition(), m.offset()))
        ck_assigned = {tp.partition for tp in ck.assignment()}
        mine_parts = {tp.partition for tp in mine.assigned}
        done = len(set(ck_records) | {(r.partition, r.offset) for r in mine.records}) == 300
        return bool(ck_assigned and mine_parts and not (ck_assigned & mine_parts)
                    and len(ck_assigned | mine_parts) == 6 and done)

    try:
        wait_until(settled, 60, interval=0)
        assert mine.error is None
        assert len(ck_assigned) == 3 and len(mine.assigned) == 3
        assert not ck_assigned & {tp.partition for tp in mine.assigned}
        assert len(set(ck_records) | {(r.partition, r.offset) for r in mine.records}) == 300
    finally:
        ck.close()
        mine.stop_flag.set()
        mine.join(20)


def test_heartbeats_sent_during_a_join_do_not_trigger_another_rebalance(cluster, kafka_wire):
    """A member blocked in JoinGroup must not act on heartbeats of the generation it is
    leaving: their REBALANCE_IN_PROGRESS made it rejoin the freshly stable group, whose
    other members then rejoined in turn, and under load the group never settled (records
    produced after a rebalance were not consumed). Here raw-protocol members hold the
    sparklog member in JoinGroup for ~1.5 s (6 heartbeat intervals), then the group must
    stay stable."""
    bs = cluster.bootstrap_servers
    topic = f"hbj-{uuid.uuid4().hex[:6]}"
    group = f"ghj-{uuid.uuid4().hex[:6]}"
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, 3)])
    meta = encode_subscription(Subscription([topic]), 1)

    def join_req(member_id: str) -> Any:
        return grp.JoinGroupRequest(
            group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
            member_id=member_id, protocol_type="consumer",
            protocols=[grp.JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                     metadata=meta)])

    def new_member(w: Any) -> str:
        r = w.call(ApiKey.JOIN_GROUP, 5, join_req(""))
        assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED
        w.request(ApiKey.JOIN_GROUP, 5, join_req(r.member_id))  # parks until all joined
        return r.member_id

    def sync(w: Any, member_id: str, generation: int) -> None:
        w.request(ApiKey.SYNC_GROUP, 3, grp.SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member_id, assignments=[]))

    def heartbeat(w: Any, member_id: str, generation: int) -> ErrorCode:
        return ErrorCode(w.call(ApiKey.HEARTBEAT, 3, grp.HeartbeatRequest(
            group_id=group, generation_id=generation, member_id=member_id)).error_code)

    a = Member({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "range", "heartbeat.interval.ms": 250,
                "session.timeout.ms": 30000}, topic)
    a.start()
    c, d = kafka_wire(bs), kafka_wire(bs)
    try:
        _wait(lambda: len(a.assigned) == 3, 30, "the sparklog member's assignment", [a])
        # C joins: A rejoins at once (its heartbeat says REBALANCE_IN_PROGRESS)
        c_id = new_member(c)
        rc = c.response(ApiKey.JOIN_GROUP, 5)
        assert rc.error_code == ErrorCode.NONE
        sync(c, c_id, rc.generation_id)
        assert c.response(ApiKey.SYNC_GROUP, 3).error_code == ErrorCode.NONE
        gen = rc.generation_id
        _wait(lambda: a.consumer._group.generation == gen and len(a.assigned) == 2, 30,
              "A in the two-member generation", [a])
        # D joins; A rejoins and is held in JoinGroup until C rejoins
        d_id = new_member(d)
        assert heartbeat(c, c_id, gen) == ErrorCode.REBALANCE_IN_PROGRESS
        time.sleep(1.5)
        c.request(ApiKey.JOIN_GROUP, 5, join_req(c_id))
        rc, rd = c.response(ApiKey.JOIN_GROUP, 5), d.response(ApiKey.JOIN_GROUP, 5)
        assert rc.error_code == rd.error_code == ErrorCode.NONE
        assert rc.generation_id == rd.generation_id == gen + 1
        sync(c, c_id, gen + 1)
        sync(d, d_id, gen + 1)
        assert c.response(ApiKey.SYNC_GROUP, 3).error_code == ErrorCode.NONE
        assert d.response(ApiKey.SYNC_GROUP, 3).error_code == ErrorCode.NONE
        # the group stays stable at that generation: A does not rejoin
        for _ in range(10):
            time.sleep(0.2)
            assert heartbeat(c, c_id, gen + 1) == ErrorCode.NONE
            assert heartbeat(d, d_id, gen + 1) == ErrorCode.NONE
        assert a.error is None
        assert a.consumer._group.generation == gen + 1 and len(a.assigned) == 1
    finally:
        a.stop_flag.set()
        a.join(20)
