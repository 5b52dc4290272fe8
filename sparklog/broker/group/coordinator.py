"""The group coordinator: which groups this broker serves, and the requests it answers.

A group belongs to one ``__consumer_offsets`` partition (``records.partition_for_group``)
and is served by the coordinator that has loaded that partition. ``load_partition(p)``
rebuilds p's groups and offsets by replaying its log; ``unload_partition(p)`` gives them
up (requests blocked on them are answered NOT_COORDINATOR). A single broker loads every
partition at start; with replication, a broker loads a partition when it becomes its
leader and unloads it when it stops being one.

Every request is checked here first (a group id is required; the group's partition must be
loaded, else NOT_COORDINATOR) and then handed to the membership state machine or the
offset manager; the admin requests (list, describe, delete) are answered here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sparklog.broker.group.config import CoordinatorConfig
from sparklog.broker.group.membership import Membership, Protocols
from sparklog.broker.group.model import (
    Clock,
    Group,
    GroupDescription,
    GroupState,
    JoinResult,
    LoopClock,
    Member,
    MemberDescription,
    SyncResult,
)
from sparklog.broker.group.offsets import OffsetManager, TopicPartition
from sparklog.broker.group.records import OffsetAndMetadata
from sparklog.broker.group.registry import GroupRegistry
from sparklog.broker.group.store import GroupStore, load_each_partition
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS

log = logging.getLogger(__name__)

__all__ = ["GroupCoordinator"]


class GroupCoordinator:
    """The groups of the offsets partitions this broker has loaded."""

    def __init__(self, config: CoordinatorConfig, store: GroupStore,
                 clock: Clock | None = None) -> None:
        self.config = config
        self.store = store
        self.registry = GroupRegistry(config, store, clock or LoopClock())
        self.membership = Membership(self.registry)
        self.offsets = OffsetManager(self.registry, self.membership)

    @property
    def groups(self) -> dict[str, Group]:
        return self.registry.groups

    # ------------------------------------------------------------------ partitions

    def load_partition(self, partition: int) -> int:
        """Take over the groups of one offsets partition, replayed from its log; returns
        how many. A partition already loaded is left as it is."""
        reg = self.registry
        if partition in reg.loaded:
            return 0
        loaded = self.store.load_partition(partition)
        for gid, lg in loaded.items():
            g = Group(gid)
            g.offsets = dict(lg.offsets)
            g.pending_txn_offsets = {pid: dict(o) for pid, o in lg.pending.items()}
            md = lg.metadata
            if md is not None:
                g.generation_id = md.generation
                g.protocol_type = md.protocol_type or None
                g.protocol_name = md.protocol
                g.leader_id = md.leader
                g.state_timestamp_ms = (md.current_state_timestamp
                                        if md.current_state_timestamp >= 0 else None)
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
            reg.groups[gid] = g
            self.membership.restore_sessions(g)
        reg.loaded.add(partition)
        self.offsets.start_retention()
        log.debug("loaded %d groups of %s-%d", len(loaded), CONSUMER_OFFSETS, partition)
        return len(loaded)

    def unload_partition(self, partition: int) -> int:
        """Give up the groups of one offsets partition; returns how many."""
        reg = self.registry
        reg.loaded.discard(partition)
        gone = [g for gid, g in reg.groups.items() if self.store.partition_for(gid) == partition]
        for g in gone:
            self.membership.evict(g)
            reg.drop(g)
        log.debug("unloaded %d groups of %s-%d", len(gone), CONSUMER_OFFSETS, partition)
        return len(gone)

    def serve_partitions(self, partitions: Iterable[int]) -> None:
        """Coordinate exactly the groups of ``partitions`` (the offsets partitions this
        broker leads): load the new ones, unload the rest."""
        wanted = set(partitions)
        for p in sorted(self.registry.loaded - wanted):
            self.unload_partition(p)
        load_each_partition(self.load_partition, sorted(wanted - self.registry.loaded),
                            CONSUMER_OFFSETS, "consumer groups")

    def shutdown(self) -> None:
        """Cancel timers and answer waiting requests so the server can stop."""
        self.registry.closed = True
        self.offsets.stop_retention()
        for p in list(self.registry.loaded):
            self.unload_partition(p)

    # ------------------------------------------------------------------ requests

    def serves(self, group_id: str) -> bool:
        """Whether this broker coordinates ``group_id`` (FindCoordinator)."""
        return self.registry.owns(group_id)

    def _refuse(self, group_id: str) -> ErrorCode | None:
        """The error for a request about ``group_id`` that this coordinator cannot serve."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self.registry.owns(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str, client_host: str, rebalance_timeout_ms: int,
                         session_timeout_ms: int, protocol_type: str, protocols: Protocols,
                         require_known_member_id: bool) -> JoinResult:
        err = self._refuse(group_id)
        if err is not None:
            return JoinResult(err, member_id=member_id)
        return await self.membership.join_group(
            group_id, member_id, group_instance_id, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
            require_known_member_id)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, assignments: dict[str, bytes],
                         protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncResult:
        err = self._refuse(group_id)
        if err is not None:
            return SyncResult(err)
        return await self.membership.sync_group(group_id, generation_id, member_id,
                                                group_instance_id, assignments,
                                                protocol_type, protocol_name)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        err = self._refuse(group_id)
        if err is not None:
            return err
        return self.membership.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        err = self._refuse(group_id)
        if err is not None:
            return err, []
        return self.membership.leave_group(group_id, members)

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None,
                       offsets: dict[TopicPartition, OffsetAndMetadata],
                       retention_time_ms: int = -1) -> dict[TopicPartition, ErrorCode]:
        err = self._refuse(group_id)
        if err is not None:
            return {tp: err for tp in offsets}
        return self.offsets.commit_offsets(group_id, generation_id, member_id,
                                           group_instance_id, offsets, retention_time_ms)

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation_id: int, member_id: str, group_instance_id: str | None,
                           offsets: dict[TopicPartition, OffsetAndMetadata]
                           ) -> dict[TopicPartition, ErrorCode]:
        err = self._refuse(group_id)
        if err is not None:
            return {tp: err for tp in offsets}
        return self.offsets.txn_commit_offsets(group_id, producer_id, producer_epoch,
                                               generation_id, member_id, group_instance_id,
                                               offsets)

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written to offsets partition ``partition``."""
        self.offsets.complete_txn(partition, producer_id, commit)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        err = self._refuse(group_id)
        if err is not None:
            return err, {}
        return ErrorCode.NONE, self.offsets.fetch_offsets(group_id, partitions)

    # ------------------------------------------------------------------ admin

    def list_groups(self, states: Iterable[str] | None = None) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group served here."""
        wanted = {s.lower() for s in states} if states else None
        out = []
        for g in self.groups.values():
            if wanted is not None and g.state.value.lower() not in wanted:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value))
        return sorted(out)

    def describe_group(self, group_id: str) -> GroupDescription:
        err = self._refuse(group_id)
        if err is not None:
            return GroupDescription(err, group_id, "", "", "", [])
        g = self.groups.get(group_id)
        if g is None:
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
        """DeleteGroups: an empty group goes, with its offsets (tombstoned first)."""
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            err = self._refuse(gid)
            g = self.groups.get(gid)
            if err is not None:
                out[gid] = err
            elif g is None:
                out[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not g.is_(GroupState.EMPTY) or g.members:
                out[gid] = ErrorCode.NON_EMPTY_GROUP
            elif self.offsets.remove(g, list(g.offsets), drop_group=True, why="group-deletion"):
                out[gid] = ErrorCode.NONE
            else:
                out[gid] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return out
