"""The broker process: metadata cache, logs, replica manager, group and transaction
coordinators, server.

The broker reaches the controller only through its ``ControllerChannel`` (handed in by
``sparklog.cluster``): it writes there and reads the ``MetadataCache`` the channel feeds.

Start order matters for durability and correctness: the data directories' locks first
(``storage.dir_lock``: a second broker on them fails before touching anything), then
metadata (it says which partitions exist), then the logs (recovered by the storage layer;
a partition that cannot be loaded stays offline), then the listener binds (registration
needs its real port), then the replica manager takes its roles, the group coordinator loads
the ``__consumer_offsets`` partitions this broker leads and the transaction coordinator
the ``__transaction_state`` ones (both follow their leadership from then on; transactions
a crash left prepared resume their markers: they need the partitions open), and the
replica fetchers and the periodic ISR check start. Nothing after the bind yields to the
event loop, so no request is served before all of that is done. Shutdown runs the other
way: leave the cluster (unregister: a broker in its own process has its leaderships moved
away first), stop the ISR check and the fetchers, stop accepting, let in-flight requests
finish, stop the coordinators, flush and checkpoint the logs, close the channel, release
the locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Collection, Mapping, Sequence

from sparklog.broker.acks import AcksAllWait, wait_replicated
from sparklog.broker.config import BrokerConfig, check_dynamic_broker_configs
from sparklog.broker.controller_channel import ControllerChannel
from sparklog.broker.delayed import Waiters
from sparklog.broker.dispatch import Dispatcher
from sparklog.broker.group.config import CoordinatorConfig
from sparklog.broker.group.coordinator import GroupCoordinator
from sparklog.broker.group.model import LoopClock
from sparklog.broker.group.store import GroupStore, ReplicatedRecordLog
from sparklog.broker.inter_broker import InterBrokerClients
from sparklog.broker.metadata_cache import MetadataCache, MetadataRecord, PartitionInfo, TopicInfo
from sparklog.broker.producer_ids import ProducerIdManager
from sparklog.broker.remote_fetch import RemoteFetches
from sparklog.broker.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from sparklog.broker.replica_manager import ReplicaManager
from sparklog.broker.server import KafkaServer
from sparklog.broker.txn.config import TxnConfig
from sparklog.broker.txn.coordinator import TransactionCoordinator
from sparklog.broker.txn.marker_channel import MarkerChannel
from sparklog.broker.txn.markers import LocalMarkerWriter
from sparklog.broker.txn.store import TxnStore
from sparklog.broker.txn.verification import TxnVerifier
from sparklog.protocol.errors import ErrorCode, InvalidConfigError, KafkaError
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS, INTERNAL_TOPICS, TRANSACTION_STATE
from sparklog.protocol.topic_names import validate_topic_name
from sparklog.storage.dir_lock import LogDirLocks
from sparklog.storage.log_config import LogConfig
from sparklog.storage.log_manager import LogManager
from sparklog.storage.partition_log import PartitionLog
from sparklog.storage.remote.manager import RemoteLogManager
from sparklog.storage.remote.store import RemoteStore

log = logging.getLogger(__name__)

__all__ = ["Broker"]


class TopicDeletionDisabledError(KafkaError):
    error_code = ErrorCode.TOPIC_DELETION_DISABLED


class Broker:
    """A sparklog broker; ``channel`` is its way to the controller (built by
    ``sparklog.cluster``; the single node's controller runs in the same process)."""

    def __init__(self, config: BrokerConfig, channel: ControllerChannel) -> None:
        self.config = config
        self.node_id = config.node_id
        self.controller_node_id = self.node_id
        self.data_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.channel = channel
        self.metadata = MetadataCache()
        # the logs, their base config and the coordinators exist while started
        self.log_manager: LogManager | None = None
        self.remote_fetches: RemoteFetches | None = None  # bucket reads of fetches (tiered)
        self._base_log_config: LogConfig | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.replica_manager = ReplicaManager(
            self.node_id, self, channel,
            replica_lag_time_max_ms=int(config.get("replica.lag.time.max.ms")))
        self.replica_fetchers = ReplicaFetcherManager(self.node_id, self.metadata,
                                                      FetcherConfig.from_broker_config(config))
        self.replica_manager.add_role_listener(self.replica_fetchers.on_role_change)
        self._isr_task: asyncio.Task[None] | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.txn_markers = LocalMarkerWriter(self.replica_manager, self._on_offsets_marker)
        self.request_timeout_ms = int(config.get("request.timeout.ms"))
        self.inter_broker = InterBrokerClients(self.node_id, self.metadata,
                                               self.request_timeout_ms)
        self._marker_channel = MarkerChannel(self.node_id, self.metadata, self.txn_markers,
                                             self.inter_broker, self.park,
                                             self.request_timeout_ms)
        self.txn_verifier = TxnVerifier(self.node_id, lambda: self.txn_coordinator,
                                        self.txn_coordinator_node, self.inter_broker,
                                        self.replica_manager)
        self.producer_ids = ProducerIdManager(channel)
        self.dispatcher = Dispatcher(self)
        self.server: KafkaServer | None = None
        self.started = False
        self._dir_locks: LogDirLocks | None = None  # held from start() to shutdown()

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self.server.port if self.server is not None else 0

    async def start(self) -> None:
        # before anything reads or writes the directories: a second broker on them fails here
        self._dir_locks = LogDirLocks(self.data_dirs)
        self.channel.open()
        self.metadata.load(self.channel.metadata_records())
        self.channel.add_listener(self._on_metadata)
        self._apply_dynamic_configs()
        self._open_log_manager()
        host, port = self.config.listener()
        self.server = KafkaServer(
            self.dispatcher.process,
            host=host,
            port=port,
            max_request_bytes=int(self.config.get("socket.request.max.bytes")),
            max_queued_requests=int(self.config.get("queued.max.requests")),
            send_buffer_bytes=int(self.config.get("socket.send.buffer.bytes")),
            receive_buffer_bytes=int(self.config.get("socket.receive.buffer.bytes")),
            connections_max_idle_ms=int(self.config.get("connections.max.idle.ms")),
            max_parked_requests=int(self.config.get("purgatory.max.requests")),
        )
        # bind before registering so port 0 resolves to the real port clients must use
        await self.server.start()
        adv_host, adv_port = self.config.advertised_listener(self.server.port)
        # the registration's broker epoch: the replica manager's AlterPartition requests carry it
        self.replica_manager.broker_epoch = self.channel.register_broker(self.node_id, adv_host,
                                                                         adv_port)
        for topic in self.metadata.topics().values():
            self._apply_topic(topic)
        self._start_txn_coordinator(self._start_group_coordinator().store)
        self.replica_fetchers.start()
        self._isr_task = asyncio.get_running_loop().create_task(
            self._check_isr(), name=f"isr-check-{self.node_id}")
        self.started = True
        log.info("sparklog broker %d started: %s:%d (advertised %s:%d), data in %s",
                 self.node_id, host, self.server.port, adv_host, adv_port,
                 ", ".join(self.data_dirs))

    async def shutdown(self) -> None:
        # first leave the cluster (the controller moves leaderships away while this broker
        # still serves: Kafka's controlled shutdown)
        if self.started:
            self.channel.unregister_broker(self.node_id)
        if self._isr_task is not None:
            self._isr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._isr_task
            self._isr_task = None
        await self.replica_fetchers.stop()
        # the server answers parked requests (long polls) now with what they have
        if self.server is not None:
            await self.server.close()
        if self.txn_coordinator is not None:
            self.txn_coordinator.shutdown()
            self.txn_coordinator = None
        self._marker_channel.close()
        await self.inter_broker.close()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
            self.group_coordinator = None
        if self.remote_fetches is not None:
            self.remote_fetches.close()
            self.remote_fetches = None
        if self.log_manager is not None:
            try:
                self.log_manager.shutdown()
            except Exception:
                log.exception("closing logs failed")
            self.log_manager = None
        self.channel.close()
        if self._dir_locks is not None:
            self._dir_locks.release()
            self._dir_locks = None
        self.started = False
        log.info("sparklog broker %d stopped", self.node_id)

    async def _check_isr(self) -> None:
        """Followers that fell behind leave the ISR (checked every half lag window, as
        Kafka does)."""
        interval = max(0.01, self.replica_manager.replica_lag_time_max_ms / 2000)
        while True:
            await asyncio.sleep(interval)
            try:
                self.replica_manager.maybe_shrink_isr()
            except Exception:
                log.exception("ISR check failed")

    # -- storage ------------------------------------------------------------------------

    def _open_log_manager(self) -> None:
        self._base_log_config = LogConfig.from_broker_props(self.config.log_props())
        topic_configs = {name: self.log_config_for(name) for name in self.metadata.topics()}
        cfg = self.config
        self.log_manager = LogManager(
            self.data_dirs, self._base_log_config,
            cluster_id=self.metadata.cluster_id, node_id=self.node_id,
            topic_configs=topic_configs,
            retention_check_interval_ms=int(cfg.get("log.retention.check.interval.ms")),
            checkpoint_interval_ms=int(cfg.get("log.flush.offset.checkpoint.interval.ms")),
            cleaner_enable=bool(cfg.get("log.cleaner.enable")),
            cleaner_backoff_ms=int(cfg.get("log.cleaner.backoff.ms")),
            dir_locks=self._dir_locks,
            tier=self._open_tier(),
        )
        if self.log_manager.tier is not None:
            self.remote_fetches = RemoteFetches(
                threads=int(cfg.get("remote.log.reader.threads")),
                max_pending=int(cfg.get("remote.log.reader.max.pending.tasks")),
                max_wait_ms=int(cfg.get("remote.fetch.max.wait.ms")))
        # logs of topics the metadata no longer has (deleted while we were down) go away
        known = self.metadata.topics()
        for topic, partition in list(self.log_manager.logs()):
            info = known.get(topic)
            if info is None or partition not in info.partitions:
                log.info("deleting stray log %s-%d (not in the metadata)", topic, partition)
                plog = self.log_manager.get_log(topic, partition)
                if info is None and plog is not None and plog.topic_id is not None:
                    self._delete_from_tier(topic, plog.topic_id)  # deleted while we were down
                self.log_manager.delete_log(topic, partition)
        self.log_manager.start()

    def _open_tier(self) -> RemoteLogManager | None:
        """The object-storage tier when ``remote.log.storage.system.enable`` (KIP-405)."""
        cfg = self.config
        if not cfg.get("remote.log.storage.system.enable"):
            return None
        url = cfg.get("remote.log.storage.url")
        if not url:
            raise InvalidConfigError("remote.log.storage.system.enable needs remote.log.storage.url")
        prefix = "remote.log.storage.options."
        options = {k[len(prefix):]: v for k, v in cfg.raw().items() if k.startswith(prefix)}
        log.info("remote log storage at %s", url)
        return RemoteLogManager(
            RemoteStore.from_url(url, options), self._leader_epoch_of,
            task_interval_ms=int(cfg.get("remote.log.manager.task.interval.ms")),
            cache_bytes=int(cfg.get("remote.log.storage.cache.bytes")))

    def _delete_from_tier(self, topic: str, topic_id: bytes) -> None:
        """A deleted topic's segments leave the bucket too."""
        if self.log_manager is not None and self.log_manager.tier is not None:
            self.log_manager.tier.delete_topic(topic, topic_id)

    def _leader_epoch_of(self, topic: str, partition: int) -> int | None:
        """The tier uploads only while this broker leads the partition (at this epoch)."""
        p = self.replica_manager.get(topic, partition)
        return p.leader_epoch if p is not None and p.is_leader else None

    def log_config_for(self, topic: str) -> LogConfig:
        info = self.metadata.topic(topic)
        overrides = info.configs if info is not None else {}
        return self._base_log_config.with_overrides(overrides) if overrides else self._base_log_config

    # the replica manager's ``Logs``

    def open_log(self, topic: str, partition: int, topic_id: bytes) -> PartitionLog:
        return self.log_manager.get_or_create_log(topic, partition, self.log_config_for(topic),
                                                  topic_id=topic_id)

    def close_log(self, topic: str, partition: int, *, delete: bool) -> None:
        if self.log_manager is not None and delete:
            self.log_manager.delete_log(topic, partition)

    # -- metadata changes ---------------------------------------------------------------

    def _apply_topic(self, info: TopicInfo) -> None:
        for p in info.partitions.values():
            self._apply_partition(info, p)

    def _apply_partition(self, info: TopicInfo, p: PartitionInfo) -> None:
        self.replica_manager.apply_partition_state(
            info.name, info.topic_id, p.partition, p.leader, p.leader_epoch, p.partition_epoch,
            p.replicas, p.isr, internal=info.internal)

    def _on_metadata(self, records: list[MetadataRecord]) -> None:
        self.metadata.apply(records)
        deleted: list[str] = []
        for rec in records:
            kind = rec.get("type")
            if kind == "partition":
                info = self.metadata.topic(rec["topic"])
                if info is None or rec["partition"] not in info.partitions:
                    continue
                self._apply_partition(info, info.partitions[rec["partition"]])
            elif kind == "remove_topic":
                self.replica_manager.remove_topic(rec["name"])
                self._delete_from_tier(rec["name"], bytes.fromhex(rec["topic_id"]))
                deleted.append(rec["name"])
            elif kind == "config":
                self.log_manager.update_config(rec["topic"], self.log_config_for(rec["topic"]))
            elif kind == "broker_config":
                self._apply_dynamic_configs()
            elif kind == "fence_broker":
                self.inter_broker.disconnect(rec["node_id"])
        touched = {rec.get("topic", rec.get("name")) for rec in records}
        membership = any(rec.get("type") in ("fence_broker", "unfence_broker")
                         for rec in records)
        if membership or CONSUMER_OFFSETS in touched:
            self._serve_group_partitions()
        if membership or TRANSACTION_STATE in touched:
            self._serve_txn_partitions()
        if deleted and self.group_coordinator is not None:
            # a topic re-created under the same name must not inherit stale positions
            self.group_coordinator.offsets.remove_topic_offsets(deleted)

    # -- topic operations (validated by the controller / LogConfig) --------------------

    def _check_configs(self, configs: Mapping[str, str], current: LogConfig | None = None) -> None:
        # the storage layer must accept them too (types, ranges)
        cfg = self._base_log_config.with_overrides(dict(configs))
        # Kafka's rules for tiered topics (KIP-405)
        if cfg.remote_storage_enable and not self.config.get("remote.log.storage.system.enable"):
            raise InvalidConfigError("Tiered Storage functionality is disabled in the broker. "
                                     "Topic cannot be configured with remote log storage.")
        if current is not None and current.remote_storage_enable and not cfg.remote_storage_enable:
            raise InvalidConfigError(
                "Disabling remote storage feature on the topic level is not supported.")

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     validate_only: bool = False, internal: bool = False) -> TopicInfo:
        self._check_configs(configs or {})
        return self.channel.create_topic(name, num_partitions, replication_factor,
                                         configs or {}, assignments=assignments,
                                         internal=internal or name in INTERNAL_TOPICS,
                                         validate_only=validate_only)

    def auto_create_topic(self, name: str) -> TopicInfo | None:
        """Metadata-triggered creation (``auto.create.topics.enable``); None when disabled."""
        validate_topic_name(name)
        if name == CONSUMER_OFFSETS:
            return self.ensure_offsets_topic()
        if not self.config.get("auto.create.topics.enable"):
            return None
        info = self.metadata.topic(name)
        if info is not None:
            return info
        return self.create_topic(name)

    async def delete_topic(self, name: str) -> None:
        if not self.config.get("delete.topic.enable"):
            raise TopicDeletionDisabledError("delete.topic.enable is false")
        self.channel.delete_topic(name)

    def create_partitions(self, name: str, total: int, assignments: Sequence[Sequence[int]] | None = None,
                          *, validate_only: bool = False) -> TopicInfo:
        return self.channel.create_partitions(name, total, assignments, validate_only=validate_only)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._check_configs(configs, self.log_config_for(name))
        self.channel.set_topic_configs(name, configs)

    # -- dynamic broker configs -----------------------------------------------------------

    def set_broker_configs(self, entity: str, configs: Mapping[str, str], *,
                           validate_only: bool = False) -> None:
        """Make ``configs`` the whole dynamic config set of ``entity`` (this broker's id, or
        "" for the cluster-wide default), stored in the cluster metadata; they apply here
        when the record comes back (``_apply_dynamic_configs``). Checked first: read-only
        keys, types, and what every log's config would become."""
        check_dynamic_broker_configs(configs)
        own = str(self.node_id)
        candidate = self.config.with_dynamic(
            configs if entity == "" else self.metadata.broker_configs(""),
            configs if entity == own else self.metadata.broker_configs(own))
        LogConfig.from_broker_props(candidate.log_props())
        if not validate_only:
            self.channel.set_broker_configs(entity, configs)

    def _apply_dynamic_configs(self) -> None:
        """The stored dynamic configs become this broker's config; every log's config is
        derived again, so existing logs roll and retain by the new values from now on."""
        self.config = self.config.with_dynamic(self.metadata.broker_configs(""),
                                               self.metadata.broker_configs(str(self.node_id)))
        if self.log_manager is None:
            return
        self._base_log_config = LogConfig.from_broker_props(self.config.log_props())
        self.log_manager.default_config = self._base_log_config
        for name in self.metadata.topics():
            self.log_manager.update_config(name, self.log_config_for(name))

    # -- the group coordinator and its topic ---------------------------------------------

    def ensure_offsets_topic(self) -> TopicInfo:
        """``__consumer_offsets``, created on first use (its first write), as Kafka does."""
        return self._ensure_internal_topic(CONSUMER_OFFSETS, "offsets.topic")

    def ensure_txn_state_topic(self) -> TopicInfo:
        """``__transaction_state``, created on first use, as Kafka does."""
        return self._ensure_internal_topic(TRANSACTION_STATE, "transaction.state.log")

    def _ensure_internal_topic(self, name: str, prefix: str) -> TopicInfo:
        """A coordinator's compacted topic, sized by the ``<prefix>.*`` broker keys (the
        transaction state's ``min.insync.replicas`` too, capped by its replication factor
        so that a small cluster can still write it)."""
        info = self.metadata.topic(name)
        if info is not None:
            return info
        rf = min(int(self.config.get(f"{prefix}.replication.factor")),
                 max(1, len(self.metadata.live_brokers)))
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.config.get(f"{prefix}.segment.bytes")),
            "compression.type": "producer",
        }
        if name == TRANSACTION_STATE:
            configs["min.insync.replicas"] = str(
                min(rf, int(self.config.get("transaction.state.log.min.isr"))))
        return self.create_topic(name, int(self.config.get(f"{prefix}.num.partitions")),
                                 rf, configs, internal=True)

    def _led_partitions(self, topic: str, num_partitions: int) -> dict[int, int]:
        """The partitions of a coordinator's ``topic`` this broker leads, with their
        leader epochs: what its coordinator serves. Before the topic exists (it is created
        on first use), a broker alone in its cluster serves every partition, as the single
        node always has."""
        info = self.metadata.topic(topic)
        if info is None:
            alone = self.metadata.live_brokers <= {self.node_id}
            return dict.fromkeys(range(num_partitions), 0) if alone else {}
        rm = self.replica_manager
        return {n: p.leader_epoch for n in info.partitions
                if (p := rm.get(topic, n)) is not None and p.is_leader}

    def _coordinator_node(self, topic: str, partition: int, serves: bool,
                          ensure_topic: Callable[[], TopicInfo] | None) -> int | None:
        """The broker coordinating the keys of ``partition`` of ``topic``: its leader (the
        topic is created now by ``ensure_topic`` if it does not exist, as Kafka's
        FindCoordinator does); None while there is none (not elected yet, or not loaded
        here yet). ``serves``: this broker's coordinator has the partition loaded."""
        if serves:
            return self.node_id
        info = self.metadata.topic(topic)
        if info is None:
            if self.metadata.live_brokers <= {self.node_id} or ensure_topic is None:
                return None  # alone, this broker serves every key until the topic exists
            info = ensure_topic()
        p = info.partitions.get(partition)
        if p is None or p.leader not in self.metadata.live_brokers or p.leader == self.node_id:
            return None  # no leader, or this one is about to load it
        return p.leader

    def _start_group_coordinator(self) -> GroupCoordinator:
        cfg = CoordinatorConfig.from_broker_config(self.config)
        info = self.metadata.topic(CONSUMER_OFFSETS)
        # An existing topic keeps its partition count even if the config changed since.
        partitions = len(info.partitions) if info is not None else cfg.offsets_topic_num_partitions
        store = GroupStore(ReplicatedRecordLog(self.replica_manager, CONSUMER_OFFSETS,
                                               self.ensure_offsets_topic), partitions)
        self.group_coordinator = GroupCoordinator(cfg, store)
        self._serve_group_partitions()
        return self.group_coordinator

    def _serve_group_partitions(self) -> None:
        """The group coordinator serves the groups of the offsets partitions this broker
        leads, and moves with their leadership (load on becoming leader, unload on losing
        it)."""
        gc = self.group_coordinator
        if gc is not None:
            gc.serve_partitions(self._led_partitions(CONSUMER_OFFSETS, gc.store.num_partitions))

    def coordinator_write_wait(self, topic: str, partition: int) -> AcksAllWait | None:
        """What a coordinator's last write to ``partition`` of its ``topic`` appended, to
        wait until the ISR has it (Kafka's coordinator writes with acks=all); None when
        the partition is not led here."""
        p = self.replica_manager.get(topic, partition)
        if p is None or not p.is_leader:
            return None
        return AcksAllWait(p, p.log.log_end_offset - 1, p.leader_epoch)

    def group_write_wait(self, group_id: str) -> AcksAllWait | None:
        """``coordinator_write_wait`` of ``group_id``'s offsets partition."""
        gc = self.group_coordinator
        if gc is None:
            return None
        return self.coordinator_write_wait(CONSUMER_OFFSETS, gc.store.partition_for(group_id))

    def group_coordinator_node(self, group_id: str) -> int | None:
        """The broker coordinating ``group_id`` (``_coordinator_node``)."""
        gc = self.group_coordinator
        if gc is None:
            return None
        return self._coordinator_node(CONSUMER_OFFSETS, gc.store.partition_for(group_id),
                                      gc.serves(group_id), self.ensure_offsets_topic)

    # -- the transaction coordinator and its topic ----------------------------------------

    def _start_txn_coordinator(self, groups: GroupStore) -> None:
        """The transaction coordinator serves the state partitions this broker leads
        (every one on a single broker; transactions left prepared resume their markers)."""
        cfg = TxnConfig.from_broker_config(self.config)
        info = self.metadata.topic(TRANSACTION_STATE)
        partitions = (len(info.partitions) if info is not None
                      else cfg.transaction_state_log_num_partitions)
        store = TxnStore(ReplicatedRecordLog(self.replica_manager, TRANSACTION_STATE,
                                             self.ensure_txn_state_topic), partitions)
        self.txn_coordinator = TransactionCoordinator(
            cfg, store, self._marker_channel, self.producer_ids.next_id, groups.partition_for,
            LoopClock(), self._txn_state_replicated)
        self._serve_txn_partitions()
        self.txn_coordinator.start()

    def _serve_txn_partitions(self) -> None:
        """The transaction coordinator follows the leadership of ``__transaction_state``'s
        partitions, at their leader epochs (the coordinator epochs)."""
        tc = self.txn_coordinator
        if tc is not None:
            tc.serve_partitions(self._led_partitions(TRANSACTION_STATE, tc.store.num_partitions))

    def txn_coordinator_node(self, transactional_id: str, *,
                             create_topic: bool = False) -> int | None:
        """The broker coordinating ``transactional_id`` (``_coordinator_node``); with
        ``create_topic`` (FindCoordinator) the state topic is created if it does not exist."""
        tc = self.txn_coordinator
        if tc is None:
            return None
        return self._coordinator_node(
            TRANSACTION_STATE, tc.store.partition_for(transactional_id),
            tc.serves(transactional_id), self.ensure_txn_state_topic if create_topic else None)

    async def _txn_state_replicated(self, partition: int) -> ErrorCode:
        """Wait until the ISR of state partition ``partition`` has what was written to it."""
        wait = self.coordinator_write_wait(TRANSACTION_STATE, partition)
        if wait is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        failed = await wait_replicated(self.park, [wait], self.request_timeout_ms)
        return next(iter(failed.values()), ErrorCode.NONE)

    async def park(self, waiters: Collection[Waiters], timeout_s: float) -> bool:
        """Park a wait no request owns (a coordinator's own writes) in the purgatory."""
        if self.server is None:
            return False
        return await self.server.purgatory.park(None, waiters, timeout_s)

    def _on_offsets_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        if self.group_coordinator is not None:
            self.group_coordinator.complete_txn(partition, producer_id, commit)
