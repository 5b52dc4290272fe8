"""The controller as its own process (``process.roles=controller``): the controller APIs on
a ``KafkaServer``.

Brokers in other processes reach it through their RPC ``ControllerChannel``
(``sparklog.broker.controller_rpc``) with Kafka's messages: BrokerRegistration,
BrokerHeartbeat, AllocateProducerIds, AlterPartition, and the topic and config writes a
KRaft broker forwards (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs with the
whole new config set, ElectLeaders, AlterPartitionReassignments; ListPartitionReassignments
too, for tools pointed at the controller). They read the metadata by fetching ``__cluster_metadata``-0
(``MetadataStream``), long-polling for the next batch. DescribeCluster lists the brokers
with their fenced state.

Every write is answered after the controller committed it (durable in the metadata log)
and appended it to the stream, so a broker that fetches after the answer sees the change.
Sessions: a broker is fenced when ``broker.session.timeout.ms`` passes without its
heartbeat (checked several times per timeout); a controller restart gives every known
broker a full session to heartbeat again. The same check reassigns the replicas of brokers
fenced longer than ``broker.replacement.timeout.ms`` (``Controller.replace_lost_brokers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sparklog.broker.config import BrokerConfig
from sparklog.broker.dispatch import encode_response, error_response
from sparklog.broker.handlers.replicas import (
    election_response,
    listed_partitions,
    reassignment_response,
    reassignment_targets,
    reassignments_listed,
    requested_partitions,
)
from sparklog.broker.handlers.topics import per_topic_results
from sparklog.broker.metadata_wire import METADATA_TOPIC
from sparklog.broker.server import CloseConnection, Connection, KafkaServer
from sparklog.controller.controller import Controller
from sparklog.controller.metadata_stream import ControllerEpoch, MetadataStream
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import (
    ErrorCode,
    KafkaError,
    MalformedFrameError,
    StaleBrokerEpochError,
    UnknownTopicIdError,
)
from sparklog.protocol.internal_topics import INTERNAL_TOPICS
from sparklog.protocol.messages import API_BY_KEY, decode_request_header
from sparklog.protocol.messages.admin import RESOURCE_BROKER, RESOURCE_TOPIC
from sparklog.protocol.schema import Message, TopLevel
from sparklog.storage.dir_lock import LogDirLocks

log = logging.getLogger(__name__)

__all__ = ["ControllerServer"]

ControllerHandler = Callable[[TopLevel, int], Awaitable[TopLevel]]

# producer ids per AllocateProducerIds block (Kafka's)
_PRODUCER_ID_BLOCK = 1000


def _error_fields(exc: KafkaError) -> dict[str, Any]:
    return {"error_code": int(exc.error_code), "error_message": str(exc) or exc.error_code.name}


class ControllerServer:
    """A controller-only node: the ``Controller``, its metadata stream and its listener."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.controller = Controller.for_config(config, embedded=False)
        self.stream: MetadataStream | None = None
        self.server: KafkaServer | None = None
        self._locks: LogDirLocks | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._handlers: dict[int, tuple[int, int, ControllerHandler]] = {
            ApiKey.API_VERSIONS: (0, 3, self._api_versions),
            ApiKey.FETCH: (12, 12, self._fetch),
            ApiKey.CREATE_TOPICS: (2, 7, self._create_topics),
            ApiKey.DELETE_TOPICS: (1, 6, self._delete_topics),
            ApiKey.CREATE_PARTITIONS: (0, 3, self._create_partitions),
            ApiKey.ALTER_CONFIGS: (0, 2, self._alter_configs),
            ApiKey.ALTER_PARTITION: (0, 3, self._alter_partition),
            ApiKey.DESCRIBE_CLUSTER: (0, 2, self._describe_cluster),
            ApiKey.ELECT_LEADERS: (0, 2, self._elect_leaders),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0, self._alter_reassignments),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0, self._list_reassignments),
            ApiKey.BROKER_REGISTRATION: (0, 4, self._broker_registration),
            ApiKey.BROKER_HEARTBEAT: (0, 1, self._broker_heartbeat),
            ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0, self._allocate_producer_ids),
        }

    @property
    def port(self) -> int:
        return self.server.port if self.server is not None else 0

    async def start(self) -> None:
        self._locks = LogDirLocks([self.config.log_dirs[0]])
        self.controller.open()
        epoch = ControllerEpoch.claim(self.controller.metadata_dir)
        self.stream = MetadataStream(epoch, self.controller.metadata_records())
        self.controller.add_listener(self.stream.append)
        loop = asyncio.get_running_loop()
        self.controller.expect_heartbeats(loop.time())
        host, port = self.config.listener()
        self.server = KafkaServer(
            self._process, host=host, port=port,
            max_request_bytes=int(self.config.get("socket.request.max.bytes")),
            connections_max_idle_ms=int(self.config.get("connections.max.idle.ms")))
        await self.server.start()
        self._tasks.append(loop.create_task(self._check_sessions()))
        if self.config.get("auto.leader.rebalance.enable"):
            self._tasks.append(loop.create_task(self._rebalance_leaders()))
        log.info("sparklog controller %d started: %s:%d (controller epoch %d), metadata in %s",
                 self.node_id, host, self.server.port, epoch, self.controller.metadata_dir)

    async def shutdown(self) -> None:
        await self._let_brokers_leave()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self.server is not None:
            if self.stream is not None:
                self.stream.wake()  # long-polling fetches answer now, not at their timeout
            await self.server.close()
            self.server = None
        self.controller.close()
        if self._locks is not None:
            self._locks.release()
            self._locks = None
        log.info("sparklog controller %d stopped", self.node_id)

    async def _let_brokers_leave(self) -> None:
        """Stopping while brokers are live (a Spark application stopping executors and the
        driver at once): their controlled shutdowns need this controller, so it keeps
        serving until none is live, for at most one session timeout - after that a broker
        would have been fenced anyway. Stopped with no live broker, it does not wait."""
        if self.server is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.controller.session_timeout_s
        if self.controller.live_brokers:
            log.info("controller stopping: waiting up to %.0f s for live brokers %s to shut down",
                     self.controller.session_timeout_s, sorted(self.controller.live_brokers))
        while self.controller.live_brokers and loop.time() < deadline:
            await asyncio.sleep(0.1)

    async def _check_sessions(self) -> None:
        loop = asyncio.get_running_loop()
        period = min(0.5, self.controller.session_timeout_s / 4)
        while True:
            await asyncio.sleep(period)
            self.controller.check_sessions(loop.time())
            self.controller.replace_lost_brokers(int(time.time() * 1000))

    async def _rebalance_leaders(self) -> None:
        period = int(self.config.get("leader.imbalance.check.interval.seconds"))
        percentage = int(self.config.get("leader.imbalance.per.broker.percentage"))
        while True:
            await asyncio.sleep(period)
            self.controller.rebalance_leaders(percentage)

    # -- requests -----------------------------------------------------------------------

    async def _process(self, conn: Connection, frame: bytearray) -> list[Any] | None:
        try:
            header, pos = decode_request_header(frame)
        except MalformedFrameError:
            raise CloseConnection() from None
        entry = self._handlers.get(header.api_key)
        spec = API_BY_KEY.get(header.api_key)
        if entry is None or spec is None or not entry[0] <= header.api_version <= entry[1]:
            log.warning("closing connection from %s: %s v%d is not a controller API version",
                        conn.client_host, spec.name if spec else header.api_key,
                        header.api_version)
            raise CloseConnection()
        try:
            request = spec.request.decode(frame, header.api_version, pos)
        except MalformedFrameError:
            raise CloseConnection() from None
        try:
            response = await entry[2](request, header.api_version)
        except KafkaError as exc:
            err = error_response(spec, header.api_version, exc.error_code, str(exc))
            if err is None:
                raise CloseConnection() from None
            response = err
        return encode_response(spec, header.api_version, header.correlation_id, response)

    async def _api_versions(self, request: TopLevel, version: int) -> TopLevel:
        resp = API_BY_KEY[ApiKey.API_VERSIONS].response
        return resp(error_code=0, throttle_time_ms=0, api_keys=[
            resp.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi, _) in sorted(self._handlers.items())])

    def _check_broker_epoch(self, node_id: int, broker_epoch: int) -> None:
        info = self.controller.image.brokers.get(node_id)
        if info is None or info.epoch != broker_epoch:
            raise StaleBrokerEpochError(f"broker {node_id} epoch {broker_epoch} is stale")

    async def _broker_registration(self, request: TopLevel, version: int) -> TopLevel:
        resp = API_BY_KEY[ApiKey.BROKER_REGISTRATION].response
        cluster_id = self.controller.image.cluster_id
        if request.cluster_id and request.cluster_id != cluster_id:
            return resp(error_code=int(ErrorCode.INCONSISTENT_CLUSTER_ID))
        if not request.listeners:
            return resp(error_code=int(ErrorCode.INVALID_REQUEST))
        listener = request.listeners[0]
        epoch = self.controller.register_broker(request.broker_id, listener.host,
                                                listener.port, request.rack)
        self.controller.heartbeat(request.broker_id, epoch, asyncio.get_running_loop().time())
        return resp(error_code=0, broker_epoch=epoch)

    async def _broker_heartbeat(self, request: TopLevel, version: int) -> TopLevel:
        fenced = self.controller.heartbeat(request.broker_id, request.broker_epoch,
                                           asyncio.get_running_loop().time(),
                                           want_shut_down=request.want_shut_down)
        return API_BY_KEY[ApiKey.BROKER_HEARTBEAT].response(
            error_code=0, is_caught_up=True, is_fenced=fenced,
            should_shut_down=request.want_shut_down)

    async def _allocate_producer_ids(self, request: TopLevel, version: int) -> TopLevel:
        self._check_broker_epoch(request.broker_id, request.broker_epoch)
        start, count = self.controller.allocate_producer_ids(_PRODUCER_ID_BLOCK)
        return API_BY_KEY[ApiKey.ALLOCATE_PRODUCER_IDS].response(
            error_code=0, producer_id_start=start, producer_id_len=count)

    async def _alter_partition(self, request: TopLevel, version: int) -> TopLevel:
        self._check_broker_epoch(request.broker_id, request.broker_epoch)
        resp = API_BY_KEY[ApiKey.ALTER_PARTITION].response
        topics = []
        for t in request.topics:
            if version >= 2:
                info = self.controller.image.topics_by_id.get(t.topic_id)
                name = info.name if info is not None else None
            else:
                name = t.topic_name
            parts = []
            for p in t.partitions:
                isr = ([b.broker_id for b in p.new_isr_with_epochs] if version >= 3
                       else list(p.new_isr))
                out = resp.PartitionData(partition_index=p.partition_index)
                try:
                    if name is None:
                        raise UnknownTopicIdError(f"unknown topic id {t.topic_id.hex()}")
                    new = self.controller.alter_partition(
                        request.broker_id, request.broker_epoch, name, p.partition_index,
                        p.leader_epoch, p.partition_epoch, isr)
                    out.leader_id, out.leader_epoch = new.leader, new.leader_epoch
                    out.isr, out.partition_epoch = list(new.isr), new.partition_epoch
                except KafkaError as exc:
                    out.error_code = int(exc.error_code)
                parts.append(out)
            topics.append(resp.TopicData(topic_name=t.topic_name, topic_id=t.topic_id,
                                         partitions=parts))
        return resp(error_code=0, topics=topics)

    async def _create_topics(self, request: TopLevel, version: int) -> TopLevel:
        resp = API_BY_KEY[ApiKey.CREATE_TOPICS].response

        def create(t: Message) -> dict[str, Any]:
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            info = self.controller.create_topic(
                t.name, t.num_partitions, t.replication_factor,
                {c.name: c.value for c in t.configs if c.value is not None},
                assignments=assignments or None, internal=t.name in INTERNAL_TOPICS,
                validate_only=bool(request.validate_only))
            rf = len(info.partitions[0].replicas) if info.partitions else -1
            return {"error_code": 0, "error_message": None, "topic_id": info.topic_id,
                    "num_partitions": len(info.partitions), "replication_factor": rf,
                    "configs": []}

        return resp(throttle_time_ms=0, topics=per_topic_results(
            request.topics, resp.CreatableTopicResult, create))

    async def _delete_topics(self, request: TopLevel, version: int) -> TopLevel:
        resp = API_BY_KEY[ApiKey.DELETE_TOPICS].response
        names = [t.name for t in request.topics] if version >= 6 else list(request.topic_names)
        results = []
        for name in names:
            try:
                info = self.controller.delete_topic(name)
                results.append(resp.DeletableTopicResult(name=name, topic_id=info.topic_id))
            except KafkaError as exc:
                results.append(resp.DeletableTopicResult(name=name, **_error_fields(exc)))
        return resp(throttle_time_ms=0, responses=results)

    async def _create_partitions(self, request: TopLevel, version: int) -> TopLevel:
        resp = API_BY_KEY[ApiKey.CREATE_PARTITIONS].response

        def grow(t: Message) -> dict[str, Any]:
            assignments = ([list(a.broker_ids) for a in t.assignments]
                           if t.assignments else None)
            self.controller.create_partitions(t.name, t.count, assignments,
                                              validate_only=bool(request.validate_only))
            return {"error_code": 0, "error_message": None}

        return resp(throttle_time_ms=0, results=per_topic_results(
            request.topics, resp.CreatePartitionsTopicResult, grow))

    async def _alter_configs(self, request: TopLevel, version: int) -> TopLevel:
        """The whole new config set of each resource (the broker validated and merged it)."""
        resp = API_BY_KEY[ApiKey.ALTER_CONFIGS].response
        out = []
        for r in request.resources:
            configs = {c.name: c.value for c in r.configs if c.value is not None}
            fields: dict[str, Any] = {"error_code": 0, "error_message": None}
            try:
                if r.resource_type == RESOURCE_TOPIC:
                    if not request.validate_only:
                        self.controller.set_topic_configs(r.resource_name, configs)
                elif r.resource_type == RESOURCE_BROKER:
                    if not request.validate_only:
                        self.controller.set_broker_configs(r.resource_name, configs)
                else:
                    fields = {"error_code": int(ErrorCode.INVALID_REQUEST),
                              "error_message": f"resource type {r.resource_type} not served"}
            except KafkaError as exc:
                fields = _error_fields(exc)
            out.append(resp.AlterConfigsResourceResponse(
                resource_type=r.resource_type, resource_name=r.resource_name, **fields))
        return resp(throttle_time_ms=0, responses=out)

    async def _elect_leaders(self, request: TopLevel, version: int) -> TopLevel:
        election_type = request.election_type if version >= 1 else 0
        return election_response(self.controller.elect_leaders(
            election_type, requested_partitions(request)))

    async def _alter_reassignments(self, request: TopLevel, version: int) -> TopLevel:
        return reassignment_response(self.controller.alter_partition_reassignments(
            reassignment_targets(request)))

    async def _list_reassignments(self, request: TopLevel, version: int) -> TopLevel:
        return reassignments_listed(self.controller.image.reassigning(
            listed_partitions(request)))

    async def _describe_cluster(self, request: TopLevel, version: int) -> TopLevel:
        resp = API_BY_KEY[ApiKey.DESCRIBE_CLUSTER].response
        live = self.controller.live_brokers
        brokers = [resp.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port,
                                              rack=b.rack, is_fenced=b.node_id not in live)
                   for _, b in sorted(self.controller.image.brokers.items())
                   if b.node_id in live or (version >= 2 and request.include_fenced_brokers)]
        return resp(throttle_time_ms=0, error_code=0, endpoint_type=1,
                    cluster_id=self.controller.image.cluster_id or "",
                    controller_id=self.node_id, brokers=brokers)

    async def _fetch(self, request: TopLevel, version: int) -> TopLevel:
        """``__cluster_metadata``-0 only; long-polls up to max_wait_ms for the next batch."""
        resp = API_BY_KEY[ApiKey.FETCH].response
        stream = self.stream
        assert stream is not None

        def error(t: Message, p: Message) -> ErrorCode:
            if t.topic != METADATA_TOPIC or p.partition != 0:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if p.current_leader_epoch not in (-1, stream.epoch):
                return (ErrorCode.FENCED_LEADER_EPOCH if p.current_leader_epoch < stream.epoch
                        else ErrorCode.UNKNOWN_LEADER_EPOCH)
            if not 0 <= p.fetch_offset <= stream.end_offset:
                return ErrorCode.OFFSET_OUT_OF_RANGE
            return ErrorCode.NONE

        asked = [(t, p) for t in request.topics for p in t.partitions]
        # wait only when every partition asked for is valid and at the end; an error (a
        # broker still on a previous controller's stream) is answered at once
        if asked and all(error(t, p) == ErrorCode.NONE and p.fetch_offset == stream.end_offset
                         for t, p in asked):
            await stream.wait_beyond(asked[0][1].fetch_offset, request.max_wait_ms / 1000)
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                out = resp.PartitionData(partition_index=p.partition, high_watermark=-1)
                code = error(t, p)
                if code != ErrorCode.NONE:
                    out.error_code = int(code)
                else:
                    out.high_watermark = out.last_stable_offset = stream.end_offset
                    out.log_start_offset = 0
                    if p.fetch_offset < stream.end_offset:
                        out.records = stream.read(p.fetch_offset, p.partition_max_bytes)
                out.current_leader = resp.LeaderIdAndEpoch(leader_id=self.node_id,
                                                           leader_epoch=stream.epoch)
                parts.append(out)
            topics.append(resp.FetchableTopicResponse(topic=t.topic, partitions=parts))
        return resp(throttle_time_ms=0, error_code=0, responses=topics)
