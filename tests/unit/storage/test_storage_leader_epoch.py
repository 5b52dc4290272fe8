"""Leader-epoch cache and KIP-101 truncation, on two real logs (leader and follower)."""

from __future__ import annotations

import pytest

from sparklog.protocol.batch_header import iter_batch_views
from sparklog.storage import PartitionLog
from sparklog.storage.errors import UnexpectedAppendOffsetError
from sparklog.storage.leader_epoch import LeaderEpochCache
from tests.helpers.batches import make_batch, read_all, read_records


def _replicate(leader: PartitionLog, follower: PartitionLog) -> None:
    """One fetch round: the follower copies what it lacks, as a replica fetcher does."""
    if follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, 1 << 20).read_bytes()
        follower.append_as_follower(data)


def _catch_up_after_leader_change(follower: PartitionLog, leader: PartitionLog) -> None:
    """KIP-101: ask the leader for the end of the follower's latest epoch, truncate there."""
    epoch, end = leader.end_offset_for_epoch(follower.latest_epoch)
    follower.truncate_to(follower.truncation_offset_for(epoch, end))
    _replicate(leader, follower)


def _values(log):
    return [r.value for r in read_records(log)]


def test_cache_semantics(tmp_path):
    c = LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint"))
    assert c.end_offset_for(0, 10) == (-1, -1)
    c.assign(0, 0)
    c.assign(2, 10)
    c.assign(4, 30)
    assert c.end_offset_for(0, 50) == (0, 10)
    assert c.end_offset_for(1, 50) == (0, 10)  # unknown epoch: largest epoch below it
    assert c.end_offset_for(3, 50) == (2, 30)
    assert c.end_offset_for(4, 50) == (4, 50)
    assert c.end_offset_for(5, 50) == (-1, -1)
    assert c.epoch_for_offset(29) == 2
    c.truncate_from_end(30)
    assert c.entries() == [(0, 0), (2, 10)]
    c.truncate_from_start(15)
    assert c.entries() == [(2, 15)]
    assert LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint")).entries() == [(2, 15)]
    # a lower epoch at a later offset removes the non-monotonic tail
    c.assign(5, 40)
    c.assign(3, 20)
    assert c.entries() == [(2, 15), (3, 20)]


def test_kip101_scenario1_no_loss_of_acknowledged_data(tmp_path):
    """Scenario 1 (HW truncation loses data): B (follower) has m1,m2 but its HW is still 1
    when it restarts. Truncating to the HW would drop m2, which A acknowledged; then A dies,
    B leads, and m2 is gone. With epochs B keeps m2."""
    a = PartitionLog(str(tmp_path / "a" / "t-0"))
    b = PartitionLog(str(tmp_path / "b" / "t-0"))
    a.append_as_leader(make_batch(1, values=[b"m1"]), 0)
    a.append_as_leader(make_batch(1, values=[b"m2"]), 0)
    _replicate(a, b)
    a.update_high_watermark(2)
    b.update_high_watermark(1)  # B has not learned the new HW yet
    # B restarts and asks A (still leader, epoch 0) for the end of its latest epoch
    epoch, end = a.end_offset_for_epoch(b.latest_epoch)
    assert (epoch, end) == (0, 2)
    b.truncate_to(b.truncation_offset_for(epoch, end))
    assert _values(b) == [b"m1", b"m2"]
    # A dies; B becomes leader in epoch 1; no acknowledged message was lost
    b.assign_epoch_start_offset(1, b.log_end_offset)
    b.append_as_leader(make_batch(1, values=[b"m3"]), 1)
    assert _values(b) == [b"m1", b"m2", b"m3"]
    a.close()
    b.close()


def test_kip101_scenario2_replicas_do_not_diverge(tmp_path):
    """Scenario 2 (divergence): A has m1,m2 (m2 not replicated), B has m1. Both crash; B
    comes back first and leads epoch 1 taking m3 at offset 1. A returns as follower: with the
    HW rule it would keep m2 at offset 1 (divergent logs); with epochs it learns epoch 0 ended
    at offset 1 on the leader, truncates m2 and copies m3."""
    a = PartitionLog(str(tmp_path / "a" / "t-0"))
    b = PartitionLog(str(tmp_path / "b" / "t-0"))
    a.append_as_leader(make_batch(1, values=[b"m1"]), 0)
    _replicate(a, b)
    a.append_as_leader(make_batch(1, values=[b"m2"]), 0)  # never replicated
    a.update_high_watermark(2)
    b.update_high_watermark(1)
    b.assign_epoch_start_offset(1, b.log_end_offset)  # B leads epoch 1 from offset 1
    b.append_as_leader(make_batch(1, values=[b"m3"]), 1)
    assert a.latest_epoch == 0
    epoch, end = b.end_offset_for_epoch(a.latest_epoch)
    assert (epoch, end) == (0, 1)
    _catch_up_after_leader_change(a, b)
    assert _values(a) == _values(b) == [b"m1", b"m3"]
    assert a.leader_epoch_cache.entries() == b.leader_epoch_cache.entries() == [(0, 0), (1, 1)]
    # stamped leader epochs on disk follow the leaders that wrote them
    assert [v.partition_leader_epoch for v in iter_batch_views(a.read(0, 1 << 20).read_bytes())] == [0, 1]
    a.close()
    b.close()


def test_follower_with_unknown_epoch_truncates_to_leader_answer(tmp_path):
    """The follower's latest epoch (2) is unknown to the new leader, which answers with its
    largest epoch below it (1) and that epoch's end; the follower truncates there."""
    leader = PartitionLog(str(tmp_path / "l" / "t-0"))
    follower = PartitionLog(str(tmp_path / "f" / "t-0"))
    for epoch, vals in ((0, [b"a", b"b"]), (1, [b"c"])):
        leader.assign_epoch_start_offset(epoch, leader.log_end_offset)
        for v in vals:
            leader.append_as_leader(make_batch(1, values=[v]), epoch)
    _replicate(leader, follower)
    # follower alone wrote in epoch 2 (it was leader briefly, never replicated)
    follower.assign_epoch_start_offset(2, follower.log_end_offset)
    follower.append_as_leader(make_batch(1, values=[b"x"]), 2)
    leader.assign_epoch_start_offset(3, leader.log_end_offset)
    leader.append_as_leader(make_batch(1, values=[b"d"]), 3)
    epoch, end = leader.end_offset_for_epoch(follower.latest_epoch)
    assert (epoch, end) == (1, 3)
    follower.truncate_to(follower.truncation_offset_for(epoch, end))
    _replicate(leader, follower)
    assert _values(follower) == _values(leader) == [b"a", b"b", b"c", b"d"]
    leader.close()
    follower.close()


def test_truncate_fully_and_start_at(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    for _ in range(3):
        log.append_as_leader(make_batch(2), 0)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    batch = bytearray(make_batch(2))
    batch[0:8] = (100).to_bytes(8, "big")
    info = log.append_as_follower(bytes(batch))
    assert (info.first_offset, info.last_offset) == (100, 101)
    assert read_all(log)[0].base_offset == 100
    log.close()


def test_a_follower_keeps_producer_state_and_dedupes_once_it_leads(tmp_path):
    """Idempotence across a failover: the follower's producer state is rebuilt from the
    replicated batches, so a producer retrying its last batch against the new leader gets
    the original offsets back; what a truncation removes is forgotten with it."""
    leader = PartitionLog(str(tmp_path / "l" / "t-0"))
    follower = PartitionLog(str(tmp_path / "f" / "t-0"))
    first = make_batch(2, producer_id=7, producer_epoch=0, base_sequence=0)
    retry = make_batch(3, producer_id=7, producer_epoch=0, base_sequence=2)
    leader.append_as_leader(first, 0)
    leader.append_as_leader(retry, 0)
    _replicate(leader, follower)
    assert follower.producer_state.producers[7].last_seq == 4
    follower.assign_epoch_start_offset(1, follower.log_end_offset)  # the follower leads now
    again = follower.append_as_leader(retry, 1)
    assert again.duplicate and (again.first_offset, again.last_offset) == (2, 4)
    assert follower.log_end_offset == 5
    follower.truncate_to(2)  # the retried batch was never committed after all
    assert follower.append_as_leader(retry, 1).first_offset == 2
    leader.close()
    follower.close()


def test_an_empty_follower_whose_start_lies_inside_the_first_batch_starts_at_its_base(tmp_path):
    """The leader's DeleteRecords moved its start (45) into a batch (20..49): a follower
    starting over at 45 receives that whole batch and takes it from its base, as Kafka's
    followers do; a batch below a non-empty log's end is still refused."""
    leader = PartitionLog(str(tmp_path / "l" / "t-0"))
    follower = PartitionLog(str(tmp_path / "f" / "t-0"))
    leader.append_as_leader(make_batch(20), 0)
    leader.append_as_leader(make_batch(30), 0)
    leader.update_high_watermark(50)
    leader.delete_records(45)
    follower.truncate_fully_and_start_at(45)
    data = leader.read(45, 1 << 20).read_bytes()
    info = follower.append_as_follower(data)
    assert (info.first_offset, follower.log_start_offset, follower.log_end_offset) == (20, 20, 50)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    leader.close()
    follower.close()
