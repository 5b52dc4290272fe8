"""Kafka's classic group membership state machine: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, rebalances and session expiry.

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

Requests arrive here already checked by the coordinator (a valid group id of a loaded
partition). Everything runs on a single asyncio loop, so methods mutate state without
locks; only JoinGroup and SyncGroup wait (on futures completed by later requests or
timers).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from sparklog.broker.group.model import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    Group,
    GroupState,
    JoinMember,
    JoinResult,
    Member,
    SyncResult,
)
from sparklog.broker.group.registry import GroupRegistry
from sparklog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Protocols = list[tuple[str, bytes]]


class Membership:
    """Joins, syncs, heartbeats and leaves of the groups in ``registry``."""

    def __init__(self, registry: GroupRegistry) -> None:
        self._registry = registry
        self.groups = registry.groups
        self.config = registry.config
        self.clock = registry.clock

    # ------------------------------------------------------------------ JoinGroup

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str, client_host: str, rebalance_timeout_ms: int,
                         session_timeout_ms: int, protocol_type: str, protocols: Protocols,
                         require_known_member_id: bool) -> JoinResult:
        """JoinGroup; returns at once for errors/MEMBER_ID_REQUIRED, else when the join completes."""
        protocols = [(n, bytes(m)) for n, m in protocols]
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms

        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self._registry.create(group_id)

        args = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols)
        if member_id == UNKNOWN_MEMBER_ID:
            result = self._join_unknown_member(group, group_instance_id,
                                               require_known_member_id, *args)
        else:
            result = self._join_known_member(group, member_id, group_instance_id, *args)
        if isinstance(result, JoinResult):
            self._registry.maybe_forget(group)
            return result
        return await result

    def _join_unknown_member(self, group: Group, instance_id: str | None, require_known: bool,
                             client_id: str, client_host: str, rebalance_timeout_ms: int,
                             session_timeout_ms: int, protocol_type: str, protocols: Protocols
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
                           session_timeout_ms: int, protocol_type: str, protocols: Protocols
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
        if not group.has_member(member_id) or group.is_(GroupState.EMPTY):
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
                                  protocols: Protocols
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
        self.schedule_session_timeout(group, member)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        # It may have been the last one the rebalance was waiting for.
        self._check_join_complete(group)
        return fut

    def _update_member_and_rebalance(self, group: Group, member: Member,
                                     rebalance_timeout_ms: int, session_timeout_ms: int,
                                     protocols: Protocols) -> asyncio.Future[JoinResult]:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        # A duplicate join replaces the older request, whose client has given up on it.
        member.finish_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        fut = member.join_future = self._new_join_future()
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        self._check_join_complete(group)
        return fut

    def _rejoin_static_member(self, group: Group, instance_id: str, new_id: str,
                              client_id: str, client_host: str, rebalance_timeout_ms: int,
                              session_timeout_ms: int, protocol_type: str, protocols: Protocols
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
        old.release(ErrorCode.FENCED_INSTANCE_ID)
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
        self.schedule_session_timeout(group, old)

        if group.is_(GroupState.STABLE) and old.matches(protocols):
            # No rebalance: the member gets the current generation and re-syncs its
            # assignment. It is told the *old* leader id so it does not reassign.
            old.protocols = protocols
            try:
                self._registry.persist(group)
            except Exception:  # noqa: BLE001 - the in-memory state is authoritative
                log.exception("group %s: storing the new static member id failed",
                              group.group_id)
            return JoinResult(ErrorCode.NONE, group.generation_id, group.protocol_type,
                              group.protocol_name, current_leader or "", new_id)
        # Otherwise (new subscription, or a rebalance under way) it joins like everyone else.
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
                self._registry.persist(group)
            except Exception:  # noqa: BLE001 - a timer callback: log, the state stands
                log.exception("group %s: storing the empty group failed", group.group_id)
            self._registry.maybe_forget(group)
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
            self.schedule_session_timeout(group, m)
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
                m.finish_sync(SyncResult(error))
                # Its session restarts now: it was blocked and could not heartbeat.
                self.schedule_session_timeout(group, m)
            m.sync_future = None

    # ------------------------------------------------------------------ members & sessions

    def schedule_session_timeout(self, group: Group, member: Member) -> None:
        """(Re)start ``member``'s session: it is removed unless heard from within it."""
        if member.session_timer is not None:
            member.session_timer.cancel()
        if self._registry.closed:
            return
        member.session_timer = self.clock.call_later(
            member.session_timeout_ms, lambda: self._on_session_expired(group, member))

    def _on_session_expired(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:
            # Blocked in JoinGroup/SyncGroup, so it cannot heartbeat: keep it alive.
            self.schedule_session_timeout(group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member_and_update_group(group, member)

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, "absent") == "absent":
            return
        self._check_join_complete(group)
        self._registry.maybe_forget(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        member.release(ErrorCode.UNKNOWN_MEMBER_ID)
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

    def restore_sessions(self, group: Group) -> None:
        """Members replayed as Stable must heartbeat within their session or be expired."""
        for m in group.members.values():
            self.schedule_session_timeout(group, m)

    def evict(self, group: Group) -> None:
        """This coordinator gives the group up (partition unloaded, shutdown): timers stop
        and requests blocked in JoinGroup/SyncGroup are answered NOT_COORDINATOR, so
        their clients look the coordinator up again."""
        group.cancel_timers()
        for m in group.members.values():
            m.release(ErrorCode.NOT_COORDINATOR)

    # ------------------------------------------------------------------ SyncGroup

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, assignments: dict[str, bytes],
                         protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncResult:
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
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
            self.schedule_session_timeout(group, member)
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type,
                              group.protocol_name)
        # CompletingRebalance
        member.finish_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        self.schedule_session_timeout(group, member)
        if member_id == group.leader_id:
            for mid, m in group.members.items():
                m.assignment = bytes(assignments.get(mid, b""))
            if group.sync_timer is not None:
                group.sync_timer.cancel()
                group.sync_timer = None
            group.transition(GroupState.STABLE, self.clock.now_ms())
            try:
                self._registry.persist(group)
            except Exception:  # noqa: BLE001 - storage failure: the whole rebalance fails
                log.exception("group %s: storing group metadata failed", group_id)
                self._reset_and_propagate_sync_error(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                self._prepare_rebalance(group, "group metadata write failed")
                return await fut
            for m in group.members.values():
                m.finish_sync(SyncResult(ErrorCode.NONE, m.assignment, group.protocol_type,
                                         group.protocol_name))
                m.sync_future = None
                self.schedule_session_timeout(group, m)
            log.info("group %s: stable at generation %d", group_id, group.generation_id)
        return await fut

    # ------------------------------------------------------------------ Heartbeat / Leave

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has_member(member_id) or group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self.schedule_session_timeout(group, group.members[member_id])
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Returns (group-level error, per-member errors) for LeaveGroup v0..v5 shapes."""
        group = self.groups.get(group_id)
        if group is None:
            # As Kafka: each member is unknown; the request itself did not fail.
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in members]
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
        self._registry.maybe_forget(group)
        return ErrorCode.NONE, errors
