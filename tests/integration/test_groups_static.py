"""Static membership (KIP-345, group.instance.id) with real clients: a static member that
restarts within its session gets its old partitions back without a rebalance, so the other
member never sees its assignment revoked; one that closes (no LeaveGroup) is expired
``session.timeout.ms`` after it was last heard from, as Kafka does."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.groups import GROUP_BROKER_CONFIG, KafkaPythonMember, produce
from tests.helpers.kafka_clients import create_topic
from tests.helpers.polling import wait_for

PARTITIONS = 4


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    # librdkafka's admin test runs static members with session.timeout.ms=5000.
    return {**GROUP_BROKER_CONFIG, "group.min.session.timeout.ms": "1000"}


class StaticConfluent:
    def __init__(self, bs: str, group: str, topic: str, instance: str) -> None:
        self.assignments: list[set[int]] = []
        self.c = ck.Consumer({
            "bootstrap.servers": bs, "group.id": group, "group.instance.id": instance,
            "client.id": instance, "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 20000, "heartbeat.interval.ms": 300,
            "fetch.queue.backoff.ms": 1,
        })
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Any, parts: list[Any]) -> None:
        self.assignments.append({p.partition for p in parts})

    def _on_revoke(self, consumer: Any, parts: list[Any]) -> None:
        self.assignments.append(set())

    def poll(self) -> None:
        self.c.poll(0.05)


def drive(members: list[Any], cond: Any, timeout: float, what: str) -> None:
    """wait_for ``cond`` while polling the members (librdkafka rebalances only in poll)."""

    def polled() -> bool:
        for m in members:
            m.poll()
        return bool(cond())

    wait_for(polled, timeout, what, interval=0)


def describe(bs: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bs})  # must outlive the future
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def assigned_by_coordinator(bs: str, group: str) -> dict[str, set[int]] | None:
    """Each static member's partitions as the coordinator has them, while the group is
    stable (None otherwise)."""
    d = describe(bs, group)
    if d.state != ck.ConsumerGroupState.STABLE:
        return None
    return {m.group_instance_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in d.members}


def test_confluent_static_member_restart_keeps_assignment(cluster: EmbeddedCluster) -> None:
    bs = cluster.bootstrap_servers
    topic, group = "static-ck", "static-ck-group"
    create_topic(bs, topic, PARTITIONS)
    produce(bs, topic, 200)
    a = StaticConfluent(bs, group, topic, "inst-a")
    b = StaticConfluent(bs, group, topic, "inst-b")
    # settled: the coordinator stable on the assignment both members hold
    drive([a, b], lambda: a.assignments and b.assignments and a.assignments[-1]
          and b.assignments[-1]
          and a.assignments[-1] | b.assignments[-1] == set(range(PARTITIONS))
          and assigned_by_coordinator(bs, group) == {"inst-a": a.assignments[-1],
                                                     "inst-b": b.assignments[-1]}, 60,
          "both static members assigned, the group stable")
    before = describe(bs, group)
    a_parts, b_history = a.assignments[-1], list(b.assignments)
    old_member = next(m.member_id for m in before.members if m.group_instance_id == "inst-a")

    a.c.close()  # a static member does not leave the group on close
    a2 = StaticConfluent(bs, group, topic, "inst-a")
    # b is polled meanwhile: a rebalance would have revoked its partitions (in b's poll,
    # before it rejoined) before a2 got any assignment
    drive([a2, b], lambda: bool(a2.assignments and a2.assignments[-1]), 30, "a2's assignment")
    assert a2.assignments[-1] == a_parts
    assert b.assignments == b_history, "the other member was never rebalanced"
    after = describe(bs, group)
    assert after.state == ck.ConsumerGroupState.STABLE
    ids = {m.group_instance_id: m.member_id for m in after.members}
    assert set(ids) == {"inst-a", "inst-b"} and ids["inst-a"] != old_member
    a2.c.close()
    b.c.close()


def test_kafka_python_static_member_restart_keeps_assignment(cluster: EmbeddedCluster) -> None:
    bs = cluster.bootstrap_servers
    topic, group = "static-kp", "static-kp-group"
    create_topic(bs, topic, PARTITIONS)
    produce(bs, topic, 200)
    a = KafkaPythonMember("kp-a", bs, group, topic, instance="kp-a").start()
    b = KafkaPythonMember("kp-b", bs, group, topic, instance="kp-b").start()
    a2 = None
    try:
        # settled: the coordinator is stable on the assignment both members hold (the first
        # generation may be followed by another, when the leader's metadata changed)
        wait_for(lambda: a.assigned and b.assigned
                 and a.assigned | b.assigned == set(range(PARTITIONS))
                 and assigned_by_coordinator(bs, group) == {"kp-a": a.assigned,
                                                            "kp-b": b.assigned}, 60,
                 "both static members assigned, the group stable")
        a_parts, b_history = a.assigned, list(b.assignments)
        before = describe(bs, group)
        a.stop()  # closes without leaving: a static member keeps its place
        a2 = KafkaPythonMember("kp-a2", bs, group, topic, instance="kp-a").start()
        # a rebalance would have revoked b's partitions before b rejoined, so before a2
        # got any assignment: b's history is final once a2 has one
        wait_for(lambda: bool(a2.assigned), 30, "a2's assignment")
        assert a2.assigned == a_parts
        assert b.assignments == b_history, "the other member was never rebalanced"
        after = describe(bs, group)
        assert after.state == ck.ConsumerGroupState.STABLE
        ids = {m.group_instance_id: m.member_id for m in after.members}
        old = {m.group_instance_id: m.member_id for m in before.members}
        assert set(ids) == {"kp-a", "kp-b"}
        assert ids["kp-a"] != old["kp-a"] and ids["kp-b"] == old["kp-b"]
    finally:
        for m in (a, a2, b):  # stopping a stopped member again only re-checks its errors
            if m is not None:
                m.stop()


def test_confluent_closed_static_members_expire_on_time(cluster: EmbeddedCluster) -> None:
    """librdkafka's DescribeConsumerGroups admin test: three static consumers
    (session.timeout.ms=5000), each in its own group, consume and close; closing sends no
    LeaveGroup, so each member stays until its session runs out, counted from the last
    request it sent (its final commit on close). 6 s after the closes DeleteGroups finds
    every group empty. The expiry lands within a small margin of the session timeout."""
    bs = cluster.bootstrap_servers
    topic = "static-expiry"
    groups = [f"static-expiry-{i}" for i in range(3)]
    session_s = 5.0
    create_topic(bs, topic, 1)
    produce(bs, topic, 100)
    consumers = []
    for i, group in enumerate(groups):
        c = ck.Consumer({"bootstrap.servers": bs, "group.id": group,
                         "group.instance.id": f"expiry-inst-{i}", "client.id": f"expiry-{i}",
                         "session.timeout.ms": int(session_s * 1000),
                         "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 100 and time.monotonic() < deadline:
            m = c.poll(0.2)
            got += m is not None and m.error() is None
        assert got == 100, f"consumer {i} got {got} of 100 records"
        consumers.append(c)
    admin = AdminClient({"bootstrap.servers": bs})
    closed_at: dict[str, float] = {}
    for group, c in zip(groups, consumers, strict=True):
        c.close()  # commits its offsets; a static member sends no LeaveGroup
        closed_at[group] = time.monotonic()
    expired_at: dict[str, float] = {}

    def all_expired() -> bool:
        for group in set(groups) - set(expired_at):
            if not admin.describe_consumer_groups([group])[group].result(timeout=10).members:
                expired_at[group] = time.monotonic()
        return len(expired_at) == len(groups)

    wait_for(all_expired, 10, "every closed static member expired", interval=0.05)
    for group in groups:
        after = expired_at[group] - closed_at[group]
        assert session_s - 0.5 <= after <= session_s + 0.75, f"{group} expired {after:.2f}s after close"
    time.sleep(max(0.0, closed_at[groups[-1]] + 6 - time.monotonic()))
    for fut in admin.delete_consumer_groups(groups).values():
        fut.result(timeout=30)  # raises NON_EMPTY_GROUP if a member were still there
