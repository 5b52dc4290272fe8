"""A replicated cluster in one process: one ``Controller`` and N brokers on one event loop.

For tests and benchmarks of replication without process management: every broker has its
own data directory (``<data dir>/broker-<id>``), listener and node id (1..N) and reaches the
shared controller (metadata in ``<data dir>/controller``) through its own ``ControllerView``,
so one broker stopping (``stop_broker``) stops only its own metadata feed, and restarting
it (``start_broker``) registers it again with its data. The brokers replicate through real
sockets (their replica fetchers connect to each other's listeners), exactly as separate
processes would; only the channel to the controller is in-process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from sparklog.broker.broker import Broker
from sparklog.broker.config import BrokerConfig
from sparklog.broker.controller_channel import MetadataListener
from sparklog.broker.metadata_cache import MetadataRecord, PartitionInfo, TopicInfo
from sparklog.cluster.background import BackgroundCluster
from sparklog.controller import Controller
from sparklog.protocol.errors import KafkaError

log = logging.getLogger(__name__)

__all__ = ["ControllerView", "InProcessCluster"]


class ControllerView:
    """One broker's ``ControllerChannel`` onto a controller shared in-process: the
    controller is opened and closed by its owner, and ``close`` only detaches this broker's
    metadata listener."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller
        self._listener: MetadataListener | None = None

    def open(self) -> None:
        """The owner opened the controller already."""

    def close(self) -> None:
        if self._listener is not None:
            self._controller.remove_listener(self._listener)
            self._listener = None

    def metadata_records(self) -> list[MetadataRecord]:
        return self._controller.metadata_records()

    def add_listener(self, fn: MetadataListener) -> None:
        self.close()
        self._listener = fn
        self._controller.add_listener(fn)

    def register_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> int:
        return self._controller.register_broker(node_id, host, port, rack)

    def unregister_broker(self, node_id: int) -> None:
        """A controlled shutdown, as a broker process's: its leaderships move to other ISR
        members and it leaves the ISRs before it stops serving."""
        self._controller.fence_broker(node_id, "controlled shutdown")

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     internal: bool = False, validate_only: bool = False) -> TopicInfo:
        return self._controller.create_topic(name, num_partitions, replication_factor, configs,
                                             assignments=assignments, internal=internal,
                                             validate_only=validate_only)

    def delete_topic(self, name: str) -> TopicInfo:
        return self._controller.delete_topic(name)

    def create_partitions(self, name: str, total: int,
                          assignments: Sequence[Sequence[int]] | None = None, *,
                          validate_only: bool = False) -> TopicInfo:
        return self._controller.create_partitions(name, total, assignments,
                                                  validate_only=validate_only)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._controller.set_topic_configs(name, configs)

    def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        self._controller.set_broker_configs(entity, configs)

    def elect_leaders(self, election_type: int,
                      partitions: Mapping[str, Sequence[int]] | None = None
                      ) -> dict[tuple[str, int], KafkaError | None]:
        return self._controller.elect_leaders(election_type, partitions)

    def alter_partition_reassignments(
            self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]:
        return self._controller.alter_partition_reassignments(targets)

    def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        return self._controller.allocate_producer_ids(count)

    def alter_partition(self, node_id: int, broker_epoch: int, topic: str, partition: int,
                        leader_epoch: int, partition_epoch: int,
                        isr: list[int]) -> PartitionInfo:
        return self._controller.alter_partition(node_id, broker_epoch, topic, partition,
                                                leader_epoch, partition_epoch, isr)


class InProcessCluster(BackgroundCluster):
    """``with InProcessCluster(tmpdir, brokers=3) as c:`` serves ``c.bootstrap_servers``.

    ``config`` applies to every broker (and gives the controller its defaults);
    ``broker_config`` adds per-broker keys by node id."""

    def __init__(self, data_dir: str | os.PathLike[str], *, brokers: int = 3,
                 host: str = "127.0.0.1", config: Mapping[str, str] | None = None,
                 broker_config: Mapping[int, Mapping[str, str]] | None = None) -> None:
        super().__init__()
        self.data_dir = os.fspath(data_dir)
        self.host = host
        self.node_ids = list(range(1, brokers + 1))
        base = BrokerConfig(dict(config or {}))
        self.controller = Controller(
            os.path.join(self.data_dir, "controller"), self.node_ids[0],
            default_partitions=int(base.get("num.partitions")),
            default_replication_factor=int(base.get("default.replication.factor")))
        self._props: dict[int, dict[str, str]] = {}
        self.brokers: dict[int, Broker] = {}
        for node_id in self.node_ids:
            props = {"node.id": str(node_id),
                     "log.dirs": os.path.join(self.data_dir, f"broker-{node_id}"),
                     "listeners": f"PLAINTEXT://{host}:0"}
            props.update(config or {})
            props.update((broker_config or {}).get(node_id, {}))
            self._props[node_id] = props
            self.brokers[node_id] = self._new_broker(node_id)
        self._controller_open = False

    def _new_broker(self, node_id: int) -> Broker:
        return Broker(BrokerConfig(self._props[node_id]), ControllerView(self.controller))

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{b.port}" for b in self.brokers.values() if b.started)

    def broker(self, node_id: int) -> Broker:
        return self.brokers[node_id]

    async def _start_nodes(self) -> None:
        self.controller.open()
        self._controller_open = True
        for b in self.brokers.values():
            await b.start()

    async def _stop_nodes(self) -> None:
        for b in self.brokers.values():
            if b.started:
                await b.shutdown()
        if self._controller_open:
            self.controller.close()
            self._controller_open = False

    async def stop_broker(self, node_id: int) -> None:
        """Shut one broker down cleanly (on the loop: ``c.call(c.stop_broker, 2)``); it
        keeps its port for ``start_broker``."""
        b = self.brokers[node_id]
        self._props[node_id]["listeners"] = f"PLAINTEXT://{self.host}:{b.port}"
        await b.shutdown()

    async def start_broker(self, node_id: int) -> None:
        """Start a stopped broker again on its data directory and listener port."""
        b = self.brokers[node_id] = self._new_broker(node_id)
        await b.start()
