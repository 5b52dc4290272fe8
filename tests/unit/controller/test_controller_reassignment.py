"""Partition reassignment in the controller (KIP-455's states): start with adding/removing
replicas, completion once every target replica is in the ISR (a leader being removed hands
over), cancel, replace, errors; the broker's cache follows the records. Replacing lost
brokers (``broker.replacement.timeout.ms``): a broker fenced longer than the timeout has its
replicas reassigned to live brokers outside the replica set, spread over them, the lost one
kept until the new ones are in the ISR; nothing moves without a live candidate (logged
once); the fencing time survives a controller restart."""

from __future__ import annotations

import logging
import time

from sparklog.broker.metadata_cache import MetadataCache, MetadataImage
from sparklog.controller import Controller
from sparklog.protocol.errors import ErrorCode

TIMEOUT_MS = 5000


def _controller(tmp_path) -> Controller:
    c = Controller(str(tmp_path), 0, embedded=False, replacement_timeout_ms=TIMEOUT_MS)
    c.open()
    return c


def _cluster(tmp_path, brokers=(1, 2, 3, 4)):
    c = _controller(tmp_path)
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


# -- replacing lost brokers -------------------------------------------------------------

def _catch_up(c: Controller) -> None:
    """What the leaders' AlterPartition commits once every adding replica caught up."""
    for topic in c.image.topics.values():
        for p in list(topic.partitions.values()):
            if p.adding_replicas:
                _grow_isr(c, p.topic, p.partition, p.isr + p.adding_replicas)


def _now_ms() -> int:
    return int(time.time() * 1000)


def test_lost_broker_replicas_move_to_live_brokers_after_the_timeout(tmp_path):
    c, cache = _cluster(tmp_path, brokers=(1, 2, 3))
    c.create_topic("t", 6, 3)  # every partition on 1, 2, 3
    c.fence_broker(2, "session expired")
    fenced_at = c.image.fenced_since[2]
    assert abs(fenced_at - _now_ms()) < 5000
    assert c.replace_lost_brokers(fenced_at + TIMEOUT_MS - 1) == 0  # not yet
    c.register_broker(4, "127.0.0.1", 9004)
    c.register_broker(5, "127.0.0.1", 9005)
    assert c.replace_lost_brokers(fenced_at + TIMEOUT_MS) == 6
    parts = c.image.topics["t"].partitions.values()
    # the lost broker stays a replica until its replacement is in the ISR
    assert all(p.removing_replicas == [2] and 2 in p.replicas for p in parts)
    added = [p.adding_replicas[0] for p in parts]
    assert sorted(added) == [4, 4, 4, 5, 5, 5]  # spread over the live candidates
    assert c.replace_lost_brokers(fenced_at + TIMEOUT_MS + 1) == 0  # already moving
    _catch_up(c)
    for p in c.image.topics["t"].partitions.values():
        assert 2 not in p.replicas and len(p.replicas) == 3 and sorted(p.isr) == sorted(p.replicas)
        assert (p.adding_replicas, p.removing_replicas) == ([], [])
        assert cache.topic("t").partitions[p.partition] == p
    c.close()


def test_no_live_candidate_leaves_the_partition_and_logs_once(tmp_path, caplog):
    c, _ = _cluster(tmp_path, brokers=(1, 2, 3))
    c.create_topic("t", 1, 3)
    c.fence_broker(3, "session expired")
    later = c.image.fenced_since[3] + TIMEOUT_MS
    with caplog.at_level(logging.WARNING, logger="sparklog.controller.controller"):
        assert c.replace_lost_brokers(later) == 0
        assert c.replace_lost_brokers(later + 1000) == 0
    assert sum("no live broker outside them" in r.getMessage() for r in caplog.records) == 1
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.adding_replicas) == ([1, 2, 3], [])
    c.register_broker(4, "127.0.0.1", 9004)  # a replacement broker arrives: it is used
    assert c.replace_lost_brokers(later + 2000) == 1
    assert c.image.topics["t"].partitions[0].adding_replicas == [4]
    c.close()


def test_a_returning_broker_is_not_replaced(tmp_path):
    c, _ = _cluster(tmp_path, brokers=(1, 2, 3))
    c.create_topic("t", 1, 3)
    c.fence_broker(1, "session expired")
    fenced_at = c.image.fenced_since[1]
    c.register_broker(4, "127.0.0.1", 9004)
    c.heartbeat(1, c.image.brokers[1].epoch, time.monotonic())  # back before the timeout
    assert 1 not in c.image.fenced_since
    assert c.replace_lost_brokers(fenced_at + 10 * TIMEOUT_MS) == 0
    c.close()


def test_the_fencing_time_survives_a_controller_restart(tmp_path):
    c, _ = _cluster(tmp_path)
    c.create_topic("t", 1, 3)  # [1, 2, 3]
    c.fence_broker(3, "session expired")
    fenced_at = c.image.fenced_since[3]
    c.close()
    c2 = _controller(tmp_path)
    assert c2.image.fenced_since == {3: fenced_at}
    # the count goes on from the recorded time, not from the restart
    assert c2.replace_lost_brokers(fenced_at + TIMEOUT_MS) == 1
    assert c2.image.topics["t"].partitions[0].adding_replicas == [4]
    c2.close()
    snapshot = MetadataImage()  # the image's snapshot (the metadata stream's start) keeps it
    for rec in c2.image.records():
        snapshot.apply(rec)
    assert snapshot.fenced_since == {3: fenced_at}


def test_fence_records_without_a_time_count_from_the_controller_start(tmp_path):
    c, _ = _cluster(tmp_path)
    c.create_topic("t", 1, 3)
    c._commit([{"type": "fence_broker", "node_id": 3}])  # as written before the field
    c.close()
    c2 = _controller(tmp_path)
    assert c2.image.fenced_since == {3: None}
    start = _now_ms()
    assert c2.replace_lost_brokers(start - 1000) == 0
    assert c2.replace_lost_brokers(start + TIMEOUT_MS + 1000) == 1
    c2.close()
