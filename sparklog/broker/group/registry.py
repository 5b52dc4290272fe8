"""The groups a coordinator holds, and what both the membership state machine and the
offset manager do to them: create, persist, forget, drop.

Invariant: ``groups`` holds exactly the live groups of the ``__consumer_offsets``
partitions in ``loaded``; a group of any other partition belongs to another coordinator
(or to none yet), and requests for it are refused with NOT_COORDINATOR. Everything runs
on one asyncio loop, so there are no locks.
"""

from __future__ import annotations

from sparklog.broker.group.config import CoordinatorConfig
from sparklog.broker.group.model import Clock, Group, GroupState
from sparklog.broker.group.records import GroupMetadataRecord, MemberRecord
from sparklog.broker.group.store import GroupStore


class GroupRegistry:
    def __init__(self, config: CoordinatorConfig, store: GroupStore, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self.loaded: set[int] = set()
        # set at shutdown: no new timers from then on
        self.closed = False

    def owns(self, group_id: str) -> bool:
        """Whether this coordinator serves ``group_id`` (its offsets partition is loaded)."""
        return group_id in self.groups or self.store.partition_for(group_id) in self.loaded

    def create(self, group_id: str) -> Group:
        group = self.groups[group_id] = Group(group_id, state_timestamp_ms=self.clock.now_ms())
        return group

    def drop(self, group: Group) -> None:
        """The group is gone (deleted, expired, or its partition unloaded): Dead, timers off."""
        group.transition(GroupState.DEAD, self.clock.now_ms())
        group.cancel_timers()
        self.groups.pop(group.group_id, None)

    def maybe_forget(self, group: Group) -> None:
        """A group with no members, no pending joins, no offsets and no history is dropped."""
        if (group.is_(GroupState.EMPTY) and not group.members and not group.pending_members
                and not group.offsets and not group.pending_txn_offsets
                and group.generation_id == 0
                and self.groups.get(group.group_id) is group):
            self.groups.pop(group.group_id, None)
            group.state = GroupState.DEAD

    def persist(self, group: Group) -> None:
        """Write the group's metadata record (raises when the log cannot take it)."""
        members = tuple(
            MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                         m.rebalance_timeout_ms, m.session_timeout_ms,
                         m.metadata_for(group.protocol_name), m.assignment)
            for m in group.members.values())
        self.store.store_group(group.group_id, GroupMetadataRecord(
            group.protocol_type or "", group.generation_id, group.protocol_name,
            group.leader_id, group.state_timestamp_ms if group.state_timestamp_ms is not None
            else -1, members), self.clock.now_ms())
