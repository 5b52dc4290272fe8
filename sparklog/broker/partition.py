"""One replica of a partition hosted by this broker: its role, epochs, ISR, what the leader
knows of each follower, and the high-watermark rules of Kafka's replication protocol.

The controller decides who leads, the replicas, the ISR and both epochs; ``apply`` takes a
partition record as it is published (in commit order) and moves this replica to the role it
names. As leader, this replica tracks each follower's log end offset (LEO) from the offsets
their Fetch requests ask for, and when each was last caught up; the replica manager turns
that into ISR changes (AlterPartition) and the produce handler into acks=all answers.

Invariants (Kafka's, KIP-101/279 and KIP-841):

* HW <= the LEO of every ISR member. On a leader the HW is the smallest LEO over the
  *maximal* ISR (the committed ISR plus the members of an AlterPartition in flight); a
  member whose LEO is not known yet (this broker just became leader) holds the HW where it
  is. A single-replica partition's HW follows the LEO at once.
* The HW never goes back on a leader: ``maybe_advance_hw`` only raises it. (A follower
  takes the leader's HW, capped by its own LEO, and loses what it truncates.)
* An acknowledged acks=all record is on every ISR member: the produce is answered once the
  HW passed its last offset *under the leader epoch it was appended in* (``acks_all_state``),
  and the HW passes an offset only when every maximal-ISR member reported a LEO beyond it.
  A replica that leaves the ISR does so through the controller before the HW may move
  without it.
* A leader epoch is never reused: epochs come from the controller, which bumps the epoch on
  every leadership change; ``apply`` ignores records older than what it holds, and a new
  leader writes its epoch's start offset (its LEO) into the leader-epoch cache before it
  takes a write, so followers can find where their logs diverge.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from enum import Enum

from sparklog.broker.delayed import Waiters
from sparklog.protocol.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    UnknownLeaderEpochError,
)
from sparklog.storage.partition_log import PartitionLog

__all__ = ["FollowerState", "Partition", "Transition"]

UNKNOWN_OFFSET = -1


class Transition(Enum):
    """What ``Partition.apply`` changed."""

    STALE = "stale"  # older than what this replica holds: ignored
    UNCHANGED = "unchanged"  # same leader and leader epoch (ISR or replicas may differ)
    LEADER = "leader"  # became leader, or leads a new epoch
    FOLLOWER = "follower"  # follows a new leader or a new epoch


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from its Fetch requests."""

    leo: int = UNKNOWN_OFFSET
    # last time the follower had fetched up to the leader's LEO (ms); Kafka's rule: a fetch
    # at the leader's current LEO catches up now, one at the LEO of the previous fetch
    # catches up as of that fetch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET

    def fetched(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms


@dataclass(slots=True, eq=False, repr=False)
class Partition:
    """One hosted replica: its log, role, epochs, ISR, followers, and who waits on it."""

    topic: str
    partition: int
    topic_id: bytes
    log: PartitionLog
    node_id: int
    _: KW_ONLY
    internal: bool = False
    is_leader: bool = field(default=False, init=False)
    leader_id: int = field(default=-1, init=False)
    leader_epoch: int = field(default=-1, init=False)  # no record applied yet
    partition_epoch: int = field(default=-1, init=False)
    replicas: list[int] = field(default_factory=list, init=False)
    isr: list[int] = field(default_factory=list, init=False)
    # the ISR of an AlterPartition in flight (leader only), None when there is none
    pending_isr: list[int] | None = field(default=None, init=False)
    followers: dict[int, FollowerState] = field(default_factory=dict, init=False)
    leader_epoch_start_offset: int = field(default=UNKNOWN_OFFSET, init=False)
    waiters: Waiters = field(default_factory=Waiters, init=False)
    # KIP-890's verification guards (leader only): producer id -> the guard its
    # transactional batches hold while their coordinator is asked; a marker for the producer
    # (or a leadership change) ends it, so a batch verified before the marker and arriving
    # after it cannot open a transaction no coordinator knows (one that would hang the LSO)
    verification_guards: dict[int, object] = field(default_factory=dict, init=False)

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return (f"Partition({self.topic}-{self.partition}, {role}, epoch={self.leader_epoch}, "
                f"isr={self.isr})")

    # -- the controller's record ----------------------------------------------------------

    def apply(self, leader: int, leader_epoch: int, partition_epoch: int, replicas: list[int],
              isr: list[int], now_ms: int) -> Transition:
        """Take a published partition record. Followers that are in the ISR count as caught
        up as of ``now_ms`` when this replica becomes leader (they get a full lag window)."""
        if leader_epoch < self.leader_epoch or (
                leader_epoch == self.leader_epoch and partition_epoch < self.partition_epoch):
            return Transition.STALE
        new_leader = leader == self.node_id
        moved = leader_epoch != self.leader_epoch or new_leader != self.is_leader \
            or leader != self.leader_id
        self.leader_id, self.leader_epoch, self.partition_epoch = leader, leader_epoch, partition_epoch
        self.replicas, self.isr = list(replicas), list(isr)
        self.pending_isr = None
        self.is_leader = new_leader
        if moved:
            self.verification_guards.clear()  # markers may have come through another leader
        if not new_leader:
            self.followers = {}
            self.leader_epoch_start_offset = UNKNOWN_OFFSET
            self.waiters.wake()  # parked produces and fetches re-check the role
            return Transition.FOLLOWER if moved else Transition.UNCHANGED
        if moved:
            self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0)
                              for r in replicas if r != self.node_id}
            plog = self.log
            self.leader_epoch_start_offset = plog.log_end_offset
            if leader_epoch > plog.latest_epoch:
                # the new leader's epoch starts at its LEO (KIP-101), before any write
                plog.assign_epoch_start_offset(leader_epoch, plog.log_end_offset)
        else:
            old = self.followers
            self.followers = {r: old.get(r) or FollowerState(last_caught_up_ms=now_ms)
                              for r in replicas if r != self.node_id}
        self.maybe_advance_hw()
        self.waiters.wake()
        return Transition.LEADER if moved else Transition.UNCHANGED

    # -- leader: transactional batches being verified (KIP-890) ----------------------------

    def start_verification(self, producer_id: int) -> object:
        """The guard of ``producer_id``'s batches being verified now (shared by concurrent
        ones: they belong to the same transaction)."""
        return self.verification_guards.setdefault(producer_id, object())

    def verification_holds(self, producer_id: int, guard: object) -> bool:
        """No marker for the producer (nor a leadership change) came since ``guard``."""
        return self.verification_guards.get(producer_id) is guard

    def end_verification(self, producer_id: int) -> None:
        self.verification_guards.pop(producer_id, None)

    def check_epoch(self, current_leader_epoch: int) -> None:
        """A client's or replica's idea of the leader epoch against ours (-1: not given)."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic}-{self.partition}: epoch {current_leader_epoch} is older than "
                f"{self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.topic}-{self.partition}: epoch {current_leader_epoch} is newer than "
                f"{self.leader_epoch}")

    # -- leader: the high watermark ---------------------------------------------------------

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the HW must respect: the committed one plus an in-flight change's members."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return self.isr + [r for r in pending if r not in self.isr]

    def maybe_advance_hw(self) -> bool:
        """HW = smallest LEO over the maximal ISR; only ever raised. True when it moved."""
        plog = self.log
        hw = plog.log_end_offset
        for r in self.maximal_isr:
            if r == self.node_id:
                continue
            state = self.followers.get(r)
            if state is None or state.leo < 0:
                return False  # a member's LEO is unknown: the HW stays
            hw = min(hw, state.leo)
        if hw > plog.high_watermark:
            plog.update_high_watermark(hw)
            return True
        return False

    def follower_fetched(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower asked for ``fetch_offset`` (so has everything below it). Returns
        whether the HW moved. Fetches from non-replicas are ignored."""
        state = self.followers.get(replica_id)
        if state is None:
            return False
        state.fetched(fetch_offset, self.log.log_end_offset, now_ms)
        return self.maybe_advance_hw()

    # -- leader: ISR membership --------------------------------------------------------------

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers not caught up within ``max_lag_ms`` (they leave the ISR)."""
        out = []
        for r in self.isr:
            state = self.followers.get(r)
            if state is not None and now_ms - state.last_caught_up_ms > max_lag_ms:
                out.append(r)
        return out

    def can_join_isr(self, replica_id: int) -> bool:
        """A follower outside the ISR that reached the HW and this leader's epoch start."""
        state = self.followers.get(replica_id)
        return (state is not None and replica_id not in self.isr
                and state.leo >= self.log.high_watermark
                and state.leo >= self.leader_epoch_start_offset)

    def acks_all_state(self, last_offset: int, leader_epoch: int,
                       min_insync_replicas: int) -> ErrorCode | None:
        """Where an acks=all append (``last_offset``, appended in ``leader_epoch``) stands:
        None while it waits, NONE once every ISR member has it, or the error to answer."""
        if not self.is_leader or self.leader_epoch != leader_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER  # it may be truncated away
        if self.log.high_watermark <= last_offset:
            return None
        if len(self.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE
