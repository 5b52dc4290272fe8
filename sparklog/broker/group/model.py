"""The classic group protocol's data: group states, members, groups, request results.

Plain state with small queries (which protocols every member supports, who is fenced)
and the means to answer a member's blocked JoinGroup/SyncGroup and stop its timers; the
transitions live in ``membership``. Timers go through a small ``Clock`` so tests can drive
every timeout with a fake one.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sparklog.broker.group.records import MemberInfo, OffsetAndMetadata
from sparklog.protocol.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class LoopClock:
    """Wall-clock timestamps (they go into commit records) and the running loop's timers."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, callback)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# --------------------------------------------------------------------------- results


@dataclass
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinResult:
    error: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: list[JoinMember] = field(default_factory=list)


@dataclass
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupDescription:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]


# --------------------------------------------------------------------------- group model


@dataclass(eq=False)
class Member(MemberInfo):
    """A member the coordinator serves: ``MemberInfo`` with the protocols it offers, its
    assignment, and its blocked JoinGroup/SyncGroup and session timer (equal only to
    itself)."""

    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    session_timer: TimerHandle | None = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def finish_join(self, result: JoinResult) -> None:
        """Answer the JoinGroup this member is blocked in, if any."""
        if self.join_future is not None and not self.join_future.done():
            self.join_future.set_result(result)

    def finish_sync(self, result: SyncResult) -> None:
        """Answer the SyncGroup this member is blocked in, if any."""
        if self.sync_future is not None and not self.sync_future.done():
            self.sync_future.set_result(result)

    def release(self, error: ErrorCode) -> None:
        """The member leaves this coordinator's hands: its session timer stops and a
        JoinGroup or SyncGroup it is blocked in is answered with ``error``."""
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None
        self.finish_join(JoinResult(error, member_id=self.member_id))
        self.finish_sync(SyncResult(error))

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: dict[str, TimerHandle | None] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # TxnOffsetCommit offsets not yet committed: producer id -> offsets (KIP-98)
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(
        default_factory=dict)
    state_timestamp_ms: int | None = None
    join_timer: TimerHandle | None = None
    sync_timer: TimerHandle | None = None
    initial_join: bool = False
    new_member_added: bool = False
    initial_remaining_ms: int = 0

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return (not self.pending_members
                and all(m.awaiting_join for m in self.members.values()))

    def candidate_protocols(self) -> list[str]:
        members = list(self.members.values())
        if not members:
            return []
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return [p for p in members[0].protocol_names() if p in common]

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]],
                           *, excluding: str | None = None) -> bool:
        names = [n for n, _ in protocols]
        others = [m for mid, m in self.members.items() if mid != excluding]
        if not others:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return any(all(n in m.protocol_names() for m in others) for n in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise RuntimeError(f"group {self.group_id}: no protocol common to all members")
        votes: Counter[str] = Counter()
        for m in self.members.values():
            votes[next(p for p in m.protocol_names() if p in candidates)] += 1
        best = max(votes.values())
        # Ties: the candidate order (first member's preference) decides, deterministically.
        return next(p for p in candidates if votes.get(p, 0) == best)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def cancel_timers(self) -> None:
        """The group's own timers (rebalance, sync, pending members); not the sessions."""
        for handle in (self.join_timer, self.sync_timer, *self.pending_members.values()):
            if handle is not None:
                handle.cancel()
