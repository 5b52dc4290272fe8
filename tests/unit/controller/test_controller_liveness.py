"""Controller liveness: registration epochs, sessions, fencing with leader election from the
ISR, unclean election only when enabled, controlled shutdown, placement over live brokers."""

from __future__ import annotations

import logging

import pytest

from sparklog.broker.metadata_cache import MetadataCache
from sparklog.controller import Controller
from sparklog.protocol.errors import (
    ErrorCode,
    InvalidReplicationFactorError,
    StaleBrokerEpochError,
)


def _cluster(tmp_path, brokers=(1, 2, 3), **kw) -> tuple[Controller, MetadataCache, dict[int, int]]:
    c = Controller(str(tmp_path), 0, embedded=False, session_timeout_ms=1000, **kw)
    c.open()
    cache = MetadataCache()
    cache.load(c.metadata_records())
    c.add_listener(cache.apply)
    epochs = {n: c.register_broker(n, "127.0.0.1", 9000 + n) for n in brokers}
    for n, e in epochs.items():
        c.heartbeat(n, e, now=0.0)
    return c, cache, epochs


def test_epochs_grow_and_survive_a_restart(tmp_path):
    c, _, epochs = _cluster(tmp_path)
    assert sorted(epochs.values()) == [1, 2, 3]
    again = c.register_broker(2, "127.0.0.1", 9002)
    assert again == 4
    with pytest.raises(StaleBrokerEpochError):
        c.heartbeat(2, epochs[2], now=0.1)  # the earlier life of broker 2
    c.close()
    c2 = Controller(str(tmp_path), 0, embedded=False, session_timeout_ms=1000)
    c2.open()
    assert c2.image.brokers[2].epoch == 4
    # liveness is durable: the brokers stay live for a session, then those silent are fenced
    assert c2.live_brokers == {1, 2, 3}
    c2.expect_heartbeats(now=0.0)
    assert c2.heartbeat(2, 4, now=0.5) is False
    assert c2.check_sessions(now=1.2) == [1, 3] and c2.live_brokers == {2}
    assert c2.register_broker(5, "h", 1) == 5
    c2.close()


def test_placement_round_robin_spreads_leaders(tmp_path):
    c, _, _ = _cluster(tmp_path)
    t = c.create_topic("t", 6, 3)
    assert [p.replicas for p in t.partitions.values()] == [
        [1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3], [2, 3, 1], [3, 1, 2]]
    leaders = [c.create_topic(f"one{i}", 1, 1).partitions[0].leader for i in range(3)]
    assert sorted(leaders) == [1, 2, 3]  # single-partition topics do not all land on 1
    with pytest.raises(InvalidReplicationFactorError):
        c.create_topic("big", 1, 4)
    c.close()


def test_no_live_broker_no_placement_for_a_controller_process(tmp_path):
    c = Controller(str(tmp_path), 0, embedded=False)
    c.open()
    with pytest.raises(InvalidReplicationFactorError):
        c.create_topic("t", 1, 1)
    c.close()


def test_session_expiry_fences_moves_leaders_and_shrinks_isr(tmp_path):
    c, cache, epochs = _cluster(tmp_path)
    c.create_topic("t", 3, 3)
    for n in (1, 3):
        c.heartbeat(n, epochs[n], now=0.9)
    assert c.check_sessions(now=1.5) == [2]
    assert cache.live_brokers == {1, 3} and c.live_brokers == {1, 3}
    parts = c.image.topics["t"].partitions
    # partition 1 was led by 2: the next ISR member in replica order leads, epoch + 1
    assert (parts[1].leader, parts[1].isr, parts[1].leader_epoch, parts[1].partition_epoch) \
        == (3, [3, 1], 1, 1)
    # partition 0 keeps its leader; 2 leaves the ISR, the leader epoch stays
    assert (parts[0].leader, parts[0].isr, parts[0].leader_epoch, parts[0].partition_epoch) \
        == (1, [1, 3], 0, 1)
    assert cache.topic("t").partitions[1] == parts[1]
    # the fenced broker heartbeats again (it was stalled, not dead): live again, same epoch
    assert c.heartbeat(2, epochs[2], now=2.0) is False
    assert 2 in cache.live_brokers
    assert c.image.topics["t"].partitions[1].leader == 3  # joining the ISR is AlterPartition's
    c.close()


def test_last_isr_member_stays_and_the_partition_waits_for_it(tmp_path):
    c, cache, epochs = _cluster(tmp_path, brokers=(1, 2))
    c.create_topic("t", 1, 2)  # replicas [1, 2]
    c.fence_broker(2, "test")
    c.fence_broker(1, "test")
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.leader_epoch) == (-1, [1], 1)
    # 2 comes back: not in the ISR, no unclean election by default
    c.heartbeat(2, epochs[2], now=0.5)
    assert c.image.topics["t"].partitions[0].leader == -1
    # 1 re-registers (a restart with the same node.id): it is in the ISR, it leads
    c.register_broker(1, "127.0.0.1", 9001)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.leader_epoch) == (1, [1], 2)
    assert cache.topic("t").partitions[0] == p
    c.close()


def test_unclean_election_only_when_enabled_and_logged(tmp_path, caplog):
    c, _, epochs = _cluster(tmp_path, brokers=(1, 2))
    c.create_topic("t", 1, 2, {"unclean.leader.election.enable": "true"})
    c.create_topic("safe", 1, 2)
    c.fence_broker(2, "test")
    c.fence_broker(1, "test")
    with caplog.at_level(logging.WARNING, logger="sparklog.controller.controller"):
        c.heartbeat(2, epochs[2], now=0.5)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr) == (2, [2])
    assert c.image.topics["safe"].partitions[0].leader == -1
    assert any("unclean leader election for t-0" in r.getMessage() for r in caplog.records)
    # the cluster-wide dynamic default enables it for topics without an override: the next
    # election of "safe" (leaderless, its ISR [1] down) takes the live broker 2
    assert c.image.topics["safe"].partitions[0].leader == -1
    c.set_broker_configs("", {"unclean.leader.election.enable": "true"})
    c.fence_broker(1, "test")
    assert (c.image.topics["safe"].partitions[0].leader,
            c.image.topics["safe"].partitions[0].isr) == (2, [2])
    c.close()


def test_controlled_shutdown_moves_leaderships_first(tmp_path):
    c, cache, epochs = _cluster(tmp_path)
    c.create_topic("t", 3, 2)
    led_by_1 = [p.partition for p in c.image.topics["t"].partitions.values() if p.leader == 1]
    assert led_by_1
    assert c.heartbeat(1, epochs[1], now=0.2, want_shut_down=True) is True
    for p in c.image.topics["t"].partitions.values():
        assert p.leader != 1 and 1 not in p.isr
    assert 1 not in cache.live_brokers
    assert c.check_sessions(now=100.0) == [2, 3]  # no heartbeat session left for 1
    c.close()


def test_preferred_election_on_demand_and_by_rebalance(tmp_path):
    c, cache, epochs = _cluster(tmp_path)
    c.create_topic("t", 3, 3)  # preferred leaders 1, 2, 3
    c.fence_broker(1, "test")
    assert c.image.topics["t"].partitions[0].leader == 2
    c.heartbeat(1, epochs[1], now=0.5)  # back, but not in the ISR yet
    res = c.elect_leaders(0, {"t": [0, 1, 9]})
    assert res[("t", 0)].error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert res[("t", 1)].error_code == ErrorCode.ELECTION_NOT_NEEDED
    assert res[("t", 9)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # the ISR grows back (what a leader's AlterPartition does); then 1 may lead again
    p = c.image.topics["t"].partitions[0]
    c._commit([{**p.to_record(), "isr": [2, 3, 1], "partition_epoch": p.partition_epoch + 1}])
    assert c.elect_leaders(0, None) == {("t", 0): None}  # all partitions: only the changed
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.leader_epoch) == (1, 2) and cache.topic("t").partitions[0] == p

    c.fence_broker(3, "test")
    c.heartbeat(3, epochs[3], now=0.6)
    p = c.image.topics["t"].partitions[2]
    c._commit([{**p.to_record(), "isr": [1, 2, 3], "partition_epoch": p.partition_epoch + 1}])
    assert c.rebalance_leaders(imbalance_percentage=100) == 0  # 1 of 1 off is not > 100 %
    assert c.rebalance_leaders(imbalance_percentage=10) == 1
    assert [p.leader for p in c.image.topics["t"].partitions.values()] == [1, 2, 3]
    c.close()


def test_unclean_election_on_demand(tmp_path, caplog):
    c, _, epochs = _cluster(tmp_path, brokers=(1, 2))
    c.create_topic("t", 1, 2)
    c.fence_broker(2, "test")
    c.fence_broker(1, "test")
    assert c.elect_leaders(1, {"t": [0]})[("t", 0)].error_code \
        == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    c.heartbeat(2, epochs[2], now=0.5)
    with caplog.at_level(logging.WARNING, logger="sparklog.controller.controller"):
        assert c.elect_leaders(1, {"t": [0]}) == {("t", 0): None}
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr) == (2, [2])
    assert "unclean leader election for t-0" in caplog.text
    assert c.elect_leaders(1, {"t": [0]})[("t", 0)].error_code == ErrorCode.ELECTION_NOT_NEEDED
    c.close()
