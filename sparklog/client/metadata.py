"""The client's view of the cluster: brokers, controller, topics and partition leaders.

Built from Metadata responses; refreshed when a request fails with NOT_LEADER_OR_FOLLOWER /
UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE (the cache is stale) or when it is older
than ``metadata.max.age.ms``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sparklog.protocol.topic_partition import TopicPartition

__all__ = [
    "BrokerMetadata",
    "PartitionMetadata",
    "TopicMetadata",
    "ClusterMetadata",
]


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    error: int = 0
    leader_epoch: int = -1
    offline_replicas: list[int] = field(default_factory=list)

    @property
    def id(self) -> int:  # confluent-kafka's name
        return self.partition


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: bytes = b"\x00" * 16
    is_internal: bool = False
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    error: int = 0

    @property
    def topic(self) -> str:  # confluent-kafka's name
        return self.name


class ClusterMetadata:
    """Mutable cache, updated in place from each Metadata response."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerMetadata] = {}
        self.controller_id: int = -1
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicMetadata] = {}
        # time.monotonic() of the last update; -inf = never, or invalidated (not 0.0: the
        # monotonic clock counts from boot, so 0.0 is "fresh" on a machine up < max age)
        self.updated_at: float = float("-inf")

    def update(self, resp: Any, *, full: bool) -> dict[str, TopicMetadata]:
        """Apply a MetadataResponse; ``full`` = it listed all topics, so topics it does not
        mention are gone. Returns the topics of this response."""
        self.brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack)
                        for b in resp.brokers}
        self.controller_id = resp.controller_id
        self.cluster_id = resp.cluster_id
        seen: dict[str, TopicMetadata] = {}
        for t in resp.topics:
            parts = {
                p.partition_index: PartitionMetadata(
                    p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes),
                    p.error_code, p.leader_epoch, list(p.offline_replicas))
                for p in t.partitions
            }
            tm = TopicMetadata(t.name, t.topic_id, t.is_internal, parts, t.error_code)
            seen[t.name] = tm
            if t.error_code == 0:
                self.topics[t.name] = tm
            else:
                self.topics.pop(t.name, None)
        if full:
            for name in list(self.topics):
                if name not in seen:
                    del self.topics[name]
        self.updated_at = time.monotonic()
        return seen

    def partition_count(self, topic: str) -> int | None:
        tm = self.topics.get(topic)
        return len(tm.partitions) if tm is not None and tm.partitions else None

    def leader_for(self, tp: TopicPartition) -> int | None:
        tm = self.topics.get(tp.topic)
        if tm is None:
            return None
        pm = tm.partitions.get(tp.partition)
        if pm is None or pm.leader < 0:
            return None
        return pm.leader
