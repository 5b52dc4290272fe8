"""Classic consumer-group coordinator: Kafka's group state machine, on one event loop.

States and transitions are Kafka's (``GroupMetadata``/``GroupCoordinator``):

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable/CompletingRebalance --join, leave, session expiry--> PreparingRebalance
    PreparingRebalance --last member gone--> Empty;   Empty --delete/expiry--> Dead

Generations start at 0 and every completed join bumps them, so the first generation a
client ever sees is 1 (aiokafka only sends LeaveGroup for generation > 0).  The broker
never interprets assignor payloads: it picks the protocol (assignor name) every member
supports with the most first-choice votes, hands the leader all members' metadata and
relays the leader's assignments.

Everything runs on a single asyncio loop, so methods mutate state without locks; only
JoinGroup and SyncGroup wait (on futures completed by later requests or timers).  Timers
go through a small ``Clock`` so tests can drive timeouts with a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from sparklog.broker.group_model import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    Group,
    GroupDescription,
    GroupState,
    JoinMember,
    JoinResult,
    Member,
    MemberDescription,
    SyncResult,
    TimerHandle,
)
from sparklog.broker.group_offsets import (
    GroupMetadataRecord,
    GroupStore,
    MemberRecord,
    OffsetAndMetadata,
)
from sparklog.protocol.errors import ErrorCode

__all__ = [
    "Clock", "CoordinatorConfig", "GroupCoordinator", "GroupDescription", "GroupState",
    "JoinMember", "JoinResult", "LoopClock", "MemberDescription", "NO_GENERATION",
    "SyncResult", "UNKNOWN_MEMBER_ID", "create_group_coordinator",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- clock


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class LoopClock:
    """Wall-clock timestamps (they go into commit records) and the running loop's timers."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, callback)


# --------------------------------------------------------------------------- config


@dataclass
class CoordinatorConfig:
    """The broker configs the coordinator reads, with Kafka's defaults."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2147483647
    offsets_topic_num_partitions: int = 50
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_broker_config(cls, cfg: Any) -> CoordinatorConfig:
        """Read from a BrokerConfig-like object (``.get(name)``) or a plain dict."""
        out = cls()
        getter = cfg.get if hasattr(cfg, "get") else (lambda _n: None)
        for name in (
            "group.min.session.timeout.ms", "group.max.session.timeout.ms",
            "group.initial.rebalance.delay.ms", "group.max.size",
            "offsets.topic.num.partitions", "offsets.retention.minutes",
            "offsets.retention.check.interval.ms", "offset.metadata.max.bytes",
        ):
            try:
                value = getter(name)
            except (KeyError, ValueError, AttributeError):
                value = None
            if value is not None and value != "":
                setattr(out, name.replace(".", "_"), int(value))
        return out

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


# --------------------------------------------------------------------------- coordinator


class GroupCoordinator:
    """All groups of this broker (a single broker coordinates every group)."""

    def __init__(self, config: CoordinatorConfig | None = None, store: GroupStore | None = None,
                 clock: Clock | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self.store = store
        self.clock: Clock = clock or LoopClock()
        self.groups: dict[str, Group] = {}
        self._loaded = False
        self._retention_timer: TimerHandle | None = None
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """Rebuild groups and offsets from the store; idempotent, called lazily too."""
        if self._loaded:
            return
        self._loaded = True
        if self.store is None:
            return
        loaded = self.store.load()
        now = self.clock.now_ms()
        for gid, lg in loaded.items():
            g = Group(gid)
            g.offsets = dict(lg.offsets)
            md = lg.metadata
            if md is not None:
                g.generation_id = md.generation
                g.protocol_type = md.protocol_type or None
                g.protocol_name = md.protocol
                g.leader_id = md.leader
                g.state_timestamp_ms = md.current_state_timestamp if md.current_state_timestamp >= 0 else None
                for mr in md.members:
                    m = Member(mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host,
                               mr.rebalance_timeout_ms, mr.session_timeout_ms,
                               md.protocol_type, [(md.protocol or "", mr.subscription)],
                               assignment=mr.assignment)
                    g.members[m.member_id] = m
                    if m.group_instance_id is not None:
                        g.static_members[m.group_instance_id] = m.member_id
                if g.members:
                    g.state = GroupState.STABLE
            self.groups[gid] = g
        # Members restored as Stable must heartbeat within their session or be expired.
        for g in self.groups.values():
            for m in g.members.values():
                self._schedule_session_timeout(g, m)
        log.info("loaded %d consumer groups from __consumer_offsets (now=%d)", len(loaded), now)
        self._schedule_retention()

    def ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    def shutdown(self) -> None:
        """Cancel timers and fail waiting requests so the server can stop."""
        self._closed = True
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        for g in self.groups.values():
            for handle in (g.join_timer, g.sync_timer, *g.pending_members.values()):
                if handle is not None:
                    handle.cancel()
            for m in g.members.values():
                if m.session_timer is not None:
                    m.session_timer.cancel()
                if m.awaiting_join:
                    m.join_future.set_result(JoinResult(ErrorCode.NOT_COORDINATOR,  # type: ignore[union-attr]
                                                        member_id=m.member_id))
                if m.awaiting_sync:
                    m.sync_future.set_result(SyncResult(ErrorCode.NOT_COORDINATOR))  # type: ignore[union-attr]

    # ------------------------------------------------------------------ JoinGroup

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str, client_host: str, rebalance_timeout_ms: int,
                         session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]],
                         require_known_member_id: bool) -> JoinResult:
        """JoinGroup; returns at once for errors/MEMBER_ID_REQUIRED, else when the join completes."""
        self.ensure_loaded()
        protocols = [(n, bytes(m)) for n, m in protocols]
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id=member_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms

        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self.groups[group_id] = Group(group_id,
                                                  state_timestamp_ms=self.clock.now_ms())
        if group.is_(GroupState.DEAD):
            # Deleted or expired while this request was in flight: the client rediscovers.
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)

        args = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols)
        if member_id == UNKNOWN_MEMBER_ID:
            result = self._join_unknown_member(group, group_instance_id,
                                               require_known_member_id, *args)
        else:
            result = self._join_known_member(group, member_id, group_instance_id, *args)
        if isinstance(result, JoinResult):
            self._maybe_forget(group)
            return result
        return await result

    def _join_unknown_member(self, group: Group, instance_id: str | None, require_known: bool,
                             client_id: str, client_host: str, rebalance_timeout_ms: int,
                             session_timeout_ms: int, protocol_type: str,
                             protocols: list[tuple[str, bytes]]
                             ) -> JoinResult | asyncio.Future[JoinResult]:
        if not group.supports_protocols(protocol_type, protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        new_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            new_id = f"{instance_id}-{uuid.uuid4()}"
            if instance_id in group.static_members:
                return self._rejoin_static_member(group, instance_id, new_id, client_id,
                                                  client_host, rebalance_timeout_ms,
                                                  session_timeout_ms, protocol_type, protocols)
            return self._add_member_and_rebalance(group, new_id, instance_id, client_id,
                                                  client_host, rebalance_timeout_ms,
                                                  session_timeout_ms, protocol_type, protocols)
        if require_known:
            # KIP-394: hand out the id first; the member only counts once it rejoins with it.
            if len(group.members) + len(group.pending_members) >= self.config.group_max_size:
                return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
            group.pending_members[new_id] = self.clock.call_later(
                session_timeout_ms, lambda: self._expire_pending_member(group, new_id))
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id,
                              generation_id=NO_GENERATION)
        return self._add_member_and_rebalance(group, new_id, None, client_id, client_host,
                                              rebalance_timeout_ms, session_timeout_ms,
                                              protocol_type, protocols)

    def _join_known_member(self, group: Group, member_id: str, instance_id: str | None,
                           client_id: str, client_host: str, rebalance_timeout_ms: int,
                           session_timeout_ms: int, protocol_type: str,
                           protocols: list[tuple[str, bytes]]
                           ) -> JoinResult | asyncio.Future[JoinResult]:
        if member_id in group.pending_members:
            if not group.supports_protocols(protocol_type, protocols):
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            handle = group.pending_members.pop(member_id)
            if handle is not None:
                handle.cancel()
            return self._add_member_and_rebalance(group, member_id, instance_id, client_id,
                                                  client_host, rebalance_timeout_ms,
                                                  session_timeout_ms, protocol_type, protocols)
        if group.is_static_member_fenced(member_id, instance_id):
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
        if not group.has_member(member_id) or group.is_(GroupState.EMPTY, GroupState.DEAD):
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        if not group.supports_protocols(protocol_type, protocols, excluding=member_id):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        member = group.members[member_id]
        if group.is_(GroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, rebalance_timeout_ms,
                                                     session_timeout_ms, protocols)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # A retried JoinGroup (lost response): answer with the current generation.
                return self._join_result_for(group, member)
            return self._update_member_and_rebalance(group, member, rebalance_timeout_ms,
                                                     session_timeout_ms, protocols)
        # Stable: only the leader or a member whose subscription changed forces a rebalance.
        if member.member_id == group.leader_id or not member.matches(protocols):
            return self._update_member_and_rebalance(group, member, rebalance_timeout_ms,
                                                     session_timeout_ms, protocols)
        return JoinResult(ErrorCode.NONE, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "", member_id)

    def _join_result_for(self, group: Group, member: Member) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        members = [JoinMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                   for m in group.members.values()] if is_leader else []
        return JoinResult(ErrorCode.NONE, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "", member.member_id, members)

    def _new_join_future(self) -> asyncio.Future[JoinResult]:
        return asyncio.get_running_loop().create_future()

    def _add_member_and_rebalance(self, group: Group, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout_ms: int,
                                  session_timeout_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]]
                                  ) -> JoinResult | asyncio.Future[JoinResult]:
        if len(group.members) >= self.config.group_max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id)
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                        session_timeout_ms, protocol_type, protocols, is_new=True)
        fut = member.join_future = self._new_join_future()
        if not group.members:
            group.protocol_type = protocol_type
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        if group.is_(GroupState.PREPARING_REBALANCE) and group.initial_join:
            group.new_member_added = True
        # New members get a session timer now: one that never comes back to join is
        # eventually dropped instead of holding the rebalance forever.
        self._schedule_session_timeout(group, member)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        # It may have been the last one the rebalance was waiting for.
        self._check_join_complete(group)
        return fut

    def _update_member_and_rebalance(self, group: Group, member: Member,
                                     rebalance_timeout_ms: int, session_timeout_ms: int,
                                     protocols: list[tuple[str, bytes]]
                                     ) -> asyncio.Future[JoinResult]:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.awaiting_join:
            # A duplicate join replaces the older request, whose client has given up on it.
            member.join_future.set_result(  # type: ignore[union-attr]
                JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        fut = member.join_future = self._new_join_future()
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        self._check_join_complete(group)
        return fut

    def _rejoin_static_member(self, group: Group, instance_id: str, new_id: str,
                              client_id: str, client_host: str, rebalance_timeout_ms: int,
                              session_timeout_ms: int, protocol_type: str,
                              protocols: list[tuple[str, bytes]]
                              ) -> JoinResult | asyncio.Future[JoinResult]:
        """KIP-345: a known instance rejoining with no member id replaces its old member id."""
        old_id = group.static_members[instance_id]
        old = group.members.get(old_id)
        if old is None:  # stale mapping
            del group.static_members[instance_id]
            return self._add_member_and_rebalance(group, new_id, instance_id, client_id,
                                                  client_host, rebalance_timeout_ms,
                                                  session_timeout_ms, protocol_type, protocols)
        current_leader = group.leader_id
        if old.awaiting_join:
            old.join_future.set_result(  # type: ignore[union-attr]
                JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        if old.awaiting_sync:
            old.sync_future.set_result(SyncResult(ErrorCode.FENCED_INSTANCE_ID))  # type: ignore[union-attr]
        if old.session_timer is not None:
            old.session_timer.cancel()
        del group.members[old_id]
        old.member_id = new_id
        old.join_future = None
        old.sync_future = None
        old.client_id, old.client_host = client_id, client_host
        old.rebalance_timeout_ms, old.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
        group.members[new_id] = old
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        self._schedule_session_timeout(group, old)

        if group.is_(GroupState.STABLE):
            if old.matches(protocols):
                # No rebalance: the member gets the current generation and re-syncs its
                # assignment. It is told the *old* leader id so it does not reassign.
                old.protocols = protocols
                try:
                    self._persist_group(group)
                except Exception:  # noqa: BLE001 - the in-memory state is authoritative
                    log.exception("group %s: storing the new static member id failed",
                                  group.group_id)
                return JoinResult(ErrorCode.NONE, group.generation_id, group.protocol_type,
                                  group.protocol_name, current_leader or "", new_id)
            return self._update_member_and_rebalance(group, old, rebalance_timeout_ms,
                                                     session_timeout_ms, protocols)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return self._update_member_and_rebalance(group, old, rebalance_timeout_ms,
                                                     session_timeout_ms, protocols)
        # PreparingRebalance (or Empty): wait for the join like everyone else.
        return self._update_member_and_rebalance(group, old, rebalance_timeout_ms,
                                                 session_timeout_ms, protocols)

    # ------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_sync_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        was_empty = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, self.clock.now_ms())
        log.info("group %s: preparing rebalance (generation %d): %s",
                 group.group_id, group.generation_id, reason)
        if group.join_timer is not None:
            group.join_timer.cancel()
        rebalance_timeout = group.max_rebalance_timeout_ms()
        if was_empty:
            delay = min(self.config.group_initial_rebalance_delay_ms, rebalance_timeout)
            group.initial_join = True
            group.new_member_added = False
            group.initial_remaining_ms = max(rebalance_timeout - delay, 0)
            group.join_timer = self.clock.call_later(delay,
                                                     lambda: self._on_initial_join_timer(group))
        else:
            group.initial_join = False
            group.join_timer = self.clock.call_later(rebalance_timeout,
                                                     lambda: self._complete_join(group))
            self._check_join_complete(group)

    def _on_initial_join_timer(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE) or not group.initial_join:
            return
        if group.new_member_added and group.initial_remaining_ms > 0:
            # Members are still arriving: wait another delay (bounded by the rebalance timeout).
            delay = min(self.config.group_initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(group.initial_remaining_ms - delay, 0)
            group.new_member_added = False
            group.join_timer = self.clock.call_later(delay,
                                                     lambda: self._on_initial_join_timer(group))
            return
        self._complete_join(group)

    def _check_join_complete(self, group: Group) -> None:
        if (group.is_(GroupState.PREPARING_REBALANCE) and not group.initial_join
                and group.all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_join = False
        # Dynamic members that did not rejoin in time are out. Static members stay (KIP-345):
        # they keep their place until their session expires.
        for m in [m for m in group.members.values()
                  if not m.awaiting_join and m.group_instance_id is None]:
            log.info("group %s: removing member %s that did not rejoin", group.group_id,
                     m.member_id)
            self._remove_member(group, m)
        joined = [mid for mid, m in group.members.items() if m.awaiting_join]
        if group.members and not joined:
            # Only absent static members: wait another round for them or their expiry.
            log.info("group %s: no member rejoined; waiting for static members",
                     group.group_id)
            group.join_timer = self.clock.call_later(group.max_rebalance_timeout_ms(),
                                                     lambda: self._complete_join(group))
            return
        if group.leader_id not in joined and joined:
            group.leader_id = joined[0]
        now = self.clock.now_ms()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, now)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            try:
                self._persist_group(group)
            except Exception:  # noqa: BLE001 - a timer callback: log, the state stands
                log.exception("group %s: storing the empty group failed", group.group_id)
            self._maybe_forget(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info("group %s: generation %d with %d members, protocol %s, leader %s",
                 group.group_id, group.generation_id, len(group.members),
                 group.protocol_name, group.leader_id)
        for m in group.members.values():
            m.is_new = False
            fut = m.join_future
            m.join_future = None
            if fut is not None and not fut.done():
                fut.set_result(self._join_result_for(group, m))
            self._schedule_session_timeout(group, m)
        # Members that never send SyncGroup must not stall the others forever.
        generation = group.generation_id
        group.sync_timer = self.clock.call_later(
            group.max_rebalance_timeout_ms(), lambda: self._on_sync_timeout(group, generation))

    def _on_sync_timeout(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if group.generation_id != generation or not group.is_(GroupState.COMPLETING_REBALANCE):
            return
        laggards = [m for m in group.members.values() if not m.awaiting_sync]
        for m in laggards:
            log.info("group %s: member %s sent no SyncGroup within the rebalance timeout",
                     group.group_id, m.member_id)
            self._remove_member(group, m)
        if laggards:
            self._prepare_rebalance(group, "members failed to sync in time")

    def _reset_and_propagate_sync_error(self, group: Group, error: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.awaiting_sync:
                m.sync_future.set_result(SyncResult(error))  # type: ignore[union-attr]
                # Its session restarts now: it was blocked and could not heartbeat.
                self._schedule_session_timeout(group, m)
            m.sync_future = None

    # ------------------------------------------------------------------ members & sessions

    def _schedule_session_timeout(self, group: Group, member: Member) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        if self._closed:
            return
        member.session_timer = self.clock.call_later(
            member.session_timeout_ms, lambda: self._on_session_expired(group, member))

    def _on_session_expired(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:
            # Blocked in JoinGroup/SyncGroup, so it cannot heartbeat: keep it alive.
            self._schedule_session_timeout(group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member_and_update_group(group, member)

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, "absent") == "absent":
            return
        self._check_join_complete(group)
        self._maybe_forget(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None
        if member.awaiting_join:
            member.join_future.set_result(  # type: ignore[union-attr]
                JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        if member.awaiting_sync:
            member.sync_future.set_result(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))  # type: ignore[union-attr]
        group.members.pop(member.member_id, None)
        if member.group_instance_id is not None and \
                group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        if group.leader_id == member.member_id:
            joined = [m.member_id for m in group.members.values() if m.awaiting_join]
            group.leader_id = (joined or list(group.members) or [None])[0]

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._remove_member(group, member)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member.member_id}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join_complete(group)

    # ------------------------------------------------------------------ SyncGroup

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, assignments: dict[str, bytes],
                         protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncResult:
        self.ensure_loaded()
        group = self.groups.get(group_id)
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return SyncResult(ErrorCode.FENCED_INSTANCE_ID)
        if not group.has_member(member_id):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_(GroupState.STABLE):
            self._schedule_session_timeout(group, member)
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type,
                              group.protocol_name)
        # CompletingRebalance
        if member.awaiting_sync:
            member.sync_future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # type: ignore[union-attr]
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        self._schedule_session_timeout(group, member)
        if member_id == group.leader_id:
            for mid, m in group.members.items():
                m.assignment = bytes(assignments.get(mid, b""))
            if group.sync_timer is not None:
                group.sync_timer.cancel()
                group.sync_timer = None
            group.transition(GroupState.STABLE, self.clock.now_ms())
            try:
                self._persist_group(group)
            except Exception:  # noqa: BLE001 - storage failure: the whole rebalance fails
                log.exception("group %s: storing group metadata failed", group_id)
                self._reset_and_propagate_sync_error(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                self._prepare_rebalance(group, "group metadata write failed")
                return await fut
            for m in group.members.values():
                if m.awaiting_sync:
                    m.sync_future.set_result(  # type: ignore[union-attr]
                        SyncResult(ErrorCode.NONE, m.assignment, group.protocol_type,
                                   group.protocol_name))
                m.sync_future = None
                self._schedule_session_timeout(group, m)
            log.info("group %s: stable at generation %d", group_id, group.generation_id)
        return await fut

    # ------------------------------------------------------------------ Heartbeat / Leave

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        self.ensure_loaded()
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has_member(member_id) or group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_session_timeout(group, group.members[member_id])
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Returns (group-level error, per-member errors) for LeaveGroup v0..v5 shapes."""
        self.ensure_loaded()
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            # As Kafka: each member is unknown; the request itself did not fail.
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in members]
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors: list[ErrorCode] = []
        for member_id, instance_id in members:
            if instance_id is not None and member_id == UNKNOWN_MEMBER_ID:
                member_id = group.static_members.get(instance_id, "")
            if group.is_static_member_fenced(member_id, instance_id):
                errors.append(ErrorCode.FENCED_INSTANCE_ID)
            elif member_id in group.pending_members:
                handle = group.pending_members.pop(member_id)
                if handle is not None:
                    handle.cancel()
                self._check_join_complete(group)
                errors.append(ErrorCode.NONE)
            elif not group.has_member(member_id):
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
            else:
                log.info("group %s: member %s left", group_id, member_id)
                self._remove_member_and_update_group(group, group.members[member_id])
                errors.append(ErrorCode.NONE)
        self._maybe_forget(group)
        return ErrorCode.NONE, errors

    # ------------------------------------------------------------------ offsets

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None,
                       offsets: dict[tuple[str, int], OffsetAndMetadata],
                       retention_time_ms: int = -1) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit. Generation -1 with an empty member id is a standalone commit."""
        self.ensure_loaded()

        def all_(err: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {tp: err for tp in offsets}

        if not group_id:
            return all_(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # The group is not known, so its generation cannot be either.
                return all_(ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = Group(group_id,
                                                  state_timestamp_ms=self.clock.now_ms())
        if group.is_(GroupState.DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return all_(ErrorCode.FENCED_INSTANCE_ID)
        if not (generation_id < 0 and group.is_(GroupState.EMPTY)):
            if not group.has_member(member_id):
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            if group.is_(GroupState.COMPLETING_REBALANCE):
                return all_(ErrorCode.REBALANCE_IN_PROGRESS)
            self._schedule_session_timeout(group, group.members[member_id])
        return self._store_offsets(group, offsets, retention_time_ms)

    def _store_offsets(self, group: Group, offsets: dict[tuple[str, int], OffsetAndMetadata],
                       retention_time_ms: int) -> dict[tuple[str, int], ErrorCode]:
        now = self.clock.now_ms()
        result: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            expire = now + retention_time_ms if retention_time_ms > 0 else None
            accepted[tp] = OffsetAndMetadata(om.offset, om.leader_epoch, om.metadata or "",
                                             now, expire)
            result[tp] = ErrorCode.NONE
        if accepted:
            try:
                if self.store is not None:
                    self.store.store_offsets(group.group_id, accepted, now)
            except Exception:  # noqa: BLE001 - reported per partition, as Kafka does
                log.exception("group %s: writing offsets failed", group.group_id)
                for tp in accepted:
                    result[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
                return result
            group.offsets.update(accepted)
        return result

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> tuple[ErrorCode, dict[tuple[str, int], OffsetAndMetadata | None]]:
        """OffsetFetch. ``partitions=None`` means every partition the group committed."""
        self.ensure_loaded()
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}
        group = self.groups.get(group_id)
        offsets = {} if group is None or group.is_(GroupState.DEAD) else group.offsets
        if partitions is None:
            return ErrorCode.NONE, dict(sorted(offsets.items()))
        return ErrorCode.NONE, {tp: offsets.get(tp) for tp in partitions}

    # ------------------------------------------------------------------ admin

    def list_groups(self, states: Iterable[str] | None = None) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every live group."""
        self.ensure_loaded()
        wanted = {s.lower() for s in states} if states else None
        out = []
        for g in self.groups.values():
            if g.is_(GroupState.DEAD):
                continue
            if wanted is not None and g.state.value.lower() not in wanted:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value))
        return sorted(out)

    def describe_group(self, group_id: str) -> GroupDescription:
        self.ensure_loaded()
        if not group_id:
            return GroupDescription(ErrorCode.INVALID_GROUP_ID, group_id, "", "", "", [])
        g = self.groups.get(group_id)
        if g is None or g.is_(GroupState.DEAD):
            return GroupDescription(ErrorCode.NONE, group_id, GroupState.DEAD.value, "", "", [])
        stable = g.is_(GroupState.STABLE)
        members = [MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                     m.client_host,
                                     m.metadata_for(g.protocol_name) if stable else b"",
                                     m.assignment if stable else b"")
                   for m in g.members.values()]
        return GroupDescription(ErrorCode.NONE, group_id, g.state.value, g.protocol_type or "",
                                (g.protocol_name or "") if stable else "", members)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        self.ensure_loaded()
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            if not gid:
                out[gid] = ErrorCode.INVALID_GROUP_ID
                continue
            g = self.groups.get(gid)
            if g is None or g.is_(GroupState.DEAD):
                out[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not g.is_(GroupState.EMPTY) or g.members:
                out[gid] = ErrorCode.NON_EMPTY_GROUP
            else:
                try:
                    if self.store is not None:
                        self.store.delete_offsets(gid, list(g.offsets), self.clock.now_ms(),
                                                  delete_group=True)
                except Exception:  # noqa: BLE001
                    log.exception("group %s: writing tombstones failed", gid)
                    out[gid] = ErrorCode.COORDINATOR_NOT_AVAILABLE
                    continue
                self._drop_group(g)
                out[gid] = ErrorCode.NONE
        return out

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> ErrorCode:
        """Remove committed offsets of an empty group (used by tools)."""
        self.ensure_loaded()
        g = self.groups.get(group_id)
        if g is None or g.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not g.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        present = [tp for tp in partitions if tp in g.offsets]
        if self.store is not None:
            self.store.delete_offsets(group_id, present, self.clock.now_ms())
        for tp in present:
            del g.offsets[tp]
        self._maybe_forget(g)
        return ErrorCode.NONE

    def remove_topic_offsets(self, topics: Iterable[str]) -> int:
        """Forget committed offsets of deleted topics (tombstoned, as Kafka does), so a
        topic re-created under the same name does not inherit stale positions."""
        self.ensure_loaded()
        gone = set(topics)
        total = 0
        now = self.clock.now_ms()
        for g in list(self.groups.values()):
            dead = [tp for tp in g.offsets if tp[0] in gone]
            if not dead:
                continue
            drop_group = (g.is_(GroupState.EMPTY) and not g.members
                          and len(dead) == len(g.offsets))
            try:
                if self.store is not None:
                    self.store.delete_offsets(g.group_id, dead, now, delete_group=drop_group)
            except Exception:  # noqa: BLE001 - retried implicitly by the next deletion/expiry
                log.exception("group %s: writing tombstones for deleted topics failed",
                              g.group_id)
                continue
            for tp in dead:
                del g.offsets[tp]
            total += len(dead)
            if drop_group:
                self._drop_group(g)
        if total:
            log.info("removed %d committed offsets of deleted topics %s", total, sorted(gone))
        return total

    # ------------------------------------------------------------------ retention

    def _schedule_retention(self) -> None:
        if self._closed:
            return
        try:
            self._retention_timer = self.clock.call_later(
                self.config.offsets_retention_check_interval_ms, self._on_retention_timer)
        except RuntimeError:  # no running loop (synchronous load in a tool)
            self._retention_timer = None

    def _on_retention_timer(self) -> None:
        try:
            self.expire_offsets()
        finally:
            self._schedule_retention()

    def expire_offsets(self) -> int:
        """Drop offsets past ``offsets.retention.minutes`` (KIP-211); returns how many.

        A consumer group's offsets age from the moment it became Empty; a group that never
        had members (standalone commits) ages each offset from its own commit time.  Groups
        left Empty with no offsets die and their metadata is tombstoned.
        """
        now = self.clock.now_ms()
        retention = self.config.offsets_retention_ms
        total = 0
        for g in list(self.groups.values()):
            if not g.is_(GroupState.EMPTY):
                continue
            expired = []
            for tp, om in g.offsets.items():
                if om.expire_timestamp is not None:
                    deadline = om.expire_timestamp
                elif g.protocol_type is not None and g.state_timestamp_ms is not None:
                    deadline = max(g.state_timestamp_ms, 0) + retention
                else:
                    deadline = om.commit_timestamp + retention
                if deadline <= now:
                    expired.append(tp)
            drop_group = len(expired) == len(g.offsets)
            if not expired and not drop_group:
                continue
            try:
                if self.store is not None:
                    self.store.delete_offsets(g.group_id, expired, now, delete_group=drop_group)
            except Exception:  # noqa: BLE001
                log.exception("group %s: writing expiry tombstones failed", g.group_id)
                continue
            for tp in expired:
                del g.offsets[tp]
            total += len(expired)
            if drop_group:
                self._drop_group(g)
        if total:
            log.info("expired %d committed offsets", total)
        return total

    # ------------------------------------------------------------------ helpers

    def _drop_group(self, group: Group) -> None:
        group.transition(GroupState.DEAD, self.clock.now_ms())
        for handle in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            if handle is not None:
                handle.cancel()
        self.groups.pop(group.group_id, None)

    def _maybe_forget(self, group: Group) -> None:
        """A group with no members, no pending joins, no offsets and no history is dropped."""
        if (group.is_(GroupState.EMPTY) and not group.members and not group.pending_members
                and not group.offsets and group.generation_id == 0
                and self.groups.get(group.group_id) is group):
            self.groups.pop(group.group_id, None)
            group.state = GroupState.DEAD

    def _persist_group(self, group: Group) -> None:
        if self.store is None:
            return
        members = tuple(
            MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                         m.rebalance_timeout_ms, m.session_timeout_ms,
                         m.metadata_for(group.protocol_name), m.assignment)
            for m in group.members.values())
        self.store.store_group(group.group_id, GroupMetadataRecord(
            group.protocol_type or "", group.generation_id, group.protocol_name,
            group.leader_id, group.state_timestamp_ms if group.state_timestamp_ms is not None
            else -1, members), self.clock.now_ms())


# --------------------------------------------------------------------------- broker wiring


def create_group_coordinator(broker: Any) -> GroupCoordinator:
    """The coordinator of a ``Broker``: records go to ``__consumer_offsets`` through the
    broker's replica manager; the topic is created on the first write, not at startup."""
    from sparklog.broker.group_offsets import OFFSETS_TOPIC, PartitionLogRecordLog

    cfg = CoordinatorConfig.from_broker_config(broker.config)

    def existing_log(partition: int) -> Any:
        if broker.controller.topic(OFFSETS_TOPIC) is None:
            return None
        p = broker.replica_manager.get(OFFSETS_TOPIC, partition)
        return None if p is None else p.log

    def append(partition: int, batch: bytes) -> None:
        broker.ensure_offsets_topic()
        res = broker.replica_manager.append(OFFSETS_TOPIC, partition, batch, acks=1,
                                            internal_ok=True)
        if res.error is not None:
            raise res.error

    info = broker.controller.topic(OFFSETS_TOPIC)
    # An existing topic keeps its partition count even if the config changed since.
    partitions = len(info.partitions) if info is not None else cfg.offsets_topic_num_partitions
    store = GroupStore(PartitionLogRecordLog(existing_log, append), partitions)
    gc = GroupCoordinator(cfg, store)

    def on_metadata(records: list[dict[str, Any]]) -> None:
        deleted = [r["name"] for r in records
                   if r.get("type") == "remove_topic" and r.get("name") != OFFSETS_TOPIC]
        if deleted and not gc._closed and broker.group_coordinator is gc:
            gc.remove_topic_offsets(deleted)

    add_listener = getattr(broker.controller, "add_listener", None)
    if add_listener is not None:
        add_listener(on_metadata)
    return gc
