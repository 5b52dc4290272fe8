"""Leader election and ISR changes when brokers come and go (Kafka KRaft's rules).

Pure functions over one ``PartitionInfo``: the controller calls them for every partition a
fenced, shutting-down or returning broker touches and commits the records they return.

Invariants (Kafka's):
- the ISR never becomes empty: when its last member goes, it stays in the ISR and the
  partition has no leader (-1) until a member returns, so whoever leads next has every
  acknowledged record;
- a clean election picks the first replica (preferred order) that is in the ISR and live;
  a preferred election (on demand, ElectLeaders, or ``auto.leader.rebalance.enable``)
  moves leadership to the first replica only when it is live and in the ISR;
- an unclean election (only when ``unclean.leader.election.enable``) picks the first live
  replica outside the ISR, which then is the whole ISR: records only the old ISR had are
  lost, which is why the controller logs a warning;
- every leadership change bumps the leader epoch by one, every change of the record bumps
  the partition epoch by one; an epoch is never reused.
"""

from __future__ import annotations

from collections.abc import Collection

from sparklog.broker.metadata_cache import PartitionInfo
from sparklog.protocol.errors import ErrorCode

__all__ = ["NO_LEADER", "PREFERRED_ELECTION", "UNCLEAN_ELECTION", "changed", "preferred_election", "unclean_election", "with_returning_broker",
           "without_broker"]

NO_LEADER = -1
# ElectLeaders' election types
PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1


def changed(p: PartitionInfo, leader: int, isr: list[int]) -> PartitionInfo | None:
    """``p`` with this leader and ISR and its epochs bumped; None when nothing changes."""
    if leader == p.leader and isr == p.isr:
        return None
    return PartitionInfo(p.topic, p.partition, list(p.replicas), isr, leader,
                         p.leader_epoch + (leader != p.leader), p.partition_epoch + 1,
                         list(p.adding_replicas), list(p.removing_replicas))


def without_broker(p: PartitionInfo, node_id: int, live: Collection[int], *,
                   unclean: bool) -> tuple[PartitionInfo | None, bool]:
    """``node_id`` is fenced or shutting down: it leaves the ISR (unless it is the last
    member) and, if it led, the next live ISR member leads. Returns (the new partition or
    None, whether the election was unclean)."""
    if node_id not in p.isr and p.leader != node_id:
        return None, False
    isr = [r for r in p.isr if r != node_id] or list(p.isr)
    leader = p.leader
    was_unclean = False
    if leader in (node_id, NO_LEADER):
        leader = next((r for r in p.replicas if r in isr and r in live and r != node_id),
                      NO_LEADER)
        if leader == NO_LEADER and unclean:
            leader = next((r for r in p.replicas if r in live and r != node_id), NO_LEADER)
            if leader != NO_LEADER:
                isr, was_unclean = [leader], True
    return changed(p, leader, isr), was_unclean


def with_returning_broker(p: PartitionInfo, node_id: int, *,
                          unclean: bool) -> tuple[PartitionInfo | None, bool]:
    """``node_id`` is live again: a leaderless partition whose ISR holds it elects it (or,
    when ``unclean``, one it is a replica of, making it the whole ISR)."""
    if p.leader != NO_LEADER or node_id not in p.replicas:
        return None, False
    if node_id in p.isr:
        return changed(p, node_id, list(p.isr)), False
    if unclean:
        return changed(p, node_id, [node_id]), True
    return None, False


def preferred_election(p: PartitionInfo, live: Collection[int]) -> PartitionInfo | ErrorCode:
    """Leadership back to the preferred (first) replica when it is live and in the ISR."""
    preferred = p.replicas[0]
    if p.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED
    if preferred not in live or preferred not in p.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    new = changed(p, preferred, list(p.isr))
    assert new is not None
    return new


def unclean_election(p: PartitionInfo, live: Collection[int]) -> tuple[PartitionInfo | ErrorCode,
                                                                       bool]:
    """A leaderless partition elects a live ISR member, else (unclean: the second value
    says so) the first live replica, which becomes the whole ISR."""
    if p.leader != NO_LEADER:
        return ErrorCode.ELECTION_NOT_NEEDED, False
    for candidates, unclean in ((p.isr, False), (p.replicas, True)):
        leader = next((r for r in p.replicas if r in candidates and r in live), NO_LEADER)
        if leader != NO_LEADER:
            new = changed(p, leader, [leader] if unclean else list(p.isr))
            assert new is not None
            return new, unclean
    return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, False
