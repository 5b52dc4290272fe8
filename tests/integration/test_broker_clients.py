"""Each third-party client against a real broker: admin, 10 000 keyed messages with acks=all
(+ idempotence), assign+seek consumption, offsets_for_times, kcat -L."""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from tests.helpers.kafka_clients import (
    CLIENTS,
    KCAT,
    ck_consume,
    ck_produce,
    comparable,
    create_topic,
    kcat_consume,
    kp_produce,
    make_messages,
)

N = 10_000
PARTS = 3


@pytest.mark.parametrize("client", list(CLIENTS))
def test_produce_10k_acks_all_then_assign_and_seek(cluster, client):
    bs = cluster.bootstrap_servers
    topic = f"keyed-{client}"
    create_topic(bs, topic, PARTS)
    produce, consume = CLIENTS[client]
    msgs = make_messages(N, PARTS, tag=client)
    produce(bs, topic, msgs)
    got = consume(bs, topic, PARTS, N)
    assert len(got) == N
    if client == "kcat":  # kcat writes its own timestamps and no headers
        assert sorted((m.partition, m.key, m.value) for m in got) == sorted(
            (m.partition, m.key, m.value) for m in msgs)
    else:
        assert comparable(got) == comparable(msgs)
    # offsets are dense per partition, starting at 0
    for p in range(PARTS):
        offs = sorted(m.offset for m in got if m.partition == p)
        assert offs == list(range(len(offs)))
    # seek into the middle: everything from offset 1000 on, nothing before
    tail = consume(bs, topic, PARTS, N - PARTS * 1000, start=1000)
    assert len(tail) == N - PARTS * 1000 and min(m.offset for m in tail) == 1000


def test_idempotent_producers_got_ids(cluster):
    """Every idempotent client's batches carry a producer id the broker handed out."""
    from sparklog.protocol.batch_header import iter_batch_views

    topic = "keyed-kafka-python"
    p = cluster.broker.replica_manager.get(topic, 0)
    if p is None:
        pytest.skip("depends on test_produce_10k_acks_all_then_assign_and_seek[kafka-python]")
    data = p.log.read(0, 1 << 20).read_bytes()
    pids = {b.producer_id for b in iter_batch_views(data)}
    assert pids and all(pid >= 0 for pid in pids)


def _expected_offset(msgs, partition, target_ts):
    offs = [i for i, m in enumerate(m for m in msgs if m.partition == partition)
            if m.timestamp >= target_ts]
    return offs[0] if offs else None


@pytest.fixture(scope="module")
def timed_topic(cluster):
    bs = cluster.bootstrap_servers
    topic = "timed"
    create_topic(bs, topic, 2)
    t0 = int(time.time() * 1000) - 3_600_000
    msgs = make_messages(2000, 2, t0=t0, tag="timed")
    ck_produce(bs, topic, msgs)
    return topic, msgs, t0


def test_offsets_for_times_confluent(cluster, timed_topic):
    from confluent_kafka import Consumer, TopicPartition

    topic, msgs, t0 = timed_topic
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "oft"})
    try:
        target = t0 + 1001
        res = c.offsets_for_times([TopicPartition(topic, p, target) for p in range(2)], 10)
        assert [tp.offset for tp in res] == [_expected_offset(msgs, p, target) for p in range(2)]
        # beyond the last timestamp: no offset (-1, librdkafka reports OFFSET_END)
        res = c.offsets_for_times([TopicPartition(topic, 0, t0 + 10_000_000)], 10)
        assert res[0].offset == -1
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), 10)
        assert (lo, hi) == (0, 1000)
    finally:
        c.close()


def test_offsets_for_times_kafka_python(cluster, timed_topic):
    from kafka import KafkaConsumer, TopicPartition

    topic, msgs, t0 = timed_topic
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        target = t0 + 501
        res = c.offsets_for_times({TopicPartition(topic, p): target for p in range(2)})
        assert {tp.partition: r.offset for tp, r in res.items()} == {
            p: _expected_offset(msgs, p, target) for p in range(2)}
        ends = c.end_offsets([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert sorted(ends.values()) == [1000, 1000]
        begins = c.beginning_offsets([TopicPartition(topic, 0)])
        assert list(begins.values()) == [0]
    finally:
        c.close()


def test_offsets_for_times_aiokafka(cluster, timed_topic):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, msgs, t0 = timed_topic

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
        await c.start()
        try:
            target = t0 + 1500
            res = await c.offsets_for_times({TopicPartition(topic, p): target for p in range(2)})
            assert {tp.partition: r.offset for tp, r in res.items()} == {
                p: _expected_offset(msgs, p, target) for p in range(2)}
            ends = await c.end_offsets([TopicPartition(topic, 1)])
            assert list(ends.values()) == [1000]
        finally:
            await c.stop()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_offsets_for_times_kcat(cluster, timed_topic):
    topic, msgs, t0 = timed_topic
    target = t0 + 777
    got = kcat_consume(cluster.bootstrap_servers, topic, 2, 0, offset_spec=f"s@{target}")
    for p in range(2):
        first = min(m.offset for m in got if m.partition == p)
        assert first == _expected_offset(msgs, p, target)


def test_kcat_metadata_lists_topic(cluster):
    create_topic(cluster.bootstrap_servers, "listed", 4)
    out = subprocess.run([KCAT, "-b", cluster.bootstrap_servers, "-L", "-t", "listed"],
                         check=True, capture_output=True, timeout=30).stdout.decode()
    assert 'topic "listed" with 4 partitions' in out
    for p in range(4):
        assert f"partition {p}, leader 1, replicas: 1, isrs: 1" in out
    full = subprocess.run([KCAT, "-b", cluster.bootstrap_servers, "-L"], check=True,
                          capture_output=True, timeout=30).stdout.decode()
    assert 'topic "listed"' in full and "broker 1 at 127.0.0.1" in full


def test_admin_confluent(cluster):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    a = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    fs = a.create_topics([NewTopic("adm-ck", 2, 1, config={"retention.ms": "123456",
                                                          "cleanup.policy": "compact"})])
    fs["adm-ck"].result(20)
    with pytest.raises(Exception) as exc:
        a.create_topics([NewTopic("adm-ck", 2, 1)])["adm-ck"].result(20)
    assert "TOPIC_ALREADY_EXISTS" in str(exc.value)
    with pytest.raises(Exception) as exc:
        a.create_topics([NewTopic("adm-ck-rf", 1, 3)])["adm-ck-rf"].result(20)
    assert "INVALID_REPLICATION_FACTOR" in str(exc.value)
    with pytest.raises(Exception) as exc:
        a.create_topics([NewTopic("bad name!", 1, 1)])["bad name!"].result(20)
    assert "TOPIC_EXCEPTION" in str(exc.value)  # INVALID_TOPIC_EXCEPTION (17)
    md = a.list_topics(timeout=10)
    assert len(md.topics["adm-ck"].partitions) == 2
    res = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "adm-ck")])
    cfg = list(res.values())[0].result(20)
    assert cfg["retention.ms"].value == "123456"
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["segment.bytes"].value == "1073741824" and cfg["segment.bytes"].is_default
    a.create_partitions([NewPartitions("adm-ck", 5)])["adm-ck"].result(20)
    assert len(a.list_topics(timeout=10).topics["adm-ck"].partitions) == 5
    a.delete_topics(["adm-ck"])["adm-ck"].result(20)
    assert "adm-ck" not in a.list_topics(timeout=10).topics
    assert cluster.broker.replica_manager.get("adm-ck", 0) is None


def test_admin_kafka_python(cluster):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    a = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        a.create_topics([NewTopic("adm-kp", 3, 1, topic_configs={"retention.bytes": "1000000"})])
        desc = a.describe_topics(["adm-kp"])
        assert len(desc[0]["partitions"]) == 3
        cfgs = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "adm-kp")])
        text = repr(cfgs)
        assert "retention.bytes" in text and "1000000" in text
        a.delete_topics(["adm-kp"])
        assert "adm-kp" not in a.list_topics()
    finally:
        a.close()


def test_admin_aiokafka(cluster):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def run():
        a = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await a.start()
        try:
            await a.create_topics([NewTopic("adm-ak", 2, 1)])
            assert "adm-ak" in await a.list_topics()
            desc = await a.describe_topics(["adm-ak"])
            assert len(desc[0]["partitions"]) == 2
            await a.delete_topics(["adm-ak"])
            assert "adm-ak" not in await a.list_topics()
        finally:
            await a.close()

    asyncio.run(asyncio.wait_for(run(), 60))



def test_admin_confluent_cluster_records_offsets(cluster):
    """describe_cluster (DescribeCluster), delete_records (DeleteRecords), list_offsets with
    earliest/latest/max-timestamp (ListOffsets), incremental_alter_configs
    (IncrementalAlterConfigs)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        OffsetSpec,
    )

    bs = cluster.bootstrap_servers
    a = AdminClient({"bootstrap.servers": bs})
    a.create_topics([NewTopic("adm-rec", 1, 1)])["adm-rec"].result(20)
    t0 = int(time.time() * 1000) - 10_000
    msgs = make_messages(100, 1, t0=t0, tag="rec")
    msgs[40] = msgs[40]._replace(timestamp=t0 + 5000)  # the max timestamp, in the middle
    ck_produce(bs, "adm-rec", msgs)

    desc = a.describe_cluster().result(20)
    assert [n.id for n in desc.nodes] == [1] and desc.controller.id == 1
    assert desc.cluster_id == cluster.broker.metadata.cluster_id

    tp = TopicPartition("adm-rec", 0)
    res = {k: f.result(20) for k, f in a.list_offsets({tp: OffsetSpec.max_timestamp()}).items()}
    assert res[tp].offset == 40 and res[tp].timestamp == t0 + 5000
    res = {k: f.result(20) for k, f in a.list_offsets({tp: OffsetSpec.latest()}).items()}
    assert res[tp].offset == 100

    out = a.delete_records([TopicPartition("adm-rec", 0, 30)])
    assert list(out.values())[0].result(20).low_watermark == 30
    res = {k: f.result(20) for k, f in a.list_offsets({tp: OffsetSpec.earliest()}).items()}
    assert res[tp].offset == 30
    got = ck_consume(bs, "adm-rec", 1, 70, start=0)  # reset to earliest -> 30
    assert min(m.offset for m in got) == 30 and len(got) == 70

    def alter(*entries: ConfigEntry) -> None:
        res = a.incremental_alter_configs([ConfigResource(
            ConfigResource.Type.TOPIC, "adm-rec", incremental_configs=list(entries))])
        list(res.values())[0].result(20)

    def described() -> dict:
        return list(a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "adm-rec")])
                    .values())[0].result(20)

    alter(ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("cleanup.policy", "compact",
                      incremental_operation=AlterConfigOpType.APPEND))
    cfg = described()
    assert cfg["retention.ms"].value == "3600000" and not cfg["retention.ms"].is_default
    assert cfg["cleanup.policy"].value == "delete,compact"
    # the other keys are left as they are: only cleanup.policy changes
    alter(ConfigEntry("cleanup.policy", "delete",
                      incremental_operation=AlterConfigOpType.SUBTRACT))
    assert cluster.broker.metadata.topic("adm-rec").configs == {
        "retention.ms": "3600000", "cleanup.policy": "compact"}
    alter(ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE))
    cfg = described()
    assert cfg["cleanup.policy"].value == "delete" and cfg["cleanup.policy"].is_default
    plog = cluster.broker.replica_manager.get("adm-rec", 0).log
    assert plog.config.retention_ms == 3600000


def test_admin_kafka_python_alter_configs_and_delete_records(cluster):
    """kafka-python's alter_configs, which sends IncrementalAlterConfigs when the broker
    serves it: SET then APPEND edit one key, keeping the others."""
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    a = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        a.create_topics([NewTopic("adm-kp2", 1, 1)])
        kp_produce(cluster.bootstrap_servers, "adm-kp2", make_messages(50, 1, tag="kp2"))
        a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "adm-kp2",
                                        configs={"cleanup.policy": "compact",
                                                 "retention.bytes": "100000"})],
                        incremental=True)
        a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "adm-kp2",
                                        configs={"cleanup.policy": ("APPEND", "delete")})],
                        incremental=True)
        assert cluster.broker.metadata.topic("adm-kp2").configs == {
            "cleanup.policy": "compact,delete", "retention.bytes": "100000"}
        res = a.delete_records({TopicPartition("adm-kp2", 0): 20})
        assert list(res.values())[0]["low_watermark"] == 20
    finally:
        a.close()


def test_versions_used_by_real_clients(cluster):
    """Runs after the tests above: every version range edge we advertise for the core APIs
    was exercised by at least one real client (the flexible top and the old bottom)."""
    used = cluster.broker.dispatcher.usage
    print(sorted(used))
    expect = {
        (18, 0), (18, 3),            # ApiVersions: aiokafka v0, librdkafka v3
        (3, 5), (3, 12),             # Metadata: aiokafka v5, confluent/kafka-python v12
        (0, 7), (0, 9),              # Produce: aiokafka/kcat v7, kafka-python v9 (flexible)
        (1, 11), (1, 12), (1, 13),   # Fetch: aiokafka/kcat v11, kafka-python v12, confluent v13
        (2, 3),                      # ListOffsets: aiokafka v3
        (22, 0), (22, 4),            # InitProducerId: aiokafka v0, others v4
    }
    missing = expect - set(used)
    assert not missing, f"not exercised: {sorted(missing)}; used: {sorted(used)}"
