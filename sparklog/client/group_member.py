"""One consumer's membership in a group: the coordinator, join/sync, heartbeats, leave.

Group membership follows the Java client's model: heartbeats run on the I/O thread, but
rebalances are driven from the consumer's ``poll()`` on the caller's thread. This class holds
the protocol side of that (the member id, generation and protocol the coordinator handed
out, the JoinGroup/SyncGroup exchange with the leader's assignment, the heartbeat loop and
LeaveGroup); the consumer holds the partitions and runs the ``on_revoke``/``on_assign``
callbacks around ``join_and_sync``.

Invariants: ``generation`` is -1 whenever the member is not in a stable generation (never
joined, left, or fenced); heartbeats only speak for the current generation (see
``heartbeat_loop``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparklog.client.assignors import (
    Subscription,
    assign,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from sparklog.client.connection import (
    BrokerConnection,
    EventLoopThread,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from sparklog.client.core import AsyncClient, conf_int
from sparklog.client.group_rpc import find_coordinator
from sparklog.protocol.errors import ErrorCode, KafkaError, error_for_code
from sparklog.protocol.messages.groups import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from sparklog.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["GroupConfig", "GroupMember"]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A consumer's group settings (Kafka's names and defaults); ``group_id`` "" = none."""

    group_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    max_poll_interval_ms: int  # also the rebalance timeout
    heartbeat_interval_ms: int
    strategies: tuple[str, ...]  # assignor protocol names, in preference order

    @classmethod
    def from_conf(cls, conf: dict[str, Any]) -> GroupConfig:
        strategies = conf.get("partition.assignment.strategy", "range,cooperative-sticky")
        if isinstance(strategies, str):
            strategies = [s.strip() for s in strategies.split(",") if s.strip()]
        return cls(
            group_id=conf.get("group.id") or "",
            group_instance_id=conf.get("group.instance.id") or None,
            session_timeout_ms=conf_int(conf, "session.timeout.ms", 45000),
            max_poll_interval_ms=conf_int(conf, "max.poll.interval.ms", 300000),
            heartbeat_interval_ms=conf_int(conf, "heartbeat.interval.ms", 3000),
            strategies=tuple(_strategy_name(s) for s in strategies))


class GroupMember:
    """The coordinator-facing state of one consumer in ``config.group_id``.

    ``active()`` says whether the owner still wants to be in the group (not closed, still
    subscribed); the heartbeat loop ends once it says no.
    """

    def __init__(self, client: AsyncClient, thread: EventLoopThread, config: GroupConfig,
                 active: Callable[[], bool]) -> None:
        self._client = client
        self._thread = thread
        self.config = config
        self._active = active
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.need_rejoin = False
        # set by the heartbeat loop (fenced, max.poll.interval.ms); the owner rejoins on it
        self.heartbeat_error: BaseException | None = None
        self.last_poll = time.monotonic()  # the owner's last poll(), for max.poll.interval.ms
        self._coordinator: BrokerConnection | None = None
        # bumped whenever a join starts; True while it runs (see heartbeat_loop)
        self._join_epoch = 0
        self._joining = False
        self._hb_task: concurrent.futures.Future[None] | None = None

    # ------------------------------------------------------------------ coordinator

    async def coordinator(self) -> BrokerConnection:
        if self._coordinator is None or not self._coordinator.connected:
            self._coordinator = await find_coordinator(self._client, self.config.group_id)
        return self._coordinator

    def forget_coordinator(self) -> None:
        """Look the coordinator up again next time (it moved or is unavailable)."""
        self._coordinator = None

    def on_commit_error(self, code: int | None) -> None:
        """What an OffsetCommit error says about the membership."""
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self._coordinator = None
        if code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
                    ErrorCode.UNKNOWN_MEMBER_ID):
            self.need_rejoin = True

    # ------------------------------------------------------------------ join

    def begin_join(self) -> None:
        """Called on the owner's thread before ``join_and_sync`` is submitted."""
        self._joining = True  # before the epoch bump: heartbeat_loop reads them the other way
        self._join_epoch += 1
        self.need_rejoin = False

    def end_join(self) -> None:
        self._joining = False

    async def join_and_sync(self, topics: list[str], owned: list[TopicPartition]
                            ) -> tuple[list[TopicPartition], str]:
        """JoinGroup then SyncGroup (computing the plan when elected leader) -> this
        member's partitions and the chosen protocol."""
        cfg = self.config
        conn = await self.coordinator()
        await self._client.refresh_metadata(topics)
        sub = Subscription(list(topics), None, owned, self.generation)
        protocols = [JoinGroupRequest.JoinGroupRequestProtocol(
            name=s, metadata=encode_subscription(sub, 1)) for s in cfg.strategies]
        while True:
            req = JoinGroupRequest(
                group_id=cfg.group_id, session_timeout_ms=cfg.session_timeout_ms,
                rebalance_timeout_ms=cfg.max_poll_interval_ms, member_id=self.member_id,
                group_instance_id=cfg.group_instance_id, protocol_type="consumer",
                protocols=protocols)
            resp = await self._client.send(conn, req,
                                           timeout_ms=cfg.max_poll_interval_ms + 5000)
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            if resp.error_code:
                if resp.error_code in (ErrorCode.NOT_COORDINATOR,
                                       ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    self._coordinator = None
                raise error_for_code(resp.error_code, f"JoinGroup {cfg.group_id!r}")
            break
        self.member_id = resp.member_id
        self.generation = resp.generation_id
        protocol = resp.protocol_name
        assignments = []
        if resp.leader == resp.member_id:
            members = {m.member_id: decode_subscription(m.metadata) for m in resp.members}
            all_topics = sorted({t for s in members.values() for t in s.topics})
            await self._client.refresh_metadata(all_topics)
            counts = {t: self._client.metadata.partition_count(t) or 0 for t in all_topics}
            plan = assign(protocol, members, counts)
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=m, assignment=encode_assignment(tps)) for m, tps in plan.items()]
        sreq = SyncGroupRequest(group_id=cfg.group_id, generation_id=self.generation,
                                member_id=self.member_id,
                                group_instance_id=cfg.group_instance_id,
                                protocol_type="consumer", protocol_name=protocol,
                                assignments=assignments)
        sresp = await self._client.send(conn, sreq, timeout_ms=cfg.max_poll_interval_ms + 5000)
        if sresp.error_code:
            if sresp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            raise error_for_code(sresp.error_code, f"SyncGroup {cfg.group_id!r}")
        return decode_assignment(sresp.assignment), protocol

    # ------------------------------------------------------------------ heartbeats

    def start_heartbeat(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = self._thread.submit(self.heartbeat_loop())

    async def heartbeat_loop(self) -> None:
        """Heartbeats of the current generation only. While a join runs, the old
        generation's heartbeats can only say REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION;
        acting on such an answer after the join completed would rejoin a stable group (our
        subscription carries the generation, so the coordinator sees new metadata and
        rebalances again), and the members would keep rebalancing each other forever.
        So none are sent during a join (the coordinator keeps members blocked in
        JoinGroup/SyncGroup alive), and an answer to one sent before a join started is
        dropped, as the Java client drops heartbeat errors of a stale generation."""
        cfg = self.config
        while self._active():
            await asyncio.sleep(cfg.heartbeat_interval_ms / 1000)
            epoch = self._join_epoch
            if self.generation < 0 or self.need_rejoin or self._joining:
                continue
            if (time.monotonic() - self.last_poll) * 1000 > cfg.max_poll_interval_ms:
                log.warning("max.poll.interval.ms exceeded: leaving group %s", cfg.group_id)
                await self.leave()
                self.heartbeat_error = KafkaError("max.poll.interval.ms exceeded")
                continue
            try:
                conn = await self.coordinator()
                resp = await self._client.send(conn, HeartbeatRequest(
                    group_id=cfg.group_id, generation_id=self.generation,
                    member_id=self.member_id, group_instance_id=cfg.group_instance_id))
            except (KafkaConnectionError, KafkaTimeoutError, KafkaError) as e:
                self._coordinator = None
                log.debug("heartbeat failed: %s", e)
                continue
            code = resp.error_code
            if code == 0:
                continue
            if self._joining or epoch != self._join_epoch:
                log.debug("group %s: ignoring %s from a heartbeat sent before the last join",
                          cfg.group_id, ErrorCode.for_code(code).name)
                continue
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.need_rejoin = True
            elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                          ErrorCode.FENCED_INSTANCE_ID):
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.generation = -1
                self.heartbeat_error = error_for_code(code, "heartbeat")
            elif code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._coordinator = None

    async def leave(self) -> None:
        """LeaveGroup (static members stay: their instance id keeps the assignment)."""
        if not self.member_id or self.config.group_instance_id:
            return
        try:
            conn = await self.coordinator()
            await self._client.send(conn, LeaveGroupRequest(
                group_id=self.config.group_id, member_id=self.member_id,
                members=[LeaveGroupRequest.MemberIdentity(member_id=self.member_id)]))
        except (KafkaConnectionError, KafkaTimeoutError, KafkaError) as e:
            log.debug("LeaveGroup failed: %s", e)
        self.member_id = ""
        self.generation = -1


def _strategy_name(s: str) -> str:
    """A ``partition.assignment.strategy`` entry (Java class name or short name) as the
    protocol name the assignors know."""
    s = s.strip()
    low = s.lower()
    if "cooperativesticky" in low or low == "cooperative-sticky":
        return "cooperative-sticky"
    if "roundrobin" in low:
        return "roundrobin"
    if "range" in low:
        return "range"
    if "sticky" in low:
        return "sticky"
    raise ValueError(f"unknown partition.assignment.strategy {s!r}")
