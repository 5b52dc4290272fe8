"""Partition reassignment in the controller (KIP-455's states): start with adding/removing
replicas, completion once every target replica is in the ISR (a leader being removed hands
over), cancel, replace, errors; the broker's cache follows the records."""

from __future__ import annotations

from sparklog.broker.metadata_cache import MetadataCache
from sparklog.controller import Controller
from sparklog.protocol.errors import ErrorCode


def _cluster(tmp_path, brokers=(1, 2, 3, 4)):
    c = Controller(str(tmp_path), 0, embedded=False)
    c.open()
    cache = MetadataCache()
    cache.load(c.metadata_records())
    c.add_listener(cache.apply)
    for n in brokers:
        c.register_broker(n, "127.0.0.1", 9000 + n)
    return c, cache


def _grow_isr(c: Controller, topic: str, partition: int, isr: list[int]) -> None:
    """What the leader's AlterPartition commits when followers caught up."""
    p = c.image.topics[topic].partitions[partition]
    c._commit([{**p.to_record(), "isr": isr, "partition_epoch": p.partition_epoch + 1}])


def test_move_completes_when_the_targets_are_in_sync(tmp_path):
    c, cache = _cluster(tmp_path)
    c.create_topic("t", 1, 2)  # [1, 2], leader 1
    assert c.alter_partition_reassignments({("t", 0): [3, 2]}) == {("t", 0): None}
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.leader) \
        == ([3, 2, 1], [3], [1], [1, 2], 1)
    assert [q.partition for q in c.image.reassigning()] == [0]
    assert c.image.reassigning({"other": [0]}) == []
    _grow_isr(c, "t", 0, [1, 2, 3])  # 3 caught up: the reassignment completes by itself
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([3, 2], [], [])
    # the leader was removed: the first target replica in the ISR leads, a new epoch
    assert (p.isr, p.leader, p.leader_epoch) == ([2, 3], 3, 1)
    assert cache.topic("t").partitions[0] == p
    assert c.image.reassigning() == []
    c.close()
    c2 = Controller(str(tmp_path), 0, embedded=False)  # durable, the new fields included
    c2.open()
    assert c2.image.topics["t"].partitions[0] == p
    c2.close()


def test_reorder_or_shrink_within_the_isr_completes_at_once(tmp_path):
    c, _ = _cluster(tmp_path)
    c.create_topic("t", 1, 3)  # [1, 2, 3]
    c.alter_partition_reassignments({("t", 0): [2, 1]})
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ([2, 1], [1, 2], 1, [])
    c.close()


def test_cancel_and_replace(tmp_path):
    c, _ = _cluster(tmp_path)
    c.create_topic("t", 2, 1)  # p0 [1], p1 [2]
    c.alter_partition_reassignments({("t", 0): [3]})
    c.alter_partition_reassignments({("t", 0): [4]})  # replaces: starts over from [1]
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([4, 1], [4], [1])
    assert c.alter_partition_reassignments({("t", 0): None}) == {("t", 0): None}
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) \
        == ([1], [1], 1, [], [])
    res = c.alter_partition_reassignments({("t", 5): [1], ("t", 0): [9], ("t", 1): [2],
                                           ("nope", 0): [1]})
    assert res[("t", 1)] is None  # [2] -> [2]: nothing to do, done at once
    assert res[("t", 5)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert res[("t", 0)].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert res[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert c.alter_partition_reassignments({("t", 1): None})[("t", 1)].error_code \
        == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert c.alter_partition_reassignments({("t", 1): [2, 2]})[("t", 1)].error_code \
        == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    c.close()
