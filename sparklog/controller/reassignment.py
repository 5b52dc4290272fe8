"""Partition reassignment (KIP-455, as Kafka's KRaft controller does it), one partition at
a time; the controller commits what these functions return.

A reassignment to target replicas T of a partition on replicas R:
1. start: the partition record lists T then R - T as its replicas, with
   ``adding_replicas`` = T - R and ``removing_replicas`` = R - T; the leader and ISR stay.
   Brokers in ``adding_replicas`` become followers and catch up;
2. the leader adds them to the ISR as they catch up (AlterPartition);
3. complete, as soon as every target replica is in the ISR: replicas = T, the ISR keeps
   only target replicas, and if the leader is being removed the first live target ISR
   member leads (leader epoch + 1). Removed replicas drop their copies.
Cancelling (replicas null) goes back to R: the adding replicas leave replicas and ISR.
A new target for a partition already being reassigned starts over from its original R.
Every change bumps the partition epoch.

Invariants: the original replicas stay in ``replicas`` until the reassignment completes,
so no acknowledged record loses a copy before its new copies are in sync; the ISR never
holds a broker that is not a replica and never becomes empty.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sparklog.broker.metadata_cache import PartitionInfo
from sparklog.controller.election import NO_LEADER

__all__ = ["cancel", "complete", "start"]


def _original(p: PartitionInfo) -> list[int]:
    return [r for r in p.replicas if r not in p.adding_replicas]


def _with(p: PartitionInfo, replicas: list[int], adding: list[int], removing: list[int],
          live: Collection[int]) -> PartitionInfo:
    """``p`` on ``replicas``: the ISR restricted to them (kept whole if that would empty
    it: the partition then waits, leaderless, for a member) and a new leader when the old
    one is no longer a replica."""
    isr = [r for r in p.isr if r in replicas] or list(p.isr)
    leader = p.leader
    if leader not in replicas:
        leader = next((r for r in replicas if r in isr and r in live), NO_LEADER)
    return PartitionInfo(p.topic, p.partition, replicas, isr, leader,
                         p.leader_epoch + (leader != p.leader), p.partition_epoch + 1,
                         adding, removing)


def start(p: PartitionInfo, target: Sequence[int], live: Collection[int]) -> PartitionInfo:
    """The partition moving to ``target`` (completed at once when ``target`` is already
    in sync)."""
    original = _original(p)
    target = list(target)
    removing = [r for r in original if r not in target]
    moving = _with(p, target + removing, [r for r in target if r not in original], removing,
                   live)
    return complete(moving, live) or moving


def cancel(p: PartitionInfo, live: Collection[int]) -> PartitionInfo:
    """Back to the replicas the partition had before its reassignment."""
    return _with(p, _original(p), [], [], live)


def complete(p: PartitionInfo, live: Collection[int]) -> PartitionInfo | None:
    """The finished reassignment once every target replica is in the ISR; None while it
    is not (or there is none)."""
    if not (p.adding_replicas or p.removing_replicas):
        return None
    target = p.target_replicas
    if any(r not in p.isr for r in target):
        return None
    return _with(p, target, [], [], live)
