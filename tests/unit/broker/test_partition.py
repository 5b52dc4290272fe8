"""Partition (broker.partition) over a real log: roles from the controller's records, the
high watermark over the (maximal) ISR, follower catch-up times, ISR membership, acks=all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparklog.broker.partition import Partition, Transition
from sparklog.protocol.errors import ErrorCode, FencedLeaderEpochError, UnknownLeaderEpochError
from sparklog.storage import PartitionLog
from sparklog.storage.log_config import LogConfig
from tests.helpers.batches import make_batch

ME = 1


@pytest.fixture
def p(tmp_path: Path) -> Iterator[Partition]:
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(min_insync_replicas=2))
    yield Partition("t", 0, bytes(16), plog, ME)
    plog.close()


def _write(p: Partition, n: int = 1) -> int:
    """Append n records as leader; the last offset."""
    return p.log.append_as_leader(make_batch(n), p.leader_epoch).last_offset


def test_a_lone_replica_hw_follows_the_leo(p: Partition) -> None:
    assert p.apply(ME, 0, 0, [ME], [ME], 0) is Transition.LEADER
    _write(p, 3)
    assert p.maybe_advance_hw() and p.log.high_watermark == 3


def test_the_hw_is_the_smallest_leo_of_the_isr_and_never_goes_back(p: Partition) -> None:
    p.apply(ME, 0, 0, [ME, 2, 3], [ME, 2, 3], 0)
    _write(p, 5)
    assert not p.maybe_advance_hw()  # the followers' LEOs are not known yet
    p.follower_fetched(2, 4, 10)
    assert p.log.high_watermark == 0  # 3 is still unknown
    assert p.follower_fetched(3, 2, 10) and p.log.high_watermark == 2
    p.follower_fetched(3, 5, 20)
    assert p.log.high_watermark == 4
    # the ISR without 2: the HW may move to the LEO of the rest, and never back
    p.apply(ME, 0, 1, [ME, 2, 3], [ME, 3], 30)
    assert p.log.high_watermark == 5
    p.apply(ME, 0, 2, [ME, 2, 3], [ME, 2, 3], 40)
    assert p.log.high_watermark == 5
    p.follower_fetched(9, 0, 50)  # not a replica: ignored
    assert p.log.high_watermark == 5


def test_an_isr_change_in_flight_holds_the_hw_to_both_isrs(p: Partition) -> None:
    p.apply(ME, 0, 0, [ME, 2, 3], [ME, 2], 0)
    _write(p, 4)
    p.follower_fetched(3, 1, 0)
    p.pending_isr = [ME, 2, 3]  # 3 is being added
    p.follower_fetched(2, 4, 0)
    assert p.log.high_watermark == 1
    p.pending_isr = None
    assert p.maybe_advance_hw() and p.log.high_watermark == 4


def test_caught_up_times_follow_kafkas_rule(p: Partition) -> None:
    p.apply(ME, 0, 0, [ME, 2], [ME, 2], 1000)
    _write(p, 2)
    p.follower_fetched(2, 0, 2000)  # behind the LEO (2): not caught up now
    assert p.followers[2].last_caught_up_ms == 1000
    _write(p)  # LEO 3
    p.follower_fetched(2, 2, 3000)  # reached the LEO of its previous fetch: caught up then
    assert p.followers[2].last_caught_up_ms == 2000
    p.follower_fetched(2, 3, 4000)  # at the LEO
    assert p.followers[2].last_caught_up_ms == 4000
    assert p.out_of_sync_replicas(4000 + 30_000, 30_000) == []
    assert p.out_of_sync_replicas(4001 + 30_000, 30_000) == [2]


def test_a_follower_joins_the_isr_at_the_hw_and_the_epoch_start(p: Partition) -> None:
    _write(p, 2)  # written before this broker leads epoch 3: the epoch starts at 2
    p.apply(ME, 3, 0, [ME, 2], [ME], 0)
    assert p.leader_epoch_start_offset == 2 and p.log.latest_epoch == 3
    p.follower_fetched(2, 1, 0)
    assert not p.can_join_isr(2)
    p.follower_fetched(2, 2, 0)
    assert p.can_join_isr(2)
    assert not p.can_join_isr(ME) and not p.can_join_isr(7)


def test_roles_epochs_and_stale_records(p: Partition) -> None:
    assert p.apply(2, 4, 0, [2, ME], [2, ME], 0) is Transition.FOLLOWER
    assert not p.is_leader and p.leader_id == 2 and p.followers == {}
    assert p.apply(2, 4, 1, [2, ME], [2], 0) is Transition.UNCHANGED
    assert p.apply(2, 3, 9, [2, ME], [2, ME], 0) is Transition.STALE
    assert p.apply(2, 4, 0, [2, ME], [2, ME], 0) is Transition.STALE
    assert p.isr == [2]
    with pytest.raises(FencedLeaderEpochError):
        p.check_epoch(3)
    with pytest.raises(UnknownLeaderEpochError):
        p.check_epoch(5)
    p.check_epoch(4)
    p.check_epoch(-1)
    assert p.apply(ME, 5, 2, [2, ME], [2, ME], 0) is Transition.LEADER
    assert p.is_leader and set(p.followers) == {2}


def test_acks_all_state(p: Partition) -> None:
    p.apply(ME, 0, 0, [ME, 2, 3], [ME, 2, 3], 0)
    last = _write(p)
    assert p.acks_all_state(last, 0, 2) is None  # waiting for the ISR
    p.follower_fetched(2, last + 1, 0)
    p.follower_fetched(3, last + 1, 0)
    assert p.acks_all_state(last, 0, 2) == ErrorCode.NONE
    # the ISR shrank below min.insync.replicas while it waited
    p.apply(ME, 0, 1, [ME, 2, 3], [ME], 0)
    assert p.acks_all_state(last, 0, 2) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    # appended under another epoch, or this broker no longer leads: never acknowledged
    assert p.acks_all_state(last, 7, 2) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    p.apply(2, 1, 2, [ME, 2, 3], [2, 3], 0)
    assert p.acks_all_state(last, 0, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
