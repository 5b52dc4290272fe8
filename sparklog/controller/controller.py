"""The single-node controller: owns cluster metadata changes and their validation.

Every topic/partition/config change goes through here, is appended to the metadata log
(durably) and only then published to listeners (each broker's metadata cache), so a broker
never serves a partition the metadata could forget. The shape is the one a multi-broker
controller extends: brokers register, partitions have replica lists, an ISR, a leader and
a leader epoch that increases on every leadership change (clients fence stale leaders by
it), and a partition epoch that increases on every change of the partition record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from sparklog.broker.controller_channel import MetadataListener
from sparklog.broker.metadata_cache import (
    MetadataImage,
    MetadataRecord,
    PartitionInfo,
    TopicInfo,
    fence_record,
    unfence_record,
)
from sparklog.controller.metadata import MetadataLog, new_cluster_id, new_topic_id
from sparklog.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from sparklog.protocol.topic_names import validate_topic_name
from sparklog.storage.checkpoints import topic_id_to_str

log = logging.getLogger(__name__)

__all__ = ["Controller"]

# Kafka has no hard cap, but one request must not be able to make the controller build
# billions of partition records (a flipped bit in num_partitions would): far above any
# real topic, far below what would exhaust memory.
MAX_PARTITIONS_PER_TOPIC = 100_000


def _unify(name: str) -> str:
    return name.replace(".", "_")


class Controller:
    """Metadata owner for an embedded (single-process) cluster; it is also the in-process
    form of the broker's ``ControllerChannel`` (the broker gets it from
    ``sparklog.cluster.single_node`` and never imports this module)."""

    def __init__(
        self,
        metadata_dir: str,
        node_id: int,
        *,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
    ) -> None:
        self.node_id = node_id
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self._log = MetadataLog(metadata_dir)
        self._listeners: list[MetadataListener] = []
        self.live_brokers: set[int] = set()

    # -- lifecycle ----------------------------------------------------------------------

    def open(self) -> None:
        if self._log.open().cluster_id is None:
            self._log.append({"type": "cluster", "cluster_id": new_cluster_id()})

    def close(self) -> None:
        self._log.close()

    @property
    def image(self) -> MetadataImage:
        return self._log.image

    def metadata_records(self) -> list[MetadataRecord]:
        return self.image.records() + [unfence_record(n) for n in sorted(self.live_brokers)]

    def add_listener(self, fn: MetadataListener) -> None:
        self._listeners.append(fn)

    def _commit(self, records: list[MetadataRecord]) -> None:
        if not records:
            return
        self._log.append(*records)
        self._publish(records)

    def _publish(self, records: list[MetadataRecord]) -> None:
        for fn in self._listeners:
            fn(records)

    # -- brokers ------------------------------------------------------------------------

    def register_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> None:
        cur = self.image.brokers.get(node_id)
        if cur is None or (cur.host, cur.port, cur.rack) != (host, port, rack):
            self._commit([{"type": "broker", "node_id": node_id, "host": host, "port": port,
                           "rack": rack}])
        if node_id not in self.live_brokers:
            self.live_brokers.add(node_id)
            self._publish([unfence_record(node_id)])  # liveness is not durable metadata

    def unregister_broker(self, node_id: int) -> None:
        if node_id in self.live_brokers:
            self.live_brokers.discard(node_id)
            self._publish([fence_record(node_id)])

    # -- topics -------------------------------------------------------------------------

    def _check_new_topic(self, name: str) -> None:
        validate_topic_name(name)
        if name in self.image.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        unified = _unify(name)
        for other in self.image.topics:
            if _unify(other) == unified:
                raise InvalidTopicError(
                    f"topic {name!r} collides with existing topic {other!r} "
                    "('.' and '_' are interchangeable in metric names)"
                )

    def _assign(self, start: int, count: int, rf: int) -> list[list[int]]:
        brokers = sorted(self.live_brokers) or [self.node_id]
        if rf > len(brokers):
            raise InvalidReplicationFactorError(
                f"replication factor {rf} is larger than the {len(brokers)} available broker(s)"
            )
        n = len(brokers)
        return [[brokers[(p + i) % n] for i in range(rf)] for p in range(start, start + count)]

    def _check_assignment(self, assignment: Sequence[Sequence[int]]) -> list[list[int]]:
        out = []
        for replicas in assignment:
            reps = list(replicas)
            if not reps or len(set(reps)) != len(reps):
                raise InvalidReplicaAssignmentError(f"invalid replica list {reps}")
            unknown = [b for b in reps if b not in self.live_brokers]
            if unknown:
                raise InvalidReplicaAssignmentError(f"unknown broker ids {unknown}")
            out.append(reps)
        return out

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        internal: bool = False,
        validate_only: bool = False,
    ) -> TopicInfo:
        self._check_new_topic(name)
        if assignments:
            if num_partitions not in (-1, len(assignments)) or replication_factor != -1:
                raise InvalidRequestError(
                    "both a replica assignment and num_partitions/replication_factor were given"
                )
            keys = sorted(assignments)
            if keys != list(range(len(keys))):
                raise InvalidReplicaAssignmentError("partition ids must be 0..N-1")
            replica_lists = self._check_assignment([assignments[k] for k in keys])
        else:
            if num_partitions == -1:
                num_partitions = self.default_partitions
            if replication_factor == -1:
                replication_factor = self.default_replication_factor
            if num_partitions <= 0:
                raise InvalidPartitionsError(f"number of partitions must be larger than 0, got {num_partitions}")
            if num_partitions > MAX_PARTITIONS_PER_TOPIC:
                raise InvalidPartitionsError(
                    f"{num_partitions} partitions exceed the limit of {MAX_PARTITIONS_PER_TOPIC}")
            if replication_factor <= 0:
                raise InvalidReplicationFactorError(
                    f"replication factor must be larger than 0, got {replication_factor}"
                )
            replica_lists = self._assign(0, num_partitions, replication_factor)
        info = TopicInfo(name, new_topic_id(), dict(configs or {}), internal)
        for p, replicas in enumerate(replica_lists):
            info.partitions[p] = PartitionInfo(name, p, replicas, list(replicas), replicas[0], 0, 0)
        if validate_only:
            return info
        records = [info.to_record()] + [pi.to_record() for pi in info.partitions.values()]
        self._commit(records)
        log.info("created topic %s (%d partitions, id %s)", name, len(replica_lists),
                 topic_id_to_str(info.topic_id))
        return self.image.topics[name]

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.image.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        if info.internal:
            raise InvalidRequestError(f"internal topic {name!r} cannot be deleted")
        self._commit([{"type": "remove_topic", "name": name, "topic_id": info.topic_id.hex()}])
        log.info("deleted topic %s", name)
        return info

    def create_partitions(
        self,
        name: str,
        total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        info = self.image.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        current = len(info.partitions)
        if total <= current:
            raise InvalidPartitionsError(
                f"topic {name!r} has {current} partitions; the new count must be larger, got {total}"
            )
        if total > MAX_PARTITIONS_PER_TOPIC:
            raise InvalidPartitionsError(
                f"{total} partitions exceed the limit of {MAX_PARTITIONS_PER_TOPIC}")
        rf = len(info.partitions[0].replicas) if info.partitions else 1
        if assignments:
            if len(assignments) != total - current:
                raise InvalidReplicaAssignmentError(
                    f"{len(assignments)} assignments given for {total - current} new partitions"
                )
            replica_lists = self._check_assignment(assignments)
        else:
            replica_lists = self._assign(current, total - current, rf)
        new = [PartitionInfo(name, current + i, reps, list(reps), reps[0], 0, 0)
               for i, reps in enumerate(replica_lists)]
        if not validate_only:
            self._commit([p.to_record() for p in new])
            log.info("topic %s now has %d partitions", name, total)
        return self.image.topics[name]

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's config overrides with ``configs``."""
        info = self.image.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        self._commit([{"type": "config", "topic": name, "configs": dict(configs)}])

    def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (a broker id, or "" for the default)."""
        self._commit([{"type": "broker_config", "entity": entity, "configs": dict(configs)}])

    def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        """Reserve a block of producer ids (KIP-730 style): (first id, count). The block is
        durable before it is used, so ids are never reused across restarts."""
        start = self.image.next_producer_id
        self._commit([{"type": "producer_ids", "next": start + count}])
        return start, count

    def change_leader(self, name: str, partition: int, leader: int, isr: list[int] | None = None) -> PartitionInfo:
        """Move leadership; bumps the leader epoch (what fences the old leader)."""
        info = self.image.topics.get(name)
        if info is None or partition not in info.partitions:
            raise UnknownTopicOrPartitionError(f"{name}-{partition} does not exist")
        p = info.partitions[partition]
        rec = p.to_record()
        rec.update(leader=leader, leader_epoch=p.leader_epoch + 1,
                   partition_epoch=p.partition_epoch + 1,
                   isr=list(isr) if isr is not None else p.isr)
        self._commit([rec])
        return info.partitions[partition]
