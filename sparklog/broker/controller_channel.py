"""The broker's one way to the controller: the writes it asks for and the records it gets back.

The broker talks to the controller through a channel, never by importing it (see
docs/architecture.md, "Layers"). Writes (registration, topic changes, configs, producer-id
blocks, ISR changes) go through the methods below; the controller answers a write only after the change
is durable and published.
Reads never come here: the broker loads ``metadata_records()`` into its ``MetadataCache``
when it starts and applies every batch the controller publishes to its listeners, and
handlers read the cache. The embedded single node hands the ``Controller`` itself over as
the channel (``sparklog.cluster.single_node``); a broker in another process than the
controller will get an RPC form of the same methods.

Errors are the protocol's ``KafkaError`` subclasses, so a handler turns a refused write into
its response's error code the same way whichever form the channel has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Protocol

from sparklog.broker.metadata_cache import MetadataRecord, PartitionInfo, TopicInfo
from sparklog.broker.producer_ids import ProducerIdBlocks
from sparklog.protocol.errors import KafkaError

__all__ = ["AlterPartitionAnswer", "ControllerChannel", "MetadataListener"]

AlterPartitionAnswer = PartitionInfo | Future[PartitionInfo]
"""The committed partition now (an in-process controller) or later (over the network)."""

MetadataListener = Callable[[list[MetadataRecord]], None]
"""Called with each batch of records the controller commits, in commit order."""


class ControllerChannel(ProducerIdBlocks, Protocol):
    def open(self) -> None:
        """Make the controller's metadata available (a new cluster gets its cluster id)."""
        ...

    def close(self) -> None: ...

    def metadata_records(self) -> list[MetadataRecord]:
        """Records that recreate the current metadata, live brokers included."""
        ...

    def add_listener(self, fn: MetadataListener) -> None: ...

    def register_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> int:
        """The broker serves at host:port from now on (it becomes live); returns its broker
        epoch (new at every registration, larger than any before)."""
        ...

    def unregister_broker(self, node_id: int) -> None:
        """The broker is stopping: it is no longer live (a broker in its own process first
        has its leaderships moved away: Kafka's controlled shutdown)."""
        ...

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     internal: bool = False, validate_only: bool = False) -> TopicInfo:
        """-1 means the controller's default; ``validate_only`` checks without committing."""
        ...

    def delete_topic(self, name: str) -> TopicInfo: ...

    def create_partitions(self, name: str, total: int,
                          assignments: Sequence[Sequence[int]] | None = None, *,
                          validate_only: bool = False) -> TopicInfo: ...

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's config overrides with ``configs``."""
        ...

    def elect_leaders(self, election_type: int,
                      partitions: Mapping[str, Sequence[int]] | None = None
                      ) -> dict[tuple[str, int], KafkaError | None]:
        """ElectLeaders: 0 preferred replica, 1 unclean; None = every partition. Each
        partition's error, None where a leader was elected."""
        ...

    def alter_partition_reassignments(
            self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]:
        """Move each partition to its target replicas, or (None) cancel its ongoing
        reassignment; each partition's error, None where accepted."""
        ...

    def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (a broker id, or "" for the cluster
        default) with ``configs``."""
        ...

    def alter_partition(self, node_id: int, broker_epoch: int, topic: str, partition: int,
                        leader_epoch: int, partition_epoch: int,
                        isr: list[int]) -> AlterPartitionAnswer:
        """AlterPartition: the leader ``node_id`` proposes ``isr`` for a partition it leads
        at (``leader_epoch``, ``partition_epoch``); the answer is the committed partition,
        now (in process) or as a future (over the network: the caller's loop must not wait
        for the controller while it serves clients).
        Refused with FENCED_LEADER_EPOCH (stale leader epoch or not the leader),
        INVALID_UPDATE_VERSION (stale partition epoch) or INELIGIBLE_REPLICA (a member that
        is not a live replica)."""
        ...
