"""Committed offsets and group state survive broker restarts (graceful and SIGKILL):
they live only as records in __consumer_offsets, replayed at startup."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.groups import GROUP_BROKER_CONFIG, end_offsets, produce
from tests.helpers.kafka_clients import KCAT, committed_offsets, create_topic
from tests.helpers.polling import collect

PARTITIONS = 3


def _good(msgs: list[Any]) -> list[Any]:
    return [m for m in msgs if m.error() is None]


def consume_all_and_commit(bs: str, group: str, topic: str, n: int,
                           commit: dict[int, int]) -> None:
    """Consume n records as a group member, then commit explicit offsets and leave."""
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "fetch.queue.backoff.ms": 1})
    c.subscribe([topic])
    got = len(collect(lambda: _good(c.consume(500, 0.2)), n, 30))
    assert got == n
    c.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in commit.items()],
             asynchronous=False)
    c.close()


def committed_by_each_client(bs: str, group: str, topic: str) -> dict[str, dict[int, int]]:
    out = {"confluent": committed_offsets(bs, group, topic, range(PARTITIONS))}

    from kafka import KafkaConsumer, TopicPartition

    kc = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        out["kafka-python"] = {p: kc.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        kc.close()

    async def aio() -> dict[int, int]:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition as ATP

        ac = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
        await ac.start()
        try:
            return {p: await ac.committed(ATP(topic, p)) for p in range(PARTITIONS)}
        finally:
            await ac.stop()

    out["aiokafka"] = asyncio.run(aio())
    return out


def alter_standalone(bs: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """confluent-kafka's alter_consumer_group_offsets: OffsetCommit with generation -1 and
    no member id, the way the Spark source commits for a group that has no members."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bs})
    req = ConsumerGroupTopicPartitions(group, [ck.TopicPartition(topic, p, o)
                                               for p, o in offsets.items()])
    res = admin.alter_consumer_group_offsets([req])[group].result(timeout=30)
    assert all(tp.error is None for tp in res.topic_partitions), res.topic_partitions


def test_committed_offsets_and_stable_group_survive_graceful_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topic = "restart-topic"
    c1 = EmbeddedCluster(data, config=GROUP_BROKER_CONFIG).start()
    live: Any = None
    try:
        bs = c1.bootstrap_servers
        create_topic(bs, topic, PARTITIONS)
        produced = produce(bs, topic, 900)
        ends = end_offsets(produced)
        commit = {p: ends[p] - 10 for p in range(PARTITIONS)}
        consume_all_and_commit(bs, "left-group", topic, 900, commit)
        alter_standalone(bs, "standalone", topic, {0: 7, 2: 42})

        # A member that stays connected across the restart.
        live = ck.Consumer({"bootstrap.servers": bs, "group.id": "live-group",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "fetch.queue.backoff.ms": 1, "session.timeout.ms": 30000,
                            "heartbeat.interval.ms": 500})
        live.subscribe([topic])
        got = len(collect(lambda: _good(live.consume(500, 0.2)), 900, 30))
        assert got == 900
        live.commit(asynchronous=False)
        member_before = live.memberid()
    finally:
        c1.stop()

    c2 = EmbeddedCluster(data, port=c1.port, config=GROUP_BROKER_CONFIG).start()
    try:
        bs = c2.bootstrap_servers
        for client, offs in committed_by_each_client(bs, "left-group", topic).items():
            assert offs == commit, client
        assert committed_by_each_client(bs, "standalone", topic)["confluent"] == {
            0: 7, 1: -1001, 2: 42}

        # The live member keeps its membership: no rejoin, it just carries on.
        more = produce(bs, topic, 90, start=900)
        got = collect(lambda: _good(live.consume(500, 0.2)), 90, 30)
        assert {(m.partition(), m.offset()) for m in got} <= more.keys()
        assert len(got) == 90
        assert live.memberid() == member_before
        admin = AdminClient({"bootstrap.servers": bs})
        desc = admin.describe_consumer_groups(["live-group"])["live-group"].result(timeout=30)
        assert desc.state == ck.ConsumerGroupState.STABLE
        assert [m.member_id for m in desc.members] == [member_before]
        live.commit(asynchronous=False)

        # A new member of the group that left resumes exactly at the committed offsets.
        c = ck.Consumer({"bootstrap.servers": bs, "group.id": "left-group",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
                         "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        seen = [(m.partition(), m.offset()) for m in collect(lambda: _good(c.consume(500, 0.2)),
                                                               30 + 90, 30)]
        c.close()
        expected = sorted([(p, o) for p in range(PARTITIONS) for o in range(commit[p], ends[p])]
                          + list(more))
        assert sorted(seen) == expected
    finally:
        if live is not None:
            live.close()
        c2.stop()


def test_committed_offsets_survive_sigkill(tmp_path: Path, server_factory: Any) -> None:
    extra = [arg for k, v in GROUP_BROKER_CONFIG.items() for arg in ("--set", f"{k}={v}")]
    srv = server_factory(tmp_path / "data", extra=extra).start()
    bs = srv.bootstrap_servers
    topic = "kill-topic"
    create_topic(bs, topic, PARTITIONS)
    produced = produce(bs, topic, 300)
    consume_all_and_commit(bs, "g-kill", topic, 300, {0: 11, 1: 22, 2: 33})
    alter_standalone(bs, "g-kill-standalone", topic, {1: 5})
    srv.kill()  # no shutdown: what was acknowledged is in the log (page cache) already
    srv.start()
    try:
        offs = committed_by_each_client(bs, "g-kill", topic)
        assert offs == {c: {0: 11, 1: 22, 2: 33} for c in offs}
        assert committed_by_each_client(bs, "g-kill-standalone", topic)["kafka-python"] == {
            0: None, 1: 5, 2: None}
        # kcat's balanced consumer resumes exactly at the committed offsets.
        out = subprocess.run([KCAT, "-b", bs, "-G", "g-kill", topic, "-e", "-q",
                              "-f", "%p %o\n"], capture_output=True, timeout=60, check=True)
        seen = sorted(tuple(map(int, line.split())) for line in out.stdout.splitlines())
        assert seen == sorted((p, o) for p, o in produced if o >= {0: 11, 1: 22, 2: 33}[p])
    finally:
        srv.stop()


def test_deleted_group_stays_deleted_after_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedCluster(data, config=GROUP_BROKER_CONFIG) as c1:
        bs = c1.bootstrap_servers
        create_topic(bs, "del-topic", PARTITIONS)
        alter_standalone(bs, "doomed", "del-topic", {0: 3})
        alter_standalone(bs, "kept", "del-topic", {0: 4})
        admin = AdminClient({"bootstrap.servers": bs})
        admin.delete_consumer_groups(["doomed"])["doomed"].result(timeout=30)
    with EmbeddedCluster(data, port=c1.port, config=GROUP_BROKER_CONFIG) as c2:
        admin = AdminClient({"bootstrap.servers": c2.bootstrap_servers})
        listed = admin.list_consumer_groups().result(timeout=30)
        ids = {g.group_id for g in listed.valid}
        assert "kept" in ids and "doomed" not in ids

        offs = committed_by_each_client(c2.bootstrap_servers, "doomed", "del-topic")
        assert offs["confluent"] == {0: -1001, 1: -1001, 2: -1001}


def test_deleting_a_topic_drops_its_committed_offsets(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedCluster(data, config=GROUP_BROKER_CONFIG) as c1:
        bs = c1.bootstrap_servers
        create_topic(bs, "t-doomed", PARTITIONS)
        create_topic(bs, "t-kept", PARTITIONS)
        alter_standalone(bs, "g-topics", "t-doomed", {0: 10, 1: 11})
        alter_standalone(bs, "g-topics", "t-kept", {2: 12})
        admin = AdminClient({"bootstrap.servers": bs})
        admin.delete_topics(["t-doomed"])["t-doomed"].result(timeout=30)
        offs = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("g-topics")])["g-topics"].result(timeout=30)
        assert [(tp.topic, tp.partition, tp.offset) for tp in offs.topic_partitions] == [
            ("t-kept", 2, 12)]
    with EmbeddedCluster(data, port=c1.port, config=GROUP_BROKER_CONFIG) as c2:
        bs = c2.bootstrap_servers
        create_topic(bs, "t-doomed", PARTITIONS)  # same name, new topic: no inherited offsets
        assert committed_by_each_client(bs, "g-topics", "t-doomed")["confluent"] == {
            0: -1001, 1: -1001, 2: -1001}
        assert committed_by_each_client(bs, "g-topics", "t-kept")["confluent"] == {
            0: -1001, 1: -1001, 2: 12}
