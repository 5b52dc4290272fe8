"""ReplicaManager over a real LogManager: roles and epochs from metadata, leader appends,
the high watermark over the ISR, acks=all waits, internal (coordinator) appends, ISR changes
through a real controller."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparklog.broker.delayed import Purgatory
from sparklog.broker.metadata_cache import MetadataRecord
from sparklog.broker.replica_manager import ISR_RETRY_MS, ReplicaManager
from sparklog.controller import Controller
from sparklog.protocol.errors import (
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidTopicError,
    KafkaStorageError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordTooLargeError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from sparklog.protocol.records import Record, encode_batch
from sparklog.storage.log_config import LogConfig
from sparklog.storage.log_manager import LogManager
from tests.helpers.broker import ManagedLogs

NODE = 1
TOPIC_ID = bytes(range(16))


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[ManagedLogs]:
    manager = LogManager([str(tmp_path)], LogConfig(), cluster_id="c", node_id=NODE)
    yield ManagedLogs(manager, {
        "compacted": LogConfig(cleanup_policy="compact"),
        "strict": LogConfig(min_insync_replicas=2),
        "small": LogConfig(max_message_bytes=200),
    })
    manager.shutdown()


def lead(rm: ReplicaManager, topic: str, partition: int = 0, *, epoch: int = 0,
         replicas: list[int] | None = None, isr: list[int] | None = None,
         internal: bool = False) -> None:
    replicas = replicas or [NODE]
    rm.apply_partition_state(topic, TOPIC_ID, partition, NODE, epoch, 0, replicas,
                             isr if isr is not None else replicas, internal=internal)


def batch(*values: bytes, key: bytes | None = b"k") -> bytes:
    return encode_batch([Record(key=key, value=v, offset_delta=i) for i, v in enumerate(values)])


def test_leader_appends_and_the_hw_follows_a_lone_replica(logs: ManagedLogs) -> None:
    rm = ReplicaManager(NODE, logs)
    lead(rm, "t", epoch=3)
    p = rm.leader_partition("t", 0)
    assert (p.partition, p.leader_epoch, p.log) == (0, 3, logs.manager.get_log("t", 0))
    assert p.log.latest_epoch == 3  # the new leader's epoch starts at its LEO
    first = rm.append("t", 0, batch(b"a", b"b"), acks=1)
    second = rm.append("t", 0, batch(b"c"), acks=-1)
    assert (first.error, first.base_offset, first.last_offset) == (None, 0, 1)
    assert (second.base_offset, second.last_offset, second.log_start_offset) == (2, 2, 0)
    assert p.log.high_watermark == 3


def test_errors_of_an_append_are_returned(logs: ManagedLogs) -> None:
    rm = ReplicaManager(NODE, logs)
    lead(rm, "strict")
    lead(rm, "__consumer_offsets", internal=True)
    rm.apply_partition_state("followed", TOPIC_ID, 0, 2, 0, 0, [2, NODE], [2, NODE])
    lead(rm, "compacted")
    cases = {
        ("nope", 1): UnknownTopicOrPartitionError,
        ("__consumer_offsets", 1): InvalidTopicError,  # clients may not write it
        ("followed", -1): NotLeaderOrFollowerError,
        ("strict", -1): NotEnoughReplicasError,  # ISR 1 < min.insync.replicas 2
    }
    for (topic, acks), error in cases.items():
        res = rm.append(topic, 0, batch(b"x"), acks=acks)
        assert isinstance(res.error, error), (topic, res.error)
        assert res.base_offset == -1
    assert isinstance(rm.append("compacted", 0, batch(b"x", key=None), acks=1).error,
                      InvalidRecordError)
    # min.insync.replicas applies to acks=all only
    assert rm.append("strict", 0, batch(b"x"), acks=1).error is None


def test_roles_and_epochs_follow_the_metadata(logs: ManagedLogs) -> None:
    rm = ReplicaManager(NODE, logs)
    rm.apply_partition_state("t", TOPIC_ID, 0, 2, 5, 0, [2, NODE], [2, NODE])
    with pytest.raises(NotLeaderOrFollowerError):
        rm.leader_partition("t", 0)
    p = rm.hosted_partition("t", 0, current_leader_epoch=5)
    assert not p.is_leader and p.leader_id == 2
    with pytest.raises(FencedLeaderEpochError):
        rm.hosted_partition("t", 0, current_leader_epoch=4)
    with pytest.raises(UnknownLeaderEpochError):
        rm.hosted_partition("t", 0, current_leader_epoch=6)
    lead(rm, "t", epoch=6, replicas=[2, NODE])
    assert rm.leader_partition("t", 0, 6) is p and p.log.latest_epoch == 6
    with pytest.raises(UnknownTopicOrPartitionError):
        rm.leader_partition("t", 1)


def test_leaving_the_replicas_or_deleting_the_topic_drops_the_logs(logs: ManagedLogs) -> None:
    rm = ReplicaManager(NODE, logs)
    for partition in (0, 1):
        lead(rm, "t", partition)
    lead(rm, "u")
    rm.apply_partition_state("u", TOPIC_ID, 0, 2, 1, 0, [2, 3], [2, 3])
    assert rm.get("u", 0) is None and logs.manager.get_log("u", 0) is None
    rm.remove_topic("t")
    assert rm.partitions() == [] and logs.manager.logs() == {}


def test_the_hw_is_the_smallest_leo_in_the_isr(logs: ManagedLogs) -> None:
    rm = ReplicaManager(NODE, logs)
    lead(rm, "t", replicas=[NODE, 2])
    p = rm.leader_partition("t", 0)
    rm.append("t", 0, batch(b"a", b"b", b"c"), acks=1)
    assert p.log.log_end_offset == 3 and p.log.high_watermark == 0
    rm.record_follower_fetch(p, 2, 2)
    assert p.log.high_watermark == 2
    rm.record_follower_fetch(p, 9, 3)  # not a replica: ignored
    assert p.log.high_watermark == 2
    rm.record_follower_fetch(p, 2, 3)
    assert p.log.high_watermark == 3


def test_acks_all_waits_for_the_isr(logs: ManagedLogs) -> None:
    rm = ReplicaManager(NODE, logs)
    lead(rm, "t", replicas=[NODE, 2])
    p = rm.leader_partition("t", 0)

    async def main() -> tuple[bool, int, bool, int]:
        res = rm.append("t", 0, batch(b"a"), acks=-1)
        purgatory = Purgatory(10)
        # the HW stays below the appended offset until the ISR has it: a parked acks=all
        # request times out
        timed_out = await purgatory.park(None, [p.waiters], 0.02)
        hw_before = p.log.high_watermark
        waiting = asyncio.ensure_future(purgatory.park(None, [p.waiters], 5))
        await asyncio.sleep(0)
        rm.record_follower_fetch(p, 2, res.last_offset + 1)  # wakes the partition's waiters
        return timed_out, hw_before, await waiting, p.log.high_watermark

    assert asyncio.run(main()) == (False, 0, True, 1)


def test_internal_appends_skip_the_client_checks_but_not_the_size_limit(
        logs: ManagedLogs) -> None:
    rm = ReplicaManager(NODE, logs)
    lead(rm, "compacted", internal=True)
    lead(rm, "small", internal=True)
    # the writer sets every key itself: no record is decoded again for the key check
    written = rm.append_internal("compacted", 0, batch(b"a", key=None))
    p = rm.leader_partition("compacted", 0)
    assert (written.last_offset, p.log.high_watermark) == (0, 1)
    with pytest.raises(RecordTooLargeError):
        rm.append_internal("small", 0, batch(b"x" * 300))
    with pytest.raises(UnknownTopicOrPartitionError):
        rm.append_internal("compacted", 3, batch(b"a"))


def test_a_partition_whose_log_cannot_open_answers_kafka_storage_error(tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path)], LogConfig(), cluster_id="c", node_id=NODE)
    logs = ManagedLogs(manager)
    rm = ReplicaManager(NODE, logs)
    lead(rm, "t", 0)
    lead(rm, "t", 1)
    manager.shutdown()
    with open(tmp_path / "t-1" / "partition.metadata", "w") as f:
        f.write("garbage\n")
    manager = LogManager([str(tmp_path)], LogConfig(), cluster_id="c", node_id=NODE)
    try:
        rm = ReplicaManager(NODE, ManagedLogs(manager))
        lead(rm, "t", 0)
        lead(rm, "t", 1)  # offline: no log, no error for the rest of the metadata
        assert rm.append("t", 0, batch(b"a"), acks=1).error is None
        assert isinstance(rm.append("t", 1, batch(b"a"), acks=1).error, KafkaStorageError)
        with pytest.raises(KafkaStorageError, match="t-1 is offline"):
            rm.leader_partition("t", 1)
        rm.remove("t", 1, delete=True)  # the topic's deletion clears it
        with pytest.raises(UnknownTopicOrPartitionError):
            rm.leader_partition("t", 1)
    finally:
        manager.shutdown()


def test_the_isr_shrinks_and_expands_through_the_controller(logs: ManagedLogs,
                                                             tmp_path: Path) -> None:
    ctrl = Controller(str(tmp_path / "metadata"), NODE)
    ctrl.open()
    epochs = {node: ctrl.register_broker(node, "127.0.0.1", 9000 + node) for node in (NODE, 2, 3)}
    now = [0]
    rm = ReplicaManager(NODE, logs, ctrl, replica_lag_time_max_ms=1000, time_ms=lambda: now[0])
    rm.broker_epoch = epochs[NODE]
    info = ctrl.create_topic("t", 1, 3)

    def feed(records: list[MetadataRecord]) -> None:  # what the broker's listener does
        for rec in records:
            if rec["type"] != "partition":
                continue
            pi = ctrl.image.topics["t"].partitions[rec["partition"]]
            rm.apply_partition_state("t", info.topic_id, pi.partition, pi.leader,
                                     pi.leader_epoch, pi.partition_epoch, pi.replicas, pi.isr)

    ctrl.add_listener(feed)
    feed([info.partitions[0].to_record()])
    p = rm.leader_partition("t", 0)
    assert p.isr == [NODE, 2, 3]
    rm.append("t", 0, batch(b"a", b"b"), acks=1)
    now[0] = 500
    rm.record_follower_fetch(p, 2, 2)
    rm.record_follower_fetch(p, 3, 0)
    assert p.log.high_watermark == 0
    now[0] = 1200  # 3 has not caught up since it became a follower (0): it leaves
    rm.maybe_shrink_isr()
    assert (p.isr, p.partition_epoch, p.pending_isr) == ([NODE, 2], 1, None)
    assert ctrl.image.topics["t"].partitions[0].isr == [NODE, 2]
    assert p.log.high_watermark == 2  # the HW no longer waits for 3
    # a caught-up replica the controller refuses (not live) is proposed again after a pause
    ctrl.unregister_broker(3)
    rm.record_follower_fetch(p, 3, 2)
    assert p.isr == [NODE, 2]
    ctrl.register_broker(3, "127.0.0.1", 9003)
    rm.record_follower_fetch(p, 3, 2)
    assert p.isr == [NODE, 2]
    now[0] += ISR_RETRY_MS
    rm.record_follower_fetch(p, 3, 2)
    assert (p.isr, p.partition_epoch) == ([NODE, 2, 3], 2)
    ctrl.close()
