"""The RPC form of the ``ControllerChannel``: a broker in another process than the
controller (``process.roles=broker``) reaches it at ``controller.quorum.voters``.

Writes are Kafka's controller messages (BrokerRegistration, BrokerHeartbeat,
AllocateProducerIds, AlterPartition) and the topic/config requests a KRaft broker
forwards (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs with the whole new
config set, which is the channel's replace semantics). Metadata arrives by fetching
``__cluster_metadata``-0 from the controller (``metadata_wire``), long-polling.

Threads: the ``ControllerChannel`` methods are called on the broker's event loop. The
network side runs on the channel's own ``EventLoopThread``: the metadata fetch loop and the
heartbeat loop live there. ``alter_partition``, the write made while serving (ISR changes
under load, when a broker or the controller may be down), never blocks the broker's loop:
it returns a future the channel's thread completes. The other writes (rare: topic changes,
producer-id blocks) block the broker's loop for their round trip: at most a couple of
heartbeat intervals when the controller cannot be reached, after which the write fails
with REQUEST_TIMED_OUT, which clients retry.

Invariants:
- listeners get every fetched record exactly once, in offset order, and only on the
  broker's loop (``_drain``); records are de-duplicated by offset, so the fetch loop and
  a write's catch-up may fetch the same range;
- a write returns after the records it committed were delivered: the controller answers
  after committing, and the write then fetches up to the stream's end (``_fetch_to_end``),
  so a handler reads its own change in the metadata cache; an ``alter_partition`` future
  completes after the fetch scheduled their delivery on the broker's loop, so its callback
  (scheduled there after them) runs after they were applied;
- after a controller restart (a new controller epoch: the fetch is refused with
  FENCED_LEADER_EPOCH) the stream is read again from offset 0, and listeners get one
  batch that turns the old picture into the new one: fences for brokers no longer live,
  removals of topics that are gone, then the new full image;
- heartbeats every ``broker.heartbeat.interval.ms``; a STALE_BROKER_EPOCH answer (the
  controller does not know this registration) registers again with a new broker epoch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from sparklog.broker.config import BrokerConfig
from sparklog.broker.controller_channel import MetadataListener
from sparklog.broker.metadata_cache import (
    MetadataCache,
    MetadataRecord,
    PartitionInfo,
    TopicInfo,
    fence_record,
)
from sparklog.broker.metadata_wire import METADATA_TOPIC, decode_metadata_batches
from sparklog.client.connection import (
    BrokerConnection,
    EventLoopThread,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import (
    ErrorCode,
    KafkaError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from sparklog.protocol.messages import API_BY_KEY
from sparklog.protocol.messages.admin import RESOURCE_BROKER, RESOURCE_TOPIC
from sparklog.protocol.schema import TopLevel

log = logging.getLogger(__name__)

__all__ = ["RpcControllerChannel"]

T = TypeVar("T")

_RELOAD = {int(ErrorCode.FENCED_LEADER_EPOCH), int(ErrorCode.UNKNOWN_LEADER_EPOCH),
           int(ErrorCode.OFFSET_OUT_OF_RANGE)}
_FETCH_WAIT_MS = 5000
_FETCH_MAX_BYTES = 8 << 20
_RETRY_S = 0.2


def _request(key: ApiKey, **fields: Any) -> TopLevel:
    return API_BY_KEY[key].request(**fields)


def _raise_for(code: int, message: str | None = None) -> None:
    if code:
        raise error_for_code(code, message)


class RpcControllerChannel:
    """``ControllerChannel`` over the network to the controller process."""

    def __init__(self, config: BrokerConfig) -> None:
        config.check_roles()
        voter = config.controller_voter()
        assert voter is not None, "check_roles: a broker-only node has a voter"
        self.controller_id, self.host, self.port = voter
        self.node_id = config.node_id
        self._heartbeat_s = int(config.get("broker.heartbeat.interval.ms")) / 1000
        self._timeout_s = max(30.0, int(config.get("broker.session.timeout.ms")) / 1000)
        # a write (and its catch-up) blocks the broker's loop: when the controller cannot
        # be reached within a couple of heartbeat intervals it fails with REQUEST_TIMED_OUT
        # (clients retry) rather than stalling every other request for the full timeout
        self._write_s = max(2.0, 2 * self._heartbeat_s)
        self._controlled_shutdown = bool(config.get("controlled.shutdown.enable"))
        self._thread: EventLoopThread | None = None
        self._broker_loop: asyncio.AbstractEventLoop | None = None
        self._conns: dict[str, BrokerConnection] = {}
        self._listeners: list[MetadataListener] = []
        self._mirror = MetadataCache()  # what the listeners were given (broker loop only)
        # fetch state, guarded by _lock: the offset after the last fetched record, the
        # controller epoch of the stream, fetched batches not delivered yet (reload?, records)
        self._lock = threading.Lock()
        self._fetched = 0
        self._epoch = -1
        self._reload_next = False
        self._pending: list[tuple[bool, list[MetadataRecord]]] = []
        self._incarnation = uuid.uuid4().bytes
        self._registration: tuple[str, int, str | None] | None = None
        self.broker_epoch = -1
        self._tasks: list[concurrent.futures.Future[None]] = []
        self._heartbeats: concurrent.futures.Future[None] | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def open(self) -> None:
        self._broker_loop = asyncio.get_running_loop()
        self._thread = EventLoopThread(f"sparklog-controller-channel-{self.node_id}")
        self._run(self._connection("rpc"))
        log.info("broker %d: controller %d at %s:%d reached", self.node_id,
                 self.controller_id, self.host, self.port)

    def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        for fut in self._tasks:
            fut.cancel()
        try:
            thread.run(self._close_connections(), timeout=5)
        except Exception:  # closing is best effort: the thread stops either way
            log.debug("closing controller connections failed", exc_info=True)
        thread.stop()

    async def _close_connections(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()

    def metadata_records(self) -> list[MetadataRecord]:
        self._catch_up(deliver=False)
        with self._lock:
            batches, self._pending = self._pending, []
        records = [r for _, batch in batches for r in batch]
        self._mirror.load(records)
        return records

    def add_listener(self, fn: MetadataListener) -> None:
        self._listeners.append(fn)
        if len(self._listeners) == 1:
            self._tasks.append(self._spawn(self._fetch_loop()))

    # -- the network side (the channel's loop) -------------------------------------------

    def _run(self, coro: Any, timeout_s: float | None = None) -> Any:
        assert self._thread is not None, "channel is not open"
        return self._thread.run(coro, timeout=timeout_s if timeout_s is not None
                                else self._timeout_s + _FETCH_WAIT_MS / 1000)

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        assert self._thread is not None, "channel is not open"
        return self._thread.spawn(coro)

    async def _connection(self, name: str, retry_s: float | None = None) -> BrokerConnection:
        """The named connection to the controller, (re)connecting for ``retry_s`` (default:
        the request timeout)."""
        conn = self._conns.get(name)
        if conn is not None and conn.connected:
            return conn
        deadline = time.monotonic() + (self._timeout_s if retry_s is None else retry_s)
        while True:
            conn = BrokerConnection(self.host, self.port, client_id=f"broker-{self.node_id}",
                                    node_id=self.controller_id,
                                    request_timeout_ms=int(self._timeout_s * 1000))
            try:
                await conn.connect(int(self._timeout_s * 1000))
                await self._negotiate(conn)
                self._conns[name] = conn
                return conn
            except (KafkaConnectionError, KafkaTimeoutError):
                await conn.close()
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(_RETRY_S)

    @staticmethod
    async def _negotiate(conn: BrokerConnection) -> None:
        """ApiVersions v0 (every server answers it): the versions the controller serves."""
        spec = API_BY_KEY[ApiKey.API_VERSIONS]
        raw = await conn.request(spec.key, 0, spec.request().encode(0), flexible_request=False,
                                 flexible_response=False)
        assert raw is not None
        resp = spec.response.decode(raw, 0)
        _raise_for(resp.error_code, f"ApiVersions to the controller at {conn.address}")
        conn.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    async def _send(self, name: str, request: TopLevel, *, timeout_ms: int | None = None,
                    retry_s: float | None = None) -> Any:
        """One request on connection ``name`` at the newest version both sides serve; a lost
        connection is retried for ``retry_s`` (default: the request timeout)."""
        spec = API_BY_KEY[request.API_KEY]
        deadline = time.monotonic() + (self._timeout_s if retry_s is None else retry_s)
        while True:
            conn = await self._connection(name, max(deadline - time.monotonic(), 0))
            theirs = conn.api_versions.get(spec.key)
            if theirs is None or theirs[0] > spec.max_version:
                raise UnsupportedVersionError(
                    f"the controller at {conn.address} does not serve {spec.name}")
            v = min(spec.max_version, theirs[1])
            body = request.encode(v)
            try:
                raw = await conn.request(spec.key, v, body, flexible_request=spec.is_flexible(v),
                                         flexible_response=spec.response_header_version(v) == 1,
                                         timeout_ms=timeout_ms)
                assert raw is not None
                return spec.response.decode(raw, v)
            except (KafkaConnectionError, KafkaTimeoutError):
                await conn.close()
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(_RETRY_S)

    async def _fetch_once(self, name: str, wait_ms: int, retry_s: float | None = None) -> int:
        """Fetch from the stream's next offset; returns the controller's end offset (-1
        when the stream must be read again from the start)."""
        with self._lock:
            offset, epoch = self._fetched, self._epoch
        topic = API_BY_KEY[ApiKey.FETCH].request.FetchTopic
        req = _request(ApiKey.FETCH, max_wait_ms=wait_ms, min_bytes=1,
                       max_bytes=_FETCH_MAX_BYTES, topics=[topic(
                           topic=METADATA_TOPIC, partitions=[topic.FetchPartition(
                               partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                               partition_max_bytes=_FETCH_MAX_BYTES)])])
        resp = await self._send(name, req, retry_s=retry_s, timeout_ms=int(
            (self._timeout_s if retry_s is None else retry_s) * 1000) + wait_ms)
        p = resp.responses[0].partitions[0]
        if p.error_code in _RELOAD:
            log.info("broker %d: the controller's metadata stream changed (%s): reading it "
                     "again from the start", self.node_id, ErrorCode.for_code(p.error_code).name)
            with self._lock:
                self._fetched, self._epoch, self._reload_next = 0, -1, True
            return -1
        _raise_for(p.error_code)
        with self._lock:
            if self._epoch != epoch or self._fetched < offset:
                return -1  # a reload started meanwhile: this answer is from before it
            records, end, got_epoch = decode_metadata_batches(p.records or b"", self._fetched)
            if records:
                self._pending.append((self._reload_next, records))
                self._reload_next = False
            self._fetched = end
            if got_epoch >= 0:
                self._epoch = got_epoch
        if records and self._listeners and self._broker_loop is not None:
            self._broker_loop.call_soon_threadsafe(self._drain)
        return p.high_watermark

    async def _fetch_loop(self) -> None:
        while True:
            try:
                await self._fetch_once("fetch", _FETCH_WAIT_MS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the loop outlives controller restarts
                log.warning("broker %d: metadata fetch from the controller failed: %s",
                            self.node_id, exc)
                await asyncio.sleep(_RETRY_S)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            try:
                with self._lock:
                    offset = self._fetched
                resp = await self._send("rpc", _request(
                    ApiKey.BROKER_HEARTBEAT, broker_id=self.node_id,
                    broker_epoch=self.broker_epoch, current_metadata_offset=offset))
                if resp.error_code == ErrorCode.STALE_BROKER_EPOCH:
                    log.warning("broker %d: the controller does not know broker epoch %d: "
                                "registering again", self.node_id, self.broker_epoch)
                    await self._register()
                elif resp.error_code:
                    log.warning("broker %d: heartbeat refused: %s", self.node_id,
                                ErrorCode.for_code(resp.error_code).name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep heartbeating through outages
                log.warning("broker %d: heartbeat to the controller failed: %s",
                            self.node_id, exc)

    async def _register(self) -> int:
        assert self._registration is not None
        host, port, rack = self._registration
        listener = API_BY_KEY[ApiKey.BROKER_REGISTRATION].request.Listener
        resp = await self._send("rpc", _request(
            ApiKey.BROKER_REGISTRATION, broker_id=self.node_id,
            cluster_id=self._mirror.cluster_id, incarnation_id=self._incarnation,
            listeners=[listener(name="PLAINTEXT", host=host, port=port, security_protocol=0)],
            rack=rack, previous_broker_epoch=self.broker_epoch))
        _raise_for(resp.error_code, f"broker {self.node_id} registration")
        self.broker_epoch = resp.broker_epoch
        log.info("broker %d registered with the controller (broker epoch %d)", self.node_id,
                 self.broker_epoch)
        return self.broker_epoch

    # -- delivery (the broker's loop) -----------------------------------------------------

    def _catch_up(self, *, deliver: bool = True) -> None:
        """Fetch until the stream's end as of now, then deliver what is pending."""
        self._run(self._fetch_to_end(), 2 * self._write_s + 1)
        if deliver:
            self._drain()

    async def _fetch_to_end(self) -> None:
        """Fetch (on the channel's loop) until the stream's end as of now."""
        while True:
            end = await asyncio.wait_for(self._fetch_once("rpc", 0, self._write_s),
                                         self._write_s + 1)
            with self._lock:
                if end >= 0 and self._fetched >= end:
                    return

    def _drain(self) -> None:
        with self._lock:
            batches, self._pending = self._pending, []
        for reload, records in batches:
            if reload:
                records = self._reload_batch(records)
            self._mirror.apply(records)
            for fn in self._listeners:
                fn(records)

    def _reload_batch(self, snapshot: list[MetadataRecord]) -> list[MetadataRecord]:
        """``snapshot`` (a restarted controller's full stream start) as one batch that takes
        a cache from the old picture to the new one."""
        fresh = MetadataCache()
        fresh.load(snapshot)
        gone_brokers = sorted(self._mirror.live_brokers - fresh.live_brokers)
        gone_topics = [name for name, t in self._mirror.topics().items()
                       if (new := fresh.topic(name)) is None or new.topic_id != t.topic_id]
        return ([fence_record(n) for n in gone_brokers]
                + [{"type": "remove_topic", "name": name} for name in gone_topics]
                + snapshot)

    # -- the channel's writes --------------------------------------------------------------

    async def _write_on_channel(self, request: TopLevel) -> Any:
        """``request``, then the stream up to its end (on the channel's loop); a controller
        that does not answer within ``_write_s`` is REQUEST_TIMED_OUT, which clients retry."""
        try:
            resp = await asyncio.wait_for(self._send(
                "rpc", request, timeout_ms=int(self._write_s * 1000), retry_s=self._write_s),
                self._write_s + 1)
            await self._fetch_to_end()
        except (KafkaConnectionError, KafkaTimeoutError, TimeoutError) as exc:
            raise RequestTimedOutError(
                f"the controller at {self.host}:{self.port} did not answer: {exc}") from None
        return resp

    def _write(self, request: TopLevel) -> Any:
        """A write that blocks the broker's loop until its records were delivered."""
        try:
            resp = self._run(self._write_on_channel(request), 3 * self._write_s + 3)
        except KafkaTimeoutError as exc:
            raise RequestTimedOutError(
                f"the controller at {self.host}:{self.port} did not answer: {exc}") from None
        self._drain()
        return resp

    def register_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> int:
        self._registration = (host, port, rack)
        epoch: int = self._run(self._register())
        self._catch_up()
        if self._heartbeats is None:
            self._heartbeats = self._spawn(self._heartbeat_loop())
            self._tasks.append(self._heartbeats)
        return epoch

    def unregister_broker(self, node_id: int) -> None:
        """Controlled shutdown: heartbeats stop, one last heartbeat asks to shut down and
        the controller moves this broker's leaderships away before answering."""
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            self._heartbeats = None
        if not self._controlled_shutdown or self.broker_epoch < 0:
            return
        try:
            # bounded by a couple of heartbeat intervals: a controller that is gone must not
            # hold the broker's exit for the whole request timeout
            bound = 2 * self._heartbeat_s
            resp = self._run(self._send("rpc", _request(
                ApiKey.BROKER_HEARTBEAT, broker_id=self.node_id, broker_epoch=self.broker_epoch,
                current_metadata_offset=self._fetched, want_shut_down=True),
                timeout_ms=int(bound * 1000), retry_s=bound))
            _raise_for(resp.error_code)
            log.info("broker %d: controlled shutdown done (should_shut_down=%s)", self.node_id,
                     resp.should_shut_down)
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
            log.warning("broker %d: controlled shutdown failed (%s); stopping anyway",
                        self.node_id, exc)

    def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        resp = self._write(_request(ApiKey.ALLOCATE_PRODUCER_IDS, broker_id=self.node_id,
                                    broker_epoch=self.broker_epoch))
        _raise_for(resp.error_code, "AllocateProducerIds")
        return resp.producer_id_start, resp.producer_id_len

    def alter_partition(self, node_id: int, broker_epoch: int, topic: str, partition: int,
                        leader_epoch: int, partition_epoch: int, isr: list[int]
                        ) -> concurrent.futures.Future[PartitionInfo]:
        """AlterPartition v3 for one partition, answered by the returned future (completed
        on the channel's thread: the broker's loop goes on serving meanwhile); sent with
        this channel's current broker epoch (``broker_epoch`` may predate a
        re-registration after a controller restart)."""
        info = self._mirror.topic(topic)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} is not in the metadata")
        cls = API_BY_KEY[ApiKey.ALTER_PARTITION].request
        part = cls.TopicData.PartitionData(
            partition_index=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
            new_isr_with_epochs=[cls.TopicData.PartitionData.BrokerState(broker_id=b)
                                 for b in isr])
        request = cls(broker_id=node_id, broker_epoch=self.broker_epoch, topics=[
            cls.TopicData(topic_name=topic, topic_id=info.topic_id, partitions=[part])])
        # the replicas as of the proposal: the mirror belongs to the broker's loop
        replicas = list(info.partitions[partition].replicas) \
            if partition in info.partitions else []
        return self._spawn(self._alter_partition(request, topic, partition, replicas))

    async def _alter_partition(self, request: TopLevel, topic: str, partition: int,
                               replicas: list[int]) -> PartitionInfo:
        resp = await self._write_on_channel(request)
        _raise_for(resp.error_code, "AlterPartition")
        got = resp.topics[0].partitions[0]
        _raise_for(got.error_code, f"AlterPartition {topic}-{partition}")
        return PartitionInfo(topic, partition, replicas, list(got.isr), got.leader_id,
                             got.leader_epoch, got.partition_epoch)

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     internal: bool = False, validate_only: bool = False) -> TopicInfo:
        cls = API_BY_KEY[ApiKey.CREATE_TOPICS].request.CreatableTopic
        topic = cls(name=name, num_partitions=num_partitions,
                    replication_factor=replication_factor,
                    assignments=[cls.CreatableReplicaAssignment(partition_index=p,
                                                                broker_ids=list(b))
                                 for p, b in sorted((assignments or {}).items())],
                    configs=[cls.CreatableTopicConfig(name=k, value=v)
                             for k, v in (configs or {}).items()])
        resp = self._write(_request(ApiKey.CREATE_TOPICS, topics=[topic],
                                    timeout_ms=int(self._timeout_s * 1000),
                                    validate_only=validate_only))
        got = resp.topics[0]
        _raise_for(got.error_code, got.error_message)
        if validate_only:
            # what would be created: the answer says how many partitions and replicas
            replicas = [-1] * max(got.replication_factor, 0)
            return TopicInfo(name, got.topic_id, dict(configs or {}), internal, {
                p: PartitionInfo(name, p, list(replicas), [], -1)
                for p in range(got.num_partitions)})
        info = self._mirror.topic(name)
        assert info is not None, "a created topic is in the metadata once caught up"
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        before = self._mirror.topic(name)
        resp = self._write(_request(
            ApiKey.DELETE_TOPICS, timeout_ms=int(self._timeout_s * 1000),
            topics=[API_BY_KEY[ApiKey.DELETE_TOPICS].request.DeleteTopicState(name=name)]))
        got = resp.responses[0]
        _raise_for(got.error_code, got.error_message)
        return before if before is not None else TopicInfo(name, got.topic_id)

    def create_partitions(self, name: str, total: int,
                          assignments: Sequence[Sequence[int]] | None = None, *,
                          validate_only: bool = False) -> TopicInfo:
        cls = API_BY_KEY[ApiKey.CREATE_PARTITIONS].request.CreatePartitionsTopic
        topic = cls(name=name, count=total, assignments=None if assignments is None else [
            cls.CreatePartitionsAssignment(broker_ids=list(b)) for b in assignments])
        resp = self._write(_request(ApiKey.CREATE_PARTITIONS, topics=[topic],
                                    timeout_ms=int(self._timeout_s * 1000),
                                    validate_only=validate_only))
        got = resp.results[0]
        _raise_for(got.error_code, got.error_message)
        info = self._mirror.topic(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return info

    def elect_leaders(self, election_type: int,
                      partitions: Mapping[str, Sequence[int]] | None = None
                      ) -> dict[tuple[str, int], KafkaError | None]:
        cls = API_BY_KEY[ApiKey.ELECT_LEADERS].request
        resp = self._write(cls(election_type=election_type, topic_partitions=None
                               if partitions is None else [
                                   cls.TopicPartitions(topic=t, partitions=list(ps))
                                   for t, ps in partitions.items()]))
        _raise_for(resp.error_code, "ElectLeaders")
        return {(t.topic, p.partition_id): error_for_code(p.error_code, p.error_message)
                if p.error_code else None
                for t in resp.replica_election_results for p in t.partition_result}

    def alter_partition_reassignments(
            self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]:
        cls = API_BY_KEY[ApiKey.ALTER_PARTITION_REASSIGNMENTS].request.ReassignableTopic
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append(cls.ReassignablePartition(
                partition_index=partition, replicas=None if replicas is None else list(replicas)))
        resp = self._write(_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, topics=[
            cls(name=t, partitions=ps) for t, ps in by_topic.items()]))
        _raise_for(resp.error_code, resp.error_message)
        return {(t.name, p.partition_index): error_for_code(p.error_code, p.error_message)
                if p.error_code else None
                for t in resp.responses for p in t.partitions}

    def _alter_configs(self, resource_type: int, name: str, configs: Mapping[str, str]) -> None:
        cls = API_BY_KEY[ApiKey.ALTER_CONFIGS].request.AlterConfigsResource
        resp = self._write(_request(ApiKey.ALTER_CONFIGS, resources=[cls(
            resource_type=resource_type, resource_name=name,
            configs=[cls.AlterableConfig(name=k, value=v) for k, v in configs.items()])]))
        got = resp.responses[0]
        _raise_for(got.error_code, got.error_message)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._alter_configs(RESOURCE_TOPIC, name, configs)

    def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        self._alter_configs(RESOURCE_BROKER, entity, configs)
