"""AdminClient: topics, configs, offsets, groups and the cluster, with Kafka's semantics.

Each call is one (or a few) requests to the right broker: topic changes to the controller,
offsets to partition leaders, group operations to the group's coordinator. Errors come back
as the typed exceptions of ``sparklog.protocol.errors``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sparklog.client.assignors import decode_assignment
from sparklog.client.core import parse_isolation
from sparklog.client.group_rpc import commit_offsets, fetch_committed, find_coordinator
from sparklog.client.list_offsets import EARLIEST, LATEST, MAX_TIMESTAMP, list_offsets
from sparklog.client.metadata import BrokerMetadata, TopicMetadata
from sparklog.client.sync_client import SyncClient
from sparklog.client.transactions import PreparedTxnState, recover_prepared
from sparklog.protocol.errors import ErrorCode, KafkaError, error_for_code
from sparklog.protocol.messages.admin import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from sparklog.protocol.messages.groups import (
    KEY_TYPE_TRANSACTION,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from sparklog.protocol.messages.metadata import DescribeClusterRequest
from sparklog.protocol.messages.replicas import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from sparklog.protocol.messages.transactions import (
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from sparklog.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["AdminClient", "NewTopic", "OffsetSpec", "ConfigEntry", "GroupDescription",
           "MemberDescription", "ClusterDescription", "PartitionReassignment"]

_OP_SET, _OP_DELETE = 0, 1  # IncrementalAlterConfigs' operations
_CONFIG_SOURCES = {-1: "UNKNOWN", 0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG",
                   2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                   4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                   6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG",
                   8: "GROUP_CONFIG"}


@dataclass
class NewTopic:
    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    config: dict[str, str] = field(default_factory=dict)
    replica_assignment: dict[int, list[int]] | None = None


class OffsetSpec:
    """ListOffsets specs: the special timestamps Kafka defines, or a timestamp in ms."""

    EARLIEST = EARLIEST
    LATEST = LATEST
    MAX_TIMESTAMP = MAX_TIMESTAMP

    @staticmethod
    def earliest() -> int:
        return EARLIEST

    @staticmethod
    def latest() -> int:
        return LATEST

    @staticmethod
    def max_timestamp() -> int:
        return MAX_TIMESTAMP

    @staticmethod
    def for_timestamp(ts_ms: int) -> int:
        if ts_ms < 0:
            raise ValueError("timestamp must be >= 0")
        return ts_ms


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool = False
    source: str = "UNKNOWN"
    is_sensitive: bool = False
    # (source, name, value) of every layer that sets it, highest precedence first; filled
    # when describe_configs is asked for synonyms
    synonyms: list[tuple[str, str, str | None]] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.source in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG", "UNKNOWN")


@dataclass
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: list[TopicPartition]
    group_instance_id: str | None = None


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    error: int = 0
    coordinator: BrokerMetadata | None = None  # the broker that answered DescribeGroups


@dataclass(frozen=True)
class TransactionListing:
    """One transaction as ListTransactions reports it."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    """One transactional id as DescribeTransactions reports it (start -1: none open)."""

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    partitions: list[TopicPartition]


@dataclass
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerMetadata]
    # ids among ``brokers`` that are registered but fenced (only when asked for and the
    # broker serves DescribeCluster v2)
    fenced: frozenset[int] = frozenset()


@dataclass
class PartitionReassignment:
    """An ongoing reassignment: all replicas (targets and those leaving), the ones being
    added and the ones being removed."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class AdminClient(SyncClient):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(dict(config), "sparklog-admin")

    def _call(self, coro: Coroutine[Any, Any, T], timeout_ms: int | None = None) -> T:
        """Run ``coro`` within its timeout (request.timeout.ms by default) plus 10 s."""
        t = (timeout_ms or self._client.config.request_timeout_ms) / 1000 + 10
        return self._run(coro, t)

    # ------------------------------------------------------------------ topics

    def list_topics(self, timeout_ms: int | None = None,
                    topics: Iterable[str] | None = None) -> dict[str, TopicMetadata]:
        """Every topic (internal ones flagged) with partitions, leaders, replicas and ISR;
        with ``topics``, only those of them that exist (a Metadata request for just those:
        on a broker with thousands of partitions, asking for all of them costs both sides)."""
        names = None if topics is None else sorted(set(topics))
        seen = self._call(self._client.refresh_metadata(names, allow_auto_create=False),
                          timeout_ms)
        if names is None:
            return seen
        return {n: tm for n, tm in seen.items() if n in names and not tm.error}

    def describe_topics(self, names: list[str]) -> dict[str, TopicMetadata]:
        seen = self._call(self._client.refresh_metadata(names, allow_auto_create=False))
        for n in names:
            tm = seen.get(n)
            if tm is None or tm.error:
                code = tm.error if tm is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise error_for_code(code, f"Topic '{n}' does not exist" if code ==
                                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else f"topic {n!r}")
        return {n: seen[n] for n in names}

    def create_topics(self, topics: list[NewTopic], timeout_ms: int = 30000,
                      validate_only: bool = False) -> None:
        """Raises the first per-topic error (e.g. TopicAlreadyExistsError)."""
        req = CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(
                name=t.name,
                num_partitions=-1 if t.replica_assignment else t.num_partitions,
                replication_factor=-1 if t.replica_assignment else t.replication_factor,
                assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                    partition_index=p, broker_ids=b)
                    for p, b in sorted((t.replica_assignment or {}).items())],
                configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=str(v))
                         for k, v in t.config.items()])
            for t in topics], timeout_ms=timeout_ms, validate_only=validate_only)

        async def go() -> None:
            resp = await self._client.send_controller(req, timeout_ms=timeout_ms + 5000)
            for r in resp.topics:
                if r.error_code:
                    msg = r.error_message or _topic_error(r.error_code, r.name)
                    raise error_for_code(r.error_code, msg)
            self._client.invalidate()

        self._call(go(), timeout_ms)

    def delete_topics(self, names: list[str], timeout_ms: int = 30000) -> None:
        req = DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)

        async def go() -> None:
            resp = await self._client.send_controller(req, timeout_ms=timeout_ms + 5000)
            for r in resp.responses:
                if r.error_code:
                    raise error_for_code(r.error_code, _topic_error(r.error_code, r.name))
            self._client.invalidate()

        self._call(go(), timeout_ms)

    def create_partitions(self, new_totals: dict[str, int], timeout_ms: int = 30000,
                          validate_only: bool = False) -> None:
        req = CreatePartitionsRequest(topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=t, count=n, assignments=None)
            for t, n in new_totals.items()], timeout_ms=timeout_ms, validate_only=validate_only)

        async def go() -> None:
            resp = await self._client.send_controller(req, timeout_ms=timeout_ms + 5000)
            for r in resp.results:
                if r.error_code:
                    raise error_for_code(r.error_code, r.error_message or
                                         _topic_error(r.error_code, r.name))
            self._client.invalidate()

        self._call(go(), timeout_ms)

    # ------------------------------------------------------------------ leaders

    def elect_leaders(self, election_type: int = 0,
                      partitions: dict[str, list[int]] | None = None,
                      timeout_ms: int = 30000) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders: ``election_type`` 0 (preferred replica) or 1 (unclean), for
        ``partitions`` or (None) every partition, where Kafka then reports only those that
        needed an election. Each partition's error, None where a leader was elected."""
        req = ElectLeadersRequest(election_type=election_type, timeout_ms=timeout_ms,
                                  topic_partitions=None if partitions is None else [
                                      ElectLeadersRequest.TopicPartitions(topic=t,
                                                                          partitions=list(ps))
                                      for t, ps in partitions.items()])

        async def go() -> dict[TopicPartition, KafkaError | None]:
            resp = await self._client.send_controller(req, timeout_ms=timeout_ms + 5000)
            if resp.error_code:
                raise error_for_code(resp.error_code, "ElectLeaders")
            self._client.invalidate()
            return {TopicPartition(t.topic, p.partition_id):
                    error_for_code(p.error_code, p.error_message) if p.error_code else None
                    for t in resp.replica_election_results for p in t.partition_result}

        return self._call(go(), timeout_ms)

    def alter_partition_reassignments(self, targets: dict[TopicPartition, list[int] | None],
                                      timeout_ms: int = 30000
                                      ) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments: each partition's target replicas, or None to cancel
        its ongoing reassignment. Each partition's error, None where accepted."""
        cls = AlterPartitionReassignmentsRequest.ReassignableTopic
        by_topic: dict[str, list[Any]] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(cls.ReassignablePartition(
                partition_index=tp.partition, replicas=None if replicas is None else list(replicas)))
        req = AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=[
            cls(name=t, partitions=ps) for t, ps in by_topic.items()])

        async def go() -> dict[TopicPartition, KafkaError | None]:
            resp = await self._client.send_controller(req, timeout_ms=timeout_ms + 5000)
            if resp.error_code:
                raise error_for_code(resp.error_code, resp.error_message)
            self._client.invalidate()
            return {TopicPartition(t.name, p.partition_index):
                    error_for_code(p.error_code, p.error_message) if p.error_code else None
                    for t in resp.responses for p in t.partitions}

        return self._call(go(), timeout_ms)

    def list_partition_reassignments(self, partitions: dict[str, list[int]] | None = None,
                                     timeout_ms: int = 30000
                                     ) -> dict[TopicPartition, PartitionReassignment]:
        """ListPartitionReassignments: the ongoing reassignments (of ``partitions``, or all)."""
        cls = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
        req = ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=None
                                                if partitions is None else [
                                                    cls(name=t, partition_indexes=list(ps))
                                                    for t, ps in partitions.items()])

        async def go() -> dict[TopicPartition, PartitionReassignment]:
            resp = await self._client.send_controller(req, timeout_ms=timeout_ms + 5000)
            if resp.error_code:
                raise error_for_code(resp.error_code, resp.error_message)
            return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in resp.topics for p in t.partitions}

        return self._call(go(), timeout_ms)

    # ------------------------------------------------------------------ configs

    async def _send_config_request(self, rtype: int, name: str, req: Any, *,
                                   change: bool) -> Any:
        """A broker's configs are that broker's to answer (the empty name, the cluster
        default, any broker's); a topic's change goes to the controller, a read anywhere."""
        if rtype == RESOURCE_BROKER and name != "":
            return await self._client.send_node(int(name), req)
        if rtype == RESOURCE_TOPIC and change:
            return await self._client.send_controller(req)
        return await self._client.send_any(req)

    def describe_configs(self, name: str, resource_type: str = "topic",
                         keys: list[str] | None = None,
                         synonyms: bool = False) -> dict[str, ConfigEntry]:
        """Configs of a topic or a broker (its id, or "" for the cluster-wide dynamic
        defaults)."""
        rtype = RESOURCE_TOPIC if resource_type == "topic" else RESOURCE_BROKER
        req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=rtype, resource_name=str(name), configuration_keys=keys)],
            include_synonyms=synonyms)

        async def go() -> dict[str, ConfigEntry]:
            resp = await self._send_config_request(rtype, str(name), req, change=False)
            out: dict[str, ConfigEntry] = {}
            for r in resp.results:
                if r.error_code:
                    raise error_for_code(r.error_code, r.error_message or
                                         _topic_error(r.error_code, r.resource_name))
                for c in r.configs:
                    out[c.name] = ConfigEntry(
                        c.name, c.value, c.read_only,
                        _CONFIG_SOURCES.get(c.config_source, "UNKNOWN"), c.is_sensitive,
                        [(_CONFIG_SOURCES.get(y.source, "UNKNOWN"), y.name, y.value)
                         for y in c.synonyms])
            return out

        return self._call(go())

    def alter_configs(self, name: str, configs: dict[str, str | None],
                      resource_type: str = "topic") -> None:
        """Set (value) or delete (None) configs of a topic or a broker (its id, or "" for
        the cluster-wide default) with IncrementalAlterConfigs: the others stay as they
        are."""
        rtype = RESOURCE_TOPIC if resource_type == "topic" else RESOURCE_BROKER
        cls = IncrementalAlterConfigsRequest
        req = cls(resources=[cls.AlterConfigsResource(
            resource_type=rtype, resource_name=str(name),
            configs=[cls.AlterableConfig(name=k, value=v,
                                         config_operation=_OP_SET if v is not None else _OP_DELETE)
                     for k, v in configs.items()])], validate_only=False)

        async def go() -> None:
            resp = await self._send_config_request(rtype, str(name), req, change=True)
            for r in resp.responses:
                if r.error_code:
                    raise error_for_code(r.error_code, r.error_message or
                                         _topic_error(r.error_code, r.resource_name))

        self._call(go())

    # ------------------------------------------------------------------ offsets / records

    def list_offsets(self, specs: dict[TopicPartition, int],
                     isolation_level: str = "read_uncommitted"
                     ) -> dict[TopicPartition, tuple[int, int]]:
        """{tp: spec} (-2 earliest, -1 latest, -3 max timestamp, >= 0 timestamp) ->
        {tp: (offset, timestamp)}, offset -1 when no such record."""
        specs = {tp if type(tp) is TopicPartition else TopicPartition(tp[0], tp[1]): int(v)
                 for tp, v in specs.items()}
        return self._call(list_offsets(self._client, specs, parse_isolation(isolation_level)))

    def delete_records(self, before: dict[TopicPartition, int],
                       timeout_ms: int = 30000) -> dict[TopicPartition, int]:
        """Advance log start offsets; returns the new low watermarks."""
        async def go() -> dict[TopicPartition, int]:
            by_leader: dict[int, dict[TopicPartition, int]] = {}
            for tp, off in before.items():
                tp = TopicPartition(tp[0], tp[1])
                conn = await self._client.leader_connection(tp)
                by_leader.setdefault(conn.node_id, {})[tp] = off
            out: dict[TopicPartition, int] = {}
            for node, offs in by_leader.items():
                topics: dict[str, list] = {}
                for tp, off in offs.items():
                    topics.setdefault(tp.topic, []).append(
                        DeleteRecordsRequest.DeleteRecordsPartition(partition_index=tp.partition,
                                                                    offset=off))
                req = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                    name=t, partitions=ps) for t, ps in topics.items()], timeout_ms=timeout_ms)
                resp = await self._client.send_node(node, req)
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code:
                            raise error_for_code(p.error_code,
                                                 f"delete records {t.name}-{p.partition_index}")
                        out[TopicPartition(t.name, p.partition_index)] = p.low_watermark
            return out

        return self._call(go(), timeout_ms)

    # ------------------------------------------------------------------ groups

    def list_consumer_group_offsets(self, group: str,
                                    partitions: list[TopicPartition] | None = None
                                    ) -> dict[TopicPartition, int]:
        async def go() -> dict[TopicPartition, int]:
            conn = await find_coordinator(self._client, group)
            res = await fetch_committed(self._client, conn, group, partitions)
            return {tp: off for tp, off in res.items() if off >= 0}

        return self._call(go())

    def alter_consumer_group_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """A standalone commit (generation -1, no member id): the group must be empty."""
        offs = {TopicPartition(tp[0], tp[1]): int(o) for tp, o in offsets.items()}

        async def go() -> None:
            conn = await find_coordinator(self._client, group)
            await commit_offsets(self._client, conn, group, offs)

        self._call(go())

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) of every group on every broker."""
        async def go() -> list[tuple[str, str, str]]:
            await self._client.refresh_metadata([])
            out: dict[str, tuple[str, str, str]] = {}
            for node in list(self._client.metadata.brokers) or [-1]:
                conn = await (self._client.connection(node) if node >= 0
                              else self._client.any_connection())
                resp = await self._client.send(conn, ListGroupsRequest())
                if resp.error_code:
                    raise error_for_code(resp.error_code, "ListGroups")
                for g in resp.groups:
                    out[g.group_id] = (g.group_id, g.protocol_type,
                                       getattr(g, "group_state", "") or "")
            return sorted(out.values())

        return self._call(go())

    def describe_groups(self, groups: list[str]) -> list[GroupDescription]:
        async def go() -> list[GroupDescription]:
            out = []
            for g in groups:
                conn = await find_coordinator(self._client, g)
                resp = await self._client.send(conn, DescribeGroupsRequest(groups=[g]))
                for d in resp.groups:
                    if d.error_code:
                        raise error_for_code(d.error_code, f"group {d.group_id!r}")
                    members = []
                    for m in d.members:
                        try:
                            tps = decode_assignment(m.member_assignment) \
                                if d.protocol_type == "consumer" else []
                        except Exception:
                            tps = []
                        members.append(MemberDescription(m.member_id, m.client_id,
                                                         m.client_host, tps,
                                                         getattr(m, "group_instance_id", None)))
                    out.append(GroupDescription(
                        d.group_id, d.group_state, d.protocol_type, d.protocol_data, members,
                        coordinator=BrokerMetadata(conn.node_id, conn.host, conn.port)))
            return out

        return self._call(go())

    def delete_groups(self, groups: list[str]) -> None:
        async def go() -> None:
            for g in groups:
                conn = await find_coordinator(self._client, g)
                resp = await self._client.send(conn, DeleteGroupsRequest(groups_names=[g]))
                for r in resp.results:
                    if r.error_code:
                        raise error_for_code(r.error_code, _group_error(r.error_code, g))

        self._call(go())

    # ------------------------------------------------------------------ transactions

    def list_transactions(self, states: list[str] | None = None,
                          producer_ids: list[int] | None = None,
                          min_duration_ms: int = -1,
                          id_pattern: str | None = None) -> list[TransactionListing]:
        """ListTransactions on every broker (kafka-transactions.sh list); every filter
        given must match (``id_pattern``: a regular expression the whole id matches)."""
        async def go() -> list[TransactionListing]:
            await self._client.refresh_metadata([])
            out: list[TransactionListing] = []
            for node in list(self._client.metadata.brokers) or [-1]:
                conn = await (self._client.connection(node) if node >= 0
                              else self._client.any_connection())
                resp = await self._client.send(conn, ListTransactionsRequest(
                    state_filters=states or [], producer_id_filters=producer_ids or [],
                    duration_filter=min_duration_ms, transactional_id_pattern=id_pattern))
                if resp.error_code:
                    raise error_for_code(resp.error_code, "ListTransactions")
                out += [TransactionListing(t.transactional_id, t.producer_id,
                                           t.transaction_state, conn.node_id)
                        for t in resp.transaction_states]
            return sorted(out, key=lambda t: t.transactional_id)

        return self._call(go())

    def describe_transactions(self, transactional_ids: list[str]) -> list[TransactionDescription]:
        """DescribeTransactions at each id's coordinator (kafka-transactions.sh describe)."""
        async def go() -> list[TransactionDescription]:
            out = []
            for tid in transactional_ids:
                conn = await find_coordinator(self._client, tid, KEY_TYPE_TRANSACTION)
                resp = await self._client.send(conn, DescribeTransactionsRequest(
                    transactional_ids=[tid]))
                for d in resp.transaction_states:
                    if d.error_code:
                        raise error_for_code(d.error_code, f"transactional id {tid!r}")
                    out.append(TransactionDescription(
                        d.transactional_id, conn.node_id, d.transaction_state, d.producer_id,
                        d.producer_epoch, d.transaction_timeout_ms, d.transaction_start_time_ms,
                        [TopicPartition(t.topic, p) for t in d.topics for p in t.partitions]))
            return out

        return self._call(go())

    def recover_prepared_transactions(
            self, recorded: Mapping[str, PreparedTxnState | None],
            timeout_ms: int = 60000) -> dict[str, bool]:
        """KIP-939 recovery of two-phase-commit transactions, all ids at once: each id is
        taken over (its old producer fenced) and its open transaction committed when
        ``recorded`` names it, else aborted (None: always abort, Kafka's
        forceTerminateTransaction). Answers which ids committed (see
        ``transactions.recover_prepared``)."""
        deadline = time.monotonic() + timeout_ms / 1000

        async def go() -> dict[str, bool]:
            ids = list(recorded)
            done = await asyncio.gather(*(recover_prepared(self._client, i, recorded[i],
                                                           deadline) for i in ids))
            return dict(zip(ids, done, strict=True))

        return self._call(go(), timeout_ms)

    def supports(self, api_key: int, min_version: int = 0) -> bool:
        """Whether the broker answering serves ``api_key`` at ``min_version`` or above
        (its ApiVersions answer)."""
        async def go() -> bool:
            conn = await self._client.any_connection()
            theirs = conn.api_versions.get(api_key)
            return theirs is not None and theirs[1] >= min_version

        return self._call(go())

    # ------------------------------------------------------------------ cluster

    def describe_cluster(self, *, include_fenced: bool = False) -> ClusterDescription:
        """The live brokers and the controller; with ``include_fenced`` also the registered
        brokers that are fenced (DescribeCluster v2, KIP-1073)."""
        async def go() -> ClusterDescription:
            conn = await self._client.any_connection()
            if self._client.supports(conn, 60):
                resp = await self._client.send(
                    conn, DescribeClusterRequest(include_fenced_brokers=include_fenced))
                if resp.error_code:
                    raise error_for_code(resp.error_code, resp.error_message)
                return ClusterDescription(resp.cluster_id, resp.controller_id, [
                    BrokerMetadata(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers],
                    frozenset(b.broker_id for b in resp.brokers if b.is_fenced))
            await self._client.refresh_metadata([])
            md = self._client.metadata
            return ClusterDescription(md.cluster_id, md.controller_id,
                                      sorted(md.brokers.values(), key=lambda b: b.node_id))

        return self._call(go())


# The sentences the admin client puts on the errors it raises, as Kafka's tools word them.
_ERROR_SENTENCES = {
    ErrorCode.TOPIC_ALREADY_EXISTS: "Topic '{}' already exists.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "Topic '{}' does not exist.",
    ErrorCode.NON_EMPTY_GROUP: "Group '{}' is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "Group '{}' does not exist.",
}


def _topic_error(code: int, name: str) -> str:
    return _error_sentence(code, name, "")


def _group_error(code: int, name: str) -> str:
    return _error_sentence(code, name, "group ")


def _error_sentence(code: int, name: str, kind: str) -> str:
    ec = ErrorCode.for_code(code)
    sentence = _ERROR_SENTENCES.get(ec)
    return sentence.format(name) if sentence else f"{ec.name} for {kind}'{name}'"


_ = KafkaError
