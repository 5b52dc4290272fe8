"""The broker's local metadata cache: the cluster metadata the broker and its handlers read.

The controller owns metadata changes; it publishes each committed change as records (the
record types ``sparklog.controller.metadata`` documents) through the ``ControllerChannel``.
The broker loads the controller's current records once when it starts and then applies
every published batch, in order, to this cache; handlers read topics, partitions, configs,
ids, live brokers and the cluster id from here and never ask the controller. So a broker
needs nothing but records to know the cluster, which is what a broker in another process
than the controller gets over RPC.

``MetadataImage`` (records applied in order) is the same for the controller, which rebuilds
it from its durable log, and for this cache. Which brokers are live is part of it: the
controller writes ``unfence_broker`` / ``fence_broker`` records (Kafka's
Unfence/FenceBrokerRecord) as brokers register, heartbeat, miss their session or shut down.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["BrokerInfo", "MetadataCache", "MetadataImage", "MetadataRecord", "PartitionInfo",
           "TopicInfo", "fence_record", "unfence_record"]

MetadataRecord = dict[str, Any]
"""One metadata change, JSON-shaped: ``{"type": ..., ...}``."""


def unfence_record(node_id: int) -> MetadataRecord:
    """The broker ``node_id`` is live: it may lead partitions clients use."""
    return {"type": "unfence_broker", "node_id": node_id}


def fence_record(node_id: int, at_ms: int | None = None) -> MetadataRecord:
    """The broker ``node_id`` is fenced (stopped, or missed its session): clients do not
    see it and it leads nothing. The controller records since when (``at_ms``, wall-clock
    milliseconds), so a restarted controller knows how long the broker has been gone."""
    rec: MetadataRecord = {"type": "fence_broker", "node_id": node_id}
    if at_ms is not None:
        rec["at_ms"] = at_ms
    return rec


@dataclass
class PartitionInfo:
    """One partition's record. During a reassignment ``replicas`` holds the target replicas
    and the ones being removed (``adding_replicas`` are among the targets,
    ``removing_replicas`` are not); both lists are empty otherwise."""

    topic: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)

    def to_record(self) -> MetadataRecord:
        rec: MetadataRecord = {
            "type": "partition", "topic": self.topic, "partition": self.partition,
            "replicas": self.replicas, "isr": self.isr, "leader": self.leader,
            "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch}
        if self.adding_replicas or self.removing_replicas:
            rec["adding_replicas"] = self.adding_replicas
            rec["removing_replicas"] = self.removing_replicas
        return rec

    @property
    def target_replicas(self) -> list[int]:
        """Where the partition is going: its replicas without those being removed."""
        return [r for r in self.replicas if r not in self.removing_replicas]


@dataclass
class TopicInfo:
    name: str
    topic_id: bytes
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)

    def to_record(self) -> MetadataRecord:
        return {"type": "topic", "name": self.name, "topic_id": self.topic_id.hex(),
                "configs": self.configs, "internal": self.internal}


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1  # broker epoch of its latest registration (-1: records from before epochs)


class MetadataImage:
    """The current cluster metadata, rebuilt by applying records in order."""

    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[bytes, TopicInfo] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        # dynamic broker configs by entity: a broker id as a string, "" = cluster default
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.live_brokers: set[int] = set()  # registered and not fenced
        # fenced broker -> wall-clock ms it was fenced at (None: not recorded, as in logs
        # written before the field; the controller then counts from its own start)
        self.fenced_since: dict[int, int | None] = {}
        self.next_producer_id = 0

    def apply(self, rec: MetadataRecord) -> None:
        kind = rec.get("type")
        if kind == "cluster":
            self.cluster_id = rec["cluster_id"]
        elif kind == "broker":
            self.brokers[rec["node_id"]] = BrokerInfo(rec["node_id"], rec["host"], rec["port"],
                                                      rec.get("rack"), rec.get("epoch", -1))
        elif kind == "topic":
            tid = bytes.fromhex(rec["topic_id"])
            old = self.topics.get(rec["name"])
            if old is not None and old.topic_id != tid:
                self.topics_by_id.pop(old.topic_id, None)
            info = TopicInfo(rec["name"], tid, dict(rec.get("configs") or {}),
                             bool(rec.get("internal", False)),
                             old.partitions if old is not None and old.topic_id == tid else {})
            self.topics[info.name] = info
            self.topics_by_id[tid] = info
        elif kind == "partition":
            t = self.topics.get(rec["topic"])
            if t is None:
                log.warning("metadata: partition record for unknown topic %s", rec["topic"])
                return
            t.partitions[rec["partition"]] = PartitionInfo(
                rec["topic"], rec["partition"], list(rec["replicas"]), list(rec["isr"]),
                rec["leader"], rec.get("leader_epoch", 0), rec.get("partition_epoch", 0),
                list(rec.get("adding_replicas", ())), list(rec.get("removing_replicas", ())))
        elif kind == "config":
            t = self.topics.get(rec["topic"])
            if t is not None:
                t.configs = dict(rec["configs"])
        elif kind == "broker_config":
            if rec["configs"]:
                self.broker_configs[rec["entity"]] = dict(rec["configs"])
            else:
                self.broker_configs.pop(rec["entity"], None)
        elif kind == "unfence_broker":
            self.live_brokers.add(rec["node_id"])
            self.fenced_since.pop(rec["node_id"], None)
        elif kind == "fence_broker":
            self.live_brokers.discard(rec["node_id"])
            self.fenced_since[rec["node_id"]] = rec.get("at_ms")
        elif kind == "producer_ids":
            self.next_producer_id = max(self.next_producer_id, int(rec["next"]))
        elif kind == "remove_topic":
            t = self.topics.pop(rec["name"], None)
            if t is not None:
                self.topics_by_id.pop(t.topic_id, None)
        else:
            log.warning("metadata: unknown record type %r ignored", kind)

    def reassigning(self, partitions: Mapping[str, Sequence[int]] | None = None
                    ) -> list[PartitionInfo]:
        """The partitions being reassigned (of ``partitions``, or all), by topic and index."""
        out = []
        for name, topic in sorted(self.topics.items()):
            wanted = None if partitions is None else partitions.get(name)
            if partitions is not None and wanted is None:
                continue
            out.extend(p for _, p in sorted(topic.partitions.items())
                       if (p.adding_replicas or p.removing_replicas)
                       and (wanted is None or p.partition in wanted))
        return out

    def records(self) -> list[MetadataRecord]:
        """Records that recreate this image from nothing (a snapshot)."""
        out: list[MetadataRecord] = []
        if self.cluster_id is not None:
            out.append({"type": "cluster", "cluster_id": self.cluster_id})
        if self.next_producer_id:
            out.append({"type": "producer_ids", "next": self.next_producer_id})
        for b in self.brokers.values():
            out.append({"type": "broker", "node_id": b.node_id, "host": b.host, "port": b.port,
                        "rack": b.rack, "epoch": b.epoch})
        out.extend(unfence_record(n) for n in sorted(self.live_brokers))
        out.extend(fence_record(n, at) for n, at in sorted(self.fenced_since.items()))
        for entity, configs in self.broker_configs.items():
            out.append({"type": "broker_config", "entity": entity, "configs": configs})
        for t in self.topics.values():
            out.append(t.to_record())
            out.extend(p.to_record() for _, p in sorted(t.partitions.items()))
        return out


class MetadataCache:
    """What the broker knows of the cluster: an image of the published records. Read-only
    to everything but ``load`` and ``apply`` (the channel's feed)."""

    def __init__(self) -> None:
        self.image = MetadataImage()

    def load(self, records: Iterable[MetadataRecord]) -> None:
        """Start over from a full set of records (the controller's current state)."""
        self.image = MetadataImage()
        self.apply(records)

    def apply(self, records: Iterable[MetadataRecord]) -> None:
        for rec in records:
            self.image.apply(rec)

    @property
    def live_brokers(self) -> set[int]:
        """Registered brokers that are not fenced."""
        return self.image.live_brokers

    @property
    def cluster_id(self) -> str:
        return self.image.cluster_id or ""

    def topic(self, name: str) -> TopicInfo | None:
        return self.image.topics.get(name)

    def topic_by_id(self, topic_id: bytes) -> TopicInfo | None:
        return self.image.topics_by_id.get(topic_id)

    def topics(self) -> dict[str, TopicInfo]:
        """A copy: callers may hold it across changes."""
        return dict(self.image.topics)

    def broker_configs(self, entity: str) -> dict[str, str]:
        """Dynamic configs of a broker (its id as a string) or, for "", the cluster default."""
        return dict(self.image.broker_configs.get(entity, {}))

    def live_broker_list(self) -> list[BrokerInfo]:
        return [b for i, b in sorted(self.image.brokers.items()) if i in self.live_brokers]
