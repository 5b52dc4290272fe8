"""Controller: topic validation, durable metadata log, torn-tail recovery, AlterPartition."""

from __future__ import annotations

import pytest

from sparklog.controller import Controller
from sparklog.protocol.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    StaleBrokerEpochError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)


def _open(path) -> Controller:
    c = Controller(str(path), 1)
    c.open()
    c.register_broker(1, "127.0.0.1", 9092)
    return c


def test_create_delete_survive_reopen(tmp_path):
    c = _open(tmp_path)
    t = c.create_topic("orders", 3, 1, {"retention.ms": "1000"})
    assert sorted(t.partitions) == [0, 1, 2]
    assert t.partitions[0].leader == 1 and t.topic_id != bytes(16)
    c.create_topic("gone", 1, 1)
    c.delete_topic("gone")
    c.create_partitions("orders", 5)
    c.set_topic_configs("orders", {"cleanup.policy": "compact"})
    cluster_id = c.image.cluster_id
    c.close()

    c2 = _open(tmp_path)
    assert c2.image.cluster_id == cluster_id
    assert set(c2.image.topics) == {"orders"}
    t2 = c2.image.topics.get("orders")
    assert t2.topic_id == t.topic_id
    assert sorted(t2.partitions) == [0, 1, 2, 3, 4]
    assert t2.configs == {"cleanup.policy": "compact"}
    assert c2.image.topics_by_id.get(t.topic_id) is t2
    c2.close()


def test_dynamic_broker_configs_survive_reopen_and_snapshot(tmp_path):
    c = _open(tmp_path)
    c.set_broker_configs("", {"log.retention.ms": "1000"})
    c.set_broker_configs("1", {"log.segment.bytes": "2000", "message.max.bytes": "3000"})
    c.set_broker_configs("1", {"log.segment.bytes": "4000"})  # the whole map is replaced
    c.close()
    c2 = _open(tmp_path)
    assert c2.image.broker_configs == {"": {"log.retention.ms": "1000"},
                                       "1": {"log.segment.bytes": "4000"}}
    c2.set_broker_configs("", {})  # empty: the entity has none left
    assert {"type": "broker_config", "entity": "1", "configs": {"log.segment.bytes": "4000"}} \
        in c2.image.records()
    assert "" not in c2.image.broker_configs
    c2.close()


def test_validation_errors(tmp_path):
    c = _open(tmp_path)
    c.create_topic("t", 1, 1)
    with pytest.raises(TopicAlreadyExistsError):
        c.create_topic("t", 1, 1)
    c.create_topic("a.b", 1, 1)
    with pytest.raises(InvalidTopicError):
        c.create_topic("a_b", 1, 1)  # collides with a.b
    with pytest.raises(InvalidReplicationFactorError):
        c.create_topic("rf3", 1, 3)
    with pytest.raises(InvalidPartitionsError):
        c.create_topic("p0", 0, 1)
    with pytest.raises(InvalidPartitionsError):
        c.create_partitions("t", 1)
    with pytest.raises(InvalidPartitionsError):
        c.create_topic("huge", 2**31 - 1, 1)  # a flipped bit must not build 2G records
    with pytest.raises(InvalidPartitionsError):
        c.create_partitions("t", 2**28)
    with pytest.raises(UnknownTopicOrPartitionError):
        c.delete_topic("nope")
    assert c.create_topic("v", 2, 1, validate_only=True).name == "v"
    assert c.image.topics.get("v") is None
    c.close()


def test_torn_tail_is_dropped(tmp_path):
    c = _open(tmp_path)
    c.create_topic("keep", 1, 1)
    c.close()
    log_path = tmp_path / "metadata.log"
    good = log_path.read_bytes()
    log_path.write_bytes(good + b'deadbeef {"type":"topic","name":"torn"')  # torn write
    c2 = _open(tmp_path)
    assert set(c2.image.topics) == {"keep"}
    c2.create_topic("after", 1, 1)
    c2.close()
    c3 = _open(tmp_path)
    assert set(c3.image.topics) == {"keep", "after"}
    c3.close()


def test_leader_change_bumps_epoch(tmp_path):
    c = _open(tmp_path)
    c.create_topic("t", 1, 1)
    p = c.change_leader("t", 0, 1)
    assert p.leader_epoch == 1 and p.partition_epoch == 1
    c.close()
    c = _open(tmp_path)
    assert c.image.topics["t"].partitions[0].leader_epoch == 1
    c.close()


def test_alter_partition_validates_and_commits_the_next_partition_epoch(tmp_path):
    c = _open(tmp_path)
    for node in (2, 3):
        c.register_broker(node, "127.0.0.1", 9092 + node)
    c.create_topic("t", 1, 3)
    published = []
    c.add_listener(published.extend)
    epochs = {n: b.epoch for n, b in c.image.brokers.items()}
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.replicas, p.leader_epoch, p.partition_epoch) == (1, [1, 2, 3], 0, 0)
    refused = [
        (1, 1, 0, [1, 2], FencedLeaderEpochError),  # stale (or future) leader epoch
        (2, 0, 0, [1, 2], InvalidRequestError),  # not the leader
        (1, 0, 5, [1, 2], InvalidUpdateVersionError),  # stale partition epoch
        (1, 0, 0, [2, 3], InvalidRequestError),  # the ISR must hold the leader
        (1, 0, 0, [1, 4], IneligibleReplicaError),  # not a replica
    ]
    for node, leader_epoch, partition_epoch, isr, error in refused:
        with pytest.raises(error):
            c.alter_partition(node, epochs[node], "t", 0, leader_epoch, partition_epoch, isr)
    with pytest.raises(StaleBrokerEpochError):  # an earlier registration of the leader
        c.alter_partition(1, epochs[1] - 1, "t", 0, 0, 0, [1, 2])
    with pytest.raises(UnknownTopicOrPartitionError):
        c.alter_partition(1, epochs[1], "t", 1, 0, 0, [1])
    assert published == []
    p = c.alter_partition(1, epochs[1], "t", 0, 0, 0, [1, 3])
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ([1, 3], 1, 0, 1)
    assert published == [p.to_record()]
    c.unregister_broker(2)
    with pytest.raises(IneligibleReplicaError):  # not live
        c.alter_partition(1, epochs[1], "t", 0, 0, 1, [1, 2, 3])
    c.close()
    c = _open(tmp_path)  # durable
    assert c.image.topics["t"].partitions[0].isr == [1, 3]
    c.close()
