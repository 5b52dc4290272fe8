"""The async heart of sparklog's client: connections per broker, version negotiation,
metadata, and request sending with retries. Producer, Consumer and AdminClient each own one
``AsyncClient`` living on their private ``EventLoopThread``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterable
from typing import Any

from sparklog.client.connection import (
    BrokerConnection,
    KafkaConnectionError,
    KafkaTimeoutError,
    parse_host_port,
    send_request,
)
from sparklog.client.metadata import ClusterMetadata, TopicMetadata
from sparklog.protocol.errors import (
    ErrorCode,
    KafkaError,
    SparklogError,
    UnsupportedVersionError,
    error_for_code,
)
from sparklog.protocol.messages import API_BY_KEY
from sparklog.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sparklog.protocol.messages.metadata import MetadataRequest
from sparklog.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["AsyncClient", "ClientConfig", "conf_bool", "conf_int", "parse_isolation"]

# Highest version this client sends per API, where a newer version changes the request's
# shape and the client fills only the older one: Fetch stays on topic names (v13+ uses ids),
# FindCoordinator on one key (v4+ batches keys), OffsetFetch on one group (v8+ batches
# groups), DeleteTopics on names (v6+ takes topic states), AddPartitionsToTxn on the
# client form (v4+ is the broker-batched form).
_CLIENT_MAX = {1: 12, 10: 3, 9: 7, 20: 5, 24: 3}

# errors after which cached metadata is presumed stale
STALE_METADATA = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_ID,
})


def conf_bool(conf: dict[str, Any], name: str, default: bool) -> bool:
    v = conf.get(name)
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes", "on"):
        return True
    if s in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"config {name}: expected true/false, got {v!r}")


def conf_int(conf: dict[str, Any], name: str, default: int) -> int:
    v = conf.get(name)
    if v is None:
        return default
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ValueError(f"config {name}: expected an integer, got {v!r}") from None


def parse_isolation(value: object) -> int:
    """``isolation.level`` as the wire's int: 0 read_uncommitted (the default), 1 read_committed."""
    s = str(value or "read_uncommitted").lower()
    if s not in ("read_uncommitted", "read_committed"):
        raise ValueError(
            f"isolation.level must be read_uncommitted or read_committed, got {value!r}")
    return 1 if s == "read_committed" else 0


class ClientConfig:
    """The connection-level settings every client shares (Kafka names and defaults)."""

    def __init__(self, conf: dict[str, Any]) -> None:
        servers = conf.get("bootstrap.servers") or conf.get("metadata.broker.list")
        if not servers:
            raise ValueError("config bootstrap.servers is required")
        self.bootstrap = [parse_host_port(s) for s in str(servers).split(",") if s.strip()]
        self.client_id = str(conf.get("client.id", "sparklog"))
        self.request_timeout_ms = conf_int(conf, "request.timeout.ms", 30000)
        self.retry_backoff_ms = conf_int(conf, "retry.backoff.ms", 100)
        self.metadata_max_age_ms = conf_int(conf, "metadata.max.age.ms", 300000)
        self.connect_timeout_ms = conf_int(conf, "socket.connection.setup.timeout.ms", 10000)
        self.allow_auto_create_topics = conf_bool(conf, "allow.auto.create.topics", True)


class AsyncClient:
    """Connections, versions and metadata. All methods run on one event loop."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.config = ClientConfig(conf)
        self.metadata = ClusterMetadata()
        self._conns: dict[int, BrokerConnection] = {}
        self._bootstrap_conns: dict[tuple[str, int], BrokerConnection] = {}
        self._connecting: dict[Any, asyncio.Future] = {}
        self._metadata_lock: asyncio.Lock | None = None
        self._closed = False

    # ------------------------------------------------------------------ connections

    async def _open(self, host: str, port: int, node_id: int) -> BrokerConnection:
        conn = BrokerConnection(host, port, client_id=self.config.client_id, node_id=node_id,
                                request_timeout_ms=self.config.request_timeout_ms)
        await conn.connect(self.config.connect_timeout_ms)
        try:
            await self._negotiate(conn)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _negotiate(self, conn: BrokerConnection) -> None:
        # v0 is understood by every broker; the answer lists all ranges
        body = ApiVersionsRequest().encode(0)
        raw = await conn.request(18, 0, body, flexible_request=False, flexible_response=False,
                                 timeout_ms=self.config.request_timeout_ms)
        resp = ApiVersionsResponse.decode(raw, 0)
        if resp.error_code:
            raise error_for_code(resp.error_code, f"ApiVersions to {conn.address}")
        conn.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    async def _cached(self, key: Any, store: dict, opener) -> BrokerConnection:
        conn = store.get(key)
        if conn is not None and conn.connected:
            return conn
        fut = self._connecting.get(key)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._connecting[key] = fut
        try:
            conn = await opener()
            store[key] = conn
            fut.set_result(conn)
            return conn
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # mark retrieved
            raise
        finally:
            self._connecting.pop(key, None)

    async def connection(self, node_id: int) -> BrokerConnection:
        if self._closed:
            raise SparklogError("client is closed")
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            await self.refresh_metadata([])
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return await self._cached(node_id, self._conns,
                                  lambda: self._open(broker.host, broker.port, node_id))

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: a live one if any, else the brokers we know, else
        the bootstrap list (tried in random order)."""
        if self._closed:
            raise SparklogError("client is closed")
        live = [c for c in self._conns.values() if c.connected]
        if live:
            return min(live, key=lambda c: c.in_flight)
        last: BaseException | None = None
        for node_id in list(self.metadata.brokers):
            try:
                return await self.connection(node_id)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                last = e
        boot = list(self.config.bootstrap)
        random.shuffle(boot)
        for host, port in boot:
            try:
                return await self._cached((host, port), self._bootstrap_conns,
                                          lambda h=host, p=port: self._open(h, p, -1))
            except (KafkaConnectionError, KafkaTimeoutError, KafkaError) as e:
                last = e
        addrs = ",".join(f"{h}:{p}" for h, p in self.config.bootstrap)
        raise KafkaConnectionError(f"no broker reachable (bootstrap.servers={addrs}): {last}")

    def pick_version(self, conn: BrokerConnection, api_key: int) -> int:
        spec = API_BY_KEY[api_key]
        ours = (spec.min_version, min(spec.max_version, _CLIENT_MAX.get(api_key, 1 << 15)))
        theirs = conn.api_versions.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker {conn.address} does not support {spec.name} (api key {api_key})")
        lo, hi = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if lo > hi:
            raise UnsupportedVersionError(
                f"no common {spec.name} version: client v{ours[0]}-{ours[1]}, "
                f"broker {conn.address} v{theirs[0]}-{theirs[1]}")
        return hi

    def supports(self, conn: BrokerConnection, api_key: int) -> bool:
        try:
            self.pick_version(conn, api_key)
            return True
        except UnsupportedVersionError:
            return False

    async def send(self, conn: BrokerConnection, request: Any, *, version: int | None = None,
                   expect_response: bool = True, timeout_ms: int | None = None) -> Any:
        """Encode ``request`` at the best common version, send it, decode the response."""
        v = self.pick_version(conn, request.API_KEY) if version is None else version
        return await send_request(conn, request, v, expect_response=expect_response,
                                  timeout_ms=timeout_ms)

    async def send_any(self, request: Any, **kw: Any) -> Any:
        """Send to any broker. One that dies under the request (which closes its
        connection, so ``any_connection`` picks another) is not final: the request goes to
        the next one, as a Kafka client's goes to its next least loaded node, until
        request.timeout.ms; no broker reachable at all is."""
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        while True:
            conn = await self.any_connection()
            try:
                return await self.send(conn, request, **kw)
            except (KafkaConnectionError, KafkaTimeoutError):
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    async def send_node(self, node_id: int, request: Any, **kw: Any) -> Any:
        conn = await self.connection(node_id)
        return await self.send(conn, request, **kw)

    async def send_controller(self, request: Any, **kw: Any) -> Any:
        """Send to the broker the metadata names as controller (every broker forwards
        controller writes). A cached controller that died is not final: the metadata is
        refreshed from a live broker and the request goes where it now points."""
        if self.metadata.controller_id < 0 or not self.metadata.brokers:
            await self.refresh_metadata([])
        cid = self.metadata.controller_id
        if cid >= 0 and cid in self.metadata.brokers:
            try:
                return await self.send_node(cid, request, **kw)
            except (KafkaConnectionError, KafkaTimeoutError):
                await self.refresh_metadata([])
                cid = self.metadata.controller_id
                if cid >= 0 and cid in self.metadata.brokers:
                    return await self.send_node(cid, request, **kw)
        return await self.send_any(request, **kw)

    # ------------------------------------------------------------------ metadata

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                               allow_auto_create: bool | None = None) -> dict[str, TopicMetadata]:
        """Fetch metadata for ``topics`` (None = all topics, [] = brokers only)."""
        if self._metadata_lock is None:
            self._metadata_lock = asyncio.Lock()
        names = None if topics is None else sorted(set(topics))
        auto = self.config.allow_auto_create_topics if allow_auto_create is None \
            else allow_auto_create
        req_topics = None if names is None else [
            MetadataRequest.MetadataRequestTopic(name=n) for n in names]
        req = MetadataRequest(topics=req_topics, allow_auto_topic_creation=auto)
        async with self._metadata_lock:
            resp = await self.send_any(req)
            return self.metadata.update(resp, full=names is None)

    async def topic_metadata(self, topic: str, *, max_wait_ms: int | None = None,
                             auto_create: bool | None = None) -> TopicMetadata:
        """Metadata of one topic, refreshing (and waiting for auto-creation / leaders) up
        to ``max_wait_ms``."""
        tm = self.metadata.topics.get(topic)
        if tm is not None and tm.partitions and self._fresh():
            return tm
        deadline = time.monotonic() + (max_wait_ms if max_wait_ms is not None
                                       else self.config.request_timeout_ms) / 1000
        delay = self.config.retry_backoff_ms / 1000
        while True:
            seen = await self.refresh_metadata([topic], allow_auto_create=auto_create)
            tm = seen.get(topic)
            if tm is not None and tm.error == 0 and tm.partitions:
                return tm
            code = tm.error if tm is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            err = error_for_code(code, f"topic {topic!r}: {ErrorCode.for_code(code).name}")
            if not err.retriable or time.monotonic() + delay > deadline:
                raise err
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _fresh(self) -> bool:
        return (time.monotonic() - self.metadata.updated_at) * 1000 < \
            self.config.metadata_max_age_ms

    def cached_leader(self, tp: TopicPartition) -> int | None:
        """The node id leading ``tp`` if the cached metadata knows it and is younger than
        metadata.max.age.ms (what ``leader_id(tp, fresh=True)`` answers without a round
        trip), else None."""
        return self.metadata.leader_for(tp) if self._fresh() else None

    async def leader_id(self, tp: TopicPartition, *, fresh: bool = False) -> int:
        """The node id leading ``tp``, from metadata (fetched again when the partition has no
        known leader, or with ``fresh`` when the cached metadata is older than
        metadata.max.age.ms). Raises UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE."""
        leader = self.metadata.leader_for(tp)
        if leader is None or (fresh and not self._fresh()):
            await self.topic_metadata(tp.topic)
            leader = self.metadata.leader_for(tp)
            if leader is None:
                tm = self.metadata.topics.get(tp.topic)
                if tm is not None and tp.partition not in tm.partitions:
                    raise error_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                         f"{tp.topic}-{tp.partition} does not exist")
                raise error_for_code(ErrorCode.LEADER_NOT_AVAILABLE,
                                     f"no leader for {tp.topic}-{tp.partition}")
        return leader

    async def leader_connection(self, tp: TopicPartition) -> BrokerConnection:
        return await self.connection(await self.leader_id(tp, fresh=True))

    def invalidate(self) -> None:
        """Mark the cache stale so the next lookup refreshes it."""
        self.metadata.updated_at = float("-inf")

    async def close(self) -> None:
        self._closed = True
        conns = list(self._conns.values()) + list(self._bootstrap_conns.values())
        self._conns.clear()
        self._bootstrap_conns.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
