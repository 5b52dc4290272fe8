"""Group admin with each client's admin API: list groups, describe a live group, list a
group's committed offsets (OffsetFetch with null topics), alter offsets, delete groups."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.groups import GROUP_BROKER_CONFIG, ConfluentMember, produce
from tests.helpers.kafka_clients import commit_offsets, create_topic
from tests.helpers.polling import wait_for

TOPIC = "admin-groups"
PARTITIONS = 4
LIVE = "admin-live"
IDLE = "admin-idle"
IDLE_OFFSETS = {0: 5, 1: 6, 2: 7}


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return GROUP_BROKER_CONFIG


@pytest.fixture(scope="module")
def setup(cluster: EmbeddedCluster) -> Iterator[tuple[EmbeddedCluster, list[Any]]]:
    """A broker with a live 2-member group and an idle group that only has offsets."""
    members: list[Any] = []
    try:
        bs = cluster.bootstrap_servers
        create_topic(bs, TOPIC, PARTITIONS)
        produce(bs, TOPIC, 400)
        members = [ConfluentMember(f"live-{i}", bs, LIVE, TOPIC).start() for i in range(2)]
        wait_for(lambda: all(m.assigned for m in members)
                 and set().union(*(m.assigned for m in members)) == set(range(PARTITIONS)),
                 60, "a stable 2-member group")
        wait_for(lambda: sum(len(m.records) for m in members) == 400, 30, "live group caught up")
        commit_offsets(bs, IDLE, TOPIC, IDLE_OFFSETS)
        yield cluster, members
    finally:
        for m in members:
            m.stop()


def live_member_ids(members: list[Any]) -> set[str]:
    return {m.name for m in members}


def test_confluent_admin(setup: tuple[EmbeddedCluster, list[Any]]) -> None:
    cluster, members = setup
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    listed = admin.list_consumer_groups().result(timeout=30)
    states = {g.group_id: g.state for g in listed.valid}
    assert states[LIVE] == ck.ConsumerGroupState.STABLE
    assert states[IDLE] == ck.ConsumerGroupState.EMPTY

    d = admin.describe_consumer_groups([LIVE])[LIVE].result(timeout=30)
    assert d.state == ck.ConsumerGroupState.STABLE
    assert d.partition_assignor == "range"
    assert d.coordinator.id == cluster.broker.node_id
    assert {m.client_id for m in d.members} == live_member_ids(members)
    assigned = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
    assert assigned == list(range(PARTITIONS))

    offs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(IDLE)])[IDLE].result(
        timeout=30)
    assert {tp.partition: tp.offset for tp in offs.topic_partitions} == IDLE_OFFSETS
    live = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(LIVE)])[LIVE].result(
        timeout=30)
    assert sum(tp.offset for tp in live.topic_partitions) == 400

    # Offsets of an empty group can be altered (standalone commit) ...
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "conf-altered", [ck.TopicPartition(TOPIC, 3, 99)])])["conf-altered"].result(timeout=30)
    offs = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("conf-altered")])["conf-altered"].result(timeout=30)
    assert [(tp.partition, tp.offset) for tp in offs.topic_partitions] == [(3, 99)]
    # ... but not those of a group with members.
    with pytest.raises(ck.KafkaException):
        res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            LIVE, [ck.TopicPartition(TOPIC, 0, 1)])])[LIVE].result(timeout=30)
        for tp in res.topic_partitions:
            if tp.error is not None:
                raise ck.KafkaException(tp.error)

    # Delete: a live group refuses, an empty one goes.
    with pytest.raises(ck.KafkaException) as ei:
        admin.delete_consumer_groups([LIVE])[LIVE].result(timeout=30)
    assert ei.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
    admin.delete_consumer_groups(["conf-altered"])["conf-altered"].result(timeout=30)
    listed = admin.list_consumer_groups().result(timeout=30)
    assert "conf-altered" not in {g.group_id for g in listed.valid}


def test_kafka_python_admin(setup: tuple[EmbeddedCluster, list[Any]]) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.structs import OffsetAndMetadata

    cluster, members = setup
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        groups = {g["group_id"]: g for g in admin.list_groups()}
        assert groups[LIVE]["protocol_type"] == "consumer"
        assert groups[LIVE]["group_state"] == "Stable" and groups[IDLE]["group_state"] == "Empty"
        empty = [g["group_id"] for g in admin.list_groups(states_filter=["Empty"])]
        assert IDLE in empty and LIVE not in empty

        d = admin.describe_groups([LIVE])
        d = d[LIVE] if isinstance(d, dict) else d[0]
        d = d if isinstance(d, dict) else d.to_dict()
        assert d["group_state"] == "Stable" and d["protocol_data"] == "range"
        assert {m["client_id"] for m in d["members"]} == live_member_ids(members)

        offs = admin.list_group_offsets({IDLE: None})[IDLE]
        assert {tp.partition: om.offset for tp, om in offs.items()} == IDLE_OFFSETS

        res = admin.alter_group_offsets("kp-altered", {
            TopicPartition(TOPIC, 1): OffsetAndMetadata(12, "meta", -1)})
        assert all(getattr(e, "errno", 0) == 0 for e in res.values()), res
        offs = admin.list_group_offsets({"kp-altered": [TopicPartition(TOPIC, 1)]})["kp-altered"]
        om = offs[TopicPartition(TOPIC, 1)]
        assert (om.offset, om.metadata) == (12, "meta")

        res = admin.delete_groups(["kp-altered", LIVE, "never-existed"])
        assert res == {"kp-altered": "OK", LIVE: "NonEmptyGroupError",
                       "never-existed": "GroupIdNotFoundError"}
    finally:
        admin.close()


def test_aiokafka_admin(setup: tuple[EmbeddedCluster, list[Any]]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    cluster, members = setup

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await admin.start()
        try:
            listed = await admin.list_consumer_groups()
            ids = {g[0] for g in listed}
            assert {LIVE, IDLE} <= ids
            (resp,) = await admin.describe_consumer_groups([LIVE])
            (group,) = resp.groups
            err, gid, state, ptype, proto, mems = group[:6]
            assert (err, gid, state, ptype, proto) == (0, LIVE, "Stable", "consumer", "range")
            assert {m[1] for m in mems} == live_member_ids(members)  # (id, client id, ...)
            offs = await admin.list_consumer_group_offsets(IDLE)
            assert {tp.partition: om.offset for tp, om in offs.items()} == IDLE_OFFSETS
        finally:
            await admin.close()

    asyncio.run(main())
