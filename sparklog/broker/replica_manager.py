"""Partitions this broker hosts, their role (leader/follower), epochs and high watermarks.

Single node today: every partition's only replica is here, so it is the leader and the
high watermark follows the log end offset on each append. The model is nevertheless the one
replication needs: a partition has a role and a leader epoch taken from the controller's
metadata; only a leader accepts produce and consumer fetches; followers (replica id >= 0
in Fetch) are tracked by log end offset, and the HW is the smallest LEO over the ISR.
Clients that send a leader epoch are checked against ours (FENCED_LEADER_EPOCH when theirs
is older, UNKNOWN_LEADER_EPOCH when newer), exactly as Kafka does. Internal topics refuse
client produce; the broker's own coordinators write them with ``append_internal``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from sparklog.broker.delayed import Waiters
from sparklog.protocol.errors import (
    FencedLeaderEpochError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordTooLargeError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from sparklog.storage.partition_log import AppendInfo, PartitionLog

log = logging.getLogger(__name__)

__all__ = ["AppendResult", "Logs", "Partition", "ReplicaManager"]

Records = bytes | bytearray | memoryview

LEADER = "leader"
FOLLOWER = "follower"


@dataclass(slots=True)
class AppendResult:
    error: KafkaError | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1


class Logs(Protocol):
    """Where hosted replicas' logs come from (the broker: it knows each topic's config)."""

    def open_log(self, topic: str, partition: int, topic_id: bytes) -> PartitionLog: ...

    def close_log(self, topic: str, partition: int, *, delete: bool) -> None: ...


class Partition:
    """One hosted replica: its log, role, epoch, and who waits for it to grow."""

    __slots__ = ("topic", "partition", "topic_id", "log", "role", "leader_id", "leader_epoch",
                 "replicas", "isr", "follower_leo", "waiters", "internal")

    def __init__(self, topic: str, partition: int, topic_id: bytes, plog: PartitionLog, *,
                 internal: bool = False) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = plog
        self.role = LEADER
        self.leader_id = -1
        self.leader_epoch = 0
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.follower_leo: dict[int, int] = {}
        self.waiters = Waiters()
        self.internal = internal

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition}, {self.role}, epoch={self.leader_epoch})"

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    def check_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic}-{self.partition}: epoch {current_leader_epoch} is older than {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.topic}-{self.partition}: epoch {current_leader_epoch} is newer than {self.leader_epoch}"
            )

    def maybe_advance_hw(self) -> None:
        """HW = smallest LEO over the ISR (only this replica while single node)."""
        leo = self.log.log_end_offset
        hw = leo
        for replica in self.isr:
            if replica in self.follower_leo:
                hw = min(hw, self.follower_leo[replica])
        if hw > self.log.high_watermark:
            self.log.update_high_watermark(hw)


class ReplicaManager:
    """The partitions this broker hosts, keyed by (topic, partition)."""

    def __init__(self, node_id: int, logs: Logs) -> None:
        self.node_id = node_id
        self._logs = logs
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._by_topic: dict[str, dict[int, Partition]] = {}
        # partitions whose log could not be opened -> why (clients get KAFKA_STORAGE_ERROR)
        self._offline: dict[tuple[str, int], str] = {}

    # -- lookups ------------------------------------------------------------------------

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        """The partition if this broker leads it; typed Kafka errors otherwise."""
        p = self._partitions.get((topic, partition))
        if p is None:
            raise self._not_hosted(topic, partition)
        if not p.is_leader:
            raise NotLeaderOrFollowerError(f"{topic}-{partition}: this broker is not the leader")
        p.check_epoch(current_leader_epoch)
        return p

    def hosted_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        p = self._partitions.get((topic, partition))
        if p is None:
            raise self._not_hosted(topic, partition)
        p.check_epoch(current_leader_epoch)
        return p

    def _not_hosted(self, topic: str, partition: int) -> KafkaError:
        offline = self._offline.get((topic, partition))
        if offline is not None:
            return KafkaStorageError(f"{topic}-{partition} is offline: {offline}")
        return UnknownTopicOrPartitionError(f"{topic}-{partition} is not hosted here")

    # -- metadata -----------------------------------------------------------------------

    def apply_partition_state(self, topic: str, topic_id: bytes, partition: int, leader: int,
                              leader_epoch: int, replicas: list[int], isr: list[int],
                              *, internal: bool = False) -> Partition | None:
        """Become leader or follower for a partition as the metadata says (creating its log)."""
        if self.node_id not in replicas:
            self.remove(topic, partition, delete=True)
            return None
        key = (topic, partition)
        p = self._partitions.get(key)
        if p is None:
            try:
                plog = self._logs.open_log(topic, partition, topic_id)
            except KafkaStorageError as exc:
                # damage storage could not repair: this partition stays offline, the rest serve
                log.error("%s-%d is offline: %s", topic, partition, exc)
                self._offline[key] = str(exc)
                return None
            self._offline.pop(key, None)
            p = Partition(topic, partition, topic_id, plog, internal=internal)
            self._partitions[key] = p
            self._by_topic.setdefault(topic, {})[partition] = p
        new_role = LEADER if leader == self.node_id else FOLLOWER
        epoch_changed = leader_epoch != p.leader_epoch or new_role != p.role
        p.role, p.leader_id, p.replicas, p.isr = new_role, leader, list(replicas), list(isr)
        p.leader_epoch = leader_epoch
        if new_role == LEADER:
            p.follower_leo = {r: p.follower_leo.get(r, -1) for r in replicas if r != self.node_id}
            if epoch_changed and leader_epoch > p.log.latest_epoch:
                # the new leader's epoch starts at its LEO (KIP-101), before any write
                p.log.assign_epoch_start_offset(leader_epoch, p.log.log_end_offset)
            p.maybe_advance_hw()
        # anyone long-polling on the old role/epoch must re-check
        p.waiters.wake()
        return p

    def remove(self, topic: str, partition: int, *, delete: bool) -> None:
        p = self._partitions.pop((topic, partition), None)
        if self._offline.pop((topic, partition), None) is not None:
            self._logs.close_log(topic, partition, delete=delete)
        if p is None:
            return
        parts = self._by_topic.get(topic)
        if parts is not None:
            parts.pop(partition, None)
            if not parts:
                del self._by_topic[topic]
        p.waiters.wake()
        self._logs.close_log(topic, partition, delete=delete)

    def remove_topic(self, topic: str) -> None:
        for partition in list(self._by_topic.get(topic, {})):
            self.remove(topic, partition, delete=True)

    # -- produce ------------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: Records, *, acks: int) -> AppendResult:
        """Append one client produce entry as leader; errors are returned, never raised."""
        try:
            p = self._partitions.get((topic, partition))
            if p is None:
                raise self._not_hosted(topic, partition)
            if p.internal:
                raise InvalidTopicError(f"cannot append to internal topic {topic}")
            if not p.is_leader:
                raise NotLeaderOrFollowerError(f"{topic}-{partition}: this broker is not the leader")
            if acks == -1:
                # the log's config tracks the topic's overrides (AlterConfigs updates it)
                min_isr = p.log.config.min_insync_replicas
                if len(p.isr) < min_isr:
                    raise NotEnoughReplicasError(
                        f"{topic}-{partition}: ISR size {len(p.isr)} < min.insync.replicas {min_isr}"
                    )
            info = p.log.append_as_leader(records, p.leader_epoch)
            p.maybe_advance_hw()
            p.waiters.wake()
            return AppendResult(None, info.first_offset, info.last_offset, info.log_append_time,
                                p.log.log_start_offset)
        except KafkaError as exc:
            return AppendResult(exc)

    def append_internal(self, topic: str, partition: int, batch: Records) -> AppendInfo:
        """Append a batch this broker built (a coordinator's records) as leader; raises.

        No client checks: the writer sets keys and timestamps itself, so the log does not
        decode the batch again. Only ``max.message.bytes`` still applies, as it does in
        Kafka."""
        p = self.leader_partition(topic, partition)
        limit = p.log.config.max_message_bytes
        if len(batch) > limit:
            raise RecordTooLargeError(
                f"{topic}-{partition}: batch of {len(batch)} bytes exceeds max.message.bytes {limit}")
        info = p.log.append_as_leader(batch, p.leader_epoch, origin="coordinator")
        p.maybe_advance_hw()
        p.waiters.wake()
        return info

    # -- follower fetch bookkeeping -----------------------------------------------------

    def record_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        if replica_id in p.follower_leo:
            p.follower_leo[replica_id] = fetch_offset
            p.maybe_advance_hw()
            p.waiters.wake()
